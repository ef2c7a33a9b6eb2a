#include "transport/shm_registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace softrnic::transport {
namespace {

std::string LinkTarget(pid_t pid, int fd) {
  return "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
}

// Links this process published, removed at exit (the process-wide device is
// never destroyed, so no destructor would do it).
struct Published {
  std::mutex mu;
  std::vector<std::pair<std::string, int>> links;  // path, fd
  pid_t pid = 0;
};

Published& Links() {
  static Published* p = new Published;  // never destroyed: used from atexit
  return *p;
}

void RemoveAllAtExit() {
  Published& p = Links();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.pid != getpid()) return;  // a forked child does not own them
  for (const auto& [path, fd] : p.links) {
    char buf[64];
    const ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
    if (n <= 0) continue;
    buf[n] = '\0';
    if (LinkTarget(getpid(), fd) == buf) unlink(path.c_str());
  }
  p.links.clear();
}

}  // namespace

std::string ShmEndpointPath(uint64_t netns, uint32_t ip, uint16_t port) {
  char name[128];
  std::snprintf(name, sizeof(name), "/dev/shm/softrnic-ep-%llu-%08x-%u",
                static_cast<unsigned long long>(netns), ip, unsigned{port});
  return name;
}

std::string ShmPublish(uint64_t netns, uint32_t ip, uint16_t port, int fd) {
  const std::string path = ShmEndpointPath(netns, ip, port);
  const std::string tmp = path + ".tmp" + std::to_string(getpid()) + "." + std::to_string(fd);
  unlink(tmp.c_str());
  if (symlink(LinkTarget(getpid(), fd).c_str(), tmp.c_str()) != 0) return "";
  // rename replaces a stale link of a dead owner atomically.
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return "";
  }
  Published& p = Links();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.pid != getpid()) {
    if (p.pid == 0) std::atexit(RemoveAllAtExit);
    p.links.clear();  // inherited from the parent: not ours
    p.pid = getpid();
  }
  p.links.emplace_back(path, fd);
  return path;
}

void ShmUnpublish(const std::string& path, int fd) {
  if (path.empty()) return;
  char buf[64];
  const ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n > 0) {
    buf[n] = '\0';
    if (LinkTarget(getpid(), fd) == buf) unlink(path.c_str());
  }
  Published& p = Links();
  std::lock_guard<std::mutex> lock(p.mu);
  std::erase_if(p.links, [&](const auto& l) { return l.first == path && l.second == fd; });
}

void ShmSweepStaleLinks() {
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return;
  while (const dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "softrnic-ep-", 12) != 0) continue;
    const std::string path = std::string("/dev/shm/") + e->d_name;
    char buf[64];
    const ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
    if (n <= 0) continue;
    buf[n] = '\0';
    unsigned long owner = 0;
    int fd = 0;
    if (std::sscanf(buf, "/proc/%lu/fd/%d", &owner, &fd) != 2 || owner == 0 || owner > 0x7fffffff)
      continue;
    // Only links of processes that no longer exist (a live pid, even of
    // another user, is left alone; the sticky /dev/shm refuses other
    // users' links anyway).
    if (kill(static_cast<pid_t>(owner), 0) != 0 && errno == ESRCH) unlink(path.c_str());
  }
  closedir(d);
}

int ShmLookup(uint64_t netns, uint32_t ip, uint16_t port, uint32_t* pid) {
  const std::string path = ShmEndpointPath(netns, ip, port);
  char buf[64];
  const ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return -1;
  buf[n] = '\0';
  unsigned long owner = 0;
  int peer_fd = 0;
  if (std::sscanf(buf, "/proc/%lu/fd/%d", &owner, &peer_fd) != 2 || owner == 0 ||
      owner > 0x7fffffff)
    return -1;
  // Opening the link opens the owner's memfd (a new open file description).
  // The target pid is checked again against the segment header by Attach.
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  *pid = static_cast<uint32_t>(owner);
  return fd;
}

}  // namespace softrnic::transport
