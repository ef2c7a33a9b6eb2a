// AdaptiveSpin: whether the progress thread busy-polls after its last work
// instead of sleeping, decided from what the last spins and sleeps caught.
//
// Why: a passive target (perftest's ib_read_lat / ib_atomic_lat server,
// which never polls) answers every READ and atomic from the progress
// thread. Asleep in epoll, that thread costs each request a cross-core
// wake-up: 32 us per ib_read_lat trip across two namespaces, against 8.6
// with a fixed 50 us spin (bench/findings.md, session 36). A fixed spin
// costs a CPU for as long as any traffic lasts and after it; this one spins
// only while requests keep arriving within the window:
//  - a spin that catches work, or a sleep that ends in work within
//    kDenseAfterSleep of the previous work, earns a credit (up to
//    kMaxCredit);
//  - a spin that runs the whole window without work costs kMissCost
//    credits;
//  - the thread spins only with a positive credit.
// So a request stream at ~1 per 100 us spins and a sparser one does not;
// one in between pays at most one empty window per kMissCost dense sleeps.
//
// Never spun: on a thread allowed one CPU (it would take that CPU from its
// own application), under SCHED_FIFO (it would starve the CPU's other
// threads), and after the spinning thread was preempted (kPreempted between
// two empty passes: another thread wants the CPU, as on a loaded 2-CPU
// machine; the credit drops to zero).
//
// Thread-safety: none; the progress thread's own (Progress::Run).
#pragma once

#include <algorithm>
#include <chrono>

#include "engine/types.h"

namespace softrnic::engine {

class AdaptiveSpin {
 public:
  static constexpr int kMaxCredit = 8;
  static constexpr int kMissCost = 4;
  static constexpr std::chrono::nanoseconds kDenseAfterSleep{100000};
  static constexpr std::chrono::nanoseconds kPreempted{30000};

  // `window`: how long a spin lasts after the last work (0: never spin).
  // `allowed`: false on a one-CPU thread or a real-time one.
  AdaptiveSpin(std::chrono::nanoseconds window, bool allowed)
      : window_(allowed ? window : std::chrono::nanoseconds(0)) {}

  // A pass did work at `now`.
  void Worked(Clock::time_point now) {
    if (spinning_ || (woke_ && now - last_work_ < kDenseAfterSleep))
      credit_ = std::min(credit_ + 1, kMaxCredit);
    spinning_ = woke_ = false;
    last_work_ = now;
  }
  // A pass found nothing while spinning (may_sleep was false).
  void Idle(Clock::time_point now) {
    if (spinning_ && now - last_idle_ > kPreempted) credit_ = 0;
    spinning_ = true;
    last_idle_ = now;
  }
  // Whether the next pass may prepare a sleep. A spin that ends here
  // without work pays for it.
  bool MaySleep(Clock::time_point now) {
    if (credit_ <= 0) return true;
    if (now - last_work_ < window_) return false;
    if (spinning_) credit_ -= kMissCost;
    return true;
  }
  // The thread slept (epoll) and woke.
  void WokeUp() {
    spinning_ = false;
    woke_ = true;
  }

  int credit() const { return credit_; }
  bool enabled() const { return window_.count() > 0; }

 private:
  const std::chrono::nanoseconds window_;
  Clock::time_point last_work_{};
  Clock::time_point last_idle_{};
  int credit_ = 0;
  bool spinning_ = false;  // an idle pass ran since the last work
  bool woke_ = false;      // the thread slept since the last work
};

}  // namespace softrnic::engine
