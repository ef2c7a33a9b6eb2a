#include "engine/memory/mr_table.h"

#include "common/secure_random.h"
#include "engine/memory/odp.h"

namespace softrnic::engine {

uint32_t MrTable::DrawKey(uint8_t generation) const {
  // Redraws only on a collision with a live key (or 0): with at most 2^16
  // regions out of 2^32 keys, about one registration in 2^16 draws twice.
  for (;;) {
    const uint32_t index = SecureRandom32() & 0xFFFFFF00u;
    const uint32_t key = index | generation;
    if (key != 0 && !InUse(key)) return key;
  }
}

void MrTable::NewKeys(uint32_t* lkey, uint32_t* rkey) {
  const uint8_t generation = next_generation_++;
  *lkey = DrawKey(generation);
  do {
    *rkey = DrawKey(generation);
  } while (*rkey == *lkey);
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
  // Through the integer: an implicit ODP region's base is address 0.
  *out = reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(mr.addr) + offset);
  return KeyCheck::kOk;
}

KeyCheck MrTable::Place(const Mr& mr, uint64_t va, uint64_t len, bool need_write,
                        uint8_t** out) {
  if (const KeyCheck k = Bounds(mr, va, len, out); k != KeyCheck::kOk) return k;
  if ((mr.access & kOnDemand) && !FaultInRange(*out, len, need_write)) return KeyCheck::kNotMapped;
  return KeyCheck::kOk;
}

void MrTable::InsertWindow(Mw* mw) { windows_[mw->index()] = mw; }

void MrTable::EraseWindow(Mw* mw) { windows_.erase(mw->index()); }

uint32_t MrTable::NewWindowKey() const {
  for (;;) {
    const uint32_t key = SecureRandom32();
    const uint32_t index = key >> 8;
    if (key == 0 || windows_.contains(index)) continue;
    bool region_index = false;
    for (const auto& [k, mr] : by_lkey_)
      region_index = region_index || (k >> 8) == index || (mr->rkey >> 8) == index;
    if (!region_index) return key;
  }
}

Mw* MrTable::FindWindow(uint32_t rkey) const {
  auto it = windows_.find(rkey >> 8);
  return it == windows_.end() || it->second->rkey != rkey ? nullptr : it->second;
}

KeyCheck MrTable::ResolveRemote(uint32_t rkey, const Pd* pd, uint64_t va, uint64_t len,
                                uint32_t right, uint8_t** out, const Qp* qp) const {
  Mr* mr = FindByRkey(rkey);
  if (mr == nullptr) {
    // A memory window (IBA 10.6.7.2): bound, of this PD (type 2: bound
    // through this QP), granting the right, the range inside the window;
    // then the region beneath it as for its own key.
    const Mw* mw = FindWindow(rkey);
    if (mw == nullptr || !mw->bound()) return KeyCheck::kBadKey;
    if (mw->pd != pd || (mw->type == MwType::kType2 && mw->qp != qp)) return KeyCheck::kWrongPd;
    if ((mw->access & right) != right) return KeyCheck::kNoRight;
    if (va < mw->va) return KeyCheck::kOutOfBounds;
    const uint64_t offset = va - mw->va;
    if (offset > mw->length || len > mw->length - offset) return KeyCheck::kOutOfBounds;
    return Place(*mw->mr, mw->mr_iova + offset, len, right != kRemoteRead, out);
  }
  if (!mr->remote_valid) return KeyCheck::kBadKey;
  if (mr->pd != pd) return KeyCheck::kWrongPd;
  if ((mr->access & right) != right) return KeyCheck::kNoRight;
  return Place(*mr, va, len, right != kRemoteRead, out);
}

KeyCheck MrTable::ResolveLocal(uint32_t lkey, const Pd* pd, uint64_t addr, uint64_t len,
                               bool need_write, uint8_t** out) const {
  Mr* mr = FindByLkey(lkey);
  if (mr == nullptr) return KeyCheck::kBadKey;
  if (mr->pd != pd) return KeyCheck::kWrongPd;
  if (need_write && !(mr->access & kLocalWrite)) return KeyCheck::kNoRight;
  return Place(*mr, addr, len, need_write, out);
}

}  // namespace softrnic::engine
