// What the device says about itself in libibverbs' structures: the
// ibv_device_attr of ibv_query_device, the ibv_port_attr of ibv_query_port
// and each ibv_gid_entry of ibv_query_gid_ex, filled from the engine's
// Device. The verbs library answers with these, and `softrnic devinfo`
// (tools/softrnic_devinfo.cc) compiles this file too and prints them, so
// the tool cannot disagree with ibv_devinfo.
//
// Thread-safety: reads the Device's constant attributes and GID table only.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "engine/device/device.h"

namespace softrnic::verbs {

// The device_cap_flags claimed: only what the engine really does
// (IBV_DEVICE_XRC: engine/queues/xrc.cc).
inline constexpr unsigned kDeviceCapFlags =
    IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_PORT_ACTIVE_EVENT |
    IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_CHANGE_PHY_PORT | IBV_DEVICE_MEM_WINDOW |
    IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC;

// Device memory (ibv_alloc_dm) a process may hold at once: ordinary
// memory of the process, bounded like a NIC's so a runaway allocator fails.
inline constexpr uint64_t kMaxDeviceMemory = 4 << 20;

void FillDeviceAttr(const engine::DeviceAttr& a, ibv_device_attr* out);
// On-demand paging (engine/memory/odp.h): explicit and implicit regions, every
// operation of RC, UC and UD on either side, SRQ receives included.
void FillOdpCaps(ibv_odp_caps* out);
// Port 1 (the only one).
void FillPortAttr(const engine::Device& dev, ibv_port_attr* out);
// GID `index` of port `port`; false if there is no such entry.
bool FillGidEntry(const engine::Device& dev, uint32_t port, uint32_t index, ibv_gid_entry* out);

}  // namespace softrnic::verbs
