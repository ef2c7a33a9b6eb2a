// A thread blocked in GetCqEvent (ibv_get_cq_event) applies the packets
// that make its event itself (device_queues.cc, AwaitChannelEvent), so a
// blocked server wakes once per event instead of twice (issue 17). Shown
// with the receiving device's progress thread stopped: only the waiter can
// then turn the arriving SEND into a completion and an event.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "engine_test_peer.h"
#include "rc_pair.h"
#include "transport/shm_transport.h"

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

// a on device 0 and b (its CQ on a channel) on device 1, connected.
void OpenToChannelSide(Side& a, ChannelSide& b, const QpOptions& o) {
  SetupSide(a, MakeDevice(0), o);
  SetupChannelSide(b, MakeDevice(1), o);
  Connect(a, b.side, o);
  Connect(b.side, a, o);
}

// Whether the channel's fd polls readable (an event byte is in its pipe).
bool Readable(const ChannelSide& c) {
  pollfd p{c.side.dev->CompletionChannelFd(c.channel), POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

// Posts a 64-byte SEND from `from` to `to` (a receive posted for it first).
void PostSendTo(Side& from, Side& to, uint64_t id) {
  Sge recv = SgeOf(to, 4096, 64);
  ASSERT_EQ(to.dev->PostRecv(to.qp, RecvWr{id, {&recv, 1}}), 0);
  Sge send = SgeOf(from, 0, 64);
  ASSERT_EQ(from.dev->PostSend(from.qp, MakeWr(WrOpcode::kSend, id, {&send, 1})), 0);
}

TEST(EventWait, BlockedWaiterMakesItsOwnEventWithoutTheProgressThread) {
  const QpOptions o;
  Side a;
  ChannelSide b;
  OpenToChannelSide(a, b, o);
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
    // Made by the waiter's own pass, so taken without the pipe: no byte
    // went through it, and none is left behind.
    EXPECT_EQ(StatsOf(*b.side.dev).cq_events_inline, uint64_t(round + 1));
    EXPECT_FALSE(Readable(b));
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

// The ibv_rc_pingpong -e pattern: a thread that arms its CQ, blocks in
// GetCqEvent, takes the completion and arms again. While it blocks it takes
// the packets itself, so the progress thread leaves them to it as to a
// polling application instead of waking for each one too (on one core that
// second wake-up cost a round trip 80 us instead of 14). Over UDP: over
// shared memory the progress thread never takes packets from a waiter.
TEST(EventWait, ProgressThreadLeavesPacketsToABlockedWaiter) {
  if (!TransportIsUdp()) GTEST_SKIP() << "the progress thread leaves packets to applications on UDP only";
  const QpOptions o;
  Side a;
  ChannelSide b;
  OpenToChannelSide(a, b, o);
  constexpr int kSends = 200;
  for (int i = 0; i < kSends; ++i) {
    Sge recv = SgeOf(b.side, 4096 + 256 * size_t(i % 8), 256);
    ASSERT_EQ(b.side.dev->PostRecv(b.side.qp, RecvWr{uint64_t(i), {&recv, 1}}), 0);
  }
  std::atomic<int> received{0};
  std::thread server([&] {
    while (received.load() < kSends) {
      if (b.side.dev->ArmCq(b.side.cq, false) != 0) return;
      Completion wc[4];
      int n = b.side.dev->PollCq(b.side.cq, 4, wc);
      if (n == 0) {
        void* handle = nullptr;
        if (b.side.dev->GetCqEvent(b.channel, &handle) != 0) return;
        b.side.dev->AckCqEvents(b.side.cq, 1);
        n = b.side.dev->PollCq(b.side.cq, 4, wc);
      }
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(wc[i].status, WcStatus::kSuccess);
        EXPECT_EQ(wc[i].wr_id, uint64_t(received.fetch_add(1)));
      }
    }
  });
  bool left = false;
  for (int i = 0; i < kSends; ++i) {
    Sge send = SgeOf(a, 0, 64);
    ASSERT_EQ(a.dev->PostSend(a.qp, MakeWr(WrOpcode::kSend, uint64_t(i), {&send, 1})), 0);
    ASSERT_EQ(PollN(a, 1).size(), 1u);
    // Waits for the server to block again, looking at the progress thread.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    while (std::chrono::steady_clock::now() < until)
      left = left || EngineTestPeer::AppOwnsPackets(b.side.dev->engine());
  }
  server.join();
  EXPECT_EQ(received.load(), kSends);
  EXPECT_TRUE(left);
}

// A waiter that the progress thread leaves the packets to runs the timers
// too: its SENDs, a third of them dropped, are retransmitted while it
// blocks waiting for their completions.
TEST(EventWait, BlockedWaiterRetransmitsItsOwnRequests) {
  if (!TransportIsUdp()) GTEST_SKIP() << "losses are injected on UDP only";
  QpOptions o;
  o.timeout = 8;  // 1 ms: retransmissions within the test's time
  TestFaults faults;
  faults.drop = 0.3;
  faults.seed = 11;
  ChannelSide a;
  Side b;
  SetupChannelSide(a, MakeDevice(0, faults), o);
  SetupSide(b, MakeDevice(1), o);
  Connect(a.side, b, o);
  Connect(b, a.side, o);
  for (int round = 0; round < 40; ++round) {
    SCOPED_TRACE(round);
    Sge recv = SgeOf(b, 4096, 256);
    ASSERT_EQ(b.dev->PostRecv(b.qp, RecvWr{uint64_t(round), {&recv, 1}}), 0);
    FillPattern(a.side.buf, 0, 256, 50 + round);
    Sge send = SgeOf(a.side, 0, 256);
    ASSERT_EQ(a.side.dev->PostSend(a.side.qp, MakeWr(WrOpcode::kSend, uint64_t(round), {&send, 1})),
              0);
    Completion wc[2];
    int n = 0;
    while (n == 0) {
      ASSERT_EQ(a.side.dev->ArmCq(a.side.cq, false), 0);
      n = a.side.dev->PollCq(a.side.cq, 2, wc);
      if (n > 0) break;
      auto waiter = std::async(std::launch::async, [&] {
        void* handle = nullptr;
        return a.side.dev->GetCqEvent(a.channel, &handle);
      });
      ASSERT_EQ(waiter.wait_for(std::chrono::seconds(10)), std::future_status::ready)
          << "the blocked waiter never retransmitted";
      ASSERT_EQ(waiter.get(), 0);
      a.side.dev->AckCqEvents(a.side.cq, 1);
      n = a.side.dev->PollCq(a.side.cq, 2, wc);
    }
    ASSERT_EQ(n, 1);
    EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
    const auto got = PollN(b, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(FirstDiff(b.buf.data() + 4096, a.side.buf.data(), 256), -1);
  }
}

// Over shared memory ACKs are not delayed (ack_delay.cc), except on a QP
// whose completions are waited for on a channel: there an ACK apart from
// the answer would wake the blocked peer twice per message. Ping-pongs of
// SENDs between two pairs, one with its CQs on channels, one without
// (through the rings: direct SENDs have no ACK).
TEST(EventWait, OverSharedMemoryOnlyQpsOnChannelsDelayTheirAcks) {
  if (TransportIsUdp()) GTEST_SKIP() << "over UDP every QP delays its ACKs";
  const QpOptions o;
  const auto ring_device = [](int which) {
    EngineConfig c = TestConfig(which);
    c.shm_direct = false;
    return MakeDevice(c);
  };
  const auto acks_held = [&](bool channels) {
    ChannelSide a, b;
    if (channels) {
      SetupChannelSide(a, ring_device(0), o);
      SetupChannelSide(b, ring_device(1), o);
    } else {
      SetupSide(a.side, ring_device(0), o);
      SetupSide(b.side, ring_device(1), o);
    }
    Connect(a.side, b.side, o);
    Connect(b.side, a.side, o);
    int sent[2] = {0, 0};
    // Polls `s` (index k) until a receive completes, counting its SENDs'.
    const auto await_recv = [&](Side& s, int k) {
      for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
           std::chrono::steady_clock::now() < until;) {
        Completion wc;
        if (s.dev->PollCq(s.cq, 1, &wc) != 1) continue;
        EXPECT_EQ(wc.status, WcStatus::kSuccess);
        if (wc.opcode == WcOpcode::kRecv) return true;
        ++sent[k];
      }
      return false;
    };
    for (int i = 0; i < 20; ++i) {
      for (int k = 0; k < 2; ++k) {
        Side& from = k == 0 ? a.side : b.side;
        Side& to = k == 0 ? b.side : a.side;
        Sge recv = SgeOf(to, 4096, 64);
        EXPECT_EQ(to.dev->PostRecv(to.qp, RecvWr{uint64_t(i), {&recv, 1}}), 0);
        Sge send = SgeOf(from, 0, 8);
        EXPECT_EQ(from.dev->PostSend(from.qp, MakeWr(WrOpcode::kSend, uint64_t(i), {&send, 1})), 0);
        EXPECT_TRUE(await_recv(to, 1 - k));
      }
    }
    // Every SEND completes (the last ACKs leave after the delay).
    EXPECT_EQ(PollN(a.side, size_t(20 - sent[0])).size(), size_t(20 - sent[0]));
    EXPECT_EQ(PollN(b.side, size_t(20 - sent[1])).size(), size_t(20 - sent[1]));
    // Deferred ACKs: those sent when the receiver polled the SEND's
    // completion (ack_delay.cc: the ACK is held no longer), those that rode
    // along with the next SEND and those whose delay ran out first (a
    // loaded machine: one expiry backs the QP off for the next 64 ACKs).
    // Any shows the ACK was held.
    const auto held = [](const EngineStats& st) {
      return st.acks_flushed_at_poll + st.acks_piggybacked + st.acks_delay_expired;
    };
    return held(StatsOf(*a.side.dev)) + held(StatsOf(*b.side.dev));
  };
  EXPECT_EQ(acks_held(false), 0u);
  EXPECT_GT(acks_held(true), 0u);
}

// Over shared memory the ACK a channel QP held leaves when the receiver's
// application polls the receive (ack_delay.cc), quietly: into the peer's
// ring, the doorbell left for the answer to ring, as when the ACK rode
// along. Here no answer comes: the sender, blocked in ibv_get_cq_event for
// its send completion, stays asleep at the poll and is woken when the delay
// is over (not by its Local ACK Timeout, 69 s here).
TEST(EventWait, OverSharedMemoryAnAckSentAtThePollWakesItsPeerAfterTheDelay) {
  if (TransportIsUdp()) GTEST_SKIP() << "over UDP the ACK's datagram wakes the peer";
  QpOptions o;
  o.timeout = 24;  // caps the delay at 8.6 s
  const auto delay = std::chrono::milliseconds(400);
  const auto device = [&](int which) {
    EngineConfig c = TestConfig(which);
    c.shm_direct = false;  // SENDs through the rings: direct ones have no ACK
    c.selective = false;   // no tail-loss probe wakes the sender early
    c.ack_delay = delay;
    return MakeDevice(c);
  };
  ChannelSide a, b;
  SetupChannelSide(a, device(0), o);
  SetupChannelSide(b, device(1), o);
  Connect(a.side, b.side, o);
  Connect(b.side, a.side, o);
  PostSendTo(b.side, a.side, 1);  // B has sent once: its ACKs may wait
  ASSERT_EQ(PollN(a.side, 1).size(), 1u);
  ASSERT_EQ(PollN(b.side, 1).size(), 1u);
  Device& dev = *a.side.dev;
  dev.engine().StopProgressThread();  // A's only sleeper: the waiter
  auto* shm = dynamic_cast<transport::ShmTransport*>(&EngineTestPeer::transport(dev.engine()));
  ASSERT_NE(shm, nullptr);
  ASSERT_EQ(dev.ArmCq(a.side.cq, false), 0);
  PostSendTo(a.side, b.side, 2);
  auto waiter = std::async(std::launch::async, [&] {
    void* handle = nullptr;
    return dev.GetCqEvent(a.channel, &handle);
  });
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       shm->sleepers() == 0 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(shm->sleepers(), 1);
  const uint64_t rung = TransportCountersOf(*b.side.dev).doorbells_sent;
  ASSERT_EQ(PollN(b.side, 1).size(), 1u);  // the receive: B's ACK leaves now
  const auto polled = std::chrono::steady_clock::now();
  EXPECT_EQ(StatsOf(*b.side.dev).acks_flushed_at_poll, 1u);
  EXPECT_EQ(waiter.wait_for(delay / 4), std::future_status::timeout)
      << "the ACK rang the doorbell at the poll";
  EXPECT_EQ(TransportCountersOf(*b.side.dev).doorbells_sent, rung);
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(waiter.get(), 0);
  dev.AckCqEvents(a.side.cq, 1);
  EXPECT_GE(std::chrono::steady_clock::now() - polled, delay / 4);
  EXPECT_EQ(StatsOf(*b.side.dev).ack_wakes_expired, 1u);
  EXPECT_EQ(TransportCountersOf(*b.side.dev).doorbells_sent, rung + 1);
  const auto c = PollN(a.side, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].opcode, WcOpcode::kSend);
  EXPECT_EQ(StatsOf(*a.side.dev).retransmit_timeouts, 0u);
  dev.engine().StartProgressThread();
}

// Two events the waiter's one pass makes for its channel (two CQs on it):
// it takes one, and the other is in the pipe for whoever reads the channel
// next, as if the progress thread had made both.
TEST(EventWait, SecondEventOfTheWaitersPassGoesThroughThePipe) {
  const QpOptions o;
  Side a1, a2;
  ChannelSide b1, b2;
  SetupSide(a1, MakeDevice(0), o);
  SetupSide(a2, a1.dev, o);
  SetupChannelSide(b1, MakeDevice(1), o);
  b2.channel = b1.channel;
  SetupSide(b2.side, b1.side.dev, o, b2.channel);
  Connect(a1, b1.side, o);
  Connect(b1.side, a1, o);
  Connect(a2, b2.side, o);
  Connect(b2.side, a2, o);
  Device& dev = *b1.side.dev;
  dev.engine().StopProgressThread();
  ASSERT_EQ(dev.ArmCq(b1.side.cq, false), 0);
  ASSERT_EQ(dev.ArmCq(b2.side.cq, false), 0);
  // Both SENDs are on their way (in b's socket, ring or receive queue)
  // before anything of b runs: one pass takes both.
  const auto moved = [](Device& d) {
    const EngineStats s = StatsOf(d);
    return s.tx_packets + s.shm_direct_send_ops;
  };
  const uint64_t before = moved(*a1.dev);
  PostSendTo(a1, b1.side, 1);
  PostSendTo(a2, b2.side, 2);
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       moved(*a1.dev) < before + 2 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_GE(moved(*a1.dev), before + 2);

  void* first = nullptr;
  ASSERT_EQ(dev.GetCqEvent(b1.channel, &first), 0);
  EXPECT_EQ(StatsOf(dev).cq_events_inline, 1u);
  EXPECT_TRUE(Readable(b1));
  void* second = nullptr;
  ASSERT_EQ(dev.GetCqEvent(b1.channel, &second), 0);
  EXPECT_FALSE(Readable(b1));
  EXPECT_EQ(StatsOf(dev).cq_events_inline, 1u);
  EXPECT_NE(first, second);
  EXPECT_TRUE((first == &b1.side && second == &b2.side) || (first == &b2.side && second == &b1.side));
  dev.AckCqEvents(b1.side.cq, 1);
  dev.AckCqEvents(b2.side.cq, 1);
  dev.engine().StartProgressThread();
  EXPECT_EQ(PollN(a1, 1).size(), 1u);
  EXPECT_EQ(PollN(a2, 1).size(), 1u);
}

// A waiter whose pass did work but made no event for its channel passes
// again without announcing a sleep, so it must not count a sleeper off
// either. It did: the shared-memory transport's sleeper count went
// negative, and from then on an application thread that read a doorbell
// put the `sleeping` flag up again, so every later packet of the peer rang
// a doorbell (a system call on each side) while nobody slept.
TEST(EventWait, AWaiterThatPassesAgainLeavesNoSleeperBehind) {
  if (TransportIsUdp()) GTEST_SKIP() << "doorbells are a shared-memory matter";
  const QpOptions o;
  Side a1, a2, x;
  ChannelSide w;
  SetupSide(a1, MakeDevice(0), o);
  SetupSide(a2, a1.dev, o);
  SetupChannelSide(w, MakeDevice(1), o);
  SetupSide(x, w.side.dev, o);  // a QP of the same device, no channel
  Connect(a1, w.side, o);
  Connect(w.side, a1, o);
  Connect(a2, x, o);
  Connect(x, a2, o);
  Device& dev = *w.side.dev;
  dev.engine().StopProgressThread();

  // The waiter's passes complete x's receives: work, but no event for it.
  ASSERT_EQ(dev.ArmCq(w.side.cq, false), 0);
  auto waiter = std::async(std::launch::async, [&] {
    void* handle = nullptr;
    return dev.GetCqEvent(w.channel, &handle);
  });
  // Each SEND wakes the blocked waiter, whose pass completes it and who
  // then blocks again.
  const auto blocked_again = [&](uint64_t after) {
    for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
         std::chrono::steady_clock::now() < until;)
      if (EngineTestPeer::WaiterBlocks(dev.engine()) > after) return true;
    return false;
  };
  ASSERT_TRUE(blocked_again(0));
  for (int i = 0; i < 20; ++i) {
    const uint64_t blocks = EngineTestPeer::WaiterBlocks(dev.engine());
    PostSendTo(a2, x, uint64_t(i));
    ASSERT_EQ(PollN(a2, 1).size(), 1u);
    ASSERT_TRUE(blocked_again(blocks));
  }
  PostSendTo(a1, w.side, 100);
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  ASSERT_EQ(waiter.get(), 0);
  dev.AckCqEvents(w.side.cq, 1);
  ASSERT_EQ(PollN(a1, 1).size(), 1u);

  // Nobody of w's device sleeps now (no progress thread, no waiter), and
  // its transport counts nobody; a peer whose application polls then
  // needs no doorbell.
  auto* shm = dynamic_cast<transport::ShmTransport*>(&EngineTestPeer::transport(dev.engine()));
  ASSERT_NE(shm, nullptr);
  EXPECT_EQ(shm->sleepers(), 0);
  PollN(x, 20);
  const uint64_t rung = TransportCountersOf(*a2.dev).doorbells_sent;
  for (int i = 0; i < 50; ++i) {
    PostSendTo(a2, x, uint64_t(200 + i));
    ASSERT_EQ(PollN(x, 1).size(), 1u);
    ASSERT_EQ(PollN(a2, 1).size(), 1u);
  }
  EXPECT_EQ(TransportCountersOf(*a2.dev).doorbells_sent - rung, 0u);
  dev.engine().StartProgressThread();
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

// rping's server, refusing a connection, destroys its QP, CQ and channel
// while its CQ thread still blocks in ibv_get_cq_event. A real channel's
// read goes on blocking (closing the fd does not end it); the waiter here
// must too, and never touch the freed channel (it did: ASan saw the
// waiter's next pass read it, and a ppoll on the closed pipe returned).
TEST(EventWait, AChannelDestroyedUnderItsWaiterLeavesItBlocked) {
  const QpOptions o;
  Side a;
  ChannelSide b;
  OpenToChannelSide(a, b, o);
  ASSERT_EQ(b.side.dev->ArmCq(b.side.cq, false), 0);
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    void* handle = nullptr;
    b.side.dev->GetCqEvent(b.channel, &handle);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_FALSE(returned.load());
  ASSERT_EQ(b.side.dev->DestroyQp(b.side.qp), 0);
  ASSERT_EQ(b.side.dev->DestroyCq(b.side.cq), 0);
  EXPECT_EQ(b.side.dev->DestroyCompletionChannel(b.channel), 0);
  // Packets for the QP that is gone wake the waiter (it watches the
  // transport): it must find the channel destroyed and block on.
  for (int i = 0; i < 3; ++i) {
    Sge send = SgeOf(a, 0, 64);
    ASSERT_EQ(a.dev->PostSend(a.qp, MakeWr(WrOpcode::kSend, uint64_t(i), {&send, 1})), 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(returned.load());
  // Cancelled, as a thread blocked in a read can be.
  pthread_cancel(waiter.native_handle());
  waiter.join();
}

// A thread that enters ibv_get_cq_event with a channel another thread has
// just destroyed (rping's CQ thread against its server's reject path: an
// ASan heap-use-after-free in CI) gets EBADF, as a read of a closed channel
// fd does, and touches no freed memory; the channel's descriptor is closed
// at the destroy all the same. Many destroys later the engine frees it.
TEST(EventWait, AChannelDestroyedBeforeTheCallFailsItWithEbadf) {
  const QpOptions o;
  Side a;
  ChannelSide b;
  OpenToChannelSide(a, b, o);
  const int fd = b.side.dev->CompletionChannelFd(b.channel);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(b.side.dev->DestroyQp(b.side.qp), 0);
  ASSERT_EQ(b.side.dev->DestroyCq(b.side.cq), 0);
  ASSERT_EQ(b.side.dev->DestroyCompletionChannel(b.channel), 0);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "the channel's pipe stayed open";
  void* handle = nullptr;
  EXPECT_EQ(b.side.dev->GetCqEvent(b.channel, &handle), EBADF);
  EXPECT_EQ(b.side.dev->GetCqEvent(b.channel, &handle), EBADF);
  // Later destroys retire it for good, without touching it again.
  for (int i = 0; i < 80; ++i) {
    CompletionChannel* c = nullptr;
    ASSERT_EQ(b.side.dev->CreateCompletionChannel(&c), 0);
    ASSERT_EQ(b.side.dev->DestroyCompletionChannel(c), 0);
  }
}

}  // namespace
}  // namespace softrnic::engine::testing
