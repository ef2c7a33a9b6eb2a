#include "engine/stats_publisher.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "engine/device.h"
#include "engine/engine.h"
#include "engine/stats.h"

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

bool ProcessAlive(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

uint64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

std::string StatsPublisher::Directory() {
  const char* d = std::getenv("SOFTRNIC_STATS_DIR");
  return (d && *d) ? d : "/dev/shm";
}

StatsPublisher::StatsPublisher(Engine& engine, std::chrono::milliseconds period)
    : engine_(engine), period_(period) {
  const char* env = std::getenv("SOFTRNIC_STATS_SHM");
  if (env && std::strcmp(env, "0") == 0) return;
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
  path_ = Directory() + "/softrnic-" + std::to_string(owner_pid_) +
          (index == 0 ? "" : "-" + std::to_string(index)) + ".stats";
  enabled_ = true;
  PublishNow();
  thread_ = std::thread([this] { Run(); });
}

StatsPublisher::~StatsPublisher() { Stop(); }

void StatsPublisher::StartForProcess(Device& device) {
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    unlink(path_.c_str());
    unlink((path_ + ".tmp").c_str());
  }
  std::lock_guard<std::mutex> lock(*g_registry_mu);
  g_registry->erase(std::remove(g_registry->begin(), g_registry->end(), this), g_registry->end());
}

bool StatsPublisher::Snapshot(bool wait, std::string* text) {
  EngineStats stats;
  transport::TransportCounters counters;
  // An application thread busy-polling its CQ holds the engine lock nearly
  // all the time and re-takes it at once. Queueing for the (spinning) lock
  // here burnt ~12% of a core under ib_write_bw (perf, 2 vCPUs), CPU the
  // application needs: a periodic snapshot instead tries the lock between
  // short sleeps and, if the engine stays busy, skips this period (the
  // counters are published at the next one). Only a final snapshot (`wait`)
  // queues for the lock.
  bool locked = engine_.mu_.try_lock();
  for (int i = 0; i < 64 && !locked && !wait; ++i) {
    if (stop_requested_.load(std::memory_order_relaxed)) return false;
    const timespec ts{0, 200 * 1000};
    nanosleep(&ts, nullptr);
    locked = engine_.mu_.try_lock();
  }
  if (!locked) {
    if (!wait) return false;
    engine_.mu_.lock();
  }
  stats = engine_.stats_;
  counters = engine_.transport_->counters();
  engine_.mu_.unlock();
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
  return true;
}

void StatsPublisher::Write(const std::string& counters) {
  // REQUIRES: mu_ held (so Stop's unlink cannot race with the rename).
  std::string out;
  out.reserve(counters.size() + 256);
  out += "softrnic-stats 1\n";
  out += "pid " + std::to_string(owner_pid_) + "\n";
  out += "comm " + (comm_.empty() ? std::string("?") : comm_) + "\n";
  out += "device " + engine_.name_ + "\n";
  for (size_t i = 0; i < engine_.gids_.size(); ++i)
    out += "gid " + std::to_string(i) + " " + engine_.gids_[i].ToString() + "\n";
  out += "time_ns " + std::to_string(RealtimeNs()) + "\n";
  out += "seq " + std::to_string(++seq_) + "\n";
  out += counters;
  const std::string tmp = path_ + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;  // e.g. no /dev/shm: publishing is best effort
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t w = write(fd, out.data() + done, out.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += size_t(w);
  }
  close(fd);
  if (done == out.size() && rename(tmp.c_str(), path_.c_str()) == 0) {
    last_counters_ = counters;
  } else {
    unlink(tmp.c_str());
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
  pthread_setname_np(pthread_self(), "softrnic-stats");
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, period_);
    if (stop_) break;
    lock.unlock();
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

bool ParseStatsFile(const std::string& text, StatsFile* out) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line.rfind("softrnic-stats ", 0) != 0) return false;
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    const std::string key = line.substr(0, sp);
    const std::string value = line.substr(sp + 1);
    if (key == "pid") {
      out->pid = std::atoi(value.c_str());
    } else if (key == "comm") {
      out->comm = value;
    } else if (key == "device") {
      out->device = value;
    } else if (key == "gid") {
      const size_t sp2 = value.find(' ');
      out->gids.push_back(sp2 == std::string::npos ? value : value.substr(sp2 + 1));
    } else if (key == "time_ns") {
      out->time_ns = std::strtoull(value.c_str(), nullptr, 10);
    } else if (key == "seq") {
      out->seq = std::strtoull(value.c_str(), nullptr, 10);
    } else {
      out->counters.emplace_back(key, std::strtoull(value.c_str(), nullptr, 10));
    }
  }
  return out->pid > 0;
}

std::vector<StatsFile> ReadStatsDir(const std::string& dir, bool remove_stale) {
  std::vector<StatsFile> files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return files;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("softrnic-", 0) != 0 || name.size() < 7 ||
        name.compare(name.size() - 6, 6, ".stats") != 0)
      continue;
    StatsFile f;
    f.path = dir + "/" + name;
    if (!ParseStatsFile(ReadSmallFile(f.path), &f)) continue;
    // A dead pid, or a pid now used by another program, left a stale file.
    const std::string comm = Trimmed(ReadSmallFile("/proc/" + std::to_string(f.pid) + "/comm"));
    if (!ProcessAlive(f.pid) || (!comm.empty() && comm != f.comm)) {
      if (remove_stale) unlink(f.path.c_str());
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

}  // namespace softrnic::engine
