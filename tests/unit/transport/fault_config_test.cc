// UdpConfig from environment values (the fault scenario among them: its
// readers are tested in tests/unit/faults, the plan in fault_plan_test.cc),
// a bad scenario failing the transport's creation, and the per-process
// loopback address scheme. No sockets.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "config/environment.h"
#include "transport/factory.h"
#include "transport/udp_transport.h"

namespace softrnic::transport {
namespace {

TEST(UdpConfigParse, ReadsAllThreeVariables) {
  UdpConfig c;
  std::string error;
  ASSERT_TRUE(ParseUdpConfig("10.0.0.1, 127.0.0.2", "5000", "drop=0.5,seed=3", &c, &error))
      << error;
  ASSERT_EQ(c.bind_addresses.size(), 2u);
  EXPECT_EQ(c.bind_addresses[0], "10.0.0.1");
  EXPECT_EQ(c.bind_addresses[1], "127.0.0.2");
  EXPECT_EQ(c.port, 5000);
  ASSERT_EQ(c.faults.rules.size(), 1u);
  EXPECT_DOUBLE_EQ(c.faults.rules[0].action.drop, 0.5);
  EXPECT_EQ(c.faults.seed, 3u);
  EXPECT_TRUE(c.faults_error.empty());
}

TEST(UdpConfigParse, UnsetMeansDefaults) {
  UdpConfig c;
  std::string error;
  ASSERT_TRUE(ParseUdpConfig(nullptr, nullptr, nullptr, &c, &error));
  EXPECT_TRUE(c.bind_addresses.empty());
  EXPECT_EQ(c.port, 4791);
  EXPECT_FALSE(c.faults.enabled());
  ASSERT_TRUE(ParseUdpConfig("", " ", "", &c, &error));
  EXPECT_TRUE(c.bind_addresses.empty());
  EXPECT_EQ(c.port, 4791);
}

TEST(UdpConfigParse, RejectsBadValuesWithMessage) {
  struct Case {
    const char *bind, *port, *faults, *mentions;
  } cases[] = {
      {"10.0.0.1,", nullptr, nullptr, "SOFTRNIC_BIND"},
      {"fe80::zz", nullptr, nullptr, "SOFTRNIC_BIND"},
      {"10.0.0.300", nullptr, nullptr, "SOFTRNIC_BIND"},
      {nullptr, "65536", nullptr, "SOFTRNIC_PORT"},
      {nullptr, "-1", nullptr, "SOFTRNIC_PORT"},
      {nullptr, "47x", nullptr, "SOFTRNIC_PORT"},
      {nullptr, nullptr, "drop=2", "SOFTRNIC_FAULTS"},
  };
  for (const Case& k : cases) {
    UdpConfig c;
    std::string error;
    EXPECT_FALSE(ParseUdpConfig(k.bind, k.port, k.faults, &c, &error)) << k.mentions;
    EXPECT_NE(error.find(k.mentions), std::string::npos) << error;
    EXPECT_TRUE(c.bind_addresses.empty());
    EXPECT_EQ(c.port, 4791);
    EXPECT_FALSE(c.faults.enabled());
    // Only a bad scenario is kept for CreateTransport to fail with.
    EXPECT_EQ(c.faults_error.empty(), k.faults == nullptr) << c.faults_error;
  }
}

// Asked for faults it cannot read, a device does not come up without them:
// CreateTransport fails, saying why (before any socket is opened).
TEST(UdpConfigFromEnvironment, BadScenarioFailsTheTransportWithItsError) {
  const UdpConfig c = UdpConfigFromEnvironment(
      config::Environment({{"SOFTRNIC_BIND", "127.0.0.5"}, {"SOFTRNIC_FAULTS", "drop=2"}}));
  EXPECT_FALSE(c.faults.enabled());
  ASSERT_FALSE(c.faults_error.empty());
  std::string error;
  EXPECT_EQ(CreateTransport(c, TransportMode::kUdp, &error), nullptr);
  EXPECT_NE(error.find("fault scenario"), std::string::npos) << error;
  EXPECT_NE(error.find(c.faults_error), std::string::npos) << error;
}

TEST(UdpConfigFromEnvironment, ReadsEnvironment) {
  const UdpConfig c = UdpConfigFromEnvironment(config::Environment({{"SOFTRNIC_BIND", "127.0.0.5"},
                                                                    {"SOFTRNIC_PORT", "4800"},
                                                                    {"SOFTRNIC_FAULTS", "corrupt=0.25"},
                                                                    {"SOFTRNIC_GSO", "0"}}));
  ASSERT_EQ(c.bind_addresses.size(), 1u);
  EXPECT_EQ(c.bind_addresses[0], "127.0.0.5");
  EXPECT_EQ(c.port, 4800);
  ASSERT_EQ(c.faults.rules.size(), 1u);
  EXPECT_DOUBLE_EQ(c.faults.rules[0].action.corrupt, 0.25);
  EXPECT_FALSE(c.segmentation);
  EXPECT_TRUE(c.reply_sockets);
}

TEST(PerProcessLoopback, DistinctPerPidAndNeverDefaultLoopback) {
  std::vector<bool> seen(1u << 24);                  // indexed by the low 24 bits (a.b.c)
  for (uint32_t pid = 1; pid < (1u << 22); ++pid) {  // Linux's pid_max limit is 2^22
    const uint32_t a = PerProcessLoopbackAddress(pid, 0);
    ASSERT_EQ(a >> 24, 127u);
    ASSERT_NE((a >> 16) & 0xff, 0u) << pid;  // never 127.0.x.x, so never 127.0.0.1
    ASSERT_FALSE(seen[a & 0xFFFFFF]) << "two pids share an address, pid " << pid;
    seen[a & 0xFFFFFF] = true;
  }
  // Exact formula for one pid: 0x012345 -> 127.(1+1).0x23.0x45.
  EXPECT_EQ(PerProcessLoopbackAddress(0x012345, 0),
            (127u << 24) | (2u << 16) | (0x23u << 8) | 0x45u);
  // Later attempts differ from the first and from each other.
  std::set<uint32_t> attempts;
  for (uint32_t k = 0; k < 16; ++k) {
    const uint32_t a = PerProcessLoopbackAddress(4242, k);
    ASSERT_NE((a >> 16) & 0xff, 0u);
    ASSERT_NE(a, 0x7FFFFFFFu);  // 127.255.255.255
    attempts.insert(a);
  }
  EXPECT_EQ(attempts.size(), 16u);
}

}  // namespace
}  // namespace softrnic::transport
