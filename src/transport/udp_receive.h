// The receive half of the RoCE v2 UDP transport as a function of the bytes:
// a datagram the kernel returned (its payload, source, destination and
// control messages) becomes zero or more packets whose ICRC verified, and
// everything dropped is counted with its reason. UdpTransport::RecvBurst
// calls it for every datagram; fuzz/udp_receive_fuzzer.cc calls it without
// sockets, so what the fuzzer attacks is the product path.
//
// Checks, in order (docs/hardening.md T1-T2):
// - an 8-byte shared-memory doorbell (kShmDoorbell) is counted, not a packet;
// - runts (< BTH + ICRC), truncated datagrams (MSG_TRUNC) and sources
//   that are neither IPv4 nor IPv6 are dropped (rx_runts);
// - a datagram the kernel coalesced (UDP_GRO) is cut at its segment size;
// - each segment's ICRC is checked with the IPv4 ID it should carry (its
//   index in the datagram: GSO numbers a run 0, 1, 2, ...). A segment that
//   fails is tried with the other IDs a GSO run can carry (0..63) only when
//   it could be such a segment: at most one path MTU long, from a source
//   that sent ICRC-valid packets in the last kRecentSourceWindowNs (the
//   first segment of a run carries ID 0 and passes at once, which makes its
//   sender known). Junk from anywhere else costs one CRC per datagram
//   segment (security review M7).
// - IPv6 has no identification field: an IPv6 segment's ICRC is checked
//   once (IBA A17.4.5.1 masks the flow label, traffic class and hop limit).
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>

#include "transport/transport.h"
#include "wire/icrc.h"

namespace softrnic::transport {

// One datagram as recvmsg returned it. IPv4 addresses in network byte
// order, IPv6 ones as GIDs; ports host byte order.
struct ReceivedDatagram {
  uint8_t* data = nullptr;
  uint32_t length = 0;
  bool truncated = false;        // MSG_TRUNC: larger than the buffer
  bool source_is_ipv4 = false;   // a whole sockaddr_in with AF_INET
  bool source_is_ipv6 = false;   // a whole sockaddr_in6 with AF_INET6 (IPv6 socket)
  uint32_t src_ip = 0;           // IPv4
  uint16_t src_port = 0;
  uint32_t dst_ip = 0;           // IPv4
  Gid src_ip6;                   // IPv6
  Gid dst_ip6;                   // IPv6
  uint16_t dst_port = 0;
  uint32_t gro_segment_size = 0;  // UDP_GRO cmsg; 0: not coalesced
  uint8_t traffic_class = 0;      // IP_TOS / IPV6_TCLASS cmsg
  const Gid* group = nullptr;     // received on a multicast group's socket: the group
};

// Reads the UDP_GRO segment size and the IP_TOS (IPV6_TCLASS) byte from recvmsg's control
// messages. A segment size of 0, negative, or not below the datagram's
// length means "one packet" and leaves *gro_segment_size 0.
void ReadReceiveControl(const msghdr& h, uint32_t datagram_length, uint32_t* gro_segment_size,
                        uint8_t* traffic_class);

// A datagram of a forwarded lease's channel (host_nic/protocol.h): root's
// nicd wrote a ForwardHeader and then the UDP datagram one of its members
// received. Points d->data / d->length at that datagram, takes its segment
// size and traffic class from the header and copies the sender's sockaddr
// to *source (*source_length bytes). Returns false for a channel datagram
// shorter than the header, with another magic or with a source longer than
// the header's field: d->length is then 0 and *source_length 0, so the
// splitter counts a runt. A segment size not below the datagram's length
// means "one packet", as in ReadReceiveControl.
bool OpenForwardedDatagram(uint8_t* data, uint32_t length, ReceivedDatagram* d,
                           sockaddr_storage* source, socklen_t* source_length);

// Fills d's source from the sockaddr recvmsg (or nicd) returned and its
// destination from the endpoint of the socket that received it. A source of
// neither family, cut short, or not of the socket's family (an IPv6 socket
// is V6ONLY) leaves both source flags false: the splitter drops the
// datagram as a runt.
void SetDatagramAddresses(const sockaddr* source, socklen_t source_length, const Endpoint& local,
                          ReceivedDatagram* d);

// The largest RoCE packet softrnic sends or accepts as a GSO segment: one
// 4096-byte IBA MTU of payload plus headers (engine TxBatch::kBufferSize).
inline constexpr uint32_t kMaxGsoSegmentBytes = 4096 + 128;
// GSO numbers at most this many segments of a run (UDP_MAX_SEGMENTS before
// Linux 6.2), so a run's IDs are 0..kMaxGsoIds-1.
inline constexpr uint32_t kMaxGsoIds = 64;
// How long a source that sent a valid packet stays eligible for ID retries.
inline constexpr uint64_t kRecentSourceWindowNs = 2'000'000'000;

class DatagramSplitter {
 public:
  explicit DatagramSplitter(TransportCounters* counters) : counters_(counters) {}

  // Appends the packets of `d` from segment *next_segment on to
  // out[*produced..n). Returns true when the datagram is finished (then
  // *next_segment is 0 again), false when `out` filled up first (call again
  // with the same datagram and *next_segment). RxPacket::data points into
  // d.data. `now_ns` is any monotonic clock; it only ages the sources.
  bool Split(const ReceivedDatagram& d, uint16_t local_index, uint64_t now_ns,
             uint32_t* next_segment, RxPacket* out, int n, int* produced);

 private:
  // A small table of sources that recently sent ICRC-valid packets. Only a
  // packet with a valid ICRC enters it, so junk cannot evict a peer.
  struct RecentSource {
    uint32_t ip = 0;
    uint16_t port = 0;
    uint64_t last_valid_ns = 0;
    bool used = false;
  };
  static constexpr int kRecentSources = 16;

  bool RecentlyValid(uint32_t ip, uint16_t port, uint64_t now_ns) const;
  void NoteValid(uint32_t ip, uint16_t port, uint64_t now_ns);
  // The ICRC check of one segment; tries other IPv4 IDs only if
  // `retry_allowed`.
  bool CheckSegmentIcrc(wire::IpUdpFields& ip, const uint8_t* data, uint32_t len,
                        uint32_t segment, bool retry_allowed);

  TransportCounters* counters_;
  std::array<RecentSource, kRecentSources> recent_{};
};

}  // namespace softrnic::transport
