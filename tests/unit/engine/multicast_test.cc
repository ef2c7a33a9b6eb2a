// UD multicast in the engine (engine/queues/multicast.h): the attachment table's
// rules, and datagrams to a group between two devices of this process (each
// on its own loopback address, one UDP port: rc_pair.h) through real
// sockets joined to the group.
#include <unistd.h>

#include <cerrno>
#include <string>

#include "engine/queues/multicast.h"
#include "engine_test_peer.h"
#include "rc_pair.h"
#include "transport/factory.h"

namespace softrnic::engine::testing {
namespace {

Gid GroupGid(int which) {
  // 239.<which>.<pid>: groups of concurrently running test processes differ.
  const pid_t pid = getpid();
  const uint8_t bytes[4] = {239, static_cast<uint8_t>(100 + which),
                            static_cast<uint8_t>((pid >> 8) & 0xff), static_cast<uint8_t>(pid & 0xff)};
  uint32_t ip;
  std::memcpy(&ip, bytes, 4);
  return Gid::FromIpv4(ip);
}

TEST(MulticastGroupsTest, AttachDetachAndLimits) {
  MulticastGroups t;
  Qp a, b;
  bool created = false, emptied = false;
  const Gid g = GroupGid(0);
  EXPECT_EQ(t.Find(g), nullptr);
  ASSERT_TRUE(t.Attach(g, &a, &created));
  EXPECT_TRUE(created);
  ASSERT_TRUE(t.Attach(g, &b, &created));
  EXPECT_FALSE(created);
  EXPECT_TRUE(t.IsAttached(g, &a));
  ASSERT_NE(t.Find(g), nullptr);
  EXPECT_EQ(t.Find(g)->qps.size(), 2u);
  EXPECT_FALSE(t.Detach(GroupGid(1), &a, &emptied));  // not attached there
  ASSERT_TRUE(t.Detach(g, &a, &emptied));
  EXPECT_FALSE(emptied);
  EXPECT_FALSE(t.Detach(g, &a, &emptied));  // twice
  ASSERT_TRUE(t.Detach(g, &b, &emptied));
  EXPECT_TRUE(emptied);
  EXPECT_EQ(t.group_count(), 0u);
  // A group holds at most kMaxQpsPerGroup QPs.
  std::vector<Qp> many(MulticastGroups::kMaxQpsPerGroup + 1);
  for (uint32_t i = 0; i < MulticastGroups::kMaxQpsPerGroup; ++i)
    ASSERT_TRUE(t.Attach(g, &many[i], &created));
  EXPECT_FALSE(t.Attach(g, &many.back(), &created));
}

TEST(MulticastGidTest, WhichGidsAreMulticast) {
  EXPECT_TRUE(GroupGid(0).IsMulticast());
  uint32_t ip;
  const uint8_t unicast[4] = {10, 1, 2, 3};
  std::memcpy(&ip, unicast, 4);
  EXPECT_FALSE(Gid::FromIpv4(ip).IsMulticast());
  Gid v6;
  v6.raw[0] = 0xff;
  v6.raw[1] = 0x0e;
  EXPECT_TRUE(v6.IsMulticast());
  v6.raw[0] = 0xfd;
  EXPECT_FALSE(v6.IsMulticast());
}

class MulticastTest : public RcPairTest {
 protected:
  void SetUp() override {
    QpOptions o;
    o.type = QpType::kUd;
    Open(o);
  }
  // Sends `n` datagrams of `len` bytes from a_ to the group.
  void SendToGroup(const Gid& group, int n, uint32_t len) {
    AddressVector av;
    av.is_global = true;
    av.dgid = group;
    Ah* ah = nullptr;
    ASSERT_EQ(a_.dev->CreateAh(a_.pd, av, nullptr, &ah), 0);
    for (int i = 0; i < n; ++i) {
      a_.buf[0] = static_cast<uint8_t>(0xA0 + i);
      Sge s = SgeOf(a_, 0, len);
      SendWr wr = MakeWr(WrOpcode::kSend, 100 + i, {&s, 1});
      wr.send_flags = kSignaled;
      wr.ah = ah;
      wr.remote_qpn = kMulticastQpn;
      wr.remote_qkey = 0x11111111;
      ASSERT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
      auto c = PollN(a_, 1);
      ASSERT_EQ(c.size(), 1u);
      EXPECT_EQ(c[0].status, WcStatus::kSuccess);
    }
    EXPECT_EQ(a_.dev->DestroyAh(ah), 0);
  }
};

TEST_F(MulticastTest, AttachedQpReceivesWithTheGroupInItsGrh) {
  const Gid group = GroupGid(2);
  ASSERT_EQ(b_.dev->AttachMulticast(b_.qp, group), 0);
  for (int i = 0; i < 4; ++i) {
    Sge r = SgeOf(b_, 4096 * i, 40 + 512);
    ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{static_cast<uint64_t>(i), {&r, 1}}), 0);
  }
  SendToGroup(group, 4, 512);
  auto c = PollN(b_, 4);
  ASSERT_EQ(c.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(c[i].status, WcStatus::kSuccess);
    EXPECT_EQ(c[i].byte_len, 40u + 512u);
    EXPECT_EQ(c[i].src_qp, a_.dev->QpNum(a_.qp));
    const uint8_t* grh = &b_.buf[4096 * c[i].wr_id];
    // RoCE v2 over IPv4: the IPv4 header's destination (the group) ends the
    // 40-byte area.
    EXPECT_EQ(std::memcmp(grh + 36, &group.raw[12], 4), 0);
    EXPECT_EQ(grh[40], 0xA0 + c[i].wr_id);
  }
  EXPECT_EQ(StatsOf(*a_.dev).tx_multicast_packets, 4u);
  EXPECT_EQ(StatsOf(*b_.dev).rx_multicast_packets, 4u);
  // An attached QP cannot be destroyed; detached it can, and a detached QP
  // hears nothing more.
  EXPECT_EQ(b_.dev->DestroyQp(b_.qp), EBUSY);
  EXPECT_EQ(b_.dev->DetachMulticast(b_.qp, group), 0);
  EXPECT_EQ(b_.dev->DetachMulticast(b_.qp, group), EINVAL);
  Sge r = SgeOf(b_, 0, 40 + 512);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{9, {&r, 1}}), 0);
  SendToGroup(group, 2, 512);
  EXPECT_TRUE(PollFor(b_, std::chrono::milliseconds(100)).empty());
}

TEST_F(MulticastTest, RefusesWhatTheKernelRefuses) {
  uint32_t ip;
  const uint8_t unicast[4] = {127, 9, 9, 9};
  std::memcpy(&ip, unicast, 4);
  EXPECT_EQ(b_.dev->AttachMulticast(b_.qp, Gid::FromIpv4(ip)), EINVAL);
  EXPECT_EQ(b_.dev->DetachMulticast(b_.qp, GroupGid(3)), EINVAL);
  // Attaching twice is a no-op: one detach undoes it.
  EXPECT_EQ(b_.dev->AttachMulticast(b_.qp, GroupGid(3)), 0);
  EXPECT_EQ(b_.dev->AttachMulticast(b_.qp, GroupGid(3)), 0);
  EXPECT_EQ(b_.dev->DetachMulticast(b_.qp, GroupGid(3)), 0);
  EXPECT_EQ(b_.dev->DetachMulticast(b_.qp, GroupGid(3)), EINVAL);
  // Only UD QPs.
  Qp* rc = nullptr;
  QpCaps caps{4, 4, 1, 1, 0};
  ASSERT_EQ(b_.dev->CreateQp(b_.pd, QpType::kRc, b_.cq, b_.cq, nullptr, &caps, false, nullptr, &rc),
            0);
  EXPECT_EQ(b_.dev->AttachMulticast(rc, GroupGid(3)), EINVAL);
  EXPECT_EQ(b_.dev->DestroyQp(rc), 0);
}

// The device's group limit is the transport's capability, and it holds:
// past it ibv_attach_mcast is ENOMEM (the kernel's answer past rxe's
// max_mcast_grp), and a QP can attach again once a group is left.
TEST_F(MulticastTest, GroupLimitIsTheTransportsAndHolds) {
  uint32_t groups = 0;
  {
    std::lock_guard lock(b_.dev->engine().mu_);
    groups = EngineTestPeer::transport(b_.dev->engine()).max_multicast_groups();
  }
  EXPECT_GT(groups, 0u) << "the UDP transport (under shared memory or not) joins groups";
  EXPECT_EQ(b_.dev->attr().max_mcast_grp, groups);
  EXPECT_EQ(b_.dev->attr().max_mcast_qp_attach, MulticastGroups::kMaxQpsPerGroup);
  EXPECT_EQ(b_.dev->attr().max_total_mcast_qp_attach, MulticastGroups::kMaxAttachments);
  ASSERT_LE(groups, 100u);  // GroupGid(10 + i) stays a distinct group
  for (uint32_t i = 0; i < groups; ++i)
    ASSERT_EQ(b_.dev->AttachMulticast(b_.qp, GroupGid(10 + static_cast<int>(i))), 0) << i;
  const Gid one_more = GroupGid(10 + static_cast<int>(groups));
  EXPECT_EQ(b_.dev->AttachMulticast(b_.qp, one_more), ENOMEM);
  // Another QP into a group already joined needs no new group.
  EXPECT_EQ(a_.dev->AttachMulticast(a_.qp, GroupGid(10)), 0);
  EXPECT_EQ(a_.dev->DetachMulticast(a_.qp, GroupGid(10)), 0);
  EXPECT_EQ(b_.dev->DetachMulticast(b_.qp, GroupGid(10)), 0);
  EXPECT_EQ(b_.dev->AttachMulticast(b_.qp, one_more), 0);
  EXPECT_EQ(b_.dev->DetachMulticast(b_.qp, one_more), 0);
  for (uint32_t i = 1; i < groups; ++i)
    EXPECT_EQ(b_.dev->DetachMulticast(b_.qp, GroupGid(10 + static_cast<int>(i))), 0) << i;
}

// A transport that joins no multicast group: the UDP transport with
// JoinMulticast and max_multicast_groups left at Transport's defaults.
class NoGroupsTransport final : public transport::Transport {
 public:
  explicit NoGroupsTransport(std::unique_ptr<transport::Transport> udp) : udp_(std::move(udp)) {}
  std::span<const transport::Endpoint> locals() const override { return udp_->locals(); }
  int SendBurst(const transport::TxPacket* p, int n) override { return udp_->SendBurst(p, n); }
  int RecvBurst(transport::RxPacket* p, int n) override { return udp_->RecvBurst(p, n); }
  int pollable_fd() const override { return udp_->pollable_fd(); }
  const transport::TransportCounters& counters() const override { return udp_->counters(); }

 private:
  std::unique_ptr<transport::Transport> udp_;
};

// Over a transport without groups the device reports no multicast at all,
// and ibv_attach_mcast and ibv_detach_mcast are EOPNOTSUPP whatever their
// arguments: the kernel's ib_attach_mcast and ib_detach_mcast check that
// the device has the verb before they check the GID or the QP.
TEST(MulticastCapabilityTest, TransportWithoutGroupsMakesADeviceWithoutMulticast) {
  const EngineConfig config = TestConfig(2);
  std::string error;
  auto udp = transport::CreateTransport(config.udp, transport::TransportMode::kUdp, &error);
  ASSERT_NE(udp, nullptr) << error;
  auto dev = Device::Create(std::make_unique<NoGroupsTransport>(std::move(udp)), config);
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(dev->attr().max_mcast_grp, 0u);
  EXPECT_EQ(dev->attr().max_mcast_qp_attach, 0u);
  EXPECT_EQ(dev->attr().max_total_mcast_qp_attach, 0u);
  QpOptions o;
  o.type = QpType::kUd;
  o.buf_size = 4096;
  Side s;
  SetupSide(s, dev, o);
  Connect(s, s, o);  // RTS
  EXPECT_EQ(dev->AttachMulticast(s.qp, GroupGid(4)), EOPNOTSUPP);
  uint32_t ip;
  const uint8_t unicast[4] = {127, 9, 9, 9};
  std::memcpy(&ip, unicast, 4);
  EXPECT_EQ(dev->AttachMulticast(s.qp, Gid::FromIpv4(ip)), EOPNOTSUPP);
  EXPECT_EQ(dev->DetachMulticast(s.qp, GroupGid(4)), EOPNOTSUPP);
  // The device otherwise works: a datagram to its own QP arrives.
  Sge r = SgeOf(s, 2048, 1024);
  ASSERT_EQ(dev->PostRecv(s.qp, RecvWr{1, {&r, 1}}), 0);
  AddressVector av;
  av.is_global = true;
  av.dgid = dev->gids()[0];
  Ah* ah = nullptr;
  ASSERT_EQ(dev->CreateAh(s.pd, av, nullptr, &ah), 0);
  Sge snd = SgeOf(s, 0, 100);
  SendWr wr = MakeWr(WrOpcode::kSend, 2, {&snd, 1});
  wr.ah = ah;
  wr.remote_qpn = dev->QpNum(s.qp);
  wr.remote_qkey = 0x11111111;
  ASSERT_EQ(dev->PostSend(s.qp, wr), 0);
  EXPECT_EQ(PollN(s, 2).size(), 2u);
  EXPECT_EQ(dev->DestroyAh(ah), 0);
}

}  // namespace
}  // namespace softrnic::engine::testing
