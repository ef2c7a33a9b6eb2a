// A fault scenario: what the fault lab (docs/fault-lab.md) does to the
// packets of one process, as data. It comes from a scenario file
// (SOFTRNIC_FAULTS_FILE, TOML, scenario_parse.h) or from the one-line form
// (SOFTRNIC_FAULTS, `softrnic run --faults`), which makes a scenario of one
// rule; the fault transport (transport/fault_transport.h) applies it through
// a FaultPlan (fault_plan.h), and the trace (SOFTRNIC_TRACE) shows what it did.
//
// A scenario is a list of rules. Each packet, in each direction, is offered
// to every rule in file order; a rule whose match accepts the packet takes
// its decisions (drop, duplicate, ...) from its own seeded random stream, so
// adding a rule never changes the decisions of another. The first rule that
// drops (or holds) a packet ends the walk for it.
//
// Times are relative to the first packet the device sends or receives (not
// its opening: a program's set-up, an MPI launch or perftest's TCP
// exchange, may take seconds), in nanoseconds.
//
// Thread-safety: plain data.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace softrnic::faults {

// Which way a packet goes, seen from this process.
enum class Direction : uint8_t {
  kOut = 1,   // sent by this process ("tx")
  kIn = 2,    // received by this process ("rx")
  kBoth = 3,
};

// The packet classes a rule can target (a bit set). From the BTH opcode
// (and the AETH syndrome for the ACK opcodes), IBA 9.2 and table 34:
enum PacketClass : uint16_t {
  kRequests = 1 << 0,       // SEND, WRITE, READ request, atomics, UD sends but CM
  kAcks = 1 << 1,           // ACKNOWLEDGE / ATOMIC ACKNOWLEDGE with an ACK syndrome
  kNaks = 1 << 2,           // the same with a NAK syndrome (sequence, invalid, access, op)
  kRnrNaks = 1 << 3,        // the same with an RNR NAK syndrome
  kReadResponses = 1 << 4,  // RDMA READ response first/middle/last/only
  kCnps = 1 << 5,           // RoCE v2 CNP (opcode 0x81)
  kCmMads = 1 << 6,         // UD packets to or from QP1 (CM MADs, IBA 12)
  kAllClasses = 0x7f,
};

// Which packets a rule applies to. Every field left empty matches all.
struct Match {
  Direction direction = Direction::kBoth;
  // The other end, as an IPv6 address (IPv4 v4-mapped, ::ffff:a.b.c.d).
  std::optional<std::array<uint8_t, 16>> peer;
  // The BTH destination QPN (of the peer's QP for sent packets, of ours for
  // received ones).
  std::optional<uint32_t> qpn;
  uint16_t classes = kAllClasses;
  // BTH PSNs from `psn_first` to `psn_last` inclusive (24-bit, may wrap).
  std::optional<uint32_t> psn_first, psn_last;
  // Only the n-th packet (1-based) that passes every other filter of this
  // rule (direction, peer, qpn, classes, psn, window), counted per rule.
  std::optional<uint64_t> nth;
  // Only within [from_ns, from_ns + for_ns); for_ns 0 means "for ever".
  uint64_t from_ns = 0;
  uint64_t for_ns = 0;
};

// What happens to a matched packet. Several may apply to one packet
// (delayed and duplicated); drop, outage and pause end its walk.
struct Action {
  // Probabilities in [0, 1].
  double drop = 0;
  double duplicate = 0;
  double corrupt = 0;   // one bit the ICRC covers flipped: the receiver rejects it
  double reorder = 0;   // held back and passed on after `reorder_depth` later packets
  uint32_t reorder_depth = 1;
  // Every matched packet is held for delay_ns plus a uniform draw in
  // [0, jitter_ns] (jitter can reorder packets, as it does on a network).
  uint64_t delay_ns = 0;
  uint64_t jitter_ns = 0;
  // A token bucket: matched packets leave at most at this many bytes per
  // second (RoCE packet bytes, BTH to ICRC), bursts of up to
  // rate_burst_bytes; beyond rate_queue_bytes waiting, packets are dropped
  // (a switch queue's tail drop). 0: no rate limit.
  uint64_t rate_bytes_per_s = 0;
  uint64_t rate_burst_bytes = 16384;
  uint64_t rate_queue_bytes = 1 << 20;
  // Congestion marking: a received packet gets ECN CE in its traffic class,
  // as a congested switch would mark it, so this side's engine answers with
  // CNPs (a CNP storm at the sender). Direction `in` only.
  double ecn_mark = 0;
  // Link down: every matched packet is dropped (use with a window).
  bool outage = false;
  // The peer stops answering, then resumes: matched packets are held until
  // the window ends, then passed on in order (up to pause_queue_bytes, the
  // rest dropped as a full socket buffer would). Needs a window.
  bool pause = false;
  uint64_t pause_queue_bytes = 4 << 20;
};

struct Rule {
  std::string name;  // from the file, or "rule N"; shown in the trace
  int line = 0;      // where the rule starts in its file (0: not from a file)
  Match match;
  Action action;
};

struct Scenario {
  std::string name;         // the file's `name`, or its file name
  std::string description;  // the file's `description`, shown by `softrnic chaos`
  uint64_t seed = 1;
  std::vector<Rule> rules;

  bool enabled() const { return !rules.empty(); }
};

}  // namespace softrnic::faults
