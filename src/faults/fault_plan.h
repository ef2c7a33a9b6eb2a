// The per-packet half of the fault lab: given a Scenario (scenario.h), what
// happens to one packet. The fault transport (transport/fault_transport.h)
// asks once per packet, in each direction, and applies the Decision; the
// plan itself touches no packet and keeps no packet.
//
// Classification (PacketClass, IBA 9.2 table 34 and 9.7.5.2.1 table 44):
// from the BTH opcode (XRC opcodes as their RC equivalents), and for
// ACKNOWLEDGE (0x11) and ATOMIC ACKNOWLEDGE (0x12) from the AETH syndrome's
// bits 6:5 (ACK, RNR NAK, NAK; the reserved kind counts as a NAK). UD
// SEND (0x64/0x65) to or from QP1 is a CM MAD (IBA 12.11: the CM speaks
// through the GSI, QP1): BTH destination QPN 1, or DETH source QPN 1.
//
// Determinism: every rule draws from its own splitmix64 stream, seeded
// from the scenario seed mixed with the rule's index, and draws a fixed
// number of values (kDrawsPerMatch) for every packet it matches, whatever
// it decides. So a rule's decisions depend only on the sequence of packets
// it matched (and, for windows and rates, on the scenario times given),
// never on another rule or on earlier outcomes: same seed + same packets
// + same times = the same decisions, which AppendDecision serialises for
// comparison.
//
// Hostile input: a packet shorter than a BTH (12 bytes) matches nothing
// and gets an empty decision; the AETH and DETH are read only when the
// packet holds them.
//
// Thread-safety: not internally synchronised (owned by one transport,
// called under the engine lock).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "faults/fault_events.h"
#include "faults/scenario.h"

namespace softrnic::faults {

// The class of the packet `data` (BTH onward, `length` bytes); 0 when it is
// shorter than a BTH.
uint16_t ClassifyPacket(const uint8_t* data, uint32_t length);

// Why a packet is not passed on.
enum class DropKind : uint8_t { kNone, kDrop, kOutage, kRateDrop, kPauseDrop };

struct Decision {
  DropKind drop = DropKind::kNone;
  bool duplicate = false;
  // Flip bit `corrupt_mask` of byte `corrupt_byte` (an index before the
  // ICRC, never BTH byte 4, which the ICRC masks, IBA A17.8).
  bool corrupt = false;
  uint32_t corrupt_byte = 0;
  uint8_t corrupt_mask = 0;
  // > 0: held back until this many later packets of the same direction
  // were passed on (the transport bounds the hold in time).
  uint32_t reorder_depth = 0;
  // > now: held until this scenario time (delay, jitter, rate, pause).
  uint64_t hold_until_ns = 0;
  bool paused = false;    // the hold is a pause window's
  bool ecn_mark = false;  // set ECN CE on the received packet
  int rule = -1;          // the rule that dropped or held it, else -1

  bool dropped() const { return drop != DropKind::kNone; }
};

// One line describing `d` (for logs and the determinism tests).
void AppendDecision(std::string* out, const Decision& d);

class FaultPlan {
 public:
  // Draws per matched packet and rule: drop, duplicate, corrupt, reorder,
  // ecn (unit values), corrupt position, jitter (64-bit values).
  static constexpr int kDrawsPerMatch = 7;

  explicit FaultPlan(Scenario scenario);

  const Scenario& scenario() const { return scenario_; }
  bool enabled() const { return scenario_.enabled(); }

  // The decision for one packet going `direction` (kOut or kIn): `data`
  // from the BTH, `length` bytes including the ICRC; `peer` the other end
  // (IPv4 v4-mapped); `now_ns` the scenario time. Appends one FaultEvent
  // per fault applied to `events` (if not null).
  Decision Decide(Direction direction, const uint8_t* data, uint32_t length,
                  const std::array<uint8_t, 16>& peer, uint64_t now_ns,
                  std::vector<FaultEvent>* events);

 private:
  struct RuleState {
    uint64_t rng = 0;
    uint64_t seen = 0;  // packets that passed every filter but nth
    // Rate limit (GCRA form of the token bucket): the theoretical time the
    // bucket is empty again, in ns plus a remainder in units of 1/rate ns.
    uint64_t tat_ns = 0;
    uint64_t tat_rem = 0;
    uint64_t pause_bytes = 0;  // held by this rule's pause so far
  };

  static uint64_t Next(uint64_t* state);
  static double Unit(uint64_t* state) { return static_cast<double>(Next(state) >> 11) * 0x1.0p-53; }
  // Whether rule `r` takes the packet (counts it for nth).
  bool Matches(const Rule& r, RuleState& st, Direction direction, uint16_t cls, uint32_t dest_qpn,
               uint32_t psn, const std::array<uint8_t, 16>& peer, uint64_t now_ns);
  // The rate limit's departure time for `length` bytes at `now_ns`, or
  // UINT64_MAX when its queue is full (the packet is dropped).
  static uint64_t RateDeparture(const Action& a, RuleState& st, uint64_t now_ns, uint32_t length);

  Scenario scenario_;
  std::vector<RuleState> state_;
};

}  // namespace softrnic::faults
