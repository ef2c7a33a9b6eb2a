// Private types of softrnic's drop-in libibverbs.so.1.
//
// Every ibv_* object we hand out is the first member of a wrapper struct that
// also holds the engine object it stands for, so a pointer the application
// gives back converts to our wrapper with one cast (the way rdma-core's
// providers embed verbs_* structs). Only src/verbs and src/rdmacm include
// rdma-core headers; the engine never sees them.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "engine/device/device.h"
#include "verbs/domain_allocator.h"

// verbs.h turns these names into macros / inline wrappers; the library must
// define the real exported functions under the plain names.
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define SOFTRNIC_EXPORT extern "C" __attribute__((visibility("default")))

namespace softrnic::verbs {

namespace eng = softrnic::engine;

// The context: rdma-core requires struct verbs_context to be laid out with
// the ibv_context as its last member and verbs_get_ctx() to find it through
// the abi_compat sentinel, so we allocate verbs_context and our private data
// together and recover the wrapper from the embedded ibv_context.
struct Context {
  verbs_context vctx;  // must stay first: ibv_context* -> Context* by offset
  std::shared_ptr<eng::Device> dev;
  int async_queue = 0;  // this context's async event queue (engine/queues/async_queue.h)
};

// A new context of `device` with `cmd_fd` as its command fd (device.cc;
// ibv_open_device makes a fresh one, ibv_import_device passes the one it
// was given). Null with errno set on failure.
ibv_context* NewContext(ibv_device* device, int cmd_fd);

// Command fds (command_files.cc): a context's cmd_fd is a real descriptor
// (a memfd of no size) so that it can be dup()ed and given to
// ibv_import_device, the way rdma-core's suite shares a context within a
// process. Registered while any context uses its file.
int NewCommandFd();              // a new file, used by one context
bool IsCommandFd(int fd);        // one of them (any dup of it)
bool RetainCommandFd(int fd);    // one more context uses it; false if fd is no file
void DropCommandFd(int fd);      // one context less
void ReleaseCommandFd(int fd);   // one context less, and closes fd

inline Context* ToContext(ibv_context* ctx) {
  return reinterpret_cast<Context*>(reinterpret_cast<char*>(ctx) -
                                    offsetof(verbs_context, context));
}
inline eng::Device* DevOf(ibv_context* ctx) { return ToContext(ctx)->dev.get(); }

// The i-th entry of an application's SGE list, read byte-wise: the list
// need not be 8-byte aligned (libiscsi's iSER descriptors put theirs at
// 4-byte offsets), and reading a misaligned ibv_sge through its type is
// undefined behaviour (UBSan stops the CI build's program there).
inline eng::Sge LoadSge(const ibv_sge* list, size_t i) {
  ibv_sge s;
  std::memcpy(&s, reinterpret_cast<const unsigned char*>(list) + i * sizeof(ibv_sge), sizeof s);
  return eng::Sge{s.addr, s.length, s.lkey};
}

struct Td;

// A protection domain, or a parent domain (ibv_alloc_parent_domain(3)) that
// stands for one: a parent domain's `e` is its protection domain's engine
// PD, so every verb taking an ibv_pd works on it unchanged.
struct Pd {
  ibv_pd pd;  // first
  eng::Pd* e = nullptr;
  bool imported = false;        // ibv_import_pd: ibv_unimport_pd frees only this wrapper
  Pd* protection = nullptr;     // set only for a parent domain: the PD it extends
  Td* td = nullptr;             // its thread domain, if any
  void* pd_context = nullptr;   // IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT
  std::atomic<int> parents{0};  // parent domains built on this PD
  std::atomic<int> objects{0};  // a parent domain's live QPs, CQs, SRQs, MRs, AHs
  // IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS with both functions: the memory
  // of the queues made on it (domain_allocator.h); null otherwise.
  std::unique_ptr<DomainAllocators> allocators;
  bool is_parent() const { return protection != nullptr; }
};

// Where the entries of a QP, an SRQ or a CQ made on `pd` live: its parent
// domain's allocator for that resource type, or null (the engine's own
// memory) for a PD, a parent domain without allocators, or no domain.
inline std::pmr::memory_resource* QpMemory(ibv_pd* pd) {
  auto* p = reinterpret_cast<Pd*>(pd);
  return p && p->allocators ? &p->allocators->qp : nullptr;
}
inline std::pmr::memory_resource* SrqMemory(ibv_pd* pd) {
  auto* p = reinterpret_cast<Pd*>(pd);
  return p && p->allocators ? &p->allocators->srq : nullptr;
}
inline std::pmr::memory_resource* CqMemory(ibv_pd* pd) {
  auto* p = reinterpret_cast<Pd*>(pd);
  return p && p->allocators ? &p->allocators->cq : nullptr;
}

// Objects made on a parent domain hold it: ibv_dealloc_pd of it fails with
// EBUSY until they are destroyed (ibv_alloc_parent_domain(3)), as a PD's
// does. No-ops for an ordinary PD (the engine counts those) and for null.
inline void HoldDomain(ibv_pd* pd) {
  if (pd && reinterpret_cast<Pd*>(pd)->is_parent()) ++reinterpret_cast<Pd*>(pd)->objects;
}
inline void ReleaseDomain(ibv_pd* pd) {
  if (pd && reinterpret_cast<Pd*>(pd)->is_parent()) --reinterpret_cast<Pd*>(pd)->objects;
}

// A thread domain (ibv_alloc_td(3)): a promise that its parent domains'
// objects are used by one thread at a time. softrnic keeps its locks (one
// uncontended lock costs little here), so the promise changes nothing.
struct Td {
  ibv_td td;  // first
  std::atomic<int> parents{0};
};

struct Dm;

struct Mr {
  ibv_mr mr;  // first
  eng::Mr* e = nullptr;
  Dm* dm = nullptr;  // the device memory it registers (ibv_reg_dm_mr), if any
  bool imported = false;  // ibv_import_mr: ibv_unimport_mr frees only this wrapper
};

// Device memory (device_memory.cc): `length` usable bytes at `base`, inside
// an anonymous mapping aligned as ibv_alloc_dm_attr asked.
struct Dm {
  ibv_dm dm;  // first
  void* map = nullptr;
  size_t map_len = 0;
  uint8_t* base = nullptr;
  uint64_t length = 0;
  std::atomic<int> mrs{0};  // registrations of it not yet deregistered
};

struct Mw {
  ibv_mw mw;  // first
  eng::Mw* e = nullptr;
};

struct CompChannel {
  ibv_comp_channel ch;  // first
  eng::CompletionChannel* e = nullptr;
};

// A CQ is always allocated as ibv_cq_ex (whose prefix is ibv_cq), so CQs from
// ibv_create_cq and ibv_create_cq_ex share one code path.
struct Cq {
  ibv_cq_ex cq;  // first
  eng::Cq* e = nullptr;
  eng::Device* dev = nullptr;
  bool is_ex = false;
  // Extended polling (start_poll/next_poll/end_poll): completions fetched
  // from the engine in batches; `cur` is the one the read_* callbacks see.
  // Leftovers survive end_poll and are returned first by the next poll.
  std::mutex poll_mu;
  static constexpr int kBatch = 16;
  eng::Completion buf[kBatch];
  int pos = 0;
  int count = 0;
  // Whether end_poll left completions in `buf` (pos < count): ibv_poll_cq
  // takes poll_mu only then, not at every poll (UCX polls its CQs, made
  // with ibv_create_cq_ex, with ibv_poll_cq in a loop).
  std::atomic<bool> leftovers{false};
  const eng::Completion* cur = nullptr;
  ibv_pd* domain = nullptr;  // the parent domain it was made on (IBV_CQ_INIT_ATTR_MASK_PD)
};

inline Cq* ToCq(ibv_cq* cq) { return reinterpret_cast<Cq*>(cq); }
inline Cq* ToCq(ibv_cq_ex* cq) { return reinterpret_cast<Cq*>(cq); }

struct Srq {
  ibv_srq srq;  // first
  eng::Srq* e = nullptr;
  eng::Device* dev = nullptr;
};

struct Ah {
  ibv_ah ah;  // first
  eng::Ah* e = nullptr;
};

// One WR being built through the ibv_qp_ex wr_* API.
struct PendingWr {
  eng::SendWr wr;
  uint32_t sge_begin = 0;  // index into Qp::wr_sges
  uint32_t sge_count = 0;
  uint32_t inline_begin = 0;  // index into Qp::wr_inline (inline data copy)
  uint32_t inline_len = 0;
  bool is_inline = false;
};

struct Qp {
  ibv_qp_ex qpx;  // first; qpx.qp_base is the ibv_qp applications see
  eng::Qp* e = nullptr;
  eng::Device* dev = nullptr;
  ibv_qp_cap cap{};  // caps as created (for ibv_query_qp's init_attr)
  int sq_sig_all = 0;
  bool has_qp_ex = false;  // created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
  uint64_t send_ops_flags = 0;
  // wr_* API state between wr_start and wr_complete/wr_abort.
  std::vector<PendingWr> wr_list;
  std::vector<eng::Sge> wr_sges;
  std::vector<uint8_t> wr_inline;
  int wr_error = 0;
};

inline Qp* ToQp(ibv_qp* qp) { return reinterpret_cast<Qp*>(qp); }
inline Qp* ToQp(ibv_qp_ex* qp) { return reinterpret_cast<Qp*>(qp); }

// Runs f, turning any C++ exception into `fail` so none crosses the C ABI.
template <class R, class F>
inline R NoThrow(R fail, F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    errno = ENOMEM;
    return fail;
  } catch (...) {
    errno = EIO;
    return fail;
  }
}

// Sets errno and returns null: the convention of every ibv_create_*.
template <class T>
inline T* FailNull(int err) {
  errno = err;
  return nullptr;
}

// The shape of every ibv_create_* / ibv_alloc_*: a new wrapper W, filled by
// the engine through `create(W*)` (0 or an errno). On failure the wrapper is
// freed and the verb fails as the man pages say: NULL with errno set.
template <class W, class Create>
inline W* NewFilledByEngine(Create&& create) {
  auto* w = new W{};
  if (const int rc = create(w); rc != 0) {
    delete w;
    errno = rc;
    return nullptr;
  }
  return w;
}

// The shape of every ibv_destroy_* / ibv_dealloc_*: the wrapper is freed once
// the engine has let go of the object (`destroy()` returned 0); otherwise
// the errno is returned and the object stays usable.
template <class W, class Destroy>
inline int DestroyThenFree(W* w, Destroy&& destroy) {
  return NoThrow<int>(ENOMEM, [&] {
    const int rc = destroy();
    if (rc == 0) delete w;
    return rc;
  });
}

// Translation helpers shared by the files of this library.
void ToEngineAv(const ibv_ah_attr& in, eng::AddressVector* out);
void FromEngineAv(const eng::AddressVector& in, ibv_ah_attr* out);
void FromEngineWc(const eng::Completion& c, ibv_wc* wc);
void InstallQpExOps(Qp* qp);

// The ibv_context ops each file implements, installed on a fresh context
// (device.cc). Every other op stays null, so verbs.h's inline wrappers
// report EOPNOTSUPP/ENOSYS instead of calling something bogus.
void InstallPostOps(ibv_context_ops* ops);   // post.cc
void InstallCqOps(verbs_context* vctx);      // cq.cc
void InstallQpOps(verbs_context* vctx);      // qp.cc
void InstallMrOps(verbs_context* vctx);      // pd_mr.cc
void InstallDmOps(verbs_context* vctx);      // device_memory.cc
void InstallMwOps(ibv_context_ops* ops);     // mw.cc
// An IBV_WR_BIND_MW's window, key and bind_info as the engine's SendWr
// fields (mw.cc): 0, EINVAL (bad flags, no region for a type 2 bind or a
// range without one) or EPERM (a region of another PD).
int TranslateBindMw(const ibv_mw* mw, uint32_t new_rkey, const ibv_mw_bind_info& info,
                    eng::SendWr* out);
void InstallDomainOps(verbs_context* vctx);  // parent_domain.cc
// ibv_dealloc_pd of a parent domain (parent_domain.cc).
int DeallocParentDomain(Pd* parent);
// A registration DeregMr has removed stops holding its device memory.
void ReleaseDmOf(Mr* mr);                    // device_memory.cc

// ibv_reg_mr_iova2 without the public entry point: what ibv_reg_dm_mr
// registers (pd_mr.cc).
ibv_mr* RegisterMemory(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access);
void InstallXrcOps(verbs_context* vctx);     // xrc.cc

// An IBV_QPT_XRC_RECV QP for ibv_create_qp_ex (xrc.cc); null with errno set.
ibv_qp* CreateXrcRecvQp(ibv_context* ctx, ibv_qp_init_attr_ex* attr);

// ibv_qp_cap <-> the engine's QpCaps (same fields, same meaning).
eng::QpCaps ToEngineCaps(const ibv_qp_cap& cap);
void FromEngineCaps(const eng::QpCaps& caps, ibv_qp_cap* cap);

// The shape of every QP creation (ibv_create_qp, create_qp_ex, the GSI QP):
// a new Qp wrapper filled by the engine through `create(dev, Qp*, QpCaps*)`
// with the capacities asked for in attr->cap; on success the real ones are
// written back to attr->cap (ibv_create_qp(3)) and the ibv_qp the
// application sees is filled from attr. Null with errno set on failure.
template <class Create>
Qp* NewQp(ibv_qp_init_attr_ex* attr, Create&& create) {
  ibv_context* ctx = attr->pd->context;
  eng::Device* dev = DevOf(ctx);
  eng::QpCaps caps = ToEngineCaps(attr->cap);
  auto* qp = NewFilledByEngine<Qp>([&](Qp* w) {
    std::memset(&w->qpx, 0, sizeof(w->qpx));
    return create(dev, w, &caps);
  });
  if (!qp) return nullptr;
  qp->dev = dev;
  FromEngineCaps(caps, &attr->cap);
  qp->cap = attr->cap;
  qp->sq_sig_all = attr->sq_sig_all;
  ibv_qp* q = &qp->qpx.qp_base;
  q->context = ctx;
  q->qp_context = attr->qp_context;
  q->pd = attr->pd;
  HoldDomain(attr->pd);
  q->send_cq = attr->send_cq;
  q->recv_cq = attr->recv_cq;
  q->srq = attr->srq;
  q->qp_num = dev->QpNum(qp->e);
  q->state = IBV_QPS_RESET;
  q->qp_type = attr->qp_type;
  pthread_mutex_init(&q->mutex, nullptr);
  pthread_cond_init(&q->cond, nullptr);
  return qp;
}

}  // namespace softrnic::verbs
