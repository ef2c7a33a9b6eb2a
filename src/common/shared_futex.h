// Futex waits and wakes on a word in memory shared between processes (a
// same-host peer's control segment, an XRC mailbox): not
// FUTEX_PRIVATE_FLAG, so the kernel keys the word by its page, and a wake
// from another process reaches the waiter (futex(2)).
//
// A hostile peer that shares the word can only wake a waiter early or make
// a wait return at once (the waiter's own timeout bounds every wait).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>

namespace softrnic {

// Wakes every thread waiting on `word`.
inline void SharedFutexWake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Sleeps while `word` holds `seen`, at most `timeout` (returns at once if it
// no longer does; a wake or a signal may end it early).
inline void SharedFutexWait(std::atomic<uint32_t>* word, uint32_t seen,
                            std::chrono::nanoseconds timeout) {
  const timespec ts{static_cast<time_t>(timeout.count() / 1000000000),
                    static_cast<long>(timeout.count() % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

}  // namespace softrnic
