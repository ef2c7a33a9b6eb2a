// tools/shared_userns.h: which user namespaces a `softrnic run` joins. The
// join itself needs two unprivileged invocations and is checked end to end
// in tests/integration/devenv/test_run.sh; here, the map rule that keeps
// other tools' namespaces (rootless containers, `unshare -r`) out.
#include "shared_userns.h"

#include <gtest/gtest.h>

namespace softrnic::tools {
namespace {

TEST(SharedUserns, OnlyAMapOfExactlyOneIdToItselfIsOurs) {
  EXPECT_TRUE(MapsExactlyItself("      1000       1000          1\n", 1000));
  EXPECT_FALSE(MapsExactlyItself("         0       1000          1\n", 1000)) << "root inside";
  EXPECT_FALSE(MapsExactlyItself("      1000       1000          2\n", 1000)) << "a range";
  EXPECT_FALSE(MapsExactlyItself("      1000       1000          1\n      0    100000      65536\n", 1000))
      << "subordinate ids too (a rootless container)";
  EXPECT_FALSE(MapsExactlyItself("         0          0 4294967295\n", 0)) << "the initial namespace";
  EXPECT_FALSE(MapsExactlyItself("", 1000)) << "no map written yet";
  EXPECT_FALSE(MapsExactlyItself("1000 1000", 1000)) << "truncated";
}

}  // namespace
}  // namespace softrnic::tools
