// Selective retransmission between softrnic endpoints (docs/loss.md), after
// IRN (Mittal et al., SIGCOMM'18), within RoCE v2's wire format.
//
// Responder: an out-of-order request (PSN past the expected one) is kept,
// whole, in a per-QP reorder store of kSrWindow slots (taken by the first such packet),
// and answered with a SACK: a NAK "PSN sequence error" for the expected PSN
// (acknowledging everything before it, IBA 9.7.5.2.2) whose payload is a
// bitmap of the PSNs kept after it (wire/headers.h). When the missing packet
// arrives and has been executed, the kept packets that follow it are run
// through exactly the same checks and execution as if they had just arrived,
// one by one, in PSN order. So every ordering guarantee of the in-order path
// holds unchanged: messages are placed and completed in order, READs and
// atomics run once, in order, duplicates are answered from the saved
// resources (IBA 9.7.5.1.3), the opcode sequence and RNR checks see the
// same state. The cost is one copy of each out-of-order packet.
//
// Requester: a scoreboard entry per request PSN in flight (psn % kSrWindow)
// holds whether a SACK reported it and a transmit sequence number. A packet
// counts as lost once a packet transmitted at least kReorderSlack packets
// after it has been reported received (order-based detection, like RACK),
// which also catches a lost retransmission. Only lost packets are sent
// again, rebuilt from the application's memory as go-back-N does. The local
// ACK timeout stays the last resort: it falls back to go-back-N from the
// oldest unacknowledged PSN and forgets every SACK (a SACK is a hint, never
// an acknowledgement, so a peer that drops what it reported, or a forged
// SACK, can delay but never complete anything). Completion is driven only
// by cumulative acknowledgements, exactly as before.
//
// Negotiation: the BTH sr bit (a reserved bit, wire/headers.h). A
// requester sets it on its requests when it offers selective
// retransmission; a responder keeps out-of-order packets and sends SACKs
// only for requests that carry it, and sets it on its own ACKs; the
// requester uses the SACK-driven mode only after a response carried it.
// Any other peer sees and gets standard go-back-N.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <new>

#include "engine/engine.h"
#include "engine/roles/sr_store.h"
#include "engine/wr_opcode.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::engine {
namespace {

static_assert(kSrWindow == wire::kSackMaxBits, "the SACK bitmap covers the reorder window");

// A packet is presumed lost when a packet sent this many transmissions
// later has been reported: tolerates the mild reordering of a real network
// (and of the fault injector, which swaps neighbours) without waiting for
// the timeout.
constexpr uint64_t kReorderSlack = 3;

// Largest packet kept: headers (at most BTH + RETH + ImmDt, or the atomic
// ETH) plus one path MTU plus pad and ICRC.
constexpr uint32_t kMaxHeaderBytes = 64;

// Whether a kept packet and a new one for the same PSN are the same request:
// equal except for what a resend may change (BTH byte 4: FECN/BECN; byte
// 8's AckReq bit) and the ICRC, which covers those.
bool SamePacket(const uint8_t* kept, uint32_t kept_length, const wire::Packet& pkt) {
  if (kept_length != pkt.length || pkt.length < sizeof(wire::Bth) + wire::kIcrcSize) return false;
  const uint8_t* p = pkt.data;
  if (std::memcmp(kept, p, 4) != 0 || std::memcmp(kept + 5, p + 5, 3) != 0 ||
      ((kept[8] ^ p[8]) & 0x7F) != 0)
    return false;
  return std::memcmp(kept + 9, p + 9, pkt.length - 9 - wire::kIcrcSize) == 0;
}

// Responder: the reorder store's arrays, on the first packet kept (qp.h);
// false if out of memory.
bool TakeReorderStore(Qp* qp) {
  SrStoreState& st = qp->sr_store;
  if (st.ooo_store) return true;
  try {
    st.ooo_len.assign(kSrWindow, 0);
    st.ooo_psn.assign(kSrWindow, 0);
    st.ran_from_store.assign(kSrWindow, SrRun{});
  } catch (const std::bad_alloc&) {
    st.ooo_len = {};
    st.ooo_psn = {};
    st.ran_from_store = {};
    return false;
  }
  // Default-initialised: the pages are touched only by the packets kept.
  st.ooo_store.reset(new (std::nothrow) uint8_t[size_t{kSrWindow} * st.ooo_slot_bytes]);
  return st.ooo_store != nullptr;
}

// Requester: the scoreboard, on the first packet sent (qp.h); false if out
// of memory.
bool TakeScoreboard(Qp* qp) {
  // Without it (out of memory) this QP recovers by its timeout, as with
  // go-back-N: every scoreboard user treats an empty one as nothing known.
  try {
    qp->sr.scoreboard.assign(kSrWindow, SrSlot{});
  } catch (const std::bad_alloc&) {
    qp->sr.scoreboard = {};
    return false;
  }
  return true;
}

}  // namespace

uint64_t SrRequestDigest(const uint8_t* packet, size_t length) {
  // FNV-1a over the bytes SamePacket compares.
  uint64_t h = 14695981039346656037ull;
  const auto mix = [&h](uint8_t b) {
    h ^= b;
    h *= 1099511628211ull;
  };
  if (length < sizeof(wire::Bth) + wire::kIcrcSize) return h;
  for (size_t i = 0; i < length - wire::kIcrcSize; ++i) {
    if (i == 4) continue;
    mix(i == 8 ? static_cast<uint8_t>(packet[i] & 0x7F) : packet[i]);
  }
  return h;
}

void Engine::SrPrepareResponder(Qp* qp) {
  qp->sr_store = {};
  if (qp->type != QpType::kRc || qp->xrc != XrcRole::kNone || !selective_) return;
  // The slot size is known now (the path MTU); the packet memory itself
  // waits for the first packet kept (SrKeep): most connections never see
  // one out of order, and zero-filling kSrWindow slots here cost ~5 ms per
  // connection (rdma_cm's connect rate, docs/benchmarks.md) and kept
  // 0.5-2 MiB resident per connected QP.
  // The same holds for the slot bookkeeping (qp.h).
  qp->sr_store.offered = true;
  qp->sr_store.ooo_slot_bytes = qp->mtu_bytes + kMaxHeaderBytes;
}


void Engine::SrPrepareRequester(Qp* qp) {
  qp->sr = {};
  // Not on XRC: a SACK is an RC ACK packet (docs/loss.md has no XRC form).
  qp->sr.sr_local = qp->type == QpType::kRc && qp->xrc == XrcRole::kNone && selective_;
  qp->sr.sq_psn_max = qp->req.sq_psn;
  qp->sr.last_progress = Clock::now();
  // The scoreboard waits for the first packet sent (SrOnTransmit, qp.h).
}


void Engine::SrReleaseQp(Qp* qp) {
  // Frees the scoreboard and the reorder store (moved-from vectors).
  qp->sr = {};
  qp->sr_store = {};
}

void Engine::SrClearStore(Qp* qp) {
  if (qp->sr_store.ooo_count == 0) return;
  std::fill(qp->sr_store.ooo_len.begin(), qp->sr_store.ooo_len.end(), 0u);
  qp->sr_store.ooo_count = 0;
}

void Engine::SrKeep(Qp* qp, const wire::Packet& pkt, int32_t diff) {
  // diff = psn - epsn > 0. The store covers epsn+1 .. epsn+kSrWindow, the
  // range the SACK bitmap can describe.
  qp->sr_store.sack_pending = true;
  MarkWork(qp);
  if (!qp->sr_store.offered || diff > static_cast<int32_t>(kSrWindow) ||
      pkt.length > qp->sr_store.ooo_slot_bytes) {
    ++stats_.rx_ooo_dropped;
    return;
  }
  if (!TakeReorderStore(qp)) {
    ++stats_.rx_ooo_dropped;  // out of memory: the requester's resend brings it again
    return;
  }
  const uint32_t psn = pkt.bth.psn();
  const uint32_t slot = psn % kSrWindow;
  if (qp->sr_store.ooo_len[slot] != 0 && qp->sr_store.ooo_psn[slot] == psn) {
    if (SamePacket(&qp->sr_store.ooo_store[size_t{slot} * qp->sr_store.ooo_slot_bytes],
                   qp->sr_store.ooo_len[slot], pkt)) {
      ++stats_.rx_duplicates;  // already kept (a resend, or a duplicate on the wire)
      return;
    }
    // Two different packets claim this PSN: at most one is the requester's
    // and nothing tells which (RoCE has no authentication). Keeping the
    // first would let a forged packet that got here first shut out the
    // real one for good; keeping the last would let the forger just send
    // again. Neither is kept: the slot empties, the next SACK no longer
    // reports it, and the requester's resend (at the latest its local ACK
    // timeout, which forgets every SACK) brings the real packet again.
    qp->sr_store.ooo_len[slot] = 0;
    --qp->sr_store.ooo_count;
    ++stats_.rx_ooo_conflicts;
    return;
  }
  if (qp->sr_store.ooo_len[slot] == 0) ++qp->sr_store.ooo_count;
  std::memcpy(&qp->sr_store.ooo_store[size_t{slot} * qp->sr_store.ooo_slot_bytes], pkt.data,
              pkt.length);
  qp->sr_store.ooo_len[slot] = static_cast<uint32_t>(pkt.length);
  qp->sr_store.ooo_psn[slot] = psn;
  ++stats_.rx_ooo_kept;
}

void Engine::SrDrain(Qp* qp, const transport::RxPacket& rx) {
  qp->sr_store.draining = true;
  bool drained = false;
  while (qp->sr_store.ooo_count > 0) {
    const uint32_t slot = qp->resp.epsn % kSrWindow;
    if (qp->sr_store.ooo_len[slot] == 0 || qp->sr_store.ooo_psn[slot] != qp->resp.epsn) {
      // Slots behind epsn can only be stale (a READ advanced epsn by its
      // response count past them): discard them. Only after a replay (this
      // runs for every in-order packet while a hole is open).
      for (uint32_t i = 0; drained && i < kSrWindow && qp->sr_store.ooo_count > 0; ++i) {
        if (qp->sr_store.ooo_len[i] == 0) continue;
        const int32_t d = wire::PsnDiff(qp->sr_store.ooo_psn[i], qp->resp.epsn);
        if (d <= 0 || d > static_cast<int32_t>(kSrWindow)) {
          qp->sr_store.ooo_len[i] = 0;
          --qp->sr_store.ooo_count;
        }
      }
      break;
    }
    uint8_t* data = &qp->sr_store.ooo_store[size_t{slot} * qp->sr_store.ooo_slot_bytes];
    const uint32_t len = qp->sr_store.ooo_len[slot];
    qp->sr_store.ooo_len[slot] = 0;
    --qp->sr_store.ooo_count;
    wire::Packet pkt;
    // Parsed when it arrived; parsing again only rebuilds the views.
    if (wire::ParsePacket(data, len, &pkt) != wire::ParseError::kOk) break;
    const uint32_t before = qp->resp.epsn;
    HandleRequestOne(qp, pkt, rx);
    drained = true;
    if (qp->resp.epsn != before) {
      // Ran: a later duplicate of this PSN must carry the same bytes
      // (sr_store.h says why).
      qp->sr_store.ran_from_store[before % kSrWindow] =
          SrRun{before, true, SrRequestDigest(data, len)};
    }
    if (qp->resp.epsn == before || !(qp->attr.qp_state == QpState::kRtr ||
                                qp->attr.qp_state == QpState::kRts ||
                                qp->attr.qp_state == QpState::kSqd)) {
      // Not consumed (RNR NAK: the requester goes back to this PSN and sends
      // everything again) or the QP failed: what is kept is stale.
      SrClearStore(qp);
      break;
    }
  }
  qp->sr_store.draining = false;
  if (drained) {
    qp->sr_store.sack_pending = true;
    MarkWork(qp);
  }
}

void Engine::SendSack(Qp* qp) {
  // Bitmap of the kept PSNs after epsn, trimmed after the last set bit.
  uint8_t bitmap[wire::kSackMaxBytes] = {};
  uint32_t top = 0;  // bytes used
  if (qp->sr_store.ooo_count > 0) {
    for (uint32_t i = 0; i < kSrWindow; ++i) {
      const uint32_t psn = wire::PsnAdd(qp->resp.epsn, i + 1);
      const uint32_t slot = psn % kSrWindow;
      if (qp->sr_store.ooo_len[slot] == 0 || qp->sr_store.ooo_psn[slot] != psn) continue;
      bitmap[i >> 3] = static_cast<uint8_t>(bitmap[i >> 3] | (1u << (i & 7)));
      top = (i >> 3) + 1;
    }
  }
  const uint32_t bytes = (top + 3) & ~3u;  // a multiple of 4: no pad
  uint8_t* out =
      StartPacket({.opcode = wire::op::kRcAck,
                   .dest_qpn = qp->attr.dest_qp_num,
                   .psn = qp->resp.epsn,
                   .sr = true,
                   .syndrome = wire::MakeSyndrome(
                       wire::AckKind::kNak, static_cast<uint8_t>(wire::NakCode::kPsnSequenceError)),
                   .msn = qp->resp.msn},
                  bytes);
  std::memcpy(out, bitmap, bytes);
  CommitToPeer(qp);
  ++stats_.tx_sacks;
}

void Engine::HandleSack(Qp* qp, const wire::Packet& pkt) {
  ++stats_.rx_sacks;
  const uint32_t epsn = pkt.bth.psn();
  // Stale (overtaken by a later acknowledgement): nothing to learn safely.
  if (wire::PsnDiff(epsn, qp->comp.comp_psn) < 0) return;
  // Validate before using anything: every PSN the bitmap reports must lie
  // in what is outstanding, (epsn, sq_psn_max): sent and not acknowledged
  // (epsn >= comp_psn was checked above, epsn < sq_psn by HandleResponse).
  // A SACK naming anything else is forged or corrupt: ignored whole,
  // counted. (A bit for a PSN whose scoreboard entry is gone — a go-back-N
  // resend forgot it, or it is a READ's response PSN — is skipped below.)
  if (qp->sr.scoreboard.empty()) {
    ++stats_.rx_sacks_invalid;
    return;
  }
  const uint32_t bits = pkt.payload_length * 8;
  for (uint32_t i = 0; i < bits; ++i) {
    if (!(pkt.payload[i >> 3] & (1u << (i & 7)))) continue;
    const uint32_t psn = wire::PsnAdd(epsn, i + 1);
    if (wire::PsnDiff(psn, qp->sr.sq_psn_max) >= 0) {
      ++stats_.rx_sacks_invalid;
      return;
    }
  }
  // The cumulative part is an ordinary NAK's: everything before epsn is
  // acknowledged (IBA 9.7.5.2.2), with the implied-NAK rule for READs.
  if (!ImplicitAck(qp, wire::PsnAdd(epsn, wire::kPsnMask))) return;
  uint32_t count = 0;
  const SrSlot* newest_sample = nullptr;
  for (uint32_t i = 0; i < bits; ++i) {
    if (!(pkt.payload[i >> 3] & (1u << (i & 7)))) continue;
    const uint32_t psn = wire::PsnAdd(epsn, i + 1);
    SrSlot& s = qp->sr.scoreboard[psn % kSrWindow];
    if (!s.valid || s.psn != psn) continue;
    if (!s.sacked) {
      qp->sr.last_progress = Clock::now();
      qp->sr.probes = 0;
      // RTT sample (sent once: Karn), also while losses are being repaired:
      // the congestion control must see the queue a tail drop came from.
      if (!s.resent && (newest_sample == nullptr || s.tx_seq > newest_sample->tx_seq))
        newest_sample = &s;
    }
    s.sacked = true;
    qp->sr.delivered_seq = std::max(qp->sr.delivered_seq, s.tx_seq);
    ++count;
  }
  qp->sr.sacked_count = count;
  if (newest_sample != nullptr) {
    const double sample =
        std::chrono::duration<double, std::micro>(Clock::now() - newest_sample->sent).count();
    qp->sr.rtt.AddSample(sample);
  }
  qp->sr.retx_scan = true;
  MarkWork(qp);
}

void Engine::SrOnTransmit(Qp* qp, uint32_t psn, uint32_t psns, uint32_t payload) {
  const bool resend = wire::PsnDiff(psn, qp->sr.sq_psn_max) < 0;
  if (resend) {
    ++stats_.tx_retransmit_packets;
    stats_.tx_retransmit_bytes += payload;
    ++qp->counters.tx_retransmit_packets;
  } else {
    qp->sr.sq_psn_max = wire::PsnAdd(psn, psns);
  }
  if (!qp->sr.sr_local) return;
  if (qp->sr.scoreboard.empty() && !TakeScoreboard(qp)) return;
  const Clock::time_point now = Clock::now();
  // The probe clock starts when something goes out with nothing in flight.
  if (qp->comp.comp_psn == qp->req.sq_psn && !qp->sr.resending) qp->sr.last_progress = now;
  SrSlot& s = qp->sr.scoreboard[psn % kSrWindow];
  if (!s.valid || s.psn != psn) {
    s.valid = true;
    s.psn = psn;
    s.sacked = false;
  }
  s.resent = resend;
  s.sent = now;
  s.tx_seq = ++qp->sr.tx_seq;
}

bool Engine::SrOnCumAck(Qp* qp, uint32_t comp_before) {
  if (qp->sr.scoreboard.empty()) return false;
  const int32_t n = wire::PsnDiff(qp->comp.comp_psn, comp_before);
  if (n <= 0) return false;
  const Clock::time_point now = Clock::now();
  qp->sr.last_progress = now;
  qp->sr.probes = 0;
  // Acknowledged packets are delivered ones: evidence for loss detection,
  // and an RTT sample if it went out once and arrived in order (Karn's
  // rule). A resent packet is no evidence: the acknowledgement may be the
  // original's (a tail-loss probe of a packet merely slow would otherwise
  // make everything sent before the probe look lost).
  const SrSlot* newest = nullptr;
  for (int32_t i = std::max<int32_t>(0, n - static_cast<int32_t>(kSrWindow)); i < n; ++i) {
    const uint32_t psn = wire::PsnAdd(comp_before, static_cast<uint32_t>(i));
    const SrSlot& s = qp->sr.scoreboard[psn % kSrWindow];
    if (!s.valid || s.psn != psn) continue;
    if (!s.resent) qp->sr.delivered_seq = std::max(qp->sr.delivered_seq, s.tx_seq);
    newest = &s;
  }
  bool sampled = false;
  if (newest != nullptr && !newest->resent && !newest->sacked) {
    const double sample =
        std::chrono::duration<double, std::micro>(now - newest->sent).count();
    qp->sr.rtt.AddSample(sample);
    sampled = true;
  }
  // Only with known holes can new evidence expose a loss (packets sent once
  // leave in PSN order).
  if (qp->sr.peer_sr && qp->comp.comp_psn != qp->req.sq_psn && qp->sr.sacked_count > 0) {
    qp->sr.retx_scan = true;
    MarkWork(qp);
  }
  return sampled;
}

Clock::time_point Engine::SrProbeDeadline(const Qp* qp) const {
  if (!qp->sr.peer_sr || qp->sr.scoreboard.empty() || qp->comp.comp_psn == qp->req.sq_psn ||
      qp->comp.rnr_waiting)
    return Clock::time_point::max();
  // A few round trips (at least 1 ms: scheduling on a busy 2-vCPU VM
  // delays answers by that much), doubled per probe without progress,
  // never beyond the local ACK timeout.
  auto interval = std::chrono::microseconds(
      std::max<int64_t>(1000, static_cast<int64_t>(4 * qp->sr.rtt.srtt_us())));
  interval *= int64_t{1} << std::min<uint32_t>(qp->sr.probes, 6);
  const Clock::duration limit = LocalAckTimeout(qp->attr.timeout);
  const Clock::duration d = std::min<Clock::duration>(interval, limit);
  return qp->sr.last_progress + d;
}

void Engine::SrCheckProbe(Qp* qp, Clock::time_point now) {
  if (now < SrProbeDeadline(qp)) return;
  ++qp->sr.probes;
  qp->sr.last_progress = now;
  ++stats_.retransmit_probes;
  RetransmitLost(qp, /*probe=*/true);
}

void Engine::SrForgetSacks(Qp* qp) {
  // Go-back-N resends everything from comp_psn: earlier SACKs no longer
  // describe what is in flight.
  for (SrSlot& s : qp->sr.scoreboard) s.valid = false;
  qp->sr.sacked_count = 0;
  qp->sr.delivered_seq = qp->sr.tx_seq;
  qp->sr.retx_scan = false;
}

void Engine::RetransmitLost(Qp* qp, bool probe) {
  qp->sr.retx_scan = false;
  if (!qp->sr.peer_sr || qp->sr.scoreboard.empty() || qp->comp.rnr_waiting) return;
  const bool probing = probe;  // a probe is no evidence of loss
  const auto lost = [&](uint32_t psn) {
    const SrSlot& s = qp->sr.scoreboard[psn % kSrWindow];
    if (!s.valid || s.psn != psn || s.sacked) return false;
    if (s.tx_seq + kReorderSlack <= qp->sr.delivered_seq) return true;
    if (probe) {
      probe = false;  // the oldest packet still missing
      return true;
    }
    return false;
  };
  // Resends one packet: the requester builds it exactly as the first time
  // (same PSN, opcode, headers, bytes; RequesterResend).
  // For the trace: the first PSN resent and how many (two locals; the
  // resend itself builds a packet).
  uint32_t first_resent = 0, resent = 0;
  const auto resend = [&](uint64_t index, SendWqe& w, uint32_t psn) REQUIRES(mu_) {
    if (resent++ == 0) first_resent = psn;
    qp->sr.resending = true;
    const bool ok = RequesterResend(qp, index, w, psn);
    qp->sr.resending = false;
    return ok;  // false: the WQE failed locally; the QP is in error now
  };
  // How many packets are presumed lost, to size the resends (RFC 6675's
  // "pipe"): lost packets have left the network, so the window may be
  // refilled with their resends — but only up to the window. Resending every
  // loss at once after a tail drop would pour them into the very queue that
  // dropped them.
  int32_t presumed_lost = 0;
  const int32_t outstanding = wire::PsnDiff(qp->req.sq_psn, qp->comp.comp_psn);
  for (int32_t k = 0; k < outstanding && k < static_cast<int32_t>(kSrWindow); ++k) {
    const uint32_t psn = wire::PsnAdd(qp->comp.comp_psn, static_cast<uint32_t>(k));
    const SrSlot& s = qp->sr.scoreboard[psn % kSrWindow];
    if (s.valid && s.psn == psn && !s.sacked && s.tx_seq + kReorderSlack <= qp->sr.delivered_seq)
      ++presumed_lost;
  }
  if (presumed_lost > 0 && !probing) CcOnLoss(qp);
  int64_t budget = INT64_MAX;
  if (cc_settings_.enabled && qp->cc) {
    const int32_t pipe = outstanding - static_cast<int32_t>(qp->sr.sacked_count) - presumed_lost;
    budget = std::max<int64_t>(1, static_cast<int64_t>(qp->cc->window()) - pipe);
  }
  const auto spend = [&] { return --budget >= 0; };
  for (uint64_t i = qp->sq_head; i != qp->sq_tail && budget > 0; ++i) {
    SendWqe& w = qp->Wqe(i);
    if (!w.started || qp->attr.qp_state != QpState::kRts) break;
    if (w.done) continue;
    if (wire::PsnDiff(w.first_psn, qp->req.sq_psn) >= 0) break;  // not sent yet (after a rewind)
    if (GetWrOpcodeInfo(w.opcode).atomic) {
      // One request packet.
      if (wire::PsnDiff(w.first_psn, qp->comp.comp_psn) >= 0 && lost(w.first_psn) && spend()) {
        if (!resend(i, w, w.first_psn)) return;
      }
    } else if (GetWrOpcodeInfo(w.opcode).read) {
      // One request packet per kReadRequestPackets response packets (qp.h);
      // the first may be one resent from comp_psn after a partial answer.
      // A request partly answered was received.
      const uint32_t sent = i == qp->sq_next
                                ? static_cast<uint32_t>(wire::PsnDiff(qp->req.sq_psn, w.first_psn))
                                : w.npackets;
      uint32_t k = 0;
      const int32_t from_comp = wire::PsnDiff(qp->comp.comp_psn, w.first_psn);
      if (from_comp > 0) k = static_cast<uint32_t>(from_comp);
      for (; k < sent && k < w.npackets; k = ReadRequestEnd(k, w.npackets)) {
        const uint32_t psn = wire::PsnAdd(w.first_psn, k);
        if (!lost(psn)) continue;
        if (!spend()) break;
        if (!resend(i, w, psn)) return;
      }
    } else {
      const uint32_t n = i == qp->sq_next
                             ? static_cast<uint32_t>(wire::PsnDiff(qp->req.sq_psn, w.first_psn))
                             : w.npackets;
      for (uint32_t k = 0; k < n && k < w.npackets; ++k) {
        const uint32_t psn = wire::PsnAdd(w.first_psn, k);
        if (wire::PsnDiff(psn, qp->comp.comp_psn) < 0) continue;
        if (!lost(psn)) continue;
        if (!spend()) break;
        if (!resend(i, w, psn)) return;
      }
    }
    if (i == qp->sq_next) break;
  }
  // What the budget did not cover goes at the next acknowledgement.
  if (budget <= 0 && presumed_lost > 0) qp->sr.retx_scan = true;
  if (trace_ != nullptr && resent > 0)
    TraceEvent(qp, trace::EventKind::kSelectiveResend, {first_resent, resent, probing ? 1u : 0u});
}

}  // namespace softrnic::engine
