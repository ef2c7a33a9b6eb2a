// Deterministic fault injection for transmitted packets (see FaultConfig in
// transport.h). FaultTransport (fault_transport.h) asks for one decision per
// packet and applies it: drop (do not send), corrupt (flip one bit after the
// ICRC is framed, so the receiver's ICRC check rejects it), duplicate (send
// twice), reorder (hold back and send after the next packet).
//
// The PRNG is splitmix64 seeded from FaultConfig::seed, so a given seed and
// packet sequence always produce the same faults (reproducible failures).
//
// Thread-safety: not internally synchronised (owned by one transport).
#pragma once

#include <cstdint>

#include "transport/transport.h"

namespace softrnic::transport {

struct FaultDecision {
  bool drop = false;
  bool corrupt = false;
  bool duplicate = false;
  bool reorder = false;
  uint32_t corrupt_byte = 0;  // index into BTH..pad (never the ICRC, never BTH byte 4)
  uint8_t corrupt_mask = 0;   // the single bit to flip in that byte
};

class FaultInjector {
 public:
  explicit FaultInjector(const FaultConfig& config) : config_(config), state_(config.seed) {}

  bool enabled() const { return config_.enabled(); }

  // One decision for a packet of `length` bytes (BTH .. ICRC inclusive).
  // A dropped packet gets no other fault. Always draws the same number of
  // random values per packet so later decisions do not depend on earlier
  // outcomes beyond the sequence position.
  FaultDecision Next(uint32_t length);

 private:
  uint64_t NextU64();
  double NextUnit() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

  FaultConfig config_;
  uint64_t state_;
};

}  // namespace softrnic::transport
