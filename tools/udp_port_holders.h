// Who holds a UDP port in this network namespace, from /proc/net/udp and
// /proc/net/udp6 (readable by every user; the uid column names the owner),
// for `softrnic doctor`.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace softrnic::tools {

struct UdpHolder {
  std::string address;  // "0.0.0.0", "10.0.0.1", "::"
  bool ipv6 = false;
  bool wildcard = false;  // 0.0.0.0 or ::
  bool loopback = false;  // 127.0.0.0/8 or ::1
  uid_t uid = 0;
  uint64_t inode = 0;
  // A softrnic device's ownership name for address:port exists
  // (softrnic-udp-<ip>:<port>[#k], an abstract unix socket:
  // src/transport/endpoint_claim.cc), so the holder is most likely that
  // device's socket.
  bool softrnic_claim = false;
  int pid = 0;       // the process holding the socket, 0 if not visible to us
  std::string comm;  // its /proc/<pid>/comm
};

std::vector<UdpHolder> UdpPortHolders(uint16_t port);

// "uid 65534 (nobody)", or "uid 1234" without a passwd entry.
std::string DescribeUid(uid_t uid);

}  // namespace softrnic::tools
