// Queue pairs: creation (ibv_create_qp, create_qp_ex through the context),
// ibv_modify_qp, ibv_query_qp, ibv_destroy_qp, and the QP queries and
// options softrnic answers (data-in-order, ECE, multicast).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "verbs/async_acks.h"
#include "verbs/internal.h"

namespace softrnic::verbs {
namespace {

// ---- QP creation -----------------------------------------------------------

bool SupportedQpType(ibv_qp_type t) {
  return t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_UD || t == IBV_QPT_XRC_SEND;
}

// REQUIRES: attr->pd is set (ibv_create_qp and CreateQpExOp check it).
ibv_qp* CreateQpCommon(ibv_qp_init_attr_ex* attr, bool with_ex, uint64_t send_ops_flags) {
  // An XRC send QP has no receive side (its peers receive through XRC SRQs).
  const bool xrc_send = attr->qp_type == IBV_QPT_XRC_SEND;
  if (!attr->send_cq || (!attr->recv_cq && !xrc_send)) return FailNull<ibv_qp>(EINVAL);
  if (!SupportedQpType(attr->qp_type)) return FailNull<ibv_qp>(EOPNOTSUPP);
  if (attr->srq && xrc_send) return FailNull<ibv_qp>(EINVAL);
  if (xrc_send) attr->recv_cq = nullptr;
  eng::Srq* esrq = attr->srq ? reinterpret_cast<Srq*>(attr->srq)->e : nullptr;
  Qp* qp = NewQp(attr, [&](eng::Device* dev, Qp* w, eng::QpCaps* caps) {
    return dev->CreateQp(reinterpret_cast<Pd*>(attr->pd)->e, static_cast<eng::QpType>(attr->qp_type),
                         ToCq(attr->send_cq)->e,
                         attr->recv_cq ? ToCq(attr->recv_cq)->e : nullptr, esrq, caps,
                         attr->sq_sig_all != 0, &w->qpx.qp_base, &w->e, QpMemory(attr->pd));
  });
  if (!qp) return nullptr;
  if (with_ex) {
    qp->has_qp_ex = true;
    qp->send_ops_flags = send_ops_flags;
    InstallQpExOps(qp);
  }
  return &qp->qpx.qp_base;
}

// The ibv_qp_ex wr_* API supports these operations (see qp_ex.cc).
constexpr uint64_t kSupportedSendOps =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV |
    IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_ATOMIC_WRITE;

ibv_qp* CreateQpExOp(ibv_context* ctx, ibv_qp_init_attr_ex* attr) noexcept {
  if (!ctx || !attr) return FailNull<ibv_qp>(EINVAL);
  return NoThrow<ibv_qp*>(nullptr, [&]() -> ibv_qp* {
    uint32_t mask = attr->comp_mask;
    // TSO, RSS indirection and hashing are not implemented.
    if (mask & ~uint32_t(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
                         IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_XRCD))
      return FailNull<ibv_qp>(EOPNOTSUPP);
    // An XRC receive QP belongs to a domain, not a PD (xrc.cc).
    if (attr->qp_type == IBV_QPT_XRC_RECV) {
      if (mask & (IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
        return FailNull<ibv_qp>(EINVAL);
      return CreateXrcRecvQp(ctx, attr);
    }
    if (!(mask & IBV_QP_INIT_ATTR_PD)) return FailNull<ibv_qp>(EINVAL);
    // The one creation flag: a UD QP that does not hear its own multicast
    // datagrams (engine/queues/multicast.h).
    const uint32_t create_flags = (mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) ? attr->create_flags : 0;
    if (create_flags & ~uint32_t(IBV_QP_CREATE_BLOCK_SELF_MCAST_LB))
      return FailNull<ibv_qp>(EOPNOTSUPP);
    if (create_flags && attr->qp_type != IBV_QPT_UD) return FailNull<ibv_qp>(EINVAL);
    bool with_ex = (mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0;
    if (with_ex && (attr->send_ops_flags & ~kSupportedSendOps)) return FailNull<ibv_qp>(EOPNOTSUPP);
    if (!attr->pd || attr->pd->context != ctx) return FailNull<ibv_qp>(EINVAL);
    ibv_qp* ibqp = CreateQpCommon(attr, with_ex, attr->send_ops_flags);
    if (ibqp && create_flags) ToQp(ibqp)->dev->BlockSelfMulticastLoopback(ToQp(ibqp)->e);
    return ibqp;
  });
}

}  // namespace

void InstallQpOps(verbs_context* vctx) { vctx->create_qp_ex = CreateQpExOp; }

eng::QpCaps ToEngineCaps(const ibv_qp_cap& cap) {
  eng::QpCaps caps;
  caps.max_send_wr = cap.max_send_wr;
  caps.max_recv_wr = cap.max_recv_wr;
  caps.max_send_sge = cap.max_send_sge;
  caps.max_recv_sge = cap.max_recv_sge;
  caps.max_inline_data = cap.max_inline_data;
  return caps;
}

void FromEngineCaps(const eng::QpCaps& caps, ibv_qp_cap* cap) {
  cap->max_send_wr = caps.max_send_wr;
  cap->max_recv_wr = caps.max_recv_wr;
  cap->max_send_sge = caps.max_send_sge;
  cap->max_recv_sge = caps.max_recv_sge;
  cap->max_inline_data = caps.max_inline_data;
}

}  // namespace softrnic::verbs

using namespace softrnic::verbs;

// ---- QP ----------------------------------------------------------------------

SOFTRNIC_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (!pd || !init) return FailNull<ibv_qp>(EINVAL);
  return NoThrow<ibv_qp*>(nullptr, [&]() -> ibv_qp* {
    // ibv_qp_init_attr is the prefix of ibv_qp_init_attr_ex.
    ibv_qp_init_attr_ex ex{};
    std::memcpy(&ex, init, sizeof(*init));
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = pd;
    ibv_qp* qp = CreateQpCommon(&ex, false, 0);
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
    a.cap = ToEngineCaps(attr->cap);
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
    FromEngineCaps(a.cap, &attr->cap);
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
  ibv_pd* const pd = ibqp->pd;
  return DestroyAfterAsyncAcks(qp, ibqp, &ibqp->events_completed, [&](uint32_t* reported) {
    const int rc = qp->dev->DestroyQp(qp->e, reported, ibqp);
    if (rc == 0) ReleaseDomain(pd);
    return rc;
  });
}

SOFTRNIC_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, enum ibv_wr_opcode, uint32_t) {
  return 0;  // no ordering guarantee is promised beyond the completion
}

namespace {
eng::Gid GidFromVerbs(const ibv_gid& gid) {
  eng::Gid g;
  std::memcpy(g.raw.data(), gid.raw, 16);
  return g;
}
}  // namespace

// UD multicast (engine/queues/multicast.h): the group is its GID; RoCE has no
// multicast LIDs, so `lid` is not used (the kernel ignores it on Ethernet).
SOFTRNIC_EXPORT int ibv_attach_mcast(ibv_qp* ibqp, const union ibv_gid* gid, uint16_t) {
  if (!ibqp || !gid) return EINVAL;
  Qp* qp = ToQp(ibqp);
  return qp->dev->AttachMulticast(qp->e, GidFromVerbs(*gid));
}
SOFTRNIC_EXPORT int ibv_detach_mcast(ibv_qp* ibqp, const union ibv_gid* gid, uint16_t) {
  if (!ibqp || !gid) return EINVAL;
  Qp* qp = ToQp(ibqp);
  return qp->dev->DetachMulticast(qp->e, GidFromVerbs(*gid));
}

// Enhanced Connection Establishment is a ConnectX vendor option.
SOFTRNIC_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
SOFTRNIC_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
