// Selective retransmission (docs/loss.md): data verified byte for byte under
// drop and reordering in both modes; the selective mode resends far fewer
// packets than go-back-N at the same loss; a go-back-N-only peer still works
// against a selective one; forged SACKs are ignored and counted and never
// complete anything.
#include <cstring>
#include <random>

#include "engine_test_peer.h"
#include "rc_pair.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::engine::testing {
namespace {

// Both devices of a pair, each side's retransmission mode in its
// EngineConfig (SOFTRNIC_RETRANSMIT's field).
struct Pair {
  Side a, b;
};

// shm_direct = false: every operation as packets, also over shared memory
// (SOFTRNIC_SHM_DIRECT=0), for tests about the packet path's state.
void OpenPair(Pair& p, const QpOptions& o, bool selective_a, bool selective_b,
              TestFaults fa = {}, TestFaults fb = {},
              bool shm_direct = true) {
  EngineConfig ca = TestConfig(0, fa), cb = TestConfig(1, fb);
  ca.selective = selective_a;
  cb.selective = selective_b;
  if (!shm_direct) ca.shm_direct = cb.shm_direct = false;
  auto da = MakeDevice(ca);
  auto db = MakeDevice(cb);
  ASSERT_TRUE(da && db);
  SetupSide(p.a, da, o);
  SetupSide(p.b, db, o);
  Connect(p.a, p.b, o);
  Connect(p.b, p.a, o);
}

// a -> b: `n` WRITEs of `len` bytes and `n` SENDs of `len` bytes,
// interleaved, then checks every byte and the completion order.
void TransferAndVerify(Side& a, Side& b, int n, uint32_t len, uint32_t seed) {
  const size_t half = a.buf.size() / 2;
  ASSERT_LE(size_t(n) * len, half);
  FillPattern(a.buf, 0, size_t(n) * len, seed);
  FillPattern(a.buf, half, size_t(n) * len, seed + 1);
  std::memset(b.buf.data(), 0, b.buf.size());
  std::vector<Sge> sg(2 * n), rsg(n);
  for (int i = 0; i < n; ++i) {
    rsg[i] = SgeOf(b, half + size_t(i) * len, len);
    ASSERT_EQ(b.dev->PostRecv(b.qp, RecvWr{uint64_t(1000 + i), {&rsg[i], 1}}), 0);
  }
  for (int i = 0; i < n; ++i) {
    sg[2 * i] = SgeOf(a, size_t(i) * len, len);
    ASSERT_EQ(a.dev->PostSend(a.qp, MakeWr(WrOpcode::kRdmaWrite, uint64_t(2 * i), {&sg[2 * i], 1},
                                           Addr(b, size_t(i) * len), b.dev->MrRkey(b.mr))),
              0);
    sg[2 * i + 1] = SgeOf(a, half + size_t(i) * len, len);
    ASSERT_EQ(a.dev->PostSend(a.qp, MakeWr(WrOpcode::kSend, uint64_t(2 * i + 1), {&sg[2 * i + 1], 1})),
              0);
  }
  auto sc = PollN(a, size_t(2 * n), std::chrono::milliseconds(60000));
  ASSERT_EQ(sc.size(), size_t(2 * n)) << "stalled, a=" << QpStateName(a.dev->GetQpState(a.qp));
  for (int i = 0; i < 2 * n; ++i) {
    ASSERT_EQ(sc[i].status, WcStatus::kSuccess) << i;
    ASSERT_EQ(sc[i].wr_id, uint64_t(i)) << "completions out of order";
  }
  auto rc = PollN(b, size_t(n), std::chrono::milliseconds(10000));
  ASSERT_EQ(rc.size(), size_t(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(rc[i].wr_id, uint64_t(1000 + i));
    EXPECT_EQ(rc[i].byte_len, len);
  }
  EXPECT_EQ(FirstDiff(b.buf.data(), a.buf.data(), size_t(n) * len), -1) << "WRITE data";
  EXPECT_EQ(FirstDiff(b.buf.data() + half, a.buf.data() + half, size_t(n) * len), -1) << "SEND data";
}

struct SrCase {
  const char* name;
  bool selective;
  double drop, reorder;
  int messages;
};

class SelectiveDataTest : public ::testing::TestWithParam<SrCase> {};

TEST_P(SelectiveDataTest, DataVerifiedUnderLoss) {
  const SrCase& c = GetParam();
  QpOptions o;
  // ~17 ms: the last resort. (10, ~4 ms, ran out of its 8 tries in 63 ms
  // once, Sel20 on a machine at load 12: a starved progress thread, not loss.)
  o.timeout = 12;
  o.retry_cnt = 7;
  o.buf_size = 4 << 20;
  o.psn = 0xFFFF00;  // across the PSN wrap
  TestFaults fa, fb;
  fa.drop = fb.drop = c.drop;
  fa.reorder = fb.reorder = c.reorder;
  fa.seed = 101;
  fb.seed = 202;
  Pair p;
  OpenPair(p, o, c.selective, c.selective, fa, fb);
  TransferAndVerify(p.a, p.b, c.messages, 64 * 1024, 7);
  const EngineStats sa = StatsOf(*p.a.dev);
  const EngineStats sb = StatsOf(*p.b.dev);
  if (c.drop > 0) {
    EXPECT_GT(sa.tx_retransmit_packets, 0u);
  }
  if (c.selective) {
    if (c.drop > 0) {
      EXPECT_GT(sb.tx_sacks, 0u);
      EXPECT_GT(sa.rx_sacks, 0u);
      EXPECT_GT(sb.rx_ooo_kept, 0u);
    }
  } else {
    EXPECT_EQ(sb.tx_sacks, 0u);
    EXPECT_EQ(sb.rx_ooo_kept, 0u);
  }
  EXPECT_EQ(sa.rx_sacks_invalid, 0u);
  RecordProperty("retransmitted", std::to_string(sa.tx_retransmit_packets));
}

INSTANTIATE_TEST_SUITE_P(
    Modes, SelectiveDataTest,
    ::testing::Values(SrCase{"Gbn1", false, 0.01, 0, 24}, SrCase{"Gbn5", false, 0.05, 0, 12},
                      SrCase{"Gbn20", false, 0.20, 0, 2}, SrCase{"GbnReorder", false, 0, 0.05, 12},
                      SrCase{"Sel1", true, 0.01, 0, 24}, SrCase{"Sel5", true, 0.05, 0, 12},
                      SrCase{"Sel20", true, 0.20, 0, 8}, SrCase{"SelReorder", true, 0, 0.05, 12},
                      SrCase{"Sel5Reorder", true, 0.05, 0.05, 12}),
    [](const ::testing::TestParamInfo<SrCase>& i) { return std::string(i.param.name); });

// The point of it all: at the same loss, far fewer packets sent again.
TEST(SelectiveRatioTest, FarFewerRetransmissionsThanGoBackN) {
  uint64_t resent[2] = {0, 0};
  uint64_t lost[2] = {0, 0};
  uint64_t timeouts[2] = {0, 0};
  for (int mode = 0; mode < 2; ++mode) {
    QpOptions o;
    o.timeout = 10;
    o.buf_size = 4 << 20;
    TestFaults fa;  // loss on the request path only: same seed, same drops
    fa.drop = 0.03;
    fa.seed = 77;
    Pair p;
    OpenPair(p, o, mode == 1, mode == 1, fa, {});
    TransferAndVerify(p.a, p.b, 16, 64 * 1024, 11);
    const EngineStats st = StatsOf(*p.a.dev);
    resent[mode] = st.tx_retransmit_packets;
    timeouts[mode] = st.retransmit_timeouts;
    lost[mode] = TransportCountersOf(*p.a.dev).injected_drops;
  }
  RecordProperty("gbn_resent", std::to_string(resent[0]));
  RecordProperty("selective_resent", std::to_string(resent[1]));
  std::printf("retransmitted packets at 3%% loss: go-back-N %llu (drops %llu, timeouts %llu), "
              "selective %llu (drops %llu, timeouts %llu)\n",
              static_cast<unsigned long long>(resent[0]), static_cast<unsigned long long>(lost[0]),
              static_cast<unsigned long long>(timeouts[0]),
              static_cast<unsigned long long>(resent[1]), static_cast<unsigned long long>(lost[1]),
              static_cast<unsigned long long>(timeouts[1]));
  EXPECT_GT(resent[1], 0u);
  EXPECT_LT(resent[1], resent[0]);
  // Go-back-N resends a window per loss; selective about one packet per
  // loss (measured: 389-659 vs 68-92 for ~70 drops). Go-back-N recovers a
  // lost tail by timeout as a matter of course; selective mode needs none,
  // but a Local ACK Timeout resends everything outstanding, and on a loaded
  // CI machine the ACKs of a descheduled responder can be late enough for
  // one (seen once: selective 166 for 69 drops). The ratios measure SACK
  // recovery, so they are checked when the selective run had no timeout.
  if (timeouts[1] == 0) {
    EXPECT_GT(resent[0], 3 * resent[1]);
    EXPECT_LE(resent[1], 2 * lost[1] + 20);
  } else {
    std::printf("the selective run timed out (scheduling): ratio checks skipped\n");
  }
}

// A connected QP that has sent nothing holds neither the requester's
// scoreboard nor the responder's reorder store (qp.h: taken on first use,
// issue 17's connect rate and idle-QP memory); the first request packet
// takes the sender's scoreboard, an in-order stream takes no store.
TEST(SelectiveMemoryTest, ScoreboardAndStoreTakenOnFirstUse) {
  QpOptions o;
  Pair p;
  // Packets only: over shared memory, WRITEs and SENDs into whole shared
  // pages would go direct and send no request packet at all.
  OpenPair(p, o, true, true, {}, {}, /*shm_direct=*/false);
  auto sizes = [&](Side& s) {
    std::lock_guard lock(s.dev->engine().mu_);
    return std::make_pair(s.qp->sr.scoreboard.size(), s.qp->sr_store.ooo_len.size());
  };
  {
    std::lock_guard lock(p.b.dev->engine().mu_);
    ASSERT_TRUE(p.b.qp->sr.sr_local && p.b.qp->sr_store.offered) << "setup: selective on both";
  }
  EXPECT_EQ(sizes(p.a), std::make_pair(size_t{0}, size_t{0}));
  EXPECT_EQ(sizes(p.b), std::make_pair(size_t{0}, size_t{0}));
  TransferAndVerify(p.a, p.b, 4, 4096, 5);
  EXPECT_EQ(sizes(p.a).first, size_t{kSrWindow}) << "the sender's scoreboard";
  EXPECT_EQ(sizes(p.b), std::make_pair(size_t{0}, size_t{0}))
      << "the receiver sent no request and kept no packet";
  EXPECT_EQ(StatsOf(*p.b.dev).rx_ooo_kept, 0u);
}

// A peer that only does go-back-N (SOFTRNIC_RETRANSMIT=gbn, or hardware)
// against a selective one, in both directions, under loss.
TEST(SelectiveInteropTest, GoBackNPeerAgainstSelectivePeer) {
  QpOptions o;
  o.timeout = 10;
  o.buf_size = 4 << 20;
  TestFaults fa, fb;
  fa.drop = fb.drop = 0.03;
  fa.reorder = fb.reorder = 0.02;
  fa.seed = 5;
  fb.seed = 6;
  Pair p;
  OpenPair(p, o, /*selective_a=*/false, /*selective_b=*/true, fa, fb);
  TransferAndVerify(p.a, p.b, 8, 64 * 1024, 21);  // gbn requester -> selective responder
  TransferAndVerify(p.b, p.a, 8, 64 * 1024, 31);  // selective requester -> gbn responder
  const EngineStats sa = StatsOf(*p.a.dev);
  const EngineStats sb = StatsOf(*p.b.dev);
  // Nobody used SACKs: the gbn side never set the bit, so the selective
  // side never kept packets for it nor sent it SACKs, and the gbn side
  // never offered to keep packets for the selective requester.
  EXPECT_EQ(sa.tx_sacks + sb.tx_sacks + sa.rx_sacks + sb.rx_sacks, 0u);
  EXPECT_EQ(sa.rx_ooo_kept + sb.rx_ooo_kept, 0u);
  EXPECT_GT(sa.tx_naks_sequence + sb.tx_naks_sequence, 0u);  // plain go-back-N NAKs
  EXPECT_EQ(p.a.dev->GetQpState(p.a.qp), QpState::kRts);
  EXPECT_EQ(p.b.dev->GetQpState(p.b.qp), QpState::kRts);
}

// Builds an ACK packet (BTH + AETH [+ bitmap] + 4 ICRC bytes, not checked
// past the transport) and hands it to `dev`'s engine as if it came from `from`.
void InjectResponse(Device& dev, const Gid& from, uint32_t dest_qp, uint32_t psn, uint8_t syndrome,
                    bool sr, const std::vector<uint8_t>& bitmap) {
  std::vector<uint8_t> pkt(16 + bitmap.size() + 4, 0);
  wire::Bth bth;
  bth.set_opcode(wire::op::kRcAck);
  bth.set_pkey(wire::kDefaultPkey);
  bth.set_dest_qp(dest_qp);
  bth.set_psn(psn);
  bth.set_sr(sr);
  std::memcpy(pkt.data(), bth.b.data(), 12);
  wire::Aeth aeth;
  aeth.set_syndrome(syndrome);
  std::memcpy(pkt.data() + 12, aeth.b.data(), 4);
  if (!bitmap.empty()) std::memcpy(pkt.data() + 16, bitmap.data(), bitmap.size());
  transport::RxPacket rx;
  rx.data = pkt.data();
  rx.length = static_cast<uint32_t>(pkt.size());
  rx.src.gid = from;
  rx.src.port = TestPort();  // the peer's device port (same-host source check)
  Engine& e = dev.engine();
  std::lock_guard lock(e.mu_);
  EngineTestPeer::Dispatch(e, rx);
  EngineTestPeer::FlushTx(e);
}

constexpr uint8_t kNakSeq =
    wire::MakeSyndrome(wire::AckKind::kNak, static_cast<uint8_t>(wire::NakCode::kPsnSequenceError));

// The requester's packets go to a QPN the peer does not have, so the peer
// receives nothing; forged SACKs from the peer's address arrive instead.
TEST(SelectiveForgedSackTest, ForgedRangesIgnoredCountedNeverComplete) {
  QpOptions o;
  o.timeout = 17;  // ~540 ms: no timeout during the checks below
  o.retry_cnt = 1;
  o.psn = 100;
  Pair p;
  auto da = MakeDevice(0);
  auto db = MakeDevice(1);
  SetupSide(p.a, da, o);
  SetupSide(p.b, db, o);
  Connect(p.a, p.b, o);
  {
    // Point a at a QPN that does not exist on b: b drops every request.
    std::lock_guard lock(da->engine().mu_);
    p.a.qp->attr.dest_qp_num = (db->QpNum(p.b.qp) + 7) & wire::kQpnMask;
    p.a.qp->sr.peer_sr = true;  // as if b had offered selective retransmission
  }
  const uint32_t len = 16 * 1024;  // 16 packets: PSN 100..115
  FillPattern(p.a.buf, 0, len, 3);
  Sge sge = SgeOf(p.a, 0, len);
  ASSERT_EQ(da->PostSend(p.a.qp, MakeWr(WrOpcode::kRdmaWrite, 1, {&sge, 1}, Addr(p.b, 0),
                                        db->MrRkey(p.b.mr))),
            0);
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*db).rx_dropped_unknown_qp >= 16; }));
  const Gid peer = db->gids()[0];
  const uint32_t qpn = da->QpNum(p.a.qp);
  const uint64_t resent_before = StatsOf(*da).tx_retransmit_packets;

  // 1. Bits beyond what was ever sent (PSN 116+): ignored whole, counted.
  std::vector<uint8_t> beyond(4, 0);
  beyond[2] = 0x01;  // bit 16 -> PSN 100+1+16 = 117
  InjectResponse(*da, peer, qpn, 100, kNakSeq, true, beyond);
  EXPECT_EQ(StatsOf(*da).rx_sacks_invalid, 1u);
  // 2. A bitmap far past the window: same.
  std::vector<uint8_t> far(64, 0xFF);
  InjectResponse(*da, peer, qpn, 100, kNakSeq, true, far);
  EXPECT_EQ(StatsOf(*da).rx_sacks_invalid, 2u);
  // 3. A SACK with the cumulative PSN past what was sent: dropped before
  //    anything reads it (the PSN check every response passes).
  InjectResponse(*da, peer, qpn, 200, kNakSeq, true, {0x01, 0, 0, 0});
  // 4. In range, claiming PSNs 101..115 received: a hint only. It makes the
  //    requester resend PSN 100 alone, and completes nothing.
  InjectResponse(*da, peer, qpn, 100, kNakSeq, true, {0xFF, 0x7F, 0, 0});
  EXPECT_EQ(StatsOf(*da).rx_sacks_invalid, 2u);
  EXPECT_TRUE(PollFor(p.a, std::chrono::milliseconds(150)).empty())
      << "a forged SACK completed a WRITE the peer never received";
  {
    std::lock_guard lock(da->engine().mu_);
    EXPECT_EQ(p.a.qp->comp.comp_psn, 100u);
  }
  // PSN 100 went out again (and, as tail-loss probes, again: still PSN 100,
  // the oldest packet not reported).
  EXPECT_GE(StatsOf(*da).tx_retransmit_packets, resent_before + 1);
  // The last resort: the timeout forgets every SACK and resends from 100.
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*da).retransmit_timeouts >= 1; },
                      std::chrono::milliseconds(3000)));
  // (after the timeout the window restarts small: at least its first 4,
  // PSN 101..103 among them, which the forged SACK had claimed received)
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*da).tx_retransmit_packets >= resent_before + 1 + 4; }));
  // Retries exhausted (nothing ever reaches b): an error, not a success.
  auto wc = PollN(p.a, 1, std::chrono::milliseconds(5000));
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRetryExcErr);
  // b's memory was never written.
  EXPECT_TRUE(AllBytes(p.b.buf.data(), len, 0));
}

// A SACK sent to a requester that never offered selective retransmission
// (forged: a softrnic responder only sends them to peers that set the bit).
TEST(SelectiveForgedSackTest, SackToGoBackNRequesterIgnored) {
  QpOptions o;
  o.timeout = 17;
  Pair p;
  OpenPair(p, o, false, false);
  TransferAndVerify(p.a, p.b, 2, 8192, 1);
  const Gid peer = p.b.dev->gids()[0];
  uint32_t last_sent;
  {
    std::lock_guard lock(p.a.dev->engine().mu_);
    last_sent = wire::PsnAdd(p.a.qp->req.sq_psn, wire::kPsnMask);
  }
  InjectResponse(*p.a.dev, peer, p.a.dev->QpNum(p.a.qp), last_sent, kNakSeq, true, {0x01, 0, 0, 0});
  EXPECT_EQ(StatsOf(*p.a.dev).rx_sacks_invalid, 1u);
  EXPECT_EQ(p.a.dev->GetQpState(p.a.qp), QpState::kRts);
  TransferAndVerify(p.a, p.b, 2, 8192, 2);
}

}  // namespace
}  // namespace softrnic::engine::testing
