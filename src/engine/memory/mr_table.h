// Memory regions and the key table that checks every access to them.
//
// Every byte the engine reads from or writes to application memory is first
// resolved here: key -> region, same protection domain, the access right,
// and bounds (IBA 10.6.3 / 9.7.5.1.4 / C9-88). Keys are random 32-bit values
// so a remote peer cannot guess them, and registering the same memory again
// yields new keys.
//
// Thread-safety: not synchronised; the engine calls it under its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "engine/memory/memory_window.h"
#include "engine/same_host/shm_memory.h"
#include "engine/types.h"

namespace softrnic::engine {

class Pd;

class Mr {
 public:
  Pd* pd = nullptr;
  uint8_t* addr = nullptr;
  uint64_t length = 0;
  uint64_t iova = 0;
  uint32_t access = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  void* handle = nullptr;
  // Cleared by SEND_WITH_INVALIDATE: remote access stops, local stays.
  bool remote_valid = true;
  // Pages shared through a memfd for same-host peers (shm_memory.h), and
  // the export slot in the device's control segment (-1: not exported).
  SharedRange share;
  int shm_slot = -1;
  // The slot's state as published (its generation): receive WQEs describe
  // their buffers with it (shm_direct_send.cc) without reading the slot,
  // whose line a peer placing a SEND keeps in its cache.
  uint64_t shm_state = 0;
  // Memory windows bound to it: it cannot be deregistered while any is.
  int windows = 0;
};

// kNotMapped: an on-demand-paging region whose pages could not be faulted
// in (engine/memory/odp.h); the access fails as an out-of-bounds one does.
enum class KeyCheck : uint8_t { kOk, kBadKey, kWrongPd, kNoRight, kOutOfBounds, kNotMapped };

class MrTable {
 public:
  // Takes ownership of nothing: the engine owns Mr objects.
  void Insert(Mr* mr);
  void Erase(Mr* mr);
  // Draws the keys of one new registration: a fresh random index part for
  // each, this registration's generation in the low byte, neither 0 nor in
  // use by any region, lkey != rkey. One getrandom(2) per key.
  void NewKeys(uint32_t* lkey, uint32_t* rkey);

  Mr* FindByRkey(uint32_t rkey) const;
  Mr* FindByLkey(uint32_t lkey) const;

  // Memory windows share the R_Key space: a window's 24-bit index is never
  // a region's (memory_window.h).
  void InsertWindow(Mw* mw);
  void EraseWindow(Mw* mw);
  // A fresh R_Key for a new window: an index no region or window uses.
  uint32_t NewWindowKey() const;
  // The window whose current R_Key is exactly `rkey` (bound or not).
  Mw* FindWindow(uint32_t rkey) const;

  // Resolves [va, va+len) under `rkey` for a remote peer of `pd`, arriving
  // on `qp`, needing `right` (kRemoteWrite/kRemoteRead/kRemoteAtomic). The
  // key may be a region's or a bound window's (a type 2 window only through
  // the QP it was bound through). A zero-length access needs no key (IBA
  // 9.7.5.1.4: "DMA length of zero ... R_Key not checked").
  KeyCheck ResolveRemote(uint32_t rkey, const Pd* pd, uint64_t va, uint64_t len, uint32_t right,
                         uint8_t** out, const Qp* qp = nullptr) const;
  // Resolves a local SGE; need_write for receive buffers and READ/atomic
  // results (IBA 10.6.3.1: the consumer must grant Local Write).
  KeyCheck ResolveLocal(uint32_t lkey, const Pd* pd, uint64_t addr, uint64_t len, bool need_write,
                        uint8_t** out) const;

  size_t size() const { return by_lkey_.size(); }

  // [va, va+len) inside `mr` (in its iova space): the address it maps to,
  // or kOutOfBounds. No key, right or page check.
  static KeyCheck Bounds(const Mr& mr, uint64_t va, uint64_t len, uint8_t** out);

 private:
  // Bounds, then for an ODP region the fault-in of the resolved range.
  static KeyCheck Place(const Mr& mr, uint64_t va, uint64_t len, bool need_write, uint8_t** out);
  std::unordered_map<uint32_t, Mr*> by_lkey_;
  std::unordered_map<uint32_t, Mr*> by_rkey_;
  std::unordered_map<uint32_t, Mw*> windows_;  // by index (rkey >> 8)
  bool InUse(uint32_t key) const {
    return by_lkey_.contains(key) || by_rkey_.contains(key) || windows_.contains(key >> 8);
  }
  uint32_t DrawKey(uint8_t generation) const;
  // The key part of the next registration's keys; wraps after 256.
  uint8_t next_generation_ = 0;
};

}  // namespace softrnic::engine
