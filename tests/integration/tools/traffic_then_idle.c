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
 *
 * `traffic_then_idle direct N S M A`: two processes (it forks before either
 * opens a device; each has its own) connected by one RC QP each, exchanged
 * over pipes. The parent (requester) does N RDMA WRITEs of S bytes, then M
 * RDMA READs of S bytes, then A FETCH_ADDs, each waited for, on the child's
 * (target's) page-aligned private memory: on one host these take the direct
 * path (src/engine/same_host/shm_direct.h). It checks the data (the READs return the
 * last WRITE's bytes, the FETCH_ADDs return consecutive values), prints
 * "requester PID" and "target PID", then "idle", and both block on stdin
 * (shared); at EOF both tear down and the parent exits with 0 only if the
 * child did too.
 * Built against the system <infiniband/verbs.h>, run over softrnic's
 * libibverbs.so.1.
 */
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE 4096

static int fail(const char *what) {
  fprintf(stderr, "FAIL: %s (errno %d: %s)\n", what, errno, strerror(errno));
  return 1;
}

static int connect_qp_access(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid, int access) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = access;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return -1;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest;
  a.min_rnr_timer = 1;
  a.max_dest_rd_atomic = 4;
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
  a.max_rd_atomic = 4;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid) {
  return connect_qp_access(qp, dest, gid, IBV_ACCESS_REMOTE_WRITE);
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


/* --- direct mode: two processes --- */

struct peer_info {
  uint32_t qpn;
  uint32_t rkey;
  uint64_t addr;
  union ibv_gid gid;
};

static int write_all(int fd, const void *p, size_t n) {
  return write(fd, p, n) == (ssize_t)n ? 0 : -1;
}

static int read_all(int fd, void *p, size_t n) {
  char *c = p;
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) return -1;
    c += r;
    n -= (size_t)r;
  }
  return 0;
}

static void wait_stdin_eof(void) {
  char c;
  while (read(0, &c, 1) > 0) {
  }
}

/* One side: its own device, PD, CQ, QP and a page-aligned private buffer
 * (only whole private pages are shared with a same-host peer, so only they
 * take the direct path). `out`/`in`: the pipes to and from the other side. */
static int run_side(int requester, int out, int in, int n, size_t size, int m, int atomics) {
  int ndev = 0;
  struct ibv_device **list = ibv_get_device_list(&ndev);
  if (!list || ndev < 1) return fail("ibv_get_device_list");
  struct ibv_context *ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!ctx) return fail("ibv_open_device");
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t len = (size + 8 + page - 1) / page * page;
  uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  if (buf == MAP_FAILED || !pd || !cq) return fail("pd/cq/buffer");
  const int remote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | (requester ? 0 : remote));
  if (!mr) return fail("ibv_reg_mr");
  struct ibv_qp_init_attr ia;
  memset(&ia, 0, sizeof(ia));
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  struct ibv_qp *qp = ibv_create_qp(pd, &ia);
  if (!qp) return fail("ibv_create_qp");
  struct peer_info me, peer;
  memset(&me, 0, sizeof(me));
  me.qpn = qp->qp_num;
  me.rkey = mr->rkey;
  me.addr = (uintptr_t)buf;
  if (ibv_query_gid(ctx, 1, 0, &me.gid)) return fail("ibv_query_gid");
  if (write_all(out, &me, sizeof(me)) || read_all(in, &peer, sizeof(peer))) return fail("exchange");
  if (connect_qp_access(qp, peer.qpn, &peer.gid, requester ? 0 : remote)) return fail("connect");
  /* The target is connected (RTR, published to its peers) before the
   * requester posts anything. */
  if (!requester) {
    printf("target %d\n", (int)getpid());
    fflush(stdout);
  }
  char ready = 'r';
  if (requester ? read_all(in, &ready, 1) : write_all(out, &ready, 1)) return fail("sync");
  int rc = 0;
  if (requester) {
    struct ibv_sge sge = {(uintptr_t)buf, (uint32_t)size, mr->lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof(wr));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = peer.addr;
    wr.wr.rdma.rkey = peer.rkey;
    wr.opcode = IBV_WR_RDMA_WRITE;
    for (int i = 0; i < n; ++i) {
      memset(buf, (i + 1) & 0xff, size);
      if (ibv_post_send(qp, &wr, &bad) || wait_one(cq)) return fail("RDMA WRITE");
    }
    wr.opcode = IBV_WR_RDMA_READ;
    for (int i = 0; i < m; ++i) {
      memset(buf, 0, size);
      if (ibv_post_send(qp, &wr, &bad) || wait_one(cq)) return fail("RDMA READ");
      for (size_t k = 0; n > 0 && k < size; ++k)
        if (buf[k] != (n & 0xff)) {
          fprintf(stderr, "FAIL: READ %d byte %zu is %u, the last WRITE's is %u\n", i, k, buf[k],
                  n & 0xff);
          rc = 1;
          break;
        }
    }
    /* FETCH_ADDs of 1 on the target's first word return consecutive values. */
    struct ibv_sge word = {(uintptr_t)buf, 8, mr->lkey};
    memset(&wr, 0, sizeof(wr));
    wr.sg_list = &word;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.wr.atomic.remote_addr = peer.addr;
    wr.wr.atomic.rkey = peer.rkey;
    wr.wr.atomic.compare_add = 1;
    uint64_t first = 0, got;
    for (int i = 0; i < atomics; ++i) {
      if (ibv_post_send(qp, &wr, &bad) || wait_one(cq)) return fail("FETCH_ADD");
      memcpy(&got, buf, 8);
      if (i == 0) first = got;
      if (got != first + (uint64_t)i) {
        fprintf(stderr, "FAIL: FETCH_ADD %d returned %llu, expected %llu\n", i,
                (unsigned long long)got, (unsigned long long)(first + (uint64_t)i));
        rc = 1;
      }
    }
    char done = 'd';
    if (write_all(out, &done, 1)) return fail("done");
    /* The target printed its pid before the traffic: the test may read both. */
    printf("requester %d\nidle\n", (int)getpid());
    fflush(stdout);
  } else {
    char done;
    if (read_all(in, &done, 1)) return fail("wait for the requester");
  }
  wait_stdin_eof();
  ibv_destroy_qp(qp);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  munmap(buf, len);
  return rc;
}

static int run_direct(int n, size_t size, int m, int atomics) {
  int to_child[2], to_parent[2];
  if (pipe(to_child) || pipe(to_parent)) return fail("pipe");
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) return fail("fork");
  if (child == 0) {
    close(to_child[1]);
    close(to_parent[0]);
    _exit(run_side(0, to_parent[1], to_child[0], n, size, m, atomics));
  }
  close(to_child[0]);
  close(to_parent[1]);
  int rc = run_side(1, to_child[1], to_parent[0], n, size, m, atomics);
  close(to_child[1]);
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "FAIL: target exited with status %d\n", status);
    rc = 1;
  }
  return rc;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "direct") == 0) {
    if (argc != 6 || atoi(argv[3]) < 8) {
      fprintf(stderr, "usage: %s direct WRITES SIZE(>=8) READS ATOMICS\n", argv[0]);
      return 2;
    }
    return run_direct(atoi(argv[2]), (size_t)atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
  }
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
