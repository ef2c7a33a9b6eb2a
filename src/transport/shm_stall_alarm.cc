// The stall alarm: a same-host sender ends the nap of a peer's progress
// thread when packets it published wait unread.
//
// A progress thread whose application polls its CQ leaves the rings to
// that application and naps (engine/progress/progress.cc): the peers see it
// awake, so they ring no doorbell, and the nap grows while the application
// keeps polling. When the application stops polling without arming a
// channel (it computes, or spins on memory as ib_write_lat's target does),
// nobody reads the rings until the nap ends. The sender is the one that
// notices: its packet's slot is still unread. So every kStallCheckEvery
// receives (its application's polls, its engine's passes) and after each of
// its sleeps (next_deadline() makes a sleeping engine wake for it), it
// looks at the read position of each peer it published to; one that has not
// moved for kStallAlarm while the peer naps ends the nap through the peer's
// `napping` futex word. A peer whose position moves is reading: no alarm.
#include <algorithm>

#include "common/shared_futex.h"
#include "transport/shm_transport.h"

namespace softrnic::transport {

void ShmTransport::WatchForStall(ShmRingPeer* p) {
  if (p->stall_watch) return;
  p->stall_watch = true;
  // Not a position the reader can be at: the first look starts the clock.
  p->stall_head = ~uint64_t{0};
  ++stall_watched_;
}

void ShmTransport::SoundStallAlarms() {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& p : peers_) {
    if (!p->stall_watch) continue;
    const uint64_t head = p->seg.ring(static_cast<uint32_t>(p->ring))->head.load(std::memory_order_acquire);
    // Everything read (or a reader past our tail, which only a lying peer
    // is): nothing to watch until the next publish.
    if (head >= p->producer.tail()) {
      p->stall_watch = false;
      --stall_watched_;
      continue;
    }
    if (head != p->stall_head) {
      p->stall_head = head;
      p->stall_since = now;
      continue;
    }
    if (now - p->stall_since < kStallAlarm) continue;
    p->stall_since = now;  // at most one alarm per kStallAlarm
    std::atomic<uint32_t>& napping = p->seg.header()->napping;
    if (napping.load(std::memory_order_relaxed) == 1 &&
        napping.exchange(0, std::memory_order_acq_rel) == 1) {
      SharedFutexWake(&napping);
      ++counters_.shm_stall_alarms;
    }
  }
}

std::optional<std::chrono::steady_clock::time_point> ShmTransport::next_deadline() const {
  if (stall_watched_ == 0) return std::nullopt;
  // Only for a peer that naps: one that sleeps was rung a doorbell, and one
  // that is awake reads its rings.
  std::optional<std::chrono::steady_clock::time_point> due;
  for (const auto& p : peers_) {
    if (!p->stall_watch || p->seg.header()->napping.load(std::memory_order_relaxed) != 1) continue;
    // Not looked at since the publish: look now.
    const auto at = p->stall_head == ~uint64_t{0} ? std::chrono::steady_clock::time_point{}
                                                   : p->stall_since + kStallAlarm;
    due = due ? std::min(*due, at) : at;
  }
  return due;
}

}  // namespace softrnic::transport
