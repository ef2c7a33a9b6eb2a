// The RoCE v2 UDP transport: its constructor (for the factory, factory.h,
// and tests) and internals exposed for tests and tools.
// UdpConfigFromEnvironment is in transport.h; docs/addressing.md describes
// the addressing scheme.
//
// Contract of the UDP Transport (CreateUdpTransport):
// - Thread-safety: not internally synchronised. One thread at a time (the
//   engine's lock); the functions below are pure and thread-safe.
// - SendBurst never writes into TxPacket::data (the ICRC goes out from
//   transport-owned staging, udp_tx.h), and the caller's buffers may be
//   reused as soon as it returns. The return value is how many packets from
//   the front were consumed: sent, or dropped for good (malformed request ->
//   tx_errors, hard send error such as EMSGSIZE -> tx_errors). When a socket
//   buffer is full (EAGAIN/ENOBUFS -> tx_busy) it returns early and the
//   caller offers the rest again later.
// - RxPacket::data points into transport-owned buffers (kUdpMaxRecvBurst of
//   kUdpRecvBufferSize bytes); they are valid until the next RecvBurst call
//   on the same transport. RecvBurst returns at most kUdpMaxRecvBurst.
// - Counters: tx_packets/tx_bytes count datagrams the kernel accepted
//   (with fault injection above it: injected duplicates and released
//   held-back packets too).
// - UdpConfig::faults is not applied here (the factory wraps this transport
//   in fault_transport.h); it only turns segmented sending off, since faults
//   act per packet.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace softrnic::transport {

// Creates the UDP transport. On failure returns nullptr and sets *error.
// A device gets its transport from CreateTransport (factory.h).
std::unique_ptr<Transport> CreateUdpTransport(const UdpConfig& config, std::string* error);

// The per-process loopback address 127.a.b.c (host byte order) for `pid`,
// candidate number `attempt` (0 first; later ones are tried when the earlier
// one is taken, e.g. by a process with the same pid in another pid
// namespace sharing this network namespace). Attempt 0 is
//   a = 1 + (pid >> 16), b = (pid >> 8) & 0xff, c = pid & 0xff,
// which is distinct for every pid below 2^22 (Linux's pid_max limit) and
// never 127.0.0.x; attempt k moves `a` up by 66*k (mod 254, kept in 1..254).
uint32_t PerProcessLoopbackAddress(uint32_t pid, uint32_t attempt);

// Every IPv4 address of the host's interfaces that are up, except loopback
// ones (127/8), in getifaddrs order without duplicates, network byte order.
std::vector<uint32_t> HostIpv4Addresses();

// Builds a UdpConfig from the three variables' values (nullptr = unset):
// SOFTRNIC_BIND "a.b.c.d,e.f.g.h", SOFTRNIC_PORT "4791", SOFTRNIC_FAULTS
// in its one-line form "drop=..,seed=.." (faults::ParseOneLine). Returns
// false and a message for the first bad value; *out then still holds every
// value that was valid, and a bad scenario's message in faults_error too.
bool ParseUdpConfig(const char* bind, const char* port, const char* faults, UdpConfig* out,
                    std::string* error);

// How many datagrams one RecvBurst can return at most, and how large one
// receive buffer is (any IPv4 UDP datagram fits, so nothing is truncated).
inline constexpr int kUdpMaxRecvBurst = 32;
// The largest UDP datagram (65,507 bytes of payload, a coalesced UDP_GRO
// one included), with room in front for a host NIC channel's
// ForwardHeader (host_nic/protocol.h), rounded up to a cache line.
inline constexpr uint32_t kUdpRecvBufferSize = 65536 + 64;
// Largest packet SendBurst accepts (IPv4 UDP payload limit).
inline constexpr uint32_t kUdpMaxPayload = 65507;

}  // namespace softrnic::transport
