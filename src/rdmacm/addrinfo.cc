// Addresses: which of this host's addresses a destination is, the source
// address the kernel routes it from, and rdma_getaddrinfo(3) over
// getaddrinfo(3) (IPv4 only).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

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

// The source address the kernel would use to reach `dst` (0 and errno-style
// error if there is no route).
int RouteSource(uint32_t dst, uint32_t* src) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(4791);
  a.sin_addr.s_addr = htonl(dst);
  int rc = 0;
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    rc = errno;
  } else {
    socklen_t l = sizeof a;
    if (getsockname(s, reinterpret_cast<sockaddr*>(&a), &l) != 0)
      rc = errno;
    else
      *src = ntohl(a.sin_addr.s_addr);
  }
  close(s);
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
  if (hints && hints->ai_family && hints->ai_family != AF_INET) {
    // Only IPv4 is supported by softrnic's transport.
    if (hints->ai_family == AF_INET6 || hints->ai_family == AF_IB) return Fail(EAFNOSUPPORT);
  }
  int flags = hints ? hints->ai_flags : 0;
  addrinfo* ai = nullptr;
  if (node || service) {
    addrinfo h{};
    h.ai_family = AF_INET;
    h.ai_socktype = SOCK_STREAM;
    if (flags & RAI_NUMERICHOST) h.ai_flags |= AI_NUMERICHOST;
    if (flags & RAI_PASSIVE) h.ai_flags |= AI_PASSIVE;
    int rc = getaddrinfo(node, service, &h, &ai);
    if (rc) {
      errno = rc == EAI_SYSTEM ? errno : (rc == EAI_NONAME ? ENOENT : EADDRNOTAVAIL);
      return -1;  // rdma_getaddrinfo returns -1 with errno (rdma-core >= 1.0)
    }
  } else if ((hints->ai_src_len && hints->ai_src_addr->sa_family != AF_INET) ||
             (hints->ai_dst_len && hints->ai_dst_addr->sa_family != AF_INET)) {
    return Fail(EAFNOSUPPORT);
  }
  auto* r = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
  if (!r) {
    freeaddrinfo(ai);
    return Fail(ENOMEM);
  }
  r->ai_flags = flags;
  r->ai_family = AF_INET;
  r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : 0;
  r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : 0;
  if (!r->ai_port_space) r->ai_port_space = r->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP;
  if (!r->ai_qp_type) r->ai_qp_type = r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  if (ai && (flags & RAI_PASSIVE)) {
    r->ai_src_len = ai->ai_addrlen;
    r->ai_src_addr = DupAddr(ai->ai_addr, ai->ai_addrlen);
  } else if (ai) {
    r->ai_dst_len = ai->ai_addrlen;
    r->ai_dst_addr = DupAddr(ai->ai_addr, ai->ai_addrlen);
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

