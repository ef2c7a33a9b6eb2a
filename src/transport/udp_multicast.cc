// Multicast group sockets of the UDP transport (udp_multicast.h).
#include "transport/udp_multicast.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace softrnic::transport {
namespace {

// Interface indices that are up and have an address of the family
// (AF_INET or AF_INET6), loopback included, without duplicates.
std::vector<unsigned> InterfacesWithFamily(int family) {
  std::vector<unsigned> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != family) continue;
    if (!(a->ifa_flags & IFF_UP)) continue;
    const unsigned index = if_nametoindex(a->ifa_name);
    if (index != 0 && std::find(out.begin(), out.end(), index) == out.end()) out.push_back(index);
  }
  freeifaddrs(list);
  return out;
}

// Joins `group` on each interface; returns how many joins succeeded.
int JoinOnInterfaces(int fd, const Gid& group, const std::vector<unsigned>& interfaces) {
  int joined = 0;
  for (unsigned index : interfaces) {
    int rc;
    if (group.IsV4Mapped()) {
      ip_mreqn m{};
      std::memcpy(&m.imr_multiaddr.s_addr, &group.raw[12], 4);
      m.imr_ifindex = static_cast<int>(index);
      rc = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m));
    } else {
      ipv6_mreq m{};
      std::memcpy(&m.ipv6mr_multiaddr, group.raw.data(), 16);
      m.ipv6mr_interface = index;
      rc = setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof(m));
    }
    if (rc == 0) ++joined;
  }
  return joined;
}

}  // namespace

int OpenGroupSocket(const Gid& group, uint16_t port, LocalSocket* out, std::string* error) {
  const std::string where = group.ToString() + " port " + std::to_string(port);
  if (!group.IsMulticast()) {
    *error = where + " is not a multicast group";
    return EINVAL;
  }
  const bool v6 = !group.IsV4Mapped();
  const int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    *error = "socket(): " + std::string(std::strerror(err));
    return err;
  }
  auto fail = [&](const std::string& what, int err) {
    *error = what + " " + where + ": " + std::strerror(err);
    close(fd);
    return err;
  };
  const int one = 1;
  // Every member socket on this host binds the same address and port.
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
    return fail("SO_REUSEADDR on", errno);
  if (v6) {
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0)
      return fail("IPV6_V6ONLY on", errno);
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof(one));  // ECN; optional
  } else {
    (void)setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));  // ECN; optional
  }
  EnlargeSocketBuffers(fd);  // a burst to the group must not overflow it
  sockaddr_in6 sa{};
  const socklen_t len = ToSockaddr(Endpoint{group, port}, 0, &sa);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&sa), len) != 0)
    return fail("cannot bind UDP", errno);
  if (JoinOnInterfaces(fd, group, InterfacesWithFamily(v6 ? AF_INET6 : AF_INET)) == 0)
    return fail("no interface could join", EADDRNOTAVAIL);
  *out = LocalSocket{};
  out->fd = fd;
  out->endpoint = Endpoint{group, port};
  out->group = true;
  return 0;
}

}  // namespace softrnic::transport
