// Acceptance item 5 (and the peer half of item 8): remote access errors leave
// the target's memory untouched, RNR and transport retries are counted and
// exhausted, errors flush every later WR, and post-time checks.
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

constexpr uint8_t kGuard = 0x3C;

class ErrorTest : public RcPairTest {
 protected:
  // Posts `wr` from a, expects `status` on it, b's guard region untouched,
  // both QPs in ERR afterwards (IBA: class C/D responder errors).
  void ExpectRemoteFailure(SendWr wr, WcStatus status, const uint8_t* region, size_t n,
                           uint8_t guard) {
    ASSERT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
    auto c = PollN(a_, 1);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, status);
    EXPECT_EQ(c[0].wr_id, wr.wr_id);
    EXPECT_TRUE(AllBytes(region, n, guard)) << "target memory was modified";
    EXPECT_EQ(a_.dev->GetQpState(a_.qp), QpState::kErr);
    EXPECT_TRUE(WaitFor([&] { return b_.dev->GetQpState(b_.qp) == QpState::kErr; }))
        << "responder QP not moved to ERR after a NAKed request";
  }
};

TEST_F(ErrorTest, WriteBadRkey) {
  Open({});
  std::memset(b_.buf.data(), kGuard, b_.buf.size());
  FillPattern(a_.buf, 0, 4000, 1);
  Sge s = SgeOf(a_, 0, 4000);
  ExpectRemoteFailure(MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, Addr(b_, 0), b_.dev->MrRkey(b_.mr) ^ 0x5A5A5A5A),
                      WcStatus::kRemAccessErr, b_.buf.data(), b_.buf.size(), kGuard);
}

TEST_F(ErrorTest, WriteOutOfBoundsAtEnd) {
  Open({});
  std::memset(b_.buf.data(), kGuard, b_.buf.size());
  FillPattern(a_.buf, 0, 3000, 2);
  Sge s = SgeOf(a_, 0, 3000);
  // Starts inside, ends 1 byte past the region: the first packets would fit.
  ExpectRemoteFailure(MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, Addr(b_, b_.buf.size() - 2999),
                             b_.dev->MrRkey(b_.mr)),
                      WcStatus::kRemAccessErr, b_.buf.data(), b_.buf.size(), kGuard);
}

TEST_F(ErrorTest, WriteBelowRegionStart) {
  Open({});
  std::memset(b_.buf.data(), kGuard, b_.buf.size());
  Sge s = SgeOf(a_, 0, 16);
  ExpectRemoteFailure(MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, Addr(b_, 0) - 8, b_.dev->MrRkey(b_.mr)),
                      WcStatus::kRemAccessErr, b_.buf.data(), b_.buf.size(), kGuard);
}

TEST_F(ErrorTest, ReadOutOfBoundsAndBadRkey) {
  Open({});
  std::memset(a_.buf.data(), kGuard, 8192);
  Sge s = SgeOf(a_, 0, 4096);
  ExpectRemoteFailure(MakeWr(WrOpcode::kRdmaRead, 1, {&s, 1}, Addr(b_, b_.buf.size() - 100),
                             b_.dev->MrRkey(b_.mr)),
                      WcStatus::kRemAccessErr, a_.buf.data(), 8192, kGuard);
}

TEST_F(ErrorTest, AtomicBadRkeyAndOutOfBounds) {
  Open({});
  uint64_t v = 1234;
  std::memcpy(b_.buf.data() + b_.buf.size() - 8, &v, 8);
  Sge s = SgeOf(a_, 0, 8);
  SendWr fa = MakeWr(WrOpcode::kAtomicFetchAdd, 1, {&s, 1}, Addr(b_, b_.buf.size()), b_.dev->MrRkey(b_.mr));
  fa.compare_add = 1;
  std::memset(a_.buf.data(), kGuard, 8);
  ExpectRemoteFailure(fa, WcStatus::kRemAccessErr, a_.buf.data(), 8, kGuard);
  uint64_t got;
  std::memcpy(&got, b_.buf.data() + b_.buf.size() - 8, 8);
  EXPECT_EQ(got, 1234u);
}

// MR without the right (QP has every right).
TEST_F(ErrorTest, MrWithoutRemoteWrite) {
  Open({});
  std::vector<uint8_t> region(4096, kGuard);
  Mr* ro = nullptr;
  ASSERT_EQ(b_.dev->RegMr(b_.pd, region.data(), region.size(), reinterpret_cast<uint64_t>(region.data()),
                          kLocalWrite | kRemoteRead | kRemoteAtomic, nullptr, &ro),
            0);
  Sge s = SgeOf(a_, 0, 100);
  ExpectRemoteFailure(MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, reinterpret_cast<uint64_t>(region.data()),
                             b_.dev->MrRkey(ro)),
                      WcStatus::kRemAccessErr, region.data(), region.size(), kGuard);
}

TEST_F(ErrorTest, MrWithoutRemoteRead) {
  Open({});
  std::vector<uint8_t> region(4096, 7);
  Mr* wo = nullptr;
  ASSERT_EQ(b_.dev->RegMr(b_.pd, region.data(), region.size(), reinterpret_cast<uint64_t>(region.data()),
                          kLocalWrite | kRemoteWrite, nullptr, &wo),
            0);
  std::memset(a_.buf.data(), kGuard, 4096);
  Sge s = SgeOf(a_, 0, 4096);
  ExpectRemoteFailure(MakeWr(WrOpcode::kRdmaRead, 1, {&s, 1}, reinterpret_cast<uint64_t>(region.data()),
                             b_.dev->MrRkey(wo)),
                      WcStatus::kRemAccessErr, a_.buf.data(), 4096, kGuard);
}

TEST_F(ErrorTest, MrWithoutRemoteAtomic) {
  Open({});
  std::vector<uint8_t> region(64, kGuard);
  Mr* mr = nullptr;
  ASSERT_EQ(b_.dev->RegMr(b_.pd, region.data(), region.size(), reinterpret_cast<uint64_t>(region.data()),
                          kLocalWrite | kRemoteWrite | kRemoteRead, nullptr, &mr),
            0);
  Sge s = SgeOf(a_, 0, 8);
  SendWr cs = MakeWr(WrOpcode::kAtomicCmpSwp, 1, {&s, 1}, reinterpret_cast<uint64_t>(region.data()) + 8,
                     b_.dev->MrRkey(mr));
  cs.compare_add = 0x3C3C3C3C3C3C3C3Cull;
  cs.swap = 1;
  ExpectRemoteFailure(cs, WcStatus::kRemAccessErr, region.data(), region.size(), kGuard);
}

// The MR has every right; the QP's access flags lack it.
TEST_F(ErrorTest, QpAccessFlagsWithoutRemoteWrite) {
  QpOptions o;
  o.qp_access = kRemoteRead | kRemoteAtomic;
  Open(o);
  std::memset(b_.buf.data(), kGuard, 8192);
  Sge s = SgeOf(a_, 0, 2000);
  ExpectRemoteFailure(MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, Addr(b_, 0), b_.dev->MrRkey(b_.mr)),
                      WcStatus::kRemAccessErr, b_.buf.data(), 8192, kGuard);
}

TEST_F(ErrorTest, QpAccessFlagsWithoutRemoteReadOrAtomic) {
  QpOptions o;
  o.qp_access = kRemoteWrite;
  Open(o);
  std::memset(a_.buf.data(), kGuard, 64);
  Sge s = SgeOf(a_, 0, 8);
  SendWr fa = MakeWr(WrOpcode::kAtomicFetchAdd, 1, {&s, 1}, Addr(b_, 0), b_.dev->MrRkey(b_.mr));
  fa.compare_add = 5;
  ExpectRemoteFailure(fa, WcStatus::kRemAccessErr, a_.buf.data(), 64, kGuard);
  EXPECT_TRUE(AllBytes(b_.buf.data(), 8, 0));
}

TEST_F(ErrorTest, RkeyOfAnotherPd) {
  Open({});
  Pd* other = nullptr;
  ASSERT_EQ(b_.dev->AllocPd(nullptr, &other), 0);
  std::vector<uint8_t> region(4096, kGuard);
  Mr* mr = nullptr;
  ASSERT_EQ(b_.dev->RegMr(other, region.data(), region.size(), reinterpret_cast<uint64_t>(region.data()),
                          kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic, nullptr, &mr),
            0);
  Sge s = SgeOf(a_, 0, 64);
  ExpectRemoteFailure(MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, reinterpret_cast<uint64_t>(region.data()),
                             b_.dev->MrRkey(mr)),
                      WcStatus::kRemAccessErr, region.data(), region.size(), kGuard);
}

TEST_F(ErrorTest, DeregisteredMrRkeyRejected) {
  Open({});
  std::vector<uint8_t> region(4096, kGuard);
  Mr* mr = nullptr;
  ASSERT_EQ(b_.dev->RegMr(b_.pd, region.data(), region.size(), reinterpret_cast<uint64_t>(region.data()),
                          kLocalWrite | kRemoteWrite, nullptr, &mr),
            0);
  const uint32_t rkey = b_.dev->MrRkey(mr);
  ASSERT_EQ(b_.dev->DeregMr(mr), 0);
  Sge s = SgeOf(a_, 0, 64);
  ExpectRemoteFailure(MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, reinterpret_cast<uint64_t>(region.data()), rkey),
                      WcStatus::kRemAccessErr, region.data(), region.size(), kGuard);
}

TEST_F(ErrorTest, ErrorFlushesEverythingAfterIt) {
  Open({});
  std::memset(b_.buf.data(), kGuard, 1 << 20);
  Sge r[3] = {SgeOf(a_, 500000, 100), SgeOf(a_, 600000, 100), SgeOf(a_, 700000, 100)};
  for (int i = 0; i < 3; ++i) ASSERT_EQ(a_.dev->PostRecv(a_.qp, RecvWr{100u + i, {&r[i], 1}}), 0);
  Sge br = SgeOf(b_, 900000, 100);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{200, {&br, 1}}), 0);
  FillPattern(a_.buf, 0, 8192, 9);
  Sge s = SgeOf(a_, 0, 4096);
  // 1: bad rkey; 2..5: good WRITEs (some unsignaled) and a SEND.
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, Addr(b_, 0),
                                           b_.dev->MrRkey(b_.mr) + 1)),
            0);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 2, {&s, 1}, Addr(b_, 8192),
                                           b_.dev->MrRkey(b_.mr), 0)),
            0);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 3, {&s, 1}, Addr(b_, 16384),
                                           b_.dev->MrRkey(b_.mr))),
            0);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 4, {&s, 1}, 0, 0, 0)), 0);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaRead, 5, {&s, 1}, Addr(b_, 0),
                                           b_.dev->MrRkey(b_.mr))),
            0);
  // 5 send completions + 3 receive flushes, all on a's CQ.
  auto c = PollN(a_, 8);
  ASSERT_EQ(c.size(), 8u);
  std::vector<Completion> sends, recvs;
  for (const auto& x : c) (x.opcode == WcOpcode::kRecv ? recvs : sends).push_back(x);
  ASSERT_EQ(sends.size(), 5u);
  ASSERT_EQ(recvs.size(), 3u);
  EXPECT_EQ(sends[0].wr_id, 1u);
  EXPECT_EQ(sends[0].status, WcStatus::kRemAccessErr);
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(sends[i].wr_id, 1u + i);
    EXPECT_EQ(sends[i].status, WcStatus::kWrFlushErr) << "WR " << i + 1 << " (flushed even unsignaled)";
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(recvs[i].wr_id, 100u + i);
    EXPECT_EQ(recvs[i].status, WcStatus::kWrFlushErr);
  }
  // Nothing after the failed WR reached b (b's responder is in ERR too).
  EXPECT_TRUE(AllBytes(b_.buf.data(), 1 << 20, kGuard));
  EXPECT_EQ(a_.dev->GetQpState(a_.qp), QpState::kErr);
  // b's receive queue is flushed too.
  auto bc = PollN(b_, 1);
  ASSERT_EQ(bc.size(), 1u);
  EXPECT_EQ(bc[0].wr_id, 200u);
  EXPECT_EQ(bc[0].status, WcStatus::kWrFlushErr);
  // Later posts complete at once with a flush error, on both queues.
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 6, {&s, 1}, Addr(b_, 0),
                                           b_.dev->MrRkey(b_.mr), 0)),
            0);
  ASSERT_EQ(a_.dev->PostRecv(a_.qp, RecvWr{7, {&r[0], 1}}), 0);
  c = PollN(a_, 2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 6u);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(c[1].wr_id, 7u);
  EXPECT_EQ(c[1].status, WcStatus::kWrFlushErr);
  EXPECT_TRUE(PollFor(a_, std::chrono::milliseconds(30)).empty());
}

TEST_F(ErrorTest, RnrRetriesThenRnrRetryExceeded) {
  QpOptions o;
  o.rnr_retry = 2;
  o.min_rnr_timer = 1;  // 10 us
  Open(o);
  Sge s = SgeOf(a_, 0, 100);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 1, {&s, 1})), 0);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 2, {&s, 1})), 0);
  auto c = PollN(a_, 2, std::chrono::milliseconds(5000));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(c[1].wr_id, 2u);
  EXPECT_EQ(c[1].status, WcStatus::kWrFlushErr);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  // rnr_retry = 2: the first attempt and two retries, each answered by RNR NAK.
  EXPECT_EQ(StatsOf(*a_.dev).rx_rnr_naks, 3u);
  EXPECT_EQ(a_.dev->GetQpState(a_.qp), QpState::kErr);
  // The responder is not in error: RNR is not an error there.
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
}

TEST_F(ErrorTest, RnrThenReceivePostedSucceeds) {
  QpOptions o;
  o.rnr_retry = 7;  // infinite
  o.min_rnr_timer = 5;  // 0.06 ms
  Open(o);
  FillPattern(a_.buf, 0, 3000, 77);
  Sge s = SgeOf(a_, 0, 3000);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 1, {&s, 1})), 0);
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*a_.dev).rx_rnr_naks >= 3; }));
  Sge r = SgeOf(b_, 0, 4096);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{9, {&r, 1}}), 0);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  auto rc = PollN(b_, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].byte_len, 3000u);
  EXPECT_EQ(FirstDiff(b_.buf.data(), a_.buf.data(), 3000), -1);
}

TEST_F(ErrorTest, PeerQpDestroyedRetryExceeded) {
  QpOptions o;
  o.timeout = 8;  // ~1 ms
  o.retry_cnt = 2;
  Open(o);
  ASSERT_EQ(b_.dev->DestroyQp(b_.qp), 0);
  b_.qp = nullptr;
  std::memset(b_.buf.data(), kGuard, 4096);
  Sge s = SgeOf(a_, 0, 100);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, Addr(b_, 0),
                                           b_.dev->MrRkey(b_.mr))),
            0);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaRead, 2, {&s, 1}, Addr(b_, 0),
                                           b_.dev->MrRkey(b_.mr), 0)),
            0);
  auto c = PollN(a_, 2, std::chrono::milliseconds(5000));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(c[1].wr_id, 2u);
  EXPECT_EQ(c[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(StatsOf(*a_.dev).retransmit_timeouts, 2u);  // retry_cnt retries, then give up
  EXPECT_EQ(a_.dev->GetQpState(a_.qp), QpState::kErr);
  EXPECT_TRUE(AllBytes(b_.buf.data(), 4096, kGuard));
}

TEST_F(ErrorTest, PeerNeverConnectedRetryExceeded) {
  QpOptions o;
  o.timeout = 8;
  o.retry_cnt = 1;
  SetupSide(a_, MakeDevice(0), o);
  SetupSide(b_, MakeDevice(1), o);
  Connect(a_, b_, o);  // b's QP stays in RESET
  Sge s = SgeOf(a_, 0, 100);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 1, {&s, 1})), 0);
  auto c = PollN(a_, 1, std::chrono::milliseconds(5000));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRetryExcErr);
  // b's progress thread counts the drops when it gets to run, which on a
  // loaded 2-core machine can be after a's ~2 ms retry budget ran out.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto dropped = [&] {
    return StatsOf(*b_.dev).rx_dropped_source + StatsOf(*b_.dev).rx_dropped_qp_state;
  };
  while (dropped() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GT(dropped(), 0u);
}

// ---- post-time checks ----

TEST_F(ErrorTest, PostInResetInitRtrIsEinval) {
  QpOptions o;
  SetupSide(a_, MakeDevice(0), o);
  SetupSide(b_, MakeDevice(1), o);
  Sge s = SgeOf(a_, 0, 8);
  const SendWr wr = MakeWr(WrOpcode::kSend, 1, {&s, 1});
  EXPECT_EQ(a_.dev->PostSend(a_.qp, wr), EINVAL) << "RESET";
  EXPECT_EQ(a_.dev->PostRecv(a_.qp, RecvWr{1, {&s, 1}}), EINVAL) << "recv in RESET";
  QpAttr attr;
  attr.qp_state = QpState::kInit;
  attr.qp_access_flags = kRemoteWrite;
  ASSERT_EQ(a_.dev->ModifyQp(a_.qp, attr, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  EXPECT_EQ(a_.dev->PostSend(a_.qp, wr), EINVAL) << "INIT";
  EXPECT_EQ(a_.dev->PostRecv(a_.qp, RecvWr{1, {&s, 1}}), 0) << "recv allowed in INIT";
  attr.qp_state = QpState::kRtr;
  attr.dest_qp_num = b_.dev->QpNum(b_.qp);
  attr.ah_attr.is_global = true;
  attr.ah_attr.dgid = b_.dev->gids()[0];
  attr.max_dest_rd_atomic = 1;
  ASSERT_EQ(a_.dev->ModifyQp(a_.qp, attr,
                             kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                 kQpMaxDestRdAtomic | kQpMinRnrTimer),
            0);
  EXPECT_EQ(a_.dev->PostSend(a_.qp, wr), EINVAL) << "RTR";
  EXPECT_TRUE(PollFor(a_, std::chrono::milliseconds(20)).empty());
}

TEST_F(ErrorTest, TooManySgesIsEinval) {
  Open({});  // max_sge 4
  Sge s[5] = {SgeOf(a_, 0, 1), SgeOf(a_, 1, 1), SgeOf(a_, 2, 1), SgeOf(a_, 3, 1), SgeOf(a_, 4, 1)};
  EXPECT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 1, {s, 5})), EINVAL);
  EXPECT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 1, {s, 5}, Addr(b_, 0), b_.dev->MrRkey(b_.mr))),
            EINVAL);
  EXPECT_EQ(a_.dev->PostRecv(a_.qp, RecvWr{1, {s, 5}}), EINVAL);
  EXPECT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 1, {s, 4})), 0);  // 4 is fine
}

TEST_F(ErrorTest, MisalignedOrWrongSizeAtomicIsEinvalAtPost) {
  Open({});
  Sge s8 = SgeOf(a_, 0, 8), s4 = SgeOf(a_, 0, 4);
  SendWr fa = MakeWr(WrOpcode::kAtomicFetchAdd, 1, {&s8, 1}, Addr(b_, 4), b_.dev->MrRkey(b_.mr));
  EXPECT_EQ(a_.dev->PostSend(a_.qp, fa), EINVAL);
  fa.remote_addr = Addr(b_, 8);
  fa.sges = {&s4, 1};
  EXPECT_EQ(a_.dev->PostSend(a_.qp, fa), EINVAL);
  EXPECT_TRUE(AllBytes(b_.buf.data(), 16, 0));
  EXPECT_EQ(a_.dev->GetQpState(a_.qp), QpState::kRts);
}

TEST_F(ErrorTest, SendQueueFullIsEnomem) {
  QpOptions o;
  o.max_wr = 4;
  o.timeout = 0;  // never time out: the WRs stay outstanding
  SetupSide(a_, MakeDevice(0), o);
  SetupSide(b_, MakeDevice(1), o);
  Connect(a_, b_, o);  // b never answers (its QP stays in RESET)
  Sge s = SgeOf(a_, 0, 8);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, i, {&s, 1})), 0);
  EXPECT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 4, {&s, 1})), ENOMEM);
  // The receive queue has its own limit.
  for (int i = 0; i < 4; ++i) ASSERT_EQ(a_.dev->PostRecv(a_.qp, RecvWr{uint64_t(i), {&s, 1}}), 0);
  EXPECT_EQ(a_.dev->PostRecv(a_.qp, RecvWr{4, {&s, 1}}), ENOMEM);
}

TEST_F(ErrorTest, LocalProtectionErrorOnBadLkey) {
  Open({});
  Sge s = SgeOf(a_, 0, 100);
  s.lkey ^= 0x1234;
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, Addr(b_, 0), b_.dev->MrRkey(b_.mr))), 0);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(a_.dev->GetQpState(a_.qp), QpState::kErr);
}

// Runs the test body with SOFTRNIC_TRANSPORT=udp: the operation must reach
// b's responder (engine), not b's memory through the same-host direct path.
class UdpOnly {
 public:
  UdpOnly() {
    if (const char* old = std::getenv("SOFTRNIC_TRANSPORT")) saved_ = old;
    setenv("SOFTRNIC_TRANSPORT", "udp", 1);
  }
  ~UdpOnly() {
    if (saved_.empty()) unsetenv("SOFTRNIC_TRANSPORT");
    else setenv("SOFTRNIC_TRANSPORT", saved_.c_str(), 1);
  }

 private:
  std::string saved_;
};

// M4: IBA 10.6.7 / rxe_invalidate_mr: only memory windows (type 2) and
// fast-registered MRs can be invalidated by a remote SEND_WITH_INVALIDATE.
// softrnic has neither, so an ordinary MR's rkey names nothing that can be
// invalidated: the SEND fails (Invalid Request NAK; receive completion
// REM_INV_REQ_ERR, as rxe's Class J "invalid R_Key in Send with
// Invalidate") and the MR stays usable by everyone else.
TEST_F(ErrorTest, SendWithInvalidateCannotRevokeAnOrdinaryMr) {
  Open({});
  // A second connection between the same devices, sharing PD, CQ and MRs.
  Side c, d;
  c.dev = a_.dev;
  c.pd = a_.pd;
  c.cq = a_.cq;
  d.dev = b_.dev;
  d.pd = b_.pd;
  d.cq = b_.cq;
  QpCaps caps{16, 16, 4, 4, 64};
  ASSERT_EQ(c.dev->CreateQp(c.pd, QpType::kRc, c.cq, c.cq, nullptr, &caps, false, &c, &c.qp), 0);
  ASSERT_EQ(d.dev->CreateQp(d.pd, QpType::kRc, d.cq, d.cq, nullptr, &caps, false, &d, &d.qp), 0);
  Connect(c, d, opts_);
  Connect(d, c, opts_);
  // The peer on the first connection names b's ordinary MR.
  Sge r = SgeOf(b_, 0, 4096);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{7, {&r, 1}}), 0);
  Sge s = SgeOf(a_, 0, 100);
  SendWr inv = MakeWr(WrOpcode::kSendWithInv, 1, {&s, 1});
  inv.imm_data = b_.dev->MrRkey(b_.mr);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, inv), 0);
  auto sc = PollN(a_, 1);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kRemInvReqErr);
  auto rc = PollN(b_, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kRemInvReqErr);
  EXPECT_FALSE(rc[0].wc_flags & kWcWithInv);
  // A WRITE from the other connection to that MR still succeeds.
  FillPattern(a_.buf, 8192, 3000, 21);
  Sge w = SgeOf(a_, 8192, 3000);
  ASSERT_EQ(c.dev->PostSend(c.qp, MakeWr(WrOpcode::kRdmaWrite, 2, {&w, 1}, Addr(b_, 65536),
                                         b_.dev->MrRkey(b_.mr))),
            0);
  std::vector<Completion> got;
  ASSERT_TRUE(WaitFor([&] {
    Completion wc[4];
    const int n = a_.dev->PollCq(a_.cq, 4, wc);
    for (int i = 0; i < n; ++i)
      if (wc[i].wr_id == 2) got.push_back(wc[i]);
    return !got.empty();
  }));
  EXPECT_EQ(got[0].status, WcStatus::kSuccess);
  EXPECT_EQ(FirstDiff(b_.buf.data() + 65536, a_.buf.data() + 8192, 3000), -1);
}

// L3: an MR whose iova is 8-aligned while its address is not (ibv_reg_mr_iova
// with another alignment). An atomic at an 8-aligned va would run on a
// misaligned host word (undefined behaviour, a split lock): IBA C9-30 asks
// for natural alignment, which softrnic can only give at the host address,
// so it is refused with an Invalid Request NAK (REM_INV_REQ_ERR), memory
// untouched. UBSan (CI) reports the misaligned access if it happens.
TEST_F(ErrorTest, AtomicOnMisalignedHostWordOfAnIovaMrRefused) {
  UdpOnly udp;
  Open({});
  alignas(8) static uint8_t region[64 + 8];
  std::memset(region, kGuard, sizeof(region));
  Mr* mr = nullptr;
  const uint64_t iova = 0x100000;  // 8-aligned; the host address is 8k+4
  ASSERT_EQ(b_.dev->RegMr(b_.pd, region + 4, 64, iova,
                          kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic, nullptr, &mr),
            0);
  Sge s = SgeOf(a_, 0, 8);
  SendWr wr = MakeWr(WrOpcode::kAtomicFetchAdd, 1, {&s, 1}, iova + 8, b_.dev->MrRkey(mr));
  wr.compare_add = 1;
  ExpectRemoteFailure(wr, WcStatus::kRemInvReqErr, region, sizeof(region), kGuard);
  b_.dev->DeregMr(mr);
}

// The same where the target's pages are shared memory (the default transport
// between two devices of one host): the direct path runs atomics on the
// peer's memfd itself, so it must refuse the misaligned host word as well and
// leave the request to the ring's responder, which answers as above. Over
// UDP (the .udp run) this is the responder case again.
TEST_F(ErrorTest, AtomicOnMisalignedHostWordOfSharedPagesRefused) {
  Open({});
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* region = static_cast<uint8_t*>(mem);
  std::memset(region, kGuard, 4 * page);
  Mr* mr = nullptr;
  const uint64_t iova = 0x100000;  // 8-aligned; the host address is region + 4
  ASSERT_EQ(b_.dev->RegMr(b_.pd, region + 4, 3 * page, iova,
                          kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic, nullptr, &mr),
            0);
  // va iova + page -> host word region + page + 4: inside the whole pages
  // [region + page, region + 3 page) that registration shares.
  Sge s = SgeOf(a_, 0, 8);
  SendWr wr = MakeWr(WrOpcode::kAtomicFetchAdd, 1, {&s, 1}, iova + page, b_.dev->MrRkey(mr));
  wr.compare_add = 1;
  ExpectRemoteFailure(wr, WcStatus::kRemInvReqErr, region, 4 * page, kGuard);
  b_.dev->DeregMr(mr);
  munmap(mem, 4 * page);
}

}  // namespace
}  // namespace softrnic::engine::testing
