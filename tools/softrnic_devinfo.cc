// `softrnic devinfo`: the device as a verbs program started here would see
// it, and, with --peer / --peer-pid, which path its packets to a peer take
// and why.
//
// The device is opened the way libibverbs.so.1 opens it (engine::Device::Get,
// the process's device, configured by this environment), and its attributes
// are filled by the verbs library's own code (src/verbs/device_attr.cc,
// compiled into this tool too), so they are what ibv_devinfo -v prints; the
// integration test tools_devinfo compares them field by field. The GID table
// is this process's: the host addresses are the same for every process that
// starts while nothing else owns them, the per-process loopback address is
// this process's own (docs/addressing.md).
//
// The peer's path comes from the code that decides it: the transport stack
// from transport::ChooseTransport (the factory's decision on
// SOFTRNIC_TRANSPORT and SOFTRNIC_FAULTS), the shared-memory verdict from
// the device's own shared-memory transport (Device::ExplainPath, the steps
// of transport/shm_path.h, run without taking a ring of the peer). What the
// tool adds only explains a verdict: whether the address is this host's,
// who holds its UDP port, who publishes it in another network namespace,
// and the source address and interface the kernel routes UDP from.
//
// Exit status: 0; 1 if the device cannot be opened or the peer cannot be
// reached; 2 on usage errors.
#include <arpa/inet.h>
#include <signal.h>
#include <endian.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "common/netns.h"
#include "common/route_source.h"
#include "config/environment.h"
#include "config/variables.h"
#include "engine/device/device.h"
#include "engine/device_identity.h"
#include "engine/engine_config.h"
#include "engine/host_addresses.h"
#include "printable.h"
#include "transport/factory.h"
#include "transport/local_address.h"
#include "transport/shm_path.h"
#include "transport/shm_registry.h"
#include "transport/shm_segment.h"
#include "udp_port_holders.h"
#include "verbs/device_attr.h"

namespace softrnic::tools {
namespace {

using transport::Gid;

void DevinfoUsage(FILE* out) {
  std::fprintf(out,
               "usage: softrnic devinfo [-j] [--peer ADDRESS] [--peer-pid PID]\n"
               "The softrnic device as a verbs program started from here would see it (what\n"
               "ibv_devinfo -v prints over softrnic's libibverbs): identity, port, GID table with\n"
               "the endpoint behind each GID, capabilities, and the transport with the settings\n"
               "that choose it.\n"
               "  --peer ADDRESS   which path packets to ADDRESS take (an IPv4 address or a GID,\n"
               "                   e.g. 10.0.0.2 or ::ffff:10.0.0.2): a shared-memory ring, direct\n"
               "                   one-sided operations on its memory, or UDP from which GID and\n"
               "                   interface, and why (same host? same user? its endpoint link?\n"
               "                   SOFTRNIC_TRANSPORT? another network namespace?)\n"
               "  --peer-pid PID   the peer is softrnic process PID on this host (without --peer:\n"
               "                   the endpoint it publishes, or its UDP address)\n"
               "  -j, --json       JSON instead of text\n"
               "The device is opened in this process, with this environment: it binds UDP\n"
               "(SOFTRNIC_PORT, 4791) on every host address still free, like any softrnic\n"
               "process, for as long as the command runs.\n"
               "Exit status: 0; 1 if the device cannot be opened or the peer cannot be reached;\n"
               "2 on usage errors. See docs/user-guide.md, \"softrnic devinfo\".\n");
}

// ---- formatting -----------------------------------------------------------

std::string Hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// As ibv_devinfo prints a GUID (kept in network order).
std::string Guid(uint64_t be) {
  const uint64_t h = be64toh(be);
  char b[32];
  std::snprintf(b, sizeof b, "%04x:%04x:%04x:%04x", unsigned(h >> 48), unsigned(h >> 32) & 0xffff,
                unsigned(h >> 16) & 0xffff, unsigned(h) & 0xffff);
  return b;
}

std::string Ipv4Text(uint32_t net) {
  char b[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &net, b, sizeof b);
  return b;
}

// Names for the values softrnic reports (the numbers are what is compared).
const char* PortStateName(int v) {
  switch (v) {
    case IBV_PORT_DOWN: return "PORT_DOWN";
    case IBV_PORT_INIT: return "PORT_INIT";
    case IBV_PORT_ARMED: return "PORT_ARMED";
    case IBV_PORT_ACTIVE: return "PORT_ACTIVE";
    default: return "?";
  }
}
std::string WidthName(int v) {
  switch (v) {
    case 1: return "1X";
    case 2: return "4X";
    case 4: return "8X";
    case 8: return "12X";
    case 16: return "2X";
    default: return "?";
  }
}
std::string SpeedName(int v) {
  switch (v) {
    case 1: return "2.5 Gbps";
    case 2: return "5.0 Gbps";
    case 4: case 8: return "10.0 Gbps";
    case 16: return "14.0 Gbps";
    case 32: return "25.0 Gbps";
    case 64: return "50.0 Gbps";
    case 128: return "100.0 Gbps";
    default: return "?";
  }
}
int MtuBytes(int mtu) { return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128 << mtu : 0; }
const char* AtomicCapName(int v) {
  switch (v) {
    case IBV_ATOMIC_NONE: return "ATOMIC_NONE";
    case IBV_ATOMIC_HCA: return "ATOMIC_HCA";
    case IBV_ATOMIC_GLOB: return "ATOMIC_GLOB";
    default: return "?";
  }
}
std::string DeviceCapNames(unsigned flags) {
  static constexpr struct {
    unsigned bit;
    const char* name;
  } kNames[] = {{IBV_DEVICE_RESIZE_MAX_WR, "RESIZE_MAX_WR"},
                {IBV_DEVICE_BAD_PKEY_CNTR, "BAD_PKEY_CNTR"},
                {IBV_DEVICE_BAD_QKEY_CNTR, "BAD_QKEY_CNTR"},
                {IBV_DEVICE_RAW_MULTI, "RAW_MULTI"},
                {IBV_DEVICE_AUTO_PATH_MIG, "AUTO_PATH_MIG"},
                {IBV_DEVICE_CHANGE_PHY_PORT, "CHANGE_PHY_PORT"},
                {IBV_DEVICE_UD_AV_PORT_ENFORCE, "UD_AV_PORT_ENFORCE"},
                {IBV_DEVICE_CURR_QP_STATE_MOD, "CURR_QP_STATE_MOD"},
                {IBV_DEVICE_SHUTDOWN_PORT, "SHUTDOWN_PORT"},
                {IBV_DEVICE_INIT_TYPE, "INIT_TYPE"},
                {IBV_DEVICE_PORT_ACTIVE_EVENT, "PORT_ACTIVE_EVENT"},
                {IBV_DEVICE_SYS_IMAGE_GUID, "SYS_IMAGE_GUID"},
                {IBV_DEVICE_RC_RNR_NAK_GEN, "RC_RNR_NAK_GEN"},
                {IBV_DEVICE_SRQ_RESIZE, "SRQ_RESIZE"},
                {IBV_DEVICE_N_NOTIFY_CQ, "N_NOTIFY_CQ"}};
  std::string s;
  for (const auto& n : kNames)
    if (flags & n.bit) s += (s.empty() ? "" : " ") + std::string(n.name);
  return s;
}

// A JSON document written in order; commas are its business.
class JsonOut {
 public:
  void Open(const char* key, char bracket) {
    Key(key);
    text_ += bracket;
    first_.push_back(true);
  }
  void Close(char bracket) {
    text_ += bracket;
    first_.pop_back();
  }
  void Str(const char* key, const std::string& v) {
    Key(key);
    Quote(v);
  }
  void Num(const char* key, uint64_t v) {
    Key(key);
    text_ += std::to_string(v);
  }
  void Bool(const char* key, bool v) {
    Key(key);
    text_ += v ? "true" : "false";
  }
  const std::string& text() const { return text_; }

 private:
  void Key(const char* key) {
    if (!first_.empty()) {
      if (!first_.back()) text_ += ", ";
      first_.back() = false;
    }
    if (key != nullptr) {
      Quote(key);
      text_ += ": ";
    }
  }
  void Quote(const std::string& s) {
    text_ += '"';
    for (unsigned char c : s) {
      if (c == '"' || c == '\\') {
        text_ += '\\';
        text_ += char(c);
      } else if (c < 0x20 || c >= 0x7f) {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", c);
        text_ += b;
      } else {
        text_ += char(c);
      }
    }
    text_ += '"';
  }
  std::string text_;
  std::vector<bool> first_;
};

// ---- this host, as seen from here ----------------------------------------

// The interface holding IPv4 address `net` in this network namespace, "".
std::string InterfaceOf(uint32_t net) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (const ifaddrs* i = list; i != nullptr && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == net) name = i->ifa_name;
  }
  freeifaddrs(list);
  // 127/8 is routed to lo whole; only 127.0.0.1 is assigned.
  if (name.empty() && (ntohl(net) >> 24) == 127) name = "lo";
  return name;
}

// The source address the kernel routes UDP to `dst` from (a connected
// socket's name; nothing is sent). 0 and *err if there is no route.
// The IPv6 source the kernel routes `dst` from, or false with *err.
bool RouteSource6(const Gid& dst, uint16_t port, Gid* src, int* err) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  std::memcpy(&a.sin6_addr, dst.raw.data(), 16);
  *err = RouteSourceOf(&a);
  if (*err != 0) return false;
  std::memcpy(src->raw.data(), &a.sin6_addr, 16);
  return true;
}

uint32_t RouteSource(uint32_t dst, uint16_t port, int* err) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port ? port : 4791);
  a.sin_addr.s_addr = dst;
  const int rc = RouteSourceOf(&a);
  if (rc != 0) {
    *err = rc;
    return 0;
  }
  return a.sin_addr.s_addr;
}

uint64_t NetnsOfPid(int pid) { return softrnic::NetnsOfPid(pid).ino; }

// The effective uid of `pid` (/proc/<pid>/status), -1 if unknown.
long UidOfPid(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Uid:", 0) == 0) {
      std::istringstream in(line.substr(4));
      long real = -1, effective = -1;
      in >> real >> effective;
      return effective;
    }
  }
  return -1;
}

std::string CommOfPid(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string c;
  std::getline(f, c);
  return Printable(c);
}

// SOFTRNIC_TRANSPORT in `pid`'s environment: "" if unset, nullopt if the
// environment cannot be read (another user's process).
std::optional<std::string> TransportSettingOfPid(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  if (!f) return std::nullopt;
  std::string entry;
  bool any = false;
  while (std::getline(f, entry, '\0')) {
    any = true;
    if (entry.rfind("SOFTRNIC_TRANSPORT=", 0) == 0) return Printable(entry.substr(19));
  }
  if (!any && !f.eof()) return std::nullopt;
  return std::string();
}

// ---- the report ------------------------------------------------------------

struct GidInfo {
  ibv_gid_entry entry{};
  std::string gid;        // text
  std::string address;    // the IPv4 endpoint's address
  uint16_t port = 0;
  std::string interface;  // "" if not found
  std::string kind;       // "host address" / "per-process loopback address"
  bool published = false; // an endpoint link for same-host peers exists
};

struct Setting {
  const char* name;
  std::string value;  // as set, or "" if unset
  std::string effect;
};

struct PeerReport {
  std::string input;
  Gid gid;
  uint16_t port = 0;
  int pid = 0;               // --peer-pid, or the link's owner
  std::string path;          // "shm_ring" | "udp" | "unreachable"
  bool direct = false;       // one-sided operations go direct
  std::string direct_why;
  std::string step;          // ShmPathStepName, or "" when shared memory is off here
  std::vector<std::string> why;
  // UDP: where the packets leave from.
  std::string udp_source, udp_interface;
  int udp_gid_index = -1;
  std::string fix;  // for an unreachable peer
};

struct Options {
  bool json = false;
  std::string peer;
  int peer_pid = 0;
};

bool ParsePeerAddress(const std::string& text, Gid* out) {
  in_addr a4{};
  if (inet_pton(AF_INET, text.c_str(), &a4) == 1) {
    *out = Gid::FromIpv4(a4.s_addr);
    return true;
  }
  in6_addr a6{};
  if (inet_pton(AF_INET6, text.c_str(), &a6) == 1) {
    std::memcpy(out->raw.data(), &a6, 16);
    return true;
  }
  return false;
}

std::vector<GidInfo> DescribeGids(const engine::Device& dev) {
  const uint64_t netns = transport::NetnsInode();
  const auto links = transport::ShmListLinks();
  std::vector<GidInfo> out;
  for (uint32_t i = 0; i < dev.gids().size(); ++i) {
    GidInfo g;
    if (!verbs::FillGidEntry(dev, 1, i, &g.entry)) break;
    Gid gid;
    std::memcpy(gid.raw.data(), g.entry.gid.raw, 16);
    g.gid = gid.ToString();
    g.port = dev.udp_port();
    if (!gid.IsV4Mapped()) {
      g.address = gid.ToString();
      for (const transport::LocalAddress& a : transport::HostAddresses())
        if (a.gid == gid) g.interface = a.ifname;
      g.kind = transport::IsIpv6LinkLocal(gid)
                   ? "a link-local IPv6 address of the host (this process owns it at this port: "
                     "peers on that link reach it)"
                   : "a host IPv6 address (this process owns it at this port: remote peers reach it)";
    } else {
      const uint32_t ip = gid.Ipv4();
      g.address = Ipv4Text(ip);
      g.interface = InterfaceOf(ip);
      g.kind = (ntohl(ip) >> 24) == 127
                   ? "this process's own loopback address (every softrnic process gets one: "
                     "same-host peers always reach it)"
                   : "a host address (this process owns it at this port: remote peers reach it)";
      for (const auto& l : links)
        if (l.netns == netns && l.ip == ip && l.port == g.port && l.pid == uint32_t(getpid()))
          g.published = true;
    }
    out.push_back(g);
  }
  return out;
}

std::vector<Setting> DescribeSettings(const config::Environment& env, const engine::EngineConfig& cfg) {
  auto raw = [&](const char* name) -> std::string {
    const char* v = env.Raw(name);
    return v ? Printable(v) : "";
  };
  auto dflt = [](const char* name) {
    const config::Variable* v = config::FindVariable(name);
    return v ? std::string(v->default_value) : std::string();
  };
  std::vector<Setting> s;
  s.push_back({"SOFTRNIC_TRANSPORT", raw("SOFTRNIC_TRANSPORT"),
               std::string("mode ") + transport::TransportModeName(cfg.transport_mode) +
                   (env.Raw("SOFTRNIC_TRANSPORT") ? "" : " (default " + dflt("SOFTRNIC_TRANSPORT") + ")")});
  s.push_back({"SOFTRNIC_FAULTS", raw("SOFTRNIC_FAULTS"),
               cfg.udp.faults.enabled() ? "fault injection on: UDP only" : "no fault injection"});
  s.push_back({"SOFTRNIC_SHM_DIRECT", raw("SOFTRNIC_SHM_DIRECT"),
               cfg.shm_direct ? "direct one-sided operations on same-host peers' memory"
                              : "no direct operations: one-sided operations go through the rings"});
  std::string binds;
  for (const auto& b : cfg.udp.bind_addresses) binds += (binds.empty() ? "" : ",") + b;
  s.push_back({"SOFTRNIC_BIND", raw("SOFTRNIC_BIND"),
               binds.empty() ? "automatic: every host IPv4 address whose port is free, then a "
                               "per-process 127.a.b.c, then every host IPv6 address whose port "
                               "is free"
                             : "exactly " + binds});
  s.push_back({"SOFTRNIC_PORT", raw("SOFTRNIC_PORT"), "UDP port " + std::to_string(cfg.udp.port)});
  s.push_back({"SOFTRNIC_MTU", raw("SOFTRNIC_MTU"),
               cfg.mtu ? "active_mtu " + std::to_string(MtuBytes(static_cast<int>(*cfg.mtu)))
                       : "automatic: the largest whose packets fit the smallest MTU of the "
                         "interfaces with an address (the port's active_mtu above)"});
  return s;
}

// Which path packets of `dev` to the peer take, and why (see the top).
PeerReport ExplainPeer(engine::Device& dev, const engine::EngineConfig& cfg, const Options& o,
                       const Gid& gid) {
  PeerReport r;
  r.input = o.peer;
  r.gid = gid;
  r.port = dev.udp_port();
  r.pid = o.peer_pid;
  const uint64_t our_netns = transport::NetnsInode();
  const transport::TransportChoice choice = transport::ChooseTransport(cfg.transport_mode,
                                                                       cfg.udp.faults.enabled());
  r.why.push_back(std::string("here: ") + choice.reason);
  const std::string where = Printable(gid.ToString()) + " port " + std::to_string(r.port);

  if (!gid.IsV4Mapped()) {
    // IPv6 (issue 15): UDP only, from the GID whose address the kernel
    // routes the peer from (what rdma_cm picks, src/rdmacm/cma.cc).
    const bool host6 = engine::IsHostAddress(gid);
    if (choice.shared_memory) {
      r.step = transport::ShmPathStepName(transport::ShmPathStep::kNotIpv4);
      r.why.push_back(std::string("shared memory: ") +
                      transport::ShmPathStepText(transport::ShmPathStep::kNotIpv4) +
                      " (same-host peers meet through their 127.x GIDs; rdma_cm maps a same-host "
                      "IPv6 address to them)");
    }
    r.why.push_back(where + (host6 ? " is an address of this host in this network namespace"
                                   : " is not an address of this host in this network namespace"));
    Gid src;
    int err = 0;
    if (!RouteSource6(gid, r.port, &src, &err)) {
      r.path = "unreachable";
      r.why.push_back("no route to " + gid.ToString() + " from this network namespace: " +
                      std::strerror(err));
      r.fix = "add a route or an address on the peer's network (`ip -6 route get " + gid.ToString() + "`)";
      return r;
    }
    r.udp_source = src.ToString();
    r.udp_interface = host6 ? "lo" : "";
    for (const transport::LocalAddress& a : transport::HostAddresses())
      if (a.gid == src && !host6) r.udp_interface = a.ifname;
    const auto gids = dev.gids();
    for (size_t i = 0; i < gids.size() && r.udp_gid_index < 0; ++i)
      if (gids[i] == src) r.udp_gid_index = int(i);
    if (r.udp_gid_index < 0) {
      r.path = "unreachable";
      r.why.push_back("the kernel routes " + gid.ToString() + " from " + r.udp_source +
                      ", but no GID of this device has that address: another softrnic process owns [" +
                      r.udp_source + "]:" + std::to_string(r.port) + " (rdma_cm fails with EADDRNOTAVAIL)");
      r.fix = "stop the process owning [" + r.udp_source + "]:" + std::to_string(r.port) +
              ", or give this one an address of its own with SOFTRNIC_BIND";
      return r;
    }
    r.path = "udp";
    r.why.push_back("UDP from GID[" + std::to_string(r.udp_gid_index) + "] " + r.udp_source +
                    " (the source the kernel routes " + gid.ToString() + " from), leaving through " +
                    (r.udp_interface.empty() ? "?" : r.udp_interface));
    return r;
  }
  const uint32_t ip = gid.Ipv4();
  const bool host = engine::IsHostAddress(gid);
  // What explains the verdict, listed after it.
  std::vector<std::string> facts;
  facts.push_back(Ipv4Text(ip) + (host ? " is an address of this host in this network namespace"
                                       : " is not an address of this host in this network namespace "
                                         "(a remote host, or another network namespace)"));

  // A host NIC address (docs/host-nic.md): shared by the user's processes
  // here, each reached by the lane of the QPN a QP sends to.
  std::vector<std::string> sharers;
  for (const auto& l : transport::ShmListLinks()) {
    if (l.ip != ip || l.port != r.port || l.netns != our_netns || l.lane < 0) continue;
    if (l.pid == 0 || (kill(pid_t(l.pid), 0) != 0 && errno == ESRCH)) continue;  // stale
    sharers.push_back("pid " + std::to_string(l.pid) + " (" + CommOfPid(int(l.pid)) + ", lane " +
                      std::to_string(l.lane) + ")");
  }
  if (!sharers.empty()) {
    std::string list;
    for (const std::string& s : sharers) list += (list.empty() ? "" : ", ") + s;
    facts.push_back(Ipv4Text(ip) + ":" + std::to_string(r.port) +
                    " is a host NIC address shared by softrnic processes of this user (" + list +
                    "): a QP sending there reaches the process of its destination QPN's lane, "
                    "through shared memory (docs/host-nic.md)");
  }
  // Who publishes it elsewhere: a same-user process in another namespace.
  for (const auto& l : transport::ShmListLinks()) {
    if (l.ip != ip || l.port != r.port || l.netns == our_netns) continue;
    if (l.pid == 0 || (kill(pid_t(l.pid), 0) != 0 && errno == ESRCH)) continue;  // stale
    facts.push_back("a softrnic process of this user (pid " + std::to_string(l.pid) + ", " +
                    CommOfPid(int(l.pid)) + ") publishes " + Ipv4Text(ip) + ":" + std::to_string(l.port) +
                    " in another network namespace (net:[" + std::to_string(l.netns) +
                    "]; this process is in net:[" + std::to_string(our_netns) +
                    "]): different namespaces are different hosts to softrnic, reached over UDP");
  }
  if (o.peer_pid > 0) {
    const uint64_t ns = NetnsOfPid(o.peer_pid);
    const long uid = UidOfPid(o.peer_pid);
    if (uid < 0) {
      facts.push_back("pid " + std::to_string(o.peer_pid) + " does not exist");
    } else {
      facts.push_back("pid " + std::to_string(o.peer_pid) + " (" + CommOfPid(o.peer_pid) + ") runs as " +
                      DescribeUid(uid_t(uid)) +
                      (uid_t(uid) == geteuid() ? ", the same user as this process"
                                              : ", another user than this process (" +
                                                    DescribeUid(geteuid()) +
                                                    "): shared memory is used between processes of one "
                                                    "user only"));
      if (ns != 0)
        facts.push_back(std::string("pid ") + std::to_string(o.peer_pid) +
                        (ns == our_netns ? " is in this network namespace"
                                         : " is in another network namespace (net:[" + std::to_string(ns) +
                                               "]; this process: net:[" + std::to_string(our_netns) + "])"));
      if (const auto t = TransportSettingOfPid(o.peer_pid)) {
        if (*t == "udp")
          facts.push_back("pid " + std::to_string(o.peer_pid) +
                          " runs with SOFTRNIC_TRANSPORT=udp: it publishes no endpoint for shared memory");
        else
          facts.push_back("pid " + std::to_string(o.peer_pid) + " runs with SOFTRNIC_TRANSPORT=" +
                          (t->empty() ? "auto (unset)" : *t));
      }
    }
  }
  // Who receives UDP at that address and port here (same-host addresses).
  bool held = false;
  if (host) {
    for (const UdpHolder& h : UdpPortHolders(r.port)) {
      if (h.ipv6 || (h.address != Ipv4Text(ip) && !h.wildcard)) continue;
      if (h.pid == getpid()) continue;  // this devinfo process's own device
      held = true;
      std::string who = h.address + ":" + std::to_string(r.port) + " is held by " + DescribeUid(h.uid);
      if (h.pid) who += ", pid " + std::to_string(h.pid) + " (" + Printable(h.comm) + ")";
      who += h.softrnic_claim ? ", a softrnic device" : "";
      if (h.uid != geteuid()) who += ": another user than this process, so UDP, never shared memory";
      if (std::find(facts.begin(), facts.end(), who) == facts.end()) facts.push_back(who);
      if (r.pid == 0 && h.pid) r.pid = h.pid;
    }
  }

  // The transport's own verdict.
  bool shm = false;
  if (choice.shared_memory) {
    const std::optional<transport::ShmPathVerdict> v = dev.ExplainPath(gid);
    if (!v) {
      r.why.push_back("the shared-memory transport could not be created in this process "
                      "(`softrnic doctor`, check shared-memory, says why): UDP only");
    } else {
      r.step = transport::ShmPathStepName(v->step);
      std::string text = std::string("shared memory: ") + transport::ShmPathStepText(v->step);
      if (v->pid) text += "; endpoint link owner pid " + std::to_string(v->pid) + " (" + CommOfPid(int(v->pid)) + ")";
      if (!v->detail.empty() && v->step != transport::ShmPathStep::kNotPublished)
        text += " (" + Printable(v->detail) + ")";
      if (!v->link.empty()) text += "; link " + Printable(v->link);
      r.why.push_back(text);
      if (v->pid && r.pid == 0) r.pid = int(v->pid);
      if (v->step == transport::ShmPathStep::kShared) {
        shm = true;
        if (o.peer_pid > 0 && uint32_t(o.peer_pid) != v->pid)
          r.why.push_back("note: " + where + " belongs to pid " + std::to_string(v->pid) + ", not to pid " +
                          std::to_string(o.peer_pid));
        r.direct = dev.direct_operations();
        r.direct_why = r.direct
                           ? "RC RDMA WRITE, READ and atomics to a QP and memory region the peer exports "
                             "(it exports " + std::to_string(v->exported_qps) + " QP(s) and " +
                                 std::to_string(v->exported_mrs) +
                                 " region(s) now) run directly on its memory; SEND, WRITE with "
                                 "immediate, responses and the rest go through its ring"
                           : "SOFTRNIC_SHM_DIRECT=0 here: one-sided operations go through the ring too";
      } else if (v->step == transport::ShmPathStep::kOwnDevice) {
        r.why.push_back(Ipv4Text(ip) + ":" + std::to_string(r.port) +
                        " is this devinfo process's own endpoint: no other softrnic process of this user "
                        "in this network namespace owns it");
      }
    }
  }
  r.why.insert(r.why.end(), facts.begin(), facts.end());
  if (shm) {
    r.path = "shm_ring";
    return r;
  }

  // UDP: the source address the kernel routes from, and the GID that has it.
  r.path = "udp";
  int err = 0;
  const uint32_t src = RouteSource(ip, r.port, &err);
  if (src == 0) {
    r.path = "unreachable";
    r.why.push_back("no route to " + Ipv4Text(ip) + " from this network namespace: " + std::strerror(err));
    r.fix = "add a route or an address on the peer's network (`ip route get " + Ipv4Text(ip) + "`)";
    return r;
  }
  r.udp_source = Ipv4Text(src);
  // The kernel delivers to its own addresses through the loopback device.
  r.udp_interface = host ? "lo" : InterfaceOf(src);
  // The GID rdma_cm sends from (src/rdmacm/cma.cc, rdma_resolve_addr): the
  // per-process loopback one for a same-host address, else the one whose
  // address the kernel routes from.
  const auto gids = dev.gids();
  for (size_t i = 0; i < gids.size() && r.udp_gid_index < 0; ++i) {
    if (!gids[i].IsV4Mapped()) continue;
    if (host ? (ntohl(gids[i].Ipv4()) >> 24) == 127 : gids[i].Ipv4() == src) r.udp_gid_index = int(i);
  }
  if (r.udp_gid_index < 0) {
    r.path = "unreachable";
    r.why.push_back("the kernel routes " + Ipv4Text(ip) + " from " + r.udp_source + " (" + r.udp_interface +
                    "), but no GID of this device has that address: another softrnic process owns " +
                    r.udp_source + ":" + std::to_string(r.port) + " (rdma_cm fails with EADDRNOTAVAIL)");
    r.fix = "stop the process owning " + r.udp_source + ":" + std::to_string(r.port) +
            " (`softrnic stat` lists them), or give this one an address of its own with SOFTRNIC_BIND";
    return r;
  }
  if (host && !held) {
    r.path = "unreachable";
    r.why.push_back("nothing in this network namespace receives UDP at " + Ipv4Text(ip) + ":" +
                    std::to_string(r.port) + ": no softrnic device owns it");
    r.fix = "start the peer first (its GIDs: `softrnic devinfo` in its environment), and use one of its GIDs";
    return r;
  }
  // The socket is bound to the GID's address: that is the source.
  r.udp_source = Ipv4Text(gids[size_t(r.udp_gid_index)].Ipv4());
  r.why.push_back("UDP from GID[" + std::to_string(r.udp_gid_index) + "] " +
                  Printable(gids[size_t(r.udp_gid_index)].ToString()) + " (the address rdma_cm picks: " +
                  (host ? "the per-process loopback one for a same-host peer"
                        : "the source the kernel routes " + Ipv4Text(ip) + " from") +
                  "), leaving through " + (r.udp_interface.empty() ? "?" : r.udp_interface));
  return r;
}

// ---- output ----------------------------------------------------------------

struct Report {
  std::string name, dev_name;
  ibv_device_attr attr{};
  ibv_port_attr port{};
  uint32_t max_inline_data = 0;
  std::vector<GidInfo> gids;
  transport::TransportChoice choice;
  bool shared_memory_here = false;
  bool direct = false;
  std::vector<Setting> settings;
  std::optional<PeerReport> peer;
};

void PrintText(const Report& r) {
  const ibv_device_attr& a = r.attr;
  const ibv_port_attr& p = r.port;
  auto row = [](const char* k, const std::string& v) { std::printf("  %-22s %s\n", k, v.c_str()); };
  std::printf("%s (%s): RoCE v2 over UDP, as a verbs program started here sees it\n", r.name.c_str(),
              r.dev_name.c_str());
  row("node_guid", Guid(a.node_guid));
  row("sys_image_guid", Guid(a.sys_image_guid));
  row("vendor_id", Hex(a.vendor_id) + " (softrnic's, a locally administered OUI)");
  row("vendor_part_id", std::to_string(a.vendor_part_id));
  row("hw_ver", Hex(a.hw_ver));
  row("fw_ver", a.fw_ver);
  row("node_type", "CA, transport InfiniBand (0), link layer Ethernet");
  row("phys_port_cnt", std::to_string(a.phys_port_cnt));
  std::printf("port 1\n");
  row("state", std::string(PortStateName(p.state)) + " (" + std::to_string(p.state) + ")");
  row("phys_state", std::string(p.phys_state == 5 ? "LINK_UP" : "?") + " (" + std::to_string(p.phys_state) + ")");
  row("max_mtu", std::to_string(MtuBytes(p.max_mtu)) + " (" + std::to_string(p.max_mtu) + ")");
  row("active_mtu", std::to_string(MtuBytes(p.active_mtu)) + " (" + std::to_string(p.active_mtu) + ")");
  row("link_layer", "Ethernet");
  row("max_msg_sz", Hex(p.max_msg_sz));
  row("port_cap_flags", Hex(p.port_cap_flags));
  row("active_width", WidthName(p.active_width) + " (" + std::to_string(p.active_width) + ")");
  row("active_speed", SpeedName(p.active_speed) + " (" + std::to_string(p.active_speed) + "), nominal: "
                          "software has no lanes");
  row("gid_tbl_len", std::to_string(p.gid_tbl_len));
  row("pkey_tbl_len", std::to_string(p.pkey_tbl_len));
  std::printf("GID table (GID index = local UDP endpoint)\n");
  for (const GidInfo& g : r.gids) {
    const bool v6 = g.address.find(':') != std::string::npos;  // "[fd77::1]:4791"
    std::printf("  GID[%3u] %-22s RoCE v2, UDP %s%s%s:%u on %s\n", g.entry.gid_index, g.gid.c_str(),
                v6 ? "[" : "", g.address.c_str(), v6 ? "]" : "", unsigned(g.port),
                g.interface.empty() ? "?" : g.interface.c_str());
    std::printf("           %s%s\n", g.kind.c_str(),
                g.published ? "; published for same-host peers (shared memory)" : "");
  }
  std::printf("capabilities\n");
  row("max_qp", std::to_string(a.max_qp));
  row("max_qp_wr", std::to_string(a.max_qp_wr));
  row("max_cq", std::to_string(a.max_cq));
  row("max_cqe", std::to_string(a.max_cqe));
  row("max_mr", std::to_string(a.max_mr));
  row("max_mr_size", Hex(a.max_mr_size));
  row("max_pd", std::to_string(a.max_pd));
  row("max_sge", std::to_string(a.max_sge));
  row("max_sge_rd", std::to_string(a.max_sge_rd));
  row("max_srq", std::to_string(a.max_srq));
  row("max_srq_wr", std::to_string(a.max_srq_wr));
  row("max_srq_sge", std::to_string(a.max_srq_sge));
  row("max_ah", std::to_string(a.max_ah));
  row("max_qp_rd_atom", std::to_string(a.max_qp_rd_atom));
  row("max_qp_init_rd_atom", std::to_string(a.max_qp_init_rd_atom));
  row("max_res_rd_atom", std::to_string(a.max_res_rd_atom));
  row("atomic_cap", std::string(AtomicCapName(a.atomic_cap)) + " (" + std::to_string(a.atomic_cap) + ")");
  row("max_msg_sz", std::to_string(p.max_msg_sz));
  row("max_inline_data", std::to_string(r.max_inline_data));
  row("max_pkeys", std::to_string(a.max_pkeys));
  row("local_ca_ack_delay", std::to_string(a.local_ca_ack_delay));
  row("page_size_cap", Hex(a.page_size_cap));
  row("device_cap_flags", Hex(a.device_cap_flags) + " " + DeviceCapNames(a.device_cap_flags));
  std::printf("transport\n");
  row("path", r.choice.shared_memory ? (r.shared_memory_here ? "shared memory to same-host peers, UDP to others"
                                                             : "UDP only (the shared-memory transport "
                                                               "could not be created: `softrnic doctor`)")
                                     : "UDP only");
  row("why", r.choice.reason);
  row("direct operations", r.direct ? "on" : "off");
  for (const Setting& s : r.settings)
    row(s.name, (s.value.empty() ? std::string("unset") : s.value) + ": " + s.effect);
  if (!r.peer) return;
  const PeerReport& pr = *r.peer;
  std::printf("peer %s\n", Printable(pr.input).c_str());
  row("gid", pr.gid.ToString() + ", UDP port " + std::to_string(pr.port));
  if (pr.pid) row("pid", std::to_string(pr.pid) + " (" + CommOfPid(pr.pid) + ")");
  std::string path;
  if (pr.path == "shm_ring")
    path = pr.direct ? "shared memory: direct one-sided operations on its memory, the rest through its ring"
                     : "shared memory: its ring";
  else if (pr.path == "udp")
    path = "UDP from GID[" + std::to_string(pr.udp_gid_index) + "] " + pr.udp_source + " through " +
           pr.udp_interface;
  else
    path = "unreachable";
  row("path", path);
  if (pr.path == "shm_ring") row("direct", pr.direct_why);
  for (const std::string& w : pr.why) std::printf("  because %s\n", w.c_str());
  if (!pr.fix.empty()) std::printf("  fix: %s\n", pr.fix.c_str());
}

void PrintJson(const Report& r) {
  JsonOut j;
  const ibv_device_attr& a = r.attr;
  const ibv_port_attr& p = r.port;
  j.Open(nullptr, '{');
  j.Str("name", r.name);
  j.Str("dev_name", r.dev_name);
  j.Open("device", '{');
  j.Str("transport", "InfiniBand");
  j.Str("fw_ver", a.fw_ver);
  j.Str("node_guid", Guid(a.node_guid));
  j.Str("sys_image_guid", Guid(a.sys_image_guid));
  const std::pair<const char*, uint64_t> nums[] = {
      {"vendor_id", a.vendor_id}, {"vendor_part_id", a.vendor_part_id}, {"hw_ver", a.hw_ver},
      {"phys_port_cnt", a.phys_port_cnt}, {"max_mr_size", a.max_mr_size}, {"page_size_cap", a.page_size_cap},
      {"max_qp", uint64_t(a.max_qp)}, {"max_qp_wr", uint64_t(a.max_qp_wr)},
      {"device_cap_flags", a.device_cap_flags}, {"max_sge", uint64_t(a.max_sge)},
      {"max_sge_rd", uint64_t(a.max_sge_rd)}, {"max_cq", uint64_t(a.max_cq)}, {"max_cqe", uint64_t(a.max_cqe)},
      {"max_mr", uint64_t(a.max_mr)}, {"max_pd", uint64_t(a.max_pd)},
      {"max_qp_rd_atom", uint64_t(a.max_qp_rd_atom)}, {"max_ee_rd_atom", uint64_t(a.max_ee_rd_atom)},
      {"max_res_rd_atom", uint64_t(a.max_res_rd_atom)}, {"max_qp_init_rd_atom", uint64_t(a.max_qp_init_rd_atom)},
      {"max_ee_init_rd_atom", uint64_t(a.max_ee_init_rd_atom)}, {"atomic_cap", uint64_t(a.atomic_cap)},
      {"max_ee", uint64_t(a.max_ee)}, {"max_rdd", uint64_t(a.max_rdd)}, {"max_mw", uint64_t(a.max_mw)},
      {"max_raw_ipv6_qp", uint64_t(a.max_raw_ipv6_qp)}, {"max_raw_ethy_qp", uint64_t(a.max_raw_ethy_qp)},
      {"max_mcast_grp", uint64_t(a.max_mcast_grp)}, {"max_mcast_qp_attach", uint64_t(a.max_mcast_qp_attach)},
      {"max_total_mcast_qp_attach", uint64_t(a.max_total_mcast_qp_attach)}, {"max_ah", uint64_t(a.max_ah)},
      {"max_fmr", uint64_t(a.max_fmr)}, {"max_srq", uint64_t(a.max_srq)}, {"max_srq_wr", uint64_t(a.max_srq_wr)},
      {"max_srq_sge", uint64_t(a.max_srq_sge)}, {"max_pkeys", a.max_pkeys},
      {"local_ca_ack_delay", a.local_ca_ack_delay}, {"max_inline_data", r.max_inline_data}};
  for (const auto& [k, v] : nums) j.Num(k, v);
  j.Str("atomic_cap_name", AtomicCapName(a.atomic_cap));
  j.Close('}');
  j.Open("port", '{');
  const std::pair<const char*, uint64_t> pnums[] = {
      {"port", 1}, {"state", p.state}, {"max_mtu", p.max_mtu}, {"active_mtu", p.active_mtu},
      {"sm_lid", p.sm_lid}, {"port_lid", p.lid}, {"port_lmc", p.lmc}, {"max_msg_sz", p.max_msg_sz},
      {"port_cap_flags", p.port_cap_flags}, {"port_cap_flags2", p.port_cap_flags2}, {"max_vl_num", p.max_vl_num},
      {"bad_pkey_cntr", p.bad_pkey_cntr}, {"qkey_viol_cntr", p.qkey_viol_cntr}, {"sm_sl", p.sm_sl},
      {"pkey_tbl_len", p.pkey_tbl_len}, {"gid_tbl_len", uint64_t(p.gid_tbl_len)},
      {"subnet_timeout", p.subnet_timeout}, {"init_type_reply", p.init_type_reply},
      {"active_width", p.active_width}, {"active_speed", p.active_speed}, {"phys_state", p.phys_state}};
  for (const auto& [k, v] : pnums) j.Num(k, v);
  j.Str("state_name", PortStateName(p.state));
  j.Str("link_layer", p.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
  j.Num("max_mtu_bytes", uint64_t(MtuBytes(p.max_mtu)));
  j.Num("active_mtu_bytes", uint64_t(MtuBytes(p.active_mtu)));
  j.Close('}');
  j.Open("gids", '[');
  for (const GidInfo& g : r.gids) {
    j.Open(nullptr, '{');
    j.Num("index", g.entry.gid_index);
    j.Str("gid", g.gid);
    j.Str("type", g.entry.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "other");
    j.Str("address", g.address);
    j.Num("udp_port", g.port);
    j.Str("interface", g.interface);
    j.Str("endpoint", g.kind);
    j.Bool("loopback", !g.address.empty() && g.address.rfind("127.", 0) == 0);
    j.Bool("published_for_shm", g.published);
    j.Close('}');
  }
  j.Close(']');
  j.Open("transport", '{');
  j.Bool("shared_memory", r.choice.shared_memory && r.shared_memory_here);
  j.Bool("fault_injection", r.choice.faults);
  j.Bool("direct_operations", r.direct);
  j.Str("why", r.choice.reason);
  j.Open("settings", '{');
  for (const Setting& s : r.settings) {
    j.Open(s.name, '{');
    j.Bool("set", !s.value.empty());
    j.Str("value", s.value);
    j.Str("effect", s.effect);
    j.Close('}');
  }
  j.Close('}');
  j.Close('}');
  if (r.peer) {
    const PeerReport& pr = *r.peer;
    j.Open("peer", '{');
    j.Str("input", pr.input);
    j.Str("gid", pr.gid.ToString());
    j.Num("udp_port", pr.port);
    j.Num("pid", uint64_t(pr.pid));
    j.Str("path", pr.path);
    j.Bool("direct", pr.direct);
    j.Str("direct_why", pr.direct_why);
    j.Str("shm_step", pr.step);
    j.Open("why", '[');
    for (const std::string& w : pr.why) j.Str(nullptr, w);
    j.Close(']');
    j.Open("udp", '{');
    j.Str("source", pr.udp_source);
    j.Str("interface", pr.udp_interface);
    j.Num("gid_index", uint64_t(pr.udp_gid_index < 0 ? 0 : pr.udp_gid_index));
    j.Bool("has_gid", pr.udp_gid_index >= 0);
    j.Close('}');
    j.Str("fix", pr.fix);
    j.Close('}');
  }
  j.Close('}');
  std::printf("%s\n", j.text().c_str());
}

// --peer-pid without --peer: the endpoint the process publishes in this
// namespace, else its UDP address here. False if there is none.
bool AddressOfPid(int pid, uint16_t port, std::string* out) {
  const uint64_t netns = transport::NetnsInode();
  for (const auto& l : transport::ShmListLinks()) {
    if (l.pid == uint32_t(pid) && l.netns == netns && l.port == port) {
      *out = Ipv4Text(l.ip);
      return true;
    }
  }
  for (const UdpHolder& h : UdpPortHolders(port)) {
    if (h.pid == pid && !h.ipv6 && !h.wildcard) {
      *out = h.address;
      return true;
    }
  }
  return false;
}

}  // namespace

// argv[0] is "devinfo" (main in softrnic.cc dispatches here).
int DevinfoMain(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      DevinfoUsage(stdout);
      return 0;
    }
    if (a == "-j" || a == "--json") {
      o.json = true;
    } else if ((a == "--peer" || a == "--peer-pid") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "--peer") {
        o.peer = v;
      } else {
        char* end = nullptr;
        const long pid = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || pid <= 0 || pid > 0x3fffff) {
          std::fprintf(stderr, "softrnic devinfo: --peer-pid '%s' is not a process id\n", Printable(v).c_str());
          return 2;
        }
        o.peer_pid = int(pid);
      }
    } else {
      std::fprintf(stderr, "softrnic devinfo: %s '%s'\n",
                   a == "--peer" || a == "--peer-pid" ? "missing value for" : "unknown argument",
                   Printable(a).c_str());
      DevinfoUsage(stderr);
      return 2;
    }
  }
  Gid peer_gid;
  if (!o.peer.empty() && !ParsePeerAddress(o.peer, &peer_gid)) {
    std::fprintf(stderr,
                 "softrnic devinfo: --peer '%s' is not an IPv4 address or a GID (e.g. 10.0.0.2 or "
                 "::ffff:10.0.0.2)\n",
                 Printable(o.peer).c_str());
    return 2;
  }

  // The settings exactly as Device::Get reads them.
  const config::Environment env = config::Environment::FromProcess();
  engine::EngineConfig cfg;
  std::string error;
  if (!engine::EngineConfig::FromEnvironment(env, &cfg, &error)) {
    std::fprintf(stderr, "softrnic devinfo: %s\nfix: set SOFTRNIC_TRANSPORT to auto, udp or shm, or unset it\n",
                 error.c_str());
    return 1;
  }
  std::shared_ptr<engine::Device> dev = engine::Device::Get(&error);
  if (!dev) {
    std::fprintf(stderr,
                 "softrnic devinfo: the device cannot be opened here: %s\n"
                 "fix: `softrnic doctor` checks UDP %u, shared memory and the libraries and says what "
                 "to change (SOFTRNIC_BIND must name addresses of this host; SOFTRNIC_PORT or "
                 "SOFTRNIC_BIND when the port is taken)\n",
                 error.c_str(), unsigned(cfg.udp.port));
    return 1;
  }

  if (o.peer.empty() && o.peer_pid > 0) {
    if (!AddressOfPid(o.peer_pid, dev->udp_port(), &o.peer)) {
      std::fprintf(stderr,
                   "softrnic devinfo: pid %d publishes no softrnic endpoint in this network namespace and "
                   "holds no UDP %u socket visible here (%s)\n"
                   "fix: check that pid %d is a running softrnic process of this host's network namespace "
                   "(`softrnic stat` lists them), or give its address with --peer\n",
                   o.peer_pid, unsigned(dev->udp_port()),
                   UidOfPid(o.peer_pid) < 0 ? "no such process"
                   : NetnsOfPid(o.peer_pid) != 0 && NetnsOfPid(o.peer_pid) != transport::NetnsInode()
                       ? "it is in another network namespace"
                       : "not a softrnic device, or it uses another SOFTRNIC_PORT",
                   o.peer_pid);
      return 1;
    }
    ParsePeerAddress(o.peer, &peer_gid);
  }

  Report r;
  r.name = engine::kDeviceName;
  r.dev_name = engine::kUverbsName;
  verbs::FillDeviceAttr(dev->attr(), &r.attr);
  verbs::FillPortAttr(*dev, &r.port);
  r.max_inline_data = dev->attr().max_inline_data;
  r.gids = DescribeGids(*dev);
  r.choice = transport::ChooseTransport(cfg.transport_mode, cfg.udp.faults.enabled());
  r.shared_memory_here = dev->shared_memory();
  r.direct = dev->direct_operations();
  r.settings = DescribeSettings(env, cfg);
  if (!o.peer.empty()) r.peer = ExplainPeer(*dev, cfg, o, peer_gid);

  if (o.json)
    PrintJson(r);
  else
    PrintText(r);
  std::fflush(stdout);
  return r.peer && r.peer->path == "unreachable" ? 1 : 0;
}

}  // namespace softrnic::tools
