// Device: completion channels, CQs and SRQs, the locked facade over the
// engine's queues.h objects (device.cc has the rest of Device).
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <new>

#include "common/restart_after_signal.h"
#include "engine/device.h"
#include "engine/device_internal.h"
#include "engine/engine.h"

namespace softrnic::engine {

int Device::CreateCompletionChannel(CompletionChannel** out) {
  auto ch = std::make_unique<CompletionChannel>();
  if (!ch->ok()) return errno ? errno : EMFILE;
  SpinLock lock(engine_->mu_);
  *out = ch.get();
  engine_->channels_.push_back(std::move(ch));
  return 0;
}

int Device::DestroyCompletionChannel(CompletionChannel* channel) {
  SpinLock lock(engine_->mu_);
  if (channel->users > 0) return EBUSY;
  return EraseOwned(engine_->channels_, channel) ? 0 : EINVAL;
}

int Device::CompletionChannelFd(const CompletionChannel* channel) const { return channel->pipe.read_fd(); }

namespace {

// A blocking ibv_get_cq_event waits for the packets that make completions
// as well as for the event, and applies them itself (issue 17, event-driven
// completions). Waiting on the channel alone cost two wake-ups in a row per
// event, each ~40 us across cores here: the packet woke the progress
// thread, whose completion woke this thread through the channel. Now the
// packet wakes both at once, and whichever takes the engine lock first
// makes the completion; this thread, already awake, takes the event.
// The transport's descriptors are level-triggered (readable while a
// socket holds datagrams), so a packet the progress thread has not taken
// yet is never missed, and one it took leaves them quiet. Shared-memory
// rings are seen through their doorbell, which peers ring while the
// progress thread sleeps; when it is awake, it makes the event as before.
// A channel fd the application made non-blocking is only read (EAGAIN
// when empty): its owner polls it, and a packet is not an event.
// Returns 0 once an event byte was read, else the errno.
int AwaitChannelEvent(Engine& engine, int event_fd) {
  const int flags = fcntl(event_fd, F_GETFL);
  if (flags < 0 || (flags & O_NONBLOCK)) return ReadEventByte(event_fd);
  pollfd fds[3] = {{event_fd, POLLIN, 0}, {engine.transport_->pollable_fd(), POLLIN, 0}, {-1, 0, 0}};
  nfds_t n = 2;
  if (const int reply = engine.transport_->reply_pollable_fd(); reply >= 0) fds[n++] = {reply, POLLIN, 0};
  for (;;) {
    {
      // Packets: a pass, as a polling application runs (PollCq); the lock
      // is held for microseconds by whoever has it. Then, still under it,
      // the sleep is announced to shared-memory peers (their doorbell), and
      // refused if input arrived meanwhile (transport.h).
      SpinLock lock(engine.mu_);
      if (engine.PollOnceLocked() || !engine.transport_->PrepareToSleep()) {
        engine.transport_->WokeUp();
        if (poll(fds, 1, 0) > 0) return ReadEventByte(event_fd);
        continue;
      }
    }
    const int r = poll(fds, n, -1);
    const int poll_errno = errno;
    engine.transport_->WokeUp();
    if (r < 0) {
      if (poll_errno == EINTR && RestartAfterSignal()) continue;
      return poll_errno;
    }
    // The event first: another reader of the channel may have taken it
    // meanwhile, and then this blocking read waits for the next one, as a
    // plain read of the channel would.
    if (fds[0].revents != 0) return ReadEventByte(event_fd);
  }
}

}  // namespace

int Device::GetCqEvent(CompletionChannel* channel, void** cq_handle) {
  // Waits outside the lock: a blocking reader must not stall the engine.
  if (int err = AwaitChannelEvent(*engine_, channel->pipe.read_fd())) return err;
  SpinLock lock(engine_->mu_);
  if (channel->pending.empty()) return EIO;
  Cq* cq = channel->pending.front();
  channel->pending.pop_front();
  // A CQ destroyed after its event was queued leaves a null entry.
  if (cq == nullptr) return EAGAIN;
  *cq_handle = cq->handle;
  return 0;
}

int Device::CreateCq(uint32_t cqe, CompletionChannel* channel, void* handle, Cq** out,
                     std::pmr::memory_resource* queue_memory) {
  if (cqe == 0 || cqe > engine_->attr_.max_cqe) return EINVAL;
  // The ring is allocated before the lock (device.h, queue memory); on an
  // error below, `cq` frees it after the lock is released (declared first,
  // destroyed last).
  std::unique_ptr<Cq> cq;
  try {
    cq = std::make_unique<Cq>(QueueMemoryOrDefault(queue_memory));
    cq->ring.resize(cqe);
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  }
  SpinLock lock(engine_->mu_);
  if (engine_->cqs_.size() >= engine_->attr_.max_cq) return ENOMEM;
  cq->channel = channel;
  cq->handle = handle;
  if (channel) ++channel->users;
  *out = cq.get();
  engine_->cqs_.push_back(std::move(cq));
  return 0;
}

uint32_t Device::CqCapacity(const Cq* cq) const { return static_cast<uint32_t>(cq->ring.size()); }

int Device::ResizeCq(Cq* cq, uint32_t cqe) {
  if (cqe == 0 || cqe > engine_->attr_.max_cqe) return EINVAL;
  // The new ring is made before the lock; after it, `next` holds the old
  // one (or, on EINVAL, the unused new one) and frees it.
  std::pmr::vector<Completion> next(cq->memory());
  try {
    next.resize(cqe);
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  }
  SpinLock lock(engine_->mu_);
  return cq->ResizeInto(next) ? 0 : EINVAL;
}

int Device::DestroyCq(Cq* cq, uint32_t* async_events_reported) {
  std::unique_ptr<Cq> doomed;  // freed after the lock is released
  SpinLock lock(engine_->mu_);
  if (cq->users > 0) return EBUSY;
  ForgetAsyncEvents(*engine_, AsyncObject::kCq, cq->handle, async_events_reported);
  if (cq->channel) {
    --cq->channel->users;
    auto& pending = cq->channel->pending;
    // Events not yet read stay in the pipe; drop the queue entries so no
    // dangling CQ is handed out (ibv_destroy_cq requires events acked).
    std::replace(pending.begin(), pending.end(), cq, static_cast<Cq*>(nullptr));
  }
  doomed = TakeOwned(engine_->cqs_, cq);
  return doomed ? 0 : EINVAL;
}

int Device::PollCq(Cq* cq, int n, Completion* out) {
  if (n < 0) return -EINVAL;
  SpinLock lock(engine_->mu_);
  // Packets held back by PostSend (doorbell batching) leave first.
  if (engine_->tx_.count() > 0) engine_->FlushTx();
  // The polling application does the engine's work itself (no thread hop).
  if (cq->count < static_cast<size_t>(n)) {
    if (engine_->PollOnceLocked()) engine_->WakeProgressThreadFor(engine_->NextDeadlineLocked());
    engine_->app_polled_at_.store(engine_->last_pass_.time_since_epoch().count(),
                                  std::memory_order_relaxed);
  }
  engine_->NoteAppActivity();
  const int got = cq->Poll(n, out);
  engine_->app_waiting_.store(got == 0, std::memory_order_relaxed);
  return got;
}

int Device::ArmCq(Cq* cq, bool solicited_only) {
  SpinLock lock(engine_->mu_);
  // The caller is about to block: nothing may stay held back.
  if (engine_->tx_.count() > 0) engine_->FlushTx();
  // Arming a CQ without a channel is allowed (and has no effect to observe).
  // Keep the stronger arm: "next completion" covers "next solicited".
  if (cq->armed != 1) cq->armed = solicited_only ? 2 : 1;
  // A thread about to block for this CQ's event needs the progress thread
  // to take responses (RepliesNeededLocked).
  // So does one that left the request sockets to polling applications.
  if (cq->channel != nullptr) {
    engine_->channel_armed_.store(true, std::memory_order_relaxed);
    if (engine_->app_owns_packets_.load(std::memory_order_relaxed) ||
        (engine_->reply_fd_ >= 0 && !engine_->watching_replies_.load(std::memory_order_relaxed)))
      engine_->WakeProgressThread();
  }
  return 0;
}

void Device::AckCqEvents(Cq* cq, unsigned n) {
  SpinLock lock(engine_->mu_);
  cq->events_acked += n;
}

int Device::CreateSrq(Pd* pd, const SrqAttr& attr, void* handle, Srq** out,
                      std::pmr::memory_resource* queue_memory) {
  const auto& dev = engine_->attr_;
  if (attr.max_wr == 0 || attr.max_wr > dev.max_srq_wr || attr.max_sge > dev.max_srq_sge ||
      attr.srq_limit > attr.max_wr)
    return EINVAL;
  // Allocated before the lock, freed after it on error (as CreateCq).
  std::unique_ptr<Srq> srq;
  try {
    srq = std::make_unique<Srq>(QueueMemoryOrDefault(queue_memory));
    srq->rq.Init(attr.max_wr, std::max<uint32_t>(attr.max_sge, 1));
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  }
  SpinLock lock(engine_->mu_);
  if (engine_->srqs_.size() >= dev.max_srq) return ENOMEM;
  srq->pd = pd;
  srq->limit = attr.srq_limit;
  srq->handle = handle;
  ++pd->users;
  *out = srq.get();
  engine_->srqs_.push_back(std::move(srq));
  return 0;
}

int Device::ModifySrq(Srq* srq, const SrqAttr& attr, uint32_t mask) {
  if (mask & ~3u) return EINVAL;
  // A resize's new queue is made before the lock; after it, `next` holds
  // the old one (or the unused new one) and frees it. The memory and
  // max_sge never change after creation: read without the lock.
  RecvQueue next(srq->rq.memory());
  if (mask & 1) {  // IBV_SRQ_MAX_WR: resize
    if (attr.max_wr == 0 || attr.max_wr > engine_->attr_.max_srq_wr) return EINVAL;
    try {
      next.Init(attr.max_wr, srq->rq.max_sge);
    } catch (const std::bad_alloc&) {
      return ENOMEM;
    }
  }
  SpinLock lock(engine_->mu_);
  if ((mask & 1) && !srq->rq.ResizeInto(next)) return EINVAL;
  if (mask & 2) {  // IBV_SRQ_LIMIT: arm the limit event
    if (attr.srq_limit > srq->rq.wr_ids.size()) return EINVAL;
    srq->limit = attr.srq_limit;
  }
  return 0;
}

int Device::QuerySrq(Srq* srq, SrqAttr* out) {
  SpinLock lock(engine_->mu_);
  out->max_wr = static_cast<uint32_t>(srq->rq.wr_ids.size());
  out->max_sge = srq->rq.max_sge;
  out->srq_limit = srq->limit;
  return 0;
}

int Device::DestroySrq(Srq* srq, uint32_t* async_events_reported) {
  std::unique_ptr<Srq> doomed;  // freed after the lock is released
  SpinLock lock(engine_->mu_);
  if (srq->users > 0) return EBUSY;
  ForgetAsyncEvents(*engine_, AsyncObject::kSrq, srq->handle, async_events_reported);
  --srq->pd->users;
  if (srq->xrcd != nullptr) engine_->ForgetXrcSrq(srq);
  doomed = TakeOwned(engine_->srqs_, srq);
  return doomed ? 0 : EINVAL;
}

int Device::PostSrqRecv(Srq* srq, const RecvWr& wr) {
  SpinLock lock(engine_->mu_);
  if (wr.sges.size() > srq->rq.max_sge) return EINVAL;
  if (srq->rq.Full()) return ENOMEM;
  srq->rq.Push(wr);
  return 0;
}

}  // namespace softrnic::engine
