// Direct SEND on one host (engine/same_host/shm_direct_send.cc, docs/shm.md): a SEND
// whose receive WQE lies in shared pages is placed by the requester itself,
// with no packet; one that cannot be (a buffer outside shared pages, no WQE,
// a buffer too short, a deregistered buffer) goes as packets and gets the
// answers it gets over the wire; both kinds keep RC's order. Forged queue
// entries and completions (a hostile peer's) are refused.
//
// Two devices of one process over the shared-memory transport; skipped
// when the suite runs over UDP (SOFTRNIC_TRANSPORT=udp) or without direct
// operations.
#include <sys/mman.h>

#include "interleaved_sends.h"

namespace softrnic::engine::testing {
namespace {

// In a_.buf / b_.buf (4 MiB): offsets from 64 KiB on lie in whole pages,
// which registration shares whatever the allocator's alignment.
constexpr size_t kShared = 64 * 1024;

class ShmDirectSendTest : public RcPairTest {
 protected:
  void SetUp() override {
    QpOptions o;
    o.buf_size = 4 << 20;
    Open(o);
    if (a_.dev->engine().shm_direct() == nullptr)
      GTEST_SKIP() << "no shared-memory direct path in this run";
  }
  static uint64_t DirectSendsOf(Device& d) { return StatsOf(d).shm_direct_send_ops; }
  static uint64_t DirectRecvsOf(Device& d) { return StatsOf(d).shm_direct_recv_ops; }
  static uint64_t ShmPacketsInto(Device& d) { return TransportCountersOf(d).shm_rx_packets; }

  // A private anonymous mapping of len bytes registered on b with local
  // write (the caller unmaps it).
  void MapAndRegister(size_t len, uint8_t** buf, Mr** mr) {
    void* mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    *buf = static_cast<uint8_t*>(mem);
    ASSERT_EQ(b_.dev->RegMr(b_.pd, *buf, len, reinterpret_cast<uint64_t>(*buf), kLocalWrite,
                            nullptr, mr),
              0);
  }
  // A SEND of len bytes from a's buffer at kShared (pattern `seed` unless
  // 0); its completion on a and the receive's on b (copied to *received)
  // have these statuses.
  void SendExpecting(uint32_t len, uint32_t seed, WcStatus at_sender, WcStatus at_receiver,
                     Completion* received = nullptr) {
    if (seed != 0) FillPattern(a_.buf, kShared, len, seed);
    Sge s = SgeOf(a_, kShared, len);
    ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 1, {&s, 1})), 0);
    const auto c = PollN(a_, 1);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, at_sender);
    const auto rc = PollN(b_, 1);
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].status, at_receiver);
    if (received != nullptr) *received = rc[0];
  }
};

TEST_F(ShmDirectSendTest, SendsLandInThePostedBuffersWithoutAPacket) {
  const uint32_t sizes[] = {0, 1, 8, 4096, 65536, 1 << 20};
  constexpr int kN = 6;
  const uint64_t sends0 = DirectSendsOf(*a_.dev), recvs0 = DirectRecvsOf(*b_.dev);
  const uint64_t packets0 = ShmPacketsInto(*b_.dev);
  size_t at = kShared;
  size_t dst[kN];
  for (int i = 0; i < kN; ++i) {
    dst[i] = at;
    at += sizes[i] + 4096;
    std::memset(b_.buf.data() + dst[i], 0xEE, sizes[i] + 64);
    Sge r = SgeOf(b_, dst[i], sizes[i] + 64);
    ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{uint64_t(100 + i), {&r, 1}}), 0);
  }
  size_t src = kShared;
  for (int i = 0; i < kN; ++i) {
    FillPattern(a_.buf, src, sizes[i], 7 + i);
    Sge s = SgeOf(a_, src, sizes[i]);
    SendWr wr = MakeWr(i % 2 ? WrOpcode::kSendWithImm : WrOpcode::kSend, uint64_t(i), {&s, 1});
    wr.imm_data = 0x01020300u + i;
    if (i == 3) wr.send_flags |= kSolicited;
    ASSERT_EQ(a_.dev->PostSend(a_.qp, wr), 0);
    // The next one reuses the source: wait for this one.
    const auto c = PollN(a_, 1);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
    const auto r = PollN(b_, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, WcStatus::kSuccess);
    EXPECT_EQ(r[0].wr_id, uint64_t(100 + i));
    EXPECT_EQ(r[0].opcode, WcOpcode::kRecv);
    EXPECT_EQ(r[0].byte_len, sizes[i]);
    EXPECT_EQ(r[0].qp_num, b_.dev->QpNum(b_.qp));
    EXPECT_EQ((r[0].wc_flags & kWcWithImm) != 0, i % 2 == 1);
    if (i % 2) {
      EXPECT_EQ(r[0].imm_data, 0x01020300u + i);
    }
    EXPECT_EQ(FirstDiff(b_.buf.data() + dst[i], a_.buf.data() + src, sizes[i]), -1);
    EXPECT_TRUE(AllBytes(b_.buf.data() + dst[i] + sizes[i], 64, 0xEE));
  }
  EXPECT_EQ(DirectSendsOf(*a_.dev) - sends0, uint64_t{kN});
  EXPECT_EQ(DirectRecvsOf(*b_.dev) - recvs0, uint64_t{kN});
  // Nothing at all went through b's rings: no request, and (a direct
  // operation needs no ACK) nothing from b either.
  EXPECT_EQ(ShmPacketsInto(*b_.dev), packets0);
}

// Receive buffers alternately in shared pages (direct) and in a shared
// mapping of the application's own (MAP_SHARED: never moved into a memfd,
// so its SENDs go as packets): every SEND completes, in posting order, with
// its data.
TEST_F(ShmDirectSendTest, DirectAndPacketSendsKeepTheirOrder) {
  constexpr int kN = 8;
  constexpr uint32_t kLen = 100;
  InterleavedBuffers bufs;
  bufs.Open(b_, kShared, 128);
  const uint64_t sends0 = DirectSendsOf(*a_.dev);
  for (int i = 0; i < kN; ++i) {
    Sge r = bufs.sge(i, kLen);
    ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{uint64_t(200 + i), {&r, 1}}), 0);
  }
  SendInterleavedBurst(a_, kShared, kN, kLen, 50);
  ExpectInterleavedArrivals(b_, a_, kShared, kN, kLen, 200, b_.dev->QpNum(b_.qp), bufs);
  // Only buffers in shared pages were filled directly (and not necessarily
  // all of them: one posted behind a packet waits for its ACK, or goes
  // as packets itself).
  const uint64_t direct = DirectSendsOf(*a_.dev) - sends0;
  EXPECT_GE(direct, 1u);
  EXPECT_LE(direct, uint64_t{kN / 2});
}

// No receive WQE: the SEND goes as packets and is RNR-NAKed until one is
// posted, then delivered, as over the wire (IBA 9.7.5.1.6).
TEST_F(ShmDirectSendTest, NoReceiveWqeIsRetriedUntilOneIsPosted) {
  FillPattern(a_.buf, kShared, 512, 3);
  Sge s = SgeOf(a_, kShared, 512);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 1, {&s, 1})), 0);
  EXPECT_TRUE(PollFor(a_, std::chrono::milliseconds(30)).empty());
  Sge r = SgeOf(b_, kShared, 512);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{7, {&r, 1}}), 0);
  const auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  const auto rc = PollN(b_, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].byte_len, 512u);
  EXPECT_EQ(FirstDiff(b_.buf.data() + kShared, a_.buf.data() + kShared, 512), -1);
  EXPECT_GT(StatsOf(*b_.dev).tx_rnr_naks, 0u);
}

// A message longer than the receive buffer is not placed: the responder
// refuses it as over the wire (IBA 9.7.5.1.5: Invalid Request NAK; the
// receive completes with LOC_LEN_ERR), and the bytes after the buffer
// stay untouched.
TEST_F(ShmDirectSendTest, MessageLongerThanTheBufferFailsAsOverTheWire) {
  const uint64_t sends0 = DirectSendsOf(*a_.dev);
  std::memset(b_.buf.data() + kShared, 0x5A, 128);
  Sge r = SgeOf(b_, kShared, 16);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{9, {&r, 1}}), 0);
  SendExpecting(64, 0, WcStatus::kRemInvReqErr, WcStatus::kLocLenErr);
  EXPECT_TRUE(AllBytes(b_.buf.data() + kShared + 16, 112, 0x5A));
  EXPECT_EQ(DirectSendsOf(*a_.dev), sends0);
}

// A receive WQE whose region was deregistered after it was posted: the
// export still describes it, but its MR slot changed, so the requester
// does not place the SEND; the responder's own check fails it (a local
// protection error there, a remote operational error here: IBA 9.7.5.2.4)
// and the buffer, refilled after the deregistration, keeps what it holds.
TEST_F(ShmDirectSendTest, DeregisteredReceiveBufferIsNotWritten) {
  constexpr size_t kLen = 1 << 16;
  uint8_t* buf = nullptr;
  Mr* mr = nullptr;
  MapAndRegister(kLen, &buf, &mr);
  Sge r{reinterpret_cast<uint64_t>(buf), 4096, b_.dev->MrLkey(mr)};
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{11, {&r, 1}}), 0);
  ASSERT_EQ(b_.dev->DeregMr(mr), 0);
  std::memset(buf, 0x3C, kLen);
  const uint64_t sends0 = DirectSendsOf(*a_.dev);
  SendExpecting(4096, 9, WcStatus::kRemOpErr, WcStatus::kLocProtErr);
  EXPECT_EQ(DirectSendsOf(*a_.dev), sends0);
  EXPECT_TRUE(AllBytes(buf, kLen, 0x3C));
  munmap(buf, kLen);
}

// A local-only region beyond 64 MiB is not moved into a memfd at
// registration (engine/device/device.cc, kShareLocalOnlyUpTo: the copy would cost
// seconds per GiB of data): SENDs into it arrive as packets, intact.
TEST_F(ShmDirectSendTest, LargeLocalOnlyBufferTakesSendsAsPackets) {
  constexpr size_t kLen = (size_t{64} << 20) + (1 << 20);
  uint8_t* buf = nullptr;
  Mr* mr = nullptr;
  MapAndRegister(kLen, &buf, &mr);
  Sge r{reinterpret_cast<uint64_t>(buf) + (32 << 20), 4096, b_.dev->MrLkey(mr)};
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{12, {&r, 1}}), 0);
  const uint64_t sends0 = DirectSendsOf(*a_.dev);
  SendExpecting(4096, 11, WcStatus::kSuccess, WcStatus::kSuccess);
  EXPECT_EQ(FirstDiff(buf + (32 << 20), a_.buf.data() + kShared, 4096), -1);
  EXPECT_EQ(DirectSendsOf(*a_.dev), sends0);
  ASSERT_EQ(b_.dev->DeregMr(mr), 0);
  munmap(buf, kLen);
}

// A peer's receive queue is hostile input to the requester: an entry whose
// buffer lies outside the region's shared pages, names an MR slot beyond
// the table or more SGEs than an entry holds is not placed; the SEND goes
// as packets, and the target's responder, which uses its own queue, puts
// it where the application posted it.
TEST_F(ShmDirectSendTest, ForgedQueueEntryIsNotFollowed) {
  const transport::ShmSegment& seg = b_.dev->engine().peer_memory()->own_segment();
  for (int forgery = 0; forgery < 3; ++forgery) {
    SCOPED_TRACE(forgery);
    Sge r = SgeOf(b_, kShared, 256);
    ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{uint64_t(forgery), {&r, 1}}), 0);
    {
      std::lock_guard lock(b_.dev->engine().mu_);
      ASSERT_TRUE(b_.qp->shm.rq_open);
      transport::ShmRecvEntry* e =
          seg.recv_queue(static_cast<uint32_t>(b_.qp->shm.shm_slot))->entry(b_.qp->shm.rq_consumed);
      ASSERT_EQ(e->tag.load(), b_.qp->shm.rq_consumed + 1);  // exported, as posted
      if (forgery == 0) e->sge[0].addr.store(e->sge[0].addr.load() + (uint64_t{1} << 40));
      if (forgery == 1) e->sge[0].mr_slot.store(transport::kShmMrSlots + 7);
      if (forgery == 2) e->num_sge.store(transport::kShmRecvSges + 1);
    }
    const uint64_t sends0 = DirectSendsOf(*a_.dev);
    Completion rc;
    SendExpecting(256, 20 + forgery, WcStatus::kSuccess, WcStatus::kSuccess, &rc);
    EXPECT_EQ(rc.wr_id, uint64_t(forgery));
    EXPECT_EQ(FirstDiff(b_.buf.data() + kShared, a_.buf.data() + kShared, 256), -1);
    EXPECT_EQ(DirectSendsOf(*a_.dev), sends0);
  }
}

// The completion a peer writes is hostile input to the receiver: a length
// beyond the WQE's buffer completes it with LOC_LEN_ERR, not a bigger
// byte_len; an entry is taken only once its claim and `done` match.
TEST_F(ShmDirectSendTest, ForgedCompletionLengthIsALengthError) {
  Sge r = SgeOf(b_, kShared, 64);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{77, {&r, 1}}), 0);
  {
    std::lock_guard lock(b_.dev->engine().mu_);
    const transport::ShmSegment& seg = b_.dev->engine().peer_memory()->own_segment();
    transport::ShmRecvQueue* q = seg.recv_queue(static_cast<uint32_t>(b_.qp->shm.shm_slot));
    uint64_t t = q->taken.load();
    ASSERT_TRUE(q->taken.compare_exchange_strong(t, t + 1));  // as a peer claims it
    transport::ShmRecvEntry* e = q->entry(t);
    e->byte_len.store(1u << 30);
    e->done.store(t + 1);
    seg.header()->direct_recvs.fetch_add(1);
  }
  const auto rc = PollN(b_, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 77u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocLenErr);
}

}  // namespace
}  // namespace softrnic::engine::testing
