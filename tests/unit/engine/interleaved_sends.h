// What the direct-SEND tests of a QP's own receive queue and of an SRQ
// share (shm_direct_send_test.cc, shm_direct_srq_test.cc): a burst of
// SENDs whose receive buffers alternate between shared pages (placed
// directly) and an application's own MAP_SHARED mapping (never moved into
// a memfd, so those SENDs go as packets), and the check that every one
// arrived in order with its data.
#pragma once

#include <sys/mman.h>

#include "rc_pair.h"

namespace softrnic::engine::testing {

// Receive buffers of the i-th SEND: even i in `side`'s own buffer at
// base + 4096 i (shared pages, placed directly), odd i at step (i / 2) in a
// MAP_SHARED mapping of the application's own, registered with local write
// on side's device and PD (never moved into a memfd: packets).
class InterleavedBuffers {
 public:
  static constexpr size_t kOwnLen = 64 * 1024;
  void Open(Side& side, size_t base, size_t step) {
    side_ = &side;
    base_ = base;
    step_ = step;
    void* mem = mmap(nullptr, kOwnLen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    own_ = static_cast<uint8_t*>(mem);
    ASSERT_EQ(side.dev->RegMr(side.pd, own_, kOwnLen, reinterpret_cast<uint64_t>(own_),
                              kLocalWrite, nullptr, &own_mr_),
              0);
  }
  ~InterleavedBuffers() {
    if (own_mr_ != nullptr) {
      EXPECT_EQ(side_->dev->DeregMr(own_mr_), 0);
    }
    if (own_ != nullptr) munmap(own_, kOwnLen);
  }
  uint8_t* dst(int i) const {
    return i % 2 ? own_ + step_ * size_t(i / 2) : side_->buf.data() + base_ + 4096 * size_t(i);
  }
  Sge sge(int i, uint32_t len) const {
    return Sge{reinterpret_cast<uint64_t>(dst(i)), len,
               i % 2 ? side_->dev->MrLkey(own_mr_) : side_->dev->MrLkey(side_->mr)};
  }

 private:
  Side* side_ = nullptr;
  size_t base_ = 0, step_ = 0;
  uint8_t* own_ = nullptr;
  Mr* own_mr_ = nullptr;
};

// Offset in a Side's buffer of the i-th SEND's source.
inline size_t InterleavedSource(size_t base, int i) { return base + 4096 * size_t(i); }

// Posts n SENDs of len bytes from `from` (sources at InterleavedSource,
// patterns seed + i), unsignaled but the last, so the send queue holds
// them all at once and a direct SEND must wait for the packets before it;
// waits for the last one's completion.
inline void SendInterleavedBurst(Side& from, size_t base, int n, uint32_t len, uint32_t seed) {
  for (int i = 0; i < n; ++i) {
    FillPattern(from.buf, InterleavedSource(base, i), len, seed + i);
    Sge s = SgeOf(from, InterleavedSource(base, i), len);
    ASSERT_EQ(from.dev->PostSend(from.qp, MakeWr(WrOpcode::kSend, uint64_t(i), {&s, 1}, 0, 0,
                                                 i == n - 1 ? uint32_t{kSignaled} : 0u)),
              0);
  }
  const auto c = PollN(from, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
}

// The n receive completions on `to`'s CQ: in order, WQE first_wr + i,
// successful, len bytes, the bytes of `from`'s i-th source at
// bufs.dst(i), and on QP qpn.
inline void ExpectInterleavedArrivals(Side& to, const Side& from, size_t base, int n, uint32_t len,
                                      uint64_t first_wr, uint32_t qpn,
                                      const InterleavedBuffers& bufs) {
  const auto r = PollN(to, size_t(n));
  ASSERT_EQ(r.size(), size_t(n));
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(r[i].status, WcStatus::kSuccess);
    EXPECT_EQ(r[i].wr_id, first_wr + uint64_t(i));
    EXPECT_EQ(r[i].qp_num, qpn);
    EXPECT_EQ(r[i].byte_len, len);
    EXPECT_EQ(FirstDiff(bufs.dst(i), from.buf.data() + InterleavedSource(base, i), len), -1);
  }
}

}  // namespace softrnic::engine::testing
