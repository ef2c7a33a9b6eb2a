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

std::unique_ptr<Transport> CreateTransport(const UdpConfig& config, TransportMode mode,
                                           std::string* error) {
  auto udp = CreateUdpTransport(config, error);
  if (!udp) return nullptr;
  if (config.faults.enabled()) {
    // Fault injection tests the wire: shared memory would bypass it.
    if (mode == TransportMode::kShm)
      SOFTRNIC_LOG(kWarn,
                   "SOFTRNIC_TRANSPORT=shm ignored: SOFTRNIC_FAULTS needs the UDP path");
    return std::make_unique<FaultTransport>(std::move(udp), config.faults);
  }
  if (mode == TransportMode::kUdp) return udp;
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
