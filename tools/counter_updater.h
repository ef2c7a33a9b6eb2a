// Live port counter files in `softrnic run`'s sysfs view: a small process
// that rewrites ports/1/counters/* and ports/1/hw_counters/* (port_counters.h)
// every 100 ms from the stats files (engine/observe/stats_publisher.h) of the
// softrnic processes in the view, until the command `softrnic run` started
// exits.
//
// Why a separate process, not the stats publisher inside each application:
// a port's counters count every process using it, and in a view there may
// be several (an MPI launcher and its ranks, a client and a server, a
// program that opens no device while its children do); one writer that
// sums their files needs no coordination between them, never goes
// backwards when one exits (PortCounterAccumulator), and keeps the library
// that applications load unaware of the view. The processes that count are
// those in the view's mount namespace (the command and everything it
// starts), found by /proc/<pid>/ns/mnt.
//
// Why the view stays read-only for the command: the sysfs view is mounted
// read-only, as sysfs is; the updater writes through a second mount of the
// same tmpfs that only it holds (a bind mount detached from every
// namespace, kept as a directory descriptor: see softrnic_run.cc). Each
// file is replaced atomically (written beside it as ".<name>.new", then
// renamed over it), so a reader sees the old value or the new one, never a
// mix. Values are those of `softrnic stat -j` for the same processes at
// the updater's last read (at most ~200 ms old: the publishers write every
// 100 ms, the updater reads every 100 ms).
//
// Thread-safety: StartCounterUpdater forks; call it from a single-threaded
// process (softrnic run, before exec).
#pragma once

#include <sys/types.h>

#include <string>

namespace softrnic::tools {

// Forks the updater (detached: a grandchild, in a session of its own, that
// is nobody's child the command could wait for) and returns in the caller.
// `root_fd`: a directory descriptor of the writable mount; `port_dir`: the
// port's directory relative to it ("softrnic0/ports/1" or
// "infiniband/softrnic0/ports/1"); `watched`: the pid whose exit ends the
// updater (the caller, which then execs the command); `stats_dir`: where the
// stats files are. Returns "" or what failed (the view then has static
// counter files; the command still runs).
std::string StartCounterUpdater(int root_fd, const std::string& port_dir, pid_t watched,
                                const std::string& stats_dir);

}  // namespace softrnic::tools
