// The log (src/log/log.h): the SOFTRNIC_LOG threshold, the line's form, and
// the per-site rate limit that keeps a flood of bad packets from flooding
// stderr.
#include "log/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "config/environment.h"

namespace softrnic::log {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

Level With(const char* value) {
  config::Environment::Values v;
  if (value != nullptr) v["SOFTRNIC_LOG"] = value;
  return ThresholdFrom(config::Environment(v));
}

TEST(Log, ThresholdFromTheSetting) {
  EXPECT_EQ(With(nullptr), kWarn);  // the table's default
  EXPECT_EQ(With("error"), kError);
  EXPECT_EQ(With("info"), kInfo);
  EXPECT_EQ(With("debug"), kDebug);
  EXPECT_EQ(With("loud"), kWarn);  // rejected (with a line on stderr): the default
}

TEST(Log, LineNamesProcessLevelAndWhatWasLeftOut) {
  const std::string pid = std::to_string(getpid());
  EXPECT_EQ(FormatLine(kWarn, 0, "device %s: QP 0x%06x: %s", "softrnic0", 0xa1b2u, "why"),
            "softrnic[" + pid + "] warn: device softrnic0: QP 0x00a1b2: why\n");
  EXPECT_EQ(FormatLine(kDebug, 7, "x"),
            "softrnic[" + pid + "] debug: x (7 similar messages left out before this one)\n");
}

TEST(Log, RateLimitLetsABurstThroughPerWindowAndCountsTheRest) {
  RateLimit limit;
  uint64_t suppressed = 99;
  const int64_t t0 = 5 * kSecond;
  for (uint32_t i = 0; i < RateLimit::kBurst; ++i) {
    ASSERT_TRUE(limit.Allow(t0 + i, &suppressed)) << i;
    EXPECT_EQ(suppressed, 0u);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limit.Allow(t0 + kSecond / 2, &suppressed));
  // The next window: the first line says how many were left out.
  ASSERT_TRUE(limit.Allow(t0 + kSecond, &suppressed));
  EXPECT_EQ(suppressed, 1000u);
  ASSERT_TRUE(limit.Allow(t0 + kSecond + 1, &suppressed));
  EXPECT_EQ(suppressed, 0u);
}

// Through the macro, into a file standing in for stderr: a flood of 10,000
// messages from one site gives at most a burst of lines; a level above the
// threshold gives none.
TEST(Log, FloodFromOneSiteIsBounded) {
  char path[] = "/tmp/softrnic-log-test.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const int saved = dup(STDERR_FILENO);
  ASSERT_EQ(dup2(fd, STDERR_FILENO), STDERR_FILENO);
  SetThreshold(kInfo);
  for (int i = 0; i < 10000; ++i) SOFTRNIC_LOG(kInfo, "packet %d dropped", i);
  for (int i = 0; i < 100; ++i) SOFTRNIC_LOG(kDebug, "not shown %d", i);
  SetThreshold(kWarn);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string text;
  char buf[4096];
  ssize_t n = 0;
  lseek(fd, 0, SEEK_SET);
  while ((n = read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  close(fd);
  unlink(path);
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  // 10,000 calls take far less than a window here, but a slow machine may
  // cross one boundary or two: a burst per window started.
  EXPECT_GE(lines, RateLimit::kBurst);
  EXPECT_LE(lines, 3 * RateLimit::kBurst);
  EXPECT_NE(text.find("info: packet 0 dropped\n"), std::string::npos);
  EXPECT_EQ(text.find("not shown"), std::string::npos);
}

}  // namespace
}  // namespace softrnic::log
