// XRC between two devices (engine/queues/xrc.cc): a send QP on device A, a
// receive QP and XRC SRQs on device B. Run over shared memory and, as
// "<Suite>.<Test>.udp", over UDP (tests/CMakeLists.txt).
#include <sys/stat.h>

#include <cstring>

#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

class XrcTest : public ::testing::Test {
 protected:
  static constexpr size_t kBuf = 1 << 20;
  static constexpr uint32_t kAccess = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;

  void SetUp() override {
    // A: an XRC send QP.
    a_.dev = MakeDevice(0);
    ASSERT_NE(a_.dev, nullptr);
    ASSERT_EQ(a_.dev->AllocPd(nullptr, &a_.pd), 0);
    ASSERT_EQ(a_.dev->CreateCq(256, nullptr, nullptr, &a_.cq), 0);
    QpCaps caps{64, 0, 4, 0, 64};
    ASSERT_EQ(a_.dev->CreateQp(a_.pd, QpType::kXrcSend, a_.cq, nullptr, nullptr, &caps, false,
                               &a_, &a_.qp),
              0);
    EXPECT_EQ(caps.max_recv_wr, 0u);  // no receive side
    a_.buf.assign(kBuf, 0);
    ASSERT_EQ(a_.dev->RegMr(a_.pd, a_.buf.data(), kBuf, Addr(a_, 0), kAccess, nullptr, &a_.mr), 0);

    // B: a domain with two XRC SRQs and a receive QP, and a second domain
    // with an SRQ of its own.
    b_.dev = MakeDevice(1);
    ASSERT_NE(b_.dev, nullptr);
    ASSERT_EQ(b_.dev->AllocPd(nullptr, &b_.pd), 0);
    ASSERT_EQ(b_.dev->CreateCq(256, nullptr, nullptr, &b_.cq), 0);
    b_.buf.assign(kBuf, 0);
    ASSERT_EQ(b_.dev->RegMr(b_.pd, b_.buf.data(), kBuf, Addr(b_, 0), kAccess, nullptr, &b_.mr), 0);
    ASSERT_EQ(b_.dev->OpenXrcd(nullptr, true, false, &xrcd_), 0);
    ASSERT_EQ(b_.dev->OpenXrcd(nullptr, true, false, &other_xrcd_), 0);
    EXPECT_NE(xrcd_, other_xrcd_);  // anonymous domains are distinct
    const SrqAttr sa{64, 4, 0};
    for (Srq*& s : srq_) ASSERT_EQ(b_.dev->CreateXrcSrq(b_.pd, xrcd_, b_.cq, sa, nullptr, &s), 0);
    ASSERT_EQ(b_.dev->CreateXrcSrq(b_.pd, other_xrcd_, b_.cq, sa, nullptr, &other_srq_), 0);
    ASSERT_EQ(b_.dev->CreateXrcRecvQp(xrcd_, &b_, &b_.qp), 0);

    ConnectSend();
    ConnectRecv();
  }

  void TearDown() override {
    if (b_.qp) {
      EXPECT_EQ(b_.dev->DestroyQp(b_.qp), 0);
    }
    for (Srq* s : srq_) EXPECT_EQ(b_.dev->DestroySrq(s), 0);
    EXPECT_EQ(b_.dev->DestroySrq(other_srq_), 0);
    EXPECT_EQ(b_.dev->CloseXrcd(xrcd_), 0);
    EXPECT_EQ(b_.dev->CloseXrcd(other_xrcd_), 0);
  }

  // As ibv_xsrq_pingpong does: a send QP needs no responder attributes.
  void ConnectSend() {
    QpAttr at;
    at.qp_state = QpState::kInit;
    at.port_num = 1;
    ASSERT_EQ(a_.dev->ModifyQp(a_.qp, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
    at.qp_state = QpState::kRtr;
    at.path_mtu = Mtu::k1024;
    at.dest_qp_num = b_.dev->QpNum(b_.qp);
    at.rq_psn = 0x100;
    at.ah_attr.is_global = true;
    at.ah_attr.dgid = b_.dev->gids()[0];
    ASSERT_EQ(a_.dev->ModifyQp(a_.qp, at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn),
              0);
    at.qp_state = QpState::kRts;
    at.sq_psn = 0x200;
    at.timeout = 14;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 4;
    ASSERT_EQ(a_.dev->ModifyQp(a_.qp, at,
                               kQpState | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn |
                                   kQpMaxQpRdAtomic),
              0);
  }

  // ... and a receive QP no requester attributes at RTS.
  void ConnectRecv() {
    QpAttr at;
    at.qp_state = QpState::kInit;
    at.port_num = 1;
    at.qp_access_flags = kRemoteWrite | kRemoteRead | kRemoteAtomic;
    ASSERT_EQ(b_.dev->ModifyQp(b_.qp, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
    at.qp_state = QpState::kRtr;
    at.path_mtu = Mtu::k1024;
    at.dest_qp_num = a_.dev->QpNum(a_.qp);
    at.rq_psn = 0x200;
    at.max_dest_rd_atomic = 4;
    at.min_rnr_timer = 1;
    at.ah_attr.is_global = true;
    at.ah_attr.dgid = a_.dev->gids()[0];
    // A receive QP does need its responder attributes.
    ASSERT_EQ(b_.dev->ModifyQp(b_.qp, at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn),
              EINVAL);
    ASSERT_EQ(b_.dev->ModifyQp(b_.qp, at,
                               kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                   kQpMaxDestRdAtomic | kQpMinRnrTimer),
              0);
    at.qp_state = QpState::kRts;
    at.timeout = 14;
    at.sq_psn = 0x100;
    ASSERT_EQ(b_.dev->ModifyQp(b_.qp, at, kQpState | kQpTimeout | kQpSqPsn), 0);
  }

  void PostSrqRecv(Srq* srq, uint64_t wr_id, size_t offset, uint32_t len) {
    Sge s = SgeOf(b_, offset, len);
    ASSERT_EQ(b_.dev->PostSrqRecv(srq, RecvWr{wr_id, {&s, 1}}), 0);
  }

  // A signaled WR of A's naming XRC SRQ `srqn` at B.
  int Post(WrOpcode op, uint64_t wr_id, uint32_t srqn, size_t offset, uint32_t len,
           uint64_t remote_addr = 0) {
    Sge s = SgeOf(a_, offset, len);
    SendWr wr = MakeWr(op, wr_id, {&s, 1}, remote_addr, b_.dev->MrRkey(b_.mr));
    wr.xrc_remote_srqn = srqn;
    wr.compare_add = 5;
    return a_.dev->PostSend(a_.qp, wr);
  }

  uint32_t Srqn(Srq* s) { return b_.dev->SrqNum(s); }

  Side a_, b_;
  Xrcd* xrcd_ = nullptr;
  Xrcd* other_xrcd_ = nullptr;
  Srq* srq_[2] = {};
  Srq* other_srq_ = nullptr;
};

TEST_F(XrcTest, SendsReachTheSrqTheirWrNames) {
  EXPECT_NE(Srqn(srq_[0]), 0u);
  EXPECT_NE(Srqn(srq_[0]), Srqn(srq_[1]));
  EXPECT_LE(Srqn(srq_[0]), 0xFFFFFFu);
  PostSrqRecv(srq_[0], 100, 0, 8192);
  PostSrqRecv(srq_[1], 200, 100000, 8192);
  // Five packets at MTU 1024: every one carries the XRCETH.
  const uint32_t len = 5000;
  FillPattern(a_.buf, 0, len, 7);
  FillPattern(a_.buf, 10000, 300, 8);
  ASSERT_EQ(Post(WrOpcode::kSend, 1, Srqn(srq_[1]), 0, len), 0);
  ASSERT_EQ(Post(WrOpcode::kSend, 2, Srqn(srq_[0]), 10000, 300), 0);
  auto sc = PollN(a_, 2);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[1].status, WcStatus::kSuccess);
  auto rc = PollN(b_, 2);
  ASSERT_EQ(rc.size(), 2u);
  // Receive completions name the receive QP, and come from the SRQ named.
  EXPECT_EQ(rc[0].wr_id, 200u);
  EXPECT_EQ(rc[0].byte_len, len);
  EXPECT_EQ(rc[0].qp_num, b_.dev->QpNum(b_.qp));
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[1].wr_id, 100u);
  EXPECT_EQ(rc[1].byte_len, 300u);
  EXPECT_EQ(FirstDiff(a_.buf.data(), b_.buf.data() + 100000, len), -1);
  EXPECT_EQ(FirstDiff(a_.buf.data() + 10000, b_.buf.data(), 300), -1);
}

// One-sided operations check the rkey against the PD of the SRQ the
// request names (the receive QP has none of its own).
TEST_F(XrcTest, WriteReadAndAtomicsUseTheSrqsPd) {
  const uint32_t len = 3000;
  FillPattern(a_.buf, 0, len, 9);
  ASSERT_EQ(Post(WrOpcode::kRdmaWrite, 1, Srqn(srq_[0]), 0, len, Addr(b_, 500)), 0);
  ASSERT_EQ(Post(WrOpcode::kRdmaRead, 2, Srqn(srq_[0]), 200000, len, Addr(b_, 500)), 0);
  std::memset(b_.buf.data() + 8192, 0, 8);
  b_.buf[8192] = 37;
  ASSERT_EQ(Post(WrOpcode::kAtomicFetchAdd, 3, Srqn(srq_[1]), 300000, 8, Addr(b_, 8192)), 0);
  auto c = PollN(a_, 3);
  ASSERT_EQ(c.size(), 3u);
  for (const Completion& x : c) EXPECT_EQ(x.status, WcStatus::kSuccess) << x.wr_id;
  EXPECT_EQ(FirstDiff(a_.buf.data(), b_.buf.data() + 500, len), -1);
  EXPECT_EQ(FirstDiff(a_.buf.data(), a_.buf.data() + 200000, len), -1);
  EXPECT_EQ(a_.buf[300000], 37);  // the original value (little-endian host)
  EXPECT_EQ(b_.buf[8192], 42);
}

// "XRC send to the wrong SRQ number": a number no SRQ has, or an SRQ of
// another domain, is an Invalid Request: the sender's WR completes with a
// remote invalid request error, the receive QP goes to the error state,
// and nothing reaches any SRQ.
TEST_F(XrcTest, SendToANumberNoSrqHasFailsRemotely) {
  PostSrqRecv(srq_[0], 100, 0, 4096);
  uint32_t bogus = (Srqn(srq_[0]) + 1) & 0xFFFFFF;
  while (bogus == 0 || bogus == Srqn(srq_[1]) || bogus == Srqn(other_srq_)) ++bogus;
  ASSERT_EQ(Post(WrOpcode::kSend, 1, bogus, 0, 64), 0);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(PollFor(b_, std::chrono::milliseconds(50)).size(), 0u);
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kErr);
  EXPECT_GE(StatsOf(*b_.dev).tx_naks_invalid_request, 1u);
}

TEST_F(XrcTest, SendToAnSrqOfAnotherDomainFailsRemotely) {
  PostSrqRecv(other_srq_, 300, 0, 4096);
  ASSERT_EQ(Post(WrOpcode::kSend, 1, Srqn(other_srq_), 0, 64), 0);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRemInvReqErr);
  // The other domain's receive WQE was not touched.
  EXPECT_EQ(PollFor(b_, std::chrono::milliseconds(50)).size(), 0u);
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kErr);
}

// An empty XRC SRQ answers with RNR NAKs until a receive is posted.
TEST_F(XrcTest, AnEmptySrqIsReceiverNotReady) {
  ASSERT_EQ(Post(WrOpcode::kSend, 1, Srqn(srq_[0]), 0, 64), 0);
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).tx_rnr_naks > 0; }));
  PostSrqRecv(srq_[0], 100, 0, 4096);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  auto r = PollN(b_, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 100u);
}

// The queues an XRC QP does not have refuse posts; a send QP refuses RC
// packets and a receive QP XRC responses (engine.cc dispatch).
TEST_F(XrcTest, QueuesAnXrcQpLacksRefusePosts) {
  Sge s = SgeOf(b_, 0, 8);
  EXPECT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{1, {&s, 1}}), EINVAL);
  EXPECT_EQ(b_.dev->PostSend(b_.qp, MakeWr(WrOpcode::kSend, 1, {&s, 1})), EINVAL);
  Sge t = SgeOf(a_, 0, 8);
  EXPECT_EQ(a_.dev->PostRecv(a_.qp, RecvWr{1, {&t, 1}}), EINVAL);
  // RESET cleans the QP's CQs: an XRC QP lacks one or both.
  QpAttr reset;
  reset.qp_state = QpState::kReset;
  EXPECT_EQ(a_.dev->ModifyQp(a_.qp, reset, kQpState), 0);
  EXPECT_EQ(b_.dev->ModifyQp(b_.qp, reset, kQpState), 0);
}

// ibv_open_xrcd(3) by inode, and ibv_open_qp(3).
TEST_F(XrcTest, DomainsByInodeAndOpenedReceiveQps) {
  const XrcdInode inode{0x801, 123456};
  Xrcd* x1 = nullptr;
  Xrcd* x2 = nullptr;
  Xrcd* x3 = nullptr;
  EXPECT_EQ(b_.dev->OpenXrcd(&inode, false, false, &x1), EAGAIN);  // none yet, no O_CREAT
  ASSERT_EQ(b_.dev->OpenXrcd(&inode, true, true, &x1), 0);
  EXPECT_EQ(b_.dev->OpenXrcd(&inode, true, true, &x2), EINVAL);    // O_EXCL, exists
  ASSERT_EQ(b_.dev->OpenXrcd(&inode, false, false, &x2), 0);
  EXPECT_EQ(x1, x2);                                               // the same domain
  const XrcdInode other{0x801, 654321};
  ASSERT_EQ(b_.dev->OpenXrcd(&other, true, false, &x3), 0);
  EXPECT_NE(x3, x1);
  EXPECT_EQ(b_.dev->CloseXrcd(x3), 0);

  // A domain in use refuses its last close.
  Srq* s = nullptr;
  ASSERT_EQ(b_.dev->CreateXrcSrq(b_.pd, x1, b_.cq, SrqAttr{8, 1, 0}, nullptr, &s), 0);
  EXPECT_EQ(b_.dev->CloseXrcd(x2), 0);  // not the last
  EXPECT_EQ(b_.dev->CloseXrcd(x1), EBUSY);
  EXPECT_EQ(b_.dev->DestroySrq(s), 0);
  EXPECT_EQ(b_.dev->CloseXrcd(x1), 0);

  // ibv_open_qp: only a receive QP, only in its own domain.
  Qp* opened = nullptr;
  EXPECT_EQ(b_.dev->OpenXrcRecvQp(other_xrcd_, b_.dev->QpNum(b_.qp), &opened, &opened), EINVAL);
  EXPECT_EQ(a_.dev->OpenXrcRecvQp(xrcd_, a_.dev->QpNum(a_.qp), &opened, &opened), EINVAL);
  int handle = 0;
  ASSERT_EQ(b_.dev->OpenXrcRecvQp(xrcd_, b_.dev->QpNum(b_.qp), &handle, &opened), 0);
  EXPECT_EQ(opened, b_.qp);
  // The creator's handle goes; the opened one keeps the QP working.
  EXPECT_EQ(b_.dev->DestroyQp(b_.qp, nullptr, &b_), 0);
  PostSrqRecv(srq_[1], 7, 0, 64);
  ASSERT_EQ(Post(WrOpcode::kSend, 1, Srqn(srq_[1]), 0, 64), 0);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  ASSERT_EQ(PollN(b_, 1).size(), 1u);
  // The domain is still in use until the last handle goes.
  EXPECT_EQ(b_.dev->DestroyQp(opened, nullptr, &handle), 0);
  b_.qp = nullptr;
}

}  // namespace
}  // namespace softrnic::engine::testing
