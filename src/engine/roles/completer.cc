// Completer: matches ACKs, NAKs, READ responses and atomic ACKs to send
// WQEs, produces completions in order, and drives retry (IBA 9.7.5.2,
// 9.7.6; rxe_comp.c).
//
// Recovery is go-back-N from the oldest unacknowledged PSN (comp_psn): on a
// PSN-sequence NAK, an RNR NAK (after its timer), an implied NAK (an ACK
// beyond a READ/atomic whose response never came, IBA 9.7.5.2.3), a gap in
// READ responses, or the local ACK timeout. Between softrnic endpoints a
// SACK (selective.cc) replaces the PSN-sequence NAK and only lost packets
// are resent; the other cases stay go-back-N.
#include <algorithm>
#include <cstring>

#include "engine/engine.h"
#include "engine/wr_opcode.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::engine {
namespace {

bool NeedsResponseData(WrOpcode op) { return GetWrOpcodeInfo(op).read_or_atomic(); }

uint32_t LastPsn(const SendWqe& w) { return wire::PsnAdd(w.first_psn, w.npackets - 1); }

// Whether an RNR NAK for `psn` can be real: only a request that consumes a
// receive WQE (SEND, WRITE with immediate) can meet an empty receive queue
// (IBA 9.7.5.1.6). A forged RNR NAK for anything else would stall the QP,
// forever with rnr_retry 7, which rdma_cm and rsockets use.
bool RnrNakPlausible(Qp* qp, uint32_t psn) {
  for (uint64_t i = qp->sq_head; i != qp->sq_tail; ++i) {
    const SendWqe& w = qp->Wqe(i);
    if (!w.started) break;
    const int32_t into = wire::PsnDiff(psn, w.first_psn);
    if (into < 0) break;
    if (static_cast<uint32_t>(into) >= w.npackets) continue;
    return GetWrOpcodeInfo(w.opcode).consumes_recv_wqe;
  }
  return false;
}

}  // namespace

void Engine::CountErrorCompletion(Qp* qp, WcStatus status, bool send) {
  if (status == WcStatus::kWrFlushErr) {
    ++(send ? stats_.send_cqe_flushes : stats_.recv_cqe_flushes);
    ++qp->counters.cqe_flushes;
  } else {
    ++(send ? stats_.send_cqe_errors : stats_.recv_cqe_errors);
    ++qp->counters.cqe_errors;
    if (status == WcStatus::kRetryExcErr) ++stats_.retry_exceeded_errors;
    if (status == WcStatus::kRnrRetryExcErr) ++stats_.rnr_retry_exceeded_errors;
  }
  NoteQpCounters(qp);
}

void Engine::CompleteSendWqe(Qp* qp, SendWqe& w, WcStatus status) {
  // IBA 10.7.2.2: unsignaled WQEs produce no completion unless in error.
  if (status == WcStatus::kSuccess && !(w.send_flags & kSignaled)) return;
  if (status != WcStatus::kSuccess) {
    CountErrorCompletion(qp, status, true);
    if (trace_ != nullptr)
      TraceCompletion(qp, status, w.wr_id, GetWrOpcodeInfo(w.opcode).wc_opcode, true);
  }
  Completion c;
  c.wr_id = w.wr_id;
  c.status = status;
  c.opcode = GetWrOpcodeInfo(w.opcode).wc_opcode;
  c.byte_len = w.length;
  c.qp_num = qp->qpn;
  if (!qp->send_cq->Push(c, false)) ReportCqOverflow(qp->send_cq);
}

void Engine::RetireCompletedWqes(Qp* qp) {
  while (qp->sq_head != qp->sq_tail && qp->sq_head != qp->sq_next) {
    SendWqe& w = qp->Wqe(qp->sq_head);
    if (!w.done) break;
    CompleteSendWqe(qp, w, w.status);
    ++qp->sq_head;
  }
  if (qp->attr.qp_state == QpState::kSqd && qp->attr.sq_draining && qp->sq_head == qp->sq_tail) {
    qp->attr.sq_draining = false;
    if (qp->attr.en_sqd_async_notify) PostAsyncEvent(AsyncEventType::kSqDrained, qp->handle);
  }
}

void Engine::ArmRetransmitTimer(Qp* qp) {
  WatchTimers(qp);  // also with no timeout: a selective-repeat probe may be due
  if (qp->attr.timeout == 0 || qp->comp.comp_psn == qp->req.sq_psn) {
    qp->comp.retransmit_armed = false;
    return;
  }
  qp->comp.retransmit_deadline = Clock::now() + LocalAckTimeout(qp->attr.timeout);
  qp->comp.retransmit_armed = true;
}

bool Engine::ImplicitAck(Qp* qp, uint32_t psn) {
  bool progressed = false;
  const uint32_t comp_before = qp->comp.comp_psn;
  for (uint64_t i = qp->sq_head; i != qp->sq_tail; ++i) {
    SendWqe& w = qp->Wqe(i);
    if (!w.started) break;
    if (w.done) continue;
    if (wire::PsnDiff(psn, w.first_psn) < 0) break;
    const uint32_t last = LastPsn(w);
    if (wire::PsnDiff(psn, last) < 0) {
      // Part of a multi-packet SEND/WRITE is acknowledged.
      if (!NeedsResponseData(w.opcode) && wire::PsnDiff(psn + 1, qp->comp.comp_psn) > 0) {
        qp->comp.comp_psn = wire::PsnAdd(psn, 1);
        progressed = true;
      }
      break;
    }
    if (NeedsResponseData(w.opcode)) {
      // IBA 9.7.5.2.3: an acknowledgement beyond a READ or atomic whose
      // response has not arrived means that response was lost.
      RequesterSkipAcked(qp);
      RetireCompletedWqes(qp);
      Rewind(qp, "implied_nak");
      return false;
    }
    w.done = true;
    w.status = WcStatus::kSuccess;
    qp->comp.comp_psn = wire::PsnAdd(last, 1);
    progressed = true;
  }
  if (progressed) {
    RequesterSkipAcked(qp);
    AckProgress(qp, comp_before, /*restore_rnr_retry=*/true);
  }
  return true;
}

void Engine::Rewind(Qp* qp, const char* reason) {
  if (qp->comp.rewound && qp->comp.rewound_psn == qp->comp.comp_psn) return;
  if (qp->sq_head == qp->sq_tail) return;
  SendWqe& head = qp->Wqe(qp->sq_head);
  if (!head.started) return;
  const int32_t into = wire::PsnDiff(qp->comp.comp_psn, head.first_psn);
  if (into < 0 || static_cast<uint32_t>(into) >= head.npackets) return;
  // The completer asks, the requester goes back (as rxe's req_retry()).
  RequesterGoBackTo(qp, static_cast<uint32_t>(into));
  qp->comp.rewound = true;
  qp->comp.rewound_psn = qp->comp.comp_psn;
  ++stats_.retransmitted_rewinds;
  if (trace_ != nullptr)
    TraceEvent(qp, trace::EventKind::kRewind,
               {qp->comp.comp_psn,
                static_cast<uint64_t>(wire::PsnDiff(qp->sr.sq_psn_max, qp->comp.comp_psn)),
                trace::Str(reason), qp->comp.retry_left});
  // Everything from comp_psn is sent again: earlier SACKs are moot.
  SrForgetSacks(qp);
  CcOnLoss(qp);
  MarkWork(qp);
}

void Engine::RequesterError(Qp* qp, WcStatus status) {
  if (trace_ != nullptr) TraceRequesterError(qp, status);
  if (qp->sq_head != qp->sq_tail) {
    // The failing WQE is the oldest one not yet successfully done.
    for (uint64_t i = qp->sq_head; i != qp->sq_tail; ++i) {
      SendWqe& w = qp->Wqe(i);
      if (w.done && w.status == WcStatus::kSuccess) continue;
      w.done = true;
      w.status = status;
      break;
    }
  }
  if (qp->type == QpType::kRc) {
    MoveToError(qp, WcStatusName(status));
    return;
  }
  // IBA 10.3.1.6: a UD or UC send error puts the QP in SQ Error: the send
  // queue is flushed, the receive side keeps working, SQE -> RTS recovers.
  if (trace_ != nullptr) TraceState(qp, qp->attr.qp_state, QpState::kSqe, WcStatusName(status));
  qp->attr.qp_state = QpState::kSqe;
  FlushSendQueue(qp);
}

void Engine::CheckTimers(Qp* qp, Clock::time_point now) {
  const QpState s = qp->attr.qp_state;
  if (s != QpState::kRts && s != QpState::kSqd) return;
  if (qp->comp.rnr_waiting) {
    if (now >= qp->comp.rnr_deadline) {
      qp->comp.rnr_waiting = false;
      ArmRetransmitTimer(qp);
      MarkWork(qp);
    }
    return;
  }
  if (qp->sr.peer_sr) SrCheckProbe(qp, now);
  if (!qp->comp.retransmit_armed || now < qp->comp.retransmit_deadline) return;
  if (qp->comp.comp_psn == qp->req.sq_psn && qp->sq_next == qp->sq_head) {
    qp->comp.retransmit_armed = false;
    return;
  }
  // IBA 9.7.6.1.3: the local ACK timer expired; retry or give up. Unless
  // the transport knows the packet (or the peer's answer) is not lost but
  // unread in a shared-memory ring whose reader keeps reading: resending
  // would only queue copies behind it, and on a host with more runnable
  // threads than CPUs every late reader would start a storm of them
  // (bench/scale/shm_all_to_all.cc: 128 processes on two CPUs).
  if (transport_->DeliveryPending(transport::Endpoint{qp->attr.ah_attr.dgid, udp_port_},
                                  qp->attr.dest_qp_num, qp->qpn,
                                  LocalAckTimeout(qp->attr.timeout))) {
    ++stats_.retransmit_timeouts_deferred;
    ArmRetransmitTimer(qp);
    return;
  }
  if (qp->comp.retry_left == 0) {
    RequesterError(qp, WcStatus::kRetryExcErr);
    return;
  }
  --qp->comp.retry_left;
  ++stats_.retransmit_timeouts;
  ++qp->counters.retransmit_timeouts;
  if (trace_ != nullptr)
    TraceEvent(qp, trace::EventKind::kRetransmitTimeout,
               {qp->comp.comp_psn,
                static_cast<uint64_t>(wire::PsnDiff(qp->sr.sq_psn_max, qp->comp.comp_psn)),
                qp->comp.retry_left, qp->counters.retransmit_timeouts});
  qp->comp.rewound = false;
  CcOnTimeout(qp);
  Rewind(qp, "timeout");
  ArmRetransmitTimer(qp);
}

// The completer's pipeline (IBA 9.7.5.2; rxe_comp.c: check_psn ->
// check_ack -> do_read / do_atomic -> complete): the QP state, the PSN
// (only what was sent can be answered), then by kind: ACK/NAK/SACK, or a
// READ response / atomic ACK matched against the oldest WQE.
void Engine::HandleResponse(Qp* qp, const wire::Packet& pkt) {
  if (!CheckResponseState(qp)) return;
  if (!CheckResponsePsn(qp, pkt)) return;
  // The peer offers selective retransmission (docs/loss.md).
  if (qp->sr.sr_local && pkt.bth.sr()) qp->sr.peer_sr = true;
  if (pkt.rc_opcode() == wire::op::kRcAck) {
    HandleAck(qp, pkt);
    return;
  }
  // A READ response FIRST, LAST or ONLY and an atomic ACK carry an AETH
  // whose syndrome must be an ACK (IBA 9.7.5.1.3-4; rxe's check_ack). One
  // with a NAK or RNR NAK syndrome is malformed: dropped before it
  // acknowledges or completes anything (the responder fuzzer completed a
  // READ with SUCCESS through a LAST whose AETH said NAK).
  if (pkt.info->aeth_offset != 0 && wire::SyndromeKind(pkt.aeth().syndrome()) != wire::AckKind::kAck) {
    ++stats_.rx_responses_bad_syndrome;
    return;
  }
  SendWqe* w = MatchResponse(qp, pkt);
  if (w == nullptr) return;
  if (pkt.rc_opcode() == wire::op::kRcAtomicAck) {
    HandleAtomicAck(qp, pkt, *w);
  } else if (pkt.info->has(wire::kIsReadResponse)) {
    HandleReadResponse(qp, pkt, *w);
  }
}

void Engine::AckProgress(Qp* qp, uint32_t comp_before, bool restore_rnr_retry) {
  const bool sampled = SrOnCumAck(qp, comp_before);
  CcOnAck(qp, static_cast<uint32_t>(wire::PsnDiff(qp->comp.comp_psn, comp_before)), sampled);
  // Forward progress restores the retry count (rxe reset_retry_counters);
  // an ACK or NAK (not a READ response or atomic ACK) the RNR count too.
  qp->comp.retry_left = qp->attr.retry_cnt;
  if (restore_rnr_retry) qp->comp.rnr_retry_left = qp->attr.rnr_retry;
  qp->comp.rewound = false;
  RetireCompletedWqes(qp);
  ArmRetransmitTimer(qp);
  MarkWork(qp);
}

// Responses are taken only in RTS and SQD: in SQE and ERR the send queue
// has been flushed.
bool Engine::CheckResponseState(Qp* qp) {
  const QpState s = qp->attr.qp_state;
  if (s == QpState::kRts || s == QpState::kSqd) return true;
  ++stats_.rx_dropped_qp_state;
  return false;
}

// Only PSNs we have sent can be answered (IBA 9.7.5.2.1): anything else is
// stale or forged. After a go-back-N rewind, an ACK/NAK may still cover
// packets of the first transmission, up to sq_psn_max: the responder got
// them, and with a small congestion window the resend would otherwise
// wait for an acknowledgement the responder can only give for a PSN
// beyond it (ImplicitAck moves the cursor forward). READ responses and
// atomic ACKs past sq_psn belong to requests resent later: dropped, they
// will be answered again.
// Issue 14 (M1): responses for PSNs never sent (at or past sq_psn_max)
// are what a blind forger mostly produces; counted on their own.
bool Engine::CheckResponsePsn(Qp* qp, const wire::Packet& pkt) {
  const uint32_t psn = pkt.bth.psn();
  const uint32_t answered_limit =
      pkt.rc_opcode() == wire::op::kRcAck ? qp->sr.sq_psn_max : qp->req.sq_psn;
  if (wire::PsnDiff(psn, answered_limit) < 0) return true;
  ++stats_.rx_out_of_sequence;
  if (wire::PsnDiff(psn, qp->sr.sq_psn_max) >= 0) ++stats_.rx_responses_unsent;
  return false;
}

void Engine::HandleAck(Qp* qp, const wire::Packet& pkt) {
  const uint32_t psn = pkt.bth.psn();
  const uint8_t syn = pkt.aeth().syndrome();
  if (pkt.bth.sr() && syn == wire::MakeSyndrome(wire::AckKind::kNak,
                                                static_cast<uint8_t>(wire::NakCode::kPsnSequenceError))) {
    if (qp->sr.sr_local) {
      HandleSack(qp, pkt);
      return;
    }
    // We never offered it: a SACK here is forged; a plain NAK is handled
    // as one below (the bitmap, if any, ignored).
    if (pkt.payload_length > 0) {
      ++stats_.rx_sacks_invalid;
      return;
    }
  }
  const wire::AckKind kind = wire::SyndromeKind(syn);
  if (kind == wire::AckKind::kReserved) return;
  if (kind == wire::AckKind::kRnrNak) {
    ++stats_.rx_rnr_naks;
    ++qp->counters.rx_rnr_naks;
    if (trace_ != nullptr)
      TraceEvent(qp, trace::EventKind::kRnrNakReceived,
                 {psn, wire::SyndromeValue(syn), qp->comp.rnr_retry_left});
  }
  if (kind == wire::AckKind::kNak) {
    ++stats_.rx_naks;
    ++qp->counters.rx_naks;
  }
  if (wire::PsnDiff(psn, qp->comp.comp_psn) < 0) {  // old (late duplicates land here too)
    ++stats_.rx_responses_stale;
    return;
  }
  switch (kind) {
    case wire::AckKind::kAck:
      // A selective responder sends a plain ACK only with nothing kept.
      if (pkt.bth.sr()) qp->sr.sacked_count = 0;
      ImplicitAck(qp, psn);
      return;
    case wire::AckKind::kRnrNak:
      HandleRnrNak(qp, psn, syn);
      return;
    default:
      HandleNak(qp, psn, syn);
      return;
  }
}

// IBA 9.7.5.2.8: wait the timer the responder sent, then resend from the
// PSN it names; rnr_retry bounds the attempts (7: forever).
void Engine::HandleRnrNak(Qp* qp, uint32_t psn, uint8_t syn) {
  if (!RnrNakPlausible(qp, psn)) {
    ++stats_.rx_rnr_naks_invalid;
    return;
  }
  if (!ImplicitAck(qp, wire::PsnAdd(psn, wire::kPsnMask))) return;
  if (qp->comp.rnr_retry_left == 0) {
    RequesterError(qp, WcStatus::kRnrRetryExcErr);
    return;
  }
  if (qp->attr.rnr_retry != 7) --qp->comp.rnr_retry_left;  // 7 = retry forever
  qp->comp.rnr_waiting = true;
  WatchTimers(qp);
  qp->comp.rnr_deadline = Clock::now() + RnrTimerDelay(wire::SyndromeValue(syn));
  qp->comp.retransmit_armed = false;
  qp->comp.rewound = false;
  Rewind(qp, "rnr_nak");
}

// A NAK acknowledges every PSN before it (IBA 9.7.5.2.2); a PSN sequence
// error is retried (go-back-N, counted against retry_cnt), the others fail
// the WQE with the status the code names (IBA 9.9.3).
void Engine::HandleNak(Qp* qp, uint32_t psn, uint8_t syn) {
  if (!ImplicitAck(qp, wire::PsnAdd(psn, wire::kPsnMask))) return;
  switch (static_cast<wire::NakCode>(wire::SyndromeValue(syn))) {
    case wire::NakCode::kPsnSequenceError:
      if (qp->comp.rewound && qp->comp.rewound_psn == qp->comp.comp_psn) return;
      if (qp->comp.retry_left == 0) {
        RequesterError(qp, WcStatus::kRetryExcErr);
        return;
      }
      --qp->comp.retry_left;
      Rewind(qp, "nak_sequence");
      return;
    case wire::NakCode::kInvalidRequest: RequesterError(qp, WcStatus::kRemInvReqErr); return;
    case wire::NakCode::kRemoteAccessError: RequesterError(qp, WcStatus::kRemAccessErr); return;
    case wire::NakCode::kRemoteOperationalError: RequesterError(qp, WcStatus::kRemOpErr); return;
    default: RequesterError(qp, WcStatus::kRemInvRdReqErr); return;
  }
}

// A READ response or atomic ACK: it acknowledges every PSN before it
// (IBA 9.7.5.2.3, which may reveal a lost response: rewind), must be the
// next one expected (a gap: go back to the oldest), and belongs to the
// oldest WQE. Returns that WQE, or null when the response is dealt with.
SendWqe* Engine::MatchResponse(Qp* qp, const wire::Packet& pkt) {
  const uint32_t psn = pkt.bth.psn();
  if (wire::PsnDiff(psn, qp->comp.comp_psn) < 0) {
    ++stats_.rx_duplicates;
    ++stats_.rx_responses_stale;
    return nullptr;
  }
  if (!ImplicitAck(qp, wire::PsnAdd(psn, wire::kPsnMask))) return nullptr;
  if (psn != qp->comp.comp_psn) {
    ++stats_.rx_out_of_sequence;
    Rewind(qp, "read_gap");
    return nullptr;
  }
  if (qp->sq_head == qp->sq_tail) return nullptr;
  SendWqe& w = qp->Wqe(qp->sq_head);
  if (!w.started || w.done) return nullptr;
  return &w;
}

void Engine::HandleAtomicAck(Qp* qp, const wire::Packet& pkt, SendWqe& w) {
  const uint32_t psn = pkt.bth.psn();
  if (!GetWrOpcodeInfo(w.opcode).atomic || w.first_psn != psn) return;
  const uint64_t orig = pkt.atomic_ack_eth().orig();
  uint8_t bytes[8];
  std::memcpy(bytes, &orig, 8);  // the result lands in host order
  if (!ScatterSges(qp->pd, qp->WqeSges(qp->sq_head), w.num_sge, 0, bytes, 8)) {
    RequesterError(qp, WcStatus::kLocProtErr);
    return;
  }
  w.done = true;
  w.status = WcStatus::kSuccess;
  RequesterAnswered(qp);
  qp->comp.comp_psn = wire::PsnAdd(psn, 1);
  AckProgress(qp, psn, /*restore_rnr_retry=*/false);
}

void Engine::HandleReadResponse(Qp* qp, const wire::Packet& pkt, SendWqe& w) {
  const uint32_t psn = pkt.bth.psn();
  if (!GetWrOpcodeInfo(w.opcode).read) return;
  const int32_t idx = wire::PsnDiff(psn, w.first_psn);
  if (idx < 0 || static_cast<uint32_t>(idx) >= w.npackets) return;
  const uint32_t at = static_cast<uint32_t>(idx);
  const bool is_final = at == w.npackets - 1;
  // The last response of one of the WQE's READ requests (qp.h,
  // kReadRequestPackets): a LAST or ONLY packet.
  const bool request_last = at + 1 == ReadRequestEnd(at, w.npackets);
  const uint32_t offset = at * qp->mtu_bytes;
  const uint32_t expect = is_final ? w.length - offset : qp->mtu_bytes;
  if (pkt.info->has(wire::kLast) != request_last || pkt.payload_length != expect) {
    // IBA 9.7.5.2.4 (C9-168): a malformed response is a bad response.
    RequesterError(qp, WcStatus::kBadRespErr);
    return;
  }
  if (pkt.payload_length > 0 &&
      !ScatterSges(qp->pd, qp->WqeSges(qp->sq_head), w.num_sge, offset, pkt.payload,
                   pkt.payload_length)) {
    RequesterError(qp, WcStatus::kLocProtErr);
    return;
  }
  if (request_last) RequesterAnswered(qp);
  if (is_final) {
    w.done = true;
    w.status = WcStatus::kSuccess;
  }
  qp->comp.comp_psn = wire::PsnAdd(psn, 1);
  AckProgress(qp, psn, /*restore_rnr_retry=*/false);
}

}  // namespace softrnic::engine
