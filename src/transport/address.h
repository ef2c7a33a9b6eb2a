// Addresses as the engine sees them: a 16-byte GID (RoCE v2 uses the IPv6
// address, or the IPv4-mapped ::ffff:a.b.c.d for IPv4, IBA A17.4.5) plus the
// UDP port. See docs/addressing.md for how processes get their addresses.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>

namespace softrnic::transport {

struct Gid {
  std::array<uint8_t, 16> raw{};

  static Gid FromIpv4(uint32_t addr_network_order) {
    Gid g;
    g.raw[10] = 0xFF;
    g.raw[11] = 0xFF;
    std::memcpy(&g.raw[12], &addr_network_order, 4);
    return g;
  }
  bool IsV4Mapped() const {
    static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    return std::memcmp(raw.data(), kPrefix, 12) == 0;
  }
  // Network-order IPv4 address; meaningful only when IsV4Mapped().
  uint32_t Ipv4() const {
    uint32_t a;
    std::memcpy(&a, &raw[12], 4);
    return a;
  }
  bool IsZero() const {
    for (uint8_t b : raw)
      if (b) return false;
    return true;
  }
  // A multicast GID of RoCE v2: IPv4-mapped 224.0.0.0/4 (how rdma_cm maps
  // an IPv4 group) or IPv6 ff00::/8, the kernel's rdma_is_multicast_addr.
  bool IsMulticast() const { return IsV4Mapped() ? (raw[12] & 0xF0) == 0xE0 : raw[0] == 0xFF; }
  std::string ToString() const;  // "::ffff:10.0.0.1" or IPv6 text
  bool operator==(const Gid&) const = default;
};

// A UDP endpoint: GID + port.
struct Endpoint {
  Gid gid;
  uint16_t port = 4791;
  bool operator==(const Endpoint&) const = default;
};

}  // namespace softrnic::transport
