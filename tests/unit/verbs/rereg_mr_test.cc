// ibv_rereg_mr (pd_mr.cc): rdma-core's argument checks and return codes
// (ibv_rereg_mr(3): IBV_REREG_MR_ERR_INPUT leaves the old MR valid), what
// the engine is asked to change, and the ibv_mr fields updated after it.
#include "verbs_fixture.h"

namespace softrnic::verbs_test {
namespace {

class ReregMrTest : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    mr_ = ibv_reg_mr(pd_, buf_, 256, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(mr_, nullptr);
  }
  void TearDown() override {
    if (mr_) {
      EXPECT_EQ(ibv_dereg_mr(mr_), 0);
    }
    VerbsTest::TearDown();
  }
  // ibv_rereg_mr's return value and errno (0 if it succeeded).
  std::pair<int, int> Rereg(int flags, ibv_pd* pd, void* addr, size_t length, int access) {
    errno = 0;
    const int rc = ibv_rereg_mr(mr_, flags, pd, addr, length, access);
    return {rc, rc ? errno : 0};
  }
  alignas(64) static inline char buf_[512];
  ibv_mr* mr_ = nullptr;
};

TEST_F(ReregMrTest, EachChangeAndTheirCombinationReachTheEngine) {
  const uint32_t lkey = mr_->lkey, rkey = mr_->rkey;
  const eng::Mr* e = fake().MrOf(mr_);
  ibv_pd* other = ibv_alloc_pd(ctx_);
  ASSERT_NE(other, nullptr);

  EXPECT_EQ(Rereg(IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, buf_ + 128, 64, 0),
            std::make_pair(0, 0));
  EXPECT_EQ(mr_->addr, buf_ + 128);
  EXPECT_EQ(mr_->length, 64u);
  EXPECT_EQ(e->addr, buf_ + 128);
  EXPECT_EQ(e->length, 64u);

  EXPECT_EQ(Rereg(IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0), std::make_pair(0, 0));
  EXPECT_EQ(mr_->pd, other);
  EXPECT_EQ(e->pd, fake().PdOf(other));

  // Optional hints are dropped here as at registration.
  EXPECT_EQ(Rereg(IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING),
            std::make_pair(0, 0));
  EXPECT_EQ(e->access, uint32_t(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));

  EXPECT_EQ(Rereg(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
                      IBV_REREG_MR_CHANGE_ACCESS,
                  pd_, buf_, 256, IBV_ACCESS_LOCAL_WRITE),
            std::make_pair(0, 0));
  EXPECT_EQ(mr_->pd, pd_);
  EXPECT_EQ(mr_->addr, buf_);
  EXPECT_EQ(mr_->length, 256u);
  EXPECT_EQ(e->pd, fake().PdOf(pd_));
  EXPECT_EQ(e->access, uint32_t(IBV_ACCESS_LOCAL_WRITE));
  // The keys stay (ibv_rereg_mr(3) allows either).
  EXPECT_EQ(mr_->lkey, lkey);
  EXPECT_EQ(mr_->rkey, rkey);
  EXPECT_EQ(fake().CallCount("ReregMr"), 4);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

TEST_F(ReregMrTest, InputErrorsLeaveTheMrAsItWas) {
  ibv_pd* other = ibv_alloc_pd(ctx_);
  ASSERT_NE(other, nullptr);
  const auto input_error = std::make_pair(int(IBV_REREG_MR_ERR_INPUT), EINVAL);
  // rdma-core's checks (verbs.c), in its order.
  EXPECT_EQ(Rereg(1 << 3, nullptr, nullptr, 0, 0), input_error);  // unknown flag
  EXPECT_EQ(Rereg(IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 64, 0), input_error);
  EXPECT_EQ(Rereg(IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, buf_, 0, 0), input_error);
  EXPECT_EQ(Rereg(IBV_REREG_MR_CHANGE_PD, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE),
            input_error);  // access without CHANGE_ACCESS
  EXPECT_EQ(Rereg(IBV_REREG_MR_CHANGE_PD, nullptr, nullptr, 0, 0), input_error);  // no PD
  EXPECT_EQ(Rereg(IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, 1 << 8), input_error);
  EXPECT_EQ(fake().CallCount("ReregMr"), 0);
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(nullptr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, 0),
            IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(errno, EINVAL);

  // The engine's refusal (REMOTE_WRITE without LOCAL_WRITE is its rule)
  // changes nothing either: still ERR_INPUT, its errno, fields untouched.
  fake().FailCall("ReregMr", EINVAL);
  EXPECT_EQ(Rereg(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD, other, buf_ + 64, 64,
                  0),
            input_error);
  EXPECT_EQ(mr_->pd, pd_);
  EXPECT_EQ(mr_->addr, buf_);
  EXPECT_EQ(mr_->length, 256u);
  EXPECT_EQ(fake().MrOf(mr_)->pd, fake().PdOf(pd_));
  EXPECT_EQ(fake().CallCount("ReregMr"), 1);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

// A PD of another context (another device open) is refused before the
// engine sees it.
TEST_F(ReregMrTest, APdOfAnotherContextIsAnInputError) {
  ibv_context* ctx2 = OpenContext();
  ASSERT_NE(ctx2, nullptr);
  ibv_pd* foreign = ibv_alloc_pd(ctx2);
  ASSERT_NE(foreign, nullptr);
  EXPECT_EQ(Rereg(IBV_REREG_MR_CHANGE_PD, foreign, nullptr, 0, 0),
            std::make_pair(int(IBV_REREG_MR_ERR_INPUT), EINVAL));
  EXPECT_EQ(mr_->pd, pd_);
  EXPECT_EQ(fake().CallCount("ReregMr"), 0);
  EXPECT_EQ(ibv_dealloc_pd(foreign), 0);
  EXPECT_EQ(ibv_close_device(ctx2), 0);
}

}  // namespace
}  // namespace softrnic::verbs_test
