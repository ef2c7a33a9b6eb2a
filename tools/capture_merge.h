// Merging the capture files of several softrnic processes into one
// (`softrnic capture`, docs/capture.md).
//
// Every process records what it sends (outbound) and what it receives
// (inbound), so a packet between two captured processes is in both of their
// files, and one a process sends itself (two QPs of one process) twice in
// its own. The merge keeps every outbound record and drops an inbound one
// for each outbound record of the same packet, wherever it was recorded;
// what remains inbound came from a process not captured (a peer on another
// host, a process started before the capture) or stands for a response the
// target never sent (a direct shared-memory operation's, capture.h). The
// same packet means the same frame from the IPv4 source on, with the fields
// a receiver sees differently (IPv4 TOS, header checksum) left out.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire/pcapng.h"

namespace softrnic::tools {

struct MergeResult {
  std::vector<uint8_t> bytes;  // one pcapng section: every input's interfaces, packets by time
  uint64_t packets = 0;        // written
  uint64_t duplicates = 0;     // inbound records of packets another record already holds
};

MergeResult MergeCaptures(const std::vector<wire::pcapng::File>& inputs);

}  // namespace softrnic::tools
