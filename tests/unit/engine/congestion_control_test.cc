// The congestion controllers against their interface alone
// (congestion_control.h): no engine, no packets; events with scripted times
// and RTT samples. The AIMD window (the default) grows without loss and cuts
// on loss once per episode, on a timeout to the floor, on a CNP at most once
// per 50 us; the delay window (SOFTRNIC_CC=delay, after Swift) grows below
// its target, cuts in proportion to the excess above it at most once per
// RTT, and converges on a scripted bottleneck.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "engine/congestion/congestion_control.h"
#include "engine/engine_config.h"
#include "engine/observe/stats.h"

namespace softrnic::engine::testing {
namespace {

using std::chrono::microseconds;
using TimePoint = std::chrono::steady_clock::time_point;

constexpr int32_t kSelectiveCap = 512;  // kSrWindow, the cap with a selective peer

struct Harness {
  explicit Harness(CcSettings s) : settings(s) {
    cc = MakeCongestionControl(settings, rtt, stats);
  }
  // A cumulative ACK of `packets`, `us` after the previous event, with an
  // RTT sample of `sample_us` if that is > 0.
  void Ack(uint32_t packets, double sample_us = 0, int64_t us = 1) {
    now += microseconds(us);
    cum_psn += packets;
    if (sample_us > 0) rtt.AddSample(sample_us);
    cc->OnAck(CcAck{now, packets, cum_psn, sample_us > 0, kSelectiveCap});
  }
  CcLoss Loss(bool selective = true) const { return CcLoss{now, sent_psn_end, selective}; }

  CcSettings settings;
  RttEstimator rtt;
  EngineStats stats;
  std::unique_ptr<CongestionControl> cc;
  TimePoint now = TimePoint{} + std::chrono::hours(1);
  uint32_t cum_psn = 0;
  uint32_t sent_psn_end = 1000;
};

CcSettings Aimd() { return CcSettings{}; }
CcSettings Delay(double target_us) {
  CcSettings s;
  s.algorithm = CcAlgorithm::kDelayWindow;
  s.target_us = target_us;
  return s;
}

TEST(CcSettingsTest, TheEnvironmentSelectsTheAlgorithm) {
  auto cc = [](config::Environment::Values values) {
    EngineConfig c;
    EXPECT_TRUE(EngineConfig::FromEnvironment(config::Environment(std::move(values)), &c, nullptr));
    return c.cc;
  };
  EXPECT_EQ(cc({}).algorithm, CcAlgorithm::kAimdWindow);
  EXPECT_TRUE(cc({}).enabled);
  EXPECT_EQ(cc({{"SOFTRNIC_CC", "delay"}}).algorithm, CcAlgorithm::kDelayWindow);
  EXPECT_EQ(cc({{"SOFTRNIC_CC", "aimd"}}).algorithm, CcAlgorithm::kAimdWindow);
  EXPECT_FALSE(cc({{"SOFTRNIC_CC", "0"}}).enabled);
  EXPECT_EQ(cc({{"SOFTRNIC_CC_TARGET_US", "250"}}).target_us, 250);
  EXPECT_EQ(cc({{"SOFTRNIC_CC_TARGET_US", "-3"}}).target_us, 1000);  // not > 0: the default
  EXPECT_TRUE(cc({{"SOFTRNIC_CC_DELAY", "1"}}).aimd_delay_cuts);
  RttEstimator rtt;
  EngineStats stats;
  EXPECT_STREQ(MakeCongestionControl(Aimd(), rtt, stats)->name(), "aimd");
  EXPECT_STREQ(MakeCongestionControl(Delay(100), rtt, stats)->name(), "delay");
}

TEST(RttEstimatorTest, SmoothsAndKeepsTheMinimum) {
  RttEstimator r;
  r.AddSample(100);
  EXPECT_DOUBLE_EQ(r.srtt_us(), 100);
  r.AddSample(180);
  EXPECT_DOUBLE_EQ(r.srtt_us(), 110);  // 7/8 * 100 + 1/8 * 180
  EXPECT_DOUBLE_EQ(r.last_us(), 180);
  EXPECT_DOUBLE_EQ(r.min_us(), 100);
  r.Reset();
  EXPECT_EQ(r.srtt_us(), 0);
}

// --- AIMD window (the default) ---

TEST(AimdWindowTest, GrowsWithoutLossUpToTheCap) {
  Harness h(Aimd());
  EXPECT_DOUBLE_EQ(h.cc->window(), 64);
  h.Ack(64);  // slow start: one packet per packet acknowledged
  EXPECT_DOUBLE_EQ(h.cc->window(), 128);
  for (int i = 0; i < 100; ++i) h.Ack(64);
  EXPECT_DOUBLE_EQ(h.cc->window(), kSelectiveCap);
  EXPECT_TRUE(h.cc->CanSend(kSelectiveCap - 1));
  EXPECT_FALSE(h.cc->CanSend(kSelectiveCap));
}

TEST(AimdWindowTest, LossHalvesOncePerEpisodeThenGrowsByOnePerWindow) {
  Harness h(Aimd());
  h.sent_psn_end = 20;
  h.cc->OnLoss(h.Loss(false));
  EXPECT_DOUBLE_EQ(h.cc->window(), 32);
  h.cc->OnLoss(h.Loss(false));  // the same episode
  h.Ack(10);                     // no growth while repairing
  EXPECT_DOUBLE_EQ(h.cc->window(), 32);
  EXPECT_EQ(h.stats.cc_loss_cuts, 1u);
  h.Ack(10);  // reaches what was in flight: the episode ends
  EXPECT_GT(h.cc->window(), 32);
  h.Ack(32);  // congestion avoidance: +1 per window
  EXPECT_NEAR(h.cc->window(), 33, 0.5);
  h.sent_psn_end = 5000;
  h.cc->OnLoss(h.Loss(false));
  EXPECT_EQ(h.stats.cc_loss_cuts, 2u);
  EXPECT_LT(h.cc->window(), 17);
}

TEST(AimdWindowTest, LossWithoutQueueingDelayIsNotCongestion) {
  Harness h(Aimd());
  h.Ack(1, 50);  // 50 us, well under the 1 ms target
  h.cc->OnLoss(h.Loss(true));
  EXPECT_DOUBLE_EQ(h.cc->window(), 65);
  EXPECT_EQ(h.stats.cc_loss_ignored, 1u);
  h.Ack(1, 5000);  // the latest sample shows a queue
  h.cc->OnLoss(h.Loss(true));
  EXPECT_EQ(h.stats.cc_loss_cuts, 1u);
}

TEST(AimdWindowTest, TimeoutDropsToTheFloor) {
  Harness h(Aimd());
  h.cc->OnTimeout(h.Loss());
  EXPECT_DOUBLE_EQ(h.cc->window(), 4);
  EXPECT_TRUE(h.cc->CanSend(3));
  EXPECT_FALSE(h.cc->CanSend(4));
}

TEST(AimdWindowTest, CnpHalvesAtMostOncePer50us) {
  Harness h(Aimd());
  h.cc->OnCnp(h.now);
  EXPECT_DOUBLE_EQ(h.cc->window(), 32);
  h.cc->OnCnp(h.now + microseconds(49));
  EXPECT_DOUBLE_EQ(h.cc->window(), 32);
  h.cc->OnCnp(h.now + microseconds(50));
  EXPECT_DOUBLE_EQ(h.cc->window(), 16);
  for (int i = 1; i <= 10; ++i) h.cc->OnCnp(h.now + microseconds(50 + 50 * i));
  EXPECT_DOUBLE_EQ(h.cc->window(), 4);  // never below the floor
  EXPECT_EQ(h.stats.cc_cnp_cuts, 12u);
}

TEST(AimdWindowTest, DelayCutsOnlyWhenEnabled) {
  CcSettings s = Aimd();
  s.target_us = 100;
  Harness off(s);
  off.Ack(1, 100);
  off.Ack(1, 2500);
  EXPECT_EQ(off.stats.cc_delay_cuts, 0u);
  s.aimd_delay_cuts = true;
  Harness on(s);
  on.Ack(1, 100);   // base RTT 100 us: the target is 200 us (twice that)
  on.Ack(1, 2500);  // srtt 400
  EXPECT_EQ(on.stats.cc_delay_cuts, 1u);
  EXPECT_DOUBLE_EQ(on.cc->window(), 65 * 0.6);  // 1 - 0.8 * (400 - 200) / 400
  on.Ack(1, 400, 100);  // inside one RTT of the cut
  EXPECT_EQ(on.stats.cc_delay_cuts, 1u);
}

// --- Delay window (SOFTRNIC_CC=delay) ---

TEST(DelayWindowTest, GrowsAdditivelyBelowTarget) {
  Harness h(Delay(200));
  for (int i = 0; i < 64; ++i) h.Ack(1, 100);
  EXPECT_NEAR(h.cc->window(), 65, 0.05);  // one packet per window acknowledged
  for (int i = 0; i < 40000; ++i) h.Ack(8, 100);
  EXPECT_DOUBLE_EQ(h.cc->window(), kSelectiveCap);
  EXPECT_EQ(h.stats.cc_delay_cuts, 0u);
}

TEST(DelayWindowTest, CutsInProportionToTheExcessOncePerRtt) {
  Harness h(Delay(200));
  h.Ack(1, 250);  // 25 % over: 1 - 0.8 * 50 / 250
  EXPECT_NEAR(h.cc->window(), 64 * 0.84, 1e-9);
  EXPECT_EQ(h.stats.cc_delay_cuts, 1u);
  // Far over: the cut is bounded by max_mdf (halving); and not inside the
  // same RTT (srtt is now ~ 250 us).
  for (int i = 0; i < 20; ++i) h.Ack(1, 4000, 5);
  EXPECT_EQ(h.stats.cc_delay_cuts, 1u);
  const double before = h.cc->window();
  h.now += std::chrono::milliseconds(5);
  h.Ack(1, 4000);
  EXPECT_EQ(h.stats.cc_delay_cuts, 2u);
  EXPECT_NEAR(h.cc->window(), before * 0.5, 1e-9);
  // An ACK without a fresh sample decides nothing above the target.
  h.now += std::chrono::milliseconds(5);
  h.Ack(1);
  EXPECT_EQ(h.stats.cc_delay_cuts, 2u);
}

TEST(DelayWindowTest, LossCnpAndTimeoutCutOncePerRtt) {
  Harness h(Delay(200));
  h.Ack(1, 100);
  const double w = h.cc->window();
  h.cc->OnLoss(h.Loss());
  EXPECT_NEAR(h.cc->window(), w / 2, 1e-9);
  h.cc->OnCnp(h.now + microseconds(10));  // same RTT: no second cut
  EXPECT_NEAR(h.cc->window(), w / 2, 1e-9);
  h.now += microseconds(200);
  h.cc->OnCnp(h.now);
  EXPECT_NEAR(h.cc->window(), w / 4, 1e-9);
  EXPECT_EQ(h.stats.cc_loss_cuts, 1u);
  EXPECT_EQ(h.stats.cc_cnp_cuts, 1u);
  // Two timeouts in a row drop it to the floor whatever the RTT.
  h.now += microseconds(200);
  h.cc->OnTimeout(h.Loss());
  h.cc->OnTimeout(h.Loss());
  EXPECT_DOUBLE_EQ(h.cc->window(), 4);
  EXPECT_EQ(h.stats.cc_loss_ignored, 0u);
}

// A scripted bottleneck: base RTT 100 us, 20 packets fill the pipe, each
// packet beyond them waits 5 us in the queue. The RTT reaches the 200 us
// target at a window of 40: the controller must settle around there, with
// at most one cut per RTT, and never collapse to the floor.
TEST(DelayWindowTest, ConvergesToTheTargetDelay) {
  Harness h(Delay(200));
  const auto rtt_of = [](double w) { return 100 + std::max(0.0, w - 20) * 5; };
  TimePoint last_cut{};
  double low = 1e9, high = 0;
  for (int round = 0; round < 400; ++round) {
    const double w = h.cc->window();
    const double rtt = rtt_of(w);
    const int n = static_cast<int>(w);
    for (int i = 0; i < n; ++i) {
      const uint64_t cuts = h.stats.cc_delay_cuts;
      h.Ack(1, rtt, static_cast<int64_t>(rtt / n));
      if (h.stats.cc_delay_cuts != cuts) {
        if (last_cut != TimePoint{}) {
          EXPECT_GE(h.now - last_cut, microseconds(static_cast<int64_t>(h.rtt.srtt_us())))
              << "two cuts inside one RTT, round " << round;
        }
        last_cut = h.now;
      }
    }
    if (round >= 300) {
      low = std::min(low, h.cc->window());
      high = std::max(high, h.cc->window());
    }
  }
  EXPECT_GT(h.stats.cc_delay_cuts, 10u);
  EXPECT_GE(low, 25) << "window " << low << "-" << high;
  EXPECT_LE(high, 50) << "window " << low << "-" << high;
  EXPECT_LE(rtt_of(high), 1.5 * 200);
}

}  // namespace
}  // namespace softrnic::engine::testing
