// Protection domains and memory regions: ibv_alloc_pd, ibv_reg_mr and its
// iova variants (on-demand paging included, explicit and implicit),
// ibv_rereg_mr, ibv_dereg_mr, ibv_advise_mr.
#include <cstdint>

#include "verbs/internal.h"

using namespace softrnic::verbs;

// ---- PD ----------------------------------------------------------------------

SOFTRNIC_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  if (!ctx) return FailNull<ibv_pd>(EINVAL);
  return NoThrow<ibv_pd*>(nullptr, [&]() -> ibv_pd* {
    auto* pd = NewFilledByEngine<Pd>([&](Pd* w) { return DevOf(ctx)->AllocPd(&w->pd, &w->e); });
    if (!pd) return nullptr;
    pd->pd.context = ctx;
    pd->pd.handle = DevOf(ctx)->PdId(pd->e);  // what ibv_import_pd takes
    return &pd->pd;
  });
}

SOFTRNIC_EXPORT int ibv_dealloc_pd(ibv_pd* ibpd) {
  if (!ibpd) return EINVAL;
  auto* pd = reinterpret_cast<Pd*>(ibpd);
  if (pd->is_parent()) return DeallocParentDomain(pd);
  // Parent domains hold their PD the way the kernel's uverbs holds it.
  if (pd->parents.load() != 0) return EBUSY;
  return DestroyThenFree(pd, [&] { return DevOf(ibpd->context)->DeallocPd(pd->e); });
}

// ---- MR ----------------------------------------------------------------------

namespace {

// IBV_ACCESS_OPTIONAL_RANGE (0x3ff00000, e.g. RELAXED_ORDERING): hints a
// device may ignore; perftest always passes RELAXED_ORDERING. HUGETLB is a
// hint too. Anything else unknown is an error.
constexpr unsigned kKnownAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                  IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                                  IBV_ACCESS_ON_DEMAND;

// The access bits the engine gets, or an errno: hints dropped, unknown bits
// EINVAL. IBV_ACCESS_ON_DEMAND (engine/memory/odp.h) and IBV_ACCESS_MW_BIND
// (engine/memory/memory_window.h) are offered.
int EngineAccess(unsigned* access) {
  *access &= ~(unsigned(IBV_ACCESS_OPTIONAL_RANGE) | IBV_ACCESS_HUGETLB);
  if (*access & ~kKnownAccess) return EINVAL;
  return 0;
}

}  // namespace

ibv_mr* softrnic::verbs::RegisterMemory(ibv_pd* ibpd, void* addr, size_t length, uint64_t iova,
                                        unsigned access) {
  if (!ibpd) return FailNull<ibv_mr>(EINVAL);
  if (int rc = EngineAccess(&access)) return FailNull<ibv_mr>(rc);
  return NoThrow<ibv_mr*>(nullptr, [&]() -> ibv_mr* {
    auto* pd = reinterpret_cast<Pd*>(ibpd);
    eng::Device* dev = DevOf(ibpd->context);
    auto* mr = NewFilledByEngine<Mr>(
        [&](Mr* w) { return dev->RegMr(pd->e, addr, length, iova, access, &w->mr, &w->e); });
    if (!mr) return nullptr;
    mr->mr.context = ibpd->context;
    mr->mr.pd = ibpd;
    HoldDomain(ibpd);
    mr->mr.addr = addr;
    mr->mr.length = length;
    mr->mr.lkey = dev->MrLkey(mr->e);
    mr->mr.rkey = dev->MrRkey(mr->e);
    mr->mr.handle = mr->mr.lkey;  // what ibv_import_mr takes
    return &mr->mr;
  });
}

SOFTRNIC_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return RegisterMemory(pd, addr, length, reinterpret_cast<uintptr_t>(addr), static_cast<unsigned>(access));
}

SOFTRNIC_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                        int access) {
  return RegisterMemory(pd, addr, length, iova, static_cast<unsigned>(access));
}

SOFTRNIC_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                         unsigned int access) {
  return RegisterMemory(pd, addr, length, iova, access);
}

SOFTRNIC_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return FailNull<ibv_mr>(EOPNOTSUPP);  // no device memory to import from
}

SOFTRNIC_EXPORT int ibv_dereg_mr(ibv_mr* ibmr) {
  if (!ibmr) return EINVAL;
  auto* mr = reinterpret_cast<Mr*>(ibmr);
  ibv_pd* const pd = ibmr->pd;
  return DestroyThenFree(mr, [&] {
    const int rc = DevOf(ibmr->context)->DeregMr(mr->e);
    if (rc == 0) {
      ReleaseDmOf(mr);
      ReleaseDomain(pd);
    }
    return rc;
  });
}

// ibv_rereg_mr(3). The argument checks are rdma-core's (verbs.c): unknown
// flags, a translation change without address or length, access bits
// without IBV_REREG_MR_CHANGE_ACCESS. The engine changes the region all or
// nothing, so every failure, its own included, leaves the old MR valid:
// IBV_REREG_MR_ERR_INPUT with errno set, never ERR_CMD ("MR shouldn't be
// used"). There is no fork protection to move (memory is never pinned,
// IBV_FORK_UNNEEDED), so the fork errors cannot happen. lkey and rkey stay.
SOFTRNIC_EXPORT int ibv_rereg_mr(ibv_mr* ibmr, int flags, ibv_pd* ibpd, void* addr, size_t length,
                                 int access) {
  const auto input_error = [](int err) {
    errno = err;
    return IBV_REREG_MR_ERR_INPUT;
  };
  if (!ibmr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED)) return input_error(EINVAL);
  if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) return input_error(EINVAL);
  if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) return input_error(EINVAL);
  if ((flags & IBV_REREG_MR_CHANGE_PD) && (!ibpd || ibpd->context != ibmr->context))
    return input_error(EINVAL);
  auto* mr = reinterpret_cast<Mr*>(ibmr);
  // Device memory is registered by ibv_reg_dm_mr alone (offset + length in
  // the allocation, zero-based): rereg has no way to say either.
  if (mr->dm) return input_error(EINVAL);
  unsigned engine_access = static_cast<unsigned>(access);
  if (int rc = EngineAccess(&engine_access)) return input_error(rc);
  const int rc = NoThrow<int>(ENOMEM, [&] {
    eng::Pd* pd = (flags & IBV_REREG_MR_CHANGE_PD) ? reinterpret_cast<Pd*>(ibpd)->e : nullptr;
    return DevOf(ibmr->context)->ReregMr(mr->e, static_cast<uint32_t>(flags), pd, addr, length,
                                         engine_access);
  });
  if (rc != 0) return input_error(rc);
  if (flags & IBV_REREG_MR_CHANGE_PD) {
    ReleaseDomain(ibmr->pd);
    HoldDomain(ibpd);
    ibmr->pd = ibpd;
  }
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    ibmr->addr = addr;
    ibmr->length = length;
  }
  return 0;
}

// ibv_advise_mr(3): prefetch of ODP ranges. Always synchronous: the pages
// are present when it returns, with or without IBV_ADVISE_MR_FLAG_FLUSH.
namespace {

int AdviseMrOp(ibv_pd* ibpd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
               uint32_t num_sge) noexcept {
  if (!ibpd || (flags & ~uint32_t{IBV_ADVISE_MR_FLAG_FLUSH}) || !sg_list || num_sge == 0)
    return EINVAL;
  eng::MrAdvice engine_advice;
  switch (advice) {
    case IBV_ADVISE_MR_ADVICE_PREFETCH: engine_advice = eng::MrAdvice::kPrefetch; break;
    case IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE: engine_advice = eng::MrAdvice::kPrefetchWrite; break;
    case IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT:
      engine_advice = eng::MrAdvice::kPrefetchNoFault;
      break;
    default: return EOPNOTSUPP;  // ENOTSUP: "the advise operation isn't supported"
  }
  return NoThrow<int>(ENOMEM, [&] {
    std::vector<eng::Sge> sges(num_sge);
    for (uint32_t i = 0; i < num_sge; ++i) sges[i] = LoadSge(sg_list, i);
    return DevOf(ibpd->context)->AdviseMr(reinterpret_cast<Pd*>(ibpd)->e, engine_advice,
                                          sges.data(), num_sge);
  });
}

}  // namespace

namespace softrnic::verbs {
void InstallMrOps(verbs_context* vctx) { vctx->advise_mr = AdviseMrOp; }
}  // namespace softrnic::verbs
