// Acceptance item 8 and issue 14 (M1): forged and hostile packets. A socket
// builds RoCE v2 packets (wire/headers.h + opcode table + ICRC) and sends
// them to a device's QP.
//
// Two kinds of forger:
// - A plain UDP socket bound to some address and a free port: what any
//   local user can do. Bound to the peer's IP on another port it is the
//   same-host spoofer of M1; the engine refuses it (for a same-host source
//   the UDP source port must be the peer's device port).
// - A raw socket (IP_HDRINCL, needs CAP_NET_RAW: root in CI) that writes
//   the peer's exact IP address and UDP port into the headers: an off-host
//   attacker that can spoof source addresses, or a local root. It passes
//   the source check, so the responder's and completer's own checks are
//   what stops it; most tests below use it. Without CAP_NET_RAW they skip.
// Every rejected packet must leave memory untouched and be counted. (The
// same checks through the legitimate peer are in errors_test.cc.)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <cstring>
#include <functional>

#include "engine_test_peer.h"
#include "rc_pair.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

namespace softrnic::engine::testing {
namespace {

constexpr uint8_t kGuard = 0x77;

class Forger {
 public:
  // spoof_port == 0: a UDP socket bound to ip and any free port. Otherwise a
  // raw socket that sends as ip:spoof_port (ok() is false without
  // CAP_NET_RAW).
  explicit Forger(const std::string& ip, uint16_t spoof_port = 0) : spoof_(spoof_port != 0) {
    local_.sin_family = AF_INET;
    inet_pton(AF_INET, ip.c_str(), &local_.sin_addr);
    if (spoof_) {
      fd_ = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);  // implies IP_HDRINCL
      local_.sin_port = htons(spoof_port);
      return;
    }
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd_, 0);
    const int pmtu = IP_PMTUDISC_DO;  // IPv4 ID 0 + DF, as the ICRC below assumes
    setsockopt(fd_, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&local_), sizeof(local_)), 0) << strerror(errno);
    socklen_t len = sizeof(local_);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&local_), &len);
  }
  ~Forger() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  // pkt: BTH .. payload/pad, with 4 bytes of room at the end for the ICRC.
  void Send(std::vector<uint8_t> pkt, const Device& dst, bool good_icrc = true) {
    wire::IpUdpFields ip;
    std::memcpy(ip.src_ip, &local_.sin_addr.s_addr, 4);
    std::memcpy(ip.dst_ip, &dst.gids()[0].raw[12], 4);
    ip.src_port = ntohs(local_.sin_port);
    ip.dst_port = TestPort();
    wire::AppendIcrc(ip, pkt.data(), pkt.size());
    if (!good_icrc) pkt[pkt.size() - 1] ^= 0x01;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    std::memcpy(&to.sin_addr.s_addr, &dst.gids()[0].raw[12], 4);
    to.sin_port = htons(TestPort());
    if (spoof_) {
      // IPv4 + UDP headers by hand. ID 0 with DF, as the ICRC assumes (the
      // kernel keeps a nonzero ID and fills in 0 for DF packets); UDP
      // checksum 0 = none (IPv4); the kernel fills in the IP checksum.
      std::vector<uint8_t> d(sizeof(iphdr) + sizeof(udphdr) + pkt.size());
      auto* iph = reinterpret_cast<iphdr*>(d.data());
      iph->version = 4;
      iph->ihl = 5;
      iph->tot_len = htons(static_cast<uint16_t>(d.size()));
      iph->frag_off = htons(0x4000);
      iph->ttl = 64;
      iph->protocol = IPPROTO_UDP;
      iph->saddr = local_.sin_addr.s_addr;
      iph->daddr = to.sin_addr.s_addr;
      auto* udp = reinterpret_cast<udphdr*>(d.data() + sizeof(iphdr));
      udp->source = local_.sin_port;
      udp->dest = to.sin_port;
      udp->len = htons(static_cast<uint16_t>(sizeof(udphdr) + pkt.size()));
      std::memcpy(d.data() + sizeof(iphdr) + sizeof(udphdr), pkt.data(), pkt.size());
      ASSERT_EQ(sendto(fd_, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
                static_cast<ssize_t>(d.size()))
          << strerror(errno);
      return;
    }
    ASSERT_EQ(sendto(fd_, pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              static_cast<ssize_t>(pkt.size()));
  }

 private:
  bool spoof_;
  int fd_ = -1;
  sockaddr_in local_{};
};

// Raw sockets need CAP_NET_RAW; tests that spoof the peer skip without it.
bool CanSpoof() {
  const int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
  if (fd < 0) return false;
  close(fd);
  return true;
}
#define REQUIRE_SPOOFING()                                                        \
  do {                                                                            \
    if (!CanSpoof()) GTEST_SKIP() << "needs CAP_NET_RAW to spoof the peer's port"; \
  } while (0)

// Builds BTH + extension headers + payload + pad + 4 zero ICRC bytes.
std::vector<uint8_t> Build(uint8_t opcode, uint32_t dest_qp, uint32_t psn,
                           const std::function<void(uint8_t*, const wire::OpcodeInfo&)>& headers,
                           std::span<const uint8_t> payload) {
  const wire::OpcodeInfo& info = wire::GetOpcodeInfo(opcode);
  const uint8_t pad = static_cast<uint8_t>((4 - (payload.size() & 3)) & 3);
  std::vector<uint8_t> p(info.header_length + payload.size() + pad + wire::kIcrcSize, 0);
  wire::Bth bth;
  bth.set_opcode(opcode);
  bth.set_pkey(wire::kDefaultPkey);
  bth.set_dest_qp(dest_qp);
  bth.set_psn(psn);
  bth.set_ack_req(true);
  bth.set_pad_count(pad);
  std::memcpy(p.data(), bth.b.data(), sizeof(bth));
  if (headers) headers(p.data(), info);
  if (!payload.empty()) std::memcpy(p.data() + info.header_length, payload.data(), payload.size());
  return p;
}

std::vector<uint8_t> Write(uint32_t qpn, uint32_t psn, uint64_t va, uint32_t rkey,
                           std::span<const uint8_t> data) {
  return Build(wire::op::kRcWriteOnly, qpn, psn,
               [&](uint8_t* p, const wire::OpcodeInfo& info) {
                 wire::Reth r;
                 r.set_va(va);
                 r.set_rkey(rkey);
                 r.set_dma_length(static_cast<uint32_t>(data.size()));
                 std::memcpy(p + info.reth_offset, r.b.data(), sizeof(r));
               },
               data);
}

std::vector<uint8_t> Atomic(uint8_t opcode, uint32_t qpn, uint32_t psn, uint64_t va, uint32_t rkey,
                            uint64_t add) {
  return Build(opcode, qpn, psn,
               [&](uint8_t* p, const wire::OpcodeInfo& info) {
                 wire::AtomicEth a;
                 a.set_va(va);
                 a.set_rkey(rkey);
                 a.set_swap_add(add);
                 std::memcpy(p + info.atomic_eth_offset, a.b.data(), sizeof(a));
               },
               {});
}

std::vector<uint8_t> ReadReq(uint32_t qpn, uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len) {
  return Build(wire::op::kRcReadRequest, qpn, psn,
               [&](uint8_t* p, const wire::OpcodeInfo& info) {
                 wire::Reth r;
                 r.set_va(va);
                 r.set_rkey(rkey);
                 r.set_dma_length(len);
                 std::memcpy(p + info.reth_offset, r.b.data(), sizeof(r));
               },
               {});
}

// Sets softrnic's selective-retransmission bit (wire/headers.h) in a built packet.
std::vector<uint8_t> WithSr(std::vector<uint8_t> p) {
  p[8] = static_cast<uint8_t>(p[8] | 0x40);
  return p;
}

// An RC ACKNOWLEDGE (ACK, NAK or RNR NAK by syndrome) for the requester `qpn`.
std::vector<uint8_t> Ack(uint32_t qpn, uint32_t psn, uint8_t syndrome, uint32_t msn = 0) {
  return Build(wire::op::kRcAck, qpn, psn,
               [&](uint8_t* p, const wire::OpcodeInfo& info) {
                 wire::Aeth a;
                 a.set_syndrome(syndrome);
                 a.set_msn(msn);
                 std::memcpy(p + info.aeth_offset, a.b.data(), sizeof(a));
               },
               {});
}

std::vector<uint8_t> Cnp(uint32_t qpn) {
  std::vector<uint8_t> p(12 + 16 + wire::kIcrcSize, 0);
  wire::Bth bth;
  bth.set_opcode(wire::op::kCnp);
  bth.set_pkey(wire::kDefaultPkey);
  bth.set_dest_qp(qpn);
  bth.set_becn(true);
  std::memcpy(p.data(), bth.b.data(), sizeof(bth));
  return p;
}

class HostileTest : public RcPairTest {
 protected:
  void SetUp() override {
    Open({});  // PSNs start at 0: b expects PSN 0 next
    std::memset(b_.buf.data(), kGuard, b_.buf.size());
    payload_.resize(256);
    for (size_t i = 0; i < payload_.size(); ++i) payload_[i] = static_cast<uint8_t>(i * 3 + 1);
    qpn_ = b_.dev->QpNum(b_.qp);
    rkey_ = b_.dev->MrRkey(b_.mr);
  }
  bool Untouched() { return AllBytes(b_.buf.data(), b_.buf.size(), kGuard); }
  // Sends as the peer (its address and device port: a spoofing forger) and
  // waits for `counter` to grow.
  void SendAndWait(std::vector<uint8_t> pkt, uint64_t EngineStats::*counter) {
    const uint64_t before = StatsOf(*b_.dev).*counter;
    Forger f(TestAddress(0), TestPort());
    ASSERT_TRUE(f.ok());
    f.Send(std::move(pkt), *b_.dev);
    EXPECT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).*counter > before; }))
        << "the packet was not counted where expected";
  }
  std::vector<uint8_t> payload_;
  uint32_t qpn_ = 0, rkey_ = 0;
};

TEST_F(HostileTest, PositiveControlForgedWriteLands) {
  // Proves the harness: a well-formed WRITE from the peer's exact address
  // and port executes (RoCE has no authentication; what stops a forger is
  // not knowing the QPN, PSN and rkey, which this one is given). So the
  // drops in the tests below are the checks' doing, not the harness's.
  REQUIRE_SPOOFING();
  const uint64_t rx0 = StatsOf(*b_.dev).rx_packets;
  Forger f(TestAddress(0), TestPort());
  f.Send(Write(qpn_, 0, Addr(b_, 4096), rkey_, payload_), *b_.dev);
  ASSERT_TRUE(WaitFor([&] { return FirstDiff(b_.buf.data() + 4096, payload_.data(), payload_.size()) == -1; }));
  EXPECT_GT(StatsOf(*b_.dev).rx_packets, rx0);
  EXPECT_TRUE(AllBytes(b_.buf.data(), 4096, kGuard));
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
}

TEST_F(HostileTest, ThirdAddressDroppedBySourceCheck) {
  const uint64_t before = StatsOf(*b_.dev).rx_dropped_source;
  Forger f(TestAddress(2));
  f.Send(Write(qpn_, 0, Addr(b_, 0), rkey_, payload_), *b_.dev);
  EXPECT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).rx_dropped_source > before; }));
  EXPECT_TRUE(Untouched());
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
}

// softrnic's placement bits (wire::Bth::placed) mean "the sender wrote the
// rest of this packet's range into your shared pages"; only a same-host
// ring can carry that. From the network they are reserved bits and
// ignored: this WRITE, whose RETH names 100 bytes more than its payload,
// is refused for its length and writes nothing, instead of landing at
// va + 100 as a placed suffix would.
TEST_F(HostileTest, PlacementBitsFromTheNetworkAreIgnored) {
  REQUIRE_SPOOFING();
  std::vector<uint8_t> pkt = Write(qpn_, 0, Addr(b_, 4096), rkey_, payload_);
  wire::Reth reth;
  std::memcpy(reth.b.data(), pkt.data() + sizeof(wire::Bth), sizeof(reth));
  reth.set_dma_length(static_cast<uint32_t>(payload_.size()) + 100);
  std::memcpy(pkt.data() + sizeof(wire::Bth), reth.b.data(), sizeof(reth));
  pkt[8] = static_cast<uint8_t>(pkt[8] | 0x30);  // placed, suffix
  SendAndWait(std::move(pkt), &EngineStats::tx_naks_invalid_request);
  EXPECT_TRUE(Untouched());
  EXPECT_EQ(StatsOf(*b_.dev).shm_placed_rx_packets, 0u);
}

// The same bits on a packet a same-host ring delivered (RxPacket::via_shm,
// handed to the dispatch directly): a placed suffix lands at the end of the
// range its RETH names; runs (wire::Bth::placed_run) that carry data or
// would end the message are refused and write nothing.
class PlacedPacketTest : public HostileTest {
 protected:
  void FromRing(std::vector<uint8_t> pkt) {
    transport::RxPacket rx;
    rx.data = pkt.data();
    rx.length = static_cast<uint32_t>(pkt.size());
    rx.src.gid = a_.dev->gids()[0];
    rx.src.port = TestPort();  // the peer's device port (same-host source check)
    rx.via_shm = true;
    std::lock_guard lock(b_.dev->engine().mu_);
    EngineTestPeer::Dispatch(b_.dev->engine(), rx);
    EngineTestPeer::RunWork(b_.dev->engine());
    EngineTestPeer::FlushTx(b_.dev->engine());
  }
  // A WRITE ONLY whose RETH names `dma` bytes at buf + 4096, carrying payload_.
  std::vector<uint8_t> WriteOnly(uint32_t dma, uint8_t bits8, uint8_t run) {
    std::vector<uint8_t> pkt = Write(qpn_, 0, Addr(b_, 4096), rkey_, payload_);
    wire::Reth reth;
    std::memcpy(reth.b.data(), pkt.data() + sizeof(wire::Bth), sizeof(reth));
    reth.set_dma_length(dma);
    std::memcpy(pkt.data() + sizeof(wire::Bth), reth.b.data(), sizeof(reth));
    pkt[8] = static_cast<uint8_t>(pkt[8] | bits8);
    pkt[4] = static_cast<uint8_t>(pkt[4] | run);
    return pkt;
  }
};

TEST_F(PlacedPacketTest, PlacedSuffixLandsAtTheEndOfItsRange) {
  FromRing(WriteOnly(static_cast<uint32_t>(payload_.size()) + 100, 0x30, 0));
  EXPECT_EQ(FirstDiff(b_.buf.data() + 4096 + 100, payload_.data(), payload_.size()), -1);
  EXPECT_TRUE(AllBytes(b_.buf.data(), 4096 + 100, kGuard)) << "the placed prefix is not written";
  EXPECT_EQ(StatsOf(*b_.dev).shm_placed_rx_packets, 1u);
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
}

// A placed WRITE_WITH_IMM (docs/shm.md, "Partly shared targets"): its
// ONLY packet carries the suffix of the range and the immediate; the
// receive completes with the RETH's whole length and the immediate.
TEST_F(PlacedPacketTest, PlacedWriteWithImmediateCompletesTheReceive) {
  Sge rsge = SgeOf(b_, 0, 64);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{77, {&rsge, 1}}), 0);
  const uint32_t dma = static_cast<uint32_t>(payload_.size()) + 600;  // one PMTU at most
  std::vector<uint8_t> pkt = Build(wire::op::kRcWriteOnlyImm, qpn_, 0,
                                   [&](uint8_t* p, const wire::OpcodeInfo& info) {
                                     wire::Reth r;
                                     r.set_va(Addr(b_, 4096));
                                     r.set_rkey(rkey_);
                                     r.set_dma_length(dma);
                                     std::memcpy(p + info.reth_offset, r.b.data(), sizeof(r));
                                     wire::ImmDt imm;
                                     imm.set_raw(0xfeedbeefu);
                                     std::memcpy(p + info.imm_offset, imm.b.data(), sizeof(imm));
                                   },
                                   payload_);
  pkt[8] = static_cast<uint8_t>(pkt[8] | 0x30);  // placed, suffix
  FromRing(std::move(pkt));
  EXPECT_EQ(FirstDiff(b_.buf.data() + 4096 + 600, payload_.data(), payload_.size()), -1);
  EXPECT_TRUE(AllBytes(b_.buf.data(), 4096 + 600, kGuard))
      << "neither the placed prefix nor the receive buffer is written";
  EXPECT_EQ(StatsOf(*b_.dev).shm_placed_rx_packets, 1u);
  const auto c = PollN(b_, 1, std::chrono::milliseconds(2000));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(c[0].wr_id, 77u);
  EXPECT_EQ(c[0].byte_len, dma);
  EXPECT_EQ(c[0].imm_data, 0xfeedbeefu);
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
}

TEST_F(PlacedPacketTest, RunCarryingDataIsRefused) {
  // A WRITE FIRST of an 8 KiB message: as a run of 4 PMTUs it must be empty.
  std::vector<uint8_t> pkt = Build(wire::op::kRcWriteFirst, qpn_, 0,
                                   [&](uint8_t* p, const wire::OpcodeInfo& info) {
                                     wire::Reth r;
                                     r.set_va(Addr(b_, 4096));
                                     r.set_rkey(rkey_);
                                     r.set_dma_length(8192);
                                     std::memcpy(p + info.reth_offset, r.b.data(), sizeof(r));
                                   },
                                   payload_);
  pkt[8] = static_cast<uint8_t>(pkt[8] | 0x20);
  pkt[4] = static_cast<uint8_t>(pkt[4] | 3);
  FromRing(std::move(pkt));
  EXPECT_EQ(StatsOf(*b_.dev).tx_naks_invalid_request, 1u);
  EXPECT_TRUE(Untouched());
}

TEST_F(PlacedPacketTest, RunEndingTheMessageIsRefused) {
  payload_.clear();
  FromRing(WriteOnly(4096, 0x20, 1));
  EXPECT_EQ(StatsOf(*b_.dev).tx_naks_invalid_request, 1u);
  EXPECT_TRUE(Untouched());
}

// RC_ATOMIC_WRITE packets (IBA 1.5) as a peer could forge them: the RETH
// must name exactly one naturally aligned word and the payload be its 8
// bytes; anything else is an Invalid Request and writes nothing.
class AtomicWritePacketTest : public PlacedPacketTest {
 protected:
  std::vector<uint8_t> AtomicWrite(uint64_t va, uint32_t dma, const std::vector<uint8_t>& payload) {
    return Build(wire::op::kRcAtomicWrite, qpn_, 0,
                 [&](uint8_t* p, const wire::OpcodeInfo& info) {
                   wire::Reth r;
                   r.set_va(va);
                   r.set_rkey(rkey_);
                   r.set_dma_length(dma);
                   std::memcpy(p + info.reth_offset, r.b.data(), sizeof(r));
                 },
                 payload);
  }
  const std::vector<uint8_t> word_{1, 2, 3, 4, 5, 6, 7, 8};
};

TEST_F(AtomicWritePacketTest, OneAlignedWordLands) {
  FromRing(AtomicWrite(Addr(b_, 4096), 8, word_));
  EXPECT_EQ(FirstDiff(b_.buf.data() + 4096, word_.data(), 8), -1);
  EXPECT_TRUE(AllBytes(b_.buf.data(), 4096, kGuard));
  EXPECT_TRUE(AllBytes(b_.buf.data() + 4104, 4096, kGuard));
  EXPECT_EQ(StatsOf(*b_.dev).tx_naks_invalid_request, 0u);
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
}

TEST_F(AtomicWritePacketTest, ALongerRangeIsRefused) {
  FromRing(AtomicWrite(Addr(b_, 4096), 16, word_));
  EXPECT_EQ(StatsOf(*b_.dev).tx_naks_invalid_request, 1u);
  EXPECT_TRUE(Untouched());
}

TEST_F(AtomicWritePacketTest, AMisalignedWordIsRefused) {
  FromRing(AtomicWrite(Addr(b_, 4100), 8, word_));
  EXPECT_EQ(StatsOf(*b_.dev).tx_naks_invalid_request, 1u);
  EXPECT_TRUE(Untouched());
}

TEST_F(AtomicWritePacketTest, AShortPayloadIsRefused) {
  const std::vector<uint8_t> four(word_.begin(), word_.begin() + 4);
  FromRing(AtomicWrite(Addr(b_, 4096), 8, four));
  EXPECT_EQ(StatsOf(*b_.dev).tx_naks_invalid_request, 1u);
  EXPECT_TRUE(Untouched());
}

TEST_F(AtomicWritePacketTest, PlacementBitsAreRefused) {
  std::vector<uint8_t> pkt = AtomicWrite(Addr(b_, 4096), 8, word_);
  pkt[8] = static_cast<uint8_t>(pkt[8] | 0x20);
  FromRing(std::move(pkt));
  EXPECT_EQ(StatsOf(*b_.dev).tx_naks_invalid_request, 1u);
  EXPECT_TRUE(Untouched());
}

TEST_F(HostileTest, WrongQpn) {
  REQUIRE_SPOOFING();
  SendAndWait(Write(qpn_ ^ 0x800000, 0, Addr(b_, 0), rkey_, payload_), &EngineStats::rx_dropped_unknown_qp);
  EXPECT_TRUE(Untouched());
}

TEST_F(HostileTest, PsnFarAheadAndFarBehindNotExecuted) {
  REQUIRE_SPOOFING();
  SendAndWait(Write(qpn_, 0x400000, Addr(b_, 0), rkey_, payload_), &EngineStats::rx_out_of_sequence);
  SendAndWait(Write(qpn_, 0xC00000, Addr(b_, 0), rkey_, payload_), &EngineStats::rx_duplicates);
  EXPECT_TRUE(Untouched());
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
  // The legitimate peer is unaffected.
  FillPattern(a_.buf, 0, 1000, 5);
  Sge s = SgeOf(a_, 0, 1000);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, Addr(b_, 8192), rkey_)), 0);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(FirstDiff(b_.buf.data() + 8192, a_.buf.data(), 1000), -1);
}

TEST_F(HostileTest, UnknownRkey) {
  REQUIRE_SPOOFING();
  SendAndWait(Write(qpn_, 0, Addr(b_, 0), rkey_ ^ 0xFFFF, payload_), &EngineStats::tx_naks_remote_access);
  EXPECT_TRUE(Untouched());
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kErr);
}

TEST_F(HostileTest, RkeyOfAnotherPd) {
  REQUIRE_SPOOFING();
  Pd* other = nullptr;
  ASSERT_EQ(b_.dev->AllocPd(nullptr, &other), 0);
  std::vector<uint8_t> region(4096, kGuard);
  Mr* mr = nullptr;
  ASSERT_EQ(b_.dev->RegMr(other, region.data(), region.size(), reinterpret_cast<uint64_t>(region.data()),
                          kLocalWrite | kRemoteWrite, nullptr, &mr),
            0);
  SendAndWait(Write(qpn_, 0, reinterpret_cast<uint64_t>(region.data()), b_.dev->MrRkey(mr), payload_),
              &EngineStats::tx_naks_remote_access);
  EXPECT_TRUE(AllBytes(region.data(), region.size(), kGuard));
  EXPECT_TRUE(Untouched());
}

TEST_F(HostileTest, OutOfBoundsWrite) {
  REQUIRE_SPOOFING();
  SendAndWait(Write(qpn_, 0, Addr(b_, b_.buf.size() - 100), rkey_, payload_),
              &EngineStats::tx_naks_remote_access);
  EXPECT_TRUE(Untouched());
}

TEST_F(HostileTest, OutOfBoundsReadRequest) {
  REQUIRE_SPOOFING();
  const uint64_t tx0 = StatsOf(*b_.dev).tx_packets;
  SendAndWait(ReadReq(qpn_, 0, Addr(b_, 0), rkey_, static_cast<uint32_t>(b_.buf.size()) + 1),
              &EngineStats::tx_naks_remote_access);
  EXPECT_EQ(StatsOf(*b_.dev).tx_packets, tx0 + 1) << "only the NAK may leave; no read response";
}

TEST_F(HostileTest, MissingRemoteWriteRight) {
  REQUIRE_SPOOFING();
  std::vector<uint8_t> region(4096, kGuard);
  Mr* mr = nullptr;
  ASSERT_EQ(b_.dev->RegMr(b_.pd, region.data(), region.size(), reinterpret_cast<uint64_t>(region.data()),
                          kLocalWrite | kRemoteRead, nullptr, &mr),
            0);
  SendAndWait(Write(qpn_, 0, reinterpret_cast<uint64_t>(region.data()), b_.dev->MrRkey(mr), payload_),
              &EngineStats::tx_naks_remote_access);
  EXPECT_TRUE(AllBytes(region.data(), region.size(), kGuard));
}

TEST_F(HostileTest, MissingRemoteAtomicRight) {
  REQUIRE_SPOOFING();
  std::vector<uint8_t> region(64, kGuard);
  Mr* mr = nullptr;
  ASSERT_EQ(b_.dev->RegMr(b_.pd, region.data(), region.size(), reinterpret_cast<uint64_t>(region.data()),
                          kLocalWrite | kRemoteWrite, nullptr, &mr),
            0);
  SendAndWait(Atomic(wire::op::kRcFetchAdd, qpn_, 0, reinterpret_cast<uint64_t>(region.data()) + 8,
                     b_.dev->MrRkey(mr), 1),
              &EngineStats::tx_naks_remote_access);
  EXPECT_TRUE(AllBytes(region.data(), region.size(), kGuard));
}

TEST_F(HostileTest, MisalignedAtomic) {
  REQUIRE_SPOOFING();
  SendAndWait(Atomic(wire::op::kRcFetchAdd, qpn_, 0, Addr(b_, 64) + 4, rkey_, 1),
              &EngineStats::tx_naks_invalid_request);
  EXPECT_TRUE(Untouched());
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kErr);
}

TEST_F(HostileTest, TruncatedHeaders) {
  REQUIRE_SPOOFING();
  // WRITE ONLY needs BTH + RETH (28 bytes); send BTH + 8 bytes + ICRC.
  auto full = Write(qpn_, 0, Addr(b_, 0), rkey_, {});
  full.resize(12 + 8 + 4);
  SendAndWait(full, &EngineStats::rx_dropped_parse);
  // An atomic cut inside its AtomicETH.
  auto at = Atomic(wire::op::kRcCompareSwap, qpn_, 0, Addr(b_, 0), rkey_, 1);
  at.resize(12 + 20 + 4);
  SendAndWait(at, &EngineStats::rx_dropped_parse);
  EXPECT_TRUE(Untouched());
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
}

TEST_F(HostileTest, UnknownOpcodeAndBadTver) {
  REQUIRE_SPOOFING();
  auto p = Write(qpn_, 0, Addr(b_, 0), rkey_, payload_);
  p[0] = 0x1F;  // reserved RC opcode
  SendAndWait(p, &EngineStats::rx_dropped_parse);
  p = Write(qpn_, 0, Addr(b_, 0), rkey_, payload_);
  p[1] |= 0x02;  // TVer 2
  SendAndWait(p, &EngineStats::rx_dropped_parse);
  // TVer 1 is a sealed packet (docs/sealed.md); this QP is not sealed.
  p = Write(qpn_, 0, Addr(b_, 0), rkey_, payload_);
  p[1] |= 0x01;
  SendAndWait(p, &EngineStats::rx_dropped_seal_unexpected);
  EXPECT_TRUE(Untouched());
}

TEST_F(HostileTest, WrongIcrcDroppedByTransport) {
  REQUIRE_SPOOFING();
  const auto t0 = TransportCountersOf(*b_.dev);
  const uint64_t rx0 = StatsOf(*b_.dev).rx_packets;
  Forger f(TestAddress(0), TestPort());
  f.Send(Write(qpn_, 0, Addr(b_, 0), rkey_, payload_), *b_.dev, /*good_icrc=*/false);
  EXPECT_TRUE(WaitFor([&] { return TransportCountersOf(*b_.dev).rx_icrc_errors > t0.rx_icrc_errors; }));
  EXPECT_EQ(StatsOf(*b_.dev).rx_packets, rx0);
  EXPECT_TRUE(Untouched());
}

TEST_F(HostileTest, WrongPkey) {
  REQUIRE_SPOOFING();
  auto p = Write(qpn_, 0, Addr(b_, 0), rkey_, payload_);
  p[2] = 0x12;
  p[3] = 0x34;
  SendAndWait(p, &EngineStats::rx_dropped_pkey);
  EXPECT_TRUE(Untouched());
}

TEST_F(HostileTest, WriteLongerThanRethLength) {
  REQUIRE_SPOOFING();
  // RETH says 16 bytes, the packet carries 256.
  auto p = Build(wire::op::kRcWriteOnly, qpn_, 0,
                 [&](uint8_t* b, const wire::OpcodeInfo& info) {
                   wire::Reth r;
                   r.set_va(Addr(b_, b_.buf.size() - 16));
                   r.set_rkey(rkey_);
                   r.set_dma_length(16);
                   std::memcpy(b + info.reth_offset, r.b.data(), sizeof(r));
                 },
                 payload_);
  SendAndWait(p, &EngineStats::tx_naks_invalid_request);
  EXPECT_TRUE(Untouched());
}

// M1: a local user binds the peer's IP on another port (no privilege
// needed). The peer is on this host, so its packets can only come from its
// device port: refused and counted, requests and CNPs alike.
TEST_F(HostileTest, PeerAddressOnAnotherPortDroppedBySourcePortCheck) {
  const uint64_t before = StatsOf(*b_.dev).rx_dropped_source_port;
  Forger f(TestAddress(0));
  f.Send(Write(qpn_, 0, Addr(b_, 0), rkey_, payload_), *b_.dev);
  EXPECT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).rx_dropped_source_port > before; }));
  EXPECT_TRUE(Untouched());
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
  // A CNP the same way toward a (the requester) does not cut its window.
  const uint64_t cuts = StatsOf(*a_.dev).cc_cnp_cuts;
  const uint64_t a_before = StatsOf(*a_.dev).rx_dropped_source_port;
  Forger g(TestAddress(1));
  g.Send(Cnp(a_.dev->QpNum(a_.qp)), *a_.dev);
  EXPECT_TRUE(WaitFor([&] { return StatsOf(*a_.dev).rx_dropped_source_port > a_before; }));
  EXPECT_EQ(StatsOf(*a_.dev).cc_cnp_cuts, cuts);
}

// M1: before selective retransmission is negotiated, an out-of-order packet
// carrying the sr bit must not switch the responder to keeping out-of-order
// packets (a forger would then only need a PSN within 512 of the expected
// one, and its packet would run once the real ones fill the gap).
TEST_F(HostileTest, SrBitBeforeNegotiationKeepsNothing) {
  REQUIRE_SPOOFING();
  Forger f(TestAddress(0), TestPort());
  const uint64_t oos = StatsOf(*b_.dev).rx_out_of_sequence;
  f.Send(WithSr(Write(qpn_, 1, Addr(b_, 0), rkey_, payload_)), *b_.dev);  // expected: PSN 0
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).rx_out_of_sequence > oos; }));
  EXPECT_EQ(StatsOf(*b_.dev).rx_ooo_kept, 0u);
  EXPECT_EQ(StatsOf(*b_.dev).rx_sr_unnegotiated, 1u);
  // The real PSN 0 arrives (as the peer): the forged PSN 1 must not run after it.
  std::vector<uint8_t> real(64, 0x42);
  f.Send(WithSr(Write(qpn_, 0, Addr(b_, 8192), rkey_, real)), *b_.dev);
  ASSERT_TRUE(WaitFor([&] { return b_.buf[8192] == 0x42; }));
  usleep(50 * 1000);
  EXPECT_TRUE(AllBytes(b_.buf.data(), 4096, kGuard)) << "the forged out-of-order packet was executed";
}

// M1: once negotiated, a forged packet kept for a PSN ahead must not shut
// out the real packet with the same PSN (the first copy used to win).
// Two different copies of one PSN: neither is trusted, the slot is emptied
// and the requester's resend (its timeout forgets SACKs) brings the real one.
TEST_F(HostileTest, ForgedKeptPacketDoesNotReplaceRealOne) {
  REQUIRE_SPOOFING();
  Forger f(TestAddress(0), TestPort());
  std::vector<uint8_t> first(64, 0x42);
  f.Send(WithSr(Write(qpn_, 0, Addr(b_, 8192), rkey_, first)), *b_.dev);  // negotiates
  ASSERT_TRUE(WaitFor([&] { return b_.buf[8192] == 0x42; }));
  const std::vector<uint8_t> forged(payload_.size(), 0xEE);
  f.Send(WithSr(Write(qpn_, 2, Addr(b_, 0), rkey_, forged)), *b_.dev);
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).rx_ooo_kept == 1; }));
  f.Send(WithSr(Write(qpn_, 2, Addr(b_, 0), rkey_, payload_)), *b_.dev);  // the real PSN 2
  ASSERT_TRUE(WaitFor([&] {
    const EngineStats st = StatsOf(*b_.dev);
    return st.rx_ooo_conflicts + st.rx_duplicates > 0;
  }));
  f.Send(WithSr(Write(qpn_, 1, Addr(b_, 4096), rkey_, payload_)), *b_.dev);  // fills the gap
  ASSERT_TRUE(WaitFor([&] { return FirstDiff(b_.buf.data() + 4096, payload_.data(), payload_.size()) == -1; }));
  usleep(20 * 1000);
  EXPECT_FALSE(b_.buf[0] == 0xEE) << "the forged copy was executed in place of the real one";
  // The requester resends PSN 2: the real data lands.
  f.Send(WithSr(Write(qpn_, 2, Addr(b_, 0), rkey_, payload_)), *b_.dev);
  EXPECT_TRUE(WaitFor([&] { return FirstDiff(b_.buf.data(), payload_.data(), payload_.size()) == -1; }));
  EXPECT_EQ(StatsOf(*b_.dev).rx_ooo_conflicts, 1u);
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
}

// The reorder store's packet memory (kSrWindow slots of the path MTU) is
// taken by the first packet kept, not at RTR (its slot arrays too): most connections never see a
// packet out of order (issue 17: zero-filling it cost ~5 ms per rdma_cm
// connection). A kept packet still runs from it, byte for byte.
TEST_F(HostileTest, ReorderStoreMemoryTakenByTheFirstPacketKept) {
  REQUIRE_SPOOFING();
  auto has_store = [&] {
    std::lock_guard lock(b_.dev->engine().mu_);
    const SrStoreState& st = b_.qp->sr_store;
    EXPECT_EQ(st.ooo_store != nullptr, !st.ooo_len.empty()) << "the store's parts taken apart";
    EXPECT_EQ(st.ooo_len.empty(), st.ran_from_store.empty()) << "the store's parts taken apart";
    return st.ooo_store != nullptr;
  };
  {
    std::lock_guard lock(b_.dev->engine().mu_);
    ASSERT_TRUE(b_.qp->sr_store.offered) << "setup: the responder offers selective repeat";
  }
  EXPECT_FALSE(has_store());
  Forger f(TestAddress(0), TestPort());
  std::vector<uint8_t> first(64, 0x42);
  f.Send(WithSr(Write(qpn_, 0, Addr(b_, 8192), rkey_, first)), *b_.dev);  // negotiates, in order
  ASSERT_TRUE(WaitFor([&] { return b_.buf[8192] == 0x42; }));
  EXPECT_FALSE(has_store()) << "an in-order packet took the store's memory";
  f.Send(WithSr(Write(qpn_, 2, Addr(b_, 0), rkey_, payload_)), *b_.dev);  // ahead: kept
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).rx_ooo_kept == 1; }));
  EXPECT_TRUE(has_store());
  f.Send(WithSr(Write(qpn_, 1, Addr(b_, 4096), rkey_, payload_)), *b_.dev);  // fills the gap
  EXPECT_TRUE(WaitFor([&] { return FirstDiff(b_.buf.data(), payload_.data(), payload_.size()) == -1; }))
      << "the kept packet did not run from the store";
  EXPECT_EQ(FirstDiff(b_.buf.data() + 4096, payload_.data(), payload_.size()), -1);
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
}

// M1: the case the conflict rule cannot see. A forged packet kept for
// PSN 2 runs as soon as the real PSN 1 arrives in order; the real PSN 2
// comes after it, as a duplicate. Nothing can undo the forged write, but
// the difference must not pass silently: the responder fails the QP
// (Invalid Request NAK to the peer, QP error event) so that both ends
// see an error instead of a success over corrupted memory.
TEST_F(HostileTest, ForgedKeptPacketExecutedFirstIsDetected) {
  REQUIRE_SPOOFING();
  Forger f(TestAddress(0), TestPort());
  std::vector<uint8_t> first(64, 0x42);
  f.Send(WithSr(Write(qpn_, 0, Addr(b_, 8192), rkey_, first)), *b_.dev);  // negotiates
  ASSERT_TRUE(WaitFor([&] { return b_.buf[8192] == 0x42; }));
  const std::vector<uint8_t> forged(payload_.size(), 0xEE);
  f.Send(WithSr(Write(qpn_, 2, Addr(b_, 0), rkey_, forged)), *b_.dev);
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).rx_ooo_kept == 1; }));
  f.Send(WithSr(Write(qpn_, 1, Addr(b_, 4096), rkey_, payload_)), *b_.dev);  // the real PSN 1
  ASSERT_TRUE(WaitFor([&] { return b_.buf[0] == 0xEE; })) << "setup: the kept packet should run";
  const uint64_t naks = StatsOf(*b_.dev).tx_naks_invalid_request;
  f.Send(WithSr(Write(qpn_, 2, Addr(b_, 0), rkey_, payload_)), *b_.dev);  // the real PSN 2
  EXPECT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).rx_ooo_forgery_detected == 1; }));
  EXPECT_EQ(StatsOf(*b_.dev).tx_naks_invalid_request, naks + 1);
  EXPECT_TRUE(WaitFor([&] { return b_.dev->GetQpState(b_.qp) == QpState::kErr; }));
}

// An identical copy of a packet run from the store is an ordinary duplicate.
TEST_F(HostileTest, IdenticalCopyOfKeptPacketIsAPlainDuplicate) {
  REQUIRE_SPOOFING();
  Forger f(TestAddress(0), TestPort());
  std::vector<uint8_t> first(64, 0x42);
  f.Send(WithSr(Write(qpn_, 0, Addr(b_, 8192), rkey_, first)), *b_.dev);
  ASSERT_TRUE(WaitFor([&] { return b_.buf[8192] == 0x42; }));
  f.Send(WithSr(Write(qpn_, 2, Addr(b_, 0), rkey_, payload_)), *b_.dev);  // arrives early
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).rx_ooo_kept == 1; }));
  f.Send(WithSr(Write(qpn_, 1, Addr(b_, 4096), rkey_, payload_)), *b_.dev);
  ASSERT_TRUE(WaitFor([&] { return FirstDiff(b_.buf.data(), payload_.data(), payload_.size()) == -1; }));
  const uint64_t dups = StatsOf(*b_.dev).rx_duplicates;
  auto again = WithSr(Write(qpn_, 2, Addr(b_, 0), rkey_, payload_));
  again[8] = static_cast<uint8_t>(again[8] & 0x7F);  // a resend may differ in AckReq
  f.Send(again, *b_.dev);
  EXPECT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).rx_duplicates > dups; }));
  EXPECT_EQ(StatsOf(*b_.dev).rx_ooo_forgery_detected, 0u);
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
}

// M1: forged responses toward a requester. Only PSNs it has sent can be
// acknowledged; a NAK or RNR NAK outside [oldest unacknowledged, last sent]
// or an RNR NAK for a request that takes no receive WQE is ignored and
// counted. Inside that window RoCE cannot tell a forged ACK from a real one
// (no authentication on the wire): the last step shows that residual risk.
class HostileResponseTest : public HostileTest {
 protected:
  void SetUp() override {
    QpOptions o;
    o.timeout = 18;  // ~1 s: no retry exhaustion during the test
    Open(o);
    std::memset(b_.buf.data(), kGuard, b_.buf.size());
    payload_.assign(256, 0x5A);
    qpn_ = a_.dev->QpNum(a_.qp);
  }
  // The requests must reach b's engine (and be dropped there), not b's
  // memory directly through the same-host shared-memory path.
  void Configure(EngineConfig& config) override {
    config.transport_mode = transport::TransportMode::kUdp;
  }
  // Sends as b (its address and port) to a; waits for `counter` to grow.
  void ToRequester(std::vector<uint8_t> pkt, uint64_t EngineStats::*counter) {
    const uint64_t before = StatsOf(*a_.dev).*counter;
    Forger f(TestAddress(1), TestPort());
    f.Send(std::move(pkt), *a_.dev);
    EXPECT_TRUE(WaitFor([&] { return StatsOf(*a_.dev).*counter > before; }))
        << "the forged response was not counted where expected";
  }
};

TEST_F(HostileResponseTest, OnlyPsnsSentCanBeAnswered) {
  REQUIRE_SPOOFING();
  // b's QP drops everything: a's two-packet WRITE (PSNs 0 and 1) stays unanswered.
  QpAttr err;
  err.qp_state = QpState::kErr;
  ASSERT_EQ(b_.dev->ModifyQp(b_.qp, err, kQpState), 0);
  FillPattern(a_.buf, 0, 2048, 3);
  Sge s = SgeOf(a_, 0, 2048);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, Addr(b_, 0),
                                           b_.dev->MrRkey(b_.mr))),
            0);
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*a_.dev).tx_packets >= 2; }));
  const uint8_t kAckSyn = wire::kAckSyndromeNoCredit;
  const auto nak = [](wire::NakCode c) {
    return wire::MakeSyndrome(wire::AckKind::kNak, static_cast<uint8_t>(c));
  };
  // An ACK for PSN 5, never sent: completes nothing.
  ToRequester(Ack(qpn_, 5, kAckSyn), &EngineStats::rx_responses_unsent);
  // A NAK beyond what was sent: the QP must not fail.
  ToRequester(Ack(qpn_, 7, nak(wire::NakCode::kRemoteAccessError)), &EngineStats::rx_responses_unsent);
  // A NAK older than the oldest unacknowledged PSN.
  ToRequester(Ack(qpn_, wire::kPsnMask, nak(wire::NakCode::kInvalidRequest)),
              &EngineStats::rx_responses_stale);
  // An RNR NAK for a WRITE (takes no receive WQE, IBA 9.7.5.1.6): no stall.
  ToRequester(Ack(qpn_, 0, wire::MakeSyndrome(wire::AckKind::kRnrNak, 31)),
              &EngineStats::rx_rnr_naks_invalid);
  EXPECT_TRUE(PollFor(a_, std::chrono::milliseconds(50)).empty());
  EXPECT_EQ(a_.dev->GetQpState(a_.qp), QpState::kRts);
  {
    std::lock_guard lock(a_.dev->engine().mu_);
    EXPECT_FALSE(a_.qp->comp.rnr_waiting);
  }
  // Residual risk, inherent to RoCE: an ACK inside the window completes.
  Forger f(TestAddress(1), TestPort());
  f.Send(Ack(qpn_, 1, kAckSyn), *a_.dev);
  auto c = PollN(a_, 1, std::chrono::milliseconds(2000));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
}

// A READ response whose AETH says NAK is malformed (IBA 9.7.5.1.3: READ
// responses FIRST, LAST and ONLY carry an ACK syndrome): it must neither
// complete the READ nor acknowledge anything. The responder fuzzer found
// a LAST with a NAK syndrome completing a READ with SUCCESS.
TEST_F(HostileResponseTest, ReadResponseWithANakSyndromeCompletesNothing) {
  REQUIRE_SPOOFING();
  // b's QP drops everything: a's 256-byte READ (PSN 0) stays unanswered.
  QpAttr err;
  err.qp_state = QpState::kErr;
  ASSERT_EQ(b_.dev->ModifyQp(b_.qp, err, kQpState), 0);
  std::memset(a_.buf.data(), 0, 256);
  Sge s = SgeOf(a_, 0, 256);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaRead, 1, {&s, 1}, Addr(b_, 0),
                                           b_.dev->MrRkey(b_.mr))),
            0);
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*a_.dev).tx_packets >= 1; }));
  const auto read_only = [&](uint8_t syndrome) {
    return Build(wire::op::kRcReadResponseOnly, qpn_, 0,
                 [&](uint8_t* p, const wire::OpcodeInfo& info) {
                   wire::Aeth a;
                   a.set_syndrome(syndrome);
                   std::memcpy(p + info.aeth_offset, a.b.data(), sizeof(a));
                 },
                 payload_);
  };
  ToRequester(read_only(wire::MakeSyndrome(wire::AckKind::kNak,
                                           static_cast<uint8_t>(wire::NakCode::kPsnSequenceError))),
              &EngineStats::rx_responses_bad_syndrome);
  ToRequester(read_only(wire::MakeSyndrome(wire::AckKind::kRnrNak, 1)),
              &EngineStats::rx_responses_bad_syndrome);
  EXPECT_TRUE(PollFor(a_, std::chrono::milliseconds(50)).empty());
  EXPECT_EQ(a_.dev->GetQpState(a_.qp), QpState::kRts);
  EXPECT_NE(a_.buf[0], 0x5A) << "a malformed response scattered its payload";
  // The same response with an ACK syndrome completes the READ.
  Forger f(TestAddress(1), TestPort());
  f.Send(read_only(wire::kAckSyndromeNoCredit), *a_.dev);
  auto c = PollN(a_, 1, std::chrono::milliseconds(2000));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(a_.buf[0], 0x5A);
}

// L5: a responder that granted no READ/atomic resources (max_dest_rd_atomic
// 0) must refuse READ and atomic requests: Invalid Request NAK, as rxe does
// (RESPST_ERR_TOO_MANY_RDMA_ATM_REQ, a class C error), nothing read. (With
// resources granted, the ring of saved responses is recycled oldest first,
// as rxe does too: softrnic answers each request completely before taking
// the next, so a resource is never busy when another request arrives.)
class NoRdAtomicResourcesTest : public HostileTest {
 protected:
  void SetUp() override {
    QpOptions o;
    o.max_rd_atomic = 0;
    Open(o);
    std::memset(b_.buf.data(), kGuard, b_.buf.size());
    qpn_ = b_.dev->QpNum(b_.qp);
    rkey_ = b_.dev->MrRkey(b_.mr);
  }
};

TEST_F(NoRdAtomicResourcesTest, ReadAndAtomicRefused) {
  REQUIRE_SPOOFING();
  const uint64_t tx0 = StatsOf(*b_.dev).tx_packets;
  SendAndWait(ReadReq(qpn_, 0, Addr(b_, 0), rkey_, 4096), &EngineStats::tx_naks_invalid_request);
  EXPECT_EQ(StatsOf(*b_.dev).tx_packets, tx0 + 1) << "only the NAK may leave; no read response";
  EXPECT_EQ(StatsOf(*b_.dev).tx_naks_rd_atomic_limit, 1u);
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kErr);
}

TEST_F(NoRdAtomicResourcesTest, AtomicRefused) {
  REQUIRE_SPOOFING();
  SendAndWait(Atomic(wire::op::kRcFetchAdd, qpn_, 0, Addr(b_, 64), rkey_, 1),
              &EngineStats::tx_naks_invalid_request);
  EXPECT_TRUE(Untouched());
  EXPECT_EQ(StatsOf(*b_.dev).tx_naks_rd_atomic_limit, 1u);
}

}  // namespace
}  // namespace softrnic::engine::testing
