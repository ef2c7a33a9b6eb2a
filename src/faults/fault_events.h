// What the fault transport tells the trace (SOFTRNIC_TRACE) about each fault
// it applied: one FaultEvent per packet touched. The engine's trace
// implements FaultEventSink and hands it to the transport
// (Transport::SetFaultEventSink); with no trace there is no sink and the
// transport reports nothing.
//
// Thread-safety: called under the engine lock, like the transport.
#pragma once

#include <array>
#include <cstdint>

#include "faults/scenario.h"

namespace softrnic::faults {

enum class FaultKind : uint8_t {
  kDrop,       // dropped by a rule's `drop` probability or its `nth` pick
  kOutage,     // dropped inside an outage window
  kRateDrop,   // dropped: the rate limit's queue was full
  kPauseDrop,  // dropped: the pause queue was full
  kDuplicate,
  kCorrupt,
  kReorder,
  kDelay,      // held for delay (+ jitter) or by the rate limit
  kPause,      // held until a pause window ends
  kEcnMark,    // a received packet marked ECN CE
};

const char* FaultKindName(FaultKind kind);  // "drop", "outage", ...

struct FaultEvent {
  uint64_t at_ns = 0;        // scenario time (scenario.h)
  FaultKind kind = FaultKind::kDrop;
  Direction direction = Direction::kOut;  // kOut or kIn
  uint16_t rule = 0;         // index in Scenario::rules
  std::array<uint8_t, 16> peer{};  // the other end (IPv4 v4-mapped)
  uint32_t dest_qpn = 0;     // BTH destination QPN
  uint32_t psn = 0;          // BTH PSN
  uint8_t opcode = 0;        // BTH opcode
  uint32_t length = 0;       // packet bytes, BTH to ICRC
  uint64_t delay_ns = 0;     // for kDelay / kPause: how long it is held
};

class FaultEventSink {
 public:
  virtual ~FaultEventSink() = default;
  virtual void OnFault(const FaultEvent& event) = 0;
};

}  // namespace softrnic::faults
