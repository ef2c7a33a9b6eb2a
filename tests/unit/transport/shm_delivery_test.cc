// What the shared-memory transport knows of a packet the engine's Local ACK
// Timeout would call lost (Transport::DeliveryPending): a ring loses
// nothing, so a packet still unread by a peer that keeps reading, or the
// peer's answer still unread on our side, is late, not lost; a peer that
// reads nothing for a whole period is not waited for, and a UDP
// destination is never known.
#include <arpa/inet.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <thread>

#include "transport/shm_transport.h"

#include "shm_test_transports.h"

namespace softrnic::transport {
namespace {

using std::chrono::milliseconds;

constexpr auto kLongPeriod = std::chrono::seconds(30);

// A packet to QP `dest_qpn`: an RC SEND ONLY BTH (IBA 9.2) and an ICRC.
std::array<uint8_t, 16> PacketFor(uint32_t dest_qpn) {
  std::array<uint8_t, 16> p{};
  p[0] = 0x04;  // RC SEND Only
  p[2] = p[3] = 0xFF;  // default P_Key
  p[5] = static_cast<uint8_t>(dest_qpn >> 16);
  p[6] = static_cast<uint8_t>(dest_qpn >> 8);
  p[7] = static_cast<uint8_t>(dest_qpn);
  return p;
}

// Sends one packet for `dest_qpn` from `from` to `to`; true if it went.
bool Send(ShmTransport& from, const Endpoint& to, uint32_t dest_qpn) {
  const auto bytes = PacketFor(dest_qpn);
  TxPacket p;
  p.data = bytes.data();
  p.length = static_cast<uint32_t>(bytes.size());
  p.dst = to;
  return from.SendBurst(&p, 1) == 1;
}

// Reads at most `n` packets; how many it got.
int Read(ShmTransport& t, int n) {
  RxPacket rx[8];
  return t.RecvBurst(rx, n);
}

// Two transports of this process, a and b, each the other's same-host peer.
class ShmDeliveryPending : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = MakeShm(30);
    b_ = MakeShm(31);
    ASSERT_TRUE(a_ && b_);
    to_a_ = a_->locals()[0];
    to_b_ = b_->locals()[0];
  }
  bool PendingAtA(uint32_t dest_qpn, uint32_t local_qpn,
                  std::chrono::nanoseconds period = kLongPeriod) {
    return a_->DeliveryPending(to_b_, dest_qpn, local_qpn, period);
  }
  std::unique_ptr<ShmTransport> a_, b_;
  Endpoint to_a_, to_b_;
};

TEST_F(ShmDeliveryPending, APacketUnreadByAReadingPeerIsPendingUntilRead) {
  // Nothing was ever sent there: nothing is known.
  EXPECT_FALSE(PendingAtA(0x123, 0x456));
  ASSERT_TRUE(Send(*a_, to_b_, 0x123));
  EXPECT_TRUE(PendingAtA(0x123, 0x456));
  // Another QP's packet is not in the ring.
  EXPECT_FALSE(PendingAtA(0x124, 0x456));
  ASSERT_EQ(Read(*b_, 8), 1);
  // Read: whatever became of it, the transport no longer holds it.
  EXPECT_FALSE(PendingAtA(0x123, 0x456));
}

TEST_F(ShmDeliveryPending, APeerThatReadsNothingForAPeriodIsNotWaitedFor) {
  ASSERT_TRUE(Send(*a_, to_b_, 0x10));
  ASSERT_TRUE(Send(*a_, to_b_, 0x20));
  const milliseconds period(50);
  EXPECT_TRUE(PendingAtA(0x20, 0x1, period));
  // b reads nothing for longer than the period: stopped, as far as anyone
  // can tell; the timer goes on.
  std::this_thread::sleep_for(period + milliseconds(20));
  EXPECT_FALSE(PendingAtA(0x20, 0x1, period));
  // b reads again (one packet: 0x10's, the ring is FIFO): 0x20's is late again.
  ASSERT_EQ(Read(*b_, 1), 1);
  EXPECT_TRUE(PendingAtA(0x20, 0x1, period));
  EXPECT_FALSE(PendingAtA(0x10, 0x1, period));
}

TEST_F(ShmDeliveryPending, AnAnswerUnreadOnOurSideIsPendingUntilRead) {
  ASSERT_TRUE(Send(*a_, to_b_, 0x123));  // a's request
  ASSERT_EQ(Read(*b_, 8), 1);
  ASSERT_TRUE(Send(*b_, to_a_, 0x456));  // b's answer to a's QP 0x456
  EXPECT_TRUE(PendingAtA(0x123, 0x456));
  // An answer to another QP of a's does not count.
  EXPECT_FALSE(PendingAtA(0x123, 0x457));
  ASSERT_EQ(Read(*a_, 8), 1);
  EXPECT_FALSE(PendingAtA(0x123, 0x456));
}

TEST_F(ShmDeliveryPending, AUdpDestinationIsNeverPending) {
  // Nobody publishes this endpoint: its packets go to UDP, where they may be lost.
  const Endpoint nobody{Gid::FromIpv4(inet_addr(TestIp(37).c_str())), TestPort()};
  ASSERT_TRUE(Send(*a_, nobody, 0x123));
  EXPECT_FALSE(a_->DeliveryPending(nobody, 0x123, 0x456, kLongPeriod));
}

}  // namespace
}  // namespace softrnic::transport
