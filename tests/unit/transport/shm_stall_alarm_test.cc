// The stall alarm (transport/shm_stall_alarm.cc): a same-host sender ends
// the nap of a peer's progress thread when its packets sit unread, and
// leaves alone a peer that reads them or does not nap.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "common/shared_futex.h"
#include "transport/shm_transport.h"

#include "shm_test_transports.h"

namespace softrnic::transport {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// One RC SEND ONLY packet (BTH, ICRC) for QP 0x123.
bool SendOne(ShmTransport& from, const Endpoint& to) {
  std::array<uint8_t, 16> bytes{};
  bytes[0] = 0x04;
  bytes[2] = bytes[3] = 0xFF;
  bytes[7] = 0x23;
  bytes[6] = 0x01;
  TxPacket p;
  p.data = bytes.data();
  p.length = static_cast<uint32_t>(bytes.size());
  p.dst = to;
  return from.SendBurst(&p, 1) == 1;
}

int Read(ShmTransport& t) {
  RxPacket rx[8];
  return t.RecvBurst(rx, 8);
}

// A napping progress thread of `t`, as engine/progress/progress.cc naps: the
// word to 1, then a futex wait of at most `max`. How long it napped.
class Napper {
 public:
  Napper(ShmTransport& t, std::chrono::nanoseconds max) : word_(t.nap_word()) {
    word_->store(1, std::memory_order_seq_cst);
    const auto start = Clock::now();
    thread_ = std::thread([this, max, start] {
      while (word_->load(std::memory_order_seq_cst) == 1 && Clock::now() - start < max)
        SharedFutexWait(word_, 1, max - (Clock::now() - start));
      napped_ = Clock::now() - start;
      done_.store(true);
    });
  }
  ~Napper() { Join(); }
  bool done() const { return done_.load(); }
  Clock::duration Join() {
    if (thread_.joinable()) thread_.join();
    return napped_;
  }

 private:
  std::atomic<uint32_t>* word_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  Clock::duration napped_{};
};

class ShmStallAlarm : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = MakeShm(32);
    b_ = MakeShm(33);
    ASSERT_TRUE(a_ && b_);
    to_b_ = b_->locals()[0];
  }
  // A polls (its receives run the alarm checks) for `d` or until `stop`.
  template <class Stop>
  void PollA(Clock::duration d, Stop stop) {
    const auto until = Clock::now() + d;
    while (Clock::now() < until && !stop()) Read(*a_);
  }
  std::unique_ptr<ShmTransport> a_, b_;
  Endpoint to_b_;
};

TEST_F(ShmStallAlarm, UnreadPacketsEndThePeersNap) {
  Napper nap(*b_, std::chrono::seconds(20));
  ASSERT_TRUE(SendOne(*a_, to_b_));
  PollA(std::chrono::seconds(10), [&] { return nap.done(); });
  const auto napped = nap.Join();
  // Ended by A's alarm, after the packet waited kStallAlarm: not at the
  // nap's own end (20 s), and not before the alarm was due.
  EXPECT_LT(napped, std::chrono::seconds(5));
  EXPECT_GE(napped, ShmTransport::kStallAlarm);
  EXPECT_EQ(a_->counters().shm_stall_alarms, 1u);
  EXPECT_EQ(b_->nap_word()->load(), 0u);
  // The packet is still there for B to read.
  EXPECT_EQ(Read(*b_), 1);
}

TEST_F(ShmStallAlarm, APeerThatReadsIsNotWoken) {
  // B's "application" reads every packet while its progress thread naps;
  // A checks once per packet, so each check finds the reader moved on.
  Napper nap(*b_, milliseconds(300));
  const auto until = Clock::now() + milliseconds(250);
  int sent = 0, read = 0;
  while (Clock::now() < until) {
    if (SendOne(*a_, to_b_)) ++sent;
    for (uint64_t i = 0; i < ShmTransport::kStallCheckEvery; ++i) Read(*a_);
    read += Read(*b_);
  }
  EXPECT_GT(sent, 0);
  const auto napped = nap.Join();
  EXPECT_GE(napped, milliseconds(300));
  EXPECT_EQ(a_->counters().shm_stall_alarms, 0u);
  read += Read(*b_);
  EXPECT_EQ(read, sent);
}

TEST_F(ShmStallAlarm, APeerThatDoesNotNapIsLeftAlone) {
  ASSERT_TRUE(SendOne(*a_, to_b_));
  // Awake (reads its rings) or asleep (was rung a doorbell): no deadline
  // for A's engine, and no alarm however long the packet waits.
  EXPECT_FALSE(a_->next_deadline().has_value());
  PollA(milliseconds(20), [] { return false; });
  EXPECT_EQ(a_->counters().shm_stall_alarms, 0u);
  EXPECT_EQ(b_->nap_word()->load(), 0u);
  EXPECT_EQ(Read(*b_), 1);
}

TEST_F(ShmStallAlarm, ASleepingSenderWakesForTheCheck) {
  // An engine that sleeps after publishing to a napping peer wakes by
  // next_deadline() to look again: at once before the first look, then
  // kStallAlarm after the reader was last seen to move.
  b_->nap_word()->store(1);
  ASSERT_TRUE(SendOne(*a_, to_b_));
  ASSERT_TRUE(a_->next_deadline().has_value());
  EXPECT_LE(*a_->next_deadline(), Clock::now());
  // The first check (after a wake-up) starts the clock.
  a_->PrepareToSleep();
  a_->WokeUp();
  Read(*a_);
  ASSERT_TRUE(a_->next_deadline().has_value());
  EXPECT_GT(*a_->next_deadline(), Clock::now() - milliseconds(1));
  EXPECT_LE(*a_->next_deadline(), Clock::now() + ShmTransport::kStallAlarm);
  // Read: nothing to watch any more.
  EXPECT_EQ(Read(*b_), 1);
  for (uint64_t i = 0; i < ShmTransport::kStallCheckEvery; ++i) Read(*a_);
  EXPECT_FALSE(a_->next_deadline().has_value());
  b_->nap_word()->store(0);
}

}  // namespace
}  // namespace softrnic::transport
