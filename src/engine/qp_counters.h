// Per-QP counters (issue 18): what one QP sent and received, so that
// `softrnic stat --qp` can say which QP of a process the device's traffic,
// retransmissions, NAKs and errors belong to, as `rdma statistic qp` does
// for a kernel device.
//
// Counted beside the device-wide EngineStats (stats.h), at the same places,
// with plain adds under the engine lock: no atomics, nothing on a path that
// was not already touching the QP. A packet is counted for a QP only once
// it is known to be that QP's (the receive path's checks passed; dropped
// packets stay in the device's rx_dropped_* only), so the QPs' packets add
// up to the device's tx_packets/rx_packets minus the drops and the few
// packets that belong to no live QP (an ACK of a destroyed, lingering QP; a
// CNP for no QP). Kept for the QP's whole life: RESET does not clear them.
//
// Thread-safety: the engine lock (as the Qp holding them).
#pragma once

#include <cstdint>
#include <utility>

namespace softrnic::engine {

struct QpCounters {
  uint64_t tx_packets = 0;             // packets this QP sent (requests, ACKs, responses)
  uint64_t tx_bytes = 0;               // their bytes, BTH to ICRC (EngineStats::tx_bytes)
  uint64_t rx_packets = 0;             // packets accepted for this QP
  uint64_t rx_bytes = 0;               // their bytes, BTH to ICRC
  uint64_t tx_retransmit_packets = 0;  // request packets sent again
  uint64_t retransmit_timeouts = 0;    // Local ACK Timeout expiries
  uint64_t tx_naks = 0;                // NAKs sent (sequence, invalid, access, operational)
  uint64_t tx_rnr_naks = 0;
  uint64_t rx_naks = 0;
  uint64_t rx_rnr_naks = 0;
  uint64_t shm_direct_ops = 0;         // one-sided operations done on a same-host peer's memory
  uint64_t shm_direct_bytes = 0;
  uint64_t cqe_errors = 0;             // completions with an error status (flushes apart)
  uint64_t cqe_flushes = 0;            // completions with IBV_WC_WR_FLUSH_ERR
};

// Every counter with its name, in the order the stats file writes them
// (stats_publisher.h, "qp" lines). A new counter is added here only.
inline constexpr std::pair<const char*, uint64_t QpCounters::*> kQpCounterFields[] = {
    {"tx_packets", &QpCounters::tx_packets},
    {"tx_bytes", &QpCounters::tx_bytes},
    {"rx_packets", &QpCounters::rx_packets},
    {"rx_bytes", &QpCounters::rx_bytes},
    {"tx_retransmit_packets", &QpCounters::tx_retransmit_packets},
    {"retransmit_timeouts", &QpCounters::retransmit_timeouts},
    {"tx_naks", &QpCounters::tx_naks},
    {"tx_rnr_naks", &QpCounters::tx_rnr_naks},
    {"rx_naks", &QpCounters::rx_naks},
    {"rx_rnr_naks", &QpCounters::rx_rnr_naks},
    {"shm_direct_ops", &QpCounters::shm_direct_ops},
    {"shm_direct_bytes", &QpCounters::shm_direct_bytes},
    {"cqe_errors", &QpCounters::cqe_errors},
    {"cqe_flushes", &QpCounters::cqe_flushes},
};

}  // namespace softrnic::engine
