// A thread blocked in GetCqEvent (ibv_get_cq_event) applies the packets
// that make its event itself (device_queues.cc, AwaitChannelEvent), so a
// blocked server wakes once per event instead of twice (issue 17). Shown
// with the receiving device's progress thread stopped: only the waiter can
// then turn the arriving SEND into a completion and an event.
#include <fcntl.h>

#include <chrono>
#include <future>

#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

struct ChannelSide {
  Side side;
  CompletionChannel* channel = nullptr;
};

// SetupSide, with the CQ on a completion channel.
void SetupChannelSide(ChannelSide& c, std::shared_ptr<Device> dev, const QpOptions& o) {
  ASSERT_EQ(dev->CreateCompletionChannel(&c.channel), 0);
  SetupSide(c.side, std::move(dev), o, c.channel);
}

TEST(EventWait, BlockedWaiterMakesItsOwnEventWithoutTheProgressThread) {
  const QpOptions o;
  Side a;
  ChannelSide b;
  SetupSide(a, MakeDevice(0), o);
  SetupChannelSide(b, MakeDevice(1), o);
  Connect(a, b.side, o);
  Connect(b.side, a, o);
  Engine& engine = b.side.dev->engine();
  engine.StopProgressThread();

  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    Sge recv = SgeOf(b.side, 4096, 256);
    ASSERT_EQ(b.side.dev->PostRecv(b.side.qp, RecvWr{uint64_t(100 + round), {&recv, 1}}), 0);
    ASSERT_EQ(b.side.dev->ArmCq(b.side.cq, false), 0);
    auto waiter = std::async(std::launch::async, [&] {
      void* handle = nullptr;
      const int rc = b.side.dev->GetCqEvent(b.channel, &handle);
      return std::make_pair(rc, handle);
    });
    // The waiter is blocked (nothing was sent yet).
    EXPECT_EQ(waiter.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);

    FillPattern(a.buf, 0, 256, 40 + round);
    Sge send = SgeOf(a, 0, 256);
    ASSERT_EQ(a.dev->PostSend(a.qp, MakeWr(WrOpcode::kSend, uint64_t(round), {&send, 1})), 0);
    if (waiter.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      // Unblock the waiter the old way before failing: a progress thread.
      engine.StartProgressThread();
      waiter.wait();
      FAIL() << "the blocked waiter did not apply the SEND itself";
    }
    const auto [rc, handle] = waiter.get();
    ASSERT_EQ(rc, 0);
    EXPECT_EQ(handle, &b.side);
    b.side.dev->AckCqEvents(b.side.cq, 1);

    Completion wc[2];
    ASSERT_EQ(b.side.dev->PollCq(b.side.cq, 2, wc), 1);
    EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
    EXPECT_EQ(wc[0].wr_id, uint64_t(100 + round));
    EXPECT_EQ(wc[0].byte_len, 256u);
    EXPECT_EQ(FirstDiff(b.side.buf.data() + 4096, a.buf.data(), 256), -1);
    // The sender's completion needs b's ACK, which the waiter's pass sent.
    const auto sent = PollN(a, 1);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].status, WcStatus::kSuccess);
  }
}

// A channel fd the application made non-blocking is only read: no event
// yet is EAGAIN at once, whatever waits on the sockets.
TEST(EventWait, NonBlockingChannelIsOnlyRead) {
  const QpOptions o;
  ChannelSide b;
  SetupChannelSide(b, MakeDevice(1), o);
  const int fd = b.side.dev->CompletionChannelFd(b.channel);
  ASSERT_EQ(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  ASSERT_EQ(b.side.dev->ArmCq(b.side.cq, false), 0);
  void* handle = nullptr;
  EXPECT_EQ(b.side.dev->GetCqEvent(b.channel, &handle), EAGAIN);
}

}  // namespace
}  // namespace softrnic::engine::testing
