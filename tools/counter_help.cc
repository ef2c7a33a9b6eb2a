#include "counter_help.h"

#include <map>

namespace softrnic::tools {

std::string CounterHelp(const std::string& name) {
  // From the field comments of engine::EngineStats (src/engine/stats.h) and
  // transport::TransportCounters (src/transport/transport.h).
  static const std::map<std::string, std::string> help = {
      {"rx_packets", "Packets dispatched to the engine."},
      {"tx_packets", "Packets built by the engine."},
      {"rx_dropped_parse", "Received packets dropped as malformed."},
      {"rx_dropped_unknown_qp", "Received packets dropped: no such QP number."},
      {"rx_dropped_qp_state", "Received packets dropped: the QP is not in a state that receives."},
      {"rx_dropped_source", "Received packets dropped: RC/UC source address is not the QP's peer."},
      {"rx_dropped_service", "Received packets dropped: opcode service does not match the QP type."},
      {"rx_dropped_pkey", "Received packets dropped: P_Key mismatch."},
      {"rx_dropped_qkey", "Received packets dropped: Q_Key mismatch."},
      {"tx_multicast_packets", "UD datagrams sent to a multicast group."},
      {"rx_multicast_packets", "UD datagrams received for a multicast group this device joined."},
      {"rx_dropped_no_recv", "UD/UC messages dropped: no receive WQE posted."},
      {"rx_dropped_invalid", "UC messages dropped: bad sequence, length or rights."},
      {"rx_duplicates", "Duplicate request packets received."},
      {"rx_out_of_sequence", "Out-of-sequence request packets received."},
      {"rx_cnp", "Congestion notification packets received."},
      {"retransmit_timeouts", "Retransmission timer expiries."},
      {"retransmit_rewinds", "Requester rewinds to resend from a NAKed PSN."},
      {"tx_naks_sequence", "PSN sequence error NAKs sent."},
      {"tx_naks_invalid_request", "Invalid request NAKs sent."},
      {"tx_naks_remote_access", "Remote access error NAKs sent."},
      {"tx_naks_remote_operational", "Remote operational error NAKs sent."},
      {"tx_rnr_naks", "Receiver-not-ready NAKs sent."},
      {"rx_naks", "NAKs received."},
      {"rx_rnr_naks", "Receiver-not-ready NAKs received."},
      {"cq_overflows", "Completion queue overflows."},
      {"tx_retransmit_packets", "Request packets sent again."},
      {"tx_retransmit_bytes", "Payload bytes of request packets sent again."},
      {"retransmit_probes", "Tail-loss probes sent (selective mode)."},
      {"retransmit_timeouts_deferred",
       "Retransmission timer expiries that waited another period: the packet or its answer was "
       "still unread in a shared-memory ring."},
      {"tx_sacks", "Selective ACKs sent."},
      {"acks_piggybacked", "Acknowledgements sent together with a request of the same QP."},
      {"acks_delay_expired", "Delayed acknowledgements sent alone after the whole delay."},
      {"posts_batched", "Posts whose packets waited for a later flush."},
      {"rx_sacks", "Selective ACKs received."},
      {"rx_sacks_invalid", "Selective ACKs ignored: range outside what is outstanding."},
      {"rx_ooo_kept", "Out-of-order requests kept for later."},
      {"rx_ooo_dropped", "Out-of-order requests dropped: beyond the store."},
      {"tx_cnp", "Congestion notification packets sent (ECN CE seen)."},
      {"cc_loss_cuts", "Congestion window cuts on loss."},
      {"cc_cnp_cuts", "Congestion window cuts on a CNP."},
      {"cc_delay_cuts", "Congestion window cuts on queueing delay."},
      {"cc_loss_ignored", "Losses with no queueing delay, not taken as congestion."},
      {"udp_tx_packets", "UDP datagrams sent (retransmissions and ACKs included)."},
      {"udp_tx_bytes", "UDP payload bytes sent."},
      {"udp_tx_errors", "UDP send errors."},
      {"udp_tx_busy", "UDP sends that took fewer packets than offered (retried)."},
      {"udp_rx_packets", "UDP packets received."},
      {"udp_rx_bytes", "UDP payload bytes received."},
      {"udp_rx_icrc_errors", "Received packets dropped: bad ICRC."},
      {"udp_rx_runts", "Received datagrams too short to be a packet."},
      {"udp_rx_icrc_id_retries", "ICRC checks that passed with another IPv4 ID of the datagram."},
      {"udp_rx_icrc_id_retry_crcs", "CRCs computed while retrying IPv4 IDs."},
      {"fault_drops", "Packets dropped by fault injection (SOFTRNIC_FAULTS)."},
      {"fault_dups", "Packets duplicated by fault injection."},
      {"fault_reorders", "Packets reordered by fault injection."},
      {"fault_corrupts", "Packets corrupted by fault injection."},
      {"shm_tx_packets", "Packets written to same-host peers' shared-memory rings."},
      {"shm_tx_bytes", "Packet bytes written to same-host peers' shared-memory rings."},
      {"shm_rx_packets", "Packets read from this device's shared-memory rings."},
      {"shm_doorbells_sent", "Doorbell datagrams sent to wake a sleeping same-host peer."},
      {"shm_rx_doorbells", "Doorbell datagrams received."},
      {"shm_direct_ops",
       "One-sided operations done directly on a same-host peer's memory (the peer counts none)."},
      {"shm_direct_bytes", "Bytes moved by direct one-sided operations on same-host peers."},
      {"shm_direct_write_ops", "RDMA WRITEs done directly on a same-host peer's memory."},
      {"shm_direct_write_bytes", "Bytes written by direct RDMA WRITEs on same-host peers."},
      {"shm_direct_read_ops", "RDMA READs done directly from a same-host peer's memory."},
      {"shm_direct_read_bytes", "Bytes read by direct RDMA READs from same-host peers."},
      {"shm_direct_atomic_ops",
       "Atomics (CMP_SWAP, FETCH_ADD) done directly on a same-host peer's memory."},
      {"rx_dropped_source_port", "Same-host packets refused: source is not the peer's device port."},
      {"rx_responses_unsent", "Responses refused: for a PSN never sent."},
      {"rx_responses_stale", "Responses ignored: older than the completed PSN."},
      {"rx_responses_bad_syndrome", "READ responses and atomic ACKs dropped: their AETH was not an ACK."},
      {"rx_rnr_naks_invalid", "RNR NAKs refused: for a request that takes no receive WQE."},
      {"rx_cnp_ignored", "CNPs ignored: for no QP, or not from the QP's peer."},
      {"rx_sr_unnegotiated", "Packets refused: selective-repeat bit before it was negotiated."},
      {"rx_ooo_conflicts", "Two different copies of one kept PSN, both dropped."},
      {"rx_ooo_forgery_detected", "Duplicates differing from the kept copy that ran (QP failed)."},
      {"tx_naks_rd_atomic_limit", "READ/atomic requests NAKed: no responder resources granted."},
      {"tx_bytes", "Bytes of the packets built by the engine (BTH to ICRC, any path)."},
      {"rx_bytes", "Bytes of the packets dispatched to the engine (BTH to ICRC, any path)."},
      {"send_cqe_errors", "Send completions with an error status (flushes apart)."},
      {"recv_cqe_errors", "Receive completions with an error status (flushes apart)."},
      {"send_cqe_flushes", "Send completions flushed (WR_FLUSH_ERR)."},
      {"recv_cqe_flushes", "Receive completions flushed (WR_FLUSH_ERR)."},
      {"retry_exceeded_errors", "Send completions with RETRY_EXC_ERR (retry count exhausted)."},
      {"rnr_retry_exceeded_errors", "Send completions with RNR_RETRY_EXC_ERR (RNR retries exhausted)."},
  };
  const auto it = help.find(name);
  return it != help.end() ? it->second : "softrnic counter " + name + ".";
}

std::string QpCounterHelp(const std::string& name) {
  // From the field comments of engine::QpCounters (src/engine/qp_counters.h).
  static const std::map<std::string, std::string> help = {
      {"tx_packets", "Packets the QP sent (requests, ACKs, responses)."},
      {"tx_bytes", "Bytes of the packets the QP sent (BTH to ICRC)."},
      {"rx_packets", "Packets accepted for the QP."},
      {"rx_bytes", "Bytes of the packets accepted for the QP (BTH to ICRC)."},
      {"tx_retransmit_packets", "Request packets the QP sent again."},
      {"retransmit_timeouts", "Local ACK Timeout expiries of the QP."},
      {"tx_naks", "NAKs the QP sent (sequence, invalid request, access, operational)."},
      {"tx_rnr_naks", "Receiver-not-ready NAKs the QP sent."},
      {"rx_naks", "NAKs the QP received."},
      {"rx_rnr_naks", "Receiver-not-ready NAKs the QP received."},
      {"shm_direct_ops", "One-sided operations the QP did directly on a same-host peer's memory."},
      {"shm_direct_bytes", "Bytes the QP moved by direct one-sided operations."},
      {"cqe_errors", "Completions of the QP with an error status (flushes apart)."},
      {"cqe_flushes", "Completions of the QP flushed (WR_FLUSH_ERR)."},
  };
  const auto it = help.find(name);
  return it != help.end() ? it->second : "softrnic per-QP counter " + name + ".";
}

}  // namespace softrnic::tools
