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
#include "log/log.h"
#include "transport/endpoint_claim.h"
#include "transport/host_nic/client.h"
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
  for (const LocalAddress& a : HostAddresses())
    if (a.gid.IsV4Mapped()) result.push_back(a.gid.Ipv4());
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

// "10.0.0.1:4791", "[fd77::1]:4791", "[fe80::1%veth0]:4791" for messages.
std::string EndpointText(const LocalAddress& a, uint16_t port) {
  if (a.gid.IsV4Mapped()) return a.gid.ToString().substr(7) + ":" + std::to_string(port);
  std::string text = "[" + a.gid.ToString();
  if (a.scope_id != 0) text += "%" + (a.ifname.empty() ? std::to_string(a.scope_id) : a.ifname);
  return text + "]:" + std::to_string(port);
}

void SetBuffer(int fd, int force_option, int option) {
  const int bytes = kSocketBufferBytes;
  // The *FORCE variants exceed net.core.[rw]mem_max but need CAP_NET_ADMIN;
  // without it the plain option is silently capped at the sysctl limit.
  if (setsockopt(fd, SOL_SOCKET, force_option, &bytes, sizeof(bytes)) == 0) return;
  (void)setsockopt(fd, SOL_SOCKET, option, &bytes, sizeof(bytes));
}

}  // namespace

// Opens and binds one socket. Returns 0 or the errno of the failing call, and
// a message in *error.
int OpenSocket(const LocalAddress& address, uint16_t port, bool gro, bool reuseport,
               LocalSocket* out, std::string* error) {
  const std::string where = EndpointText(address, port);
  const bool v6 = !address.gid.IsV4Mapped();
  const int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    *error = "socket(): " + std::string(std::strerror(err));
    return err;
  }
  auto fail = [&](const std::string& what) {
    const int err = errno;
    *error = what + " " + where + ": " + std::strerror(err);
    close(fd);
    return err;
  };
  const int one = 1;
  if (v6) {
    // Only IPv6 peers: an IPv4 address has its own socket, and a mapped
    // peer's ICRC would be framed for the wrong header.
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0)
      return fail("IPV6_V6ONLY on");
    const int pmtu = IPV6_PMTUDISC_DO;
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0)
      return fail("IPV6_MTU_DISCOVER on");
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof(one));  // ECN; optional
  } else {
    const int pmtu = IP_PMTUDISC_DO;
    if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0)
      return fail("IP_MTU_DISCOVER on");
    (void)setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));  // ECN bits; optional
  }
  EnlargeSocketBuffers(fd);
  // Coalesced receive: a run of equal-sized datagrams arrives as one buffer
  // with its segment size in a UDP_GRO cmsg (RecvBurst splits it again).
  if (gro) out->gro = setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) == 0;
  if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0)
    return fail("SO_REUSEPORT on");
  sockaddr_in6 sa{};
  socklen_t len = ToSockaddr(Endpoint{address.gid, port}, address.scope_id, &sa);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&sa), len) != 0)
    return fail("cannot bind UDP");
  len = sizeof(sa);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)  // port 0 -> real port
    return fail("getsockname on");
  Endpoint bound;
  if (!FromSockaddr(reinterpret_cast<const sockaddr*>(&sa), len, &bound, nullptr)) {
    errno = EAFNOSUPPORT;
    return fail("getsockname on");
  }
  out->fd = fd;
  out->endpoint = bound;
  out->scope_id = address.scope_id;
  return 0;
}

namespace {

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
int OpenEndpoint(const LocalAddress& address, uint16_t port, bool gro, bool reply,
                 EndpointSockets* out, std::string* error) {
  if (int err = OpenSocket(address, port, gro, reply, &out->main, error)) return err;
  if (!reply) return 0;
  out->owner_fd = ClaimEndpoint(out->main.endpoint);
  if (out->owner_fd < 0) {
    const int err = errno;
    close(out->main.fd);
    out->main.fd = -1;
    if (err == EADDRINUSE) {
      *error = "UDP " + EndpointText(address, port) + " is in use by another softrnic process";
      return EADDRINUSE;
    }
    // No unix sockets here (a sandbox): a plain endpoint without the group.
    return OpenSocket(address, port, gro, false, &out->main, error);
  }
  std::string ignored;
  if (OpenSocket(address, out->main.endpoint.port, gro, true, &out->reply, &ignored) != 0)
    return 0;  // the reply socket is an optimisation only
  if (!AttachReplySteering(out->main.fd)) {
    close(out->reply.fd);
    out->reply.fd = -1;
  }
  return 0;
}

}  // namespace

void EnlargeSocketBuffers(int fd) {
  SetBuffer(fd, SO_RCVBUFFORCE, SO_RCVBUF);
  SetBuffer(fd, SO_SNDBUFFORCE, SO_SNDBUF);
}

bool OpenEndpoints(const UdpConfig& config,
                   const std::function<bool(const EndpointSockets&, std::string*)>& add,
                   int* lane, int* control_fd, std::string* error) {
  *lane = -1;
  *control_fd = -1;
  if (!config.bind_addresses.empty()) {
    const std::vector<LocalAddress> host = HostAddresses();
    std::vector<Gid> seen;
    for (const std::string& text : config.bind_addresses) {
      LocalAddress a;
      if (!ParseBindAddress(text, host, &a, error)) return false;
      if (std::find(seen.begin(), seen.end(), a.gid) != seen.end()) {
        *error = "bind address '" + text + "' is listed twice";
        return false;
      }
      seen.push_back(a.gid);
      EndpointSockets e;
      if (OpenEndpoint(a, config.port, config.segmentation, config.reply_sockets, &e,
                       error) != 0)
        return false;
      if (!add(e, error)) return false;
    }
    return true;
  }

  size_t sockets = 0;
  const std::vector<LocalAddress> host = HostAddresses();
  // The host NIC: the host's addresses shared with the user's other
  // processes, steered by QPN (docs/host-nic.md).
  std::optional<host_nic::ClientLease> lease;
  if (config.host_nic && config.port != 0 && config.reply_sockets) {
    std::string why;
    lease = host_nic::AcquireLease(config.port, config.nicd_path, &why);
    if (!lease) {
      SOFTRNIC_LOG(kInfo, "host NIC unavailable (%s): binding the host's addresses alone",
                   why.c_str());
    } else if (lease->endpoints.empty()) {
      close(lease->control_fd);  // nothing to serve here: nicd got no address
      lease.reset();
    } else {
      *lane = lease->lane;
      *control_fd = lease->control_fd;
    }
  }
  auto add_leased = [&](bool ipv4) {
    for (const EndpointSockets& e : lease->endpoints) {
      if (e.main.endpoint.gid.IsV4Mapped() != ipv4) continue;
      if (!add(e, error)) return false;
      sockets += (e.reply.fd >= 0 ? 2 : 1) + (e.forwarded.fd >= 0 ? 1 : 0);
    }
    return true;
  };
  // Automatic: host addresses whose port is free (a taken one belongs to
  // another softrnic process on this host, which then owns hostIP:port):
  // the IPv4 ones first, then the loopback address, then the IPv6 ones
  // (below).
  auto open_host = [&](bool ipv4) {
    if (lease) return add_leased(ipv4);
    for (const LocalAddress& addr : host) {
      if (addr.gid.IsV4Mapped() != ipv4) continue;
      // Room for the loopback endpoint is kept; further host addresses are
      // left out rather than failing (kMaxReadySockets).
      if (sockets + 4 > static_cast<size_t>(kMaxReadySockets)) break;
      EndpointSockets e;
      std::string ignored;
      if (OpenEndpoint(addr, config.port, config.segmentation, config.reply_sockets, &e,
                       &ignored) != 0)
        continue;
      if (!add(e, error)) return false;
      sockets += e.reply.fd >= 0 ? 2 : 1;
    }
    return true;
  };
  if (!open_host(true)) return false;
  // ...then exactly one per-process loopback address: the pid's candidates
  // first (docs/addressing.md; tools/device_view.cc predicts attempt 0),
  // then addresses from the kernel CSPRNG. Another local user can bind every
  // pid-derived candidate of a future pid in advance (security review M5),
  // never a random one: the device still comes up. It comes before the IPv6
  // addresses so that GID 0 of every process on a host without IPv4 host
  // addresses is its loopback one: two same-host processes using GID 0 then
  // have GIDs of one family, which the wire needs (and shared memory is
  // used between them).
  const uint32_t pid = static_cast<uint32_t>(getpid());
  std::string last_error;
  bool bound = false;
  bool no_ipv4_loopback = false;
  for (uint32_t attempt = 0; attempt < kMaxLoopbackAttempts + kMaxRandomLoopbackAttempts && !bound;
       ++attempt) {
    const uint32_t candidate = attempt < kMaxLoopbackAttempts ? PerProcessLoopbackAddress(pid, attempt)
                                                              : RandomLoopbackAddress();
    EndpointSockets e;
    const int err = OpenEndpoint(LocalAddress{Gid::FromIpv4(htonl(candidate)), 0, "lo"}, config.port,
                                 config.segmentation, config.reply_sockets, &e, &last_error);
    if (err == EADDRINUSE) continue;
    if (err == EADDRNOTAVAIL) {
      // No IPv4 loopback in this network namespace (an IPv6-only host
      // without 127.0.0.1 on lo): nothing on this host could use a 127.x
      // address either. Host addresses serve, if there are any.
      no_ipv4_loopback = true;
      break;
    }
    if (err != 0) {
      *error = last_error;
      return false;
    }
    if (!add(e, error)) return false;
    sockets += e.reply.fd >= 0 ? 2 : 1;
    bound = true;
  }
  if (!open_host(false)) return false;
  if (!bound && !(no_ipv4_loopback && sockets > 0)) {
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
