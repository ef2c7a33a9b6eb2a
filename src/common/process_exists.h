// Whether a process with this pid exists, asked with kill(pid, 0): only
// ESRCH says no (EPERM means it exists under another user).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cerrno>

namespace softrnic {

inline bool ProcessExists(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

}  // namespace softrnic
