// FaultTransport (fault_transport.h) around a fake transport and a fake
// clock: what it passes on, when, in which order, framed how, in both
// directions. No sockets (udp_transport_test.cc runs faults over UDP).
#include "transport/fault_transport.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "faults/fault_events.h"
#include "faults/scenario.h"
#include "transport/icrc_framing.h"
#include "wire/icrc.h"

namespace softrnic::transport {
namespace {

using faults::Direction;
using faults::FaultKind;
using faults::Scenario;
using TimePoint = FaultTransport::TimePoint;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

Endpoint Ep(uint32_t host_order_ip, uint16_t port) {
  return Endpoint{Gid::FromIpv4(__builtin_bswap32(host_order_ip)), port};
}

struct FakeClock {
  TimePoint now{std::chrono::seconds(1000)};
  TimePoint start = now;
  uint64_t ns() const { return static_cast<uint64_t>(nanoseconds(now - start).count()); }
  void Advance(nanoseconds d) { now += d; }
  void To(nanoseconds since_start) { now = start + since_start; }
};

// Records what it is asked to send (copies, with the clock's time),
// consumes at most `budget` packets per call (-1: all), and returns
// `to_receive_` from RecvBurst in a buffer it overwrites at every call,
// as a real transport does.
class FakeTransport final : public Transport {
 public:
  struct Sent {
    std::vector<uint8_t> bytes;
    bool icrc_included;
    uint64_t at_ns;
  };
  explicit FakeTransport(const FakeClock* clock) : clock_(clock) {}
  std::span<const Endpoint> locals() const override { return locals_; }
  int SendBurst(const TxPacket* packets, int n) override {
    const int take = budget_ < 0 ? n : std::min(n, budget_);
    for (int i = 0; i < take; ++i) {
      if (packets[i].data == nullptr || packets[i].length < 4) {  // a real one counts an error
        sent_.push_back(Sent{{}, false, clock_->ns()});
        continue;
      }
      std::vector<uint8_t> b(packets[i].length);
      FlattenTxPacket(packets[i], b.data());
      if (packets[i].icrc_included)
        std::copy(packets[i].data + packets[i].length - 4, packets[i].data + packets[i].length,
                  b.end() - 4);
      sent_.push_back(Sent{std::move(b), packets[i].icrc_included, clock_->ns()});
      ++counters_.tx_packets;
    }
    return take;
  }
  int RecvBurst(RxPacket* packets, int n) override {
    int k = 0;
    for (auto& buf : rx_buf_) std::fill(buf.begin(), buf.end(), 0xEE);  // reused
    rx_buf_.clear();
    while (static_cast<int>(rx_buf_.size()) < n && !to_receive_.empty()) {
      rx_buf_.push_back(to_receive_.front());
      to_receive_.pop_front();
    }
    for (auto& buf : rx_buf_) {
      RxPacket& p = packets[k++];
      p = RxPacket{};
      p.data = buf.data();
      p.length = static_cast<uint32_t>(buf.size());
      p.src = Ep(0x7f0a0002, 4791);
      p.group = group_set_ ? &group_ : nullptr;
    }
    return k;
  }
  int pollable_fd() const override { return -1; }
  const TransportCounters& counters() const override { return counters_; }
  uint32_t max_multicast_groups() const override { return groups_; }
  std::optional<TimePoint> next_deadline() const override { return deadline_; }

  const FakeClock* clock_;
  std::vector<Endpoint> locals_{Ep(0x7f0a0001, 4791)};
  uint32_t groups_ = 0;
  std::vector<Sent> sent_;
  int budget_ = -1;
  TransportCounters counters_;
  std::deque<std::vector<uint8_t>> to_receive_;
  std::deque<std::vector<uint8_t>> rx_buf_;
  Gid group_{};
  bool group_set_ = false;
  std::optional<TimePoint> deadline_;
};

class Sink final : public faults::FaultEventSink {
 public:
  void OnFault(const faults::FaultEvent& e) override { events.push_back(e); }
  std::vector<faults::FaultEvent> events;
};

struct Rig {
  std::unique_ptr<FakeClock> clock = std::make_unique<FakeClock>();
  FakeTransport* inner = nullptr;
  std::unique_ptr<FaultTransport> t;
  Sink sink;
};

std::unique_ptr<Rig> Make(const Scenario& s) {
  auto r = std::make_unique<Rig>();
  auto inner = std::make_unique<FakeTransport>(r->clock.get());
  r->inner = inner.get();
  FakeClock* c = r->clock.get();
  r->t = std::make_unique<FaultTransport>(std::move(inner), s, [c] { return c->now; });
  r->t->SetFaultEventSink(&r->sink);
  return r;
}

// One rule, both directions unless told.
Scenario One(const faults::Rule& rule, uint64_t seed = 1) {
  Scenario s;
  s.seed = seed;
  s.rules.push_back(rule);
  return s;
}

faults::Rule Out() {
  faults::Rule r;
  r.match.direction = Direction::kOut;
  return r;
}
faults::Rule In() {
  faults::Rule r;
  r.match.direction = Direction::kIn;
  return r;
}

// Packet `seq`: `size` bytes, a request opcode (SEND ONLY), seq in byte 12
// and in the PSN.
std::vector<uint8_t> Packet(uint32_t seq, uint32_t size = 64) {
  std::vector<uint8_t> p(size, 0xAB);
  p[0] = 0x04;
  p[5] = 0;
  p[6] = 0;
  p[7] = 0x11;  // dest QPN 0x11
  p[9] = static_cast<uint8_t>(seq >> 16);
  p[10] = static_cast<uint8_t>(seq >> 8);
  p[11] = static_cast<uint8_t>(seq);
  p[12] = static_cast<uint8_t>(seq);
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
  for (int i = 0; i < n; ++i) bufs.push_back(Packet(static_cast<uint32_t>(i)));
  return bufs;
}

// Sends packet `seq` alone.
void SendOne(Rig& r, uint32_t seq, uint32_t size = 64) {
  auto b = Packet(seq, size);
  TxPacket p{b.data(), size, 0, Ep(0x7f0a0002, 4791)};
  ASSERT_EQ(r.t->SendBurst(&p, 1), 1);
}

std::vector<int> SentSeqs(const Rig& r) {
  std::vector<int> seqs;
  for (const auto& s : r.inner->sent_) seqs.push_back(s.bytes[12]);
  return seqs;
}

// What RecvBurst returns: the seq bytes.
std::vector<int> Receive(Rig& r, int n = 32) {
  std::vector<RxPacket> rx(static_cast<size_t>(n));
  const int got = r.t->RecvBurst(rx.data(), n);
  std::vector<int> seqs;
  for (int i = 0; i < got; ++i) seqs.push_back(rx[i].data[12]);
  return seqs;
}

TEST(FaultTransport, NoFaultsPassesEverythingOnUntouched) {
  auto r = Make(Scenario{});
  auto bufs = Bufs(5);
  auto tx = Tx(bufs);
  EXPECT_EQ(r->t->SendBurst(tx.data(), 5), 5);
  ASSERT_EQ(r->inner->sent_.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r->inner->sent_[i].bytes[12], i);
    EXPECT_FALSE(r->inner->sent_[i].icrc_included);
  }
  EXPECT_EQ(r->t->counters().tx_packets, 5u);  // the inner transport's, merged
  EXPECT_FALSE(r->t->next_deadline().has_value());
  EXPECT_TRUE(r->sink.events.empty());
}

// The device's max_mcast_grp is the transport's: the wrapper must not hide
// the inner transport's groups behind Transport's default of none.
TEST(FaultTransport, ReportsTheInnerTransportsMulticastGroupsAndDeadline) {
  auto r = Make(Scenario{});
  EXPECT_EQ(r->t->max_multicast_groups(), 0u);
  r->inner->groups_ = 7;
  EXPECT_EQ(r->t->max_multicast_groups(), 7u);
  const TimePoint inner_due = r->clock->now + milliseconds(3);
  r->inner->deadline_ = inner_due;
  EXPECT_EQ(r->t->next_deadline(), inner_due);
}

TEST(FaultTransport, CorruptedCopyCarriesTheOriginalsIcrc) {
  faults::Rule rule = Out();
  rule.action.corrupt = 1.0;
  auto r = Make(One(rule));
  auto bufs = Bufs(4);
  const auto originals = bufs;
  auto tx = Tx(bufs);
  EXPECT_EQ(r->t->SendBurst(tx.data(), 4), 4);
  EXPECT_EQ(bufs, originals) << "the caller's packets are never written";
  ASSERT_EQ(r->inner->sent_.size(), 4u);
  const wire::IpUdpFields ip = IcrcFields(__builtin_bswap32(0x7f0a0001), 4791,
                                          __builtin_bswap32(0x7f0a0002), 4791);
  for (int i = 0; i < 4; ++i) {
    const auto& s = r->inner->sent_[i];
    EXPECT_TRUE(s.icrc_included);
    // One bit differs from the original before the ICRC, never in BTH byte 4...
    int bits = 0;
    for (size_t k = 0; k + 4 < s.bytes.size(); ++k)
      bits += __builtin_popcount(s.bytes[k] ^ originals[i][k]);
    EXPECT_EQ(bits, 1);
    EXPECT_EQ(s.bytes[4], originals[i][4]);
    // ...so the ICRC, framed for the original, does not match.
    EXPECT_FALSE(IcrcValid(ip, s.bytes.data(), static_cast<uint32_t>(s.bytes.size())));
    std::vector<uint8_t> repaired = originals[i];
    std::copy(s.bytes.end() - 4, s.bytes.end(), repaired.end() - 4);
    EXPECT_TRUE(IcrcValid(ip, repaired.data(), static_cast<uint32_t>(repaired.size())));
  }
  EXPECT_EQ(r->t->counters().injected_corrupts, 4u);
  ASSERT_EQ(r->sink.events.size(), 4u);
  EXPECT_EQ(r->sink.events[0].kind, FaultKind::kCorrupt);
}

TEST(FaultTransport, DropsAreConsumedCountedAndReported) {
  faults::Rule rule = Out();
  rule.action.drop = 1.0;
  auto r = Make(One(rule));
  auto bufs = Bufs(6);
  auto tx = Tx(bufs);
  EXPECT_EQ(r->t->SendBurst(tx.data(), 6), 6);
  EXPECT_TRUE(r->inner->sent_.empty());
  EXPECT_EQ(r->t->counters().injected_drops, 6u);
  ASSERT_EQ(r->sink.events.size(), 6u);
  const faults::FaultEvent& e = r->sink.events[3];
  EXPECT_EQ(e.kind, FaultKind::kDrop);
  EXPECT_EQ(e.direction, Direction::kOut);
  EXPECT_EQ(e.psn, 3u);
  EXPECT_EQ(e.dest_qpn, 0x11u);
  EXPECT_EQ(e.opcode, 0x04);
  EXPECT_EQ(e.length, 64u);
  EXPECT_EQ(e.peer, Ep(0x7f0a0002, 4791).gid.raw);
}

// The decisions are final: what a busy inner transport did not take is
// kept and goes first, and no new packet is taken meanwhile.
TEST(FaultTransport, ShortInnerSendKeepsTheRestAndSendsItFirst) {
  faults::Rule rule = Out();
  rule.action.duplicate = 1.0;
  auto r = Make(One(rule));
  auto bufs = Bufs(4);
  auto tx = Tx(bufs);
  // Passed on: 0 0' 1 1' 2 2' 3 3'. Three taken; the rest kept.
  r->inner->budget_ = 3;
  EXPECT_EQ(r->t->SendBurst(tx.data(), 4), 4);
  EXPECT_EQ(r->t->held_packets(), 5u);
  ASSERT_TRUE(r->t->next_deadline().has_value());
  EXPECT_LE(*r->t->next_deadline(), r->clock->now) << "due now: no sleeping";
  // Still busy: nothing new is taken (back-pressure).
  r->inner->budget_ = 0;
  auto more = Bufs(6);
  auto tx2 = Tx(more);
  EXPECT_EQ(r->t->SendBurst(&tx2[5], 1), 0);
  r->inner->budget_ = -1;
  EXPECT_EQ(r->t->SendBurst(&tx2[5], 1), 1);
  EXPECT_EQ(SentSeqs(*r), (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3, 5, 5}));
  EXPECT_EQ(r->t->counters().injected_dups, 5u);
  EXPECT_EQ(r->t->held_packets(), 0u);
}

TEST(FaultTransport, DelayHoldsThenReleasesAtTheDeadline) {
  faults::Rule rule = Out();
  rule.action.delay_ns = 200'000;
  auto r = Make(One(rule));
  auto bufs = Bufs(3);
  auto tx = Tx(bufs);
  r->clock->To(microseconds(10));
  EXPECT_EQ(r->t->SendBurst(tx.data(), 3), 3);
  EXPECT_TRUE(r->inner->sent_.empty());
  ASSERT_TRUE(r->t->next_deadline().has_value());
  EXPECT_EQ(*r->t->next_deadline(), r->clock->start + microseconds(210));
  // An inner deadline that is earlier wins.
  r->inner->deadline_ = r->clock->start + microseconds(100);
  EXPECT_EQ(*r->t->next_deadline(), r->clock->start + microseconds(100));
  r->inner->deadline_.reset();
  r->clock->To(microseconds(209));
  EXPECT_TRUE(Receive(*r).empty());
  EXPECT_TRUE(r->inner->sent_.empty());
  r->clock->To(microseconds(210));
  EXPECT_TRUE(Receive(*r).empty());  // RecvBurst passes due sent packets on
  EXPECT_EQ(SentSeqs(*r), (std::vector<int>{0, 1, 2}));
  for (const auto& s : r->inner->sent_) EXPECT_EQ(s.at_ns, 210'000u);
  EXPECT_FALSE(r->t->next_deadline().has_value());
  EXPECT_EQ(r->t->counters().injected_delays, 3u);
  ASSERT_EQ(r->sink.events.size(), 3u);
  EXPECT_EQ(r->sink.events[0].kind, FaultKind::kDelay);
  EXPECT_EQ(r->sink.events[0].delay_ns, 200'000u);
  // Scenario time starts at the first packet (10 us on the fake clock).
  EXPECT_EQ(r->sink.events[0].at_ns, 0u);
}

TEST(FaultTransport, JitterStaysWithinItsBound) {
  faults::Rule rule = Out();
  rule.action.delay_ns = 100'000;
  rule.action.jitter_ns = 50'000;
  auto r = Make(One(rule, 9));
  for (uint32_t i = 0; i < 200; ++i) SendOne(*r, i);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& e : r->sink.events) {
    lo = std::min(lo, e.delay_ns);
    hi = std::max(hi, e.delay_ns);
  }
  EXPECT_GE(lo, 100'000u);
  EXPECT_LE(hi, 150'000u);
  EXPECT_GT(hi - lo, 25'000u) << "the jitter draws spread";
  r->clock->To(microseconds(150));
  Receive(*r);
  EXPECT_EQ(r->inner->sent_.size(), 200u);
}

// 2000 packets offered at twice the rate: they leave at the set rate (in
// scenario time), within 5%.
TEST(FaultTransport, RateLimitHoldsTheSetRate) {
  faults::Rule rule = Out();
  rule.action.rate_bytes_per_s = 10'000'000;  // 10 MB/s: 1000 B per 100 us
  rule.action.rate_burst_bytes = 16384;
  rule.action.rate_queue_bytes = 4 << 20;
  auto r = Make(One(rule));
  const uint32_t size = 1000;
  const int count = 2000;
  int next = 0;
  // Offered every 50 us (20 MB/s); time goes by in steps of 10 us.
  for (uint64_t t = 0; t <= 400'000'000 && r->inner->sent_.size() < static_cast<size_t>(count);
       t += 10'000) {
    r->clock->To(nanoseconds(t));
    if (next < count && t >= static_cast<uint64_t>(next) * 50'000) {
      SendOne(*r, static_cast<uint32_t>(next), size);
      ++next;
    } else {
      Receive(*r);
    }
  }
  ASSERT_EQ(r->inner->sent_.size(), static_cast<size_t>(count));
  EXPECT_EQ(r->t->counters().injected_drops, 0u);
  // After the first burst's worth, bytes over time = the rate.
  const auto& sent = r->inner->sent_;
  const size_t first = 100;  // past the first burst: every departure is paced
  const double seconds = static_cast<double>(sent.back().at_ns - sent[first].at_ns) / 1e9;
  const double rate = static_cast<double>((sent.size() - 1 - first) * size) / seconds;
  std::printf("[ rate     ] %.0f B/s for 10000000 B/s set\n", rate);
  EXPECT_NEAR(rate, 10e6, 0.05 * 10e6);
  const std::vector<int> seqs = SentSeqs(*r);
  for (int i = 0; i < count; ++i) ASSERT_EQ(seqs[i], i % 256) << "in order";
}

TEST(FaultTransport, RateLimitTailDropsBeyondItsQueue) {
  faults::Rule rule = Out();
  rule.action.rate_bytes_per_s = 1'000'000;
  rule.action.rate_burst_bytes = 2000;
  rule.action.rate_queue_bytes = 10'000;
  auto r = Make(One(rule));
  for (uint32_t i = 0; i < 100; ++i) SendOne(*r, i, 1000);  // all at t = 0
  const uint64_t drops = r->t->counters().injected_drops;
  EXPECT_GE(drops, 85u);
  EXPECT_LE(drops, 90u);
  EXPECT_EQ(r->sink.events.back().kind, FaultKind::kRateDrop);
}

// Packets every 100 us for 20 ms; an outage of [10 ms, 15 ms) loses the
// 50 sent within it, no other.
TEST(FaultTransport, OutageDropsExactlyTheWindow) {
  faults::Rule rule = Out();
  rule.match.from_ns = 10'000'000;
  rule.match.for_ns = 5'000'000;
  rule.action.outage = true;
  auto r = Make(One(rule));
  for (uint32_t i = 0; i < 200; ++i) {
    r->clock->To(microseconds(100 * i));
    SendOne(*r, i);
  }
  EXPECT_EQ(r->t->counters().injected_drops, 50u);
  ASSERT_EQ(r->inner->sent_.size(), 150u);
  for (const auto& s : r->inner->sent_)
    EXPECT_TRUE(s.at_ns < 10'000'000 || s.at_ns >= 15'000'000) << s.at_ns;
  for (const auto& e : r->sink.events) EXPECT_EQ(e.kind, FaultKind::kOutage);
}

TEST(FaultTransport, NthDropsExactlyTheNth) {
  faults::Rule rule = Out();
  rule.match.nth = 5;
  rule.action.drop = 1.0;
  auto r = Make(One(rule));
  auto bufs = Bufs(12);
  auto tx = Tx(bufs);
  EXPECT_EQ(r->t->SendBurst(tx.data(), 3), 3);
  EXPECT_EQ(r->t->SendBurst(tx.data() + 3, 9), 9);
  EXPECT_EQ(SentSeqs(*r), (std::vector<int>{0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(r->t->counters().injected_drops, 1u);
  ASSERT_EQ(r->sink.events.size(), 1u);
  EXPECT_EQ(r->sink.events[0].psn, 4u);
}

TEST(FaultTransport, PauseHoldsThenReleasesInOrder) {
  faults::Rule rule = Out();
  rule.match.from_ns = 1'000'000;
  rule.match.for_ns = 2'000'000;
  rule.action.pause = true;
  auto r = Make(One(rule));
  // The first packet starts the scenario's clock (at 0 here, as the fake
  // clock's start).
  const uint64_t at_us[] = {0, 1000, 1500, 2000, 2999, 3500};
  for (uint32_t i = 0; i < 6; ++i) {
    r->clock->To(microseconds(at_us[i]));
    SendOne(*r, i);
    if (i == 4) {
      EXPECT_EQ(SentSeqs(*r), (std::vector<int>{0}));
      EXPECT_EQ(*r->t->next_deadline(), r->clock->start + milliseconds(3));
      r->clock->To(milliseconds(3));
      Receive(*r);
    }
  }
  EXPECT_EQ(SentSeqs(*r), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  for (int i = 1; i <= 4; ++i) EXPECT_EQ(r->inner->sent_[i].at_ns, 3'000'000u);
  EXPECT_EQ(r->t->counters().injected_pauses, 4u);
  EXPECT_EQ(r->sink.events[0].kind, FaultKind::kPause);
  EXPECT_EQ(r->sink.events[0].delay_ns, 2'000'000u);
}

// Windows count from the first packet, not from the transport's creation:
// a program that sets up for seconds (perftest's TCP exchange, an MPI
// launch) still meets "link down from 1 ms" 1 ms into its traffic.
TEST(FaultTransport, TheScenarioClockStartsAtTheFirstPacket) {
  faults::Rule rule = Out();
  rule.match.from_ns = 1'000'000;
  rule.match.for_ns = 1'000'000;
  rule.action.outage = true;
  auto r = Make(One(rule));
  r->clock->To(milliseconds(50));  // set-up: no packet yet
  SendOne(*r, 0);                  // scenario time 0: before the window
  r->clock->To(milliseconds(51) + microseconds(500));
  SendOne(*r, 1);                  // 1.5 ms: in it
  r->clock->To(milliseconds(52) + microseconds(500));
  SendOne(*r, 2);                  // 2.5 ms: after it
  EXPECT_EQ(SentSeqs(*r), (std::vector<int>{0, 2}));
  EXPECT_EQ(r->t->counters().injected_drops, 1u);
}

TEST(FaultTransport, PauseQueueOverflowDrops) {
  faults::Rule rule = Out();
  rule.match.for_ns = 1'000'000;
  rule.action.pause = true;
  rule.action.pause_queue_bytes = 200;
  auto r = Make(One(rule));
  for (uint32_t i = 0; i < 5; ++i) SendOne(*r, i);  // 64 B each: 3 fit
  EXPECT_EQ(r->t->counters().injected_pauses, 3u);
  EXPECT_EQ(r->t->counters().injected_drops, 2u);
  EXPECT_EQ(r->sink.events.back().kind, FaultKind::kPauseDrop);
  r->clock->To(milliseconds(1));
  Receive(*r);
  EXPECT_EQ(SentSeqs(*r), (std::vector<int>{0, 1, 2}));
}

TEST(FaultTransport, ReorderDepthThreeOnSentPackets) {
  faults::Rule rule = Out();
  rule.match.nth = 1;
  rule.action.reorder = 1.0;
  rule.action.reorder_depth = 3;
  auto r = Make(One(rule));
  auto bufs = Bufs(6);
  auto tx = Tx(bufs);
  // Across bursts: 0 is held for three later packets.
  EXPECT_EQ(r->t->SendBurst(tx.data(), 2), 2);
  EXPECT_EQ(r->t->SendBurst(tx.data() + 2, 4), 4);
  EXPECT_EQ(SentSeqs(*r), (std::vector<int>{1, 2, 3, 0, 4, 5}));
  EXPECT_EQ(r->t->counters().injected_reorders, 1u);
  EXPECT_FALSE(r->t->next_deadline().has_value());
}

TEST(FaultTransport, ReorderedPacketLeavesAfterTheLongestHoldOnAnIdleLink) {
  faults::Rule rule = Out();
  rule.action.reorder = 1.0;
  rule.action.reorder_depth = 3;
  auto r = Make(One(rule));
  SendOne(*r, 0);
  EXPECT_TRUE(r->inner->sent_.empty());
  ASSERT_TRUE(r->t->next_deadline().has_value());
  EXPECT_EQ(*r->t->next_deadline(),
            r->clock->start + nanoseconds(FaultTransport::kReorderMaxHoldNs));
  r->clock->To(nanoseconds(FaultTransport::kReorderMaxHoldNs));
  Receive(*r);
  EXPECT_EQ(SentSeqs(*r), (std::vector<int>{0}));
}

TEST(FaultTransport, ReceivedPacketsDroppedDelayedAndCopied) {
  faults::Rule rule = In();
  rule.match.psn_first = 2;
  rule.match.psn_last = 3;
  rule.action.delay_ns = 1'000'000;
  faults::Rule drop = In();
  drop.match.psn_first = drop.match.psn_last = 5;
  drop.action.drop = 1.0;
  Scenario s;
  s.rules = {rule, drop};
  auto r = Make(s);
  r->inner->group_set_ = true;
  r->inner->group_.raw[0] = 0xFF;
  for (uint32_t i = 0; i < 7; ++i) r->inner->to_receive_.push_back(Packet(i));
  EXPECT_EQ(Receive(*r), (std::vector<int>{0, 1, 4, 6}));
  EXPECT_TRUE(r->inner->sent_.empty()) << "received faults never send";
  EXPECT_EQ(Receive(*r), std::vector<int>{});  // the inner buffer is overwritten here
  r->clock->To(milliseconds(1));
  std::vector<RxPacket> rx(8);
  ASSERT_EQ(r->t->RecvBurst(rx.data(), 8), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(std::vector<uint8_t>(rx[i].data, rx[i].data + rx[i].length), Packet(2 + i))
        << "held packets are copies";
    ASSERT_NE(rx[i].group, nullptr);
    EXPECT_EQ(rx[i].group->raw[0], 0xFF);
    EXPECT_EQ(rx[i].src, Ep(0x7f0a0002, 4791));
  }
  EXPECT_EQ(r->t->counters().injected_drops, 1u);
  EXPECT_EQ(r->t->counters().injected_delays, 2u);
  EXPECT_EQ(r->sink.events[0].direction, Direction::kIn);
}

TEST(FaultTransport, ReceivedDuplicatesComeInTheNextBurst) {
  faults::Rule rule = In();
  rule.action.duplicate = 1.0;
  auto r = Make(One(rule));
  for (uint32_t i = 0; i < 3; ++i) r->inner->to_receive_.push_back(Packet(i));
  EXPECT_EQ(Receive(*r), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(Receive(*r), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(r->t->counters().injected_dups, 3u);
}

TEST(FaultTransport, ReceivedCorruptionIsALoss) {
  faults::Rule rule = In();
  rule.action.corrupt = 1.0;
  auto r = Make(One(rule));
  r->inner->to_receive_.push_back(Packet(1));
  EXPECT_TRUE(Receive(*r).empty());
  EXPECT_EQ(r->t->counters().injected_corrupts, 1u);
}

TEST(FaultTransport, EcnMarksReceivedPacketsOnly) {
  faults::Rule rule;  // both directions
  rule.action.ecn_mark = 1.0;
  auto r = Make(One(rule));
  SendOne(*r, 0);
  EXPECT_EQ(r->inner->sent_.size(), 1u);
  EXPECT_EQ(r->t->counters().injected_ecn_marks, 0u);
  r->inner->to_receive_.push_back(Packet(1));
  std::vector<RxPacket> rx(4);
  ASSERT_EQ(r->t->RecvBurst(rx.data(), 4), 1);
  EXPECT_EQ(rx[0].traffic_class & 0x03, 0x03);
  EXPECT_EQ(r->t->counters().injected_ecn_marks, 1u);
  ASSERT_EQ(r->sink.events.size(), 1u);
  EXPECT_EQ(r->sink.events[0].kind, FaultKind::kEcnMark);
}

TEST(FaultTransport, ReorderDepthThreeOnReceivedPackets) {
  faults::Rule rule = In();
  rule.match.nth = 1;
  rule.action.reorder = 1.0;
  rule.action.reorder_depth = 3;
  auto r = Make(One(rule));
  for (uint32_t i = 0; i < 6; ++i) r->inner->to_receive_.push_back(Packet(i));
  EXPECT_EQ(Receive(*r, 2), (std::vector<int>{1}));
  EXPECT_EQ(Receive(*r, 2), (std::vector<int>{2, 3}));
  EXPECT_EQ(Receive(*r, 2), (std::vector<int>{0, 4}));
  EXPECT_EQ(Receive(*r, 2), (std::vector<int>{5}));
}

// Hostile lengths: shorter than a BTH (or a BTH and ICRC when sent) is
// passed on untouched, never read beyond its length.
TEST(FaultTransport, RuntsPassUntouched) {
  faults::Rule rule;
  rule.action.drop = 1.0;
  auto r = Make(One(rule));
  std::vector<uint8_t> runt(5, 0x11);
  TxPacket p{runt.data(), 5, 0, Ep(0x7f0a0002, 4791)};
  EXPECT_EQ(r->t->SendBurst(&p, 1), 1);
  EXPECT_EQ(r->inner->sent_.size(), 1u);  // the inner transport counts its error
  TxPacket null_packet{};
  EXPECT_EQ(r->t->SendBurst(&null_packet, 1), 1);
  r->inner->to_receive_.push_back(std::vector<uint8_t>(11, 0x04));
  std::vector<RxPacket> rx(2);
  ASSERT_EQ(r->t->RecvBurst(rx.data(), 2), 1);
  EXPECT_EQ(rx[0].length, 11u);
  EXPECT_EQ(r->t->counters().injected_drops, 0u);
}

}  // namespace
}  // namespace softrnic::transport
