// The time a pass of the engine works with (PollOnceLocked): Clock::now()
// at most once per kGate of TSC time, the value read last in between.
//
// Why: an application that polls an empty CQ runs a pass per poll (UCX
// polls four CQs per loop of its progress), and Clock::now() (the vDSO's
// clock_gettime on kvm-clock, ~20-40 ns here) was 12-16% of a UCX tag_lat
// client's CPU over shared memory (perf record, session 24), more than the
// rest of an idle pass. What it costs: timers, ACK deadlines and the
// "application polls" mark are judged with a time up to kGate old.
//
// The TSC only gates, it never becomes the time: its rate is learned from
// two clock reads at least kCalibrateOver apart (until then every call
// reads the clock), and a TSC that goes backwards or jumps (no invariant
// TSC, a migrated VM) only causes a read. Other architectures read the
// clock every time.
//
// Thread-safety: none; the engine keeps one under its lock.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "engine/types.h"

namespace softrnic::engine {

class PassClock {
 public:
  static constexpr std::chrono::nanoseconds kGate{500};
  static constexpr std::chrono::nanoseconds kCalibrateOver{1000 * 1000};

  Clock::time_point Now() {
#if defined(__x86_64__)
    const uint64_t tsc = __rdtsc();
    if (gate_cycles_ != 0 && tsc - last_tsc_ < gate_cycles_) return last_;
    last_ = Clock::now();
    last_tsc_ = tsc;
    if (gate_cycles_ == 0) Calibrate(tsc);
    return last_;
#else
    return Clock::now();
#endif
  }

  // Cycles per kGate once known, else 0 (tests).
  uint64_t gate_cycles() const { return gate_cycles_; }

 private:
  void Calibrate(uint64_t tsc) {
    if (since_tsc_ == 0 || tsc <= since_tsc_) {
      since_tsc_ = tsc;
      since_ = last_;
      return;
    }
    const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(last_ - since_);
    if (elapsed < kCalibrateOver) return;
    const uint64_t cycles = tsc - since_tsc_;
    gate_cycles_ = static_cast<uint64_t>(static_cast<double>(cycles) * kGate.count() /
                                         static_cast<double>(elapsed.count()));
    if (gate_cycles_ == 0) since_tsc_ = 0;  // a TSC too slow to gate with: start over
  }

  Clock::time_point last_{};
  uint64_t last_tsc_ = 0;
  uint64_t gate_cycles_ = 0;
  Clock::time_point since_{};
  uint64_t since_tsc_ = 0;
};

}  // namespace softrnic::engine
