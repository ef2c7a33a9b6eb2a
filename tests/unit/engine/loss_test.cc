// Acceptance item 4: a mixed stream of SEND / WRITE / READ / atomics over RC
// on lossy links (drop, duplicate, reorder; faults on both sides, fixed
// seeds). Every message must complete in posting order with correct data,
// and every atomic must be applied exactly once.
#include <cstring>
#include <random>

#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

struct LossCase {
  const char* name;
  double drop, dup, reorder;
  uint64_t seed;
  uint32_t start_psn;
};

// Buffer layout (both sides use one 8 MiB region).
constexpr int kBatch = 32;
constexpr size_t kSlot = 64 * 1024;
constexpr size_t kSrc = 0;                   // a: message sources, one slot per op
constexpr size_t kReadDst = kBatch * kSlot;  // a: READ destinations
constexpr size_t kResults = 2 * kBatch * kSlot;  // a: atomic results (8 B each)
constexpr size_t kRecv = 0;                  // b: receive buffers
constexpr size_t kWriteDst = kBatch * kSlot;    // b: WRITE targets
constexpr size_t kReadSrc = 2 * kBatch * kSlot;  // b: READ sources (fixed pattern)
constexpr size_t kCounter = 3 * kBatch * kSlot;  // b: FETCH_ADD counter
constexpr size_t kSwapWord = kCounter + 64;      // b: CMP_SWAP chain word

enum class Kind { kSend, kWrite, kRead, kFetchAdd, kCmpSwap };

struct Planned {
  Kind kind;
  uint32_t len = 0;
  uint32_t src_off = 0;  // READ: offset in b's read source
  uint64_t expect_orig = 0;
  size_t result_off = 0;
};

class LossTest : public RcPairTest, public ::testing::WithParamInterface<LossCase> {};

TEST_P(LossTest, MixedStreamCompletesExactlyOnce) {
  const LossCase& lc = GetParam();
  QpOptions o;
  o.timeout = kLossyLinkTimeout;
  o.retry_cnt = 7;
  o.psn = lc.start_psn;
  o.buf_size = 8 << 20;
  TestFaults fa, fb;
  fa.drop = fb.drop = lc.drop;
  fa.duplicate = fb.duplicate = lc.dup;
  fa.reorder = fb.reorder = lc.reorder;
  fa.seed = lc.seed;
  fb.seed = lc.seed * 7919 + 1;
  Open(o, fa, fb);
  FillPattern(b_.buf, kReadSrc, kBatch * kSlot, 999);

  std::mt19937 rng(static_cast<uint32_t>(lc.seed));
  const uint32_t sizes[] = {0, 1, 3, 100, 1023, 1024, 1025, 4096, 5000, 20000, 65536};
  const int batches = 10;
  uint64_t next_id = 1;
  uint64_t fetch_adds = 0;
  uint64_t swaps = 0;
  size_t result_slot = 0;
  for (int batch = 0; batch < batches; ++batch) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    std::vector<Planned> plan(kBatch);
    std::vector<Sge> sges(kBatch);
    std::vector<Sge> rsges(kBatch);
    int sends = 0;
    const uint64_t first_id = next_id;
    for (int i = 0; i < kBatch; ++i) {
      Planned& p = plan[i];
      p.kind = static_cast<Kind>(rng() % 5);
      p.len = sizes[rng() % std::size(sizes)];
      const uint32_t seed = static_cast<uint32_t>(next_id * 31 + i);
      SendWr wr;
      wr.wr_id = next_id++;
      wr.send_flags = kSignaled;
      switch (p.kind) {
        case Kind::kSend:
          FillPattern(a_.buf, kSrc + i * kSlot, p.len, seed);
          sges[i] = SgeOf(a_, kSrc + i * kSlot, p.len);
          rsges[i] = SgeOf(b_, kRecv + i * kSlot, kSlot);
          ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{wr.wr_id, {&rsges[i], 1}}), 0);
          ++sends;
          wr.opcode = WrOpcode::kSend;
          break;
        case Kind::kWrite:
          FillPattern(a_.buf, kSrc + i * kSlot, p.len, seed);
          sges[i] = SgeOf(a_, kSrc + i * kSlot, p.len);
          wr.opcode = WrOpcode::kRdmaWrite;
          wr.remote_addr = Addr(b_, kWriteDst + i * kSlot);
          wr.rkey = b_.dev->MrRkey(b_.mr);
          break;
        case Kind::kRead:
          p.src_off = static_cast<uint32_t>(rng() % (kBatch * kSlot - p.len + 1));
          std::memset(a_.buf.data() + kReadDst + i * kSlot, 0, p.len);
          sges[i] = SgeOf(a_, kReadDst + i * kSlot, p.len);
          wr.opcode = WrOpcode::kRdmaRead;
          wr.remote_addr = Addr(b_, kReadSrc + p.src_off);
          wr.rkey = b_.dev->MrRkey(b_.mr);
          break;
        case Kind::kFetchAdd:
          p.len = 8;
          p.result_off = kResults + 8 * result_slot++;
          sges[i] = SgeOf(a_, p.result_off, 8);
          wr.opcode = WrOpcode::kAtomicFetchAdd;
          wr.remote_addr = Addr(b_, kCounter);
          wr.rkey = b_.dev->MrRkey(b_.mr);
          wr.compare_add = 1;
          p.expect_orig = fetch_adds++;
          break;
        case Kind::kCmpSwap:
          p.len = 8;
          p.result_off = kResults + 8 * result_slot++;
          sges[i] = SgeOf(a_, p.result_off, 8);
          wr.opcode = WrOpcode::kAtomicCmpSwp;
          wr.remote_addr = Addr(b_, kSwapWord);
          wr.rkey = b_.dev->MrRkey(b_.mr);
          // A chain: succeeds only if every earlier swap happened exactly once.
          wr.compare_add = swaps;
          wr.swap = swaps + 1;
          p.expect_orig = swaps++;
          break;
      }
      wr.sges = {&sges[i], 1};
      ASSERT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
    }
    auto sc = PollN(a_, kBatch, std::chrono::milliseconds(15000));
    ASSERT_EQ(sc.size(), size_t{kBatch}) << "stalled; a=" << QpStateName(a_.dev->GetQpState(a_.qp))
                                         << " b=" << QpStateName(b_.dev->GetQpState(b_.qp));
    for (int i = 0; i < kBatch; ++i) {
      ASSERT_EQ(sc[i].status, WcStatus::kSuccess) << "op " << i;
      EXPECT_EQ(sc[i].wr_id, first_id + i) << "completions out of posting order";
    }
    auto rc = PollN(b_, sends, std::chrono::milliseconds(5000));
    ASSERT_EQ(rc.size(), size_t(sends));
    size_t r = 0;
    for (int i = 0; i < kBatch; ++i) {
      const Planned& p = plan[i];
      SCOPED_TRACE("op " + std::to_string(i) + " len " + std::to_string(p.len));
      switch (p.kind) {
        case Kind::kSend:
          EXPECT_EQ(rc[r].status, WcStatus::kSuccess);
          EXPECT_EQ(rc[r].wr_id, first_id + i);
          EXPECT_EQ(rc[r].byte_len, p.len);
          ++r;
          EXPECT_EQ(FirstDiff(b_.buf.data() + kRecv + i * kSlot, a_.buf.data() + kSrc + i * kSlot, p.len), -1);
          break;
        case Kind::kWrite:
          EXPECT_EQ(FirstDiff(b_.buf.data() + kWriteDst + i * kSlot, a_.buf.data() + kSrc + i * kSlot, p.len), -1);
          break;
        case Kind::kRead:
          EXPECT_EQ(FirstDiff(a_.buf.data() + kReadDst + i * kSlot, b_.buf.data() + kReadSrc + p.src_off, p.len), -1);
          break;
        case Kind::kFetchAdd:
        case Kind::kCmpSwap: {
          uint64_t orig;
          std::memcpy(&orig, a_.buf.data() + p.result_off, 8);
          EXPECT_EQ(orig, p.expect_orig);
          break;
        }
      }
    }
  }
  uint64_t counter, word;
  std::memcpy(&counter, b_.buf.data() + kCounter, 8);
  std::memcpy(&word, b_.buf.data() + kSwapWord, 8);
  EXPECT_EQ(counter, fetch_adds) << "FETCH_ADD applied other than exactly once";
  EXPECT_EQ(word, swaps) << "CMP_SWAP chain broken";
  EXPECT_EQ(a_.dev->GetQpState(a_.qp), QpState::kRts);
  EXPECT_EQ(b_.dev->GetQpState(b_.qp), QpState::kRts);
  const auto ta = TransportCountersOf(*a_.dev);
  const auto tb = TransportCountersOf(*b_.dev);
  // The faults really happened.
  if (lc.drop > 0) {
    EXPECT_GT(ta.injected_drops + tb.injected_drops, 0u);
  }
  if (lc.dup > 0) {
    EXPECT_GT(ta.injected_dups + tb.injected_dups, 0u);
  }
  if (lc.reorder > 0) {
    EXPECT_GT(ta.injected_reorders + tb.injected_reorders, 0u);
  }
  const auto sa = StatsOf(*a_.dev);
  RecordProperty("retransmit_timeouts", std::to_string(sa.retransmit_timeouts));
  RecordProperty("rewinds", std::to_string(sa.retransmitted_rewinds));
}

INSTANTIATE_TEST_SUITE_P(
    Faults, LossTest,
    ::testing::Values(LossCase{"Drop1", 0.01, 0, 0, 11, 0},
                      LossCase{"Drop5", 0.05, 0, 0, 12, 0},
                      LossCase{"Dup1", 0, 0.01, 0, 13, 0},
                      LossCase{"Reorder2", 0, 0, 0.02, 14, 0},
                      LossCase{"AllAcrossPsnWrap", 0.01, 0.01, 0.02, 15, 0xFFFF80},
                      LossCase{"Drop5Dup1Reorder2", 0.05, 0.01, 0.02, 16, 0}),
    [](const ::testing::TestParamInfo<LossCase>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace softrnic::engine::testing
