// A parent domain's custom allocators (ibv_alloc_parent_domain(3),
// IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) as the memory the engine keeps
// queue entries in.
//
// The engine takes a std::pmr::memory_resource for the entries of a CQ, a
// QP or an SRQ (engine/device/device.h) and knows nothing of verbs; a
// DomainAllocator is that resource for one resource type of one parent
// domain: each allocation is one call of the application's alloc, each
// deallocation one call of its free with the same pointer and type.
//
// alloc may answer IBV_ALLOCATOR_USE_DEFAULT: the block then comes from the
// library's own memory and is never handed to free (as mlx5 does). NULL,
// or a block not aligned as asked, makes the allocation fail
// (std::bad_alloc: the creation fails with ENOMEM); a misaligned block is
// handed back to free first.
//
// Thread-safety: any thread; the application's callbacks are never called
// with the engine's lock held (Device takes queue memory before it locks
// and gives it back after).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <mutex>
#include <unordered_set>

namespace softrnic::verbs {

// The resource_type softrnic passes to alloc and free. The man page makes
// it vendor-specific: "derived from the rdma_driver_id enum (upper 32 bits)
// and a vendor specific resource code". softrnic has no rdma_driver_id (it
// has no kernel driver): the upper half is 0 (RDMA_DRIVER_UNKNOWN), and the
// codes are mlx5's (mlx5dv.h MLX5DV_RES_TYPE_*) so an allocator that looks
// at the low half reads them the same way. softrnic has no doorbell
// records (mlx5's DBR, 3) and no ibv_create_wq (RWQ, 2).
inline constexpr uint64_t kResTypeQp = 1;   // a QP's send and receive queues
inline constexpr uint64_t kResTypeSrq = 4;  // an SRQ's receive queue
inline constexpr uint64_t kResTypeCq = 5;   // a CQ's completion ring

class DomainAllocator final : public std::pmr::memory_resource {
 public:
  using AllocFn = void* (*)(ibv_pd*, void*, size_t, size_t, uint64_t);
  using FreeFn = void (*)(ibv_pd*, void*, void*, uint64_t);

  DomainAllocator(ibv_pd* parent, AllocFn alloc, FreeFn free, void* pd_context,
                  uint64_t resource_type)
      : parent_(parent), alloc_(alloc), free_(free), pd_context_(pd_context),
        resource_type_(resource_type) {}

  // Every block handed to the application's allocator asks for at least
  // this alignment: posix_memalign(3), which allocators commonly call with
  // it (pyverbs' mem_align_allocator does), wants a multiple of
  // sizeof(void*), and a queue of whole cache lines shares none with the
  // application's data.
  static constexpr size_t kMinAlignment = 64;

 private:
  void* do_allocate(size_t bytes, size_t alignment) override;
  void do_deallocate(void* p, size_t bytes, size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  ibv_pd* const parent_;
  const AllocFn alloc_;
  const FreeFn free_;
  void* const pd_context_;
  const uint64_t resource_type_;
  // Blocks alloc left to the library (IBV_ALLOCATOR_USE_DEFAULT): they go
  // back to the library, not to free.
  std::mutex mu_;
  std::unordered_set<void*> defaults_;
};

// The three a parent domain with allocators has, one per resource type.
struct DomainAllocators {
  DomainAllocators(ibv_pd* parent, DomainAllocator::AllocFn alloc, DomainAllocator::FreeFn free,
                   void* pd_context)
      : qp(parent, alloc, free, pd_context, kResTypeQp),
        srq(parent, alloc, free, pd_context, kResTypeSrq),
        cq(parent, alloc, free, pd_context, kResTypeCq) {}
  DomainAllocator qp;
  DomainAllocator srq;
  DomainAllocator cq;
};

}  // namespace softrnic::verbs
