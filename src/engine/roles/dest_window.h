// Packets in flight per destination, shared by the RC QPs that send there
// (issue 17, docs/loss.md "Many QPs to one destination").
//
// Each QP's congestion window (congestion_control.h) bounds that QP alone,
// starting at 64 packets: 1,000 QPs writing to one peer together put tens
// of thousands of packets in flight, many times the peer's socket receive
// buffer, and every window overflowed it at once: ib_write_bw -q 1000 over
// UDP resent 9-40 % of its packets and stalled on thousands of Local ACK
// Timeouts (docs/benchmarks.md). A NIC's per-QP windows meet the same
// wall as a lossless fabric's pause frames; RFC 3124's congestion manager
// shares one budget among the flows to one host, as here.
//
// The budget is the transport's (Transport::inflight_budget_bytes: the
// socket receive buffer). A same-host peer reached through its ring has
// none (Engine::DestAttach): the ring pushes back instead of dropping.
// A QP's share is its pipe (congestion.cc: outstanding PSNs minus those
// the peer reported kept, READ responses included, as they consume PSNs)
// times its path MTU plus headers, recomputed from the QP's own state at
// every sync point (DestSync), so no path that moves a PSN can leave the
// sum wrong for longer than until the QP's next send or acknowledgement.
// A QP may send while the destination has room, and always when it has
// nothing in flight itself: so every QP keeps moving (its own
// acknowledgements wake it, completer.cc), none waits on another's, and
// the overshoot is at most one packet per QP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string_view>

#include "transport/address.h"

namespace softrnic::engine {

// Header bytes counted with each packet's payload (port_mtu.h's 88: IPv6,
// UDP, BTH, the largest extension headers, ICRC).
inline constexpr uint32_t kDestPacketOverhead = 88;

// One destination's budget (Engine::dest_flight_).
struct DestFlight {
  uint64_t inflight_bytes = 0;  // the sum of its QPs' DestShare::counted_bytes
  uint64_t budget_bytes = 0;
  uint32_t qps = 0;             // QPs attached; the entry goes with the last
};

// A QP's part in its destination's budget (Qp::dest).
struct DestShare {
  DestFlight* flight = nullptr;  // null: not bounded
  transport::Gid gid;            // flight's key in Engine::dest_flight_
  uint64_t counted_bytes = 0;
};

struct GidHash {
  size_t operator()(const transport::Gid& g) const noexcept {
    return std::hash<std::string_view>()(
        std::string_view(reinterpret_cast<const char*>(g.raw.data()), g.raw.size()));
  }
};

}  // namespace softrnic::engine
