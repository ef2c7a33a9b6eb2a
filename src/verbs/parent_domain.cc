// Thread domains and parent domains (ibv_alloc_td(3),
// ibv_alloc_parent_domain(3)).
//
// A parent domain is a protection domain with extras: a thread domain (a
// single-thread promise) and allocators through which a provider may take
// the memory of the QPs, CQs and SRQs made on it. Objects made on a parent
// domain belong to its protection domain: ibv_reg_mr, ibv_create_qp,
// ibv_create_srq and ibv_create_cq_ex (IBV_CQ_INIT_ATTR_MASK_PD) accept it.
//
// Custom allocators (IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) are honoured:
// the CQs, QPs and SRQs made on the parent domain keep their entries in
// memory from its alloc and give it back through its free
// (domain_allocator.h). As in mlx5, allocators are used only when both
// functions are given; PD_CONTEXT sets what they are handed.
#include "verbs/internal.h"

using namespace softrnic::verbs;

namespace {

ibv_td* AllocTdOp(ibv_context* ctx, ibv_td_init_attr* attr) noexcept {
  if (!ctx || !attr || attr->comp_mask) return FailNull<ibv_td>(EINVAL);
  auto* td = new (std::nothrow) Td{};
  if (!td) return FailNull<ibv_td>(ENOMEM);
  td->td.context = ctx;
  return &td->td;
}

int DeallocTdOp(ibv_td* ibtd) noexcept {
  if (!ibtd) return EINVAL;
  auto* td = reinterpret_cast<Td*>(ibtd);
  if (td->parents.load() != 0) return EBUSY;
  delete td;
  return 0;
}

ibv_pd* AllocParentDomainOp(ibv_context* ctx, ibv_parent_domain_init_attr* attr) noexcept {
  if (!ctx || !attr || !attr->pd || attr->pd->context != ctx) return FailNull<ibv_pd>(EINVAL);
  constexpr uint32_t kKnown =
      IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (attr->comp_mask & ~kKnown) return FailNull<ibv_pd>(EINVAL);
  auto* protection = reinterpret_cast<Pd*>(attr->pd);
  if (protection->is_parent()) return FailNull<ibv_pd>(EINVAL);  // "a protection domain"
  if (attr->td && attr->td->context != ctx) return FailNull<ibv_pd>(EINVAL);
  auto* parent = new (std::nothrow) Pd{};
  if (!parent) return FailNull<ibv_pd>(ENOMEM);
  parent->pd.context = ctx;
  parent->e = protection->e;
  parent->protection = protection;
  parent->td = reinterpret_cast<Td*>(attr->td);
  if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
    parent->pd_context = attr->pd_context;
  if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) && attr->alloc && attr->free) {
    parent->allocators = std::unique_ptr<DomainAllocators>(new (std::nothrow) DomainAllocators(
        &parent->pd, attr->alloc, attr->free, parent->pd_context));
    if (!parent->allocators) {
      delete parent;
      return FailNull<ibv_pd>(ENOMEM);
    }
  }
  ++protection->parents;
  if (parent->td) ++parent->td->parents;
  return &parent->pd;
}

}  // namespace

namespace softrnic::verbs {

int DeallocParentDomain(Pd* parent) {
  if (parent->objects.load() != 0) return EBUSY;
  --parent->protection->parents;
  if (parent->td) --parent->td->parents;
  delete parent;
  return 0;
}

void InstallDomainOps(verbs_context* vctx) {
  vctx->alloc_td = AllocTdOp;
  vctx->dealloc_td = DeallocTdOp;
  vctx->alloc_parent_domain = AllocParentDomainOp;
}

}  // namespace softrnic::verbs
