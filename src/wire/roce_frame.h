// A RoCE v2 packet as it would appear on an Ethernet wire: Ethernet, IPv4,
// UDP, then the BTH .. ICRC the engine built (IBA Annex A17.4). The engine
// never builds these headers (the kernel does, or, on the shared-memory
// path, nobody); `softrnic capture` (engine/capture.h) renders every packet
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
// Only IPv4: the transports softrnic has carry IPv4-mapped GIDs only.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace softrnic::wire {

inline constexpr uint32_t kRoceFrameHeaderLength = 14 + 20 + 8;  // Ethernet, IPv4, UDP

struct FrameAddresses {
  uint32_t src_ip = 0;  // network order
  uint32_t dst_ip = 0;
  uint16_t src_port = 0;  // host order
  uint16_t dst_port = 4791;
  uint8_t traffic_class = 0;  // IPv4 TOS (DSCP and ECN)
};

// Replaces *out with the frame of the packet whose bytes from the BTH up to
// (not including) the ICRC are `head` then `payload` then `pad` zero bytes
// (0-3), ICRC appended. `payload` may be empty.
void BuildRoceFrame(const FrameAddresses& a, std::span<const uint8_t> head,
                    std::span<const uint8_t> payload, uint32_t pad, std::vector<uint8_t>* out);

}  // namespace softrnic::wire
