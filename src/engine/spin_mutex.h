// A mutex that spins, then yields, then sleeps, for the engine lock.
//
// The engine lock is held for microseconds. A futex sleep/wake across cores
// costs ~40 us on the 2-vCPU VMs this runs on (docs/progress.md), far more
// than the critical sections, so waiters first spin with `pause`, then
// yield the CPU a few times (the holder may be descheduled on an
// oversubscribed machine). Only then do they sleep on a futex: a holder can
// be blocked in the kernel for long (a system call that waits for an RCU
// grace period, as growing the file descriptor table does), and waiters
// that kept yielding took the CPUs from the very kernel threads it waited
// for. 128 processes on two CPUs (bench/scale/shm_all_to_all.cc) stalled
// for tens of seconds that way, with "rcu_preempt kthread starved" in the
// kernel log and loopback UDP datagrams (softirq work) delivered late.
//
// The uncontended path is what it was, an exchange to take the lock and a
// store to release it (one more load: are there sleepers?). A sleeper is
// woken by the unlock that sees it; one that announced itself just after
// that look is not, so sleepers also wake every kSleepSlice on their own:
// only a lock held past the spins and yields ever waits that long.
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cassert>
#include <cstdint>
#include <ctime>

#include "common/thread_annotations.h"

namespace softrnic::engine {

class CAPABILITY("mutex") SpinMutex {
 public:
  void lock() ACQUIRE() {
    if (!locked_.exchange(1, std::memory_order_acquire)) return;
    for (int spins = 0; spins < kSpins; ++spins) {
      __builtin_ia32_pause();
      if (try_lock()) return;
    }
    for (int yields = 0; yields < kYields; ++yields) {
      sched_yield();
      if (try_lock()) return;
    }
    sleepers_.fetch_add(1, std::memory_order_relaxed);
    while (locked_.exchange(1, std::memory_order_acquire)) {
      const timespec slice{0, kSleepSlice};
      // Returns at once if the lock was freed meanwhile (the word is no
      // longer 1), when woken, or after the slice.
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&locked_), FUTEX_WAIT_PRIVATE, 1u, &slice,
              nullptr, 0);
    }
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }
  bool try_lock() TRY_ACQUIRE(true) {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(1, std::memory_order_acquire);
  }
  void unlock() RELEASE() {
    locked_.store(0, std::memory_order_release);
    if (sleepers_.load(std::memory_order_relaxed) != 0)
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&locked_), FUTEX_WAKE_PRIVATE, 1, nullptr,
              nullptr, 0);
  }
  // Whether some thread holds it now (a hint: it may change at once).
  bool held() const { return locked_.load(std::memory_order_relaxed) != 0; }
  // For code the analysis cannot follow to the caller's lock (a function
  // reached through a class that cannot name this mutex): tells it the lock
  // is held, and checks, as far as a lock without an owner can, that some
  // thread holds it.
  void AssertHeld() const ASSERT_CAPABILITY(this) { assert(held()); }

 private:
  // ~10 us of `pause` on the machines measured, then a few time slices,
  // then sleeps of at most 1 ms between looks.
  static constexpr int kSpins = 256;
  static constexpr int kYields = 8;
  static constexpr long kSleepSlice = 1000 * 1000;  // ns
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  std::atomic<uint32_t> locked_{0};
  std::atomic<uint32_t> sleepers_{0};
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
