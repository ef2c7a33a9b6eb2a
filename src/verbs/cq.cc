// Completion channels, CQs (plain and extended) and completion polling:
// ibv_poll_cq and ibv_req_notify_cq through ctx->ops, the ibv_cq_ex
// start_poll/next_poll/end_poll sequence, and CQ events.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>

#include "verbs/async_acks.h"
#include "verbs/internal.h"

namespace softrnic::verbs {

void FromEngineWc(const eng::Completion& c, ibv_wc* wc) {
  wc->wr_id = c.wr_id;
  wc->status = static_cast<ibv_wc_status>(c.status);
  wc->opcode = static_cast<ibv_wc_opcode>(c.opcode);
  wc->vendor_err = c.vendor_err;
  wc->byte_len = c.byte_len;
  wc->imm_data = c.imm_data;
  wc->qp_num = c.qp_num;
  wc->src_qp = c.src_qp;
  wc->wc_flags = c.wc_flags;
  wc->pkey_index = c.pkey_index;
  wc->slid = c.slid;
  wc->sl = c.sl;
  wc->dlid_path_bits = c.dlid_path_bits;
}

namespace {

// Takes up to n completions from the engine. Device::PollCq itself runs an
// engine pass on this thread when the CQ is short, so a polling application
// pays no thread hop.
inline int EnginePoll(Cq* cq, int n, eng::Completion* out) { return cq->dev->PollCq(cq->e, n, out); }

int PollCq(ibv_cq* ibcq, int num_entries, ibv_wc* wc) noexcept {
  if (num_entries < 0 || (num_entries > 0 && !wc)) return -EINVAL;
  Cq* cq = ToCq(ibcq);
  try {
    int done = 0;
    if (cq->is_ex && cq->leftovers.load(std::memory_order_acquire)) {
      // Drain what an extended poll fetched but did not consume, in order.
      std::lock_guard<std::mutex> lock(cq->poll_mu);
      while (done < num_entries && cq->pos < cq->count) FromEngineWc(cq->buf[cq->pos++], &wc[done++]);
      cq->leftovers.store(cq->pos < cq->count, std::memory_order_relaxed);
    }
    // Per thread, not a local: a local array is value-initialized (zeroed)
    // at every call, most of the cost of an empty poll (UCX polls its CQs
    // in a loop).
    static thread_local eng::Completion tmp[Cq::kBatch];
    while (done < num_entries) {
      int want = std::min(num_entries - done, Cq::kBatch);
      int got = EnginePoll(cq, want, tmp);
      if (got < 0) return done ? done : got;
      for (int i = 0; i < got; ++i) FromEngineWc(tmp[i], &wc[done++]);
      if (got < want) break;
    }
    return done;
  } catch (...) {
    return -ENOMEM;
  }
}

int ReqNotifyCq(ibv_cq* ibcq, int solicited_only) noexcept {
  Cq* cq = ToCq(ibcq);
  // Arming a CQ without a channel is legal on hardware (the event goes
  // nowhere) and some libraries arm every CQ they create; the engine only
  // tracks arming for CQs that have a channel.
  if (!ibcq->channel) return 0;
  return NoThrow<int>(ENOMEM, [&] { return cq->dev->ArmCq(cq->e, solicited_only != 0); });
}

// ---- extended CQ polling (ibv_cq_ex) ---------------------------------------

// Makes cq->buf[cq->pos] the current completion; ENOENT when there is none.
int ExFetch(Cq* cq) {
  if (cq->pos >= cq->count) {
    int got = EnginePoll(cq, Cq::kBatch, cq->buf);
    if (got < 0) return -got;
    cq->pos = 0;
    cq->count = got;
    if (got == 0) return ENOENT;
  }
  cq->cur = &cq->buf[cq->pos];
  cq->cq.wr_id = cq->cur->wr_id;
  cq->cq.status = static_cast<ibv_wc_status>(cq->cur->status);
  return 0;
}

// The CQ lock is held from a successful start_poll until end_poll, as the
// rdma-core providers do, so two threads cannot interleave a poll sequence.
int ExStartPoll(ibv_cq_ex* ibcq, ibv_poll_cq_attr* attr) noexcept {
  if (attr && attr->comp_mask) return EINVAL;
  Cq* cq = ToCq(ibcq);
  try {
    cq->poll_mu.lock();
    int rc = ExFetch(cq);
    if (rc) cq->poll_mu.unlock();
    return rc;
  } catch (...) {
    return ENOMEM;
  }
}

int ExNextPoll(ibv_cq_ex* ibcq) noexcept {
  Cq* cq = ToCq(ibcq);
  ++cq->pos;  // consume the current one
  try {
    return ExFetch(cq);
  } catch (...) {
    return ENOMEM;
  }
}

void ExEndPoll(ibv_cq_ex* ibcq) noexcept {
  Cq* cq = ToCq(ibcq);
  ++cq->pos;  // the current completion is consumed
  cq->cur = nullptr;
  cq->leftovers.store(cq->pos < cq->count, std::memory_order_release);
  cq->poll_mu.unlock();
}

ibv_wc_opcode ExReadOpcode(ibv_cq_ex* c) { return static_cast<ibv_wc_opcode>(ToCq(c)->cur->opcode); }
uint32_t ExReadVendorErr(ibv_cq_ex* c) { return ToCq(c)->cur->vendor_err; }
uint32_t ExReadByteLen(ibv_cq_ex* c) { return ToCq(c)->cur->byte_len; }
__be32 ExReadImmData(ibv_cq_ex* c) { return ToCq(c)->cur->imm_data; }
uint32_t ExReadQpNum(ibv_cq_ex* c) { return ToCq(c)->cur->qp_num; }
uint32_t ExReadSrcQp(ibv_cq_ex* c) { return ToCq(c)->cur->src_qp; }
unsigned int ExReadWcFlags(ibv_cq_ex* c) { return ToCq(c)->cur->wc_flags; }
uint32_t ExReadSlid(ibv_cq_ex* c) { return ToCq(c)->cur->slid; }
uint8_t ExReadSl(ibv_cq_ex* c) { return ToCq(c)->cur->sl; }
uint8_t ExReadDlidPathBits(ibv_cq_ex* c) { return ToCq(c)->cur->dlid_path_bits; }

// ---- CQ creation (shared by ibv_create_cq and create_cq_ex) ----------------

// memory: the parent domain's CQ allocator (IBV_CQ_INIT_ATTR_MASK_PD), or
// null for the engine's own.
ibv_cq_ex* CreateCqCommon(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                          int comp_vector, bool is_ex, uint64_t wc_flags,
                          std::pmr::memory_resource* memory = nullptr) {
  if (!ctx || cqe <= 0) return FailNull<ibv_cq_ex>(EINVAL);
  if (comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) return FailNull<ibv_cq_ex>(EINVAL);
  if (channel && channel->context != ctx) return FailNull<ibv_cq_ex>(EINVAL);
  eng::Device* dev = DevOf(ctx);
  eng::CompletionChannel* ech = channel ? reinterpret_cast<CompChannel*>(channel)->e : nullptr;
  auto* cq = NewFilledByEngine<Cq>([&](Cq* w) {
    std::memset(&w->cq, 0, sizeof(w->cq));
    return dev->CreateCq(static_cast<uint32_t>(cqe), ech, &w->cq, &w->e, memory);
  });
  if (!cq) return nullptr;
  cq->dev = dev;
  cq->is_ex = is_ex;
  ibv_cq_ex* c = &cq->cq;
  c->context = ctx;
  c->channel = channel;
  c->cq_context = cq_context;
  c->cqe = static_cast<int>(dev->CqCapacity(cq->e));
  pthread_mutex_init(&c->mutex, nullptr);
  pthread_cond_init(&c->cond, nullptr);
  if (channel) __atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_RELAXED);
  if (is_ex) {
    c->start_poll = ExStartPoll;
    c->next_poll = ExNextPoll;
    c->end_poll = ExEndPoll;
    c->read_opcode = ExReadOpcode;
    c->read_vendor_err = ExReadVendorErr;
    // Per the man page only the requested read_* are valid; we install the
    // ones whose data the engine provides and leave the rest null.
    if (wc_flags & IBV_WC_EX_WITH_BYTE_LEN) c->read_byte_len = ExReadByteLen;
    if (wc_flags & IBV_WC_EX_WITH_IMM) c->read_imm_data = ExReadImmData;
    if (wc_flags & IBV_WC_EX_WITH_QP_NUM) c->read_qp_num = ExReadQpNum;
    if (wc_flags & IBV_WC_EX_WITH_SRC_QP) c->read_src_qp = ExReadSrcQp;
    c->read_wc_flags = ExReadWcFlags;
    if (wc_flags & IBV_WC_EX_WITH_SLID) c->read_slid = ExReadSlid;
    if (wc_flags & IBV_WC_EX_WITH_SL) c->read_sl = ExReadSl;
    if (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS) c->read_dlid_path_bits = ExReadDlidPathBits;
  }
  return c;
}

ibv_cq_ex* CreateCqExOp(ibv_context* ctx, ibv_cq_init_attr_ex* attr) noexcept {
  if (!attr) return FailNull<ibv_cq_ex>(EINVAL);
  return NoThrow<ibv_cq_ex*>(nullptr, [&]() -> ibv_cq_ex* {
    if (attr->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
      return FailNull<ibv_cq_ex>(EINVAL);
    // Timestamps, CVLAN, flow tag and tag matching are not produced.
    if (attr->wc_flags & ~uint64_t(IBV_WC_STANDARD_FLAGS)) return FailNull<ibv_cq_ex>(EOPNOTSUPP);
    // ibv_create_cq_ex(3): parent_domain must be a parent domain of this
    // context; its allocators, if it has them, give the completion ring.
    if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
        (!attr->parent_domain || attr->parent_domain->context != ctx ||
         !reinterpret_cast<Pd*>(attr->parent_domain)->is_parent()))
      return FailNull<ibv_cq_ex>(EINVAL);
    if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
        (attr->flags & ~uint32_t(IBV_CREATE_CQ_ATTR_SINGLE_THREADED)))
      return FailNull<ibv_cq_ex>(EOPNOTSUPP);
    const bool on_domain = (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) != 0;
    ibv_cq_ex* cq = CreateCqCommon(ctx, static_cast<int>(attr->cqe), attr->cq_context,
                                   attr->channel, static_cast<int>(attr->comp_vector), true,
                                   attr->wc_flags,
                                   on_domain ? CqMemory(attr->parent_domain) : nullptr);
    if (cq && on_domain) {
      ToCq(cq)->domain = attr->parent_domain;
      HoldDomain(attr->parent_domain);
    }
    return cq;
  });
}

}  // namespace

void InstallCqOps(verbs_context* vctx) {
  vctx->context.ops.poll_cq = PollCq;
  vctx->context.ops.req_notify_cq = ReqNotifyCq;
  vctx->create_cq_ex = CreateCqExOp;
}

}  // namespace softrnic::verbs

using namespace softrnic::verbs;

// ---- completion channel --------------------------------------------------------

SOFTRNIC_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  if (!ctx) return FailNull<ibv_comp_channel>(EINVAL);
  return NoThrow<ibv_comp_channel*>(nullptr, [&]() -> ibv_comp_channel* {
    eng::Device* dev = DevOf(ctx);
    auto* ch = NewFilledByEngine<CompChannel>(
        [&](CompChannel* w) { return dev->CreateCompletionChannel(&w->e); });
    if (!ch) return nullptr;
    ch->ch.context = ctx;
    ch->ch.fd = dev->CompletionChannelFd(ch->e);
    ch->ch.refcnt = 0;
    return &ch->ch;
  });
}

namespace {

// Destroyed channels' structs, kept for a while: another thread of the
// application may have entered ibv_get_cq_event with the pointer before
// the destroy (rping's CQ thread when its server gives up on a connection),
// and it must find the channel destroyed (EBADF, from the engine), not
// freed memory. The last kRetiredCompChannels are kept (the engine keeps as
// many of its own, Engine::RemoveChannelLocked).
constexpr size_t kRetiredCompChannels = 64;
std::mutex g_retired_mu;
std::deque<std::unique_ptr<CompChannel>>* g_retired = nullptr;  // never freed: exit-safe

void Retire(CompChannel* ch) {
  std::lock_guard<std::mutex> lock(g_retired_mu);
  if (g_retired == nullptr) g_retired = new std::deque<std::unique_ptr<CompChannel>>;
  g_retired->emplace_back(ch);
  if (g_retired->size() > kRetiredCompChannels) g_retired->pop_front();
}

}  // namespace

SOFTRNIC_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (!channel) return EINVAL;
  auto* ch = reinterpret_cast<CompChannel*>(channel);
  return NoThrow<int>(ENOMEM, [&] {
    if (__atomic_load_n(&channel->refcnt, __ATOMIC_RELAXED) > 0) return EBUSY;
    const int rc = DevOf(channel->context)->DestroyCompletionChannel(ch->e);
    if (rc == 0) Retire(ch);
    return rc;
  });
}

SOFTRNIC_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (!channel || !cq || !cq_context) {
    errno = EINVAL;
    return -1;
  }
  auto* ch = reinterpret_cast<CompChannel*>(channel);
  return NoThrow<int>(-1, [&] {
    void* handle = nullptr;
    int rc = DevOf(channel->context)->GetCqEvent(ch->e, &handle);
    if (rc) {
      errno = rc;
      return -1;
    }
    // The engine's handle is our ibv_cq_ex, whose prefix is the ibv_cq.
    // None means the CQ was destroyed with this event unread.
    if (!handle) {
      errno = EAGAIN;
      return -1;
    }
    auto* c = static_cast<ibv_cq*>(handle);
    *cq = c;
    *cq_context = c->cq_context;
    return 0;
  });
}

SOFTRNIC_EXPORT void ibv_ack_cq_events(ibv_cq* ibcq, unsigned int nevents) {
  if (!ibcq) return;
  Cq* cq = ToCq(ibcq);
  NoThrow<int>(0, [&] {
    cq->dev->AckCqEvents(cq->e, nevents);
    return 0;
  });
}

// ---- CQ ----------------------------------------------------------------------

SOFTRNIC_EXPORT ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context,
                                      ibv_comp_channel* channel, int comp_vector) {
  return NoThrow<ibv_cq*>(nullptr, [&]() -> ibv_cq* {
    return ibv_cq_ex_to_cq(CreateCqCommon(ctx, cqe, cq_context, channel, comp_vector, false, 0));
  });
}

SOFTRNIC_EXPORT int ibv_resize_cq(ibv_cq* ibcq, int cqe) {
  if (!ibcq || cqe <= 0) return EINVAL;
  Cq* cq = ToCq(ibcq);
  return NoThrow<int>(ENOMEM, [&] {
    int rc = cq->dev->ResizeCq(cq->e, static_cast<uint32_t>(cqe));
    if (!rc) ibcq->cqe = static_cast<int>(cq->dev->CqCapacity(cq->e));
    return rc;
  });
}

SOFTRNIC_EXPORT int ibv_destroy_cq(ibv_cq* ibcq) {
  if (!ibcq) return EINVAL;
  Cq* cq = ToCq(ibcq);
  ibv_pd* const domain = cq->domain;
  return DestroyAfterAsyncAcks(cq, ibcq, &ibcq->async_events_completed, [&](uint32_t* reported) {
    const int rc = cq->dev->DestroyCq(cq->e, reported);
    if (rc == 0) ReleaseDomain(domain);
    // The engine's CQ is gone: it no longer holds the channel.
    if (rc == 0 && ibcq->channel) __atomic_sub_fetch(&ibcq->channel->refcnt, 1, __ATOMIC_RELAXED);
    return rc;
  });
}
