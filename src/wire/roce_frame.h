// A RoCE v2 packet as it would appear on an Ethernet wire: Ethernet, IPv4
// or IPv6, UDP, then the BTH .. ICRC the engine built (IBA Annex A17.4). The engine
// never builds these headers (the kernel does, or, on the shared-memory
// path, nobody); `softrnic capture` (engine/observe/capture.h) renders every packet
// with them so that Wireshark's RoCE dissector decodes same-host traffic the
// way it decodes wire traffic.
//
// The headers are those of a DF datagram with IPv4 identification 0 (what an
// unconnected softrnic UDP socket sends), TTL 64, UDP checksum 0 (allowed
// over IPv4, RFC 768), and Ethernet addresses derived from the IPv4
// addresses (02:00:a:b:c:d, locally administered: the capture does not know
// the real ones). The ICRC is computed for exactly these headers, so it
// holds for the frame as captured even where the packet that travelled had
// another one (a GSO segment's IPv4 ID) or none (shared memory).
//
// IPv6 (issue 15): EtherType 0x86DD, a 40-byte header with flow label 0 and
// hop limit 64, and a real UDP checksum (zero is not allowed over IPv6, RFC
// 8200 8.1); MAC addresses from the last 4 bytes of the IPv6 addresses. The
// ICRC masks traffic class, flow label and hop limit (IBA A17.4.5.1), so it
// holds whatever flow label the wire had.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace softrnic::wire {

inline constexpr uint32_t kRoceFrameHeaderLength = 14 + 20 + 8;  // Ethernet, IPv4, UDP
inline constexpr uint32_t kRoceFrameHeaderLengthIpv6 = 14 + 40 + 8;  // Ethernet, IPv6, UDP

struct FrameAddresses {
  uint32_t src_ip = 0;  // network order (IPv4)
  uint32_t dst_ip = 0;
  bool ipv6 = false;       // then these addresses instead
  uint8_t src_ip6[16] = {};
  uint8_t dst_ip6[16] = {};
  uint16_t src_port = 0;  // host order
  uint16_t dst_port = 4791;
  uint8_t traffic_class = 0;  // IPv4 TOS / IPv6 traffic class (DSCP and ECN)
};

// Replaces *out with the frame of the packet whose bytes from the BTH up to
// (not including) the ICRC are `head` then `payload` then `pad` zero bytes
// (0-3), ICRC appended. `payload` may be empty.
void BuildRoceFrame(const FrameAddresses& a, std::span<const uint8_t> head,
                    std::span<const uint8_t> payload, uint32_t pad, std::vector<uint8_t>* out);

}  // namespace softrnic::wire
