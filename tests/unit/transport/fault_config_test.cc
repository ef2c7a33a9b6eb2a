// FaultConfig parsing, the deterministic fault injector, UdpConfig from
// environment values and the per-process loopback address scheme. No sockets.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "config/environment.h"
#include "transport/fault_injector.h"
#include "transport/udp_transport.h"

namespace softrnic::transport {
namespace {

TEST(FaultConfigParse, AcceptsFullSpec) {
  FaultConfig c;
  ASSERT_TRUE(FaultConfig::Parse("drop=0.01,dup=0.02,reorder=0.03,corrupt=0.001,seed=7", &c));
  EXPECT_DOUBLE_EQ(c.drop, 0.01);
  EXPECT_DOUBLE_EQ(c.duplicate, 0.02);
  EXPECT_DOUBLE_EQ(c.reorder, 0.03);
  EXPECT_DOUBLE_EQ(c.corrupt, 0.001);
  EXPECT_EQ(c.seed, 7u);
  EXPECT_TRUE(c.enabled());
}

TEST(FaultConfigParse, AcceptsSubsetsSpacesAliasesAndHexSeed) {
  FaultConfig c;
  ASSERT_TRUE(FaultConfig::Parse(" duplicate = 1 , seed=0x10,", &c));
  EXPECT_DOUBLE_EQ(c.duplicate, 1.0);
  EXPECT_DOUBLE_EQ(c.drop, 0.0);
  EXPECT_EQ(c.seed, 16u);
  ASSERT_TRUE(FaultConfig::Parse("drop=0", &c));
  EXPECT_FALSE(c.enabled());
  EXPECT_EQ(c.seed, 1u);  // parse starts from defaults
  ASSERT_TRUE(FaultConfig::Parse("", &c));
  EXPECT_FALSE(c.enabled());
}

TEST(FaultConfigParse, RejectsBadInputAndLeavesOutputAlone) {
  const char* bad[] = {"drop",      "drop=",
                       "drop=abc",  "drop=1.5",
                       "drop=-0.1", "drop=nan",
                       "drop=inf",  "dropp=0.1",
                       "drop=0.1x", "seed=-1",
                       "seed=abc",  "seed=99999999999999999999",
                       ",",         "drop=0.1,,dup=0.1",
                       "=0.1",      "corrupt=0.1;seed=2"};
  for (const char* text : bad) {
    FaultConfig c;
    c.drop = 0.25;
    c.seed = 99;
    EXPECT_FALSE(FaultConfig::Parse(text, &c)) << text;
    EXPECT_DOUBLE_EQ(c.drop, 0.25) << text;
    EXPECT_EQ(c.seed, 99u) << text;
  }
}

TEST(FaultInjector, RatesMatchConfiguration) {
  FaultConfig c;
  c.drop = 0.10;
  c.duplicate = 0.05;
  c.reorder = 0.02;
  c.corrupt = 0.01;
  c.seed = 12345;
  FaultInjector f(c);
  const int n = 200000;
  int drops = 0, dups = 0, reorders = 0, corrupts = 0;
  for (int i = 0; i < n; ++i) {
    const FaultDecision d = f.Next(1024);
    if (d.drop) {
      ++drops;
      EXPECT_FALSE(d.corrupt || d.duplicate || d.reorder);
      continue;
    }
    dups += d.duplicate;
    reorders += d.reorder;
    if (d.corrupt) {
      ++corrupts;
      ASSERT_LT(d.corrupt_byte, 1024u - 4);  // never the ICRC
      ASSERT_NE(d.corrupt_byte, 4u);         // never the ICRC-masked BTH byte
      ASSERT_EQ(__builtin_popcount(d.corrupt_mask), 1);
    }
  }
  auto near = [](int count, double trials, double p) {
    const double sigma = std::sqrt(trials * p * (1 - p));
    return std::abs(count - trials * p) < 5 * sigma;
  };
  EXPECT_TRUE(near(drops, n, 0.10)) << drops;
  const double kept = n - drops;
  EXPECT_TRUE(near(dups, kept, 0.05)) << dups;
  EXPECT_TRUE(near(reorders, kept, 0.02)) << reorders;
  EXPECT_TRUE(near(corrupts, kept, 0.01)) << corrupts;
}

TEST(FaultInjector, DeterministicPerSeed) {
  FaultConfig c;
  c.drop = 0.3;
  c.duplicate = 0.3;
  c.reorder = 0.3;
  c.corrupt = 0.3;
  c.seed = 7;
  FaultInjector a(c), b(c);
  c.seed = 8;
  FaultInjector other(c);
  int differences = 0;
  for (int i = 0; i < 10000; ++i) {
    const FaultDecision x = a.Next(200), y = b.Next(200), z = other.Next(200);
    ASSERT_EQ(x.drop, y.drop);
    ASSERT_EQ(x.duplicate, y.duplicate);
    ASSERT_EQ(x.reorder, y.reorder);
    ASSERT_EQ(x.corrupt, y.corrupt);
    ASSERT_EQ(x.corrupt_byte, y.corrupt_byte);
    ASSERT_EQ(x.corrupt_mask, y.corrupt_mask);
    differences += (x.drop != z.drop) || (x.duplicate != z.duplicate) || (x.reorder != z.reorder);
  }
  EXPECT_GT(differences, 1000);  // another seed gives another sequence
}

TEST(FaultInjector, DisabledByDefault) {
  FaultInjector f(FaultConfig{});
  EXPECT_FALSE(f.enabled());
  for (int i = 0; i < 1000; ++i) {
    const FaultDecision d = f.Next(64);
    ASSERT_FALSE(d.drop || d.duplicate || d.reorder || d.corrupt);
  }
}

TEST(UdpConfigParse, ReadsAllThreeVariables) {
  UdpConfig c;
  std::string error;
  ASSERT_TRUE(ParseUdpConfig("10.0.0.1, 127.0.0.2", "5000", "drop=0.5,seed=3", &c, &error))
      << error;
  ASSERT_EQ(c.bind_addresses.size(), 2u);
  EXPECT_EQ(c.bind_addresses[0], "10.0.0.1");
  EXPECT_EQ(c.bind_addresses[1], "127.0.0.2");
  EXPECT_EQ(c.port, 5000);
  EXPECT_DOUBLE_EQ(c.faults.drop, 0.5);
  EXPECT_EQ(c.faults.seed, 3u);
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
  }
}

TEST(UdpConfigFromEnvironment, ReadsEnvironment) {
  const UdpConfig c = UdpConfigFromEnvironment(config::Environment({{"SOFTRNIC_BIND", "127.0.0.5"},
                                                                    {"SOFTRNIC_PORT", "4800"},
                                                                    {"SOFTRNIC_FAULTS", "corrupt=0.25"},
                                                                    {"SOFTRNIC_GSO", "0"}}));
  ASSERT_EQ(c.bind_addresses.size(), 1u);
  EXPECT_EQ(c.bind_addresses[0], "127.0.0.5");
  EXPECT_EQ(c.port, 4800);
  EXPECT_DOUBLE_EQ(c.faults.corrupt, 0.25);
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
