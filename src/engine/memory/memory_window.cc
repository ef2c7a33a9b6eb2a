#include "engine/memory/memory_window.h"

#include "engine/memory/mr_table.h"

namespace softrnic::engine {

namespace {

constexpr uint32_t kRemoteRights = kRemoteWrite | kRemoteRead | kRemoteAtomic;

}  // namespace

WcStatus CheckBind(const MwBindRequest& r, const Qp* qp, const Pd* qp_pd) {
  (void)qp;
  const Mw* mw = r.mw;
  if (mw == nullptr) return WcStatus::kMwBindErr;
  const bool type2 = mw->type == MwType::kType2;
  // o10-36.2.1: a type 2 window is bound through a QP of its own PD, and
  // only while free (invalidated, or never bound).
  if (type2 && (mw->pd != qp_pd || mw->bound())) return WcStatus::kMwBindErr;
  // The consumer may change only the key byte (IBA 10.6.7.2.4).
  if ((r.new_rkey >> 8) != mw->index()) return WcStatus::kMwBindErr;
  // A zero-length bind of a type 1 window unbinds it (ibv_bind_mw(3)).
  if (!type2 && r.length == 0) return WcStatus::kSuccess;
  const Mr* mr = r.mr;
  if (mr == nullptr || mr->pd != qp_pd || mr->pd != mw->pd) return WcStatus::kMwBindErr;
  // C10-73 / o10-37: the region must allow binding, and a window granting
  // Remote Write or Atomic needs a region with Local Write.
  if (!(mr->access & kMwBind)) return WcStatus::kMwBindErr;
  if ((r.access & (kRemoteWrite | kRemoteAtomic)) && !(mr->access & kLocalWrite))
    return WcStatus::kMwBindErr;
  // Zero-based windows are type 2 only (IBA 10.6.7.2.2).
  if ((r.access & kZeroBased) && !type2) return WcStatus::kMwBindErr;
  // The window lies inside the region (its iova space).
  if (r.addr < mr->iova) return WcStatus::kMwBindErr;
  const uint64_t offset = r.addr - mr->iova;
  if (offset > mr->length || r.length > mr->length - offset) return WcStatus::kMwBindErr;
  return WcStatus::kSuccess;
}

void Unbind(Mw* mw) {
  if (mw->mr != nullptr) --mw->mr->windows;
  mw->mr = nullptr;
  mw->va = mw->length = mw->mr_iova = 0;
  mw->access = 0;
  mw->qp = nullptr;
}

void ApplyBind(const MwBindRequest& r, const Qp* qp) {
  Mw* mw = r.mw;
  Unbind(mw);  // a type 1 window may move from one range (or region) to another
  mw->rkey = r.new_rkey;
  if (mw->type == MwType::kType1 && r.length == 0) return;
  mw->mr = r.mr;
  ++mw->mr->windows;
  mw->mr_iova = r.addr;
  mw->va = (r.access & kZeroBased) ? 0 : r.addr;
  mw->length = r.length;
  mw->access = r.access & kRemoteRights;
  mw->qp = mw->type == MwType::kType2 ? qp : nullptr;
}

}  // namespace softrnic::engine
