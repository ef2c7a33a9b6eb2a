// The rdma_cm calls that give an id its addresses: rdma_bind_addr,
// rdma_resolve_addr and rdma_resolve_route. An address is IPv4 or IPv6
// (issue 15); rdma_resolve_addr takes both through one path (ResolveLocked),
// the families differing only in the small lookups under "the families"
// (what kind of destination an address is, the kernel's route source for
// it, the GID a same-host destination is reached from without a loopback
// GID), with the addresses carried as GIDs (IPv4-mapped for IPv4) in
// between.
#include <arpa/inet.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "common/secure_random.h"
#include "log/log.h"
#include "rdmacm/cm_internal.h"
#include "rdmacm/cma.h"

namespace softrnic::rdmacm {
namespace {

// A random port of the ephemeral range no bound id of the port space holds
// (Cm::ports: no walk over every id).
uint16_t EphemeralPort(int ps) {
  Cm& g = G();
  for (;;) {
    uint16_t p = uint16_t(32768 + SecureRandomBelow(28000));
    if (!g.ports.count(ListenKey(ps, p))) return p;
  }
}

// The id's afonly once it binds to `family`: the option's value if the
// application set one, else 1 for IPv4 and net.ipv6.bindv6only (of this
// network namespace) for IPv6, as the kernel's rdma_bind_addr decides.
bool AfonlyAtBind(const Id* id, int family) {
  if (id->afonly_set) return id->afonly;
  if (family != AF_INET6) return true;
  FILE* f = std::fopen("/proc/sys/net/ipv6/bindv6only", "re");
  int v = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%d", &v) != 1) v = 0;
    std::fclose(f);
  }
  return v != 0;
}

// `*port` for an id about to bind `addr` (whose afonly is `afonly`): 0
// picks an ephemeral one. A fixed port follows the kernel's cma_check_port
// against the listeners and idle ids on it (bind(2) says what the errnos
// mean): skipped when both ids set REUSEADDR (`reuseaddr`: the caller's
// side of that), or when both are afonly and of different families; else a
// wildcard or loopback address on either side is EADDRNOTAVAIL and the
// same address EADDRINUSE. So 0.0.0.0:p and [::]:p (AFONLY) bind together,
// as tgt's iSER portal does, and 10.0.0.1:p beside 10.0.0.2:p.
int ClaimPort(const Id* id, const sockaddr* addr, bool afonly, bool reuseaddr, uint16_t* port) {
  if (!*port) {
    *port = EphemeralPort(id->id.ps);
    return 0;
  }
  const auto it = G().ports.find(ListenKey(id->id.ps, *port));
  if (it == G().ports.end()) return 0;
  for (const Id* i : it->second) {
    if (i == id || (i->st != St::kListen && i->st != St::kIdle)) continue;
    if (reuseaddr && i->reuseaddr) continue;
    const sockaddr* cur = &i->id.route.addr.src_addr;
    if (afonly && i->afonly && addr->sa_family != cur->sa_family) continue;
    if (AnyAddr(addr) || AnyAddr(cur)) return EADDRNOTAVAIL;
    if (SameAddr(addr, cur)) return EADDRINUSE;
  }
  return 0;
}

// rdma_bind_addr with a sockaddr_in6 (issue 15): the IPv6 wildcard or
// loopback binds no device (as the IPv4 ones in BindLocked); a local
// address binds the device that has its GID.
int BindLocked6(Id* id, const sockaddr* addr) {
  Cm& g = G();
  sockaddr_in6 s;
  std::memcpy(&s, addr, sizeof s);
  const bool wildcard = IN6_IS_ADDR_UNSPECIFIED(&s.sin6_addr);
  if (!wildcard && !IsLocalIp6(s.sin6_addr)) return EADDRNOTAVAIL;
  uint16_t port = ntohs(s.sin6_port);
  const bool afonly = AfonlyAtBind(id, AF_INET6);
  if (int rc = ClaimPort(id, addr, afonly, id->reuseaddr, &port)) return rc;
  s.sin6_port = htons(port);
  std::memcpy(&id->id.route.addr.src_sin6, &s, sizeof s);
  id->afonly = afonly;
  id->bound = true;
  NotePort(id);
  if (wildcard || IN6_IS_ADDR_LOOPBACK(&s.sin6_addr)) {
    if (!wildcard && g.loop_idx >= 0) {
      id->sgid_index = g.loop_idx;
      id->id.route.addr.addr.ibaddr.sgid = LocalGid(g.loop_idx);
    }
    return 0;
  }
  AttachDevice(id);
  ibv_gid gid{};
  std::memcpy(gid.raw, &s.sin6_addr, 16);
  int gi = GidIndexForGid(gid);
  if (gi < 0) gi = g.loop_idx >= 0 ? g.loop_idx : 0;
  id->sgid_index = gi;
  id->id.route.addr.addr.ibaddr.sgid = LocalGid(gi);
  return 0;
}

// ---------------------------------------------------------------- the families
// What rdma_resolve_addr does with a destination, by its family's rules.
enum class Dest {
  kNoHost,     // names no host: EADDRNOTAVAIL
  kMulticast,  // an IPv4 group (rdma_join_multicast follows)
  kLocal,      // an address of this host
  kRemote,     // another host, reached through the kernel's route
};

Dest Classify(const sockaddr* dst) {
  if (dst->sa_family == AF_INET6) {
    sockaddr_in6 d;
    std::memcpy(&d, dst, sizeof d);
    // IPv6 groups are not joined here (cm_multicast.cc: EOPNOTSUPP, as the
    // kernel answers for RoCE v2), and an IPv4-mapped address is IPv4's.
    if (IN6_IS_ADDR_UNSPECIFIED(&d.sin6_addr) || IN6_IS_ADDR_MULTICAST(&d.sin6_addr) ||
        IN6_IS_ADDR_V4MAPPED(&d.sin6_addr))
      return Dest::kNoHost;
    return IsLocalIp6(d.sin6_addr) ? Dest::kLocal : Dest::kRemote;
  }
  sockaddr_in d;
  std::memcpy(&d, dst, sizeof d);
  const uint32_t ip = ntohl(d.sin_addr.s_addr);
  if (ip == INADDR_ANY || ip == INADDR_BROADCAST) return Dest::kNoHost;
  if (IN_MULTICAST(ip)) return Dest::kMulticast;
  return IsLocalIp(ip) ? Dest::kLocal : Dest::kRemote;
}

// The source address the kernel routes `dst` from, as a GID; 0 or the
// errno of the route lookup (ENETUNREACH: no route).
int RouteSourceGid(const sockaddr* dst, ibv_gid* src) {
  if (dst->sa_family == AF_INET6) {
    sockaddr_in6 d;
    std::memcpy(&d, dst, sizeof d);
    in6_addr s{};
    if (int err = RouteSource6(d.sin6_addr, d.sin6_scope_id, &s)) return err;
    std::memcpy(src->raw, &s, 16);
    return 0;
  }
  sockaddr_in d;
  std::memcpy(&d, dst, sizeof d);
  uint32_t s = 0;
  if (int err = RouteSource(ntohl(d.sin_addr.s_addr), &s)) return err;
  SetGidFromIp(src, s);
  return 0;
}

// With no per-process loopback GID (SOFTRNIC_BIND names the device's
// address), a same-host IPv4 destination is reached from GID 0, an IPv6 one
// only from its own GID (-1: the device has none).
int LocalIndexWithoutLoopback(const sockaddr* dst, const ibv_gid& dgid) {
  return dst->sa_family == AF_INET6 ? GidIndexForGid(dgid) : 0;
}

size_t SockaddrLen(int family) { return family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in); }

// A GID naming no address: IPv4's 0.0.0.0 or IPv6's ::.
bool GidIsUnspecified(const ibv_gid& g) {
  static constexpr uint8_t kZero[16] = {};
  return GidIsIpv4(g) ? IpFromGid(g.raw) == 0 : std::memcmp(g.raw, kZero, 16) == 0;
}

// "a.b.c.d:4791" or "[v6]:4791": the RoCE v2 port of the address, which
// one softrnic process per host owns.
std::string RoceEndpointStr(const ibv_gid& g) {
  return GidIsIpv4(g) ? GidStr(g) + ":4791" : "[" + GidStr(g) + "]:4791";
}

// rdma_resolve_addr(3): a given source is bound first, "the same as if
// rdma_bind_addr were called": one of the destination's family, and (as
// since issue 15) an IPv4 one before an IPv6 destination; any other is
// ignored. (The kernel refuses a source of the other family with EINVAL.)
bool BindsSource(const sockaddr* src, const sockaddr* dst) {
  return src->sa_family == dst->sa_family || (src->sa_family == AF_INET && dst->sa_family == AF_INET6);
}

// ---------------------------------------------------------------- resolution
// A multicast group's source: the bound address, else the routed one when
// it is a GID of this device, else the per-process loopback GID, which
// every same-host member hears on `lo` (transport/udp_multicast.h).
int MulticastSource(Id* id, const sockaddr* dst, int* gi, ibv_gid* sgid) {
  Cm& g = G();
  const sockaddr* bound = &id->id.route.addr.src_addr;
  if (id->bound && bound->sa_family == dst->sa_family && GidFromSockaddr(bound, sgid) && !GidIsUnspecified(*sgid)) {
    *gi = id->sgid_index;
    return 0;
  }
  if (int err = RouteSourceGid(dst, sgid)) return err;
  *gi = GidIndexForGid(*sgid);
  if (*gi < 0 && g.loop_idx >= 0) {
    *gi = g.loop_idx;
    *sgid = LocalGid(*gi);
  }
  return *gi < 0 ? EADDRNOTAVAIL : 0;
}

// The source of an address of `family` written from a GID.
void SetSourceIp(Id* id, int family, const ibv_gid& sgid) {
  if (family == AF_INET6)
    std::memcpy(&id->id.route.addr.src_sin6.sin6_addr, sgid.raw, 16);
  else
    std::memcpy(&id->id.route.addr.src_sin.sin_addr, sgid.raw + 12, 4);
}

// After a resolution: an unbound id is bound to the source address on an
// ephemeral port; an id bound to its family's wildcard gets the address.
void BindResolvedSource(Id* id, int family, const ibv_gid& sgid) {
  sockaddr* s = &id->id.route.addr.src_addr;
  ibv_gid bound{};
  if (!id->bound) {
    std::memset(&id->id.route.addr.src_storage, 0, SockaddrLen(family));
    s->sa_family = sa_family_t(family);
    id->id.route.addr.src_sin.sin_port = htons(EphemeralPort(id->id.ps));  // sin6_port: same offset
    SetSourceIp(id, family, sgid);
    id->bound = true;
    NotePort(id);
  } else if (s->sa_family == family && GidFromSockaddr(s, &bound) && GidIsUnspecified(bound)) {
    SetSourceIp(id, family, sgid);
  }
}

// rdma_resolve_addr under G().mu: the destination's kind picks the source
// (its GID index and address), then ADDR_RESOLVED, or ADDR_ERROR with the
// reason (rdma_get_cm_event(3)). Returns an errno only when the given
// source cannot be bound (the call fails, no event).
int ResolveLocked(Id* id, const sockaddr* src, const sockaddr* dst) {
  Cm& g = G();
  if (src && !id->bound && BindsSource(src, dst)) {
    if (int rc = BindLocked(id, src)) return rc;
  }
  std::memcpy(&id->id.route.addr.dst_storage, dst, SockaddrLen(dst->sa_family));
  AttachDevice(id);
  ibv_gid dgid{}, sgid{};
  GidFromSockaddr(dst, &dgid);
  int gi = -1, err = 0;
  switch (Classify(dst)) {
    case Dest::kNoHost: err = EADDRNOTAVAIL; break;
    case Dest::kMulticast:
      id->local_dst = false;
      err = MulticastSource(id, dst, &gi, &sgid);
      break;
    case Dest::kLocal:
      // From the destination itself; the listener's per-process loopback
      // GID is found in the host registry below.
      id->local_dst = true;
      gi = g.loop_idx >= 0 ? g.loop_idx : LocalIndexWithoutLoopback(dst, dgid);
      if (gi < 0) err = EADDRNOTAVAIL;
      sgid = dgid;
      break;
    case Dest::kRemote:
      // The kernel's route source, whose GID the device must have.
      id->local_dst = false;
      err = RouteSourceGid(dst, &sgid);
      if (!err && (gi = GidIndexForGid(sgid)) < 0) {
        SOFTRNIC_LOG(kError,
                     "no softrnic GID for source address %s (another softrnic process owns %s?): cannot reach %s",
                     GidStr(sgid).c_str(), RoceEndpointStr(sgid).c_str(), GidStr(dgid).c_str());
        err = EADDRNOTAVAIL;
      }
      break;
  }
  if (err) {
    CM_DBG("resolve_addr %s: %s", GidStr(dgid).c_str(), strerror(err));
    Apply(id, *FindTransition(id->st, CmEvent::kAddrError), -err);  // a row in every state
    return 0;
  }
  id->sgid_index = gi;
  BindResolvedSource(id, dst->sa_family, sgid);
  id->id.route.addr.addr.ibaddr.sgid = LocalGid(gi);
  id->dgid = dgid;
  long pid;
  uint32_t lip;
  if (id->local_dst && RegRead(id->id.ps, SockPort(dst), &pid, &lip)) SetGidFromIp(&id->dgid, lip);
  id->id.route.addr.addr.ibaddr.dgid = id->dgid;
  id->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
  Apply(id, *FindTransition(id->st, CmEvent::kResolveAddr));  // a row in every state
  return 0;
}

}  // namespace

bool AnyAddr(const sockaddr* a) {
  if (a->sa_family == AF_INET6) {
    sockaddr_in6 s;
    std::memcpy(&s, a, sizeof s);
    return IN6_IS_ADDR_UNSPECIFIED(&s.sin6_addr) || IN6_IS_ADDR_LOOPBACK(&s.sin6_addr);
  }
  sockaddr_in s;
  std::memcpy(&s, a, sizeof s);
  const uint32_t ip = ntohl(s.sin_addr.s_addr);
  return ip == INADDR_ANY || (ip >> 24) == 127;
}

bool SameAddr(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET6) {
    sockaddr_in6 x, y;
    std::memcpy(&x, a, sizeof x);
    std::memcpy(&y, b, sizeof y);
    return std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
  }
  sockaddr_in x, y;
  std::memcpy(&x, a, sizeof x);
  std::memcpy(&y, b, sizeof y);
  return x.sin_addr.s_addr == y.sin_addr.s_addr;
}

int CheckListenPort(const Id* id) {
  uint16_t port = SinPort(id->id.route.addr.src_sin);
  return ClaimPort(id, &id->id.route.addr.src_addr, id->afonly, false, &port);
}

int BindLocked(Id* id, const sockaddr* addr) {
  Cm& g = G();
  if (!addr) return EINVAL;
  if (addr->sa_family == AF_INET6) return BindLocked6(id, addr);
  if (addr->sa_family != AF_INET) return EAFNOSUPPORT;
  sockaddr_in s;
  std::memcpy(&s, addr, sizeof s);
  uint32_t ip = ntohl(s.sin_addr.s_addr);
  if (ip != INADDR_ANY && !IsLocalIp(ip)) return EADDRNOTAVAIL;
  uint16_t port = SinPort(s);
  const bool afonly = AfonlyAtBind(id, AF_INET);
  if (int rc = ClaimPort(id, addr, afonly, id->reuseaddr, &port)) return rc;
  s.sin_port = htons(port);
  std::memcpy(&id->id.route.addr.src_sin, &s, sizeof s);
  id->afonly = afonly;
  id->bound = true;
  NotePort(id);
  // The kernel's cma_any_addr() is "zero or loopback": rdma_bind_addr() to
  // 0.0.0.0 or to any 127/8 address binds no device (librdmacm leaves
  // id->verbs NULL), and a listener bound so takes requests for any local
  // address on its port, through every device (cma_listen_on_all). libfabric's
  // verbs provider relies on it: it binds "localhost" when given no address
  // and, finding no device on the id, uses its interfaces' addresses instead
  // (vrb_fill_addr). A specific address binds the device that has its GID.
  bool any = ip == INADDR_ANY || (ip >> 24) == 127;
  if (!any) AttachDevice(id);
  if (ip != INADDR_ANY) {
    int gi = (ip >> 24) == 127 ? g.loop_idx : GidIndexForIp(ip);
    if (gi < 0) gi = g.loop_idx >= 0 ? g.loop_idx : 0;
    id->sgid_index = gi;
    SetGidFromIp(&id->id.route.addr.addr.ibaddr.sgid, g.gid_ip[size_t(gi)]);
  }
  return 0;
}

}  // namespace softrnic::rdmacm

using namespace softrnic::rdmacm;

CMA_EXPORT int rdma_bind_addr(rdma_cm_id* cid, sockaddr* addr) {
  if (!cid || !addr) return Fail(EINVAL);
  std::lock_guard<std::mutex> l(G().mu);
  int rc = BindLocked(ToId(cid), addr);
  return rc ? Fail(rc) : 0;
}

CMA_EXPORT int rdma_resolve_addr(rdma_cm_id* cid, sockaddr* src, sockaddr* dst, int timeout_ms) {
  (void)timeout_ms;  // resolution is immediate: routes and GIDs are local facts
  if (!cid || !dst) return Fail(EINVAL);
  if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6) return Fail(EAFNOSUPPORT);
  Id* id = ToId(cid);
  {
    std::lock_guard<std::mutex> l(G().mu);
    if (int rc = ResolveLocked(id, src, dst)) return Fail(rc);
  }
  return Complete(id);
}

CMA_EXPORT int rdma_resolve_route(rdma_cm_id* cid, int timeout_ms) {
  (void)timeout_ms;
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  {
    std::lock_guard<std::mutex> l(G().mu);
    const CmTransition* t = FindTransition(id->st, CmEvent::kResolveRoute);
    if (!t) return Fail(EINVAL);
    if (!id->id.route.path_rec) {
      id->id.route.path_rec = static_cast<ibv_sa_path_rec*>(calloc(1, sizeof(ibv_sa_path_rec)));
      if (!id->id.route.path_rec) return Fail(ENOMEM);
    }
    ibv_sa_path_rec* p = id->id.route.path_rec;
    p->dgid = id->dgid;
    p->sgid = id->id.route.addr.addr.ibaddr.sgid;
    p->pkey = htons(0xffff);
    p->hop_limit = 64;
    p->reversible = 1;
    p->numb_path = 1;
    id->path_mtu = PortActiveMtu(id->id.verbs);
    p->mtu_selector = 2;
    p->mtu = id->path_mtu;
    p->rate_selector = 2;
    p->rate = 3;  // 10 Gb/s
    p->packet_life_time_selector = 2;
    p->packet_life_time = 14;
    id->id.route.num_paths = 1;
    Apply(id, *t);
  }
  return Complete(id);
}
