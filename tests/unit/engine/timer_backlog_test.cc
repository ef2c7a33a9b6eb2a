// Timers wait for a drained receive pass (progress.cc, PollOnceLocked;
// issue 17): while received packets are still waiting in the transport, a
// Local ACK Timeout could fire for packets whose ACKs are among them, so a
// pass that stops before draining leaves the timers for a later one, but
// never more than 2 ms past due. The device's transport is replaced by one
// that always has more to deliver (junk a pass drops), so no pass drains.
#include <fcntl.h>

#include "engine_test_peer.h"
#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

// Sends nowhere (counted); while flooding, every receive call returns half
// a burst of packets for no QP: "more waiting" to the progress pass.
class FloodTransport final : public transport::Transport {
 public:
  explicit FloodTransport(std::span<const transport::Endpoint> locals)
      : locals_(locals.begin(), locals.end()) {}
  std::span<const transport::Endpoint> locals() const override { return locals_; }
  int SendBurst(const transport::TxPacket*, int n) override {
    sent += n;
    return n;
  }
  int RecvBurst(transport::RxPacket* packets, int n) override {
    if (!flooding) return 0;
    const int k = std::min(n, 16);  // progress.cc's kRxBurst / 2: not drained
    for (int i = 0; i < k; ++i) {
      packets[i] = transport::RxPacket{};
      packets[i].data = junk_;
      packets[i].length = sizeof junk_;  // too short for BTH + ICRC: dropped
      packets[i].src = locals_[0];
    }
    return k;
  }
  int pollable_fd() const override { return -1; }
  const transport::TransportCounters& counters() const override { return counters_; }

  bool flooding = false;
  int sent = 0;

 private:
  std::vector<transport::Endpoint> locals_;
  transport::TransportCounters counters_;
  uint8_t junk_[8] = {};
};

TEST(TimerBacklogTest, TimeoutWaitsForADrainedPassAtMostTheGrace) {
  QpOptions o;
  o.timeout = 1;  // 8.2 us: due at once
  Side a, b;
  SetupSide(a, MakeDevice(0), o);
  SetupSide(b, MakeDevice(1), o);
  Connect(a, b, o);
  Connect(b, a, o);
  Engine& e = a.dev->engine();
  e.StopProgressThread();
  FloodTransport* flood = nullptr;
  {
    SpinLock lock(e.mu_);
    auto t = std::make_unique<FloodTransport>(EngineTestPeer::transport(e).locals());
    flood = t.get();
    EngineTestPeer::ReplaceTransport(e, std::move(t));
  }
  // The backlog starts before the WRITE leaves (the post may send it at
  // once, or the next pass does), and the clock before the post.
  flood->flooding = true;
  const auto sent_at = std::chrono::steady_clock::now();
  Sge sg = SgeOf(a, 0, 8);
  ASSERT_EQ(a.dev->PostSend(a.qp, MakeWr(WrOpcode::kRdmaWrite, 1, {&sg, 1}, Addr(b, 0),
                                         b.dev->MrRkey(b.mr))),
            0);
  auto timeouts = [&] { return EngineTestPeer::stats(e).retransmit_timeouts; };
  // Passes that end within 1.5 ms of the send (due after ~8 us + a 50 us
  // timer cadence, plus the 2 ms grace): none may run the timeout.
  int early_passes = 0;
  uint64_t fired = 0;
  std::chrono::steady_clock::duration fired_after{};
  while (std::chrono::steady_clock::now() - sent_at < std::chrono::milliseconds(50)) {
    {
      SpinLock lock(e.mu_);
      EngineTestPeer::PollOnce(e);
      fired = timeouts();
    }
    const auto after = std::chrono::steady_clock::now() - sent_at;
    if (after < std::chrono::microseconds(1500)) {
      ++early_passes;
      ASSERT_EQ(fired, 0u) << "a timeout ran while packets were waiting, "
                           << std::chrono::duration<double, std::micro>(after).count()
                           << " us after the send";
    }
    if (fired > 0) {
      fired_after = after;
      break;
    }
  }
  EXPECT_GE(flood->sent, 1) << "the WRITE never left";
  EXPECT_GT(fired, 0u) << "the timers never ran under a backlog that does not end";
  std::printf("%d passes within 1.5 ms, none ran the timers; the timeout ran %.0f us after the send\n",
              early_passes, std::chrono::duration<double, std::micro>(fired_after).count());
  if (early_passes == 0) GTEST_SKIP() << "no pass ended within 1.5 ms of the send (machine too slow)";
  // Drained: the timers run at the next pass that is due.
  flood->flooding = false;
  const uint64_t before = fired;
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  SpinLock lock(e.mu_);
  EngineTestPeer::PollOnce(e);
  EXPECT_GT(timeouts(), before) << "a drained pass ran no timer that was due";
}

}  // namespace
}  // namespace softrnic::engine::testing
