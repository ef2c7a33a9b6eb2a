// Acceptance item 1: every opcode over RC with data verified byte for byte,
// multiple SGEs on both sides, inline, unsignaled WRs, UC and UD.
#include <arpa/inet.h>

#include <cstring>

#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

constexpr uint8_t kGuard = 0xEE;

class OpcodeTest : public RcPairTest {
 protected:
  uint32_t RkeyB() { return b_.dev->MrRkey(b_.mr); }
  Completion One(Side& s) {
    auto c = PollN(s, 1);
    EXPECT_EQ(c.size(), 1u);
    return c.empty() ? Completion{} : c[0];
  }
};

TEST_F(OpcodeTest, SendMultiSgeBothSidesScattersExactly) {
  Open({});
  std::memset(b_.buf.data(), kGuard, 64 * 1024);
  // Sender: three SGEs at scattered offsets; receiver: three SGEs of other sizes.
  const uint32_t s_len[3] = {100, 1500, 37};
  const size_t s_off[3] = {10, 4000, 9001};
  Sge ss[3];
  std::vector<uint8_t> expect;
  for (int i = 0; i < 3; ++i) {
    FillPattern(a_.buf, s_off[i], s_len[i], 10 + i);
    ss[i] = SgeOf(a_, s_off[i], s_len[i]);
    expect.insert(expect.end(), a_.buf.begin() + s_off[i], a_.buf.begin() + s_off[i] + s_len[i]);
  }
  const uint32_t r_len[3] = {700, 700, 600};
  const size_t r_off[3] = {100, 20000, 41000};
  Sge rs[3];
  for (int i = 0; i < 3; ++i) rs[i] = SgeOf(b_, r_off[i], r_len[i]);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{77, {rs, 3}}), 0);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 5, {ss, 3})), 0);
  Completion sc = One(a_);
  EXPECT_EQ(sc.status, WcStatus::kSuccess);
  EXPECT_EQ(sc.opcode, WcOpcode::kSend);
  EXPECT_EQ(sc.wr_id, 5u);
  Completion rc = One(b_);
  EXPECT_EQ(rc.status, WcStatus::kSuccess);
  EXPECT_EQ(rc.opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc.wr_id, 77u);
  EXPECT_EQ(rc.byte_len, 1637u);
  EXPECT_EQ(rc.wc_flags & (kWcWithImm | kWcWithInv), 0u);
  EXPECT_EQ(rc.qp_num, b_.dev->QpNum(b_.qp));
  // 1637 bytes = 700 + 700 + 237 into the third SGE.
  EXPECT_EQ(FirstDiff(b_.buf.data() + r_off[0], expect.data(), 700), -1);
  EXPECT_EQ(FirstDiff(b_.buf.data() + r_off[1], expect.data() + 700, 700), -1);
  EXPECT_EQ(FirstDiff(b_.buf.data() + r_off[2], expect.data() + 1400, 237), -1);
  // Nothing outside the scattered bytes changed.
  EXPECT_TRUE(AllBytes(b_.buf.data(), r_off[0], kGuard));
  EXPECT_TRUE(AllBytes(b_.buf.data() + r_off[0] + 700, r_off[1] - r_off[0] - 700, kGuard));
  EXPECT_TRUE(AllBytes(b_.buf.data() + r_off[1] + 700, r_off[2] - r_off[1] - 700, kGuard));
  EXPECT_TRUE(AllBytes(b_.buf.data() + r_off[2] + 237, 64 * 1024 - r_off[2] - 237, kGuard));
}

TEST_F(OpcodeTest, SendWithImmDeliversImmediate) {
  Open({});
  const uint32_t len = 3000;  // three packets at MTU 1024: imm on the last
  FillPattern(a_.buf, 0, len, 3);
  Sge rs = SgeOf(b_, 0, 4096);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{1, {&rs, 1}}), 0);
  Sge ss = SgeOf(a_, 0, len);
  SendWr wr = MakeWr(WrOpcode::kSendWithImm, 2, {&ss, 1});
  wr.imm_data = htonl(0xA1B2C3D4);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
  EXPECT_EQ(One(a_).status, WcStatus::kSuccess);
  Completion rc = One(b_);
  EXPECT_EQ(rc.status, WcStatus::kSuccess);
  EXPECT_EQ(rc.opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc.byte_len, len);
  EXPECT_TRUE(rc.wc_flags & kWcWithImm);
  EXPECT_EQ(rc.imm_data, htonl(0xA1B2C3D4));
  EXPECT_EQ(FirstDiff(a_.buf.data(), b_.buf.data(), len), -1);
}

// SEND with Invalidate naming an ordinary MR (ibv_reg_mr): only memory
// windows and fast-registered MRs can be invalidated remotely (IBA 10.6.7;
// issue 14, M4), so the SEND fails as for an unknown R_Key and the MR keeps
// working (errors_test.cc: SendWithInvalidateCannotRevokeAnOrdinaryMr).
TEST_F(OpcodeTest, SendWithInvOfOrdinaryMrRefused) {
  Open({});
  std::vector<uint8_t> region(8192, 0x5A);
  Mr* mr2 = nullptr;
  ASSERT_EQ(b_.dev->RegMr(b_.pd, region.data(), region.size(),
                          reinterpret_cast<uint64_t>(region.data()),
                          kLocalWrite | kRemoteWrite | kRemoteRead, nullptr, &mr2),
            0);
  Sge rs = SgeOf(b_, 0, 4096);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{11, {&rs, 1}}), 0);
  Sge ss = SgeOf(a_, 1000, 2500);
  SendWr inv = MakeWr(WrOpcode::kSendWithInv, 2, {&ss, 1});
  inv.imm_data = b_.dev->MrRkey(mr2);  // invalidate_rkey, host order
  ASSERT_EQ(a_.dev->PostSend(a_.qp, inv), 0);
  EXPECT_EQ(One(a_).status, WcStatus::kRemInvReqErr);
  Completion rc = One(b_);
  EXPECT_EQ(rc.status, WcStatus::kRemInvReqErr);
  EXPECT_FALSE(rc.wc_flags & kWcWithInv);
}

TEST_F(OpcodeTest, RdmaWriteMultiSgeLandsContiguously) {
  Open({});
  std::memset(b_.buf.data(), kGuard, 16384);
  const uint32_t s_len[4] = {1, 1023, 2048, 333};
  const size_t s_off[4] = {7, 5000, 10001, 70000};
  Sge ss[4];
  std::vector<uint8_t> expect;
  for (int i = 0; i < 4; ++i) {
    FillPattern(a_.buf, s_off[i], s_len[i], 20 + i);
    ss[i] = SgeOf(a_, s_off[i], s_len[i]);
    expect.insert(expect.end(), a_.buf.begin() + s_off[i], a_.buf.begin() + s_off[i] + s_len[i]);
  }
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 9, {ss, 4}, Addr(b_, 1001), RkeyB())),
            0);
  Completion c = One(a_);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(c.wr_id, 9u);
  EXPECT_EQ(FirstDiff(b_.buf.data() + 1001, expect.data(), expect.size()), -1);
  EXPECT_TRUE(AllBytes(b_.buf.data(), 1001, kGuard));
  EXPECT_TRUE(AllBytes(b_.buf.data() + 1001 + expect.size(), 16384 - 1001 - expect.size(), kGuard));
  // A WRITE consumes no receive WQE and makes no receive completion.
  EXPECT_TRUE(PollFor(b_, std::chrono::milliseconds(50)).empty());
}

TEST_F(OpcodeTest, RdmaWriteWithImmConsumesRecv) {
  Open({});
  const uint32_t len = 5000;
  FillPattern(a_.buf, 0, len, 30);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{42, {}}), 0);  // no SGE needed
  Sge ss = SgeOf(a_, 0, len);
  SendWr wr = MakeWr(WrOpcode::kRdmaWriteWithImm, 8, {&ss, 1}, Addr(b_, 300), RkeyB());
  wr.imm_data = htonl(0x01020304);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
  Completion sc = One(a_);
  EXPECT_EQ(sc.status, WcStatus::kSuccess);
  EXPECT_EQ(sc.opcode, WcOpcode::kRdmaWrite);
  Completion rc = One(b_);
  EXPECT_EQ(rc.status, WcStatus::kSuccess);
  EXPECT_EQ(rc.opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rc.wr_id, 42u);
  EXPECT_EQ(rc.byte_len, len);
  EXPECT_TRUE(rc.wc_flags & kWcWithImm);
  EXPECT_EQ(rc.imm_data, htonl(0x01020304));
  EXPECT_EQ(FirstDiff(b_.buf.data() + 300, a_.buf.data(), len), -1);
}

TEST_F(OpcodeTest, RdmaReadMultiSgeDestination) {
  Open({});
  const uint32_t len = 7000;
  FillPattern(b_.buf, 5, len, 31);
  std::memset(a_.buf.data(), kGuard, 200000);
  Sge ds[3] = {SgeOf(a_, 100, 1000), SgeOf(a_, 50000, 5000), SgeOf(a_, 150000, 1000)};
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaRead, 4, {ds, 3}, Addr(b_, 5), RkeyB())), 0);
  Completion c = One(a_);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(c.byte_len, len);
  EXPECT_EQ(FirstDiff(a_.buf.data() + 100, b_.buf.data() + 5, 1000), -1);
  EXPECT_EQ(FirstDiff(a_.buf.data() + 50000, b_.buf.data() + 1005, 5000), -1);
  EXPECT_EQ(FirstDiff(a_.buf.data() + 150000, b_.buf.data() + 6005, 1000), -1);
  EXPECT_TRUE(AllBytes(a_.buf.data(), 100, kGuard));
  EXPECT_TRUE(AllBytes(a_.buf.data() + 1100, 50000 - 1100, kGuard));
  EXPECT_TRUE(AllBytes(a_.buf.data() + 55000, 150000 - 55000, kGuard));
  EXPECT_TRUE(AllBytes(a_.buf.data() + 151000, 200000 - 151000, kGuard));
}

TEST_F(OpcodeTest, CompareSwapHitAndMiss) {
  Open({});
  uint64_t v = 0x1111222233334444ull;
  std::memcpy(b_.buf.data() + 64, &v, 8);
  Sge rs = SgeOf(a_, 800, 8);
  // Miss: compare differs, memory unchanged, original returned.
  SendWr cs = MakeWr(WrOpcode::kAtomicCmpSwp, 1, {&rs, 1}, Addr(b_, 64), RkeyB());
  cs.compare_add = 5;
  cs.swap = 6;
  ASSERT_EQ(a_.dev->PostSend(a_.qp, cs), 0);
  Completion c = One(a_);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kCompSwap);
  uint64_t got;
  std::memcpy(&got, a_.buf.data() + 800, 8);
  EXPECT_EQ(got, v);
  std::memcpy(&got, b_.buf.data() + 64, 8);
  EXPECT_EQ(got, v);
  // Hit.
  cs.wr_id = 2;
  cs.compare_add = v;
  cs.swap = 0xFEDCBA9876543210ull;
  ASSERT_EQ(a_.dev->PostSend(a_.qp, cs), 0);
  c = One(a_);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  std::memcpy(&got, a_.buf.data() + 800, 8);
  EXPECT_EQ(got, v);
  std::memcpy(&got, b_.buf.data() + 64, 8);
  EXPECT_EQ(got, 0xFEDCBA9876543210ull);
  // Neighbouring words untouched.
  EXPECT_TRUE(AllBytes(b_.buf.data() + 56, 8, 0));
  EXPECT_TRUE(AllBytes(b_.buf.data() + 72, 8, 0));
}

TEST_F(OpcodeTest, FetchAddWrapsAndReturnsOriginal) {
  Open({});
  uint64_t v = ~uint64_t{0};
  std::memcpy(b_.buf.data() + 128, &v, 8);
  Sge rs = SgeOf(a_, 0, 8);
  SendWr fa = MakeWr(WrOpcode::kAtomicFetchAdd, 3, {&rs, 1}, Addr(b_, 128), RkeyB());
  fa.compare_add = 3;
  ASSERT_EQ(a_.dev->PostSend(a_.qp, fa), 0);
  Completion c = One(a_);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kFetchAdd);
  EXPECT_EQ(c.byte_len, 8u);
  uint64_t got;
  std::memcpy(&got, a_.buf.data(), 8);
  EXPECT_EQ(got, v);
  std::memcpy(&got, b_.buf.data() + 128, 8);
  EXPECT_EQ(got, 2u);
}

// ATOMIC WRITE (IBA 1.5): one naturally aligned word stored whole, its 8
// bytes given at post time, acknowledged like a WRITE. Over shared memory
// a word in its region's whole shared pages is stored directly, and one in
// a page the region covers only in part goes as an RC_ATOMIC_WRITE packet
// through the ring; over UDP (the .udp run) both are packets. The partial
// page is the first page of a second region starting 100 bytes into the
// buffer, so that it is partial whatever the allocator's alignment (TSan's
// returns page-aligned buffers).
TEST_F(OpcodeTest, AtomicWriteStoresOneWordAndCompletesAsAtomicWrite) {
  Open({});
  Mr* inner = nullptr;
  ASSERT_EQ(b_.dev->RegMr(b_.pd, b_.buf.data() + 100, 64 << 10,
                          reinterpret_cast<uint64_t>(b_.buf.data() + 100),
                          kLocalWrite | kRemoteWrite, nullptr, &inner),
            0);
  const uint64_t words[2] = {0x0123456789ABCDEFull, 0xFEDCBA9876543210ull};
  const size_t at[2] = {104, 256 * 1024};  // inner's partial first page; whole shared pages
  const uint32_t rkeys[2] = {b_.dev->MrRkey(inner), RkeyB()};
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(at[i]);
    const EngineStats before = StatsOf(*a_.dev);
    SendWr w = MakeWr(WrOpcode::kAtomicWrite, 20 + i, {}, Addr(b_, at[i]), rkeys[i]);
    w.compare_add = words[i];
    ASSERT_EQ(a_.dev->PostSend(a_.qp, w), 0);
    Completion c = One(a_);
    EXPECT_EQ(c.status, WcStatus::kSuccess);
    EXPECT_EQ(c.opcode, WcOpcode::kAtomicWrite);
    EXPECT_EQ(c.wr_id, uint64_t(20 + i));
    uint64_t got;
    std::memcpy(&got, b_.buf.data() + at[i], 8);
    EXPECT_EQ(got, words[i]);
    EXPECT_TRUE(AllBytes(b_.buf.data() + at[i] - 8, 8, 0));
    EXPECT_TRUE(AllBytes(b_.buf.data() + at[i] + 8, 8, 0));
    const EngineStats after = StatsOf(*a_.dev);
    // The partial page's word went as a packet (at least one: a loaded
    // machine may retransmit it), the whole page's directly when there is
    // a direct path.
    if (i == 0) {
      EXPECT_GE(after.tx_packets - before.tx_packets, 1u);
      EXPECT_EQ(after.shm_direct_ops, before.shm_direct_ops);
    } else if (a_.dev->engine().shm_direct() != nullptr) {
      EXPECT_EQ(after.shm_direct_ops - before.shm_direct_ops, 1u);
    }
  }
}

// The operand rule at post (IBA 9.4.5, as for the other atomics): an
// aligned remote word and no SGEs (the word is in the WR); not on UC.
TEST_F(OpcodeTest, AtomicWriteNeedsAnAlignedWordAndNoSges) {
  Open({});
  SendWr w = MakeWr(WrOpcode::kAtomicWrite, 1, {}, Addr(b_, 68), RkeyB());
  EXPECT_EQ(a_.dev->PostSend(a_.qp, w), EINVAL);
  Sge s = SgeOf(a_, 0, 8);
  w = MakeWr(WrOpcode::kAtomicWrite, 2, {&s, 1}, Addr(b_, 64), RkeyB());
  EXPECT_EQ(a_.dev->PostSend(a_.qp, w), EINVAL);
  EXPECT_TRUE(PollN(a_, 1, std::chrono::milliseconds(50)).empty());
}

// The target's region must grant remote write (IBA 10.6.7): a region with
// remote read only answers NAK Remote Access Error and keeps its bytes.
TEST_F(OpcodeTest, AtomicWriteIntoARegionWithoutRemoteWriteIsAnAccessError) {
  Open({});
  Mr* ro = nullptr;
  ASSERT_EQ(b_.dev->RegMr(b_.pd, b_.buf.data() + (512 << 10), 64 << 10,
                          reinterpret_cast<uint64_t>(b_.buf.data() + (512 << 10)),
                          kLocalWrite | kRemoteRead, nullptr, &ro),
            0);
  SendWr w = MakeWr(WrOpcode::kAtomicWrite, 3, {}, Addr(b_, (512 << 10) + 64), b_.dev->MrRkey(ro));
  w.compare_add = ~uint64_t{0};
  ASSERT_EQ(a_.dev->PostSend(a_.qp, w), 0);
  Completion c = One(a_);
  EXPECT_EQ(c.status, WcStatus::kRemAccessErr);
  EXPECT_TRUE(AllBytes(b_.buf.data() + (512 << 10) + 64, 8, 0));
}

TEST_F(OpcodeTest, InlineSendAndWriteBufferReusedAtOnce) {
  Open({});
  uint8_t scratch[60];
  for (int i = 0; i < 60; ++i) scratch[i] = static_cast<uint8_t>(i * 7 + 1);
  uint8_t expect[60];
  std::memcpy(expect, scratch, 60);
  // Two SGEs, lkey 0: inline data is not checked against any MR.
  Sge ss[2] = {{reinterpret_cast<uint64_t>(scratch), 25, 0},
               {reinterpret_cast<uint64_t>(scratch + 25), 35, 0}};
  Sge rs = SgeOf(b_, 0, 256);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{1, {&rs, 1}}), 0);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 1, {ss, 2}, 0, 0, kSignaled | kInline)), 0);
  std::memset(scratch, 0xCD, sizeof(scratch));  // reuse the buffer right away
  EXPECT_EQ(One(a_).status, WcStatus::kSuccess);
  Completion rc = One(b_);
  EXPECT_EQ(rc.status, WcStatus::kSuccess);
  EXPECT_EQ(rc.byte_len, 60u);
  EXPECT_EQ(FirstDiff(b_.buf.data(), expect, 60), -1);

  for (int i = 0; i < 60; ++i) scratch[i] = static_cast<uint8_t>(i * 13 + 5);
  std::memcpy(expect, scratch, 60);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 2, {ss, 2}, Addr(b_, 1000),
                                           b_.dev->MrRkey(b_.mr), kSignaled | kInline)),
            0);
  std::memset(scratch, 0xAB, sizeof(scratch));
  EXPECT_EQ(One(a_).status, WcStatus::kSuccess);
  EXPECT_EQ(FirstDiff(b_.buf.data() + 1000, expect, 60), -1);

  // An empty SGE with a null address (UCX's am_short posts one) adds nothing.
  for (int i = 0; i < 60; ++i) scratch[i] = static_cast<uint8_t>(i * 3 + 2);
  std::memcpy(expect, scratch, 60);
  Sge with_empty[2] = {{0, 0, 0}, {reinterpret_cast<uint64_t>(scratch), 60, 0}};
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{4, {&rs, 1}}), 0);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 4, {with_empty, 2}, 0, 0,
                                           kSignaled | kInline)),
            0);
  EXPECT_EQ(One(a_).status, WcStatus::kSuccess);
  rc = One(b_);
  EXPECT_EQ(rc.status, WcStatus::kSuccess);
  EXPECT_EQ(rc.byte_len, 60u);
  EXPECT_EQ(FirstDiff(b_.buf.data(), expect, 60), -1);

  // Longer than max_inline_data is refused at post time.
  uint8_t big[65] = {};
  Sge bs = {reinterpret_cast<uint64_t>(big), 65, 0};
  EXPECT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 3, {&bs, 1}, 0, 0, kSignaled | kInline)),
            EINVAL);
}

TEST_F(OpcodeTest, UnsignaledWrsMakeNoCompletions) {
  QpOptions o;
  o.max_wr = 8;  // more WRs than slots: unsignaled ones must still retire
  Open(o);
  const int n = 40;
  for (int i = 0; i < n; ++i) FillPattern(a_.buf, i * 512, 512, 100 + i);
  std::vector<uint64_t> expect_ids;
  int posted = 0;
  std::vector<Completion> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (posted < n && std::chrono::steady_clock::now() < deadline) {
    Sge s = SgeOf(a_, posted * 512, 512);
    const bool signaled = posted % 3 == 2;
    const int r = a_.dev->PostSend(
        a_.qp, MakeWr(WrOpcode::kRdmaWrite, 1000 + posted, {&s, 1}, Addr(b_, posted * 512),
                      b_.dev->MrRkey(b_.mr), signaled ? uint32_t{kSignaled} : 0u));
    if (r == ENOMEM) {
      Completion wc[8];
      const int k = a_.dev->PollCq(a_.cq, 8, wc);
      for (int i = 0; i < k; ++i) got.push_back(wc[i]);
      continue;
    }
    ASSERT_EQ(r, 0);
    if (signaled) expect_ids.push_back(1000 + posted);
    ++posted;
  }
  ASSERT_EQ(posted, n);
  // The last WR is signaled so that everything before it is known done.
  Sge s = SgeOf(a_, 0, 0);
  SendWr last = MakeWr(WrOpcode::kRdmaWrite, 9999, {&s, 1}, Addr(b_, 0), b_.dev->MrRkey(b_.mr));
  while (a_.dev->PostSend(a_.qp, last) == ENOMEM) {
    Completion wc[8];
    const int k = a_.dev->PollCq(a_.cq, 8, wc);
    for (int i = 0; i < k; ++i) got.push_back(wc[i]);
  }
  expect_ids.push_back(9999);
  auto rest = PollN(a_, expect_ids.size() - got.size());
  got.insert(got.end(), rest.begin(), rest.end());
  auto extra = PollFor(a_, std::chrono::milliseconds(50));
  got.insert(got.end(), extra.begin(), extra.end());
  ASSERT_EQ(got.size(), expect_ids.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].wr_id, expect_ids[i]) << i;
    EXPECT_EQ(got[i].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(FirstDiff(a_.buf.data(), b_.buf.data(), n * 512), -1);
}

// ---- UC ----

TEST_F(OpcodeTest, UcSendWriteAndImm) {
  QpOptions o;
  o.type = QpType::kUc;
  Open(o);
  const uint32_t len = 5000;
  FillPattern(a_.buf, 0, len, 40);
  FillPattern(a_.buf, 10000, len, 41);
  Sge r1 = SgeOf(b_, 0, 8192), r2 = SgeOf(b_, 8192, 8192);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{1, {&r1, 1}}), 0);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{2, {&r2, 1}}), 0);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{3, {}}), 0);
  Sge s1 = SgeOf(a_, 0, len), s2 = SgeOf(a_, 10000, len);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 10, {&s1, 1})), 0);
  SendWr si = MakeWr(WrOpcode::kSendWithImm, 11, {&s2, 1});
  si.imm_data = htonl(77);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, si), 0);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 12, {&s1, 1}, Addr(b_, 100000),
                                           b_.dev->MrRkey(b_.mr))),
            0);
  SendWr wi = MakeWr(WrOpcode::kRdmaWriteWithImm, 13, {&s2, 1}, Addr(b_, 200000), b_.dev->MrRkey(b_.mr));
  wi.imm_data = htonl(78);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, wi), 0);
  auto sc = PollN(a_, 4);
  ASSERT_EQ(sc.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(sc[i].wr_id, 10u + i);
    EXPECT_EQ(sc[i].status, WcStatus::kSuccess);
  }
  auto rc = PollN(b_, 3);
  ASSERT_EQ(rc.size(), 3u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].byte_len, len);
  EXPECT_EQ(rc[1].wr_id, 2u);
  EXPECT_TRUE(rc[1].wc_flags & kWcWithImm);
  EXPECT_EQ(rc[1].imm_data, htonl(77));
  EXPECT_EQ(rc[2].wr_id, 3u);
  EXPECT_EQ(rc[2].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rc[2].byte_len, len);
  EXPECT_EQ(rc[2].imm_data, htonl(78));
  EXPECT_EQ(FirstDiff(b_.buf.data(), a_.buf.data(), len), -1);
  EXPECT_EQ(FirstDiff(b_.buf.data() + 8192, a_.buf.data() + 10000, len), -1);
  EXPECT_EQ(FirstDiff(b_.buf.data() + 100000, a_.buf.data(), len), -1);
  EXPECT_EQ(FirstDiff(b_.buf.data() + 200000, a_.buf.data() + 10000, len), -1);
  // UC has no READ or atomics.
  Sge s = SgeOf(a_, 0, 8);
  EXPECT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaRead, 1, {&s, 1}, Addr(b_, 0), 1)), EINVAL);
  EXPECT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kAtomicFetchAdd, 1, {&s, 1}, Addr(b_, 0), 1)),
            EINVAL);
}

// ---- UD ----

class UdTest : public RcPairTest {
 protected:
  void SetUp() override {
    QpOptions o;
    o.type = QpType::kUd;
    Open(o);
    AddressVector av;
    av.is_global = true;
    av.dgid = b_.dev->gids()[0];
    ASSERT_EQ(a_.dev->CreateAh(a_.pd, av, nullptr, &ah_), 0);
  }
  SendWr Ud(WrOpcode op, uint64_t id, const Sge* s, uint32_t qkey) {
    SendWr wr = MakeWr(op, id, {s, 1});
    wr.ah = ah_;
    wr.remote_qpn = b_.dev->QpNum(b_.qp);
    wr.remote_qkey = qkey;
    return wr;
  }
  Ah* ah_ = nullptr;
};

TEST_F(UdTest, SendDeliversGrhSrcQpAndData) {
  const uint32_t len = 700;
  FillPattern(a_.buf, 0, len, 50);
  std::memset(b_.buf.data(), kGuard, 4096);
  Sge rs = SgeOf(b_, 0, 40 + 1024);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{5, {&rs, 1}}), 0);
  Sge ss = SgeOf(a_, 0, len);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, Ud(WrOpcode::kSend, 6, &ss, 0x11111111)), 0);
  auto sc = PollN(a_, 1);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  auto rc = PollN(b_, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].wr_id, 5u);
  EXPECT_EQ(rc[0].byte_len, 40 + len);
  EXPECT_TRUE(rc[0].wc_flags & kWcGrh);
  EXPECT_FALSE(rc[0].wc_flags & kWcWithImm);
  EXPECT_EQ(rc[0].src_qp, a_.dev->QpNum(a_.qp));
  // The SL bits name the header type in the GRH area, as mlx5 reports it
  // (UCX ud_verbs reads the 4-byte IPv4 destination only when sl says IPv4).
  EXPECT_EQ(rc[0].sl, static_cast<uint8_t>(RoceL3Type::kIpv4));
  // IPv4 source: the IPv4 header sits in the last 20 bytes of the GRH area.
  const uint8_t* ip = b_.buf.data() + 20;
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(ip[9], 17);
  EXPECT_EQ(std::memcmp(ip + 12, &a_.dev->gids()[0].raw[12], 4), 0);
  EXPECT_EQ(std::memcmp(ip + 16, &b_.dev->gids()[0].raw[12], 4), 0);
  EXPECT_EQ(FirstDiff(b_.buf.data() + 40, a_.buf.data(), len), -1);
  EXPECT_TRUE(AllBytes(b_.buf.data() + 40 + len, 4096 - 40 - len, kGuard));
}

// IPv6 (issue 15): a device on ::1 sends from one UD QP to another of its
// own through the UDP socket (every device of a process has one port, so a
// second device could not share ::1). The receive holds the 40-byte IPv6
// header in the GRH area and wc.sl says IPv6 (1), as mlx5 reports it.
TEST(UdIpv6, SendDeliversTheIpv6HeaderInTheGrhAreaAndSl1) {
  const int fd = socket(AF_INET6, SOCK_DGRAM, 0);
  sockaddr_in6 lo6{};
  lo6.sin6_family = AF_INET6;
  lo6.sin6_addr = in6addr_loopback;
  const bool usable = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&lo6), sizeof lo6) == 0;
  if (fd >= 0) close(fd);
  if (!usable) GTEST_SKIP() << "::1 cannot be bound here (IPv6 disabled?)";
  EngineConfig config = TestConfig(0);
  config.udp.bind_addresses = {"::1"};
  config.udp.port = static_cast<uint16_t>(TestPort() + 20000);
  auto dev = MakeDevice(config);
  ASSERT_NE(dev, nullptr);
  ASSERT_FALSE(dev->gids()[0].IsV4Mapped());
  QpOptions o;
  o.type = QpType::kUd;
  Side a, b;
  SetupSide(a, dev, o);
  SetupSide(b, dev, o);
  Connect(a, b, o);
  Connect(b, a, o);
  AddressVector av;
  av.is_global = true;
  av.dgid = dev->gids()[0];
  Ah* ah = nullptr;
  ASSERT_EQ(dev->CreateAh(a.pd, av, nullptr, &ah), 0);
  const uint32_t len = 300;
  FillPattern(a.buf, 0, len, 52);
  Sge rs = SgeOf(b, 0, 40 + 1024);
  ASSERT_EQ(dev->PostRecv(b.qp, RecvWr{5, {&rs, 1}}), 0);
  Sge ss = SgeOf(a, 0, len);
  SendWr wr = MakeWr(WrOpcode::kSend, 6, {&ss, 1});
  wr.ah = ah;
  wr.remote_qpn = dev->QpNum(b.qp);
  wr.remote_qkey = 0x11111111;
  ASSERT_EQ(dev->PostSend(a.qp, wr), 0);
  auto rc = PollN(b, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].byte_len, 40 + len);
  EXPECT_TRUE(rc[0].wc_flags & kWcGrh);
  EXPECT_EQ(rc[0].sl, static_cast<uint8_t>(RoceL3Type::kIpv6));
  const uint8_t* ip = b.buf.data();
  EXPECT_EQ(ip[0] >> 4, 6);
  EXPECT_EQ(ip[6], 17);  // next header: UDP
  EXPECT_EQ(std::memcmp(ip + 8, dev->gids()[0].raw.data(), 16), 0);
  EXPECT_EQ(std::memcmp(ip + 24, dev->gids()[0].raw.data(), 16), 0);
  EXPECT_EQ(FirstDiff(b.buf.data() + 40, a.buf.data(), len), -1);
  EXPECT_EQ(dev->DestroyAh(ah), 0);
}

TEST_F(UdTest, SendWithImm) {
  FillPattern(a_.buf, 0, 100, 51);
  Sge rs = SgeOf(b_, 0, 1064);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{1, {&rs, 1}}), 0);
  Sge ss = SgeOf(a_, 0, 100);
  SendWr wr = Ud(WrOpcode::kSendWithImm, 2, &ss, 0x11111111);
  wr.imm_data = htonl(0xCAFE);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
  auto rc = PollN(b_, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].wc_flags & (kWcGrh | kWcWithImm), uint32_t{kWcGrh | kWcWithImm});
  EXPECT_EQ(rc[0].imm_data, htonl(0xCAFE));
  EXPECT_EQ(rc[0].byte_len, 140u);
  EXPECT_EQ(FirstDiff(b_.buf.data() + 40, a_.buf.data(), 100), -1);
}

TEST_F(UdTest, QkeyMismatchDroppedAndHighBitUsesQpQkey) {
  FillPattern(a_.buf, 0, 64, 52);
  std::memset(b_.buf.data(), kGuard, 2048);
  Sge rs = SgeOf(b_, 0, 1064);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{1, {&rs, 1}}), 0);
  Sge ss = SgeOf(a_, 0, 64);
  const uint64_t dropped0 = StatsOf(*b_.dev).rx_dropped_qkey;
  ASSERT_EQ(a_.dev->PostSend(a_.qp, Ud(WrOpcode::kSend, 1, &ss, 0x22222222)), 0);
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).rx_dropped_qkey == dropped0 + 1; }));
  EXPECT_TRUE(PollFor(b_, std::chrono::milliseconds(50)).empty());
  EXPECT_TRUE(AllBytes(b_.buf.data(), 2048, kGuard));
  // 0x80000000: "use my QP's Q_Key" (0x11111111, which b also has).
  ASSERT_EQ(a_.dev->PostSend(a_.qp, Ud(WrOpcode::kSend, 2, &ss, 0x80000000u)), 0);
  auto rc = PollN(b_, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(FirstDiff(b_.buf.data() + 40, a_.buf.data(), 64), -1);
  auto sc = PollN(a_, 2);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].wr_id, 1u);
  EXPECT_EQ(sc[1].wr_id, 2u);
}

TEST_F(UdTest, OversizeAndWrongOpcodesRefused) {
  // One byte more than the port's active MTU (UD messages are one packet;
  // 4096 for these loopback devices, port_mtu.h).
  const uint32_t mtu = MtuBytes(a_.dev->attr().active_mtu);
  ASSERT_GE(a_.buf.size(), mtu + 1u);
  Sge ss = SgeOf(a_, 0, mtu + 1);
  EXPECT_EQ(a_.dev->PostSend(a_.qp, Ud(WrOpcode::kSend, 1, &ss, 0x11111111)), EINVAL);
  Sge s8 = SgeOf(a_, 0, 8);
  EXPECT_EQ(a_.dev->PostSend(a_.qp, Ud(WrOpcode::kRdmaWrite, 1, &s8, 0x11111111)), EINVAL);
  EXPECT_EQ(a_.dev->PostSend(a_.qp, Ud(WrOpcode::kRdmaRead, 1, &s8, 0x11111111)), EINVAL);
  SendWr no_ah = Ud(WrOpcode::kSend, 1, &s8, 0x11111111);
  no_ah.ah = nullptr;
  EXPECT_EQ(a_.dev->PostSend(a_.qp, no_ah), EINVAL);
}

TEST_F(UdTest, ReceiveTooSmallForGrhPlusPayloadIsLengthError) {
  Sge rs = SgeOf(b_, 0, 40 + 50);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{9, {&rs, 1}}), 0);
  Sge ss = SgeOf(a_, 0, 100);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, Ud(WrOpcode::kSend, 1, &ss, 0x11111111)), 0);
  auto rc = PollN(b_, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 9u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocLenErr);
}

}  // namespace
}  // namespace softrnic::engine::testing
