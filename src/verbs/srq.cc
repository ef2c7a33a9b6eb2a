// Shared receive queues: ibv_create_srq, ibv_modify_srq, ibv_query_srq,
// ibv_destroy_srq (ibv_post_srq_recv is in post.cc).
#include <cstdint>

#include "verbs/async_acks.h"
#include "verbs/internal.h"

using namespace softrnic::verbs;

// ---- SRQ ---------------------------------------------------------------------

SOFTRNIC_EXPORT ibv_srq* ibv_create_srq(ibv_pd* ibpd, ibv_srq_init_attr* init) {
  if (!ibpd || !init) return FailNull<ibv_srq>(EINVAL);
  return NoThrow<ibv_srq*>(nullptr, [&]() -> ibv_srq* {
    eng::Device* dev = DevOf(ibpd->context);
    eng::SrqAttr a{init->attr.max_wr, init->attr.max_sge, init->attr.srq_limit};
    auto* srq = NewFilledByEngine<Srq>(
        [&](Srq* w) {
          return dev->CreateSrq(reinterpret_cast<Pd*>(ibpd)->e, a, &w->srq, &w->e, SrqMemory(ibpd));
        });
    if (!srq) return nullptr;
    srq->dev = dev;
    // Report the real sizes back, as ibv_create_srq(3) promises.
    eng::SrqAttr real;
    if (dev->QuerySrq(srq->e, &real) == 0) {
      init->attr.max_wr = real.max_wr;
      init->attr.max_sge = real.max_sge;
    }
    ibv_srq* s = &srq->srq;
    s->context = ibpd->context;
    s->srq_context = init->srq_context;
    s->pd = ibpd;
    HoldDomain(ibpd);
    pthread_mutex_init(&s->mutex, nullptr);
    pthread_cond_init(&s->cond, nullptr);
    return s;
  });
}

SOFTRNIC_EXPORT int ibv_modify_srq(ibv_srq* ibsrq, ibv_srq_attr* attr, int mask) {
  if (!ibsrq || !attr) return EINVAL;
  if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  auto* srq = reinterpret_cast<Srq*>(ibsrq);
  return NoThrow<int>(ENOMEM, [&] {
    eng::SrqAttr a{attr->max_wr, attr->max_sge, attr->srq_limit};
    return srq->dev->ModifySrq(srq->e, a, static_cast<uint32_t>(mask));
  });
}

SOFTRNIC_EXPORT int ibv_query_srq(ibv_srq* ibsrq, ibv_srq_attr* attr) {
  if (!ibsrq || !attr) return EINVAL;
  auto* srq = reinterpret_cast<Srq*>(ibsrq);
  return NoThrow<int>(ENOMEM, [&] {
    eng::SrqAttr a;
    int rc = srq->dev->QuerySrq(srq->e, &a);
    if (rc) return rc;
    attr->max_wr = a.max_wr;
    attr->max_sge = a.max_sge;
    attr->srq_limit = a.srq_limit;
    return 0;
  });
}

SOFTRNIC_EXPORT int ibv_destroy_srq(ibv_srq* ibsrq) {
  if (!ibsrq) return EINVAL;
  auto* srq = reinterpret_cast<Srq*>(ibsrq);
  ibv_pd* const pd = ibsrq->pd;
  return DestroyAfterAsyncAcks(srq, ibsrq, &ibsrq->events_completed, [&](uint32_t* reported) {
    const int rc = srq->dev->DestroySrq(srq->e, reported);
    if (rc == 0) ReleaseDomain(pd);
    return rc;
  });
}
