// `softrnic capture`: a pcapng file of the RoCE v2 traffic of softrnic
// processes, every path included (docs/capture.md, engine/capture.h).
//
//   softrnic capture -w FILE [-s MB] [-n FILES] [-k] [--] CMD [ARGS...]
//       runs CMD with SOFTRNIC_CAPTURE pointing into a private directory, so
//       CMD and every softrnic process it starts records its own packets;
//       when CMD ends, the files are merged into FILE (capture_merge.h:
//       each packet once, in time order).
//   softrnic capture --merge -w FILE IN...
//       merges capture files recorded separately (SOFTRNIC_CAPTURE set by
//       hand, e.g. on two hosts or in two network namespaces).
//
// Exit status: CMD's (128 + signal if it was killed); 2 for a usage error;
// 125 if the capture could not be set up or written (the message says why).
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
#include "wire/pcapng.h"

namespace softrnic::tools {
namespace {

constexpr int kUsage = 2;
constexpr int kCaptureFailed = 125;

void CaptureUsage(FILE* out) {
  std::fprintf(
      out,
      "usage: softrnic capture -w FILE [-s MB] [-n FILES] [-k] [--] CMD [ARGS...]\n"
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
      "  --merge    merge existing capture files instead of running a command\n"
      "CMD must load softrnic's libraries (e.g. softrnic capture -w f.pcapng --\n"
      "softrnic run ib_write_bw). Exit status: CMD's; 2 usage; 125 capture failed.\n");
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
      if (name.rfind("softrnic-", 0) == 0 && name.find(".pcapng") != std::string::npos)
        paths.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

void RemoveDirectory(const std::string& dir) {
  for (const std::string& path : CaptureFilesIn(dir)) unlink(path.c_str());
  rmdir(dir.c_str());
}

pid_t g_child = -1;
void ForwardSignal(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

}  // namespace

int CaptureMain(int argc, char** argv) {
  std::string out, size_mb, files;
  bool keep = false, merge = false;
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
  if (out.empty() || i >= argc || !number_ok(size_mb, 1, 1048576) || !number_ok(files, 1, 1000)) {
    std::fprintf(stderr, "softrnic capture: %s\n",
                 out.empty()  ? "-w FILE is required"
                 : i >= argc  ? (merge ? "no files to merge" : "no command to run")
                              : "-s takes 1..1048576 (MiB), -n 1..1000");
    CaptureUsage(stderr);
    return kUsage;
  }
  if (merge) return MergeFiles(std::vector<std::string>(argv + i, argv + argc), out);

  // A private directory for the per-process files: other users cannot
  // plant or read files in it.
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/softrnic-capture.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    std::fprintf(stderr, "softrnic capture: cannot create a directory in %s: %s (set TMPDIR)\n",
                 tmp != nullptr && *tmp ? tmp : "/tmp", std::strerror(errno));
    return kCaptureFailed;
  }
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
  struct sigaction sa{};
  sa.sa_handler = ForwardSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
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
