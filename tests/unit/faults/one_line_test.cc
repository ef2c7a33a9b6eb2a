// The one-line form (src/faults/one_line.cc): every key, the old
// SOFTRNIC_FAULTS strings (tests/unit/transport/fault_config_test.cc)
// unchanged in meaning, and errors that name the key.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "expect_contains.h"
#include "faults/scenario_parse.h"

namespace softrnic::faults {
namespace {

// The one rule of a line that must parse.
Rule OnlyRule(const std::string& text) {
  const ParseResult r = ParseOneLine(text);
  EXPECT_TRUE(r.ok) << text << ": " << r.error;
  EXPECT_EQ(r.scenario.rules.size(), 1u) << text;
  return r.scenario.rules.empty() ? Rule{} : r.scenario.rules[0];
}

void ExpectError(const std::string& text, const std::string& mentions) {
  const ParseResult r = ParseOneLine(text);
  EXPECT_FALSE(r.ok) << text;
  EXPECT_CONTAINS(r.error, mentions) << text;
  EXPECT_TRUE(r.scenario.rules.empty()) << text;
  EXPECT_EQ(r.scenario.seed, 1u) << text;
}

TEST(OneLine, OldStringsKeepTheirMeaning) {
  const ParseResult r = ParseOneLine("drop=0.01,dup=0.02,reorder=0.03,corrupt=0.001,seed=7");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.scenario.seed, 7u);
  ASSERT_EQ(r.scenario.rules.size(), 1u);
  const Rule& rule = r.scenario.rules[0];
  EXPECT_EQ(rule.name, "rule 1");
  EXPECT_EQ(rule.line, 0);
  EXPECT_EQ(rule.match.direction, Direction::kBoth);
  EXPECT_EQ(rule.match.classes, kAllClasses);
  EXPECT_DOUBLE_EQ(rule.action.drop, 0.01);
  EXPECT_DOUBLE_EQ(rule.action.duplicate, 0.02);
  EXPECT_DOUBLE_EQ(rule.action.reorder, 0.03);
  EXPECT_DOUBLE_EQ(rule.action.corrupt, 0.001);
  EXPECT_EQ(rule.action.reorder_depth, 1u);

  // Blanks, the `duplicate` alias, hex seeds and one trailing comma.
  const ParseResult spaced = ParseOneLine(" duplicate = 1 , seed=0x10,");
  ASSERT_TRUE(spaced.ok) << spaced.error;
  EXPECT_EQ(spaced.scenario.seed, 16u);
  ASSERT_EQ(spaced.scenario.rules.size(), 1u);
  EXPECT_DOUBLE_EQ(spaced.scenario.rules[0].action.duplicate, 1.0);
  EXPECT_DOUBLE_EQ(OnlyRule("corrupt=1e-4").action.corrupt, 1e-4);
}

TEST(OneLine, NothingToDoIsNoScenario) {
  for (const char* text : {"", " ", "drop=0", "seed=5", "drop=0,dir=out"}) {
    const ParseResult r = ParseOneLine(text);
    EXPECT_TRUE(r.ok) << text << ": " << r.error;
    EXPECT_FALSE(r.scenario.enabled()) << text;
  }
  EXPECT_EQ(ParseOneLine("seed=5").scenario.seed, 5u);
}

TEST(OneLine, OldRejectionsStillRejected) {
  const char* bad[] = {"drop",     "drop=",     "drop=abc", "drop=1.5",  "drop=-0.1",
                       "drop=nan", "drop=inf",  "dropp=0.1", "drop=0.1x", "seed=-1",
                       "seed=abc", "seed=99999999999999999999", ",", "drop=0.1,,dup=0.1",
                       "=0.1",     "corrupt=0.1;seed=2"};
  for (const char* text : bad) {
    const ParseResult r = ParseOneLine(text);
    EXPECT_FALSE(r.ok) << text;
    EXPECT_FALSE(r.error.empty()) << text;
    EXPECT_FALSE(r.scenario.enabled()) << text;
  }
}

TEST(OneLine, EveryKey) {
  EXPECT_DOUBLE_EQ(OnlyRule("drop=0.5").action.drop, 0.5);
  EXPECT_DOUBLE_EQ(OnlyRule("dup=0.5").action.duplicate, 0.5);
  EXPECT_DOUBLE_EQ(OnlyRule("duplicate=0.25").action.duplicate, 0.25);
  EXPECT_DOUBLE_EQ(OnlyRule("corrupt=0.5").action.corrupt, 0.5);

  Rule r = OnlyRule("reorder=0.05,depth=3");
  EXPECT_DOUBLE_EQ(r.action.reorder, 0.05);
  EXPECT_EQ(r.action.reorder_depth, 3u);
  EXPECT_EQ(OnlyRule("reorder=0.05,reorder_depth=1024").action.reorder_depth, 1024u);

  r = OnlyRule("delay=200us,jitter=50us");
  EXPECT_EQ(r.action.delay_ns, 200000u);
  EXPECT_EQ(r.action.jitter_ns, 50000u);
  EXPECT_EQ(OnlyRule("delay=1.5s").action.delay_ns, 1500000000u);
  EXPECT_EQ(OnlyRule("delay=50ns").action.delay_ns, 50u);
  EXPECT_EQ(OnlyRule("jitter=3ms").action.jitter_ns, 3000000u);

  EXPECT_EQ(OnlyRule("rate=100MB").action.rate_bytes_per_s, 100000000u);
  EXPECT_EQ(OnlyRule("rate=100MB/s").action.rate_bytes_per_s, 100000000u);
  EXPECT_EQ(OnlyRule("rate=1Gbit/s").action.rate_bytes_per_s, 125000000u);
  EXPECT_EQ(OnlyRule("rate=800Mbit/s").action.rate_bytes_per_s, 100000000u);
  EXPECT_EQ(OnlyRule("rate=10KiB/s").action.rate_bytes_per_s, 10240u);
  EXPECT_EQ(OnlyRule("rate=12345").action.rate_bytes_per_s, 12345u);

  r = OnlyRule("dir=out,class=acks,drop=0.2");
  EXPECT_EQ(r.match.direction, Direction::kOut);
  EXPECT_EQ(r.match.classes, kAcks);
  EXPECT_EQ(OnlyRule("direction=in,drop=1").match.direction, Direction::kIn);
  EXPECT_EQ(OnlyRule("dir=both,drop=1").match.direction, Direction::kBoth);

  r = OnlyRule("peer=10.0.0.2,drop=1");
  const std::array<uint8_t, 16> v4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
  EXPECT_EQ(r.match.peer, v4);
  r = OnlyRule("peer=::1,drop=1");
  const std::array<uint8_t, 16> loopback6 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_EQ(r.match.peer, loopback6);

  EXPECT_EQ(OnlyRule("qpn=0x123,drop=1").match.qpn, 0x123u);
  EXPECT_EQ(OnlyRule("qpn=17,drop=1").match.qpn, 17u);
  EXPECT_EQ(OnlyRule("class=acks+naks+rnr-naks,drop=1").match.classes, kAcks | kNaks | kRnrNaks);
  EXPECT_EQ(OnlyRule("class=requests+read-responses+cnps+cm,drop=1").match.classes,
            kRequests | kReadResponses | kCnps | kCmMads);

  r = OnlyRule("psn=100-200,drop=1");
  EXPECT_EQ(r.match.psn_first, 100u);
  EXPECT_EQ(r.match.psn_last, 200u);
  r = OnlyRule("psn=0xfffff0-0x10,drop=1");  // may wrap
  EXPECT_EQ(r.match.psn_first, 0xfffff0u);
  EXPECT_EQ(r.match.psn_last, 0x10u);
  r = OnlyRule("psn=7,drop=1");
  EXPECT_EQ(r.match.psn_first, 7u);
  EXPECT_EQ(r.match.psn_last, 7u);

  EXPECT_EQ(OnlyRule("nth=5,drop=1").match.nth, 5u);

  r = OnlyRule("from=2s,for=300ms,drop=1");
  EXPECT_EQ(r.match.from_ns, 2000000000u);
  EXPECT_EQ(r.match.for_ns, 300000000u);

  r = OnlyRule("outage=2s+300ms");
  EXPECT_TRUE(r.action.outage);
  EXPECT_EQ(r.match.from_ns, 2000000000u);
  EXPECT_EQ(r.match.for_ns, 300000000u);

  r = OnlyRule("pause=0+1s");
  EXPECT_TRUE(r.action.pause);
  EXPECT_EQ(r.match.from_ns, 0u);
  EXPECT_EQ(r.match.for_ns, 1000000000u);

  r = OnlyRule("dir=in,class=requests,ecn=0.5");
  EXPECT_DOUBLE_EQ(r.action.ecn_mark, 0.5);
  EXPECT_EQ(r.match.direction, Direction::kIn);
  EXPECT_DOUBLE_EQ(OnlyRule("dir=in,ecn_mark=1").action.ecn_mark, 1.0);
}

TEST(OneLine, ScenarioIsNamedByItsText) {
  const ParseResult r = ParseOneLine("  nth=5,drop=1 ");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.scenario.name, "nth=5,drop=1");
}

TEST(OneLine, ErrorsNameTheKey) {
  ExpectError("drop=1.5", "drop: \"1.5\" is not a probability");
  ExpectError("dup=2", "dup: ");
  ExpectError("duplicate=2", "duplicate: ");
  ExpectError("reorder=0.1,depth=0", "depth: 0 is too small");
  ExpectError("reorder=0.1,depth=1025", "depth: \"1025\" is too large");
  ExpectError("depth=3", "depth: without reorder");
  ExpectError("delay=200", "delay: \"200\" has no unit");
  ExpectError("delay=11s", "delay: \"11s\" is too long");
  ExpectError("jitter=1fortnight", "jitter: \"1fortnight\" has an unknown unit");
  ExpectError("rate=0", "rate: \"0\" is out of range");
  ExpectError("rate=fast", "rate: \"fast\" is not a rate");
  ExpectError("dir=up,drop=1", "dir: \"up\" is not a direction");
  ExpectError("peer=10.0.0.256,drop=1", "peer: \"10.0.0.256\" is not an address");
  ExpectError("peer=fe80::1%eth0,drop=1", "peer: ");
  ExpectError("qpn=0x1000000,drop=1", "qpn: \"0x1000000\" is too large");
  ExpectError("qpn=-1,drop=1", "qpn: ");
  ExpectError("class=acks+bogus,drop=1", "class: \"bogus\" is not a packet class");
  ExpectError("class=acks+,drop=1", "class: \"\" is not a packet class");
  ExpectError("psn=1-16777216,drop=1", "psn: \"16777216\" is too large");
  ExpectError("psn=a-b,drop=1", "psn: ");
  ExpectError("nth=0,drop=1", "nth: 0");
  ExpectError("from=2h,drop=1", "from: \"2h\" has an unknown unit");
  ExpectError("from=3601s,drop=1", "from: \"3601s\" is too long");
  ExpectError("for=0s,drop=1", "for: 0: expected a window length > 0");
  ExpectError("outage=2s", "outage: \"2s\" is not a window: expected FROM+LEN");
  ExpectError("outage=2s+0ms", "outage: 0: expected a window length > 0");
  ExpectError("outage=1s+1s,from=1s", "from: with outage=FROM+LEN");
  ExpectError("pause=1s+1s,for=1s", "for: with pause=FROM+LEN");
  ExpectError("outage=1s+1s,pause=1s+1s", "pause: with outage");
  ExpectError("ecn=0.5", "ecn: marks received packets: expected dir=in");
  ExpectError("dir=out,ecn_mark=0.5", "ecn_mark: marks received packets");
  ExpectError("drop=0.1,drop=0.2", "drop: given twice");
  ExpectError("dup=0.1,duplicate=0.2", "duplicate: given twice (also as \"dup\")");
  ExpectError("dorp=0.1", "unknown key \"dorp\": expected one of drop, dup");
  ExpectError("drop", "\"drop\" has no value");
  ExpectError("drop=0.1,,", "empty item");
  ExpectError("drop=1e300", "drop: ");
  ExpectError("seed=0x", "seed: ");
}

TEST(OneLine, HostileTextIsQuotedHarmlessly) {
  const ParseResult r = ParseOneLine(std::string("k\x01\n") + std::string(500, 'y') + "=1");
  ASSERT_FALSE(r.ok);
  EXPECT_CONTAINS(r.error, "k\\x01\\x0ay");
  EXPECT_EQ(r.error.find('\n'), std::string::npos);
  EXPECT_LT(r.error.size(), 400u);
  EXPECT_FALSE(ParseOneLine(std::string("drop=0.1\0,seed=1", 17)).ok);
}

}  // namespace
}  // namespace softrnic::faults
