// The engine numbers its enums and flags exactly as rdma-core 44 does so the
// shim translates with static_cast. This file proves each equality at compile
// time: if either side changes, the build breaks here instead of a verbs
// application silently getting the wrong opcode, status or access right.
#include "verbs/internal.h"

namespace softrnic::verbs {
namespace {

template <class E>
constexpr auto U(E e) {
  return static_cast<unsigned long long>(e);
}

#define SAME(engine_value, verbs_value) static_assert(U(engine_value) == U(verbs_value), #verbs_value)

using namespace softrnic::engine;

SAME(QpType::kRc, IBV_QPT_RC);
SAME(QpType::kUc, IBV_QPT_UC);
SAME(QpType::kUd, IBV_QPT_UD);

SAME(QpState::kReset, IBV_QPS_RESET);
SAME(QpState::kInit, IBV_QPS_INIT);
SAME(QpState::kRtr, IBV_QPS_RTR);
SAME(QpState::kRts, IBV_QPS_RTS);
SAME(QpState::kSqd, IBV_QPS_SQD);
SAME(QpState::kSqe, IBV_QPS_SQE);
SAME(QpState::kErr, IBV_QPS_ERR);

SAME(Mtu::k256, IBV_MTU_256);
SAME(Mtu::k512, IBV_MTU_512);
SAME(Mtu::k1024, IBV_MTU_1024);
SAME(Mtu::k2048, IBV_MTU_2048);
SAME(Mtu::k4096, IBV_MTU_4096);

SAME(WrOpcode::kRdmaWrite, IBV_WR_RDMA_WRITE);
SAME(WrOpcode::kRdmaWriteWithImm, IBV_WR_RDMA_WRITE_WITH_IMM);
SAME(WrOpcode::kSend, IBV_WR_SEND);
SAME(WrOpcode::kSendWithImm, IBV_WR_SEND_WITH_IMM);
SAME(WrOpcode::kRdmaRead, IBV_WR_RDMA_READ);
SAME(WrOpcode::kAtomicCmpSwp, IBV_WR_ATOMIC_CMP_AND_SWP);
SAME(WrOpcode::kAtomicFetchAdd, IBV_WR_ATOMIC_FETCH_AND_ADD);
SAME(WrOpcode::kLocalInv, IBV_WR_LOCAL_INV);
SAME(WrOpcode::kBindMw, IBV_WR_BIND_MW);
SAME(WrOpcode::kSendWithInv, IBV_WR_SEND_WITH_INV);

SAME(WcStatus::kSuccess, IBV_WC_SUCCESS);
SAME(WcStatus::kLocLenErr, IBV_WC_LOC_LEN_ERR);
SAME(WcStatus::kLocQpOpErr, IBV_WC_LOC_QP_OP_ERR);
SAME(WcStatus::kLocEecOpErr, IBV_WC_LOC_EEC_OP_ERR);
SAME(WcStatus::kLocProtErr, IBV_WC_LOC_PROT_ERR);
SAME(WcStatus::kWrFlushErr, IBV_WC_WR_FLUSH_ERR);
SAME(WcStatus::kMwBindErr, IBV_WC_MW_BIND_ERR);
SAME(WcStatus::kBadRespErr, IBV_WC_BAD_RESP_ERR);
SAME(WcStatus::kLocAccessErr, IBV_WC_LOC_ACCESS_ERR);
SAME(WcStatus::kRemInvReqErr, IBV_WC_REM_INV_REQ_ERR);
SAME(WcStatus::kRemAccessErr, IBV_WC_REM_ACCESS_ERR);
SAME(WcStatus::kRemOpErr, IBV_WC_REM_OP_ERR);
SAME(WcStatus::kRetryExcErr, IBV_WC_RETRY_EXC_ERR);
SAME(WcStatus::kRnrRetryExcErr, IBV_WC_RNR_RETRY_EXC_ERR);
SAME(WcStatus::kLocRddViolErr, IBV_WC_LOC_RDD_VIOL_ERR);
SAME(WcStatus::kRemInvRdReqErr, IBV_WC_REM_INV_RD_REQ_ERR);
SAME(WcStatus::kRemAbortErr, IBV_WC_REM_ABORT_ERR);
SAME(WcStatus::kInvEecnErr, IBV_WC_INV_EECN_ERR);
SAME(WcStatus::kInvEecStateErr, IBV_WC_INV_EEC_STATE_ERR);
SAME(WcStatus::kFatalErr, IBV_WC_FATAL_ERR);
SAME(WcStatus::kRespTimeoutErr, IBV_WC_RESP_TIMEOUT_ERR);
SAME(WcStatus::kGeneralErr, IBV_WC_GENERAL_ERR);

SAME(WcOpcode::kSend, IBV_WC_SEND);
SAME(WcOpcode::kRdmaWrite, IBV_WC_RDMA_WRITE);
SAME(WcOpcode::kRdmaRead, IBV_WC_RDMA_READ);
SAME(WcOpcode::kCompSwap, IBV_WC_COMP_SWAP);
SAME(WcOpcode::kFetchAdd, IBV_WC_FETCH_ADD);
SAME(WcOpcode::kBindMw, IBV_WC_BIND_MW);
SAME(WcOpcode::kLocalInv, IBV_WC_LOCAL_INV);
SAME(WcOpcode::kRecv, IBV_WC_RECV);
SAME(WcOpcode::kRecvRdmaWithImm, IBV_WC_RECV_RDMA_WITH_IMM);

SAME(kLocalWrite, IBV_ACCESS_LOCAL_WRITE);
SAME(kRemoteWrite, IBV_ACCESS_REMOTE_WRITE);
SAME(kRemoteRead, IBV_ACCESS_REMOTE_READ);
SAME(kRemoteAtomic, IBV_ACCESS_REMOTE_ATOMIC);
SAME(kMwBind, IBV_ACCESS_MW_BIND);
SAME(kZeroBased, IBV_ACCESS_ZERO_BASED);
SAME(kOnDemand, IBV_ACCESS_ON_DEMAND);

SAME(kReregTranslation, IBV_REREG_MR_CHANGE_TRANSLATION);
SAME(kReregPd, IBV_REREG_MR_CHANGE_PD);
SAME(kReregAccess, IBV_REREG_MR_CHANGE_ACCESS);

SAME(kFence, IBV_SEND_FENCE);
SAME(kSignaled, IBV_SEND_SIGNALED);
SAME(kSolicited, IBV_SEND_SOLICITED);
SAME(kInline, IBV_SEND_INLINE);

SAME(kWcGrh, IBV_WC_GRH);
SAME(kWcWithImm, IBV_WC_WITH_IMM);
SAME(kWcWithInv, IBV_WC_WITH_INV);

SAME(kQpState, IBV_QP_STATE);
SAME(kQpCurState, IBV_QP_CUR_STATE);
SAME(kQpEnSqdAsyncNotify, IBV_QP_EN_SQD_ASYNC_NOTIFY);
SAME(kQpAccessFlags, IBV_QP_ACCESS_FLAGS);
SAME(kQpPkeyIndex, IBV_QP_PKEY_INDEX);
SAME(kQpPort, IBV_QP_PORT);
SAME(kQpQkey, IBV_QP_QKEY);
SAME(kQpAv, IBV_QP_AV);
SAME(kQpPathMtu, IBV_QP_PATH_MTU);
SAME(kQpTimeout, IBV_QP_TIMEOUT);
SAME(kQpRetryCnt, IBV_QP_RETRY_CNT);
SAME(kQpRnrRetry, IBV_QP_RNR_RETRY);
SAME(kQpRqPsn, IBV_QP_RQ_PSN);
SAME(kQpMaxQpRdAtomic, IBV_QP_MAX_QP_RD_ATOMIC);
SAME(kQpAltPath, IBV_QP_ALT_PATH);
SAME(kQpMinRnrTimer, IBV_QP_MIN_RNR_TIMER);
SAME(kQpSqPsn, IBV_QP_SQ_PSN);
SAME(kQpMaxDestRdAtomic, IBV_QP_MAX_DEST_RD_ATOMIC);
SAME(kQpPathMigState, IBV_QP_PATH_MIG_STATE);
SAME(kQpCap, IBV_QP_CAP);
SAME(kQpDestQpn, IBV_QP_DEST_QPN);

SAME(AsyncEventType::kCqErr, IBV_EVENT_CQ_ERR);
SAME(AsyncEventType::kQpFatal, IBV_EVENT_QP_FATAL);
SAME(AsyncEventType::kQpReqErr, IBV_EVENT_QP_REQ_ERR);
SAME(AsyncEventType::kQpAccessErr, IBV_EVENT_QP_ACCESS_ERR);
SAME(AsyncEventType::kCommEst, IBV_EVENT_COMM_EST);
SAME(AsyncEventType::kSqDrained, IBV_EVENT_SQ_DRAINED);
SAME(AsyncEventType::kPathMig, IBV_EVENT_PATH_MIG);
SAME(AsyncEventType::kPathMigErr, IBV_EVENT_PATH_MIG_ERR);
SAME(AsyncEventType::kDeviceFatal, IBV_EVENT_DEVICE_FATAL);
SAME(AsyncEventType::kPortActive, IBV_EVENT_PORT_ACTIVE);
SAME(AsyncEventType::kPortErr, IBV_EVENT_PORT_ERR);
SAME(AsyncEventType::kLidChange, IBV_EVENT_LID_CHANGE);
SAME(AsyncEventType::kPkeyChange, IBV_EVENT_PKEY_CHANGE);
SAME(AsyncEventType::kSmChange, IBV_EVENT_SM_CHANGE);
SAME(AsyncEventType::kSrqErr, IBV_EVENT_SRQ_ERR);
SAME(AsyncEventType::kSrqLimitReached, IBV_EVENT_SRQ_LIMIT_REACHED);
SAME(AsyncEventType::kQpLastWqeReached, IBV_EVENT_QP_LAST_WQE_REACHED);
SAME(AsyncEventType::kClientReregister, IBV_EVENT_CLIENT_REREGISTER);
SAME(AsyncEventType::kGidChange, IBV_EVENT_GID_CHANGE);
SAME(AsyncEventType::kWqFatal, IBV_EVENT_WQ_FATAL);

// SRQ modify masks as the engine documents them.
static_assert(IBV_SRQ_MAX_WR == 1 && IBV_SRQ_LIMIT == 2);

// The struct layouts ABI.md relies on (rdma-core 44, x86-64).
static_assert(sizeof(verbs_context) == 648, "verbs_context size of rdma-core 44");
// Offsets of the ops applications call inline, from the ibv_context base.
// (ABI.md lists the same five offsets; by verbs.h they belong to poll_cq,
// req_notify_cq, post_srq_recv, post_send, post_recv in that order.)
constexpr size_t OpOff(size_t member) { return offsetof(ibv_context, ops) + member; }
static_assert(OpOff(offsetof(ibv_context_ops, poll_cq)) == 0x60);
static_assert(OpOff(offsetof(ibv_context_ops, req_notify_cq)) == 0x68);
static_assert(OpOff(offsetof(ibv_context_ops, post_srq_recv)) == 0xa8);
static_assert(OpOff(offsetof(ibv_context_ops, post_send)) == 0xd0);
static_assert(OpOff(offsetof(ibv_context_ops, post_recv)) == 0xd8);
static_assert(offsetof(Context, vctx) == 0, "verbs_context must start the allocation");
static_assert(offsetof(Cq, cq) == 0 && offsetof(Qp, qpx) == 0 && offsetof(Pd, pd) == 0 &&
              offsetof(Mr, mr) == 0 && offsetof(Srq, srq) == 0 && offsetof(Ah, ah) == 0 &&
              offsetof(CompChannel, ch) == 0,
              "ibv_* structs must start their wrappers");

#undef SAME

}  // namespace
}  // namespace softrnic::verbs
