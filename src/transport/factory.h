// The one place that knows the concrete transports: which ones exist, how a
// device's transport is chosen (SOFTRNIC_TRANSPORT) and how they stack.
// Everything else, the engine included, sees only Transport (transport.h)
// and the capabilities it offers (peer_memory.h).
//
// Adding a transport (e.g. AF_XDP): implement Transport (and the
// capabilities it can offer), reuse the ICRC framing if it carries RoCE v2
// packets, and add its mode here and its construction in factory.cc
// (docs/engine.md, "Transports").
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "transport/transport.h"

namespace softrnic::transport {

// SOFTRNIC_TRANSPORT: which packet path reaches same-host peers.
//   kUdp  never shared memory;
//   kAuto shared memory to a peer on this host, in this network namespace,
//         of this user and mappable; UDP otherwise (and always UDP when
//         fault injection is configured: it is a UDP-layer test tool);
//   kShm  as kAuto, but says so on stderr (once) when a peer cannot use it.
enum class TransportMode : uint8_t { kUdp, kAuto, kShm };
// Parses "udp" | "auto" | "shm" (nullptr or "" = kAuto). False if unknown.
bool ParseTransportMode(const char* text, TransportMode* out);

// Which transports a device stacks for a mode and a fault setting, and why,
// in words naming the setting that decided (`softrnic devinfo` reports it;
// CreateTransport builds by it).
struct TransportChoice {
  bool shared_memory = false;  // shared memory to same-host peers, UDP under it
  bool faults = false;         // fault injection wrapped around UDP
  const char* reason = "";
};
TransportChoice ChooseTransport(TransportMode mode, bool faults_configured);
// "udp" | "auto" | "shm".
const char* TransportModeName(TransportMode mode);

// The transport a device uses: UDP, wrapped by fault injection when faults
// are configured (fault_transport.h), else by the shared-memory transport
// unless mode is kUdp. On failure returns nullptr and sets *error.
std::unique_ptr<Transport> CreateTransport(const UdpConfig& config, TransportMode mode,
                                           std::string* error);

}  // namespace softrnic::transport
