// Which interfaces' MTUs bound a device's packets (link_mtu.h): the
// interfaces that hold its GIDs, loopback for 127/8 and ::1, the smallest.
#include "transport/link_mtu.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "fake_interfaces.h"

namespace softrnic::transport {
namespace {

// MTUs by interface name; names not listed are unknown (0).
auto MtusOf(std::map<std::string, uint32_t> mtus) {
  return [mtus](const std::string& name) {
    const auto it = mtus.find(name);
    return it == mtus.end() ? 0u : it->second;
  };
}

FakeInterfaces HostWithEthAndJumbo() {
  FakeInterfaces f;
  f.Add("lo", kLoop, "127.0.0.1")
      .Add("lo", kLoop, "::1")
      .Add("eth0", kUp, "10.0.0.5")
      .Add("eth0", kUp, "fe80::5", 2)
      .Add("jumbo0", kUp, "10.1.0.5")
      .Add("jumbo0", kUp, "fe80::5", 3);  // the same link-local address on two links
  return f;
}
const auto kMtus = MtusOf({{"lo", 65536}, {"eth0", 1500}, {"jumbo0", 9000}});

TEST(LinkMtu, TheInterfaceThatHoldsTheAddress) {
  FakeInterfaces f = HostWithEthAndJumbo();
  const std::vector<Gid> jumbo = {GidOf("10.1.0.5")};
  EXPECT_EQ(SmallestLinkMtuFrom(f.list(), jumbo, kMtus), 9000u);
  const std::vector<Gid> eth = {GidOf("10.0.0.5")};
  EXPECT_EQ(SmallestLinkMtuFrom(f.list(), eth, kMtus), 1500u);
}

TEST(LinkMtu, TheSmallestOfAllTheDevicesInterfaces) {
  FakeInterfaces f = HostWithEthAndJumbo();
  const std::vector<Gid> both = {GidOf("10.1.0.5"), GidOf("10.0.0.5")};
  EXPECT_EQ(SmallestLinkMtuFrom(f.list(), both, kMtus), 1500u);
}

TEST(LinkMtu, ALinkLocalAddressOnSeveralLinksCountsEveryOne) {
  FakeInterfaces f = HostWithEthAndJumbo();
  const std::vector<Gid> gids = {GidOf("10.1.0.5"), GidOf("fe80::5")};
  EXPECT_EQ(SmallestLinkMtuFrom(f.list(), gids, kMtus), 1500u);
}

// The per-process 127.a.b.c address is on no interface's list; the kernel
// routes 127/8 (and ::1) to loopback.
TEST(LinkMtu, LoopbackAddressesAreOnTheLoopbackInterface) {
  FakeInterfaces f = HostWithEthAndJumbo();
  const std::vector<Gid> per_process = {GidOf("127.3.2.1")};
  EXPECT_EQ(SmallestLinkMtuFrom(f.list(), per_process, kMtus), 65536u);
  const std::vector<Gid> v6 = {GidOf("::1")};
  EXPECT_EQ(SmallestLinkMtuFrom(f.list(), v6, kMtus), 65536u);
  const std::vector<Gid> with_jumbo = {GidOf("10.1.0.5"), GidOf("127.3.2.1")};
  EXPECT_EQ(SmallestLinkMtuFrom(f.list(), with_jumbo, kMtus), 9000u);
}

TEST(LinkMtu, UnknownWhenNoInterfaceOrMtuIsKnown) {
  FakeInterfaces f = HostWithEthAndJumbo();
  const std::vector<Gid> elsewhere = {GidOf("192.0.2.1")};
  EXPECT_EQ(SmallestLinkMtuFrom(f.list(), elsewhere, kMtus), 0u);
  const std::vector<Gid> eth = {GidOf("10.0.0.5")};
  EXPECT_EQ(SmallestLinkMtuFrom(f.list(), eth, MtusOf({})), 0u);
  // An unknown interface does not hide a known one.
  const std::vector<Gid> both = {GidOf("10.0.0.5"), GidOf("10.1.0.5")};
  EXPECT_EQ(SmallestLinkMtuFrom(f.list(), both, MtusOf({{"jumbo0", 9000}})), 9000u);
  EXPECT_EQ(SmallestLinkMtuFrom(nullptr, both, kMtus), 0u);
}

// The real interface list: this host's loopback interface has an MTU (the
// per-process address of every device is on it).
TEST(LinkMtu, ThisHostsLoopback) {
  const std::vector<Gid> gids = {GidOf("127.0.0.1")};
  EXPECT_GT(SmallestLinkMtu(gids), 0u);
}

}  // namespace
}  // namespace softrnic::transport
