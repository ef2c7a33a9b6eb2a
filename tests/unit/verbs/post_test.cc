// ibv_post_send / ibv_post_recv / ibv_post_srq_recv (post.cc): what
// reaches the engine for each ibv_wr_opcode, and how a WR list stops at the
// first WR that fails (ibv_post_send(3): *bad_wr names it, those before it
// are posted, none after it).
#include <cstring>
#include <new>

#include "verbs_fixture.h"

namespace softrnic::verbs_test {
namespace {

using eng::WrOpcode;

class PostTest : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    qp_ = CreateQp(IBV_QPT_RC);
    ASSERT_NE(qp_, nullptr);
  }
  void TearDown() override {
    if (qp_) {
      EXPECT_EQ(ibv_destroy_qp(qp_), 0);
    }
    VerbsTest::TearDown();
  }

  // A chain of n WRs (SEND, one SGE each), wr_id = index.
  void Chain(int n) {
    wrs_.assign(n, ibv_send_wr{});
    sges_.assign(n, ibv_sge{});
    for (int i = 0; i < n; ++i) {
      sges_[i] = Sge(0x1000 * (i + 1), 8, 0x77);
      wrs_[i].wr_id = i;
      wrs_[i].opcode = IBV_WR_SEND;
      wrs_[i].sg_list = &sges_[i];
      wrs_[i].num_sge = 1;
      wrs_[i].next = i + 1 < n ? &wrs_[i + 1] : nullptr;
    }
  }

  ibv_qp* qp_ = nullptr;
  std::vector<ibv_send_wr> wrs_;
  std::vector<ibv_sge> sges_;
};

TEST_F(PostTest, EveryOpcodeReachesTheEngineWithItsFields) {
  ibv_sge sge = Sge(0xabc000, 8, 0x1234);
  ibv_send_wr w[9]{};
  for (int i = 0; i < 9; ++i) {
    w[i].wr_id = 100 + i;
    w[i].sg_list = &sge;
    w[i].num_sge = 1;
    w[i].next = i < 8 ? &w[i + 1] : nullptr;
  }
  w[0].opcode = IBV_WR_RDMA_WRITE;
  w[0].wr.rdma = {0x7000100, 0xaa01};
  w[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  w[1].wr.rdma = {0x7000200, 0xaa02};
  w[1].imm_data = htonl(0x01020304);
  w[2].opcode = IBV_WR_SEND;
  w[3].opcode = IBV_WR_SEND_WITH_IMM;
  w[3].imm_data = htonl(0xdeadbeef);
  w[4].opcode = IBV_WR_RDMA_READ;
  w[4].wr.rdma = {0x7000400, 0xaa04};
  w[5].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  w[5].wr.atomic = {0x7000508, 0x1111222233334444, 0x5555666677778888, 0xaa05};
  w[6].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  w[6].wr.atomic = {0x7000608, 42, 0, 0xaa06};
  w[7].opcode = IBV_WR_SEND_WITH_INV;
  w[7].invalidate_rkey = 0xbb07;
  w[8].opcode = IBV_WR_LOCAL_INV;
  w[8].invalidate_rkey = 0xbb08;
  w[2].send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE | IBV_SEND_SOLICITED;

  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, w, &bad), 0);
  EXPECT_EQ(bad, nullptr);

  const auto& s = Sends(qp_);
  ASSERT_EQ(s.size(), 9u);
  const WrOpcode want[9] = {WrOpcode::kRdmaWrite,    WrOpcode::kRdmaWriteWithImm,
                            WrOpcode::kSend,         WrOpcode::kSendWithImm,
                            WrOpcode::kRdmaRead,     WrOpcode::kAtomicCmpSwp,
                            WrOpcode::kAtomicFetchAdd, WrOpcode::kSendWithInv,
                            WrOpcode::kLocalInv};
  for (int i = 0; i < 9; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(s[i].wr.opcode, want[i]);
    EXPECT_EQ(s[i].wr.wr_id, 100u + i);
    ASSERT_EQ(s[i].sges.size(), 1u);
    EXPECT_EQ(s[i].sges[0].addr, 0xabc000u);
    EXPECT_EQ(s[i].sges[0].length, 8u);
    EXPECT_EQ(s[i].sges[0].lkey, 0x1234u);
  }
  EXPECT_EQ(s[0].wr.remote_addr, 0x7000100u);
  EXPECT_EQ(s[0].wr.rkey, 0xaa01u);
  EXPECT_EQ(s[1].wr.remote_addr, 0x7000200u);
  EXPECT_EQ(s[1].wr.rkey, 0xaa02u);
  // Immediate data stays in network byte order end to end (ibv_send_wr and
  // SendWr both carry __be32).
  EXPECT_EQ(s[1].wr.imm_data, htonl(0x01020304));
  EXPECT_EQ(s[3].wr.imm_data, htonl(0xdeadbeef));
  EXPECT_EQ(s[2].wr.send_flags,
            uint32_t(IBV_SEND_SIGNALED | IBV_SEND_FENCE | IBV_SEND_SOLICITED));
  EXPECT_EQ(s[4].wr.remote_addr, 0x7000400u);
  EXPECT_EQ(s[4].wr.rkey, 0xaa04u);
  EXPECT_EQ(s[5].wr.remote_addr, 0x7000508u);
  EXPECT_EQ(s[5].wr.rkey, 0xaa05u);
  EXPECT_EQ(s[5].wr.compare_add, 0x1111222233334444u);
  EXPECT_EQ(s[5].wr.swap, 0x5555666677778888u);
  EXPECT_EQ(s[6].wr.remote_addr, 0x7000608u);
  EXPECT_EQ(s[6].wr.compare_add, 42u);
  // invalidate_rkey shares imm_data's union slot; SendWr::imm_data carries it.
  EXPECT_EQ(s[7].wr.imm_data, 0xbb07u);
  EXPECT_EQ(s[8].wr.imm_data, 0xbb08u);
}

// A SEND's wr.rdma union slot is not its field: whatever is there must not
// reach the engine as a remote address.
TEST_F(PostTest, SendIgnoresTheRdmaUnion) {
  ibv_send_wr w{};
  w.opcode = IBV_WR_SEND;
  w.wr.rdma = {0xffff0000, 0x99};
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, &w, &bad), 0);
  ASSERT_EQ(Sends(qp_).size(), 1u);
  EXPECT_EQ(Sends(qp_)[0].wr.remote_addr, 0u);
  EXPECT_EQ(Sends(qp_)[0].wr.rkey, 0u);
  EXPECT_TRUE(Sends(qp_)[0].sges.empty());
}

TEST_F(PostTest, InlineFlagAndItsBytesReachTheEngine) {
  char payload[] = "inline!";
  ibv_sge sge = Sge(reinterpret_cast<uintptr_t>(payload), 7, 0);
  ibv_send_wr w{};
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_INLINE;
  w.sg_list = &sge;
  w.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, &w, &bad), 0);
  ASSERT_EQ(Sends(qp_).size(), 1u);
  EXPECT_EQ(Sends(qp_)[0].wr.send_flags, uint32_t(IBV_SEND_INLINE));
  EXPECT_EQ(std::string(Sends(qp_)[0].inline_bytes.begin(), Sends(qp_)[0].inline_bytes.end()),
            "inline!");
}

// IBV_WR_ATOMIC_WRITE through ibv_post_send: the word is the SGEs' 8 bytes,
// read at the call (as inline data); any other total is EINVAL.
TEST_F(PostTest, AtomicWriteTakesTheEightBytesOfItsSges) {
  const uint8_t word[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ibv_sge sge[2] = {Sge(reinterpret_cast<uintptr_t>(word), 3, 0x77),
                    Sge(reinterpret_cast<uintptr_t>(word + 3), 5, 0x77)};
  ibv_send_wr wr{};
  wr.wr_id = 5;
  wr.opcode = IBV_WR_ATOMIC_WRITE;
  wr.sg_list = sge;
  wr.num_sge = 2;
  wr.wr.rdma.remote_addr = 0x7000800;
  wr.wr.rdma.rkey = 0xbb;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, &wr, &bad), 0);
  ASSERT_EQ(Sends(qp_).size(), 1u);
  const PostedSend& s = Sends(qp_)[0];
  EXPECT_EQ(s.wr.opcode, eng::WrOpcode::kAtomicWrite);
  EXPECT_EQ(s.wr.remote_addr, 0x7000800u);
  EXPECT_EQ(s.wr.rkey, 0xbbu);
  uint64_t expect;
  std::memcpy(&expect, word, 8);
  EXPECT_EQ(s.wr.compare_add, expect);
  EXPECT_TRUE(s.sges.empty());
  sge[1].length = 4;  // 7 bytes
  EXPECT_EQ(ibv_post_send(qp_, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  sge[1].length = 6;  // 9 bytes
  EXPECT_EQ(ibv_post_send(qp_, &wr, &bad), EINVAL);
  EXPECT_EQ(Sends(qp_).size(), 1u);
}

// Opcodes outside the engine's WR-opcode table (wr_opcode.h) fail at that WR
// with EINVAL, before the engine sees it; the WRs before it are posted, those
// after it are not. (BIND_MW is in the table and refused by Device::PostSend.)
TEST_F(PostTest, UnsupportedOpcodeStopsTheListAtThatWr) {
  for (uint32_t op : {uint32_t(IBV_WR_TSO), uint32_t(IBV_WR_DRIVER1), 11u, 99u, 0xffffffffu}) {
    SCOPED_TRACE(op);
    const size_t before = Sends(qp_).size();
    const int calls = fake().CallCount("PostSend");
    Chain(3);
    std::memcpy(&wrs_[1].opcode, &op, sizeof(op));  // any value a C caller may store
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(qp_, wrs_.data(), &bad), EINVAL);
    EXPECT_EQ(bad, &wrs_[1]);
    ASSERT_EQ(Sends(qp_).size(), before + 1);
    EXPECT_EQ(Sends(qp_).back().wr.wr_id, 0u);
    EXPECT_EQ(fake().CallCount("PostSend"), calls + 1);
  }
}

TEST_F(PostTest, BadSgeCountsFailBeforeTheEngine) {
  struct Case {
    int num_sge;
    bool null_list;
  };
  std::vector<ibv_sge> many(65, Sge(0x1000, 1, 1));
  for (Case c : {Case{65, false}, Case{1000, false}, Case{-1, false}, Case{1, true}}) {
    SCOPED_TRACE(c.num_sge);
    Chain(2);
    wrs_[0].num_sge = c.num_sge;
    wrs_[0].sg_list = c.null_list ? nullptr : many.data();
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(qp_, wrs_.data(), &bad), EINVAL);
    EXPECT_EQ(bad, &wrs_[0]);
  }
  EXPECT_EQ(fake().CallCount("PostSend"), 0);
  // No SGEs and no list is a zero-length WR, not an error.
  Chain(1);
  wrs_[0].num_sge = 0;
  wrs_[0].sg_list = nullptr;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp_, wrs_.data(), &bad), 0);
  EXPECT_EQ(bad, nullptr);
}

TEST_F(PostTest, EngineErrorStopsTheListAtThatWr) {
  Chain(5);
  fake().FailCall("PostSend", ENOMEM, /*skip=*/2);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp_, wrs_.data(), &bad), ENOMEM);
  EXPECT_EQ(bad, &wrs_[2]);
  ASSERT_EQ(Sends(qp_).size(), 2u);
  EXPECT_EQ(Sends(qp_)[1].wr.wr_id, 1u);
  EXPECT_EQ(fake().CallCount("PostSend"), 3);  // WRs 3 and 4 never tried
}

// An exception below (allocation failure) must not cross the C ABI, and
// *bad_wr must still name the WR that failed: the ones before it were posted.
TEST_F(PostTest, ExceptionBelowStopsTheListAtThatWr) {
  Chain(4);
  fake().FailCall("PostSend", Fake::kThrowBadAlloc, /*skip=*/2);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp_, wrs_.data(), &bad), ENOMEM);
  EXPECT_EQ(Sends(qp_).size(), 2u);
  EXPECT_EQ(bad, &wrs_[2]);
}

TEST_F(PostTest, UdSendNeedsAnAhAndCarriesTheDestination) {
  ibv_qp* ud = CreateQp(IBV_QPT_UD);
  ASSERT_NE(ud, nullptr);
  ibv_ah* ah = CreateAh();
  ASSERT_NE(ah, nullptr);
  Chain(2);
  wrs_[0].wr.ud = {ah, 0x123456, 0x80010000};
  wrs_[1].wr.ud = {nullptr, 0x654321, 0x11};
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(ud, wrs_.data(), &bad), EINVAL);
  EXPECT_EQ(bad, &wrs_[1]);
  ASSERT_EQ(Sends(ud).size(), 1u);
  EXPECT_EQ(Sends(ud)[0].wr.ah, fake().AhOf(ah));
  EXPECT_EQ(Sends(ud)[0].wr.remote_qpn, 0x123456u);
  EXPECT_EQ(Sends(ud)[0].wr.remote_qkey, 0x80010000u);
  // On an RC QP the same slot is ignored.
  EXPECT_EQ(ibv_post_send(qp_, &wrs_[1], &bad), 0);
  EXPECT_EQ(Sends(qp_).back().wr.ah, nullptr);
  EXPECT_EQ(ibv_destroy_qp(ud), 0);
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
}

TEST_F(PostTest, RecvListTranslatedAndStopsAtTheFailingWr) {
  ibv_sge a[2] = {Sge(0x10, 100, 7), Sge(0x20, 200, 8)};
  ibv_recv_wr r[3]{};
  for (int i = 0; i < 3; ++i) {
    r[i].wr_id = 50 + i;
    r[i].sg_list = a;
    r[i].num_sge = 2;
    r[i].next = i < 2 ? &r[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_recv(qp_, r, &bad), 0);
  const auto& recvs = fake().QpOf(qp_)->recvs;
  ASSERT_EQ(recvs.size(), 3u);
  EXPECT_EQ(recvs[2].wr_id, 52u);
  ASSERT_EQ(recvs[2].sges.size(), 2u);
  EXPECT_EQ(recvs[2].sges[1].addr, 0x20u);
  EXPECT_EQ(recvs[2].sges[1].length, 200u);
  EXPECT_EQ(recvs[2].sges[1].lkey, 8u);

  fake().FailCall("PostRecv", ENOMEM, /*skip=*/1);
  EXPECT_EQ(ibv_post_recv(qp_, r, &bad), ENOMEM);
  EXPECT_EQ(bad, &r[1]);
  EXPECT_EQ(recvs.size(), 4u);

  r[2].num_sge = 65;
  EXPECT_EQ(ibv_post_recv(qp_, r, &bad), EINVAL);
  EXPECT_EQ(bad, &r[2]);
  EXPECT_EQ(recvs.size(), 6u);
}

TEST_F(PostTest, SrqRecvGoesToTheSrq) {
  ibv_srq_init_attr init{};
  init.attr.max_wr = 16;
  init.attr.max_sge = 2;
  ibv_srq* srq = ibv_create_srq(pd_, &init);
  ASSERT_NE(srq, nullptr);
  ibv_sge s = Sge(0x40, 64, 9);
  ibv_recv_wr r[2]{};
  r[0] = {7, &r[1], &s, 1};
  r[1] = {8, nullptr, &s, -3};
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_srq_recv(srq, r, &bad), EINVAL);
  EXPECT_EQ(bad, &r[1]);
  const auto& recvs = fake().SrqOf(srq)->recvs;
  ASSERT_EQ(recvs.size(), 1u);
  EXPECT_EQ(recvs[0].wr_id, 7u);
  EXPECT_EQ(recvs[0].sges[0].lkey, 9u);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

}  // namespace
}  // namespace softrnic::verbs_test
