// Acceptance item 8: forged and hostile packets. A plain UDP socket builds
// RoCE v2 packets (wire/headers.h + opcode table + ICRC) and sends them to a
// device's QP. The socket is bound to the *peer's* IP address (another port:
// RC source checks compare the GID, and RoCE's UDP source port is entropy),
// so the packets reach the responder's checks; a socket on a third address
// checks the source filter. Every rejected packet must leave memory
// untouched and be counted. (The same checks through the legitimate peer are
// in errors_test.cc.)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <functional>

#include "rc_pair.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

namespace softrnic::engine::testing {
namespace {

constexpr uint8_t kGuard = 0x77;

class Forger {
 public:
  explicit Forger(const std::string& ip) {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd_, 0);
    const int pmtu = IP_PMTUDISC_DO;  // IPv4 ID 0 + DF, as the ICRC below assumes
    setsockopt(fd_, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    inet_pton(AF_INET, ip.c_str(), &sin.sin_addr);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)), 0) << strerror(errno);
    socklen_t len = sizeof(local_);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&local_), &len);
  }
  ~Forger() {
    if (fd_ >= 0) close(fd_);
  }
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
    ASSERT_EQ(sendto(fd_, pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              static_cast<ssize_t>(pkt.size()));
  }

 private:
  int fd_ = -1;
  sockaddr_in local_{};
};

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
  // Sends from the peer's address and waits for `counter` to grow.
  void SendAndWait(std::vector<uint8_t> pkt, uint64_t EngineStats::*counter) {
    const uint64_t before = StatsOf(*b_.dev).*counter;
    Forger f(TestAddress(0));
    f.Send(std::move(pkt), *b_.dev);
    EXPECT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).*counter > before; }))
        << "the packet was not counted where expected";
  }
  std::vector<uint8_t> payload_;
  uint32_t qpn_ = 0, rkey_ = 0;
};

TEST_F(HostileTest, PositiveControlForgedWriteLands) {
  // Proves the harness: a well-formed forged WRITE from the peer's IP executes.
  const uint64_t rx0 = StatsOf(*b_.dev).rx_packets;
  Forger f(TestAddress(0));
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

TEST_F(HostileTest, WrongQpn) {
  SendAndWait(Write(qpn_ ^ 0x800000, 0, Addr(b_, 0), rkey_, payload_), &EngineStats::rx_dropped_unknown_qp);
  EXPECT_TRUE(Untouched());
}

TEST_F(HostileTest, PsnFarAheadAndFarBehindNotExecuted) {
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
  SendAndWait(Write(qpn_, 0, Addr(b_, 0), rkey_ ^ 0xFFFF, payload_), &EngineStats::tx_naks_remote_access);
  EXPECT_TRUE(Untouched());
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kErr);
}

TEST_F(HostileTest, RkeyOfAnotherPd) {
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
  SendAndWait(Write(qpn_, 0, Addr(b_, b_.buf.size() - 100), rkey_, payload_),
              &EngineStats::tx_naks_remote_access);
  EXPECT_TRUE(Untouched());
}

TEST_F(HostileTest, OutOfBoundsReadRequest) {
  const uint64_t tx0 = StatsOf(*b_.dev).tx_packets;
  SendAndWait(ReadReq(qpn_, 0, Addr(b_, 0), rkey_, static_cast<uint32_t>(b_.buf.size()) + 1),
              &EngineStats::tx_naks_remote_access);
  EXPECT_EQ(StatsOf(*b_.dev).tx_packets, tx0 + 1) << "only the NAK may leave; no read response";
}

TEST_F(HostileTest, MissingRemoteWriteRight) {
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
  SendAndWait(Atomic(wire::op::kRcFetchAdd, qpn_, 0, Addr(b_, 64) + 4, rkey_, 1),
              &EngineStats::tx_naks_invalid_request);
  EXPECT_TRUE(Untouched());
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kErr);
}

TEST_F(HostileTest, TruncatedHeaders) {
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
  auto p = Write(qpn_, 0, Addr(b_, 0), rkey_, payload_);
  p[0] = 0x1F;  // reserved RC opcode
  SendAndWait(p, &EngineStats::rx_dropped_parse);
  p = Write(qpn_, 0, Addr(b_, 0), rkey_, payload_);
  p[1] |= 0x01;  // TVer 1
  SendAndWait(p, &EngineStats::rx_dropped_parse);
  EXPECT_TRUE(Untouched());
}

TEST_F(HostileTest, WrongIcrcDroppedByTransport) {
  const auto t0 = TransportCountersOf(*b_.dev);
  const uint64_t rx0 = StatsOf(*b_.dev).rx_packets;
  Forger f(TestAddress(0));
  f.Send(Write(qpn_, 0, Addr(b_, 0), rkey_, payload_), *b_.dev, /*good_icrc=*/false);
  EXPECT_TRUE(WaitFor([&] { return TransportCountersOf(*b_.dev).rx_icrc_errors > t0.rx_icrc_errors; }));
  EXPECT_EQ(StatsOf(*b_.dev).rx_packets, rx0);
  EXPECT_TRUE(Untouched());
}

TEST_F(HostileTest, WrongPkey) {
  auto p = Write(qpn_, 0, Addr(b_, 0), rkey_, payload_);
  p[2] = 0x12;
  p[3] = 0x34;
  SendAndWait(p, &EngineStats::rx_dropped_pkey);
  EXPECT_TRUE(Untouched());
}

TEST_F(HostileTest, WriteLongerThanRethLength) {
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

}  // namespace
}  // namespace softrnic::engine::testing
