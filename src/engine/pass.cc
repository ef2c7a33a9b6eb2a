// A pass of the engine, the timer list and what the progress thread asks
// of the engine (ProgressHost, engine/progress/progress.h). Who runs a
// pass, and when, is engine/progress's; docs/engine.md, "Progress".
#include <algorithm>

#include "engine/engine.h"

namespace softrnic::engine {
namespace {

constexpr auto kTimerCheckInterval = std::chrono::microseconds(50);
// How much later than due the timers may run while received packets are
// still waiting (PollOnceLocked says why).
constexpr auto kTimerBacklogGrace = std::chrono::milliseconds(2);

}  // namespace

bool Engine::PollOnceLocked() {
  transport::RxPacket* rx = rx_burst_.data();
  bool did = false;
  bool drained = false;
  // Bounded so one pass cannot starve the caller (a CQ poller) forever.
  for (int round = 0; round < 4; ++round) {
    const int n = transport_->RecvBurst(rx, kRxBurst);
    if (capture_ != nullptr) RecordReceived(rx, n);
    for (int i = 0; i < n; ++i) DispatchPacket(rx[i]);
    if (n > 0) did = true;
    // The transport gives one socket at most half a burst per call while
    // others exist (udp_transport.cc), so only a short half means drained.
    if (n < kRxBurst / 2) {
      drained = true;
      break;
    }
  }
  // Other processes' receive QPs delivering into this device's XRC SRQs
  // (xrc_share.h): taken here too, so a polling application serves them.
  if (xrc_share_ && xrc_share_->ServeLocked()) did = true;
  // SENDs same-host peers placed in our receive queues (shm_direct_send.cc).
  if (peer_memory_ != nullptr && CollectAllDirectRecvs()) did = true;
  const Clock::time_point now = pass_clock_.Now();
  last_pass_ = now;
  // Timers judge acknowledgement progress. While acknowledgements still
  // wait in the transport (this pass stopped before draining it), a Local
  // ACK Timeout or a tail-loss probe would fire on a stale view: with 1,000
  // QPs sending to one peer, thousands did, for packets whose ACKs had
  // arrived (issue 17, docs/loss.md). So they wait for a drained pass, but
  // never longer than kTimerBacklogGrace after the first pass that put
  // them off.
  if (now >= next_timer_check_ && !drained && timers_deferred_since_ == Clock::time_point{})
    timers_deferred_since_ = now;
  if (now >= next_timer_check_ &&
      (drained || now - timers_deferred_since_ >= kTimerBacklogGrace)) {
    timers_deferred_since_ = {};
    next_timer_check_ = now + kTimerCheckInterval;
    CheckListedTimers(now);
    if (!lingering_.empty()) ExpireLingering(now);
  }
  if (now >= ack_deadline_min_) ExpireDeferredAcks(now);
  if (!work_list_.empty()) {
    did = true;
    RunWorkList();
  }
  FlushTx();
  return did;
}

void Engine::RecordReceived(const transport::RxPacket* rx, int n) {
  const auto locals = transport_->locals();
  for (int i = 0; i < n; ++i)
    if (rx[i].local_index < locals.size()) capture_->RecordRx(rx[i], locals[rx[i].local_index]);
}

void Engine::WatchTimers(Qp* qp) {
  if (qp->on_timer_list) return;
  qp->on_timer_list = true;
  timer_list_.push_back(qp);
}

bool Engine::TimersArmed(const Qp* qp) {
  return qp->comp.rnr_waiting || qp->comp.retransmit_armed || qp->ack_delay.ack_deferred ||
         qp->ack_delay.wake_owed ||
         (qp->type == QpType::kRc && qp->comp.comp_psn != qp->req.sq_psn);
}

void Engine::CheckListedTimers(Clock::time_point now) {
  // By index: a check may list another QP (push_back) while this runs.
  for (size_t i = 0; i < timer_list_.size();) {
    Qp* qp = timer_list_[i];
    CheckTimers(qp, now);
    if (TimersArmed(qp)) {
      ++i;
      continue;
    }
    qp->on_timer_list = false;
    timer_list_[i] = timer_list_.back();
    timer_list_.pop_back();
  }
}

Clock::time_point Engine::NextDeadlineLocked() const {
  Clock::time_point next = Clock::time_point::max();
  for (const Qp* qp : timer_list_) {
    if (qp->comp.rnr_waiting) next = std::min(next, qp->comp.rnr_deadline);
    else if (qp->comp.retransmit_armed) next = std::min(next, qp->comp.retransmit_deadline);
    if (qp->sr.peer_sr) next = std::min(next, SrProbeDeadline(qp));
    if (qp->ack_delay.ack_deferred || qp->ack_delay.wake_owed)
      next = std::min(next, qp->ack_delay.ack_deadline);
  }
  // Packets the transport holds (the fault lab's delayed, rate-limited or
  // paused ones, fault_transport.h) leave in a pass when due: the sleeper
  // (this thread or a waiter, event_wait.cc) wakes for them, and does not
  // sleep at all while some are due (a deadline in the past is a zero
  // timeout, timeout.h).
  if (const auto due = transport_->next_deadline()) next = std::min(next, *due);
  return next;
}

bool Engine::ChannelArmedLocked() const {
  for (const auto& cq : cqs_)
    if (cq->armed != 0 && cq->channel != nullptr) return true;
  return false;
}

bool Engine::RepliesNeededLocked() const {
  if (ChannelArmedLocked()) return true;
  // An RC QP with WQEs not sent yet either can send (it is on the work
  // list) or waits for a response: the window, the READ/atomic limit or a
  // fence wait for packets in flight, which keep it on the timer list
  // (TimersArmed). Only those lists are walked: with every QP walked, each
  // sleep of this thread held the lock ~5 ms per 64,000 idle QPs and an
  // application creating QPs waited seconds for it (qp_scale).
  const auto unsent = [](const Qp* qp) {
    return qp->type == QpType::kRc && qp->sq_next != qp->sq_tail;
  };
  return std::any_of(timer_list_.begin(), timer_list_.end(), unsent) ||
         std::any_of(work_list_.begin(), work_list_.end(), unsent);
}

// ---------------------------------------------------------------- ProgressHost

PassResult Engine::ProgressThreadPass(bool may_sleep) {
  if (!mu_.try_lock()) return PassResult::kLockBusy;
  const PassResult result = ProgressThreadPassLocked(may_sleep);
  mu_.unlock();
  return result;
}

PassResult Engine::ProgressThreadPassLocked(bool may_sleep) {
  if (PollOnceLocked()) return PassResult::kWorked;
  if (!may_sleep) return PassResult::kIdle;
  // Decided under the lock, so a PostSend after this sees the thread asleep
  // and wakes it if it needs an earlier timer. The transport gets a last
  // look at inputs epoll cannot see (shared-memory rings) after announcing
  // the sleep; every PrepareToSleep has its WokeUp (transport.h).
  if (!transport_->PrepareToSleep()) {
    transport_->WokeUp();
    return PassResult::kSleepRefused;
  }
  // What a capture holds in memory is written before a sleep of unknown
  // length (capture.h).
  if (capture_ != nullptr) capture_->Flush();
  progress_.AnnounceSleepLocked(progress_.has_reply_fd() && RepliesNeededLocked(),
                                ChannelArmedLocked(), NextDeadlineLocked(), !qps_.empty());
  return PassResult::kSleep;
}

bool Engine::EngineBusy() const { return mu_.held(); }

void Engine::StartProgressThread() { progress_.Start(); }

void Engine::StopProgressThread() { progress_.Stop(); }

}  // namespace softrnic::engine
