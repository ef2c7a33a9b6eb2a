// Queue memory (queues.h, device.h): CQs, QPs and SRQs made with a
// std::pmr::memory_resource keep their entries in blocks from it, resize
// into new ones, give every block back when destroyed, and fail with
// ENOMEM, keeping nothing, when it cannot allocate. The verbs layer's
// parent-domain allocators are such a resource (verbs/domain_allocator.h;
// tests/integration/verbs/parent_domain_alloc.c drives them).
#include <cstring>
#include <map>
#include <memory_resource>
#include <mutex>
#include <new>

#include "engine/queues/queues.h"
#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

// Records every block; fails every allocation from `fail_from` on (-1:
// none).
class CountingResource final : public std::pmr::memory_resource {
 public:
  struct Block {
    size_t bytes = 0;
    size_t alignment = 0;
  };
  std::map<void*, Block> live() const {
    std::lock_guard lock(mu_);
    return live_;
  }
  int allocations() const {
    std::lock_guard lock(mu_);
    return allocations_;
  }
  int bad_frees() const {
    std::lock_guard lock(mu_);
    return bad_frees_;
  }
  void FailFrom(int n) {
    std::lock_guard lock(mu_);
    fail_from_ = n;
  }
  size_t LiveBytes() const {
    size_t total = 0;
    for (const auto& [p, b] : live()) total += b.bytes;
    return total;
  }
  // Whether the 8 bytes of `v` are in a live block.
  bool Holds(uint64_t v) const {
    for (const auto& [p, b] : live()) {
      for (size_t off = 0; off + 8 <= b.bytes; off += 8) {
        uint64_t x;
        std::memcpy(&x, static_cast<const uint8_t*>(p) + off, 8);
        if (x == v) return true;
      }
    }
    return false;
  }

 private:
  void* do_allocate(size_t bytes, size_t alignment) override {
    std::lock_guard lock(mu_);
    if (fail_from_ >= 0 && allocations_ >= fail_from_) throw std::bad_alloc();
    ++allocations_;
    void* p = ::operator new(bytes, std::align_val_t(alignment));
    std::memset(p, 0, bytes);
    live_[p] = {bytes, alignment};
    return p;
  }
  void do_deallocate(void* p, size_t bytes, size_t alignment) override {
    std::lock_guard lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end() || it->second.bytes != bytes || it->second.alignment != alignment) {
      ++bad_frees_;
      return;
    }
    live_.erase(it);
    ::operator delete(p, std::align_val_t(alignment));
  }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override {
    return this == &o;
  }

  mutable std::mutex mu_;
  std::map<void*, Block> live_;
  int allocations_ = 0;
  int fail_from_ = -1;
  int bad_frees_ = 0;
};

TEST(QueueMemoryTest, ObjectsLiveInTheirResourceAndGiveItBack) {
  CountingResource mem;  // outlives the device
  auto dev = MakeDevice(0);
  ASSERT_NE(dev, nullptr);
  Pd* pd = nullptr;
  ASSERT_EQ(dev->AllocPd(nullptr, &pd), 0);

  Cq* cq = nullptr;
  ASSERT_EQ(dev->CreateCq(100, nullptr, nullptr, &cq, &mem), 0);
  EXPECT_EQ(mem.allocations(), 1);
  EXPECT_EQ(mem.LiveBytes(), 100 * sizeof(Completion));
  EXPECT_EQ(dev->CqCapacity(cq), 100u);

  QpCaps caps{16, 8, 2, 3, 64};
  Qp* qp = nullptr;
  ASSERT_EQ(dev->CreateQp(pd, QpType::kRc, cq, cq, nullptr, &caps, false, nullptr, &qp, &mem), 0);
  // Send WQEs, their SGEs, their inline bytes; receive ids, SGE counts, SGEs.
  EXPECT_EQ(mem.allocations(), 1 + 6);
  EXPECT_EQ(mem.LiveBytes(), 100 * sizeof(Completion) + 16 * sizeof(SendWqe) +
                                 16 * 2 * sizeof(Sge) + 16 * 64 + 8 * sizeof(uint64_t) +
                                 8 * sizeof(uint32_t) + 8 * 3 * sizeof(Sge));

  Srq* srq = nullptr;
  ASSERT_EQ(dev->CreateSrq(pd, SrqAttr{32, 2, 0}, nullptr, &srq, &mem), 0);
  EXPECT_EQ(mem.allocations(), 1 + 6 + 3);
  Sge sge{0x1000, 64, 0};
  ASSERT_EQ(dev->PostSrqRecv(srq, RecvWr{0x5ec0de0000000007ull, {&sge, 1}}), 0);
  EXPECT_TRUE(mem.Holds(0x5ec0de0000000007ull)) << "the SRQ's WQE is in the resource's memory";

  // Resizes: new blocks, the old ones back, the waiting entries kept.
  const auto before = mem.live();
  ASSERT_EQ(dev->ModifySrq(srq, SrqAttr{64, 0, 0}, 1), 0);
  EXPECT_EQ(mem.allocations(), 1 + 6 + 3 + 3);
  EXPECT_EQ(mem.live().size(), before.size());
  SrqAttr q;
  ASSERT_EQ(dev->QuerySrq(srq, &q), 0);
  EXPECT_EQ(q.max_wr, 64u);
  EXPECT_TRUE(mem.Holds(0x5ec0de0000000007ull)) << "the waiting WQE moved with the resize";
  ASSERT_EQ(dev->ResizeCq(cq, 300), 0);
  EXPECT_EQ(dev->CqCapacity(cq), 300u);
  EXPECT_EQ(mem.live().size(), before.size());

  ASSERT_EQ(dev->DestroyQp(qp), 0);
  ASSERT_EQ(dev->DestroySrq(srq), 0);
  ASSERT_EQ(dev->DestroyCq(cq), 0);
  EXPECT_TRUE(mem.live().empty());
  EXPECT_EQ(mem.bad_frees(), 0);
  EXPECT_EQ(dev->DeallocPd(pd), 0);
}

// A failure at each allocation of a QP, an SRQ, a CQ and a resize: ENOMEM,
// every block made before it given back, the device unchanged.
TEST(QueueMemoryTest, AllocationFailureIsEnomemAndKeepsNothing) {
  CountingResource mem;  // outlives the device
  auto dev = MakeDevice(0);
  ASSERT_NE(dev, nullptr);
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  ASSERT_EQ(dev->AllocPd(nullptr, &pd), 0);
  ASSERT_EQ(dev->CreateCq(16, nullptr, nullptr, &cq), 0);  // the engine's memory
  for (int k = 0; k < 6; ++k) {
    mem.FailFrom(mem.allocations() + k);
    QpCaps caps{8, 8, 1, 1, 16};
    Qp* qp = nullptr;
    EXPECT_EQ(dev->CreateQp(pd, QpType::kRc, cq, cq, nullptr, &caps, false, nullptr, &qp, &mem),
              ENOMEM)
        << "allocation " << k;
    EXPECT_TRUE(mem.live().empty()) << "allocation " << k;
  }
  for (int k = 0; k < 3; ++k) {
    mem.FailFrom(mem.allocations() + k);
    Srq* srq = nullptr;
    EXPECT_EQ(dev->CreateSrq(pd, SrqAttr{8, 1, 0}, nullptr, &srq, &mem), ENOMEM);
    EXPECT_TRUE(mem.live().empty());
  }
  mem.FailFrom(mem.allocations());
  Cq* failed = nullptr;
  EXPECT_EQ(dev->CreateCq(16, nullptr, nullptr, &failed, &mem), ENOMEM);
  mem.FailFrom(-1);
  Cq* mine = nullptr;
  ASSERT_EQ(dev->CreateCq(16, nullptr, nullptr, &mine, &mem), 0);
  mem.FailFrom(mem.allocations());
  EXPECT_EQ(dev->ResizeCq(mine, 64), ENOMEM);
  EXPECT_EQ(dev->CqCapacity(mine), 16u);
  EXPECT_EQ(mem.live().size(), 1u);
  EXPECT_EQ(dev->DestroyCq(mine), 0);
  EXPECT_TRUE(mem.live().empty());
  EXPECT_EQ(mem.bad_frees(), 0);
  EXPECT_EQ(dev->DestroyCq(cq), 0);
  EXPECT_EQ(dev->DeallocPd(pd), 0);
}

// Traffic between two devices whose CQs and QPs live in resources of their
// own: SEND/RECV and WRITE, the ids the engine stores found in that memory.
TEST(QueueMemoryTest, TrafficRunsThroughTheResourcesMemory) {
  CountingResource mem_a, mem_b;
  Side a, b;
  QpOptions o;
  o.buf_size = 1 << 16;
  auto setup = [&](Side& s, int which, CountingResource& mem) {
    s.dev = MakeDevice(which);
    ASSERT_NE(s.dev, nullptr);
    ASSERT_EQ(s.dev->AllocPd(nullptr, &s.pd), 0);
    ASSERT_EQ(s.dev->CreateCq(64, nullptr, &s, &s.cq, &mem), 0);
    QpCaps caps{16, 16, 2, 2, 64};
    ASSERT_EQ(s.dev->CreateQp(s.pd, QpType::kRc, s.cq, s.cq, nullptr, &caps, false, &s, &s.qp, &mem),
              0);
    s.buf.assign(o.buf_size, 0);
    ASSERT_EQ(s.dev->RegMr(s.pd, s.buf.data(), s.buf.size(),
                           reinterpret_cast<uint64_t>(s.buf.data()), o.access, nullptr, &s.mr),
              0);
  };
  setup(a, 0, mem_a);
  setup(b, 1, mem_b);
  Connect(a, b, o);
  Connect(b, a, o);

  const uint64_t recv_id = 0x5ec0de0000000011ull, send_id = 0x5ec0de0000000012ull;
  FillPattern(a.buf, 0, 4000, 3);
  Sge r = SgeOf(b, 0, 4000);
  ASSERT_EQ(b.dev->PostRecv(b.qp, RecvWr{recv_id, {&r, 1}}), 0);
  EXPECT_TRUE(mem_b.Holds(recv_id));
  Sge s = SgeOf(a, 0, 4000);
  ASSERT_EQ(a.dev->PostSend(a.qp, MakeWr(WrOpcode::kSend, send_id, {&s, 1})), 0);
  EXPECT_TRUE(mem_a.Holds(send_id));
  auto ca = PollN(a, 1);
  auto cb = PollN(b, 1);
  ASSERT_EQ(ca.size(), 1u);
  ASSERT_EQ(cb.size(), 1u);
  EXPECT_EQ(ca[0].status, WcStatus::kSuccess);
  EXPECT_EQ(cb[0].wr_id, recv_id);
  EXPECT_EQ(std::memcmp(a.buf.data(), b.buf.data(), 4000), 0);

  FillPattern(a.buf, 8192, 20000, 4);
  Sge w = SgeOf(a, 8192, 20000);
  ASSERT_EQ(a.dev->PostSend(a.qp, MakeWr(WrOpcode::kRdmaWrite, 9, {&w, 1}, Addr(b, 8192),
                                         b.dev->MrRkey(b.mr))),
            0);
  auto cw = PollN(a, 1);
  ASSERT_EQ(cw.size(), 1u);
  EXPECT_EQ(cw[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a.buf.data() + 8192, b.buf.data() + 8192, 20000), 0);

  for (Side* side : {&a, &b}) {
    ASSERT_EQ(side->dev->DestroyQp(side->qp), 0);
    ASSERT_EQ(side->dev->DeregMr(side->mr), 0);
    ASSERT_EQ(side->dev->DestroyCq(side->cq), 0);
  }
  EXPECT_TRUE(mem_a.live().empty());
  EXPECT_TRUE(mem_b.live().empty());
  EXPECT_EQ(mem_a.bad_frees() + mem_b.bad_frees(), 0);
}

}  // namespace
}  // namespace softrnic::engine::testing
