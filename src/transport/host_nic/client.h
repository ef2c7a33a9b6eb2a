// A softrnic process's side of the host NIC (docs/host-nic.md): asks the
// user's nicd (daemon.h) for a lease on the host's addresses at a port,
// starting nicd first when none runs.
//
// Thread-safety: setup only; one call at a time per lease.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "transport/udp_socket.h"

namespace softrnic::transport::host_nic {

struct ClientLease {
  int control_fd = -1;  // open while the lease lasts; closing it ends the lease
  uint8_t lane = 0;     // the top byte of this process's QPNs and comm IDs
  // Root's nicd serving another uid (protocol.h): each endpoint's main
  // socket is this process's own (bound to the address at a port the
  // kernel chose, for sending), and what reaches the address for the lane
  // arrives through its `forwarded` channel.
  bool forwarded = false;
  // In the host's address order (HostAddresses()): IPv4 first, then IPv6.
  std::vector<EndpointSockets> endpoints;
};

// The lease, or nullopt with the reason in *why (no nicd could be started
// or reached, another user's socket holds the name, nicd refused). A user
// other than root with no nicd of its own uses root's when one runs (it
// owns the port then: a nicd of ours would find it taken). The
// caller then binds as a process on its own does (docs/addressing.md).
// `nicd_path`: the daemon's executable, "" for softrnic-nicd next to the
// library this code is linked into.
std::optional<ClientLease> AcquireLease(uint16_t port, const std::string& nicd_path,
                                        std::string* why);

// Asks nicd to steer CM REQs for (port space, port) to this process (add)
// or to stop (remove). 0, EADDRINUSE (another process of the host has it),
// or the errno of the exchange.
int RequestService(int control_fd, uint16_t port_space, uint16_t port, bool add);

}  // namespace softrnic::transport::host_nic
