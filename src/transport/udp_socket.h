// Socket setup of the UDP transport (udp_transport.cc): opening, binding and
// claiming endpoints, the per-process loopback address, and the reply-socket
// steering program. Internal to src/transport/.
//
// One non-blocking, never-connected UDP socket per local endpoint, each bound
// to a specific IPv4 or IPv6 address (the ICRC covers the source address and port, so
// the transport must know exactly what the kernel will put in the IP/UDP
// headers; a wildcard bind would leave the source address to routing).
//
// Reply sockets: each endpoint is a SO_REUSEPORT group of two sockets on the
// same address and port, with a classic BPF program (unprivileged) that
// steers RC responses (opcodes 0x0D-0x12: read responses, ACK, atomic ACK)
// to the second socket and everything else to the first. The wire is
// unchanged (every packet to and from port 4791); only the local delivery
// differs. The engine's progress thread waits on the first sockets always
// and on the reply sockets only when it must (docs/progress.md), so a
// response that an application thread is polling for wakes nobody.
// Who owns an address:port is decided by an abstract unix socket named after
// it (per network namespace, gone when the process dies): a second process
// that joined the group in a race sees the name taken and leaves at once.
// A name held by another uid is ignored (ClaimEndpoint: SO_PEERCRED).
// IP_MTU_DISCOVER=IP_PMTUDISC_DO sets DF, and an unconnected DF socket sends
// IPv4 ID 0, which is what the ICRC framing assumes (a connected socket
// would number IDs from a per-socket counter and break the ICRC).
// IPv6 endpoints are AF_INET6 sockets with IPV6_V6ONLY (an IPv4 peer never
// reaches them as ::ffff:a.b.c.d: its address has its own IPv4 socket) and
// IPV6_PMTUDISC_DO (no fragmentation by the sender either); IPv6 has no ID.
//
// Thread-safety: setup only, one thread.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <functional>
#include <string>

#include "transport/local_address.h"
#include "transport/transport.h"

namespace softrnic::transport {

struct LocalSocket {
  int fd = -1;
  Endpoint endpoint;     // the bound address (IPv4-mapped or IPv6 GID) and port
  uint32_t scope_id = 0;  // a link-local IPv6 address's interface index
  bool gro = false;    // UDP_GRO accepted: datagrams may hold several packets
  uint16_t local = 0;  // the endpoint (index into the transport's locals) it belongs to
  bool reply = false;  // the endpoint's reply socket (see the top of this file)
  bool group = false;  // a multicast group's socket (udp_multicast.h); endpoint = the group
  // A host NIC channel (host_nic/protocol.h, forwarded leases): a unix
  // datagram socket whose datagrams carry a ForwardHeader; endpoint = the
  // address and port the datagrams were sent to.
  bool forwarded = false;
};

// The sockets of one endpoint (see the top of this file).
struct EndpointSockets {
  LocalSocket main;
  LocalSocket reply;  // fd -1: none
  LocalSocket forwarded;  // fd -1: none (a host NIC channel: receive only)
  int owner_fd = -1;  // abstract unix socket naming the address:port, or -1
  int sink_fd = -1;   // a host NIC lease: nicd's sink, held (never read), or -1
};

// Asks for 4 MiB send and receive buffers on `fd` (past net.core.[rw]mem_max
// with CAP_NET_ADMIN, else capped there): a burst must not overflow them.
void EnlargeSocketBuffers(int fd);

// Opens one socket of an endpoint and binds it to address:port (options as
// the top of this file says; SO_REUSEPORT if `reuseport`, UDP_GRO tried if
// `gro`). Returns 0 or the errno of the failing call, and a message in
// *error. The host NIC daemon opens its sockets with it too.
int OpenSocket(const LocalAddress& address, uint16_t port, bool gro, bool reuseport,
               LocalSocket* out, std::string* error);

// The most sockets a transport has (one RecvBurst's epoll_wait looks at all).
inline constexpr int kMaxReadySockets = 64;

// Opens the endpoints `config` asks for, in GID-table order, handing each to
// `add` (which takes ownership of its descriptors; false stops with *error
// set). Explicit bind addresses are all required; automatic binding takes
// every IPv4 host address whose port is free, then exactly one per-process
// loopback address, then every IPv6 host address whose port is free
// (docs/addressing.md). Returns false and *error on
// failure.
// With UdpConfig::host_nic (automatic binding, a fixed port, reply
// sockets) the host addresses come from the user's nicd
// (host_nic/client.h): *lane is then its lane, *control_fd the lease's
// descriptor (the caller closes it after every socket); else -1 both.
bool OpenEndpoints(const UdpConfig& config,
                   const std::function<bool(const EndpointSockets&, std::string*)>& add,
                   int* lane, int* control_fd, std::string* error);

}  // namespace softrnic::transport
