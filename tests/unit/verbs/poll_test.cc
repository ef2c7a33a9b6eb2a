// Completions (cq.cc): engine Completion -> ibv_wc through
// ibv_poll_cq, the extended CQ's start_poll/next_poll/end_poll and read_*
// callbacks, batching against the engine, and CQ notification.
#include "verbs_fixture.h"

namespace softrnic::verbs_test {
namespace {

using eng::Completion;
using eng::WcOpcode;
using eng::WcStatus;

Completion Numbered(uint64_t wr_id) {
  Completion c;
  c.wr_id = wr_id;
  c.byte_len = static_cast<uint32_t>(wr_id * 10);
  return c;
}

class PollTest : public VerbsTest {
 protected:
  std::deque<Completion>& Queue(ibv_cq* cq) { return fake().CqOf(cq)->completions; }
};

TEST_F(PollTest, EveryFieldOfACompletionReachesTheWc) {
  Completion c;
  c.wr_id = 0x1122334455667788;
  c.status = WcStatus::kSuccess;
  c.opcode = WcOpcode::kRecvRdmaWithImm;
  c.vendor_err = 0x77;
  c.byte_len = 4096;
  c.imm_data = htonl(0xcafef00d);
  c.qp_num = 0xabcdef;
  c.src_qp = 0x123456;
  c.wc_flags = eng::kWcWithImm | eng::kWcGrh;
  c.pkey_index = 3;
  c.slid = 0x4242;
  c.sl = 2;  // RoceL3Type::kIpv4
  c.dlid_path_bits = 5;
  Queue(cq_).push_back(c);
  ibv_wc wc;
  std::memset(&wc, 0xee, sizeof(wc));
  ASSERT_EQ(ibv_poll_cq(cq_, 1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 0x1122334455667788u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc.vendor_err, 0x77u);
  EXPECT_EQ(wc.byte_len, 4096u);
  EXPECT_EQ(wc.imm_data, htonl(0xcafef00d));  // network order, untouched
  EXPECT_EQ(wc.qp_num, 0xabcdefu);
  EXPECT_EQ(wc.src_qp, 0x123456u);
  EXPECT_EQ(wc.wc_flags, unsigned(IBV_WC_WITH_IMM | IBV_WC_GRH));
  EXPECT_EQ(wc.pkey_index, 3);
  EXPECT_EQ(wc.slid, 0x4242);
  EXPECT_EQ(wc.sl, 2);
  EXPECT_EQ(wc.dlid_path_bits, 5);
}

TEST_F(PollTest, OpcodesStatusesAndInvalidatedRkey) {
  const std::pair<WcOpcode, ibv_wc_opcode> ops[] = {
      {WcOpcode::kSend, IBV_WC_SEND},         {WcOpcode::kRdmaWrite, IBV_WC_RDMA_WRITE},
      {WcOpcode::kRdmaRead, IBV_WC_RDMA_READ}, {WcOpcode::kCompSwap, IBV_WC_COMP_SWAP},
      {WcOpcode::kFetchAdd, IBV_WC_FETCH_ADD}, {WcOpcode::kLocalInv, IBV_WC_LOCAL_INV},
      {WcOpcode::kRecv, IBV_WC_RECV},         {WcOpcode::kRecvRdmaWithImm, IBV_WC_RECV_RDMA_WITH_IMM}};
  const std::pair<WcStatus, ibv_wc_status> statuses[] = {
      {WcStatus::kWrFlushErr, IBV_WC_WR_FLUSH_ERR},
      {WcStatus::kRemAccessErr, IBV_WC_REM_ACCESS_ERR},
      {WcStatus::kRetryExcErr, IBV_WC_RETRY_EXC_ERR},
      {WcStatus::kRnrRetryExcErr, IBV_WC_RNR_RETRY_EXC_ERR},
      {WcStatus::kLocLenErr, IBV_WC_LOC_LEN_ERR},
      {WcStatus::kGeneralErr, IBV_WC_GENERAL_ERR}};
  for (auto [e, v] : ops) {
    Completion c;
    c.opcode = e;
    Queue(cq_).push_back(c);
  }
  for (auto [e, v] : statuses) {
    Completion c;
    c.status = e;
    Queue(cq_).push_back(c);
  }
  Completion inv;
  inv.opcode = WcOpcode::kRecv;
  inv.wc_flags = eng::kWcWithInv;
  inv.imm_data = 0x00abcdef;  // host order when kWcWithInv
  Queue(cq_).push_back(inv);

  ibv_wc wc[15];
  ASSERT_EQ(ibv_poll_cq(cq_, 15, wc), 15);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(wc[i].opcode, ops[i].second) << i;
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(wc[8 + i].status, statuses[i].second) << i;
    EXPECT_STREQ(ibv_wc_status_str(wc[8 + i].status), ibv_wc_status_str(statuses[i].second));
  }
  EXPECT_EQ(wc[14].wc_flags, unsigned(IBV_WC_WITH_INV));
  EXPECT_EQ(wc[14].invalidated_rkey, 0x00abcdefu);
}

// The engine is asked in batches of at most 16 (Cq::kBatch), in order, and
// not again once it returned fewer than asked.
TEST_F(PollTest, LargePollsAreBatchedInOrder) {
  for (uint64_t i = 0; i < 40; ++i) Queue(cq_).push_back(Numbered(i));
  ibv_wc wc[64];
  ASSERT_EQ(ibv_poll_cq(cq_, 40, wc), 40);
  for (int i = 0; i < 40; ++i) ASSERT_EQ(wc[i].wr_id, uint64_t(i));
  EXPECT_EQ(fake().CallCount("PollCq"), 3);  // 16 + 16 + 8

  for (uint64_t i = 0; i < 5; ++i) Queue(cq_).push_back(Numbered(100 + i));
  ASSERT_EQ(ibv_poll_cq(cq_, 64, wc), 5);
  EXPECT_EQ(wc[4].wr_id, 104u);
  EXPECT_EQ(fake().CallCount("PollCq"), 4);  // one short answer ends the poll

  EXPECT_EQ(ibv_poll_cq(cq_, 64, wc), 0);
}

TEST_F(PollTest, BadArgumentsAndEngineErrors) {
  ibv_wc wc[32];
  EXPECT_EQ(ibv_poll_cq(cq_, -1, wc), -EINVAL);
  EXPECT_EQ(ibv_poll_cq(cq_, 1, nullptr), -EINVAL);
  EXPECT_EQ(ibv_poll_cq(cq_, 0, nullptr), 0);
  EXPECT_EQ(fake().CallCount("PollCq"), 0);

  // An error with nothing polled is returned; after some completions the
  // count is returned and the error is left for the next poll to meet.
  fake().FailCall("PollCq", EIO);
  EXPECT_EQ(ibv_poll_cq(cq_, 4, wc), -EIO);
  for (uint64_t i = 0; i < 20; ++i) Queue(cq_).push_back(Numbered(i));
  fake().FailCall("PollCq", EIO, /*skip=*/1);
  EXPECT_EQ(ibv_poll_cq(cq_, 32, wc), 16);
  EXPECT_EQ(ibv_poll_cq(cq_, 32, wc), 4);
  EXPECT_EQ(wc[0].wr_id, 16u);
}

TEST_F(PollTest, NotifyArmsOnlyCqsWithAChannel) {
  EXPECT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  EXPECT_EQ(fake().CallCount("ArmCq"), 0);

  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx_, 4, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(ibv_req_notify_cq(cq, 1), 0);
  EXPECT_EQ(fake().CqOf(cq)->arm_calls, 1);
  EXPECT_TRUE(fake().CqOf(cq)->solicited_only);
  EXPECT_EQ(ibv_req_notify_cq(cq, 0), 0);
  EXPECT_FALSE(fake().CqOf(cq)->solicited_only);
  fake().FailCall("ArmCq", EINVAL);
  EXPECT_EQ(ibv_req_notify_cq(cq, 0), EINVAL);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

class PollExTest : public PollTest {
 protected:
  ibv_cq_ex* CreateEx(uint64_t wc_flags) {
    ibv_cq_init_attr_ex attr{};
    attr.cqe = 8;
    attr.wc_flags = wc_flags;
    return ibv_create_cq_ex(ctx_, &attr);
  }
};

TEST_F(PollExTest, ReadCallbacksInstalledOnlyForRequestedFields) {
  ibv_cq_ex* cq = CreateEx(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM);
  ASSERT_NE(cq, nullptr);
  EXPECT_NE(cq->read_byte_len, nullptr);
  EXPECT_NE(cq->read_qp_num, nullptr);
  EXPECT_NE(cq->read_opcode, nullptr);  // always valid (ibv_create_cq_ex(3))
  EXPECT_NE(cq->read_wc_flags, nullptr);
  EXPECT_EQ(cq->read_imm_data, nullptr);
  EXPECT_EQ(cq->read_src_qp, nullptr);
  EXPECT_EQ(cq->read_slid, nullptr);
  EXPECT_EQ(cq->read_completion_ts, nullptr);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
}

TEST_F(PollExTest, UnsupportedCreateAttributesAreRefused) {
  ibv_cq_init_attr_ex attr{};
  attr.cqe = 8;
  attr.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_, &attr), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  attr.wc_flags = 0;
  attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
  attr.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
  EXPECT_EQ(ibv_create_cq_ex(ctx_, &attr), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  attr.comp_mask = 1u << 7;
  attr.flags = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(fake().CallCount("CreateCq"), 1);  // the fixture's only
}

TEST_F(PollExTest, StartNextEndWalkTheCompletions) {
  ibv_cq_ex* cq = CreateEx(IBV_WC_STANDARD_FLAGS);
  ASSERT_NE(cq, nullptr);
  ibv_poll_cq_attr pattr{};
  EXPECT_EQ(ibv_start_poll(cq, &pattr), ENOENT);  // empty: no end_poll due

  auto& q = fake().CqOf(cq)->completions;
  for (uint64_t i = 1; i <= 3; ++i) {
    Completion c = Numbered(i);
    c.opcode = WcOpcode::kRecv;
    c.qp_num = 0x100 + i;
    c.src_qp = 0x200 + i;
    c.imm_data = htonl(i);
    c.wc_flags = eng::kWcWithImm;
    c.slid = 7;
    c.sl = 1;
    c.dlid_path_bits = 2;
    c.vendor_err = 9;
    q.push_back(c);
  }
  q[1].status = WcStatus::kLocProtErr;
  ASSERT_EQ(ibv_start_poll(cq, &pattr), 0);
  uint64_t seen = 0;
  for (int i = 1;; ++i) {
    EXPECT_EQ(cq->wr_id, uint64_t(i));
    EXPECT_EQ(cq->status, i == 2 ? IBV_WC_LOC_PROT_ERR : IBV_WC_SUCCESS);
    EXPECT_EQ(ibv_wc_read_opcode(cq), IBV_WC_RECV);
    EXPECT_EQ(ibv_wc_read_byte_len(cq), uint32_t(i * 10));
    EXPECT_EQ(ibv_wc_read_imm_data(cq), htonl(i));
    EXPECT_EQ(ibv_wc_read_qp_num(cq), 0x100u + i);
    EXPECT_EQ(ibv_wc_read_src_qp(cq), 0x200u + i);
    EXPECT_EQ(ibv_wc_read_wc_flags(cq), unsigned(IBV_WC_WITH_IMM));
    EXPECT_EQ(ibv_wc_read_slid(cq), 7u);
    EXPECT_EQ(ibv_wc_read_sl(cq), 1);
    EXPECT_EQ(ibv_wc_read_dlid_path_bits(cq), 2);
    EXPECT_EQ(ibv_wc_read_vendor_err(cq), 9u);
    ++seen;
    if (ibv_next_poll(cq) == ENOENT) break;
  }
  ibv_end_poll(cq);
  EXPECT_EQ(seen, 3u);
  // Nothing is delivered twice.
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &wc), 0);
  EXPECT_EQ(ibv_start_poll(cq, &pattr), ENOENT);

  pattr.comp_mask = 1;
  EXPECT_EQ(ibv_start_poll(cq, &pattr), EINVAL);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
}

// An extended poll takes a batch from the engine; what end_poll leaves
// unread is delivered first, in order, by the next ibv_poll_cq.
TEST_F(PollExTest, LeftoversOfAnExtendedPollComeFirst) {
  ibv_cq_ex* cq = CreateEx(0);
  ASSERT_NE(cq, nullptr);
  auto& q = fake().CqOf(cq)->completions;
  for (uint64_t i = 1; i <= 3; ++i) q.push_back(Numbered(i));
  ibv_poll_cq_attr pattr{};
  ASSERT_EQ(ibv_start_poll(cq, &pattr), 0);
  EXPECT_EQ(cq->wr_id, 1u);
  ibv_end_poll(cq);
  EXPECT_TRUE(q.empty());  // the engine handed all three over
  q.push_back(Numbered(4));

  ibv_wc wc[8];
  ASSERT_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(cq), 8, wc), 3);
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(wc[1].wr_id, 3u);
  EXPECT_EQ(wc[2].wr_id, 4u);
  EXPECT_EQ(wc[2].byte_len, 40u);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
}

}  // namespace
}  // namespace softrnic::verbs_test
