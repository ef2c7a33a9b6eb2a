// A forwarded lease's channel (transport/host_nic/protocol.h): root's nicd
// writes a ForwardHeader and then the UDP datagram it received; the
// process's receive path (OpenForwardedDatagram, SetDatagramAddresses, then
// the DatagramSplitter every UDP datagram goes through) must take exactly
// that and drop anything else as a runt: a channel datagram cut anywhere,
// one without the magic, a source longer than its field, cut short or of
// the other family. fuzz/udp_receive_fuzzer.cc attacks the same functions
// with mutated channel datagrams.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transport/host_nic/protocol.h"
#include "transport/udp_receive.h"
#include "wire/icrc.h"

namespace softrnic::transport {
namespace {

using host_nic::ForwardHeader;

constexpr uint16_t kPort = 4791;

uint32_t Ipv4(const char* text) {
  in_addr a{};
  inet_pton(AF_INET, text, &a);
  return a.s_addr;
}

const Endpoint kLocal{Gid::FromIpv4(Ipv4("10.0.0.1")), kPort};
const uint32_t kSenderIp = Ipv4("10.0.0.2");
constexpr uint16_t kSenderPort = 49152;

sockaddr_in Sender() {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = kSenderIp;
  sin.sin_port = htons(kSenderPort);
  return sin;
}

// An RC SEND_ONLY-shaped packet of `length` bytes (BTH, payload, ICRC) whose
// ICRC is right from the sender to kLocal with IPv4 ID 0.
std::vector<uint8_t> Packet(uint32_t length) {
  std::vector<uint8_t> p(length, 0x5A);
  p[0] = 0x04;
  p[1] = 0;
  wire::IpUdpFields ip;
  std::memcpy(ip.src_ip, &kSenderIp, 4);
  const uint32_t dst = kLocal.gid.Ipv4();
  std::memcpy(ip.dst_ip, &dst, 4);
  ip.src_port = kSenderPort;
  ip.dst_port = kPort;
  wire::AppendIcrc(ip, p.data(), p.size());
  return p;
}

// What nicd puts on the channel for `datagram` received from `source`.
std::vector<uint8_t> ChannelDatagram(const std::vector<uint8_t>& datagram, const void* source,
                                     uint8_t source_length, uint16_t gro = 0, uint8_t tclass = 0) {
  ForwardHeader fh;
  fh.gro_segment_size = gro;
  fh.traffic_class = tclass;
  fh.source_length = source_length;
  std::memcpy(fh.source, source, std::min<size_t>(source_length, sizeof(fh.source)));
  std::vector<uint8_t> out(sizeof(fh) + datagram.size());
  std::memcpy(out.data(), &fh, sizeof(fh));
  std::memcpy(out.data() + sizeof(fh), datagram.data(), datagram.size());
  return out;
}

struct Outcome {
  int packets = 0;
  uint64_t runts = 0;
  RxPacket first;
  ReceivedDatagram d;
};

// The receive path of a forwarded socket bound to kLocal, as
// UdpTransport::SplitDatagram runs it. The channel datagram lives in a
// buffer of exactly its size, so ASan reports any read past it.
Outcome Receive(const std::vector<uint8_t>& channel) {
  std::vector<uint8_t> buf(channel);
  Outcome o;
  sockaddr_storage source;
  socklen_t source_length = 0;
  OpenForwardedDatagram(buf.data(), static_cast<uint32_t>(buf.size()), &o.d, &source,
                        &source_length);
  SetDatagramAddresses(reinterpret_cast<const sockaddr*>(&source), source_length, kLocal, &o.d);
  TransportCounters counters;
  DatagramSplitter splitter(&counters);
  RxPacket out[8];
  uint32_t next = 0;
  EXPECT_TRUE(splitter.Split(o.d, 0, 1'000'000'000, &next, out, 8, &o.packets));
  o.runts = counters.rx_runts;
  if (o.packets > 0) {
    o.first = out[0];
    // The packet is the forwarded datagram, inside the channel datagram.
    EXPECT_GE(out[0].data, buf.data() + sizeof(ForwardHeader));
    EXPECT_LE(out[0].data + out[0].length, buf.data() + buf.size());
    o.first.data = nullptr;  // buf dies here
  }
  return o;
}

TEST(UdpForwarded, AWholeChannelDatagramIsTheForwardedPacketFromItsSource) {
  const sockaddr_in sin = Sender();
  const Outcome o = Receive(ChannelDatagram(Packet(64), &sin, sizeof(sin), 0, 0x02));
  ASSERT_EQ(o.packets, 1);
  EXPECT_EQ(o.first.length, 64u);
  EXPECT_EQ(o.first.src.gid.Ipv4(), kSenderIp);
  EXPECT_EQ(o.first.src.port, kSenderPort);
  EXPECT_EQ(o.first.traffic_class, 0x02);
  EXPECT_EQ(o.runts, 0u);
}

TEST(UdpForwarded, AChannelDatagramCutAnywhereIsARuntAndNeverAPacket) {
  const sockaddr_in sin = Sender();
  const std::vector<uint8_t> whole = ChannelDatagram(Packet(64), &sin, sizeof(sin));
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    const std::vector<uint8_t> part(whole.begin(), whole.begin() + static_cast<long>(cut));
    const Outcome o = Receive(part);
    EXPECT_EQ(o.packets, 0) << "cut at " << cut;
    // Cut inside the header: no datagram, a runt. Cut inside the packet:
    // a runt while shorter than BTH + ICRC, else an ICRC error.
    if (cut < sizeof(ForwardHeader) + 16) {
      EXPECT_EQ(o.runts, 1u) << "cut at " << cut;
    }
  }
}

TEST(UdpForwarded, AnotherMagicIsARunt) {
  const sockaddr_in sin = Sender();
  std::vector<uint8_t> channel = ChannelDatagram(Packet(64), &sin, sizeof(sin));
  channel[0] ^= 0x01;
  const Outcome o = Receive(channel);
  EXPECT_EQ(o.packets, 0);
  EXPECT_EQ(o.runts, 1u);
  EXPECT_EQ(o.d.length, 0u);
}

TEST(UdpForwarded, ASourceLongerThanItsFieldIsARunt) {
  const sockaddr_in sin = Sender();
  std::vector<uint8_t> channel = ChannelDatagram(Packet(64), &sin, sizeof(sin));
  channel[offsetof(ForwardHeader, source_length)] = sizeof(ForwardHeader::source) + 1;
  const Outcome o = Receive(channel);
  EXPECT_EQ(o.packets, 0);
  EXPECT_EQ(o.runts, 1u);
}

TEST(UdpForwarded, ASourceCutShortOrOfTheOtherFamilyIsARunt) {
  const sockaddr_in sin = Sender();
  // An AF_INET source one byte short of a sockaddr_in.
  Outcome o = Receive(ChannelDatagram(Packet(64), &sin, sizeof(sin) - 1));
  EXPECT_EQ(o.packets, 0);
  EXPECT_EQ(o.runts, 1u);
  // No source at all.
  o = Receive(ChannelDatagram(Packet(64), &sin, 0));
  EXPECT_EQ(o.packets, 0);
  EXPECT_EQ(o.runts, 1u);
  // An IPv6 source for an IPv4 socket (IPv6 sockets are V6ONLY, so the
  // kernel never hands one a datagram of the other family).
  sockaddr_in6 sin6{};
  sin6.sin6_family = AF_INET6;
  sin6.sin6_port = htons(kSenderPort);
  inet_pton(AF_INET6, "fd00::2", &sin6.sin6_addr);
  o = Receive(ChannelDatagram(Packet(64), &sin6, sizeof(sin6)));
  EXPECT_EQ(o.packets, 0);
  EXPECT_EQ(o.runts, 1u);
  // A family that is neither.
  sockaddr_in unix_family = sin;
  unix_family.sin_family = AF_UNIX;
  o = Receive(ChannelDatagram(Packet(64), &unix_family, sizeof(unix_family)));
  EXPECT_EQ(o.packets, 0);
  EXPECT_EQ(o.runts, 1u);
}

TEST(UdpForwarded, ASegmentSizeNotBelowTheDatagramMeansOnePacket) {
  const sockaddr_in sin = Sender();
  for (uint16_t gro : {uint16_t{64}, uint16_t{65}, uint16_t{0xFFFF}}) {
    const Outcome o = Receive(ChannelDatagram(Packet(64), &sin, sizeof(sin), gro));
    EXPECT_EQ(o.d.gro_segment_size, 0u) << gro;
    EXPECT_EQ(o.packets, 1) << gro;
  }
}

TEST(UdpForwarded, ACoalescedRunIsCutAtTheHeadersSegmentSize) {
  const sockaddr_in sin = Sender();
  std::vector<uint8_t> run = Packet(64);
  const std::vector<uint8_t> tail = Packet(40);
  run.insert(run.end(), tail.begin(), tail.end());
  // The second segment's ICRC is right for ID 0, not the run's ID 1, and the
  // first segment makes its sender known: accepted after an ID retry.
  const Outcome o = Receive(ChannelDatagram(run, &sin, sizeof(sin), 64));
  EXPECT_EQ(o.d.gro_segment_size, 64u);
  EXPECT_EQ(o.packets, 2);
}

}  // namespace
}  // namespace softrnic::transport
