// Finding M7 of the security review: the ICRC IPv4-ID retry (docs/wire.md,
// "UDP segmentation offload and the IPv4 ID") must not let junk traffic buy
// 64 CRCs per datagram. A packet whose ICRC fails with the ID it should have
// is tried with other IDs only when it could be a segment of a GSO run (at
// most one path MTU long) from a source that recently sent valid traffic.
// Real sockets on loopback addresses: a plain UDP socket plays the sender.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/secure_random.h"
#include "transport/udp_receive.h"
#include "transport/udp_transport.h"
#include "wire/icrc.h"

namespace softrnic::transport {
namespace {

uint32_t Ipv4(const char* text) {
  in_addr a{};
  inet_pton(AF_INET, text, &a);
  return a.s_addr;
}

std::unique_ptr<Transport> MakeReceiver(const char* address) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    UdpConfig config;
    config.bind_addresses = {address};
    config.port = static_cast<uint16_t>(20000 + SecureRandomBelow(40000));
    std::string error;
    if (auto t = CreateUdpTransport(config, &error)) return t;
  }
  return nullptr;
}

// A plain unconnected UDP socket with DF set, bound to `ip` on any port.
int PlainSocket(const char* ip, Endpoint* bound) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const int pmtu = IP_PMTUDISC_DO;
  setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = Ipv4(ip);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0) {
    close(fd);
    return -1;
  }
  socklen_t len = sizeof(sin);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len);
  *bound = Endpoint{Gid::FromIpv4(sin.sin_addr.s_addr), ntohs(sin.sin_port)};
  return fd;
}

void SendRaw(int fd, const Endpoint& dst, const std::vector<uint8_t>& p) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = dst.gid.Ipv4();
  sin.sin_port = htons(dst.port);
  ASSERT_EQ(sendto(fd, p.data(), p.size(), 0, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)),
            static_cast<ssize_t>(p.size()));
}

// An RC SEND_ONLY-shaped packet of `length` bytes whose ICRC is right for
// IPv4 ID `ipv4_id` between `src` and `dst`.
std::vector<uint8_t> PacketWithId(const Endpoint& src, const Endpoint& dst, uint32_t length,
                                  uint16_t ipv4_id, uint8_t fill) {
  std::vector<uint8_t> p(length, fill);
  p[0] = 0x04;
  p[4] = 0;
  wire::IpUdpFields ip;
  std::memcpy(ip.src_ip, &src.gid.raw[12], 4);
  std::memcpy(ip.dst_ip, &dst.gid.raw[12], 4);
  ip.src_port = src.port;
  ip.dst_port = dst.port;
  ip.ipv4_id = ipv4_id;
  wire::AppendIcrc(ip, p.data(), p.size());
  return p;
}

// Receives until nothing arrives for `quiet_ms`; returns the packet count.
size_t Drain(Transport& t, int quiet_ms = 150) {
  size_t count = 0;
  RxPacket rx[32];
  for (;;) {
    const int n = t.RecvBurst(rx, 32);
    count += static_cast<size_t>(n);
    if (n > 0) continue;
    epoll_event ev;
    if (epoll_wait(t.pollable_fd(), &ev, 1, quiet_ms) <= 0 && t.RecvBurst(rx, 32) == 0) break;
  }
  return count;
}

struct Pair {
  std::unique_ptr<Transport> receiver;
  Endpoint dst;
  int sender_fd = -1;
  Endpoint src;
  ~Pair() {
    if (sender_fd >= 0) close(sender_fd);
  }
};

void MakePair(const char* receiver_ip, const char* sender_ip, Pair* pair) {
  pair->receiver = MakeReceiver(receiver_ip);
  ASSERT_NE(pair->receiver, nullptr);
  pair->dst = pair->receiver->locals()[0];
  pair->sender_fd = PlainSocket(sender_ip, &pair->src);
  ASSERT_GE(pair->sender_fd, 0);
}

TEST(UdpIcrcIdRetry, DatagramLongerThanAPathMtuGetsNoIdRetry) {
  // The sender is known (it just sent a valid packet), but an 8000-byte
  // datagram cannot be a segment of a GSO run (segments are at most one
  // path MTU): it is checked with ID 0 only. Before the fix it was tried
  // with 63 more IDs, and one made for ID 5 was accepted.
  Pair p;
  MakePair("127.10.40.1", "127.10.40.9", &p);
  SendRaw(p.sender_fd, p.dst, PacketWithId(p.src, p.dst, 600, 0, 0x11));
  ASSERT_EQ(Drain(*p.receiver), 1u);
  SendRaw(p.sender_fd, p.dst, PacketWithId(p.src, p.dst, 8000, 5, 0x22));
  EXPECT_EQ(Drain(*p.receiver), 0u);
  const TransportCounters& c = p.receiver->counters();
  EXPECT_EQ(c.rx_icrc_errors, 1u);
  EXPECT_EQ(c.rx_icrc_id_retries, 0u);
  EXPECT_EQ(c.rx_icrc_id_retry_crcs, 0u) << "an 8000-byte datagram paid for ID retries";
}

TEST(UdpIcrcIdRetry, SourceWithoutRecentValidTrafficGetsNoIdRetry) {
  // A run segmented on the way starts with ID 0, which passes at once and
  // makes the source known. A source that never sent a valid packet gets
  // one CRC per datagram: before the fix a packet made for ID 7 from a
  // stranger was accepted after 8 CRCs, and junk cost 64.
  Pair p;
  MakePair("127.10.41.1", "127.10.41.9", &p);
  SendRaw(p.sender_fd, p.dst, PacketWithId(p.src, p.dst, 500, 7, 0x33));
  auto junk = PacketWithId(p.src, p.dst, 1000, 0, 0x44);
  junk.back() ^= 0x01;
  for (int i = 0; i < 10; ++i) SendRaw(p.sender_fd, p.dst, junk);
  EXPECT_EQ(Drain(*p.receiver), 0u);
  const TransportCounters& c = p.receiver->counters();
  EXPECT_EQ(c.rx_icrc_errors, 11u);
  EXPECT_EQ(c.rx_icrc_id_retries, 0u);
  EXPECT_EQ(c.rx_icrc_id_retry_crcs, 0u) << "junk from a stranger paid for ID retries";
}

TEST(UdpIcrcIdRetry, RunCutOnTheWayFromAKnownSourceIsAccepted) {
  // What the retry exists for: a GSO run that arrives as single datagrams
  // with IDs 0, 1, 2, ... (a NIC or a veth without GRO cut it). Its first
  // datagram (ID 0) makes the source known; the others pass with a retry,
  // and their retries are counted. Junk from the known source still costs
  // at most the retry budget and is counted too.
  Pair p;
  MakePair("127.10.42.1", "127.10.42.9", &p);
  for (uint16_t k = 0; k < 5; ++k) SendRaw(p.sender_fd, p.dst, PacketWithId(p.src, p.dst, 1040, k, 0x55));
  EXPECT_EQ(Drain(*p.receiver), 5u);
  const TransportCounters& c = p.receiver->counters();
  EXPECT_EQ(c.rx_icrc_errors, 0u);
  EXPECT_EQ(c.rx_icrc_id_retries, 4u);
  EXPECT_GE(c.rx_icrc_id_retry_crcs, 4u);
  EXPECT_LE(c.rx_icrc_id_retry_crcs, 4u * 63u);
  const uint64_t before = c.rx_icrc_id_retry_crcs;
  auto junk = PacketWithId(p.src, p.dst, 1040, 0, 0x66);
  junk.back() ^= 0x01;
  SendRaw(p.sender_fd, p.dst, junk);
  EXPECT_EQ(Drain(*p.receiver), 0u);
  EXPECT_EQ(c.rx_icrc_errors, 1u);
  EXPECT_GT(c.rx_icrc_id_retry_crcs, before);
  EXPECT_LE(c.rx_icrc_id_retry_crcs - before, 63u);
}

// The same rules on DatagramSplitter directly (no sockets): time, GRO
// coalescing and hostile control messages.
struct SplitterFixture {
  TransportCounters counters;
  DatagramSplitter splitter{&counters};
  static constexpr uint32_t kSrc = 0x0200000A, kDst = 0x0100000A;

  // `count` packets of `length` bytes back to back, packet k's ICRC made for
  // IPv4 ID first_id + k.
  std::vector<uint8_t> Run(uint32_t count, uint32_t length, uint16_t first_id) {
    std::vector<uint8_t> out;
    const Endpoint src{Gid::FromIpv4(kSrc), 4791}, dst{Gid::FromIpv4(kDst), 4791};
    for (uint32_t k = 0; k < count; ++k) {
      auto p = PacketWithId(src, dst, length, static_cast<uint16_t>(first_id + k),
                            static_cast<uint8_t>(k + 1));
      out.insert(out.end(), p.begin(), p.end());
    }
    return out;
  }
  int Split(std::vector<uint8_t>& bytes, uint64_t now_ns, uint32_t gro = 0) {
    ReceivedDatagram d;
    d.data = bytes.data();
    d.length = static_cast<uint32_t>(bytes.size());
    d.source_is_ipv4 = true;
    d.src_ip = kSrc;
    d.src_port = 4791;
    d.dst_ip = kDst;
    d.dst_port = 4791;
    d.gro_segment_size = gro;
    RxPacket out[32];
    int produced = 0;
    uint32_t next = 0;
    EXPECT_TRUE(splitter.Split(d, 0, now_ns, &next, out, 32, &produced));
    return produced;
  }
};

TEST(UdpIcrcIdRetry, ASourceIsForgottenTwoSecondsAfterItsLastValidPacket) {
  SplitterFixture f;
  auto first = f.Run(1, 300, 0);
  EXPECT_EQ(f.Split(first, 1'000'000'000), 1);
  auto later = f.Run(1, 300, 3);
  EXPECT_EQ(f.Split(later, 2'500'000'000), 1);  // 1.5 s later: retried, accepted
  EXPECT_EQ(f.counters.rx_icrc_id_retries, 1u);
  EXPECT_EQ(f.Split(later, 4'600'000'000), 0);  // 2.1 s after the last valid one
  EXPECT_EQ(f.counters.rx_icrc_errors, 1u);
  EXPECT_EQ(f.counters.rx_icrc_id_retries, 1u);
}

TEST(UdpIcrcIdRetry, CoalescedDatagramNeedsAKnownSourceOrAValidFirstSegment) {
  // GRO merged the tail of a run (IDs 5, 6, 7 at indices 0, 1, 2): from a
  // stranger nothing is retried; once the source is known all pass.
  SplitterFixture f;
  auto tail = f.Run(3, 1040, 5);
  EXPECT_EQ(f.Split(tail, 1'000'000'000, 1040), 0);
  EXPECT_EQ(f.counters.rx_icrc_id_retry_crcs, 0u);
  EXPECT_EQ(f.counters.rx_icrc_errors, 3u);
  auto head = f.Run(1, 1040, 0);
  EXPECT_EQ(f.Split(head, 1'000'000'001), 1);
  EXPECT_EQ(f.Split(tail, 1'000'000'002, 1040), 3);
  EXPECT_EQ(f.counters.rx_icrc_id_retries, 3u);
  // A whole run (IDs 0..3) from a stranger needs no retry at all, and its
  // first segment makes the source known for the rest of the datagram.
  SplitterFixture g;
  auto run = g.Run(4, 1040, 0);
  EXPECT_EQ(g.Split(run, 1, 1040), 4);
  EXPECT_EQ(g.counters.rx_icrc_id_retry_crcs, 0u);
}

TEST(UdpIcrcIdRetry, ControlMessageRunningPastTheBufferIsIgnored) {
  // A UDP_GRO cmsg whose cmsg_len claims more than msg_controllen holds:
  // its data would lie outside the buffer, so it is not read.
  alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(int))] = {};
  msghdr h{};
  h.msg_control = control;
  h.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = SOL_UDP;
  c->cmsg_type = 104;  // UDP_GRO
  c->cmsg_len = CMSG_LEN(sizeof(int));
  const int size = 1000;
  std::memcpy(CMSG_DATA(c), &size, sizeof(size));
  uint32_t gro = 0;
  uint8_t tos = 0;
  ReadReceiveControl(h, 5000, &gro, &tos);
  EXPECT_EQ(gro, 1000u);
  c->cmsg_len = 4096;
  ReadReceiveControl(h, 5000, &gro, &tos);
  EXPECT_EQ(gro, 0u);
  ReadReceiveControl(h, 1000, &gro, &tos);  // not below the datagram length
  EXPECT_EQ(gro, 0u);
}

}  // namespace
}  // namespace softrnic::transport
