// Who takes the packets when a CQ is armed for a channel (progress.cc,
// AppAboutToBlock). UCP arms the CQs of the interfaces it is not using, so
// that traffic on them wakes its worker, and goes on polling the others
// millions of times a second. Such an application is not about to block:
// the progress thread must leave the packets to its polls, as for one with
// no CQ armed. Taking them itself cost UCP's tag_lat over UDP 17 us instead
// of 5 (every packet's wake-up preempted one of the two polling processes).
// Over shared memory the progress thread never takes packets from a polling
// application (the doorbell path), so this is a UDP test.
#include "engine_test_peer.h"
#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

// Polls `side`'s CQ for `how_long`; whether the progress thread left the
// packets to these polls at some point meanwhile.
bool PollingIsLeftThePackets(Side& side, std::chrono::milliseconds how_long) {
  Completion wc[4];
  bool left = false;
  const auto until = std::chrono::steady_clock::now() + how_long;
  while (std::chrono::steady_clock::now() < until) {
    EXPECT_EQ(side.dev->PollCq(side.cq, 4, wc), 0);
    left = left || EngineTestPeer::AppOwnsPackets(side.dev->engine());
  }
  return left;
}

TEST_F(RcPairTest, AnArmedCqThatIsNotPolledLeavesPacketsToThePolls) {
  if (!TransportIsUdp()) GTEST_SKIP() << "the progress thread takes packets from polls on UDP only";
  Open({});
  CompletionChannel* channel = nullptr;
  Cq* idle_cq = nullptr;
  ASSERT_EQ(b_.dev->CreateCompletionChannel(&channel), 0);
  ASSERT_EQ(b_.dev->CreateCq(16, channel, nullptr, &idle_cq), 0);
  ASSERT_EQ(b_.dev->ArmCq(idle_cq, false), 0);
  // The application polls another CQ, long after arming: the arm does not
  // mean it is about to block.
  EXPECT_TRUE(PollingIsLeftThePackets(b_, std::chrono::milliseconds(200)));
  // And it is still served: A's WRITEs land and complete.
  for (int i = 0; i < 5; ++i) WriteAndCheck(a_, b_, 8192, 4096, 60 + i);
  ASSERT_EQ(b_.dev->DestroyCq(idle_cq), 0);
  ASSERT_EQ(b_.dev->DestroyCompletionChannel(channel), 0);
}

// The other half: an application that arms and then makes only a few calls
// before it blocks on the channel is about to block, and the progress thread
// keeps taking the packets (it would otherwise leave them for up to 200 us
// to an application that is asleep).
TEST_F(RcPairTest, ArmingBeforeAFewLastPollsMeansAboutToBlock) {
  if (!TransportIsUdp()) GTEST_SKIP() << "the progress thread takes packets from polls on UDP only";
  Open({});
  CompletionChannel* channel = nullptr;
  Cq* event_cq = nullptr;
  ASSERT_EQ(b_.dev->CreateCompletionChannel(&channel), 0);
  ASSERT_EQ(b_.dev->CreateCq(16, channel, nullptr, &event_cq), 0);
  // Re-armed before every three polls, as a thread that arms, polls to
  // close the race and blocks would look if each of its waits ended at once.
  Completion wc[4];
  const auto poll_after_arming = [&] {
    ASSERT_EQ(b_.dev->ArmCq(event_cq, false), 0);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(b_.dev->PollCq(event_cq, 4, wc), 0);
  };
  // A leave that began before the first arm ends with it (ArmCq wakes the
  // progress thread); only what follows is sampled.
  const auto settled = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  while (std::chrono::steady_clock::now() < settled) poll_after_arming();
  bool left = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < until) {
    poll_after_arming();
    left = left || EngineTestPeer::AppOwnsPackets(b_.dev->engine());
  }
  EXPECT_FALSE(left);
  ASSERT_EQ(b_.dev->DestroyCq(event_cq), 0);
  ASSERT_EQ(b_.dev->DestroyCompletionChannel(channel), 0);
}

}  // namespace
}  // namespace softrnic::engine::testing
