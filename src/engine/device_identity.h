// What a softrnic device says about its identity and its one port, as
// functions and constants, so every view of the device agrees: the engine
// (vendor id, node GUID), the verbs library (ibv_query_port) and `softrnic run` /
// `softrnic setup`, which render the same facts as a kernel-style
// /sys/class/infiniband tree (tools/device_view.h).
//
// Thread-safety: NodeGuid is a pure function; CurrentHostIdentity only
// reads files and keeps no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace softrnic::engine {

// The one device a process has, as ibv_get_device_list names it: `name`, and
// `dev_name` (the uverbs character device it would have under /dev/infiniband
// if it were a kernel device). src/verbs/device.cc names its device with them.
inline constexpr const char* kDeviceName = "softrnic0";
inline constexpr const char* kUverbsName = "uverbs0";

// softrnic's vendor id (ibv_device_attr.vendor_id, an IEEE OUI in the low
// 24 bits): 02:53:52, "SR" under an OUI with the locally-administered bit
// set, which the IEEE never assigns, so it cannot be a real vendor's; not 0
// either, which SPDK (and others) read as "this is rxe", nor rxe's 0xffffff.
inline constexpr uint32_t kVendorId = 0x025352;

// What makes a device's GUIDs the same in every process of one host and
// network namespace and different between hosts and namespaces.
struct HostIdentity {
  std::string machine_id;   // /etc/machine-id, else this boot's id, else ""
  uint64_t netns_dev = 0;   // st_dev and st_ino of /proc/self/ns/net
  uint64_t netns_ino = 0;
};

// This process's HostIdentity. machine-id(5) falls back to
// /proc/sys/kernel/random/boot_id where /etc/machine-id is missing or empty
// (minimal containers): stable until the next boot only.
HostIdentity CurrentHostIdentity();

// The node GUID (network byte order) of device `device_name` on `host`:
// the first 8 bytes of HMAC-SHA256 keyed with the machine id over the
// device name and the namespace, as an EUI-64 with the locally-administered
// bit set and the group bit clear. machine-id(5) asks for exactly this (a
// keyed cryptographic hash, never the id itself): the id is meant to stay
// confidential, and the GUID is visible to every peer (ibv_devinfo,
// rdma_cm). Unlike a GUID derived from the GIDs (which include the
// per-process loopback one) it is the same in every process, as a NIC's.
// Engine::Engine (node_guid, sys_image_guid) and the sysfs view
// (tools/device_view.cc) both use it.
uint64_t NodeGuid(const HostIdentity& host, std::string_view device_name);

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
