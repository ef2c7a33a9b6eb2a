/*
 * A subject for tests of the `softrnic` command that read a process's
 * counters: it moves traffic, then stays alive and idle for as long as the
 * test needs, so every read sees a live process whose counters no longer
 * change (tests/integration/tools/test_prometheus.sh).
 *
 * A loopback RC pair (two QPs of one device connected to each other): COUNT
 * RDMA WRITEs of 4 KiB and COUNT SENDs of 4 KiB from qp[0] to qp[1], each
 * waited for. Then prints "idle" on stdout and blocks reading stdin; at EOF
 * it tears everything down and exits 0 (1 on any verbs failure).
 * Built against the system <infiniband/verbs.h>, run over softrnic's
 * libibverbs.so.1.
 */
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIZE 4096

static int fail(const char *what) {
  fprintf(stderr, "FAIL: %s (errno %d: %s)\n", what, errno, strerror(errno));
  return 1;
}

static int connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return -1;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = *gid;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return -1;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Waits for one successful completion. */
static int wait_one(struct ibv_cq *cq) {
  struct ibv_wc wc;
  int n;
  while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {
  }
  if (n < 0) return fail("ibv_poll_cq");
  if (wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "FAIL: completion status %s\n", ibv_wc_status_str(wc.status));
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  const int count = argc > 1 ? atoi(argv[1]) : 100;
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n < 1) return fail("ibv_get_device_list");
  struct ibv_context *ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!ctx) return fail("ibv_open_device");
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  struct ibv_cq *scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  struct ibv_cq *rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  uint8_t *buf = calloc(2, SIZE);
  if (!pd || !scq || !rcq || !buf) return fail("pd/cq/buffer");
  struct ibv_mr *mr = ibv_reg_mr(pd, buf, 2 * SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr) return fail("ibv_reg_mr");
  union ibv_gid gid;
  if (ibv_query_gid(ctx, 1, 0, &gid)) return fail("ibv_query_gid");
  struct ibv_qp *qp[2];
  for (int i = 0; i < 2; ++i) {
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.send_cq = scq;
    ia.recv_cq = rcq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    qp[i] = ibv_create_qp(pd, &ia);
    if (!qp[i]) return fail("ibv_create_qp");
  }
  if (connect_qp(qp[0], qp[1]->qp_num, &gid) || connect_qp(qp[1], qp[0]->qp_num, &gid))
    return fail("connect");
  for (int i = 0; i < count; ++i) {
    memset(buf, i & 0xff, SIZE);
    struct ibv_sge src = {(uintptr_t)buf, SIZE, mr->lkey};
    struct ibv_sge dst = {(uintptr_t)(buf + SIZE), SIZE, mr->lkey};
    struct ibv_recv_wr rwr, *rbad;
    memset(&rwr, 0, sizeof(rwr));
    rwr.sg_list = &dst;
    rwr.num_sge = 1;
    if (ibv_post_recv(qp[1], &rwr, &rbad)) return fail("ibv_post_recv");
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof(wr));
    wr.sg_list = &src;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uintptr_t)(buf + SIZE);
    wr.wr.rdma.rkey = mr->rkey;
    if (ibv_post_send(qp[0], &wr, &bad) || wait_one(scq)) return fail("RDMA WRITE");
    wr.opcode = IBV_WR_SEND;
    if (ibv_post_send(qp[0], &wr, &bad) || wait_one(scq) || wait_one(rcq)) return fail("SEND");
  }
  printf("idle\n");
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  for (int i = 0; i < 2; ++i) ibv_destroy_qp(qp[i]);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(scq);
  ibv_destroy_cq(rcq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  free(buf);
  return 0;
}
