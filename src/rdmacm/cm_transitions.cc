// The CM transition table (cm_transitions.h), built once, in the style of
// src/engine/queues/qp_control.cc's BuildTransitionTable.
#include "rdmacm/cm_transitions.h"

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "rdmacm/mad.h"

namespace softrnic::rdmacm {
namespace {

struct CmTable {
  CmTransition t[kStates][kCmEvents];
};

constexpr St kAllStates[] = {St::kIdle,      St::kAddrResolved, St::kRouteResolved, St::kListen,
                             St::kReqSent,   St::kRepRcvd,      St::kReqRcvd,        St::kRepSent,
                             St::kConnected, St::kDreqSent,     St::kDisconnected,   St::kRejected,
                             St::kError};
static_assert(sizeof kAllStates / sizeof kAllStates[0] == kStates);

// One row, filled in by chained setters: Row(from, ev, to).Stop().Deliver(...)...
class RowRef {
 public:
  explicit RowRef(CmTransition* t) : t_(t) {}
  RowRef& Stop() {
    t_->stop_timer = true;
    return *this;
  }
  RowRef& Deliver(rdma_cm_event_type e, int status = 0) {
    t_->deliver = e;
    t_->status = status;
    return *this;
  }
  RowRef& Do(CmAction a) {
    t_->action = a;
    return *this;
  }
  RowRef& Spec(const char* s) {
    t_->spec = s;
    return *this;
  }

 private:
  CmTransition* t_;
};

CmTable BuildTransitionTable() {
  CmTable table;
  const auto row = [&table](St from, CmEvent ev, St to) {
    CmTransition& t = table.t[static_cast<int>(from)][static_cast<int>(ev)];
    t = CmTransition{};
    t.valid = true;
    t.next = to;
    return RowRef(&t);
  };
  using E = CmEvent;
  using A = CmAction;

  // ---- Address and route (rdma_cm, no IBA state): resolve_addr is taken
  // in any state, as librdmacm passes it to the kernel unchecked; a failed
  // resolution leaves the state as it was.
  for (St s : kAllStates) {
    row(s, E::kResolveAddr, St::kAddrResolved).Deliver(RDMA_CM_EVENT_ADDR_RESOLVED).Spec("rdma_resolve_addr(3)");
    row(s, E::kAddrError, s).Deliver(RDMA_CM_EVENT_ADDR_ERROR).Spec("rdma_resolve_addr(3)");
    if (s != St::kListen) row(s, E::kListen, St::kListen).Spec("rdma_listen(3)");
  }
  for (St s : {St::kAddrResolved, St::kRouteResolved})
    row(s, E::kResolveRoute, St::kRouteResolved).Deliver(RDMA_CM_EVENT_ROUTE_RESOLVED).Spec("rdma_resolve_route(3)");

  // ---- Active side: Idle -> REQ Sent -> (REP Rcvd ->) Established (12.9).
  row(St::kRouteResolved, E::kConnect, St::kReqSent).Do(A::kSendReq).Spec("12.6.5 REQ");
  row(St::kRouteResolved, E::kConnectUd, St::kReqSent).Do(A::kSendReq).Spec("12.11 SIDR_REQ");
  row(St::kReqSent, E::kRep, St::kConnected)
      .Stop().Do(A::kTakeRep).Deliver(RDMA_CM_EVENT_ESTABLISHED).Spec("12.6.8 REP, 12.6.9 RTU");
  row(St::kReqSent, E::kRepNoQp, St::kRepRcvd)
      .Stop().Do(A::kTakeRep).Deliver(RDMA_CM_EVENT_CONNECT_RESPONSE).Spec("12.6.8 REP");
  row(St::kReqSent, E::kRepQpFailed, St::kError)
      .Stop().Do(A::kRejectRep).Deliver(RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL).Spec("12.6.7 REJ to a REP");
  // Sealed RC under require: the peer's REP carries no answer to our offer
  // (a plain peer). Refused: REJ with the reason as private data.
  row(St::kReqSent, E::kRepSealRefused, St::kError)
      .Stop().Do(A::kRefuseUnsealedRep).Deliver(RDMA_CM_EVENT_CONNECT_ERROR, -EACCES).Spec("12.6.7 REJ to a REP");
  row(St::kRepRcvd, E::kEstablish, St::kConnected).Do(A::kSendRtu).Spec("12.6.9 RTU");
  // A REP again: our RTU was lost (the peer is still in REP Sent).
  row(St::kConnected, E::kRep, St::kConnected).Do(A::kSendRtu).Spec("12.6.9 RTU");
  row(St::kConnected, E::kRepNoQp, St::kConnected).Do(A::kSendRtu).Spec("12.6.9 RTU");
  row(St::kReqSent, E::kReqTimeout, St::kError)
      .Stop().Deliver(RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT).Spec("12.9 REQ Sent: timeout");
  // A same-host destination whose listener never registered: what its CM
  // would answer (REJ, invalid service ID), without a round trip.
  row(St::kReqSent, E::kLookupFailed, St::kRejected)
      .Stop().Deliver(RDMA_CM_EVENT_REJECTED, kRejInvalidServiceId).Spec("12.6.7 REJ reason 8");
  row(St::kReqSent, E::kLookupFailedUd, St::kRejected)
      .Stop().Deliver(RDMA_CM_EVENT_UNREACHABLE, -ECONNREFUSED).Spec("12.6.13 SIDR_REP");
  // SIDR (UD): SIDR_REQ Sent -> Idle with the peer's QPN and Q_Key.
  row(St::kReqSent, E::kSidrRepOk, St::kConnected)
      .Stop().Do(A::kTakeSidrRep).Deliver(RDMA_CM_EVENT_ESTABLISHED).Spec("12.6.13 SIDR_REP");
  row(St::kReqSent, E::kSidrRepReject, St::kRejected)
      .Stop().Deliver(RDMA_CM_EVENT_REJECTED, kRejConsumer).Spec("12.6.13 SIDR_REP");
  row(St::kReqSent, E::kSidrRepFailed, St::kRejected)
      .Stop().Deliver(RDMA_CM_EVENT_UNREACHABLE, -EPROTONOSUPPORT).Spec("12.6.13 SIDR_REP");

  // ---- Passive side: Listen -> (new id) REQ Rcvd -> REP Sent -> Established.
  row(St::kIdle, E::kReq, St::kReqRcvd).Deliver(RDMA_CM_EVENT_CONNECT_REQUEST).Spec("12.6.5 REQ");
  row(St::kReqRcvd, E::kAccept, St::kRepSent).Do(A::kSendRep).Spec("12.6.8 REP");
  row(St::kReqRcvd, E::kAcceptUd, St::kConnected).Do(A::kSendSidrRep).Spec("12.6.13 SIDR_REP");
  row(St::kReqRcvd, E::kReject, St::kRejected).Do(A::kSendRej).Spec("12.6.7 REJ");
  row(St::kReqRcvd, E::kRejectUd, St::kRejected).Do(A::kSendRej).Spec("12.6.13 SIDR_REP");
  row(St::kRepSent, E::kRtu, St::kConnected).Stop().Deliver(RDMA_CM_EVENT_ESTABLISHED).Spec("12.6.9 RTU");
  row(St::kRepSent, E::kRepTimeout, St::kError)
      .Stop().Deliver(RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT).Spec("12.9 REP Sent: timeout");
  // The same REQ again: its sender missed our answer, which goes again.
  for (St s : {St::kRepSent, St::kConnected, St::kRejected})
    row(s, E::kReqDup, s).Do(A::kResendReply).Spec("12.9 duplicate REQ");

  // ---- Rejection: the REQ or the REP refused (12.6.7).
  for (St s : {St::kReqSent, St::kRepSent, St::kRepRcvd}) {
    row(s, E::kRej, St::kRejected).Stop().Deliver(RDMA_CM_EVENT_REJECTED).Spec("12.6.7 REJ");
    if (s != St::kReqSent)
      row(s, E::kRejInvalidSid, St::kRejected).Stop().Deliver(RDMA_CM_EVENT_REJECTED).Spec("12.6.7 REJ");
  }
  // Invalid service ID while the listener may be just being set up
  // (perftest reopens its listener right after a handshake): the REQ goes
  // again after kLookupMs, for about a second, before REJECTED.
  row(St::kReqSent, E::kRejInvalidSid, St::kReqSent).Do(A::kRetryReqSoon).Spec("12.6.7 REJ reason 8");

  // ---- Release: Established -> DREQ Sent -> TimeWait (12.9), DREQ Rcvd.
  for (St s : {St::kConnected, St::kRepSent, St::kRepRcvd}) {
    row(s, E::kDisconnect, St::kDreqSent).Stop().Do(A::kDisconnectQp).Spec("12.6.10 DREQ");
    // rdma_destroy_id tells the peer, as the kernel CM does when an id goes.
    row(s, E::kDestroy, St::kDisconnected).Do(A::kSendDreqOnce).Spec("12.6.10 DREQ");
  }
  // Already disconnecting or disconnected by the peer: like rdma-core, the
  // application's QP still goes to ERR so that its WRs flush.
  for (St s : {St::kDreqSent, St::kDisconnected}) row(s, E::kDisconnect, s).Do(A::kQpToErr).Spec("rdma_disconnect(3)");
  row(St::kReqRcvd, E::kDestroy, St::kRejected).Do(A::kSendRej).Spec("12.6.7 REJ");
  row(St::kReqRcvd, E::kDestroyUd, St::kRejected).Do(A::kSendRej).Spec("12.6.13 SIDR_REP");
  // Every DREQ of a known connection is answered with a DREP, whatever the
  // state (the peer's DREQ crossed ours, or our DREP was lost).
  for (St s : kAllStates) row(s, E::kDreq, s).Do(A::kSendDrep).Spec("12.6.11 DREP");
  for (St s : {St::kConnected, St::kRepSent, St::kRepRcvd, St::kDreqSent})
    row(s, E::kDreq, St::kDisconnected).Stop().Do(A::kSendDrep).Deliver(RDMA_CM_EVENT_DISCONNECTED).Spec("12.6.10 DREQ");
  row(St::kDreqSent, E::kDrep, St::kDisconnected).Stop().Deliver(RDMA_CM_EVENT_DISCONNECTED).Spec("12.6.11 DREP");
  row(St::kDreqSent, E::kDreqTimeout, St::kDisconnected)
      .Stop().Deliver(RDMA_CM_EVENT_DISCONNECTED).Spec("12.9 DREQ Sent: timeout");
  // Entering TimeWait arms its timer (Apply); when it expires the kernel's
  // CM leaves TimeWait for Idle and rdma_cm delivers TIMEWAIT_EXIT (tgt's
  // iSER target frees a connection only then). The id stays Disconnected
  // for rdma_cm's calls (rdma_disconnect still succeeds, a DREQ is still
  // answered), so it is not moved to the table's Idle.
  row(St::kDisconnected, E::kTimeWaitOver, St::kDisconnected)
      .Deliver(RDMA_CM_EVENT_TIMEWAIT_EXIT).Spec("12.9 TimeWait: timer expires");
  // Process exit: a DREQ for every connection, then (DREPs or not) done.
  for (St s : {St::kConnected, St::kRepSent, St::kRepRcvd, St::kDreqSent})
    row(s, E::kExit, St::kDreqSent).Stop().Do(A::kSendDreqOnce).Spec("12.6.10 DREQ");
  for (St s : {St::kDreqSent, St::kDisconnected}) row(s, E::kExitDone, St::kDisconnected).Spec("12.9 TimeWait");
  return table;
}

const CmTable& Table() {
  static const CmTable table = BuildTransitionTable();
  return table;
}

}  // namespace

const CmTransition* FindTransition(St from, CmEvent ev) {
  const int s = static_cast<int>(from), e = static_cast<int>(ev);
  if (s < 0 || s >= kStates || e < 0 || e >= kCmEvents) return nullptr;
  const CmTransition& t = Table().t[s][e];
  return t.valid ? &t : nullptr;
}

const char* StName(St s) {
  switch (s) {
    case St::kIdle: return "Idle";
    case St::kAddrResolved: return "AddrResolved";
    case St::kRouteResolved: return "RouteResolved";
    case St::kListen: return "Listen";
    case St::kReqSent: return "REQ Sent";
    case St::kRepRcvd: return "REP Rcvd";
    case St::kReqRcvd: return "REQ Rcvd";
    case St::kRepSent: return "REP Sent";
    case St::kConnected: return "Established";
    case St::kDreqSent: return "DREQ Sent";
    case St::kDisconnected: return "TimeWait";
    case St::kRejected: return "Rejected";
    case St::kError: return "Error";
  }
  return "?";
}

const char* CmEventName(CmEvent e) {
  switch (e) {
    case CmEvent::kResolveAddr: return "resolve_addr";
    case CmEvent::kAddrError: return "resolve_addr failed";
    case CmEvent::kResolveRoute: return "resolve_route";
    case CmEvent::kListen: return "listen";
    case CmEvent::kConnect: return "connect";
    case CmEvent::kConnectUd: return "connect (UD)";
    case CmEvent::kAccept: return "accept";
    case CmEvent::kAcceptUd: return "accept (UD)";
    case CmEvent::kReject: return "reject";
    case CmEvent::kRejectUd: return "reject (UD)";
    case CmEvent::kEstablish: return "establish";
    case CmEvent::kDisconnect: return "disconnect";
    case CmEvent::kDestroy: return "destroy_id";
    case CmEvent::kDestroyUd: return "destroy_id (UD)";
    case CmEvent::kExit: return "exit";
    case CmEvent::kExitDone: return "exit done";
    case CmEvent::kReq: return "REQ / SIDR_REQ";
    case CmEvent::kReqDup: return "REQ again";
    case CmEvent::kRep: return "REP (QP)";
    case CmEvent::kRepNoQp: return "REP (no QP)";
    case CmEvent::kRepQpFailed: return "REP, QP failed";
    case CmEvent::kRepSealRefused: return "REP, no seal (require)";
    case CmEvent::kRtu: return "RTU";
    case CmEvent::kRej: return "REJ";
    case CmEvent::kRejInvalidSid: return "REJ invalid SID (retry)";
    case CmEvent::kDreq: return "DREQ";
    case CmEvent::kDrep: return "DREP";
    case CmEvent::kSidrRepOk: return "SIDR_REP ok";
    case CmEvent::kSidrRepReject: return "SIDR_REP rejected";
    case CmEvent::kSidrRepFailed: return "SIDR_REP other";
    case CmEvent::kReqTimeout: return "REQ timeout";
    case CmEvent::kRepTimeout: return "REP timeout";
    case CmEvent::kDreqTimeout: return "DREQ timeout";
    case CmEvent::kTimeWaitOver: return "TimeWait timeout";
    case CmEvent::kLookupFailed: return "no local listener";
    case CmEvent::kLookupFailedUd: return "no local listener (UD)";
  }
  return "?";
}

const char* CmActionName(CmAction a) {
  switch (a) {
    case CmAction::kNone: return "";
    case CmAction::kSendReq: return "send REQ (retried)";
    case CmAction::kSendRep: return "send REP (retried)";
    case CmAction::kSendSidrRep: return "send SIDR_REP";
    case CmAction::kSendRej: return "send REJ";
    case CmAction::kTakeRep: return "take REP (QP to RTS, RTU)";
    case CmAction::kTakeSidrRep: return "take SIDR_REP";
    case CmAction::kSendRtu: return "send RTU";
    case CmAction::kResendReply: return "resend stored reply";
    case CmAction::kRejectRep: return "send REJ";
    case CmAction::kRefuseUnsealedRep: return "send REJ (sealed RC required)";
    case CmAction::kRetryReqSoon: return "REQ again soon";
    case CmAction::kSendDrep: return "send DREP";
    case CmAction::kDisconnectQp: return "QP to ERR, send DREQ (retried)";
    case CmAction::kQpToErr: return "QP to ERR";
    case CmAction::kSendDreqOnce: return "send DREQ";
  }
  return "?";
}

std::string DumpTransitionTable() {
  // One line per event and outcome: the states that share a row are listed
  // together ("any" when all do, "same" when the state does not change).
  std::string out = "| event | in state | next | timer | action | delivers | IBA |\n"
                    "| --- | --- | --- | --- | --- | --- | --- |\n";
  for (int e = 0; e < kCmEvents; ++e) {
    const CmEvent ev = static_cast<CmEvent>(e);
    bool done[kStates] = {};
    for (int i = 0; i < kStates; ++i) {
      const St s = kAllStates[i];
      const CmTransition* t = FindTransition(s, ev);
      if (!t || done[i]) continue;
      // The states with this row: those going to the same next state, or,
      // if more, those staying where they are.
      const auto alike = [&](int j, bool stay) {
        const CmTransition* t2 = FindTransition(kAllStates[j], ev);
        return !done[j] && t2 && t2->stop_timer == t->stop_timer && t2->action == t->action &&
               t2->deliver == t->deliver && t2->status == t->status &&
               (stay ? t2->next == kAllStates[j] : t2->next == t->next);
      };
      std::vector<int> to_next, stay;
      for (int j = i; j < kStates; ++j) {
        if (alike(j, false)) to_next.push_back(j);
        if (t->next == s && alike(j, true)) stay.push_back(j);
      }
      const bool same = stay.size() > to_next.size();
      std::vector<St> group;
      for (int j : same ? stay : to_next) {
        done[j] = true;
        group.push_back(kAllStates[j]);
      }
      std::string states;
      if (group.size() == size_t(kStates)) {
        states = "any";
      } else if (group.size() == size_t(kStates) - 1) {
        for (St x : kAllStates)
          if (std::find(group.begin(), group.end(), x) == group.end()) states = std::string("any but ") + StName(x);
      } else {
        for (St g : group) states += std::string(states.empty() ? "" : ", ") + StName(g);
      }
      std::string delivers;
      if (t->deliver != kNoEvent) {
        delivers = rdma_event_str(static_cast<rdma_cm_event_type>(t->deliver)) + 14;  // no RDMA_CM_EVENT_
        if (t->status != 0) delivers += " (" + std::to_string(t->status) + ")";
      }
      out += std::string("| ") + CmEventName(ev) + " | " + states + " | " + (same ? "same" : StName(t->next)) +
             " | " + (t->stop_timer ? "stop" : "") + " | " + CmActionName(t->action) + " | " + delivers + " | " +
             t->spec + " |\n";
    }
  }
  return out;
}

}  // namespace softrnic::rdmacm
