// XRC domains shared between devices (engine/same_host/xrc_share.h): devices B and C
// (as two processes would) open the same domain by inode, each with a
// receive QP and an XRC SRQ; device A's send QPs reach B's receive QP naming
// C's SRQ and C's receive QP naming B's SRQ, at the same time, so each
// device forwards into the other while the other forwards into it.
#include <cstring>

#include "common/secure_random.h"
#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

class XrcShareTest : public ::testing::Test {
 protected:
  static constexpr size_t kBuf = 1 << 20;
  static constexpr size_t kSlot = 8192;

  struct Target {
    Side side;
    Xrcd* xrcd = nullptr;
    Srq* srq = nullptr;
  };

  void SetUp() override {
    a_.dev = MakeDevice(0);
    ASSERT_NE(a_.dev, nullptr);
    ASSERT_EQ(a_.dev->AllocPd(nullptr, &a_.pd), 0);
    ASSERT_EQ(a_.dev->CreateCq(1024, nullptr, nullptr, &a_.cq), 0);
    a_.buf.assign(kBuf, 0);
    ASSERT_EQ(a_.dev->RegMr(a_.pd, a_.buf.data(), kBuf, Addr(a_, 0), kLocalWrite, nullptr, &a_.mr),
              0);
    for (Qp*& q : send_) {
      QpCaps caps{256, 0, 1, 0, 0};
      ASSERT_EQ(a_.dev->CreateQp(a_.pd, QpType::kXrcSend, a_.cq, nullptr, nullptr, &caps, false,
                                 &a_, &q),
                0);
    }
    // A fresh inode per test run: the registry is shared by this user's
    // processes, parallel test runs included.
    inode_ = XrcdInode{0x5eed, SecureRandom64() | 1};
    for (int i = 0; i < 2; ++i) {
      Target& t = t_[i];
      t.side.dev = MakeDevice(1 + i);
      ASSERT_NE(t.side.dev, nullptr);
      Device& d = *t.side.dev;
      ASSERT_EQ(d.AllocPd(nullptr, &t.side.pd), 0);
      ASSERT_EQ(d.CreateCq(1024, nullptr, nullptr, &t.side.cq), 0);
      t.side.buf.assign(kBuf, 0);
      ASSERT_EQ(d.RegMr(t.side.pd, t.side.buf.data(), kBuf, Addr(t.side, 0), kLocalWrite, nullptr,
                        &t.side.mr),
                0);
      ASSERT_EQ(d.OpenXrcd(&inode_, true, false, &t.xrcd), 0);
      ASSERT_EQ(d.CreateXrcSrq(t.side.pd, t.xrcd, t.side.cq, SrqAttr{256, 1, 0}, nullptr, &t.srq),
                0);
      ASSERT_EQ(d.CreateXrcRecvQp(t.xrcd, &t.side, &t.side.qp), 0);
    }
    EXPECT_NE(Srqn(0), Srqn(1));
    for (int i = 0; i < 2; ++i) Connect(send_[i], t_[i].side);
  }

  void TearDown() override {
    for (Target& t : t_) {
      if (!t.side.dev) continue;
      EXPECT_EQ(t.side.dev->DestroyQp(t.side.qp), 0);
      if (t.srq) {
        EXPECT_EQ(t.side.dev->DestroySrq(t.srq), 0);
      }
      EXPECT_EQ(t.side.dev->CloseXrcd(t.xrcd), 0);
    }
  }

  void Connect(Qp* s, Side& r) {
    QpAttr at;
    at.qp_state = QpState::kInit;
    at.port_num = 1;
    ASSERT_EQ(a_.dev->ModifyQp(s, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
    ASSERT_EQ(r.dev->ModifyQp(r.qp, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
    at.qp_state = QpState::kRtr;
    at.path_mtu = Mtu::k1024;
    at.ah_attr.is_global = true;
    at.dest_qp_num = r.dev->QpNum(r.qp);
    at.ah_attr.dgid = r.dev->gids()[0];
    ASSERT_EQ(a_.dev->ModifyQp(s, at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn), 0);
    at.dest_qp_num = a_.dev->QpNum(s);
    at.ah_attr.dgid = a_.dev->gids()[0];
    at.min_rnr_timer = 1;
    ASSERT_EQ(r.dev->ModifyQp(r.qp, at,
                              kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                  kQpMaxDestRdAtomic | kQpMinRnrTimer),
              0);
    at.qp_state = QpState::kRts;
    at.timeout = 14;
    ASSERT_EQ(r.dev->ModifyQp(r.qp, at, kQpState | kQpTimeout | kQpSqPsn), 0);
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    ASSERT_EQ(a_.dev->ModifyQp(s, at,
                               kQpState | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn |
                                   kQpMaxQpRdAtomic),
              0);
  }

  uint32_t Srqn(int i) { return t_[i].side.dev->SrqNum(t_[i].srq); }

  void PostRecvs(int i, int n) {
    for (int k = 0; k < n; ++k) {
      Sge s = SgeOf(t_[i].side, (posted_[i] % 64) * kSlot, kSlot);
      ASSERT_EQ(t_[i].side.dev->PostSrqRecv(t_[i].srq, RecvWr{posted_[i]++, {&s, 1}}), 0);
    }
  }

  // A SEND of len bytes on send QP q naming SRQ srqn; the payload is
  // (j * 7 + seed) at offset j, from A's buffer at slot `slot`.
  int Send(int q, uint32_t srqn, uint32_t len, uint8_t seed, size_t slot) {
    uint8_t* p = a_.buf.data() + slot * kSlot;
    for (uint32_t j = 0; j < len; ++j) p[j] = static_cast<uint8_t>(j * 7 + seed);
    Sge s = SgeOf(a_, slot * kSlot, len);
    SendWr wr = MakeWr(WrOpcode::kSend, slot, {&s, 1});
    wr.xrc_remote_srqn = srqn;
    return a_.dev->PostSend(send_[q], wr);
  }

  bool DataOk(int i, const Completion& c) {
    const uint8_t* p = t_[i].side.buf.data() + (c.wr_id % 64) * kSlot;
    for (uint32_t j = 0; j < c.byte_len; ++j)
      if (p[j] != static_cast<uint8_t>(j * 7 + p[0])) return false;
    return true;
  }

  Side a_;
  Qp* send_[2] = {};
  XrcdInode inode_{};
  Target t_[2];
  uint64_t posted_[2] = {};
};

// Each receive QP delivers into the other device's SRQ while the other
// delivers into its own: neither waits forever for the other (a waiter
// serves its own mailbox), messages arrive whole and in order per QP.
TEST_F(XrcShareTest, TwoDevicesDeliverIntoEachOthersSrqAtOnce) {
  constexpr int kMessages = 48;
  PostRecvs(0, kMessages);
  PostRecvs(1, kMessages);
  for (int k = 0; k < kMessages; ++k) {
    const uint32_t len = k % 3 == 0 ? 3000 : 100 + k;  // 3 packets, or 1
    // Send QP 0 reaches B's receive QP, naming C's SRQ; send QP 1 the other
    // way round.
    ASSERT_EQ(Send(0, Srqn(1), len, static_cast<uint8_t>(k), k % 64), 0);
    ASSERT_EQ(Send(1, Srqn(0), len, static_cast<uint8_t>(k + 100), 64 + k % 64), 0);
    if (k % 16 == 15) {
      // The send buffers are reused: wait for these 32 first.
      auto sent = PollN(a_, 32);
      ASSERT_EQ(sent.size(), 32u);
      for (const Completion& c : sent) EXPECT_EQ(c.status, WcStatus::kSuccess);
    }
  }
  for (int i = 0; i < 2; ++i) {
    auto got = PollN(t_[i].side, kMessages);
    ASSERT_EQ(got.size(), static_cast<size_t>(kMessages)) << "device " << i;
    // Into i's SRQ over the other device's receive QP.
    const uint32_t via = t_[1 - i].side.dev->QpNum(t_[1 - i].side.qp);
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].status, WcStatus::kSuccess);
      EXPECT_EQ(got[k].qp_num, via);
      EXPECT_EQ(got[k].byte_len, k % 3 == 0 ? 3000u : 100u + k) << k;
      EXPECT_EQ(got[k].wr_id, k) << "in the order posted";
      EXPECT_TRUE(DataOk(i, got[k])) << k;
    }
  }
}

// An empty SRQ in the other device is RNR until a receive is posted there;
// a destroyed SRQ's number is an Invalid Request.
TEST_F(XrcShareTest, EmptyIsRnrAndDestroyedIsInvalid) {
  ASSERT_EQ(Send(0, Srqn(1), 2000, 9, 0), 0);
  EXPECT_TRUE(PollN(a_, 1, std::chrono::milliseconds(100)).empty());
  PostRecvs(1, 1);
  auto sent = PollN(a_, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::kSuccess);
  auto got = PollN(t_[1].side, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].byte_len, 2000u);
  EXPECT_TRUE(DataOk(1, got[0]));

  const uint32_t gone = Srqn(1);
  ASSERT_EQ(t_[1].side.dev->DestroySrq(t_[1].srq), 0);
  t_[1].srq = nullptr;
  ASSERT_EQ(Send(0, gone, 64, 1, 1), 0);
  sent = PollN(a_, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::kRemInvReqErr);
}

}  // namespace
}  // namespace softrnic::engine::testing
