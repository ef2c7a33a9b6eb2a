// Whether a blocking wait interrupted by a signal goes on waiting.
//
// A blocking read() of a kernel descriptor (the rdma_cm fd, a completion
// channel's fd) is restarted by the kernel after a signal whose handler was
// installed with SA_RESTART (signal() in glibc), and returns EINTR otherwise
// (programs that end wait loops with a signal install theirs without it).
// poll() is never restarted, and which signal interrupted it is not known
// where it returns: so a wait built on poll() goes on unless some handler
// lacks SA_RESTART. Handlers of fault signals (sanitizers install them
// without SA_RESTART) are not counted: a fault is never what interrupts a
// wait. Call it only on EINTR (it asks the kernel about every signal).
#pragma once

#include <signal.h>

namespace softrnic {

inline bool RestartAfterSignal() {
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP) continue;
    struct sigaction sa;
    if (sigaction(sig, nullptr, &sa) != 0) continue;
    const bool handled = (sa.sa_flags & SA_SIGINFO) ? sa.sa_sigaction != nullptr
                                                     : sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN;
    if (handled && !(sa.sa_flags & SA_RESTART)) return false;
  }
  return true;
}

}  // namespace softrnic
