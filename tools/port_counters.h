// The standard port counter files of /sys/class/infiniband/<dev>/ports/1/
// (`counters/`, as ib_core's sysfs.c shows a port's PMA counters, and
// `hw_counters/`, with rxe's names where rxe has the counter and mlx5's
// for the rest), computed from softrnic's stats-file counters, so existing
// exporters (node_exporter's infiniband collector reads `counters/`) read
// softrnic without changes. `softrnic run` keeps them live in its view
// (counter_updater.h); docs/user-guide.md lists each file's source.
//
// Thread-safety: none needed (pure functions; one accumulator per thread).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/observe/stats_publisher.h"

namespace softrnic::tools {

// Counter name -> value, as `softrnic stat -j` shows a process's counters
// (summed over processes by PortCounterAccumulator).
using CounterTotals = std::map<std::string, uint64_t>;

// Every file, as ("counters/port_xmit_data", value), in a fixed order.
// port_xmit_data / port_rcv_data are in 4-byte words as IBA 16.1.3.5
// defines them: (tx_bytes + shm_direct_write_bytes + shm_placed_write_bytes)
// / 4 and (rx_bytes + shm_direct_read_bytes) / 4, so a direct same-host WRITE
// or READ, which sends no packet (or a placed WRITE's pages, which no packet
// carries), still shows as data (and never as a packet). Counters a
// software device cannot have (symbol errors, link recovery, VL15) are 0.
std::vector<std::pair<std::string, uint64_t>> PortCounterFiles(const CounterTotals& totals);

// Sums the stats files of a set of processes into one port's totals that
// never go backwards: when a file disappears (its process exited) or its
// counters restart (a new process under a reused name), its last values
// stay in the totals, as a port's counters keep what went through it.
// The counters of a process's last moments (after its final publish) are
// not seen.
class PortCounterAccumulator {
 public:
  // `files`: the current files of the processes that count (by path).
  CounterTotals Update(const std::vector<engine::StatsFile>& files);

 private:
  std::map<std::string, CounterTotals> last_;  // by file path
  CounterTotals departed_;
};

}  // namespace softrnic::tools
