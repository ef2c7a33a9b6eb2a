#include "engine/host_addresses.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>

namespace softrnic::engine {

bool IsHostAddress(const Gid& gid) {
  if (gid.IsV4Mapped()) {
    if (gid.raw[12] == 127) return true;
  } else {
    static constexpr uint8_t kLoopback6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (std::memcmp(gid.raw.data(), kLoopback6, 16) == 0) return true;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (const ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET && gid.IsV4Mapped()) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      found = std::memcmp(&sin->sin_addr, &gid.raw[12], 4) == 0;
    } else if (i->ifa_addr->sa_family == AF_INET6 && !gid.IsV4Mapped()) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      found = std::memcmp(&sin6->sin6_addr, gid.raw.data(), 16) == 0;
    }
  }
  freeifaddrs(list);
  return found;
}

}  // namespace softrnic::engine
