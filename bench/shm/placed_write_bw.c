// RDMA WRITE bandwidth into a same-host peer's buffer that starts on a page
// boundary, against one that does not (docs/shm.md, "Partly shared
// targets"; issue 44's "a 64 KiB RDMA WRITE from an unaligned buffer").
//
// Two processes over libibverbs (softrnic's, by LD_LIBRARY_PATH): the
// parent posts SIZE-byte WRITEs, DEPTH at a time, into SLOTS consecutive
// slots of the child's region, which starts OFFSET bytes past a page
// boundary; the child only waits. Both buffers are offset alike, as an
// application's malloc'd buffers are. With IMM=1 they are WRITE_WITH_IMMs,
// and the child polls its CQ for their receive completions (checking each
// immediate; 20 us naps while it is empty) and posts receives again: its
// CPU figure then includes its polling.
// Prints one line:
//   offset <o> size <s> gbps <GB/s> child_cpu_ms_per_gb <ms> parent_cpu_ms_per_gb <ms>
//
//   cc -O2 -o /tmp/placed_write_bw bench/shm/placed_write_bw.c -libverbs
//   LD_LIBRARY_PATH=build/lib [MTU=4096] [IMM=1] /tmp/placed_write_bw OFFSET [SIZE] [ITERS]
// (bench/shm/run_placed.sh alternates aligned and unaligned runs.)
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kSlots = 16, kDepth = 32, kRecvs = 2 * kDepth };

struct Info {
  uint32_t qpn, rkey;
  uint64_t addr;
  union ibv_gid gid;
};

struct Side {
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  struct ibv_mr* mr;
  uint8_t* buf;
  enum ibv_mtu mtu;
};

static void die(const char* what) {
  perror(what);
  exit(2);
}

static void xfer(int fd, void* p, size_t n, int out) {
  uint8_t* b = p;
  while (n > 0) {
    ssize_t r = out ? write(fd, b, n) : read(fd, b, n);
    if (r <= 0) die("socketpair");
    b += r;
    n -= (size_t)r;
  }
}

static void setup(struct Side* s, size_t offset, size_t size) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) die("no device");
  s->ctx = ibv_open_device(list[0]);
  if (!s->ctx) die("ibv_open_device");
  struct ibv_port_attr port;
  if (ibv_query_port(s->ctx, 1, &port)) die("ibv_query_port");
  // As perftest: the port's (1024 on a 1500-byte link), unless MTU names one.
  s->mtu = port.active_mtu;
  const char* mtu = getenv("MTU");
  if (mtu && atoi(mtu) == 4096) s->mtu = IBV_MTU_4096;
  if (mtu && atoi(mtu) == 2048) s->mtu = IBV_MTU_2048;
  s->pd = ibv_alloc_pd(s->ctx);
  s->cq = ibv_create_cq(s->ctx, kDepth + kRecvs, NULL, NULL, 0);
  struct ibv_qp_init_attr qa = {.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = kDepth, .max_recv_wr = kRecvs,
                                        .max_send_sge = 1, .max_recv_sge = 1}};
  s->qp = ibv_create_qp(s->pd, &qa);
  if (!s->pd || !s->cq || !s->qp) die("resources");
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uint8_t* raw = NULL;
  if (posix_memalign((void**)&raw, page, kSlots * size + 2 * page)) die("posix_memalign");
  s->buf = raw + offset;
  memset(s->buf, 0x5a, kSlots * size);
  s->mr = ibv_reg_mr(s->pd, s->buf, kSlots * size,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!s->mr) die("ibv_reg_mr");
}

static void connect_qp(struct Side* s, const struct Info* peer) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                   IBV_QP_ACCESS_FLAGS))
    die("INIT");
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = s->mtu;
  a.dest_qp_num = peer->qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer->gid;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                   IBV_QP_MIN_RNR_TIMER))
    die("RTR");
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    die("RTS");
}

static double cpu_ms(int who) {
  struct rusage ru;
  getrusage(who, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s OFFSET [SIZE] [ITERS]\n", argv[0]);
    return 2;
  }
  const size_t offset = strtoul(argv[1], NULL, 0);
  const size_t size = argc > 2 ? strtoul(argv[2], NULL, 0) : 65536;
  const long iters = argc > 3 ? strtol(argv[3], NULL, 0) : 20000;
  const int imm = getenv("IMM") && atoi(getenv("IMM")) != 0;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) die("socketpair");
  const pid_t child = fork();
  if (child < 0) die("fork");
  struct Side s;
  setup(&s, offset, size);
  struct Info mine = {.qpn = s.qp->qp_num, .rkey = s.mr->rkey, .addr = (uintptr_t)s.buf}, peer;
  if (ibv_query_gid(s.ctx, 1, 0, &mine.gid)) die("ibv_query_gid");
  const int fd = child == 0 ? sv[1] : sv[0];
  xfer(fd, &mine, sizeof(mine), 1);
  xfer(fd, &peer, sizeof(peer), 0);
  connect_qp(&s, &peer);
  char c = 'r';
  if (child == 0) {  // the target: connected, then waits until the parent is done
    struct ibv_recv_wr rwr = {.num_sge = 0}, *rbad;
    for (int i = 0; imm && i < kRecvs; ++i)
      if (ibv_post_recv(s.qp, &rwr, &rbad)) die("ibv_post_recv");
    xfer(fd, &c, 1, 1);
    for (long got = 0; imm && got < iters;) {
      struct ibv_wc wc[kDepth];
      const int n = ibv_poll_cq(s.cq, kDepth, wc);
      if (n < 0) die("ibv_poll_cq");
      if (n == 0) usleep(20);  // leave the CPUs to the requester and the engines
      for (int i = 0; i < n; ++i, ++got) {
        if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
            wc[i].byte_len != size || ntohl(wc[i].imm_data) != (uint32_t)got) {
          fprintf(stderr, "receive %ld: %s, opcode %d, %u bytes, immediate %u\n", got,
                  ibv_wc_status_str(wc[i].status), wc[i].opcode, wc[i].byte_len,
                  ntohl(wc[i].imm_data));
          _exit(1);
        }
        if (ibv_post_recv(s.qp, &rwr, &rbad)) die("ibv_post_recv");
      }
    }
    xfer(fd, &c, 1, 0);
    double ms = cpu_ms(RUSAGE_SELF);
    xfer(fd, &ms, sizeof(ms), 1);
    _exit(0);
  }
  xfer(fd, &c, 1, 0);
  const double cpu0 = cpu_ms(RUSAGE_SELF);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long posted = 0, done = 0;
  while (done < iters) {
    while (posted < iters && posted - done < kDepth) {
      const size_t slot = (size_t)(posted % kSlots) * size;
      struct ibv_sge sge = {.addr = (uintptr_t)(s.buf + slot), .length = (uint32_t)size,
                            .lkey = s.mr->lkey};
      struct ibv_send_wr wr = {.wr_id = (uint64_t)posted, .sg_list = &sge, .num_sge = 1,
                               .opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
                               .send_flags = IBV_SEND_SIGNALED,
                               .imm_data = htonl((uint32_t)posted),
                               .wr.rdma = {.remote_addr = peer.addr + slot, .rkey = peer.rkey}};
      struct ibv_send_wr* bad;
      if (ibv_post_send(s.qp, &wr, &bad)) die("ibv_post_send");
      ++posted;
    }
    struct ibv_wc wc[kDepth];
    const int n = ibv_poll_cq(s.cq, kDepth, wc);
    if (n < 0) die("ibv_poll_cq");
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        fprintf(stderr, "completion %llu: %s\n", (unsigned long long)wc[i].wr_id,
                ibv_wc_status_str(wc[i].status));
        return 1;
      }
    }
    done += n;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double cpu = cpu_ms(RUSAGE_SELF) - cpu0;
  xfer(fd, &c, 1, 1);
  double child_ms = 0;
  xfer(fd, &child_ms, sizeof(child_ms), 0);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  const double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  const double gb = (double)iters * (double)size / 1e9;
  printf("offset %zu size %zu gbps %.2f child_cpu_ms_per_gb %.1f parent_cpu_ms_per_gb %.1f\n",
         offset, size, gb / secs, child_ms / gb, cpu / gb);
  return 0;
}
