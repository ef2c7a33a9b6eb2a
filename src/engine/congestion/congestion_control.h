// Congestion control behind an interface: one controller object per RC QP
// (the requester side), told what the transport saw and asked how many
// packets may be in flight. Which algorithm a QP gets is a setting
// (SOFTRNIC_CC, CcSettings below); docs/engine.md, "Swapping congestion
// control", says how to add one.
//
// The engine (congestion.cc) turns what the requester and completer see into
// the events below; it keeps what is the transport's own business: the pipe
// (packets outstanding minus those a SACK reported kept, RFC 6675), the
// reorder window's cap, the AckReq on the packet that fills the window, and
// the DCQCN notification point (sending CNPs). A controller owns its state
// and counts its decisions in the engine's counters (cc_*_cuts).
//
// The anchor is eRPC's cc/timely.h. That is one concrete class per session
// with one entry point, update_rate(sample), whose output is a rate that a
// timing wheel paces. Here instead: an abstract interface with one method per
// event (an ACK, a loss, a timeout, a CNP), so that a loss-driven and a
// delay-driven algorithm fit the same seam; the output is a window in packets
// (the requester is ACK-clocked and has no pacer); the algorithm is chosen at
// run time, per QP, when it enters RTS; and the RTT estimate is not the
// controller's own but the QP's RttEstimator, which the controller reads.
// There is no OnSend event: neither algorithm needs one (a window is checked
// before a packet leaves, CanSend). A paced (rate-based) controller would add
// it, and a PacingRate query.
//
// Thread-safety: none of its own; used under the engine lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "engine/congestion/rtt_estimator.h"

namespace softrnic::engine {

struct EngineStats;

// The cap on PSNs in flight without a selective peer (go-back-N, or a peer
// that keeps no out-of-order packets): the former fixed cap.
inline constexpr int32_t kMaxInflight = 1024;
// DCQCN's 50 us: the notification point's CNP interval (congestion.cc) and
// the AIMD window's minimum time between CNP cuts.
inline constexpr std::chrono::microseconds kCnpInterval{50};

// Which algorithm, and its knobs. Read from the environment once per device
// (EngineConfig::FromEnvironment); tests may build one directly.
enum class CcAlgorithm {
  kAimdWindow,   // SOFTRNIC_CC unset or any other value (aimd_window.cc)
  kDelayWindow,  // SOFTRNIC_CC=delay (delay_window.cc)
};

struct CcSettings {
  // SOFTRNIC_CC=0: the engine ignores the window (only the reorder window's
  // fixed cap bounds what is in flight). The controller still runs and
  // counts.
  bool enabled = true;
  CcAlgorithm algorithm = CcAlgorithm::kAimdWindow;
  // SOFTRNIC_CC_TARGET_US: the RTT above which a queue is taken to be
  // building. One absolute target, not base RTT + margin per QP: flows
  // through the same queue then see the same signal and converge to a fair
  // share (a QP that measured its base RTT with the queue already standing
  // would otherwise tolerate more of it than the others). The AIMD window
  // raises it to twice the base RTT if that is more (aimd_window.cc).
  double target_us = 1000;
  // SOFTRNIC_CC_DELAY=1 (AIMD window only): also cut on delay alone. Off by
  // default: on the oversubscribed 2-vCPU machines measured (docs/loss.md)
  // the RTT is dominated by CPU scheduling, not by queues, and delay cuts
  // made 4 flows through one tbf unfair (Jain 0.4-0.85); delay then only
  // classifies losses.
  bool aimd_delay_cuts = false;
};

// What a cumulative acknowledgement told the requester.
struct CcAck {
  std::chrono::steady_clock::time_point now;
  uint32_t packets = 0;       // PSNs newly acknowledged (> 0)
  uint32_t cum_psn = 0;       // the oldest PSN still unacknowledged after it
  bool rtt_sampled = false;   // the RttEstimator took a sample from it
  // The engine's own cap on PSNs in flight, whatever the window: the
  // peer's reorder window (kSrWindow) with a selective peer, else
  // kMaxInflight. A window beyond it would mean nothing.
  int32_t max_inflight = 0;
};

// A loss (seen by SACK, a PSN-sequence NAK, a READ response gap) or the
// local ACK timeout (IBA 9.7.6.1.3).
struct CcLoss {
  std::chrono::steady_clock::time_point now;
  uint32_t sent_psn_end = 0;    // one past the highest PSN ever sent
  // The peer keeps out-of-order packets (docs/loss.md): a loss costs one
  // resend, not a window.
  bool selective_peer = false;
};

class CongestionControl {
 public:
  virtual ~CongestionControl() = default;

  // The algorithm's name, as SOFTRNIC_CC spells it ("aimd", "delay").
  virtual const char* name() const = 0;

  virtual void OnAck(const CcAck& ack) = 0;
  virtual void OnLoss(const CcLoss& loss) = 0;
  virtual void OnTimeout(const CcLoss& loss) = 0;
  // A DCQCN CNP (RoCE v2 A17.9.3) from this QP's peer: the responder saw
  // ECN CE on one of our requests.
  virtual void OnCnp(std::chrono::steady_clock::time_point now) = 0;

  // Packets (PSNs) that may be in flight, at least 1; fractional while the
  // window grows by less than a packet per ACK.
  virtual double window() const = 0;
  // May a packet leave while `pipe` packets are in flight?
  bool CanSend(int32_t pipe) const { return pipe < static_cast<int32_t>(window()); }
};

// The implementations, one .cc each.
std::unique_ptr<CongestionControl> MakeAimdWindow(const CcSettings& settings,
                                                  const RttEstimator& rtt, EngineStats& stats);
std::unique_ptr<CongestionControl> MakeDelayWindow(const CcSettings& settings,
                                                   const RttEstimator& rtt, EngineStats& stats);

// The controller `settings` name, for one QP. It reads `rtt` (the QP's) and
// counts into `stats` (the engine's); both must outlive it.
std::unique_ptr<CongestionControl> MakeCongestionControl(const CcSettings& settings,
                                                         const RttEstimator& rtt,
                                                         EngineStats& stats);

}  // namespace softrnic::engine
