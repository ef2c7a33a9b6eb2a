// The default congestion controller (SOFTRNIC_CC unset): a loss-driven
// AIMD window in packets (PSNs) in flight, with DCQCN's reaction to CNPs
// (docs/loss.md, section 3).
//
// Additive increase, multiplicative decrease (TCP Reno/NewReno; IRN's
// fallback): slow start up to ssthresh, then one packet per window of
// acknowledged packets. The window halves once per loss episode (the
// episode ends when the cumulative acknowledgement passes what was in
// flight when it began) on a loss seen by SACK, a PSN-sequence NAK, a READ
// response gap; falls to the floor on the local ACK timeout; and halves on a
// DCQCN CNP (opcode 0x81, RoCE v2 Annex A17.9.3) at most once per
// kCnpInterval.
//
// With SACKs (a softrnic peer) the RTT is measured (Karn's rule) and a loss
// counts as congestion only when the smoothed RTT is above the target
// (SOFTRNIC_CC_TARGET_US, default 1 ms, or twice the base RTT): a tail drop
// at a full queue comes with a queueing delay, a random loss on a lossy link
// does not, and halving on the latter would starve the flow for nothing
// (selective retransmission repairs it for the price of the lost packet).
// SOFTRNIC_CC_DELAY=1 also cuts on delay alone (Swift-like); off by default,
// CcSettings says why.
#include <algorithm>
#include <chrono>

#include "engine/congestion/congestion_control.h"
#include "engine/observe/stats.h"
#include "wire/headers.h"

namespace softrnic::engine {
namespace {

constexpr double kInitialCwnd = 64;
constexpr double kMinCwnd = 4;

class AimdWindow final : public CongestionControl {
 public:
  AimdWindow(const CcSettings& settings, const RttEstimator& rtt, EngineStats& stats)
      : target_us_(settings.target_us),
        delay_cuts_(settings.aimd_delay_cuts),
        rtt_(rtt),
        stats_(stats) {}

  const char* name() const override { return "aimd"; }

  void OnAck(const CcAck& ack) override {
    if (in_recovery_ && wire::PsnDiff(ack.cum_psn, recovery_psn_) >= 0) in_recovery_ = false;
    if (delay_cuts_ && ack.rtt_sampled && rtt_.srtt_us() > TargetUs()) {
      // A queue is building at the bottleneck (RTT above the target, as in
      // Swift/TIMELY): shrink in proportion to the excess, at most once per
      // round trip, before the queue overflows into loss.
      const double srtt = rtt_.srtt_us();
      if (ack.now - last_delay_cut_ >= std::chrono::microseconds(static_cast<int64_t>(srtt))) {
        const double excess = (srtt - TargetUs()) / srtt;
        cwnd_ = std::max(cwnd_ * std::max(0.5, 1 - 0.8 * excess), kMinCwnd);
        ssthresh_ = cwnd_;
        last_delay_cut_ = ack.now;
        ++stats_.cc_delay_cuts;
      }
      return;
    }
    if (in_recovery_) return;  // no growth while repairing a loss
    if (cwnd_ < ssthresh_) {
      cwnd_ += ack.packets;
    } else {
      cwnd_ += double(ack.packets) / std::max(cwnd_, 1.0);
    }
    cwnd_ = std::min(cwnd_, double(ack.max_inflight));
  }

  void OnLoss(const CcLoss& loss) override {
    if (in_recovery_) return;  // one cut per episode
    // The latest sample too: the smoothed RTT lags a queue that just filled.
    if (loss.selective_peer && rtt_.srtt_us() > 0 &&
        std::max(rtt_.srtt_us(), rtt_.last_us()) <= TargetUs()) {
      // No queue behind the loss: the network dropped the packet for
      // another reason (a lossy link, a policer). Cutting would only starve
      // the flow; selective retransmission repairs it at the cost of the
      // lost packet.
      ++stats_.cc_loss_ignored;
      return;
    }
    ssthresh_ = std::max(cwnd_ / 2, kMinCwnd);
    cwnd_ = ssthresh_;
    in_recovery_ = true;
    recovery_psn_ = loss.sent_psn_end;
    ++stats_.cc_loss_cuts;
  }

  void OnTimeout(const CcLoss& loss) override {
    ssthresh_ = std::max(cwnd_ / 2, kMinCwnd);
    cwnd_ = kMinCwnd;
    in_recovery_ = true;
    recovery_psn_ = loss.sent_psn_end;
    ++stats_.cc_loss_cuts;
  }

  void OnCnp(std::chrono::steady_clock::time_point now) override {
    if (now - last_cnp_cut_ < kCnpInterval) return;
    last_cnp_cut_ = now;
    cwnd_ = std::max(cwnd_ / 2, kMinCwnd);
    ssthresh_ = cwnd_;
    ++stats_.cc_cnp_cuts;
  }

  double window() const override { return std::max(cwnd_, kMinCwnd); }

 private:
  // Twice the base RTT if that is more than the setting: a path whose
  // unloaded RTT is above the target would otherwise always look queued.
  double TargetUs() const { return std::max(target_us_, 2 * rtt_.min_us()); }

  const double target_us_;
  const bool delay_cuts_;
  const RttEstimator& rtt_;
  EngineStats& stats_;

  double cwnd_ = kInitialCwnd;
  double ssthresh_ = kMaxInflight;
  uint32_t recovery_psn_ = 0;  // one cut per loss episode: until the cumulative ACK passes it
  bool in_recovery_ = false;
  std::chrono::steady_clock::time_point last_cnp_cut_{};
  std::chrono::steady_clock::time_point last_delay_cut_{};
};

}  // namespace

std::unique_ptr<CongestionControl> MakeAimdWindow(const CcSettings& settings,
                                                  const RttEstimator& rtt, EngineStats& stats) {
  return std::make_unique<AimdWindow>(settings, rtt, stats);
}

}  // namespace softrnic::engine
