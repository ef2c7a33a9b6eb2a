// Device: completion channels, CQs and SRQs, the locked facade over the
// engine's queues.h objects (device.cc has the rest of Device).

#include <algorithm>
#include <cerrno>
#include <new>

#include "engine/device/device.h"
#include "engine/device/device_internal.h"
#include "engine/engine.h"

namespace softrnic::engine {

int Device::CreateCompletionChannel(CompletionChannel** out) {
  auto ch = std::make_unique<CompletionChannel>();
  if (!ch->ok()) return errno ? errno : EMFILE;
  *out = ch.get();
  SpinLock lock(engine_->mu_);
  engine_->AddChannelLocked(std::move(ch));
  return 0;
}

int Device::DestroyCompletionChannel(CompletionChannel* channel) {
  SpinLock lock(engine_->mu_);
  return engine_->RemoveChannelLocked(channel);
}

int Device::CompletionChannelFd(const CompletionChannel* channel) const { return channel->pipe.read_fd(); }

namespace {

// The event ibv_get_cq_event hands out (under the engine lock).
int TakePendingEvent(CompletionChannel* channel, void** cq_handle) {
  if (channel->pending.empty()) return EIO;
  Cq* cq = channel->pending.front();
  channel->pending.pop_front();
  // A CQ destroyed after its event was queued leaves a null entry.
  if (cq == nullptr) return EAGAIN;
  *cq_handle = cq->handle;
  return 0;
}

}  // namespace

int Device::GetCqEvent(CompletionChannel* channel, void** cq_handle) {
  {
    SpinLock lock(engine_->mu_);
    // Destroyed before this call got the lock (another thread of the
    // application raced it): as a read of a closed channel fd.
    if (channel->destroyed) return EBADF;
    // Counted, so that a channel destroyed meanwhile stays until we leave.
    ++channel->waiters;
  }
  // Waits outside the lock: a blocking reader must not stall the engine.
  const int err = engine_->AwaitChannelEvent(channel);
  SpinLock lock(engine_->mu_);
  const int rc = err != 0 ? err : TakePendingEvent(channel, cq_handle);
  engine_->LeaveChannelLocked(channel);
  return rc;
}


int Device::CreateCq(uint32_t cqe, CompletionChannel* channel, void* handle, Cq** out,
                     std::pmr::memory_resource* queue_memory) {
  if (cqe == 0 || cqe > engine_->attr().max_cqe) return EINVAL;
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
  cq->channel = channel;
  cq->handle = handle;
  Cq* const made = cq.get();
  SpinLock lock(engine_->mu_);
  if (const int rc = engine_->AddCqLocked(cq)) return rc;
  *out = made;
  return 0;
}

uint32_t Device::CqCapacity(const Cq* cq) const { return static_cast<uint32_t>(cq->ring.size()); }

int Device::ResizeCq(Cq* cq, uint32_t cqe) {
  if (cqe == 0 || cqe > engine_->attr().max_cqe) return EINVAL;
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
  return engine_->RemoveCqLocked(cq, async_events_reported, &doomed);
}

int Device::PollCq(Cq* cq, int n, Completion* out) {
  if (n < 0) return -EINVAL;
  SpinLock lock(engine_->mu_);
  return engine_->PollCqLocked(cq, n, out);
}

int Device::ArmCq(Cq* cq, bool solicited_only) {
  SpinLock lock(engine_->mu_);
  engine_->ArmCqLocked(cq, solicited_only);
  return 0;
}

void Device::AckCqEvents(Cq* cq, unsigned n) {
  SpinLock lock(engine_->mu_);
  cq->events_acked += n;
}

int Device::CreateSrq(Pd* pd, const SrqAttr& attr, void* handle, Srq** out,
                      std::pmr::memory_resource* queue_memory) {
  const auto& dev = engine_->attr();
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
  srq->pd = pd;
  srq->limit = attr.srq_limit;
  srq->handle = handle;
  Srq* const made = srq.get();
  SpinLock lock(engine_->mu_);
  if (const int rc = engine_->AddSrqLocked(srq)) return rc;
  *out = made;
  return 0;
}

int Device::ModifySrq(Srq* srq, const SrqAttr& attr, uint32_t mask) {
  if (mask & ~3u) return EINVAL;
  // A resize's new queue is made before the lock; after it, `next` holds
  // the old one (or the unused new one) and frees it. The memory and
  // max_sge never change after creation: read without the lock.
  RecvQueue next(srq->rq.memory());
  if (mask & 1) {  // IBV_SRQ_MAX_WR: resize
    if (attr.max_wr == 0 || attr.max_wr > engine_->attr().max_srq_wr) return EINVAL;
    try {
      next.Init(attr.max_wr, srq->rq.max_sge);
    } catch (const std::bad_alloc&) {
      return ENOMEM;
    }
  }
  SpinLock lock(engine_->mu_);
  if (mask & 1) {
    if (const int rc = engine_->ResizeSrqLocked(srq, next)) return rc;
  }
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
  return engine_->RemoveSrqLocked(srq, async_events_reported, &doomed);
}

int Device::PostSrqRecv(Srq* srq, const RecvWr& wr) {
  SpinLock lock(engine_->mu_);
  if (wr.sges.size() > srq->rq.max_sge) return EINVAL;
  return engine_->PostSrqRecvLocked(srq, wr);
}

}  // namespace softrnic::engine
