// One user namespace for every `softrnic run` of a user (issue 38).
//
// An unprivileged `softrnic run` needs a user namespace for its private
// /dev and /sys view (mounts). Each invocation used to make its own, and two
// invocations were then siblings: the kernel's ptrace check for opening
// another process's /proc/<pid>/fd/<n> (how a peer's shared-memory segment
// and region memfds are opened, transport/shm_registry.h) wants
// CAP_SYS_PTRACE in the target's namespace when the namespaces differ
// (security/commoncap.c, cap_ptrace_access_check), which a sibling never
// has. Their processes fell back to UDP (UCP tag_lat 22 us against 1.6 us).
//
// So a non-root `softrnic run` first looks for a running process of the same
// user (softrnic processes with an open device in this network namespace
// first, as their shared-memory endpoint links name them; then any, since a
// program may open its device late) that sits in a user namespace made the
// way `softrnic run` makes one: a child of ours, owned by our uid, mapping
// exactly our uid and gid. It joins that namespace (setns; the owner of a child namespace
// holds every capability in it, user_namespaces(7)) and makes its mount
// namespace there, so both invocations' processes are in one namespace and
// open each other's segments as processes of one invocation do.
//
// Nothing is gained over making a fresh namespace: the joined one maps only
// our own ids and has our own credentials, and the processes in it are ours.
// Cross-options considered: passing every memfd over a Unix socket (the
// target's CPU would have to answer, so a stopped target could not be
// reached, which the direct path promises), pidfd_getfd(2) (the same ptrace
// check).
#pragma once

#include <sys/types.h>

#include <string>

namespace softrnic::tools {

// Joins the user namespace of a running process of `uid` as described
// above. Returns the pid whose namespace was joined, or 0 when
// there is none to join (or joining failed: the caller then makes its own).
// The caller must be single-threaded and not yet in a namespace of its own.
pid_t JoinRunningUserNamespace(uid_t uid, gid_t gid);

// Whether the "inside outside count" lines of a /proc/<pid>/uid_map or
// gid_map say exactly one id, `id`, mapped to itself.
bool MapsExactlyItself(const std::string& map_text, unsigned id);

}  // namespace softrnic::tools
