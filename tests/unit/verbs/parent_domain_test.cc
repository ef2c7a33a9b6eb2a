// Parent-domain allocators (ibv_alloc_parent_domain(3),
// verbs/domain_allocator.h) as the verbs layer hands them to the engine:
// the queue memory CQs, QPs and SRQs made on the parent domain are created
// with, and what each allocation and deallocation of it calls.
#include <cstdint>
#include <cstdlib>
#include <memory_resource>
#include <new>
#include <vector>

#include "verbs_fixture.h"

namespace softrnic::verbs_test {
namespace {

// softrnic's resource types (domain_allocator.h).
constexpr uint64_t kQp = 1, kSrq = 4, kCq = 5;

enum class Answer { kMemory, kDefault, kNull, kMisaligned };

struct Call {
  ibv_pd* pd;
  void* context;
  size_t size;
  size_t alignment;
  uint64_t type;
  void* ptr;
};

struct Recorder {
  Answer answer = Answer::kMemory;
  std::vector<Call> allocs;
  std::vector<Call> frees;
};

void* Alloc(ibv_pd* pd, void* context, size_t size, size_t alignment, uint64_t type) {
  auto* r = static_cast<Recorder*>(context);
  void* p = nullptr;
  switch (r->answer) {
    case Answer::kDefault:
      p = IBV_ALLOCATOR_USE_DEFAULT;
      break;
    case Answer::kNull:
      break;
    case Answer::kMemory:
      p = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
      break;
    case Answer::kMisaligned:
      p = static_cast<char*>(std::aligned_alloc(alignment, size + alignment)) + 8;
      break;
  }
  r->allocs.push_back({pd, context, size, alignment, type, p});
  return p;
}

void Free(ibv_pd* pd, void* context, void* ptr, uint64_t type) {
  auto* r = static_cast<Recorder*>(context);
  r->frees.push_back({pd, context, 0, 0, type, ptr});
  if (r->answer == Answer::kMisaligned) ptr = static_cast<char*>(ptr) - 8;
  std::free(ptr);
}

class ParentDomainTest : public VerbsTest {
 protected:
  ibv_pd* Parent(Recorder* r, bool with_functions = true) {
    ibv_parent_domain_init_attr a{};
    a.pd = pd_;
    a.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
    a.alloc = with_functions ? Alloc : nullptr;
    a.free = with_functions ? Free : nullptr;
    a.pd_context = r;
    return ibv_alloc_parent_domain(ctx_, &a);
  }
  ibv_cq* CqOn(ibv_pd* parent) {
    ibv_cq_init_attr_ex a{};
    a.cqe = 8;
    a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
    a.parent_domain = parent;
    ibv_cq_ex* cq = ibv_create_cq_ex(ctx_, &a);
    return cq ? ibv_cq_ex_to_cq(cq) : nullptr;
  }
  ibv_qp* QpOn(ibv_pd* parent) {
    ibv_qp_init_attr init{};
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap = {4, 4, 1, 1, 0};
    return ibv_create_qp(parent, &init);
  }
  ibv_srq* SrqOn(ibv_pd* parent) {
    ibv_srq_init_attr init{};
    init.attr.max_wr = 4;
    init.attr.max_sge = 1;
    return ibv_create_srq(parent, &init);
  }
};

// Each object made on the parent domain is given the resource of its type;
// each allocation calls alloc with the parent domain, its context, the
// size, at least a cache line of alignment and the type; each
// deallocation calls free with the same pointer and type.
TEST_F(ParentDomainTest, ObjectsGetTheResourceOfTheirType) {
  Recorder r;
  ibv_pd* parent = Parent(&r);
  ASSERT_NE(parent, nullptr);
  ibv_cq* cq = CqOn(parent);
  ibv_qp* qp = QpOn(parent);
  ibv_srq* srq = SrqOn(parent);
  ASSERT_TRUE(cq && qp && srq);
  std::pmr::memory_resource* cq_mem = fake().CqOf(cq)->queue_memory;
  std::pmr::memory_resource* qp_mem = fake().QpOf(qp)->queue_memory;
  std::pmr::memory_resource* srq_mem = fake().SrqOf(srq)->queue_memory;
  ASSERT_TRUE(cq_mem && qp_mem && srq_mem);
  EXPECT_TRUE(cq_mem != qp_mem && qp_mem != srq_mem && cq_mem != srq_mem);
  struct Case {
    std::pmr::memory_resource* mem;
    uint64_t type;
  };
  for (const Case& c : {Case{cq_mem, kCq}, Case{qp_mem, kQp}, Case{srq_mem, kSrq}}) {
    r.allocs.clear();
    r.frees.clear();
    void* p = c.mem->allocate(1000, 8);
    ASSERT_EQ(r.allocs.size(), 1u);
    const Call& a = r.allocs[0];
    EXPECT_EQ(a.pd, parent);
    EXPECT_EQ(a.context, &r);
    EXPECT_EQ(a.size, 1000u);
    EXPECT_EQ(a.alignment, 64u);
    EXPECT_EQ(a.type, c.type);
    EXPECT_EQ(a.ptr, p);
    void* big = c.mem->allocate(64, 4096);
    EXPECT_EQ(r.allocs.back().alignment, 4096u) << "a larger alignment is passed on";
    c.mem->deallocate(p, 1000, 8);
    c.mem->deallocate(big, 64, 4096);
    ASSERT_EQ(r.frees.size(), 2u);
    EXPECT_EQ(r.frees[0].ptr, p);
    EXPECT_EQ(r.frees[0].type, c.type);
    EXPECT_EQ(r.frees[0].pd, parent);
  }
  // Objects not made on the parent domain get the engine's memory.
  ibv_qp* plain = CreateQp();
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(fake().QpOf(plain)->queue_memory, nullptr);
  EXPECT_EQ(fake().CqOf(cq_)->queue_memory, nullptr);
  EXPECT_EQ(ibv_destroy_qp(plain), 0);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(parent), 0);
}

// IBV_ALLOCATOR_USE_DEFAULT: the library's memory, never handed to free.
// NULL: std::bad_alloc (the engine turns it into ENOMEM). A block not
// aligned as asked: handed back to free, then std::bad_alloc.
TEST_F(ParentDomainTest, DefaultNullAndMisalignedAnswers) {
  Recorder r;
  ibv_pd* parent = Parent(&r);
  ASSERT_NE(parent, nullptr);
  ibv_qp* qp = QpOn(parent);
  ASSERT_NE(qp, nullptr);
  std::pmr::memory_resource* mem = fake().QpOf(qp)->queue_memory;
  ASSERT_NE(mem, nullptr);

  r.answer = Answer::kDefault;
  void* p = mem->allocate(256, 16);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  static_cast<char*>(p)[255] = 1;  // it is memory
  mem->deallocate(p, 256, 16);
  EXPECT_EQ(r.allocs.size(), 1u);
  EXPECT_TRUE(r.frees.empty());

  r.answer = Answer::kNull;
  EXPECT_THROW(static_cast<void>(mem->allocate(256, 16)), std::bad_alloc);
  EXPECT_TRUE(r.frees.empty());

  r.answer = Answer::kMisaligned;
  EXPECT_THROW(static_cast<void>(mem->allocate(256, 16)), std::bad_alloc);
  ASSERT_EQ(r.frees.size(), 1u);
  EXPECT_EQ(r.frees[0].ptr, r.allocs.back().ptr);

  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_dealloc_pd(parent), 0);
}

// ALLOCATORS without both functions: the engine's memory (as mlx5).
TEST_F(ParentDomainTest, AllocatorsWithoutFunctionsAreNotUsed) {
  Recorder r;
  ibv_pd* parent = Parent(&r, false);
  ASSERT_NE(parent, nullptr);
  ibv_cq* cq = CqOn(parent);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(fake().CqOf(cq)->queue_memory, nullptr);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(parent), 0);
}

}  // namespace
}  // namespace softrnic::verbs_test
