// Completion channels, CQs and SRQs in the engine's tables, and what polling and
// arming a CQ ask of the engine (ibv_poll_cq, ibv_req_notify_cq after
// Device's argument checks; queues.h has the CQ ring itself).
#include <algorithm>
#include <cerrno>

#include "engine/device/device_internal.h"
#include "engine/engine.h"

namespace softrnic::engine {

void Engine::AddChannelLocked(std::unique_ptr<CompletionChannel> channel) {
  channels_.push_back(std::move(channel));
}

int Engine::RemoveChannelLocked(CompletionChannel* channel) {
  if (channel->users > 0) return EBUSY;
  if (channel->waiters == 0) return EraseOwned(channels_, channel) ? 0 : EINVAL;
  // A thread still blocks in ibv_get_cq_event on it (rping's CQ thread when
  // its server gives up on a connection): destroyed for the application,
  // kept for that thread (queues.h), freed when the last waiter leaves.
  std::unique_ptr<CompletionChannel> kept = TakeOwned(channels_, channel);
  if (!kept) return EINVAL;
  kept->destroyed = true;
  destroyed_channels_.push_back(std::move(kept));
  return 0;
}

void Engine::LeaveChannelLocked(CompletionChannel* channel) {
  if (--channel->waiters == 0 && channel->destroyed) EraseOwned(destroyed_channels_, channel);
}

int Engine::AddCqLocked(std::unique_ptr<Cq>& cq) {
  if (cqs_.size() >= attr_.max_cq) return ENOMEM;
  if (cq->channel) ++cq->channel->users;
  cqs_.push_back(std::move(cq));
  return 0;
}

int Engine::RemoveCqLocked(Cq* cq, uint32_t* async_events_reported, std::unique_ptr<Cq>* doomed) {
  if (cq->users > 0) return EBUSY;
  ForgetAsyncEventsLocked(AsyncObject::kCq, cq->handle, async_events_reported);
  if (cq->channel) {
    --cq->channel->users;
    auto& pending = cq->channel->pending;
    // Events not yet read stay in the pipe; drop the queue entries so no
    // dangling CQ is handed out (ibv_destroy_cq requires events acked).
    std::replace(pending.begin(), pending.end(), cq, static_cast<Cq*>(nullptr));
  }
  *doomed = TakeOwned(cqs_, cq);
  return *doomed ? 0 : EINVAL;
}

int Engine::PollCqLocked(Cq* cq, int n, Completion* out) {
  // Packets held back by PostSend (doorbell batching) leave first.
  if (tx_.count() > 0) FlushTx();
  // The polling application does the engine's work itself (no thread hop).
  if (cq->count < static_cast<size_t>(n)) {
    if (PollOnceLocked()) progress_.TimerArmed(NextDeadlineLocked());
    progress_.AppRanPass(last_pass_);
  }
  progress_.AppActive();
  const int got = cq->Poll(n, out);
  // The application sees these now and may exit at once (_exit, no
  // handler): what it saw must be acknowledged before (ack_delay.cc).
  if (acks_deferred_ > 0 && got > 0) SendAcksOfPolledReceives(out, got);
  progress_.AppPollFound(got);
  // The stats publisher found the lock busy: it publishes this copy.
  if (stats_handover_.asked())
    stats_handover_.Give(stats_, transport_->counters(), qps_.size());
  return got;
}

void Engine::ArmCqLocked(Cq* cq, bool solicited_only) {
  // The caller is about to block: nothing may stay held back.
  if (tx_.count() > 0) FlushTx();
  // Arming a CQ without a channel is allowed (and has no effect to observe).
  // Keep the stronger arm: "next completion" covers "next solicited".
  if (cq->armed != 1) cq->armed = solicited_only ? 2 : 1;
  // Its thread may block soon: the progress thread decides what that
  // needs of it (Progress::ChannelArmed).
  if (cq->channel != nullptr) progress_.ChannelArmed();
}

int Engine::AddSrqLocked(std::unique_ptr<Srq>& srq) {
  if (srqs_.size() >= attr_.max_srq) return ENOMEM;
  ++srq->pd->users;
  srqs_.push_back(std::move(srq));
  return 0;
}

int Engine::RemoveSrqLocked(Srq* srq, uint32_t* async_events_reported,
                            std::unique_ptr<Srq>* doomed) {
  if (srq->users > 0) return EBUSY;
  CloseSrqExport(srq);  // peers stop placing SENDs in it (shm_direct_send.cc)
  ForgetAsyncEventsLocked(AsyncObject::kSrq, srq->handle, async_events_reported);
  --srq->pd->users;
  if (srq->xrcd != nullptr) ForgetXrcSrq(srq);
  *doomed = TakeOwned(srqs_, srq);
  return *doomed ? 0 : EINVAL;
}

}  // namespace softrnic::engine
