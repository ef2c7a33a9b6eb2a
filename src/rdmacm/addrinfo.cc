// Addresses: which of this host's addresses a destination is, the source
// address the kernel routes it from, and rdma_getaddrinfo(3) over
// getaddrinfo(3). IPv4 and IPv6 (issue 15).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/route_source.h"
#include "rdmacm/cm_internal.h"
#include "rdmacm/cma.h"

namespace softrnic::rdmacm {

bool IsLocalIp(uint32_t ip) {
  if ((ip >> 24) == 127) return true;
  if (GidIndexForIp(ip) >= 0) return true;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return false;
  bool found = false;
  for (ifaddrs* p = ifa; p; p = p->ifa_next) {
    if (p->ifa_addr && p->ifa_addr->sa_family == AF_INET &&
        ntohl(reinterpret_cast<sockaddr_in*>(p->ifa_addr)->sin_addr.s_addr) == ip) {
      found = true;
      break;
    }
  }
  freeifaddrs(ifa);
  return found;
}

bool IsLocalIp6(const in6_addr& a) {
  if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
  ibv_gid g{};
  std::memcpy(g.raw, &a, 16);
  if (GidIndexForGid(g) >= 0) return true;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return false;
  bool found = false;
  for (ifaddrs* p = ifa; p && !found; p = p->ifa_next) {
    if (p->ifa_addr && p->ifa_addr->sa_family == AF_INET6)
      found = std::memcmp(&reinterpret_cast<sockaddr_in6*>(p->ifa_addr)->sin6_addr, &a, 16) == 0;
  }
  freeifaddrs(ifa);
  return found;
}

int RouteSource6(const in6_addr& dst, uint32_t scope_id, in6_addr* src) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(4791);
  a.sin6_addr = dst;
  a.sin6_scope_id = scope_id;
  const int rc = RouteSourceOf(&a);
  if (rc == 0) *src = a.sin6_addr;
  return rc;
}

// The source address the kernel would use to reach `dst` (0 and errno-style
// error if there is no route).
int RouteSource(uint32_t dst, uint32_t* src) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(4791);
  a.sin_addr.s_addr = htonl(dst);
  const int rc = RouteSourceOf(&a);
  if (rc == 0) *src = ntohl(a.sin_addr.s_addr);
  return rc;
}


}  // namespace softrnic::rdmacm

using namespace softrnic::rdmacm;

// ---------------------------------------------------------------- rdma_getaddrinfo

static sockaddr* DupAddr(const sockaddr* a, socklen_t len) {
  auto* p = static_cast<sockaddr*>(malloc(len));
  if (p) std::memcpy(p, a, len);
  return p;
}

CMA_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* n = res->ai_next;
    free(res->ai_src_addr);
    free(res->ai_dst_addr);
    free(res->ai_src_canonname);
    free(res->ai_dst_canonname);
    free(res->ai_route);
    free(res->ai_connect);
    free(res);
    res = n;
  }
}

CMA_EXPORT int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                                rdma_addrinfo** res) {
  // rdma_getaddrinfo(3): node and service may both be NULL when the hints
  // carry the addresses (libfabric's verbs provider resolves that way).
  if (!res || (!node && !service && !hints)) return Fail(EINVAL);
  if (hints && hints->ai_family == AF_IB) return Fail(EAFNOSUPPORT);  // IP only
  int flags = hints ? hints->ai_flags : 0;
  addrinfo* ai = nullptr;
  if (node || service) {
    addrinfo h{};
    // IPv4 unless asked for IPv6 or the name is IPv6 only (issue 15).
    h.ai_family = hints && (hints->ai_family == AF_INET6 || hints->ai_family == AF_INET)
                      ? hints->ai_family
                      : AF_UNSPEC;
    h.ai_socktype = SOCK_STREAM;
    if (flags & RAI_NUMERICHOST) h.ai_flags |= AI_NUMERICHOST;
    if (flags & RAI_PASSIVE) h.ai_flags |= AI_PASSIVE;
    int rc = getaddrinfo(node, service, &h, &ai);
    if (rc) {
      errno = rc == EAI_SYSTEM ? errno : (rc == EAI_NONAME ? ENOENT : EADDRNOTAVAIL);
      return -1;  // rdma_getaddrinfo returns -1 with errno (rdma-core >= 1.0)
    }
  } else if ((hints->ai_src_len && hints->ai_src_addr->sa_family != AF_INET &&
              hints->ai_src_addr->sa_family != AF_INET6) ||
             (hints->ai_dst_len && hints->ai_dst_addr->sa_family != AF_INET &&
              hints->ai_dst_addr->sa_family != AF_INET6)) {
    return Fail(EAFNOSUPPORT);
  }
  // With AF_UNSPEC the IPv4 answer comes first when the name has one, as
  // before IPv6 was supported.
  addrinfo* pick = ai;
  for (addrinfo* p = ai; p && !(hints && hints->ai_family == AF_INET6); p = p->ai_next)
    if (p->ai_family == AF_INET) {
      pick = p;
      break;
    }
  auto* r = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
  if (!r) {
    freeaddrinfo(ai);
    return Fail(ENOMEM);
  }
  r->ai_flags = flags;
  r->ai_family = pick ? pick->ai_family
                      : (hints->ai_dst_len ? hints->ai_dst_addr->sa_family
                                           : hints->ai_src_len ? hints->ai_src_addr->sa_family
                                                               : AF_INET);
  r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : 0;
  r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : 0;
  if (!r->ai_port_space) r->ai_port_space = r->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP;
  if (!r->ai_qp_type) r->ai_qp_type = r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  if (pick && (flags & RAI_PASSIVE)) {
    r->ai_src_len = pick->ai_addrlen;
    r->ai_src_addr = DupAddr(pick->ai_addr, pick->ai_addrlen);
  } else if (pick) {
    r->ai_dst_len = pick->ai_addrlen;
    r->ai_dst_addr = DupAddr(pick->ai_addr, pick->ai_addrlen);
  } else if (hints->ai_dst_len) {
    r->ai_dst_len = hints->ai_dst_len;
    r->ai_dst_addr = DupAddr(hints->ai_dst_addr, hints->ai_dst_len);
  }
  // A source address from the hints is kept when the name gave none.
  if (!r->ai_src_len && hints && hints->ai_src_addr && hints->ai_src_len) {
    r->ai_src_len = hints->ai_src_len;
    r->ai_src_addr = DupAddr(hints->ai_src_addr, hints->ai_src_len);
  }
  if (node) {
    if (flags & RAI_PASSIVE)
      r->ai_src_canonname = strdup(node);
    else
      r->ai_dst_canonname = strdup(node);
  }
  freeaddrinfo(ai);
  *res = r;
  return 0;
}

