// Value types of the engine's API: enums, work requests, completions and QP
// attributes.
//
// Numeric values deliberately equal the rdma-core ABI (ibv_wr_opcode,
// ibv_wc_status, ibv_wc_opcode, IBV_ACCESS_*, IBV_SEND_*, IBV_QP_* masks,
// ibv_qp_state, ibv_mtu) so the verbs shim translates by static_cast; the
// shim static_asserts each equality. The engine itself never includes
// rdma-core headers.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>

#include "transport/address.h"

namespace softrnic::engine {

using transport::Gid;

// Numbered as enum ibv_qp_type. Inside the engine an XRC QP is an RC QP
// with an XRC role (qp.h, XrcRole): kXrcSend and kXrcRecv only cross the
// Device interface.
enum class QpType : uint8_t { kRc = 2, kUc = 3, kUd = 4, kXrcSend = 9, kXrcRecv = 10 };

// The engine's time (timers, deadlines, a pass's time).
using Clock = std::chrono::steady_clock;

// IBA 10.3.1 QP states, numbered as enum ibv_qp_state.
enum class QpState : uint8_t { kReset = 0, kInit = 1, kRtr = 2, kRts = 3, kSqd = 4, kSqe = 5, kErr = 6 };
// The states in which a QP's responder executes requests (IBA 10.3.1:
// from RTR on, until Error).
inline bool ReceivesRequests(QpState s) {
  return s == QpState::kRtr || s == QpState::kRts || s == QpState::kSqd || s == QpState::kSqe;
}
const char* QpStateName(QpState s);

// enum ibv_mtu: 1=256 .. 5=4096.
enum class Mtu : uint8_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };
inline constexpr uint32_t MtuBytes(Mtu m) { return 128u << static_cast<uint8_t>(m); }

// enum ibv_wr_opcode.
enum class WrOpcode : uint8_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpSwp = 5,
  kAtomicFetchAdd = 6,
  kLocalInv = 7,
  kBindMw = 8,
  kSendWithInv = 9,
  kAtomicWrite = 15,  // IBV_WR_ATOMIC_WRITE
};

// enum ibv_wc_status.
enum class WcStatus : uint8_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
};

// enum ibv_wc_opcode.
enum class WcOpcode : uint8_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kBindMw = 5,
  kLocalInv = 6,
  kAtomicWrite = 9,  // IBV_WC_ATOMIC_WRITE
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

// "IBV_WC_RETRY_EXC_ERR", "IBV_WC_RDMA_WRITE": the names of enum
// ibv_wc_status and ibv_wc_opcode (the trace shows them; trace/engine_trace.cc).
const char* WcStatusName(WcStatus s);
const char* WcOpcodeName(WcOpcode o);

// IBV_ACCESS_* bits.
enum Access : uint32_t {
  kLocalWrite = 1,
  kRemoteWrite = 2,
  kRemoteRead = 4,
  kRemoteAtomic = 8,
  kMwBind = 16,
  kZeroBased = 32,
  kOnDemand = 64,
};

// IBV_ADVISE_MR_ADVICE_* (ibv_advise_mr(3)).
enum class MrAdvice : uint8_t { kPrefetch = 0, kPrefetchWrite = 1, kPrefetchNoFault = 2 };

// IBV_REREG_MR_CHANGE_* bits: what Device::ReregMr changes.
enum Rereg : uint32_t { kReregTranslation = 1, kReregPd = 2, kReregAccess = 4 };

// IBV_SEND_* bits.
enum SendFlag : uint32_t { kFence = 1, kSignaled = 2, kSolicited = 4, kInline = 8 };

// IBV_WC_* flags in Completion::wc_flags.
enum WcFlag : uint32_t { kWcGrh = 1, kWcWithImm = 2, kWcWithInv = 8 };

// What a UD receive completion reports in `sl` on RoCE v2: the L3 header
// type of the packet, whose header the GRH area of the buffer holds (IBA
// A17.4.5.1 asks for "a flag that indicates if the received frame is an
// IPv4, IPv6 or RoCE packet"; verbs has no field for it, and mlx5 reports it
// in the SL bits, values from its PRM). UCX's ud_verbs reads it there to
// know whether the destination address in the GRH area is 4 or 16 bytes
// long, and drops packets whose address is not its own.
enum class RoceL3Type : uint8_t { kGrh = 0, kIpv6 = 1, kIpv4 = 2 };

// IBV_QP_* attribute mask bits.
enum QpAttrMask : uint32_t {
  kQpState = 1 << 0,
  kQpCurState = 1 << 1,
  kQpEnSqdAsyncNotify = 1 << 2,
  kQpAccessFlags = 1 << 3,
  kQpPkeyIndex = 1 << 4,
  kQpPort = 1 << 5,
  kQpQkey = 1 << 6,
  kQpAv = 1 << 7,
  kQpPathMtu = 1 << 8,
  kQpTimeout = 1 << 9,
  kQpRetryCnt = 1 << 10,
  kQpRnrRetry = 1 << 11,
  kQpRqPsn = 1 << 12,
  kQpMaxQpRdAtomic = 1 << 13,
  kQpAltPath = 1 << 14,
  kQpMinRnrTimer = 1 << 15,
  kQpSqPsn = 1 << 16,
  kQpMaxDestRdAtomic = 1 << 17,
  kQpPathMigState = 1 << 18,
  kQpCap = 1 << 19,
  kQpDestQpn = 1 << 20,
};

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

// Address vector (struct ibv_ah_attr + ibv_global_route, flattened).
struct AddressVector {
  Gid dgid;
  uint32_t flow_label = 0;
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  bool is_global = false;
  uint16_t dlid = 0;
  uint8_t sl = 0;
  uint8_t src_path_bits = 0;
  uint8_t static_rate = 0;
  uint8_t port_num = 1;
};

class Ah;
class Mr;
class Mw;

// A send work request. `sges` and, for IBV_SEND_INLINE, the bytes they point
// at are read during PostSend only; the caller's memory may change after.
struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;
  uint32_t imm_data = 0;  // network order, as in ibv_send_wr (also invalidate_rkey for SEND_WITH_INV)
  std::span<const Sge> sges;
  // RDMA
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  // Atomics
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  // UD
  const Ah* ah = nullptr;
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
  // BIND_MW (memory_window.h): the window, the region, the window's length
  // and IBV_ACCESS_* flags; its address is remote_addr, its new key rkey.
  // LOCAL_INV names its key in imm_data.
  Mw* bind_mw = nullptr;
  Mr* bind_mr = nullptr;
  uint64_t bind_length = 0;
  uint32_t bind_access = 0;
  // XRC send QPs: the XRC SRQ at the target the message is for (XRCETH).
  uint32_t xrc_remote_srqn = 0;
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::span<const Sge> sges;
};

// struct ibv_wc, field for field.
struct Completion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t vendor_err = 0;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;  // network order; invalidated rkey (host order) when kWcWithInv
  uint32_t qp_num = 0;
  uint32_t src_qp = 0;
  uint32_t wc_flags = 0;
  uint16_t pkey_index = 0;
  uint16_t slid = 0;
  uint8_t sl = 0;
  uint8_t dlid_path_bits = 0;
};

struct QpCaps {
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t max_send_sge = 0;
  uint32_t max_recv_sge = 0;
  uint32_t max_inline_data = 0;
};

// struct ibv_qp_attr, the fields softrnic uses.
struct QpAttr {
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  Mtu path_mtu = Mtu::k1024;
  uint32_t qkey = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t dest_qp_num = 0;
  uint32_t qp_access_flags = 0;
  QpCaps cap;
  AddressVector ah_attr;
  uint16_t pkey_index = 0;
  bool sq_draining = false;
  bool en_sqd_async_notify = false;
  uint8_t max_rd_atomic = 0;       // initiator depth
  uint8_t max_dest_rd_atomic = 0;  // responder resources
  uint8_t min_rnr_timer = 0;       // IBA table 45 encoding
  uint8_t port_num = 1;
  uint8_t timeout = 0;             // 4.096 us * 2^timeout; 0 = infinite
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;           // 7 = infinite
};

// Async events, numbered as enum ibv_event_type.
enum class AsyncEventType : uint8_t {
  kCqErr = 0,
  kQpFatal = 1,
  kQpReqErr = 2,
  kQpAccessErr = 3,
  kCommEst = 4,
  kSqDrained = 5,
  kPathMig = 6,
  kPathMigErr = 7,
  kDeviceFatal = 8,
  kPortActive = 9,
  kPortErr = 10,
  kLidChange = 11,
  kPkeyChange = 12,
  kSmChange = 13,
  kSrqErr = 14,
  kSrqLimitReached = 15,
  kQpLastWqeReached = 16,
  kClientReregister = 17,
  kGidChange = 18,
  kWqFatal = 19,
};

// The packets a message of `length` bytes takes at path MTU `mtu` (IBA
// 9.7.1: full packets but the last; a zero-length message is one packet).
inline uint32_t PacketsFor(uint32_t length, uint32_t mtu) {
  return length == 0 ? 1 : (length + mtu - 1) / mtu;
}

}  // namespace softrnic::engine
