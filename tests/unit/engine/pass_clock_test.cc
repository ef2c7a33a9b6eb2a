// PassClock (engine/pass_clock.h): the time a pass works with. It never
// runs ahead of the clock or backwards, learns the TSC's rate after a
// millisecond of calls, and from then on reads the clock less often than
// it is asked (on x86-64).
#include "engine/pass_clock.h"

#include <gtest/gtest.h>

namespace softrnic::engine {
namespace {

TEST(PassClockTest, NeverAheadOrBackwardsAndGatesOnceCalibrated) {
  PassClock clock;
  Clock::time_point prev{};
  uint64_t calls = 0, repeats = 0;
  const auto end = Clock::now() + std::chrono::milliseconds(20);
  while (Clock::now() < end) {
    const Clock::time_point t = clock.Now();
    const Clock::time_point real = Clock::now();
    ASSERT_LE(t, real) << "a pass's time ahead of the clock";
    ASSERT_GE(t, prev) << "a pass's time went backwards";
    repeats += t == prev;
    prev = t;
    ++calls;
  }
#if defined(__x86_64__)
  EXPECT_GT(clock.gate_cycles(), 0u) << "the TSC's rate was not learned in 20 ms";
  // Calls closer together than the gate (500 ns: most of these) return the
  // value read before.
  EXPECT_GT(repeats, 0u) << calls << " calls";
#endif
}

}  // namespace
}  // namespace softrnic::engine
