// Live counters for `softrnic stat` (tools/softrnic_stat.cc): a device's
// EngineStats and TransportCounters, published as a small text file in
// /dev/shm that any process on the host can read while the device runs.
//
// File: $SOFTRNIC_STATS_DIR (default /dev/shm) / softrnic-<pid>.stats, or
// softrnic-<pid>-<n>.stats for a process's second and later publishers
// (softrnic-<pid>-<random>.stats if another user took that name first), mode
// 0600: the owner and root read it. Rewritten atomically (write a temporary
// file with an unpredictable name, O_EXCL|O_NOFOLLOW, rename it over the old
// one: security review L1), at
// most every `period` (100 ms) and only when a counter changed; removed when
// the publisher is destroyed and, for publishers still alive then, at exit.
// A process killed by a signal leaves its file behind: readers check that
// the pid is alive (ReadStatsDir does), and SweepStaleStatsFiles (run when a
// process creates its device, and by `softrnic stat`) removes the files of
// this user's dead processes.
//
// Format (text, one item per line, "key value"; docs/hardening.md):
//
//   softrnic-stats 2           format version (1: no qps/qp lines)
//   pid 4242
//   comm ib_write_bw           /proc/<pid>/comm
//   device softrnic0
//   gid 0 ::ffff:10.0.0.1      one line per GID table entry
//   time_ns 1700000000123456   CLOCK_REALTIME of the snapshot
//   seq 17                     snapshots written so far
//   rx_packets 1234            every counter of FormatStats(), in its order
//   ...
//   qps 3                      live QPs of the device (version 2)
//   qp 17 rc RTS ::ffff:10.0.0.2 18 tx_packets=9 tx_bytes=9512 ...
//                              one line per QP, at most kMaxQpLines (256):
//                              the QPs with the most packets and direct
//                              operations over their life (ties: lower QPN
//                              first), in QPN order. Fields: QPN, type
//                              (rc, uc, ud), state (QpStateName), the peer's
//                              GID and QPN ("-" for UD, or before RTR), then
//                              every counter of kQpCounterFields as
//                              name=value (qp_counters.h). A reader keeps
//                              names it does not know, and skips a line it
//                              cannot parse.
//
// A version 1 reader sees "qps" and "qp" as two more counters (a value it
// cannot parse counts as 0); nothing else changed.
//
// Per-QP rows cost the engine nothing per idle QP: a QP whose counters or
// state changed is noted once (Engine::NoteQpCounters); a snapshot copies
// the rows of the noted QPs only, under the engine lock, and the
// publisher keeps the last row of every QP until it is destroyed, picking
// the busiest outside the lock. With 100,000 QPs the file stays ~100 KiB
// (256 lines of ~400 bytes).
//
// Threading: a publisher owns one thread that sleeps `period`, then copies
// the counters under the engine lock (a few hundred bytes; it spins on
// try_lock briefly, then queues for the lock like a verb call) and writes
// the file with the lock released. Construct and destroy it from any
// thread; do not destroy the engine first.
//
// SOFTRNIC_STATS_SHM=0 disables publishing (no thread, no file).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/thread_annotations.h"
#include "engine/observe/capture_control.h"
#include "engine/engine.h"
#include "engine/qp_counters.h"
#include "engine/types.h"

namespace softrnic::engine {

class Device;

class StatsPublisher {
 public:
  explicit StatsPublisher(Engine& engine,
                          std::chrono::milliseconds period = std::chrono::milliseconds(100));
  ~StatsPublisher();
  StatsPublisher(const StatsPublisher&) = delete;
  StatsPublisher& operator=(const StatsPublisher&) = delete;

  // For Device::Get: starts a publisher for the process's device that lives
  // until exit (an atexit handler stops it and removes its file). Safe to
  // call again after fork() for the child's new device.
  static void StartForProcess(Device& device);

  // Takes a snapshot and writes the file now (waiting for the engine lock).
  void PublishNow();
  // Stops the thread and removes the file. Idempotent.
  void Stop();

  // At most this many "qp" lines per file.
  static constexpr size_t kMaxQpLines = 256;

  bool enabled() const { return enabled_; }
  const std::string& path() const { return path_; }

  // $SOFTRNIC_STATS_DIR or /dev/shm, as the environment has it now (for
  // readers such as `softrnic stat`; a publisher uses its engine's config).
  static std::string Directory();

 private:
  void Run();
  // Snapshot under the engine lock, or (lock busy, not `wait`) the copy a
  // lock holder made for us (stats_handover.h); false if there is none yet.
  bool Snapshot(bool wait, std::string* text);
  // Takes the engine lock for a snapshot: waits for it if `wait`; else
  // tries once, or, every kInsistEvery-th busy period, keeps trying for a
  // while (the per-QP rows are copied only under the lock). False: the lock
  // stayed busy, or Stop was asked for.
  bool LockEngineForSnapshot(bool wait) TRY_ACQUIRE(true, engine_.mu_);
  // The per-QP part of a snapshot: the rows of the noted QPs copied, the
  // destroyed ones forgotten. REQUIRES: rows_mu_ (a std::mutex, which the
  // analysis cannot name).
  void CopyQpRowsLocked() REQUIRES(engine_.mu_);
  // "qps" and "qp" lines of the busiest QPs. REQUIRES: rows_mu_.
  std::string FormatQpLines(size_t live_qps);
  void Write(const std::string& text);

  Engine& engine_;
  const std::chrono::milliseconds period_;
  const std::string dir_;  // SOFTRNIC_STATS_DIR, from the engine's config
  bool enabled_ = false;
  int owner_pid_ = 0;
  std::string comm_;  // /proc/self/comm when the publisher started
  std::string path_;
  bool renamed_ = false;  // path_ moved to a random name (the plain one was taken)
  std::string last_counters_;  // counter block of the last write
  // Per-QP rows (CopyQpRowsLocked): the last copy of every QP noted since
  // it was created, until it is destroyed.
  struct QpRow {
    QpType type = QpType::kRc;
    QpState state = QpState::kReset;
    Gid peer;
    uint32_t dest_qpn = 0;
    QpCounters counters;
  };
  std::mutex rows_mu_;  // taken before the engine lock; guards the members below
  std::unordered_map<uint32_t, QpRow> qp_rows_;
  std::vector<uint32_t> noted_, destroyed_;  // swapped with the engine's lists
  bool rows_changed_ = true;
  std::string qp_lines_;  // FormatQpLines' last result
  uint64_t seq_ = 0;
  // Periods in a row whose first try for the engine lock failed.
  uint64_t busy_periods_ = 0;
  static constexpr uint64_t kInsistEvery = 10;
  std::mutex mu_;  // guards stop_, stopped_, the file
  std::condition_variable cv_;
  bool stop_ = false;
  bool stopped_ = false;
  std::atomic<bool> stop_requested_{false};  // stop_, readable without mu_
  // `softrnic capture -p`: the thread also looks for capture requests
  // (capture_control.h) every period. Null when publishing is off.
  std::unique_ptr<CaptureControl> capture_control_;
  std::thread thread_;
};

// A parsed stats file (for the `softrnic` tool and tests).
struct StatsFile {
  std::string path;
  uid_t owner = 0;  // the file's owner (== the uid running `pid`)
  int pid = 0;
  std::string comm;
  std::string device;
  std::vector<std::string> gids;
  uint64_t time_ns = 0;
  uint64_t seq = 0;
  std::vector<std::pair<std::string, uint64_t>> counters;  // in file order
  // Version 2: the device's live QPs, and the busiest of them.
  struct Qp {
    uint32_t qpn = 0;
    std::string type;   // "rc", "uc", "ud" (raw bytes, as written)
    std::string state;  // "RTS", ...
    std::string peer_gid;  // "-" if none
    std::string peer_qpn;  // decimal, or "-"
    std::vector<std::pair<std::string, uint64_t>> counters;  // in line order
    uint64_t Get(const std::string& name) const;  // 0 if absent
  };
  bool has_qps = false;  // a "qps" line was present
  uint64_t live_qps = 0;
  std::vector<Qp> qps;

  // 0 if absent.
  uint64_t Get(const std::string& name) const;
};

// Parses one file's bytes; false if it is not a softrnic stats file. Pure and
// total: any input (truncated, huge, binary) gives true or false, never a
// crash; strings are kept as raw bytes (escape them before printing). A "qp"
// line that does not parse (too few fields, a QPN that is not a number) is
// skipped; a counter field without '=' too.
bool ParseStatsFile(std::string_view text, StatsFile* out);

// Reads every softrnic-*.stats in `dir` whose process is alive, sorted by
// pid. Files of dead processes are skipped (and removed when `remove_stale`,
// if they are ours). Other users share the directory (security review L2):
// only regular files of at most 1 MiB are read (O_NOFOLLOW|O_NONBLOCK: a
// FIFO or symlink is skipped), only files owned by the uid running the pid
// they name count (no forging another user's process), and a user other
// than root sees only its own files.
std::vector<StatsFile> ReadStatsDir(const std::string& dir, bool remove_stale = false);

// Removes the stats files (and half-written `.tmp.` files) in `dir` that
// belong to dead processes of this user: a regular file, not a symlink,
// owned by geteuid(), whose name's pid (softrnic-<pid>[-<n>].stats[.tmp.*];
// every name a publisher uses starts with its pid) gives kill(pid, 0) ==
// ESRCH. Never reads or touches another user's file (root sweeps only
// root's). Names only, no file is opened: cheap enough for every device
// creation. Returns how many files were removed; with `dry_run`, how many
// would be, removing nothing (`softrnic doctor`).
int SweepStaleStatsFiles(const std::string& dir, bool dry_run = false);

}  // namespace softrnic::engine
