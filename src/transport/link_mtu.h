// The MTU of the links a device's endpoints are on, from which the engine
// derives the port's active MTU when SOFTRNIC_MTU is not set (engine.cc).
//
// The kernel's rxe takes its port MTU from its one netdev. A softrnic
// device has endpoints on every interface with an address (its GID table,
// docs/addressing.md), and a QP's traffic may leave through any of them,
// so the smallest of their MTUs is the one every path can carry. The UDP
// transport asks for the addresses it may bind, not those it got, so that
// every process of a namespace derives the same MTU (udp_transport.cc).
//
// Thread-safety: pure functions (LinkMtuOf reads the interface list).
#pragma once

#include <ifaddrs.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "transport/address.h"

namespace softrnic::transport {

// The smallest MTU among the interfaces of `list` (a getifaddrs chain) that
// hold one of `gids`. 127/8 and ::1 are on the loopback interface even
// where no interface lists them (the kernel routes the whole block there:
// the per-process 127.a.b.c address). `mtu_of` gives an interface's MTU by
// name (0: unknown). 0 when no GID's interface MTU is known.
uint32_t SmallestLinkMtuFrom(const ifaddrs* list, std::span<const Gid> gids,
                             const std::function<uint32_t(const std::string&)>& mtu_of);

// SmallestLinkMtuFrom(getifaddrs(), gids, the SIOCGIFMTU of each interface);
// 0 when getifaddrs fails.
uint32_t SmallestLinkMtu(std::span<const Gid> gids);

}  // namespace softrnic::transport
