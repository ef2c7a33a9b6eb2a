// The local addresses a UDP transport can bind, and so the device's GID
// table (docs/addressing.md): the host's interface addresses, IPv4 and IPv6,
// as the kernel's rxe builds its GID table from its netdev, and the text of
// an explicit bind address (SOFTRNIC_BIND).
//
// An IPv6 link-local address (fe80::/10) is only meaningful with its
// interface, so it carries the interface index (sin6_scope_id) along.
//
// Thread-safety: pure functions (HostAddresses reads the interface list).
#pragma once

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "transport/address.h"

namespace softrnic::transport {

// One bindable local address: an IPv4-mapped GID (::ffff:a.b.c.d) or an
// IPv6 one, the interface index of a link-local address (0 otherwise) and
// the interface's name when known.
struct LocalAddress {
  Gid gid;
  uint32_t scope_id = 0;
  std::string ifname;
  bool operator==(const LocalAddress&) const = default;
};

// fe80::/10.
bool IsIpv6LinkLocal(const Gid& gid);
// ::1.
bool IsIpv6Loopback(const Gid& gid);

// The host addresses in `list` (a getifaddrs chain) a device binds
// automatically, in GID-table order: first every IPv4 address, then every
// IPv6 address, each in list order without duplicates, of interfaces that
// are up and not loopback. Left out: 127/8, 0.0.0.0, ::1, ::, IPv4-mapped
// and multicast IPv6 addresses. Link-local IPv6 addresses are kept (rxe
// lists them too) with their interface index.
std::vector<LocalAddress> HostAddressesFrom(const ifaddrs* list);

// HostAddressesFrom(getifaddrs()); empty when getifaddrs fails.
std::vector<LocalAddress> HostAddresses();

// Parses one explicit bind address: "a.b.c.d", an IPv6 address, or an IPv6
// address with its interface ("fe80::1%eth0", "fe80::1%3"). A link-local
// IPv6 address without one takes the interface of this host that has it
// (`host`, HostAddresses()); none found is an error. Rejected: the
// wildcards, IPv4 broadcast, IPv6 multicast, IPv4-mapped IPv6 text (write
// the IPv4 address). ::1 is accepted (the automatic scheme leaves it out). Returns false with a message in *error.
bool ParseBindAddress(const std::string& text, const std::vector<LocalAddress>& host,
                      LocalAddress* out, std::string* error);

// The socket address of `ep` (AF_INET for an IPv4-mapped GID, else
// AF_INET6 with `scope_id`) in *out; returns its length.
socklen_t ToSockaddr(const Endpoint& ep, uint32_t scope_id, sockaddr_in6* out);

// The endpoint of a socket address (AF_INET or AF_INET6); false for any
// other family or a length too short for it.
bool FromSockaddr(const sockaddr* sa, socklen_t len, Endpoint* out, uint32_t* scope_id);

}  // namespace softrnic::transport
