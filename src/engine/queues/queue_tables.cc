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
  // Destroyed for the application, but kept (queues.h): a thread may still
  // block in ibv_get_cq_event on it (rping's CQ thread when its server
  // gives up on a connection), or be on its way in, holding the pointer it
  // read before the destroy and waiting for the engine lock. The first is
  // freed when the last waiter leaves; the others, which a later call finds
  // destroyed (EBADF, as a read of a closed channel fd), are freed only
  // once kRetiredChannels later ones were destroyed.
  std::unique_ptr<CompletionChannel> kept = TakeOwned(channels_, channel);
  if (!kept) return EINVAL;
  kept->destroyed = true;
  // Its descriptors go now, as a real channel's fd does, unless a thread
  // waits on them (then when it leaves).
  if (kept->waiters == 0) kept->pipe.Close();
  destroyed_channels_.push_back(std::move(kept));
  size_t idle = 0;
  for (const auto& c : destroyed_channels_) idle += c->waiters == 0;
  for (auto it = destroyed_channels_.begin();
       idle > kRetiredChannels && it != destroyed_channels_.end();) {
    if ((*it)->waiters == 0) {
      it = destroyed_channels_.erase(it);  // the oldest idle one
      --idle;
    } else {
      ++it;
    }
  }
  return 0;
}

void Engine::LeaveChannelLocked(CompletionChannel* channel) {
  if (--channel->waiters == 0 && channel->destroyed) channel->pipe.Close();
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
