// The UDP transport with real sockets on loopback addresses.
#include "transport/udp_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "faults/scenario.h"
#include "transport/factory.h"
#include "transport/fault_transport.h"
#include "transport/local_address.h"
#include "wire/icrc.h"

namespace softrnic::transport::test_helpers {

inline uint16_t RandomHighPort() {
  static std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(getpid()));
  return static_cast<uint16_t>(20000 + rng() % 40000);
}

inline uint32_t Ipv4(const char* text) {
  in_addr a{};
  inet_pton(AF_INET, text, &a);
  return a.s_addr;
}

inline Endpoint EndpointOf(const char* ip, uint16_t port) {
  return Endpoint{Gid::FromIpv4(Ipv4(ip)), port};
}

// Faults on the packets a transport sends, as a one-rule scenario
// (faults/scenario.h): the knobs of the old SOFTRNIC_FAULTS, plus `nth`.
struct TestFaults {
  double drop = 0, duplicate = 0, reorder = 0, corrupt = 0;
  uint64_t seed = 1;
  std::optional<uint64_t> nth;
  faults::Scenario ToScenario() const {
    faults::Scenario s;
    s.seed = seed;
    if (drop == 0 && duplicate == 0 && reorder == 0 && corrupt == 0) return s;
    faults::Rule r;
    r.match.direction = faults::Direction::kOut;
    r.match.nth = nth;
    r.action.drop = drop;
    r.action.duplicate = duplicate;
    r.action.reorder = reorder;
    r.action.corrupt = corrupt;
    s.rules.push_back(r);
    return s;
  }
};

// Creates a transport bound to `addresses` on a random high port, retrying
// with another port if one is taken (parallel test runs).
inline std::unique_ptr<Transport> MakeExplicit(const std::vector<std::string>& addresses,
                                               uint16_t* port_out = nullptr,
                                               TestFaults faults = {},
                                               bool segmentation = true) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    UdpConfig config;
    config.bind_addresses = addresses;
    config.port = RandomHighPort();
    config.faults = faults.ToScenario();
    config.segmentation = segmentation;
    std::string error;
    // Through the factory: it wraps the UDP transport in fault injection
    // when `faults` asks for it (fault_transport.h).
    auto t = CreateTransport(config, TransportMode::kUdp, &error);
    if (t) {
      if (port_out) *port_out = config.port;
      return t;
    }
  }
  return nullptr;
}

// A BTH-shaped test packet: 12 "BTH" bytes, a 4-byte sequence number, a
// pattern, then 4 bytes of ICRC room filled with 0xEE (the transport must
// not write into the caller's buffer).
inline std::vector<uint8_t> MakePacket(uint32_t seq, uint32_t length) {
  std::vector<uint8_t> p(length);
  for (uint32_t i = 0; i < length; ++i) p[i] = static_cast<uint8_t>(i * 7 + seq * 13 + 1);
  // A request opcode (RC SEND_ONLY): RC responses would be steered to the
  // endpoint's reply socket (see ResponsesArriveOnTheReplySocket).
  p[0] = 0x04;
  p[4] = 0;  // FECN/BECN/resv6 byte
  if (length >= 20) std::memcpy(&p[12], &seq, 4);
  for (uint32_t i = length - 4; i < length; ++i) p[i] = 0xEE;
  return p;
}

inline uint32_t SeqOf(const std::vector<uint8_t>& p) {
  uint32_t seq = 0;
  std::memcpy(&seq, &p[12], 4);
  return seq;
}

struct Received {
  std::vector<uint8_t> bytes;
  Endpoint src;
  uint16_t local_index = 0;
};

// Receives until `expected` packets arrived or `timeout_ms` passed, sleeping
// on pollable_fd in between.
inline std::vector<Received> RecvUpTo(Transport& t, size_t expected, int timeout_ms = 2000) {
  std::vector<Received> out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  RxPacket rx[32];
  while (out.size() < expected) {
    const int n = t.RecvBurst(rx, 32);
    for (int i = 0; i < n; ++i) {
      out.push_back(Received{std::vector<uint8_t>(rx[i].data, rx[i].data + rx[i].length), rx[i].src,
                             rx[i].local_index});
    }
    if (n > 0) continue;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    epoll_event ev;
    (void)epoll_wait(t.pollable_fd(), &ev, 1, static_cast<int>(left.count()));
  }
  return out;
}

// Sends all packets, retrying the unsent tail (SendBurst may return fewer).
inline void SendAll(Transport& t, std::vector<TxPacket>& packets) {
  size_t off = 0;
  int spins = 0;
  while (off < packets.size() && spins < 100000) {
    const int n = t.SendBurst(packets.data() + off, static_cast<int>(packets.size() - off));
    off += static_cast<size_t>(n);
    if (n == 0) ++spins;
  }
}

}  // namespace softrnic::transport::test_helpers

namespace softrnic::transport {
namespace {

using namespace test_helpers;

wire::IpUdpFields Fields(const Endpoint& src, const Endpoint& dst) {
  wire::IpUdpFields ip;
  if (!src.gid.IsV4Mapped()) {
    ip.ipv6 = true;
    std::memcpy(ip.src_ip, src.gid.raw.data(), 16);
    std::memcpy(ip.dst_ip, dst.gid.raw.data(), 16);
  } else {
    std::memcpy(ip.src_ip, &src.gid.raw[12], 4);
    std::memcpy(ip.dst_ip, &dst.gid.raw[12], 4);
  }
  ip.src_port = src.port;
  ip.dst_port = dst.port;
  return ip;
}

// A plain unconnected UDP socket with DF set, like the transport's.
int PlainSocket(const char* ip, uint16_t port, Endpoint* bound) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const int pmtu = IP_PMTUDISC_DO;
  setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = Ipv4(ip);
  sin.sin_port = htons(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0) {
    close(fd);
    return -1;
  }
  socklen_t len = sizeof(sin);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len);
  *bound = Endpoint{Gid::FromIpv4(sin.sin_addr.s_addr), ntohs(sin.sin_port)};
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void SendRaw(int fd, const Endpoint& dst, const uint8_t* data, size_t length) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = dst.gid.Ipv4();
  sin.sin_port = htons(dst.port);
  ASSERT_EQ(sendto(fd, data, length, 0, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)),
            static_cast<ssize_t>(length));
}

std::vector<TxPacket> Tx(const std::vector<std::vector<uint8_t>>& bufs, const Endpoint& dst,
                         uint16_t local_index = 0) {
  std::vector<TxPacket> tx;
  for (const auto& b : bufs) {
    tx.push_back(TxPacket{b.data(), static_cast<uint32_t>(b.size()), local_index, dst});
  }
  return tx;
}

// Counts received packets after no more arrive for `quiet_ms`.
std::vector<Received> Drain(Transport& t, int quiet_ms = 100) {
  return RecvUpTo(t, SIZE_MAX, quiet_ms);
}

TEST(UdpTransport, ExplicitBindListsLocalsInOrder) {
  uint16_t port = 0;
  auto t = MakeExplicit({"127.10.0.2", "127.10.0.1"}, &port);
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->locals().size(), 2u);
  EXPECT_EQ(t->locals()[0], EndpointOf("127.10.0.2", port));
  EXPECT_EQ(t->locals()[1], EndpointOf("127.10.0.1", port));
  EXPECT_EQ(t->locals()[0].gid.ToString(), "::ffff:127.10.0.2");
  EXPECT_GE(t->pollable_fd(), 0);
}

TEST(UdpTransport, ExplicitBindErrorsAreClear) {
  uint16_t port = 0;
  auto a = MakeExplicit({"127.10.0.3"}, &port);
  ASSERT_NE(a, nullptr);
  UdpConfig c;
  c.port = port;
  std::string error;
  c.bind_addresses = {"127.10.0.3"};
  EXPECT_EQ(CreateUdpTransport(c, &error), nullptr);
  EXPECT_NE(error.find("127.10.0.3:" + std::to_string(port)), std::string::npos) << error;
  EXPECT_NE(error.find("in use"), std::string::npos) << error;
  for (const char* bad : {"0.0.0.0", "not-an-ip", "::", "ff02::1"}) {
    error.clear();
    c.bind_addresses = {bad};
    EXPECT_EQ(CreateUdpTransport(c, &error), nullptr) << bad;
    EXPECT_NE(error.find(bad), std::string::npos) << error;
  }
  error.clear();
  c.bind_addresses = {"127.10.0.4", "127.10.0.4"};
  EXPECT_EQ(CreateUdpTransport(c, &error), nullptr);
  EXPECT_NE(error.find("twice"), std::string::npos) << error;
}

TEST(UdpTransport, ExchangeBurstsByteExactWithValidIcrc) {
  // Packet by packet (no UDP GSO): every datagram carries IPv4 ID 0, which
  // the ICRC check below assumes. Runs are tested in Segmented* below.
  auto a = MakeExplicit({"127.10.1.1"}, nullptr, {}, false);
  auto b = MakeExplicit({"127.10.1.2"}, nullptr, {}, false);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const Endpoint ea = a->locals()[0], eb = b->locals()[0];

  const uint32_t sizes[] = {16, 20, 21, 64, 256, 1024, 1028, 4096 + 28, 9000, 65000};
  std::vector<std::vector<uint8_t>> bufs;
  for (uint32_t i = 0; i < 40; ++i)
    bufs.push_back(MakePacket(i, sizes[i % 10] < 20 ? 20 : sizes[i % 10]));
  bufs.push_back(MakePacket(999, 16));  // minimum: BTH + ICRC
  const auto originals = bufs;
  auto tx = Tx(bufs, eb);
  ASSERT_EQ(a->SendBurst(tx.data(), static_cast<int>(tx.size())), static_cast<int>(tx.size()));
  EXPECT_EQ(bufs, originals) << "the transport wrote into the caller's buffer";
  EXPECT_EQ(a->counters().tx_packets, tx.size());

  auto got = RecvUpTo(*b, bufs.size());
  ASSERT_EQ(got.size(), bufs.size());
  uint64_t bytes = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& r = got[i];
    ASSERT_EQ(r.bytes.size(), bufs[i].size()) << i;  // one socket, in order
    EXPECT_TRUE(std::equal(r.bytes.begin(), r.bytes.end() - 4, bufs[i].begin())) << i;
    // The ICRC on the wire is the one for the real IP/UDP headers.
    EXPECT_TRUE(wire::CheckIcrc(Fields(ea, eb), r.bytes.data(), r.bytes.size())) << i;
    const uint32_t icrc = wire::ComputeIcrc(Fields(ea, eb), r.bytes.data(), r.bytes.size() - 4);
    uint32_t stored = 0;
    for (int k = 0; k < 4; ++k) stored |= uint32_t{r.bytes[r.bytes.size() - 4 + k]} << (8 * k);
    EXPECT_EQ(stored, icrc) << "ICRC must be stored least-significant byte first";
    EXPECT_EQ(r.src, ea);
    EXPECT_EQ(r.local_index, 0);
    bytes += r.bytes.size();
  }
  EXPECT_EQ(b->counters().rx_packets, bufs.size());
  EXPECT_EQ(b->counters().rx_bytes, bytes);
  EXPECT_EQ(b->counters().rx_icrc_errors, 0u);

  // And back.
  auto back_bufs = std::vector<std::vector<uint8_t>>{MakePacket(7, 100)};
  auto back = Tx(back_bufs, ea);
  ASSERT_EQ(b->SendBurst(back.data(), 1), 1);
  auto reply = RecvUpTo(*a, 1);
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(reply[0].src, eb);
  EXPECT_EQ(SeqOf(reply[0].bytes), 7u);
}

// A run of `count` packets of `size` bytes to one peer, the last `last`
// bytes long: what the engine emits for one multi-packet message.
std::vector<std::vector<uint8_t>> MessageRun(uint32_t first_seq, int count, uint32_t size,
                                      uint32_t last) {
  std::vector<std::vector<uint8_t>> bufs;
  for (int i = 0; i < count; ++i)
    bufs.push_back(MakePacket(first_seq + static_cast<uint32_t>(i), i + 1 == count ? last : size));
  return bufs;
}

TEST(UdpTransport, SegmentedRunsArriveWholeInOrderAcrossSmallBursts) {
  auto a = MakeExplicit({"127.10.12.1"});
  auto b = MakeExplicit({"127.10.12.2"});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // Three runs (4 KiB MTU, 1 KiB MTU with a short tail, 63 small ones), a
  // lone packet between them, and a run longer than one datagram may carry
  // (15 x 4 KiB fit in 64 KiB; 20 must become two datagrams).
  auto bufs = MessageRun(0, 16, 4096 + 28, 4096 + 28);
  for (auto& p : MessageRun(100, 9, 1024 + 16, 300)) bufs.push_back(p);
  bufs.push_back(MakePacket(200, 64));
  for (auto& p : MessageRun(300, 63, 20, 20)) bufs.push_back(p);
  for (auto& p : MessageRun(400, 20, 4096 + 28, 100)) bufs.push_back(p);
  const auto originals = bufs;
  auto tx = Tx(bufs, b->locals()[0]);
  SendAll(*a, tx);
  EXPECT_EQ(bufs, originals) << "the transport wrote into the caller's buffer";
  EXPECT_EQ(a->counters().tx_packets, bufs.size());

  // Receive 5 at a time: a coalesced datagram holds more than one burst.
  std::vector<Received> got;
  RxPacket rx[5];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (got.size() < bufs.size() && std::chrono::steady_clock::now() < deadline) {
    const int n = b->RecvBurst(rx, 5);
    ASSERT_LE(n, 5);
    for (int i = 0; i < n; ++i)
      got.push_back(Received{std::vector<uint8_t>(rx[i].data, rx[i].data + rx[i].length),
                             rx[i].src, rx[i].local_index});
  }
  ASSERT_EQ(got.size(), bufs.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].bytes.size(), bufs[i].size()) << i;
    EXPECT_TRUE(std::equal(got[i].bytes.begin(), got[i].bytes.end() - 4, bufs[i].begin())) << i;
    EXPECT_EQ(got[i].src, a->locals()[0]);
  }
  EXPECT_EQ(b->counters().rx_icrc_errors, 0u);
  EXPECT_EQ(b->counters().rx_packets, bufs.size());
}

// Packets in pieces (TxPacket::payload: headers in one buffer, payload in
// the application's memory, pad bytes implied) arrive as the same bytes as
// whole ones, with a valid ICRC, in runs and alone, mixed with whole ones.
TEST(UdpTransport, PacketsInPiecesArriveAsWholeOnes) {
  auto a = MakeExplicit({"127.10.14.1"});
  auto b = MakeExplicit({"127.10.14.2"});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->accepts_split_payload());
  // Whole packets as references; every other one is sent in pieces: its
  // first `head` bytes from a separate buffer, then the payload from
  // another, the pad (length % 4 short of a multiple of 4) left out.
  auto bufs = MessageRun(0, 12, 4096 + 28, 4096 + 28);
  for (auto& p : MessageRun(100, 5, 1024 + 16, 1024 + 16)) bufs.push_back(p);
  bufs.push_back(MakePacket(200, 28 + 513 + 3 + 4));  // payload 513: pad 3
  bufs.push_back(MakePacket(201, 28 + 4));             // empty payload
  for (auto& p : bufs) {
    // Pad bytes must be zero on the wire: make the reference say so.
    const uint32_t body = static_cast<uint32_t>(p.size()) - 4;
    const uint32_t pad = (4 - ((body - 28) & 3)) & 3;
    for (uint32_t i = body - pad; i < body; ++i) p[i] = 0;
  }
  std::vector<std::vector<uint8_t>> heads(bufs.size()), payloads(bufs.size());
  auto tx = Tx(bufs, b->locals()[0]);
  for (size_t i = 0; i < bufs.size(); i += 2) {
    const uint32_t head = 28;
    const uint32_t body = static_cast<uint32_t>(bufs[i].size()) - 4;
    const uint32_t pad = (4 - ((body - head) & 3)) & 3;
    heads[i].assign(bufs[i].begin(), bufs[i].begin() + head);
    payloads[i].assign(bufs[i].begin() + head, bufs[i].begin() + (body - pad));
    tx[i].data = heads[i].data();
    tx[i].head_length = head;
    tx[i].payload = payloads[i].data();
    tx[i].payload_length = static_cast<uint32_t>(payloads[i].size());
  }
  SendAll(*a, tx);
  EXPECT_EQ(a->counters().tx_errors, 0u);
  const auto got = RecvUpTo(*b, bufs.size());
  ASSERT_EQ(got.size(), bufs.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].bytes.size(), bufs[i].size()) << i;
    EXPECT_TRUE(std::equal(got[i].bytes.begin(), got[i].bytes.end() - 4, bufs[i].begin())) << i;
  }
  EXPECT_EQ(b->counters().rx_icrc_errors, 0u);
  // A layout that does not add up is refused, not sent.
  TxPacket bad = tx[0];
  bad.data = heads[0].data();
  bad.head_length = 28;
  bad.payload = payloads[0].data();
  bad.payload_length = bad.length;  // longer than the packet
  const uint64_t errors = a->counters().tx_errors;
  EXPECT_EQ(a->SendBurst(&bad, 1), 1);
  EXPECT_EQ(a->counters().tx_errors, errors + 1);
}

TEST(UdpTransport, SegmentedRunCarriesPerSegmentIpv4Ids) {
  // A receiver without UDP_GRO makes the kernel cut the run into datagrams
  // again, each with the IPv4 header a NIC would put on the wire: ID 0, 1,
  // 2, ... (inet_gso_segment). Datagram k's ICRC must verify with ID k and
  // not with ID 0 - which pins the kernel behaviour the sender relies on.
  Endpoint ep;
  const int fd = PlainSocket("127.10.13.9", 0, &ep);
  ASSERT_GE(fd, 0);
  auto a = MakeExplicit({"127.10.13.1"});
  ASSERT_NE(a, nullptr);
  auto bufs = MessageRun(0, 6, 1024 + 16, 1024 + 16);
  auto tx = Tx(bufs, ep);
  ASSERT_EQ(a->SendBurst(tx.data(), static_cast<int>(tx.size())), static_cast<int>(tx.size()));
  for (uint32_t k = 0; k < bufs.size(); ++k) {
    uint8_t wire_bytes[2048];
    const ssize_t n = recv(fd, wire_bytes, sizeof(wire_bytes), 0);
    ASSERT_EQ(n, static_cast<ssize_t>(bufs[k].size())) << k;
    EXPECT_TRUE(std::equal(wire_bytes, wire_bytes + n - 4, bufs[k].begin())) << k;
    wire::IpUdpFields ip = Fields(a->locals()[0], ep);
    ip.ipv4_id = static_cast<uint16_t>(k);
    EXPECT_TRUE(wire::CheckIcrc(ip, wire_bytes, static_cast<size_t>(n))) << k;
    ip.ipv4_id = 0;
    if (k > 0) {
      EXPECT_FALSE(wire::CheckIcrc(ip, wire_bytes, static_cast<size_t>(n))) << k;
    }
  }
  close(fd);

  // And our own receiver accepts such single datagrams of a run (it tries
  // the IDs a run can have): a GRO receiver fed by a plain sender that
  // numbers IDs the same way.
  auto b = MakeExplicit({"127.10.13.2"});
  ASSERT_NE(b, nullptr);
  Endpoint src;
  const int raw_sender = PlainSocket("127.10.13.8", 0, &src);
  ASSERT_GE(raw_sender, 0);
  for (uint32_t k = 0; k < 3; ++k) {
    auto p = MakePacket(k, 500);
    wire::IpUdpFields ip = Fields(src, b->locals()[0]);
    ip.ipv4_id = static_cast<uint16_t>(k);
    wire::AppendIcrc(ip, p.data(), p.size());
    SendRaw(raw_sender, b->locals()[0], p.data(), p.size());
  }
  EXPECT_EQ(RecvUpTo(*b, 3).size(), 3u);
  EXPECT_EQ(b->counters().rx_icrc_errors, 0u);
  close(raw_sender);
}

TEST(UdpTransport, PollableFdSignalsArrival) {
  auto a = MakeExplicit({"127.10.2.1"});
  auto b = MakeExplicit({"127.10.2.2", "127.10.2.3"});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  epoll_event ev;
  EXPECT_EQ(epoll_wait(b->pollable_fd(), &ev, 1, 10), 0);
  auto bufs = std::vector<std::vector<uint8_t>>{MakePacket(1, 64)};
  auto tx = Tx(bufs, b->locals()[1]);  // the second local endpoint
  ASSERT_EQ(a->SendBurst(tx.data(), 1), 1);
  EXPECT_EQ(epoll_wait(b->pollable_fd(), &ev, 1, 2000), 1);
  RxPacket rx[4];
  ASSERT_EQ(b->RecvBurst(rx, 4), 1);
  EXPECT_EQ(rx[0].local_index, 1);
  EXPECT_EQ(epoll_wait(b->pollable_fd(), &ev, 1, 0), 0);
}

TEST(UdpTransport, ResponsesArriveOnTheReplySocket) {
  // RC responses (ACK 0x11, READ response 0x10, atomic ACK 0x12) land on
  // the reply socket of the endpoint's reuseport group: reply_pollable_fd()
  // signals, pollable_fd() stays quiet; requests the other way round. The
  // wire is the same for both: sent from and to the endpoint's one port.
  auto a = MakeExplicit({"127.10.2.4"});
  auto b = MakeExplicit({"127.10.2.5"});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_GE(b->reply_pollable_fd(), 0) << "no reply socket (SO_REUSEPORT + cBPF refused?)";
  epoll_event ev;
  for (uint8_t opcode : {uint8_t{0x11}, uint8_t{0x10}, uint8_t{0x12}, uint8_t{0x04}, uint8_t{0x0A},
                         uint8_t{0x64}}) {
    const bool response = opcode >= 0x0D && opcode <= 0x12;
    auto bufs = std::vector<std::vector<uint8_t>>{MakePacket(opcode, 64)};
    bufs[0][0] = opcode;
    auto tx = Tx(bufs, b->locals()[0]);
    ASSERT_EQ(a->SendBurst(tx.data(), 1), 1);
    const int signalled = response ? b->reply_pollable_fd() : b->pollable_fd();
    const int quiet = response ? b->pollable_fd() : b->reply_pollable_fd();
    EXPECT_EQ(epoll_wait(signalled, &ev, 1, 2000), 1) << int{opcode};
    EXPECT_EQ(epoll_wait(quiet, &ev, 1, 0), 0) << int{opcode};
    RxPacket rx[4];
    ASSERT_EQ(b->RecvBurst(rx, 4), 1) << int{opcode};
    EXPECT_EQ(rx[0].data[0], opcode);
    EXPECT_EQ(rx[0].src, a->locals()[0]) << "sent from the endpoint's port";
    EXPECT_EQ(rx[0].local_index, 0);
    EXPECT_EQ(epoll_wait(signalled, &ev, 1, 0), 0) << int{opcode};
  }
}

TEST(UdpTransport, SecondProcessCannotShareAnEndpoint) {
  // An endpoint is a reuseport group; another process (here: another
  // transport) binding the same address and port must be refused, not
  // join the group and take a share of its packets.
  uint16_t port = 0;
  auto a = MakeExplicit({"127.10.2.6"}, &port);
  ASSERT_NE(a, nullptr);
  UdpConfig config;
  config.bind_addresses = {"127.10.2.6"};
  config.port = port;
  std::string error;
  EXPECT_EQ(CreateUdpTransport(config, &error), nullptr);
  EXPECT_NE(error.find("in use"), std::string::npos) << error;
}

TEST(UdpTransport, PlainSocketSenderAndReceiverAgreeOnIcrc) {
  // An outside sender (unconnected, DF) whose ICRC assumes IPv4 ID 0 is
  // accepted; corrupted ICRCs, truncations and runts are dropped and counted.
  auto b = MakeExplicit({"127.10.3.2"});
  ASSERT_NE(b, nullptr);
  const Endpoint eb = b->locals()[0];
  Endpoint ep;
  const int fd = PlainSocket("127.10.3.9", 0, &ep);
  ASSERT_GE(fd, 0);

  auto good = MakePacket(5, 200);
  wire::AppendIcrc(Fields(ep, eb), good.data(), good.size());
  SendRaw(fd, eb, good.data(), good.size());
  auto got = RecvUpTo(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bytes, good);
  EXPECT_EQ(got[0].src, ep);

  auto bad_icrc = good;
  bad_icrc.back() ^= 0x01;
  SendRaw(fd, eb, bad_icrc.data(), bad_icrc.size());
  auto bad_payload = good;
  bad_payload[100] ^= 0x80;
  SendRaw(fd, eb, bad_payload.data(), bad_payload.size());
  SendRaw(fd, eb, good.data(), good.size() - 3);  // truncated
  SendRaw(fd, eb, good.data(), 16);               // minimum size, wrong ICRC
  SendRaw(fd, eb, good.data(), 0);                // runts
  SendRaw(fd, eb, good.data(), 1);
  SendRaw(fd, eb, good.data(), 15);
  // Only the BTH byte 4 (FECN/BECN) is outside the ICRC: a changed byte 4
  // still passes, as it must for ECN marking by switches.
  auto becn = good;
  becn[4] ^= 0x40;
  SendRaw(fd, eb, becn.data(), becn.size());
  got = Drain(*b);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bytes, becn);
  EXPECT_EQ(b->counters().rx_icrc_errors, 4u);
  EXPECT_EQ(b->counters().rx_runts, 3u);
  EXPECT_EQ(b->counters().rx_packets, 2u);

  // The transport's packets as a plain receiver sees them on the wire.
  auto a = MakeExplicit({"127.10.3.1"});
  ASSERT_NE(a, nullptr);
  auto bufs = std::vector<std::vector<uint8_t>>{MakePacket(9, 300)};
  auto tx = Tx(bufs, ep);
  ASSERT_EQ(a->SendBurst(tx.data(), 1), 1);
  uint8_t wire_bytes[512];
  const ssize_t n = recv(fd, wire_bytes, sizeof(wire_bytes), 0);
  ASSERT_EQ(n, 300);
  EXPECT_TRUE(wire::CheckIcrc(Fields(a->locals()[0], ep), wire_bytes, 300));
  EXPECT_TRUE(std::equal(wire_bytes, wire_bytes + 296, bufs[0].begin()));
  close(fd);
}

TEST(UdpTransport, WireIpv4HeaderIsWhatTheIcrcAssumes) {
  // Capture the transport's datagrams with a raw socket (needs CAP_NET_RAW)
  // and check the real IPv4 header: DF set, ID 0, and the ICRC computed
  // over the captured header fields verifies.
  const int raw = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_UDP);
  if (raw < 0) GTEST_SKIP() << "no CAP_NET_RAW: " << std::strerror(errno);
  timeval tv{0, 200000};
  setsockopt(raw, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  auto a = MakeExplicit({"127.10.10.1"});
  auto b = MakeExplicit({"127.10.10.2"});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::vector<std::vector<uint8_t>> bufs;
  for (uint32_t i = 0; i < 5; ++i) bufs.push_back(MakePacket(i, 64 + i * 500));
  auto tx = Tx(bufs, b->locals()[0]);
  ASSERT_EQ(a->SendBurst(tx.data(), 5), 5);
  int seen = 0;
  uint8_t frame[65536];
  for (int tries = 0; tries < 1000 && seen < 5; ++tries) {
    const ssize_t n = recv(raw, frame, sizeof(frame), 0);
    if (n < 0) break;
    if (n < 28 || (frame[0] >> 4) != 4) continue;
    const size_t ihl = (frame[0] & 0xf) * 4u;
    wire::IpUdpFields ip;
    std::memcpy(ip.src_ip, frame + 12, 4);
    std::memcpy(ip.dst_ip, frame + 16, 4);
    const uint8_t* udp = frame + ihl;
    ip.src_port = static_cast<uint16_t>(udp[0] << 8 | udp[1]);
    ip.dst_port = static_cast<uint16_t>(udp[2] << 8 | udp[3]);
    if (ip.dst_port != b->locals()[0].port ||
        std::memcmp(ip.dst_ip, &b->locals()[0].gid.raw[12], 4))
      continue;
    ip.ipv4_id = static_cast<uint16_t>(frame[4] << 8 | frame[5]);
    ip.ipv4_flags_frag = static_cast<uint16_t>(frame[6] << 8 | frame[7]);
    EXPECT_EQ(ip.ipv4_id, 0) << "unconnected DF socket must send IPv4 ID 0";
    EXPECT_EQ(ip.ipv4_flags_frag, 0x4000) << "DF, no fragmentation";
    const size_t payload = static_cast<size_t>(n) - ihl - 8;
    EXPECT_EQ(payload, bufs[seen].size());
    EXPECT_TRUE(wire::CheckIcrc(ip, udp + 8, payload)) << seen;
    ++seen;
  }
  close(raw);
  EXPECT_EQ(seen, 5);
}

TEST(UdpTransport, InvalidRequestsAreConsumedAndCounted) {
  auto a = MakeExplicit({"127.10.4.1"});
  auto b = MakeExplicit({"127.10.4.2"});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto p = MakePacket(1, 64);
  Endpoint v6;
  v6.gid.raw[15] = 1;  // ::1, not IPv4-mapped
  Endpoint eb = b->locals()[0];
  Endpoint port0 = eb;
  port0.port = 0;
  std::vector<TxPacket> tx = {
      {p.data(), 64, 1, eb},     // no such local endpoint
      {p.data(), 15, 0, eb},     // shorter than BTH + ICRC
      {nullptr, 64, 0, eb},      // no data
      {p.data(), 64, 0, v6},     // IPv6 destination from an IPv4 address
      {p.data(), 70000, 0, eb},  // larger than a UDP datagram
      {p.data(), 64, 0, port0},  // port 0
      {p.data(), 64, 0, eb},     // the only good one
  };
  EXPECT_EQ(a->SendBurst(tx.data(), static_cast<int>(tx.size())), static_cast<int>(tx.size()));
  EXPECT_EQ(a->counters().tx_errors, 6u);
  EXPECT_EQ(a->counters().tx_packets, 1u);
  auto got = RecvUpTo(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(SeqOf(got[0].bytes), 1u);
}

// Sends `count` packets in bursts of 16 through a transport with `faults`,
// draining the receiver as it goes; returns the sequence numbers received.
struct FaultRun {
  std::vector<uint32_t> received;
  TransportCounters tx, rx;
};

FaultRun RunWithFaults(const TestFaults& faults, uint32_t count, const char* ip_a,
                       const char* ip_b) {
  FaultRun run;
  uint16_t port = 0;
  auto a = MakeExplicit({ip_a}, &port, faults);
  auto b = MakeExplicit({ip_b});
  EXPECT_NE(a, nullptr);
  EXPECT_NE(b, nullptr);
  if (!a || !b) return run;
  std::vector<std::vector<uint8_t>> bufs;
  for (uint32_t i = 0; i < count; ++i) bufs.push_back(MakePacket(i, 64 + (i % 5) * 100));
  for (uint32_t off = 0; off < count; off += 16) {
    std::vector<std::vector<uint8_t>> chunk(bufs.begin() + off,
                                            bufs.begin() + std::min(count, off + 16));
    auto tx = Tx(chunk, b->locals()[0]);
    SendAll(*a, tx);
    for (auto& r : RecvUpTo(*b, SIZE_MAX, 0)) run.received.push_back(SeqOf(r.bytes));
  }
  // A packet still held for reordering leaves after kReorderMaxHoldNs at
  // the latest, at the sender's next RecvBurst.
  std::this_thread::sleep_for(std::chrono::nanoseconds(2 * FaultTransport::kReorderMaxHoldNs));
  RxPacket rx[1];
  a->RecvBurst(rx, 1);
  for (auto& r : Drain(*b)) run.received.push_back(SeqOf(r.bytes));
  run.tx = a->counters();
  run.rx = b->counters();
  return run;
}

TEST(UdpTransportFaults, DropRateAndDeterminism) {
  TestFaults f;
  f.drop = 0.2;
  f.seed = 7;
  const uint32_t n = 2000;
  const FaultRun first = RunWithFaults(f, n, "127.10.5.1", "127.10.5.2");
  const FaultRun second = RunWithFaults(f, n, "127.10.5.3", "127.10.5.4");
  EXPECT_EQ(first.received.size() + first.tx.injected_drops, n);
  EXPECT_NEAR(static_cast<double>(first.tx.injected_drops), 0.2 * n, 5 * std::sqrt(n * 0.2 * 0.8));
  EXPECT_EQ(first.tx.tx_packets, first.received.size());
  EXPECT_EQ(first.received, second.received) << "same seed, same packets lost";
  f.seed = 8;
  const FaultRun third = RunWithFaults(f, n, "127.10.5.5", "127.10.5.6");
  EXPECT_NE(first.received, third.received);
}

TEST(UdpTransportFaults, DuplicateAndCorrupt) {
  TestFaults dup;
  dup.duplicate = 1.0;
  const FaultRun d = RunWithFaults(dup, 100, "127.10.6.1", "127.10.6.2");
  ASSERT_EQ(d.received.size(), 200u);
  EXPECT_EQ(d.tx.injected_dups, 100u);
  for (uint32_t i = 0; i < 100; ++i) {
    EXPECT_EQ(d.received[2 * i], i);
    EXPECT_EQ(d.received[2 * i + 1], i);
  }

  TestFaults corrupt;
  corrupt.corrupt = 1.0;
  const FaultRun c = RunWithFaults(corrupt, 300, "127.10.6.3", "127.10.6.4");
  EXPECT_TRUE(c.received.empty());
  EXPECT_EQ(c.tx.injected_corrupts, 300u);
  EXPECT_EQ(c.rx.rx_icrc_errors, 300u);  // every flipped bit caught by the ICRC

  TestFaults mixed;
  mixed.corrupt = 0.1;
  mixed.duplicate = 0.1;
  mixed.seed = 3;
  const FaultRun m = RunWithFaults(mixed, 1000, "127.10.6.5", "127.10.6.6");
  EXPECT_EQ(m.rx.rx_icrc_errors + m.received.size(), 1000 + m.tx.injected_dups);
  EXPECT_NEAR(static_cast<double>(m.tx.injected_corrupts), 100, 5 * std::sqrt(1000 * 0.09));
  EXPECT_NEAR(static_cast<double>(m.tx.injected_dups), 100, 5 * std::sqrt(1000 * 0.09));
}

TEST(UdpTransportFaults, ReorderPassesAfterTheNextPacketOrAfterTheLongestHold) {
  TestFaults f;
  f.reorder = 1.0;
  f.nth = 1;  // only the first packet sent
  auto a = MakeExplicit({"127.10.7.1"}, nullptr, f);
  auto b = MakeExplicit({"127.10.7.2"});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::vector<std::vector<uint8_t>> bufs;
  for (uint32_t i = 0; i < 4; ++i) bufs.push_back(MakePacket(i, 100));

  // A burst of four goes out as 1 0 2 3: 0 waits for one later packet.
  auto tx = Tx(bufs, b->locals()[0]);
  ASSERT_EQ(a->SendBurst(tx.data(), 4), 4);
  auto got = RecvUpTo(*b, 4);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(SeqOf(got[0].bytes), 1u);
  EXPECT_EQ(SeqOf(got[1].bytes), 0u);
  EXPECT_EQ(SeqOf(got[2].bytes), 2u);
  EXPECT_EQ(SeqOf(got[3].bytes), 3u);
  EXPECT_EQ(a->counters().injected_reorders, 1u);
  // The framed ICRC of a held copy is the original's.
  EXPECT_TRUE(wire::CheckIcrc(Fields(a->locals()[0], b->locals()[0]), got[1].bytes.data(),
                              got[1].bytes.size()));

  // Every packet reordered: a lone one waits for a later packet, or
  // kReorderMaxHoldNs, then leaves at the sender's next RecvBurst (the
  // engine's progress loop), even with nothing else to send.
  TestFaults all;
  all.reorder = 1.0;
  auto c = MakeExplicit({"127.10.7.3"}, nullptr, all);
  ASSERT_NE(c, nullptr);
  auto tx2 = Tx(bufs, b->locals()[0]);
  ASSERT_EQ(c->SendBurst(tx2.data(), 1), 1);
  EXPECT_TRUE(Drain(*b, 50).empty());
  ASSERT_TRUE(c->next_deadline().has_value());
  std::this_thread::sleep_until(*c->next_deadline());
  RxPacket rx[1];
  EXPECT_EQ(c->RecvBurst(rx, 1), 0);
  got = RecvUpTo(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(SeqOf(got[0].bytes), 0u);
  EXPECT_FALSE(c->next_deadline().has_value());
}

TEST(UdpTransportFaults, ReorderRateAndNothingLost) {
  TestFaults f;
  f.reorder = 0.1;
  f.seed = 11;
  const FaultRun r = RunWithFaults(f, 1000, "127.10.8.1", "127.10.8.2");
  ASSERT_EQ(r.received.size(), 1000u);
  std::vector<uint32_t> sorted = r.received;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_NE(sorted, r.received);
  EXPECT_NEAR(static_cast<double>(r.tx.injected_reorders), 100, 5 * std::sqrt(1000 * 0.09));
  size_t out_of_order = 0;
  for (size_t i = 1; i < r.received.size(); ++i) out_of_order += r.received[i] < r.received[i - 1];
  // A reordered packet leaves right after the next packet passed on: one
  // descent per run of reordered packets, so at most one per reorder and,
  // with 10% reordered, most reorders stand alone.
  EXPECT_LE(out_of_order, r.tx.injected_reorders);
  EXPECT_GE(out_of_order * 10, r.tx.injected_reorders * 7);
}

TEST(UdpTransportAddressing, AutomaticBindsHostAddressesThenPidLoopback) {
  std::vector<Gid> host;
  for (const LocalAddress& a : HostAddresses()) host.push_back(a.gid);
  std::unique_ptr<Transport> first, second;
  uint16_t port = 0;
  for (int attempt = 0; attempt < 20 && !first; ++attempt) {
    UdpConfig c;
    c.port = port = RandomHighPort();
    std::string error;
    first = CreateUdpTransport(c, &error);
  }
  ASSERT_NE(first, nullptr);
  const auto l1 = first->locals();
  ASSERT_GE(l1.size(), 1u);
  // The host's IPv4 addresses, then the per-process loopback address from
  // the pid, then the host's IPv6 addresses (docs/addressing.md), each
  // group in getifaddrs order, never a loopback host address.
  const uint32_t mine = htonl(PerProcessLoopbackAddress(static_cast<uint32_t>(getpid()), 0));
  const Endpoint loopback{Gid::FromIpv4(mine), port};
  const auto at = std::find(l1.begin(), l1.end(), loopback);
  ASSERT_NE(at, l1.end());
  const size_t loop_index = static_cast<size_t>(at - l1.begin());
  ASSERT_LE(l1.size() - 1, host.size());
  for (size_t i = 0; i < l1.size(); ++i) {
    if (i == loop_index) continue;
    EXPECT_EQ(l1[i].gid.IsV4Mapped(), i < loop_index) << l1[i].gid.ToString();
    if (l1[i].gid.IsV4Mapped()) {
      EXPECT_NE(ntohl(l1[i].gid.Ipv4()) >> 24, 127u);
    }
    EXPECT_NE(std::find(host.begin(), host.end(), l1[i].gid), host.end());
  }
  EXPECT_EQ(l1.size(), host.size() + 1) << "a host address at a random port should be free";

  // A second "process" on the same port: host addresses are taken (the first
  // one owns hostIP:port), the pid's loopback too, so it gets the next
  // loopback candidate only.
  UdpConfig c;
  c.port = port;
  std::string error;
  second = CreateUdpTransport(c, &error);
  ASSERT_NE(second, nullptr) << error;
  const auto l2 = second->locals();
  ASSERT_EQ(l2.size(), 1u);
  const uint32_t next = htonl(PerProcessLoopbackAddress(static_cast<uint32_t>(getpid()), 1));
  EXPECT_EQ(l2[0], (Endpoint{Gid::FromIpv4(next), port}));

  // They talk through every pair of IPv4 endpoints, host address to
  // loopback address and back included (an IPv6 address cannot reach an
  // IPv4 one: counted as a send error).
  for (uint16_t i = 0; i < l1.size(); ++i) {
    if (!l1[i].gid.IsV4Mapped()) {
      auto bufs = std::vector<std::vector<uint8_t>>{MakePacket(100 + i, 128)};
      auto tx = Tx(bufs, l2[0], i);
      const uint64_t errors = first->counters().tx_errors;
      ASSERT_EQ(first->SendBurst(tx.data(), 1), 1);
      EXPECT_EQ(first->counters().tx_errors, errors + 1);
      continue;
    }
    auto bufs = std::vector<std::vector<uint8_t>>{MakePacket(100 + i, 128)};
    auto tx = Tx(bufs, l2[0], i);
    ASSERT_EQ(first->SendBurst(tx.data(), 1), 1);
    auto got = RecvUpTo(*second, 1);
    ASSERT_EQ(got.size(), 1u) << l1[i].gid.ToString();
    EXPECT_EQ(got[0].src, l1[i]);
    EXPECT_EQ(SeqOf(got[0].bytes), 100u + i);

    auto reply_bufs = std::vector<std::vector<uint8_t>>{MakePacket(200 + i, 128)};
    auto reply = Tx(reply_bufs, l1[i]);
    ASSERT_EQ(second->SendBurst(reply.data(), 1), 1);
    got = RecvUpTo(*first, 1);
    ASSERT_EQ(got.size(), 1u) << l1[i].gid.ToString();
    EXPECT_EQ(got[0].local_index, i);
    EXPECT_EQ(got[0].src, l2[0]);
  }
  EXPECT_EQ(first->counters().rx_icrc_errors + second->counters().rx_icrc_errors, 0u);
}

// IPv6 endpoints (issue 15): two devices bound to ::1 on their own ports
// exchange single packets and GSO runs byte-exact, every ICRC framed for
// the IPv6 headers (IBA A17.4.5.1), and the answer goes back; an IPv4
// destination from an IPv6 address is a send error.
TEST(UdpTransportIpv6, ExchangeOverIpv6WithIpv6Icrc) {
  uint16_t pa = 0, pb = 0;
  auto a = MakeExplicit({"::1"}, &pa);
  if (a == nullptr) GTEST_SKIP() << "::1 cannot be bound here (IPv6 disabled?)";
  std::unique_ptr<Transport> b;
  for (int i = 0; i < 20 && (b == nullptr || pb == pa); ++i) b = MakeExplicit({"::1"}, &pb);
  ASSERT_NE(b, nullptr);
  const Endpoint ea = a->locals()[0], eb = b->locals()[0];
  EXPECT_EQ(ea.gid.ToString(), "::1");
  EXPECT_FALSE(ea.gid.IsV4Mapped());
  EXPECT_EQ(ea.port, pa);

  auto bufs = MessageRun(0, 12, 4096 + 28, 700);  // one GSO run
  bufs.push_back(MakePacket(50, 16));
  bufs.push_back(MakePacket(51, 9000));
  auto tx = Tx(bufs, eb);
  SendAll(*a, tx);
  EXPECT_EQ(a->counters().tx_packets, bufs.size());
  EXPECT_EQ(a->counters().tx_errors, 0u);
  auto got = RecvUpTo(*b, bufs.size());
  ASSERT_EQ(got.size(), bufs.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].bytes.size(), bufs[i].size()) << i;
    EXPECT_TRUE(std::equal(got[i].bytes.begin(), got[i].bytes.end() - 4, bufs[i].begin())) << i;
    EXPECT_TRUE(wire::CheckIcrc(Fields(ea, eb), got[i].bytes.data(), got[i].bytes.size())) << i;
    wire::IpUdpFields as_ipv4 = Fields(ea, eb);
    as_ipv4.ipv6 = false;
    EXPECT_FALSE(wire::CheckIcrc(as_ipv4, got[i].bytes.data(), got[i].bytes.size())) << i;
    EXPECT_EQ(got[i].src, ea);
  }
  EXPECT_EQ(b->counters().rx_icrc_errors, 0u);
  EXPECT_EQ(b->counters().rx_icrc_id_retries, 0u);

  auto back_bufs = std::vector<std::vector<uint8_t>>{MakePacket(7, 100)};
  auto back = Tx(back_bufs, ea);
  ASSERT_EQ(b->SendBurst(back.data(), 1), 1);
  auto reply = RecvUpTo(*a, 1);
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(reply[0].src, eb);

  auto to_v4 = Tx(back_bufs, EndpointOf("127.0.0.1", pa));
  ASSERT_EQ(b->SendBurst(to_v4.data(), 1), 1);
  EXPECT_EQ(b->counters().tx_errors, 1u);
}

// A datagram whose ICRC was framed for IPv4 headers does not pass on an
// IPv6 socket: the receive side checks the IPv6 pseudo header.
TEST(UdpTransportIpv6, Ipv4FramedIcrcIsRejected) {
  auto b = MakeExplicit({"::1"});
  if (b == nullptr) GTEST_SKIP() << "::1 cannot be bound here (IPv6 disabled?)";
  const int fd = socket(AF_INET6, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in6 self{};
  self.sin6_family = AF_INET6;
  self.sin6_addr = in6addr_loopback;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&self), sizeof(self)), 0);
  socklen_t len = sizeof(self);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len), 0);
  const Endpoint src{b->locals()[0].gid, ntohs(self.sin6_port)};
  const Endpoint dst = b->locals()[0];
  auto good = MakePacket(1, 64);
  auto bad = MakePacket(2, 64);
  wire::AppendIcrc(Fields(src, dst), good.data(), good.size());
  wire::IpUdpFields v4 = Fields(src, dst);
  v4.ipv6 = false;
  wire::AppendIcrc(v4, bad.data(), bad.size());
  sockaddr_in6 to{};
  ASSERT_EQ(ToSockaddr(dst, 0, &to), sizeof(to));
  for (auto* p : {&bad, &good})
    ASSERT_EQ(sendto(fd, p->data(), p->size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              static_cast<ssize_t>(p->size()));
  auto got = RecvUpTo(*b, 1);
  close(fd);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(SeqOf(got[0].bytes), 1u);
  EXPECT_EQ(got[0].src, src);
  EXPECT_EQ(b->counters().rx_icrc_errors, 1u);
}

TEST(UdpTransportAddressing, HostAddressAndLoopbackReachEachOther) {
  const std::vector<uint32_t> host = HostIpv4Addresses();
  if (host.empty()) GTEST_SKIP() << "no non-loopback IPv4 address on this host";
  in_addr h{};
  h.s_addr = host[0];
  const std::string host_ip = inet_ntoa(h);
  auto a = MakeExplicit({host_ip});
  auto b = MakeExplicit({"127.10.9.1"});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto bufs = std::vector<std::vector<uint8_t>>{MakePacket(1, 1000)};
  auto tx = Tx(bufs, b->locals()[0]);
  ASSERT_EQ(a->SendBurst(tx.data(), 1), 1);
  auto got = RecvUpTo(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].src, a->locals()[0]);
  tx = Tx(bufs, a->locals()[0]);
  ASSERT_EQ(b->SendBurst(tx.data(), 1), 1);
  got = RecvUpTo(*a, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].src, b->locals()[0]);
}

}  // namespace
}  // namespace softrnic::transport
