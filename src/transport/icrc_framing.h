// ICRC framing: the step between the engine's packets and a wire that
// carries them as RoCE v2 (IBA Annex A17.8). The engine lays a packet out
// from the BTH to the end with 4 bytes of room for the ICRC and never fills
// them; a transport that puts packets on such a wire frames each one here,
// for exactly the IPv4/UDP headers it will carry, and checks received ones
// here. The UDP transport uses it (udp_tx.cc, udp_receive.cc), and so does
// fault injection (fault_transport.cc: a corrupted packet needs the ICRC of
// the original); an AF_XDP transport would use it the same way. The
// shared-memory transport does not frame: nothing corrupts memory on the way.
//
// IPv4 (IPv4-mapped GIDs) and IPv6 (IBA A17.4.5.1: the IPv6 header with
// traffic class, flow label and hop limit masked).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "transport/address.h"
#include "transport/transport.h"
#include "wire/icrc.h"

namespace softrnic::transport {

// What FrameIcrc writes after a packet's bytes at most: 3 pad bytes of a
// packet in pieces, then the 4 ICRC bytes.
inline constexpr uint32_t kIcrcTailMax = 8;

// The header fields the ICRC covers for a packet from src_ip:src_port to
// dst_ip:dst_port (addresses in network order, ports host order) sent with
// IPv4 identification `ipv4_id` (an unconnected DF socket sends 0; a GSO
// run numbers its segments 0, 1, 2, ...).
wire::IpUdpFields IcrcFields(uint32_t src_ip, uint16_t src_port, uint32_t dst_ip,
                             uint16_t dst_port, uint16_t ipv4_id = 0);
// The same between two endpoints; false if one is IPv4-mapped and the
// other is not (no packet has such headers).
bool IcrcFields(const Endpoint& src, const Endpoint& dst, uint16_t ipv4_id,
                wire::IpUdpFields* out);
// Between two endpoints of one family (IPv4 ID 0 for IPv4).
// REQUIRES: src.gid.IsV4Mapped() == dst.gid.IsV4Mapped().
wire::IpUdpFields IcrcFields(const Endpoint& src, const Endpoint& dst, uint16_t ipv4_id = 0);

// Computes packet p's ICRC for headers `ip` and writes what a transport
// sends after p's own bytes into `tail`: for a packet in pieces its pad
// bytes (zeros) then the ICRC, else the ICRC alone (least-significant byte
// first). Returns how many bytes it wrote (4-7).
// REQUIRES: p is whole (payload == nullptr) or SplitLayoutValid(p).
uint32_t FrameIcrc(const wire::IpUdpFields& ip, const TxPacket& p, uint8_t tail[kIcrcTailMax]);

// True when the last 4 of `length` bytes (BTH .. ICRC) are the right ICRC
// for headers `ip`.
inline bool IcrcValid(const wire::IpUdpFields& ip, const uint8_t* data, uint32_t length) {
  return wire::CheckIcrc(ip, data, length);
}

}  // namespace softrnic::transport
