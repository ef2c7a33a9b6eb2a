#include "port_counters.h"

#include <algorithm>

namespace softrnic::tools {
namespace {

uint64_t Get(const CounterTotals& t, const char* name) {
  const auto it = t.find(name);
  return it == t.end() ? 0 : it->second;
}

}  // namespace

std::vector<std::pair<std::string, uint64_t>> PortCounterFiles(const CounterTotals& t) {
  const auto g = [&t](const char* name) { return Get(t, name); };
  const uint64_t tx = g("tx_packets"), rx = g("rx_packets");
  const uint64_t tx_mc = g("tx_multicast_packets"), rx_mc = g("rx_multicast_packets");
  // counters/: every file ib_core's sysfs.c creates for a port with the
  // extended PMA counters (pma_attrs_ext), in its order. Multicast: UD
  // datagrams to a group (engine/queues/multicast.h); the rest is unicast.
  std::vector<std::pair<std::string, uint64_t>> files = {
      {"counters/symbol_error", 0},
      {"counters/link_error_recovery", 0},
      {"counters/link_downed", 0},
      // Packets that arrived malformed: headers that do not parse, a bad
      // ICRC, a datagram too short to be a packet.
      {"counters/port_rcv_errors",
       g("rx_dropped_parse") + g("udp_rx_icrc_errors") + g("udp_rx_runts")},
      {"counters/port_rcv_remote_physical_errors", 0},
      {"counters/port_rcv_switch_relay_errors", 0},
      {"counters/port_xmit_discards", g("udp_tx_errors")},
      {"counters/port_xmit_constraint_errors", 0},
      {"counters/port_rcv_constraint_errors", g("rx_dropped_pkey")},  // partition check
      {"counters/local_link_integrity_errors", 0},
      {"counters/excessive_buffer_overrun_errors", 0},
      {"counters/VL15_dropped", 0},
      {"counters/port_xmit_data",
       (g("tx_bytes") + g("shm_direct_write_bytes") + g("shm_placed_write_bytes")) / 4},
      {"counters/port_rcv_data", (g("rx_bytes") + g("shm_direct_read_bytes")) / 4},
      {"counters/port_xmit_packets", tx},
      {"counters/port_rcv_packets", rx},
      {"counters/port_xmit_wait", 0},
      {"counters/unicast_xmit_packets", tx - std::min(tx, tx_mc)},
      {"counters/unicast_rcv_packets", rx - std::min(rx, rx_mc)},
      {"counters/multicast_xmit_packets", tx_mc},
      {"counters/multicast_rcv_packets", rx_mc},
  };
  // hw_counters/: rxe's names (rxe_hw_counters.c) for what rxe counts too,
  // then mlx5's names (what prometheus/procfs reads) for the rest.
  const std::vector<std::pair<std::string, uint64_t>> hw = {
      {"sent_pkts", tx},
      {"rcvd_pkts", rx},
      {"duplicate_request", g("rx_duplicates")},
      {"out_of_seq_request", g("rx_out_of_sequence")},
      {"rcvd_rnr_err", g("rx_rnr_naks")},
      {"send_rnr_err", g("tx_rnr_naks")},
      {"rcvd_seq_err", g("rx_naks")},  // every NAK received: softrnic does not count them by code
      {"retry_exceeded_err", g("retry_exceeded_errors")},
      {"retry_rnr_exceeded_err", g("rnr_retry_exceeded_errors")},
      {"completer_retry_err", g("retransmit_timeouts") + g("retransmit_rewinds")},
      {"send_err", g("udp_tx_errors")},
      {"link_downed", 0},
      {"local_ack_timeout_err", g("retransmit_timeouts")},
      {"out_of_sequence", g("rx_out_of_sequence")},
      {"packet_seq_err", g("tx_naks_sequence")},
      {"out_of_buffer", g("rx_dropped_no_recv")},
      {"rnr_nak_retry_err", g("rnr_retry_exceeded_errors")},
      {"req_cqe_error", g("send_cqe_errors")},
      {"req_cqe_flush_error", g("send_cqe_flushes")},
      {"resp_cqe_error", g("recv_cqe_errors")},
      {"resp_cqe_flush_error", g("recv_cqe_flushes")},
      {"resp_remote_access_errors", g("tx_naks_remote_access")},
      {"np_cnp_sent", g("tx_cnp")},
      {"rp_cnp_handled", g("rx_cnp") - std::min(g("rx_cnp"), g("rx_cnp_ignored"))},
      {"rp_cnp_ignored", g("rx_cnp_ignored")},
  };
  for (const auto& [name, v] : hw) files.emplace_back("hw_counters/" + name, v);
  return files;
}

CounterTotals PortCounterAccumulator::Update(const std::vector<engine::StatsFile>& files) {
  std::map<std::string, CounterTotals> now;
  for (const engine::StatsFile& f : files) {
    CounterTotals& c = now[f.path];
    for (const auto& [name, v] : f.counters) c[name] = v;  // the last line of a name wins
  }
  auto retire = [this](const CounterTotals& gone) {
    for (const auto& [name, v] : gone) departed_[name] += v;
  };
  for (const auto& [path, old] : last_) {
    const auto it = now.find(path);
    bool restarted = it == now.end();
    for (const auto& [name, v] : old)
      if (!restarted && Get(it->second, name.c_str()) < v) restarted = true;
    if (restarted) retire(old);
  }
  CounterTotals totals = departed_;
  for (const auto& [path, c] : now)
    for (const auto& [name, v] : c) totals[name] += v;
  last_ = std::move(now);
  return totals;
}

}  // namespace softrnic::tools
