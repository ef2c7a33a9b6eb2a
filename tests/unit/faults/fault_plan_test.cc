// FaultPlan (faults/fault_plan.h): classification by opcode and AETH
// syndrome, the rules' filters, the actions' rates, determinism (the same
// packets give byte-identical decisions), rule independence, and hostile
// lengths.
#include "faults/fault_plan.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace softrnic::faults {
namespace {

const std::array<uint8_t, 16> kPeerA = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 1};
const std::array<uint8_t, 16> kPeerB = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 2};

// A packet: BTH with `opcode`, dest QPN, PSN; `extra` bytes after the BTH
// (AETH / DETH ...), then payload up to `length` (ICRC included).
std::vector<uint8_t> Pkt(uint8_t opcode, uint32_t qpn = 0x123, uint32_t psn = 0,
                         std::vector<uint8_t> extra = {}, uint32_t length = 64) {
  std::vector<uint8_t> p(std::max<size_t>(length, 12 + extra.size()), 0);
  p[0] = opcode;
  p[1] = 0x40;
  p[2] = p[3] = 0xFF;
  p[5] = static_cast<uint8_t>(qpn >> 16);
  p[6] = static_cast<uint8_t>(qpn >> 8);
  p[7] = static_cast<uint8_t>(qpn);
  p[9] = static_cast<uint8_t>(psn >> 16);
  p[10] = static_cast<uint8_t>(psn >> 8);
  p[11] = static_cast<uint8_t>(psn);
  std::copy(extra.begin(), extra.end(), p.begin() + 12);
  return p;
}

uint16_t Cls(const std::vector<uint8_t>& p) {
  return ClassifyPacket(p.data(), static_cast<uint32_t>(p.size()));
}

Decision Decide(FaultPlan& plan, Direction dir, const std::vector<uint8_t>& p, uint64_t now = 0,
             std::vector<FaultEvent>* events = nullptr,
             const std::array<uint8_t, 16>& peer = kPeerA) {
  return plan.Decide(dir, p.data(), static_cast<uint32_t>(p.size()), peer, now, events);
}

Scenario One(const Rule& r, uint64_t seed = 1) {
  Scenario s;
  s.seed = seed;
  s.rules.push_back(r);
  return s;
}

TEST(ClassifyPacket, ByOpcodeAndSyndrome) {
  // IBA 9.7.5.2.1 table 44: syndrome bits 6:5 = 0 ACK, 1 RNR NAK, 3 NAK.
  EXPECT_EQ(Cls(Pkt(0x11, 1, 0, {0x1F, 0, 0, 1})), kAcks);
  EXPECT_EQ(Cls(Pkt(0x11, 1, 0, {0x00, 0, 0, 1})), kAcks);
  EXPECT_EQ(Cls(Pkt(0x11, 1, 0, {0x2E, 0, 0, 1})), kRnrNaks);
  EXPECT_EQ(Cls(Pkt(0x11, 1, 0, {0x60, 0, 0, 1})), kNaks);  // PSN sequence error
  EXPECT_EQ(Cls(Pkt(0x11, 1, 0, {0x63, 0, 0, 1})), kNaks);  // remote operational error
  EXPECT_EQ(Cls(Pkt(0x11, 1, 0, {0x40, 0, 0, 1})), kNaks);  // reserved kind
  EXPECT_EQ(Cls(Pkt(0x12, 1, 0, {0x1F, 0, 0, 1})), kAcks);  // ATOMIC ACKNOWLEDGE
  EXPECT_EQ(Cls(Pkt(0x12, 1, 0, {0x21, 0, 0, 1})), kRnrNaks);
  EXPECT_EQ(Cls(Pkt(0xB1, 1, 0, {0x1F, 0, 0, 1})), kAcks);  // XRC ACKNOWLEDGE
  EXPECT_EQ(Cls(Pkt(0xB1, 1, 0, {0x60, 0, 0, 1})), kNaks);
  // READ responses, with an AETH (first, last, only) or not (middle).
  for (uint8_t op : {0x0D, 0x0E, 0x0F, 0x10})
    EXPECT_EQ(Cls(Pkt(op, 1, 0, {0x1F, 0, 0, 1})), kReadResponses) << int(op);
  EXPECT_EQ(Cls(Pkt(0xAD)), kReadResponses);  // XRC READ RESPONSE FIRST
  EXPECT_EQ(Cls(Pkt(0x81)), kCnps);
  // UD SEND to QP1, or from it (DETH source QPN): CM MADs.
  const std::vector<uint8_t> deth_from_1 = {0x80, 0x01, 0x00, 0x00, 0, 0, 0, 1};
  const std::vector<uint8_t> deth_from_9 = {0x80, 0x01, 0x00, 0x00, 0, 0, 0, 9};
  EXPECT_EQ(Cls(Pkt(0x64, 1, 0, deth_from_9)), kCmMads);
  EXPECT_EQ(Cls(Pkt(0x65, 0x42, 0, deth_from_1)), kCmMads);
  EXPECT_EQ(Cls(Pkt(0x64, 0x42, 0, deth_from_9)), kRequests);
  // Requests: SEND, WRITE, READ request, atomics, UC.
  for (uint8_t op : {0x00, 0x04, 0x06, 0x0A, 0x0C, 0x13, 0x14, 0x24, 0x2A, 0xA4})
    EXPECT_EQ(Cls(Pkt(op)), kRequests) << int(op);
}

TEST(ClassifyPacket, ShortPacketsAreReadOnlyWithinTheirLength) {
  std::vector<uint8_t> p = Pkt(0x11, 1, 0, {0x60, 0, 0, 1});
  EXPECT_EQ(ClassifyPacket(p.data(), 12), kAcks);  // no room for the AETH
  EXPECT_EQ(ClassifyPacket(p.data(), 11), 0);
  EXPECT_EQ(ClassifyPacket(nullptr, 64), 0);
  std::vector<uint8_t> ud = Pkt(0x64, 0x42, 0, {0, 0, 0, 0, 0, 0, 0, 1});
  EXPECT_EQ(ClassifyPacket(ud.data(), 19), kRequests);  // DETH cut short
  EXPECT_EQ(ClassifyPacket(ud.data(), 20), kCmMads);
}

// Hostile lengths: nothing matches, nothing is read beyond the length
// (ASan in the CI build watches the heap copies).
TEST(FaultPlan, PacketsShorterThanABthGetNoDecision) {
  Rule r;
  r.action.drop = 1;
  FaultPlan plan(One(r));
  for (uint32_t len = 0; len < 12; ++len) {
    std::vector<uint8_t> p(len, 0x11);
    std::vector<FaultEvent> events;
    const Decision d = plan.Decide(Direction::kIn, len ? p.data() : nullptr, len, kPeerA, 0, &events);
    EXPECT_FALSE(d.dropped()) << len;
    EXPECT_TRUE(events.empty());
  }
  EXPECT_TRUE(Decide(plan, Direction::kIn, Pkt(0x04, 1, 0, {}, 12)).dropped());
}

TEST(FaultPlan, DropRateAndEvents) {
  Rule r;
  r.action.drop = 0.2;
  FaultPlan plan(One(r, 7));
  int drops = 0;
  std::vector<FaultEvent> events;
  for (uint32_t i = 0; i < 10000; ++i) drops += Decide(plan, Direction::kOut, Pkt(0x04, 5, i), i, &events).dropped();
  EXPECT_NEAR(drops, 2000, 5 * std::sqrt(10000 * 0.2 * 0.8));
  ASSERT_EQ(events.size(), static_cast<size_t>(drops));
  EXPECT_EQ(events[0].kind, FaultKind::kDrop);
  EXPECT_EQ(events[0].dest_qpn, 5u);
  EXPECT_EQ(events[0].opcode, 0x04);
  EXPECT_EQ(events[0].length, 64u);
  EXPECT_EQ(events[0].at_ns, events[0].psn);
}

TEST(FaultPlan, FiltersDirectionClassPeerQpnAndPsnRange) {
  Rule r;
  r.match.direction = Direction::kOut;
  r.match.classes = kAcks | kNaks;
  r.match.peer = kPeerB;
  r.match.qpn = 0x77;
  r.match.psn_first = 0xFFFFFE;  // wraps
  r.match.psn_last = 1;
  r.action.drop = 1;
  FaultPlan plan(One(r));
  const auto ack = [](uint32_t qpn, uint32_t psn) { return Pkt(0x11, qpn, psn, {0x1F, 0, 0, 0}); };
  EXPECT_TRUE(Decide(plan, Direction::kOut, ack(0x77, 0), 0, nullptr, kPeerB).dropped());
  EXPECT_TRUE(Decide(plan, Direction::kOut, ack(0x77, 0xFFFFFF), 0, nullptr, kPeerB).dropped());
  EXPECT_FALSE(Decide(plan, Direction::kOut, ack(0x77, 2), 0, nullptr, kPeerB).dropped());
  EXPECT_FALSE(Decide(plan, Direction::kOut, ack(0x77, 0xFFFFFD), 0, nullptr, kPeerB).dropped());
  EXPECT_FALSE(Decide(plan, Direction::kIn, ack(0x77, 0), 0, nullptr, kPeerB).dropped());
  EXPECT_FALSE(Decide(plan, Direction::kOut, ack(0x77, 0), 0, nullptr, kPeerA).dropped());
  EXPECT_FALSE(Decide(plan, Direction::kOut, ack(0x78, 0), 0, nullptr, kPeerB).dropped());
  EXPECT_FALSE(Decide(plan, Direction::kOut, Pkt(0x04, 0x77, 0), 0, nullptr, kPeerB).dropped());
  EXPECT_FALSE(Decide(plan, Direction::kOut, Pkt(0x11, 0x77, 0, {0x21, 0, 0, 0}), 0, nullptr, kPeerB)
                   .dropped());  // an RNR NAK is not in the classes
  EXPECT_TRUE(Decide(plan, Direction::kOut, Pkt(0x11, 0x77, 0, {0x60, 0, 0, 0}), 0, nullptr, kPeerB)
                  .dropped());
}

// nth counts only what passes the rule's other filters.
TEST(FaultPlan, NthPicksTheNthFilteredPacket) {
  Rule r;
  r.match.classes = kAcks;
  r.match.nth = 3;
  r.action.drop = 1;
  FaultPlan plan(One(r));
  std::vector<int> dropped;
  for (int i = 0; i < 20; ++i) {
    const bool is_ack = i % 2 == 1;
    const auto p = is_ack ? Pkt(0x11, 1, i, {0x1F, 0, 0, 0}) : Pkt(0x04, 1, i);
    if (Decide(plan, Direction::kOut, p).dropped()) dropped.push_back(i);
  }
  EXPECT_EQ(dropped, std::vector<int>{5});  // the acks are 1, 3, 5, ...
}

TEST(FaultPlan, WindowAndOutage) {
  Rule r;
  r.match.from_ns = 1000;
  r.match.for_ns = 500;
  r.action.outage = true;
  FaultPlan plan(One(r));
  std::vector<FaultEvent> events;
  EXPECT_FALSE(Decide(plan, Direction::kOut, Pkt(4), 999).dropped());
  EXPECT_EQ(Decide(plan, Direction::kOut, Pkt(4), 1000, &events).drop, DropKind::kOutage);
  EXPECT_EQ(Decide(plan, Direction::kIn, Pkt(4), 1499).drop, DropKind::kOutage);
  EXPECT_FALSE(Decide(plan, Direction::kOut, Pkt(4), 1500).dropped());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, FaultKind::kOutage);
}

TEST(FaultPlan, PauseHoldsToTheWindowsEndWithinItsQueue) {
  Rule r;
  r.match.from_ns = 100;
  r.match.for_ns = 900;
  r.action.pause = true;
  r.action.pause_queue_bytes = 128;
  FaultPlan plan(One(r));
  Decision d = Decide(plan, Direction::kOut, Pkt(4), 200);
  EXPECT_TRUE(d.paused);
  EXPECT_EQ(d.hold_until_ns, 1000u);
  EXPECT_EQ(d.rule, 0);
  EXPECT_TRUE(Decide(plan, Direction::kOut, Pkt(4), 300).paused);
  EXPECT_EQ(Decide(plan, Direction::kOut, Pkt(4), 400).drop, DropKind::kPauseDrop);
  EXPECT_EQ(Decide(plan, Direction::kOut, Pkt(4), 1000).hold_until_ns, 0u);
}

TEST(FaultPlan, DelayJitterAndRateInScenarioTime) {
  Rule r;
  r.action.delay_ns = 1000;
  r.action.jitter_ns = 100;
  FaultPlan plan(One(r));
  for (uint64_t t = 0; t < 1000; ++t) {
    const Decision d = Decide(plan, Direction::kOut, Pkt(4), t * 7);
    ASSERT_GE(d.hold_until_ns, t * 7 + 1000);
    ASSERT_LE(d.hold_until_ns, t * 7 + 1100);
  }
  Rule rate;
  rate.action.rate_bytes_per_s = 1'000'000;  // 64 B: 64 us each
  rate.action.rate_burst_bytes = 64;
  FaultPlan shaped(One(rate));
  EXPECT_EQ(Decide(shaped, Direction::kOut, Pkt(4), 0).hold_until_ns, 0u);  // not held
  EXPECT_EQ(Decide(shaped, Direction::kOut, Pkt(4), 0).hold_until_ns, 64'000u);
  EXPECT_EQ(Decide(shaped, Direction::kOut, Pkt(4), 0).hold_until_ns, 128'000u);
  // Idle long enough, the bucket is full again.
  EXPECT_EQ(Decide(shaped, Direction::kOut, Pkt(4), 1'000'000).hold_until_ns, 0u);
}

// Corruption flips one bit the ICRC covers: never BTH byte 4 (masked in
// the ICRC, IBA A17.8), never the ICRC itself.
TEST(FaultPlan, CorruptionStaysInTheCoveredBytes) {
  Rule r;
  r.action.corrupt = 1;
  FaultPlan plan(One(r, 3));
  std::vector<int> hits(200, 0);
  for (uint32_t i = 0; i < 20000; ++i) {
    const uint32_t len = 16 + i % 100;
    const Decision d = Decide(plan, Direction::kOut, Pkt(4, 1, i, {}, len));
    ASSERT_TRUE(d.corrupt);
    ASSERT_LT(d.corrupt_byte, len - 4);
    ASSERT_NE(d.corrupt_byte, 4u);
    ASSERT_EQ(__builtin_popcount(d.corrupt_mask), 1);
    ++hits[d.corrupt_byte];
  }
  EXPECT_GT(hits[0], 0);
  EXPECT_GT(hits[5], 0);
  EXPECT_GT(hits[11], 0);
}

TEST(FaultPlan, EcnMarksOnlyReceivedPackets) {
  Rule r;
  r.action.ecn_mark = 1;
  FaultPlan plan(One(r));
  EXPECT_FALSE(Decide(plan, Direction::kOut, Pkt(4)).ecn_mark);
  EXPECT_TRUE(Decide(plan, Direction::kIn, Pkt(4)).ecn_mark);
}

TEST(FaultPlan, TheFirstRuleToDropOrHoldEndsTheWalk) {
  Rule drop;
  drop.match.classes = kAcks;
  drop.action.drop = 1;
  Rule dup;
  dup.match.nth = 2;
  dup.action.duplicate = 1;
  Scenario s;
  s.rules = {drop, dup};
  FaultPlan plan(s);
  const auto ack = Pkt(0x11, 1, 0, {0x1F, 0, 0, 0});
  EXPECT_TRUE(Decide(plan, Direction::kOut, ack).dropped());
  EXPECT_FALSE(Decide(plan, Direction::kOut, Pkt(4)).duplicate);  // rule 1's 1st
  EXPECT_TRUE(Decide(plan, Direction::kOut, ack).dropped());        // rule 1 sees no ack
  EXPECT_TRUE(Decide(plan, Direction::kOut, Pkt(4)).duplicate);   // rule 1's 2nd
}

// Packets of every class, both directions, times going forward.
std::vector<std::vector<uint8_t>> MixedPackets(int n) {
  std::vector<std::vector<uint8_t>> out;
  const uint8_t ops[] = {0x04, 0x11, 0x0D, 0x81, 0x64, 0x06, 0x12, 0x10};
  for (int i = 0; i < n; ++i) {
    const uint8_t op = ops[(i * 7 + i / 3) % 8];
    std::vector<uint8_t> extra;
    if (op == 0x11 || op == 0x12) extra = {static_cast<uint8_t>((i % 3) * 0x20 + 1), 0, 0, 1};
    if (op == 0x64) extra = {0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(i % 2)};
    out.push_back(Pkt(op, static_cast<uint32_t>(i % 5), static_cast<uint32_t>(i), extra,
                      static_cast<uint32_t>(20 + (i * 37) % 1000)));
  }
  return out;
}

Scenario RichScenario(uint64_t seed) {
  Scenario s;
  s.seed = seed;
  Rule a;
  a.match.direction = Direction::kOut;
  a.action.drop = 0.05;
  a.action.duplicate = 0.05;
  a.action.corrupt = 0.05;
  a.action.reorder = 0.05;
  a.action.reorder_depth = 3;
  Rule b;
  b.match.classes = kAcks | kNaks | kRnrNaks;
  b.action.delay_ns = 5000;
  b.action.jitter_ns = 3000;
  b.action.ecn_mark = 0.3;
  Rule c;
  c.match.direction = Direction::kIn;
  c.action.rate_bytes_per_s = 50'000'000;
  c.action.rate_queue_bytes = 20000;
  Rule d;
  d.match.nth = 17;
  d.action.drop = 1;
  Rule e;
  e.match.from_ns = 3'000'000;
  e.match.for_ns = 200'000;
  e.action.pause = true;
  e.action.pause_queue_bytes = 5000;
  s.rules = {a, b, c, d, e};
  return s;
}

std::string DecisionLog(uint64_t seed, const std::vector<std::vector<uint8_t>>& packets) {
  FaultPlan plan(RichScenario(seed));
  std::string log;
  std::vector<FaultEvent> events;
  for (size_t i = 0; i < packets.size(); ++i) {
    const Direction dir = i % 3 == 0 ? Direction::kIn : Direction::kOut;
    AppendDecision(&log, Decide(plan, dir, packets[i], i * 1000, &events, i % 4 ? kPeerA : kPeerB));
  }
  for (const FaultEvent& e : events)
    log += std::string(FaultKindName(e.kind)) + " " + std::to_string(e.rule) + " " +
           std::to_string(e.psn) + " " + std::to_string(e.delay_ns) + "\n";
  return log;
}

// Same seed, same packets, same times: byte-identical decisions and events.
TEST(FaultPlan, DeterministicDecisionLog) {
  const auto packets = MixedPackets(20000);
  const std::string first = DecisionLog(42, packets);
  const std::string second = DecisionLog(42, packets);
  ASSERT_EQ(first.size(), second.size());
  EXPECT_TRUE(first == second) << "decision logs differ";
  EXPECT_NE(first, DecisionLog(43, packets)) << "the seed matters";
  // Every kind of decision happened, so the comparison covers them all.
  for (const char* kind : {"drop ", "outage", "rate-drop", "pause-drop", "duplicate", "corrupt",
                           "reorder", "delay", "pause ", "ecn-mark"}) {
    if (std::string(kind) == "outage") continue;  // no outage rule here
    EXPECT_NE(first.find(kind), std::string::npos) << kind;
  }
}

// Adding a rule never changes another rule's decisions: each has its own
// stream (and a rule that neither drops nor holds leaves the walk going).
TEST(FaultPlan, RulesDrawFromTheirOwnStreams) {
  Rule a;
  a.match.classes = kRequests;
  a.action.drop = 0.3;
  Rule ecn;
  ecn.match.classes = kAcks;
  ecn.action.ecn_mark = 0.5;
  Scenario one = One(a, 5);
  Scenario two = one;
  two.rules.push_back(ecn);  // after: rule a keeps its index, so its stream
  FaultPlan p1(one), p2(two);
  const auto packets = MixedPackets(5000);
  int compared = 0;
  for (const auto& p : packets) {
    const Decision d1 = Decide(p1, Direction::kIn, p);
    const Decision d2 = Decide(p2, Direction::kIn, p);
    EXPECT_EQ(d1.dropped(), d2.dropped());
    compared += Cls(p) == kRequests;
  }
  EXPECT_GT(compared, 1000);
}

}  // namespace
}  // namespace softrnic::faults
