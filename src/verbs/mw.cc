// Memory windows (ibv_alloc_mw(3), ibv_bind_mw(3), IBV_WR_BIND_MW and
// IBV_WR_LOCAL_INV in ibv_post_send(3)); the rules and the key space are
// the engine's (engine/memory/memory_window.h).
#include "verbs/internal.h"

using namespace softrnic::verbs;

namespace {

// The IBV_ACCESS_* bits a window may carry.
constexpr unsigned kWindowAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                   IBV_ACCESS_ZERO_BASED;

ibv_mw* AllocMwOp(ibv_pd* ibpd, ibv_mw_type type) noexcept {
  if (!ibpd) return FailNull<ibv_mw>(EINVAL);
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) return FailNull<ibv_mw>(EINVAL);
  return NoThrow<ibv_mw*>(nullptr, [&]() -> ibv_mw* {
    eng::Device* dev = DevOf(ibpd->context);
    auto* mw = NewFilledByEngine<Mw>([&](Mw* w) {
      return dev->AllocMw(reinterpret_cast<Pd*>(ibpd)->e, static_cast<eng::MwType>(type), &w->mw,
                          &w->e);
    });
    if (!mw) return nullptr;
    mw->mw.context = ibpd->context;
    mw->mw.pd = ibpd;
    mw->mw.rkey = dev->MwRkey(mw->e);
    mw->mw.type = type;
    HoldDomain(ibpd);
    return &mw->mw;
  });
}

int DeallocMwOp(ibv_mw* ibmw) noexcept {
  if (!ibmw) return EINVAL;
  auto* mw = reinterpret_cast<Mw*>(ibmw);
  ibv_pd* const pd = ibmw->pd;
  return DestroyThenFree(mw, [&] {
    const int rc = DevOf(ibmw->context)->DeallocMw(mw->e);
    if (rc == 0) ReleaseDomain(pd);
    return rc;
  });
}

// ibv_bind_mw(3): a type 1 bind, posted on `ibqp`'s send queue like any
// WR (verbs.h's inline wrapper has checked the type and the MR's PD). The
// new R_Key is the old one with its key byte incremented, and mw->rkey
// holds it once the bind is posted.
int BindMwOp(ibv_qp* ibqp, ibv_mw* ibmw, ibv_mw_bind* bind) noexcept {
  if (!ibqp || !ibmw || !bind) return EINVAL;
  const uint32_t new_rkey = ibv_inc_rkey(ibmw->rkey);
  eng::SendWr wr;
  if (int rc = TranslateBindMw(ibmw, new_rkey, bind->bind_info, &wr)) return rc;
  wr.wr_id = bind->wr_id;
  wr.send_flags = bind->send_flags;
  Qp* qp = ToQp(ibqp);
  const int rc = NoThrow<int>(ENOMEM, [&] { return qp->dev->PostSend(qp->e, wr); });
  if (rc == 0) ibmw->rkey = new_rkey;
  return rc;
}

}  // namespace

namespace softrnic::verbs {

int TranslateBindMw(const ibv_mw* mw, uint32_t new_rkey, const ibv_mw_bind_info& info,
                    eng::SendWr* out) {
  if (!mw) return EINVAL;
  if (info.mw_access_flags & ~kWindowAccess) return EINVAL;
  // No region: only the zero-length unbind of a type 1 window.
  if (!info.mr && (info.addr || info.length || mw->type == IBV_MW_TYPE_2)) return EINVAL;
  if (info.mr && info.mr->pd != mw->pd) return EPERM;  // ibv_bind_mw(3)
  out->opcode = eng::WrOpcode::kBindMw;
  out->bind_mw = reinterpret_cast<const Mw*>(mw)->e;
  out->bind_mr = info.mr ? reinterpret_cast<const Mr*>(info.mr)->e : nullptr;
  out->remote_addr = info.addr;
  out->bind_length = info.length;
  out->bind_access = info.mw_access_flags;
  out->rkey = new_rkey;
  return 0;
}

void InstallMwOps(ibv_context_ops* ops) {
  ops->alloc_mw = AllocMwOp;
  ops->dealloc_mw = DeallocMwOp;
  ops->bind_mw = BindMwOp;
}

}  // namespace softrnic::verbs
