// The CM protocol of softrnic's librdmacm: CM MADs in and out of QP1 and the
// connection state they drive (IBA 12.6 and 12.9: REQ, REP, RTU, REJ, DREQ,
// DREP; 12.11 SIDR), for the ids of cma.cc, and the retransmission timers.
// Every state change goes through the transition table (cm_transitions.h):
// a handler finds the id a MAD is for, picks the event, and Apply does what
// the row says; an event without a row changes nothing.
//
// Who may change a connection (security review H2): a MAD is for one of our
// ids only if it names our communication ID, comes from the connection's
// peer address (the GID the REQ went to or came from), and, once the peer's
// ID is known, names that too (IBA 12.6.x: every message after the REQ
// carries both IDs; the kernel's cm_acquire_id(local, remote)). Anything
// else is counted (Cm::ignored_mads, a SOFTRNIC_CM_DEBUG line) and dropped.
// RoCE has no authentication: an attacker who can spoof the peer's address
// and learns both IDs can still end a connection; the IDs come from the
// kernel's CSPRNG (common/secure_random.h) so they are not learnt by
// prediction.
//
// Resources a remote host can make us spend (M3, L7): a listener's
// unclaimed requests are bounded by rdma_listen's backlog and reclaimed when
// nobody takes them; answers to MADs of no connection (REJ, DREP, SIDR_REP
// to any source address, which may be spoofed) are rate-limited.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/secure_random.h"
#include "rdmacm/cm_internal.h"

namespace softrnic::rdmacm {
namespace {

// rdma_listen's backlog when the application gives none (<= 0) or more:
// the kernel's default net.rdma_ucm.max_backlog.
constexpr int kMaxBacklog = 1024;
// Answers to MADs that match no connection (a REQ for a port nobody
// listens on, a DREQ for an unknown ID): at most this many per second,
// in bursts of as many. A spoofed source turns each into traffic to a
// victim of the attacker's choosing at 1:1 size; a real peer only needs the
// occasional one (and retransmits its REQ/DREQ anyway).
constexpr double kRepliesPerSecond = 100;

// A passive id whose CONNECT_REQUEST nobody took: reclaimed after twice the
// time a client retransmits its REQ before giving up (REQ + retries):
// the client is gone by then, or was never there (a forged REQ).
Clock::duration UnclaimedLifetime() {
  return 2 * std::chrono::milliseconds(RetryMs()) * (Retries() + 1);
}

bool ReplyAllowed(const char* why) {
  Cm& g = G();
  const auto now = Now();
  const double elapsed = std::chrono::duration<double>(now - g.reply_refill).count();
  g.reply_refill = now;
  g.reply_tokens = std::min(kRepliesPerSecond, g.reply_tokens + elapsed * kRepliesPerSecond);
  if (g.reply_tokens >= 1) {
    g.reply_tokens -= 1;
    return true;
  }
  ++g.replies_suppressed;
  CM_DBG("no answer (%s): over %g replies/s (%llu suppressed)", why, kRepliesPerSecond,
         (unsigned long long)g.replies_suppressed);
  return false;
}

Id* FindComm(uint32_t c) {
  auto it = G().by_comm.find(c);
  return it == G().by_comm.end() ? nullptr : it->second;
}

bool SamePeer(const Id* id, const ibv_gid& peer) { return std::memcmp(id->dgid.raw, peer.raw, 16) == 0; }

void Ignore(const CmMsg& m, const ibv_gid& peer, const char* why) {
  Cm& g = G();
  ++g.ignored_mads;
  CM_DBG("ignored %s from %s (comm %08x -> %08x): %s (%llu ignored)", CmAttrName(m.attr),
         GidStr(peer).c_str(), m.local_comm_id, m.remote_comm_id, why,
         (unsigned long long)g.ignored_mads);
}

// The id a REP, RTU, REJ, DREQ or DREP is for (`ours`: the MAD's remote comm
// ID, `theirs`: its local comm ID), or nullptr (counted) when it names none
// of ours, comes from another address than the connection's peer, or names
// another peer ID than the one the connection has. `theirs` is not checked
// while the peer's ID is still unknown (REP or REJ answering our REQ).
Id* FindConnection(const CmMsg& m, uint32_t ours, uint32_t theirs, const ibv_gid& peer) {
  Id* id = FindComm(ours);
  if (!id) {
    Ignore(m, peer, "unknown comm ID");
    return nullptr;
  }
  if (!SamePeer(id, peer)) {
    Ignore(m, peer, "not from the connection's peer");
    return nullptr;
  }
  if (id->remote_comm_id != 0 && theirs != id->remote_comm_id) {
    Ignore(m, peer, "wrong peer comm ID");
    return nullptr;
  }
  return id;
}

// The listener a REQ for (ps, port) addressed to `dst` goes to: the one
// bound to dst, else one bound to dst's family's wildcard or loopback (the
// kernel's cma_match_private_data, which compares the REQ's rdma_cm header
// with each listener's address). When neither exists, the port's first
// listener: the kernel would reject the REQ, but a listener took every REQ
// of its port here before listeners had addresses (rping -s without -a, an
// IPv4 wildcard, serves IPv6 clients in tests/integration/ipv6) and still
// does when it is alone.
Id* FindListener(int ps, uint16_t port, const sockaddr* dst) {
  auto it = G().listeners.find(ListenKey(ps, port));
  if (it == G().listeners.end() || it->second.empty()) return nullptr;
  Id* wildcard = nullptr;
  for (Id* l : it->second) {
    const sockaddr* a = &l->id.route.addr.src_addr;
    if (a->sa_family != dst->sa_family) continue;
    if (!AnyAddr(a) && SameAddr(a, dst)) return l;
    if (AnyAddr(a) && wildcard == nullptr) wildcard = l;
  }
  return wildcard != nullptr ? wildcard : it->second.front();
}

Id* FindChildByPeer(uint32_t remote_comm, const ibv_gid& peer) {
  auto it = G().by_peer.find(PeerKey(peer, remote_comm));
  return it == G().by_peer.end() ? nullptr : it->second;
}

void RejectUnknown(const CmMsg& req, int sgid, const ibv_gid& peer) {
  CmMsg r;
  r.attr = kAttrRej;
  r.tid = req.tid;
  r.remote_comm_id = req.local_comm_id;
  r.msg_rejected = 0;
  r.reason = kRejInvalidServiceId;
  SendMsg(sgid, peer, r);
}

void SendDrep(int sgid, const ibv_gid& peer, uint32_t local, uint32_t remote) {
  CmMsg r;
  r.attr = kAttrDrep;
  r.local_comm_id = local;
  r.remote_comm_id = remote;
  SendMsg(sgid, peer, r);
}

// Frees a passive id nobody claimed (its listener goes away, or its request
// aged out): its CONNECT_REQUEST leaves the listener's channel with it.
void DestroyUnclaimed(Id* c) {
  Cm& g = G();
  PurgeEvents(c->request_chan, c);
  ClaimRequest(c);
  StopTimer(c);
  ForgetId(c);
  g.ids.erase(c);
  if (c->sync) FreeChannel(c->chan);
  delete c;
}

}  // namespace

// The MAD goes to the CM's MAD port: QP1 (cm_qp1.cc), or a unit test's
// capture.
int SendRaw(int sgid_index, const ibv_gid& dgid, const uint8_t* mad) {
  Cm& g = G();
  return g.send_mad ? g.send_mad(sgid_index, dgid, mad) : ENODEV;
}

int SendMsg(int sgid_index, const ibv_gid& dgid, const CmMsg& m, Id* remember) {
  uint8_t buf[kMadSize];
  EncodeCm(m, buf);
  CM_DBG("send %s to %s (comm %08x -> %08x)", CmAttrName(m.attr), GidStr(dgid).c_str(),
         m.local_comm_id, m.remote_comm_id);
  if (remember) {
    std::memcpy(remember->last_mad, buf, kMadSize);
    remember->have_last = true;
  }
  return SendRaw(sgid_index, dgid, buf);
}

void SetTimer(Id* id, Timer t, Clock::time_point deadline) {
  Cm& g = G();
  if (id->timer != Timer::kNone) g.timers.erase({id->deadline, id});
  id->timer = t;
  id->deadline = deadline;
  if (t != Timer::kNone) g.timers.insert({deadline, id});
}

void ArmTimer(Id* id, Timer t) {
  id->retries_left = Retries();
  SetTimer(id, t, Now() + std::chrono::milliseconds(RetryMs()));
}

void StopTimer(Id* id) { SetTimer(id, Timer::kNone, Clock::time_point{}); }

Clock::time_point NextCmDeadline() {
  const Cm& g = G();
  Clock::time_point next = Clock::time_point::max();
  if (!g.timers.empty()) next = g.timers.begin()->first;
  if (!g.unclaimed.empty()) next = std::min(next, g.unclaimed.begin()->first + UnclaimedLifetime());
  for (const Cm::LingeringDreq& d : g.lingering) next = std::min(next, d.next);
  return next;
}

uint32_t NewCommId(Id* id) {
  Cm& g = G();
  uint32_t c;
  do {
    c = SecureRandom32();
    if (g.lane >= 0) c = (static_cast<uint32_t>(g.lane) << 24) | (c & 0xFFFFFF);
  } while (c == 0 || g.by_comm.count(c));
  g.by_comm[c] = id;
  id->local_comm_id = c;
  return c;
}

uint32_t NewPsn() { return SecureRandom32() & 0xffffff; }

void SendRtu(Id* id) {
  CmMsg r;
  r.attr = kAttrRtu;
  r.local_comm_id = id->local_comm_id;
  r.remote_comm_id = id->remote_comm_id;
  SendMsg(id->sgid_index, id->dgid, r);
}

namespace {
CmMsg Dreq(uint32_t local_comm_id, uint32_t remote_comm_id, uint32_t remote_qpn) {
  CmMsg m;
  m.attr = kAttrDreq;
  m.local_comm_id = local_comm_id;
  m.remote_comm_id = remote_comm_id;
  m.qpn = remote_qpn;
  return m;
}
}  // namespace

void SendDreq(Id* id, bool remember) {
  SendMsg(id->sgid_index, id->dgid, Dreq(id->local_comm_id, id->remote_comm_id, id->remote_qpn),
          remember ? id : nullptr);
}

void SendDreqTo(int sgid_index, const ibv_gid& dgid, uint32_t local_comm_id, uint32_t remote_comm_id,
                uint32_t remote_qpn) {
  SendMsg(sgid_index, dgid, Dreq(local_comm_id, remote_comm_id, remote_qpn));
}

void SendOrDefer(Id* id, const CmMsg& m, Timer t, bool defer) {
  id->invalid_sid_retries = kLookups;
  if (!defer) {
    SendMsg(id->sgid_index, id->dgid, m, id);
    ArmTimer(id, t);
    return;
  }
  EncodeCm(m, id->last_mad);
  id->have_last = true;
  id->pending_lookup = true;
  id->lookups_left = kLookups;
  SetTimer(id, t, Now() + std::chrono::milliseconds(kLookupMs));
}



void AddListener(Id* l, int backlog) {
  l->backlog = backlog > 0 && backlog < kMaxBacklog ? backlog : kMaxBacklog;
  G().listeners[ListenKey(l->id.ps, SinPort(l->id.route.addr.src_sin))].push_back(l);
}

bool OtherRegisteredListener(const Id* l) {
  const auto it = G().listeners.find(ListenKey(l->id.ps, SinPort(l->id.route.addr.src_sin)));
  if (it == G().listeners.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [l](const Id* o) { return o != l && o->registered; });
}

void ReleaseListener(Id* l) {
  Cm& g = G();
  // Only the unclaimed requests (at most the backlogs) are walked.
  std::vector<Id*> unclaimed;
  for (const auto& [at, c] : g.unclaimed)
    if (c->unclaimed_of == l) unclaimed.push_back(c);
  for (Id* c : unclaimed) DestroyUnclaimed(c);
}

void ClaimRequest(Id* c) {
  if (!c->unclaimed_of) return;
  G().unclaimed.erase({c->requested_at, c});
  --c->unclaimed_of->unclaimed_requests;
  c->unclaimed_of = nullptr;
  c->request_chan = nullptr;
}

void NotePort(Id* id) {
  Cm& g = G();
  if (id->port_key) {
    auto it = g.ports.find(id->port_key);
    if (it != g.ports.end()) {
      it->second.erase(id);
      if (it->second.empty()) g.ports.erase(it);
    }
    id->port_key = 0;
  }
  if (!id->bound) return;
  id->port_key = ListenKey(id->id.ps, SinPort(id->id.route.addr.src_sin));  // sin6_port: same offset
  g.ports[id->port_key].insert(id);
}

void ForgetId(Id* id) {
  Cm& g = G();
  StopTimer(id);
  ClaimRequest(id);
  id->bound = false;
  NotePort(id);
  auto erase_if_mine = [id](auto& map, auto key) {
    auto it = map.find(key);
    if (it != map.end() && it->second == id) map.erase(it);
  };
  if (id->local_comm_id) erase_if_mine(g.by_comm, id->local_comm_id);
  if (id->remote_comm_id) erase_if_mine(g.by_peer, PeerKey(id->dgid, id->remote_comm_id));
  if (id->st == St::kListen) {
    const auto it = g.listeners.find(ListenKey(id->id.ps, SinPort(id->id.route.addr.src_sin)));
    if (it != g.listeners.end()) {
      std::erase(it->second, id);
      if (it->second.empty()) g.listeners.erase(it);
    }
  }
}

void ReclaimUnclaimedRequests() {
  Cm& g = G();
  const auto cutoff = Now() - UnclaimedLifetime();
  std::vector<Id*> old;
  // Oldest first: only the ones due are looked at.
  for (auto it = g.unclaimed.begin(); it != g.unclaimed.end() && it->first < cutoff; ++it)
    old.push_back(it->second);
  for (Id* c : old) {
    ++g.reclaimed_requests;
    CM_DBG("request from %s never taken: reclaimed (%llu reclaimed)", GidStr(c->dgid).c_str(),
           (unsigned long long)g.reclaimed_requests);
    DestroyUnclaimed(c);
  }
}

namespace {

// The event a connection MAD is for the id it matched: the handler's
// classification, so that every outcome is one row of the table.
CmEvent Classify(const Id* id, const CmMsg& m) {
  switch (m.attr) {
    case kAttrRep: return id->id.qp ? CmEvent::kRep : CmEvent::kRepNoQp;
    case kAttrRtu: return CmEvent::kRtu;
    case kAttrRej:
      // The client's REQ may still find a listener being set up: see
      // kRetryReqSoon.
      return m.reason == kRejInvalidServiceId && id->invalid_sid_retries > 0 && id->have_last
                 ? CmEvent::kRejInvalidSid
                 : CmEvent::kRej;
    case kAttrDreq: return CmEvent::kDreq;
    case kAttrDrep: return CmEvent::kDrep;
    default:  // kAttrSidrRep
      return m.sidr_status == kSidrOk       ? CmEvent::kSidrRepOk
             : m.sidr_status == kSidrReject ? CmEvent::kSidrRepReject
                                            : CmEvent::kSidrRepFailed;
  }
}

// The peer's connection parameters from a REQ or REP, as the application
// sees them: the peer's responder resources are our initiator depth and
// the other way round (ib_cm's cm_format_req_event / cm_format_rep_event).
void SetConnParam(rdma_conn_param* p, const CmMsg& m) {
  p->responder_resources = m.initiator_depth;
  p->initiator_depth = m.responder_resources;
  p->flow_control = m.flow_control;
  p->rnr_retry_count = m.rnr_retry_count;
  p->srq = m.srq;
  p->qp_num = m.qpn;
}

// The event the application gets for row `t` on MAD `m`: the row's type and
// status, with what the MAD carries for it (private data, the REJ reason,
// the peer's connection or UD parameters). nullptr when the row delivers
// nothing.
Event* EventFor(Id* id, const CmTransition& t, const CmMsg& m) {
  if (t.deliver == kNoEvent) return nullptr;
  Event* e = NewEvent(id, rdma_cm_event_type(t.deliver), t.status);
  const bool established = t.deliver == RDMA_CM_EVENT_ESTABLISHED || t.deliver == RDMA_CM_EVENT_CONNECT_RESPONSE;
  if (m.attr == kAttrRep && established) {
    SetConnPdata(e, m.pdata, kRepPdata);
    SealHideBlock(e->pdata, kRepPdata);
    SetConnParam(&e->ev.param.conn, m);
  } else if (m.attr == kAttrRej) {
    // The QP is the application's: it moves it (rdma_disconnect) or destroys it,
    // possibly right now on its own thread, so the CM thread leaves it alone
    // (as rdma-core's librdmacm does).
    e->ev.status = m.reason;
    SetConnPdata(e, m.pdata, kRejPdata);
  } else if (m.attr == kAttrSidrRep) {
    if (t.deliver == RDMA_CM_EVENT_ESTABLISHED) {
      rdma_ud_param& u = e->ev.param.ud;
      u.qp_num = m.qpn;
      u.qkey = m.qkey;
      u.ah_attr.is_global = 1;
      u.ah_attr.grh.dgid = id->dgid;
      u.ah_attr.grh.sgid_index = uint8_t(id->sgid_index);
      u.ah_attr.grh.hop_limit = 64;
      u.ah_attr.port_num = 1;
    }
    std::memcpy(e->pdata, m.pdata, kSidrRepPdata);
    e->ev.param.ud.private_data = e->pdata;
    e->ev.param.ud.private_data_len = uint8_t(kSidrRepPdata);
  }
  return e;
}

// The one path of every MAD of an existing connection (REP, RTU, REJ, DREQ,
// DREP, SIDR_REP): the id it names (FindConnection: our comm ID, the
// connection's peer address, the peer's comm ID once known), the row for
// the id's state, the row's action, the transition with its event.
// `ours` / `theirs`: the MAD's comm IDs naming us and the peer.
void OnConnectionMad(const CmMsg& m, const ibv_gid& peer, uint32_t ours, uint32_t theirs) {
  Id* id = FindConnection(m, ours, theirs, peer);
  if (!id) return;
  if (m.attr == kAttrSidrRep && id->id.qp_type != IBV_QPT_UD) return;  // not a SIDR id
  const CmTransition* t = Expect(id, Classify(id, m));
  if (!t) return;
  t = RunCmAction(id, *t, m);
  Apply(id, *t, EventFor(id, *t, m));
}

void HandleReq(const CmMsg& m, int sgid, const ibv_gid& peer, const ibv_gid& local) {
  Cm& g = G();
  bool sidr = m.attr == kAttrSidrReq;
  if (Id* dup = FindChildByPeer(m.local_comm_id, peer)) {  // a retransmitted REQ
    if (const CmTransition* t = Expect(dup, CmEvent::kReqDup)) RunCmAction(dup, *t, m);
    return;
  }
  int ps = int((m.service_id >> 16) & 0xffff);
  uint16_t port = uint16_t(m.service_id & 0xffff);
  // The addresses from rdma_cm's IP header (the peer's view), else from the
  // packet. IPv6 (issue 15) when the header says IP version 6 or the peer
  // has no IPv4 GID: sockaddr_in6 on both sides, as the kernel's rdma_cm
  // reports such a connection.
  const CmaHdr h = DecodeCmaHdr(m.pdata);
  const bool ipv6 = h.ipv6 || !GidIsIpv4(peer);
  static constexpr uint8_t kZero[16] = {};
  sockaddr_storage req_dst{}, req_src{};
  if (ipv6) {
    sockaddr_in6 s{}, d{};
    s.sin6_family = d.sin6_family = AF_INET6;
    s.sin6_port = htons(port);
    std::memcpy(&s.sin6_addr, h.ipv6 && std::memcmp(h.dst6, kZero, 16) ? h.dst6 : local.raw, 16);
    d.sin6_port = h.src_port;
    std::memcpy(&d.sin6_addr, h.ipv6 && std::memcmp(h.src6, kZero, 16) ? h.src6 : peer.raw, 16);
    std::memcpy(&req_dst, &s, sizeof s);
    std::memcpy(&req_src, &d, sizeof d);
  } else {
    sockaddr_in s{}, d{};
    s.sin_family = d.sin_family = AF_INET;
    s.sin_port = htons(port);
    s.sin_addr.s_addr = h.dst_addr ? h.dst_addr : htonl(IpFromGid(local.raw));
    d.sin_port = h.src_port;
    d.sin_addr.s_addr = h.src_addr ? h.src_addr : htonl(IpFromGid(peer.raw));
    std::memcpy(&req_dst, &s, sizeof s);
    std::memcpy(&req_src, &d, sizeof d);
  }
  Id* l = FindListener(ps, port, reinterpret_cast<const sockaddr*>(&req_dst));
  if (!l) {
    CM_DBG("no listener for ps %x port %u", ps, port);
    if (!ReplyAllowed("no listener")) return;
    if (sidr) {
      CmMsg r;
      r.attr = kAttrSidrRep;
      r.tid = m.tid;
      r.local_comm_id = m.local_comm_id;
      r.sidr_status = kSidrUnsupported;
      r.service_id = m.service_id;
      SendMsg(sgid, peer, r);
    } else {
      RejectUnknown(m, sgid, peer);
    }
    return;
  }
  // rdma_listen's backlog bounds the requests the application has not taken
  // yet (the kernel's ucma: a CONNECT_REQUEST beyond it is dropped). Dropped
  // without a REJ: a real client retransmits its REQ and gets in once the
  // application takes a request, a forged one costs nothing and is not
  // reflected.
  if (l->unclaimed_requests >= l->backlog) {
    ++g.backlog_drops;
    CM_DBG("REQ from %s dropped: backlog of %d full (%llu dropped)", GidStr(peer).c_str(),
           l->backlog, (unsigned long long)g.backlog_drops);
    return;
  }
  Channel* chan = l->chan;
  if (l->sync) {
    chan = NewChannel();
    if (!chan) return;
  }
  Id* c = NewIdLocked(chan, l->id.context, l->id.ps, l->id.qp_type);
  c->sync = l->sync;
  AttachDevice(c);
  c->bound = true;
  c->sgid_index = sgid;
  c->dgid = peer;
  c->remote_comm_id = m.local_comm_id;
  c->remote_qpn = m.qpn;
  c->remote_psn = m.starting_psn;
  c->retry_cnt = m.retry_count;
  c->rnr_retry = m.rnr_retry_count;
  // The requester's path MTU, as the kernel's CM takes it from the REQ; a
  // value outside 256..4096 (no valid requester sends one) gets the default.
  c->path_mtu = m.mtu >= IBV_MTU_256 && m.mtu <= IBV_MTU_4096 ? m.mtu : uint8_t{IBV_MTU_1024};
  c->local_psn = NewPsn();
  NewCommId(c);
  g.by_peer[PeerKey(peer, c->remote_comm_id)] = c;
  c->unclaimed_of = l;
  c->request_chan = l->chan;
  c->requested_at = Now();
  g.unclaimed.insert({c->requested_at, c});
  ++l->unclaimed_requests;
  std::memcpy(&c->id.route.addr.src_storage, &req_dst, sizeof req_dst);
  std::memcpy(&c->id.route.addr.dst_storage, &req_src, sizeof req_src);
  c->id.route.addr.addr.ibaddr.sgid.global.interface_id = 0;
  if (sgid >= 0) {
    const ibv_gid sg = LocalGid(sgid);
    c->id.route.addr.addr.ibaddr.sgid = sg;
  }
  c->id.route.addr.addr.ibaddr.dgid = peer;
  c->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
  NotePort(c);

  const CmTransition* t = FindTransition(c->st, CmEvent::kReq);  // a new id: always there
  Event* e = NewEvent(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
  e->ev.listen_id = &l->id;
  if (sidr) {
    size_t n = kSidrReqPdata - kCmaHdr;
    std::memcpy(e->pdata, m.pdata + kCmaHdr, n);
    e->ev.param.ud.private_data = e->pdata;
    e->ev.param.ud.private_data_len = uint8_t(n);
    ibv_ah_attr& ah = e->ev.param.ud.ah_attr;
    ah.is_global = 1;
    ah.grh.dgid = peer;
    ah.grh.sgid_index = uint8_t(sgid);
    ah.grh.hop_limit = 64;
    ah.port_num = 1;
  } else {
    SealNoteOffer(c, m);
    SetConnPdata(e, m.pdata + kCmaHdr, kReqPdata - kCmaHdr);
    SealHideBlock(e->pdata, kReqPdata - kCmaHdr);
    SetConnParam(&e->ev.param.conn, m);
    e->ev.param.conn.retry_count = m.retry_count;  // a REP carries none
  }
  // The CONNECT_REQUEST goes to the listener's channel (Deliver: for a
  // synchronous listener, rdma_get_request picks it up there).
  Apply(c, *t, e);
}

}  // namespace

const CmTransition* Expect(Id* id, CmEvent ev) {
  const CmTransition* t = FindTransition(id->st, ev);
  if (!t) {
    Cm& g = G();
    ++g.unexpected_events;
    CM_DBG("%s in state %s: no transition, dropped (%llu unexpected)", CmEventName(ev), StName(id->st),
           (unsigned long long)g.unexpected_events);
  }
  return t;
}

void Apply(Id* id, const CmTransition& t, Event* e) {
  if (t.stop_timer) StopTimer(id);
  // Entering TimeWait (IBA 12.9: after the DREP, a DREQ answered, or the
  // DREQ's retries): its timer runs, and kTimeWaitOver follows. An id
  // destroyed meanwhile takes its timer with it (ForgetId).
  if (t.next == St::kDisconnected && id->st != St::kDisconnected)
    SetTimer(id, Timer::kTimeWait, Now() + std::chrono::milliseconds(TimeWaitMs()));
  id->st = t.next;
  if (t.deliver == kNoEvent) {
    delete e;
    return;
  }
  Deliver(id, e ? e : NewEvent(id, rdma_cm_event_type(t.deliver), t.status));
}

void Apply(Id* id, const CmTransition& t, int status) {
  Apply(id, t, t.deliver == kNoEvent ? nullptr : NewEvent(id, rdma_cm_event_type(t.deliver), status));
}

const CmTransition* RunCmAction(Id* id, const CmTransition& t, const CmMsg& m) {
  switch (t.action) {
    case CmAction::kTakeRep: {
      id->remote_comm_id = m.local_comm_id;
      id->remote_qpn = m.qpn;
      id->remote_psn = m.starting_psn;
      id->rnr_retry = m.rnr_retry_count;
      // Our initiator depth cannot exceed what the peer will serve.
      id->init_depth = std::min(id->init_depth, m.responder_resources);
      if (!id->id.qp) return &t;
      if (SealTakeAnswer(id, m) != 0) {  // before RTR
        const CmTransition* refused = FindTransition(id->st, CmEvent::kRepSealRefused);
        return refused ? RunCmAction(id, *refused, m) : &t;
      }
      if (QpToRts(id) != 0) {
        const CmTransition* failed = FindTransition(id->st, CmEvent::kRepQpFailed);
        return failed ? RunCmAction(id, *failed, m) : &t;
      }
      SendRtu(id);
      return &t;
    }
    case CmAction::kTakeSidrRep:
      id->remote_qpn = m.qpn;
      id->remote_qkey = m.qkey;
      return &t;
    case CmAction::kSendRtu: SendRtu(id); return &t;
    case CmAction::kResendReply:
      if (id->have_last) SendRaw(id->sgid_index, id->dgid, id->last_mad);
      return &t;
    case CmAction::kRejectRep:
    case CmAction::kRefuseUnsealedRep: {
      CmMsg r;
      r.attr = kAttrRej;
      r.local_comm_id = id->local_comm_id;
      r.remote_comm_id = id->remote_comm_id;
      r.msg_rejected = 1;
      r.reason = kRejConsumer;
      if (t.action == CmAction::kRefuseUnsealedRep) {  // the peer's application learns why
        std::memcpy(r.pdata, kSealRefusal, sizeof kSealRefusal);
        r.pdata_len = sizeof kSealRefusal;
      }
      SendMsg(id->sgid_index, id->dgid, r);
      return &t;
    }
    case CmAction::kRetryReqSoon:
      // The listener may be just being set up (perftest closes its first
      // listener and opens the next one right after its handshake): try
      // again shortly, for about a second, before reporting REJECTED.
      --id->invalid_sid_retries;
      id->retries_left = std::max(id->retries_left, 1);
      SetTimer(id, Timer::kReq, Now() + std::chrono::milliseconds(kLookupMs));
      return &t;
    case CmAction::kSendDrep: SendDrep(id->sgid_index, id->dgid, id->local_comm_id, id->remote_comm_id); return &t;
    case CmAction::kSendDreqOnce: SendDreq(id, /*remember=*/false); return &t;
    case CmAction::kNone:
    case CmAction::kSendReq:
    case CmAction::kSendRep:
    case CmAction::kSendSidrRep:
    case CmAction::kSendRej:
    case CmAction::kDisconnectQp:
    case CmAction::kQpToErr: return &t;  // done by the rdma_* call
  }
  return &t;
}

void HandleMad(const uint8_t* buf, size_t len) {
  if (len < kGrh + kMadSize) return;
  ibv_gid peer{}, local{};
  if ((buf[0] >> 4) == 6) {
    // IPv6 source (issue 15): the whole 40-byte IPv6 header is the GRH area
    // (source address at 8, destination at 24).
    std::memcpy(peer.raw, buf + 8, 16);
    std::memcpy(local.raw, buf + 24, 16);
  } else {
    // IPv4 source: the IPv4 header sits in GRH bytes 20..39.
    uint32_t src_ip, dst_ip;
    std::memcpy(&src_ip, buf + 32, 4);
    std::memcpy(&dst_ip, buf + 36, 4);
    SetGidFromIp(&peer, ntohl(src_ip));
    SetGidFromIp(&local, ntohl(dst_ip));
  }
  CmMsg m;
  if (!DecodeCm(buf + kGrh, len - kGrh, &m)) return;
  int sgid = GidIndexForGid(local);
  if (sgid < 0) sgid = G().loop_idx >= 0 ? G().loop_idx : 0;
  CM_DBG("recv %s from %s (comm %08x -> %08x)", CmAttrName(m.attr), GidStr(peer).c_str(),
         m.local_comm_id, m.remote_comm_id);
  switch (m.attr) {
    case kAttrReq:
    case kAttrSidrReq: HandleReq(m, sgid, peer, local); break;
    case kAttrDreq:
      if (!FindComm(m.remote_comm_id)) {
        // Our DREP was lost and the connection is gone here (IBA 12.9.6:
        // answer a DREQ for an unknown connection anyway), or a forgery:
        // rate-limited.
        Ignore(m, peer, "unknown comm ID");
        if (ReplyAllowed("DREQ for no connection")) SendDrep(sgid, peer, m.remote_comm_id, m.local_comm_id);
        break;
      }
      OnConnectionMad(m, peer, m.remote_comm_id, m.local_comm_id);
      break;
    case kAttrDrep:
      // The answer to the DREQ of an id destroyed meanwhile (cm_linger.cc).
      if (TakeLingeringDrep(m.remote_comm_id, m.local_comm_id, peer)) break;
      OnConnectionMad(m, peer, m.remote_comm_id, m.local_comm_id);
      break;
    case kAttrRep:
    case kAttrRtu:
    case kAttrRej: OnConnectionMad(m, peer, m.remote_comm_id, m.local_comm_id); break;
    // SIDR_REP carries only our request ID (IBA 12.11.2): the peer address
    // is the rest of the match.
    case kAttrSidrRep: OnConnectionMad(m, peer, m.local_comm_id, 0); break;
    default: break;  // MRA: our timers are generous enough
  }
}

void RunTimers() {
  Cm& g = G();
  const auto now = Now();
  ResendLingeringDreqs(now, /*all=*/false);
  // Only the due ones (Cm::timers is ordered by deadline). Each is taken
  // off the front before it is handled: handling re-arms it (later) or
  // stops it, and may stop or destroy nothing else.
  while (!g.timers.empty() && g.timers.begin()->first <= now) {
    Id* id = g.timers.begin()->second;
    if (id->timer == Timer::kTimeWait) {
      StopTimer(id);
      if (const CmTransition* t = Expect(id, CmEvent::kTimeWaitOver)) Apply(id, *t);
      continue;
    }
    if (id->pending_lookup) {
      long pid;
      uint32_t lip;
      if (RegRead(id->id.ps, SinPort(id->id.route.addr.dst_sin), &pid, &lip)) {
        id->pending_lookup = false;
        SetGidFromIp(&id->dgid, lip);
        id->id.route.addr.addr.ibaddr.dgid = id->dgid;
        if (id->id.route.path_rec) id->id.route.path_rec->dgid = id->dgid;
        if (id->id.qp_type != IBV_QPT_UD) SetReqPrimaryDgid(id->last_mad, id->dgid.raw);
        SendRaw(id->sgid_index, id->dgid, id->last_mad);
        ArmTimer(id, id->timer);
      } else if (--id->lookups_left > 0) {
        SetTimer(id, id->timer, now + std::chrono::milliseconds(kLookupMs));
      } else {
        // Nobody on this host listens on the port: what the destination's
        // CM answers (REJ, invalid service ID), without a round trip.
        id->pending_lookup = false;
        StopTimer(id);
        const bool ud = id->id.qp_type == IBV_QPT_UD;
        if (const CmTransition* t = Expect(id, ud ? CmEvent::kLookupFailedUd : CmEvent::kLookupFailed))
          Apply(id, *t);
      }
      continue;
    }
    if (id->retries_left > 0 && id->have_last) {
      --id->retries_left;
      SetTimer(id, id->timer, now + std::chrono::milliseconds(RetryMs()));
      CM_DBG("retransmit %s to %s", CmAttrName(MadAttr(id->last_mad)), GidStr(id->dgid).c_str());
      SendRaw(id->sgid_index, id->dgid, id->last_mad);
      continue;
    }
    // Retries exhausted. The QP is the application's: it moves it
    // (rdma_disconnect) or destroys it, possibly right now on its own
    // thread, so the CM thread leaves it alone (as rdma-core's librdmacm
    // does).
    const Timer t = id->timer;
    StopTimer(id);
    const CmEvent ev = t == Timer::kRep    ? CmEvent::kRepTimeout
                       : t == Timer::kDreq ? CmEvent::kDreqTimeout
                                           : CmEvent::kReqTimeout;
    if (const CmTransition* tr = Expect(id, ev)) Apply(id, *tr);
  }
}

}  // namespace softrnic::rdmacm
