// The GID table's addresses: which interface addresses a device binds
// automatically and in what order, explicit bind-address text, and the
// socket-address conversions the UDP transport uses for IPv4 and IPv6.
#include "transport/local_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <net/if.h>

#include <string>
#include <vector>

#include "fake_interfaces.h"

namespace softrnic::transport {
namespace {

TEST(HostAddresses, Ipv4FirstThenIpv6GlobalAndLinkLocalInListOrder) {
  FakeInterfaces f;
  f.Add("lo", kLoop, "127.0.0.1")
      .Add("lo", kLoop, "::1")
      .Add("veth0", kUp, "fd77:243::1")
      .Add("veth0", kUp, "fe80::1", 7)
      .Add("veth0", kUp, nullptr)  // an AF_PACKET entry has no address here
      .Add("eth0", kUp, "10.243.0.1")
      .Add("eth0", kUp, "2001:db8::5")
      .Add("down0", 0, "10.9.9.9")
      .Add("down0", 0, "fd00::9")
      .Add("eth0", kUp, "ff02::1")        // multicast: never a source
      .Add("eth0", kUp, "::ffff:1.2.3.4")  // mapped: bound as IPv4 if at all
      .Add("eth0", kUp, "::")
      .Add("eth0", kUp, "10.243.0.1")  // listed twice
      .Add("eth1", kUp, "fe80::1", 8);  // same link-local on another link
  const std::vector<LocalAddress> got = HostAddressesFrom(f.list());
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].gid, GidOf("10.243.0.1"));
  EXPECT_EQ(got[0].ifname, "eth0");
  EXPECT_EQ(got[1].gid, GidOf("fd77:243::1"));
  EXPECT_EQ(got[1].scope_id, 0u);
  EXPECT_EQ(got[1].ifname, "veth0");
  EXPECT_EQ(got[2].gid, GidOf("fe80::1"));
  EXPECT_EQ(got[2].scope_id, 7u);
  EXPECT_EQ(got[3].gid, GidOf("2001:db8::5"));
  EXPECT_EQ(got[4].gid, GidOf("fe80::1"));
  EXPECT_EQ(got[4].scope_id, 8u);
  EXPECT_EQ(got[4].ifname, "eth1");
}

TEST(HostAddresses, Ipv6OnlyHostGetsItsIpv6Gids) {
  // The case of issue 15: a namespace with fd77::1/64 on a veth and nothing
  // else used to get no GID but the per-process 127.x one.
  FakeInterfaces f;
  f.Add("lo", kLoop, "::1").Add("veth1", kUp, "fd77::1").Add("veth1", kUp, "fe80::2", 3);
  const std::vector<LocalAddress> got = HostAddressesFrom(f.list());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].gid.ToString(), "fd77::1");
  EXPECT_FALSE(got[0].gid.IsV4Mapped());
  EXPECT_EQ(got[1].gid.ToString(), "fe80::2");
  EXPECT_TRUE(IsIpv6LinkLocal(got[1].gid));
  EXPECT_FALSE(IsIpv6LinkLocal(got[0].gid));
  EXPECT_TRUE(HostAddressesFrom(nullptr).empty());
}

TEST(BindAddress, ParsesIpv4Ipv6AndScopedLinkLocal) {
  const std::vector<LocalAddress> host = {
      LocalAddress{GidOf("fe80::5"), 4, "veth9"},
      LocalAddress{GidOf("fd77:243::2"), 0, "veth9"},
  };
  LocalAddress a;
  std::string error;
  ASSERT_TRUE(ParseBindAddress("10.243.0.2", host, &a, &error)) << error;
  EXPECT_EQ(a.gid, GidOf("10.243.0.2"));
  ASSERT_TRUE(ParseBindAddress("fd77:243::2", host, &a, &error)) << error;
  EXPECT_EQ(a.gid, GidOf("fd77:243::2"));
  EXPECT_EQ(a.scope_id, 0u);
  EXPECT_EQ(a.ifname, "veth9");
  // A link-local address without its interface takes the host's.
  ASSERT_TRUE(ParseBindAddress("fe80::5", host, &a, &error)) << error;
  EXPECT_EQ(a.scope_id, 4u);
  // By number, and by name (the loopback interface exists everywhere).
  ASSERT_TRUE(ParseBindAddress("fe80::5%12", host, &a, &error)) << error;
  EXPECT_EQ(a.scope_id, 12u);
  ASSERT_TRUE(ParseBindAddress("fe80::7%lo", host, &a, &error)) << error;
  EXPECT_EQ(a.scope_id, if_nametoindex("lo"));
  EXPECT_EQ(a.ifname, "lo");
  ASSERT_TRUE(ParseBindAddress("::1", host, &a, &error)) << error;
  EXPECT_EQ(a.gid.ToString(), "::1");
}

TEST(BindAddress, RejectsWhatCannotBeASourceWithTheReason) {
  const std::vector<LocalAddress> host;
  struct Case {
    const char* text;
    const char* mentions;
  } cases[] = {
      {"0.0.0.0", "unicast"},          {"255.255.255.255", "unicast"},
      {"::", "unicast"},               {"ff02::1", "unicast"},
      {"::ffff:10.0.0.1", "IPv4-mapped"}, {"fe80::9", "link-local"},
      {"fe80::9%", "empty interface"}, {"fe80::9%no-such-if0", "no interface"},
      {"not-an-ip", "not an IPv4 or IPv6"}, {"10.0.0.300", "not an IPv4 or IPv6"},
  };
  for (const Case& k : cases) {
    LocalAddress a;
    std::string error;
    EXPECT_FALSE(ParseBindAddress(k.text, host, &a, &error)) << k.text;
    EXPECT_NE(error.find(k.mentions), std::string::npos) << k.text << ": " << error;
    EXPECT_NE(error.find(k.text), std::string::npos) << error;
  }
}

TEST(SocketAddress, RoundTripsBothFamilies) {
  sockaddr_in6 sa{};
  Endpoint v4{GidOf("10.243.0.1"), 4791};
  ASSERT_EQ(ToSockaddr(v4, 0, &sa), sizeof(sockaddr_in));
  const auto* sin = reinterpret_cast<const sockaddr_in*>(&sa);
  EXPECT_EQ(sin->sin_family, AF_INET);
  EXPECT_EQ(ntohs(sin->sin_port), 4791);
  Endpoint back;
  uint32_t scope = 99;
  ASSERT_TRUE(FromSockaddr(reinterpret_cast<const sockaddr*>(&sa), sizeof(sockaddr_in), &back,
                           &scope));
  EXPECT_EQ(back, v4);
  EXPECT_EQ(scope, 0u);

  Endpoint v6{GidOf("fe80::1"), 1234};
  ASSERT_EQ(ToSockaddr(v6, 5, &sa), sizeof(sockaddr_in6));
  EXPECT_EQ(sa.sin6_family, AF_INET6);
  EXPECT_EQ(sa.sin6_scope_id, 5u);
  ASSERT_TRUE(FromSockaddr(reinterpret_cast<const sockaddr*>(&sa), sizeof(sa), &back, &scope));
  EXPECT_EQ(back, v6);
  EXPECT_EQ(scope, 5u);
  // Too short for its family, or another family: not an endpoint.
  EXPECT_FALSE(FromSockaddr(reinterpret_cast<const sockaddr*>(&sa), sizeof(sockaddr_in), &back,
                            nullptr));
  sa.sin6_family = AF_UNIX;
  EXPECT_FALSE(FromSockaddr(reinterpret_cast<const sockaddr*>(&sa), sizeof(sa), &back, nullptr));
}

}  // namespace
}  // namespace softrnic::transport
