// XRC verbs (engine/queues/xrc.cc has the transport): ibv_open_xrcd and
// ibv_close_xrcd, ibv_create_srq_ex (basic and XRC SRQs), ibv_get_srq_num,
// XRC receive QPs from ibv_create_qp_ex, and ibv_open_qp. All are reached
// through the verbs_context ops verbs.h's inline wrappers call.
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdint>

#include "verbs/internal.h"

namespace softrnic::verbs {
namespace {

struct Xrcd {
  ibv_xrcd xrcd;  // first
  eng::Xrcd* e = nullptr;
};

eng::Xrcd* ToEngineXrcd(ibv_xrcd* x) { return reinterpret_cast<Xrcd*>(x)->e; }

// ibv_open_xrcd(3): fd names the domain by its file's inode (-1: an
// anonymous domain, which needs O_CREAT); oflags O_CREAT and O_EXCL as for
// open(2).
ibv_xrcd* OpenXrcdOp(ibv_context* ctx, ibv_xrcd_init_attr* attr) noexcept {
  if (!ctx || !attr) return FailNull<ibv_xrcd>(EINVAL);
  constexpr uint32_t kKnown = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  if ((attr->comp_mask & ~kKnown) || !(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
      !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS))
    return FailNull<ibv_xrcd>(EINVAL);
  if (attr->oflags & ~(O_CREAT | O_EXCL)) return FailNull<ibv_xrcd>(EINVAL);
  const bool create = attr->oflags & O_CREAT;
  const bool exclusive = attr->oflags & O_EXCL;
  eng::XrcdInode inode;
  if (attr->fd >= 0) {
    struct stat st;
    if (fstat(attr->fd, &st) != 0) return FailNull<ibv_xrcd>(EBADF);
    inode.dev = st.st_dev;
    inode.ino = st.st_ino;
  } else if (!create) {
    return FailNull<ibv_xrcd>(EINVAL);  // an anonymous domain can only be made
  }
  return NoThrow<ibv_xrcd*>(nullptr, [&]() -> ibv_xrcd* {
    eng::Device* dev = DevOf(ctx);
    auto* x = NewFilledByEngine<Xrcd>([&](Xrcd* w) {
      return dev->OpenXrcd(attr->fd >= 0 ? &inode : nullptr, create, exclusive, &w->e);
    });
    if (!x) return nullptr;
    x->xrcd.context = ctx;
    return &x->xrcd;
  });
}

int CloseXrcdOp(ibv_xrcd* ibxrcd) noexcept {
  if (!ibxrcd) return EINVAL;
  auto* x = reinterpret_cast<Xrcd*>(ibxrcd);
  return DestroyThenFree(x, [&] { return DevOf(ibxrcd->context)->CloseXrcd(x->e); });
}

// ibv_create_srq_ex(3): a basic SRQ (as ibv_create_srq) or an XRC SRQ,
// which needs the domain, the CQ of its receive completions and the PD of
// the memory its WQEs name. Tag-matching SRQs are not offered.
ibv_srq* CreateSrqExOp(ibv_context* ctx, ibv_srq_init_attr_ex* attr) noexcept {
  if (!ctx || !attr) return FailNull<ibv_srq>(EINVAL);
  constexpr uint32_t kKnown = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
                              IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  const uint32_t mask = attr->comp_mask;
  if (mask & ~kKnown) return FailNull<ibv_srq>(EOPNOTSUPP);
  if (!(mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd || attr->pd->context != ctx)
    return FailNull<ibv_srq>(EINVAL);
  const ibv_srq_type type = (mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type : IBV_SRQT_BASIC;
  if (type == IBV_SRQT_BASIC) {
    ibv_srq_init_attr basic{attr->srq_context, attr->attr};
    ibv_srq* s = ibv_create_srq(attr->pd, &basic);
    if (s) attr->attr = basic.attr;
    return s;
  }
  if (type != IBV_SRQT_XRC) return FailNull<ibv_srq>(EOPNOTSUPP);
  if (!(mask & IBV_SRQ_INIT_ATTR_XRCD) || !(mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->xrcd ||
      !attr->cq || attr->xrcd->context != ctx || attr->cq->context != ctx)
    return FailNull<ibv_srq>(EINVAL);
  return NoThrow<ibv_srq*>(nullptr, [&]() -> ibv_srq* {
    eng::Device* dev = DevOf(ctx);
    eng::SrqAttr a{attr->attr.max_wr, attr->attr.max_sge, attr->attr.srq_limit};
    auto* srq = NewFilledByEngine<Srq>([&](Srq* w) {
      return dev->CreateXrcSrq(reinterpret_cast<Pd*>(attr->pd)->e, ToEngineXrcd(attr->xrcd),
                               ToCq(attr->cq)->e, a, &w->srq, &w->e);
    });
    if (!srq) return nullptr;
    srq->dev = dev;
    eng::SrqAttr real;
    if (dev->QuerySrq(srq->e, &real) == 0) {
      attr->attr.max_wr = real.max_wr;
      attr->attr.max_sge = real.max_sge;
    }
    ibv_srq* s = &srq->srq;
    s->context = ctx;
    s->srq_context = attr->srq_context;
    s->pd = attr->pd;
    pthread_mutex_init(&s->mutex, nullptr);
    pthread_cond_init(&s->cond, nullptr);
    HoldDomain(attr->pd);  // ibv_destroy_srq releases it
    return s;
  });
}

// ibv_get_srq_num(3): the number XRC senders put in their WRs; basic SRQs
// have none.
int GetSrqNumOp(ibv_srq* ibsrq, uint32_t* srq_num) noexcept {
  if (!ibsrq || !srq_num) return EINVAL;
  auto* srq = reinterpret_cast<Srq*>(ibsrq);
  const uint32_t n = srq->dev->SrqNum(srq->e);
  if (n == 0) return EINVAL;
  *srq_num = n;
  return 0;
}

// A wrapper for an XRC receive QP (created or opened): no PD, CQs or SRQ.
ibv_qp* FillXrcRecvQp(Qp* qp, ibv_context* ctx, eng::Device* dev, void* qp_context) {
  qp->dev = dev;
  ibv_qp* q = &qp->qpx.qp_base;
  q->context = ctx;
  q->qp_context = qp_context;
  q->qp_num = dev->QpNum(qp->e);
  q->state = IBV_QPS_RESET;
  q->qp_type = IBV_QPT_XRC_RECV;
  pthread_mutex_init(&q->mutex, nullptr);
  pthread_cond_init(&q->cond, nullptr);
  return q;
}

// ibv_open_qp(3): another handle to an XRC receive QP of the domain.
ibv_qp* OpenQpOp(ibv_context* ctx, ibv_qp_open_attr* attr) noexcept {
  if (!ctx || !attr) return FailNull<ibv_qp>(EINVAL);
  constexpr uint32_t kNeeded = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if ((attr->comp_mask & kNeeded) != kNeeded ||
      (attr->comp_mask & ~uint32_t(kNeeded | IBV_QP_OPEN_ATTR_CONTEXT)))
    return FailNull<ibv_qp>(EINVAL);
  if (attr->qp_type != IBV_QPT_XRC_RECV || !attr->xrcd || attr->xrcd->context != ctx)
    return FailNull<ibv_qp>(EINVAL);
  return NoThrow<ibv_qp*>(nullptr, [&]() -> ibv_qp* {
    eng::Device* dev = DevOf(ctx);
    auto* qp = NewFilledByEngine<Qp>([&](Qp* w) {
      std::memset(&w->qpx, 0, sizeof(w->qpx));
      return dev->OpenXrcRecvQp(ToEngineXrcd(attr->xrcd), attr->qp_num, &w->qpx.qp_base, &w->e);
    });
    if (!qp) return nullptr;
    ibv_qp* q = FillXrcRecvQp(qp, ctx, dev,
                              (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context
                                                                           : nullptr);
    eng::QpAttr a;
    if (dev->QueryQp(qp->e, &a) == 0) q->state = static_cast<ibv_qp_state>(a.qp_state);
    return q;
  });
}

}  // namespace

ibv_qp* CreateXrcRecvQp(ibv_context* ctx, ibv_qp_init_attr_ex* attr) {
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd || attr->xrcd->context != ctx)
    return FailNull<ibv_qp>(EINVAL);
  eng::Device* dev = DevOf(ctx);
  auto* qp = NewFilledByEngine<Qp>([&](Qp* w) {
    std::memset(&w->qpx, 0, sizeof(w->qpx));
    return dev->CreateXrcRecvQp(ToEngineXrcd(attr->xrcd), &w->qpx.qp_base, &w->e);
  });
  if (!qp) return nullptr;
  attr->cap = ibv_qp_cap{};
  qp->cap = attr->cap;
  return FillXrcRecvQp(qp, ctx, dev, attr->qp_context);
}

void InstallXrcOps(verbs_context* vctx) {
  vctx->open_xrcd = OpenXrcdOp;
  vctx->close_xrcd = CloseXrcdOp;
  vctx->create_srq_ex = CreateSrqExOp;
  vctx->get_srq_num = GetSrqNumOp;
  vctx->open_qp = OpenQpOp;
}

}  // namespace softrnic::verbs
