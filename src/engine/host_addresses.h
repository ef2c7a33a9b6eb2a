// Whether an address belongs to this host (as seen from this process's
// network namespace): loopback, or assigned to one of its interfaces.
//
// Used by the receive path's source check (issue 14, M1): a packet from a
// same-host address can be sent by any local user who binds that address on
// another port, so for a same-host peer the UDP source port must also match.
#pragma once

#include "engine/types.h"

namespace softrnic::engine {

// Loopback (127/8, ::1, their v4-mapped forms) or an address of one of this
// namespace's interfaces (getifaddrs). Reads the interface list on each
// call: meant for connection setup, not for every packet.
bool IsHostAddress(const Gid& gid);

}  // namespace softrnic::engine
