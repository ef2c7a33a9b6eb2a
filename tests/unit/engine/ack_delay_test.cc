// Delayed ACKs (ack_delay.cc): a plain ACK waits, at most the configured
// delay, for a request of the same QP to carry it; one that waited the whole
// delay makes the QP acknowledge at once for a while. Tests set a long delay
// so that a loaded machine cannot turn a carried ACK into an expired one.
//
// The deferral never outlives the application's view of a message: the ACK
// of a SEND or a WRITE_WITH_IMM leaves at the latest when its receive
// completion is polled. The ping-pongs that show the ACK riding along are
// therefore of RDMA WRITEs (ib_write_lat's: the receiver sees the message
// in memory, no completion), and SENDs are tested for that flush.
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

using std::chrono::milliseconds;

class AckDelayTest : public RcPairTest {
 protected:
  // Opens the pair with these ACK delays (unset: the environment's). ACKs
  // are delayed on UDP only (ack_delay.cc): these devices use it in the
  // auto (shared-memory) run of the suite too.
  void OpenWithDelays(std::optional<std::chrono::microseconds> delay_a,
                      std::optional<std::chrono::microseconds> delay_b,
                      const QpOptions& o = LongTimeout()) {
    EngineConfig ca = TestConfig(0), cb = TestConfig(1);
    ca.transport_mode = cb.transport_mode = transport::TransportMode::kUdp;
    if (delay_a) ca.ack_delay = *delay_a;
    if (delay_b) cb.ack_delay = *delay_b;
    OpenWith(o, ca, cb);
  }
  // Posts a receive on `to` and a SEND on `from`.
  void Send(Side& from, Side& to, uint64_t id) {
    Sge rsge = SgeOf(to, 4096, 64);
    ASSERT_EQ(to.dev->PostRecv(to.qp, RecvWr{id, {&rsge, 1}}), 0);
    Sge sge = SgeOf(from, 0, 8);
    ASSERT_EQ(from.dev->PostSend(from.qp, MakeWr(WrOpcode::kSend, id, {&sge, 1})), 0);
  }
  // A WRITE of `id` + 1 (8 bytes, inline) from `from` into `to`'s
  // mailbox: a message only memory shows (ib_write_lat's), no completion.
  void Write(Side& from, Side& to, uint64_t id) {
    const uint64_t value = id + 1;
    Sge sge{reinterpret_cast<uint64_t>(&value), 8, 0};
    ASSERT_EQ(from.dev->PostSend(from.qp, MakeWr(WrOpcode::kRdmaWrite, id, {&sge, 1},
                                                 Addr(to, kMailbox), to.dev->MrRkey(to.mr),
                                                 kSignaled | kInline)),
              0);
  }
  // s's mailbox, read under its engine's lock (its progress thread may be
  // writing it).
  static uint64_t Mailbox(Side& s) {
    std::lock_guard lock(s.dev->engine().mu_);
    uint64_t v;
    std::memcpy(&v, s.buf.data() + kMailbox, 8);
    return v;
  }
  // Polls s's CQ (running its engine) until its mailbox holds `id` + 1;
  // completions are kept for Await. Fails the test after 10 s.
  void AwaitMailbox(Side& s, uint64_t id) {
    std::vector<Completion>& kept = &s == &a_ ? kept_a_ : kept_b_;
    const auto deadline = std::chrono::steady_clock::now() + milliseconds(10000);
    while (Mailbox(s) != id + 1) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "WRITE " << id << " did not arrive";
        return;
      }
      Completion wc[4];
      const int got = s.dev->PollCq(s.cq, 4, wc);
      kept.insert(kept.end(), wc, wc + std::max(got, 0));
    }
  }
  // A WRITE from `from` to `to`, arrived; its sender's completion (the ACK)
  // is left to the caller.
  void WriteOne(Side& from, Side& to, uint64_t id) {
    Write(from, to, id);
    AwaitMailbox(to, id);
  }
  static constexpr size_t kMailbox = 8192;
  // Polls s's CQ until a completion of `opcode` arrives (others are kept
  // for later calls); fails the test after 10 s.
  Completion Await(Side& s, WcOpcode opcode) {
    std::vector<Completion>& kept = &s == &a_ ? kept_a_ : kept_b_;
    const auto deadline = std::chrono::steady_clock::now() + milliseconds(10000);
    while (true) {
      for (size_t i = 0; i < kept.size(); ++i) {
        if (kept[i].opcode != opcode) continue;
        const Completion c = kept[i];
        kept.erase(kept.begin() + static_cast<long>(i));
        EXPECT_EQ(c.status, WcStatus::kSuccess);
        return c;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "no completion of opcode " << int(opcode);
        return Completion{};
      }
      Completion wc[4];
      const int got = s.dev->PollCq(s.cq, 4, wc);
      kept.insert(kept.end(), wc, wc + std::max(got, 0));
    }
  }
  // A SEND from `from` to `to`, received; its sender's completion (the ACK)
  // is left to the caller.
  void SendOne(Side& from, Side& to, uint64_t id) {
    Send(from, to, id);
    EXPECT_EQ(Await(to, WcOpcode::kRecv).wr_id, id);
  }
  // A Local ACK Timeout (4.3 s) far above the delays used here; the engine
  // caps a delay at an eighth of the QP's own timeout (ack_delay.cc).
  static QpOptions LongTimeout() {
    QpOptions o;
    o.timeout = 20;
    return o;
  }
  // `rounds` of: A asks, B answers (ids from `id`), with WRITEs. B's ACK of
  // a question waits for B's answer, A's ACK of an answer for A's next
  // question; the last answer's ACK is left waiting (its completion is not
  // awaited).
  void PingPong(int rounds, uint64_t id) {
    for (int i = 0; i < rounds; ++i) {
      WriteOne(a_, b_, id + 2 * i);
      if (i > 0) {
        EXPECT_EQ(Await(b_, WcOpcode::kRdmaWrite).wr_id, id + 2 * i - 1);
      }
      WriteOne(b_, a_, id + 2 * i + 1);
      EXPECT_EQ(Await(a_, WcOpcode::kRdmaWrite).wr_id, id + 2 * i);
    }
  }
  std::vector<Completion> kept_a_, kept_b_;
};

TEST_F(AckDelayTest, PingPongAcksRideOnTheAnswer) {
  const auto delay = milliseconds(200);
  OpenWithDelays(delay, delay);
  const int rounds = 50;
  PingPong(rounds, 0);
  // Nothing carries A's last ACK: it leaves when the delay is over.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Await(b_, WcOpcode::kRdmaWrite).wr_id, uint64_t(2 * rounds - 1));
  EXPECT_GE(std::chrono::steady_clock::now() - start, delay / 2);
  const EngineStats sa = StatsOf(*a_.dev);
  const EngineStats sb = StatsOf(*b_.dev);
  // B had sent nothing before the first question, so that ACK went at once;
  // every later one rode on an answer, and A's on the next question.
  EXPECT_EQ(sb.acks_piggybacked, uint64_t(rounds - 1));
  EXPECT_EQ(sb.acks_delay_expired, 0u);
  EXPECT_EQ(sa.acks_piggybacked, uint64_t(rounds - 1));
  EXPECT_EQ(sa.acks_delay_expired, 1u);
  EXPECT_EQ(sa.acks_flushed_at_poll + sb.acks_flushed_at_poll, 0u);  // no receive completions
  // Below the Local ACK Timeout. (The last 200 ms wait does draw
  // selective retransmission's tail-loss probes, from 1 ms on; the default
  // delay, 20 us and at most 500 us, stays below them.)
  EXPECT_EQ(sa.retransmit_timeouts + sb.retransmit_timeouts, 0u);
}

// The ACK rides *behind* the WRITE that carries it: a peer that polls
// until its own WRITE completes finds the answer already in its memory.
// ib_write_lat's peer stops polling at that completion and spins on
// memory; with the ACK ahead, a peer polling on another CPU took the ACK
// alone, and the answer was left to its progress thread (53 us one-way
// over UDP instead of 5). Here A polls in a thread of its own while B
// answers, as in ib_write_lat. Over UDP the WRITE reaches the request
// socket before the ACK reaches the reply socket, and a pass reads every
// ready socket: the order is exact, not a race.
TEST_F(AckDelayTest, TheAnswerIsInMemoryWhenTheAckItCarriesCompletesTheQuestion) {
  OpenWithDelays(milliseconds(200), milliseconds(200));
  const int rounds = 200;
  std::atomic<int> asked{-1}, done{-1};
  std::vector<char> early(rounds, 0);  // written by the poller before `done`
  std::thread poller([&] {
    for (int i = 0; i < rounds; ++i) {
      while (asked.load() < i) std::this_thread::yield();
      // Poll A's CQ, and nothing else, until the question's completion.
      const auto deadline = std::chrono::steady_clock::now() + milliseconds(10000);
      bool completed = false;
      while (!completed && std::chrono::steady_clock::now() < deadline) {
        Completion wc[4];
        const int got = a_.dev->PollCq(a_.cq, 4, wc);
        for (int k = 0; k < got; ++k) completed |= wc[k].wr_id == uint64_t(2 * i);
      }
      EXPECT_TRUE(completed) << "question " << i;
      early[static_cast<size_t>(i)] = Mailbox(a_) != uint64_t(2 * i + 2);
      done.store(i);
    }
  });
  // Only a round whose ACK rode on the answer says anything: B also
  // acknowledges at once (its first question, a tail-loss probe's
  // duplicate on a slow machine, the back-off after a delay ran out).
  int rode = 0, early_riders = 0;
  for (int i = 0; i < rounds; ++i) {
    const uint64_t question = 2 * i, answer = 2 * i + 1;
    Write(a_, b_, question);  // carries A's ACK of the last answer
    AwaitMailbox(b_, question);
    if (i > 0) {
      EXPECT_EQ(Await(b_, WcOpcode::kRdmaWrite).wr_id, answer - 2);
    }
    const uint64_t carried = StatsOf(*b_.dev).acks_piggybacked;
    asked.store(i);  // A polls from now on
    Write(b_, a_, answer);  // carries B's ACK of the question, if deferred
    while (done.load() < i) std::this_thread::yield();
    if (StatsOf(*b_.dev).acks_piggybacked == carried) continue;
    ++rode;
    early_riders += early[static_cast<size_t>(i)];
  }
  poller.join();
  EXPECT_EQ(early_riders, 0) << "of " << rode
                             << " questions whose ACK rode on the answer completed before it";
  RecordProperty("acks_that_rode", rode);
}

// perftest -a pauses between sizes: the last ACK of each size waits the
// whole delay. A QP whose ACKs rode along is forgiven that one miss and
// keeps deferring in the next ping-pong.
TEST_F(AckDelayTest, APingPongThatPausesKeepsDeferring) {
  OpenWithDelays(milliseconds(50), milliseconds(50));
  PingPong(10, 0);
  EXPECT_EQ(Await(b_, WcOpcode::kRdmaWrite).wr_id, 19u);  // A's ACK expired
  const EngineStats before = StatsOf(*a_.dev);
  EXPECT_EQ(before.acks_delay_expired, 1u);
  PingPong(10, 100);
  EXPECT_EQ(Await(b_, WcOpcode::kRdmaWrite).wr_id, 119u);
  const EngineStats after = StatsOf(*a_.dev);
  EXPECT_EQ(after.acks_piggybacked - before.acks_piggybacked, 9u);
  EXPECT_EQ(after.acks_delay_expired, 2u);
}

TEST_F(AckDelayTest, AnAckNobodyCarriesLeavesAfterTheDelay) {
  const auto delay = milliseconds(100);
  OpenWithDelays(std::nullopt, delay);
  WriteOne(b_, a_, 1);  // B has sent once: its ACKs may now wait
  Await(b_, WcOpcode::kRdmaWrite);
  const auto start = std::chrono::steady_clock::now();
  WriteOne(a_, b_, 2);  // B never answers
  Await(a_, WcOpcode::kRdmaWrite);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, delay);
  EXPECT_LT(waited, delay + milliseconds(5000));
  EXPECT_EQ(StatsOf(*b_.dev).acks_delay_expired, 1u);
  EXPECT_EQ(StatsOf(*a_.dev).retransmit_timeouts, 0u);  // far below the ACK timeout
}

TEST_F(AckDelayTest, AfterAnExpiredDelayTheQpAcknowledgesAtOnce) {
  const auto delay = milliseconds(300);
  OpenWithDelays(std::nullopt, delay);
  WriteOne(b_, a_, 1);
  Await(b_, WcOpcode::kRdmaWrite);
  WriteOne(a_, b_, 2);  // waits the whole delay
  Await(a_, WcOpcode::kRdmaWrite);
  // A one-way stream now: its ACKs must not wait.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) {
    WriteOne(a_, b_, 10 + i);
    Await(a_, WcOpcode::kRdmaWrite);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, delay);
  EXPECT_EQ(StatsOf(*b_.dev).acks_delay_expired, 1u);
  EXPECT_EQ(StatsOf(*b_.dev).acks_piggybacked, 0u);
}

// The application saw the message B's ACK is waiting for (in memory); a QP
// it then takes out of service (destroy, or Error as rdma_disconnect does)
// sends that ACK at once, not after the delay, nor never (ack_delay.cc).
// Without it, a client that destroys its QP right after its last reply
// leaves the server retrying into RETRY_EXC_ERR.
class AckDelayLeaveTest : public AckDelayTest {
 protected:
  // B's ACK of A's WRITE deferred (a delay of 5 s; a Local ACK Timeout of
  // 69 s caps it at 8.6 s), then `leave` on B: A's WRITE completes well
  // before the delay, without a retransmission.
  template <typename Leave>
  void ExpectAckSentWhen(Leave leave) {
    const auto delay = milliseconds(5000);
    QpOptions o;
    o.timeout = 24;
    OpenWithDelays(std::nullopt, delay, o);
    WriteOne(b_, a_, 1);  // B has sent once: its ACKs may now wait
    Await(b_, WcOpcode::kRdmaWrite);
    WriteOne(a_, b_, 2);  // B's ACK waits for B's next request
    const auto start = std::chrono::steady_clock::now();
    leave();
    EXPECT_EQ(Await(a_, WcOpcode::kRdmaWrite).wr_id, 2u);
    EXPECT_LT(std::chrono::steady_clock::now() - start, delay / 2);
    EXPECT_EQ(StatsOf(*b_.dev).acks_delay_expired, 0u);
    EXPECT_EQ(StatsOf(*a_.dev).retransmit_timeouts, 0u);
  }
};

TEST_F(AckDelayLeaveTest, ADestroyedQpSendsItsDeferredAck) {
  ExpectAckSentWhen([&] {
    ASSERT_EQ(b_.dev->DestroyQp(b_.qp, nullptr, nullptr), 0);
    b_.qp = nullptr;
  });
}

TEST_F(AckDelayLeaveTest, AQpMovedToErrorSendsItsDeferredAck) {
  ExpectAckSentWhen([&] {
    QpAttr err;
    err.qp_state = QpState::kErr;
    ASSERT_EQ(b_.dev->ModifyQp(b_.qp, err, kQpState), 0);
  });
}

// A receive completion is the application's view of a SEND or a
// WRITE_WITH_IMM, and the application may end right after polling it
// without calling anything else: fio's rdma engine (--verb=read) ends with
// a SEND whose target polls it and calls _exit(). So the ACK B holds for
// that QP leaves before B's poll hands the completion out, not with B's
// next request or after the delay: here B's engine is destroyed at once
// after the poll (nothing flushes there, as at _exit), and A's message
// still completes, successfully. Held, the ACK was lost: A retried against
// a dead peer into RETRY_EXC_ERR.
class AckDelayPollTest : public AckDelayTest,
                         public ::testing::WithParamInterface<WrOpcode> {
 protected:
  // B's ACKs may wait 5 s, capped to an eighth of the Local ACK Timeout
  // (`timeout`); A retries `retry_cnt` times.
  void OpenForPoll(uint8_t timeout, uint8_t retry_cnt) {
    QpOptions o;
    o.timeout = timeout;
    o.retry_cnt = retry_cnt;
    OpenWithDelays(std::nullopt, milliseconds(5000), o);
    WriteOne(b_, a_, 1);  // B has sent once: its ACKs may now wait
    Await(b_, WcOpcode::kRdmaWrite);
  }
  // A's message `id` of the parameter's opcode, to a receive B posted;
  // returns B's receive completion, polled.
  Completion Deliver(uint64_t id) {
    Sge rsge = SgeOf(b_, 4096, 64);
    EXPECT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{id, {&rsge, 1}}), 0);
    Sge sge = SgeOf(a_, 0, 8);
    SendWr wr = MakeWr(GetParam(), id, {&sge, 1}, Addr(b_, 4096), b_.dev->MrRkey(b_.mr));
    wr.imm_data = 0x5eed0000u + static_cast<uint32_t>(id);
    EXPECT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
    const Completion c = Await(b_, GetParam() == WrOpcode::kRdmaWriteWithImm
                                       ? WcOpcode::kRecvRdmaWithImm
                                       : WcOpcode::kRecv);
    EXPECT_EQ(c.wr_id, id);
    return c;
  }
  // A's completion of `opcode`, whatever its status; fails after 5 s.
  Completion AwaitAny(WcOpcode opcode) {
    const auto deadline = std::chrono::steady_clock::now() + milliseconds(5000);
    while (std::chrono::steady_clock::now() < deadline) {
      Completion wc;
      if (a_.dev->PollCq(a_.cq, 1, &wc) == 1 && wc.opcode == opcode) return wc;
    }
    ADD_FAILURE() << "no completion of opcode " << int(opcode);
    return Completion{};
  }
  WcOpcode SenderOpcode() const {
    return GetParam() == WrOpcode::kSend ? WcOpcode::kSend : WcOpcode::kRdmaWrite;
  }
};

TEST_P(AckDelayPollTest, TheAckLeavesBeforeThePollReturnsTheReceive) {
  // A Local ACK Timeout of 537 ms (17) caps B's delay to 67 ms; A retries
  // once: without the ACK, A's WQE fails within ~1.1 s.
  OpenForPoll(17, 1);
  Deliver(2);
  // Nothing of B runs any more: no pass, no timer, no exit handler.
  b_.dev.reset();
  const auto start = std::chrono::steady_clock::now();
  const Completion c = AwaitAny(SenderOpcode());
  EXPECT_EQ(c.wr_id, 2u);
  EXPECT_EQ(c.status, WcStatus::kSuccess) << WcStatusName(c.status);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(500));
  EXPECT_EQ(StatsOf(*a_.dev).retransmit_timeouts, 0u);
}

// The same for every message of a ping-pong: the ACK held for B's QP goes
// when B polls the receive, once per message, and never waits out the delay.
TEST_P(AckDelayPollTest, EachReceivePolledSendsTheHeldAck) {
  OpenForPoll(24, 7);  // B's delay: the whole 5 s
  const uint64_t flushed0 = StatsOf(*b_.dev).acks_flushed_at_poll;
  for (uint64_t i = 0; i < 10; ++i) {
    const Completion r = Deliver(10 + i);
    if (GetParam() == WrOpcode::kRdmaWriteWithImm) {
      EXPECT_EQ(r.imm_data, 0x5eed0000u + 10 + i);
      EXPECT_EQ(r.byte_len, 8u);
    }
    // Already acknowledged: A's completion does not wait for B's answer
    // (nor for the delay).
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(Await(a_, SenderOpcode()).wr_id, 10 + i);
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2500));
    WriteOne(b_, a_, 100 + i);  // the answer
    Await(b_, WcOpcode::kRdmaWrite);
  }
  const EngineStats sb = StatsOf(*b_.dev);
  EXPECT_EQ(sb.acks_flushed_at_poll - flushed0, 10u);
  EXPECT_EQ(sb.acks_delay_expired, 0u);
  EXPECT_EQ(StatsOf(*a_.dev).retransmit_timeouts, 0u);
}

INSTANTIATE_TEST_SUITE_P(Receives, AckDelayPollTest,
                         ::testing::Values(WrOpcode::kSend, WrOpcode::kRdmaWriteWithImm),
                         [](const ::testing::TestParamInfo<WrOpcode>& p) {
                           return std::string(p.param == WrOpcode::kSend ? "Send"
                                                                         : "WriteWithImm");
                         });

TEST_F(AckDelayTest, ZeroDelayNeverDefers) {
  OpenWithDelays(std::chrono::microseconds(0), std::chrono::microseconds(0));
  for (int i = 0; i < 10; ++i) {
    SendOne(a_, b_, 2 * i);
    Await(a_, WcOpcode::kSend);  // before B answers
    SendOne(b_, a_, 2 * i + 1);
    Await(b_, WcOpcode::kSend);
  }
  EXPECT_EQ(StatsOf(*a_.dev).acks_piggybacked + StatsOf(*b_.dev).acks_piggybacked, 0u);
}

}  // namespace
}  // namespace softrnic::engine::testing
