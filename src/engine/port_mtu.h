// The port's active MTU when SOFTRNIC_MTU does not set it: the largest IBA
// path MTU whose packets fit the smallest link the device's endpoints are
// on (Transport::link_mtu), as the kernel's rxe derives it from its netdev
// (1500-byte Ethernet: 1024; jumbo frames and loopback: 4096).
#pragma once

#include <cstdint>

#include "engine/types.h"

namespace softrnic::engine {

// The most header bytes a RoCE v2 packet of softrnic's carries around its
// payload: IPv6 (40) + UDP (8) + BTH (12) + XRCETH (4) + RETH (16) +
// ImmDt (4, RDMA WRITE Only with Immediate) + ICRC (4). A payload of the
// path MTU plus these must fit the link, since softrnic sends with Don't
// Fragment (rxe subtracts 80 and leaves XRC out).
inline constexpr uint32_t kMaxRoceHeaderBytes = 40 + 8 + 12 + 4 + 16 + 4 + 4;

// 0 (the link is unknown): 1024, which fits 1500-byte Ethernet. A link too
// small even for 256: 256 (IBA's smallest; such a link drops the larger
// packets, as it would a NIC's).
// extra_bytes: what every packet carries besides (a sealed QP's trailer,
// seal/format.h).
inline constexpr Mtu ActiveMtuForLink(uint32_t link_mtu, uint32_t extra_bytes = 0) {
  if (link_mtu == 0) return Mtu::k1024;
  for (Mtu m : {Mtu::k4096, Mtu::k2048, Mtu::k1024, Mtu::k512})
    if (MtuBytes(m) + kMaxRoceHeaderBytes + extra_bytes <= link_mtu) return m;
  return Mtu::k256;
}

}  // namespace softrnic::engine
