// AdaptiveSpin (engine/progress/adaptive_spin.h): the progress thread
// spins after work only while requests keep arriving within the window,
// and never when it may not (one CPU, real-time) or was preempted. The
// clock here is synthetic: each test plays the calls Progress::Run makes.
#include "engine/progress/adaptive_spin.h"

#include <gtest/gtest.h>

namespace softrnic::engine {
namespace {

using std::chrono::microseconds;

constexpr microseconds kWindow{50};

// Plays Run's loop between two works: passes every `step` until the spin
// gives up (returns false) or `gap` has passed (work arrives: returns true).
// A thread that sleeps wakes at `gap` plus `wake_cost`.
struct Player {
  AdaptiveSpin spin{kWindow, true};
  Clock::time_point now{};
  microseconds spun{0};  // time spent in empty passes

  void Work() { spin.Worked(now); }
  // Returns whether the work `gap` after the last one was caught spinning.
  bool NextWorkAfter(microseconds gap, microseconds wake_cost = microseconds(25),
                     microseconds step = microseconds(1)) {
    const Clock::time_point work_at = now + gap;
    while (now < work_at) {
      if (spin.MaySleep(now)) {
        now = work_at + wake_cost;
        spin.WokeUp();
        spin.Worked(now);
        return false;
      }
      spin.Idle(now);
      now += step;
      spun += step;
    }
    spin.Worked(now);
    return true;
  }
};

TEST(AdaptiveSpin, ADenseRequestStreamIsCaughtSpinningAfterOneSleep) {
  Player p;
  p.Work();
  // The first request after the first work finds the thread asleep (no
  // credit yet); it came within 100 us, so the next ones are caught.
  EXPECT_FALSE(p.NextWorkAfter(microseconds(6)));
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(p.NextWorkAfter(microseconds(6))) << i;
  EXPECT_EQ(p.spin.credit(), AdaptiveSpin::kMaxCredit);
}

TEST(AdaptiveSpin, SparseRequestsNeverSpin) {
  Player p;
  p.Work();
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(p.NextWorkAfter(microseconds(500))) << i;
  EXPECT_EQ(p.spin.credit(), 0);
}

TEST(AdaptiveSpin, AStreamThatEndsCostsEmptyWindowsUntilTheCreditIsGone) {
  Player p;
  p.Work();
  for (int i = 0; i < 20; ++i) p.NextWorkAfter(microseconds(6));
  ASSERT_EQ(p.spin.credit(), AdaptiveSpin::kMaxCredit);
  // Traffic stops: each request now comes long after. A full credit pays
  // two empty windows (8 / 4), then the thread sleeps at once.
  p.spun = microseconds(0);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(p.NextWorkAfter(microseconds(5000))) << i;
  EXPECT_EQ(p.spun, 2 * kWindow);
  EXPECT_LE(p.spin.credit(), 0);
}

TEST(AdaptiveSpin, RequestsJustBeyondTheWindowSpinAtMostOneInFiveGaps) {
  // Every 60 us: a sleep ends in work within 100 us (a credit), the spin
  // that follows misses it (four credits). Count the time spent spinning.
  Player p;
  p.Work();
  for (int i = 0; i < 1000; ++i) p.NextWorkAfter(microseconds(60));
  const auto total = std::chrono::duration_cast<microseconds>(p.now - Clock::time_point{});
  // One 50 us window per five requests of ~85 us: ~12% of the time.
  EXPECT_GT(p.spun.count(), 0);
  EXPECT_LT(p.spun.count() * 100 / total.count(), 20) << p.spun.count() << " of " << total.count();
}

TEST(AdaptiveSpin, APreemptedSpinStops) {
  Player p;
  p.Work();
  for (int i = 0; i < 20; ++i) p.NextWorkAfter(microseconds(6));
  ASSERT_GT(p.spin.credit(), 0);
  // The spin is preempted for 40 us between two empty passes.
  p.spin.Idle(p.now);
  p.now += microseconds(40);
  p.spin.Idle(p.now);
  EXPECT_EQ(p.spin.credit(), 0);
  EXPECT_TRUE(p.spin.MaySleep(p.now));
}

TEST(AdaptiveSpin, NotAllowedOrZeroWindowNeverSpins) {
  for (const bool allowed : {false, true}) {
    Player p{AdaptiveSpin(allowed ? microseconds(0) : kWindow, allowed)};
    p.Work();
    for (int i = 0; i < 50; ++i) EXPECT_FALSE(p.NextWorkAfter(microseconds(6))) << i;
    EXPECT_FALSE(p.spin.enabled());
  }
}

}  // namespace
}  // namespace softrnic::engine
