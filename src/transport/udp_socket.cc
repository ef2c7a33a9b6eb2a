// Socket setup of the UDP transport (udp_socket.h).
#include "transport/udp_socket.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/secure_random.h"
#include "transport/endpoint_claim.h"
#include "transport/udp_transport.h"
#include "wire/opcode.h"

namespace softrnic::transport {

uint32_t PerProcessLoopbackAddress(uint32_t pid, uint32_t attempt) {
  const uint32_t a = 1 + ((pid >> 16) + 66 * attempt) % 254;  // 1..254: never 127.0.x.x
  const uint32_t b = (pid >> 8) & 0xff;
  const uint32_t c = pid & 0xff;
  return (127u << 24) | (a << 16) | (b << 8) | c;
}

std::vector<uint32_t> HostIpv4Addresses() {
  std::vector<uint32_t> result;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return result;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) continue;
    if (!(ifa->ifa_flags & IFF_UP) || (ifa->ifa_flags & IFF_LOOPBACK)) continue;
    sockaddr_in sin;
    std::memcpy(&sin, ifa->ifa_addr, sizeof(sin));
    const uint32_t addr = sin.sin_addr.s_addr;
    if ((ntohl(addr) >> 24) == 127 || addr == 0) continue;
    if (std::find(result.begin(), result.end(), addr) == result.end()) result.push_back(addr);
  }
  freeifaddrs(list);
  return result;
}

namespace {

constexpr int kSocketBufferBytes = 4 << 20;  // SO_SNDBUF / SO_RCVBUF
// RC responses (IBA 9.2: RDMA READ response first .. atomic acknowledge),
// steered to an endpoint's reply socket.
constexpr uint8_t kFirstRcResponseOpcode = wire::op::kRcReadResponseFirst;
constexpr uint8_t kLastRcResponseOpcode = wire::op::kRcAtomicAck;
constexpr uint32_t kMaxLoopbackAttempts = 16;        // derived from the pid
constexpr uint32_t kMaxRandomLoopbackAttempts = 64;  // then unpredictable ones

// 127.a.b.c with a in 1..254 (never 127.0.x.x, never 127.255.255.255), from
// the kernel CSPRNG.
uint32_t RandomLoopbackAddress() {
  const uint32_t a = 1 + SecureRandomBelow(254);
  return (127u << 24) | (a << 16) | (SecureRandom32() & 0xffffu);
}

// Coalesced receive (UDP_GRO, Linux >= 5.0).
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

std::string Ipv4Text(uint32_t addr_network_order) {
  char text[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = addr_network_order;
  inet_ntop(AF_INET, &a, text, sizeof(text));
  return text;
}

void SetBuffer(int fd, int force_option, int option) {
  const int bytes = kSocketBufferBytes;
  // The *FORCE variants exceed net.core.[rw]mem_max but need CAP_NET_ADMIN;
  // without it the plain option is silently capped at the sysctl limit.
  if (setsockopt(fd, SOL_SOCKET, force_option, &bytes, sizeof(bytes)) == 0) return;
  (void)setsockopt(fd, SOL_SOCKET, option, &bytes, sizeof(bytes));
}

// Opens and binds one socket. Returns 0 or the errno of the failing call, and
// a message in *error.
int OpenSocket(uint32_t addr_network_order, uint16_t port, bool gro, bool reuseport,
               LocalSocket* out, std::string* error) {
  const std::string where = Ipv4Text(addr_network_order) + ":" + std::to_string(port);
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    *error = "socket(): " + std::string(std::strerror(err));
    return err;
  }
  const int pmtu = IP_PMTUDISC_DO;
  if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0) {
    const int err = errno;
    *error = "IP_MTU_DISCOVER on " + where + ": " + std::strerror(err);
    close(fd);
    return err;
  }
  SetBuffer(fd, SO_RCVBUFFORCE, SO_RCVBUF);
  SetBuffer(fd, SO_SNDBUFFORCE, SO_SNDBUF);
  const int one = 1;
  (void)setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));  // ECN bits; optional
  // Coalesced receive: a run of equal-sized datagrams arrives as one buffer
  // with its segment size in a UDP_GRO cmsg (RecvBurst splits it again).
  if (gro) out->gro = setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) == 0;
  if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
    const int err = errno;
    *error = "SO_REUSEPORT on " + where + ": " + std::strerror(err);
    close(fd);
    return err;
  }
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = addr_network_order;
  sin.sin_port = htons(port);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&sin), sizeof(sin)) != 0) {
    const int err = errno;
    *error = "cannot bind UDP " + where + ": " + std::strerror(err);
    close(fd);
    return err;
  }
  socklen_t len = sizeof(sin);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len) != 0) {  // port 0 -> real port
    const int err = errno;
    *error = "getsockname on " + where + ": " + std::strerror(err);
    close(fd);
    return err;
  }
  out->fd = fd;
  out->addr = sin;
  return 0;
}

// The steering program of an endpoint's reuseport group: index 1 (the reply
// socket) for RC responses, index 0 otherwise. The program sees the UDP
// payload, i.e. the BTH, at offset 0; a datagram too short to load from
// ends the program with 0 (the first socket).
bool AttachReplySteering(int fd) {
  static sock_filter code[] = {
      {BPF_LD | BPF_B | BPF_ABS, 0, 0, 0},                                 // A = BTH opcode
      {BPF_JMP | BPF_JGE | BPF_K, 0, 2, kFirstRcResponseOpcode},           // < 0x0D: requests
      {BPF_JMP | BPF_JGT | BPF_K, 1, 0, kLastRcResponseOpcode},            // > 0x12: requests
      {BPF_RET | BPF_K, 0, 0, 1},
      {BPF_RET | BPF_K, 0, 0, 0},
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof(code) / sizeof(code[0])), code};
  return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) == 0;
}

// Opens an endpoint: its socket and, if `reply`, its reply socket (see the
// top of this file). Returns 0 or an errno (EADDRINUSE: another process's).
int OpenEndpoint(uint32_t addr_network_order, uint16_t port, bool gro, bool reply,
                 EndpointSockets* out, std::string* error) {
  if (int err = OpenSocket(addr_network_order, port, gro, reply, &out->main, error)) return err;
  if (!reply) return 0;
  out->owner_fd = ClaimEndpoint(out->main.addr);
  if (out->owner_fd < 0) {
    const int err = errno;
    close(out->main.fd);
    out->main.fd = -1;
    if (err == EADDRINUSE) {
      *error = "UDP " + Ipv4Text(addr_network_order) + ":" + std::to_string(port) +
               " is in use by another softrnic process";
      return EADDRINUSE;
    }
    // No unix sockets here (a sandbox): a plain endpoint without the group.
    return OpenSocket(addr_network_order, port, gro, false, &out->main, error);
  }
  std::string ignored;
  if (OpenSocket(addr_network_order, ntohs(out->main.addr.sin_port), gro, true, &out->reply,
                 &ignored) != 0)
    return 0;  // the reply socket is an optimisation only
  if (!AttachReplySteering(out->main.fd)) {
    close(out->reply.fd);
    out->reply.fd = -1;
  }
  return 0;
}

}  // namespace

bool OpenEndpoints(const UdpConfig& config,
                   const std::function<bool(const EndpointSockets&, std::string*)>& add,
                   std::string* error) {
  if (!config.bind_addresses.empty()) {
    std::vector<uint32_t> seen;
    for (const std::string& text : config.bind_addresses) {
      in_addr a{};
      if (inet_pton(AF_INET, text.c_str(), &a) != 1) {
        *error = "bind address '" + text + "' is not an IPv4 address";
        return false;
      }
      if (a.s_addr == INADDR_ANY || a.s_addr == INADDR_BROADCAST) {
        *error = "bind address '" + text +
                 "' is not a unicast address (a wildcard bind would leave the ICRC's source "
                 "address to routing)";
        return false;
      }
      if (std::find(seen.begin(), seen.end(), a.s_addr) != seen.end()) {
        *error = "bind address '" + text + "' is listed twice";
        return false;
      }
      seen.push_back(a.s_addr);
      EndpointSockets e;
      if (OpenEndpoint(a.s_addr, config.port, config.segmentation, config.reply_sockets, &e,
                       error) != 0)
        return false;
      if (!add(e, error)) return false;
    }
    return true;
  }

  size_t sockets = 0;
  // Automatic: host addresses whose port is free (a taken one belongs to
  // another softrnic process on this host, which then owns hostIP:port)...
  for (uint32_t addr : HostIpv4Addresses()) {
    // Room for the loopback endpoint is kept; further host addresses are
    // left out rather than failing (kMaxReadySockets).
    if (sockets + 4 > static_cast<size_t>(kMaxReadySockets)) break;
    EndpointSockets e;
    std::string ignored;
    if (OpenEndpoint(addr, config.port, config.segmentation, config.reply_sockets, &e, &ignored) !=
        0)
      continue;
    if (!add(e, error)) return false;
    sockets += e.reply.fd >= 0 ? 2 : 1;
  }
  // ...then exactly one per-process loopback address: the pid's candidates
  // first (docs/addressing.md; tools/device_view.cc predicts attempt 0),
  // then addresses from the kernel CSPRNG. Another local user can bind every
  // pid-derived candidate of a future pid in advance (security review M5),
  // never a random one: the device still comes up.
  const uint32_t pid = static_cast<uint32_t>(getpid());
  std::string last_error;
  bool bound = false;
  for (uint32_t attempt = 0; attempt < kMaxLoopbackAttempts + kMaxRandomLoopbackAttempts && !bound;
       ++attempt) {
    const uint32_t candidate = attempt < kMaxLoopbackAttempts ? PerProcessLoopbackAddress(pid, attempt)
                                                              : RandomLoopbackAddress();
    EndpointSockets e;
    const int err = OpenEndpoint(htonl(candidate), config.port, config.segmentation,
                                 config.reply_sockets, &e, &last_error);
    if (err == EADDRINUSE) continue;
    if (err != 0) {
      *error = last_error;
      return false;
    }
    if (!add(e, error)) return false;
    bound = true;
  }
  if (!bound) {
    *error = "no free per-process loopback address at port " + std::to_string(config.port) +
             " after " + std::to_string(kMaxLoopbackAttempts + kMaxRandomLoopbackAttempts) +
             " tries (" + last_error +
             "); is something bound to 0.0.0.0:" + std::to_string(config.port) +
             "? set SOFTRNIC_PORT or SOFTRNIC_BIND";
    return false;
  }
  return true;
}


}  // namespace softrnic::transport
