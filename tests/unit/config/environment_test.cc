// The table of SOFTRNIC_* variables (src/config/variables.cc) and its one
// reader (environment.cc): every default is a value its getter accepts, bad
// values are refused in one uniform stderr line and keep the default.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "config/environment.h"
#include "config/variables.h"

namespace softrnic::config {
namespace {

using ::testing::internal::CaptureStderr;
using ::testing::internal::GetCapturedStderr;

Environment Env(Environment::Values values) { return Environment(std::move(values)); }

TEST(VariablesTest, NamesAreUniqueAndSoftrnics) {
  std::set<std::string_view> seen;
  for (const Variable& v : Variables()) {
    EXPECT_TRUE(v.name.starts_with("SOFTRNIC_")) << v.name;
    EXPECT_TRUE(seen.insert(v.name).second) << v.name << " twice";
    EXPECT_FALSE(v.meaning.empty()) << v.name;
    EXPECT_FALSE(v.layer.empty()) << v.name;
    EXPECT_EQ(FindVariable(v.name), &v);
  }
  EXPECT_EQ(FindVariable("SOFTRNIC_NO_SUCH"), nullptr);
}

// Setting a variable to its documented default changes nothing and warns
// about nothing: the table's default column is a real value.
TEST(VariablesTest, EveryDefaultIsAnAcceptedValue) {
  const Environment unset;
  for (const Variable& v : Variables()) {
    const Environment set = Env({{std::string(v.name), std::string(v.default_value)}});
    CaptureStderr();
    switch (v.kind) {
      case Kind::kFlag:
        EXPECT_TRUE(v.default_value == "0" || v.default_value == "1") << v.name;
        EXPECT_EQ(set.Flag(v.name), unset.Flag(v.name)) << v.name;
        break;
      case Kind::kChoice:
        EXPECT_EQ(set.Choice(v.name), unset.Choice(v.name)) << v.name;
        break;
      case Kind::kInteger:
        EXPECT_EQ(set.Integer(v.name), unset.Integer(v.name)) << v.name;
        EXPECT_LE(v.min, unset.Integer(v.name)) << v.name;
        EXPECT_GE(v.max, unset.Integer(v.name)) << v.name;
        break;
      case Kind::kNumber:
        EXPECT_GT(unset.Number(v.name), 0) << v.name;
        EXPECT_EQ(set.Number(v.name), unset.Number(v.name)) << v.name;
        break;
      case Kind::kText:
        break;
    }
    EXPECT_EQ(GetCapturedStderr(), "") << v.name;
  }
}

TEST(EnvironmentTest, UnsetAndEmptyMeanTheDefault) {
  const Environment env = Env({{"SOFTRNIC_MTU", ""}});
  EXPECT_EQ(env.Raw("SOFTRNIC_MTU"), nullptr);
  EXPECT_EQ(env.Raw("SOFTRNIC_PORT"), nullptr);
  EXPECT_EQ(env.Choice("SOFTRNIC_MTU"), "auto");
  EXPECT_EQ(env.Integer("SOFTRNIC_CM_RETRIES"), 9);
  EXPECT_EQ(env.Text("SOFTRNIC_STATS_DIR"), "/dev/shm");
  EXPECT_TRUE(env.Flag("SOFTRNIC_GSO"));
}

TEST(EnvironmentTest, AcceptedValuesAreTaken) {
  const Environment env = Env({{"SOFTRNIC_MTU", "4096"},
                         {"SOFTRNIC_GSO", "0"},
                         {"SOFTRNIC_CM_RETRIES", "0"},
                         {"SOFTRNIC_CC_TARGET_US", "2.5"},
                         {"SOFTRNIC_STATS_DIR", "/tmp/x"}});
  CaptureStderr();
  EXPECT_EQ(env.Choice("SOFTRNIC_MTU"), "4096");
  EXPECT_FALSE(env.Flag("SOFTRNIC_GSO"));
  EXPECT_EQ(env.Integer("SOFTRNIC_CM_RETRIES"), 0);
  EXPECT_EQ(env.Number("SOFTRNIC_CC_TARGET_US"), 2.5);
  EXPECT_EQ(env.Text("SOFTRNIC_STATS_DIR"), "/tmp/x");
  EXPECT_EQ(GetCapturedStderr(), "");
}

// One line naming the variable, the value and what is accepted; the
// default is kept.
TEST(EnvironmentTest, RejectedValuesWarnOnceAndKeepTheDefault) {
  struct Case {
    const char* name;
    const char* value;
  };
  for (const Case& c : {Case{"SOFTRNIC_MTU", "1500"}, Case{"SOFTRNIC_GSO", "yes"},
                        Case{"SOFTRNIC_CM_RETRIES", "-1"}, Case{"SOFTRNIC_CM_TIMEOUT_MS", "0"},
                        Case{"SOFTRNIC_SPIN_US", "5x"}, Case{"SOFTRNIC_CC_TARGET_US", "-3"},
                        Case{"SOFTRNIC_CC", "cubic"}}) {
    const Environment env = Env({{c.name, c.value}});
    const Environment unset;
    const Variable& v = *FindVariable(c.name);
    CaptureStderr();
    switch (v.kind) {
      case Kind::kFlag: EXPECT_EQ(env.Flag(c.name), unset.Flag(c.name)); break;
      case Kind::kChoice: EXPECT_EQ(env.Choice(c.name), unset.Choice(c.name)); break;
      case Kind::kInteger: EXPECT_EQ(env.Integer(c.name), unset.Integer(c.name)); break;
      case Kind::kNumber: EXPECT_EQ(env.Number(c.name), unset.Number(c.name)); break;
      case Kind::kText: break;
    }
    EXPECT_EQ(GetCapturedStderr(), "softrnic: ignoring " + std::string(c.name) + "=" + c.value +
                                       " (accepted: " + std::string(v.values) + ")\n");
  }
}

TEST(EnvironmentTest, StrictChoiceRefusesWithTheAcceptedValues) {
  std::string value, error;
  EXPECT_TRUE(Environment().StrictChoice("SOFTRNIC_TRANSPORT", &value, &error));
  EXPECT_EQ(value, "auto");
  EXPECT_TRUE(Env({{"SOFTRNIC_TRANSPORT", "shm"}}).StrictChoice("SOFTRNIC_TRANSPORT", &value, &error));
  EXPECT_EQ(value, "shm");
  EXPECT_FALSE(Env({{"SOFTRNIC_TRANSPORT", "tcp"}}).StrictChoice("SOFTRNIC_TRANSPORT", &value, &error));
  EXPECT_EQ(error, "softrnic: SOFTRNIC_TRANSPORT=tcp: unknown value (accepted: auto|udp|shm)");
}

TEST(EnvironmentDeathTest, ANameOutsideTheTableIsAProgrammingError) {
  EXPECT_DEATH(Environment().Raw("SOFTRNIC_NOT_IN_TABLE"), "not in the table");
  EXPECT_DEATH(Environment().Flag("SOFTRNIC_MTU"), "not a variable of that kind");
}

TEST(EnvironmentTest, FromProcessReadsTheTablesVariables) {
  setenv("SOFTRNIC_CM_RETRIES", "3", 1);
  const Environment env = Environment::FromProcess();
  unsetenv("SOFTRNIC_CM_RETRIES");
  EXPECT_EQ(env.Integer("SOFTRNIC_CM_RETRIES"), 3);  // a snapshot: unaffected by unsetenv
}

}  // namespace
}  // namespace softrnic::config
