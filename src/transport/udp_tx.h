// The transmit half of the UDP transport (udp_transport.cc): one pipeline
// for every packet. Internal to src/transport/.
//
// Packets become messages for sendmmsg: a run of packets to one destination
// from one socket with one size (the last may be shorter) is one message
// with UDP_SEGMENT (GSO), so the kernel's per-datagram cost is paid once per
// run; with segmentation off (SOFTRNIC_GSO=0, fault injection above this
// transport, or a kernel that refused UDP_SEGMENT) every run is one packet
// long and the same code sends packet by packet. Each packet is framed with
// its ICRC for exactly the headers the kernel will emit for it
// (icrc_framing.h): its IPv4 ID is its index in the run (IPv6 has none).
//
// Zero-copy: the engine's packet (const, whole or in pieces) is handed to
// the kernel through iovecs (head, payload from registered memory, then pad
// + ICRC from sender-owned staging); the engine's buffer is never written.
// A packet whose ICRC is already in its bytes (TxPacket::icrc_included: a
// fault injector's corrupted copy) goes as it is, alone in its datagram
// (IPv4 ID 0, what it was framed for).
//
// Fast-path memory: all staging is in the object; nothing is allocated per
// packet.
//
// Thread-safety: not synchronised; owned by one UdpTransport.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <vector>

#include "transport/icrc_framing.h"
#include "transport/transport.h"
#include "transport/udp_socket.h"

namespace softrnic::transport {

class UdpSender {
 public:
  // `sockets` and `main_of_local` are the transport's (they outlive this);
  // packet p leaves from sockets[main_of_local[p.local_index]].
  // `segmentation`: runs may be longer than one packet.
  UdpSender(const std::vector<LocalSocket>* sockets, const std::vector<uint16_t>* main_of_local,
            TransportCounters* counters, bool segmentation)
      : sockets_(sockets), main_of_local_(main_of_local), counters_(counters),
        segmentation_(segmentation) {}

  // Transport::SendBurst (udp_transport.h has the contract).
  int Send(const TxPacket* packets, int n);

 private:
  static constexpr int kMaxTxBatch = 64;  // messages (and packets) per sendmmsg
  // The kernel accepts up to UDP_MAX_SEGMENTS (64 before 6.2, 128 since)
  // segments per send.
  static constexpr int kMaxSegments = 64;

  struct Msg {
    Endpoint to;
    sockaddr_in6 dst;  // `to` as a socket address (sockaddr_in for IPv4)
    socklen_t dst_len;
    int first_packet;
    int packets;
    int first_iov;
    int iovs;
    uint32_t bytes;
    uint16_t segment_size;
    alignas(cmsghdr) uint8_t cmsg[CMSG_SPACE(sizeof(uint16_t))];
  };

  // Sends the staged messages: the one sendmmsg loop. False on a full
  // socket buffer (then *consumed = the first packet not handed to the
  // kernel).
  bool Flush(int* consumed);

  const std::vector<LocalSocket>* sockets_;
  const std::vector<uint16_t>* main_of_local_;
  TransportCounters* counters_;
  const bool segmentation_;
  bool gso_refused_ = false;  // the kernel rejected UDP_SEGMENT: packet by packet

  Msg msgs_[kMaxTxBatch];
  mmsghdr hdrs_[kMaxTxBatch] = {};
  // Up to three iovecs per packet: head, payload, pad + ICRC.
  iovec iov_[3 * kMaxTxBatch];
  uint8_t tail_[kMaxTxBatch][kIcrcTailMax];
  int iovs_ = 0;
  int pending_ = 0;   // messages staged
  int packets_ = 0;   // packets staged
  uint16_t sock_ = 0;  // the socket the staged messages leave from
};

}  // namespace softrnic::transport
