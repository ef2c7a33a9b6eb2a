// A delay-based congestion controller (SOFTRNIC_CC=delay): the window
// follows the measured RTT towards a target delay, after Swift (Kumar et
// al., "Swift: Delay is Simple and Effective for Congestion Control in the
// Datacenter", SIGCOMM 2020, Algorithm 1):
//
//   on ACK:      delay <= target: cwnd += ai * acked / cwnd (ai packets per
//                window acknowledged: additive increase)
//                else, if can_decrease:
//                cwnd *= max(1 - beta * (delay - target) / delay, 1 - max_mdf)
//   on loss:     if can_decrease: cwnd *= 1 - max_mdf
//   on timeout:  the RETX_RESET_THRESHOLD-th in a row sets the floor, an
//                earlier one cuts as a loss does
//   can_decrease = now - t_last_decrease >= rtt   (at most one cut per RTT)
//
// What differs from the paper: `delay` is the requester's RTT sample
// (RttEstimator::last_us; no NIC timestamps split fabric from host delay);
// the target is one absolute value (SOFTRNIC_CC_TARGET_US, default 1 ms),
// without Swift's per-hop and per-flow scaling; a cut on delay needs a
// fresh sample (this ACK's), since a packet resent or an ACK that covers
// nothing sent once gives none (Karn); the window never goes below 4
// packets (no pacing below one packet per RTT); a DCQCN CNP (RoCE v2
// A17.9.3), which Swift does not know, cuts as a loss does; and before the
// first RTT sample "once per RTT" means once per target delay. Without a
// selective scoreboard (go-back-N) there are no samples at all and the
// window only grows, and shrinks on losses, CNPs and timeouts.
//
// Counters: cc_delay_cuts, cc_loss_cuts (losses and timeouts), cc_cnp_cuts.
// Losses are not classified (cc_loss_ignored stays 0): delay, not loss,
// is this algorithm's congestion signal, and a loss it sees is cut once per
// RTT at most.
#include <algorithm>
#include <chrono>

#include "engine/congestion/congestion_control.h"
#include "engine/observe/stats.h"

namespace softrnic::engine {
namespace {

constexpr double kInitialCwnd = 64;
constexpr double kMinCwnd = 4;
// Swift's ai (packets per window acknowledged), beta and max_mdf; values
// chosen here, for one hop on a host or a LAN.
constexpr double kAdditiveIncrease = 1;
constexpr double kBeta = 0.8;
constexpr double kMaxMdf = 0.5;
// Swift's RETX_RESET_THRESHOLD: this many timeouts without an ACK between
// them drop the window to the floor.
constexpr int kRetxResetThreshold = 2;

class DelayWindow final : public CongestionControl {
 public:
  DelayWindow(const CcSettings& settings, const RttEstimator& rtt, EngineStats& stats)
      : target_us_(settings.target_us), rtt_(rtt), stats_(stats) {}

  const char* name() const override { return "delay"; }

  void OnAck(const CcAck& ack) override {
    timeouts_ = 0;
    const double delay = rtt_.last_us();
    if (delay <= target_us_) {  // also before the first sample (0)
      cwnd_ += kAdditiveIncrease * ack.packets / std::max(cwnd_, 1.0);
      cwnd_ = std::min(cwnd_, double(ack.max_inflight));
      return;
    }
    if (!ack.rtt_sampled || !CanDecrease(ack.now)) return;
    const double factor = std::max(1 - kBeta * (delay - target_us_) / delay, 1 - kMaxMdf);
    Decrease(ack.now, factor);
    ++stats_.cc_delay_cuts;
  }

  void OnLoss(const CcLoss& loss) override {
    timeouts_ = 0;
    if (!CanDecrease(loss.now)) return;
    Decrease(loss.now, 1 - kMaxMdf);
    ++stats_.cc_loss_cuts;
  }

  void OnTimeout(const CcLoss& loss) override {
    if (++timeouts_ >= kRetxResetThreshold) {
      cwnd_ = kMinCwnd;
      last_decrease_ = loss.now;
    } else if (CanDecrease(loss.now)) {
      Decrease(loss.now, 1 - kMaxMdf);
    } else {
      return;
    }
    ++stats_.cc_loss_cuts;
  }

  void OnCnp(std::chrono::steady_clock::time_point now) override {
    if (!CanDecrease(now)) return;
    Decrease(now, 1 - kMaxMdf);
    ++stats_.cc_cnp_cuts;
  }

  double window() const override { return std::max(cwnd_, kMinCwnd); }

 private:
  bool CanDecrease(std::chrono::steady_clock::time_point now) const {
    const double rtt_us = rtt_.srtt_us() > 0 ? rtt_.srtt_us() : target_us_;
    return now - last_decrease_ >= std::chrono::microseconds(static_cast<int64_t>(rtt_us));
  }
  void Decrease(std::chrono::steady_clock::time_point now, double factor) {
    cwnd_ = std::max(cwnd_ * factor, kMinCwnd);
    last_decrease_ = now;
  }

  const double target_us_;
  const RttEstimator& rtt_;
  EngineStats& stats_;

  double cwnd_ = kInitialCwnd;
  int timeouts_ = 0;  // in a row, without an ACK between them
  std::chrono::steady_clock::time_point last_decrease_{};
};

}  // namespace

std::unique_ptr<CongestionControl> MakeDelayWindow(const CcSettings& settings,
                                                   const RttEstimator& rtt, EngineStats& stats) {
  return std::make_unique<DelayWindow>(settings, rtt, stats);
}

}  // namespace softrnic::engine
