#include "transport/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/netns.h"
#include "common/secure_random.h"

namespace softrnic::transport {

uint64_t NetnsInode() { return NetnsOfSelf().ino; }

ShmSegment::~ShmSegment() {
  if (base_ != nullptr) munmap(base_, kShmSegmentSize);
  if (fd_ >= 0) close(fd_);
}

bool ShmSegment::Map(int fd, const char* what, std::string* error) {
  void* p = mmap(nullptr, kShmSegmentSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    *error = std::string("mmap ") + what + ": " + std::strerror(errno);
    close(fd);
    return false;
  }
  fd_ = fd;
  base_ = static_cast<uint8_t*>(p);
  return true;
}

bool ShmSegment::Create(std::string* error) {
  // CLOEXEC: peers reach it through /proc/<pid>/fd while this process
  // lives; an exec'd image must not keep it.
  const int fd = memfd_create("softrnic-ctl", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    *error = std::string("memfd_create: ") + std::strerror(errno);
    return false;
  }
  if (ftruncate(fd, static_cast<off_t>(kShmSegmentSize)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    *error = std::string("sizing the control segment: ") + std::strerror(errno);
    close(fd);
    return false;
  }
  if (!Map(fd, "control segment", error)) return false;
  ShmSegmentHeader* h = header();
  h->version = kShmVersion;
  h->pid = static_cast<uint32_t>(getpid());
  h->netns = NetnsInode();
  SecureRandomFill(&h->nonce, sizeof(h->nonce));
  h->uid = static_cast<uint32_t>(geteuid());
  h->total_size = kShmSegmentSize;
  // The magic goes last: a peer that maps the segment before the header is
  // complete sees no magic and does not use it.
  std::atomic_ref<uint64_t>(h->magic).store(kShmMagic, std::memory_order_release);
  return true;
}

bool ShmSegment::Attach(int fd, uint32_t expected_pid, std::string* error) {
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) != kShmSegmentSize) {
    *error = "not a softrnic control segment (size)";
    close(fd);
    return false;
  }
  if (st.st_uid != geteuid()) {
    *error = "segment belongs to another user";
    close(fd);
    return false;
  }
  // Sealed against shrinking: a mapping of it can never fault with SIGBUS.
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    *error = "segment is not sealed";
    close(fd);
    return false;
  }
  if (!Map(fd, "peer segment", error)) return false;
  // The mapping is all we use: a descriptor per peer kept open would only
  // grow the descriptor table (common/fd_table.h).
  close(fd_);
  fd_ = -1;
  const ShmSegmentHeader* h = header();
  if (std::atomic_ref<uint64_t>(const_cast<uint64_t&>(h->magic)).load(std::memory_order_acquire) !=
          kShmMagic ||
      h->version != kShmVersion || h->pid != expected_pid || h->netns != NetnsInode() ||
      h->uid != geteuid() || h->total_size != kShmSegmentSize || h->n_locals > kShmMaxLocals) {
    *error = "peer segment header does not match (magic/version/pid/netns/uid)";
    return false;
  }
  return true;
}

}  // namespace softrnic::transport
