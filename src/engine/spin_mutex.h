// A mutex that spins before it yields, for the engine lock.
//
// The engine lock is held for microseconds. A futex sleep/wake across cores
// costs ~40 us on the 2-vCPU VMs this runs on (docs/progress.md), far more
// than the critical sections, so waiters spin with `pause`, then yield the
// CPU (the holder may be descheduled on an oversubscribed machine) instead
// of sleeping in the kernel.
#pragma once

#include <sched.h>

#include <atomic>

namespace softrnic::engine {

class SpinMutex {
 public:
  void lock() {
    for (;;) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins < 256) {
          __builtin_ia32_pause();
        } else {
          sched_yield();
          spins = 0;
        }
      }
    }
  }
  bool try_lock() {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { locked_.store(false, std::memory_order_release); }
  // Whether some thread holds it now (a hint: it may change at once).
  bool held() const { return locked_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace softrnic::engine
