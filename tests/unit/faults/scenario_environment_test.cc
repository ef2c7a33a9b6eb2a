// ScenarioFromEnvironment (src/faults/scenario_parse.cc): SOFTRNIC_FAULTS
// (a line, or a .toml file), SOFTRNIC_FAULTS_FILE, never both.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/environment.h"
#include "expect_contains.h"
#include "faults/scenario_parse.h"

namespace softrnic::faults {
namespace {

using config::Environment;

Environment Env(Environment::Values values) { return Environment(std::move(values)); }

class ScenarioEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("softrnic-scenario-env-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    file_ = (dir_ / "two.toml").string();
    std::ofstream(file_) << "seed = 3\n[[rule]]\ndrop = 0.5\n[[rule]]\nduplicate = 0.5\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::string file_;
};

TEST_F(ScenarioEnvironment, NeitherSetIsNoScenario) {
  const ParseResult r = ScenarioFromEnvironment(Environment());
  EXPECT_TRUE(r.ok);
  EXPECT_FALSE(r.scenario.enabled());
  EXPECT_TRUE(ScenarioFromEnvironment(Env({{"SOFTRNIC_FAULTS", ""}})).ok);
}

TEST_F(ScenarioEnvironment, OneLine) {
  const ParseResult r = ScenarioFromEnvironment(Env({{"SOFTRNIC_FAULTS", "drop=0.1,seed=9"}}));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.scenario.seed, 9u);
  ASSERT_EQ(r.scenario.rules.size(), 1u);
  const ParseResult bad = ScenarioFromEnvironment(Env({{"SOFTRNIC_FAULTS", "drop=2"}}));
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.error.rfind("SOFTRNIC_FAULTS: drop: ", 0), 0u) << bad.error;
}

TEST_F(ScenarioEnvironment, FileFromEitherVariable) {
  for (const char* name : {"SOFTRNIC_FAULTS_FILE", "SOFTRNIC_FAULTS"}) {
    const ParseResult r = ScenarioFromEnvironment(Env({{name, file_}}));
    ASSERT_TRUE(r.ok) << name << ": " << r.error;
    EXPECT_EQ(r.scenario.seed, 3u);
    EXPECT_EQ(r.scenario.rules.size(), 2u);
    EXPECT_EQ(r.scenario.name, "two");
  }
  // A missing .toml is reported as a file, not as a malformed line.
  const std::string missing = (dir_ / "missing.toml").string();
  const ParseResult r = ScenarioFromEnvironment(Env({{"SOFTRNIC_FAULTS", missing}}));
  EXPECT_FALSE(r.ok);
  EXPECT_CONTAINS(r.error, missing + ":1:1: cannot read");
}

TEST_F(ScenarioEnvironment, BothSetIsAnError) {
  const ParseResult r = ScenarioFromEnvironment(
      Env({{"SOFTRNIC_FAULTS", "drop=0.1"}, {"SOFTRNIC_FAULTS_FILE", file_}}));
  EXPECT_FALSE(r.ok);
  EXPECT_CONTAINS(r.error, "both set");
  EXPECT_FALSE(r.scenario.enabled());
}

}  // namespace
}  // namespace softrnic::faults
