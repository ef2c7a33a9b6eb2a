// Many QPs on one device (issue 17, "QPs per device"): the device admits
// far more than the 4,096 it used to, idle QPs stay off the progress
// engine's per-pass lists (engine.h, timer list), and a QP destroyed while
// its retransmission timer runs leaves no dangling entry behind (ASan
// would report the next pass's use of it). Speed is measured by
// bench/scale/qp_scale, not here.
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
