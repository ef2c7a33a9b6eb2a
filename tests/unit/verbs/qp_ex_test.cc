// The ibv_qp_ex wr_* posting API (qp_ex.cc, ibv_wr_post(3)): each wr_*
// builder reaches the engine as the right SendWr at wr_complete, in order,
// with the wr_id/wr_flags of the moment it was begun; inline data is copied
// when set; errors met while building fail the batch at wr_complete.
#include <string>

#include "verbs_fixture.h"

namespace softrnic::verbs_test {
namespace {

using eng::WrOpcode;

constexpr uint64_t kAllOps =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV;

class QpExTest : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    qp_ = CreateQpEx(IBV_QPT_RC, kAllOps);
    ASSERT_NE(qp_, nullptr);
    x_ = ibv_qp_to_qp_ex(qp_);
    ASSERT_NE(x_, nullptr);
  }
  void TearDown() override {
    if (qp_) {
      EXPECT_EQ(ibv_destroy_qp(qp_), 0);
    }
    VerbsTest::TearDown();
  }
  std::string InlineOf(const PostedSend& p) {
    return std::string(p.inline_bytes.begin(), p.inline_bytes.end());
  }

  ibv_qp* qp_ = nullptr;
  ibv_qp_ex* x_ = nullptr;
};

TEST_F(QpExTest, EveryBuilderReachesTheEngineAtComplete) {
  ibv_wr_start(x_);
  x_->wr_id = 1;
  x_->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x_, 0xaa01, 0x7000100);
  ibv_wr_set_sge(x_, 0x11, 0x1000, 16);
  x_->wr_id = 2;
  x_->wr_flags = 0;
  ibv_wr_rdma_write_imm(x_, 0xaa02, 0x7000200, htonl(0x01020304));
  ibv_wr_set_sge(x_, 0x12, 0x2000, 32);
  x_->wr_id = 3;
  ibv_wr_send(x_);
  const ibv_sge two[2] = {Sge(0x3000, 1, 0x13), Sge(0x3100, 2, 0x14)};
  ibv_wr_set_sge_list(x_, 2, two);
  x_->wr_id = 4;
  ibv_wr_send_imm(x_, htonl(0xdeadbeef));
  x_->wr_id = 5;
  ibv_wr_rdma_read(x_, 0xaa05, 0x7000500);
  ibv_wr_set_sge(x_, 0x15, 0x5000, 64);
  x_->wr_id = 6;
  x_->wr_flags = IBV_SEND_FENCE;
  ibv_wr_atomic_cmp_swp(x_, 0xaa06, 0x7000608, 0x1111, 0x2222);
  ibv_wr_set_sge(x_, 0x16, 0x6000, 8);
  x_->wr_id = 7;
  ibv_wr_atomic_fetch_add(x_, 0xaa07, 0x7000708, 5);
  ibv_wr_set_sge(x_, 0x17, 0x7000, 8);
  x_->wr_id = 8;
  ibv_wr_send_inv(x_, 0xbb08);
  x_->wr_id = 9;
  ibv_wr_local_inv(x_, 0xbb09);
  EXPECT_EQ(fake().CallCount("PostSend"), 0);  // nothing before wr_complete
  ASSERT_EQ(ibv_wr_complete(x_), 0);

  const auto& s = Sends(qp_);
  ASSERT_EQ(s.size(), 9u);
  const WrOpcode want[9] = {WrOpcode::kRdmaWrite,     WrOpcode::kRdmaWriteWithImm,
                            WrOpcode::kSend,          WrOpcode::kSendWithImm,
                            WrOpcode::kRdmaRead,      WrOpcode::kAtomicCmpSwp,
                            WrOpcode::kAtomicFetchAdd, WrOpcode::kSendWithInv,
                            WrOpcode::kLocalInv};
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(s[i].wr.opcode, want[i]) << i;
    EXPECT_EQ(s[i].wr.wr_id, uint64_t(i + 1)) << i;
  }
  EXPECT_EQ(s[0].wr.send_flags, uint32_t(IBV_SEND_SIGNALED));
  EXPECT_EQ(s[1].wr.send_flags, 0u);
  EXPECT_EQ(s[5].wr.send_flags, uint32_t(IBV_SEND_FENCE));
  EXPECT_EQ(s[0].wr.rkey, 0xaa01u);
  EXPECT_EQ(s[0].wr.remote_addr, 0x7000100u);
  ASSERT_EQ(s[0].sges.size(), 1u);
  EXPECT_EQ(s[0].sges[0].addr, 0x1000u);
  EXPECT_EQ(s[0].sges[0].length, 16u);
  EXPECT_EQ(s[0].sges[0].lkey, 0x11u);
  EXPECT_EQ(s[1].wr.imm_data, htonl(0x01020304));
  EXPECT_EQ(s[1].wr.rkey, 0xaa02u);
  ASSERT_EQ(s[2].sges.size(), 2u);
  EXPECT_EQ(s[2].sges[1].addr, 0x3100u);
  EXPECT_EQ(s[2].sges[1].lkey, 0x14u);
  EXPECT_EQ(s[3].wr.imm_data, htonl(0xdeadbeef));
  EXPECT_TRUE(s[3].sges.empty());
  EXPECT_EQ(s[4].wr.remote_addr, 0x7000500u);
  EXPECT_EQ(s[4].wr.rkey, 0xaa05u);
  EXPECT_EQ(s[5].wr.compare_add, 0x1111u);
  EXPECT_EQ(s[5].wr.swap, 0x2222u);
  EXPECT_EQ(s[5].wr.remote_addr, 0x7000608u);
  EXPECT_EQ(s[6].wr.compare_add, 5u);
  EXPECT_EQ(s[6].wr.rkey, 0xaa07u);
  // As ibv_send_wr's union: the rkey to invalidate travels in imm_data.
  EXPECT_EQ(s[7].wr.imm_data, 0xbb08u);
  EXPECT_EQ(s[8].wr.imm_data, 0xbb09u);
}

// Inline data is copied when set (ibv_wr_set_inline_data(3): the buffer may
// be reused at once), and a list is concatenated.
TEST_F(QpExTest, InlineDataIsCopiedWhenSet) {
  char buf[] = "first";
  char a[] = "ab", b[] = "cde";
  ibv_wr_start(x_);
  ibv_wr_send(x_);
  ibv_wr_set_inline_data(x_, buf, 5);
  std::memcpy(buf, "XXXXX", 5);  // reused before wr_complete
  ibv_wr_rdma_write(x_, 1, 0x100);
  const ibv_data_buf list[2] = {{a, 2}, {b, 3}};
  ibv_wr_set_inline_data_list(x_, 2, list);
  a[0] = b[0] = 'Z';
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  const auto& s = Sends(qp_);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(InlineOf(s[0]), "first");
  EXPECT_EQ(InlineOf(s[1]), "abcde");
  EXPECT_TRUE(s[0].wr.send_flags & IBV_SEND_INLINE);
  EXPECT_TRUE(s[1].wr.send_flags & IBV_SEND_INLINE);
  ASSERT_EQ(s[1].sges.size(), 1u);
  EXPECT_EQ(s[1].sges[0].length, 5u);
}

// A later set_* on the same WR replaces the earlier one, and one WR's SGEs
// never leak into the next.
TEST_F(QpExTest, LaterSetterReplacesTheEarlierOne) {
  char data[] = "inline";
  ibv_wr_start(x_);
  ibv_wr_send(x_);
  ibv_wr_set_sge(x_, 1, 0x1000, 10);
  ibv_wr_set_sge(x_, 2, 0x2000, 20);
  ibv_wr_send(x_);
  ibv_wr_set_inline_data(x_, data, 6);
  ibv_wr_set_sge(x_, 3, 0x3000, 30);  // inline replaced by an SGE
  ibv_wr_send(x_);
  const ibv_sge three[3] = {Sge(0x4000, 1, 4), Sge(0x5000, 2, 5), Sge(0x6000, 3, 6)};
  ibv_wr_set_sge_list(x_, 3, three);
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  const auto& s = Sends(qp_);
  ASSERT_EQ(s.size(), 3u);
  ASSERT_EQ(s[0].sges.size(), 1u);
  EXPECT_EQ(s[0].sges[0].addr, 0x2000u);
  ASSERT_EQ(s[1].sges.size(), 1u);
  EXPECT_EQ(s[1].sges[0].addr, 0x3000u);
  EXPECT_FALSE(s[1].wr.send_flags & IBV_SEND_INLINE);
  ASSERT_EQ(s[2].sges.size(), 3u);
  EXPECT_EQ(s[2].sges[0].addr, 0x4000u);
  EXPECT_EQ(s[2].sges[2].lkey, 6u);
}

TEST_F(QpExTest, BuildErrorsFailTheWholeBatchAtComplete) {
  // A setter with no WR begun.
  ibv_wr_start(x_);
  ibv_wr_set_sge(x_, 1, 0x1000, 1);
  ibv_wr_send(x_);
  EXPECT_EQ(ibv_wr_complete(x_), EINVAL);
  // A bind without a window: EINVAL for the whole batch.
  ibv_wr_start(x_);
  ibv_wr_send(x_);
  ibv_wr_bind_mw(x_, nullptr, 0, nullptr);
  EXPECT_EQ(ibv_wr_complete(x_), EINVAL);
  // Operations softrnic does not have.
  ibv_wr_start(x_);
  ibv_wr_send(x_);
  x_->wr_send_tso(x_, nullptr, 0, 0);
  EXPECT_EQ(ibv_wr_complete(x_), EOPNOTSUPP);
  EXPECT_EQ(fake().CallCount("PostSend"), 0);
  EXPECT_TRUE(Sends(qp_).empty());
  // The next batch starts clean.
  ibv_wr_start(x_);
  ibv_wr_send(x_);
  EXPECT_EQ(ibv_wr_complete(x_), 0);
  EXPECT_EQ(Sends(qp_).size(), 1u);
}

// ATOMIC WRITE (IBA 1.5): its 8 bytes are taken at the call (no SGE), as
// rxe's provider copies them into its WQE; a null operand fails the batch.
TEST_F(QpExTest, AtomicWriteTakesItsWordAtTheCall) {
  ibv_wr_start(x_);
  x_->wr_id = 9;
  x_->wr_flags = IBV_SEND_SIGNALED;
  uint64_t v = 0x0102030405060708ull;
  ibv_wr_atomic_write(x_, 0xaa09, 0x7000900, &v);
  v = 0;  // the caller may reuse it at once
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  const auto& s = Sends(qp_);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr.opcode, WrOpcode::kAtomicWrite);
  EXPECT_EQ(s[0].wr.wr_id, 9u);
  EXPECT_EQ(s[0].wr.rkey, 0xaa09u);
  EXPECT_EQ(s[0].wr.remote_addr, 0x7000900u);
  EXPECT_EQ(s[0].wr.compare_add, 0x0102030405060708ull);
  EXPECT_TRUE(s[0].sges.empty());

  ibv_wr_start(x_);
  ibv_wr_atomic_write(x_, 0xaa09, 0x7000900, nullptr);
  EXPECT_EQ(ibv_wr_complete(x_), EINVAL);
  EXPECT_EQ(Sends(qp_).size(), 1u);
}

TEST_F(QpExTest, AbortDropsTheBatch) {
  ibv_wr_start(x_);
  x_->wr_id = 1;
  ibv_wr_send(x_);
  ibv_wr_abort(x_);
  EXPECT_EQ(fake().CallCount("PostSend"), 0);
  ibv_wr_start(x_);
  x_->wr_id = 2;
  ibv_wr_send(x_);
  ASSERT_EQ(ibv_wr_complete(x_), 0);
  ASSERT_EQ(Sends(qp_).size(), 1u);
  EXPECT_EQ(Sends(qp_)[0].wr.wr_id, 2u);
}

// The engine refusing one WR stops the batch there: those before it are
// posted, none after it is tried, and the errno is wr_complete's.
TEST_F(QpExTest, EngineErrorStopsTheBatch) {
  fake().FailCall("PostSend", ENOMEM, /*skip=*/1);
  ibv_wr_start(x_);
  for (uint64_t i = 0; i < 4; ++i) {
    x_->wr_id = i;
    ibv_wr_send(x_);
  }
  EXPECT_EQ(ibv_wr_complete(x_), ENOMEM);
  ASSERT_EQ(Sends(qp_).size(), 1u);
  EXPECT_EQ(Sends(qp_)[0].wr.wr_id, 0u);
  EXPECT_EQ(fake().CallCount("PostSend"), 2);
}

TEST_F(QpExTest, UdAddressOfTheLastWr) {
  ibv_qp* ud = CreateQpEx(IBV_QPT_UD, IBV_QP_EX_WITH_SEND);
  ASSERT_NE(ud, nullptr);
  ibv_qp_ex* x = ibv_qp_to_qp_ex(ud);
  ASSERT_NE(x, nullptr);
  ibv_ah* ah = CreateAh();
  ASSERT_NE(ah, nullptr);
  ibv_wr_start(x);
  ibv_wr_send(x);
  ibv_wr_set_ud_addr(x, ah, 0x123456, 0x80010000);
  ibv_wr_set_sge(x, 1, 0x1000, 8);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  ASSERT_EQ(Sends(ud).size(), 1u);
  EXPECT_EQ(Sends(ud)[0].wr.ah, fake().AhOf(ah));
  EXPECT_EQ(Sends(ud)[0].wr.remote_qpn, 0x123456u);
  EXPECT_EQ(Sends(ud)[0].wr.remote_qkey, 0x80010000u);

  ibv_wr_start(x);
  ibv_wr_send(x);
  ibv_wr_set_ud_addr(x, nullptr, 1, 1);
  EXPECT_EQ(ibv_wr_complete(x), EINVAL);
  EXPECT_EQ(Sends(ud).size(), 1u);
  EXPECT_EQ(ibv_destroy_qp(ud), 0);
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
}

}  // namespace
}  // namespace softrnic::verbs_test
