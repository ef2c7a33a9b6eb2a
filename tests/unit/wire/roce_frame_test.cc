// RoCE v2 frames as captures render them (src/wire/roce_frame.h): the
// Ethernet/IPv4/UDP headers are well-formed and the ICRC holds for them.
#include "wire/roce_frame.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "wire/icrc.h"

namespace softrnic::wire {
namespace {

uint16_t Be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

TEST(RoceFrame, HeadersAndIcrcAreThoseOfTheWire) {
  FrameAddresses a;
  a.src_ip = inet_addr("10.0.0.1");
  a.dst_ip = inet_addr("10.0.0.2");
  a.src_port = 4791;
  a.dst_port = 4791;
  a.traffic_class = 0x02;
  std::vector<uint8_t> head(12, 0);
  head[0] = 0x04;  // RC SEND ONLY
  head[1] = 0x30;  // pad count 3 (payload of 5 bytes)
  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5};
  std::vector<uint8_t> f;
  BuildRoceFrame(a, head, payload, 3, &f);
  const uint32_t roce = 12 + 5 + 3 + 4;
  ASSERT_EQ(f.size(), kRoceFrameHeaderLength + roce);
  // Ethernet: locally administered unicast MACs from the IPv4 addresses.
  EXPECT_EQ(f[0], 0x02);
  EXPECT_EQ(std::memcmp(&f[2], &a.dst_ip, 4), 0);
  EXPECT_EQ(std::memcmp(&f[8], &a.src_ip, 4), 0);
  EXPECT_EQ(Be16(&f[12]), 0x0800);
  // IPv4: version/IHL, TOS, total length, DF, TTL, UDP; the checksum of a
  // correct header sums to 0xFFFF.
  const uint8_t* ip = &f[14];
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(ip[1], 0x02);
  EXPECT_EQ(Be16(ip + 2), 20 + 8 + roce);
  EXPECT_EQ(Be16(ip + 6), 0x4000);
  EXPECT_EQ(ip[9], 17);
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += Be16(ip + i);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  EXPECT_EQ(sum, 0xFFFFu);
  // UDP.
  const uint8_t* udp = ip + 20;
  EXPECT_EQ(Be16(udp + 2), 4791);
  EXPECT_EQ(Be16(udp + 4), 8 + roce);
  // BTH, payload, zero pad, then an ICRC valid for exactly these headers.
  const uint8_t* bth = udp + 8;
  EXPECT_EQ(std::memcmp(bth, head.data(), 12), 0);
  EXPECT_EQ(std::memcmp(bth + 12, payload.data(), 5), 0);
  EXPECT_EQ(bth[17] | bth[18] | bth[19], 0);
  IpUdpFields fields;
  std::memcpy(fields.src_ip, &a.src_ip, 4);
  std::memcpy(fields.dst_ip, &a.dst_ip, 4);
  fields.src_port = 4791;
  EXPECT_TRUE(CheckIcrc(fields, bth, roce));
  fields.ipv4_id = 1;
  EXPECT_FALSE(CheckIcrc(fields, bth, roce)) << "the ICRC covers the IPv4 ID the frame shows (0)";
}


// IPv6 (issue 15): EtherType 0x86DD, the IPv6 header, a UDP checksum that
// verifies over the IPv6 pseudo header, and an ICRC for the IPv6 headers
// (IBA A17.4.5.1) that ignores the traffic class.
TEST(RoceFrame, Ipv6HeadersUdpChecksumAndIcrc) {
  FrameAddresses a;
  a.ipv6 = true;
  inet_pton(AF_INET6, "fd77:243::1", a.src_ip6);
  inet_pton(AF_INET6, "fd77:243::2", a.dst_ip6);
  a.src_port = 49152;
  a.dst_port = 4791;
  a.traffic_class = 0xA6;
  std::vector<uint8_t> head(12, 0);
  head[0] = 0x04;
  head[1] = 0x10;  // pad count 1
  const std::vector<uint8_t> payload = {9, 8, 7};
  std::vector<uint8_t> f;
  BuildRoceFrame(a, head, payload, 1, &f);
  const uint32_t roce = 12 + 3 + 1 + 4;
  ASSERT_EQ(f.size(), kRoceFrameHeaderLengthIpv6 + roce);
  EXPECT_EQ(Be16(&f[12]), 0x86DD);
  EXPECT_EQ(f[0], 0x02);
  EXPECT_EQ(std::memcmp(&f[2], a.dst_ip6 + 12, 4), 0);
  const uint8_t* ip = &f[14];
  EXPECT_EQ(ip[0], 0x6A) << "version 6, traffic class high nibble";
  EXPECT_EQ(ip[1], 0x60) << "traffic class low nibble, flow label 0";
  EXPECT_EQ(Be16(ip + 4), 8 + roce);
  EXPECT_EQ(ip[6], 17);
  EXPECT_EQ(ip[7], 64);
  EXPECT_EQ(std::memcmp(ip + 8, a.src_ip6, 16), 0);
  EXPECT_EQ(std::memcmp(ip + 24, a.dst_ip6, 16), 0);
  const uint8_t* udp = ip + 40;
  EXPECT_EQ(Be16(udp), 49152);
  EXPECT_EQ(Be16(udp + 4), 8 + roce);
  EXPECT_NE(Be16(udp + 6), 0) << "IPv6 forbids a zero UDP checksum";
  // The one's-complement sum over pseudo header and datagram, checksum
  // included, is 0xFFFF.
  uint32_t sum = 0;
  for (int i = 0; i < 32; i += 2) sum += Be16(ip + 8 + i);
  sum += 8 + roce;
  sum += 17;
  for (uint32_t i = 0; i < 8 + roce; i += 2)
    sum += i + 1 < 8 + roce ? Be16(udp + i) : uint32_t{udp[i]} << 8;
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  EXPECT_EQ(sum, 0xFFFFu);
  const uint8_t* bth = udp + 8;
  EXPECT_EQ(std::memcmp(bth + 12, payload.data(), 3), 0);
  IpUdpFields fields;
  fields.ipv6 = true;
  std::memcpy(fields.src_ip, a.src_ip6, 16);
  std::memcpy(fields.dst_ip, a.dst_ip6, 16);
  fields.src_port = 49152;
  EXPECT_TRUE(CheckIcrc(fields, bth, roce));
  fields.ipv6 = false;
  EXPECT_FALSE(CheckIcrc(fields, bth, roce)) << "framed for IPv6, not IPv4";
  // Another traffic class: the same ICRC (masked).
  a.traffic_class = 0;
  std::vector<uint8_t> g;
  BuildRoceFrame(a, head, payload, 1, &g);
  EXPECT_EQ(std::memcmp(&g[g.size() - 4], &f[f.size() - 4], 4), 0);
}

}  // namespace
}  // namespace softrnic::wire
