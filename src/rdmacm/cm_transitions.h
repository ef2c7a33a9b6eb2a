// The CM state machine of an rdma_cm id as one table: (state, event) ->
// next state, what the CM does, which rdma_cm event the application gets.
// The rows follow the IBA CM state diagrams (IBA 1.4 12.9: active side
// REQ Sent -> REP Rcvd -> Established, passive side REQ Rcvd -> REP Sent ->
// Established, release DREQ Sent -> TimeWait; SIDR 12.11) and the message
// rules of 12.6 (REQ 12.6.5, REJ 12.6.7, REP 12.6.8, RTU 12.6.9, DREQ
// 12.6.10, DREP 12.6.11, SIDR_REP 12.6.13). An event with no row in the
// id's state changes nothing: a MAD or timeout is dropped (counted in
// Cm::unexpected_events, a SOFTRNIC_CM_DEBUG line), an API call fails with
// EINVAL (rdma_destroy_id only sends nothing). docs/rdmacm.md prints the
// table (DumpTransitionTable).
//
// Pure data: no locking of its own (ids change under Cm::mu).
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <string>

namespace softrnic::rdmacm {

// The state of an id. The IBA names are in StName.
enum class St : uint8_t {
  kIdle,
  kAddrResolved,
  kRouteResolved,
  kListen,
  kReqSent,      // active: REQ / SIDR_REQ sent, waiting for REP
  kRepRcvd,      // active: REP received, no QP: CONNECT_RESPONSE delivered
  kReqRcvd,      // passive: CONNECT_REQUEST delivered, waiting for accept
  kRepSent,      // passive: REP sent, waiting for RTU
  kConnected,
  kDreqSent,
  kDisconnected,
  kRejected,
  kError,
};
constexpr int kStates = 13;

// What happens to an id. The handler or call that sees it picks the event
// (a REP for an id with or without a QP, a REJ "invalid service ID" the
// client may still retry, ...) so that every outcome is one row.
enum class CmEvent : uint8_t {
  // rdma_* calls (cma.cc, cma_address.cc).
  kResolveAddr,     // rdma_resolve_addr found a route and a GID
  kAddrError,       // ... found none
  kResolveRoute,
  kListen,
  kConnect,         // RC: REQ
  kConnectUd,       // UD: SIDR_REQ
  kAccept,          // RC: REP
  kAcceptUd,        // UD: SIDR_REP (accepted)
  kReject,          // RC: REJ
  kRejectUd,        // UD: SIDR_REP (rejected)
  kEstablish,       // rdma_establish: RTU (no QP on the id)
  kDisconnect,
  kDestroy,         // rdma_destroy_id, RC id
  kDestroyUd,       // rdma_destroy_id, UD id
  kExit,            // the exit hook: DREQ for every connection
  kExitDone,        // the exit hook gave up waiting for the DREPs
  // MADs received (cm_protocol.cc), already matched to the id.
  kReq,             // a REQ / SIDR_REQ made this (new) passive id
  kReqDup,          // the same REQ again (its sender missed our reply)
  kRep,             // REP, the id has a QP: it moves to RTS
  kRepNoQp,         // REP, no QP: the application calls rdma_establish
  kRepQpFailed,     // REP whose parameters the QP did not take
  kRepSealRefused,  // REP without the seal's answer, refused under require
  kRtu,
  kRej,
  kRejInvalidSid,   // REJ "invalid service ID" while the REQ may be retried
  kDreq,
  kDrep,
  kSidrRepOk,
  kSidrRepReject,   // SIDR_REP status "rejected" (consumer)
  kSidrRepFailed,   // SIDR_REP any other status
  // Timers (RunTimers).
  kReqTimeout,      // REQ / SIDR_REQ retries exhausted
  kRepTimeout,      // REP retries exhausted (no RTU)
  kDreqTimeout,     // DREQ retries exhausted (no DREP)
  kTimeWaitOver,    // the TimeWait timer of a disconnected id expired
  kLookupFailed,    // same-host destination: no listener registered, RC
  kLookupFailedUd,  // ... UD
};
constexpr int kCmEvents = 36;

// What the CM does on a row, besides stopping the timer and delivering the
// event (CmTransition). Those marked (API) are done by the rdma_* call with
// its parameters; the others by RunCmAction.
enum class CmAction : uint8_t {
  kNone,
  kSendReq,          // (API) REQ / SIDR_REQ, retransmitted until answered
  kSendRep,          // (API) REP, retransmitted until the RTU
  kSendSidrRep,      // (API) SIDR_REP
  kSendRej,          // (API) REJ / SIDR_REP "rejected"
  kTakeRep,          // the REP's parameters; with a QP: RTR/RTS and the RTU
                     // (or, if the QP refuses them, the kRepQpFailed row)
  kTakeSidrRep,      // the SIDR_REP's QPN and Q_Key
  kSendRtu,          // RTU (rdma_establish; a duplicate REP: our RTU was lost)
  kResendReply,      // the stored REP / REJ / SIDR_REP again (duplicate REQ)
  kRejectRep,        // REJ to a REP the QP did not take
  kRefuseUnsealedRep,  // REJ saying sealed RC is required (docs/sealed.md)
  kRetryReqSoon,     // REQ again after kLookupMs (a listener being set up)
  kSendDrep,         // DREP (every DREQ of a known connection is answered)
  kDisconnectQp,     // (API) QP to ERR, DREQ retransmitted until the DREP
  kQpToErr,          // (API) QP to ERR (its WRs flush)
  kSendDreqOnce,     // DREQ, no retransmission (destroy, exit)
};

// No event for the application.
constexpr int kNoEvent = -1;

struct CmTransition {
  bool valid = false;
  St next = St::kIdle;
  bool stop_timer = false;
  int deliver = kNoEvent;  // rdma_cm_event_type
  int status = 0;          // the event's status unless the handler gives one
  CmAction action = CmAction::kNone;
  const char* spec = "";   // the IBA rule the row implements
};

// The row for (from, ev), or nullptr when the event is not expected there.
const CmTransition* FindTransition(St from, CmEvent ev);

const char* StName(St s);
const char* CmEventName(CmEvent e);
const char* CmActionName(CmAction a);
// The table as a Markdown table (docs/rdmacm.md), one line per row.
std::string DumpTransitionTable();

}  // namespace softrnic::rdmacm
