// Issue 14, findings H1 and M1 (docs/security.md): the identifiers a peer can
// aim at — memory keys and QP numbers — cannot be predicted from the ones it
// has already seen.
//
// The key test plays the ReDMArk attack: 624 consecutive std::mt19937
// outputs (312 registrations, lkey then rkey) are untempered into the
// generator's state, which then predicts the next registration's keys. A
// positive control runs the same predictor against a real std::mt19937, so a
// pass means the keys are not an MT stream, not that the predictor is broken.
#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "engine_test_peer.h"
#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

// ---- MT19937 state recovery (Matsumoto & Nishimura 1998) -----------------

constexpr int kMtN = 624;
constexpr int kMtM = 397;

// Inverts y ^= y >> shift.
uint32_t UndoRightShiftXor(uint32_t y, int shift) {
  uint32_t x = y;
  for (int i = 0; i < 32 / shift + 1; ++i) x = y ^ (x >> shift);
  return x;
}

// Inverts y ^= (y << shift) & mask.
uint32_t UndoLeftShiftXor(uint32_t y, int shift, uint32_t mask) {
  uint32_t x = y;
  for (int i = 0; i < 32 / shift + 1; ++i) x = y ^ ((x << shift) & mask);
  return x;
}

// One output back to the state word it was tempered from.
uint32_t Untemper(uint32_t y) {
  y = UndoRightShiftXor(y, 18);
  y = UndoLeftShiftXor(y, 15, 0xefc60000u);
  y = UndoLeftShiftXor(y, 7, 0x9d2c5680u);
  return UndoRightShiftXor(y, 11);
}

uint32_t Temper(uint32_t y) {
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

// Given 624 consecutive outputs, the next `count` outputs of the generator.
std::vector<uint32_t> PredictMt(const std::vector<uint32_t>& outputs, int count) {
  std::array<uint32_t, kMtN> state;
  for (int i = 0; i < kMtN; ++i) state[i] = Untemper(outputs[i]);
  std::vector<uint32_t> next;
  for (int i = 0; i < count; ++i) {
    const int k = i % kMtN;  // count <= 624: one twist step per output
    const uint32_t y = (state[k] & 0x80000000u) | (state[(k + 1) % kMtN] & 0x7fffffffu);
    state[k] = state[(k + kMtM) % kMtN] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    next.push_back(Temper(state[k]));
  }
  return next;
}

TEST(IdentifiersTest, PredictorRecoversAStdMt19937) {
  std::mt19937 rng(0xC0FFEE);
  for (int i = 0; i < 1000; ++i) rng();  // an arbitrary point in the stream
  std::vector<uint32_t> seen;
  for (int i = 0; i < kMtN; ++i) seen.push_back(static_cast<uint32_t>(rng()));
  const std::vector<uint32_t> predicted = PredictMt(seen, 2);
  EXPECT_EQ(predicted[0], static_cast<uint32_t>(rng()));
  EXPECT_EQ(predicted[1], static_cast<uint32_t>(rng()));
}

class IdentifiersDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dev_ = MakeDevice(0);
    ASSERT_NE(dev_, nullptr);
    ASSERT_EQ(dev_->AllocPd(nullptr, &pd_), 0);
  }
  Mr* Register(uint32_t access = kLocalWrite | kRemoteWrite | kRemoteRead) {
    Mr* mr = nullptr;
    EXPECT_EQ(dev_->RegMr(pd_, buf_.data(), buf_.size(), reinterpret_cast<uint64_t>(buf_.data()), access,
                          nullptr, &mr),
              0);
    return mr;
  }
  // Whether `rkey` gives remote write access to the start of the buffer.
  bool Resolves(uint32_t rkey) {
    std::lock_guard lock(dev_->engine().mu_);
    uint8_t* where = nullptr;
    return EngineTestPeer::mr_table(dev_->engine()).ResolveRemote(rkey, pd_, reinterpret_cast<uint64_t>(buf_.data()), 8,
                                                  kRemoteWrite, &where) == KeyCheck::kOk;
  }
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(4096);
  std::shared_ptr<Device> dev_;
  Pd* pd_ = nullptr;
};

// H1: an attacker who sees 312 registrations' keys (as a peer sees the rkeys
// it is given) must not be able to compute the 313th.
TEST_F(IdentifiersDeviceTest, NextKeysNotPredictableFrom624Previous) {
  std::vector<uint32_t> seen;
  for (int i = 0; i < kMtN / 2; ++i) {
    Mr* mr = Register();
    ASSERT_NE(mr, nullptr);
    seen.push_back(dev_->MrLkey(mr));
    seen.push_back(dev_->MrRkey(mr));
  }
  const std::vector<uint32_t> predicted = PredictMt(seen, 2);
  Mr* next = Register();
  ASSERT_NE(next, nullptr);
  EXPECT_NE(predicted[1], dev_->MrRkey(next)) << "rkey of the 313th MR predicted from the 312 before it";
  EXPECT_NE(predicted[0], dev_->MrLkey(next)) << "lkey of the 313th MR predicted from the 312 before it";
}

// IBA 10.6.3.x key layout: random 24-bit index part, 8-bit key part that
// changes on every registration; keys unique among live regions, never 0,
// lkey != rkey.
TEST_F(IdentifiersDeviceTest, KeysHaveRandomIndexAndPerRegistrationKeyPart) {
  constexpr int kRegions = 2000;
  std::set<uint32_t> live;
  std::set<uint32_t> index_bits_high;  // top 8 bits seen: the index spans the whole range
  uint32_t previous_key_part = 0;
  for (int i = 0; i < kRegions; ++i) {
    Mr* mr = Register();
    ASSERT_NE(mr, nullptr);
    const uint32_t lkey = dev_->MrLkey(mr);
    const uint32_t rkey = dev_->MrRkey(mr);
    ASSERT_NE(lkey, 0u);
    ASSERT_NE(rkey, 0u);
    ASSERT_NE(lkey, rkey);
    ASSERT_TRUE(live.insert(lkey).second) << "lkey " << lkey << " already in use";
    ASSERT_TRUE(live.insert(rkey).second) << "rkey " << rkey << " already in use";
    // One registration, one key part: both keys carry it.
    EXPECT_EQ(lkey & 0xFF, rkey & 0xFF);
    if (i > 0) {
      EXPECT_NE(rkey & 0xFF, previous_key_part) << "key part unchanged at registration " << i;
    }
    previous_key_part = rkey & 0xFF;
    index_bits_high.insert(rkey >> 24);
  }
  // 2000 uniform draws of an 8-bit value leave out none of the 256 values
  // with probability about 256 * e^-7.8 ~ 0.1; a sequential or 16-bit index
  // would leave out nearly all.
  EXPECT_GT(index_bits_high.size(), 200u);
}

// Deregistration revokes at once; registering the same memory again gives
// keys the old ones do not match.
TEST_F(IdentifiersDeviceTest, DeregisteredRkeyStopsResolvingAndReRegistrationGetsNewKeys) {
  for (int round = 0; round < 64; ++round) {
    Mr* mr = Register();
    ASSERT_NE(mr, nullptr);
    const uint32_t old_rkey = dev_->MrRkey(mr);
    const uint32_t old_lkey = dev_->MrLkey(mr);
    ASSERT_TRUE(Resolves(old_rkey));
    ASSERT_EQ(dev_->DeregMr(mr), 0);
    EXPECT_FALSE(Resolves(old_rkey)) << "rkey still resolves after deregistration";
    Mr* again = Register();
    ASSERT_NE(again, nullptr);
    EXPECT_NE(dev_->MrRkey(again), old_rkey);
    EXPECT_NE(dev_->MrLkey(again), old_lkey);
    EXPECT_FALSE(Resolves(old_rkey)) << "the old rkey reaches the re-registered buffer";
    EXPECT_TRUE(Resolves(dev_->MrRkey(again)));
    ASSERT_EQ(dev_->DeregMr(again), 0);
  }
}

// M1: QPNs are fresh 24-bit random values, not a sequence a peer can walk.
TEST_F(IdentifiersDeviceTest, QpnsAreRandom24BitValues) {
  constexpr int kQps = 1000;
  Cq* cq = nullptr;
  ASSERT_EQ(dev_->CreateCq(16, nullptr, nullptr, &cq), 0);
  std::vector<Qp*> qps;
  std::vector<uint32_t> qpns;
  std::set<uint32_t> distinct;
  for (int i = 0; i < kQps; ++i) {
    QpCaps caps{1, 1, 1, 1, 0};
    Qp* qp = nullptr;
    ASSERT_EQ(dev_->CreateQp(pd_, i % 2 ? QpType::kRc : QpType::kUd, cq, cq, nullptr, &caps, false, nullptr, &qp), 0);
    qps.push_back(qp);
    const uint32_t qpn = dev_->QpNum(qp);
    EXPECT_LE(qpn, wire::kQpnMask);
    EXPECT_NE(qpn, 0u);
    EXPECT_NE(qpn, 1u);
    EXPECT_NE(qpn, 0xFFFFFFu) << "the multicast QPN";
    qpns.push_back(qpn);
    distinct.insert(qpn);
  }
  EXPECT_EQ(distinct.size(), size_t{kQps});
  int steps_of_one = 0;
  std::set<uint32_t> high_bytes;
  for (int i = 0; i < kQps; ++i) {
    if (i > 0 && qpns[i] - qpns[i - 1] == 1) ++steps_of_one;
    high_bytes.insert(qpns[i] >> 16);
  }
  // Random 24-bit draws: a step of exactly +1 has probability 2^-24 each.
  EXPECT_LE(steps_of_one, 3) << "QPNs are handed out in sequence";
  // 1000 draws of the top 8 bits cover well over 200 of 256 values.
  EXPECT_GT(high_bytes.size(), 200u) << "QPNs do not span the 24-bit space";
  for (Qp* qp : qps) ASSERT_EQ(dev_->DestroyQp(qp), 0);
  ASSERT_EQ(dev_->DestroyCq(cq), 0);
}


// A transport that a host NIC daemon gave lane 0x42 (docs/host-nic.md):
// sends nowhere, receives nothing; only its lane matters here.
class LaneTransport final : public transport::Transport {
 public:
  explicit LaneTransport(std::span<const transport::Endpoint> locals)
      : locals_(locals.begin(), locals.end()) {}
  std::span<const transport::Endpoint> locals() const override { return locals_; }
  int SendBurst(const transport::TxPacket*, int n) override { return n; }
  int RecvBurst(transport::RxPacket*, int) override { return 0; }
  int pollable_fd() const override { return -1; }
  const transport::TransportCounters& counters() const override { return counters_; }
  int qpn_lane() const override { return 0x42; }

 private:
  std::vector<transport::Endpoint> locals_;
  transport::TransportCounters counters_;
};

// With a lane, every QPN is lane << 16 | 16 random bits: the host's shared
// port steers by the top byte, and the rest stays unpredictable.
TEST_F(IdentifiersDeviceTest, QpnsOfALaneCarryItInTheirTopByte) {
  Engine& e = dev_->engine();
  e.StopProgressThread();
  {
    SpinLock lock(e.mu_);
    EngineTestPeer::ReplaceTransport(
        e, std::make_unique<LaneTransport>(EngineTestPeer::transport(e).locals()));
  }
  Cq* cq = nullptr;
  ASSERT_EQ(dev_->CreateCq(16, nullptr, nullptr, &cq), 0);
  constexpr int kQps = 2000;
  std::vector<Qp*> qps;
  std::set<uint32_t> distinct;
  int steps_of_one = 0;
  uint32_t last = 0;
  for (int i = 0; i < kQps; ++i) {
    QpCaps caps{1, 1, 1, 1, 0};
    Qp* qp = nullptr;
    ASSERT_EQ(dev_->CreateQp(pd_, i % 2 ? QpType::kRc : QpType::kUd, cq, cq, nullptr, &caps, false,
                             nullptr, &qp),
              0);
    qps.push_back(qp);
    const uint32_t qpn = dev_->QpNum(qp);
    EXPECT_EQ(qpn >> 16, 0x42u) << std::hex << qpn;
    if (i > 0 && qpn - last == 1) ++steps_of_one;
    last = qpn;
    distinct.insert(qpn);
  }
  EXPECT_EQ(distinct.size(), size_t{kQps});
  EXPECT_LE(steps_of_one, 3) << "QPNs of a lane are handed out in sequence";
  for (Qp* qp : qps) ASSERT_EQ(dev_->DestroyQp(qp), 0);
  ASSERT_EQ(dev_->DestroyCq(cq), 0);
}

}  // namespace
}  // namespace softrnic::engine::testing
