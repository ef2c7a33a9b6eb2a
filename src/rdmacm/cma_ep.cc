// The endpoint calls of rdma_cm (librdmacm's rdma_create_ep(3) family): an
// id made from an rdma_getaddrinfo answer in one call, resolved and with
// its QP (active side) or bound and keeping the QP attributes for the
// requests to come (passive side, rdma_get_request), and undone in one
// call. They are built on the other rdma_* calls only, as in librdmacm.
#include <rdma/rdma_verbs.h>

#include <cerrno>

#include "rdmacm/cm_internal.h"
#include "rdmacm/cma.h"

using namespace softrnic::rdmacm;

// A passive endpoint's next connect request, as an id with its QP made from
// the attributes rdma_create_ep kept (synchronous ids only).
CMA_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** out) {
  if (!listen || !out) return Fail(EINVAL);
  Id* l = ToId(listen);
  if (!l->sync) return Fail(EINVAL);
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(listen->channel, &e) != 0) return -1;
  if (e->status) {
    int s = e->status;
    rdma_ack_cm_event(e);
    return Fail(s < 0 ? -s : s);
  }
  if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    rdma_ack_cm_event(e);
    return Fail(EINVAL);
  }
  rdma_cm_id* c = e->id;
  if (l->has_ep_attr) {
    ibv_qp_init_attr a = l->ep_attr;
    if (rdma_create_qp(c, l->ep_pd, &a) != 0) {
      int err = errno;
      rdma_ack_cm_event(e);
      rdma_destroy_id(c);
      return Fail(err);
    }
  }
  c->event = e;
  *out = c;
  return 0;
}

CMA_EXPORT int rdma_create_ep(rdma_cm_id** out, rdma_addrinfo* res, ibv_pd* pd,
                              ibv_qp_init_attr* qp_init_attr) {
  if (!out || !res) return Fail(EINVAL);
  rdma_port_space ps = res->ai_port_space ? rdma_port_space(res->ai_port_space) : RDMA_PS_TCP;
  ibv_qp_type qpt = res->ai_qp_type ? ibv_qp_type(res->ai_qp_type)
                                    : (ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC);
  rdma_cm_id* cid = nullptr;
  if (CreateId(nullptr, &cid, nullptr, ps, qpt) != 0) return -1;
  Id* id = ToId(cid);
  int rc = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    rc = rdma_bind_addr(cid, res->ai_src_addr);
    if (rc) goto err;
    if (qp_init_attr) {
      qp_init_attr->qp_type = qpt;
      id->has_ep_attr = true;
      id->ep_attr = *qp_init_attr;
      id->ep_pd = pd;
    }
    cid->pd = pd;
    *out = cid;
    return 0;
  }
  rc = rdma_resolve_addr(cid, res->ai_src_len ? res->ai_src_addr : nullptr, res->ai_dst_addr, 2000);
  if (rc) goto err;
  rc = rdma_resolve_route(cid, 2000);
  if (rc) goto err;
  if (qp_init_attr) {
    qp_init_attr->qp_type = qpt;
    rc = rdma_create_qp(cid, pd, qp_init_attr);
    if (rc) goto err;
  }
  if (pd && !cid->pd) cid->pd = pd;
  *out = cid;
  return 0;
err : {
  int e = errno;
  rdma_destroy_id(cid);
  errno = e;
  return -1;
}
}

CMA_EXPORT void rdma_destroy_ep(rdma_cm_id* cid) {
  if (!cid) return;
  if (cid->qp) rdma_destroy_qp(cid);
  if (cid->srq) rdma_destroy_srq(cid);
  rdma_destroy_id(cid);
}
