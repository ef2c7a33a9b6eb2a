// Grows this process's file descriptor table now, to hold descriptors
// 0 .. fds-1 (or as many as RLIMIT_NOFILE allows), so that opening them
// later never grows it.
//
// Why: Linux grows the table one doubling at a time (fs/file.c,
// expand_fdtable), and in a process with more than one thread each growth
// first waits for an RCU grace period. On a host with more runnable threads
// than CPUs that wait took seconds: the RCU grace-period kthread queues for
// a CPU like everyone else. 128 processes on two CPUs, each opening a
// pidfd per peer under its engine lock, stalled every engine for up to tens
// of seconds at a time (bench/scale/shm_all_to_all.cc: thread stacks in
// expand_files -> synchronize_rcu). Growing once, when the device opens,
// pays that wait at most once and outside any lock.
//
// `any_fd` is an open descriptor to duplicate (the duplicate is closed at
// once). Best effort: nothing happens if the limit is lower or the
// duplicate fails.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

namespace softrnic {

inline void ReserveFdTable(int any_fd, int fds) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      static_cast<rlim_t>(fds) > limit.rlim_cur)
    fds = static_cast<int>(limit.rlim_cur);
  if (fds <= 1) return;
  // The lowest free descriptor at or above fds-1: never one in use.
  const int top = fcntl(any_fd, F_DUPFD_CLOEXEC, fds - 1);
  if (top >= 0) close(top);
}

}  // namespace softrnic
