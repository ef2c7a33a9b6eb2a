// Finding M7 of the security review: the ICRC IPv4-ID retry (docs/wire.md,
// "UDP segmentation offload and the IPv4 ID") must not let junk traffic buy
// 64 CRCs per datagram. A packet whose ICRC fails with the ID it should have
// is tried with other IDs only when it could be a segment of a GSO run (at
// most one path MTU long) from a source that recently sent valid traffic.
// Real sockets on loopback addresses: a plain UDP socket plays the sender.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
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

}  // namespace
}  // namespace softrnic::transport
