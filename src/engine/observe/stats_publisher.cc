#include "engine/observe/stats_publisher.h"

#include "common/background_thread.h"
#include "config/environment.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "engine/device/device.h"
#include "engine/engine.h"
#include "engine/observe/stats.h"
#include "transport/owned_files.h"

namespace softrnic::engine {
namespace {

// Publishers alive in this process, stopped by an atexit handler. Leaked on
// purpose: they must outlive static destructors (exit may run while other
// threads still use the device).
std::mutex* g_registry_mu = new std::mutex;
std::vector<StatsPublisher*>* g_registry = new std::vector<StatsPublisher*>;
bool g_atexit_installed = false;
// Publishers created so far by this pid (the first gets the plain name).
int g_count_pid = 0;
int g_count = 0;

void StopAllAtExit() {
  std::vector<StatsPublisher*> live;
  {
    std::lock_guard<std::mutex> lock(*g_registry_mu);
    live = *g_registry;
  }
  // Stop() ignores publishers inherited across fork (their thread is gone
  // and their file belongs to the parent).
  for (StatsPublisher* p : live) p->Stop();
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Our files are ~1-2 KiB; a cap far above that, far below "exhausts memory".
constexpr size_t kMaxStatsFileBytes = 1 << 20;

bool ProcessAlive(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

// Whether `uid` is the real or effective uid of `pid` ("Uid: r e s fs").
bool ProcessRunsAs(int pid, uid_t uid) {
  const std::string status = ReadSmallFile("/proc/" + std::to_string(pid) + "/status");
  const size_t at = status.find("\nUid:");
  if (at == std::string::npos) return false;
  unsigned long real = 0, effective = 0;
  if (std::sscanf(status.c_str() + at + 5, "%lu %lu", &real, &effective) != 2) return false;
  return real == uid || effective == uid;
}

uint64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

std::string StatsPublisher::Directory() {
  return config::Environment::FromProcess().Text("SOFTRNIC_STATS_DIR");
}

StatsPublisher::StatsPublisher(Engine& engine, std::chrono::milliseconds period)
    : engine_(engine), period_(period), dir_(engine.config().stats_dir) {
  if (!engine.config().stats_shm) return;  // SOFTRNIC_STATS_SHM=0
  owner_pid_ = getpid();
  // Read here, not in a function-local static in Write(): such a static is
  // destroyed by exit() while this publisher's thread may still be writing
  // (its stop handler runs later), a use-after-free ASan caught in CI.
  comm_ = Trimmed(ReadSmallFile("/proc/self/comm"));
  int index;
  {
    std::lock_guard<std::mutex> lock(*g_registry_mu);
    if (g_count_pid != owner_pid_) {
      g_count_pid = owner_pid_;
      g_count = 0;
    }
    index = g_count++;
    g_registry->push_back(this);
    if (!g_atexit_installed) {
      g_atexit_installed = true;
      std::atexit(StopAllAtExit);
    }
  }
  path_ = dir_ + "/softrnic-" + std::to_string(owner_pid_) +
          (index == 0 ? "" : "-" + std::to_string(index)) + ".stats";
  enabled_ = true;
  capture_control_ = std::make_unique<CaptureControl>(engine_, dir_);
  engine_.mu_.lock();
  // From now on the engine notes QPs whose counters change and tells us
  // which QPs went away; the QPs that exist already are noted once here.
  engine_.qp_rows_wanted_ = true;
  for (const auto& [qpn, qp] : engine_.qps_) engine_.NoteQpCounters(qp.get());
  engine_.mu_.unlock();
  PublishNow();
  thread_ = StartBackgroundThread("softrnic-stats", [this] { Run(); });
}

StatsPublisher::~StatsPublisher() { Stop(); }

void StatsPublisher::StartForProcess(Device& device) {
  // What killed processes of this user left behind (they cannot remove it
  // themselves), before this process publishes its own file.
  SweepStaleStatsFiles(device.engine().config().stats_dir);
  // Lives until exit; StopAllAtExit stops it and removes the file.
  new StatsPublisher(device.engine());
}

void StatsPublisher::Stop() {
  if (!enabled_ || owner_pid_ != getpid()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stop_ = true;
  }
  stop_requested_.store(true, std::memory_order_relaxed);
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  capture_control_.reset();  // an attached capture is written out and closed
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    unlink(path_.c_str());
  }
  std::lock_guard<std::mutex> lock(*g_registry_mu);
  g_registry->erase(std::remove(g_registry->begin(), g_registry->end(), this), g_registry->end());
}

bool StatsPublisher::LockEngineForSnapshot(bool wait) {
  if (engine_.mu_.try_lock()) {
    busy_periods_ = 0;
    return true;
  }
  // Busy: the next lock holder copies the counters (stats_handover.h), so
  // only every kInsistEvery-th period is worth the retries (each one a
  // wake-up) that the per-QP rows need.
  const bool insist = ++busy_periods_ % kInsistEvery == 0;
  for (int i = 0; i < 64 && !wait && insist; ++i) {
    if (stop_requested_.load(std::memory_order_relaxed)) return false;
    const timespec ts{0, 200 * 1000};
    nanosleep(&ts, nullptr);
    if (engine_.mu_.try_lock()) return true;
  }
  if (!wait) return false;
  engine_.mu_.lock();
  return true;
}

bool StatsPublisher::Snapshot(bool wait, std::string* text) {
  std::lock_guard<std::mutex> rows_lock(rows_mu_);
  EngineStats stats;
  transport::TransportCounters counters;
  size_t live_qps = 0;
  // An application thread busy-polling its CQ holds the engine lock nearly
  // all the time and re-takes it at once. Queueing for the (spinning) lock
  // here burnt ~12% of a core under ib_write_bw (perf, 2 vCPUs), CPU the
  // application needs, so a periodic snapshot only tries the lock; when it
  // is busy, the copy the last holder made on our request is published
  // instead (its QP rows wait for a period that gets the lock), and the next
  // holder is asked for another. Only a final snapshot (`wait`) queues for
  // the lock.
  if (LockEngineForSnapshot(wait)) {
    engine_.stats_handover_.Cancel();
    stats = engine_.stats_;
    counters = engine_.transport_->counters();
    CopyQpRowsLocked();
    live_qps = engine_.qps_.size();
    engine_.mu_.unlock();
  } else {
    const bool given = engine_.stats_handover_.Take(&stats, &counters, &live_qps);
    engine_.stats_handover_.Ask();
    if (!given) return false;
  }
  // "softrnic name value" lines -> "name value" lines.
  const std::string formatted = FormatStats(stats, counters);
  text->clear();
  text->reserve(formatted.size());
  size_t start = 0;
  while (start < formatted.size()) {
    size_t end = formatted.find('\n', start);
    if (end == std::string::npos) end = formatted.size();
    std::string_view line(formatted.data() + start, end - start);
    if (line.starts_with("softrnic ")) line.remove_prefix(9);
    text->append(line);
    text->push_back('\n');
    start = end + 1;
  }
  text->append(FormatQpLines(live_qps));
  return true;
}

void StatsPublisher::CopyQpRowsLocked() {
  // Swapped, not copied: both vectors keep their capacity, so neither the
  // engine's fast path nor this copy allocates once they have grown.
  noted_.swap(engine_.qp_counters_noted_);
  destroyed_.swap(engine_.qps_destroyed_);
  // Destroyed first: a QP number reused since then is noted again below.
  for (const uint32_t qpn : destroyed_) rows_changed_ |= qp_rows_.erase(qpn) > 0;
  destroyed_.clear();
  for (const uint32_t qpn : noted_) {
    const auto it = engine_.qps_.find(qpn);
    if (it == engine_.qps_.end()) continue;  // destroyed meanwhile
    Qp& qp = *it->second;
    qp.counters_noted = false;
    QpRow& row = qp_rows_[qpn];
    row.type = qp.type;
    row.state = qp.attr.qp_state;
    row.peer = qp.attr.ah_attr.dgid;
    row.dest_qpn = qp.attr.dest_qp_num;
    row.counters = qp.counters;
    rows_changed_ = true;
  }
  noted_.clear();
}

std::string StatsPublisher::FormatQpLines(size_t live_qps) {
  if (!rows_changed_) return "qps " + std::to_string(live_qps) + "\n" + qp_lines_;
  rows_changed_ = false;
  // The busiest kMaxQpLines rows: a bounded file whatever the QP count.
  auto activity = [](const QpRow& r) {
    return r.counters.tx_packets + r.counters.rx_packets + r.counters.shm_direct_ops;
  };
  std::vector<std::pair<uint64_t, uint32_t>> order;  // (activity, qpn)
  order.reserve(qp_rows_.size());
  for (const auto& [qpn, row] : qp_rows_) order.emplace_back(activity(row), qpn);
  auto busier = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  if (order.size() > kMaxQpLines) {
    std::nth_element(order.begin(), order.begin() + kMaxQpLines, order.end(), busier);
    order.resize(kMaxQpLines);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  std::string out;
  out.reserve(order.size() * 360);
  for (const auto& [busy, qpn] : order) {
    (void)busy;
    const QpRow& r = qp_rows_.at(qpn);
    const bool connected = r.type != QpType::kUd && r.state != QpState::kReset && r.state != QpState::kInit;
    out += "qp " + std::to_string(qpn) + " " +
           (r.type == QpType::kRc ? "rc" : r.type == QpType::kUc ? "uc" : "ud") + " " +
           QpStateName(r.state) + " " + (connected ? r.peer.ToString() : "-") + " " +
           (connected ? std::to_string(r.dest_qpn) : "-");
    for (const auto& [name, field] : kQpCounterFields) {
      out += ' ';
      out += name;
      out += '=';
      out += std::to_string(r.counters.*field);
    }
    out += '\n';
  }
  qp_lines_ = std::move(out);
  return "qps " + std::to_string(live_qps) + "\n" + qp_lines_;
}

void StatsPublisher::Write(const std::string& counters) {
  // REQUIRES: mu_ held (so Stop's unlink cannot race with the rename).
  std::string out;
  out.reserve(counters.size() + 256);
  out += "softrnic-stats 2\n";
  out += "pid " + std::to_string(owner_pid_) + "\n";
  out += "comm " + (comm_.empty() ? std::string("?") : comm_) + "\n";
  out += "device " + engine_.name_ + "\n";
  for (size_t i = 0; i < engine_.gids_.size(); ++i)
    out += "gid " + std::to_string(i) + " " + engine_.gids_[i].ToString() + "\n";
  out += "time_ns " + std::to_string(RealtimeNs()) + "\n";
  out += "seq " + std::to_string(++seq_) + "\n";
  out += counters;
  // The directory (/dev/shm) is writable by every local user (security
  // review L1): the temporary file gets a name nobody can predict and is
  // created O_EXCL|O_NOFOLLOW (a planted symlink or file is never opened),
  // 0600 (only the owner, and root, read a process's counters); rename()
  // then replaces a symlink at path_ instead of following it.
  const std::string tmp = transport::UnpredictableName(path_ + ".tmp.");
  if (transport::WriteNewFileAt(AT_FDCWD, tmp, out, 0600) != 0) {
    unlink(tmp.c_str());
    return;  // e.g. no /dev/shm: publishing is best effort
  }
  if (rename(tmp.c_str(), path_.c_str()) == 0) {
    last_counters_ = counters;
    return;
  }
  const int rename_errno = errno;
  unlink(tmp.c_str());
  // Another user holds our name (a file in the sticky directory we may not
  // replace): publish under a name nobody can claim first. Readers take the
  // pid from the contents, not from the name.
  if ((rename_errno == EPERM || rename_errno == EACCES || rename_errno == EISDIR) && !renamed_) {
    renamed_ = true;
    path_ = transport::UnpredictableName(dir_ + "/softrnic-" + std::to_string(owner_pid_) + "-") +
            ".stats";
    Write(counters);
  }
}

void StatsPublisher::PublishNow() {
  if (!enabled_) return;
  std::string text;
  Snapshot(true, &text);
  std::lock_guard<std::mutex> lock(mu_);
  if (!stop_) Write(text);
}

void StatsPublisher::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, period_);
    if (stop_) break;
    lock.unlock();
    capture_control_->Poll();
    std::string text;
    const bool got = Snapshot(false, &text);
    lock.lock();
    if (got && !stop_ && text != last_counters_) Write(text);
  }
}

uint64_t StatsFile::Get(const std::string& name) const {
  for (const auto& [k, v] : counters)
    if (k == name) return v;
  return 0;
}

uint64_t StatsFile::Qp::Get(const std::string& name) const {
  for (const auto& [k, v] : counters)
    if (k == name) return v;
  return 0;
}

bool ParseStatsFile(std::string_view text, StatsFile* out) {
  // Hostile input (security review L2): any bytes, any length. Lines are
  // split without copying the whole text; numbers that do not parse or
  // overflow count as 0; the strings are kept as bytes (the tool escapes
  // them when it prints).
  auto next_line = [&text]() -> std::optional<std::string_view> {
    if (text.empty()) return std::nullopt;
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    return line;
  };
  auto number = [](std::string_view v) -> uint64_t {
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    return ec == std::errc() && end == v.data() + v.size() ? n : 0;
  };
  const std::optional<std::string_view> header = next_line();
  if (!header || !header->starts_with("softrnic-stats ")) return false;
  while (const std::optional<std::string_view> line = next_line()) {
    const size_t sp = line->find(' ');
    if (sp == std::string_view::npos) continue;
    const std::string_view key = line->substr(0, sp);
    const std::string_view value = line->substr(sp + 1);
    if (key == "pid") {
      const uint64_t pid = number(value);
      out->pid = pid <= uint64_t(std::numeric_limits<int>::max()) ? int(pid) : 0;
    } else if (key == "comm") {
      out->comm = value;
    } else if (key == "device") {
      out->device = value;
    } else if (key == "gid") {
      const size_t sp2 = value.find(' ');
      out->gids.emplace_back(sp2 == std::string_view::npos ? value : value.substr(sp2 + 1));
    } else if (key == "time_ns") {
      out->time_ns = number(value);
    } else if (key == "seq") {
      out->seq = number(value);
    } else if (key == "qps") {
      out->has_qps = true;
      out->live_qps = number(value);
    } else if (key == "qp") {
      // "<qpn> <type> <state> <peer gid> <peer qpn> name=value..."
      std::string_view rest = value;
      auto field = [&rest]() -> std::string_view {
        const size_t cut = rest.find(' ');
        const std::string_view f = rest.substr(0, cut);
        rest.remove_prefix(cut == std::string_view::npos ? rest.size() : cut + 1);
        return f;
      };
      const std::string_view qpn = field();
      StatsFile::Qp qp;
      uint64_t n = 0;
      const auto [end, ec] = std::from_chars(qpn.data(), qpn.data() + qpn.size(), n);
      if (ec != std::errc() || end != qpn.data() + qpn.size() || n > 0xFFFFFF) continue;
      qp.qpn = uint32_t(n);
      qp.type = field();
      qp.state = field();
      qp.peer_gid = field();
      qp.peer_qpn = field();
      if (qp.peer_qpn.empty()) continue;  // fewer than five fields
      while (!rest.empty()) {
        const std::string_view kv = field();
        const size_t eq = kv.find('=');
        if (eq == std::string_view::npos || eq == 0) continue;
        qp.counters.emplace_back(std::string(kv.substr(0, eq)), number(kv.substr(eq + 1)));
      }
      out->qps.push_back(std::move(qp));
    } else {
      out->counters.emplace_back(std::string(key), number(value));
    }
  }
  return out->pid > 0;
}

std::vector<StatsFile> ReadStatsDir(const std::string& dir, bool remove_stale) {
  std::vector<StatsFile> files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return files;
  const uid_t me = geteuid();
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("softrnic-", 0) != 0 || name.size() < 7 ||
        name.compare(name.size() - 6, 6, ".stats") != 0)
      continue;
    StatsFile f;
    f.path = dir + "/" + name;
    // Only a regular file of sane size, opened without following links or
    // blocking on a FIFO (security review L2).
    transport::FileFacts facts;
    const std::optional<std::string> text =
        transport::ReadRegularFileAt(dirfd(d), name, kMaxStatsFileBytes, &facts);
    if (!text || !ParseStatsFile(*text, &f)) continue;
    f.owner = facts.owner;
    // A user sees its own processes; root sees everyone's.
    if (me != 0 && f.owner != me) continue;
    // The file must belong to the uid that runs the pid it names (its real
    // or effective uid, from /proc/<pid>/status: /proc/<pid> itself is
    // root's for a non-dumpable process): another user cannot forge
    // counters for somebody else's process.
    const bool alive = ProcessAlive(f.pid);
    if (alive && !ProcessRunsAs(f.pid, f.owner)) continue;
    // A dead pid, or a pid now used by another program, left a stale file.
    const std::string comm = Trimmed(ReadSmallFile("/proc/" + std::to_string(f.pid) + "/comm"));
    if (!alive || (!comm.empty() && comm != f.comm)) {
      if (remove_stale && f.owner == me) unlinkat(dirfd(d), name.c_str(), 0);
      continue;
    }
    files.push_back(std::move(f));
  }
  closedir(d);
  std::sort(files.begin(), files.end(), [](const StatsFile& a, const StatsFile& b) {
    return a.pid != b.pid ? a.pid < b.pid : a.path < b.path;
  });
  return files;
}

int SweepStaleStatsFiles(const std::string& dir, bool dry_run) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  const uid_t me = geteuid();
  int removed = 0;
  while (const dirent* e = readdir(d)) {
    // softrnic-<pid>.stats, softrnic-<pid>-<n or random>.stats, and their
    // temporaries <name>.tmp.<random>.
    const std::string_view name = e->d_name;
    constexpr std::string_view kPrefix = "softrnic-";
    if (!name.starts_with(kPrefix)) continue;
    const size_t stats_at = name.find(".stats");
    if (stats_at == std::string_view::npos) continue;
    const std::string_view tail = name.substr(stats_at + 6);
    if (!tail.empty() && !tail.starts_with(".tmp.")) continue;
    const std::string_view digits = name.substr(kPrefix.size(), stats_at - kPrefix.size());
    uint64_t pid = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (ec != std::errc() || end == digits.data() || (end != digits.data() + digits.size() && *end != '-') ||
        pid == 0 || pid > uint64_t(std::numeric_limits<pid_t>::max()))
      continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode) || st.st_uid != me) continue;  // only our own files
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to know)
    if (dry_run || unlinkat(dirfd(d), e->d_name, 0) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

}  // namespace softrnic::engine
