#include "shared_userns.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <vector>

#include "transport/shm_registry.h"
#include "transport/shm_segment.h"

namespace softrnic::tools {
namespace {

std::string ReadSmallFile(const std::string& path) {
  std::string text;
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return text;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() < 4096) text.append(buf, n);
  std::fclose(f);
  return text;
}

bool SameFile(int fd, const struct stat& other) {
  struct stat st {};
  return fstat(fd, &st) == 0 && st.st_dev == other.st_dev && st.st_ino == other.st_ino;
}

// Whether the namespace `fd` is one `softrnic run` of `uid` made from ours
// (own_ns): its parent is ours, its owner is `uid`, and it maps exactly
// `uid` and `gid` to themselves (read from a process `pid` inside it).
bool MadeLikeOurs(int fd, const struct stat& own_ns, pid_t pid, uid_t uid, gid_t gid) {
  if (SameFile(fd, own_ns)) return false;  // already ours: nothing to join
  uid_t owner = 0;
  if (ioctl(fd, NS_GET_OWNER_UID, &owner) != 0 || owner != uid) return false;
  const int parent = ioctl(fd, NS_GET_PARENT);
  if (parent < 0) return false;
  const bool child = SameFile(parent, own_ns);
  close(parent);
  if (!child) return false;
  const std::string dir = "/proc/" + std::to_string(pid) + "/";
  return MapsExactlyItself(ReadSmallFile(dir + "uid_map"), uid) &&
         MapsExactlyItself(ReadSmallFile(dir + "gid_map"), gid);
}

std::vector<pid_t> Candidates(uid_t uid) {
  std::vector<pid_t> pids;
  std::set<pid_t> seen;
  // Processes with an open device first (their endpoint links), in this
  // network namespace: the peers our programs would use shared memory with.
  const uint64_t netns = transport::NetnsInode();
  for (const transport::ShmLinkEntry& link : transport::ShmListLinks())
    if (link.pid != 0 && link.netns == netns && seen.insert(static_cast<pid_t>(link.pid)).second)
      pids.push_back(static_cast<pid_t>(link.pid));
  // Then every process of ours: a program opens its device when it likes
  // (ucx_perftest's server only once a client connected), and the first
  // invocation's namespace is worth joining before that.
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (const dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    struct stat st {};
    if (fstatat(dirfd(proc), e->d_name, &st, 0) == 0 && st.st_uid == uid &&
        seen.insert(static_cast<pid_t>(pid)).second)
      pids.push_back(static_cast<pid_t>(pid));
  }
  closedir(proc);
  return pids;
}

}  // namespace

bool MapsExactlyItself(const std::string& map_text, unsigned id) {
  std::istringstream in(map_text);
  unsigned long inside = 0, outside = 0, count = 0;
  if (!(in >> inside >> outside >> count)) return false;
  std::string rest;
  if (in >> rest) return false;  // a second line
  return inside == id && outside == id && count == 1;
}

pid_t JoinRunningUserNamespace(uid_t uid, gid_t gid) {
  struct stat own_ns {};
  if (stat("/proc/self/ns/user", &own_ns) != 0) return 0;
  for (const pid_t pid : Candidates(uid)) {
    const int fd = open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // gone (a stale link), or not ours to read
    const bool join = MadeLikeOurs(fd, own_ns, pid, uid, gid) && setns(fd, CLONE_NEWUSER) == 0;
    close(fd);
    if (join) return pid;
  }
  return 0;
}

}  // namespace softrnic::tools
