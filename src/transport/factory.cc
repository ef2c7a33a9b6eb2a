// The only file that names concrete transports (factory.h).
#include "transport/factory.h"

#include <cstdio>
#include <cstring>

#include "transport/fault_transport.h"
#include "transport/shm_transport.h"
#include "transport/udp_transport.h"
#include "log/log.h"

namespace softrnic::transport {

bool ParseTransportMode(const char* text, TransportMode* out) {
  if (text == nullptr || *text == '\0' || std::strcmp(text, "auto") == 0) {
    *out = TransportMode::kAuto;
    return true;
  }
  if (std::strcmp(text, "udp") == 0) {
    *out = TransportMode::kUdp;
    return true;
  }
  if (std::strcmp(text, "shm") == 0) {
    *out = TransportMode::kShm;
    return true;
  }
  return false;
}

const char* TransportModeName(TransportMode mode) {
  switch (mode) {
    case TransportMode::kUdp: return "udp";
    case TransportMode::kAuto: return "auto";
    case TransportMode::kShm: return "shm";
  }
  return "auto";
}

TransportChoice ChooseTransport(TransportMode mode, bool faults_configured) {
  TransportChoice c;
  if (faults_configured) {
    // Fault injection tests the wire: shared memory would bypass it.
    c.faults = true;
    c.reason = "SOFTRNIC_FAULTS or SOFTRNIC_FAULTS_FILE is set: fault injection needs every packet "
               "on UDP, so no shared memory (whatever SOFTRNIC_TRANSPORT says; docs/fault-lab.md)";
    return c;
  }
  if (mode == TransportMode::kUdp) {
    c.reason = "SOFTRNIC_TRANSPORT=udp: UDP to every peer, same-host ones too";
    return c;
  }
  c.shared_memory = true;
  c.reason = mode == TransportMode::kShm
                 ? "SOFTRNIC_TRANSPORT=shm: shared memory to same-host peers of this user in this "
                   "network namespace (a peer that cannot use it is reported), UDP to the others"
                 : "SOFTRNIC_TRANSPORT=auto (the default): shared memory to same-host peers of "
                   "this user in this network namespace, UDP to the others";
  return c;
}

std::unique_ptr<Transport> CreateTransport(const UdpConfig& config, TransportMode mode,
                                           std::string* error) {
  if (!config.faults_error.empty()) {
    // Asked for faults that could not be read: no device, rather than one
    // that runs without them.
    if (error != nullptr) *error = "fault scenario: " + config.faults_error;
    return nullptr;
  }
  auto udp = CreateUdpTransport(config, error);
  if (!udp) return nullptr;
  const TransportChoice choice = ChooseTransport(mode, config.faults.enabled());
  if (choice.faults) {
    if (mode == TransportMode::kShm)
      SOFTRNIC_LOG(kWarn,
                   "SOFTRNIC_TRANSPORT=shm ignored: a fault scenario needs the UDP path");
    return std::make_unique<FaultTransport>(std::move(udp), config.faults);
  }
  if (!choice.shared_memory) return udp;
  std::string shm_error;
  auto shm = ShmTransport::Create(std::move(udp), mode == TransportMode::kShm, &shm_error);
  if (!shm) {
    // The UDP transport was consumed; build it again.
    if (mode == TransportMode::kShm)
      SOFTRNIC_LOG(kWarn, "shared-memory transport unavailable (%s); using UDP",
                   shm_error.c_str());
    return CreateUdpTransport(config, error);
  }
  return shm;
}

}  // namespace softrnic::transport
