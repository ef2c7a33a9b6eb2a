/*
 * A verbs process that forks keeps working, and its child can use RDMA too
 * (qperf's server and rstream fork). Built against the system
 * <infiniband/verbs.h>, run over softrnic's libibverbs.so.1.
 *
 * The parent opens the device and moves data over a loopback RC pair (two
 * QPs of one context connected to each other), forks, and then:
 *   - the child opens the device afresh (a device of its own, as after
 *     exec), builds its own loopback pair and moves data;
 *   - the parent keeps using the QPs it made before the fork.
 * Both verify every byte; the exit code says whether both succeeded.
 */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE 65536

struct pair {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp[2];
  struct ibv_mr *mr;
  uint8_t *buf;
};

static int fail(const char *who, const char *what) {
  fprintf(stderr, "%s: %s failed\n", who, what);
  return 1;
}

static int connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return -1;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = *gid;
  a.ah_attr.grh.sgid_index = 0;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return -1;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int open_pair(struct pair *p, const char *who) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n < 1) return fail(who, "ibv_get_device_list");
  p->ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!p->ctx) return fail(who, "ibv_open_device");
  p->pd = ibv_alloc_pd(p->ctx);
  p->cq = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
  p->buf = calloc(1, 2 * SIZE);
  if (!p->pd || !p->cq || !p->buf) return fail(who, "pd/cq/buffer");
  p->mr = ibv_reg_mr(p->pd, p->buf, 2 * SIZE,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!p->mr) return fail(who, "ibv_reg_mr");
  union ibv_gid gid;
  if (ibv_query_gid(p->ctx, 1, 0, &gid)) return fail(who, "ibv_query_gid");
  for (int i = 0; i < 2; ++i) {
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.send_cq = ia.recv_cq = p->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    p->qp[i] = ibv_create_qp(p->pd, &ia);
    if (!p->qp[i]) return fail(who, "ibv_create_qp");
  }
  if (connect_qp(p->qp[0], p->qp[1]->qp_num, &gid) || connect_qp(p->qp[1], p->qp[0]->qp_num, &gid))
    return fail(who, "connect");
  return 0;
}

/* RDMA WRITE of SIZE bytes from the first half of buf into the second half. */
static int write_and_check(struct pair *p, const char *who, unsigned seed) {
  for (int i = 0; i < SIZE; ++i) p->buf[i] = (uint8_t)(i * 31 + seed);
  memset(p->buf + SIZE, 0, SIZE);
  struct ibv_sge sge = {(uintptr_t)p->buf, SIZE, p->mr->lkey};
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = seed;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = (uintptr_t)(p->buf + SIZE);
  wr.wr.rdma.rkey = p->mr->rkey;
  if (ibv_post_send(p->qp[0], &wr, &bad)) return fail(who, "ibv_post_send");
  struct ibv_wc wc;
  int n;
  for (long spins = 0; (n = ibv_poll_cq(p->cq, 1, &wc)) == 0; ++spins)
    if (spins > 2000000000L) return fail(who, "completion (timeout)");
  if (n < 0 || wc.status != IBV_WC_SUCCESS || wc.wr_id != seed) {
    fprintf(stderr, "%s: completion status %s\n", who, ibv_wc_status_str(wc.status));
    return 1;
  }
  if (memcmp(p->buf, p->buf + SIZE, SIZE) != 0) return fail(who, "data check");
  return 0;
}

int main(void) {
  struct pair parent;
  if (open_pair(&parent, "parent") || write_and_check(&parent, "parent before fork", 1)) return 1;
  if (ibv_fork_init() != 0) return fail("parent", "ibv_fork_init");
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return fail("parent", "fork");
  if (pid == 0) {
    struct pair child;
    if (open_pair(&child, "child")) _exit(2);
    for (unsigned i = 0; i < 20; ++i)
      if (write_and_check(&child, "child", 100 + i)) _exit(3);
    printf("child: 20 writes verified on its own device\n");
    fflush(stdout);
    _exit(0);
  }
  for (unsigned i = 0; i < 20; ++i)
    if (write_and_check(&parent, "parent after fork", 10 + i)) return 1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return fail("parent", "waitpid");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "child failed (status 0x%x)\n", status);
    return 1;
  }
  printf("parent: 21 writes verified before and after fork; child ok\n");
  return 0;
}
