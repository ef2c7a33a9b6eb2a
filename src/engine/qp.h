// A queue pair: its attributes, its send and receive queues, and the state
// of its three engines — requester (WQEs -> packets), responder (requests ->
// memory + responses) and completer (responses -> completions, retry).
//
// The split and the names follow IBA ch. 9 and Linux rxe (rxe_req.c,
// rxe_resp.c, rxe_comp.c). Thread-safety: guarded by the engine lock.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <vector>

#include "engine/congestion/congestion_control.h"
#include "engine/roles/dest_window.h"
#include "engine/qp_counters.h"
#include "engine/queues/queues.h"
#include "engine/congestion/rtt_estimator.h"
#include "engine/types.h"
#include "seal/connection_secret.h"
#include "seal/qp_seal.h"

namespace softrnic::transport {
struct ShmPeer;
}

namespace softrnic::engine {

inline constexpr uint32_t kMaxSge = 32;

struct SendWqe {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;
  uint32_t imm_data = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  AddressVector ud_av;  // UD: the AH's address, copied at post time
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
  // BIND_MW (SendWr's bind_* fields).
  Mw* bind_mw = nullptr;
  Mr* bind_mr = nullptr;
  uint64_t bind_length = 0;
  uint32_t bind_access = 0;
  uint32_t xrc_srqn = 0;  // XRC send QPs: the target's XRC SRQ (XRCETH)
  uint32_t num_sge = 0;
  uint32_t length = 0;  // total bytes of the message
  bool is_inline = false;
  // A WRITE to a same-host peer's partly shared region: the message bytes
  // [placed_begin, placed_end) were written directly into the peer's shared
  // pages before the first packet (shm_placed.cc); its packets carry only
  // the rest (placed packets). Empty when begin == end.
  uint32_t placed_begin = 0;
  uint32_t placed_end = 0;

  // Requester: PSNs this WQE consumes, assigned when it is first sent.
  bool started = false;
  uint32_t first_psn = 0;
  uint32_t npackets = 0;
  // Completer.
  bool done = false;
  WcStatus status = WcStatus::kSuccess;
};

// An RDMA READ longer than this many response packets is asked for in
// several READ requests on the wire, each for at most this many packets
// and never across a multiple of it counted from the WQE's first PSN
// (ReadRequestEnd). The congestion window then bounds a long READ as it
// bounds a long WRITE: the responder answers each request at once, so one
// request of 256 MiB used to pour its whole answer out in one burst, which
// overflowed the requester's socket buffer, and after a loss kept the
// responder busy with the stale rest beyond the Local ACK Timeout (issue
// 17). The responder needs nothing: it sees ordinary READ requests.
inline constexpr uint32_t kReadRequestPackets = 256;

// One past the last response packet (counted from the WQE's first PSN) of
// the READ request that starts at packet `from` of a READ of `npackets`.
inline uint32_t ReadRequestEnd(uint32_t from, uint32_t npackets) {
  const uint32_t boundary = (from / kReadRequestPackets + 1) * kReadRequestPackets;
  return boundary < npackets ? boundary : npackets;
}

// Saved per READ / atomic request so a duplicate can be answered without
// executing the operation again (IBA 9.7.5.1.3, C9-104..C9-106).
struct RdAtomicResource {
  bool valid = false;
  bool is_read = false;
  uint32_t first_psn = 0;
  uint32_t npackets = 0;
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;
  uint64_t atomic_orig = 0;
};

// Selective retransmission (docs/loss.md). Both the requester's scoreboard
// and the responder's reorder store cover this many PSNs past the oldest
// unacknowledged / expected one; it equals the SACK bitmap's width.
inline constexpr uint32_t kSrWindow = 512;

// Requester scoreboard entry for the request packet with PSN `psn`
// (indexed psn % kSrWindow; `psn` tells a live entry from a stale one).
// (24 bytes: the flags share the PSN's word.)
struct SrSlot {
  uint32_t psn = 0;
  bool valid = false;
  bool sacked = false;   // the peer reported it received and kept
  bool resent = false;   // an RTT sample from it would be ambiguous (Karn)
  uint64_t tx_seq = 0;   // SrState::tx_seq when it was last (re)transmitted
  Clock::time_point sent{};
};

// A packet the reorder store ran (sr_store.h): its PSN and request digest.
struct SrRun {
  uint32_t psn = 0;
  bool valid = false;
  uint64_t digest = 0;
};

// Which message the responder is in the middle of (opcode sequence check,
// IBA 9.7.5.1.2 / C9-95).
enum class InMessage : uint8_t { kNone, kSend, kWrite };

// --- Per-role state ---
//
// Each struct below is the state of one role of a QP, written by the file
// named in its comment (others may read it). Every member has its initial
// value as a default initialiser, so that one assignment (`qp->resp = {}`)
// resets a role.
//
// Lifetime (qp_control.cc): RESET returns every role to its initial state,
// so a QP reused after RESET behaves exactly as a freshly created one
// (Engine::ResetQp); each role is then set up at the transition that starts
// it: the responder and the reorder store at INIT -> RTR, the requester,
// the completer, the scoreboard and the congestion controller at RTR -> RTS.
// Only ShmPathState survives RESET (see there).

// Requester (requester.cc; IBA 9.7.4, rxe_req.c).
struct ReqState {
  uint32_t sq_psn = 0;          // next PSN to send
  uint32_t send_offset = 0;     // bytes of Wqe(sq_next) already sent
  uint32_t outstanding_rd_atomic = 0;
};

// Completer (completer.cc; IBA 9.7.5.2, rxe_comp.c).
struct CompState {
  uint32_t comp_psn = 0;        // oldest PSN not yet acknowledged
  uint8_t retry_left = 0;
  uint8_t rnr_retry_left = 0;
  Clock::time_point retransmit_deadline{};
  bool retransmit_armed = false;
  Clock::time_point rnr_deadline{};
  bool rnr_waiting = false;
  // A go-back-N rewind to this PSN was already started; further out-of-order
  // responses for older requests must not trigger another one.
  bool rewound = false;
  uint32_t rewound_psn = 0;
};

// Responder (responder.cc; IBA 9.7.5.1, rxe_resp.c).
struct RespState {
  uint32_t epsn = 0;            // expected PSN
  uint32_t msn = 0;             // message sequence number
  InMessage in_message = InMessage::kNone;
  bool nak_sequence_sent = false;  // one PSN-sequence NAK per gap (C9-111)
  // Receive WQE being filled by a multi-packet SEND.
  bool recv_active = false;
  uint64_t recv_wr_id = 0;
  uint32_t recv_num_sge = 0;
  std::array<Sge, kMaxSge> recv_sges{};
  uint32_t recv_offset = 0;
  // RDMA WRITE in progress.
  uint64_t write_va = 0;
  uint32_t write_rkey = 0;
  uint32_t write_remaining = 0;
  uint32_t write_total = 0;
  // READ / atomic responder resources (max_dest_rd_atomic, allocated at RTR).
  std::vector<RdAtomicResource> resources;
  uint32_t next_resource = 0;
  // XRC receive QPs: the XRC SRQ the receive WQE being filled came from
  // (its completion goes to that SRQ's CQ).
  uint32_t xrc_srqn = 0;
  // ... and that SRQ is another process's (xrc_share.h): the receive WQE is
  // taken, filled and completed there.
  bool xrc_remote = false;
  // Coalesced ACK to send at the end of the receive burst.
  bool ack_pending = false;
  uint32_t ack_psn = 0;
  uint8_t ack_syndrome = 0;
  // DCQCN notification point pacing (congestion.cc, MaybeSendCnp): the
  // responder marks the flows whose requests arrive with ECN CE.
  Clock::time_point last_cnp_sent{};
};

// Delayed acknowledgement (ack_delay.cc): the responder's pending ACK waits,
// until ack_deadline at most, for a request this QP sends back to carry it.
struct AckDelayState {
  bool ack_deferred = false;
  // The ACK went quietly (a shared-memory ring without its doorbell) when
  // the application polled the completion it acknowledges: the peer's
  // wake-up is still owed, to its next request's doorbell or, at
  // ack_deadline, to Transport::WakePeer (ack_delay.cc).
  bool wake_owed = false;
  Clock::time_point ack_deadline{};
  // >= 0: defer; each ACK that did ride along raises it (to a cap); one
  // that had to be sent alone by the timer sets it to 0 if it was above,
  // else well below zero; every ACK sent at once meanwhile raises it by one.
  // Reset with the QP (before the per-role structs it never was): what a
  // previous connection's traffic taught says nothing about the next one's,
  // and a reused QP should defer exactly as a fresh one does.
  int32_t ack_delay_score = 0;
};

// Selective retransmission, requester side (selective.cc; docs/loss.md):
// the scoreboard, loss detection, the RTT estimate and the tail-loss probe.
// Set up at RTS (SrPrepareRequester).
struct SrState {
  bool sr_local = false;   // this QP offers it (SOFTRNIC_RETRANSMIT, at RTS)
  bool peer_sr = false;    // the peer's responses carried the sr bit
  // kSrWindow entries, taken by the first request packet sent
  // (SrOnTransmit): a connection that never sends costs nothing here (a
  // zero-filled scoreboard per QP at RTS cost rdma_cm's connect rate ~8
  // fresh pages per connection, docs/benchmarks.md). Empty: nothing sent.
  std::vector<SrSlot> scoreboard;
  uint64_t tx_seq = 0;        // request packets transmitted (incl. resends)
  uint64_t delivered_seq = 0; // highest tx_seq of a packet the peer reported
  uint32_t sacked_count = 0;  // packets past comp_psn the last SACK reported
  bool retx_scan = false;     // a SACK arrived: look for lost packets
  uint32_t sq_psn_max = 0;    // one past the highest PSN ever sent (counts resends)
  bool resending = false;     // SendNextPacket is resending one lost packet
  // RTT, measured here (Karn's rule), read by the tail-loss probe and by
  // the congestion controller (Qp::cc holds a reference to it).
  RttEstimator rtt;
  // Tail-loss probe: no acknowledgement progress for a few round trips
  // resends the oldest unacknowledged packet; its arrival, as the newest
  // transmission, then exposes every older loss. Does not count against
  // retry_cnt (the local ACK timeout still runs and does).
  Clock::time_point last_progress{};
  uint32_t probes = 0;        // consecutive probes without progress (backoff)
};

// Selective retransmission, responder side (selective.cc, sr_store.h): the
// requests carried the sr bit, so out-of-order packets are kept (up to
// kSrWindow PSNs past epsn, each slot one whole packet) and answered with
// SACKs. Set up at RTR (SrPrepareResponder); every array below is taken by
// the first packet kept (SrKeep), since most connections never see one out
// of order: allocating and zero-filling them at RTR cost rdma_cm's connect
// rate ~5 ms per connection (docs/benchmarks.md) and kept them resident.
struct SrStoreState {
  bool offered = false;      // this QP keeps out-of-order packets (set at RTR)
  bool peer_sr_req = false;
  // kSrWindow * ooo_slot_bytes (0.5-2 MiB), never zeroed: a slot is read
  // only up to its ooo_len.
  std::unique_ptr<uint8_t[]> ooo_store;
  std::vector<uint32_t> ooo_len;    // packet length per slot, 0 = empty
  std::vector<uint32_t> ooo_psn;
  uint32_t ooo_slot_bytes = 0;
  uint32_t ooo_count = 0;
  bool sack_pending = false;        // send a SACK at the end of the burst
  bool draining = false;            // replaying kept packets (no re-store)
  std::vector<SrRun> ran_from_store;  // kSrWindow entries (sr_store.h)
};

// Shared-memory direct path (shm_direct.cc, shm_direct.h): this QP's export
// slot, and as a requester the peer device and its QP slot.
//
// Not reset at RESET, on purpose: the export slot belongs to the QP for its
// whole life (taken by ShmDirect::PublishQp, which every state change calls,
// and given back by RemoveQp at destruction), and the peer cache is
// revalidated on every use (against the destination GID and the peer's
// liveness; PublishQp forgets the peer's QP slot).
struct ShmPathState {
  int shm_slot = -1;
  std::shared_ptr<transport::ShmPeer> shm_peer;
  Gid shm_peer_gid;
  int shm_peer_qp_slot = -1;  // -2: not exported (looked for again now and then)
  uint32_t shm_peer_qp_misses = 0;
  // Placed WRITEs (shm_placed.cc): one past the newest WQE whose packets
  // carry bytes of shared pages (any WQE sent whole); a WRITE is placed only
  // once that one has completed, and only while every placed WRITE in
  // flight names the same region (placed_rkey).
  uint64_t ring_barrier = 0;
  uint32_t placed_rkey = 0;
  // As a receiver (shm_direct_send.cc): whether the receive queue is open to
  // peers' direct SENDs, and, as values of its `taken` word
  // (transport::ShmRecvQueue), the WQE at the front of `rq` and one past
  // the last WQE described in the export.
  bool rq_open = false;
  uint64_t rq_consumed = 0;
  uint64_t rq_exported = 0;
};

// XRC (IBA 9.7, the XRC transport): an XRC QP runs as an RC QP (type kRc) with
// a role. A send QP's requests carry XRC opcodes and an XRCETH naming the
// target's SRQ; a receive QP has no queues, PD or CQs of its own: each
// request is bound to the XRC SRQ its XRCETH names (xrc.cc), whose PD,
// receive WQEs and CQ it uses.
enum class XrcRole : uint8_t { kNone, kSend, kRecv };

class Qp {
 public:
  // memory: where the send queue (sq, sq_sges, sq_inline) and the receive
  // queue keep their entries (queues.h, "Queue memory").
  explicit Qp(std::pmr::memory_resource* memory = DefaultQueueMemory())
      : sq(memory), sq_sges(memory), sq_inline(memory), rq(memory) {}

  // Identity and wiring.
  uint32_t qpn = 0;
  QpType type = QpType::kRc;
  XrcRole xrc = XrcRole::kNone;
  Xrcd* xrcd = nullptr;  // kRecv: its domain
  // kRecv: every handle still open (the creator's, each ibv_open_qp's);
  // `handle` is one of them, the one events name.
  std::vector<void*> xrc_handles;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;
  void* handle = nullptr;
  bool sq_sig_all = false;
  QpCaps caps;
  // UD multicast (multicast.h): groups it is attached to, and whether it
  // hears its own multicast datagrams (IBV_QP_CREATE_BLOCK_SELF_MCAST_LB).
  uint32_t multicast_attachments = 0;
  bool block_self_multicast = false;

  // Attributes (ibv_modify_qp; qp_control.cc).
  QpAttr attr;
  uint32_t mtu_bytes = 1024;
  // The peer (ah_attr.dgid) is an address of this host: its packets must
  // also come from the device port (engine.cc, DispatchPacket says why).
  bool peer_on_host = false;
  // Sealed RC (docs/sealed.md): made at RTR when the device requires
  // sealing; every packet the QP sends is sealed with it, and a packet to
  // it must open with it. Null: plain RoCE v2.
  std::unique_ptr<seal::QpSeal> seal;
  // What rdma_cm's exchange gave this QP before RTR (Engine::SealQpByCm):
  // a connection secret, or a peer that offered no seal (prefer: plain).
  std::unique_ptr<seal::ConnectionSecret> cm_secret;
  bool cm_declined_seal = false;

  // Send queue: a ring indexed by monotonically increasing counters.
  std::pmr::vector<SendWqe> sq;
  std::pmr::vector<Sge> sq_sges;           // caps.max_send_sge per slot
  std::pmr::vector<uint8_t> sq_inline;     // caps.max_inline_data per slot
  uint64_t sq_head = 0;  // oldest WQE not yet completed (completer)
  uint64_t sq_next = 0;  // requester: WQE being (re)sent
  uint64_t sq_tail = 0;  // next free slot (posting)
  SendWqe& Wqe(uint64_t index) { return sq[index % sq.size()]; }
  const Sge* WqeSges(uint64_t index) const { return &sq_sges[(index % sq.size()) * SgeStride()]; }
  const uint8_t* WqeInline(uint64_t index) const {
    return &sq_inline[(index % sq.size()) * caps.max_inline_data];
  }
  size_t SgeStride() const { return caps.max_send_sge == 0 ? 1 : caps.max_send_sge; }

  // Receive queue (unused when srq is set).
  RecvQueue rq;

  // The roles (see above).
  ReqState req;
  CompState comp;
  RespState resp;
  AckDelayState ack_delay;
  SrState sr;
  SrStoreState sr_store;
  // Congestion control, reaction point (congestion.cc, congestion_control.h;
  // docs/loss.md): the controller, its algorithm a setting (SOFTRNIC_CC),
  // owns its state. Made at RTS (CcInit); none before, and RESET drops it.
  std::unique_ptr<CongestionControl> cc;
  // Its share of the packets in flight to its destination (dest_window.h),
  // from RTS (DestAttach) to RESET or destruction (DestRelease); never
  // reset with `= {}` (the destination's sum holds its part).
  DestShare dest;
  ShmPathState shm;

  // What this QP sent and received (qp_counters.h), and whether it is on
  // the engine's list of QPs whose counters changed since the stats
  // publisher last looked (Engine::NoteQpCounters).
  QpCounters counters;
  bool counters_noted = false;

  // Engine bookkeeping (engine.cc, the work list; pass.cc, the timer
  // list; device.cc).
  bool on_work_list = false;
  bool on_timer_list = false;
  bool destroyed = false;
};

// 4.096 us * 2^timeout (IBA 9.7.6.1.3); 0 means "no timeout".
inline Clock::duration LocalAckTimeout(uint8_t timeout) {
  if (timeout == 0) return Clock::duration::max();
  return std::chrono::nanoseconds(static_cast<int64_t>(4096) << timeout);
}

// RNR NAK timer field to a delay, IBA 9.7.5.2.8 table 45 (microseconds x100).
Clock::duration RnrTimerDelay(uint8_t timer_field);

}  // namespace softrnic::engine
