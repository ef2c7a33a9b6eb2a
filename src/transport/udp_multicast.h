// Receiving RoCE v2 multicast on kernel UDP sockets (Transport::JoinMulticast
// of the UDP transport, udp_transport.cc).
//
// A device's endpoint sockets are bound to unicast addresses, and the kernel
// never delivers a multicast datagram to a socket bound to a unicast address.
// So each group a device joins gets a socket of its own, bound to the group
// address and the device's port with SO_REUSEADDR: every device on this host
// that joined the group (each process is one) has such a socket, and the
// kernel hands each of them a copy, as a switch hands one to every member
// port. The socket joins the group on every interface that is up and has an
// address of the group's family, loopback included: a same-host sender
// whose source is its per-process loopback address (docs/addressing.md)
// sends out of `lo` (Linux routes a multicast datagram from a socket bound
// to a local address out of that address's interface), one with a host
// address out of that host interface (with a looped-back copy for this
// host's members), and a peer in another network namespace or host through
// the interface its packets arrive on. IP_MULTICAST_ALL (the default) lets
// the socket take the group's datagrams from every interface on which this
// host is a member.
//
// The ICRC of a received multicast packet is checked with the group as the
// destination address, which is the socket's bound address (udp_transport.cc
// does this for every socket). Sending needs nothing of this file: endpoint
// sockets send to a group like to any address; IP_MULTICAST_LOOP (the
// default) delivers a copy to this host's members, the sender's own group
// socket included (a QP attached to a group it sends to hears itself unless
// it was created with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB; engine/queues/multicast.cc).
// The kernel's default multicast TTL (1) keeps the datagrams on the link, as
// an IB multicast group without a router.
//
// Thread-safety: none; the transport's caller serialises.
#pragma once

#include <cstdint>
#include <string>

#include "transport/address.h"
#include "transport/udp_socket.h"

namespace softrnic::transport {

// The most groups one device joins at once (each is a socket and a
// descriptor). The UDP transport reports it as its max_multicast_groups(),
// which the device reports as max_mcast_grp and enforces (transport.h).
inline constexpr int kMaxMulticastGroups = 64;

// Opens the socket of `group` at `port` (see the top of this file): bound,
// joined on every interface of the group's family that is up, non-blocking,
// with the ECN control message on. Returns 0, or an errno with *error set
// (EINVAL: not a multicast GID, Gid::IsMulticast; EADDRNOTAVAIL: no interface could join).
int OpenGroupSocket(const Gid& group, uint16_t port, LocalSocket* out, std::string* error);

}  // namespace softrnic::transport
