#include "engine/mr_table.h"

#include <sys/random.h>

namespace softrnic::engine {

MrTable::MrTable() {
  uint32_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed)) seed = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(this));
  rng_.seed(seed);
}

uint32_t MrTable::NewKey() {
  for (;;) {
    const uint32_t k = static_cast<uint32_t>(rng_());
    if (k != 0 && !by_lkey_.contains(k) && !by_rkey_.contains(k)) return k;
  }
}

void MrTable::Insert(Mr* mr) {
  by_lkey_[mr->lkey] = mr;
  by_rkey_[mr->rkey] = mr;
}

void MrTable::Erase(Mr* mr) {
  by_lkey_.erase(mr->lkey);
  by_rkey_.erase(mr->rkey);
}

Mr* MrTable::FindByRkey(uint32_t rkey) const {
  auto it = by_rkey_.find(rkey);
  return it == by_rkey_.end() ? nullptr : it->second;
}

Mr* MrTable::FindByLkey(uint32_t lkey) const {
  auto it = by_lkey_.find(lkey);
  return it == by_lkey_.end() ? nullptr : it->second;
}

KeyCheck MrTable::Bounds(const Mr& mr, uint64_t va, uint64_t len, uint8_t** out) {
  // Written so that no sum can overflow: va - iova first, then compare.
  if (va < mr.iova) return KeyCheck::kOutOfBounds;
  const uint64_t offset = va - mr.iova;
  if (offset > mr.length || len > mr.length - offset) return KeyCheck::kOutOfBounds;
  *out = mr.addr + offset;
  return KeyCheck::kOk;
}

KeyCheck MrTable::ResolveRemote(uint32_t rkey, const Pd* pd, uint64_t va, uint64_t len,
                                uint32_t right, uint8_t** out) const {
  Mr* mr = FindByRkey(rkey);
  if (mr == nullptr || !mr->remote_valid) return KeyCheck::kBadKey;
  if (mr->pd != pd) return KeyCheck::kWrongPd;
  if ((mr->access & right) != right) return KeyCheck::kNoRight;
  return Bounds(*mr, va, len, out);
}

KeyCheck MrTable::ResolveLocal(uint32_t lkey, const Pd* pd, uint64_t addr, uint64_t len,
                               bool need_write, uint8_t** out) const {
  Mr* mr = FindByLkey(lkey);
  if (mr == nullptr) return KeyCheck::kBadKey;
  if (mr->pd != pd) return KeyCheck::kWrongPd;
  if (need_write && !(mr->access & kLocalWrite)) return KeyCheck::kNoRight;
  return Bounds(*mr, addr, len, out);
}

}  // namespace softrnic::engine
