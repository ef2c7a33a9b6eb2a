// Congestion control (docs/loss.md): the window bounds the packets in
// flight, a loss cuts it once per episode, a DCQCN CNP from the peer cuts it
// (rate-limited), one from anyone else does not, and a request arriving with
// ECN CE makes the responder send a CNP.
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine_test_peer.h"
#include "rc_pair.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::engine::testing {
namespace {

struct Snapshot {
  double cwnd = 0;
  int32_t outstanding = 0;
  uint32_t sacked = 0;
  uint64_t timeouts = 0;  // Local ACK Timeouts so far (device-wide)
  uint64_t cuts = 0;      // window cuts so far (loss, delay, CNP; device-wide)
};

Snapshot Snap(Device& d, Qp* qp) {
  std::lock_guard lock(d.engine().mu_);
  const EngineStats& st = EngineTestPeer::stats(d.engine());
  return Snapshot{qp->cc ? qp->cc->window() : 0, wire::PsnDiff(qp->req.sq_psn, qp->comp.comp_psn),
                  qp->sr.sacked_count, st.retransmit_timeouts,
                  st.cc_loss_cuts + st.cc_delay_cuts + st.cc_cnp_cuts};
}

void InjectCnp(Device& dev, const Gid& from, uint32_t dest_qp) {
  std::vector<uint8_t> pkt(12 + 16 + 4, 0);
  wire::Bth bth;
  bth.set_opcode(wire::op::kCnp);
  bth.set_pkey(wire::kDefaultPkey);
  bth.set_dest_qp(dest_qp);
  bth.set_becn(true);
  std::memcpy(pkt.data(), bth.b.data(), 12);
  transport::RxPacket rx;
  rx.data = pkt.data();
  rx.length = static_cast<uint32_t>(pkt.size());
  rx.src.gid = from;
  rx.src.port = TestPort();  // the peer's device port (same-host source check)
  std::lock_guard lock(dev.engine().mu_);
  EngineTestPeer::Dispatch(dev.engine(), rx);
}

// Congestion control acts on packets in flight: these tests need the UDP
// path (same-host devices would otherwise use shared memory, whose direct
// one-sided operations send no packets at all).
class CongestionTest : public RcPairTest {
 protected:
  void Configure(EngineConfig& config) override {
    config.transport_mode = transport::TransportMode::kUdp;
  }
};

TEST_F(CongestionTest, CnpFromPeerCutsWindowOthersDoNot) {
  QpOptions o;
  Open(o);
  const uint32_t qpn = a_.dev->QpNum(a_.qp);
  const double before = Snap(*a_.dev, a_.qp).cwnd;
  ASSERT_GT(before, 8.0);
  {
    std::lock_guard lock(a_.dev->engine().mu_);
    EXPECT_STREQ(a_.qp->cc->name(), "aimd");  // the default (SOFTRNIC_CC unset)
  }
  // From a stranger (a's own address is not the QP's peer): counted only.
  InjectCnp(*a_.dev, a_.dev->gids()[0], qpn);
  EXPECT_EQ(Snap(*a_.dev, a_.qp).cwnd, before);
  EXPECT_EQ(StatsOf(*a_.dev).rx_cnp, 1u);
  EXPECT_EQ(StatsOf(*a_.dev).cc_cnp_cuts, 0u);
  // From the peer: the window halves.
  InjectCnp(*a_.dev, b_.dev->gids()[0], qpn);
  EXPECT_DOUBLE_EQ(Snap(*a_.dev, a_.qp).cwnd, before / 2);
  EXPECT_EQ(StatsOf(*a_.dev).cc_cnp_cuts, 1u);
  // Another one past DCQCN's 50 us reaction interval cuts again. (That a
  // burst inside the interval cuts once is the controller's rule, tested
  // with scripted times in congestion_control_test.cc.)
  usleep(100);
  InjectCnp(*a_.dev, b_.dev->gids()[0], qpn);
  EXPECT_DOUBLE_EQ(Snap(*a_.dev, a_.qp).cwnd, before / 4);
  EXPECT_EQ(StatsOf(*a_.dev).rx_cnp, 3u);
  // Never below the floor, and traffic still flows (and regrows it).
  for (int i = 0; i < 10; ++i) {
    usleep(100);
    InjectCnp(*a_.dev, b_.dev->gids()[0], qpn);
  }
  EXPECT_GE(Snap(*a_.dev, a_.qp).cwnd, 4.0);
  FillPattern(a_.buf, 0, 256 * 1024, 9);
  Sge sge = SgeOf(a_, 0, 256 * 1024);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 1, {&sge, 1}, Addr(b_, 0),
                                           b_.dev->MrRkey(b_.mr))),
            0);
  auto wc = PollN(a_, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(FirstDiff(a_.buf.data(), b_.buf.data(), 256 * 1024), -1);
  EXPECT_GT(Snap(*a_.dev, a_.qp).cwnd, 4.0);
}

TEST_F(CongestionTest, EcnCeOnRequestSendsCnpToRequester) {
  QpOptions o;
  Open(o);
  // A request for b's QP marked CE (an old PSN: answered as a duplicate,
  // nothing executed) arrives as if from a.
  std::vector<uint8_t> pkt(12 + 16 + 4, 0);
  wire::Bth bth;
  bth.set_opcode(wire::op::kRcWriteOnly);
  bth.set_pkey(wire::kDefaultPkey);
  bth.set_dest_qp(b_.dev->QpNum(b_.qp));
  bth.set_psn(wire::PsnAdd(0, wire::kPsnMask));
  std::memcpy(pkt.data(), bth.b.data(), 12);
  transport::RxPacket rx;
  rx.data = pkt.data();
  rx.length = static_cast<uint32_t>(pkt.size());
  rx.src.gid = a_.dev->gids()[0];
  rx.src.port = TestPort();  // the peer's device port (same-host source check)
  rx.traffic_class = 0x03;  // ECN CE
  {
    std::lock_guard lock(b_.dev->engine().mu_);
    EngineTestPeer::Dispatch(b_.dev->engine(), rx);
    EngineTestPeer::FlushTx(b_.dev->engine());
  }
  EXPECT_EQ(StatsOf(*b_.dev).tx_cnp, 1u);
  // The CNP crossed the wire to a, whose QP cut its window.
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*a_.dev).cc_cnp_cuts == 1; }));
  // ECT(0) without CE: no CNP.
  rx.traffic_class = 0x02;
  {
    std::lock_guard lock(b_.dev->engine().mu_);
    EngineTestPeer::Dispatch(b_.dev->engine(), rx);
  }
  EXPECT_EQ(StatsOf(*b_.dev).tx_cnp, 1u);
}

// The packets in flight never exceed the window (plus what the peer
// reported kept), nor the reorder window, sampled during a long transfer
// under loss; each loss episode is classified (cut or ignored).
TEST_F(CongestionTest, InflightBoundedByWindowUnderLoss) {
  QpOptions o;
  o.timeout = kLossyLinkTimeout;
  o.buf_size = 8 << 20;
  TestFaults f;
  f.drop = 0.02;
  f.seed = 41;
  Open(o, f, {});
  const uint32_t len = 4 << 20;
  FillPattern(a_.buf, 0, len, 5);
  std::vector<Sge> sg(16);
  for (int i = 0; i < 16; ++i) {
    sg[i] = SgeOf(a_, size_t(i) * (len / 16), len / 16);
    ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, i, {&sg[i], 1},
                                             Addr(b_, size_t(i) * (len / 16)), b_.dev->MrRkey(b_.mr))),
              0);
  }
  size_t got = 0;
  int samples = 0;
  int checked = 0;
  double peak = 0;
  uint64_t timeouts_seen = 0;
  uint64_t cuts_seen = 0;
  bool draining = false;
  Completion wc[16];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (got < 16 && std::chrono::steady_clock::now() < deadline) {
    const int n = a_.dev->PollCq(a_.cq, 16, wc);
    for (int i = 0; i < n; ++i) ASSERT_EQ(wc[i].status, WcStatus::kSuccess);
    got += size_t(n);
    const Snapshot s = Snap(*a_.dev, a_.qp);
    ++samples;
    EXPECT_LE(s.outstanding, int32_t(kSrWindow));
    // A packet leaves only while the pipe is below the window; a cut does
    // not recall what is already in flight, so compare with the largest
    // window seen (one packet may leave at pipe == window - 1).
    peak = std::max(peak, s.cwnd);
    const int32_t pipe = s.outstanding - int32_t(s.sacked);
    const int32_t bound = int32_t(std::max(peak, 4.0)) + 1;
    // A Local ACK Timeout resends everything outstanding and forgets the
    // SACKs (selective.cc SrForgetSacks): the pipe then counts packets the
    // peer already holds and may stand above any window until ACKs drain
    // it. Nothing new leaves meanwhile, so the bound holds again from the
    // first sample at or under it.
    // The same after a window cut between two samples: the window the
    // packets in flight left under may have grown past every sampled one
    // before the cut (a loaded machine samples seldom; the CI build's
    // sanitizers saw 53 in flight beside a sampled peak of 39).
    if (s.timeouts != timeouts_seen || s.cuts != cuts_seen) {
      timeouts_seen = s.timeouts;
      cuts_seen = s.cuts;
      draining = true;
    }
    if (draining && pipe <= bound) draining = false;
    if (draining) continue;
    ++checked;
    EXPECT_LE(pipe, bound) << "window peak " << peak << ", sacked " << s.sacked;
  }
  ASSERT_EQ(got, 16u);
  EXPECT_GT(checked, 10) << samples << " samples, " << timeouts_seen << " timeouts";
  EXPECT_EQ(FirstDiff(a_.buf.data(), b_.buf.data(), len), -1);
  // Every loss episode is classified: a cut when the RTT shows a queue, else
  // ignored as a random loss (congestion.cc). Which one depends on the RTT
  // this machine's scheduling gives, so only their sum is certain.
  const EngineStats st = StatsOf(*a_.dev);
  EXPECT_GT(st.cc_loss_cuts + st.cc_loss_ignored, 0u);
}

// The controller is a setting: SOFTRNIC_CC=delay gives every RC QP the
// delay window (delay_window.cc) instead of the default AIMD window. A
// target of 1 us puts every RTT sample above it, so the controller must
// cut (once per RTT) from the first samples on; a 2 % loss makes the
// transfer depend on selective retransmission under that window.
class DelayControllerTest : public CongestionTest {
 protected:
  // SOFTRNIC_CC=delay SOFTRNIC_CC_TARGET_US=1.
  void Configure(EngineConfig& config) override {
    CongestionTest::Configure(config);
    config.cc.algorithm = CcAlgorithm::kDelayWindow;
    config.cc.target_us = 1;
  }
};

TEST_F(DelayControllerTest, TransferUnderLossCompletesAndTheControllerActs) {
  QpOptions o;
  o.timeout = kLossyLinkTimeout;
  o.buf_size = 4 << 20;
  TestFaults f;
  f.drop = 0.02;
  f.seed = 43;
  Open(o, f, {});
  {
    std::lock_guard lock(a_.dev->engine().mu_);
    ASSERT_NE(a_.qp->cc, nullptr);
    EXPECT_STREQ(a_.qp->cc->name(), "delay");
  }
  const uint32_t len = 2 << 20;
  FillPattern(a_.buf, 0, len, 7);
  std::vector<Sge> sg(8);
  for (int i = 0; i < 8; ++i) {
    sg[i] = SgeOf(a_, size_t(i) * (len / 8), len / 8);
    ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, i, {&sg[i], 1},
                                             Addr(b_, size_t(i) * (len / 8)),
                                             b_.dev->MrRkey(b_.mr))),
              0);
  }
  auto wc = PollN(a_, 8);
  ASSERT_EQ(wc.size(), 8u);
  for (const auto& c : wc) EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(FirstDiff(a_.buf.data(), b_.buf.data(), len), -1);
  const EngineStats st = StatsOf(*a_.dev);
  RecordProperty("cc_delay_cuts", std::to_string(st.cc_delay_cuts));
  RecordProperty("cc_loss_cuts", std::to_string(st.cc_loss_cuts));
  RecordProperty("tx_retransmit_packets", std::to_string(st.tx_retransmit_packets));
  EXPECT_GT(st.tx_retransmit_packets, 0u);  // the loss was real
  EXPECT_GT(st.cc_delay_cuts, 0u);          // and the delay controller acted
  EXPECT_EQ(st.cc_loss_ignored, 0u);        // the AIMD window's classification never ran
  EXPECT_LT(Snap(*a_.dev, a_.qp).cwnd, 64.0);
}

}  // namespace
}  // namespace softrnic::engine::testing
