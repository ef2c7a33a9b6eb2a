// softrnic's rdma_cm: the librdmacm API over softrnic's libibverbs.so.1.
//
// Connection management is done in user space by this library, the way the
// kernel's ib_cm + rdma_cm do it for a hardware RNIC: IBA CM MADs (REQ, REP,
// RTU, REJ, DREQ, DREP, SIDR_REQ, SIDR_REP; mad.h) carried as UD SENDs on the
// device's QP1 (Q_Key 0x80010000), with rdma_cm's IP header in the REQ private
// data. A CM thread per process receives MADs from QP1 and drives retries and
// timeouts. See docs/rdmacm.md for the design and its limits. This file is
// the rdma_* calls on ids and channels; cm_internal.h has the map of the
// other files (protocol, QP1, state, events, addresses).
//
// Locking: one mutex (Cm::mu) guards every id and the CM's tables; each event
// channel has its own mutex for its queue. Nothing blocks while holding Cm::mu.
#include "rdmacm/cma.h"

#include <arpa/inet.h>
#include <rdma/rdma_verbs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/secure_random.h"
#include "rdmacm/cm_internal.h"
#include "rdmacm/mad.h"
#include "log/log.h"

namespace softrnic::rdmacm {

int Fail(int err) {
  errno = err;
  return -1;
}

// ucma_complete: waits for the event of a synchronous id's operation.
int Complete(Id* id) {
  if (!id->sync) return 0;
  if (id->id.event) {
    rdma_ack_cm_event(id->id.event);
    id->id.event = nullptr;
  }
  if (rdma_get_cm_event(id->id.channel, &id->id.event) != 0) return -1;
  rdma_cm_event* e = id->id.event;
  if (e->status) {
    if (e->event == RDMA_CM_EVENT_REJECTED) return Fail(ECONNREFUSED);
    return Fail(e->status < 0 ? -e->status : e->status);
  }
  switch (e->event) {
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR: return Fail(EHOSTUNREACH);
    case RDMA_CM_EVENT_REJECTED: return Fail(ECONNREFUSED);
    default: return 0;
  }
}

uint16_t EphemeralPort(int ps) {
  Cm& g = G();
  for (;;) {
    uint16_t p = uint16_t(32768 + SecureRandomBelow(28000));
    bool used = false;
    for (Id* i : g.ids)
      if (i->bound && i->id.ps == ps && SinPort(i->id.route.addr.src_sin) == p) used = true;
    if (!used) return p;
  }
}

// rdma_bind_addr with a sockaddr_in6 (issue 15): the IPv6 wildcard or
// loopback binds no device (as the IPv4 ones below); a local address binds
// the device that has its GID.
int BindLocked6(Id* id, const sockaddr* addr) {
  Cm& g = G();
  sockaddr_in6 s;
  std::memcpy(&s, addr, sizeof s);
  const bool wildcard = IN6_IS_ADDR_UNSPECIFIED(&s.sin6_addr);
  if (!wildcard && !IsLocalIp6(s.sin6_addr)) return EADDRNOTAVAIL;
  uint16_t port = ntohs(s.sin6_port);
  if (port) {
    for (Id* i : g.ids)
      if (i != id && i->bound && i->id.ps == id->id.ps && SinPort(i->id.route.addr.src_sin) == port &&
          (i->st == St::kListen || i->st == St::kIdle))
        return EADDRINUSE;
  } else {
    port = EphemeralPort(id->id.ps);
  }
  s.sin6_port = htons(port);
  std::memcpy(&id->id.route.addr.src_sin6, &s, sizeof s);
  id->bound = true;
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
  if (port) {
    for (Id* i : g.ids)
      if (i != id && i->bound && i->id.ps == id->id.ps && SinPort(i->id.route.addr.src_sin) == port &&
          (i->st == St::kListen || i->st == St::kIdle))
        return EADDRINUSE;
  } else {
    port = EphemeralPort(id->id.ps);
  }
  s.sin_port = htons(port);
  std::memcpy(&id->id.route.addr.src_sin, &s, sizeof s);
  id->bound = true;
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

// ================================================================ API

CMA_EXPORT rdma_event_channel* rdma_create_event_channel(void) {
  if (int rc = Start()) {
    errno = rc;
    return nullptr;
  }
  Channel* c = NewChannel();
  return c ? &c->ch : nullptr;
}

CMA_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel) FreeChannel(ToChannel(channel));
}

CMA_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (!channel || !event) return Fail(EINVAL);
  if (PopEvent(ToChannel(channel), event) != 0) return -1;
  return 0;
}

CMA_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
  if (!event) return Fail(EINVAL);
  delete reinterpret_cast<Event*>(event);
  return 0;
}

CMA_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  if (int rc = Start()) {
    errno = rc;
    if (num_devices) *num_devices = 0;
    return nullptr;
  }
  auto** l = static_cast<ibv_context**>(calloc(2, sizeof(ibv_context*)));
  if (!l) return nullptr;
  l[0] = G().ctx;
  if (num_devices) *num_devices = 1;
  return l;
}

CMA_EXPORT void rdma_free_devices(ibv_context** list) { free(list); }

static int CreateId2(rdma_event_channel* channel, rdma_cm_id** out, void* context,
                     rdma_port_space ps, ibv_qp_type qpt) {
  if (!out) return Fail(EINVAL);
  if (int rc = Start()) return Fail(rc);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB)
    return Fail(EINVAL);
  Channel* c = channel ? ToChannel(channel) : NewChannel();
  if (!c) return -1;
  std::lock_guard<std::mutex> l(G().mu);
  Id* id = NewIdLocked(c, context, ps, qpt);
  id->sync = channel == nullptr;
  *out = &id->id;
  return 0;
}

CMA_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                              rdma_port_space ps) {
  ibv_qp_type qpt = (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ? IBV_QPT_UD : IBV_QPT_RC;
  return CreateId2(channel, id, context, ps, qpt);
}

CMA_EXPORT int rdma_destroy_id(rdma_cm_id* cid) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  {
    std::lock_guard<std::mutex> l(G().mu);
    Cm& g = G();
    const bool rc_conn = id->id.qp_type != IBV_QPT_UD;
    // The peer hears of it (the table: a DREQ for a connection, a REJ for
    // a request not answered yet), as from the kernel CM when an id goes.
    const CmTransition* t = FindTransition(id->st, rc_conn ? CmEvent::kDestroy : CmEvent::kDestroyUd);
    if (t && t->action == CmAction::kSendDreqOnce) {
      SendDreq(id, /*remember=*/false);
    } else if (t && t->action == CmAction::kSendRej) {
      CmMsg m;
      if (rc_conn) {
        m.attr = kAttrRej;
        m.local_comm_id = id->local_comm_id;
        m.remote_comm_id = id->remote_comm_id;
        m.reason = kRejConsumer;
      } else {
        m.attr = kAttrSidrRep;
        m.local_comm_id = id->remote_comm_id;
        m.sidr_status = kSidrReject;
      }
      SendMsg(id->sgid_index, id->dgid, m);
    }
    if (t) Apply(id, *t);
    if (id->registered) RegRemove(id->id.ps, SinPort(id->id.route.addr.src_sin));
    if (id->st == St::kListen) ReleaseListener(id);
    ForgetId(id);
    g.ids.erase(id);
    // Its unread events go with it (M6): none may reach the application
    // naming freed memory.
    if (!id->sync) PurgeEvents(id->chan, id);
  }
  if (id->id.event) rdma_ack_cm_event(id->id.event);
  free(id->id.route.path_rec);
  if (id->sync) FreeChannel(id->chan);
  delete id;
  return 0;
}

CMA_EXPORT int rdma_bind_addr(rdma_cm_id* cid, sockaddr* addr) {
  if (!cid || !addr) return Fail(EINVAL);
  std::lock_guard<std::mutex> l(G().mu);
  int rc = BindLocked(ToId(cid), addr);
  return rc ? Fail(rc) : 0;
}

// rdma_resolve_addr to a sockaddr_in6 (issue 15): the source is the
// kernel's route source for the destination, whose GID the device must
// have; a same-host destination goes to the listener's per-process
// loopback GID through the host registry, as for IPv4.
static int ResolveAddr6(Id* id, sockaddr* src, sockaddr* dst) {
  {
    std::lock_guard<std::mutex> l(G().mu);
    Cm& g = G();
    if (src && (src->sa_family == AF_INET6 || src->sa_family == AF_INET) && !id->bound) {
      if (int rc = BindLocked(id, src)) return Fail(rc);
    }
    sockaddr_in6 d;
    std::memcpy(&d, dst, sizeof d);
    std::memcpy(&id->id.route.addr.dst_sin6, &d, sizeof d);
    AttachDevice(id);
    ibv_gid dgid{}, sgid{};
    std::memcpy(dgid.raw, &d.sin6_addr, 16);
    int gi = -1, err = 0;
    in6_addr sip{};
    if (IN6_IS_ADDR_UNSPECIFIED(&d.sin6_addr) || IN6_IS_ADDR_MULTICAST(&d.sin6_addr) ||
        IN6_IS_ADDR_V4MAPPED(&d.sin6_addr)) {
      err = EADDRNOTAVAIL;
    } else if (IsLocalIp6(d.sin6_addr)) {
      id->local_dst = true;
      gi = g.loop_idx >= 0 ? g.loop_idx : GidIndexForGid(dgid);
      if (gi < 0) err = EADDRNOTAVAIL;
      sip = d.sin6_addr;
    } else {
      id->local_dst = false;
      err = RouteSource6(d.sin6_addr, d.sin6_scope_id, &sip);
      if (!err) {
        std::memcpy(sgid.raw, &sip, 16);
        gi = GidIndexForGid(sgid);
        if (gi < 0) {
          SOFTRNIC_LOG(kError,
                       "no softrnic GID for source address %s (another softrnic process owns "
                       "[%s]:4791?): cannot reach %s",
                       GidStr(sgid).c_str(), GidStr(sgid).c_str(), GidStr(dgid).c_str());
          err = EADDRNOTAVAIL;
        }
      }
    }
    if (err) {
      CM_DBG("resolve_addr %s: %s", GidStr(dgid).c_str(), strerror(err));
      Apply(id, *FindTransition(id->st, CmEvent::kAddrError), -err);  // a row in every state
    } else {
      id->sgid_index = gi;
      sockaddr_in6& s = id->id.route.addr.src_sin6;
      if (!id->bound) {
        s = sockaddr_in6{};
        s.sin6_family = AF_INET6;
        s.sin6_port = htons(EphemeralPort(id->id.ps));
        s.sin6_addr = sip;
        id->bound = true;
      } else if (s.sin6_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&s.sin6_addr)) {
        s.sin6_addr = sip;
      }
      id->id.route.addr.addr.ibaddr.sgid = LocalGid(gi);
      id->dgid = dgid;
      if (id->local_dst) {
        long pid;
        uint32_t lip;
        if (RegRead(id->id.ps, ntohs(d.sin6_port), &pid, &lip)) SetGidFromIp(&id->dgid, lip);
        else if (g.loop_idx < 0) id->dgid = LocalGid(gi);
      }
      id->id.route.addr.addr.ibaddr.dgid = id->dgid;
      id->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
      Apply(id, *FindTransition(id->st, CmEvent::kResolveAddr));  // a row in every state
    }
  }
  return Complete(id);
}

CMA_EXPORT int rdma_resolve_addr(rdma_cm_id* cid, sockaddr* src, sockaddr* dst, int timeout_ms) {
  (void)timeout_ms;
  if (!cid || !dst) return Fail(EINVAL);
  Id* id = ToId(cid);
  if (dst->sa_family == AF_INET6) return ResolveAddr6(id, src, dst);
  if (dst->sa_family != AF_INET) return Fail(EAFNOSUPPORT);
  {
    std::lock_guard<std::mutex> l(G().mu);
    Cm& g = G();
    if (src && src->sa_family == AF_INET && !id->bound) {
      if (int rc = BindLocked(id, src)) return Fail(rc);
    }
    sockaddr_in d;
    std::memcpy(&d, dst, sizeof d);
    std::memcpy(&id->id.route.addr.dst_sin, &d, sizeof d);
    uint32_t dip = ntohl(d.sin_addr.s_addr);
    AttachDevice(id);
    uint32_t sip = 0;
    int gi = -1, err = 0;
    if (dip == INADDR_ANY || dip == INADDR_BROADCAST) {
      err = EADDRNOTAVAIL;
    } else if (IN_MULTICAST(dip)) {
      // A multicast group (rdma_join_multicast follows): the source is the
      // bound address, else the routed one when it is a GID of this device,
      // else the per-process loopback GID, which every same-host member
      // hears on `lo` (transport/udp_multicast.h).
      id->local_dst = false;
      const uint32_t bound_ip = ntohl(id->id.route.addr.src_sin.sin_addr.s_addr);
      if (id->bound && id->id.route.addr.src_sin.sin_family == AF_INET && bound_ip != INADDR_ANY) {
        sip = bound_ip;
        gi = id->sgid_index;
      } else if (!(err = RouteSource(dip, &sip))) {
        gi = GidIndexForIp(sip);
        if (gi < 0 && g.loop_idx >= 0) {
          gi = g.loop_idx;
          sip = g.gid_ip[size_t(gi)];
        }
        if (gi < 0) err = EADDRNOTAVAIL;
      }
    } else if (IsLocalIp(dip)) {
      id->local_dst = true;
      gi = g.loop_idx >= 0 ? g.loop_idx : 0;
      sip = (dip >> 24) == 127 ? dip : dip;
    } else {
      id->local_dst = false;
      err = RouteSource(dip, &sip);
      if (!err) {
        gi = GidIndexForIp(sip);
        if (gi < 0) {
          SOFTRNIC_LOG(kError,
                       "no softrnic GID for source address %s (another softrnic process owns "
                       "%s:4791?): cannot reach %s",
                       IpStr(sip).c_str(), IpStr(sip).c_str(), IpStr(dip).c_str());
          err = EADDRNOTAVAIL;
        }
      }
    }
    if (err) {
      CM_DBG("resolve_addr %s: %s", IpStr(dip).c_str(), strerror(err));
      Apply(id, *FindTransition(id->st, CmEvent::kAddrError), -err);  // a row in every state
    } else {
      id->sgid_index = gi;
      sockaddr_in& s = id->id.route.addr.src_sin;
      if (!id->bound) {
        s.sin_family = AF_INET;
        s.sin_port = htons(EphemeralPort(id->id.ps));
        s.sin_addr.s_addr = htonl(sip);
        id->bound = true;
      } else if (s.sin_addr.s_addr == INADDR_ANY) {
        s.sin_addr.s_addr = htonl(sip);
      }
      SetGidFromIp(&id->id.route.addr.addr.ibaddr.sgid, g.gid_ip[size_t(gi)]);
      SetGidFromIp(&id->dgid, dip);
      if (id->local_dst) {
        long pid;
        uint32_t lip;
        if (RegRead(id->id.ps, SinPort(d), &pid, &lip)) SetGidFromIp(&id->dgid, lip);
      }
      id->id.route.addr.addr.ibaddr.dgid = id->dgid;
      id->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
      Apply(id, *FindTransition(id->st, CmEvent::kResolveAddr));  // a row in every state
    }
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
    p->mtu_selector = 2;
    p->mtu = IBV_MTU_1024;
    p->rate_selector = 2;
    p->rate = 3;  // 10 Gb/s
    p->packet_life_time_selector = 2;
    p->packet_life_time = 14;
    id->id.route.num_paths = 1;
    Apply(id, *t);
  }
  return Complete(id);
}

CMA_EXPORT int rdma_connect(rdma_cm_id* cid, rdma_conn_param* param) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  {
    std::lock_guard<std::mutex> l(G().mu);
    const bool ud = id->id.qp_type == IBV_QPT_UD;
    const CmTransition* t = FindTransition(id->st, ud ? CmEvent::kConnectUd : CmEvent::kConnect);
    if (!t) return Fail(EINVAL);
    size_t max_user = (ud ? kSidrReqPdata : kReqPdata) - kCmaHdr;
    if (param && param->private_data_len > max_user) return Fail(EINVAL);
    uint16_t dport = SinPort(id->id.route.addr.dst_sin);
    bool defer = false;
    if (id->local_dst) {
      long pid;
      uint32_t lip;
      if (RegRead(id->id.ps, dport, &pid, &lip)) {
        SetGidFromIp(&id->dgid, lip);
        id->id.route.addr.addr.ibaddr.dgid = id->dgid;
      } else {
        CM_DBG("no listener registered for port %u on this host (yet)", dport);
        defer = true;
      }
    }
    {
      CmMsg m;
      m.service_id = (uint64_t(id->id.ps) << 16) | dport;
      NewCommId(id);
      m.local_comm_id = id->local_comm_id;
      // The header names the address the client asked for, not the GID.
      CmaHdr h;
      h.src_port = id->id.route.addr.src_sin.sin_port;  // sin6_port: same offset
      if (id->id.route.addr.dst_sin.sin_family == AF_INET6) {
        h.ipv6 = true;
        if (id->id.route.addr.src_sin.sin_family == AF_INET6)
          std::memcpy(h.src6, &id->id.route.addr.src_sin6.sin6_addr, 16);
        std::memcpy(h.dst6, &id->id.route.addr.dst_sin6.sin6_addr, 16);
      } else {
        h.src_addr = id->id.route.addr.src_sin.sin_addr.s_addr;
        h.dst_addr = id->id.route.addr.dst_sin.sin_addr.s_addr;
      }
      EncodeCmaHdr(m.pdata, h);
      if (param && param->private_data_len)
        std::memcpy(m.pdata + kCmaHdr, param->private_data, param->private_data_len);
      m.pdata_len = kCmaHdr + (param ? param->private_data_len : 0);
      if (ud) {
        m.attr = kAttrSidrReq;
        SendOrDefer(id, m, Timer::kSidr, defer);
      } else {
        m.attr = kAttrReq;
        m.tid = softrnic::SecureRandom64();  // names nothing about this process (IBA 13.4.6.4)
        id->local_psn = NewPsn();
        m.starting_psn = id->local_psn;
        m.qpn = id->id.qp ? id->id.qp->qp_num : (param ? param->qp_num : 0);
        m.qkey = 0;
        id->resp_res = ClampRd(param ? param->responder_resources : kMaxRdAtomic);
        id->init_depth = ClampRd(param ? param->initiator_depth : kMaxRdAtomic);
        id->retry_cnt = param ? std::min<uint8_t>(param->retry_count, 7) : 7;
        id->rnr_retry = param ? std::min<uint8_t>(param->rnr_retry_count, 7) : 7;
        m.responder_resources = id->resp_res;
        m.initiator_depth = id->init_depth;
        m.retry_count = id->retry_cnt;
        m.rnr_retry_count = id->rnr_retry;
        m.flow_control = param ? param->flow_control : 1;
        m.srq = id->id.srq || (param && param->srq) ? 1 : 0;
        m.transport = id->id.qp_type == IBV_QPT_UC ? 1 : 0;
        m.mtu = IBV_MTU_1024;
        std::memcpy(m.sgid, id->id.route.addr.addr.ibaddr.sgid.raw, 16);
        std::memcpy(m.dgid, id->dgid.raw, 16);
        SendOrDefer(id, m, Timer::kReq, defer);
      }
      Apply(id, *t);
    }
  }
  return Complete(id);
}

CMA_EXPORT int rdma_establish(rdma_cm_id* cid) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  std::lock_guard<std::mutex> l(G().mu);
  const CmTransition* t = FindTransition(id->st, CmEvent::kEstablish);
  if (!t) return Fail(EINVAL);
  SendRtu(id);
  Apply(id, *t);
  return 0;
}

CMA_EXPORT int rdma_listen(rdma_cm_id* cid, int backlog) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  std::lock_guard<std::mutex> l(G().mu);
  if (!id->bound) {
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (int rc = BindLocked(id, reinterpret_cast<sockaddr*>(&any))) return Fail(rc);
  }
  if (id->st == St::kListen) return 0;
  uint16_t port = SinPort(id->id.route.addr.src_sin);
  if (int rc = RegAdd(id->id.ps, port)) return Fail(rc);
  id->registered = true;
  Apply(id, *FindTransition(id->st, CmEvent::kListen));  // a row in every state but Listen
  AddListener(id, backlog);
  return 0;
}

CMA_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** out) {
  if (!listen || !out) return Fail(EINVAL);
  Id* l = ToId(listen);
  if (!l->sync) return Fail(EINVAL);
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(listen->channel, &e) != 0) return -1;
  if (e->status) {
    int s = e->status;
    rdma_ack_cm_event(e);
    return Fail(s < 0 ? -s : s);
  }
  if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    rdma_ack_cm_event(e);
    return Fail(EINVAL);
  }
  rdma_cm_id* c = e->id;
  if (l->has_ep_attr) {
    ibv_qp_init_attr a = l->ep_attr;
    if (rdma_create_qp(c, l->ep_pd, &a) != 0) {
      int err = errno;
      rdma_ack_cm_event(e);
      rdma_destroy_id(c);
      return Fail(err);
    }
  }
  c->event = e;
  *out = c;
  return 0;
}

CMA_EXPORT int rdma_accept(rdma_cm_id* cid, rdma_conn_param* param) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  bool wait = false;
  {
    std::lock_guard<std::mutex> l(G().mu);
    const bool ud = id->id.qp_type == IBV_QPT_UD;
    const CmTransition* t = FindTransition(id->st, ud ? CmEvent::kAcceptUd : CmEvent::kAccept);
    if (!t) return Fail(EINVAL);
    size_t max_user = ud ? kSidrRepPdata : kRepPdata;
    if (param && param->private_data_len > max_user) return Fail(EINVAL);
    CmMsg m;
    if (param && param->private_data_len) std::memcpy(m.pdata, param->private_data, param->private_data_len);
    m.pdata_len = param ? param->private_data_len : 0;
    if (ud) {
      m.attr = kAttrSidrRep;
      m.local_comm_id = id->remote_comm_id;
      m.sidr_status = kSidrOk;
      m.qpn = id->id.qp ? id->id.qp->qp_num : (param ? param->qp_num : 0);
      m.qkey = RDMA_UDP_QKEY;
      m.service_id = (uint64_t(id->id.ps) << 16) | SinPort(id->id.route.addr.src_sin);
      SendMsg(id->sgid_index, id->dgid, m, id);
      Apply(id, *t);
      return 0;
    }
    id->resp_res = ClampRd(param ? param->responder_resources : kMaxRdAtomic);
    id->init_depth = ClampRd(param ? param->initiator_depth : kMaxRdAtomic);
    if (id->id.qp) {
      if (int rc = QpToRts(id)) return Fail(rc);
    }
    m.attr = kAttrRep;
    m.local_comm_id = id->local_comm_id;
    m.remote_comm_id = id->remote_comm_id;
    m.qpn = id->id.qp ? id->id.qp->qp_num : (param ? param->qp_num : 0);
    m.starting_psn = id->local_psn;
    m.responder_resources = id->resp_res;
    m.initiator_depth = id->init_depth;
    m.rnr_retry_count = param ? std::min<uint8_t>(param->rnr_retry_count, 7) : 7;
    m.flow_control = param ? param->flow_control : 1;
    m.srq = id->id.srq || (param && param->srq) ? 1 : 0;
    SendMsg(id->sgid_index, id->dgid, m, id);
    ArmTimer(id, Timer::kRep);
    Apply(id, *t);
    wait = id->sync;
  }
  return wait ? Complete(id) : 0;
}

static int RejectImpl(rdma_cm_id* cid, const void* pdata, uint8_t len) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  std::lock_guard<std::mutex> l(G().mu);
  const bool ud = id->id.qp_type == IBV_QPT_UD;
  const CmTransition* t = FindTransition(id->st, ud ? CmEvent::kRejectUd : CmEvent::kReject);
  if (!t) return Fail(EINVAL);
  CmMsg m;
  size_t max = ud ? kSidrRepPdata : kRejPdata;
  if (len > max) return Fail(EINVAL);
  if (len && pdata) std::memcpy(m.pdata, pdata, len);
  m.pdata_len = len;
  if (ud) {
    m.attr = kAttrSidrRep;
    m.local_comm_id = id->remote_comm_id;
    m.sidr_status = kSidrReject;
  } else {
    m.attr = kAttrRej;
    m.local_comm_id = id->local_comm_id;
    m.remote_comm_id = id->remote_comm_id;
    m.msg_rejected = 0;
    m.reason = kRejConsumer;
  }
  SendMsg(id->sgid_index, id->dgid, m, id);
  Apply(id, *t);
  return 0;
}

CMA_EXPORT int rdma_reject(rdma_cm_id* cid, const void* private_data, uint8_t private_data_len) {
  return RejectImpl(cid, private_data, private_data_len);
}

CMA_EXPORT int rdma_reject_ece(rdma_cm_id* cid, const void* private_data, uint8_t private_data_len) {
  return RejectImpl(cid, private_data, private_data_len);
}

CMA_EXPORT int rdma_notify(rdma_cm_id* cid, ibv_event_type) { return cid ? 0 : Fail(EINVAL); }

CMA_EXPORT int rdma_disconnect(rdma_cm_id* cid) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  std::lock_guard<std::mutex> l(G().mu);
  if (id->id.qp_type == IBV_QPT_UD) return 0;
  const CmTransition* t = FindTransition(id->st, CmEvent::kDisconnect);
  if (!t) return Fail(EINVAL);
  Apply(id, *t);  // stops a running timer first (REP Sent)
  // Like rdma-core, the application's QP goes to ERR so that its WRs flush,
  // also when the peer disconnected first or a DREQ is out already.
  QpToErr(id);
  if (t->action == CmAction::kDisconnectQp) {
    SendDreq(id, /*remember=*/true);
    ArmTimer(id, Timer::kDreq);
  }
  return 0;
}

CMA_EXPORT int rdma_init_qp_attr(rdma_cm_id* cid, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (!cid || !qp_attr || !qp_attr_mask) return Fail(EINVAL);
  std::lock_guard<std::mutex> l(G().mu);
  int rc = InitQpAttr(ToId(cid), qp_attr, qp_attr_mask);
  return rc ? Fail(rc) : 0;
}

CMA_EXPORT int rdma_set_option(rdma_cm_id* cid, int level, int optname, void* optval, size_t optlen) {
  if (!cid || (optlen && !optval)) return Fail(EINVAL);
  if (level == RDMA_OPTION_ID) {
    switch (optname) {
      case RDMA_OPTION_ID_TOS:
      case RDMA_OPTION_ID_ACK_TIMEOUT: {
        // Both take one byte (rdma_set_option(3)); they apply to the QP at its
        // next rdma_init_qp_attr, as the kernel's rdma_cm does. The QP's
        // timeout field has 5 bits (IBA 11.2.4.2, ibv_modify_qp(3)).
        if (optlen != sizeof(uint8_t)) return Fail(EINVAL);
        const uint8_t v = *static_cast<const uint8_t*>(optval);
        if (optname == RDMA_OPTION_ID_ACK_TIMEOUT && v > 31) return Fail(EINVAL);
        std::lock_guard<std::mutex> l(G().mu);
        (optname == RDMA_OPTION_ID_TOS ? ToId(cid)->tos : ToId(cid)->ack_timeout) = v;
        return 0;
      }
      case RDMA_OPTION_ID_REUSEADDR:
      case RDMA_OPTION_ID_AFONLY: return 0;  // accepted; binding is IPv4-only here
      default: return Fail(ENOSYS);
    }
  }
  if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) return 0;
  return Fail(ENOSYS);
}

CMA_EXPORT int rdma_migrate_id(rdma_cm_id* cid, rdma_event_channel* channel) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  Channel* c = channel ? ToChannel(channel) : NewChannel();
  if (!c) return -1;
  std::lock_guard<std::mutex> l(G().mu);
  Channel* old = id->chan;
  bool old_sync = id->sync;
  // Pending events of this id move with it.
  {
    std::scoped_lock ql(old->mu);
    for (auto it = old->q.begin(); it != old->q.end();) {
      if ((*it)->ev.id == cid) {
        Event* e = *it;
        it = old->q.erase(it);
        uint64_t v;
        (void)!read(old->ch.fd, &v, sizeof v);
        Push(c, e);
      } else {
        ++it;
      }
    }
  }
  id->chan = c;
  id->id.channel = &c->ch;
  id->sync = channel == nullptr;
  if (old_sync) FreeChannel(old);
  return 0;
}

CMA_EXPORT __be16 rdma_get_src_port(rdma_cm_id* cid) { return cid ? cid->route.addr.src_sin.sin_port : 0; }
CMA_EXPORT __be16 rdma_get_dst_port(rdma_cm_id* cid) { return cid ? cid->route.addr.dst_sin.sin_port : 0; }


CMA_EXPORT int rdma_set_local_ece(rdma_cm_id* cid, ibv_ece*) { return cid ? 0 : Fail(EINVAL); }
CMA_EXPORT int rdma_get_remote_ece(rdma_cm_id* cid, ibv_ece* ece) {
  if (!cid || !ece) return Fail(EINVAL);
  std::memset(ece, 0, sizeof(*ece));
  return 0;
}

CMA_EXPORT int rdma_create_ep(rdma_cm_id** out, rdma_addrinfo* res, ibv_pd* pd,
                              ibv_qp_init_attr* qp_init_attr) {
  if (!out || !res) return Fail(EINVAL);
  rdma_port_space ps = res->ai_port_space ? rdma_port_space(res->ai_port_space) : RDMA_PS_TCP;
  ibv_qp_type qpt = res->ai_qp_type ? ibv_qp_type(res->ai_qp_type)
                                    : (ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC);
  rdma_cm_id* cid = nullptr;
  if (CreateId2(nullptr, &cid, nullptr, ps, qpt) != 0) return -1;
  Id* id = ToId(cid);
  int rc = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    rc = rdma_bind_addr(cid, res->ai_src_addr);
    if (rc) goto err;
    if (qp_init_attr) {
      qp_init_attr->qp_type = qpt;
      id->has_ep_attr = true;
      id->ep_attr = *qp_init_attr;
      id->ep_pd = pd;
    }
    cid->pd = pd;
    *out = cid;
    return 0;
  }
  rc = rdma_resolve_addr(cid, res->ai_src_len ? res->ai_src_addr : nullptr, res->ai_dst_addr, 2000);
  if (rc) goto err;
  rc = rdma_resolve_route(cid, 2000);
  if (rc) goto err;
  if (qp_init_attr) {
    qp_init_attr->qp_type = qpt;
    rc = rdma_create_qp(cid, pd, qp_init_attr);
    if (rc) goto err;
  }
  if (pd && !cid->pd) cid->pd = pd;
  *out = cid;
  return 0;
err : {
  int e = errno;
  rdma_destroy_id(cid);
  errno = e;
  return -1;
}
}

CMA_EXPORT void rdma_destroy_ep(rdma_cm_id* cid) {
  if (!cid) return;
  if (cid->qp) rdma_destroy_qp(cid);
  if (cid->srq) rdma_destroy_srq(cid);
  rdma_destroy_id(cid);
}
