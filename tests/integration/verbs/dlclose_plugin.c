/*
 * The plugin of it_verbs_dlclose (dlclose.c): a shared object linking
 * libibverbs and librdmacm, as a storage or MPI plugin does, that the test
 * loads and unloads again and again. plugin_traffic() moves verified data
 * over a loopback RC pair and starts the CM's thread with a listener; then
 * it either tears everything down or, when asked, leaves the device open
 * with a WRITE in flight (plugins that never close their device are common)
 * and hands what it leaves to the caller (`keep`), so that nothing is lost
 * track of.
 */
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include "verbs_test_util.h"

#define SIZE 8192

struct kept {
  struct ibv_context *ctx;
  void *buf;
};

static int fail(int iteration, const char *what) {
  fprintf(stderr, "iteration %d: %s failed\n", iteration, what);
  return 1;
}

/* 0 when every byte arrived; leaves the device open when leave_open. */
__attribute__((visibility("default"))) int plugin_traffic(int iteration, int leave_open,
                                                          struct kept *keep) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n == 0) return fail(iteration, "ibv_get_device_list");
  struct ibv_context *ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!ctx) return fail(iteration, "ibv_open_device");
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  uint8_t *buf = calloc(2, SIZE);
  struct ibv_mr *mr =
      pd && buf ? ibv_reg_mr(pd, buf, 2 * SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
                : NULL;
  union ibv_gid gid;
  if (!cq || !mr || ibv_query_gid(ctx, 1, 0, &gid)) return fail(iteration, "device setup");
  struct ibv_qp *qp[2];
  for (int i = 0; i < 2; ++i) {
    qp[i] = make_qp(pd, cq, IBV_QPT_RC, NULL, 8, 1);
    if (!qp[i] || to_init(qp[i], IBV_QPT_RC)) return fail(iteration, "qp");
  }
  for (int i = 0; i < 2; ++i)
    if (to_rtr(qp[i], qp[1 - i]->qp_num, &gid) || to_rts(qp[i], 7))
      return fail(iteration, "connect");

  struct rdma_event_channel *ch = rdma_create_event_channel();
  struct rdma_cm_id *id = NULL;
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
      rdma_bind_addr(id, (struct sockaddr *)&sa) || rdma_listen(id, 1))
    return fail(iteration, "rdma_listen");

  /* Two WRITEs: the first waited for and verified, the second (left open
   * only) still in flight when the caller unloads this plugin. */
  for (int w = 0; w < 2; ++w) {
    memset(buf, (uint8_t)(iteration * 2 + w + 1), SIZE);
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = SIZE, .lkey = mr->lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uintptr_t)(buf + SIZE);
    wr.wr.rdma.rkey = mr->rkey;
    if (ibv_post_send(qp[0], &wr, &bad)) return fail(iteration, "ibv_post_send");
    if (w == 1 && leave_open) break;
    struct ibv_wc wc;
    if (poll_n(cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
      return fail(iteration, "WRITE completion");
    for (int i = 0; i < SIZE; ++i)
      if (buf[SIZE + i] != (uint8_t)(iteration * 2 + w + 1)) return fail(iteration, "WRITE data");
  }
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  if (leave_open) {
    keep->ctx = ctx;
    keep->buf = buf;
    return 0;
  }
  ibv_destroy_qp(qp[0]);
  ibv_destroy_qp(qp[1]);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  free(buf);
  return 0;
}
