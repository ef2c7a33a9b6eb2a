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
#include <cassert>

#include "common/thread_annotations.h"

namespace softrnic::engine {

class CAPABILITY("mutex") SpinMutex {
 public:
  void lock() ACQUIRE() {
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
  bool try_lock() TRY_ACQUIRE(true) {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() RELEASE() { locked_.store(false, std::memory_order_release); }
  // Whether some thread holds it now (a hint: it may change at once).
  bool held() const { return locked_.load(std::memory_order_relaxed); }
  // For code the analysis cannot follow to the caller's lock (a function
  // reached through a class that cannot name this mutex): tells it the lock
  // is held, and checks, as far as a lock without an owner can, that some
  // thread holds it.
  void AssertHeld() const ASSERT_CAPABILITY(this) { assert(held()); }

 private:
  std::atomic<bool> locked_{false};
};

// Holds a SpinMutex for its scope: std::lock_guard, but annotated, so the
// thread-safety analysis knows the lock is held (libstdc++'s guards carry no
// annotations).
class SCOPED_CAPABILITY SpinLock {
 public:
  explicit SpinLock(SpinMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~SpinLock() RELEASE() { mu_.unlock(); }
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

 private:
  SpinMutex& mu_;
};

}  // namespace softrnic::engine
