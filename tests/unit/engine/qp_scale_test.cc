// Many QPs on one device (issue 17, "QPs per device"): the device admits
// far more than the 4,096 it used to, idle QPs stay off the progress
// engine's per-pass lists (engine.h, timer list), and a QP destroyed while
// its retransmission timer runs leaves no dangling entry behind (ASan
// would report the next pass's use of it). Speed is measured by
// bench/scale/qp_scale, not here.
#include <algorithm>
#include <vector>

#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

TEST_F(RcPairTest, ThousandsOfIdleQpsBesideAWorkingPair) {
  Open({});
  EXPECT_GE(a_.dev->attr().max_qp, 100000u);
  std::vector<Qp*> idle;
  QpCaps caps{4, 4, 1, 1, 0};
  for (int i = 0; i < 5000; ++i) {  // beyond the old limit of 4,096
    Qp* qp = nullptr;
    QpCaps c = caps;
    ASSERT_EQ(a_.dev->CreateQp(a_.pd, QpType::kRc, a_.cq, a_.cq, nullptr, &c, false, nullptr, &qp),
              0)
        << "QP " << i;
    idle.push_back(qp);
  }
  for (int i = 0; i < 32; ++i) WriteAndCheck(a_, b_, 4096, 512, 30 + i);
  for (Qp* qp : idle) EXPECT_EQ(a_.dev->DestroyQp(qp), 0);
}

// Issue 17 ("QPs per device"): 100,000 RC QPs in one process, connected in
// pairs (50,000 on each of the fixture's two devices, QP i of A with QP i
// of B), and every pair used: each A-side QP writes its own 8-byte value
// into B's memory and the value is checked. Signalled in batches that the
// CQ holds. Not timed (bench/scale/qp_scale measures the cost).
TEST_F(RcPairTest, AHundredThousandQpsConnectedInPairsAllMoveData) {
  QpOptions o;
  o.max_wr = 1;
  o.max_sge = 1;
  o.max_inline = 0;
  Open(o);
  constexpr int kPairs = 50000;
  constexpr int kBatch = 256;
  const auto shallow = [](const Side& s, Qp* qp) {
    Side out;  // the device, PD, CQ and MR of `s`, with its own QP
    out.dev = s.dev;
    out.pd = s.pd;
    out.cq = s.cq;
    out.mr = s.mr;
    out.qp = qp;
    return out;
  };
  std::vector<Side> as, bs;
  as.reserve(kPairs);
  bs.reserve(kPairs);
  for (int i = 0; i < kPairs; ++i) {
    Qp* qa = nullptr;
    Qp* qb = nullptr;
    QpCaps ca{1, 1, 1, 1, 0}, cb{1, 1, 1, 1, 0};
    ASSERT_EQ(a_.dev->CreateQp(a_.pd, QpType::kRc, a_.cq, a_.cq, nullptr, &ca, false, nullptr, &qa), 0)
        << "A's QP " << i;
    ASSERT_EQ(b_.dev->CreateQp(b_.pd, QpType::kRc, b_.cq, b_.cq, nullptr, &cb, false, nullptr, &qb), 0)
        << "B's QP " << i;
    as.push_back(shallow(a_, qa));
    bs.push_back(shallow(b_, qb));
    Connect(as.back(), bs.back(), o);
    Connect(bs.back(), as.back(), o);
    if (::testing::Test::HasFatalFailure()) return;
  }
  uint64_t* src = reinterpret_cast<uint64_t*>(a_.buf.data());
  const uint64_t* dst = reinterpret_cast<const uint64_t*>(b_.buf.data());
  for (int first = 0; first < kPairs; first += kBatch) {
    const int n = std::min(kBatch, kPairs - first);
    for (int k = 0; k < n; ++k) {
      const uint64_t value = 0x5ca1e00000000000ull + uint64_t(first + k);
      src[k] = value;
      Sge sge{reinterpret_cast<uint64_t>(&src[k]), 8, a_.dev->MrLkey(a_.mr)};
      ASSERT_EQ(a_.dev->PostSend(as[first + k].qp, MakeWr(WrOpcode::kRdmaWrite, uint64_t(first + k), {&sge, 1},
                                                         Addr(b_, 8 * size_t(k)), b_.dev->MrRkey(b_.mr))),
                0)
          << "pair " << first + k;
    }
    const auto done = PollN(a_, size_t(n), std::chrono::milliseconds(60000));
    ASSERT_EQ(done.size(), size_t(n)) << "batch from pair " << first;
    for (const Completion& c : done) EXPECT_EQ(c.status, WcStatus::kSuccess);
    for (int k = 0; k < n; ++k) ASSERT_EQ(dst[k], 0x5ca1e00000000000ull + uint64_t(first + k)) << "pair " << first + k;
  }
  for (int i = 0; i < kPairs; ++i) {
    EXPECT_EQ(a_.dev->DestroyQp(as[size_t(i)].qp), 0);
    EXPECT_EQ(b_.dev->DestroyQp(bs[size_t(i)].qp), 0);
  }
}

// A third QP on A's device sends to a QP of B's that stays in RESET, which
// drops what it gets: no ACK ever comes, so the WRITE's Local ACK timer
// stays armed and the QP on the timer list. Destroying it there must take
// it off the list. (Not to B's connected QP: RC's BTH names no source QP,
// so B would take the WRITE as its peer's PSN 0.)
TEST_F(RcPairTest, QpDestroyedWithItsAckTimerRunning) {
  QpOptions o;
  Open(o);
  Side c;
  c.dev = a_.dev;
  ASSERT_EQ(c.dev->AllocPd(nullptr, &c.pd), 0);
  ASSERT_EQ(c.dev->CreateCq(16, nullptr, &c, &c.cq), 0);
  QpCaps caps{4, 4, 1, 1, 0};
  ASSERT_EQ(c.dev->CreateQp(c.pd, QpType::kRc, c.cq, c.cq, nullptr, &caps, false, &c, &c.qp), 0);
  c.buf.assign(4096, 7);
  ASSERT_EQ(c.dev->RegMr(c.pd, c.buf.data(), c.buf.size(), reinterpret_cast<uint64_t>(c.buf.data()),
                         kLocalWrite, nullptr, &c.mr),
            0);
  Side d;  // never connected
  d.dev = b_.dev;
  QpCaps d_caps{4, 4, 1, 1, 0};
  ASSERT_EQ(d.dev->CreateQp(b_.pd, QpType::kRc, b_.cq, b_.cq, nullptr, &d_caps, false, &d, &d.qp), 0);
  Connect(c, d, o);
  Sge sge = SgeOf(c, 0, 64);
  ASSERT_EQ(c.dev->PostSend(c.qp, MakeWr(WrOpcode::kRdmaWrite, 1, {&sge, 1}, Addr(b_, 0),
                                          b_.dev->MrRkey(b_.mr))),
            0);
  // Let the WRITE leave (a pass sends it and arms the timer), then destroy.
  Completion wc[4];
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  while (std::chrono::steady_clock::now() < until) ASSERT_EQ(a_.dev->PollCq(a_.cq, 4, wc), 0);
  ASSERT_EQ(c.dev->DestroyQp(c.qp), 0);
  // Passes that check timers (every 50 us) run on A for a while, then the
  // pair still works.
  const auto later = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (std::chrono::steady_clock::now() < later) ASSERT_EQ(a_.dev->PollCq(a_.cq, 4, wc), 0);
  FillPattern(a_.buf, 0, 256, 9);
  Sge s = SgeOf(a_, 0, 256);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 2, {&s, 1}, Addr(b_, 8192),
                                            b_.dev->MrRkey(b_.mr))),
            0);
  const auto done = PollN(a_, 1, std::chrono::milliseconds(10000));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, WcStatus::kSuccess);
  EXPECT_EQ(FirstDiff(a_.buf.data(), b_.buf.data() + 8192, 256), -1);
  EXPECT_EQ(d.dev->DestroyQp(d.qp), 0);
  EXPECT_EQ(c.dev->DeregMr(c.mr), 0);
  EXPECT_EQ(c.dev->DestroyCq(c.cq), 0);
  EXPECT_EQ(c.dev->DeallocPd(c.pd), 0);
}

}  // namespace
}  // namespace softrnic::engine::testing
