// Engine counters, in the spirit of `rdma statistic`: packets and bytes per
// direction, retransmissions, NAKs by kind, RNR, drops by reason.
//
// Thread-safety: written under the engine lock; readers take a snapshot
// under the same lock.
#pragma once

#include <cstdint>
#include <string>

#include "transport/transport.h"

namespace softrnic::engine {

struct EngineStats {
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t rx_dropped_parse = 0;       // malformed: ParsePacket rejected it
  uint64_t rx_dropped_unknown_qp = 0;  // no such QPN
  uint64_t rx_dropped_qp_state = 0;    // QP not in a state that receives
  uint64_t rx_dropped_source = 0;      // RC/UC source address is not the QP's peer
  uint64_t rx_dropped_service = 0;     // opcode service does not match the QP type
  uint64_t rx_dropped_pkey = 0;
  uint64_t rx_dropped_qkey = 0;
  uint64_t rx_dropped_no_recv = 0;     // UD/UC message with no receive WQE
  // Sealed RC (docs/sealed.md).
  uint64_t qps_sealed = 0;                  // QPs that reached RTR sealed
  uint64_t tx_sealed_packets = 0;
  uint64_t rx_sealed_packets = 0;           // opened: authentic and new
  uint64_t rx_dropped_seal_auth = 0;        // tag did not match: forged, corrupt, other key
  uint64_t rx_dropped_seal_replay = 0;      // counter seen before or older than the window
  uint64_t rx_dropped_unsealed = 0;         // plain packet to a sealed QP
  uint64_t rx_dropped_seal_unexpected = 0;  // sealed packet to a QP that is not sealed
  uint64_t tx_seal_errors = 0;              // the cipher failed: packet not sent
  uint64_t cm_seal_exchanges = 0;           // rdma_cm connections keyed by an X25519 exchange
  uint64_t cm_seal_declined = 0;            // rdma_cm peers that offered no seal (prefer: plain)
  uint64_t cm_seal_refused = 0;             // rdma_cm peers without a seal refused (require)
  // UD multicast (multicast.h): datagrams sent to a group, and datagrams
  // received for a group (once each, whatever the number of QPs attached).
  uint64_t tx_multicast_packets = 0;
  uint64_t rx_multicast_packets = 0;
  uint64_t rx_dropped_invalid = 0;   // UC message dropped: bad sequence, length, rights
  uint64_t rx_duplicates = 0;
  uint64_t rx_out_of_sequence = 0;
  uint64_t rx_cnp = 0;
  uint64_t retransmit_timeouts = 0;
  uint64_t retransmitted_rewinds = 0;
  uint64_t tx_naks_sequence = 0;
  uint64_t tx_naks_invalid_request = 0;
  uint64_t tx_naks_remote_access = 0;
  uint64_t tx_naks_remote_operational = 0;
  uint64_t tx_rnr_naks = 0;
  uint64_t rx_naks = 0;
  uint64_t rx_rnr_naks = 0;
  uint64_t cq_overflows = 0;
  // Retransmission and congestion control (docs/loss.md).
  uint64_t tx_retransmit_packets = 0;  // request packets sent again (both modes)
  uint64_t tx_retransmit_bytes = 0;    // their payload bytes
  uint64_t retransmit_probes = 0;      // tail-loss probes (selective mode)
  // Local ACK Timeout expiries that waited another period instead: the
  // packet or its answer was still unread in a shared-memory ring
  // (Transport::DeliveryPending).
  uint64_t retransmit_timeouts_deferred = 0;
  uint64_t tx_sacks = 0;               // selective ACKs sent (responder)
  uint64_t rx_sacks = 0;               // selective ACKs received (requester)
  uint64_t rx_sacks_invalid = 0;       // ignored: range outside what is outstanding
  uint64_t rx_ooo_kept = 0;            // out-of-order requests kept for later
  uint64_t rx_ooo_dropped = 0;         // out-of-order requests beyond the store
  uint64_t tx_cnp = 0;                 // CNPs sent (ECN CE seen)
  uint64_t cc_loss_cuts = 0;           // congestion window cut on loss
  uint64_t cc_cnp_cuts = 0;            // congestion window cut on a CNP
  uint64_t cc_delay_cuts = 0;          // congestion window cut on queueing delay
  uint64_t cc_loss_ignored = 0;        // loss with no queueing delay: not congestion
  // Delayed acknowledgements (ack_delay.cc).
  uint64_t acks_piggybacked = 0;       // sent together with a request of the same QP
  uint64_t acks_delay_expired = 0;     // waited the whole delay, then sent alone
  uint64_t acks_flushed_at_poll = 0;   // sent when the application polled the receive completion
  uint64_t ack_wakes_expired = 0;      // of those sent quietly, peers woken alone after the delay
  uint64_t posts_batched = 0;          // posts whose packets waited for a later flush
  // Completion events a thread blocked in ibv_get_cq_event made in its own
  // pass and took without the channel's pipe (event_wait.cc).
  uint64_t cq_events_inline = 0;
  // One-sided operations done directly on a same-host peer's memory
  // (shm_direct.cc): they send no packet, so only these show them. Counted
  // by the requester that executed them (the target's CPU takes no part,
  // so the target counts nothing); totals, then per opcode. SEND and WRITE
  // with immediate have no direct path (they complete a receive at the
  // target): they are packets, in shm_tx_packets.
  uint64_t shm_direct_ops = 0;
  uint64_t shm_direct_bytes = 0;
  uint64_t shm_direct_write_ops = 0;
  uint64_t shm_direct_write_bytes = 0;
  uint64_t shm_direct_read_ops = 0;
  uint64_t shm_direct_read_bytes = 0;
  uint64_t shm_direct_atomic_ops = 0;  // CMP_SWAP and FETCH_ADD, 8 bytes each
  // SEND / SEND_WITH_IMM placed in a peer's receive queue (requester), and
  // receive WQEs peers filled so (receiver; shm_direct_send.cc).
  uint64_t shm_direct_send_ops = 0;
  uint64_t shm_direct_send_bytes = 0;
  uint64_t shm_direct_recv_ops = 0;
  uint64_t shm_direct_recv_bytes = 0;
  // RDMA WRITEs to a same-host peer's region that is only partly shared:
  // the requester placed the bytes over whole shared pages directly and sent
  // the packets with the rest (placed packets, wire::Bth::placed); and the
  // placed packets a responder received (docs/shm.md).
  uint64_t shm_placed_write_ops = 0;
  uint64_t shm_placed_write_bytes = 0;
  uint64_t shm_placed_rx_packets = 0;
  // Packet acceptance (issue 14, M1): what was refused as forged or
  // impossible, by reason. None of these happen between honest peers
  // except rx_responses_stale (late duplicate acknowledgements).
  uint64_t rx_dropped_source_port = 0;   // same-host source, not the peer's device port
  uint64_t rx_responses_unsent = 0;      // ACK/NAK/response for a PSN never sent
  uint64_t rx_responses_stale = 0;       // ACK/NAK/response older than comp_psn
  uint64_t rx_responses_bad_syndrome = 0;  // READ response / atomic ACK whose AETH is not an ACK
  uint64_t rx_rnr_naks_invalid = 0;      // RNR NAK for a request that takes no receive WQE
  uint64_t rx_cnp_ignored = 0;           // CNP for no QP, or not from the QP's peer address
  uint64_t rx_sr_unnegotiated = 0;       // sr bit before selective mode was negotiated
  uint64_t rx_ooo_conflicts = 0;         // two different copies of one kept PSN: both dropped
  uint64_t rx_ooo_forgery_detected = 0;  // a duplicate differs from the kept copy that ran: QP failed
  uint64_t tx_naks_rd_atomic_limit = 0;  // READ/atomic with no responder resources granted
  // Bytes of the packets in tx_packets / rx_packets, BTH to ICRC, whatever
  // the path (UDP or shared-memory ring): the per-QP tx_bytes/rx_bytes
  // (qp_counters.h) add up to these.
  uint64_t tx_bytes = 0;
  uint64_t rx_bytes = 0;
  // Completions with an error status, by queue; flushes (IBV_WC_WR_FLUSH_ERR,
  // a QP in the error state giving its WQEs back) apart.
  uint64_t send_cqe_errors = 0;
  uint64_t recv_cqe_errors = 0;
  uint64_t send_cqe_flushes = 0;
  uint64_t recv_cqe_flushes = 0;
  // Of the send errors: completions with IBV_WC_RETRY_EXC_ERR (retry_cnt
  // exhausted) and IBV_WC_RNR_RETRY_EXC_ERR (rnr_retry exhausted).
  uint64_t retry_exceeded_errors = 0;
  uint64_t rnr_retry_exceeded_errors = 0;
};

// One "name value" line per counter, for logs and the SOFTRNIC_STATS dump.
std::string FormatStats(const EngineStats& s, const transport::TransportCounters& t);

}  // namespace softrnic::engine
