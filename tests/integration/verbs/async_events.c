/*
 * Async events never outlive the object they name (issue 14, finding M6,
 * docs/security.md). Built against the system <infiniband/verbs.h>, run over
 * softrnic's libibverbs.so.1.
 *
 * A peer's RDMA WRITE to a bad rkey moves our responder QP to ERR with an
 * IBV_EVENT_QP_ACCESS_ERR: a remote peer decides when our QP gets one.
 * Then, as ibv_get_async_event(3) and the kernel's uverbs have it:
 *   1. unread: the application destroys the QP on its error path, then reads
 *      its async fd: it must not be handed the freed ibv_qp;
 *   2. read, not yet acknowledged: ibv_destroy_qp waits until the event is
 *      acknowledged, so the ibv_qp the application holds stays valid.
 * Exit 0 when both hold.
 */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SIZE 4096

struct pair {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp[2];
  struct ibv_mr *mr;
  uint8_t *buf;
};

static int fail(const char *what) {
  fprintf(stderr, "FAIL: %s (errno %d: %s)\n", what, errno, strerror(errno));
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
  a.max_dest_rd_atomic = 1;
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
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* A loopback RC pair (two QPs of one context connected to each other). */
static int open_pair(struct pair *p) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n < 1) return fail("ibv_get_device_list");
  p->ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!p->ctx) return fail("ibv_open_device");
  p->pd = ibv_alloc_pd(p->ctx);
  p->cq = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
  p->buf = calloc(1, SIZE);
  if (!p->pd || !p->cq || !p->buf) return fail("pd/cq/buffer");
  p->mr = ibv_reg_mr(p->pd, p->buf, SIZE,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!p->mr) return fail("ibv_reg_mr");
  union ibv_gid gid;
  if (ibv_query_gid(p->ctx, 1, 0, &gid)) return fail("ibv_query_gid");
  for (int i = 0; i < 2; ++i) {
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.send_cq = ia.recv_cq = p->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    p->qp[i] = ibv_create_qp(p->pd, &ia);
    if (!p->qp[i]) return fail("ibv_create_qp");
  }
  if (connect_qp(p->qp[0], p->qp[1]->qp_num, &gid) || connect_qp(p->qp[1], p->qp[0]->qp_num, &gid))
    return fail("connect");
  return 0;
}

static void close_pair(struct pair *p) {
  for (int i = 0; i < 2; ++i)
    if (p->qp[i]) ibv_destroy_qp(p->qp[i]);
  ibv_dereg_mr(p->mr);
  ibv_destroy_cq(p->cq);
  ibv_dealloc_pd(p->pd);
  ibv_close_device(p->ctx);
  free(p->buf);
}

/* qp[0] WRITEs to qp[1] under a wrong rkey; waits for the requester's error
 * completion and for qp[1]'s async event to be readable. */
static int provoke_access_error(struct pair *p) {
  struct ibv_sge sge = {(uintptr_t)p->buf, 64, p->mr->lkey};
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof(wr));
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = (uintptr_t)p->buf;
  wr.wr.rdma.rkey = p->mr->rkey ^ 0x00ABCD00u;
  if (ibv_post_send(p->qp[0], &wr, &bad)) return fail("ibv_post_send");
  struct ibv_wc wc;
  int n;
  const time_t deadline = time(NULL) + 10;
  while ((n = ibv_poll_cq(p->cq, 1, &wc)) == 0)
    if (time(NULL) > deadline) return fail("requester completion (timeout)");
  if (n < 0 || wc.status != IBV_WC_REM_ACCESS_ERR) {
    fprintf(stderr, "FAIL: requester completion %s, expected REM_ACCESS_ERR\n", ibv_wc_status_str(wc.status));
    return 1;
  }
  struct pollfd pfd = {p->ctx->async_fd, POLLIN, 0};
  if (poll(&pfd, 1, 10000) != 1) return fail("responder's async event (timeout)");
  return 0;
}

/* 1: unread events of a destroyed QP are not delivered. */
static int unread_event_is_purged(void) {
  struct pair p;
  memset(&p, 0, sizeof(p));
  if (open_pair(&p) || provoke_access_error(&p)) return 1;
  struct ibv_qp *dead = p.qp[1];
  if (ibv_destroy_qp(dead)) return fail("ibv_destroy_qp");
  p.qp[1] = NULL;
  int flags = fcntl(p.ctx->async_fd, F_GETFL);
  if (fcntl(p.ctx->async_fd, F_SETFL, flags | O_NONBLOCK)) return fail("fcntl O_NONBLOCK");
  struct pollfd pfd = {p.ctx->async_fd, POLLIN, 0};
  if (poll(&pfd, 1, 0) != 0) {
    fprintf(stderr, "FAIL: async fd still readable after its only event's QP was destroyed\n");
    return 1;
  }
  struct ibv_async_event ev;
  if (ibv_get_async_event(p.ctx, &ev) == 0) {
    fprintf(stderr, "FAIL: got event %s naming %s after ibv_destroy_qp\n", ibv_event_type_str(ev.event_type),
            ev.element.qp == dead ? "the destroyed (freed) QP" : "another object");
    return 1;
  }
  if (errno != EAGAIN) return fail("ibv_get_async_event: expected EAGAIN");
  close_pair(&p);
  printf("unread: the destroyed QP's event was purged; async fd not readable, EAGAIN\n");
  return 0;
}

struct destroyer {
  struct ibv_qp *qp;
  int rc;
  int done; /* __atomic */
};

static void *destroy_thread(void *arg) {
  struct destroyer *d = arg;
  d->rc = ibv_destroy_qp(d->qp);
  __atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* 2: an event handed out keeps its QP until acknowledged. */
static int destroy_waits_for_ack(void) {
  struct pair p;
  memset(&p, 0, sizeof(p));
  if (open_pair(&p) || provoke_access_error(&p)) return 1;
  struct ibv_async_event ev;
  if (ibv_get_async_event(p.ctx, &ev)) return fail("ibv_get_async_event");
  if (ev.event_type != IBV_EVENT_QP_ACCESS_ERR || ev.element.qp != p.qp[1]) {
    fprintf(stderr, "FAIL: got %s, expected QP access error of the responder\n", ibv_event_type_str(ev.event_type));
    return 1;
  }
  const uint32_t qpn = p.qp[1]->qp_num;
  struct destroyer d = {p.qp[1], -1, 0};
  pthread_t t;
  if (pthread_create(&t, NULL, destroy_thread, &d)) return fail("pthread_create");
  usleep(300 * 1000);
  if (__atomic_load_n(&d.done, __ATOMIC_ACQUIRE)) {
    fprintf(stderr, "FAIL: ibv_destroy_qp returned (rc %d) while its event was unacknowledged: "
            "the application's event names a freed QP\n", d.rc);
    pthread_join(t, NULL);
    return 1;
  }
  /* Still ours to read until we acknowledge. */
  if (ev.element.qp->qp_num != qpn) return fail("QP changed under an unacknowledged event");
  ibv_ack_async_event(&ev);
  pthread_join(t, NULL);
  if (d.rc != 0) return fail("ibv_destroy_qp after ack");
  p.qp[1] = NULL;
  close_pair(&p);
  printf("read: ibv_destroy_qp waited for ibv_ack_async_event, then returned 0\n");
  return 0;
}

/* Both checks, or only the one named: "unread" or "ack". */
int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  const char *only = argc > 1 ? argv[1] : "";
  if (strcmp(only, "ack") != 0 && unread_event_is_purged()) return 1;
  if (strcmp(only, "unread") != 0 && destroy_waits_for_ack()) return 1;
  printf("PASS\n");
  return 0;
}
