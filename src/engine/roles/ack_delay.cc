// Delayed acknowledgement: an ACK that rides along with the next request.
//
// In a ping-pong (ib_write_lat, ib_send_lat, any request/response protocol)
// the responder's application answers every message with one of its own on
// the same QP within microseconds. Holding the ACK until that answer leaves
// puts both packets in one sendmmsg, and, what matters more, keeps the
// requester's application inside ibv_poll_cq (waiting for its completion)
// until the answer arrives: it then receives and applies the answer inline
// instead of leaving it to the progress thread, whose wake-up costs 2-40 us
// on the machines measured (docs/engine.md, "Delayed ACKs").
//
// IBA 9.7.5.1.6 allows a responder to coalesce acknowledgements. The delay
// (SOFTRNIC_ACK_DELAY_US, default 20 us, at most 500 us:
// below selective retransmission's 1 ms tail-loss probe) is also capped at an
// eighth of the QP's own Local ACK Timeout (4.096 us * 2^timeout; perftest's
// 14 gives 67 ms), so a requester configured like this QP does not
// retransmit because of it.
//
// The deferral must not outlive the application's view of the request
// being acknowledged: having seen it, the application may destroy the QP
// or exit at once (a client that gets its last reply and ends; fio's rdma
// engine, whose target polls the receive completion of the closing SEND
// and calls _exit()). So a deferred ACK goes out when its QP moves to
// Error or Reset or is destroyed, at exit() (device.cc), and before
// ibv_poll_cq hands out a receive completion (SEND, WRITE_WITH_IMM) of its
// QP (SendAcksOfPolledReceives): the application never sees a message its
// peer may still have to resend. A WRITE's arrival shows only in memory,
// which the application may read before anything tells the engine; its
// ACK still waits, and an abrupt end (_exit, a signal) within the delay
// after such a WRITE loses it: the peer retries into
// IBV_WC_RETRY_EXC_ERR, as it would had the process died before the
// WRITE arrived.
//
// Where ACKs are deferred only to spare a peer's doorbell (shared-memory
// rings, QPs on completion channels), the ACK sent at the poll goes quietly
// (Transport::SetQuiet): into the peer's ring, which survives this process,
// without waking it; the application's answer rings the doorbell for both,
// as when the ACK rode along. If no request follows within the delay, the
// owed wake-up is rung alone (Transport::WakePeer), so a one-way stream's
// sender, asleep until its completions come, waits no longer than before.
//
// A QP whose ACKs keep waiting the whole delay (a one-way stream, a
// responder that answers on another QP) stops deferring for a while, so the
// delay costs it at most one late completion every kBackoff ACKs; a QP
// whose ACKs did ride along is forgiven one miss.
#include <algorithm>
#include <cstdlib>

#include "engine/engine.h"
#include "wire/opcode.h"

namespace softrnic::engine {
namespace {

// Backing off after an ACK had to be sent alone: the next kBackoff ACKs of
// that QP go out at once.
constexpr int32_t kBackoff = 64;
constexpr int32_t kScoreCap = 16;

}  // namespace

bool Engine::DeferAck(Qp* qp, uint8_t syndrome) {
  if (ack_delay_.count() == 0 || qp->type != QpType::kRc) return false;
  // Not where the transport says no wake-up is saved: shared-memory peers
  // (their doorbells and polling differ, docs/shm.md), where the deferred
  // ACK measured ~0.5 us slower per ib_send_lat iteration. Unless this QP's
  // completions are waited for on a channel: then the peer's application
  // most likely blocks too, and an ACK apart from the answer wakes it twice
  // (ibv_rc_pingpong -e over shm on one core: two doorbells per message).
  const auto on_channel = [](const Cq* cq) { return cq != nullptr && cq->channel != nullptr; };
  if (!transport_->delayed_acks_save_wakeups() && !on_channel(qp->send_cq) &&
      !on_channel(qp->recv_cq))
    return false;
  if (wire::SyndromeKind(syndrome) != wire::AckKind::kAck) return false;
  // Only a QP that sends requests itself can carry its ACKs.
  if (qp->sq_tail == 0 || qp->attr.qp_state != QpState::kRts) return false;
  // A selective requester holding packets past a hole needs its SACKs now.
  if (qp->sr_store.peer_sr_req && (qp->sr_store.ooo_count > 0 || qp->sr_store.sack_pending))
    return false;
  if (qp->ack_delay.ack_delay_score < 0) {
    ++qp->ack_delay.ack_delay_score;
    return false;
  }
  if (!qp->ack_delay.ack_deferred) {
    qp->ack_delay.ack_deferred = true;
    ++acks_deferred_;
    WatchTimers(qp);
    // The peer's Local ACK Timeout is not known here; its own (ibv_modify_qp
    // sets both sides alike in practice) bounds the wait to an eighth.
    const Clock::duration cap = LocalAckTimeout(qp->attr.timeout) / 8;
    const Clock::time_point deadline = Clock::now() + std::min<Clock::duration>(ack_delay_, cap);
    // A wake-up still owed for an earlier ACK sent quietly is this ACK's
    // now (it covers that one), and no later.
    qp->ack_delay.ack_deadline =
        qp->ack_delay.wake_owed ? std::min(qp->ack_delay.ack_deadline, deadline) : deadline;
    qp->ack_delay.wake_owed = false;
    ack_deadline_min_ = std::min(ack_deadline_min_, qp->ack_delay.ack_deadline);
    // A sleeping progress thread must wake in time to send it alone.
    progress_.TimerArmed(qp->ack_delay.ack_deadline);
  }
  return true;
}

void Engine::PiggybackAck(Qp* qp) {
  qp->ack_delay.ack_delay_score = std::min(qp->ack_delay.ack_delay_score + 1, kScoreCap);
  ++stats_.acks_piggybacked;
  FlushAck(qp);
}

void Engine::ExpireDeferredAcks(Clock::time_point now) {
  Clock::time_point next = Clock::time_point::max();
  // Every QP with a deferred ACK is on the timer list (DeferAck lists it).
  for (size_t i = 0; i < timer_list_.size(); ++i) {
    Qp* qp = timer_list_[i];
    if (!qp->ack_delay.ack_deferred && !qp->ack_delay.wake_owed) continue;
    if (qp->ack_delay.ack_deadline > now) {
      next = std::min(next, qp->ack_delay.ack_deadline);
      continue;
    }
    // A QP whose ACKs rode along before gets one miss free (a ping-pong
    // that pauses: perftest -a between sizes); a second miss in a row, or
    // a first one, backs off.
    qp->ack_delay.ack_delay_score = qp->ack_delay.ack_delay_score > 0 ? 0 : -kBackoff;
    if (qp->ack_delay.wake_owed) {
      // Sent quietly at the poll; no request rang the doorbell since.
      ++stats_.ack_wakes_expired;
      WakeOwedPeer(qp);
      continue;
    }
    ++stats_.acks_delay_expired;
    FlushAck(qp);
  }
  ack_deadline_min_ = next;
}

void Engine::SendDeferredAck(Qp* qp) {
  if (qp->ack_delay.ack_deferred) FlushAck(qp);
  if (qp->ack_delay.wake_owed) WakeOwedPeer(qp);
}

void Engine::WakeOwedPeer(Qp* qp) {
  qp->ack_delay.wake_owed = false;
  transport_->WakePeer(transport::Endpoint{qp->attr.ah_attr.dgid, udp_port_},
                       qp->attr.dest_qp_num);
}

void Engine::AckWakeCarried(Qp* qp) {
  // A request of the QP was pushed with its doorbell: the ACK rode along
  // after all (it is ahead of the request in the ring).
  qp->ack_delay.wake_owed = false;
  qp->ack_delay.ack_delay_score = std::min(qp->ack_delay.ack_delay_score + 1, kScoreCap);
}

void Engine::SendAcksOfPolledReceives(const Completion* c, int n) {
  // Where ACKs wait only to spare doorbells (DeferAck), they go quietly and
  // owe the peer its wake-up; over UDP the datagram is the wake-up.
  const bool quiet = !transport_->delayed_acks_save_wakeups();
  bool sent = false;
  for (int i = 0; i < n && acks_deferred_ > 0; ++i) {
    if (c[i].opcode != WcOpcode::kRecv && c[i].opcode != WcOpcode::kRecvRdmaWithImm) continue;
    const auto it = qps_.find(c[i].qp_num);
    if (it == qps_.end()) continue;
    Qp* qp = it->second.get();
    // Held for this QP: it covers the message (the responder queued the
    // ACK of the message in the same step that completed its receive,
    // and a held ACK only grows to later PSNs).
    if (!qp->ack_delay.ack_deferred) continue;
    if (!sent && tx_.count() > 0) FlushTx();  // nothing else goes quietly
    ++stats_.acks_flushed_at_poll;
    FlushAck(qp);
    // Its deadline and its place on the timer list stay, for the wake-up.
    if (quiet) qp->ack_delay.wake_owed = true;
    sent = true;
  }
  if (!sent || tx_.count() == 0) return;
  if (quiet) transport_->SetQuiet(true);
  FlushTx();
  if (quiet) transport_->SetQuiet(false);
}

void Engine::FlushDeferredAcksLocked() {
  // Every QP with a deferred ACK is on the timer list (DeferAck lists it).
  for (Qp* qp : timer_list_) SendDeferredAck(qp);
  if (tx_.count() > 0) FlushTx();
}

}  // namespace softrnic::engine
