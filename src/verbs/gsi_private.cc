// softrnic's private export for its own librdmacm.so.1: the General Services
// QP (QPN 1) that carries connection-management MADs (IBA ch. 12 / 13.5).
//
// The QP is a normal ibv_qp (our Qp wrapper, like CreateQpCommon in
// resources.cc builds), so librdmacm drives it with the ordinary verbs
// calls: ibv_modify_qp (INIT with IBV_QP_QKEY 0x80010000, RTR, RTS),
// ibv_post_send with a UD AH, ibv_post_recv, ibv_destroy_qp. Exported under
// the version node SOFTRNIC_PRIVATE_1, which no rdma-core program imports.
#include <cstring>

#include "verbs/internal.h"

using namespace softrnic::verbs;

SOFTRNIC_EXPORT ibv_qp* softrnic_create_gsi_qp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq,
                                               ibv_qp_cap* cap) {
  if (!pd || !send_cq || !recv_cq || !cap) return FailNull<ibv_qp>(EINVAL);
  return NoThrow<ibv_qp*>(nullptr, [&]() -> ibv_qp* {
    ibv_context* ctx = pd->context;
    eng::Device* dev = DevOf(ctx);
    auto* qp = new Qp{};
    std::memset(&qp->qpx, 0, sizeof(qp->qpx));
    eng::QpCaps caps;
    caps.max_send_wr = cap->max_send_wr;
    caps.max_recv_wr = cap->max_recv_wr;
    caps.max_send_sge = cap->max_send_sge;
    caps.max_recv_sge = cap->max_recv_sge;
    caps.max_inline_data = cap->max_inline_data;
    int rc = dev->CreateGsiQp(reinterpret_cast<Pd*>(pd)->e, ToCq(send_cq)->e, ToCq(recv_cq)->e,
                              &caps, &qp->qpx.qp_base, &qp->e);
    if (rc) {
      delete qp;
      return FailNull<ibv_qp>(rc);
    }
    qp->dev = dev;
    cap->max_send_wr = caps.max_send_wr;
    cap->max_recv_wr = caps.max_recv_wr;
    cap->max_send_sge = caps.max_send_sge;
    cap->max_recv_sge = caps.max_recv_sge;
    cap->max_inline_data = caps.max_inline_data;
    qp->cap = *cap;
    qp->sq_sig_all = 1;
    ibv_qp* q = &qp->qpx.qp_base;
    q->context = ctx;
    q->pd = pd;
    q->send_cq = send_cq;
    q->recv_cq = recv_cq;
    q->qp_num = dev->QpNum(qp->e);
    q->state = IBV_QPS_RESET;
    q->qp_type = IBV_QPT_UD;
    pthread_mutex_init(&q->mutex, nullptr);
    pthread_cond_init(&q->cond, nullptr);
    return q;
  });
}
