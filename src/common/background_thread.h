// Threads that softrnic starts inside an application's process (progress,
// stats, connection manager, XRC sharing) with every asynchronous signal
// blocked.
//
// A process-directed signal (kill(getpid(), SIGUSR2), a timer's SIGALRM,
// SIGCHLD) goes to any thread that does not block it (signal(7)). An
// application that blocks a signal in its own threads and takes it with
// sigwait or a signalfd (tgt's tgtd does so for SIGUSR2) or that installs a
// handler expecting it on one of its threads would otherwise find it
// delivered to a softrnic thread: run there by the handler, or, with the
// default action, killing the process. A real NIC's driver has no threads in
// the process, so the application must not be able to tell ours are there.
//
// The faults a thread causes itself (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGTRAP, SIGSYS) stay unblocked: they go to the faulting thread whatever
// the mask, and blocked they would kill the process without running a
// sanitizer's or the application's handler.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace softrnic {

// The mask a softrnic thread runs with: everything but the synchronous
// fault signals.
inline sigset_t BackgroundThreadSignalMask() {
  sigset_t mask;
  sigfillset(&mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&mask, sig);
  return mask;
}

// std::thread(f), the new thread starting with BackgroundThreadSignalMask()
// (a thread inherits its creator's mask; the creator's own is restored before
// this returns, so the calling application thread is untouched) and named
// `name` (at most 15 characters) before this returns: a thread that named
// itself would be seen unnamed by whoever looks in between (tools, tests
// that list /proc/self/task).
template <typename F>
std::thread StartBackgroundThread(const char* name, F&& f) {
  const sigset_t mask = BackgroundThreadSignalMask();
  sigset_t saved;
  pthread_sigmask(SIG_SETMASK, &mask, &saved);
  std::thread t;
  try {
    t = std::thread(std::forward<F>(f));
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  pthread_setname_np(t.native_handle(), name);
  return t;
}

}  // namespace softrnic
