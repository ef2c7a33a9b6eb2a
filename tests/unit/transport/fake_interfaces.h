// A getifaddrs-style interface list built by hand, and GIDs from address
// text, for the tests of what the transport reads from the interfaces
// (local_address_test.cc, link_mtu_test.cc).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <deque>
#include <string>

#include "transport/address.h"

namespace softrnic::transport {

inline Gid GidOf(const char* text) {
  Gid g;
  in_addr a4{};
  if (inet_pton(AF_INET, text, &a4) == 1) return Gid::FromIpv4(a4.s_addr);
  EXPECT_EQ(inet_pton(AF_INET6, text, g.raw.data()), 1) << text;
  return g;
}

// A getifaddrs-style chain built by hand.
class FakeInterfaces {
 public:
  FakeInterfaces& Add(const char* name, unsigned flags, const char* address, uint32_t scope = 0) {
    Entry& e = entries_.emplace_back();
    e.name = name;
    e.ifa.ifa_name = e.name.data();
    e.ifa.ifa_flags = flags;
    if (address != nullptr) {
      in_addr a4{};
      if (inet_pton(AF_INET, address, &a4) == 1) {
        e.sin.sin_family = AF_INET;
        e.sin.sin_addr = a4;
        e.ifa.ifa_addr = reinterpret_cast<sockaddr*>(&e.sin);
      } else {
        e.sin6.sin6_family = AF_INET6;
        EXPECT_EQ(inet_pton(AF_INET6, address, &e.sin6.sin6_addr), 1) << address;
        e.sin6.sin6_scope_id = scope;
        e.ifa.ifa_addr = reinterpret_cast<sockaddr*>(&e.sin6);
      }
    }
    return *this;
  }
  const ifaddrs* list() {
    for (size_t i = 0; i < entries_.size(); ++i)
      entries_[i].ifa.ifa_next = i + 1 < entries_.size() ? &entries_[i + 1].ifa : nullptr;
    return entries_.empty() ? nullptr : &entries_[0].ifa;
  }

 private:
  struct Entry {
    std::string name;
    ifaddrs ifa{};
    sockaddr_in sin{};
    sockaddr_in6 sin6{};
  };
  std::deque<Entry> entries_;  // stable addresses for the chain
};

inline constexpr unsigned kUp = IFF_UP;
inline constexpr unsigned kLoop = IFF_UP | IFF_LOOPBACK;

}  // namespace softrnic::transport
