// Private declarations of softrnic's librdmacm.so.1 (cma.cc).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

extern "C" {
// Exported by softrnic's libibverbs.so.1 at SOFTRNIC_PRIVATE_1
// (src/verbs/gsi_private.cc): the device's QP1.
ibv_qp* softrnic_create_gsi_qp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, ibv_qp_cap* cap);
// The host NIC (docs/host-nic.md): the device's lane (-1: none), and the
// claim of rdma_cm's (port space, port) at the host's shared addresses
// (0 or an errno).
int softrnic_cm_lane(ibv_context* ctx);
int softrnic_claim_cm_service(ibv_context* ctx, uint16_t port_space, uint16_t port, int claim);
// Sealed RC (docs/sealed.md): the device's mode (0 off, 1 prefer, 2
// require), and the exchange's result for a QP before RTR.
int softrnic_seal_mode(ibv_context* ctx);
int softrnic_seal_qp(ibv_qp* qp, const uint8_t* exchanged, size_t exchanged_len,
                     const uint8_t* transcript, size_t transcript_len);
}

#define CMA_EXPORT extern "C" __attribute__((visibility("default")))
