// The device as the kernel would show it: the facts a softrnic process's
// device reports (ibv_query_device / ibv_query_port / ibv_query_gid) and
// their rendering as a /sys/class/infiniband/<dev>/ tree formatted exactly
// as the kernel's ib_core sysfs (drivers/infiniband/core/sysfs.c), for
// middleware that reads sysfs instead of asking verbs (UCX, NCCL,
// libfabric, pyverbs's tests). Used by `softrnic run` and `softrnic setup`.
//
// What a static view can and cannot show: a device's GID table is decided
// when a process opens it (docs/addressing.md): every up non-loopback IPv4
// address of the host, in getifaddrs order, whose RoCE port is free, then
// one loopback address 127.a.b.c derived from that process's pid. The node
// GUID is not per process: it depends on the host, the network namespace
// and the device name only (engine::NodeGuid), so every view shows the
// right one. A file in sysfs cannot differ per reader, so the GID view is
// exact for one pid only: `softrnic run` renders it for its own pid, which
// the command it execs keeps (so `softrnic run ibv_devinfo` sees exactly its
// own GIDs); any other process (children of that command, MPI ranks) reads
// the host GIDs right (unless another process owns hostIP:4791, when its
// table has no host GIDs) and a loopback GID that is not its own.
// `softrnic setup` renders for no process: host GIDs only.
//
// Thread-safety: none needed; single-threaded setup code.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/device/device.h"
#include "transport/address.h"

namespace softrnic::tools {

struct ViewGid {
  transport::Gid gid;
  std::string netdev;  // the interface holding the address ("lo" for 127/8)
};

struct DeviceFacts {
  std::string name;     // "softrnic0"
  engine::DeviceAttr attr;
  std::vector<ViewGid> gids;         // index = GID index
  std::vector<std::string> netdevs;  // device/net/: interfaces of the host GIDs
};

// The facts a device opened by process `pid` would report now, computed with
// the engine's own rules (transport::UdpConfigFromEnvironment for
// SOFTRNIC_BIND, transport::HostIpv4Addresses, PerProcessLoopbackAddress
// attempt 0, engine::NodeGuid). No pid: no per-process loopback GID.
// Binds nothing, so it cannot know which host addresses another softrnic
// process already owns (those are listed anyway).
DeviceFacts CurrentFacts(std::optional<pid_t> pid);

// One node of a rendered tree, path relative to the tree's root.
struct TreeNode {
  enum class Kind { kDir, kFile, kSymlink };
  Kind kind;
  std::string path;
  std::string content;  // file text, or symlink target
};

// The /sys/class/infiniband tree: "<name>/node_guid", "<name>/ports/1/...".
std::vector<TreeNode> RenderSysfs(const DeviceFacts& facts);

// Creates `nodes` under directory `root` (which must exist); files 0444,
// directories 0555 after filling (as sysfs). Returns "" or what failed.
std::string WriteTree(const std::string& root, const std::vector<TreeNode>& nodes);

// "0000:0000:0000:0000:0000:ffff:0a00:0001": the kernel's %pI6.
std::string GidSysfsText(const transport::Gid& gid);
// "0200:5e00:7f01:0203" from a network-order GUID: sysfs node_guid.
std::string GuidSysfsText(uint64_t guid_network_order);

}  // namespace softrnic::tools
