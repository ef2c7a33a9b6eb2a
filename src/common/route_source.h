// The source address the kernel routes a UDP datagram to a destination
// from: a UDP socket connected to it, and that socket's name. Nothing is
// sent. One implementation for rdma_cm's route resolution and the tools'
// diagnoses, IPv4 and IPv6 alike.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace softrnic {

// `addr` (an AF_INET or AF_INET6 destination, its port and IPv6 scope
// included) becomes the source the route to it uses, same family and
// length. 0, or the errno of the failed step (ENETUNREACH: no route).
inline int RouteSourceOf(sockaddr* addr, socklen_t len) {
  const int s = socket(addr->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  int rc = 0;
  if (connect(s, addr, len) != 0 || getsockname(s, addr, &len) != 0) rc = errno;
  close(s);
  return rc;
}

inline int RouteSourceOf(sockaddr_in* a) {
  return RouteSourceOf(reinterpret_cast<sockaddr*>(a), sizeof *a);
}
inline int RouteSourceOf(sockaddr_in6* a) {
  return RouteSourceOf(reinterpret_cast<sockaddr*>(a), sizeof *a);
}

}  // namespace softrnic
