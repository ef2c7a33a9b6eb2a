#include "transport/local_address.h"

#include <arpa/inet.h>
#include <net/if.h>

#include <algorithm>
#include <cstring>

namespace softrnic::transport {

bool IsIpv6Loopback(const Gid& g) {
  static constexpr uint8_t kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return std::memcmp(g.raw.data(), kLoopback, 16) == 0;
}

namespace {

// What neither the automatic scheme nor an explicit bind may use as an
// IPv6 source: the wildcard, loopback (the per-process 127.x address plays
// that part), multicast, and the IPv4-mapped form (that address is bound
// as IPv4).
bool Ipv6Bindable(const Gid& g) {
  return !g.IsZero() && !IsIpv6Loopback(g) && g.raw[0] != 0xFF && !g.IsV4Mapped();
}

}  // namespace

bool IsIpv6LinkLocal(const Gid& gid) { return gid.raw[0] == 0xFE && (gid.raw[1] & 0xC0) == 0x80; }

std::vector<LocalAddress> HostAddressesFrom(const ifaddrs* list) {
  std::vector<LocalAddress> v4;
  std::vector<LocalAddress> v6;
  auto add = [](std::vector<LocalAddress>* to, LocalAddress a) {
    for (const LocalAddress& have : *to)
      if (have.gid == a.gid && have.scope_id == a.scope_id) return;
    to->push_back(std::move(a));
  };
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr) continue;
    if (!(ifa->ifa_flags & IFF_UP) || (ifa->ifa_flags & IFF_LOOPBACK)) continue;
    LocalAddress a;
    if (ifa->ifa_name != nullptr) a.ifname = ifa->ifa_name;
    if (ifa->ifa_addr->sa_family == AF_INET) {
      sockaddr_in sin;
      std::memcpy(&sin, ifa->ifa_addr, sizeof(sin));
      const uint32_t addr = sin.sin_addr.s_addr;
      if ((ntohl(addr) >> 24) == 127 || addr == 0) continue;
      a.gid = Gid::FromIpv4(addr);
      add(&v4, std::move(a));
    } else if (ifa->ifa_addr->sa_family == AF_INET6) {
      sockaddr_in6 sin6;
      std::memcpy(&sin6, ifa->ifa_addr, sizeof(sin6));
      std::memcpy(a.gid.raw.data(), &sin6.sin6_addr, 16);
      if (!Ipv6Bindable(a.gid)) continue;
      if (IsIpv6LinkLocal(a.gid)) {
        // getifaddrs fills the scope of a link-local address; the name is
        // the fallback.
        a.scope_id = sin6.sin6_scope_id;
        if (a.scope_id == 0 && ifa->ifa_name != nullptr) a.scope_id = if_nametoindex(ifa->ifa_name);
      }
      add(&v6, std::move(a));
    }
  }
  v4.insert(v4.end(), std::make_move_iterator(v6.begin()), std::make_move_iterator(v6.end()));
  return v4;
}

std::vector<LocalAddress> HostAddresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::vector<LocalAddress> result = HostAddressesFrom(list);
  freeifaddrs(list);
  return result;
}

bool ParseBindAddress(const std::string& text, const std::vector<LocalAddress>& host,
                      LocalAddress* out, std::string* error) {
  *out = LocalAddress{};
  in_addr a4{};
  if (inet_pton(AF_INET, text.c_str(), &a4) == 1) {
    if (a4.s_addr == INADDR_ANY || a4.s_addr == INADDR_BROADCAST) {
      *error = "bind address '" + text +
               "' is not a unicast address (a wildcard bind would leave the ICRC's source "
               "address to routing)";
      return false;
    }
    out->gid = Gid::FromIpv4(a4.s_addr);
    return true;
  }
  const size_t percent = text.find('%');
  const std::string addr = text.substr(0, percent);
  in6_addr a6{};
  if (inet_pton(AF_INET6, addr.c_str(), &a6) != 1) {
    *error = "bind address '" + text + "' is not an IPv4 or IPv6 address";
    return false;
  }
  std::memcpy(out->gid.raw.data(), &a6, 16);
  if (out->gid.IsV4Mapped()) {
    *error = "bind address '" + text + "' is IPv4-mapped: write the IPv4 address itself";
    return false;
  }
  // ::1 may be named (tests, a device for this host only); the automatic
  // scheme leaves it out because the per-process 127.x address serves.
  if (out->gid.IsZero() || out->gid.raw[0] == 0xFF) {
    *error = "bind address '" + text +
             "' is not a unicast address (a wildcard bind would leave the ICRC's source "
             "address to routing; multicast is no source)";
    return false;
  }
  if (percent != std::string::npos) {
    const std::string scope = text.substr(percent + 1);
    if (scope.empty()) {
      *error = "bind address '" + text + "' has an empty interface after '%'";
      return false;
    }
    out->ifname = scope;
    out->scope_id = if_nametoindex(scope.c_str());
    if (out->scope_id == 0 && scope.find_first_not_of("0123456789") == std::string::npos &&
        scope.size() < 10) {
      out->scope_id = static_cast<uint32_t>(std::stoul(scope));
      out->ifname.clear();
    }
    if (out->scope_id == 0) {
      *error = "bind address '" + text + "': no interface '" + scope + "'";
      return false;
    }
    return true;
  }
  for (const LocalAddress& h : host) {
    if (h.gid == out->gid) {
      out->scope_id = h.scope_id;
      out->ifname = h.ifname;
      break;
    }
  }
  if (IsIpv6LinkLocal(out->gid) && out->scope_id == 0) {
    *error = "bind address '" + text +
             "' is link-local but no interface of this host has it (write it as "
             "fe80::...%interface)";
    return false;
  }
  return true;
}

socklen_t ToSockaddr(const Endpoint& ep, uint32_t scope_id, sockaddr_in6* out) {
  std::memset(out, 0, sizeof(*out));
  if (ep.gid.IsV4Mapped()) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = ep.gid.Ipv4();
    sin.sin_port = htons(ep.port);
    std::memcpy(out, &sin, sizeof(sin));
    return sizeof(sin);
  }
  out->sin6_family = AF_INET6;
  std::memcpy(&out->sin6_addr, ep.gid.raw.data(), 16);
  out->sin6_port = htons(ep.port);
  out->sin6_scope_id = scope_id;
  return sizeof(*out);
}

bool FromSockaddr(const sockaddr* sa, socklen_t len, Endpoint* out, uint32_t* scope_id) {
  if (len >= static_cast<socklen_t>(sizeof(sockaddr_in)) && sa->sa_family == AF_INET) {
    sockaddr_in sin;
    std::memcpy(&sin, sa, sizeof(sin));
    out->gid = Gid::FromIpv4(sin.sin_addr.s_addr);
    out->port = ntohs(sin.sin_port);
    if (scope_id != nullptr) *scope_id = 0;
    return true;
  }
  if (len >= static_cast<socklen_t>(sizeof(sockaddr_in6)) && sa->sa_family == AF_INET6) {
    sockaddr_in6 sin6;
    std::memcpy(&sin6, sa, sizeof(sin6));
    std::memcpy(out->gid.raw.data(), &sin6.sin6_addr, 16);
    out->port = ntohs(sin6.sin6_port);
    if (scope_id != nullptr) *scope_id = sin6.sin6_scope_id;
    return true;
  }
  return false;
}

}  // namespace softrnic::transport
