#include "transport/link_mtu.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "transport/local_address.h"

namespace softrnic::transport {

namespace {

bool IsLoopbackGid(const Gid& g) {
  return g.IsV4Mapped() ? (ntohl(g.Ipv4()) >> 24) == 127 : IsIpv6Loopback(g);
}

// The GID of an interface address (getifaddrs gives no length: the
// family's own); false for other families.
bool GidOf(const sockaddr* sa, Gid* out) {
  if (sa == nullptr) return false;
  const socklen_t len =
      static_cast<socklen_t>(sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  Endpoint ep;
  if (!FromSockaddr(sa, len, &ep, nullptr)) return false;
  *out = ep.gid;
  return true;
}

uint32_t InterfaceMtu(const std::string& name) {
  if (name.size() >= IFNAMSIZ) return 0;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq req{};
  std::memcpy(req.ifr_name, name.c_str(), name.size() + 1);
  const int rc = ioctl(fd, SIOCGIFMTU, &req);
  close(fd);
  return rc == 0 && req.ifr_mtu > 0 ? static_cast<uint32_t>(req.ifr_mtu) : 0;
}

}  // namespace

uint32_t SmallestLinkMtuFrom(const ifaddrs* list, std::span<const Gid> gids,
                             const std::function<uint32_t(const std::string&)>& mtu_of) {
  uint32_t smallest = 0;
  auto consider = [&](const char* name) {
    if (name == nullptr) return;
    const uint32_t mtu = mtu_of(name);
    if (mtu != 0 && (smallest == 0 || mtu < smallest)) smallest = mtu;
  };
  for (const Gid& gid : gids) {
    bool found = false;
    // Every interface holding the address: a link-local IPv6 address may
    // sit on several, and the GID does not say which.
    for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
      Gid have;
      if (!GidOf(ifa->ifa_addr, &have) || !(have == gid)) continue;
      consider(ifa->ifa_name);
      found = true;
    }
    if (found || !IsLoopbackGid(gid)) continue;
    for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
      if (ifa->ifa_flags & IFF_LOOPBACK) {
        consider(ifa->ifa_name);
        break;
      }
    }
  }
  return smallest;
}

uint32_t SmallestLinkMtu(std::span<const Gid> gids) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  const uint32_t mtu = SmallestLinkMtuFrom(list, gids, InterfaceMtu);
  freeifaddrs(list);
  return mtu;
}

}  // namespace softrnic::transport
