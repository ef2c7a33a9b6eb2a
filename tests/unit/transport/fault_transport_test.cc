// FaultTransport (fault_transport.h) around a fake transport: what it passes
// on, in which order, framed how, and how a short inner SendBurst maps back
// to the caller's packets. No sockets (udp_transport_test.cc runs the same
// faults over UDP).
#include "transport/fault_transport.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/icrc_framing.h"
#include "wire/icrc.h"

namespace softrnic::transport {
namespace {

Endpoint Ep(uint32_t host_order_ip, uint16_t port) {
  return Endpoint{Gid::FromIpv4(__builtin_bswap32(host_order_ip)), port};
}

// Records what it is asked to send (copies), consumes at most `budget`
// packets per call (-1: all), and counts its own tx_packets.
class FakeTransport final : public Transport {
 public:
  struct Sent {
    std::vector<uint8_t> bytes;
    bool icrc_included;
  };
  std::span<const Endpoint> locals() const override { return locals_; }
  int SendBurst(const TxPacket* packets, int n) override {
    const int take = budget_ < 0 ? n : std::min(n, budget_);
    for (int i = 0; i < take; ++i) {
      std::vector<uint8_t> b(packets[i].length);
      FlattenTxPacket(packets[i], b.data());
      if (packets[i].icrc_included)
        std::copy(packets[i].data + packets[i].length - 4, packets[i].data + packets[i].length,
                  b.end() - 4);
      sent_.push_back(Sent{std::move(b), packets[i].icrc_included});
      ++counters_.tx_packets;
    }
    return take;
  }
  int RecvBurst(RxPacket*, int) override { return 0; }
  int pollable_fd() const override { return -1; }
  const TransportCounters& counters() const override { return counters_; }
  uint32_t max_multicast_groups() const override { return groups_; }

  std::vector<Endpoint> locals_{Ep(0x7f0a0001, 4791)};
  uint32_t groups_ = 0;
  std::vector<Sent> sent_;
  int budget_ = -1;
  TransportCounters counters_;
};

struct Rig {
  FakeTransport* inner;
  std::unique_ptr<FaultTransport> t;
};

Rig Make(const FaultConfig& f) {
  auto inner = std::make_unique<FakeTransport>();
  FakeTransport* raw = inner.get();
  return Rig{raw, std::make_unique<FaultTransport>(std::move(inner), f)};
}

// Packet `seq`: 64 bytes, a request opcode, seq in byte 12.
std::vector<uint8_t> Packet(uint8_t seq) {
  std::vector<uint8_t> p(64, 0xAB);
  p[0] = 0x04;
  p[12] = seq;
  return p;
}

std::vector<TxPacket> Tx(std::vector<std::vector<uint8_t>>& bufs) {
  std::vector<TxPacket> tx;
  for (auto& b : bufs)
    tx.push_back(TxPacket{b.data(), static_cast<uint32_t>(b.size()), 0, Ep(0x7f0a0002, 4791)});
  return tx;
}

std::vector<std::vector<uint8_t>> Bufs(int n) {
  std::vector<std::vector<uint8_t>> bufs;
  for (int i = 0; i < n; ++i) bufs.push_back(Packet(static_cast<uint8_t>(i)));
  return bufs;
}

TEST(FaultTransport, NoFaultsPassesEverythingOnUntouched) {
  Rig r = Make(FaultConfig{});
  auto bufs = Bufs(5);
  auto tx = Tx(bufs);
  EXPECT_EQ(r.t->SendBurst(tx.data(), 5), 5);
  ASSERT_EQ(r.inner->sent_.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r.inner->sent_[i].bytes[12], i);
    EXPECT_FALSE(r.inner->sent_[i].icrc_included);
  }
  EXPECT_EQ(r.t->counters().tx_packets, 5u);  // the inner transport's, merged
}

// The device's max_mcast_grp is the transport's: the wrapper must not hide
// the inner transport's groups behind Transport's default of none.
TEST(FaultTransport, ReportsTheInnerTransportsMulticastGroups) {
  Rig r = Make(FaultConfig{});
  EXPECT_EQ(r.t->max_multicast_groups(), 0u);
  r.inner->groups_ = 7;
  EXPECT_EQ(r.t->max_multicast_groups(), 7u);
}

TEST(FaultTransport, ReorderSwapsNeighboursAndRecvBurstReleasesTheLastHold) {
  FaultConfig f;
  f.reorder = 1.0;
  Rig r = Make(f);
  auto bufs = Bufs(3);
  auto tx = Tx(bufs);
  EXPECT_EQ(r.t->SendBurst(tx.data(), 3), 3);
  ASSERT_EQ(r.inner->sent_.size(), 2u);
  EXPECT_EQ(r.inner->sent_[0].bytes[12], 1);
  EXPECT_EQ(r.inner->sent_[1].bytes[12], 0);
  RxPacket rx[1];
  r.t->RecvBurst(rx, 1);
  ASSERT_EQ(r.inner->sent_.size(), 3u);
  EXPECT_EQ(r.inner->sent_[2].bytes[12], 2);
  EXPECT_EQ(r.t->counters().injected_reorders, 2u);
}

TEST(FaultTransport, CorruptedCopyCarriesTheOriginalsIcrc) {
  FaultConfig f;
  f.corrupt = 1.0;
  Rig r = Make(f);
  auto bufs = Bufs(4);
  const auto originals = bufs;
  auto tx = Tx(bufs);
  EXPECT_EQ(r.t->SendBurst(tx.data(), 4), 4);
  EXPECT_EQ(bufs, originals) << "the caller's packets are never written";
  ASSERT_EQ(r.inner->sent_.size(), 4u);
  const wire::IpUdpFields ip = IcrcFields(__builtin_bswap32(0x7f0a0001), 4791,
                                          __builtin_bswap32(0x7f0a0002), 4791);
  for (int i = 0; i < 4; ++i) {
    const auto& s = r.inner->sent_[i];
    EXPECT_TRUE(s.icrc_included);
    // One bit differs from the original before the ICRC...
    int bits = 0;
    for (size_t k = 0; k + 4 < s.bytes.size(); ++k)
      bits += __builtin_popcount(s.bytes[k] ^ originals[i][k]);
    EXPECT_EQ(bits, 1);
    // ...so the ICRC, framed for the original, does not match.
    EXPECT_FALSE(IcrcValid(ip, s.bytes.data(), static_cast<uint32_t>(s.bytes.size())));
    std::vector<uint8_t> repaired = originals[i];
    std::copy(s.bytes.end() - 4, s.bytes.end(), repaired.end() - 4);
    EXPECT_TRUE(IcrcValid(ip, repaired.data(), static_cast<uint32_t>(repaired.size())));
  }
  EXPECT_EQ(r.t->counters().injected_corrupts, 4u);
}

TEST(FaultTransport, ShortInnerSendReturnsTheFirstPacketNotConsumed) {
  FaultConfig f;
  f.duplicate = 1.0;
  Rig r = Make(f);
  auto bufs = Bufs(4);
  auto tx = Tx(bufs);
  // Passed on: 0 0' 1 1' 2 2' 3 3'. Three taken: 0 0' 1 -> packet 1's
  // duplicate is lost, packets 2 and 3 are offered again.
  r.inner->budget_ = 3;
  EXPECT_EQ(r.t->SendBurst(tx.data(), 4), 2);
  // Two taken: 0 0' -> packet 1 is offered again.
  r.inner->budget_ = 2;
  EXPECT_EQ(r.t->SendBurst(tx.data(), 4), 1);
  r.inner->budget_ = 0;
  EXPECT_EQ(r.t->SendBurst(tx.data(), 4), 0);
}

TEST(FaultTransport, HeldPacketStaysHeldWhenTheInnerTransportIsBusy) {
  FaultConfig f;
  f.reorder = 1.0;
  Rig r = Make(f);
  auto bufs = Bufs(2);
  auto tx = Tx(bufs);
  // 0 is held, 1 is passed on with 0 after it; nothing is taken: packet 1
  // is the caller's again, 0 stays held (it was consumed) ...
  r.inner->budget_ = 0;
  EXPECT_EQ(r.t->SendBurst(tx.data(), 2), 1);
  EXPECT_EQ(r.t->counters().injected_reorders, 1u);
  // ... and leaves alone at the next RecvBurst.
  r.inner->budget_ = -1;
  RxPacket rx[1];
  r.t->RecvBurst(rx, 1);
  ASSERT_EQ(r.inner->sent_.size(), 1u);
  EXPECT_EQ(r.inner->sent_[0].bytes[12], 0);
}

TEST(FaultTransport, DropsAreConsumedAndCounted) {
  FaultConfig f;
  f.drop = 1.0;
  Rig r = Make(f);
  auto bufs = Bufs(6);
  auto tx = Tx(bufs);
  EXPECT_EQ(r.t->SendBurst(tx.data(), 6), 6);
  EXPECT_TRUE(r.inner->sent_.empty());
  EXPECT_EQ(r.t->counters().injected_drops, 6u);
}

}  // namespace
}  // namespace softrnic::transport
