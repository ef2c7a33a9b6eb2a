// EngineConfig from the environment (engine_config.h): the table's defaults
// are the struct's defaults, each variable lands in its field, and only an
// unknown SOFTRNIC_TRANSPORT fails.
#include <gtest/gtest.h>

#include <string>

#include "config/variables.h"
#include "engine/engine_config.h"

namespace softrnic::engine {
namespace {

EngineConfig Parse(config::Environment::Values values) {
  EngineConfig c;
  std::string error;
  EXPECT_TRUE(EngineConfig::FromEnvironment(config::Environment(std::move(values)), &c, &error))
      << error;
  return c;
}

void ExpectSame(const EngineConfig& a, const EngineConfig& b) {
  EXPECT_EQ(a.transport_mode, b.transport_mode);
  EXPECT_EQ(a.udp.bind_addresses, b.udp.bind_addresses);
  EXPECT_EQ(a.udp.port, b.udp.port);
  EXPECT_EQ(a.udp.faults.enabled(), b.udp.faults.enabled());
  EXPECT_EQ(a.udp.segmentation, b.udp.segmentation);
  EXPECT_EQ(a.udp.reply_sockets, b.udp.reply_sockets);
  EXPECT_EQ(a.mtu, b.mtu);
  EXPECT_EQ(a.selective, b.selective);
  EXPECT_EQ(a.cc.enabled, b.cc.enabled);
  EXPECT_EQ(a.cc.algorithm, b.cc.algorithm);
  EXPECT_EQ(a.cc.target_us, b.cc.target_us);
  EXPECT_EQ(a.cc.aimd_delay_cuts, b.cc.aimd_delay_cuts);
  EXPECT_EQ(a.ack_delay, b.ack_delay);
  EXPECT_EQ(a.tx_batch, b.tx_batch);
  EXPECT_EQ(a.zerocopy_tx, b.zerocopy_tx);
  EXPECT_EQ(a.shm_direct, b.shm_direct);
  EXPECT_EQ(a.spin_us, b.spin_us);
  EXPECT_EQ(a.progress_realtime, b.progress_realtime);
  EXPECT_EQ(a.placement_away, b.placement_away);
  EXPECT_EQ(a.stats_at_exit, b.stats_at_exit);
  EXPECT_EQ(a.stats_shm, b.stats_shm);
  EXPECT_EQ(a.stats_dir, b.stats_dir);
}

// The defaults in the table (what docs/configuration.md says) and in the
// struct (what a test's EngineConfig{} gets) are the same settings.
TEST(EngineConfigTest, TableDefaultsAreTheStructDefaults) {
  ExpectSame(Parse({}), EngineConfig{});
  config::Environment::Values all;
  for (const config::Variable& v : config::Variables())
    if (v.kind != config::Kind::kText || v.default_value.starts_with('/'))
      all.emplace(std::string(v.name), std::string(v.default_value));
  ExpectSame(Parse(all), EngineConfig{});
}

TEST(EngineConfigTest, EachVariableLandsInItsField) {
  const EngineConfig c = Parse({{"SOFTRNIC_TRANSPORT", "udp"},
                                {"SOFTRNIC_BIND", "127.0.0.9"},
                                {"SOFTRNIC_PORT", "4999"},
                                {"SOFTRNIC_REPLY_SOCKET", "0"},
                                {"SOFTRNIC_MTU", "4096"},
                                {"SOFTRNIC_RETRANSMIT", "gbn"},
                                {"SOFTRNIC_CC", "delay"},
                                {"SOFTRNIC_CC_TARGET_US", "50"},
                                {"SOFTRNIC_CC_DELAY", "1"},
                                {"SOFTRNIC_ACK_DELAY_US", "700"},
                                {"SOFTRNIC_TX_BATCH", "0"},
                                {"SOFTRNIC_ZEROCOPY_TX", "0"},
                                {"SOFTRNIC_SHM_DIRECT", "0"},
                                {"SOFTRNIC_SPIN_US", "50"},
                                {"SOFTRNIC_PROGRESS_RT", "1"},
                                {"SOFTRNIC_PLACEMENT", "away"},
                                {"SOFTRNIC_STATS", "1"},
                                {"SOFTRNIC_STATS_SHM", "0"},
                                {"SOFTRNIC_STATS_DIR", "/tmp/s"}});
  EXPECT_EQ(c.transport_mode, transport::TransportMode::kUdp);
  EXPECT_EQ(c.udp.bind_addresses, std::vector<std::string>{"127.0.0.9"});
  EXPECT_EQ(c.udp.port, 4999);
  EXPECT_FALSE(c.udp.reply_sockets);
  EXPECT_EQ(c.mtu, Mtu::k4096);
  EXPECT_FALSE(c.selective);
  EXPECT_EQ(c.cc.algorithm, CcAlgorithm::kDelayWindow);
  EXPECT_EQ(c.cc.target_us, 50);
  EXPECT_TRUE(c.cc.aimd_delay_cuts);
  EXPECT_EQ(c.ack_delay, std::chrono::microseconds(500));  // capped, as before the table
  EXPECT_FALSE(c.tx_batch);
  EXPECT_FALSE(c.zerocopy_tx);
  EXPECT_FALSE(c.shm_direct);
  EXPECT_EQ(c.spin_us, 50u);
  EXPECT_TRUE(c.progress_realtime);
  EXPECT_TRUE(c.placement_away);
  EXPECT_TRUE(c.stats_at_exit);
  EXPECT_FALSE(c.stats_shm);
  EXPECT_EQ(c.stats_dir, "/tmp/s");
}

TEST(EngineConfigTest, OnlyAnUnknownTransportFails) {
  EngineConfig c;
  std::string error;
  EXPECT_FALSE(EngineConfig::FromEnvironment(config::Environment(config::Environment::Values{{"SOFTRNIC_TRANSPORT", "tcp"}}),
                                             &c, &error));
  EXPECT_NE(error.find("SOFTRNIC_TRANSPORT=tcp"), std::string::npos) << error;
  EXPECT_NE(error.find("udp"), std::string::npos) << error;
  ::testing::internal::CaptureStderr();
  c = Parse({{"SOFTRNIC_MTU", "1500"}, {"SOFTRNIC_RETRANSMIT", "sack"}});
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(c.mtu.has_value());  // the default: derived from the links
  EXPECT_TRUE(c.selective);
  EXPECT_NE(said.find("ignoring SOFTRNIC_MTU=1500"), std::string::npos) << said;
  EXPECT_NE(said.find("ignoring SOFTRNIC_RETRANSMIT=sack"), std::string::npos) << said;
}

}  // namespace
}  // namespace softrnic::engine
