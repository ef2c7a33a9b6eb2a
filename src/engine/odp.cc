#include "engine/odp.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace softrnic::engine {

namespace {

uintptr_t PageSize() {
  static const uintptr_t size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

bool FaultInRange(const uint8_t* addr, uint64_t len, bool need_write) {
  if (len == 0) return true;
  const uintptr_t start = reinterpret_cast<uintptr_t>(addr);
  if (len - 1 > UINTPTR_MAX - start) return false;  // wraps the address space
  const uintptr_t page = PageSize();
  const uintptr_t first = start & ~(page - 1);
  const uintptr_t last = (start + (len - 1)) & ~(page - 1);
  // MADV_POPULATE_* fault the pages in as a touch would, without touching
  // them: ENOMEM for a hole, EFAULT where the access would raise
  // SIGSEGV/SIGBUS (protection, file end), EINVAL for VM_PFNMAP/VM_IO.
  // EINTR and EAGAIN are retried: the range is valid, only the fault was
  // interrupted.
  const int advice = need_write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
  for (;;) {
    if (madvise(reinterpret_cast<void*>(first), last - first + page, advice) == 0) return true;
    if (errno != EINTR && errno != EAGAIN) return false;
  }
}

}  // namespace softrnic::engine
