// softrnic's rdma_cm: the librdmacm API over softrnic's libibverbs.so.1.
//
// Connection management is done in user space by this library, the way the
// kernel's ib_cm + rdma_cm do it for a hardware RNIC: IBA CM MADs (REQ, REP,
// RTU, REJ, DREQ, DREP, SIDR_REQ, SIDR_REP; mad.h) carried as UD SENDs on the
// device's QP1 (Q_Key 0x80010000), with rdma_cm's IP header in the REQ private
// data. A CM thread per process receives MADs from QP1 and drives retries and
// timeouts. See docs/rdmacm.md for the design and its limits. This file is
// the rdma_* calls on ids, channels and connections; cm_internal.h has the
// map of the other files (addresses, endpoints, protocol, QP1, state,
// events).
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
#include <thread>

#include "common/secure_random.h"
#include "log/log.h"
#include "rdmacm/cm_internal.h"
#include "rdmacm/mad.h"

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
  Event* e = reinterpret_cast<Event*>(event);
  if (e->out) e->out->fetch_sub(1, std::memory_order_release);
  delete e;
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

namespace softrnic::rdmacm {
int CreateId(rdma_event_channel* channel, rdma_cm_id** out, void* context, rdma_port_space ps,
             ibv_qp_type qpt) {
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
}  // namespace softrnic::rdmacm

CMA_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                              rdma_port_space ps) {
  ibv_qp_type qpt = (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ? IBV_QPT_UD : IBV_QPT_RC;
  return CreateId(channel, id, context, ps, qpt);
}

CMA_EXPORT int rdma_destroy_id(rdma_cm_id* cid) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  if (id->id.event) {  // a synchronous id's last event is ours to ack
    rdma_ack_cm_event(id->id.event);
    id->id.event = nullptr;
  }
  // Events of this id handed out and not acknowledged yet: another thread
  // may be handling one (libiscsi's CM thread read the id after its owner
  // destroyed it). librdmacm waits for them without a limit; a program that
  // never acks would hang there, so this waits kDestroyAckWait and then
  // goes on, saying so (a late ack only updates the shared count).
  const auto until = std::chrono::steady_clock::now() + kDestroyAckWait;
  while (id->events_out->load(std::memory_order_acquire) > 0 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (const int left = id->events_out->load(std::memory_order_acquire); left > 0)
    SOFTRNIC_LOG(kWarn, "rdma_destroy_id: %d event(s) of the id not acknowledged after %lld ms",
                 left, static_cast<long long>(kDestroyAckWait.count()));
  {
    std::lock_guard<std::mutex> l(G().mu);
    Cm& g = G();
    const bool rc_conn = id->id.qp_type != IBV_QPT_UD;
    // The peer hears of it (the table: a DREQ for a connection, a REJ for
    // a request not answered yet), as from the kernel CM when an id goes.
    const CmTransition* t = FindTransition(id->st, rc_conn ? CmEvent::kDestroy : CmEvent::kDestroyUd);
    if (t && t->action == CmAction::kSendDreqOnce) {
      SendDreq(id, /*remember=*/false);
      LingerDreq(id);
    } else if (id->st == St::kDreqSent) {
      LingerDreq(id);  // rdma_disconnect's DREQ, not answered yet
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
    if (id->registered && !OtherRegisteredListener(id))
      RegRemove(id->id.ps, SinPort(id->id.route.addr.src_sin));
    if (id->st == St::kListen) ReleaseListener(id);
    ForgetId(id);
    g.ids.erase(id);
    // Its unread events go with it (M6): none may reach the application
    // naming freed memory.
    if (!id->sync) PurgeEvents(id->chan, id);
  }
  free(id->id.route.path_rec);
  if (id->sync) FreeChannel(id->chan);
  delete id;
  return 0;
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
        if (int rc = SealOffer(id, &m, param ? param->private_data_len : 0)) return Fail(rc);
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
        m.mtu = id->path_mtu;
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
  if (id->reuseaddr) {
    if (int rc = CheckListenPort(id)) return Fail(rc);
    id->reuseaddr = false;
  }
  // The host registry and the host NIC know a port, not an address: the
  // port's first listener of this process claims it there, its last
  // releases it (rdma_destroy_id).
  uint16_t port = SinPort(id->id.route.addr.src_sin);
  if (!OtherRegisteredListener(id))
    if (int rc = RegAdd(id->id.ps, port)) return Fail(rc);
  id->registered = true;
  Apply(id, *FindTransition(id->st, CmEvent::kListen));  // a row in every state but Listen
  AddListener(id, backlog);
  return 0;
}

// A REJ (or UD's SIDR_REP reject) to the peer's request: rdma_reject,
// and rdma_accept when sealed RC refuses the peer. G().mu is held.
static int RejectLocked(Id* id, const void* pdata, size_t len) {
  const bool ud = id->id.qp_type == IBV_QPT_UD;
  const CmTransition* t = FindTransition(id->st, ud ? CmEvent::kRejectUd : CmEvent::kReject);
  if (!t) return EINVAL;
  CmMsg m;
  size_t max = ud ? kSidrRepPdata : kRejPdata;
  if (len > max) return EINVAL;
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
    if (int rc = SealAnswer(id, &m, param ? param->private_data_len : 0)) {  // before RTR
      // Refused (require, a plain peer): the peer learns it from a REJ
      // that says why, the application from the EACCES (docs/sealed.md).
      RejectLocked(id, kSealRefusal, sizeof kSealRefusal);
      return Fail(rc);
    }
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
  std::lock_guard<std::mutex> l(G().mu);
  int rc = RejectLocked(ToId(cid), pdata, len);
  return rc ? Fail(rc) : 0;
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
      case RDMA_OPTION_ID_AFONLY: {
        // An int each (librdmacm passes the kernel's ucma an int). AFONLY
        // before the id listens or connects (the kernel's rdma_set_afonly:
        // idle or bound); REUSEADDR on, in any state but listening, off only
        // before a bind (rdma_set_reuseaddr).
        if (optlen != sizeof(int)) return Fail(EINVAL);
        int value = 0;
        std::memcpy(&value, optval, sizeof value);
        const bool on = value != 0;
        std::lock_guard<std::mutex> l(G().mu);
        Id* id = ToId(cid);
        if (optname == RDMA_OPTION_ID_AFONLY) {
          if (id->st != St::kIdle) return Fail(EINVAL);
          id->afonly = on;
          id->afonly_set = true;
          return 0;
        }
        if (!(on && id->st != St::kListen) && !(id->st == St::kIdle && !id->bound))
          return Fail(EINVAL);
        id->reuseaddr = on;
        return 0;
      }
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
