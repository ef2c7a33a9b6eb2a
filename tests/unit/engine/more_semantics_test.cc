// Extra semantics around the acceptance list: RNR on the last packet of a
// multi-packet WRITE_WITH_IMM, receive buffer too small on RC, UC under loss
// (whole messages or nothing), several QPs sharing lossy devices, and the
// SQE state of UD/UC on a local send error.
#include <arpa/inet.h>

#include <cstring>

#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

TEST_F(RcPairTest, MultiPacketWriteWithImmRnrThenRecvPosted) {
  QpOptions o;
  o.rnr_retry = 7;
  o.min_rnr_timer = 3;
  Open(o);
  const uint32_t len = 5000;  // 5 packets; the immediate rides on the last
  FillPattern(a_.buf, 0, len, 61);
  Sge s = SgeOf(a_, 0, len);
  SendWr wr = MakeWr(WrOpcode::kRdmaWriteWithImm, 1, {&s, 1}, Addr(b_, 1000), b_.dev->MrRkey(b_.mr));
  wr.imm_data = htonl(0x5151);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*a_.dev).rx_rnr_naks >= 2; }));
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{8, {}}), 0);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  auto r = PollN(b_, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, WcStatus::kSuccess);
  EXPECT_EQ(r[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(r[0].byte_len, len);
  EXPECT_EQ(r[0].imm_data, htonl(0x5151));
  EXPECT_EQ(FirstDiff(b_.buf.data() + 1000, a_.buf.data(), len), -1);
}

TEST_F(RcPairTest, RcReceiveBufferTooSmall) {
  Open({});
  Sge r = SgeOf(b_, 0, 1000);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{3, {&r, 1}}), 0);
  Sge s = SgeOf(a_, 0, 3000);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 4, {&s, 1})), 0);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRemInvReqErr);
  auto rc = PollN(b_, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 3u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocLenErr);
}

TEST_F(RcPairTest, ReadIntoBadLocalKeyIsLocalProtectionError) {
  Open({});
  Sge d = SgeOf(a_, 0, 2000);
  d.lkey ^= 0x77;
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaRead, 1, {&d, 1}, Addr(b_, 0), b_.dev->MrRkey(b_.mr))), 0);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kLocProtErr);
}

TEST_F(RcPairTest, SendWithInvOfForeignPdKeyDoesNotInvalidate) {
  Open({});
  Pd* other = nullptr;
  ASSERT_EQ(b_.dev->AllocPd(nullptr, &other), 0);
  std::vector<uint8_t> region(4096, 0);
  Mr* mr = nullptr;
  ASSERT_EQ(b_.dev->RegMr(other, region.data(), region.size(), reinterpret_cast<uint64_t>(region.data()),
                          kLocalWrite | kRemoteWrite, nullptr, &mr),
            0);
  Sge r = SgeOf(b_, 0, 1000);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{3, {&r, 1}}), 0);
  Sge s = SgeOf(a_, 0, 100);
  SendWr inv = MakeWr(WrOpcode::kSendWithInv, 1, {&s, 1});
  inv.imm_data = b_.dev->MrRkey(mr);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, inv), 0);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NE(c[0].status, WcStatus::kSuccess);
  auto rc = PollN(b_, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_NE(rc[0].status, WcStatus::kSuccess);
  EXPECT_FALSE(rc[0].wc_flags & kWcWithInv);
}

// UC on a lossy link: a message arrives whole or not at all.
TEST_F(RcPairTest, UcUnderLossDeliversWholeMessagesOnly) {
  QpOptions o;
  o.type = QpType::kUc;
  o.buf_size = 4 << 20;
  TestFaults f;
  f.drop = 0.05;
  f.seed = 21;
  Open(o, f, f);
  const int n = 200;
  const uint32_t len = 3000;  // 3 packets each
  std::vector<Sge> rs(n);
  for (int i = 0; i < n; ++i) {
    rs[i] = SgeOf(b_, (i % 64) * 4096, 4096);
  }
  int delivered = 0, posted_recv = 0;
  for (; posted_recv < 64; ++posted_recv)
    ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{uint64_t(posted_recv), {&rs[posted_recv], 1}}), 0);
  for (int i = 0; i < n; ++i) {
    const size_t off = (i % 256) * 4096;
    FillPattern(a_.buf, off, len, 9000 + i);
    std::memcpy(a_.buf.data() + off, &i, 4);  // message number in the first bytes
    Sge s = SgeOf(a_, off, len);
    ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, i, {&s, 1})), 0);
    auto sc = PollN(a_, 1);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
    // Check receives as they come; the receive buffers are reused round robin.
    for (const Completion& c : PollFor(b_, std::chrono::milliseconds(1))) {
      ASSERT_EQ(c.status, WcStatus::kSuccess);
      ASSERT_EQ(c.byte_len, len) << "partial message delivered";
      const uint8_t* got = b_.buf.data() + (c.wr_id % 64) * 4096;
      int num;
      std::memcpy(&num, got, 4);
      ASSERT_GE(num, 0);
      ASSERT_LT(num, n);
      std::vector<uint8_t> expect(len);
      FillPattern(expect, 0, len, 9000 + num);
      EXPECT_EQ(FirstDiff(got + 4, expect.data() + 4, len - 4), -1) << "message " << num;
      ++delivered;
      ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{c.wr_id + 64, {&rs[c.wr_id % 64], 1}}), 0);
    }
  }
  EXPECT_GT(delivered, n / 2);
  EXPECT_LE(delivered, n);
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
}

// Several RC QPs on the same two lossy devices, all busy at once (a QP
// stalled for good fails after seven 67 ms Local ACK Timeouts; docs/loss.md
// section 3, "Open", on why it is no longer 4 ms).
TEST(MultiQpLossTest, FourQpPairsConcurrent) {
  QpOptions o;
  o.timeout = kLossyLinkTimeout;
  o.buf_size = 1 << 20;
  TestFaults fa, fb;
  fa.drop = fb.drop = 0.02;
  fa.reorder = fb.reorder = 0.01;
  fa.seed = 31;
  fb.seed = 32;
  auto da = MakeDevice(0, fa);
  auto db = MakeDevice(1, fb);
  constexpr int kPairs = 4;
  Side a[kPairs], b[kPairs];
  for (int i = 0; i < kPairs; ++i) {
    SetupSide(a[i], da, o);
    SetupSide(b[i], db, o);
  }
  for (int i = 0; i < kPairs; ++i) {
    Connect(a[i], b[i], o);
    Connect(b[i], a[i], o);
  }
  const int per_qp = 40;
  std::vector<std::vector<Sge>> sges(kPairs, std::vector<Sge>(per_qp));
  for (int q = 0; q < kPairs; ++q) {
    FillPattern(b[q].buf, 512 * 1024, 256 * 1024, 400 + q);
    for (int i = 0; i < per_qp; ++i) {
      const size_t off = i * 8192;
      if (i % 4 == 3) {
        sges[q][i] = SgeOf(a[q], 800 * 1024 + i * 8, 8);
        SendWr fa1 = MakeWr(WrOpcode::kAtomicFetchAdd, i, {&sges[q][i], 1}, Addr(b[q], 1000 * 1024), b[q].dev->MrRkey(b[q].mr));
        fa1.compare_add = 1;
        ASSERT_EQ(a[q].dev->PostSend(a[q].qp, fa1), 0);
      } else if (i % 2) {
        sges[q][i] = SgeOf(a[q], 400 * 1024 + off, 6000);
        ASSERT_EQ(a[q].dev->PostSend(a[q].qp, MakeWr(WrOpcode::kRdmaRead, i, {&sges[q][i], 1},
                                                     Addr(b[q], 512 * 1024 + off), b[q].dev->MrRkey(b[q].mr))),
                  0);
      } else {
        FillPattern(a[q].buf, off, 6000, q * 1000 + i);
        sges[q][i] = SgeOf(a[q], off, 6000);
        ASSERT_EQ(a[q].dev->PostSend(a[q].qp, MakeWr(WrOpcode::kRdmaWrite, i, {&sges[q][i], 1},
                                                     Addr(b[q], off), b[q].dev->MrRkey(b[q].mr))),
                  0);
      }
    }
  }
  for (int q = 0; q < kPairs; ++q) {
    SCOPED_TRACE("qp pair " + std::to_string(q));
    auto c = PollN(a[q], per_qp, std::chrono::milliseconds(15000));
    ASSERT_EQ(c.size(), size_t(per_qp));
    uint64_t adds = 0;
    for (int i = 0; i < per_qp; ++i) {
      EXPECT_EQ(c[i].wr_id, uint64_t(i));
      EXPECT_EQ(c[i].status, WcStatus::kSuccess);
      const size_t off = i * 8192;
      if (i % 4 == 3) {
        uint64_t orig;
        std::memcpy(&orig, a[q].buf.data() + 800 * 1024 + i * 8, 8);
        EXPECT_EQ(orig, adds++);
      } else if (i % 2) {
        EXPECT_EQ(FirstDiff(a[q].buf.data() + 400 * 1024 + off, b[q].buf.data() + 512 * 1024 + off, 6000), -1) << i;
      } else {
        EXPECT_EQ(FirstDiff(b[q].buf.data() + off, a[q].buf.data() + off, 6000), -1) << i;
      }
    }
    uint64_t counter;
    std::memcpy(&counter, b[q].buf.data() + 1000 * 1024, 8);
    EXPECT_EQ(counter, adds);
  }
}

// IBA 10.3.1 / 11.6.2: a local error on a UD (or UC) send queue moves the QP
// to SQE, not ERR: the receive queue keeps working and SQE -> RTS recovers.
TEST_F(RcPairTest, UdLocalSendErrorEntersSqeNotErr) {
  QpOptions o;
  o.type = QpType::kUd;
  Open(o);
  AddressVector av;
  av.is_global = true;
  av.dgid = b_.dev->gids()[0];
  Ah* ah = nullptr;
  ASSERT_EQ(a_.dev->CreateAh(a_.pd, av, nullptr, &ah), 0);
  Sge r = SgeOf(a_, 100000, 2048);
  ASSERT_EQ(a_.dev->PostRecv(a_.qp, RecvWr{50, {&r, 1}}), 0);
  Sge s = SgeOf(a_, 0, 100);
  s.lkey ^= 0x99;  // local protection error
  SendWr wr = MakeWr(WrOpcode::kSend, 1, {&s, 1});
  wr.ah = ah;
  wr.remote_qpn = b_.dev->QpNum(b_.qp);
  wr.remote_qkey = 0x11111111;
  ASSERT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
  auto c = PollN(a_, 1);
  auto more = PollFor(a_, std::chrono::milliseconds(30));
  c.insert(c.end(), more.begin(), more.end());
  ASSERT_GE(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(a_.dev->GetQpState(a_.qp), QpState::kSqe);
  // The receive WQE was not flushed.
  EXPECT_EQ(c.size(), 1u) << "receive queue flushed too (QP went to ERR)";
  // SQE -> RTS (UD: no required attributes) and the QP sends again.
  QpAttr attr;
  attr.qp_state = QpState::kRts;
  EXPECT_EQ(a_.dev->ModifyQp(a_.qp, attr, kQpState), 0);
  EXPECT_EQ(a_.dev->GetQpState(a_.qp), QpState::kRts);
}

}  // namespace
}  // namespace softrnic::engine::testing
