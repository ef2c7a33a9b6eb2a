// Who owns a UDP address:port among the softrnic processes of one user
// (udp_transport.cc: the endpoint's SO_REUSEPORT group).
#pragma once

#include "transport/address.h"

namespace softrnic::transport {

// Claims address:port for this process among the processes of its uid: an
// abstract unix name after it (per network namespace, gone when the process
// dies). Returns the socket, or -1 with errno EADDRINUSE when another
// process of ours holds it (ENOENT: every name is held by other users; the
// caller then uses the endpoint unclaimed).
//
// Abstract names have no permissions (security review M5): another user can
// bind ours first. But this runs only after our UDP bind of address:port
// with SO_REUSEPORT succeeded, and the kernel lets only sockets of one
// effective uid share a port that way, so a holder of another uid cannot own
// the UDP port: its name is an impostor's. Then the next name of a short
// sequence every process of ours walks in the same order is used; if an
// attacker holds all of them, the endpoint is used without the claim (two
// of our processes racing for it may then both join the group: traffic is
// split, the attacker gains nothing).
int ClaimEndpoint(const Endpoint& endpoint);

}  // namespace softrnic::transport
