// PDs, MRs, completion channels, CQs (plain and extended), SRQs, AHs, QPs
// and the data path (post_send / post_recv / post_srq_recv / poll_cq /
// req_notify_cq, reached by applications through ctx->ops).
//
// Every function translates the rdma-core ABI to engine calls; the numeric
// values of enums and flags are identical by design (see abi_asserts.cc), so
// translation is a static_cast once a value has been range-checked.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/wr_opcode.h"
#include "verbs/async_acks.h"
#include "verbs/internal.h"

namespace softrnic::verbs {

// Enough for any WR the engine accepts (DeviceAttr::max_sge is 32). A WR
// with more SGEs is rejected before we touch its list.
constexpr int kMaxSgeOnStack = 64;

void ToEngineAv(const ibv_ah_attr& in, eng::AddressVector* out) {
  std::memcpy(out->dgid.raw.data(), in.grh.dgid.raw, 16);
  out->flow_label = in.grh.flow_label;
  out->sgid_index = in.grh.sgid_index;
  out->hop_limit = in.grh.hop_limit;
  out->traffic_class = in.grh.traffic_class;
  out->is_global = in.is_global != 0;
  out->dlid = in.dlid;
  out->sl = in.sl;
  out->src_path_bits = in.src_path_bits;
  out->static_rate = in.static_rate;
  out->port_num = in.port_num;
}

void FromEngineAv(const eng::AddressVector& in, ibv_ah_attr* out) {
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out->grh.dgid.raw, in.dgid.raw.data(), 16);
  out->grh.flow_label = in.flow_label;
  out->grh.sgid_index = in.sgid_index;
  out->grh.hop_limit = in.hop_limit;
  out->grh.traffic_class = in.traffic_class;
  out->is_global = in.is_global ? 1 : 0;
  out->dlid = in.dlid;
  out->sl = in.sl;
  out->src_path_bits = in.src_path_bits;
  out->static_rate = in.static_rate;
  out->port_num = in.port_num;
}

void FromEngineWc(const eng::Completion& c, ibv_wc* wc) {
  wc->wr_id = c.wr_id;
  wc->status = static_cast<ibv_wc_status>(c.status);
  wc->opcode = static_cast<ibv_wc_opcode>(c.opcode);
  wc->vendor_err = c.vendor_err;
  wc->byte_len = c.byte_len;
  wc->imm_data = c.imm_data;
  wc->qp_num = c.qp_num;
  wc->src_qp = c.src_qp;
  wc->wc_flags = c.wc_flags;
  wc->pkey_index = c.pkey_index;
  wc->slid = c.slid;
  wc->sl = c.sl;
  wc->dlid_path_bits = c.dlid_path_bits;
}

namespace {

// ---- data path ---------------------------------------------------------------

// Copies an SGE list into `out`; EINVAL if it is longer than we can hold
// (the engine rejects anything above the QP's max_*_sge with EINVAL too).
inline int CopySges(const ibv_sge* list, int n, eng::Sge* out) {
  if (n < 0 || n > kMaxSgeOnStack || (n > 0 && !list)) return EINVAL;
  for (int i = 0; i < n; ++i) {
    out[i].addr = list[i].addr;
    out[i].length = list[i].length;
    out[i].lkey = list[i].lkey;
  }
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
  // fills; unknown ones (TSO, DRIVER1, ATOMIC_WRITE: not offered) are
  // refused here, and Device::PostSend refuses what the QP cannot post.
  const eng::WrOpcodeInfo& op = eng::GetWrOpcodeInfo(opcode);
  if (!op.known()) return EINVAL;
  if (op.atomic) {
    out->remote_addr = w->wr.atomic.remote_addr;
    out->rkey = w->wr.atomic.rkey;
    out->compare_add = w->wr.atomic.compare_add;
    out->swap = w->wr.atomic.swap;
  } else if (op.remote_right != 0) {
    out->remote_addr = w->wr.rdma.remote_addr;
    out->rkey = w->wr.rdma.rkey;
  }
  out->opcode = static_cast<eng::WrOpcode>(opcode);
  return 0;
}

int PostSend(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept {
  Qp* qp = ToQp(ibqp);
  eng::Sge sges[kMaxSgeOnStack];
  // Outside the try: if the engine throws, *bad_wr names the WR it was
  // given, since those before it were posted (ibv_post_send(3)).
  ibv_send_wr* w = wr;
  try {
    const bool ud = ibqp->qp_type == IBV_QPT_UD;
    for (; w; w = w->next) {
      eng::SendWr e;
      int rc = TranslateSendWr(w, sges, &e);
      if (!rc && ud) {
        if (!w->wr.ud.ah) {
          rc = EINVAL;
        } else {
          e.ah = reinterpret_cast<Ah*>(w->wr.ud.ah)->e;
          e.remote_qpn = w->wr.ud.remote_qpn;
          e.remote_qkey = w->wr.ud.remote_qkey;
        }
      }
      if (!rc) rc = qp->dev->PostSend(qp->e, e);
      if (rc) {
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

// Walks an ibv_recv_wr list, handing each WR to `post` (the QP's receive
// queue or an SRQ); on the first failure sets *bad_wr and returns its errno,
// as ibv_post_recv(3) / ibv_post_srq_recv(3) specify.
template <typename PostOne>
int PostRecvList(ibv_recv_wr* wr, ibv_recv_wr** bad_wr, PostOne post) noexcept {
  eng::Sge sges[kMaxSgeOnStack];
  ibv_recv_wr* w = wr;  // outside the try, as in PostSend
  try {
    for (; w; w = w->next) {
      int rc = CopySges(w->sg_list, w->num_sge, sges);
      if (!rc) {
        eng::RecvWr e;
        e.wr_id = w->wr_id;
        e.sges = std::span<const eng::Sge>(sges, static_cast<size_t>(w->num_sge));
        rc = post(e);
      }
      if (rc) {
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

int PostRecv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept {
  Qp* qp = ToQp(ibqp);
  return PostRecvList(wr, bad_wr, [qp](const eng::RecvWr& e) { return qp->dev->PostRecv(qp->e, e); });
}

int PostSrqRecv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept {
  auto* srq = reinterpret_cast<Srq*>(ibsrq);
  return PostRecvList(wr, bad_wr,
                      [srq](const eng::RecvWr& e) { return srq->dev->PostSrqRecv(srq->e, e); });
}

// Takes up to n completions from the engine. Device::PollCq itself runs an
// engine pass on this thread when the CQ is short, so a polling application
// pays no thread hop.
inline int EnginePoll(Cq* cq, int n, eng::Completion* out) { return cq->dev->PollCq(cq->e, n, out); }

int PollCq(ibv_cq* ibcq, int num_entries, ibv_wc* wc) noexcept {
  if (num_entries < 0 || (num_entries > 0 && !wc)) return -EINVAL;
  Cq* cq = ToCq(ibcq);
  try {
    int done = 0;
    if (cq->is_ex) {
      // Drain what an extended poll fetched but did not consume, in order.
      std::lock_guard<std::mutex> lock(cq->poll_mu);
      while (done < num_entries && cq->pos < cq->count) FromEngineWc(cq->buf[cq->pos++], &wc[done++]);
    }
    eng::Completion tmp[Cq::kBatch];
    while (done < num_entries) {
      int want = std::min(num_entries - done, Cq::kBatch);
      int got = EnginePoll(cq, want, tmp);
      if (got < 0) return done ? done : got;
      for (int i = 0; i < got; ++i) FromEngineWc(tmp[i], &wc[done++]);
      if (got < want) break;
    }
    return done;
  } catch (...) {
    return -ENOMEM;
  }
}

int ReqNotifyCq(ibv_cq* ibcq, int solicited_only) noexcept {
  Cq* cq = ToCq(ibcq);
  // Arming a CQ without a channel is legal on hardware (the event goes
  // nowhere) and some libraries arm every CQ they create; the engine only
  // tracks arming for CQs that have a channel.
  if (!ibcq->channel) return 0;
  return NoThrow<int>(ENOMEM, [&] { return cq->dev->ArmCq(cq->e, solicited_only != 0); });
}

// ---- extended CQ polling (ibv_cq_ex) ---------------------------------------

// Makes cq->buf[cq->pos] the current completion; ENOENT when there is none.
int ExFetch(Cq* cq) {
  if (cq->pos >= cq->count) {
    int got = EnginePoll(cq, Cq::kBatch, cq->buf);
    if (got < 0) return -got;
    cq->pos = 0;
    cq->count = got;
    if (got == 0) return ENOENT;
  }
  cq->cur = &cq->buf[cq->pos];
  cq->cq.wr_id = cq->cur->wr_id;
  cq->cq.status = static_cast<ibv_wc_status>(cq->cur->status);
  return 0;
}

// The CQ lock is held from a successful start_poll until end_poll, as the
// rdma-core providers do, so two threads cannot interleave a poll sequence.
int ExStartPoll(ibv_cq_ex* ibcq, ibv_poll_cq_attr* attr) noexcept {
  if (attr && attr->comp_mask) return EINVAL;
  Cq* cq = ToCq(ibcq);
  try {
    cq->poll_mu.lock();
    int rc = ExFetch(cq);
    if (rc) cq->poll_mu.unlock();
    return rc;
  } catch (...) {
    return ENOMEM;
  }
}

int ExNextPoll(ibv_cq_ex* ibcq) noexcept {
  Cq* cq = ToCq(ibcq);
  ++cq->pos;  // consume the current one
  try {
    return ExFetch(cq);
  } catch (...) {
    return ENOMEM;
  }
}

void ExEndPoll(ibv_cq_ex* ibcq) noexcept {
  Cq* cq = ToCq(ibcq);
  ++cq->pos;  // the current completion is consumed
  cq->cur = nullptr;
  cq->poll_mu.unlock();
}

ibv_wc_opcode ExReadOpcode(ibv_cq_ex* c) { return static_cast<ibv_wc_opcode>(ToCq(c)->cur->opcode); }
uint32_t ExReadVendorErr(ibv_cq_ex* c) { return ToCq(c)->cur->vendor_err; }
uint32_t ExReadByteLen(ibv_cq_ex* c) { return ToCq(c)->cur->byte_len; }
__be32 ExReadImmData(ibv_cq_ex* c) { return ToCq(c)->cur->imm_data; }
uint32_t ExReadQpNum(ibv_cq_ex* c) { return ToCq(c)->cur->qp_num; }
uint32_t ExReadSrcQp(ibv_cq_ex* c) { return ToCq(c)->cur->src_qp; }
unsigned int ExReadWcFlags(ibv_cq_ex* c) { return ToCq(c)->cur->wc_flags; }
uint32_t ExReadSlid(ibv_cq_ex* c) { return ToCq(c)->cur->slid; }
uint8_t ExReadSl(ibv_cq_ex* c) { return ToCq(c)->cur->sl; }
uint8_t ExReadDlidPathBits(ibv_cq_ex* c) { return ToCq(c)->cur->dlid_path_bits; }

// ---- CQ creation (shared by ibv_create_cq and create_cq_ex) ----------------

ibv_cq_ex* CreateCqCommon(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                          int comp_vector, bool is_ex, uint64_t wc_flags) {
  if (!ctx || cqe <= 0) return FailNull<ibv_cq_ex>(EINVAL);
  if (comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) return FailNull<ibv_cq_ex>(EINVAL);
  if (channel && channel->context != ctx) return FailNull<ibv_cq_ex>(EINVAL);
  eng::Device* dev = DevOf(ctx);
  eng::CompletionChannel* ech = channel ? reinterpret_cast<CompChannel*>(channel)->e : nullptr;
  auto* cq = NewFilledByEngine<Cq>([&](Cq* w) {
    std::memset(&w->cq, 0, sizeof(w->cq));
    return dev->CreateCq(static_cast<uint32_t>(cqe), ech, &w->cq, &w->e);
  });
  if (!cq) return nullptr;
  cq->dev = dev;
  cq->is_ex = is_ex;
  ibv_cq_ex* c = &cq->cq;
  c->context = ctx;
  c->channel = channel;
  c->cq_context = cq_context;
  c->cqe = static_cast<int>(dev->CqCapacity(cq->e));
  pthread_mutex_init(&c->mutex, nullptr);
  pthread_cond_init(&c->cond, nullptr);
  if (channel) __atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_RELAXED);
  if (is_ex) {
    c->start_poll = ExStartPoll;
    c->next_poll = ExNextPoll;
    c->end_poll = ExEndPoll;
    c->read_opcode = ExReadOpcode;
    c->read_vendor_err = ExReadVendorErr;
    // Per the man page only the requested read_* are valid; we install the
    // ones whose data the engine provides and leave the rest null.
    if (wc_flags & IBV_WC_EX_WITH_BYTE_LEN) c->read_byte_len = ExReadByteLen;
    if (wc_flags & IBV_WC_EX_WITH_IMM) c->read_imm_data = ExReadImmData;
    if (wc_flags & IBV_WC_EX_WITH_QP_NUM) c->read_qp_num = ExReadQpNum;
    if (wc_flags & IBV_WC_EX_WITH_SRC_QP) c->read_src_qp = ExReadSrcQp;
    c->read_wc_flags = ExReadWcFlags;
    if (wc_flags & IBV_WC_EX_WITH_SLID) c->read_slid = ExReadSlid;
    if (wc_flags & IBV_WC_EX_WITH_SL) c->read_sl = ExReadSl;
    if (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS) c->read_dlid_path_bits = ExReadDlidPathBits;
  }
  return c;
}

ibv_cq_ex* CreateCqExOp(ibv_context* ctx, ibv_cq_init_attr_ex* attr) noexcept {
  if (!attr) return FailNull<ibv_cq_ex>(EINVAL);
  return NoThrow<ibv_cq_ex*>(nullptr, [&]() -> ibv_cq_ex* {
    if (attr->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
      return FailNull<ibv_cq_ex>(EINVAL);
    // Timestamps, CVLAN, flow tag and tag matching are not produced.
    if (attr->wc_flags & ~uint64_t(IBV_WC_STANDARD_FLAGS)) return FailNull<ibv_cq_ex>(EOPNOTSUPP);
    if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
        (attr->flags & ~uint32_t(IBV_CREATE_CQ_ATTR_SINGLE_THREADED)))
      return FailNull<ibv_cq_ex>(EOPNOTSUPP);
    return CreateCqCommon(ctx, static_cast<int>(attr->cqe), attr->cq_context, attr->channel,
                          static_cast<int>(attr->comp_vector), true, attr->wc_flags);
  });
}

// ---- QP creation -----------------------------------------------------------

bool SupportedQpType(ibv_qp_type t) {
  return t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_UD;
}

ibv_qp* CreateQpCommon(ibv_context* ctx, ibv_pd* pd, ibv_qp_init_attr_ex* attr, bool with_ex,
                       uint64_t send_ops_flags) {
  if (!pd || !attr || !attr->send_cq || !attr->recv_cq) return FailNull<ibv_qp>(EINVAL);
  if (!SupportedQpType(attr->qp_type)) return FailNull<ibv_qp>(EOPNOTSUPP);
  if (attr->srq && attr->qp_type == IBV_QPT_XRC_RECV) return FailNull<ibv_qp>(EINVAL);
  eng::Device* dev = DevOf(ctx);
  eng::QpCaps caps;
  caps.max_send_wr = attr->cap.max_send_wr;
  caps.max_recv_wr = attr->cap.max_recv_wr;
  caps.max_send_sge = attr->cap.max_send_sge;
  caps.max_recv_sge = attr->cap.max_recv_sge;
  caps.max_inline_data = attr->cap.max_inline_data;
  eng::Srq* esrq = attr->srq ? reinterpret_cast<Srq*>(attr->srq)->e : nullptr;
  auto* qp = NewFilledByEngine<Qp>([&](Qp* w) {
    std::memset(&w->qpx, 0, sizeof(w->qpx));
    return dev->CreateQp(reinterpret_cast<Pd*>(pd)->e, static_cast<eng::QpType>(attr->qp_type),
                         ToCq(attr->send_cq)->e, ToCq(attr->recv_cq)->e, esrq, &caps,
                         attr->sq_sig_all != 0, &w->qpx.qp_base, &w->e);
  });
  if (!qp) return nullptr;
  qp->dev = dev;
  // Write the real capacities back, as ibv_create_qp(3) promises.
  attr->cap.max_send_wr = caps.max_send_wr;
  attr->cap.max_recv_wr = caps.max_recv_wr;
  attr->cap.max_send_sge = caps.max_send_sge;
  attr->cap.max_recv_sge = caps.max_recv_sge;
  attr->cap.max_inline_data = caps.max_inline_data;
  qp->cap = attr->cap;
  qp->sq_sig_all = attr->sq_sig_all;
  ibv_qp* q = &qp->qpx.qp_base;
  q->context = ctx;
  q->qp_context = attr->qp_context;
  q->pd = pd;
  q->send_cq = attr->send_cq;
  q->recv_cq = attr->recv_cq;
  q->srq = attr->srq;
  q->qp_num = dev->QpNum(qp->e);
  q->state = IBV_QPS_RESET;
  q->qp_type = attr->qp_type;
  pthread_mutex_init(&q->mutex, nullptr);
  pthread_cond_init(&q->cond, nullptr);
  if (with_ex) {
    qp->has_qp_ex = true;
    qp->send_ops_flags = send_ops_flags;
    InstallQpExOps(qp);
  }
  return q;
}

// The ibv_qp_ex wr_* API supports these operations (see qp_ex.cc).
constexpr uint64_t kSupportedSendOps =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV;

ibv_qp* CreateQpExOp(ibv_context* ctx, ibv_qp_init_attr_ex* attr) noexcept {
  if (!ctx || !attr) return FailNull<ibv_qp>(EINVAL);
  return NoThrow<ibv_qp*>(nullptr, [&]() -> ibv_qp* {
    uint32_t mask = attr->comp_mask;
    if (!(mask & IBV_QP_INIT_ATTR_PD)) return FailNull<ibv_qp>(EINVAL);
    // XRC, TSO, RSS indirection and hashing are not implemented.
    if (mask & ~uint32_t(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
                         IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
      return FailNull<ibv_qp>(EOPNOTSUPP);
    if ((mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)
      return FailNull<ibv_qp>(EOPNOTSUPP);
    bool with_ex = (mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0;
    if (with_ex && (attr->send_ops_flags & ~kSupportedSendOps)) return FailNull<ibv_qp>(EOPNOTSUPP);
    if (!attr->pd || attr->pd->context != ctx) return FailNull<ibv_qp>(EINVAL);
    return CreateQpCommon(ctx, attr->pd, attr, with_ex, attr->send_ops_flags);
  });
}

}  // namespace

// ibv_context ops for the inline data-path functions of verbs.h and the
// extended verbs we implement. Every other op stays null, so the inline
// wrappers report EOPNOTSUPP/ENOSYS instead of calling something bogus.
void FillContextOps(verbs_context* vctx) {
  ibv_context_ops& ops = vctx->context.ops;
  ops.poll_cq = PollCq;
  ops.req_notify_cq = ReqNotifyCq;
  ops.post_send = PostSend;
  ops.post_recv = PostRecv;
  ops.post_srq_recv = PostSrqRecv;
  vctx->create_cq_ex = CreateCqExOp;
  vctx->create_qp_ex = CreateQpExOp;
}

}  // namespace softrnic::verbs

using namespace softrnic::verbs;

// ---- PD ----------------------------------------------------------------------

SOFTRNIC_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  if (!ctx) return FailNull<ibv_pd>(EINVAL);
  return NoThrow<ibv_pd*>(nullptr, [&]() -> ibv_pd* {
    auto* pd = NewFilledByEngine<Pd>([&](Pd* w) { return DevOf(ctx)->AllocPd(&w->pd, &w->e); });
    if (!pd) return nullptr;
    pd->pd.context = ctx;
    return &pd->pd;
  });
}

SOFTRNIC_EXPORT int ibv_dealloc_pd(ibv_pd* ibpd) {
  if (!ibpd) return EINVAL;
  auto* pd = reinterpret_cast<Pd*>(ibpd);
  return DestroyThenFree(pd, [&] { return DevOf(ibpd->context)->DeallocPd(pd->e); });
}

// ---- MR ----------------------------------------------------------------------

namespace {

// IBV_ACCESS_OPTIONAL_RANGE (0x3ff00000, e.g. RELAXED_ORDERING): hints a
// device may ignore; perftest always passes RELAXED_ORDERING. HUGETLB is a
// hint too. Anything else unknown is an error.
constexpr unsigned kKnownAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                  IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                                  IBV_ACCESS_ON_DEMAND;

ibv_mr* RegMr(ibv_pd* ibpd, void* addr, size_t length, uint64_t iova, unsigned access) {
  if (!ibpd) return FailNull<ibv_mr>(EINVAL);
  access &= ~(unsigned(IBV_ACCESS_OPTIONAL_RANGE) | IBV_ACCESS_HUGETLB);
  if (access & ~kKnownAccess) return FailNull<ibv_mr>(EINVAL);
  // No memory windows and no on-demand paging in softrnic.
  if (access & (IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND)) return FailNull<ibv_mr>(EOPNOTSUPP);
  return NoThrow<ibv_mr*>(nullptr, [&]() -> ibv_mr* {
    auto* pd = reinterpret_cast<Pd*>(ibpd);
    eng::Device* dev = DevOf(ibpd->context);
    auto* mr = NewFilledByEngine<Mr>(
        [&](Mr* w) { return dev->RegMr(pd->e, addr, length, iova, access, &w->mr, &w->e); });
    if (!mr) return nullptr;
    mr->mr.context = ibpd->context;
    mr->mr.pd = ibpd;
    mr->mr.addr = addr;
    mr->mr.length = length;
    mr->mr.lkey = dev->MrLkey(mr->e);
    mr->mr.rkey = dev->MrRkey(mr->e);
    return &mr->mr;
  });
}

}  // namespace

SOFTRNIC_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return RegMr(pd, addr, length, reinterpret_cast<uintptr_t>(addr), static_cast<unsigned>(access));
}

SOFTRNIC_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                        int access) {
  return RegMr(pd, addr, length, iova, static_cast<unsigned>(access));
}

SOFTRNIC_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                         unsigned int access) {
  return RegMr(pd, addr, length, iova, access);
}

SOFTRNIC_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return FailNull<ibv_mr>(EOPNOTSUPP);  // no device memory to import from
}

SOFTRNIC_EXPORT int ibv_dereg_mr(ibv_mr* ibmr) {
  if (!ibmr) return EINVAL;
  auto* mr = reinterpret_cast<Mr*>(ibmr);
  return DestroyThenFree(mr, [&] { return DevOf(ibmr->context)->DeregMr(mr->e); });
}

// Not offered: deregister and register again. The MR stays valid as it was.
SOFTRNIC_EXPORT int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) {
  errno = EOPNOTSUPP;
  return IBV_REREG_MR_ERR_INPUT;
}

// ---- completion channel --------------------------------------------------------

SOFTRNIC_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  if (!ctx) return FailNull<ibv_comp_channel>(EINVAL);
  return NoThrow<ibv_comp_channel*>(nullptr, [&]() -> ibv_comp_channel* {
    eng::Device* dev = DevOf(ctx);
    auto* ch = NewFilledByEngine<CompChannel>(
        [&](CompChannel* w) { return dev->CreateCompletionChannel(&w->e); });
    if (!ch) return nullptr;
    ch->ch.context = ctx;
    ch->ch.fd = dev->CompletionChannelFd(ch->e);
    ch->ch.refcnt = 0;
    return &ch->ch;
  });
}

SOFTRNIC_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (!channel) return EINVAL;
  auto* ch = reinterpret_cast<CompChannel*>(channel);
  return DestroyThenFree(ch, [&] {
    if (__atomic_load_n(&channel->refcnt, __ATOMIC_RELAXED) > 0) return EBUSY;
    return DevOf(channel->context)->DestroyCompletionChannel(ch->e);
  });
}

SOFTRNIC_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (!channel || !cq || !cq_context) {
    errno = EINVAL;
    return -1;
  }
  auto* ch = reinterpret_cast<CompChannel*>(channel);
  return NoThrow<int>(-1, [&] {
    void* handle = nullptr;
    int rc = DevOf(channel->context)->GetCqEvent(ch->e, &handle);
    if (rc) {
      errno = rc;
      return -1;
    }
    // The engine's handle is our ibv_cq_ex, whose prefix is the ibv_cq.
    // None means the CQ was destroyed with this event unread.
    if (!handle) {
      errno = EAGAIN;
      return -1;
    }
    auto* c = static_cast<ibv_cq*>(handle);
    *cq = c;
    *cq_context = c->cq_context;
    return 0;
  });
}

SOFTRNIC_EXPORT void ibv_ack_cq_events(ibv_cq* ibcq, unsigned int nevents) {
  if (!ibcq) return;
  Cq* cq = ToCq(ibcq);
  NoThrow<int>(0, [&] {
    cq->dev->AckCqEvents(cq->e, nevents);
    return 0;
  });
}

// ---- CQ ----------------------------------------------------------------------

SOFTRNIC_EXPORT ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context,
                                      ibv_comp_channel* channel, int comp_vector) {
  return NoThrow<ibv_cq*>(nullptr, [&]() -> ibv_cq* {
    return ibv_cq_ex_to_cq(CreateCqCommon(ctx, cqe, cq_context, channel, comp_vector, false, 0));
  });
}

SOFTRNIC_EXPORT int ibv_resize_cq(ibv_cq* ibcq, int cqe) {
  if (!ibcq || cqe <= 0) return EINVAL;
  Cq* cq = ToCq(ibcq);
  return NoThrow<int>(ENOMEM, [&] {
    int rc = cq->dev->ResizeCq(cq->e, static_cast<uint32_t>(cqe));
    if (!rc) ibcq->cqe = static_cast<int>(cq->dev->CqCapacity(cq->e));
    return rc;
  });
}

SOFTRNIC_EXPORT int ibv_destroy_cq(ibv_cq* ibcq) {
  if (!ibcq) return EINVAL;
  Cq* cq = ToCq(ibcq);
  return DestroyThenFree(cq, [&] {
    uint32_t events_reported = 0;
    const int rc = cq->dev->DestroyCq(cq->e, &events_reported);
    if (rc == 0) {
      WaitForAsyncAcks(ibcq, &ibcq->async_events_completed, events_reported);
      if (ibcq->channel) __atomic_sub_fetch(&ibcq->channel->refcnt, 1, __ATOMIC_RELAXED);
      pthread_mutex_destroy(&ibcq->mutex);
      pthread_cond_destroy(&ibcq->cond);
    }
    return rc;
  });
}

// ---- SRQ ---------------------------------------------------------------------

SOFTRNIC_EXPORT ibv_srq* ibv_create_srq(ibv_pd* ibpd, ibv_srq_init_attr* init) {
  if (!ibpd || !init) return FailNull<ibv_srq>(EINVAL);
  return NoThrow<ibv_srq*>(nullptr, [&]() -> ibv_srq* {
    eng::Device* dev = DevOf(ibpd->context);
    eng::SrqAttr a{init->attr.max_wr, init->attr.max_sge, init->attr.srq_limit};
    auto* srq = NewFilledByEngine<Srq>(
        [&](Srq* w) { return dev->CreateSrq(reinterpret_cast<Pd*>(ibpd)->e, a, &w->srq, &w->e); });
    if (!srq) return nullptr;
    srq->dev = dev;
    // Report the real sizes back, as ibv_create_srq(3) promises.
    eng::SrqAttr real;
    if (dev->QuerySrq(srq->e, &real) == 0) {
      init->attr.max_wr = real.max_wr;
      init->attr.max_sge = real.max_sge;
    }
    ibv_srq* s = &srq->srq;
    s->context = ibpd->context;
    s->srq_context = init->srq_context;
    s->pd = ibpd;
    pthread_mutex_init(&s->mutex, nullptr);
    pthread_cond_init(&s->cond, nullptr);
    return s;
  });
}

SOFTRNIC_EXPORT int ibv_modify_srq(ibv_srq* ibsrq, ibv_srq_attr* attr, int mask) {
  if (!ibsrq || !attr) return EINVAL;
  if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  auto* srq = reinterpret_cast<Srq*>(ibsrq);
  return NoThrow<int>(ENOMEM, [&] {
    eng::SrqAttr a{attr->max_wr, attr->max_sge, attr->srq_limit};
    return srq->dev->ModifySrq(srq->e, a, static_cast<uint32_t>(mask));
  });
}

SOFTRNIC_EXPORT int ibv_query_srq(ibv_srq* ibsrq, ibv_srq_attr* attr) {
  if (!ibsrq || !attr) return EINVAL;
  auto* srq = reinterpret_cast<Srq*>(ibsrq);
  return NoThrow<int>(ENOMEM, [&] {
    eng::SrqAttr a;
    int rc = srq->dev->QuerySrq(srq->e, &a);
    if (rc) return rc;
    attr->max_wr = a.max_wr;
    attr->max_sge = a.max_sge;
    attr->srq_limit = a.srq_limit;
    return 0;
  });
}

SOFTRNIC_EXPORT int ibv_destroy_srq(ibv_srq* ibsrq) {
  if (!ibsrq) return EINVAL;
  auto* srq = reinterpret_cast<Srq*>(ibsrq);
  return DestroyThenFree(srq, [&] {
    uint32_t events_reported = 0;
    const int rc = srq->dev->DestroySrq(srq->e, &events_reported);
    if (rc == 0) {
      WaitForAsyncAcks(ibsrq, &ibsrq->events_completed, events_reported);
      pthread_mutex_destroy(&ibsrq->mutex);
      pthread_cond_destroy(&ibsrq->cond);
    }
    return rc;
  });
}

// ---- AH ----------------------------------------------------------------------

SOFTRNIC_EXPORT ibv_ah* ibv_create_ah(ibv_pd* ibpd, ibv_ah_attr* attr) {
  if (!ibpd || !attr) return FailNull<ibv_ah>(EINVAL);
  return NoThrow<ibv_ah*>(nullptr, [&]() -> ibv_ah* {
    eng::AddressVector av;
    ToEngineAv(*attr, &av);
    auto* ah = NewFilledByEngine<Ah>([&](Ah* w) {
      return DevOf(ibpd->context)->CreateAh(reinterpret_cast<Pd*>(ibpd)->e, av, &w->ah, &w->e);
    });
    if (!ah) return nullptr;
    ah->ah.context = ibpd->context;
    ah->ah.pd = ibpd;
    return &ah->ah;
  });
}

SOFTRNIC_EXPORT int ibv_destroy_ah(ibv_ah* ibah) {
  if (!ibah) return EINVAL;
  auto* ah = reinterpret_cast<Ah*>(ibah);
  return DestroyThenFree(ah, [&] { return DevOf(ibah->context)->DestroyAh(ah->e); });
}

// ---- QP ----------------------------------------------------------------------

SOFTRNIC_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (!pd || !init) return FailNull<ibv_qp>(EINVAL);
  return NoThrow<ibv_qp*>(nullptr, [&]() -> ibv_qp* {
    // ibv_qp_init_attr is the prefix of ibv_qp_init_attr_ex.
    ibv_qp_init_attr_ex ex{};
    std::memcpy(&ex, init, sizeof(*init));
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = pd;
    ibv_qp* qp = CreateQpCommon(pd->context, pd, &ex, false, 0);
    if (qp) init->cap = ex.cap;
    return qp;
  });
}

SOFTRNIC_EXPORT struct ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* ibqp) {
  if (!ibqp) return nullptr;
  Qp* qp = ToQp(ibqp);
  return qp->has_qp_ex ? &qp->qpx : nullptr;
}

namespace {
// IBV_QP_* bits up to IBV_QP_DEST_QPN are the IBA attributes; RATE_LIMIT
// (1 << 25) needs packet pacing, which softrnic does not have.
constexpr int kKnownQpMask = (1 << 21) - 1;
}  // namespace

SOFTRNIC_EXPORT int ibv_modify_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask) {
  if (!ibqp || !attr) return EINVAL;
  if (mask & IBV_QP_RATE_LIMIT) return EOPNOTSUPP;
  if (mask & ~kKnownQpMask) return EINVAL;
  Qp* qp = ToQp(ibqp);
  return NoThrow<int>(ENOMEM, [&] {
    eng::QpAttr a;
    // Range checks the engine cannot do after a static_cast to its enums.
    // The enum fields are read as plain integers: a C caller may store any
    // value in them, and loading an out-of-range enum is undefined in C++.
    const auto raw = [](const auto& field) {
      std::underlying_type_t<std::remove_reference_t<decltype(field)>> v;
      std::memcpy(&v, &field, sizeof(v));
      return static_cast<int64_t>(v);
    };
    const int64_t qp_state = raw(attr->qp_state);
    const int64_t cur_state = raw(attr->cur_qp_state);
    const int64_t path_mtu = raw(attr->path_mtu);
    if ((mask & IBV_QP_STATE) && (qp_state < 0 || qp_state > IBV_QPS_ERR)) return EINVAL;
    if ((mask & IBV_QP_CUR_STATE) && (cur_state < 0 || cur_state > IBV_QPS_ERR)) return EINVAL;
    if ((mask & IBV_QP_PATH_MTU) && (path_mtu < IBV_MTU_256 || path_mtu > IBV_MTU_4096))
      return EINVAL;
    if (mask & IBV_QP_STATE) a.qp_state = static_cast<eng::QpState>(qp_state);
    if (mask & IBV_QP_CUR_STATE) a.cur_qp_state = static_cast<eng::QpState>(cur_state);
    if (mask & IBV_QP_PATH_MTU) a.path_mtu = static_cast<eng::Mtu>(path_mtu);
    a.qkey = attr->qkey;
    a.rq_psn = attr->rq_psn;
    a.sq_psn = attr->sq_psn;
    a.dest_qp_num = attr->dest_qp_num;
    a.qp_access_flags = attr->qp_access_flags;
    a.cap.max_send_wr = attr->cap.max_send_wr;
    a.cap.max_recv_wr = attr->cap.max_recv_wr;
    a.cap.max_send_sge = attr->cap.max_send_sge;
    a.cap.max_recv_sge = attr->cap.max_recv_sge;
    a.cap.max_inline_data = attr->cap.max_inline_data;
    ToEngineAv(attr->ah_attr, &a.ah_attr);
    a.pkey_index = attr->pkey_index;
    a.sq_draining = attr->sq_draining != 0;
    a.en_sqd_async_notify = attr->en_sqd_async_notify != 0;
    a.max_rd_atomic = attr->max_rd_atomic;
    a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
    a.min_rnr_timer = attr->min_rnr_timer;
    a.port_num = attr->port_num;
    a.timeout = attr->timeout;
    a.retry_cnt = attr->retry_cnt;
    a.rnr_retry = attr->rnr_retry;
    int rc = qp->dev->ModifyQp(qp->e, a, static_cast<uint32_t>(mask));
    // As rdma-core does: ibv_qp::state follows successful transitions.
    if (!rc && (mask & IBV_QP_STATE)) ibqp->state = attr->qp_state;
    return rc;
  });
}

SOFTRNIC_EXPORT int ibv_query_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask,
                                 ibv_qp_init_attr* init) {
  if (!ibqp || !attr || !init) return EINVAL;
  (void)mask;  // everything is cheap to report: fill all fields
  Qp* qp = ToQp(ibqp);
  return NoThrow<int>(ENOMEM, [&] {
    eng::QpAttr a;
    int rc = qp->dev->QueryQp(qp->e, &a);
    if (rc) return rc;
    std::memset(attr, 0, sizeof(*attr));
    attr->qp_state = static_cast<ibv_qp_state>(a.qp_state);
    attr->cur_qp_state = static_cast<ibv_qp_state>(a.cur_qp_state);
    attr->path_mtu = static_cast<ibv_mtu>(a.path_mtu);
    attr->path_mig_state = IBV_MIG_MIGRATED;
    attr->qkey = a.qkey;
    attr->rq_psn = a.rq_psn;
    attr->sq_psn = a.sq_psn;
    attr->dest_qp_num = a.dest_qp_num;
    attr->qp_access_flags = a.qp_access_flags;
    attr->cap.max_send_wr = a.cap.max_send_wr;
    attr->cap.max_recv_wr = a.cap.max_recv_wr;
    attr->cap.max_send_sge = a.cap.max_send_sge;
    attr->cap.max_recv_sge = a.cap.max_recv_sge;
    attr->cap.max_inline_data = a.cap.max_inline_data;
    FromEngineAv(a.ah_attr, &attr->ah_attr);
    attr->pkey_index = a.pkey_index;
    attr->sq_draining = a.sq_draining;
    attr->en_sqd_async_notify = a.en_sqd_async_notify;
    attr->max_rd_atomic = a.max_rd_atomic;
    attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
    attr->min_rnr_timer = a.min_rnr_timer;
    attr->port_num = a.port_num;
    attr->timeout = a.timeout;
    attr->retry_cnt = a.retry_cnt;
    attr->rnr_retry = a.rnr_retry;
    ibqp->state = attr->qp_state;
    std::memset(init, 0, sizeof(*init));
    init->qp_context = ibqp->qp_context;
    init->send_cq = ibqp->send_cq;
    init->recv_cq = ibqp->recv_cq;
    init->srq = ibqp->srq;
    init->cap = attr->cap;
    init->qp_type = ibqp->qp_type;
    init->sq_sig_all = qp->sq_sig_all;
    return 0;
  });
}

SOFTRNIC_EXPORT int ibv_destroy_qp(ibv_qp* ibqp) {
  if (!ibqp) return EINVAL;
  Qp* qp = ToQp(ibqp);
  return DestroyThenFree(qp, [&] {
    uint32_t events_reported = 0;
    const int rc = qp->dev->DestroyQp(qp->e, &events_reported);
    if (rc == 0) {
      WaitForAsyncAcks(ibqp, &ibqp->events_completed, events_reported);
      pthread_mutex_destroy(&ibqp->mutex);
      pthread_cond_destroy(&ibqp->cond);
    }
    return rc;
  });
}

SOFTRNIC_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, enum ibv_wr_opcode, uint32_t) {
  return 0;  // no ordering guarantee is promised beyond the completion
}

// Multicast needs a UD multicast fabric softrnic does not model.
SOFTRNIC_EXPORT int ibv_attach_mcast(ibv_qp*, const union ibv_gid*, uint16_t) { return EOPNOTSUPP; }
SOFTRNIC_EXPORT int ibv_detach_mcast(ibv_qp*, const union ibv_gid*, uint16_t) { return EOPNOTSUPP; }

// Enhanced Connection Establishment is a ConnectX vendor option.
SOFTRNIC_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
SOFTRNIC_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
