/* Helpers shared by the verbs integration programs (api_misuse.c,
 * memory_features.c): CHECK/REQUIRE counters, polling with a deadline, and
 * the QP state walk of a loopback pair in one process. Header-only: each
 * program is one translation unit.
 */
#pragma once

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

static int g_failures __attribute__((unused));
static int g_checks __attribute__((unused));

#define CHECK(cond, ...)                                           \
  do {                                                             \
    ++g_checks;                                                    \
    if (!(cond)) {                                                 \
      ++g_failures;                                                \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                \
      fprintf(stderr, "\n");                                       \
    }                                                              \
  } while (0)

/* Evaluates cond once: it often creates something (a QP, a pair). */
#define REQUIRE(cond, ...)                                         \
  do {                                                             \
    const int require_ok_ = (cond) ? 1 : 0;                        \
    CHECK(require_ok_, __VA_ARGS__);                               \
    if (!require_ok_) {                                            \
      fprintf(stderr, "FAIL: %s: cannot continue\n", #cond);       \
      exit(1);                                                     \
    }                                                              \
  } while (0)

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Polls until n completions arrived or 5 s passed; returns how many. */
static inline int poll_n(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  int got = 0;
  double deadline = now_s() + 5.0;
  while (got < n && now_s() < deadline) {
    int r = ibv_poll_cq(cq, n - got, wc + got);
    if (r < 0) return -1;
    got += r;
  }
  return got;
}

static inline struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type type,
                              struct ibv_srq *srq, uint32_t wr, uint32_t sge) {
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof(a));
  a.send_cq = cq;
  a.recv_cq = cq;
  a.srq = srq;
  a.qp_type = type;
  a.cap.max_send_wr = wr;
  a.cap.max_recv_wr = srq ? 0 : wr;
  a.cap.max_send_sge = sge;
  a.cap.max_recv_sge = srq ? 0 : sge;
  a.cap.max_inline_data = 64;
  return ibv_create_qp(pd, &a);
}

static inline int to_init(struct ibv_qp *qp, enum ibv_qp_type type) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  if (type == IBV_QPT_UD) {
    a.qkey = 0x11111111;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  }
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static inline int to_rtr(struct ibv_qp *qp, uint32_t dest_qpn, const union ibv_gid *dgid) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = *dgid;
  a.ah_attr.grh.sgid_index = 0;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                           IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static inline int to_rts(struct ibv_qp *qp, uint8_t retry_cnt) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = retry_cnt;
  a.rnr_retry = 7;
  a.sq_psn = 0;
  a.max_rd_atomic = 4;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static inline int ud_ready(struct ibv_qp *qp) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  if (to_init(qp, IBV_QPT_UD)) return -1;
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) return -1;
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}


/* A loopback RC pair in one context of the first device: two QPs connected
 * to each other, one CQ, and one MR of 2 * size bytes whose first half is
 * the source of loopback_write and second half its target. */
struct loopback {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp[2];
  struct ibv_mr *mr;
  uint8_t *buf;
  uint32_t size;
};

/* 0, or -1 with a line on stderr naming the step that failed. */
static inline int loopback_open(struct loopback *l, uint32_t size) {
  memset(l, 0, sizeof *l);
  l->size = size;
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n == 0) return fprintf(stderr, "loopback: no device\n"), -1;
  l->ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!l->ctx) return fprintf(stderr, "loopback: ibv_open_device\n"), -1;
  l->pd = ibv_alloc_pd(l->ctx);
  l->cq = ibv_create_cq(l->ctx, 16, NULL, NULL, 0);
  l->buf = calloc(2, size);
  if (!l->pd || !l->cq || !l->buf) return fprintf(stderr, "loopback: pd/cq/buffer\n"), -1;
  l->mr = ibv_reg_mr(l->pd, l->buf, 2 * (size_t)size,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  union ibv_gid gid;
  if (!l->mr || ibv_query_gid(l->ctx, 1, 0, &gid)) return fprintf(stderr, "loopback: mr\n"), -1;
  for (int i = 0; i < 2; ++i) {
    l->qp[i] = make_qp(l->pd, l->cq, IBV_QPT_RC, NULL, 8, 1);
    if (!l->qp[i] || to_init(l->qp[i], IBV_QPT_RC)) return fprintf(stderr, "loopback: qp\n"), -1;
  }
  for (int i = 0; i < 2; ++i)
    if (to_rtr(l->qp[i], l->qp[1 - i]->qp_num, &gid) || to_rts(l->qp[i], 7))
      return fprintf(stderr, "loopback: connect\n"), -1;
  return 0;
}

/* An RDMA WRITE of the first half, filled with `fill`, onto the second.
 * With wait, its completion is awaited and every byte checked (0 or -1);
 * without, it is left in flight (0 once posted). */
static inline int loopback_write(struct loopback *l, uint8_t fill, int wait) {
  memset(l->buf, fill, l->size);
  struct ibv_sge sge = {.addr = (uintptr_t)l->buf, .length = l->size, .lkey = l->mr->lkey};
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = (uintptr_t)(l->buf + l->size);
  wr.wr.rdma.rkey = l->mr->rkey;
  if (ibv_post_send(l->qp[0], &wr, &bad)) return -1;
  if (!wait) return 0;
  struct ibv_wc wc;
  if (poll_n(l->cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS) return -1;
  for (uint32_t i = 0; i < l->size; ++i)
    if (l->buf[l->size + i] != fill) return -1;
  return 0;
}

static inline void loopback_close(struct loopback *l) {
  for (int i = 0; i < 2; ++i)
    if (l->qp[i]) ibv_destroy_qp(l->qp[i]);
  if (l->mr) ibv_dereg_mr(l->mr);
  if (l->cq) ibv_destroy_cq(l->cq);
  if (l->pd) ibv_dealloc_pd(l->pd);
  if (l->ctx) ibv_close_device(l->ctx);
  free(l->buf);
}
