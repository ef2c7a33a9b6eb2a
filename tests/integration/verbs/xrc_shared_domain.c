/* XRC domains shared between processes (ibv_open_xrcd(3): every process
 * opening the same file gets the same domain): a receive QP of this process
 * delivers SENDs into an XRC SRQ of another process that opened the same
 * file, and that process sees the completions with the data, its byte
 * count, the immediate and the receive QP's number. The owner is a forked
 * child driven over a pipe (one line per command).
 *
 * Cases: delivery (1 B, a 3-packet message, a full 4 KiB, with immediate);
 * an empty SRQ is RNR until the owner posts (the send then succeeds); a WQE
 * too short completes LOC_LEN_ERR there and the sender gets REM_INV_REQ_ERR;
 * an SRQ of another domain of the owner, one of its anonymous domain, a
 * number nobody has, and a receive QP of an anonymous domain naming the
 * shared SRQ all give REM_INV_REQ_ERR and deliver nothing; an owner stopped
 * with SIGSTOP holds the sender in RNR until SIGCONT, then gets the
 * message; the number of an owner that exited is REM_INV_REQ_ERR; as root,
 * an SRQ of the same file owned by another user (nobody) is not reachable.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "verbs_test_util.h"

#define SLOT 8192
#define NSLOTS 8

static char g_file_f[64], g_file_g[64];

/* ---- the SRQ owner (child) ---- */

static void owner(int cmd_fd, int resp_fd, uid_t as_uid) {
  if (as_uid != (uid_t)-1 && (setresgid(as_uid, as_uid, as_uid) || setresuid(as_uid, as_uid, as_uid)))
    exit(3);
  FILE *in = fdopen(cmd_fd, "r"), *out = fdopen(resp_fd, "w");
  setvbuf(out, NULL, _IOLBF, 0);
  struct ibv_device **list = ibv_get_device_list(NULL);
  if (!list || !list[0]) exit(4);
  struct ibv_context *ctx = ibv_open_device(list[0]);
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
  unsigned char *buf = aligned_alloc(4096, SLOT * NSLOTS);
  struct ibv_mr *mr = ibv_reg_mr(pd, buf, SLOT * NSLOTS, IBV_ACCESS_LOCAL_WRITE);
  if (!ctx || !pd || !cq || !mr) exit(5);
  int fdf = open(g_file_f, O_RDONLY), fdg = open(g_file_g, O_RDONLY);
  struct ibv_xrcd *x[3];
  struct ibv_srq *srq[3];
  uint32_t num[3];
  for (int i = 0; i < 3; ++i) {
    struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
                                    .fd = i == 0 ? fdf : i == 1 ? fdg : -1, .oflags = O_CREAT};
    x[i] = ibv_open_xrcd(ctx, &xa);
    struct ibv_srq_init_attr_ex sa;
    memset(&sa, 0, sizeof(sa));
    sa.attr.max_wr = 16;
    sa.attr.max_sge = 1;
    sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
                   IBV_SRQ_INIT_ATTR_PD;
    sa.srq_type = IBV_SRQT_XRC;
    sa.xrcd = x[i];
    sa.cq = cq;
    sa.pd = pd;
    srq[i] = x[i] ? ibv_create_srq_ex(ctx, &sa) : NULL;
    if (!srq[i] || ibv_get_srq_num(srq[i], &num[i])) exit(6);
  }
  fprintf(out, "srqn %u %u %u\n", num[0], num[1], num[2]);
  char line[128];
  unsigned next = 0;
  while (fgets(line, sizeof(line), in)) {
    unsigned i, n, len, ms;
    if (sscanf(line, "post %u %u %u", &i, &n, &len) == 3 && i < 3) {
      int rc = 0;
      for (unsigned k = 0; k < n; ++k) {
        unsigned slot = next++ % NSLOTS;
        memset(buf + slot * SLOT, 0xEE, SLOT);
        struct ibv_sge sge = {(uintptr_t)(buf + slot * SLOT), len, mr->lkey};
        struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;
        rc |= ibv_post_srq_recv(srq[i], &wr, &bad);
      }
      fprintf(out, "%s\n", rc ? "fail" : "ok");
    } else if (sscanf(line, "poll %u %u", &n, &ms) == 2) {
      /* Each message is (j * 7 + tag) & 0xff at offset j, tag = byte 0. */
      double deadline = now_s() + ms / 1000.0;
      unsigned got = 0;
      while (got < n && now_s() < deadline) {
        struct ibv_wc wc;
        int r = ibv_poll_cq(cq, 1, &wc);
        if (r <= 0) continue;
        ++got;
        const unsigned char *p = buf + wc.wr_id * SLOT;
        int data_ok = 1;
        for (unsigned j = 0; wc.status == IBV_WC_SUCCESS && j < wc.byte_len; ++j)
          data_ok &= p[j] == (unsigned char)(j * 7 + p[0]);
        if (wc.status == IBV_WC_SUCCESS && p[wc.byte_len] != 0xEE) data_ok = 0; /* nothing past */
        fprintf(out, "wc %d %u %u %u %u %d\n", wc.status, wc.byte_len, wc.qp_num,
                (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0, wc.opcode, data_ok);
      }
      fprintf(out, "end %u\n", got);
    } else {
      break; /* quit */
    }
  }
  for (int i = 0; i < 3; ++i) {
    ibv_destroy_srq(srq[i]);
    ibv_close_xrcd(x[i]);
  }
  exit(0);
}

struct child {
  pid_t pid;
  FILE *cmd, *resp;
  uint32_t srqn[3];
};

static int start_owner(struct child *c, uid_t as_uid) {
  int a[2], b[2];
  if (pipe(a) || pipe(b)) return -1;
  c->pid = fork();
  if (c->pid == 0) {
    close(a[1]);
    close(b[0]);
    owner(a[0], b[1], as_uid);
  }
  close(a[0]);
  close(b[1]);
  c->cmd = fdopen(a[1], "w");
  c->resp = fdopen(b[0], "r");
  setvbuf(c->cmd, NULL, _IOLBF, 0);
  char line[128];
  if (!fgets(line, sizeof(line), c->resp)) return -1;
  return sscanf(line, "srqn %u %u %u", &c->srqn[0], &c->srqn[1], &c->srqn[2]) == 3 ? 0 : -1;
}

static int owner_post(struct child *c, int i, int n, int len) {
  char line[64];
  fprintf(c->cmd, "post %d %d %d\n", i, n, len);
  return fgets(line, sizeof(line), c->resp) && !strncmp(line, "ok", 2) ? 0 : -1;
}

struct owner_wc {
  int status;
  unsigned byte_len, qp_num, imm, opcode;
  int data_ok;
};

/* Returns how many completions the owner saw within ms. */
static int owner_poll(struct child *c, int n, int ms, struct owner_wc *out) {
  char line[128];
  int got = 0;
  fprintf(c->cmd, "poll %d %d\n", n, ms);
  while (fgets(line, sizeof(line), c->resp)) {
    unsigned end;
    if (sscanf(line, "end %u", &end) == 1) return got;
    struct owner_wc w;
    if (sscanf(line, "wc %d %u %u %u %u %d", &w.status, &w.byte_len, &w.qp_num, &w.imm, &w.opcode,
               &w.data_ok) == 6 && got < n)
      out[got++] = w;
  }
  return -1;
}

/* Whether every thread of pid is stopped (state T), waiting up to 5 s. */
static int wait_stopped(pid_t pid) {
  char dir[64];
  snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
  for (double until = now_s() + 5; now_s() < until; usleep(1000)) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int running = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      char path[384], buf[512];
      snprintf(path, sizeof(path), "%s/%s/stat", dir, e->d_name);
      FILE *f = fopen(path, "r");
      if (!f) continue;
      size_t n = fread(buf, 1, sizeof(buf) - 1, f);
      fclose(f);
      buf[n] = 0;
      const char *p = strrchr(buf, ')'); /* "pid (comm) S ..." */
      if (p && p[1] == ' ' && p[2] != 'T' && p[2] != 't') running = 1;
    }
    closedir(d);
    if (!running) return 1;
  }
  return 0;
}

static void stop_owner(struct child *c) {
  int st = 0;
  fprintf(c->cmd, "quit\n");
  fclose(c->cmd);
  waitpid(c->pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "owner exit status 0x%x", st);
  fclose(c->resp);
}

/* ---- this process: the receive QP and the sender ---- */

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *scq;
static struct ibv_mr *smr;
static unsigned char sbuf[SLOT];
static union ibv_gid gid;

struct pair {
  struct ibv_qp *send, *recv;
};

/* An XRC send QP connected to a new XRC receive QP of xrcd, both here. */
static int make_pair(struct ibv_xrcd *xrcd, struct pair *p) {
  struct ibv_qp_init_attr_ex r;
  memset(&r, 0, sizeof(r));
  r.qp_type = IBV_QPT_XRC_RECV;
  r.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  r.xrcd = xrcd;
  p->recv = ibv_create_qp_ex(ctx, &r);
  struct ibv_qp_init_attr_ex s;
  memset(&s, 0, sizeof(s));
  s.qp_type = IBV_QPT_XRC_SEND;
  s.send_cq = scq;
  s.cap.max_send_wr = 16;
  s.cap.max_send_sge = 1;
  s.comp_mask = IBV_QP_INIT_ATTR_PD;
  s.pd = pd;
  p->send = ibv_create_qp_ex(ctx, &s);
  if (!p->recv || !p->send) return -1;
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  if (ibv_modify_qp(p->recv, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ||
      ibv_modify_qp(p->send, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return -1;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.min_rnr_timer = 12; /* 0.64 ms between RNR retries */
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  a.dest_qp_num = p->send->qp_num;
  if (ibv_modify_qp(p->recv, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return -1;
  a.dest_qp_num = p->recv->qp_num;
  if (ibv_modify_qp(p->send, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                     IBV_QP_RQ_PSN))
    return -1;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  if (ibv_modify_qp(p->recv, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN)) return -1;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  return ibv_modify_qp(p->send, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN |
                                        IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void free_pair(struct pair *p) {
  ibv_destroy_qp(p->send);
  ibv_destroy_qp(p->recv);
}

static int send_to(struct pair *p, uint32_t srqn, unsigned len, unsigned char tag, int imm) {
  for (unsigned j = 0; j < len; ++j) sbuf[j] = (unsigned char)(j * 7 + tag);
  struct ibv_sge sge = {(uintptr_t)sbuf, len, smr->lkey};
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = tag;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
  wr.imm_data = htonl(imm);
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.qp_type.xrc.remote_srqn = srqn;
  if (ibv_post_send(p->send, &wr, &bad)) return -1;
  /* Wait here: the next send reuses the buffer. */
  struct ibv_wc wc;
  if (poll_n(scq, 1, &wc) != 1) return -2;
  return wc.status;
}

int main(void) {
  strcpy(g_file_f, "/tmp/softrnic-xrcF-XXXXXX");
  strcpy(g_file_g, "/tmp/softrnic-xrcG-XXXXXX");
  int fdf = mkstemp(g_file_f), fdg = mkstemp(g_file_g);
  REQUIRE(fdf >= 0 && fdg >= 0, "mkstemp");
  fchmod(fdf, 0644);
  fchmod(fdg, 0644);
  struct child c;
  REQUIRE(start_owner(&c, (uid_t)-1) == 0, "owner start");

  struct ibv_device **list = ibv_get_device_list(NULL);
  REQUIRE(list && list[0], "device");
  ctx = ibv_open_device(list[0]);
  REQUIRE(ctx && !ibv_query_gid(ctx, 1, 0, &gid), "open, gid");
  pd = ibv_alloc_pd(ctx);
  scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
  smr = ibv_reg_mr(pd, sbuf, sizeof(sbuf), IBV_ACCESS_LOCAL_WRITE);
  struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
                                  .fd = fdf, .oflags = O_CREAT};
  struct ibv_xrcd *xf = ibv_open_xrcd(ctx, &xa);
  xa.fd = -1;
  struct ibv_xrcd *xanon = ibv_open_xrcd(ctx, &xa);
  REQUIRE(pd && scq && smr && xf && xanon, "pd, cq, mr, domains");
  struct owner_wc w[8];
  struct pair p;

  /* 1. Delivery into the other process's SRQ. */
  REQUIRE(owner_post(&c, 0, 4, 4096) == 0, "post");
  REQUIRE(make_pair(xf, &p) == 0, "pair");
  const unsigned sizes[4] = {1, 3000, 4096, 512};
  for (int i = 0; i < 4; ++i)
    CHECK(send_to(&p, c.srqn[0], sizes[i], (unsigned char)(0x10 + i), i == 3 ? 0xC0FFEE : 0) == 0,
          "send %d of %u bytes", i, sizes[i]);
  int n = owner_poll(&c, 4, 5000, w);
  CHECK(n == 4, "owner saw %d of 4 completions", n);
  for (int i = 0; i < n; ++i) {
    CHECK(w[i].status == IBV_WC_SUCCESS && w[i].opcode == IBV_WC_RECV, "wc %d status %d op %u", i,
          w[i].status, w[i].opcode);
    CHECK(w[i].byte_len == sizes[i], "wc %d byte_len %u, sent %u", i, w[i].byte_len, sizes[i]);
    CHECK(w[i].qp_num == p.recv->qp_num, "wc %d qp_num 0x%x, receive QP 0x%x", i, w[i].qp_num,
          p.recv->qp_num);
    CHECK(w[i].data_ok, "wc %d data", i);
    CHECK(w[i].imm == (i == 3 ? 0xC0FFEEu : 0u), "wc %d imm 0x%x", i, w[i].imm);
  }

  /* 2. Empty SRQ: RNR until the owner posts, then delivered. */
  {
    for (unsigned j = 0; j < 2000; ++j) sbuf[j] = (unsigned char)(j * 7 + 0x77);
    struct ibv_sge sge = {(uintptr_t)sbuf, 2000, smr->lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof(wr));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.qp_type.xrc.remote_srqn = c.srqn[0];
    CHECK(ibv_post_send(p.send, &wr, &bad) == 0, "post RNR case");
    struct ibv_wc wc;
    CHECK(ibv_poll_cq(scq, 1, &wc) == 0, "no completion before the owner posts");
    usleep(200 * 1000);
    CHECK(ibv_poll_cq(scq, 1, &wc) == 0, "still none after 200 ms without a receive");
    CHECK(owner_post(&c, 0, 1, 4096) == 0, "post");
    CHECK(poll_n(scq, 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "RNR then success: %s",
          ibv_wc_status_str(wc.status));
    n = owner_poll(&c, 1, 5000, w);
    CHECK(n == 1 && w[0].status == IBV_WC_SUCCESS && w[0].byte_len == 2000 && w[0].data_ok,
          "RNR case delivered (%d)", n);
  }
  free_pair(&p);

  /* 3. A WQE too short: LOC_LEN_ERR there, REM_INV_REQ_ERR here. */
  REQUIRE(owner_post(&c, 0, 1, 16) == 0, "post");
  REQUIRE(make_pair(xf, &p) == 0, "pair");
  int st = send_to(&p, c.srqn[0], 100, 0x30, 0);
  CHECK(st == IBV_WC_REM_INV_REQ_ERR, "too short: %s", ibv_wc_status_str(st));
  n = owner_poll(&c, 1, 5000, w);
  CHECK(n == 1 && w[0].status == IBV_WC_LOC_LEN_ERR, "owner: %d, status %d", n, n ? w[0].status : -1);
  free_pair(&p);

  /* 4. Numbers this domain does not have. */
  REQUIRE(owner_post(&c, 1, 1, 4096) == 0 && owner_post(&c, 2, 1, 4096) == 0 &&
              owner_post(&c, 0, 1, 4096) == 0,
          "post");
  uint32_t unused = 0xABCDEF;
  while (unused == c.srqn[0] || unused == c.srqn[1] || unused == c.srqn[2]) ++unused;
  const uint32_t wrong[3] = {c.srqn[1], c.srqn[2], unused};
  const char *what[3] = {"an SRQ of another file's domain", "an SRQ of an anonymous domain",
                         "a number no SRQ has"};
  for (int i = 0; i < 3; ++i) {
    REQUIRE(make_pair(xf, &p) == 0, "pair");
    st = send_to(&p, wrong[i], 64, 0x40, 0);
    CHECK(st == IBV_WC_REM_INV_REQ_ERR, "%s: %s", what[i], ibv_wc_status_str(st));
    free_pair(&p);
  }
  REQUIRE(make_pair(xanon, &p) == 0, "pair");
  st = send_to(&p, c.srqn[0], 64, 0x41, 0);
  CHECK(st == IBV_WC_REM_INV_REQ_ERR, "anonymous domain's receive QP: %s", ibv_wc_status_str(st));
  free_pair(&p);
  n = owner_poll(&c, 3, 300, w);
  CHECK(n == 0, "nothing delivered by refused requests (%d completions)", n);

  /* 5. The shared SRQ still serves after all that. */
  REQUIRE(make_pair(xf, &p) == 0, "pair");
  CHECK(send_to(&p, c.srqn[0], 1500, 0x50, 0) == 0, "send after errors");
  n = owner_poll(&c, 1, 5000, w);
  CHECK(n == 1 && w[0].status == IBV_WC_SUCCESS && w[0].data_ok && w[0].byte_len == 1500,
        "delivered after errors (%d)", n);
  /* 6. An owner stopped (SIGSTOP) takes nothing: the sender is told RNR
   * until it continues, then the message is delivered. */
  REQUIRE(owner_post(&c, 0, 1, 4096) == 0, "post");
  kill(c.pid, SIGSTOP);
  /* kill() returns before every thread has stopped. */
  CHECK(wait_stopped(c.pid), "owner stopped");
  {
    for (unsigned j = 0; j < 3000; ++j) sbuf[j] = (unsigned char)(j * 7 + 0x66);
    struct ibv_sge sge = {(uintptr_t)sbuf, 3000, smr->lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof(wr));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.qp_type.xrc.remote_srqn = c.srqn[0];
    CHECK(ibv_post_send(p.send, &wr, &bad) == 0, "post to a stopped owner");
    struct ibv_wc wc;
    double until = now_s() + 0.3;
    int early = 0;
    while (now_s() < until) early += ibv_poll_cq(scq, 1, &wc);
    CHECK(early == 0, "no completion while the owner is stopped");
    kill(c.pid, SIGCONT);
    CHECK(poll_n(scq, 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "after SIGCONT: %s",
          ibv_wc_status_str(wc.status));
    n = owner_poll(&c, 1, 5000, w);
    CHECK(n == 1 && w[0].status == IBV_WC_SUCCESS && w[0].byte_len == 3000 && w[0].data_ok,
          "delivered after SIGCONT (%d)", n);
  }
  free_pair(&p);
  const uint32_t dead_srqn = c.srqn[0];
  /* 7. The owner crashes (its registry link stays behind): its number is
   * nobody's. */
  kill(c.pid, SIGKILL);
  waitpid(c.pid, NULL, 0);
  fclose(c.cmd);
  fclose(c.resp);
  REQUIRE(make_pair(xf, &p) == 0, "pair");
  st = send_to(&p, dead_srqn, 64, 0x70, 0);
  CHECK(st == IBV_WC_REM_INV_REQ_ERR, "SRQ of an exited process: %s", ibv_wc_status_str(st));
  free_pair(&p);

  /* 8. Another user's SRQ of the same file is never reachable. */
  struct passwd *nobody = getpwnam("nobody");
  if (geteuid() == 0 && nobody) {
    struct child u;
    REQUIRE(start_owner(&u, nobody->pw_uid) == 0, "owner as nobody");
    REQUIRE(owner_post(&u, 0, 1, 4096) == 0, "post");
    REQUIRE(make_pair(xf, &p) == 0, "pair");
    st = send_to(&p, u.srqn[0], 64, 0x60, 0);
    CHECK(st == IBV_WC_REM_INV_REQ_ERR, "another user's SRQ: %s", ibv_wc_status_str(st));
    free_pair(&p);
    n = owner_poll(&u, 1, 300, w);
    CHECK(n == 0, "nothing delivered to another user (%d)", n);
    stop_owner(&u);
  } else {
    printf("SKIP another user's domain: needs root and a 'nobody' user\n");
  }

  ibv_close_xrcd(xf);
  ibv_close_xrcd(xanon);
  unlink(g_file_f);
  unlink(g_file_g);
  printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
