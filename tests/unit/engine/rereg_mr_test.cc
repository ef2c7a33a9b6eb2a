// ibv_rereg_mr in the engine (Device::ReregMr): a region's translation, PD
// and access change together or not at all, the keys stay, the peer's
// accesses follow the new attributes at once, and on the shared-memory path
// the new range is published and the old one given back.
#include <sys/mman.h>

#include <cstring>

#include "engine/same_host/shm_memory.h"
#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

class ReregMrTest : public RcPairTest {
 protected:
  // One signaled RDMA WRITE of `len` bytes from a_'s buffer (offset 0) to
  // `remote` under b_'s rkey; its completion status.
  WcStatus Write(uint64_t remote, uint32_t len) {
    Sge s = SgeOf(a_, 0, len);
    if (a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, ++wr_id_, {&s, 1}, remote,
                                       b_.dev->MrRkey(b_.mr))) != 0)
      return WcStatus::kGeneralErr;
    const auto c = PollN(a_, 1);
    return c.empty() ? WcStatus::kGeneralErr : c[0].status;
  }
  WcStatus Read(uint64_t remote, uint32_t len) {
    Sge s = SgeOf(a_, kReadOffset, len);
    if (a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaRead, ++wr_id_, {&s, 1}, remote,
                                       b_.dev->MrRkey(b_.mr))) != 0)
      return WcStatus::kGeneralErr;
    const auto c = PollN(a_, 1);
    return c.empty() ? WcStatus::kGeneralErr : c[0].status;
  }
  static constexpr size_t kReadOffset = 1 << 16;  // where Read lands in a_.buf
  uint64_t wr_id_ = 0;
};

// A fresh anonymous mapping (not heap: nothing else lives in its pages).
struct Mapping {
  explicit Mapping(size_t n) : size(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  ~Mapping() {
    if (data) munmap(data, size);
  }
  uint8_t* data;
  size_t size;
};

TEST_F(ReregMrTest, TranslationMovesTheKeysToTheNewRange) {
  Open(QpOptions{});
  Mapping fresh(64 << 10);
  ASSERT_NE(fresh.data, nullptr);
  const uint32_t lkey = b_.dev->MrLkey(b_.mr), rkey = b_.dev->MrRkey(b_.mr);
  const uint64_t old_addr = Addr(b_, 0);
  const size_t shared_before = SharedRangeCount();
  const uint64_t direct_before = DirectOpsOf(*a_.dev);
  ASSERT_EQ(b_.dev->ReregMr(b_.mr, kReregTranslation, nullptr, fresh.data, fresh.size, 0), 0);
  EXPECT_EQ(b_.dev->MrLkey(b_.mr), lkey);
  EXPECT_EQ(b_.dev->MrRkey(b_.mr), rkey);
  // The old range stays shared only while a registration uses it: the new
  // range replaced it (one shared range each, on the shared-memory path).
  EXPECT_EQ(SharedRangeCount(), shared_before);

  FillPattern(a_.buf, 0, 8192, 7);
  const uint64_t fresh_addr = reinterpret_cast<uint64_t>(fresh.data);
  ASSERT_EQ(Write(fresh_addr + 100, 8192), WcStatus::kSuccess);
  EXPECT_EQ(FirstDiff(fresh.data + 100, a_.buf.data(), 8192), -1);
  ASSERT_EQ(Read(fresh_addr + 100, 8192), WcStatus::kSuccess);
  EXPECT_EQ(FirstDiff(a_.buf.data() + kReadOffset, a_.buf.data(), 8192), -1);
  if (b_.dev->engine().shm_direct() != nullptr) {
    // Published for same-host peers: the accesses went direct.
    EXPECT_GT(DirectOpsOf(*a_.dev), direct_before);
  }
  // The old range is not registered any more: NAK remote access error.
  EXPECT_EQ(Write(old_addr, 64), WcStatus::kRemAccessErr);
  EXPECT_TRUE(AllBytes(b_.buf.data(), 64, 0));
  ASSERT_EQ(b_.dev->DeregMr(b_.mr), 0);  // before `fresh` goes
  b_.mr = nullptr;
  EXPECT_EQ(SharedRangeCount(), shared_before - (b_.dev->engine().shm_direct() != nullptr ? 1 : 0));
}

// A range nested in the old one reuses its shared pages (no copy); the
// pages it no longer covers are private again, and keep their contents.
TEST_F(ReregMrTest, ShrinkingKeepsTheContentsOnBothSides) {
  Open(QpOptions{});
  FillPattern(b_.buf, 0, b_.buf.size(), 3);
  std::vector<uint8_t> expect = b_.buf;
  ASSERT_EQ(b_.dev->ReregMr(b_.mr, kReregTranslation, nullptr, b_.buf.data() + (1 << 20), 1 << 16,
                            0),
            0);
  EXPECT_EQ(FirstDiff(b_.buf.data(), expect.data(), b_.buf.size()), -1);
  FillPattern(a_.buf, 0, 4096, 9);
  ASSERT_EQ(Write(Addr(b_, (1 << 20) + 8), 4096), WcStatus::kSuccess);
  EXPECT_EQ(FirstDiff(b_.buf.data() + (1 << 20) + 8, a_.buf.data(), 4096), -1);
  // Beyond the new end: out of bounds.
  EXPECT_EQ(Write(Addr(b_, (1 << 20) + (1 << 16) - 8), 64), WcStatus::kRemAccessErr);
}

TEST_F(ReregMrTest, PdChangeTakesTheRegionOutOfTheQpsDomain) {
  Open(QpOptions{});
  Pd* other = nullptr;
  ASSERT_EQ(b_.dev->AllocPd(nullptr, &other), 0);
  ASSERT_EQ(b_.dev->ReregMr(b_.mr, kReregPd, other, nullptr, 0, 0), 0);
  EXPECT_EQ(b_.dev->DeallocPd(other), EBUSY);  // the MR uses it now
  ASSERT_EQ(b_.dev->ReregMr(b_.mr, kReregPd, b_.pd, nullptr, 0, 0), 0);
  EXPECT_EQ(Write(Addr(b_, 0), 64), WcStatus::kSuccess);  // back in the QP's PD
  ASSERT_EQ(b_.dev->ReregMr(b_.mr, kReregPd, other, nullptr, 0, 0), 0);
  EXPECT_EQ(Write(Addr(b_, 0), 64), WcStatus::kRemAccessErr);  // C9-88: PD mismatch
  ASSERT_EQ(b_.dev->ReregMr(b_.mr, kReregPd, b_.pd, nullptr, 0, 0), 0);
  EXPECT_EQ(b_.dev->DeallocPd(other), 0);
}

TEST_F(ReregMrTest, AccessChangeIsEnforcedAtOnce) {
  Open(QpOptions{});
  ASSERT_EQ(b_.dev->ReregMr(b_.mr, kReregAccess, nullptr, nullptr, 0, kLocalWrite | kRemoteRead), 0);
  EXPECT_EQ(Read(Addr(b_, 0), 64), WcStatus::kSuccess);
  EXPECT_EQ(Write(Addr(b_, 0), 64), WcStatus::kRemAccessErr);
}

// Every combination at once, then refusals that leave the region as it was.
TEST_F(ReregMrTest, AllAtOnceAndRefusalsChangeNothing) {
  Open(QpOptions{});
  Pd* other = nullptr;
  ASSERT_EQ(b_.dev->AllocPd(nullptr, &other), 0);
  void* const mid = b_.buf.data() + 8192;
  ASSERT_EQ(b_.dev->ReregMr(b_.mr, kReregTranslation | kReregPd | kReregAccess, other, mid, 8192,
                            kLocalWrite),
            0);
  EXPECT_EQ(b_.mr->pd, other);
  EXPECT_EQ(b_.mr->addr, mid);
  EXPECT_EQ(b_.mr->length, 8192u);
  EXPECT_EQ(b_.mr->iova, reinterpret_cast<uint64_t>(mid));
  EXPECT_EQ(b_.mr->access, uint32_t{kLocalWrite});
  ASSERT_EQ(b_.dev->ReregMr(b_.mr, kReregTranslation | kReregPd | kReregAccess, b_.pd,
                            b_.buf.data(), b_.buf.size(),
                            kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic),
            0);
  EXPECT_EQ(b_.dev->DeallocPd(other), 0);

  // REMOTE_WRITE without LOCAL_WRITE (IBA 10.6.3.1), an unknown bit, a
  // length beyond max_mr_size, no PD: EINVAL, nothing changed.
  EXPECT_EQ(b_.dev->ReregMr(b_.mr, kReregAccess, nullptr, nullptr, 0, kRemoteWrite), EINVAL);
  EXPECT_EQ(b_.dev->ReregMr(b_.mr, kReregAccess, nullptr, nullptr, 0, kLocalWrite | 1u << 12),
            EINVAL);
  EXPECT_EQ(b_.dev->ReregMr(b_.mr, kReregTranslation, nullptr, b_.buf.data(),
                            b_.dev->attr().max_mr_size + 1, 0),
            EINVAL);
  EXPECT_EQ(b_.dev->ReregMr(b_.mr, kReregPd, nullptr, nullptr, 0, 0), EINVAL);
  EXPECT_EQ(b_.mr->pd, b_.pd);
  EXPECT_EQ(b_.mr->length, b_.buf.size());
  FillPattern(a_.buf, 0, 4096, 5);
  EXPECT_EQ(Write(Addr(b_, 4096), 4096), WcStatus::kSuccess);
  EXPECT_EQ(FirstDiff(b_.buf.data() + 4096, a_.buf.data(), 4096), -1);
}

// A region SEND_WITH_INVALIDATE left without remote access is a new
// registration after rereg: remote access works again.
TEST_F(ReregMrTest, ReregistrationRevalidatesAnInvalidatedRegion) {
  Open(QpOptions{});
  {
    std::lock_guard lock(b_.dev->engine().mu_);
    b_.mr->remote_valid = false;  // as SEND_WITH_INVALIDATE leaves it
  }
  ASSERT_EQ(b_.dev->ReregMr(b_.mr, kReregAccess, nullptr, nullptr, 0, b_.mr->access), 0);
  EXPECT_EQ(Write(Addr(b_, 0), 64), WcStatus::kSuccess);
}

}  // namespace
}  // namespace softrnic::engine::testing
