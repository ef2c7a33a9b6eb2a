// Issue 17, message size: RDMA WRITE, READ, SEND and WRITE_WITH_IMM of
// 1 GiB complete with the data verified, with the QP's default Local ACK
// Timeout (14: 4.096 us x 2^14 = 67 ms, perftest's and rc_pair.h's), on
// the environment's transport (shared memory by default, UDP in the
// ".udp" registration, tests/CMakeLists.txt) and over UDP with 1% loss on
// both sides (fault injection always runs over UDP).
//
// Before the fix, a READ of 256 MiB over UDP ended in RETRY_EXC_ERR: it was
// one request on the wire, whose responder poured out the whole answer at
// once; a response lost to the requester's full socket buffer made the
// requester ask for the rest, which the responder read only after sending
// the stale rest, longer than the Local ACK Timeout (qp.h,
// kReadRequestPackets).
//
// Not timed: the figures are logged (docs/benchmarks.md, "Message size").
#include <chrono>
#include <cstdio>
#include <cstring>

#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

constexpr uint32_t kBig = 1u << 30;

// Patterns distinct per operation, so that data left by an earlier one
// cannot pass for the next one's. Word-wise: 1 GiB byte by byte is slow.
SOFTRNIC_NO_TSAN void FillWords(std::vector<uint8_t>& b, size_t len, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i + 8 <= len; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(b.data() + i, &x, 8);
  }
}

SOFTRNIC_NO_TSAN bool Same(const uint8_t* a, const uint8_t* b, size_t n) {
  return std::memcmp(a, b, n) == 0;
}

class BigMessageTest : public RcPairTest {
 protected:
  // A completion of `side` within the limit (a lossy 1 GiB transfer over
  // UDP on a busy 2-CPU machine takes tens of seconds).
  Completion One(Side& side) {
    auto c = PollN(side, 1, std::chrono::milliseconds(240000));
    EXPECT_EQ(c.size(), 1u);
    return c.empty() ? Completion{} : c[0];
  }

  void Log(const char* what, std::chrono::steady_clock::time_point t0) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ big      ] %-16s %u MiB in %.2f s (%.2f GB/s)\n", what, len_ >> 20, s,
                len_ / s / 1e9);
  }

  // WRITE a->b, READ b->a, SEND a->b, WRITE_WITH_IMM a->b, each of len_.
  void RunEveryOpcode() {
    const uint32_t rkey_b = b_.dev->MrRkey(b_.mr);
    Sge src = SgeOf(a_, 0, len_);
    Sge dst = SgeOf(b_, 0, len_);

    FillWords(a_.buf, len_, 1);
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 1, {&src, 1}, Addr(b_, 0),
                                             rkey_b)),
              0);
    Completion c = One(a_);
    ASSERT_EQ(c.status, WcStatus::kSuccess) << "WRITE";
    Log("WRITE", t0);
    EXPECT_TRUE(Same(a_.buf.data(), b_.buf.data(), len_)) << "WRITE data";

    FillWords(b_.buf, len_, 2);
    t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaRead, 2, {&src, 1}, Addr(b_, 0),
                                             rkey_b)),
              0);
    c = One(a_);
    ASSERT_EQ(c.status, WcStatus::kSuccess) << "READ";
    EXPECT_EQ(c.byte_len, len_);
    Log("READ", t0);
    EXPECT_TRUE(Same(a_.buf.data(), b_.buf.data(), len_)) << "READ data";

    FillWords(a_.buf, len_, 3);
    ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{30, {&dst, 1}}), 0);
    t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 3, {&src, 1})), 0);
    c = One(a_);
    ASSERT_EQ(c.status, WcStatus::kSuccess) << "SEND";
    Completion r = One(b_);
    ASSERT_EQ(r.status, WcStatus::kSuccess) << "RECV";
    EXPECT_EQ(r.wr_id, 30u);
    EXPECT_EQ(r.byte_len, len_);
    Log("SEND", t0);
    EXPECT_TRUE(Same(a_.buf.data(), b_.buf.data(), len_)) << "SEND data";

    FillWords(a_.buf, len_, 4);
    ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{40, {}}), 0);
    SendWr wr = MakeWr(WrOpcode::kRdmaWriteWithImm, 4, {&src, 1}, Addr(b_, 0), rkey_b);
    wr.imm_data = 0x12345678;
    t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
    c = One(a_);
    ASSERT_EQ(c.status, WcStatus::kSuccess) << "WRITE_WITH_IMM";
    r = One(b_);
    ASSERT_EQ(r.status, WcStatus::kSuccess) << "RECV_RDMA_WITH_IMM";
    EXPECT_EQ(r.wr_id, 40u);
    EXPECT_EQ(r.opcode, WcOpcode::kRecvRdmaWithImm);
    EXPECT_EQ(r.imm_data, 0x12345678u);
    EXPECT_EQ(r.byte_len, len_);
    Log("WRITE_WITH_IMM", t0);
    EXPECT_TRUE(Same(a_.buf.data(), b_.buf.data(), len_)) << "WRITE_WITH_IMM data";

    const EngineStats sa = StatsOf(*a_.dev);
    const transport::TransportCounters ta = TransportCountersOf(*a_.dev);
    std::printf(
        "[ big      ] requester: %llu timeouts, %llu rewinds, %llu packets resent; "
        "%llu direct operations, packets out: %llu through rings, %llu over UDP\n",
        static_cast<unsigned long long>(sa.retransmit_timeouts),
        static_cast<unsigned long long>(sa.retransmitted_rewinds),
        static_cast<unsigned long long>(sa.tx_retransmit_packets),
        static_cast<unsigned long long>(DirectOpsOf(*a_.dev)),
        static_cast<unsigned long long>(ta.shm_tx_packets),
        static_cast<unsigned long long>(ta.tx_packets));
  }

  QpOptions BigOptions() {
    QpOptions o;  // timeout 14, retry_cnt 7: the defaults this is about
    o.buf_size = len_;
    o.mtu = Mtu::k4096;
    return o;
  }

  uint32_t len_ = kBig;
};

// Shared memory by default (WRITE and READ straight into the peer's
// memory, SEND and WRITE_WITH_IMM through the rings); UDP as ".udp".
TEST_F(BigMessageTest, EveryOpcodeOneGiB) {
  Open(BigOptions());
  RunEveryOpcode();
}

TEST_F(BigMessageTest, EveryOpcodeOneGiBWithOnePercentLoss) {
  if (TestConfig(0).transport_mode == transport::TransportMode::kUdp)
    GTEST_SKIP() << "fault injection runs over UDP in either registration: run once";
  TestFaults fa, fb;
  fa.drop = fb.drop = 0.01;
  fa.seed = 17;
  fb.seed = 1717;
  Open(BigOptions(), fa, fb);
  RunEveryOpcode();
  const transport::TransportCounters ta = TransportCountersOf(*a_.dev);
  const transport::TransportCounters tb = TransportCountersOf(*b_.dev);
  std::printf("[ big      ] injected drops: %llu (a), %llu (b)\n",
              static_cast<unsigned long long>(ta.injected_drops),
              static_cast<unsigned long long>(tb.injected_drops));
  EXPECT_GT(ta.injected_drops + tb.injected_drops, 0u);
}

}  // namespace
}  // namespace softrnic::engine::testing
