// Sealed RC in the engine (docs/sealed.md): two devices that require
// sealing and share a key run every RC operation with the right data; a
// plain peer, a peer with another key and a replayed packet get nothing
// applied, each counted by reason. Both transports (the suite's .udp run
// puts every packet on a real socket; over shared memory, WRITE/READ/atomics
// go direct and only the ring's packets are sealed).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "rc_pair.h"
#include "seal/key_file.h"

namespace softrnic::engine::testing {
namespace {

// A private key file of `fill` bytes, loaded.
std::shared_ptr<const seal::PreSharedKey> TestKey(uint8_t fill) {
  char path[] = "/tmp/softrnic-sealkey-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  std::string bytes(32, static_cast<char>(fill));
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()), 32);
  close(fd);
  std::string error;
  auto key = seal::LoadKeyFile(path, &error);
  EXPECT_NE(key, nullptr) << error;
  unlink(path);
  return key;
}

EngineConfig Sealed(int which, uint8_t key_fill) {
  EngineConfig c = TestConfig(which);
  c.seal_required = true;
  c.seal_key = TestKey(key_fill);
  return c;
}

// Fails fast: a refused peer must not keep the test waiting for 7 retries
// of a long timeout.
QpOptions Quick() {
  QpOptions o;
  o.timeout = 8;  // ~1 ms
  o.retry_cnt = 2;
  return o;
}

class SealedTest : public RcPairTest {
 protected:
  // A signalled 4 KiB WRITE of pattern `seed` from `from`'s buffer at `at`
  // to the same offset of `to`'s, expected to fail: its completion status,
  // after checking that no byte landed.
  WcStatus RefusedWrite(Side& from, Side& to, size_t at, uint32_t seed) {
    FillPattern(from.buf, at, 4096, seed);
    Sge sge = SgeOf(from, at, 4096);
    EXPECT_EQ(from.dev->PostSend(from.qp, MakeWr(WrOpcode::kRdmaWrite, seed, {&sge, 1},
                                                 Addr(to, at), to.dev->MrRkey(to.mr))),
              0);
    const auto c = PollN(from, 1);
    EXPECT_EQ(c.size(), 1u);
    EXPECT_NE(std::memcmp(from.buf.data() + at, to.buf.data() + at, 4096), 0);
    return c.empty() ? WcStatus::kSuccess : c[0].status;
  }
};

TEST_F(SealedTest, EveryOperationRunsWithTheRightData) {
  OpenWith({}, Sealed(0, 0x5a), Sealed(1, 0x5a));
  WriteAndCheck(a_, b_, 100, 70000, 1);
  WriteAndCheck(b_, a_, 3, 1, 2);

  // SEND with immediate both ways.
  const uint32_t len = 5000;
  FillPattern(a_.buf, 0, len, 3);
  Sge rsge = SgeOf(b_, 400000, len);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{7, {&rsge, 1}}), 0);
  Sge sge = SgeOf(a_, 0, len);
  SendWr send = MakeWr(WrOpcode::kSendWithImm, 9, {&sge, 1});
  send.imm_data = 0x01020304;
  ASSERT_EQ(a_.dev->PostSend(a_.qp, send), 0);
  auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  c = PollN(b_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].byte_len, len);
  EXPECT_EQ(c[0].imm_data, 0x01020304u);
  EXPECT_EQ(std::memcmp(a_.buf.data(), b_.buf.data() + 400000, len), 0);

  // READ back, then FETCH_ADD.
  Sge read_sge = SgeOf(a_, 600000, 70000);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaRead, 10, {&read_sge, 1}, Addr(b_, 100),
                                           b_.dev->MrRkey(b_.mr))),
            0);
  c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(b_.buf.data() + 100, a_.buf.data() + 600000, 70000), 0);
  uint64_t init = 40;
  std::memcpy(b_.buf.data() + 8192, &init, 8);
  Sge atomic_sge = SgeOf(a_, 800000, 8);
  SendWr fa = MakeWr(WrOpcode::kAtomicFetchAdd, 11, {&atomic_sge, 1}, Addr(b_, 8192),
                     b_.dev->MrRkey(b_.mr));
  fa.compare_add = 2;
  ASSERT_EQ(a_.dev->PostSend(a_.qp, fa), 0);
  c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  uint64_t orig = 0, now = 0;
  std::memcpy(&orig, a_.buf.data() + 800000, 8);
  std::memcpy(&now, b_.buf.data() + 8192, 8);
  EXPECT_EQ(orig, 40u);
  EXPECT_EQ(now, 42u);

  for (Side* s : {&a_, &b_}) {
    const EngineStats st = StatsOf(*s->dev);
    EXPECT_EQ(st.qps_sealed, 1u);
    EXPECT_EQ(st.rx_dropped_seal_auth, 0u);
    EXPECT_EQ(st.rx_dropped_unsealed, 0u);
    EXPECT_EQ(st.rx_dropped_seal_unexpected, 0u);
    // Every packet either side sent was sealed. Over UDP everything is
    // packets; over shared memory every operation here may go direct (a
    // SEND into whole shared pages too), with no packet at all.
    if (TransportIsUdp()) {
      EXPECT_GT(st.tx_sealed_packets, 0u);
    }
    EXPECT_EQ(st.tx_sealed_packets, st.tx_packets);
    EXPECT_EQ(st.rx_sealed_packets, st.rx_packets);
  }
}

TEST_F(SealedTest, APlainPeerGetsNothingApplied) {
  if (!TransportIsUdp())
    GTEST_SKIP() << "over shared memory a same-host peer's WRITE goes direct, without packets "
                    "(docs/sealed.md, \"Same host\")";
  OpenWith(Quick(), Sealed(0, 0x5a), TestConfig(1));
  // The plain side's WRITE to the sealed one is dropped there, every retry.
  EXPECT_EQ(RefusedWrite(b_, a_, 0, 4), WcStatus::kRetryExcErr);
  EXPECT_TRUE(WaitFor([&] { return StatsOf(*a_.dev).rx_dropped_unsealed > 0; }));
  // The sealed side's WRITE is dropped by the plain one, which has no key.
  EXPECT_NE(RefusedWrite(a_, b_, 8192, 5), WcStatus::kSuccess);
  // B's progress thread may have left its socket to the test's polling
  // (SleepWhileAppPolls) while A's tries arrived: they are read, and
  // dropped, once it watches again.
  EXPECT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).rx_dropped_seal_unexpected > 0; }));
}

TEST_F(SealedTest, AnotherKeyFailsAuthentication) {
  if (!TransportIsUdp()) GTEST_SKIP() << "direct same-host operations carry no packets";
  OpenWith(Quick(), Sealed(0, 0x5a), Sealed(1, 0x5b));
  EXPECT_EQ(RefusedWrite(a_, b_, 0, 6), WcStatus::kRetryExcErr);
  EXPECT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).rx_dropped_seal_auth > 0; }));
  EXPECT_EQ(StatsOf(*b_.dev).rx_sealed_packets, 0u);
}

TEST_F(SealedTest, DuplicatedPacketsAreReplaysAndTheDataStillArrives) {
  // Every packet A sends goes twice (the fault lab's duplicate, on UDP):
  // the second copy of each is a replay to B's seal.
  TestFaults dup;
  dup.duplicate = 1.0;
  EngineConfig ca = TestConfig(0, dup), cb = TestConfig(1);
  for (EngineConfig* c : {&ca, &cb}) {
    c->seal_required = true;
    c->seal_key = TestKey(0x33);
  }
  OpenWith({}, ca, cb);
  // A SEND goes as packets on both transports (a fault scenario means UDP).
  const uint32_t len = 3000;
  for (int i = 0; i < 4; ++i) {
    FillPattern(a_.buf, 0, len, 10 + i);
    Sge rsge = SgeOf(b_, 0, len);
    ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{1, {&rsge, 1}}), 0);
    Sge sge = SgeOf(a_, 0, len);
    ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 2, {&sge, 1})), 0);
    auto c = PollN(a_, 1);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
    c = PollN(b_, 1);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
    EXPECT_EQ(std::memcmp(a_.buf.data(), b_.buf.data(), len), 0);
  }
  const EngineStats st = StatsOf(*b_.dev);
  EXPECT_GT(st.rx_dropped_seal_replay, 0u);
  // Every duplicate was caught by the seal, before RC's own duplicate
  // check. A retransmission is sealed anew (a fresh nonce: not a replay),
  // so RC may see one for each packet A resent (an ACK late under a loaded
  // CI run did that once) and no more.
  EXPECT_LE(st.rx_duplicates, StatsOf(*a_.dev).tx_retransmit_packets);
}

TEST_F(SealedTest, RequiredWithoutAKeyRefusesToConnect) {
  EngineConfig c = TestConfig(0);
  c.seal_required = true;
  auto dev = MakeDevice(c);
  ASSERT_NE(dev, nullptr);
  Side s;
  SetupSide(s, dev, {});
  QpAttr attr;
  attr.qp_state = QpState::kInit;
  attr.port_num = 1;
  attr.pkey_index = 0;
  attr.qp_access_flags = kRemoteWrite;
  ASSERT_EQ(dev->ModifyQp(s.qp, attr, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  QpAttr rtr;
  rtr.qp_state = QpState::kRtr;
  rtr.path_mtu = Mtu::k1024;
  rtr.dest_qp_num = 0x123456;
  rtr.rq_psn = 0;
  rtr.max_dest_rd_atomic = 1;
  rtr.min_rnr_timer = 1;
  rtr.ah_attr.is_global = true;
  rtr.ah_attr.port_num = 1;
  rtr.ah_attr.dgid = dev->gids()[0];
  EXPECT_EQ(dev->ModifyQp(s.qp, rtr,
                          kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                              kQpMaxDestRdAtomic | kQpMinRnrTimer),
            EACCES);
}

// rdma_cm hands the device an empty exchange when the peer offered or
// answered none (src/rdmacm/cm_seal.cc): require refuses it (the CM then
// sends a REJ) and counts it; prefer leaves the QP plain and counts that.
TEST_F(SealedTest, AnRdmaCmPeerWithoutTheExchangeIsRefusedUnderRequireOnly) {
  auto required = MakeDevice(Sealed(0, 0x11));
  EngineConfig pc = TestConfig(1);
  pc.seal_preferred = true;
  auto preferred = MakeDevice(pc);
  ASSERT_NE(required, nullptr);
  ASSERT_NE(preferred, nullptr);
  Side r, p;
  SetupSide(r, required, {});
  SetupSide(p, preferred, {});
  EXPECT_EQ(required->SealQpByCm(r.qp, {}, {}), EACCES);
  EXPECT_EQ(preferred->SealQpByCm(p.qp, {}, {}), 0);
  const EngineStats rs = StatsOf(*required), ps = StatsOf(*preferred);
  EXPECT_EQ(rs.cm_seal_refused, 1u);
  EXPECT_EQ(rs.cm_seal_declined, 0u);
  EXPECT_EQ(ps.cm_seal_refused, 0u);
  EXPECT_EQ(ps.cm_seal_declined, 1u);
  // An exchange is taken under either policy.
  const uint8_t exchanged[32] = {1, 2, 3}, transcript[64] = {4, 5, 6};
  EXPECT_EQ(required->SealQpByCm(r.qp, exchanged, transcript), 0);
  EXPECT_EQ(StatsOf(*required).cm_seal_exchanges, 1u);
}

}  // namespace
}  // namespace softrnic::engine::testing
