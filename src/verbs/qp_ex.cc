// The ibv_qp_ex "wr_*" posting API (ibv_wr_post(3)).
//
// wr_start opens a batch; each wr_<opcode> call begins a WR that takes the
// qp_ex's wr_id/wr_flags at that moment; wr_set_* complete the WR begun last;
// wr_complete hands the whole batch to the engine in order. SGEs and inline
// bytes are kept by index until wr_complete so growing vectors never leave
// dangling pointers. Errors found while building (bad opcode for the QP,
// setter without a WR) are reported by wr_complete, as the man page says.
#include <cstring>

#include "verbs/internal.h"

namespace softrnic::verbs {
namespace {

PendingWr* Begin(ibv_qp_ex* qpx, eng::WrOpcode op) {
  Qp* qp = ToQp(qpx);
  try {
    PendingWr& p = qp->wr_list.emplace_back();
    p.wr.wr_id = qpx->wr_id;
    p.wr.send_flags = qpx->wr_flags;
    p.wr.opcode = op;
    p.sge_begin = static_cast<uint32_t>(qp->wr_sges.size());
    return &p;
  } catch (...) {
    qp->wr_error = ENOMEM;
    return nullptr;
  }
}

PendingWr* Last(ibv_qp_ex* qpx) {
  Qp* qp = ToQp(qpx);
  if (qp->wr_list.empty()) {
    qp->wr_error = EINVAL;
    return nullptr;
  }
  return &qp->wr_list.back();
}

void WrStart(ibv_qp_ex* qpx) {
  Qp* qp = ToQp(qpx);
  qp->wr_list.clear();
  qp->wr_sges.clear();
  qp->wr_inline.clear();
  qp->wr_error = 0;
}

void WrAbort(ibv_qp_ex* qpx) { WrStart(qpx); }

int WrComplete(ibv_qp_ex* qpx) {
  Qp* qp = ToQp(qpx);
  int rc = qp->wr_error;
  try {
    for (size_t i = 0; !rc && i < qp->wr_list.size(); ++i) {
      PendingWr& p = qp->wr_list[i];
      eng::Sge inline_sge;
      if (p.is_inline) {
        inline_sge.addr = reinterpret_cast<uintptr_t>(qp->wr_inline.data() + p.inline_begin);
        inline_sge.length = p.inline_len;
        p.wr.sges = std::span<const eng::Sge>(&inline_sge, 1);
        p.wr.send_flags |= IBV_SEND_INLINE;
      } else {
        p.wr.sges = std::span<const eng::Sge>(qp->wr_sges.data() + p.sge_begin, p.sge_count);
      }
      rc = qp->dev->PostSend(qp->e, p.wr);
    }
  } catch (...) {
    rc = ENOMEM;
  }
  WrStart(qpx);
  return rc;
}

// Begin for an operation on remote memory (RDMA and atomics).
PendingWr* BeginRemote(ibv_qp_ex* q, eng::WrOpcode op, uint32_t rkey, uint64_t addr) {
  PendingWr* p = Begin(q, op);
  if (p) {
    p->wr.rkey = rkey;
    p->wr.remote_addr = addr;
  }
  return p;
}

void WrRdmaWrite(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
  BeginRemote(q, eng::WrOpcode::kRdmaWrite, rkey, addr);
}
void WrRdmaWriteImm(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, __be32 imm) {
  if (PendingWr* p = BeginRemote(q, eng::WrOpcode::kRdmaWriteWithImm, rkey, addr)) p->wr.imm_data = imm;
}
void WrRdmaRead(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
  BeginRemote(q, eng::WrOpcode::kRdmaRead, rkey, addr);
}
void WrSend(ibv_qp_ex* q) { Begin(q, eng::WrOpcode::kSend); }
void WrSendImm(ibv_qp_ex* q, __be32 imm) {
  if (PendingWr* p = Begin(q, eng::WrOpcode::kSendWithImm)) p->wr.imm_data = imm;
}
void WrSendInv(ibv_qp_ex* q, uint32_t rkey) {
  if (PendingWr* p = Begin(q, eng::WrOpcode::kSendWithInv)) p->wr.imm_data = rkey;
}
void WrLocalInv(ibv_qp_ex* q, uint32_t rkey) {
  if (PendingWr* p = Begin(q, eng::WrOpcode::kLocalInv)) p->wr.imm_data = rkey;
}
void WrCmpSwp(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
  if (PendingWr* p = BeginRemote(q, eng::WrOpcode::kAtomicCmpSwp, rkey, addr)) {
    p->wr.compare_add = compare;
    p->wr.swap = swap;
  }
}
void WrFetchAdd(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t add) {
  if (PendingWr* p = BeginRemote(q, eng::WrOpcode::kAtomicFetchAdd, rkey, addr)) p->wr.compare_add = add;
}
// A type 2 window's bind (a type 1 window is bound with ibv_bind_mw).
void WrBindMw(ibv_qp_ex* q, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  if (!mw || !info || mw->type != IBV_MW_TYPE_2) {
    ToQp(q)->wr_error = EINVAL;
    return;
  }
  if (PendingWr* p = Begin(q, eng::WrOpcode::kBindMw)) {
    if (int rc = TranslateBindMw(mw, rkey, *info, &p->wr)) ToQp(q)->wr_error = rc;
  }
}

// Operations a QP created without them (or softrnic at all) cannot do: the
// batch fails at wr_complete with EOPNOTSUPP.
void WrSendTso(ibv_qp_ex* q, void*, uint16_t, uint16_t) { ToQp(q)->wr_error = EOPNOTSUPP; }
void WrSetXrcSrqn(ibv_qp_ex* q, uint32_t remote_srqn) {
  if (PendingWr* p = Last(q)) p->wr.xrc_remote_srqn = remote_srqn;
}
// ATOMIC WRITE: the 8 bytes at atomic_wr are taken now (the engine keeps
// them in the WR), as rxe's provider copies them into its WQE.
void WrAtomicWrite(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, const void* atomic_wr) {
  if (!atomic_wr) {
    ToQp(q)->wr_error = EINVAL;
    return;
  }
  if (PendingWr* p = BeginRemote(q, eng::WrOpcode::kAtomicWrite, rkey, addr))
    std::memcpy(&p->wr.compare_add, atomic_wr, sizeof(p->wr.compare_add));
}

void WrSetUdAddr(ibv_qp_ex* q, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  if (PendingWr* p = Last(q)) {
    if (!ah) {
      ToQp(q)->wr_error = EINVAL;
      return;
    }
    p->wr.ah = reinterpret_cast<Ah*>(ah)->e;
    p->wr.remote_qpn = remote_qpn;
    p->wr.remote_qkey = remote_qkey;
  }
}

void WrSetSgeList(ibv_qp_ex* q, size_t n, const ibv_sge* list) {
  Qp* qp = ToQp(q);
  PendingWr* p = Last(q);
  if (!p) return;
  try {
    p->is_inline = false;
    qp->wr_sges.resize(p->sge_begin);  // a later set_* replaces the earlier one
    for (size_t i = 0; i < n; ++i) qp->wr_sges.push_back(LoadSge(list, i));
    p->sge_count = static_cast<uint32_t>(n);
  } catch (...) {
    qp->wr_error = ENOMEM;
  }
}

void WrSetSge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
  ibv_sge s{addr, length, lkey};
  WrSetSgeList(q, 1, &s);
}

void WrSetInlineDataList(ibv_qp_ex* q, size_t n, const ibv_data_buf* bufs) {
  Qp* qp = ToQp(q);
  PendingWr* p = Last(q);
  if (!p) return;
  try {
    // Inline data is copied now: the caller may reuse its buffers at once.
    p->is_inline = true;
    p->inline_begin = static_cast<uint32_t>(qp->wr_inline.size());
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      const auto* b = static_cast<const uint8_t*>(bufs[i].addr);
      qp->wr_inline.insert(qp->wr_inline.end(), b, b + bufs[i].length);
      total += bufs[i].length;
    }
    p->inline_len = static_cast<uint32_t>(total);
  } catch (...) {
    qp->wr_error = ENOMEM;
  }
}

void WrSetInlineData(ibv_qp_ex* q, void* addr, size_t length) {
  ibv_data_buf b{addr, length};
  WrSetInlineDataList(q, 1, &b);
}

}  // namespace

void InstallQpExOps(Qp* qp) {
  ibv_qp_ex* x = &qp->qpx;
  // Every pointer is set (like rxe does), whatever send_ops_flags asked for:
  // an application calling an op it did not request gets an error from the
  // engine at wr_complete rather than a jump through a null pointer.
  x->wr_rdma_write = WrRdmaWrite;
  x->wr_rdma_write_imm = WrRdmaWriteImm;
  x->wr_rdma_read = WrRdmaRead;
  x->wr_send = WrSend;
  x->wr_send_imm = WrSendImm;
  x->wr_send_inv = WrSendInv;
  x->wr_local_inv = WrLocalInv;
  x->wr_atomic_cmp_swp = WrCmpSwp;
  x->wr_atomic_fetch_add = WrFetchAdd;
  x->wr_bind_mw = WrBindMw;
  x->wr_send_tso = WrSendTso;
  x->wr_set_xrc_srqn = WrSetXrcSrqn;
  x->wr_atomic_write = WrAtomicWrite;
  x->wr_set_ud_addr = WrSetUdAddr;
  x->wr_set_sge = WrSetSge;
  x->wr_set_sge_list = WrSetSgeList;
  x->wr_set_inline_data = WrSetInlineData;
  x->wr_set_inline_data_list = WrSetInlineDataList;
  x->wr_start = WrStart;
  x->wr_complete = WrComplete;
  x->wr_abort = WrAbort;
}

}  // namespace softrnic::verbs
