#include "device_view.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "config/environment.h"
#include "port_counters.h"
#include "engine/device_identity.h"
#include "transport/transport.h"
#include "transport/udp_transport.h"
#include "transport/local_address.h"

namespace softrnic::tools {
namespace {

using engine::PortFacts;
using transport::Gid;

// The interface holding IPv4 address `addr` (network order), or "" if none;
// the loopback interface for any 127/8 address (Linux routes all of 127/8
// to it whether or not the exact address is configured).
std::string InterfaceOf(uint32_t addr) {
  std::string found, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ntohl(addr) >> 24 == 127 ? "lo" : "";
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if ((ifa->ifa_flags & IFF_LOOPBACK) && loopback.empty()) loopback = ifa->ifa_name;
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) continue;
    sockaddr_in sin;
    std::memcpy(&sin, ifa->ifa_addr, sizeof(sin));
    if (sin.sin_addr.s_addr == addr && found.empty()) found = ifa->ifa_name;
  }
  freeifaddrs(list);
  if (found.empty() && ntohl(addr) >> 24 == 127) found = loopback.empty() ? "lo" : loopback;
  return found;
}

// The kernel's rate_show: active_speed -> (name, 0.1 Gb/s per lane), and
// ib_width_enum_to_int. SDR prints no name.
void SpeedOf(int speed, const char** name, int* deci_gbps) {
  switch (speed) {
    case 2: *name = " DDR"; *deci_gbps = 50; return;
    case 4: *name = " QDR"; *deci_gbps = 100; return;
    case 8: *name = " FDR10"; *deci_gbps = 100; return;
    case 16: *name = " FDR"; *deci_gbps = 140; return;
    case 32: *name = " EDR"; *deci_gbps = 250; return;
    case 64: *name = " HDR"; *deci_gbps = 500; return;
    case 128: *name = " NDR"; *deci_gbps = 1000; return;
    default: *name = ""; *deci_gbps = 25; return;
  }
}
int Lanes(int width) {
  switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return -1;
  }
}

std::string RateText() {
  const char* name;
  int per_lane;
  SpeedOf(PortFacts::kActiveSpeed, &name, &per_lane);
  const int lanes = Lanes(PortFacts::kActiveWidth);
  const int rate = per_lane * lanes;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%d%s Gb/sec (%dX%s)\n", rate / 10, rate % 10 ? ".5" : "", lanes,
                name);
  return buf;
}

std::string Hex(const char* format, unsigned v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "localhost";
  return host;
}

}  // namespace

std::string GidSysfsText(const Gid& gid) {
  std::string s;
  char part[8];
  for (size_t i = 0; i < 16; i += 2) {
    std::snprintf(part, sizeof(part), "%s%02x%02x", i ? ":" : "", gid.raw[i], gid.raw[i + 1]);
    s += part;
  }
  return s;
}

std::string GuidSysfsText(uint64_t guid_network_order) {
  uint8_t b[8];
  std::memcpy(b, &guid_network_order, 8);  // bytes in wire order
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0], b[1], b[2], b[3],
                b[4], b[5], b[6], b[7]);
  return buf;
}

DeviceFacts CurrentFacts(std::optional<pid_t> pid) {
  DeviceFacts f;
  f.name = engine::kDeviceName;
  const transport::UdpConfig config = transport::UdpConfigFromEnvironment(config::Environment::FromProcess());
  const std::vector<transport::LocalAddress> host = transport::HostAddresses();
  auto add = [&](const transport::LocalAddress& a) {
    const std::string netdev =
        a.gid.IsV4Mapped() ? InterfaceOf(a.gid.Ipv4()) : a.ifname;
    f.gids.push_back(ViewGid{a.gid, netdev});
  };
  if (!config.bind_addresses.empty()) {
    // SOFTRNIC_BIND replaces the automatic scheme: exactly these, in order.
    for (const std::string& text : config.bind_addresses) {
      transport::LocalAddress a;
      std::string ignored;
      if (transport::ParseBindAddress(text, host, &a, &ignored)) add(a);
    }
  } else {
    // transport/udp_socket.h OpenEndpoints: IPv4, loopback, IPv6.
    for (const transport::LocalAddress& a : host)
      if (a.gid.IsV4Mapped()) add(a);
    if (pid)
      add(transport::LocalAddress{
          Gid::FromIpv4(htonl(transport::PerProcessLoopbackAddress(static_cast<uint32_t>(*pid), 0))),
          0, "lo"});
    for (const transport::LocalAddress& a : host)
      if (!a.gid.IsV4Mapped()) add(a);
  }
  f.attr.gid_tbl_len = static_cast<uint32_t>(f.gids.size());
  f.attr.node_guid = engine::NodeGuid(engine::CurrentHostIdentity(), f.name);
  f.attr.sys_image_guid = f.attr.node_guid;  // as Engine::Engine
  for (const ViewGid& g : f.gids) {
    if (g.netdev.empty() || (g.gid.IsV4Mapped() && (ntohl(g.gid.Ipv4()) >> 24) == 127)) continue;
    bool seen = false;
    for (const std::string& n : f.netdevs) seen = seen || n == g.netdev;
    if (!seen) f.netdevs.push_back(g.netdev);
  }
  // No host address: the device is reached through loopback only.
  if (f.netdevs.empty()) f.netdevs.push_back(InterfaceOf(htonl(0x7f000001)));
  return f;
}

std::vector<TreeNode> RenderSysfs(const DeviceFacts& facts) {
  using K = TreeNode::Kind;
  std::vector<TreeNode> t;
  const std::string d = facts.name + "/";
  auto dir = [&](const std::string& p) { t.push_back({K::kDir, d + p, ""}); };
  auto file = [&](const std::string& p, const std::string& text) {
    t.push_back({K::kFile, d + p, text});
  };
  t.push_back({K::kDir, facts.name, ""});
  // Device attributes (sysfs.c: node_type, node_guid, sys_image_guid,
  // fw_ver, node_desc; hca_type is the driver's).
  file("node_type", "1: CA\n");
  file("node_guid", GuidSysfsText(facts.attr.node_guid) + "\n");
  file("sys_image_guid", GuidSysfsText(facts.attr.sys_image_guid) + "\n");
  file("fw_ver", facts.attr.fw_ver + "\n");
  file("hca_type", "softrnic\n");
  file("node_desc", (HostName() + " " + facts.name).substr(0, 64) + "\n");  // rdma-ndd's "%h %d"
  // The parent device: no PCI function behind it, so no NUMA node.
  dir("device");
  file("device/numa_node", "-1\n");
  dir("device/net");
  for (const std::string& n : facts.netdevs)
    t.push_back({K::kSymlink, d + "device/net/" + n, "/sys/class/net/" + n});
  // Port 1 (sysfs.c port attributes), the values ibv_query_port reports.
  dir("ports");
  dir("ports/1");
  const std::string p = "ports/1/";
  file(p + "state", std::to_string(PortFacts::kState) + ": ACTIVE\n");
  file(p + "phys_state", std::to_string(PortFacts::kPhysState) + ": LinkUp\n");
  file(p + "link_layer", "Ethernet\n");
  file(p + "rate", RateText());
  file(p + "lid", Hex("0x%x\n", PortFacts::kLid));
  file(p + "sm_lid", "0x0\n");
  file(p + "sm_sl", "0\n");
  file(p + "lid_mask_count", "0\n");
  file(p + "cap_mask", Hex("0x%08x\n", PortFacts::kCapFlags));
  dir(p + "gids");
  dir(p + "gid_attrs");
  dir(p + "gid_attrs/types");
  dir(p + "gid_attrs/ndevs");
  for (size_t i = 0; i < facts.gids.size(); ++i) {
    const std::string n = std::to_string(i);
    file(p + "gids/" + n, GidSysfsText(facts.gids[i].gid) + "\n");
    file(p + "gid_attrs/types/" + n, "RoCE v2\n");
    file(p + "gid_attrs/ndevs/" + n, facts.gids[i].netdev + "\n");
  }
  dir(p + "pkeys");
  file(p + "pkeys/0", Hex("0x%04x\n", PortFacts::kDefaultPkey));
  // The port counters (port_counters.h), 0 here: `softrnic run` keeps them
  // live (counter_updater.h), `softrnic setup`'s view is static.
  dir(p + "counters");
  dir(p + "hw_counters");
  for (const auto& [name, value] : PortCounterFiles({})) file(p + name, std::to_string(value) + "\n");
  return t;
}

std::string WriteTree(const std::string& root, const std::vector<TreeNode>& nodes) {
  for (const TreeNode& n : nodes) {
    const std::string path = root + "/" + n.path;
    int rc = 0;
    switch (n.kind) {
      case TreeNode::Kind::kDir:
        rc = mkdir(path.c_str(), 0755);
        break;
      case TreeNode::Kind::kSymlink:
        rc = symlink(n.content.c_str(), path.c_str());
        break;
      case TreeNode::Kind::kFile: {
        const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
        if (fd < 0) {
          rc = -1;
          break;
        }
        const ssize_t w = write(fd, n.content.data(), n.content.size());
        const int saved = errno;
        close(fd);
        if (w != static_cast<ssize_t>(n.content.size())) {
          errno = w < 0 ? saved : EIO;
          rc = -1;
        }
        break;
      }
    }
    if (rc != 0) return "cannot create " + path + ": " + std::strerror(errno);
  }
  return "";
}

}  // namespace softrnic::tools
