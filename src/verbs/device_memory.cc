// Device memory (ibv_alloc_dm(3), ibv_reg_dm_mr(3)): on a hardware NIC, a
// small window of the adapter's own memory (MEMIC) that verbs can target
// without crossing PCIe. softrnic's "device" is the process, so its device
// memory is an anonymous mapping of the process like any other: the verbs
// behave as the man pages say (copies in 4-byte units, zero-based
// registrations, remote access through the MR), nothing is faster for it.
//
// Rules kept from hardware (mlx5, what middleware and rdma-core's tests
// expect): copy offsets and lengths are multiples of 4 (EINVAL otherwise),
// a registration must be IBV_ACCESS_ZERO_BASED and inside the allocation,
// allocations are bounded by max_dm_size per process.
#include <sys/mman.h>

#include <atomic>
#include <cstdint>

#include "verbs/device_attr.h"
#include "verbs/internal.h"

using namespace softrnic::verbs;

namespace {

constexpr uint64_t kCopyUnit = 4;  // MEMIC is written in 32-bit words
// Largest alignment ibv_alloc_dm_attr.log_align_req may ask for (2 MiB:
// a huge page); the mapping is over-allocated by it and trimmed.
constexpr uint32_t kMaxLogAlign = 21;

// Device memory allocated and not freed in this process, against
// kMaxDeviceMemory (verbs/device_attr.h).
std::atomic<uint64_t> g_dm_bytes{0};

bool ReserveBytes(uint64_t n) {
  uint64_t cur = g_dm_bytes.load();
  do {
    if (n > kMaxDeviceMemory - cur) return false;
  } while (!g_dm_bytes.compare_exchange_weak(cur, cur + n));
  return true;
}

Dm* ToDm(ibv_dm* dm) { return reinterpret_cast<Dm*>(dm); }

// Whether [offset, offset+len) is a legal copy range of `dm`.
bool CopyRangeOk(const Dm& dm, uint64_t offset, size_t len) {
  if (offset % kCopyUnit || len % kCopyUnit) return false;
  return offset <= dm.length && len <= dm.length - offset;
}

int MemcpyToDm(ibv_dm* ibdm, uint64_t offset, const void* host, size_t len) {
  Dm* dm = ToDm(ibdm);
  if (!CopyRangeOk(*dm, offset, len) || (len && !host)) return EINVAL;
  if (len) std::memcpy(dm->base + offset, host, len);
  return 0;
}

int MemcpyFromDm(void* host, ibv_dm* ibdm, uint64_t offset, size_t len) {
  Dm* dm = ToDm(ibdm);
  if (!CopyRangeOk(*dm, offset, len) || (len && !host)) return EINVAL;
  if (len) std::memcpy(host, dm->base + offset, len);
  return 0;
}

ibv_dm* AllocDmOp(ibv_context* ctx, ibv_alloc_dm_attr* attr) noexcept {
  if (!ctx || !attr || attr->comp_mask || attr->length == 0 || attr->log_align_req > kMaxLogAlign)
    return FailNull<ibv_dm>(EINVAL);
  const uint64_t align = uint64_t{1} << attr->log_align_req;
  const uint64_t length = attr->length;
  if (length > kMaxDeviceMemory || !ReserveBytes(length)) return FailNull<ibv_dm>(ENOMEM);
  const size_t map_len = length + (align > 4096 ? align : 0);
  void* map = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    g_dm_bytes -= length;
    return FailNull<ibv_dm>(ENOMEM);
  }
  auto* dm = new (std::nothrow) Dm{};
  if (!dm) {
    munmap(map, map_len);
    g_dm_bytes -= length;
    return FailNull<ibv_dm>(ENOMEM);
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(map);
  dm->map = map;
  dm->map_len = map_len;
  dm->base = reinterpret_cast<uint8_t*>((start + align - 1) & ~(align - 1));
  dm->length = length;
  dm->dm.context = ctx;
  dm->dm.memcpy_to_dm = MemcpyToDm;
  dm->dm.memcpy_from_dm = MemcpyFromDm;
  return &dm->dm;
}

int FreeDmOp(ibv_dm* ibdm) noexcept {
  if (!ibdm) return EINVAL;
  Dm* dm = ToDm(ibdm);
  // A registered region still points into it (the kernel's uverbs refuses
  // the same way).
  if (dm->mrs.load() != 0) return EBUSY;
  munmap(dm->map, dm->map_len);
  g_dm_bytes -= dm->length;
  delete dm;
  return 0;
}

ibv_mr* RegDmMrOp(ibv_pd* pd, ibv_dm* ibdm, uint64_t offset, size_t length,
                  unsigned int access) noexcept {
  if (!pd || !ibdm) return FailNull<ibv_mr>(EINVAL);
  Dm* dm = ToDm(ibdm);
  // ibv_reg_dm_mr(3): "the register of DM MR must be zero based".
  if (!(access & IBV_ACCESS_ZERO_BASED)) return FailNull<ibv_mr>(EINVAL);
  // A zero-length registration is legal (mlx5 takes it; rdma-core's tests
  // register 10% of a 4-byte allocation).
  if (offset > dm->length || length > dm->length - offset) return FailNull<ibv_mr>(EINVAL);
  ibv_mr* mr = RegisterMemory(pd, dm->base + offset, length, 0, access);
  if (!mr) return nullptr;
  reinterpret_cast<Mr*>(mr)->dm = dm;
  ++dm->mrs;
  mr->addr = nullptr;  // zero-based: SGEs and remote addresses start at 0 (rdma-core does the same)
  return mr;
}

}  // namespace

namespace softrnic::verbs {

void ReleaseDmOf(Mr* mr) {
  if (mr->dm) --mr->dm->mrs;
}

void InstallDmOps(verbs_context* vctx) {
  vctx->alloc_dm = AllocDmOp;
  vctx->free_dm = FreeDmOp;
  vctx->reg_dm_mr = RegDmMrOp;
}

}  // namespace softrnic::verbs
