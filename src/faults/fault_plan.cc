#include "faults/fault_plan.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>

#include "wire/byte_order.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::faults {

namespace {

constexpr uint32_t kBthBytes = 12;
constexpr uint32_t kAethBytes = 4;
constexpr uint32_t kDethBytes = 8;
constexpr uint32_t kCmQpn = 1;  // the GSI's QP (IBA 12.11, the CM's MADs)
constexpr uint64_t kNsPerS = 1000000000;

// One splitmix64 output as a pure function: used to spread the seed over
// the rules' streams, so that rule i's stream does not start where rule
// i-1's stream is one step on (plain seed + i would overlap them).
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool PsnInRange(uint32_t psn, uint32_t first, uint32_t last) {
  // 24-bit PSNs wrap (IBA 9.7.1): [first, last] may straddle 0xFFFFFF.
  return first <= last ? (psn >= first && psn <= last) : (psn >= first || psn <= last);
}

const char* DropName(DropKind k) {
  switch (k) {
    case DropKind::kNone: return "pass";
    case DropKind::kDrop: return "drop";
    case DropKind::kOutage: return "outage";
    case DropKind::kRateDrop: return "rate-drop";
    case DropKind::kPauseDrop: return "pause-drop";
  }
  return "?";
}

}  // namespace

uint16_t ClassifyPacket(const uint8_t* data, uint32_t length) {
  if (data == nullptr || length < kBthBytes) return 0;
  // XRC opcodes (0xA0-0xBF) mean what their RC equivalents mean (IBA 9.2,
  // table 34: XRC reuses RC's operations with an XRCETH).
  const uint8_t op = wire::RcEquivalent(data[0]);
  switch (op) {
    case wire::op::kRcAck:
    case wire::op::kRcAtomicAck: {
      // The AETH follows the BTH on both (IBA 9.3.5); its syndrome's bits
      // 6:5 say ACK, RNR NAK or NAK (9.7.5.2.1, table 44). Too short to
      // hold one: judged by the opcode alone, an acknowledgement.
      if (length < kBthBytes + kAethBytes) return kAcks;
      switch (wire::SyndromeKind(data[kBthBytes])) {
        case wire::AckKind::kAck: return kAcks;
        case wire::AckKind::kRnrNak: return kRnrNaks;
        case wire::AckKind::kReserved:
        case wire::AckKind::kNak: return kNaks;
      }
      return kNaks;
    }
    // READ RESPONSE FIRST/MIDDLE/LAST/ONLY (IBA 9.4.3): those with an AETH
    // (first, last, only) are read responses too, not acknowledgements.
    case wire::op::kRcReadResponseFirst:
    case wire::op::kRcReadResponseMiddle:
    case wire::op::kRcReadResponseLast:
    case wire::op::kRcReadResponseOnly:
      return kReadResponses;
    default:
      break;
  }
  if (data[0] == wire::op::kCnp) return kCnps;  // RoCE v2 CNP (Annex A17.9.3)
  if (data[0] == wire::op::kUdSendOnly || data[0] == wire::op::kUdSendOnlyImm) {
    // CM MADs travel as UD SENDs between QP1s (IBA 12.11): to QP1, or from
    // it (the DETH's source QPN, IBA 9.3.3, right after the BTH).
    if (wire::LoadBe24(&data[5]) == kCmQpn) return kCmMads;
    if (length >= kBthBytes + kDethBytes && wire::LoadBe24(&data[kBthBytes + 5]) == kCmQpn)
      return kCmMads;
  }
  return kRequests;
}

void AppendDecision(std::string* out, const Decision& d) {
  char line[192];
  std::snprintf(line, sizeof(line),
                "%s rule=%d dup=%d corrupt=%d@%" PRIu32 "/%02x reorder=%" PRIu32
                " hold=%" PRIu64 " pause=%d ecn=%d\n",
                DropName(d.drop), d.rule, d.duplicate ? 1 : 0, d.corrupt ? 1 : 0, d.corrupt_byte,
                d.corrupt_mask, d.reorder_depth, d.hold_until_ns, d.paused ? 1 : 0,
                d.ecn_mark ? 1 : 0);
  out->append(line);
}

FaultPlan::FaultPlan(Scenario scenario) : scenario_(std::move(scenario)) {
  state_.resize(scenario_.rules.size());
  for (size_t i = 0; i < state_.size(); ++i)
    state_[i].rng = Mix(scenario_.seed ^ Mix(0x9E3779B97F4A7C15ull * (i + 1)));
}

uint64_t FaultPlan::Next(uint64_t* state) {
  // splitmix64 (Steele, Lea, Flood 2014): tiny state, good statistical
  // quality, and trivially reproducible from a seed.
  return Mix(*state += 0x9E3779B97F4A7C15ull);
}

bool FaultPlan::Matches(const Rule& r, RuleState& st, Direction direction, uint16_t cls,
                        uint32_t dest_qpn, uint32_t psn, const std::array<uint8_t, 16>& peer,
                        uint64_t now_ns) {
  const Match& m = r.match;
  if ((static_cast<uint8_t>(m.direction) & static_cast<uint8_t>(direction)) == 0) return false;
  if ((m.classes & cls) == 0) return false;
  if (m.peer && *m.peer != peer) return false;
  if (m.qpn && *m.qpn != dest_qpn) return false;
  if (m.psn_first && m.psn_last && !PsnInRange(psn, *m.psn_first, *m.psn_last)) return false;
  if (now_ns < m.from_ns) return false;
  if (m.for_ns != 0 && now_ns - m.from_ns >= m.for_ns) return false;
  // nth counts what passed every other filter, so "the 5th ACK to that
  // peer" means what it says.
  ++st.seen;
  if (m.nth && st.seen != *m.nth) return false;
  return true;
}

uint64_t FaultPlan::RateDeparture(const Action& a, RuleState& st, uint64_t now_ns,
                                  uint32_t length) {
  // A token bucket of rate_burst_bytes filled at rate_bytes_per_s, in its
  // GCRA form: tat is when the bucket would be full again had every packet
  // so far left; a packet may leave once tat - burst_time <= now. Exact in
  // integers (the remainder carries fractions of a nanosecond), so a long
  // run keeps the set rate, and it needs no timer: it depends only on the
  // scenario times given.
  const uint64_t rate = std::max<uint64_t>(a.rate_bytes_per_s, 1);
  const auto ns_for = [rate](uint64_t bytes) {
    // bytes * 1e9 / rate without overflow for the documented bounds
    // (bytes <= 1 GiB, rate >= 1): split the quotient.
    return (bytes / rate) * kNsPerS + ((bytes % rate) * kNsPerS) / rate;
  };
  if (st.tat_ns < now_ns) {
    st.tat_ns = now_ns;  // the bucket refilled while idle
    st.tat_rem = 0;
  }
  const uint64_t cost_ns = ns_for(length);
  // A packet larger than the burst still leaves at once on an idle link.
  const uint64_t burst_ns = std::max(ns_for(a.rate_burst_bytes), cost_ns);
  const uint64_t new_tat = st.tat_ns + cost_ns;
  const uint64_t depart = new_tat > now_ns + burst_ns ? new_tat - burst_ns : now_ns;
  // What waits ahead of it: the bytes the bucket still owes at depart.
  const double waiting = static_cast<double>(depart - now_ns) * static_cast<double>(rate) / 1e9;
  if (waiting + length > static_cast<double>(a.rate_queue_bytes))
    return std::numeric_limits<uint64_t>::max();  // tail drop; the bucket is untouched
  st.tat_ns = new_tat;
  const uint64_t rem = ((length % rate) * kNsPerS) % rate;
  st.tat_rem += rem;
  if (st.tat_rem >= rate) {
    st.tat_rem -= rate;
    ++st.tat_ns;
  }
  return depart;
}

Decision FaultPlan::Decide(Direction direction, const uint8_t* data, uint32_t length,
                           const std::array<uint8_t, 16>& peer, uint64_t now_ns,
                           std::vector<FaultEvent>* events) {
  Decision d;
  const uint16_t cls = ClassifyPacket(data, length);
  if (cls == 0 || scenario_.rules.empty()) return d;
  const uint32_t dest_qpn = wire::LoadBe24(&data[5]);
  const uint32_t psn = wire::LoadBe24(&data[9]);
  const auto report = [&](FaultKind kind, size_t rule, uint64_t delay_ns) {
    if (events == nullptr) return;
    FaultEvent e;
    e.at_ns = now_ns;
    e.kind = kind;
    e.direction = direction;
    e.rule = static_cast<uint16_t>(rule);
    e.peer = peer;
    e.dest_qpn = dest_qpn;
    e.psn = psn;
    e.opcode = data[0];
    e.length = length;
    e.delay_ns = delay_ns;
    events->push_back(e);
  };

  for (size_t i = 0; i < scenario_.rules.size(); ++i) {
    const Rule& r = scenario_.rules[i];
    RuleState& st = state_[i];
    if (!Matches(r, st, direction, cls, dest_qpn, psn, peer, now_ns)) continue;
    const Action& a = r.action;
    // The fixed draws, whatever is decided below (see the header).
    const double u_drop = Unit(&st.rng);
    const double u_dup = Unit(&st.rng);
    const double u_corrupt = Unit(&st.rng);
    const double u_reorder = Unit(&st.rng);
    const double u_ecn = Unit(&st.rng);
    const uint64_t r_pos = Next(&st.rng);
    const uint64_t r_jitter = Next(&st.rng);

    d.rule = static_cast<int>(i);
    if (a.outage) {
      d.drop = DropKind::kOutage;
      report(FaultKind::kOutage, i, 0);
      return d;
    }
    if (a.pause && r.match.for_ns != 0) {
      // Held to the window's end; Matches() put now inside it.
      if (st.pause_bytes + length > a.pause_queue_bytes) {
        d.drop = DropKind::kPauseDrop;
        report(FaultKind::kPauseDrop, i, 0);
        return d;
      }
      st.pause_bytes += length;
      d.hold_until_ns = r.match.from_ns + r.match.for_ns;
      d.paused = true;
      report(FaultKind::kPause, i, d.hold_until_ns - now_ns);
    } else if (u_drop < a.drop) {
      d.drop = DropKind::kDrop;
      report(FaultKind::kDrop, i, 0);
      return d;
    } else {
      uint64_t leave = now_ns;
      if (a.rate_bytes_per_s != 0) {
        leave = RateDeparture(a, st, now_ns, length);
        if (leave == std::numeric_limits<uint64_t>::max()) {
          d.drop = DropKind::kRateDrop;
          report(FaultKind::kRateDrop, i, 0);
          return d;
        }
      }
      // Link delay after the shaper, plus a uniform jitter in [0, jitter].
      leave += a.delay_ns;
      if (a.jitter_ns != 0) leave += r_jitter % (a.jitter_ns + 1);
      if (leave > now_ns) {
        d.hold_until_ns = leave;
        report(FaultKind::kDelay, i, leave - now_ns);
      }
    }
    if (u_dup < a.duplicate) {
      d.duplicate = true;
      report(FaultKind::kDuplicate, i, 0);
    }
    // A bit the ICRC covers (IBA A17.8): anything before the ICRC but BTH
    // byte 4 (FECN/BECN/resv6, masked to ones in the ICRC). Needs 6 bytes
    // before the ICRC; a BTH always has them. The first rule to corrupt wins.
    if (u_corrupt < a.corrupt && !d.corrupt && length >= 4 + 6) {
      const uint32_t candidates = length - 4 - 1;
      uint32_t byte = static_cast<uint32_t>((r_pos >> 3) % candidates);
      if (byte >= 4) ++byte;
      d.corrupt = true;
      d.corrupt_byte = byte;
      d.corrupt_mask = static_cast<uint8_t>(1u << (r_pos & 7));
      report(FaultKind::kCorrupt, i, 0);
    }
    // ECN CE is what a congested switch sets on the way in (RFC 3168);
    // only received packets are marked.
    if (direction == Direction::kIn && u_ecn < a.ecn_mark && !d.ecn_mark) {
      d.ecn_mark = true;
      report(FaultKind::kEcnMark, i, 0);
    }
    if (d.hold_until_ns != 0) return d;  // held: the walk ends here
    if (u_reorder < a.reorder) {
      d.reorder_depth = std::max<uint32_t>(a.reorder_depth, 1);
      report(FaultKind::kReorder, i, 0);
      return d;
    }
    d.rule = -1;  // neither dropped nor held: the next rules may still act
  }
  return d;
}

}  // namespace softrnic::faults
