// softrnic's private export for its own librdmacm.so.1: the General Services
// QP (QPN 1) that carries connection-management MADs (IBA ch. 12 / 13.5).
//
// The QP is a normal ibv_qp (our Qp wrapper, built by NewQp as
// every QP is, internal.h), so librdmacm drives it with the ordinary verbs
// calls: ibv_modify_qp (INIT with IBV_QP_QKEY 0x80010000, RTR, RTS),
// ibv_post_send with a UD AH, ibv_post_recv, ibv_destroy_qp. Exported under
// the version node SOFTRNIC_PRIVATE_1, which no rdma-core program imports.
#include "verbs/internal.h"

using namespace softrnic::verbs;

SOFTRNIC_EXPORT ibv_qp* softrnic_create_gsi_qp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq,
                                               ibv_qp_cap* cap) {
  if (!pd || !send_cq || !recv_cq || !cap) return FailNull<ibv_qp>(EINVAL);
  return NoThrow<ibv_qp*>(nullptr, [&]() -> ibv_qp* {
    ibv_qp_init_attr_ex attr{};
    attr.pd = pd;
    attr.send_cq = send_cq;
    attr.recv_cq = recv_cq;
    attr.cap = *cap;
    attr.qp_type = IBV_QPT_UD;
    attr.sq_sig_all = 1;
    Qp* qp = NewQp(&attr, [&](eng::Device* dev, Qp* w, eng::QpCaps* caps) {
      return dev->CreateGsiQp(reinterpret_cast<Pd*>(pd)->e, ToCq(send_cq)->e, ToCq(recv_cq)->e,
                              caps, &w->qpx.qp_base, &w->e);
    });
    if (!qp) return nullptr;
    *cap = attr.cap;
    return &qp->qpx.qp_base;
  });
}

// The host NIC (docs/host-nic.md): rdma_cm draws its comm IDs in the
// device's lane, and claims the services it listens on, so that MADs
// arriving at the host's shared addresses reach this process.
SOFTRNIC_EXPORT int softrnic_cm_lane(ibv_context* ctx) {
  if (!ctx) return -1;
  return DevOf(ctx)->host_nic_lane();
}

// Sealed RC (docs/sealed.md): the device's mode (0 off, 1 prefer, 2
// require, -1 no device), and rdma_cm's X25519 exchange for a QP before RTR
// (exchanged_len 0: the peer offered no seal).
SOFTRNIC_EXPORT int softrnic_seal_mode(ibv_context* ctx) {
  if (!ctx) return -1;
  return DevOf(ctx)->seal_mode();
}

SOFTRNIC_EXPORT int softrnic_seal_qp(ibv_qp* qp, const uint8_t* exchanged, size_t exchanged_len,
                                     const uint8_t* transcript, size_t transcript_len) {
  if (!qp || (exchanged_len > 0 && !exchanged) || (transcript_len > 0 && !transcript))
    return EINVAL;
  return NoThrow<int>(EIO, [&] {
    return DevOf(qp->context)
        ->SealQpByCm(ToQp(qp)->e, {exchanged, exchanged_len}, {transcript, transcript_len});
  });
}

SOFTRNIC_EXPORT int softrnic_claim_cm_service(ibv_context* ctx, uint16_t port_space, uint16_t port,
                                              int claim) {
  if (!ctx) return EINVAL;
  return NoThrow<int>(EIO, [&] { return DevOf(ctx)->ClaimCmService(port_space, port, claim != 0); });
}
