// Memory windows (IBA 10.6.7; ibv_alloc_mw(3), ibv_bind_mw(3)): a remote key
// for a part of a registered region, with its own rights, that its owner
// binds, moves and revokes through the send queue without registering
// anything.
//
// Type 1 windows are bound with ibv_bind_mw and reachable by any QP of the
// window's PD. Type 2 windows are bound with an IBV_WR_BIND_MW work request,
// reachable only through the QP that bound them (type 2B, IBA 10.6.7.2.1),
// and invalidated with IBV_WR_LOCAL_INV or a peer's SEND with Invalidate;
// a bound type 2 window cannot be bound again before that.
//
// Keys: a window's R_Key is a 24-bit index of its own (drawn like a region's,
// never shared with a region's) and an 8-bit key the consumer changes on
// every bind (ibv_inc_rkey), so a stale R_Key stops working at the next
// bind (IBA 10.6.7.2.4, "key" portion).
//
// Thread-safety: not synchronised; the engine uses these under its lock.
#pragma once

#include <cstdint>

#include "engine/types.h"

namespace softrnic::engine {

class Mr;
class Pd;
class Qp;

enum class MwType : uint8_t { kType1 = 1, kType2 = 2 };

class Mw {
 public:
  Pd* pd = nullptr;
  MwType type = MwType::kType1;
  uint32_t rkey = 0;
  void* handle = nullptr;

  // Bound state: the window [va, va + length) (va 0-based for a zero-based
  // type 2 window) is [mr_iova, mr_iova + length) of `mr`.
  Mr* mr = nullptr;
  uint64_t va = 0;
  uint64_t length = 0;
  uint64_t mr_iova = 0;
  uint32_t access = 0;  // remote rights it grants (Access bits)
  const Qp* qp = nullptr;  // type 2: the QP it was bound through

  bool bound() const { return mr != nullptr; }
  uint32_t index() const { return rkey >> 8; }
};

// A bind request as the send queue carries it (IBV_WR_BIND_MW; ibv_bind_mw
// posts one for a type 1 window). length 0 on a type 1 window unbinds it.
struct MwBindRequest {
  Mw* mw = nullptr;
  Mr* mr = nullptr;
  uint64_t addr = 0;  // in the region's address space (its iova)
  uint64_t length = 0;
  uint32_t access = 0;  // IBV_ACCESS_* of the window: remote rights, ZERO_BASED
  uint32_t new_rkey = 0;
};

// The checks of IBA 10.6.7.2.3 / o10-36.2 .. o10-39 for binding through `qp`
// of protection domain `qp_pd`: kSuccess, or kMwBindErr (the completion a
// failed bind gets; the QP then goes to the error state).
WcStatus CheckBind(const MwBindRequest& r, const Qp* qp, const Pd* qp_pd);
// Applies a checked bind: the window's new range, rights and key.
void ApplyBind(const MwBindRequest& r, const Qp* qp);
// Returns the window to the free state (type 2: LOCAL_INV, SEND with
// Invalidate; type 1: a zero-length bind, dealloc).
void Unbind(Mw* mw);

}  // namespace softrnic::engine
