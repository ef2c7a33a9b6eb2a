// The stats publisher's snapshot, copied by whichever thread holds the
// engine lock when the publisher could not take it.
//
// The publisher (stats_publisher.h) copies the counters under the engine
// lock every 100 ms. An application busy-polling its CQ holds that lock most
// of the time, so the publisher's try_lock failed ~7 times in 8 and each
// retry was a wake-up after a 200 us sleep: ~70 wake-ups a second per
// process under ib_send_lat over shared memory, each preempting a polling
// application on a 2-CPU machine for ~14 us (a fifth to a third of that
// run's samples over 10 us; session 36). Instead, a publisher that finds
// the lock busy asks (Ask), the next PollCq under the lock copies (Give: a
// few hundred bytes, once per period), and the publisher takes the copy at
// its next period (Take): one wake-up per period, the counters at most one
// period older.
//
// One giver at a time (the engine lock), one taker (the publisher's
// thread): the state word orders the copy between them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "engine/observe/stats.h"
#include "transport/transport.h"

namespace softrnic::engine {

class StatsHandover {
 public:
  // The publisher: the engine lock was busy; the next holder copies.
  void Ask() { state_.store(kAsked, std::memory_order_release); }
  // A thread holding the engine lock: whether to call Give (one load).
  bool asked() const { return state_.load(std::memory_order_acquire) == kAsked; }
  void Give(const EngineStats& stats, const transport::TransportCounters& counters,
            size_t live_qps) {
    stats_ = stats;
    counters_ = counters;
    live_qps_ = live_qps;
    state_.store(kGiven, std::memory_order_release);
  }
  // The publisher: the copy given since Ask, if any.
  bool Take(EngineStats* stats, transport::TransportCounters* counters, size_t* live_qps) {
    if (state_.load(std::memory_order_acquire) != kGiven) return false;
    *stats = stats_;
    *counters = counters_;
    *live_qps = live_qps_;
    state_.store(kIdle, std::memory_order_release);
    return true;
  }
  // The publisher, holding the engine lock itself: nothing is asked.
  void Cancel() { state_.store(kIdle, std::memory_order_release); }

 private:
  static constexpr uint32_t kIdle = 0, kAsked = 1, kGiven = 2;
  std::atomic<uint32_t> state_{kIdle};
  EngineStats stats_;
  transport::TransportCounters counters_;
  size_t live_qps_ = 0;
};

}  // namespace softrnic::engine
