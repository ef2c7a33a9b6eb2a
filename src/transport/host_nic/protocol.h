// The host NIC daemon's control protocol (docs/host-nic.md): what a
// softrnic process and nicd say over an abstract SOCK_SEQPACKET unix socket
// named after the user and the UDP port, one socket per device.
//
//   process -> nicd   Hello            "serve me at the host's addresses"
//   nicd -> process   Lease + fds      a lane, and per host address a main
//                                      and a reply socket of nicd's
//                                      SO_REUSEPORT group and its sink
//                                      (SCM_RIGHTS)
//   process -> nicd   Service          "steer REQs for (port space, port) to me"
//   nicd -> process   ServiceReply     0 or an errno
//   EOF either way                     the lease ends (nicd quarantines the lane)
//
// Every message is one fixed-size struct; anything else ends the
// connection. A nicd serves its own effective uid with members of its
// groups; a process trusts only a nicd of its own uid (SO_PEERCRED both
// ways): another user's socket of that name is an impostor and is not used.
// The one exception is root's nicd, which every user may trust: it serves
// other uids too, but never hands them a member (a member can re-program
// the whole group): their lease is *forwarded* (Lease::forwarded). nicd
// keeps the lane's members, and passes each datagram they receive, with a
// ForwardHeader in front, through a unix datagram channel per host address
// whose other end is the lease's descriptor; the process sends from a
// socket of its own bound to the address at a port the kernel picks.
//
// Thread-safety: pure functions and single-descriptor I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace softrnic::transport::host_nic {

inline constexpr uint32_t kHelloMagic = 0x534e4831;    // "SNH1"
inline constexpr uint32_t kLeaseMagic = 0x534e4c31;    // "SNL1"
inline constexpr uint32_t kServiceMagic = 0x534e5331;  // "SNS1"
inline constexpr uint32_t kMaxLeaseEndpoints = 16;

struct Hello {
  uint32_t magic = kHelloMagic;
  uint16_t port = 0;  // the UDP port the process serves (4791)
  uint16_t reserved = 0;
};

struct LeaseEndpoint {
  uint8_t gid[16] = {};
  uint32_t scope_id = 0;  // a link-local IPv6 address's interface index
  uint16_t port = 0;
  uint8_t has_reply = 0;  // a reply socket follows the main one
  uint8_t gro = 0;        // UDP_GRO is on for both
  // nicd's sink follows (daemon.h): the process holds it and never reads
  // it, so that it outlives a nicd that is killed (its closing would move
  // the last member of the group into its slot).
  uint8_t has_sink = 0;
  uint8_t reserved[3] = {};
};

struct Lease {
  uint32_t magic = kLeaseMagic;
  int32_t error = 0;  // 0, or why there is no lease (then no fds)
  uint8_t lane = 0;   // the top byte of every QPN and comm ID of the process
  uint8_t count = 0;  // endpoints[0..count)
  // 0: per endpoint a main and (has_reply) a reply member follow. 1: per
  // endpoint one unix datagram channel follows, carrying ForwardHeader +
  // datagram (root's nicd serving another uid).
  uint8_t forwarded = 0;
  uint8_t reserved = 0;
  LeaseEndpoint endpoints[kMaxLeaseEndpoints];
};

inline constexpr uint32_t kForwardMagic = 0x534e4631;  // "SNF1"

// In front of every datagram on a forwarded lease's channel: what recvmsg
// told nicd about it, which the process's receive path needs (the ICRC
// covers the addresses and ports; the segment size cuts a coalesced
// datagram; the traffic class carries ECN).
struct ForwardHeader {
  uint32_t magic = kForwardMagic;
  uint16_t gro_segment_size = 0;  // 0: one packet
  uint8_t traffic_class = 0;
  uint8_t source_length = 0;      // bytes of `source` used (a sockaddr_in or _in6)
  uint8_t source[28] = {};        // sockaddr_in / sockaddr_in6 as recvmsg returned it
};
static_assert(sizeof(ForwardHeader) == 36);

enum class ServiceOp : uint16_t { kAdd = 1, kRemove = 2 };

struct Service {
  uint32_t magic = kServiceMagic;
  uint16_t op = 0;  // ServiceOp
  uint16_t port_space = 0;
  uint16_t port = 0;
  uint16_t reserved = 0;
};

struct ServiceReply {
  uint32_t magic = kServiceMagic;
  int32_t error = 0;
};

// "softrnic-nicd-<euid>-<port>": the abstract name (without its leading NUL).
std::string ControlSocketName(uint32_t euid, uint16_t port);

// A connected SOCK_SEQPACKET socket to the abstract name `name` (as
// ControlSocketName gives it), or -errno (ECONNREFUSED, ENOENT: nobody
// listens there).
int ConnectControlSocket(const std::string& name);

// Sends `len` bytes as one message with `fds` attached. 0 or an errno.
int SendMessage(int sock, const void* data, size_t len, const std::vector<int>& fds = {});
// Receives one message of exactly `len` bytes, waiting up to `timeout_ms`
// (-1: forever); attached descriptors land in *fds (close-on-exec), at most
// `max_fds` of them (more, or a truncated message, is EPROTO and closes
// them all). 0, ETIMEDOUT, ECONNRESET (EOF) or another errno.
int ReceiveMessage(int sock, void* data, size_t len, int timeout_ms,
                   std::vector<int>* fds = nullptr, size_t max_fds = 0);

// The uid of the process at the other end of a unix socket, or -1.
int64_t PeerUid(int sock);

}  // namespace softrnic::transport::host_nic
