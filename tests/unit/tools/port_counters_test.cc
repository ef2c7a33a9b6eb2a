// The `softrnic` tool's pure parts: the sysfs port counter files computed
// from stats-file counters (port_counters.h), their accumulation over
// processes that come and go, and the per-QP Prometheus families
// (prometheus_format.h).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/observe/stats_publisher.h"
#include "port_counters.h"
#include "prometheus_format.h"

namespace softrnic::tools {
namespace {

std::map<std::string, uint64_t> AsMap(const std::vector<std::pair<std::string, uint64_t>>& v) {
  std::map<std::string, uint64_t> m;
  for (const auto& [k, x] : v) {
    EXPECT_TRUE(m.emplace(k, x).second) << "file listed twice: " << k;
  }
  return m;
}

TEST(PortCounterFilesTest, StandardFilesFromCounters) {
  const CounterTotals t = {{"tx_packets", 10},          {"rx_packets", 12},
                           {"tx_bytes", 4003},          {"rx_bytes", 800},
                           {"shm_direct_write_bytes", 1}, {"shm_direct_read_bytes", 400},
                           {"rx_duplicates", 3},        {"rx_rnr_naks", 4},
                           {"tx_rnr_naks", 5},          {"rx_dropped_parse", 1},
                           {"udp_rx_icrc_errors", 2},   {"send_cqe_errors", 6},
                           {"retry_exceeded_errors", 7}, {"rx_cnp", 3},
                           {"rx_cnp_ignored", 1}};
  const auto f = AsMap(PortCounterFiles(t));
  EXPECT_EQ(f.at("counters/port_xmit_data"), (4003u + 1u) / 4) << "4-byte words";
  EXPECT_EQ(f.at("counters/port_rcv_data"), (800u + 400u) / 4);
  EXPECT_EQ(f.at("counters/port_xmit_packets"), 10u);
  EXPECT_EQ(f.at("counters/port_rcv_packets"), 12u);
  EXPECT_EQ(f.at("counters/unicast_rcv_packets"), 12u);
  EXPECT_EQ(f.at("counters/multicast_rcv_packets"), 0u);
  EXPECT_EQ(f.at("counters/port_rcv_errors"), 3u);
  EXPECT_EQ(f.at("counters/symbol_error"), 0u);
  EXPECT_EQ(f.at("hw_counters/sent_pkts"), 10u);
  EXPECT_EQ(f.at("hw_counters/rcvd_pkts"), 12u);
  EXPECT_EQ(f.at("hw_counters/duplicate_request"), 3u);
  EXPECT_EQ(f.at("hw_counters/rcvd_rnr_err"), 4u);
  EXPECT_EQ(f.at("hw_counters/send_rnr_err"), 5u);
  EXPECT_EQ(f.at("hw_counters/req_cqe_error"), 6u);
  EXPECT_EQ(f.at("hw_counters/retry_exceeded_err"), 7u);
  EXPECT_EQ(f.at("hw_counters/rp_cnp_handled"), 2u);
  // Every file node_exporter's collector (prometheus/procfs) reads in
  // counters/ for a port, and ib_core creates.
  for (const char* name :
       {"excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
        "local_link_integrity_errors", "multicast_xmit_packets", "port_rcv_constraint_errors",
        "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
        "port_xmit_constraint_errors", "port_xmit_discards", "port_xmit_wait",
        "unicast_xmit_packets", "VL15_dropped"})
    EXPECT_EQ(f.count(std::string("counters/") + name), 1u) << name;
  // Nothing counted yet: every file is 0.
  for (const auto& [name, v] : PortCounterFiles({})) EXPECT_EQ(v, 0u) << name;
}

engine::StatsFile File(const std::string& path, uint64_t tx) {
  engine::StatsFile f;
  f.path = path;
  f.counters = {{"tx_packets", tx}};
  return f;
}

// A port's counters never go backwards: an exited process's last values
// stay, and so do those of a file whose counters restarted.

TEST(PortCounterFilesTest, MulticastIsCountedApartFromUnicast) {
  const CounterTotals t = {{"tx_packets", 10}, {"rx_packets", 12},
                           {"tx_multicast_packets", 3}, {"rx_multicast_packets", 5}};
  const auto f = AsMap(PortCounterFiles(t));
  EXPECT_EQ(f.at("counters/port_xmit_packets"), 10u);
  EXPECT_EQ(f.at("counters/unicast_xmit_packets"), 7u);
  EXPECT_EQ(f.at("counters/multicast_xmit_packets"), 3u);
  EXPECT_EQ(f.at("counters/unicast_rcv_packets"), 7u);
  EXPECT_EQ(f.at("counters/multicast_rcv_packets"), 5u);
}
TEST(PortCounterAccumulatorTest, MonotonicAsProcessesComeAndGo) {
  PortCounterAccumulator acc;
  EXPECT_EQ(acc.Update({File("a", 5), File("b", 7)}).at("tx_packets"), 12u);
  EXPECT_EQ(acc.Update({File("a", 6), File("b", 9)}).at("tx_packets"), 15u);
  EXPECT_EQ(acc.Update({File("b", 10)}).at("tx_packets"), 16u) << "a exited at 6";
  EXPECT_EQ(acc.Update({File("b", 2)}).at("tx_packets"), 18u) << "b restarted after 10";
  EXPECT_EQ(acc.Update({}).at("tx_packets"), 18u);
}

engine::StatsFile WithQps() {
  engine::StatsFile f;
  f.pid = 42;
  f.owner = 1000;
  f.device = "softrnic0";
  f.counters = {{"tx_packets", 9}};
  f.has_qps = true;
  f.live_qps = 2;
  engine::StatsFile::Qp a;
  a.qpn = 17;
  a.type = "rc";
  a.state = "RTS";
  a.peer_gid = "::ffff:127.0.0.2";
  a.peer_qpn = "18";
  a.counters = {{"tx_packets", 5}, {"rx_packets", 4}};
  engine::StatsFile::Qp b = a;
  b.qpn = 19;
  b.state = "ERR\"\n";
  b.counters = {{"tx_packets", 4}, {"bad name", 1}};
  engine::StatsFile::Qp dup = a;  // a forged second line for QP 17
  dup.counters = {{"tx_packets", 999}};
  f.qps = {a, b, dup};
  return f;
}

TEST(PrometheusQpTest, FamiliesPerQpOnlyWhenAskedFor) {
  const std::string without = FormatPrometheus({WithQps()});
  EXPECT_EQ(without.find("softrnic_qp_"), std::string::npos);
  const std::string text = FormatPrometheus({WithQps()}, true);
  const std::string labels = "pid=\"42\",uid=\"1000\",device=\"softrnic0\",port=\"1\"";
  EXPECT_NE(text.find("# TYPE softrnic_qp_tx_packets_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("softrnic_qp_tx_packets_total{" + labels + ",qpn=\"17\",type=\"rc\"} 5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("softrnic_qp_tx_packets_total{" + labels + ",qpn=\"19\",type=\"rc\"} 4\n"),
            std::string::npos);
  EXPECT_NE(text.find("softrnic_qp_rx_packets_total{" + labels + ",qpn=\"17\",type=\"rc\"} 4\n"),
            std::string::npos);
  EXPECT_EQ(text.find("} 999"), std::string::npos) << "a QP listed twice: the first line wins";
  EXPECT_EQ(text.find("bad name"), std::string::npos);
  EXPECT_NE(text.find("softrnic_qp_info{" + labels +
                      ",qpn=\"19\",type=\"rc\",state=\"ERR\\\"\\n\",peer_gid=\"::ffff:127.0.0.2\","
                      "peer_qpn=\"18\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# HELP softrnic_qp_tx_packets_total Packets the QP sent"), std::string::npos);
}

}  // namespace
}  // namespace softrnic::tools
