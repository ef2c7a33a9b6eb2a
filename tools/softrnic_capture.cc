// `softrnic capture`: a pcapng file of the RoCE v2 traffic of softrnic
// processes, every path included (docs/capture.md, engine/observe/capture.h).
//
//   softrnic capture -w FILE [-s MB] [-n FILES] [-k] [--] CMD [ARGS...]
//       runs CMD with SOFTRNIC_CAPTURE pointing into a private directory, so
//       CMD and every softrnic process it starts records its own packets;
//       when CMD ends, the files are merged into FILE (capture_merge.h:
//       each packet once, in time order).
//   softrnic capture -w FILE [-s MB] [-n FILES] [-k] (-p PID)... | -a [-t SECS]
//       captures processes that are already running, until SECS have passed
//       or Ctrl-C: a request beside each one's stats file makes it capture
//       (engine/observe/capture_control.h); then the files are merged the same way.
//   softrnic capture --merge -w FILE IN...
//       merges capture files recorded separately (SOFTRNIC_CAPTURE set by
//       hand, e.g. on two hosts or in two network namespaces).
//
// Exit status: CMD's (128 + signal if it was killed); 2 for a usage error;
// 1 if a process to attach to is not a running softrnic device; 125 if the
// capture could not be set up or written (the message says why).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "capture_merge.h"
#include "commands.h"
#include "engine/observe/capture_control.h"
#include "engine/observe/stats_publisher.h"
#include "wire/pcapng.h"

namespace softrnic::tools {
namespace {

constexpr int kUsage = 2;
constexpr int kCaptureFailed = 125;

void CaptureUsage(FILE* out) {
  std::fprintf(
      out,
      "usage: softrnic capture -w FILE [-s MB] [-n FILES] [-k] [--] CMD [ARGS...]\n"
      "       softrnic capture -w FILE [-s MB] [-n FILES] [-k] (-p PID)... | -a [-t SECS]\n"
      "       softrnic capture --merge -w FILE IN.pcapng...\n"
      "Records every RoCE v2 packet of CMD's softrnic processes (UDP, shared-memory\n"
      "rings, and direct shared-memory operations as the packets they replace) and\n"
      "writes them to FILE as pcapng, each packet once, in time order; Wireshark\n"
      "and tshark decode it as RoCE v2 (docs/capture.md).\n"
      "  -w FILE    the merged capture (required)\n"
      "  -s MB      largest file per process (SOFTRNIC_CAPTURE_SIZE_MB, default 256)\n"
      "  -n FILES   rotate through FILES files per process, keeping the most recent\n"
      "             (default 1: a process's capture stops when its file is full)\n"
      "  -k         keep the per-process files (their directory is printed)\n"
      "  -p PID     capture a running softrnic process (repeatable) until SECS\n"
      "             have passed or Ctrl-C; -a: every one this user may capture\n"
      "  -t SECS    how long to capture running processes (default: until Ctrl-C)\n"
      "  --merge    merge existing capture files instead of running a command\n"
      "CMD must load softrnic's libraries (e.g. softrnic capture -w f.pcapng --\n"
      "softrnic run ib_write_bw). Exit status: CMD's; 2 usage; 1 no such process;\n"
      "125 capture failed.\n");
}

std::optional<std::vector<uint8_t>> ReadWholeFile(const std::string& path, std::string* error) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    *error = path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    *error = path + ": not a regular file";
    return std::nullopt;
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  bytes.resize(got);
  return bytes;
}

bool WriteWholeFile(const std::string& path, const std::vector<uint8_t>& bytes,
                    std::string* error) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = path + ": " + std::strerror(errno);
    return false;
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = path + ": " + (n < 0 ? std::strerror(errno) : "short write");
      close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return close(fd) == 0 || (*error = path + ": " + std::strerror(errno), false);
}

// Parses and merges `paths` into `out`. A file that stops making sense
// mid-way (a process killed while writing) contributes what came before.
int MergeFiles(const std::vector<std::string>& paths, const std::string& out) {
  std::vector<wire::pcapng::File> files;
  for (const std::string& path : paths) {
    std::string error;
    const auto bytes = ReadWholeFile(path, &error);
    if (!bytes) {
      std::fprintf(stderr, "softrnic capture: %s\n", error.c_str());
      return kCaptureFailed;
    }
    wire::pcapng::File prefix;
    auto file = wire::pcapng::Parse(*bytes, &error, &prefix);
    if (!file) {
      if (prefix.interfaces.empty()) {
        std::fprintf(stderr, "softrnic capture: %s: not a capture softrnic can read: %s\n",
                     path.c_str(), error.c_str());
        return kCaptureFailed;
      }
      std::fprintf(stderr, "softrnic capture: %s: %s; the %zu packets before it are kept\n",
                   path.c_str(), error.c_str(), prefix.packets.size());
      file = std::move(prefix);
    }
    files.push_back(std::move(*file));
  }
  const MergeResult merged = MergeCaptures(files);
  std::string error;
  if (!WriteWholeFile(out, merged.bytes, &error)) {
    std::fprintf(stderr, "softrnic capture: %s\n", error.c_str());
    return kCaptureFailed;
  }
  std::fprintf(stderr,
               "softrnic capture: %llu packets from %zu file(s) written to %s (%llu recorded at "
               "both ends, kept once)\n",
               static_cast<unsigned long long>(merged.packets), paths.size(), out.c_str(),
               static_cast<unsigned long long>(merged.duplicates));
  return 0;
}

// The capture files in `dir`, rotated ones (.pcapng.N) included, by name.
std::vector<std::string> CaptureFilesIn(const std::string& dir) {
  std::vector<std::string> paths;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      const bool marker = name.size() > 5 && name.compare(name.size() - 5, 5, ".done") == 0;
      if (name.rfind("softrnic-", 0) == 0 && name.find(".pcapng") != std::string::npos && !marker)
        paths.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// Removes `dir` and what capture put in it (files, .done markers, and one
// level of per-process subdirectories).
void RemoveDirectory(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    std::vector<std::string> names;
    while (const dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        names.push_back(e->d_name);
    closedir(d);
    for (const std::string& n : names) {
      const std::string path = dir + "/" + n;
      struct stat st{};
      if (lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        RemoveDirectory(path);
      else
        unlink(path.c_str());
    }
  }
  rmdir(dir.c_str());
}

std::optional<std::string> MakePrivateDirectory() {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/softrnic-capture.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    std::fprintf(stderr, "softrnic capture: cannot create a directory in %s: %s (set TMPDIR)\n",
                 tmp != nullptr && *tmp ? tmp : "/tmp", std::strerror(errno));
    return std::nullopt;
  }
  return dir;
}

pid_t g_child = -1;
volatile sig_atomic_t g_stop = 0;
void ForwardSignal(int sig) {
  if (g_child > 0) kill(g_child, sig);
  g_stop = 1;
}

void HandleStopSignals() {
  struct sigaction sa{};
  sa.sa_handler = ForwardSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

bool Alive(int pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// One running process being captured.
struct Target {
  int pid = 0;
  uid_t owner = 0;
  std::string dir;      // its capture files go here (owned by `owner`)
  std::string request;  // the request file beside its stats file
  bool started = false;
};

// Writes the request atomically (a temporary name, then rename), owned by
// the target's user: the target obeys only its own user's requests.
bool WriteRequest(const Target& t, const engine::CaptureSettings& settings) {
  const std::string tmp = t.request + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::fprintf(stderr, "softrnic capture: %s: %s\n", tmp.c_str(), std::strerror(errno));
    return false;
  }
  const std::string text = engine::FormatCaptureRequest(settings);
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  (t.owner == geteuid() || fchown(fd, t.owner, static_cast<gid_t>(-1)) == 0);
  close(fd);
  if (!ok || rename(tmp.c_str(), t.request.c_str()) != 0) {
    std::fprintf(stderr, "softrnic capture: cannot leave a capture request at %s: %s\n",
                 t.request.c_str(), std::strerror(errno));
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

bool HasCapture(const std::string& dir) { return !CaptureFilesIn(dir).empty(); }

// Whether the process capturing into `dir` closed its file (capture_control.h).
bool HasDoneMarker(const std::string& dir) {
  bool found = false;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".done") == 0) found = true;
    }
    closedir(d);
  }
  return found;
}

// Waits up to `seconds` for pred(), checking every 20 ms.
template <typename Pred>
bool WaitFor(double seconds, Pred pred) {
  for (int i = 0; i < static_cast<int>(seconds * 50); ++i) {
    if (pred()) return true;
    usleep(20000);
  }
  return pred();
}

int AttachAndCapture(const std::vector<int>& pids, bool all, double seconds,
                     const engine::CaptureSettings& base, const std::string& out, bool keep) {
  const std::string stats_dir = engine::StatsPublisher::Directory();
  const std::vector<engine::StatsFile> running = engine::ReadStatsDir(stats_dir);
  std::vector<Target> targets;
  for (const engine::StatsFile& f : running) {
    if (f.pid == getpid()) continue;
    const bool wanted = all || std::find(pids.begin(), pids.end(), f.pid) != pids.end();
    const bool seen = std::any_of(targets.begin(), targets.end(),
                                  [&](const Target& t) { return t.pid == f.pid; });
    if (wanted && !seen) targets.push_back(Target{f.pid, f.owner, {}, {}, false});
  }
  for (int pid : pids)
    if (std::none_of(targets.begin(), targets.end(), [&](const Target& t) { return t.pid == pid; })) {
      std::fprintf(stderr,
                   "softrnic capture: no running softrnic device with pid %d that you may "
                   "capture (see `softrnic stat`)\n",
                   pid);
      return 1;
    }
  if (targets.empty()) {
    std::fprintf(stderr, "softrnic capture: no running softrnic device to capture (see `softrnic stat`)\n");
    return 1;
  }
  const auto top = MakePrivateDirectory();
  if (!top) return kCaptureFailed;
  HandleStopSignals();
  for (Target& t : targets) {
    t.dir = *top + "/" + std::to_string(t.pid);
    t.request = engine::CaptureRequestPath(stats_dir, t.pid);
    if (mkdir(t.dir.c_str(), 0700) != 0 ||
        (t.owner != geteuid() && chown(t.dir.c_str(), t.owner, static_cast<gid_t>(-1)) != 0)) {
      std::fprintf(stderr, "softrnic capture: %s: %s\n", t.dir.c_str(), std::strerror(errno));
      continue;
    }
    engine::CaptureSettings s = base;
    s.path = t.dir + "/softrnic-%p.pcapng";
    t.started = WriteRequest(t, s);
  }
  // A publisher looks every 100 ms.
  for (Target& t : targets) {
    if (!t.started) continue;
    t.started = WaitFor(3.0, [&] { return HasCapture(t.dir) || !Alive(t.pid); }) &&
                HasCapture(t.dir);
    if (!t.started) {
      std::fprintf(stderr,
                   "softrnic capture: pid %d did not start capturing (it is gone, publishes no "
                   "stats (SOFTRNIC_STATS_SHM=0), or captures already with SOFTRNIC_CAPTURE)\n",
                   t.pid);
      unlink(t.request.c_str());
    }
  }
  const int started = static_cast<int>(
      std::count_if(targets.begin(), targets.end(), [](const Target& t) { return t.started; }));
  if (started > 0) {
    if (seconds > 0)
      std::fprintf(stderr, "softrnic capture: capturing %d process(es) for %g s\n", started, seconds);
    else
      std::fprintf(stderr, "softrnic capture: capturing %d process(es); Ctrl-C to stop\n", started);
    const auto until = seconds > 0 ? static_cast<int>(seconds * 50) : -1;
    for (int i = 0; !g_stop && (until < 0 || i < until); ++i) usleep(20000);
  }
  // Stop: each process closes its file and says so (.done).
  for (const Target& t : targets) unlink(t.request.c_str());
  std::vector<std::string> paths;
  for (const Target& t : targets) {
    if (!t.started) continue;
    if (!WaitFor(3.0, [&] { return HasDoneMarker(t.dir) || !Alive(t.pid); }))
      std::fprintf(stderr, "softrnic capture: pid %d did not close its capture in time; its file "
                           "may lack the last packets\n", t.pid);
    for (const std::string& p : CaptureFilesIn(t.dir)) paths.push_back(p);
  }
  int rc = kCaptureFailed;
  if (paths.empty())
    std::fprintf(stderr, "softrnic capture: no process wrote a capture\n");
  else
    rc = MergeFiles(paths, out);
  if (keep)
    std::fprintf(stderr, "softrnic capture: per-process files kept in %s\n", top->c_str());
  else
    RemoveDirectory(*top);
  return rc;
}

}  // namespace

int CaptureMain(int argc, char** argv) {
  std::string out, size_mb, files, seconds;
  std::vector<int> pids;
  bool keep = false, merge = false, all = false;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      CaptureUsage(stdout);
      return 0;
    }
    if (a == "--") {
      ++i;
      break;
    }
    if ((a == "-w" || a == "-s" || a == "-n") && i + 1 < argc) {
      (a == "-w" ? out : a == "-s" ? size_mb : files) = argv[++i];
    } else if (a == "-p" && i + 1 < argc) {
      char* end = nullptr;
      const long pid = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || pid <= 0 || pid > 1 << 22) {
        std::fprintf(stderr, "softrnic capture: -p takes a pid, not '%s'\n", argv[i]);
        return kUsage;
      }
      pids.push_back(static_cast<int>(pid));
    } else if (a == "-a") {
      all = true;
    } else if (a == "-t" && i + 1 < argc) {
      seconds = argv[++i];
    } else if (a == "-k") {
      keep = true;
    } else if (a == "--merge") {
      merge = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "softrnic capture: unknown option '%s'\n", a.c_str());
      CaptureUsage(stderr);
      return kUsage;
    } else {
      break;
    }
  }
  auto number_ok = [](const std::string& s, long lo, long hi) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    return s.empty() || (*end == '\0' && v >= lo && v <= hi);
  };
  const bool attach = all || !pids.empty();
  if (out.empty() || (i >= argc) != attach || (attach && merge) ||
      !number_ok(size_mb, 1, 1048576) || !number_ok(files, 1, 1000) ||
      !number_ok(seconds, 1, 86400)) {
    std::fprintf(stderr, "softrnic capture: %s\n",
                 out.empty()           ? "-w FILE is required"
                 : attach && i < argc  ? "-p/-a capture running processes: no command with them"
                 : attach              ? "-p/-a do not go with --merge"
                 : i >= argc           ? (merge ? "no files to merge" : "no command to run")
                                       : "-s takes 1..1048576 (MiB), -n 1..1000, -t 1..86400");
    CaptureUsage(stderr);
    return kUsage;
  }
  if (merge) return MergeFiles(std::vector<std::string>(argv + i, argv + argc), out);
  if (attach) {
    engine::CaptureSettings settings;
    if (!size_mb.empty()) settings.max_file_bytes = std::strtoull(size_mb.c_str(), nullptr, 10) << 20;
    if (!files.empty()) settings.files = static_cast<unsigned>(std::strtoul(files.c_str(), nullptr, 10));
    return AttachAndCapture(pids, all, seconds.empty() ? 0 : std::strtod(seconds.c_str(), nullptr),
                            settings, out, keep);
  }

  // A private directory for the per-process files: other users cannot
  // plant or read files in it.
  const auto private_dir = MakePrivateDirectory();
  if (!private_dir) return kCaptureFailed;
  const std::string dir = *private_dir;
  const std::string pattern = dir + "/softrnic-%p.pcapng";
  setenv("SOFTRNIC_CAPTURE", pattern.c_str(), 1);
  if (!size_mb.empty()) setenv("SOFTRNIC_CAPTURE_SIZE_MB", size_mb.c_str(), 1);
  if (!files.empty()) setenv("SOFTRNIC_CAPTURE_FILES", files.c_str(), 1);

  g_child = fork();
  if (g_child < 0) {
    std::fprintf(stderr, "softrnic capture: fork: %s\n", std::strerror(errno));
    RemoveDirectory(dir);
    return kCaptureFailed;
  }
  if (g_child == 0) {
    execvp(argv[i], argv + i);
    std::fprintf(stderr, "softrnic capture: %s: %s\n", argv[i], std::strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  // Ctrl-C or a kill ends CMD, not the capture: its files are still merged.
  HandleStopSignals();
  int status = 0;
  while (waitpid(g_child, &status, 0) < 0 && errno == EINTR) {
  }
  const int cmd_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

  const std::vector<std::string> paths = CaptureFilesIn(dir);
  int rc = 0;
  if (paths.empty()) {
    std::fprintf(stderr,
                 "softrnic capture: no softrnic process of CMD wrote a capture (does CMD load "
                 "softrnic's libibverbs? try `softrnic capture -w FILE -- softrnic run CMD`)\n");
    rc = kCaptureFailed;
  } else {
    rc = MergeFiles(paths, out);
  }
  if (keep)
    std::fprintf(stderr, "softrnic capture: per-process files kept in %s\n", dir.c_str());
  else
    RemoveDirectory(dir);
  return rc != 0 ? rc : cmd_status;
}

}  // namespace softrnic::tools
