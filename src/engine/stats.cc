#include "engine/stats.h"

#include <sstream>

namespace softrnic::engine {

std::string FormatStats(const EngineStats& s, const transport::TransportCounters& t) {
  std::ostringstream o;
  const auto line = [&o](const char* name, uint64_t v) { o << "softrnic " << name << ' ' << v << '\n'; };
  line("rx_packets", s.rx_packets);
  line("tx_packets", s.tx_packets);
  line("rx_dropped_parse", s.rx_dropped_parse);
  line("rx_dropped_unknown_qp", s.rx_dropped_unknown_qp);
  line("rx_dropped_qp_state", s.rx_dropped_qp_state);
  line("rx_dropped_source", s.rx_dropped_source);
  line("rx_dropped_service", s.rx_dropped_service);
  line("rx_dropped_pkey", s.rx_dropped_pkey);
  line("rx_dropped_qkey", s.rx_dropped_qkey);
  line("rx_dropped_no_recv", s.rx_dropped_no_recv);
  line("tx_multicast_packets", s.tx_multicast_packets);
  line("rx_multicast_packets", s.rx_multicast_packets);
  line("rx_dropped_invalid", s.rx_dropped_invalid);
  line("rx_duplicates", s.rx_duplicates);
  line("rx_out_of_sequence", s.rx_out_of_sequence);
  line("rx_cnp", s.rx_cnp);
  line("retransmit_timeouts", s.retransmit_timeouts);
  line("retransmit_rewinds", s.retransmitted_rewinds);
  line("tx_naks_sequence", s.tx_naks_sequence);
  line("tx_naks_invalid_request", s.tx_naks_invalid_request);
  line("tx_naks_remote_access", s.tx_naks_remote_access);
  line("tx_naks_remote_operational", s.tx_naks_remote_operational);
  line("tx_rnr_naks", s.tx_rnr_naks);
  line("rx_naks", s.rx_naks);
  line("rx_rnr_naks", s.rx_rnr_naks);
  line("cq_overflows", s.cq_overflows);
  line("tx_retransmit_packets", s.tx_retransmit_packets);
  line("tx_retransmit_bytes", s.tx_retransmit_bytes);
  line("retransmit_probes", s.retransmit_probes);
  line("tx_sacks", s.tx_sacks);
  line("acks_piggybacked", s.acks_piggybacked);
  line("acks_delay_expired", s.acks_delay_expired);
  line("posts_batched", s.posts_batched);
  line("rx_sacks", s.rx_sacks);
  line("rx_sacks_invalid", s.rx_sacks_invalid);
  line("rx_ooo_kept", s.rx_ooo_kept);
  line("rx_ooo_dropped", s.rx_ooo_dropped);
  line("tx_cnp", s.tx_cnp);
  line("cc_loss_cuts", s.cc_loss_cuts);
  line("cc_cnp_cuts", s.cc_cnp_cuts);
  line("cc_delay_cuts", s.cc_delay_cuts);
  line("cc_loss_ignored", s.cc_loss_ignored);
  line("udp_tx_packets", t.tx_packets);
  line("udp_tx_bytes", t.tx_bytes);
  line("udp_tx_errors", t.tx_errors);
  line("udp_tx_busy", t.tx_busy);
  line("udp_rx_packets", t.rx_packets);
  line("udp_rx_bytes", t.rx_bytes);
  line("udp_rx_icrc_errors", t.rx_icrc_errors);
  line("udp_rx_runts", t.rx_runts);
  line("udp_rx_icrc_id_retries", t.rx_icrc_id_retries);
  line("udp_rx_icrc_id_retry_crcs", t.rx_icrc_id_retry_crcs);
  line("fault_drops", t.injected_drops);
  line("fault_dups", t.injected_dups);
  line("fault_reorders", t.injected_reorders);
  line("fault_corrupts", t.injected_corrupts);
  line("shm_tx_packets", t.shm_tx_packets);
  line("shm_tx_bytes", t.shm_tx_bytes);
  line("shm_rx_packets", t.shm_rx_packets);
  line("shm_doorbells_sent", t.doorbells_sent);
  line("shm_rx_doorbells", t.rx_doorbells);
  line("shm_direct_ops", s.shm_direct_ops);
  line("shm_direct_bytes", s.shm_direct_bytes);
  line("shm_direct_write_ops", s.shm_direct_write_ops);
  line("shm_direct_write_bytes", s.shm_direct_write_bytes);
  line("shm_direct_read_ops", s.shm_direct_read_ops);
  line("shm_direct_read_bytes", s.shm_direct_read_bytes);
  line("shm_direct_atomic_ops", s.shm_direct_atomic_ops);
  line("rx_dropped_source_port", s.rx_dropped_source_port);
  line("rx_responses_unsent", s.rx_responses_unsent);
  line("rx_responses_stale", s.rx_responses_stale);
  line("rx_rnr_naks_invalid", s.rx_rnr_naks_invalid);
  line("rx_cnp_ignored", s.rx_cnp_ignored);
  line("rx_sr_unnegotiated", s.rx_sr_unnegotiated);
  line("rx_ooo_conflicts", s.rx_ooo_conflicts);
  line("rx_ooo_forgery_detected", s.rx_ooo_forgery_detected);
  line("tx_naks_rd_atomic_limit", s.tx_naks_rd_atomic_limit);
  line("tx_bytes", s.tx_bytes);
  line("rx_bytes", s.rx_bytes);
  line("send_cqe_errors", s.send_cqe_errors);
  line("recv_cqe_errors", s.recv_cqe_errors);
  line("send_cqe_flushes", s.send_cqe_flushes);
  line("recv_cqe_flushes", s.recv_cqe_flushes);
  line("retry_exceeded_errors", s.retry_exceeded_errors);
  line("rnr_retry_exceeded_errors", s.rnr_retry_exceeded_errors);
  return o.str();
}

}  // namespace softrnic::engine
