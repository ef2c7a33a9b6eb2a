// Per-QP counters (engine/qp_counters.h) and their lines in the stats file
// (engine/observe/stats_publisher.h): a QP's counters add up to the device's, match
// the traffic it moved, count error completions and flushes, and the file
// lists at most kMaxQpLines QPs, forgetting destroyed ones. The direct
// path's per-QP counts (two processes): tools_qp_counters.
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "engine/observe/stats_publisher.h"
#include "engine_test_peer.h"
#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

QpCounters CountersOf(Side& s) {
  std::lock_guard lock(s.dev->engine().mu_);
  return s.qp->counters;
}

class QpCountersTest : public RcPairTest {};

// SENDs from a to b: each device has one QP, so its counters are the
// device's, and what a sent is what b received (no loss between two
// devices of one host, so no retransmission either: checked).
TEST_F(QpCountersTest, OneQpCountsWhatItsDeviceCounts) {
  // Packets only: over shared memory a SEND into a buffer in whole shared
  // pages is placed directly and counts no packet (the direct counters:
  // shm_direct_send_test, tools_direct_counters).
  EngineConfig ca = TestConfig(0), cb = TestConfig(1);
  ca.shm_direct = cb.shm_direct = false;  // SOFTRNIC_SHM_DIRECT=0
  OpenWith({}, ca, cb);
  constexpr int kMessages = 20;
  constexpr uint32_t kLen = 3000;  // 3 packets of 1024
  for (int i = 0; i < kMessages; ++i) {
    Sge rsge = SgeOf(b_, size_t(i) * kLen, kLen);
    ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{uint64_t(i), {&rsge, 1}}), 0);
  }
  for (int i = 0; i < kMessages; ++i) {
    Sge sge = SgeOf(a_, size_t(i) * kLen, kLen);
    ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, uint64_t(i), {&sge, 1})), 0);
  }
  ASSERT_EQ(PollN(a_, kMessages).size(), size_t(kMessages));
  ASSERT_EQ(PollN(b_, kMessages).size(), size_t(kMessages));
  // b's last ACKs may still be on their way to a: wait until a has them all.
  ASSERT_TRUE(WaitFor([&] { return CountersOf(a_).rx_packets == CountersOf(b_).tx_packets; }));
  const QpCounters qa = CountersOf(a_), qb = CountersOf(b_);
  const EngineStats sa = StatsOf(*a_.dev), sb = StatsOf(*b_.dev);
  ASSERT_EQ(sa.tx_retransmit_packets, 0u);
  EXPECT_EQ(qa.tx_packets, uint64_t(kMessages) * 3);
  EXPECT_EQ(qa.tx_packets, sa.tx_packets);
  EXPECT_EQ(qa.tx_bytes, sa.tx_bytes);
  EXPECT_EQ(qa.rx_packets, sa.rx_packets);
  EXPECT_EQ(qa.rx_bytes, sa.rx_bytes);
  EXPECT_EQ(qb.tx_packets, sb.tx_packets);
  EXPECT_EQ(qb.rx_packets, sb.rx_packets);
  EXPECT_EQ(qb.rx_packets, qa.tx_packets);
  EXPECT_EQ(qb.rx_bytes, qa.tx_bytes);
  // Headers: BTH (12) and ICRC (4) per packet; SEND carries nothing else.
  EXPECT_EQ(qa.tx_bytes, uint64_t(kMessages) * (kLen + 3 * 16));
  EXPECT_EQ(qa.cqe_errors + qa.cqe_flushes + qb.cqe_errors + qb.cqe_flushes, 0u);
}

// An RNR NAK and a retry: b has no receive posted for a's first SEND.
TEST_F(QpCountersTest, RnrNaksOnBothSides) {
  QpOptions o;
  o.min_rnr_timer = 1;  // 0.01 ms
  Open(o);
  Sge sge = SgeOf(a_, 0, 100);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 1, {&sge, 1})), 0);
  ASSERT_TRUE(WaitFor([&] { return CountersOf(b_).tx_rnr_naks > 0; }));
  Sge rsge = SgeOf(b_, 0, 100);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{1, {&rsge, 1}}), 0);
  ASSERT_EQ(PollN(a_, 1).size(), 1u);
  ASSERT_TRUE(WaitFor([&] { return CountersOf(a_).rx_rnr_naks == CountersOf(b_).tx_rnr_naks; }));
  EXPECT_EQ(CountersOf(b_).tx_rnr_naks, StatsOf(*b_.dev).tx_rnr_naks);
  EXPECT_EQ(CountersOf(a_).rx_rnr_naks, StatsOf(*a_.dev).rx_rnr_naks);
}

// A QP moved to the error state flushes its posted receives: counted as
// flushes of that QP and of the device's receive queue, not as errors.
TEST_F(QpCountersTest, FlushedCompletions) {
  Open({});
  for (uint64_t i = 0; i < 3; ++i) {
    Sge rsge = SgeOf(b_, 0, 100);
    ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{i, {&rsge, 1}}), 0);
  }
  QpAttr attr;
  attr.qp_state = QpState::kErr;
  ASSERT_EQ(b_.dev->ModifyQp(b_.qp, attr, kQpState), 0);
  const auto flushed = PollN(b_, 3);
  ASSERT_EQ(flushed.size(), 3u);
  EXPECT_EQ(flushed[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(CountersOf(b_).cqe_flushes, 3u);
  EXPECT_EQ(CountersOf(b_).cqe_errors, 0u);
  EXPECT_EQ(StatsOf(*b_.dev).recv_cqe_flushes, 3u);
  EXPECT_EQ(StatsOf(*b_.dev).send_cqe_flushes, 0u);
}

class QpLinesTest : public RcPairTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/softrnic-qplines-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Configure(EngineConfig& config) override {
    config.stats_shm = true;
    config.stats_dir = dir_;
  }
  StatsFile Read(const StatsPublisher& p) {
    std::ifstream in(p.path());
    std::stringstream text;
    text << in.rdbuf();
    StatsFile f;
    EXPECT_TRUE(ParseStatsFile(text.str(), &f)) << text.str();
    return f;
  }
  std::string dir_;
};

// More QPs than the file lists: kMaxQpLines lines, the busy QP among them
// with the engine's counters, "qps" the live count; destroyed QPs leave.
TEST_F(QpLinesTest, BoundedBusiestFirstAndDestroyedLeave) {
  Open({});
  StatsPublisher publisher(a_.dev->engine(), std::chrono::hours(1));  // writes only when told
  ASSERT_TRUE(publisher.enabled());
  std::vector<Qp*> idle;
  QpCaps caps{4, 4, 1, 1, 0};
  for (size_t i = 0; i < StatsPublisher::kMaxQpLines + 10; ++i) {
    Qp* qp = nullptr;
    ASSERT_EQ(a_.dev->CreateQp(a_.pd, QpType::kRc, a_.cq, a_.cq, nullptr, &caps, false, nullptr, &qp), 0);
    QpAttr attr;
    attr.qp_state = QpState::kInit;
    attr.port_num = 1;
    ASSERT_EQ(a_.dev->ModifyQp(qp, attr, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
    idle.push_back(qp);
  }
  Sge sge = SgeOf(a_, 0, 100);
  for (int i = 0; i < 5; ++i) {
    Sge rsge = SgeOf(b_, 0, 100);
    ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{1, {&rsge, 1}}), 0);
    ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 1, {&sge, 1})), 0);
  }
  ASSERT_EQ(PollN(a_, 5).size(), 5u);
  publisher.PublishNow();
  StatsFile f = Read(publisher);
  EXPECT_TRUE(f.has_qps);
  EXPECT_EQ(f.live_qps, idle.size() + 1);
  ASSERT_EQ(f.qps.size(), StatsPublisher::kMaxQpLines);
  const uint32_t busy = a_.dev->QpNum(a_.qp);
  const QpCounters c = CountersOf(a_);
  bool found = false;
  for (const StatsFile::Qp& q : f.qps) {
    if (q.qpn != busy) continue;
    found = true;
    EXPECT_EQ(q.type, "rc");
    EXPECT_EQ(q.state, "RTS");
    EXPECT_EQ(q.peer_gid, b_.dev->gids()[0].ToString());
    EXPECT_EQ(q.peer_qpn, std::to_string(b_.dev->QpNum(b_.qp)));
    EXPECT_EQ(q.Get("tx_packets"), c.tx_packets);
    EXPECT_EQ(q.Get("tx_bytes"), c.tx_bytes);
    EXPECT_EQ(q.Get("rx_packets"), c.rx_packets);
    EXPECT_EQ(q.counters.size(), std::size(kQpCounterFields));
  }
  EXPECT_TRUE(found) << "the busiest QP is not listed";
  for (size_t i = 1; i < f.qps.size(); ++i) EXPECT_LT(f.qps[i - 1].qpn, f.qps[i].qpn) << "in QPN order";
  // The idle QPs are in INIT: no peer.
  for (const StatsFile::Qp& q : f.qps) {
    if (q.qpn == busy) continue;
    EXPECT_EQ(q.peer_gid, "-");
    EXPECT_EQ(q.peer_qpn, "-");
    EXPECT_EQ(q.state, "INIT");
  }

  for (Qp* qp : idle) ASSERT_EQ(a_.dev->DestroyQp(qp), 0);
  publisher.PublishNow();
  f = Read(publisher);
  EXPECT_EQ(f.live_qps, 1u);
  ASSERT_EQ(f.qps.size(), 1u);
  EXPECT_EQ(f.qps[0].qpn, busy);
  publisher.Stop();
}

// An application that polls holds the engine lock nearly all the time: the
// publisher, finding it busy, asks the next holder for a copy of the
// counters (stats_handover.h) and publishes that, without ever getting the
// lock itself. Here the test holds the lock throughout, as such an
// application would for the instants the publisher looks, and a malformed
// packet counted under it reaches the file through one poll.
TEST_F(QpLinesTest, CountersReachTheFileWhileTheLockStaysBusy) {
  Open({});
  StatsPublisher publisher(a_.dev->engine(), std::chrono::milliseconds(10));
  ASSERT_TRUE(publisher.enabled());
  Engine& e = a_.dev->engine();
  const uint64_t before = Read(publisher).Get("rx_dropped_parse");
  std::unique_lock lock(e.mu_);
  uint8_t runt[4] = {0x04, 0, 0xFF, 0xFF};  // shorter than a BTH
  transport::RxPacket rx{};
  rx.data = runt;
  rx.length = sizeof(runt);
  EngineTestPeer::Dispatch(e, rx);
  ASSERT_EQ(EngineTestPeer::stats(e).rx_dropped_parse, before + 1);
  // The publisher looks (and asks) while the lock is held; a poll under the
  // lock then gives it the copy, at every round until it has published.
  bool published = false;
  for (int i = 0; i < 200 && !published; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    Completion wc[1];
    EngineTestPeer::PollCq(e, a_.cq, 1, wc);
    published = Read(publisher).Get("rx_dropped_parse") == before + 1;
  }
  lock.unlock();
  EXPECT_TRUE(published);
}

}  // namespace
}  // namespace softrnic::engine::testing
