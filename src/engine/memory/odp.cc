#include "engine/memory/odp.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "engine/device/device.h"
#include "engine/engine.h"

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

// ibv_advise_mr's engine side (device.h).
int Device::AdviseMr(const Pd* pd, MrAdvice advice, const Sge* sges, uint32_t num_sge) {
  // Each range is resolved under the lock (key, PD, bounds, the write right
  // PREFETCH_WRITE needs) and faulted in there too: a DeregMr cannot slip
  // between the check and the fault-in. ibv_advise_mr(3) names the errnos.
  SpinLock lock(engine_->mu_);
  return engine_->AdviseMrLocked(pd, advice, sges, num_sge);
}

int Engine::AdviseMrLocked(const Pd* pd, MrAdvice advice, const Sge* sges, uint32_t num_sge) {
  for (uint32_t i = 0; i < num_sge; ++i) {
    const Mr* mr = mr_table_.FindByLkey(sges[i].lkey);
    if (mr == nullptr || mr->pd != pd) return EFAULT;  // "lkeys ... invalid"
    if (!(mr->access & kOnDemand)) return EINVAL;       // prefetch is for ODP regions only
    const bool write = advice == MrAdvice::kPrefetchWrite;
    if (write && !(mr->access & kLocalWrite)) return EPERM;
    uint8_t* p = nullptr;
    if (MrTable::Bounds(*mr, sges[i].addr, sges[i].length, &p) != KeyCheck::kOk) return EFAULT;
    // PREFETCH_NO_FAULT makes present pages visible to the device: every
    // present page already is, so only the bounds matter.
    if (advice == MrAdvice::kPrefetchNoFault) continue;
    if (!FaultInRange(p, sges[i].length, write)) return EFAULT;
  }
  return 0;
}

}  // namespace softrnic::engine
