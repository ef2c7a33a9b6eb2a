// Congestion control: a congestion window per RC QP, in packets (PSNs) in
// flight (docs/loss.md).
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
// see engine.h. Packets the peer reported kept no longer count as in flight
// (the "pipe" of RFC 6675), so one loss does not stall the window; the
// reorder window (kSrWindow) still bounds how far past the oldest hole the
// requester may go, and resends are paced by the same window.
//
// As the DCQCN notification point, a request that arrives with ECN CE
// (traffic class low bits 11) makes the responder send a CNP to the
// requester's QP, at most once per kCnpInterval per QP. (softrnic does not
// mark its own packets ECT yet, so a CE mark comes from a peer that does.)
#include <algorithm>
#include <cstring>

#include "engine/engine.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::engine {
namespace {

// The former fixed cap (go-back-N, or a peer without selective
// retransmission), now the window's ceiling.
constexpr double kMaxInflightGbn = 1024;
constexpr double kInitialCwnd = 64;
constexpr double kMinCwnd = 4;
// DCQCN's 50 us: the notification point's CNP interval and the reaction
// point's minimum time between rate cuts.
constexpr auto kCnpInterval = std::chrono::microseconds(50);
// A CNP's reserved bytes after the BTH (A17.9.3).
constexpr uint32_t kCnpReserved = 16;

double MaxCwnd(const Qp* qp) { return qp->sr.peer_sr ? double{kSrWindow} : kMaxInflightGbn; }

}  // namespace

void Engine::CcInit(Qp* qp) {
  qp->cc = {};
  qp->cc.cwnd = kInitialCwnd;
  qp->cc.ssthresh = kMaxInflightGbn;
  qp->cc.recovery_psn = qp->req.sq_psn;
}

bool Engine::CcWindowFull(const Qp* qp) const {
  const int32_t outstanding = wire::PsnDiff(qp->req.sq_psn, qp->comp.comp_psn);
  // The peer keeps at most kSrWindow PSNs past the oldest hole.
  if (outstanding >= (qp->sr.peer_sr ? static_cast<int32_t>(kSrWindow) : int32_t{1024}))
    return true;
  if (!cc_enabled_) return false;
  const int32_t pipe =
      outstanding - (qp->sr.peer_sr ? static_cast<int32_t>(qp->sr.sacked_count) : 0);
  return pipe >= static_cast<int32_t>(std::max(qp->cc.cwnd, kMinCwnd));
}

bool Engine::CcFillsWindow(const Qp* qp) const {
  // After the packet at sq_psn leaves, would the requester have to wait?
  // Then that packet must ask for an ACK (AckReq), or with a small window
  // (after a timeout, 4 packets) nothing inside it might.
  const int32_t after = wire::PsnDiff(qp->req.sq_psn, qp->comp.comp_psn) + 1;
  if (after >= (qp->sr.peer_sr ? static_cast<int32_t>(kSrWindow) : int32_t{1024})) return true;
  if (!cc_enabled_) return false;
  const int32_t pipe = after - (qp->sr.peer_sr ? static_cast<int32_t>(qp->sr.sacked_count) : 0);
  return pipe >= static_cast<int32_t>(std::max(qp->cc.cwnd, kMinCwnd));
}

void Engine::CcOnAck(Qp* qp, uint32_t newly_acked) {
  if (qp->cc.in_recovery && wire::PsnDiff(qp->comp.comp_psn, qp->cc.recovery_psn) >= 0)
    qp->cc.in_recovery = false;
  const bool sample = qp->sr.rtt_sample;
  qp->sr.rtt_sample = false;
  if (cc_delay_ && sample && qp->sr.srtt_us > CcTargetUs(qp)) {
    // A queue is building at the bottleneck (RTT above base + target, as
    // in Swift/TIMELY): shrink in proportion to the excess, at most once
    // per round trip, before the queue overflows into loss.
    const Clock::time_point now = Clock::now();
    if (now - qp->cc.last_delay_cut >=
        std::chrono::microseconds(static_cast<int64_t>(qp->sr.srtt_us))) {
      const double excess = (qp->sr.srtt_us - CcTargetUs(qp)) / qp->sr.srtt_us;
      qp->cc.cwnd = std::max(qp->cc.cwnd * std::max(0.5, 1 - 0.8 * excess), kMinCwnd);
      qp->cc.ssthresh = qp->cc.cwnd;
      qp->cc.last_delay_cut = now;
      ++stats_.cc_delay_cuts;
    }
    return;
  }
  if (qp->cc.in_recovery) return;  // no growth while repairing a loss
  if (qp->cc.cwnd < qp->cc.ssthresh) {
    qp->cc.cwnd += newly_acked;
  } else {
    qp->cc.cwnd += double(newly_acked) / std::max(qp->cc.cwnd, 1.0);
  }
  qp->cc.cwnd = std::min(qp->cc.cwnd, MaxCwnd(qp));
}

void Engine::CcOnLoss(Qp* qp) {
  if (qp->cc.in_recovery) return;  // one cut per episode
  // The latest sample too: the smoothed RTT lags a queue that just filled.
  if (qp->sr.peer_sr && qp->sr.srtt_us > 0 &&
      std::max(qp->sr.srtt_us, qp->sr.last_rtt_us) <= CcTargetUs(qp)) {
    // No queue behind the loss: the network dropped the packet for another
    // reason (a lossy link, a policer). Cutting would only starve the flow;
    // selective retransmission repairs it at the cost of the lost packet.
    ++stats_.cc_loss_ignored;
    return;
  }
  qp->cc.ssthresh = std::max(qp->cc.cwnd / 2, kMinCwnd);
  qp->cc.cwnd = qp->cc.ssthresh;
  qp->cc.in_recovery = true;
  qp->cc.recovery_psn = qp->sr.sq_psn_max;
  ++stats_.cc_loss_cuts;
}

void Engine::CcOnTimeout(Qp* qp) {
  qp->cc.ssthresh = std::max(qp->cc.cwnd / 2, kMinCwnd);
  qp->cc.cwnd = kMinCwnd;
  qp->cc.in_recovery = true;
  qp->cc.recovery_psn = qp->sr.sq_psn_max;
  ++stats_.cc_loss_cuts;
}

void Engine::HandleCnp(Qp* qp) {
  ++stats_.rx_cnp;
  if (qp->type != QpType::kRc || qp->attr.qp_state != QpState::kRts) return;
  const Clock::time_point now = Clock::now();
  if (now - qp->cc.last_cnp_cut < kCnpInterval) return;
  qp->cc.last_cnp_cut = now;
  qp->cc.cwnd = std::max(qp->cc.cwnd / 2, kMinCwnd);
  qp->cc.ssthresh = qp->cc.cwnd;
  ++stats_.cc_cnp_cuts;
}

void Engine::MaybeSendCnp(Qp* qp, const transport::RxPacket& rx) {
  if ((rx.traffic_class & 3) != 3) return;  // not CE
  const Clock::time_point now = Clock::now();
  if (now - qp->resp.last_cnp_sent < kCnpInterval) return;
  qp->resp.last_cnp_sent = now;
  // A17.9.3: BTH (opcode 0x81, the congested flow's source QP, BECN set)
  // and 16 reserved bytes.
  uint8_t* reserved = StartPacket(
      {.opcode = wire::op::kCnp, .dest_qpn = qp->attr.dest_qp_num, .becn = true}, kCnpReserved);
  std::memset(reserved, 0, kCnpReserved);
  CommitToPeer(qp);
  ++stats_.tx_cnp;
}

}  // namespace softrnic::engine
