#include <cstring>

#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

TEST_F(RcPairTest, SendReceivesExactBytes) {
  Open({});
  const uint32_t len = 5000;
  FillPattern(a_.buf, 0, len, 1);
  Sge rsge = SgeOf(b_, 0, len);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{7, {&rsge, 1}}), 0);
  Sge sge = SgeOf(a_, 0, len);
  SendWr wr;
  wr.wr_id = 9;
  wr.opcode = WrOpcode::kSend;
  wr.send_flags = kSignaled;
  wr.sges = {&sge, 1};
  ASSERT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
  auto sc = PollN(a_, 1);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[0].wr_id, 9u);
  auto rc = PollN(b_, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].byte_len, len);
  EXPECT_EQ(std::memcmp(a_.buf.data(), b_.buf.data(), len), 0);
}

TEST_F(RcPairTest, WriteReadAtomic) {
  Open({});
  const uint32_t len = 70000;
  FillPattern(a_.buf, 0, len, 2);
  Sge sge = SgeOf(a_, 0, len);
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.send_flags = kSignaled;
  wr.sges = {&sge, 1};
  wr.remote_addr = Addr(b_, 100);
  wr.rkey = b_.dev->MrRkey(b_.mr);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a_.buf.data(), b_.buf.data() + 100, len), 0);

  // READ it back into another place.
  Sge rsge = SgeOf(a_, 200000, len);
  SendWr rd;
  rd.opcode = WrOpcode::kRdmaRead;
  rd.send_flags = kSignaled;
  rd.sges = {&rsge, 1};
  rd.remote_addr = Addr(b_, 100);
  rd.rkey = b_.dev->MrRkey(b_.mr);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, rd), 0);
  c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(std::memcmp(a_.buf.data(), a_.buf.data() + 200000, len), 0);

  // FETCH_ADD then CMP_SWAP on an 8-byte word.
  uint64_t init = 40;
  std::memcpy(b_.buf.data() + 8192, &init, 8);
  Sge asge = SgeOf(a_, 300000, 8);
  SendWr fa;
  fa.opcode = WrOpcode::kAtomicFetchAdd;
  fa.send_flags = kSignaled;
  fa.sges = {&asge, 1};
  fa.remote_addr = Addr(b_, 8192);
  fa.rkey = b_.dev->MrRkey(b_.mr);
  fa.compare_add = 2;
  ASSERT_EQ(a_.dev->PostSend(a_.qp, fa), 0);
  c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  uint64_t got;
  std::memcpy(&got, a_.buf.data() + 300000, 8);
  EXPECT_EQ(got, 40u);
  std::memcpy(&got, b_.buf.data() + 8192, 8);
  EXPECT_EQ(got, 42u);
  SendWr cs = fa;
  cs.opcode = WrOpcode::kAtomicCmpSwp;
  cs.compare_add = 42;
  cs.swap = 7;
  ASSERT_EQ(a_.dev->PostSend(a_.qp, cs), 0);
  c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  std::memcpy(&got, a_.buf.data() + 300000, 8);
  EXPECT_EQ(got, 42u);
  std::memcpy(&got, b_.buf.data() + 8192, 8);
  EXPECT_EQ(got, 7u);
}

}  // namespace
}  // namespace softrnic::engine::testing
