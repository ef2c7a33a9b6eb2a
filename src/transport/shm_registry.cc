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
#include <functional>
#include <mutex>
#include <vector>

#include "common/process_exists.h"
#include "transport/owned_files.h"

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

std::string ShmEndpointDirectory() { return "/dev/shm/softrnic-ep-" + std::to_string(geteuid()); }

std::string ShmEndpointPath(uint64_t netns, uint32_t ip, uint16_t port, int lane) {
  char name[128];
  if (lane >= 0) {
    std::snprintf(name, sizeof(name), "/%llu-%08x-%u-L%d", static_cast<unsigned long long>(netns),
                  ip, unsigned{port}, lane);
    return ShmEndpointDirectory() + name;
  }
  std::snprintf(name, sizeof(name), "/%llu-%08x-%u", static_cast<unsigned long long>(netns), ip,
                unsigned{port});
  return ShmEndpointDirectory() + name;
}

std::string ShmPublish(uint64_t netns, uint32_t ip, uint16_t port, int fd, int lane) {
  // Our own 0700 directory (security review L4): nobody else can hold a
  // link name in it, so nobody can keep us from publishing.
  const OwnedDir dir = OpenPrivateDirReclaiming(ShmEndpointDirectory(), /*create=*/true);
  if (!dir.ok()) return "";  // e.g. no /dev/shm, or another user's: UDP only
  const std::string path = ShmEndpointPath(netns, ip, port, lane);
  const std::string name = path.substr(path.rfind('/') + 1);
  const std::string tmp = UnpredictableName(".tmp.");
  if (symlinkat(LinkTarget(getpid(), fd).c_str(), dir.fd(), tmp.c_str()) != 0) return "";
  // rename replaces a stale link of a dead owner atomically.
  if (renameat(dir.fd(), tmp.c_str(), dir.fd(), name.c_str()) != 0) {
    unlinkat(dir.fd(), tmp.c_str(), 0);
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

namespace {

// Removes the link `name` if it still is the one read (`target`, owner
// dead). Not unlinkat(name): between the owner check and the removal a new
// process may publish under that very name, for the address is derived from
// the pid and pids are reused (pid_max 32768 here: 128 processes started at
// once by bench/scale/shm_all_to_all while others sweep), and unlinking by
// name would remove the live process's fresh link, leaving it unreachable
// through shared memory for the rest of its life
// (ShmRegistry.SweepKeepsALinkPublishedAfterItJudgedTheOldOneStale). The
// link is moved aside instead (atomic) and judged there: a live one goes
// back unless a newer one took the name meanwhile. A sweeper that dies in
// between leaves a ".sweep.*" entry: never looked up, skipped by sweeps.
bool RemoveStaleLink(int dirfd, const char* name, const char* target, unsigned long owner,
                     const std::function<void(const char*)>& before_removal) {
  if (before_removal) before_removal(name);
  const std::string aside = UnpredictableName(".sweep.");
  if (renameat(dirfd, name, dirfd, aside.c_str()) != 0) return false;
  char moved[64];
  const ssize_t n = readlinkat(dirfd, aside.c_str(), moved, sizeof(moved) - 1);
  if (n > 0) moved[n] = '\0';
  const bool same = n > 0 && std::strcmp(moved, target) == 0;
  if (same && !ProcessExists(static_cast<pid_t>(owner))) {
    unlinkat(dirfd, aside.c_str(), 0);
    return true;
  }
  // A fresh link (or the owner's pid is alive again): back where it was,
  // unless the name was published again meanwhile (that one is newer).
  if (renameat2(dirfd, aside.c_str(), dirfd, name, RENAME_NOREPLACE) != 0)
    unlinkat(dirfd, aside.c_str(), 0);
  return false;
}

}  // namespace

int ShmSweepStaleLinks(bool dry_run, const std::function<void(const char*)>& before_removal) {
  // Only our own directory: other users' links are theirs to sweep.
  const OwnedDir dir = OwnedDir::Open(ShmEndpointDirectory(), /*create=*/false, /*private_dir=*/true);
  if (!dir.ok()) return 0;
  const int scan = fcntl(dir.fd(), F_DUPFD_CLOEXEC, 0);
  DIR* d = scan >= 0 ? fdopendir(scan) : nullptr;
  if (d == nullptr) {
    if (scan >= 0) close(scan);
    return 0;
  }
  int removed = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char buf[64];
    const ssize_t n = readlinkat(dir.fd(), e->d_name, buf, sizeof(buf) - 1);
    if (n <= 0) continue;
    buf[n] = '\0';
    unsigned long owner = 0;
    int fd = 0;
    if (std::sscanf(buf, "/proc/%lu/fd/%d", &owner, &fd) != 2 || owner == 0 || owner > 0x7fffffff)
      continue;
    // Only links of processes that no longer exist.
    if (ProcessExists(static_cast<pid_t>(owner))) continue;
    if (dry_run || RemoveStaleLink(dir.fd(), e->d_name, buf, owner, before_removal)) ++removed;
  }
  closedir(d);
  return removed;
}

int ShmLookup(uint64_t netns, uint32_t ip, uint16_t port, uint32_t* pid, ShmPathVerdict* why,
              int lane) {
  ShmPathVerdict ignored;
  ShmPathVerdict& v = why ? *why : ignored;
  // Links are looked up in our own verified directory only: what another
  // user planted elsewhere is never opened.
  const OwnedDir dir = OwnedDir::Open(ShmEndpointDirectory(), /*create=*/false, /*private_dir=*/true);
  if (!dir.ok()) {
    v.step = ShmPathStep::kNoLinkDirectory;
    v.detail = ShmEndpointDirectory() + ": " + dir.why();
    return -1;
  }
  const std::string path = ShmEndpointPath(netns, ip, port, lane);
  const std::string name = path.substr(path.rfind('/') + 1);
  v.link = path;
  char buf[64];
  const ssize_t n = readlinkat(dir.fd(), name.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) {
    v.step = ShmPathStep::kNotPublished;
    v.detail = std::strerror(errno);
    return -1;
  }
  buf[n] = '\0';
  unsigned long owner = 0;
  int peer_fd = 0;
  if (std::sscanf(buf, "/proc/%lu/fd/%d", &owner, &peer_fd) != 2 || owner == 0 ||
      owner > 0x7fffffff) {
    v.step = ShmPathStep::kBadLink;
    v.detail = std::string("target ") + buf;
    return -1;
  }
  v.pid = static_cast<uint32_t>(owner);
  // Opening the link opens the owner's memfd (a new open file description).
  // The target pid is checked again against the segment header by Attach.
  const int fd = openat(dir.fd(), name.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    v.step = errno == ENOENT ? ShmPathStep::kOwnerGone : ShmPathStep::kOpenRefused;
    v.detail = std::string(buf) + ": " + std::strerror(errno);
    return -1;
  }
  *pid = static_cast<uint32_t>(owner);
  return fd;
}

std::vector<ShmLinkEntry> ShmListLinks() {
  std::vector<ShmLinkEntry> out;
  const OwnedDir dir = OwnedDir::Open(ShmEndpointDirectory(), /*create=*/false, /*private_dir=*/true);
  if (!dir.ok()) return out;
  const int scan = fcntl(dir.fd(), F_DUPFD_CLOEXEC, 0);
  DIR* d = scan >= 0 ? fdopendir(scan) : nullptr;
  if (d == nullptr) {
    if (scan >= 0) close(scan);
    return out;
  }
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    unsigned long long netns = 0;
    unsigned ip = 0, port = 0, lane = 0;
    char tail = 0;
    // The names ShmEndpointPath gives: <netns>-<ip hex>-<port>, and
    // <netns>-<ip hex>-<port>-L<lane> for a host NIC address.
    const int got = std::sscanf(e->d_name, "%llu-%8x-%u-L%u%c", &netns, &ip, &port, &lane, &tail);
    if ((got != 3 && got != 4) || port > 0xffff || lane > 0xff) continue;
    if (got == 3 && std::sscanf(e->d_name, "%llu-%8x-%u%c", &netns, &ip, &port, &tail) != 3) continue;
    ShmLinkEntry l;
    l.lane = got == 4 ? static_cast<int>(lane) : -1;
    l.netns = netns;
    l.ip = ip;
    l.port = static_cast<uint16_t>(port);
    char buf[64];
    const ssize_t n = readlinkat(dir.fd(), e->d_name, buf, sizeof(buf) - 1);
    if (n > 0) {
      buf[n] = '\0';
      unsigned long owner = 0;
      int fd = 0;
      if (std::sscanf(buf, "/proc/%lu/fd/%d", &owner, &fd) == 2 && owner <= 0x7fffffff)
        l.pid = static_cast<uint32_t>(owner);
    }
    out.push_back(l);
  }
  closedir(d);
  return out;
}

}  // namespace softrnic::transport
