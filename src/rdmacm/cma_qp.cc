// The rdma_cm calls that make an id's verbs resources: its QP (with
// library-made CQs and completion channels when the application gives none,
// as librdmacm does) and its SRQ.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "rdmacm/cm_internal.h"
#include "rdmacm/cma.h"

namespace softrnic::rdmacm {
namespace {
// Destroys one CQ (and its channel) that CreateOwnCq made for the id.
void DestroyOwnCq(bool* own, ibv_cq** cq, ibv_comp_channel** ch) {
  if (!*own || !*cq) return;
  ibv_destroy_cq(*cq);
  *cq = nullptr;
  if (*ch) ibv_destroy_comp_channel(*ch);
  *ch = nullptr;
  *own = false;
}

void DestroyOwnCqs(Id* id) {
  DestroyOwnCq(&id->own_recv_cq, &id->id.recv_cq, &id->id.recv_cq_channel);
  DestroyOwnCq(&id->own_send_cq, &id->id.send_cq, &id->id.send_cq_channel);
}

int CreateOwnCq(Id* id, int size, ibv_comp_channel** ch, ibv_cq** cq) {
  *ch = ibv_create_comp_channel(id->id.verbs);
  if (!*ch) return errno ? errno : ENOMEM;
  *cq = ibv_create_cq(id->id.verbs, std::max(size, 1), &id->id, *ch, 0);
  if (!*cq) {
    int e = errno ? errno : ENOMEM;
    ibv_destroy_comp_channel(*ch);
    *ch = nullptr;
    return e;
  }
  return 0;
}

}  // namespace
}  // namespace softrnic::rdmacm

using namespace softrnic::rdmacm;

CMA_EXPORT int rdma_create_qp_ex(rdma_cm_id* cid, ibv_qp_init_attr_ex* attr) {
  if (!cid || !attr) return Fail(EINVAL);
  Id* id = ToId(cid);
  if (!id->id.verbs) return Fail(EINVAL);
  if (id->id.qp) return Fail(EINVAL);
  std::lock_guard<std::mutex> l(G().mu);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->pd = id->id.pd ? id->id.pd : DefaultPd(id->id.verbs);
    if (!attr->pd) return -1;
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  if (!attr->send_cq) {
    if (int rc = CreateOwnCq(id, int(attr->cap.max_send_wr), &id->id.send_cq_channel, &id->id.send_cq))
      return Fail(rc);
    id->own_send_cq = true;
    attr->send_cq = id->id.send_cq;
  }
  if (!attr->recv_cq) {
    if (int rc = CreateOwnCq(id, int(attr->cap.max_recv_wr), &id->id.recv_cq_channel, &id->id.recv_cq)) {
      DestroyOwnCqs(id);
      return Fail(rc);
    }
    id->own_recv_cq = true;
    attr->recv_cq = id->id.recv_cq;
  }
  if (id->id.srq && !attr->srq) attr->srq = id->id.srq;
  // With only IBV_QP_INIT_ATTR_PD, verbs.h's inline ibv_create_qp_ex calls
  // ibv_create_qp on the ibv_qp_init_attr prefix, which gets the real caps.
  ibv_qp* qp = ibv_create_qp_ex(id->id.verbs, attr);
  if (!qp) {
    int e = errno;
    DestroyOwnCqs(id);
    return Fail(e ? e : ENOMEM);
  }
  id->id.qp = qp;
  id->id.qp_type = attr->qp_type;
  if (!id->id.pd) id->id.pd = attr->pd;
  int rc = ModifyTo(id, IBV_QPS_INIT);
  if (!rc && attr->qp_type == IBV_QPT_UD) {
    rc = ModifyTo(id, IBV_QPS_RTR);
    if (!rc) rc = ModifyTo(id, IBV_QPS_RTS);
  }
  // A passive id created after the REQ arrived may go straight on (accept).
  if (rc) {
    ibv_destroy_qp(qp);
    id->id.qp = nullptr;
    DestroyOwnCqs(id);
    return Fail(rc);
  }
  return 0;
}

CMA_EXPORT int rdma_create_qp(rdma_cm_id* cid, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!cid || !qp_init_attr) return Fail(EINVAL);
  if (pd && cid->verbs && pd->context != cid->verbs) return Fail(EINVAL);
  // ibv_qp_init_attr is the prefix of ibv_qp_init_attr_ex.
  ibv_qp_init_attr_ex a{};
  std::memcpy(&a, qp_init_attr, sizeof(*qp_init_attr));
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  int rc = rdma_create_qp_ex(cid, &a);
  if (rc) return rc;
  qp_init_attr->send_cq = a.send_cq;
  qp_init_attr->recv_cq = a.recv_cq;
  qp_init_attr->srq = a.srq;
  qp_init_attr->cap = a.cap;
  return 0;
}

CMA_EXPORT void rdma_destroy_qp(rdma_cm_id* cid) {
  if (!cid) return;
  Id* id = ToId(cid);
  // Detach under the CM lock: the CM thread moves id->id.qp to ERR when a
  // DREQ or REJ arrives, holding that lock, and must never see a QP that is
  // being destroyed.
  ibv_qp* qp;
  {
    std::lock_guard<std::mutex> l(G().mu);
    qp = id->id.qp;
    id->id.qp = nullptr;
    DetachAllMulticast(id, qp);  // an attached QP cannot be destroyed
  }
  if (qp) ibv_destroy_qp(qp);
  DestroyOwnCqs(id);
}

CMA_EXPORT int rdma_create_srq_ex(rdma_cm_id* cid, ibv_srq_init_attr_ex* attr) {
  if (!cid || !attr || !cid->verbs) return Fail(EINVAL);
  ibv_pd* pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd : cid->pd;
  if (!pd) {
    std::lock_guard<std::mutex> l(G().mu);
    pd = DefaultPd(cid->verbs);
  }
  if (!pd) return -1;
  ibv_srq_init_attr a{};
  a.srq_context = attr->srq_context;
  a.attr = attr->attr;
  ibv_srq* srq = ibv_create_srq(pd, &a);
  if (!srq) return -1;
  cid->srq = srq;
  if (!cid->pd) cid->pd = pd;
  return 0;
}

CMA_EXPORT int rdma_create_srq(rdma_cm_id* cid, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!attr) return Fail(EINVAL);
  ibv_srq_init_attr_ex a{};
  a.srq_context = attr->srq_context;
  a.attr = attr->attr;
  a.comp_mask = IBV_SRQ_INIT_ATTR_PD;
  a.pd = pd;
  return rdma_create_srq_ex(cid, &a);
}

CMA_EXPORT void rdma_destroy_srq(rdma_cm_id* cid) {
  if (!cid || !cid->srq) return;
  ibv_destroy_srq(cid->srq);
  cid->srq = nullptr;
}
