// Command fds: a context's cmd_fd is a real descriptor (a memfd of no
// size) so that it can be dup()ed and given to ibv_import_device, the way
// rdma-core's suite shares a context within a process (import.cc). A file
// is registered while any context uses it; ibv_open_device (device.cc)
// makes one, ibv_import_device retains the one it was given.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <utility>

#include "verbs/internal.h"

namespace softrnic::verbs {
namespace {

std::mutex g_fds_mu;
// Command files by (st_dev, st_ino), with the number of contexts using one.
std::map<std::pair<dev_t, ino_t>, int>& CommandFiles() {
  static auto* files = new std::map<std::pair<dev_t, ino_t>, int>();  // never destroyed
  return *files;
}

bool FileId(int fd, std::pair<dev_t, ino_t>* id) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return false;
  *id = {st.st_dev, st.st_ino};
  return true;
}

}  // namespace

int NewCommandFd() {
  const int fd = memfd_create("softrnic-cmd", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (!RetainCommandFd(fd)) {
    close(fd);
    return -1;
  }
  return fd;
}

bool IsCommandFd(int fd) {
  std::pair<dev_t, ino_t> id;
  if (!FileId(fd, &id)) return false;
  std::lock_guard<std::mutex> lock(g_fds_mu);
  return CommandFiles().contains(id);
}

bool RetainCommandFd(int fd) {
  std::pair<dev_t, ino_t> id;
  if (!FileId(fd, &id)) return false;
  std::lock_guard<std::mutex> lock(g_fds_mu);
  ++CommandFiles()[id];
  return true;
}

void DropCommandFd(int fd) {
  std::pair<dev_t, ino_t> id;
  if (!FileId(fd, &id)) return;
  std::lock_guard<std::mutex> lock(g_fds_mu);
  auto it = CommandFiles().find(id);
  if (it != CommandFiles().end() && --it->second == 0) CommandFiles().erase(it);
}

void ReleaseCommandFd(int fd) {
  DropCommandFd(fd);
  if (fd >= 0) close(fd);
}

}  // namespace softrnic::verbs
