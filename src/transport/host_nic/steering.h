// The host NIC's steering program (docs/host-nic.md): a classic BPF program
// attached to the SO_REUSEPORT group of one host address at port 4791 that
// picks, for each arriving RoCE v2 datagram, the socket of the process that
// owns the destination QP, as an RNIC steers by destination QPN.
//
// Key: every process served by the host NIC daemon (nicd) owns one *lane*,
// the top byte of each of its QPNs (24-bit QPN = lane << 16 | 16 random
// bits). The program reads BTH byte 5 (the top byte of DestQP) and finds the
// lane's two sockets in a binary tree of comparisons; RC responses
// (opcodes 0x0D-0x12) go to the lane's reply socket, the rest to its main
// socket (the same split as udp_socket.h's per-process groups).
//
// QP1 (the GSI QP, IBA 13.5 / 16.7; rdma_cm's MADs) is shared by every
// process of the host, so its MADs are steered by their content: a REQ or
// SIDR_REQ by the listener's service ID (ps and port, registered by the
// process that listens), any other CM MAD by the lane in the top byte of
// the communication ID it is addressed to (each process draws its comm IDs
// inside its lane, as it does QPNs).
//
// What a classic BPF reuseport program returns is an index into the group's
// socket array, which the kernel appends to at bind and fills by moving the
// last socket into the hole at close (net/core/sock_reuseport.c). An index
// past the end (kNowhere) makes the kernel pick a socket by hash, and a
// datagram too short for a load ends the program with 0: so a packet that
// no lane claims goes to the table's miss_index, nicd's own sink (index 0,
// which it reads and discards), never to a process by chance. A group can
// hold members of several users' lanes (root's nicd keeps the forwarded
// lanes' members, docs/host-nic.md "Users"): a packet for a dead or unknown
// lane must reach none of them.
//
// Thread-safety: pure functions.
#pragma once

#include <linux/filter.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace softrnic::transport::host_nic {

// The lanes no process gets: 0 holds QP0 and QP1, 0xFF the multicast QPN
// 0xFFFFFF.
inline constexpr uint8_t kFirstLane = 1;
inline constexpr uint8_t kLastLane = 0xFE;

// Returned for a packet no entry claims: past any socket array.
inline constexpr uint32_t kNowhere = 0xFFFFFFFFu;

struct LaneSockets {
  uint8_t lane = 0;
  uint32_t main_index = 0;   // the lane's socket in the group's array
  uint32_t reply_index = 0;  // its reply socket (= main_index when it has none)
};

// rdma_cm's service ID for a port space and port (RDMA_PS_TCP 0x106 with
// port 18515 -> 0x0000000001064853): a REQ to it goes to `main_index`.
struct ServiceSockets {
  uint16_t port_space = 0;  // RDMA_PS_*: 0x0002 IPOIB, 0x0106 TCP, 0x0111 UDP, 0x013F IB
  uint16_t port = 0;
  uint32_t main_index = 0;
};

// rdma_cm listeners one host NIC steers REQs for.
inline constexpr size_t kMaxServices = 256;

struct SteeringTable {
  std::vector<LaneSockets> lanes;
  std::vector<ServiceSockets> services;
  // Where a packet goes that no lane or service claims.
  uint32_t miss_index = kNowhere;
  // Where a CM REQ or SIDR_REQ goes whose service no process listens on:
  // to a process, whose CM answers it (REJ, IBA 12.6.7 reason 8, or a
  // SIDR_REP), as a host with an RNIC does; dropped, it would leave the
  // connecting side waiting for its timeouts instead of ECONNREFUSED.
  uint32_t service_miss_index = kNowhere;
};

// The program for `table`; entries in any order, no duplicate lanes or
// services. At most 254 lanes and kMaxServices services (the program then
// stays under BPF_MAXINSNS, 4096 instructions).
std::vector<sock_filter> BuildSteeringProgram(const SteeringTable& table);

// Attaches `program` to the reuseport group of `fd` (a bound member),
// replacing the group's program. 0 or an errno.
int AttachSteeringProgram(int fd, const std::vector<sock_filter>& program);

}  // namespace softrnic::transport::host_nic
