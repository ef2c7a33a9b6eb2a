// A parent domain's allocators as queue memory (domain_allocator.h).
#include "verbs/domain_allocator.h"

#include <algorithm>
#include <cstdint>
#include <new>

#include "log/log.h"

namespace softrnic::verbs {

void* DomainAllocator::do_allocate(size_t bytes, size_t alignment) {
  alignment = std::max(alignment, kMinAlignment);
  void* p = alloc_(parent_, pd_context_, bytes, alignment, resource_type_);
  if (p == IBV_ALLOCATOR_USE_DEFAULT) {
    p = std::pmr::new_delete_resource()->allocate(bytes, alignment);
    try {
      std::lock_guard<std::mutex> lock(mu_);
      defaults_.insert(p);
    } catch (...) {
      std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
      throw;
    }
    return p;
  }
  if (p == nullptr) throw std::bad_alloc();
  if (reinterpret_cast<uintptr_t>(p) % alignment != 0) {
    SOFTRNIC_LOG(kWarn,
                 "parent domain allocator returned %p for %zu bytes aligned to %zu (resource "
                 "type %llu): not aligned as asked; the queue is not created",
                 p, bytes, alignment, static_cast<unsigned long long>(resource_type_));
    free_(parent_, pd_context_, p, resource_type_);
    throw std::bad_alloc();
  }
  return p;
}

void DomainAllocator::do_deallocate(void* p, size_t bytes, size_t alignment) {
  alignment = std::max(alignment, kMinAlignment);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (defaults_.erase(p) != 0) {
      std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
      return;
    }
  }
  free_(parent_, pd_context_, p, resource_type_);
}

}  // namespace softrnic::verbs
