// The scenarios shipped for `softrnic chaos` (share/scenarios/*.toml): each
// parses, has a name equal to its file name and a description, and does
// what its name says (the chaos matrix relies on them).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "faults/scenario_parse.h"

namespace softrnic::faults {
namespace {

namespace fs = std::filesystem;

const fs::path kScenarios = fs::path(SOFTRNIC_SOURCE_DIR) / "share/scenarios";

std::map<std::string, Scenario> LoadAll() {
  std::map<std::string, Scenario> all;
  for (const auto& entry : fs::directory_iterator(kScenarios)) {
    if (entry.path().extension() != ".toml") continue;
    const ParseResult r = ParseScenarioFile(entry.path().string());
    EXPECT_TRUE(r.ok) << r.error;
    all[entry.path().stem().string()] = r.scenario;
  }
  return all;
}

TEST(ShippedScenarios, EveryOneParsesWithNameAndDescription) {
  const std::map<std::string, Scenario> all = LoadAll();
  const std::set<std::string> expected = {"loss-0.1",   "loss-1",       "loss-5",    "burst-loss",
                                          "reorder",    "outage-300ms", "peer-pause", "ack-loss",
                                          "rnr-storm",  "cnp-storm",    "delay-jitter"};
  for (const std::string& name : expected) EXPECT_TRUE(all.contains(name)) << name;
  for (const auto& [file, s] : all) {
    EXPECT_EQ(s.name, file) << "`name` should be the file's name";
    EXPECT_FALSE(s.description.empty()) << file;
    EXPECT_TRUE(s.enabled()) << file;
    for (const Rule& rule : s.rules) {
      EXPECT_GT(rule.line, 0) << file;
      // Programs in the chaos matrix run ~1-5 s: every window starts early
      // and ends soon.
      EXPECT_LE(rule.match.from_ns, 2000000000u) << file << " " << rule.name;
      EXPECT_LE(rule.match.for_ns, 1000000000u) << file << " " << rule.name;
    }
  }
}

TEST(ShippedScenarios, DoWhatTheirNamesSay) {
  std::map<std::string, Scenario> all = LoadAll();
  ASSERT_FALSE(all.empty());
  EXPECT_DOUBLE_EQ(all["loss-0.1"].rules.at(0).action.drop, 0.001);
  EXPECT_DOUBLE_EQ(all["loss-1"].rules.at(0).action.drop, 0.01);
  EXPECT_DOUBLE_EQ(all["loss-5"].rules.at(0).action.drop, 0.05);
  for (const char* loss : {"loss-0.1", "loss-1", "loss-5"})
    EXPECT_EQ(all[loss].rules.at(0).match.direction, Direction::kBoth) << loss;

  const Scenario& bursts = all["burst-loss"];
  EXPECT_GE(bursts.rules.size(), 3u);
  std::set<uint64_t> starts;
  for (const Rule& r : bursts.rules) {
    EXPECT_TRUE(r.action.outage);
    EXPECT_EQ(r.match.for_ns, 10000000u);
    EXPECT_LT(r.match.from_ns + r.match.for_ns, 2000000000u);
    starts.insert(r.match.from_ns);
  }
  EXPECT_EQ(starts.size(), bursts.rules.size()) << "bursts at different times";

  EXPECT_DOUBLE_EQ(all["reorder"].rules.at(0).action.reorder, 0.05);
  EXPECT_EQ(all["reorder"].rules.at(0).action.reorder_depth, 3u);

  const Rule& outage = all["outage-300ms"].rules.at(0);
  EXPECT_TRUE(outage.action.outage);
  EXPECT_EQ(outage.match.from_ns, 100000000u);
  EXPECT_EQ(outage.match.for_ns, 300000000u);

  const Rule& pause = all["peer-pause"].rules.at(0);
  EXPECT_TRUE(pause.action.pause);
  EXPECT_EQ(pause.match.from_ns, 100000000u);
  EXPECT_EQ(pause.match.for_ns, 1000000000u);

  const Rule& acks = all["ack-loss"].rules.at(0);
  EXPECT_EQ(acks.match.direction, Direction::kOut);
  EXPECT_EQ(acks.match.classes, kAcks | kNaks);
  EXPECT_DOUBLE_EQ(acks.action.drop, 0.2);

  const Rule& rnr = all["rnr-storm"].rules.at(0);
  EXPECT_EQ(rnr.match.classes, kRnrNaks);
  EXPECT_GT(rnr.action.duplicate, 0);
  EXPECT_GT(rnr.action.delay_ns, 0u);

  const Rule& cnp = all["cnp-storm"].rules.at(0);
  EXPECT_EQ(cnp.match.direction, Direction::kIn);
  EXPECT_EQ(cnp.match.classes, kRequests);
  EXPECT_DOUBLE_EQ(cnp.action.ecn_mark, 0.5);

  // 1 ms +- 0.5 ms: 0.5 ms plus a uniform draw in [0, 1 ms].
  const Rule& delay = all["delay-jitter"].rules.at(0);
  EXPECT_EQ(delay.action.delay_ns, 500000u);
  EXPECT_EQ(delay.action.jitter_ns, 1000000u);
}

}  // namespace
}  // namespace softrnic::faults
