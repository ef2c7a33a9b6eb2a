#include "engine/queues/queues.h"

#include <utility>

namespace softrnic::engine {

thread_local const CompletionChannel* CompletionChannel::waiter_in_pass = nullptr;

void CompletionChannel::Notify(Cq* cq) {
  pending.push_back(cq);
  if (waiter_in_pass == this) {
    ++unsignaled;  // taken by this thread before the lock goes (TakeUnsignaled)
    return;
  }
  // A full pipe (64 KiB of unread events) cannot happen while each armed CQ
  // produces at most one event per ibv_req_notify_cq.
  pipe.Signal();
}

bool CompletionChannel::TakeUnsignaled() {
  if (unsignaled == 0) return false;
  for (--unsignaled; unsignaled > 0; --unsignaled) pipe.Signal();
  return true;
}

bool Cq::Push(const Completion& c, bool solicited) {
  if (count == ring.size()) {
    overflowed = true;
    return false;
  }
  ring[(head + count) % ring.size()] = c;
  ++count;
  // IBA 11.4.2.2: a solicited-only arm fires on solicited completions and on
  // completions in error.
  if (armed == 1 || (armed == 2 && (solicited || c.status != WcStatus::kSuccess))) {
    armed = 0;
    if (channel) {
      ++events_delivered;
      channel->Notify(this);
    }
  }
  return true;
}

int Cq::Poll(int n, Completion* out) {
  int got = 0;
  while (got < n && count > 0) {
    out[got++] = ring[head];
    head = (head + 1) % ring.size();
    --count;
  }
  return got;
}

void Cq::RemoveQp(uint32_t qpn) {
  size_t kept = 0;
  for (size_t i = 0; i < count; ++i) {
    const Completion& c = ring[(head + i) % ring.size()];
    if (c.qp_num != qpn) ring[(head + kept++) % ring.size()] = c;
  }
  count = kept;
}

bool Cq::ResizeInto(std::pmr::vector<Completion>& next) {
  if (next.size() < count) return false;
  for (size_t i = 0; i < count; ++i) next[i] = ring[(head + i) % ring.size()];
  // Same resource: the swap exchanges the buffers, it copies nothing.
  ring.swap(next);
  head = 0;
  return true;
}

void RecvQueue::Init(uint32_t capacity, uint32_t max_sge_per_wr) {
  max_sge = max_sge_per_wr == 0 ? 1 : max_sge_per_wr;
  wr_ids.assign(capacity, 0);
  num_sge.assign(capacity, 0);
  sges.assign(size_t{capacity} * max_sge, Sge{});
  head = 0;
  count = 0;
}

void RecvQueue::Push(const RecvWr& wr) {
  const size_t slot = (head + count) % wr_ids.size();
  wr_ids[slot] = wr.wr_id;
  num_sge[slot] = static_cast<uint32_t>(wr.sges.size());
  for (size_t i = 0; i < wr.sges.size(); ++i) sges[slot * max_sge + i] = wr.sges[i];
  ++count;
}

void RecvQueue::Pop() {
  head = (head + 1) % wr_ids.size();
  --count;
}

bool RecvQueue::ResizeInto(RecvQueue& next) {
  if (next.capacity() < count || next.max_sge != max_sge) return false;
  while (!Empty()) {
    RecvWr wr{FrontWrId(), {FrontSges(), FrontNumSge()}};
    next.Push(wr);
    Pop();
  }
  // Same resource: the swaps exchange the buffers, they copy nothing.
  wr_ids.swap(next.wr_ids);
  num_sge.swap(next.num_sge);
  sges.swap(next.sges);
  std::swap(head, next.head);
  std::swap(count, next.count);
  return true;
}

}  // namespace softrnic::engine
