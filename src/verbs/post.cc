// The send and receive data path: ibv_post_send, ibv_post_recv and
// ibv_post_srq_recv, reached by applications through ctx->ops. Each WR is
// translated to the engine's form (the numeric values of opcodes and flags
// are identical by design, see abi_asserts.cc) and handed to the Device.
#include <cstdint>
#include <cstring>

#include "engine/wr_opcode.h"
#include "verbs/internal.h"

namespace softrnic::verbs {

// Enough for any WR the engine accepts (DeviceAttr::max_sge is 32). A WR
// with more SGEs is rejected before we touch its list.
constexpr int kMaxSgeOnStack = 64;

namespace {

// Copies an SGE list into `out`; EINVAL if it is longer than we can hold
// (the engine rejects anything above the QP's max_*_sge with EINVAL too).
inline int CopySges(const ibv_sge* list, int n, eng::Sge* out) {
  if (n < 0 || n > kMaxSgeOnStack || (n > 0 && !list)) return EINVAL;
  for (int i = 0; i < n; ++i) out[i] = LoadSge(list, static_cast<size_t>(i));
  return 0;
}

// Translates one ibv_send_wr; the SGEs go into `sges`.
inline int TranslateSendWr(const ibv_send_wr* w, eng::Sge* sges, eng::SendWr* out) {
  if (int rc = CopySges(w->sg_list, w->num_sge, sges)) return rc;
  out->wr_id = w->wr_id;
  out->send_flags = w->send_flags;
  out->imm_data = w->imm_data;
  out->sges = std::span<const eng::Sge>(sges, static_cast<size_t>(w->num_sge));
  // Read as an integer: a C caller may put any value in the enum field, and
  // loading an out-of-range enum value is undefined behaviour in C++.
  uint32_t opcode;
  static_assert(sizeof(opcode) == sizeof(w->opcode));
  std::memcpy(&opcode, &w->opcode, sizeof(opcode));
  // The engine's table (wr_opcode.h) says which union member a known opcode
  // fills; unknown ones (TSO, DRIVER1: not offered) are refused here, and
  // Device::PostSend refuses what the QP cannot post.
  const eng::WrOpcodeInfo& op = eng::GetWrOpcodeInfo(opcode);
  if (!op.known()) return EINVAL;
  if (op.atomic_write) {
    // ATOMIC WRITE through ibv_post_send: its 8 bytes are the SGEs' (8 in
    // all), read now as IBV_SEND_INLINE data is (the lkeys are not used);
    // the engine carries them in the WR (SendWr::compare_add).
    out->remote_addr = w->wr.rdma.remote_addr;
    out->rkey = w->wr.rdma.rkey;
    uint8_t word[8];
    uint32_t got = 0;
    for (int i = 0; i < w->num_sge; ++i) {
      const ibv_sge& s = w->sg_list[i];
      if (s.length > sizeof(word) - got) return EINVAL;
      if (s.length) std::memcpy(word + got, reinterpret_cast<const void*>(s.addr), s.length);
      got += s.length;
    }
    if (got != sizeof(word)) return EINVAL;
    std::memcpy(&out->compare_add, word, sizeof(word));
    out->sges = {};
  } else if (op.atomic) {
    out->remote_addr = w->wr.atomic.remote_addr;
    out->rkey = w->wr.atomic.rkey;
    out->compare_add = w->wr.atomic.compare_add;
    out->swap = w->wr.atomic.swap;
  } else if (op.remote_right != 0) {
    out->remote_addr = w->wr.rdma.remote_addr;
    out->rkey = w->wr.rdma.rkey;
  }
  if (opcode == IBV_WR_BIND_MW) {
    // Type 2 windows only: a type 1 window is bound with ibv_bind_mw.
    if (!w->bind_mw.mw || w->bind_mw.mw->type != IBV_MW_TYPE_2) return EINVAL;
    return TranslateBindMw(w->bind_mw.mw, w->bind_mw.rkey, w->bind_mw.bind_info, out);
  }
  out->opcode = static_cast<eng::WrOpcode>(opcode);
  // Read by XRC send QPs only (the union's other members are UD's).
  out->xrc_remote_srqn = w->qp_type.xrc.remote_srqn;
  return 0;
}

// Walks a WR list (ibv_send_wr or ibv_recv_wr), handing each WR to
// `post_one` (0 or an errno); on the first failure sets *bad_wr and returns
// its errno, as ibv_post_send(3) / ibv_post_recv(3) / ibv_post_srq_recv(3)
// specify. The WRs before it stay posted.
template <typename Wr, typename PostOne>
int PostList(Wr* wr, Wr** bad_wr, PostOne post_one) noexcept {
  // Outside the try: if the engine throws, *bad_wr names the WR it was
  // given, since those before it were posted.
  Wr* w = wr;
  try {
    for (; w; w = w->next) {
      if (const int rc = post_one(w)) {
        if (bad_wr) *bad_wr = w;
        return rc;
      }
    }
    return 0;
  } catch (...) {
    if (bad_wr) *bad_wr = w;
    return ENOMEM;
  }
}

int PostSend(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept {
  Qp* qp = ToQp(ibqp);
  eng::Sge sges[kMaxSgeOnStack];
  const bool ud = ibqp->qp_type == IBV_QPT_UD;
  return PostList(wr, bad_wr, [&](ibv_send_wr* w) {
    eng::SendWr e;
    if (int rc = TranslateSendWr(w, sges, &e)) return rc;
    if (ud) {
      if (!w->wr.ud.ah) return EINVAL;
      e.ah = reinterpret_cast<Ah*>(w->wr.ud.ah)->e;
      e.remote_qpn = w->wr.ud.remote_qpn;
      e.remote_qkey = w->wr.ud.remote_qkey;
    }
    return qp->dev->PostSend(qp->e, e);
  });
}

// A receive WR list to the QP's receive queue or an SRQ: `post` takes one
// translated WR.
template <typename PostOne>
int PostRecvList(ibv_recv_wr* wr, ibv_recv_wr** bad_wr, PostOne post) noexcept {
  eng::Sge sges[kMaxSgeOnStack];
  return PostList(wr, bad_wr, [&](ibv_recv_wr* w) {
    if (int rc = CopySges(w->sg_list, w->num_sge, sges)) return rc;
    eng::RecvWr e;
    e.wr_id = w->wr_id;
    e.sges = std::span<const eng::Sge>(sges, static_cast<size_t>(w->num_sge));
    return post(e);
  });
}

int PostRecv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept {
  Qp* qp = ToQp(ibqp);
  return PostRecvList(wr, bad_wr, [qp](const eng::RecvWr& e) { return qp->dev->PostRecv(qp->e, e); });
}

int PostSrqRecv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept {
  auto* srq = reinterpret_cast<Srq*>(ibsrq);
  return PostRecvList(wr, bad_wr,
                      [srq](const eng::RecvWr& e) { return srq->dev->PostSrqRecv(srq->e, e); });
}

}  // namespace

void InstallPostOps(ibv_context_ops* ops) {
  ops->post_send = PostSend;
  ops->post_recv = PostRecv;
  ops->post_srq_recv = PostSrqRecv;
  InstallMwOps(ops);
}

}  // namespace softrnic::verbs
