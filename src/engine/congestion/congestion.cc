// Congestion control, the engine's side (docs/loss.md, section 3): each RC
// QP's controller (congestion_control.h; the algorithm is a setting,
// SOFTRNIC_CC) is told what the requester and completer saw, and the window
// it answers bounds the packets in flight. What stays here is the
// transport's own business: the pipe (packets outstanding minus those the
// peer reported kept, RFC 6675's "pipe", so one loss does not stall the
// window), the reorder window (kSrWindow) that bounds how far past the
// oldest hole the requester may go whatever the window, and the DCQCN
// CNPs: receiving one (the reaction is the controller's) and sending one.
//
// As the DCQCN notification point, a request that arrives with ECN CE
// (traffic class low bits 11) makes the responder send a CNP to the
// requester's QP, at most once per kCnpInterval per QP. (softrnic does not
// mark its own packets ECT yet, so a CE mark comes from a peer that does.)
#include <cstring>

#include "engine/engine.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::engine {
namespace {

// A CNP's reserved bytes after the BTH (A17.9.3).
constexpr uint32_t kCnpReserved = 16;

// The peer keeps at most kSrWindow PSNs past the oldest hole; without
// selective retransmission the former fixed cap applies.
int32_t MaxInflight(const Qp* qp) {
  return qp->sr.peer_sr ? static_cast<int32_t>(kSrWindow) : kMaxInflight;
}

// Packets in flight: outstanding minus those the peer reported kept.
int32_t Pipe(const Qp* qp, int32_t outstanding) {
  return outstanding - (qp->sr.peer_sr ? static_cast<int32_t>(qp->sr.sacked_count) : 0);
}

CcLoss LossEvent(const Qp* qp) { return CcLoss{Clock::now(), qp->sr.sq_psn_max, qp->sr.peer_sr}; }

}  // namespace

// --- Packets in flight per destination (dest_window.h) ---

namespace {

uint64_t DestUnit(const Qp* qp) { return uint64_t{qp->mtu_bytes} + kDestPacketOverhead; }

}  // namespace

void Engine::DestAttach(Qp* qp) {
  DestRelease(qp);
  if (qp->type != QpType::kRc) return;
  const uint32_t budget = transport_->inflight_budget_bytes();
  if (budget == 0) return;
  const Gid& gid = qp->attr.ah_attr.dgid;
  // A same-host peer's packets go through its ring, which pushes back
  // instead of dropping: no socket buffer to guard. Counting them would
  // also be wrong: a placed WRITE's run of PSNs is one ring packet
  // (shm_placed.h), and CI saw 24 QPs hold 128 "packets" of budget that way.
  if (peer_memory_ != nullptr &&
      peer_memory_->PeerFor(transport::Endpoint{gid, udp_port_}, qp->attr.dest_qp_num) != nullptr)
    return;
  DestFlight& f = dest_flight_[gid];
  f.budget_bytes = budget;
  ++f.qps;
  qp->dest.flight = &f;  // unordered_map nodes stay where they are
  qp->dest.gid = gid;
  qp->dest.counted_bytes = 0;
}

void Engine::DestRelease(Qp* qp) {
  DestShare& d = qp->dest;
  if (d.flight == nullptr) return;
  d.flight->inflight_bytes -= d.counted_bytes;
  if (--d.flight->qps == 0) dest_flight_.erase(d.gid);
  d = {};
}

void Engine::DestSync(Qp* qp) {
  DestShare& d = qp->dest;
  if (d.flight == nullptr) return;
  uint64_t bytes = 0;
  const QpState st = qp->attr.qp_state;
  if (st == QpState::kRts || st == QpState::kSqd) {
    const int32_t pipe = Pipe(qp, wire::PsnDiff(qp->req.sq_psn, qp->comp.comp_psn));
    if (pipe > 0) bytes = static_cast<uint64_t>(pipe) * DestUnit(qp);
  }
  d.flight->inflight_bytes = d.flight->inflight_bytes - d.counted_bytes + bytes;
  d.counted_bytes = bytes;
}

bool Engine::DestWindowFull(const Qp* qp) const {
  const DestShare& d = qp->dest;
  return d.flight != nullptr && d.counted_bytes > 0 &&
         d.flight->inflight_bytes + DestUnit(qp) > d.flight->budget_bytes;
}

bool Engine::DestFillsWindow(const Qp* qp) const {
  const DestShare& d = qp->dest;
  return d.flight != nullptr && d.flight->inflight_bytes + 2 * DestUnit(qp) > d.flight->budget_bytes;
}

// --- The QP's own controller ---

void Engine::CcInit(Qp* qp) { qp->cc = MakeCongestionControl(cc_settings_, qp->sr.rtt, stats_); }

bool Engine::CcWindowFull(const Qp* qp) const {
  const int32_t outstanding = wire::PsnDiff(qp->req.sq_psn, qp->comp.comp_psn);
  if (outstanding >= MaxInflight(qp)) return true;
  if (!cc_settings_.enabled || !qp->cc) return false;
  return !qp->cc->CanSend(Pipe(qp, outstanding));
}

bool Engine::CcFillsWindow(const Qp* qp) const {
  // After the packet at sq_psn leaves, would the requester have to wait?
  // Then that packet must ask for an ACK (AckReq), or with a small window
  // (after a timeout, 4 packets) nothing inside it might.
  const int32_t after = wire::PsnDiff(qp->req.sq_psn, qp->comp.comp_psn) + 1;
  if (after >= MaxInflight(qp)) return true;
  if (!cc_settings_.enabled || !qp->cc) return false;
  return !qp->cc->CanSend(Pipe(qp, after));
}

// A QP gets its controller on entering RTS (CcInit): events before that
// are ignored, as the state they would have changed starts over there.
void Engine::CcOnAck(Qp* qp, uint32_t newly_acked, bool rtt_sampled) {
  if (!qp->cc) return;
  qp->cc->OnAck(CcAck{Clock::now(), newly_acked, qp->comp.comp_psn, rtt_sampled, MaxInflight(qp)});
}

void Engine::CcOnLoss(Qp* qp) {
  if (qp->cc) qp->cc->OnLoss(LossEvent(qp));
}

void Engine::CcOnTimeout(Qp* qp) {
  if (qp->cc) qp->cc->OnTimeout(LossEvent(qp));
}

void Engine::HandleCnp(Qp* qp) {
  ++stats_.rx_cnp;
  if (qp->type != QpType::kRc || qp->attr.qp_state != QpState::kRts || !qp->cc) return;
  qp->cc->OnCnp(Clock::now());
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
