// What a softrnic device says about its identity and its one port, as pure
// functions and constants, so every view of the device agrees: the engine
// (node GUID), the verbs library (ibv_query_port) and `softrnic run` /
// `softrnic setup`, which render the same facts as a kernel-style
// /sys/class/infiniband tree (tools/device_view.h).
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <span>

#include "transport/address.h"

namespace softrnic::engine {

// The one device a process has, as ibv_get_device_list names it: `name`, and
// `dev_name` (the uverbs character device it would have under /dev/infiniband
// if it were a kernel device). src/verbs/device.cc names its device with them.
inline constexpr const char* kDeviceName = "softrnic0";
inline constexpr const char* kUverbsName = "uverbs0";

// The node GUID (network byte order) of a device whose GID table is `gids`:
// EUI-64 style 02:00:5e:00 + the last GID's IPv4 address, which in the
// automatic scheme is the per-process loopback address (docs/addressing.md),
// so it differs between processes and hosts. 02:00:5e:00:00:00:00:00 for an
// empty table. Engine::Engine (engine.cc) sets its node GUID with it.
uint64_t NodeGuidFromGids(std::span<const transport::Gid> gids);

// Port 1's fixed attributes, with the numbering of ibv_port_attr and of the
// kernel's struct ib_port_attr (identical values). The verbs library reports
// exactly these (src/verbs/device.cc FillPortAttr).
struct PortFacts {
  static constexpr int kState = 4;        // IBV_PORT_ACTIVE
  static constexpr int kPhysState = 5;    // LinkUp
  static constexpr int kActiveWidth = 2;  // 4X
  static constexpr int kActiveSpeed = 32;  // EDR (25 Gb/s per lane): nominal, software has no lanes
  // IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS: rdma_cm works; RoCE GIDs are IP
  // addresses.
  static constexpr uint32_t kCapFlags = (1u << 16) | (1u << 26);
  static constexpr uint16_t kLid = 0;  // Ethernet link layer: no LIDs
  static constexpr uint16_t kDefaultPkey = 0xffff;
};

}  // namespace softrnic::engine
