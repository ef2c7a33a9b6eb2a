#include "counter_updater.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/observe/stats_publisher.h"
#include "port_counters.h"

namespace softrnic::tools {
namespace {

constexpr int kPeriodMs = 100;

// The mount namespace of `pid` ("self" for ours), as (device, inode).
bool MountNamespace(const std::string& pid, dev_t* dev, ino_t* ino) {
  struct stat st;
  if (stat(("/proc/" + pid + "/ns/mnt").c_str(), &st) != 0) return false;
  *dev = st.st_dev;
  *ino = st.st_ino;
  return true;
}

// Replaces `dir/name` with `text` atomically (rename over it).
void ReplaceFile(int root_fd, const std::string& dir, const std::string& name,
                 const std::string& text) {
  const std::string tmp = dir + "/." + name + ".new", path = dir + "/" + name;
  unlinkat(root_fd, tmp.c_str(), 0);
  const int fd = openat(root_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd < 0) return;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!ok || renameat(root_fd, tmp.c_str(), root_fd, path.c_str()) != 0) unlinkat(root_fd, tmp.c_str(), 0);
}

[[noreturn]] void RunUpdater(int root_fd, const std::string& port_dir, int pid_fd, pid_t watched,
                             const std::string& stats_dir) {
  dev_t ns_dev = 0;
  ino_t ns_ino = 0;
  if (!MountNamespace("self", &ns_dev, &ns_ino)) _exit(0);
  PortCounterAccumulator accumulator;
  std::map<std::string, uint64_t> written;  // what each file holds now
  for (;;) {
    std::vector<engine::StatsFile> mine;
    for (engine::StatsFile& f : engine::ReadStatsDir(stats_dir)) {
      dev_t dev;
      ino_t ino;
      if (MountNamespace(std::to_string(f.pid), &dev, &ino) && dev == ns_dev && ino == ns_ino)
        mine.push_back(std::move(f));
    }
    for (const auto& [file, value] : PortCounterFiles(accumulator.Update(mine))) {
      const auto it = written.find(file);
      if (it != written.end() && it->second == value) continue;
      const size_t slash = file.rfind('/');
      ReplaceFile(root_fd, port_dir + "/" + file.substr(0, slash), file.substr(slash + 1),
                  std::to_string(value) + "\n");
      written[file] = value;
    }
    if (pid_fd >= 0) {
      pollfd p{pid_fd, POLLIN, 0};
      if (poll(&p, 1, kPeriodMs) > 0) _exit(0);  // the command has exited
    } else {
      usleep(kPeriodMs * 1000);
      if (kill(watched, 0) != 0 && errno == ESRCH) _exit(0);
    }
  }
}

}  // namespace

std::string StartCounterUpdater(int root_fd, const std::string& port_dir, pid_t watched,
                                const std::string& stats_dir) {
  // A pidfd of the watched process (ours), opened here so the updater can
  // never watch a reused pid; -1 before Linux 5.3 (then kill(pid, 0)).
  const int pid_fd = static_cast<int>(syscall(SYS_pidfd_open, watched, 0));
  const pid_t child = fork();
  if (child < 0) {
    if (pid_fd >= 0) close(pid_fd);
    return std::string("cannot fork the counter updater: ") + std::strerror(errno);
  }
  if (child == 0) {
    // The intermediate child: a new session (no terminal signals: Ctrl-C
    // is for the command), then the updater itself as its child, and exit,
    // so the updater is reparented and the command never sees it as a
    // child of its own (a command that waits for all its children).
    setsid();
    if (fork() != 0) _exit(0);
    prctl(PR_SET_NAME, "softrnic-ctrs", 0, 0, 0);
    // Nothing of the caller's stays open: a pipe the caller's caller reads
    // to EOF must not wait for the updater.
    const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3; ++fd)
      if (null_fd >= 0) dup2(null_fd, fd);
    const int keep[] = {root_fd, pid_fd};
    for (int fd = 3; fd < 1024; ++fd)
      if (fd != keep[0] && fd != keep[1]) close(fd);
    if (chdir("/") != 0) _exit(0);
    RunUpdater(root_fd, port_dir, pid_fd, watched, stats_dir);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (pid_fd >= 0) close(pid_fd);
  return "";
}

}  // namespace softrnic::tools
