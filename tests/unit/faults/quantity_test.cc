// Units and bounds of the quantities both scenario readers share
// (src/faults/quantity.cc).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "expect_contains.h"
#include "faults/quantity.h"

namespace softrnic::faults {
namespace {

constexpr uint64_t kHour = 3600ull * 1000000000;

uint64_t Duration(const std::string& text, uint64_t max = kHour) {
  uint64_t ns = 0;
  std::string error;
  EXPECT_TRUE(ParseDuration(text, max, &ns, &error)) << text << ": " << error;
  return ns;
}

std::string DurationError(const std::string& text, uint64_t max = kHour) {
  uint64_t ns = 12345;
  std::string error;
  EXPECT_FALSE(ParseDuration(text, max, &ns, &error)) << text;
  EXPECT_EQ(ns, 12345u) << text << ": output written on failure";
  return error;
}

TEST(Quantity, Durations) {
  EXPECT_EQ(Duration("300ms"), 300000000u);
  EXPECT_EQ(Duration("2s"), 2000000000u);
  EXPECT_EQ(Duration("1.5s"), 1500000000u);
  EXPECT_EQ(Duration("200us"), 200000u);
  EXPECT_EQ(Duration("50ns"), 50u);
  EXPECT_EQ(Duration("0.1s"), 100000000u);
  EXPECT_EQ(Duration(".5ms"), 500000u);
  EXPECT_EQ(Duration("1 ms"), 1000000u);
  EXPECT_EQ(Duration("0"), 0u);  // the one bare number: the same in every unit
  EXPECT_EQ(Duration("3600s"), kHour);
  EXPECT_EQ(Duration("0.4ns"), 0u);  // rounded to whole nanoseconds

  EXPECT_CONTAINS(DurationError("200"), "has no unit");
  EXPECT_CONTAINS(DurationError("3600.000001s"), "is too long: expected a duration up to 3600s");
  EXPECT_CONTAINS(DurationError("5m"), "unknown unit");
  EXPECT_CONTAINS(DurationError("1e3ms"), "unknown unit");
  EXPECT_CONTAINS(DurationError("-1s"), "not a duration");
  EXPECT_CONTAINS(DurationError("+1s"), "not a duration");
  EXPECT_CONTAINS(DurationError("1.2.3s"), "not a duration");
  EXPECT_CONTAINS(DurationError("."), "not a duration");
  EXPECT_CONTAINS(DurationError(""), "not a duration");
  EXPECT_CONTAINS(DurationError("s"), "not a duration");
  EXPECT_CONTAINS(DurationError("1ss"), "unknown unit");
  EXPECT_CONTAINS(DurationError(std::string(400, '9') + "s"), "not a duration");
  EXPECT_CONTAINS(DurationError("18446744073709551616ns", UINT64_MAX), "too long");
}

TEST(Quantity, RatesAndSizes) {
  const auto rate = [](const std::string& text) {
    uint64_t v = 0;
    std::string error;
    EXPECT_TRUE(ParseRate(text, 1, 1000000000000, &v, &error)) << text << ": " << error;
    return v;
  };
  EXPECT_EQ(rate("100MB/s"), 100000000u);
  EXPECT_EQ(rate("100MB"), 100000000u);
  EXPECT_EQ(rate("1Gbit/s"), 125000000u);
  EXPECT_EQ(rate("800Mbit/s"), 100000000u);
  EXPECT_EQ(rate("10KiB/s"), 10240u);
  EXPECT_EQ(rate("10kB/s"), 10000u);
  EXPECT_EQ(rate("1000"), 1000u);
  EXPECT_EQ(rate("8bit/s"), 1u);
  EXPECT_EQ(rate("1000GB/s"), 1000000000000u);
  std::string error;
  uint64_t v = 7;
  EXPECT_FALSE(ParseRate("1.5", 1, 1000, &v, &error));  // bare numbers are whole bytes/s
  EXPECT_FALSE(ParseRate("1001", 1, 1000, &v, &error));
  EXPECT_FALSE(ParseRate("0", 1, 1000, &v, &error));
  EXPECT_FALSE(ParseRate("1Mb/s", 1, 1000000000, &v, &error));  // Mb: bits or bytes? refused
  EXPECT_CONTAINS(error, "unknown unit");
  EXPECT_EQ(v, 7u);

  EXPECT_TRUE(ParseSize("16KiB", 0, 1u << 30, &v, &error));
  EXPECT_EQ(v, 16384u);
  EXPECT_TRUE(ParseSize("1MiB", 0, 1u << 30, &v, &error));
  EXPECT_EQ(v, 1u << 20);
  EXPECT_TRUE(ParseSize("1GiB", 0, 1u << 30, &v, &error));
  EXPECT_EQ(v, 1u << 30);
  EXPECT_TRUE(ParseSize("4096", 0, 1u << 30, &v, &error));
  EXPECT_EQ(v, 4096u);
  EXPECT_FALSE(ParseSize("1GiB1", 0, 1u << 30, &v, &error));
  EXPECT_FALSE(ParseSize("1.1GiB", 0, 1u << 30, &v, &error));
  EXPECT_CONTAINS(error, "expected a size from 0B to 1GiB");
  EXPECT_FALSE(ParseSize("1Mbit", 0, 1u << 30, &v, &error));  // sizes are bytes
}

TEST(Quantity, ProbabilitiesAndIntegers) {
  double p = 0.5;
  std::string error;
  for (const char* good : {"0", "1", "0.01", ".5", "1e-4", "1.0"}) {
    EXPECT_TRUE(ParseProbability(good, &p, &error)) << good << ": " << error;
  }
  for (const char* bad : {"", "-0", "+0.5", "1.01", "nan", "inf", "0x1p-3", " 0.5", "0.5 ", "2e0"}) {
    p = 0.25;
    EXPECT_FALSE(ParseProbability(bad, &p, &error)) << bad;
    EXPECT_EQ(p, 0.25) << bad;
  }
  uint64_t v = 0;
  EXPECT_TRUE(ParseUnsigned("010", 100, &v, &error));
  EXPECT_EQ(v, 10u);  // decimal, not octal
  EXPECT_TRUE(ParseUnsigned("0xFF", 255, &v, &error));
  EXPECT_EQ(v, 255u);
  EXPECT_TRUE(ParseUnsigned("18446744073709551615", UINT64_MAX, &v, &error));
  EXPECT_EQ(v, UINT64_MAX);
  for (const char* bad : {"", "0x", "-1", "+1", "1 ", "0x-1", "1e3", "18446744073709551616"}) {
    EXPECT_FALSE(ParseUnsigned(bad, UINT64_MAX, &v, &error)) << bad;
  }
  EXPECT_FALSE(ParseUnsigned("256", 255, &v, &error));
  EXPECT_CONTAINS(error, "\"256\" is too large: expected an integer from 0 to 255");
}

TEST(Quantity, MessagesQuoteSafely) {
  EXPECT_EQ(Quoted("ab"), "\"ab\"");
  EXPECT_EQ(Quoted("a\"b\\"), "\"a\\\"b\\\\\"");
  EXPECT_EQ(Quoted(std::string("\0\n\xff", 3)), "\"\\x00\\x0a\\xff\"");
  EXPECT_EQ(Quoted(std::string(100, 'x')), "\"" + std::string(60, 'x') + "...\"");
  EXPECT_EQ(DurationText(3600ull * 1000000000), "3600s");
  EXPECT_EQ(DurationText(1500000), "1500us");
  EXPECT_EQ(DurationText(0), "0ns");
}

}  // namespace
}  // namespace softrnic::faults
