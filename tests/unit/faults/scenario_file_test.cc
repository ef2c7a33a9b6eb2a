// The TOML scenario reader (src/faults/scenario_file.cc): a full file read
// into exactly the expected Scenario, and hostile or mistyped input refused
// with "ORIGIN:LINE:COLUMN: ..." at the right line, and nothing returned.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "expect_contains.h"
#include "faults/scenario_limits.h"
#include "faults/scenario_parse.h"

namespace softrnic::faults {
namespace {

constexpr std::array<uint8_t, 16> kV4Mapped10002 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
                                                    10, 0, 0, 2};

ParseResult Parse(const std::string& text) { return ParseScenarioText(text, "test.toml"); }

// The rule error's text must say where: "test.toml:LINE:" and what.
void ExpectError(const std::string& text, int line, const std::string& mentions) {
  const ParseResult r = Parse(text);
  EXPECT_FALSE(r.ok) << text;
  EXPECT_CONTAINS(r.error, "test.toml:" + std::to_string(line) + ":") << text;
  EXPECT_CONTAINS(r.error, mentions) << text;
  // Nothing half-applied: no scenario comes with an error.
  EXPECT_TRUE(r.scenario.rules.empty()) << text;
  EXPECT_TRUE(r.scenario.name.empty()) << text;
}

// A rule with `key = value` and what it needs, at line 2 of its file.
std::string OneRule(const std::string& line) { return "[[rule]]\n" + line + "\n"; }

TEST(ScenarioFile, FullExampleGivesExactlyTheExpectedScenario) {
  const std::string text = R"(# an example using every key
name = "everything"
description = "all keys"
seed = 7

[[rule]]
name = "lose acks"
direction = "out"
peer = "10.0.0.2"
qpn = 0x123
class = ["acks", "naks"]
psn = [100, 200]
nth = 5
from = "2s"
for = "300ms"
drop = 0.2
duplicate = 0.0
corrupt = 0.001
reorder = 0.1
reorder_depth = 3
delay = "200us"
jitter = "50us"
rate = "100MB/s"
rate_burst = "16KiB"
rate_queue = "1MiB"
pause = true
pause_queue = "4MiB"

[[rule]]
direction = "in"
peer = "fd00::2"
class = "cnps"
ecn_mark = 0.5
outage = true
from = "1.5s"
for = "50ns"
)";
  const ParseResult r = Parse(text);
  ASSERT_TRUE(r.ok) << r.error;
  const Scenario& s = r.scenario;
  EXPECT_EQ(s.name, "everything");
  EXPECT_EQ(s.description, "all keys");
  EXPECT_EQ(s.seed, 7u);
  ASSERT_EQ(s.rules.size(), 2u);

  const Rule& a = s.rules[0];
  EXPECT_EQ(a.name, "lose acks");
  EXPECT_EQ(a.line, 6);
  EXPECT_EQ(a.match.direction, Direction::kOut);
  EXPECT_EQ(a.match.peer, kV4Mapped10002);
  EXPECT_EQ(a.match.qpn, 0x123u);
  EXPECT_EQ(a.match.classes, kAcks | kNaks);
  EXPECT_EQ(a.match.psn_first, 100u);
  EXPECT_EQ(a.match.psn_last, 200u);
  EXPECT_EQ(a.match.nth, 5u);
  EXPECT_EQ(a.match.from_ns, 2000000000u);
  EXPECT_EQ(a.match.for_ns, 300000000u);
  EXPECT_DOUBLE_EQ(a.action.drop, 0.2);
  EXPECT_DOUBLE_EQ(a.action.duplicate, 0.0);
  EXPECT_DOUBLE_EQ(a.action.corrupt, 0.001);
  EXPECT_DOUBLE_EQ(a.action.reorder, 0.1);
  EXPECT_EQ(a.action.reorder_depth, 3u);
  EXPECT_EQ(a.action.delay_ns, 200000u);
  EXPECT_EQ(a.action.jitter_ns, 50000u);
  EXPECT_EQ(a.action.rate_bytes_per_s, 100000000u);
  EXPECT_EQ(a.action.rate_burst_bytes, 16384u);
  EXPECT_EQ(a.action.rate_queue_bytes, 1u << 20);
  EXPECT_TRUE(a.action.pause);
  EXPECT_FALSE(a.action.outage);
  EXPECT_EQ(a.action.pause_queue_bytes, 4u << 20);
  EXPECT_DOUBLE_EQ(a.action.ecn_mark, 0.0);

  const Rule& b = s.rules[1];
  EXPECT_EQ(b.name, "rule 2");  // the default name counts from 1
  EXPECT_EQ(b.line, 29);
  EXPECT_EQ(b.match.direction, Direction::kIn);
  const std::array<uint8_t, 16> fd00_2 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  EXPECT_EQ(b.match.peer, fd00_2);
  EXPECT_EQ(b.match.classes, kCnps);
  EXPECT_FALSE(b.match.qpn.has_value());
  EXPECT_FALSE(b.match.psn_first.has_value());
  EXPECT_FALSE(b.match.nth.has_value());
  EXPECT_EQ(b.match.from_ns, 1500000000u);
  EXPECT_EQ(b.match.for_ns, 50u);
  EXPECT_DOUBLE_EQ(b.action.ecn_mark, 0.5);
  EXPECT_TRUE(b.action.outage);
  // Left out: the model's defaults.
  const Action defaults;
  EXPECT_EQ(b.action.reorder_depth, defaults.reorder_depth);
  EXPECT_EQ(b.action.rate_bytes_per_s, 0u);
  EXPECT_EQ(b.action.rate_burst_bytes, defaults.rate_burst_bytes);
  EXPECT_EQ(b.action.pause_queue_bytes, defaults.pause_queue_bytes);
}

TEST(ScenarioFile, DefaultsNameFromTheFileAndSeedOne) {
  const ParseResult r = ParseScenarioText("[[rule]]\ndrop = 1\n", "/some/dir/ack-loss.toml");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.scenario.name, "ack-loss");
  EXPECT_EQ(r.scenario.description, "");
  EXPECT_EQ(r.scenario.seed, 1u);
  ASSERT_EQ(r.scenario.rules.size(), 1u);
  EXPECT_EQ(r.scenario.rules[0].name, "rule 1");
  EXPECT_EQ(r.scenario.rules[0].line, 1);
  EXPECT_DOUBLE_EQ(r.scenario.rules[0].action.drop, 1.0);  // integer 1 is a probability
  EXPECT_EQ(r.scenario.rules[0].match.direction, Direction::kBoth);
  EXPECT_EQ(r.scenario.rules[0].match.classes, kAllClasses);
}

TEST(ScenarioFile, EmptyFileIsAnEmptyScenario) {
  const ParseResult r = Parse("# nothing\n");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.scenario.enabled());
  EXPECT_EQ(r.scenario.name, "test");
}

TEST(ScenarioFile, InlineRuleArrayAndQuantityForms) {
  const ParseResult r = Parse(
      "rule = [{ rate = 1000, rate_burst = 1500, rate_queue = 0, from = 0 },\n"
      "        { rate = \"1Gbit/s\", delay = \"0\" },\n"
      "        { rate = \"10KiB/s\" }, { rate = \"800Mbit\" }, { rate = \"2.5 GB/s\" }]\n");
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.scenario.rules.size(), 5u);
  EXPECT_EQ(r.scenario.rules[0].action.rate_bytes_per_s, 1000u);
  EXPECT_EQ(r.scenario.rules[0].action.rate_burst_bytes, 1500u);
  EXPECT_EQ(r.scenario.rules[0].action.rate_queue_bytes, 0u);
  EXPECT_EQ(r.scenario.rules[1].action.rate_bytes_per_s, 125000000u);
  EXPECT_EQ(r.scenario.rules[2].action.rate_bytes_per_s, 10240u);
  EXPECT_EQ(r.scenario.rules[3].action.rate_bytes_per_s, 100000000u);
  EXPECT_EQ(r.scenario.rules[4].action.rate_bytes_per_s, 2500000000u);
  EXPECT_EQ(r.scenario.rules[1].line, 2);
}

TEST(ScenarioFile, PsnRangeMayWrapAndBoundsAreInclusive) {
  const ParseResult r = Parse(OneRule("psn = [0xfffff0, 0x10]\nqpn = 0xffffff\ndrop = 1"));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.scenario.rules[0].match.psn_first, 0xfffff0u);
  EXPECT_EQ(r.scenario.rules[0].match.psn_last, 0x10u);
  EXPECT_EQ(r.scenario.rules[0].match.qpn, 0xffffffu);
  // Every bound is inclusive.
  const ParseResult limits_ok = Parse(OneRule(
      "from = \"3600s\"\nfor = \"3600000ms\"\ndelay = \"10s\"\njitter = \"10000ms\"\n"
      "rate = 1000000000000\nreorder = 1\nreorder_depth = 1024\nrate_burst = \"1GiB\""));
  EXPECT_TRUE(limits_ok.ok) << limits_ok.error;
}

TEST(ScenarioFile, SyntaxErrorNamesTheLine) {
  ExpectError("name = \"x\"\n\n[[rule]]\ndrop = 0.1\ndelay = \"200us\n", 5, "");
  ExpectError("seed = 1\n[[rule]\n", 2, "");
  ExpectError("[[rule]]\ndrop = 0.1\ndrop = 0.2\n", 3, "");  // a key twice
  ExpectError("a = \"\x01\"\n", 1, "");
  ExpectError(std::string("name = \"x\0y\"\n", 13), 1, "");
}

TEST(ScenarioFile, UnknownKeysAndTablesAreNamed) {
  ExpectError("name = \"x\"\nseeed = 3\n", 2, "unknown key \"seeed\"");
  ExpectError(OneRule("drop = 0.1\ndorp = 0.1"), 3, "unknown key \"dorp\" in [[rule]]");
  ExpectError("[[rule]]\ndrop = 1\n[settings]\nx = 1\n", 3, "unknown table [settings]");
  ExpectError("[[rule]]\ndrop = 1\n[rule.match]\nx = 1\n", 3, "unknown table [rule.match]");
  ExpectError("[[rules]]\ndrop = 1\n", 1, "\"rules\"");
  ExpectError("[\"a b\"]\n", 1, "unknown table [\"a b\"]");
  ExpectError("[rule]\ndrop = 1\n", 1, "expected [[rule]] tables");
  ExpectError("rule = [1]\n", 1, "rule is an integer");
  // A hostile key is quoted harmlessly: escaped, shortened.
  const ParseResult r = Parse("\"bad\\nkey" + std::string(200, 'k') + "\" = 1\n");
  ASSERT_FALSE(r.ok);
  EXPECT_CONTAINS(r.error, "bad\\x0akeykkk");
  EXPECT_LT(r.error.size(), 200u);
  EXPECT_EQ(r.error.find('\n'), std::string::npos);
}

TEST(ScenarioFile, WrongTypesAreRefused) {
  ExpectError("name = 3\n", 1, "name is an integer: expected a string");
  ExpectError("seed = \"7\"\n", 1, "seed is a string");
  ExpectError("seed = 1.5\n", 1, "seed is a float");
  ExpectError(OneRule("drop = \"0.1\""), 2, "drop is a string: expected a probability");
  ExpectError(OneRule("drop = true"), 2, "drop is a boolean");
  ExpectError(OneRule("outage = 1\nfor = \"1s\""), 2, "outage is an integer: expected true or false");
  ExpectError(OneRule("delay = 1.5"), 2, "delay is a float");
  ExpectError(OneRule("delay = 200"), 2, "has no unit");
  ExpectError(OneRule("rate = 1.5"), 2, "rate is a float");
  ExpectError(OneRule("peer = 10"), 2, "peer is an integer");
  ExpectError(OneRule("class = 3"), 2, "class is an integer");
  ExpectError(OneRule("class = [\"acks\", 3]"), 2, "class is an integer");
  ExpectError(OneRule("psn = 5"), 2, "psn is an integer");
  ExpectError(OneRule("psn = [1, 2, 3]"), 2, "an array of 3 values");
  ExpectError(OneRule("psn = [1, \"2\"]"), 2, "psn is a string");
  ExpectError(OneRule("qpn = 1979-05-27"), 2, "qpn is a date or time");
  ExpectError(OneRule("direction = { a = 1 }"), 2, "direction is a table");
}

TEST(ScenarioFile, OutOfBoundNumbersAreRefused) {
  ExpectError(OneRule("drop = 1.5"), 2, "drop = 1.5 is out of range: expected a probability in [0, 1]");
  ExpectError(OneRule("drop = -0.1"), 2, "out of range");
  ExpectError(OneRule("drop = 2"), 2, "out of range");
  ExpectError(OneRule("duplicate = nan"), 2, "out of range");
  ExpectError(OneRule("corrupt = inf"), 2, "out of range");
  ExpectError(OneRule("reorder = 1e300"), 2, "out of range");
  ExpectError("seed = -1\n", 1, "seed = -1 is out of range");
  ExpectError("seed = 9223372036854775808\n", 1, "");  // 2^63: TOML's own limit
  ExpectError(OneRule("nth = 0"), 2, "nth = 0 is out of range");
  ExpectError(OneRule("qpn = 0x1000000"), 2, "qpn = 16777216 is out of range");
  ExpectError(OneRule("qpn = -1"), 2, "out of range");
  ExpectError(OneRule("psn = [0, 16777216]"), 2, "psn = 16777216 is out of range");
  ExpectError(OneRule("reorder = 0.1\nreorder_depth = 0"), 3, "reorder_depth = 0");
  ExpectError(OneRule("reorder = 0.1\nreorder_depth = 1025"), 3, "reorder_depth = 1025");
  ExpectError(OneRule("from = \"3601s\""), 2, "too long: expected a duration up to 3600s");
  ExpectError(OneRule("for = \"1e300s\""), 2, "unknown unit");
  ExpectError(OneRule("for = \"" + std::string(400, '9') + "s\""), 2, "not a duration");
  ExpectError(OneRule("delay = \"10.001s\""), 2, "too long");
  ExpectError(OneRule("jitter = \"-1ms\""), 2, "not a duration");
  ExpectError(OneRule("delay = \"5 fortnights\""), 2, "unknown unit");
  ExpectError(OneRule("rate = 0"), 2, "rate: \"0\" is out of range");
  ExpectError(OneRule("rate = \"1bit/s\""), 2, "out of range");  // 1/8 B/s rounds to 0
  ExpectError(OneRule("rate = \"1001GB/s\""), 2, "out of range");
  ExpectError(OneRule("rate = -5"), 2, "not a rate");
  ExpectError(OneRule("rate = 9223372036854775807"), 2, "out of range");
  ExpectError(OneRule("rate = \"100 furlongs/s\""), 2, "unknown unit");
  ExpectError(OneRule("rate = \"100MB\"\nrate_burst = 0"), 3, "rate_burst: \"0\" is out of range");
  ExpectError(OneRule("rate = \"100MB\"\nrate_queue = \"2GiB\""), 3, "expected a size from 0B to 1GiB");
  ExpectError(OneRule("pause = true\nfor = \"1s\"\npause_queue = \"1.5\""), 4, "not a size");
  ExpectError(OneRule("for = \"0ms\""), 2, "for is 0");
}

TEST(ScenarioFile, CombinationsThatNeedAnotherKey) {
  ExpectError("[[rule]]\nname = \"down\"\noutage = true\n", 3, "outage without `for`");
  ExpectError(OneRule("from = \"1s\"\npause = true"), 3, "pause without `for`");
  ExpectError(OneRule("for = \"1s\"\noutage = true\npause = true"), 4, "outage and pause");
  ExpectError(OneRule("ecn_mark = 0.5"), 2, "ecn_mark marks received packets");
  ExpectError(OneRule("direction = \"out\"\necn_mark = 0.5"), 3, "direction = \"in\"");
  ExpectError(OneRule("direction = \"both\"\necn_mark = 0.5"), 3, "direction = \"in\"");
  ExpectError(OneRule("reorder_depth = 3"), 2, "reorder_depth without reorder");
  ExpectError(OneRule("rate_burst = 100"), 2, "rate_burst without rate");
  ExpectError(OneRule("rate_queue = 100"), 2, "rate_queue without rate");
  ExpectError(OneRule("pause_queue = 100"), 2, "pause_queue without pause");
  // outage = false needs no window.
  EXPECT_TRUE(Parse(OneRule("outage = false\ndrop = 0.5")).ok);
  EXPECT_TRUE(Parse(OneRule("direction = \"in\"\necn_mark = 0.5")).ok);
}

TEST(ScenarioFile, BadAddressesAndClasses) {
  ExpectError(OneRule("peer = \"10.0.0.256\""), 2, "not an address");
  ExpectError(OneRule("peer = \"fe80::1%eth0\""), 2, "not an address");
  ExpectError(OneRule("peer = \"host.example\""), 2, "not an address");
  ExpectError(OneRule("peer = \"" + std::string(100, '1') + "\""), 2, "not an address");
  ExpectError(OneRule("direction = \"sideways\""), 2, "expected out, in or both");
  ExpectError(OneRule("class = \"ack\""), 2, "\"ack\" is not a packet class: expected requests, acks");
  ExpectError(OneRule("class = [\"acks\", \"rnr_naks\"]"), 2, "\"rnr_naks\"");
  ExpectError(OneRule("class = []"), 2, "class is empty");
  const ParseResult r = Parse(OneRule(
      "class = [\"requests\", \"acks\", \"naks\", \"rnr-naks\", \"read-responses\", \"cnps\", \"cm\"]"));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.scenario.rules[0].match.classes, kAllClasses);
}

TEST(ScenarioFile, TooManyRulesNamesTheFirstOneTooMany) {
  std::string text;
  for (uint64_t i = 0; i < limits::kMaxRules; ++i) text += "[[rule]]\ndrop = 0.5\n";
  const ParseResult full = Parse(text);
  ASSERT_TRUE(full.ok) << full.error;
  EXPECT_EQ(full.scenario.rules.size(), limits::kMaxRules);
  EXPECT_EQ(full.scenario.rules.back().line, static_cast<int>(2 * limits::kMaxRules - 1));
  ExpectError(text + "[[rule]]\ndrop = 0.5\n", 2 * limits::kMaxRules + 1, "at most 256 rules");
}

TEST(ScenarioFile, TooLargeTextIsRefusedBeforeParsing) {
  std::string text = "[[rule]]\ndrop = 0.5\n";
  text += "#" + std::string(limits::kMaxFileBytes, 'x') + "\n";
  ExpectError(text, 1, "expected at most 1048576");
  // Exactly at the limit: read.
  std::string at_limit = "[[rule]]\ndrop = 0.5\n#";
  at_limit += std::string(limits::kMaxFileBytes - at_limit.size(), 'x');
  EXPECT_TRUE(Parse(at_limit).ok);
}

TEST(ScenarioFile, FromDiskIncludingMissingAndHugeFiles) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("softrnic-scenario-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good.toml").string();
  std::ofstream(good) << "description = \"d\"\n[[rule]]\ndrop = 0.25\n";
  const ParseResult r = ParseScenarioFile(good);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.scenario.name, "good");
  EXPECT_EQ(r.scenario.rules.size(), 1u);

  const std::string bad = (dir / "bad.toml").string();
  std::ofstream(bad) << "[[rule]]\n\ndrop = 7\n";
  EXPECT_EQ(ParseScenarioFile(bad).error.rfind(bad + ":3:8: drop = 7 is out of range", 0), 0u)
      << ParseScenarioFile(bad).error;

  const std::string huge = (dir / "huge.toml").string();
  std::ofstream(huge) << std::string(limits::kMaxFileBytes + 10, '#');
  EXPECT_CONTAINS(ParseScenarioFile(huge).error, huge + ":1:1: ");
  EXPECT_CONTAINS(ParseScenarioFile(huge).error, "larger than 1 MiB");

  const ParseResult missing = ParseScenarioFile((dir / "missing.toml").string());
  EXPECT_FALSE(missing.ok);
  EXPECT_CONTAINS(missing.error, "missing.toml:1:1: cannot read");
  EXPECT_CONTAINS(ParseScenarioFile(dir.string()).error, "not a regular file");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace softrnic::faults
