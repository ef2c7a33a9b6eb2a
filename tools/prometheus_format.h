// The counters of stats files (engine::StatsFile) in the Prometheus text
// exposition format (version 0.0.4), for `softrnic stat --prometheus`.
//
//   # HELP softrnic_udp_tx_packets_total UDP datagrams sent (...).
//   # TYPE softrnic_udp_tx_packets_total counter
//   softrnic_udp_tx_packets_total{pid="4242",uid="1000",device="softrnic0",port="1"} 188102
//   ...
//   # HELP softrnic_device_info A running softrnic device; ...
//   # TYPE softrnic_device_info gauge
//   softrnic_device_info{pid="4242",uid="1000",device="softrnic0",port="1",comm="ib_write_bw",gids="..."} 1
//
// Every counter of a file is a counter family softrnic_<name>_total (its
// value as `softrnic stat -j` shows it: the last line of a name wins), one
// sample per process; `port` is always 1 (a softrnic device has one port).
//
// With `per_qp` (`softrnic stat --qp -P`), the "qp" lines too: each per-QP
// counter is a family softrnic_qp_<name>_total with one sample per QP
// listed, labelled as the device's samples plus qpn (decimal) and type;
// softrnic_qp_info{...,qpn,type,state,peer_gid,peer_qpn} 1 says the rest.
// A file lists at most 256 QPs (the busiest; stats_publisher.h).
// A file is input another local user may have written (security review
// L2): a counter whose name is not [A-Za-z0-9_]+ is left out (it could not
// be a metric name), and label values are escaped (LabelValue).
#pragma once

#include <string>
#include <vector>

#include "engine/observe/stats_publisher.h"

namespace softrnic::tools {

std::string FormatPrometheus(const std::vector<engine::StatsFile>& files, bool per_qp = false);

// A label value's text between the quotes: `\` -> `\\`, `"` -> `\"`,
// newline -> `\n` (the format's escapes); printable ASCII as is; every other
// byte (control characters, bytes of non-ASCII text, which need not be valid
// UTF-8) as the four characters \xNN, as `softrnic stat` prints them.
std::string LabelValue(const std::string& raw);

// True if `name` may follow "softrnic_" in a metric name.
bool ValidCounterName(const std::string& name);

}  // namespace softrnic::tools
