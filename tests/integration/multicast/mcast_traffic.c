/* UD multicast through the verbs API (issue 15), built against the system
 * rdma-core headers and run over softrnic's libibverbs.so.1:
 *
 *   mcast_traffic selftest              one device, several QPs: the man
 *                                       page's errors, fan-out to every
 *                                       attached QP, Q_Key filtering,
 *                                       IBV_QP_CREATE_BLOCK_SELF_MCAST_LB,
 *                                       detach, EBUSY on destroy
 *   mcast_traffic recv GROUP COUNT      a member: attaches a UD QP to
 *                                       ::ffff:GROUP, prints "ready", waits
 *                                       for COUNT messages (checking the
 *                                       GRH area and the payload), prints
 *                                       "received N from QPN"
 *   mcast_traffic send GROUP COUNT [PACE_US]
 *                                       a sender (not attached): COUNT
 *                                       messages to the group, PACE_US
 *                                       apart (default 200; 0: a burst)
 *
 * Exit status 0 only if every check held.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../verbs/verbs_test_util.h"

#define QKEY 0x11111111u
#define OTHER_QKEY 0x22222222u
#define MULTICAST_QPN 0xFFFFFFu
#define MSG_SIZE 256
#define GRH_SIZE 40
#define MAX_MSGS 1024

struct msg {
  char magic[8];
  uint32_t seq;
  uint32_t sender_qpn;
};

struct member {
  struct ibv_qp *qp;
  struct ibv_cq *cq;  /* receive completions */
  struct ibv_cq *scq; /* send completions */
  struct ibv_mr *mr;
  uint8_t *buf; /* MAX_MSGS receive slots of GRH + MSG_SIZE, then one to send from */
  int posted;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;

/* The GID of an IPv4 group (::ffff:a.b.c.d) or of an IPv6 one. */
static void gid_of_ipv4(const char *text, union ibv_gid *gid) {
  struct in_addr a;
  memset(gid, 0, sizeof(*gid));
  if (inet_pton(AF_INET6, text, gid->raw) == 1) return;
  if (inet_pton(AF_INET, text, &a) != 1) {
    fprintf(stderr, "bad address %s\n", text);
    exit(2);
  }
  gid->raw[10] = gid->raw[11] = 0xff;
  memcpy(&gid->raw[12], &a, 4);
}

static int gid_is_ipv4(const union ibv_gid *gid) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(gid->raw, prefix, 12) == 0;
}

static void open_device(void) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  REQUIRE(list && n > 0, "no device");
  ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  REQUIRE(ctx, "ibv_open_device");
  pd = ibv_alloc_pd(ctx);
  REQUIRE(pd, "ibv_alloc_pd");
}

/* A UD QP in RTS with its own CQ and buffer; block: the self-loopback flag. */
static void member_init(struct member *m, int block_self) {
  memset(m, 0, sizeof(*m));
  m->cq = ibv_create_cq(ctx, 2 * MAX_MSGS, NULL, NULL, 0);
  m->scq = ibv_create_cq(ctx, MAX_MSGS, NULL, NULL, 0);
  REQUIRE(m->cq && m->scq, "ibv_create_cq");
  struct ibv_qp_init_attr_ex a;
  memset(&a, 0, sizeof(a));
  a.qp_type = IBV_QPT_UD;
  a.send_cq = m->scq;
  a.recv_cq = m->cq;
  a.cap.max_send_wr = a.cap.max_recv_wr = MAX_MSGS;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  if (block_self) {
    a.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
    a.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
  }
  m->qp = ibv_create_qp_ex(ctx, &a);
  REQUIRE(m->qp, "ibv_create_qp_ex (block_self %d): %s", block_self, strerror(errno));
  REQUIRE(ud_ready(m->qp) == 0, "UD QP to RTS");
  m->buf = calloc(MAX_MSGS + 1, GRH_SIZE + MSG_SIZE);
  REQUIRE(m->buf, "calloc");
  m->mr = ibv_reg_mr(pd, m->buf, (size_t)(MAX_MSGS + 1) * (GRH_SIZE + MSG_SIZE),
                     IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(m->mr, "ibv_reg_mr");
}

static void post_recvs(struct member *m, int n) {
  for (int i = 0; i < n; ++i) {
    const int slot = m->posted++ % MAX_MSGS;
    struct ibv_sge sge = {(uintptr_t)(m->buf + (size_t)slot * (GRH_SIZE + MSG_SIZE)),
                          GRH_SIZE + MSG_SIZE, m->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1}, *bad;
    REQUIRE(ibv_post_recv(m->qp, &wr, &bad) == 0, "ibv_post_recv");
  }
}

static void member_free(struct member *m) {
  CHECK(ibv_destroy_qp(m->qp) == 0, "ibv_destroy_qp");
  CHECK(ibv_destroy_cq(m->cq) == 0 && ibv_destroy_cq(m->scq) == 0, "ibv_destroy_cq");
  CHECK(ibv_dereg_mr(m->mr) == 0, "ibv_dereg_mr");
  free(m->buf);
}

/* Sends count messages to the group from m's QP (signaled, waited for). */
static void send_to_group(struct member *m, const union ibv_gid *group, int count, int pace_us) {
  struct ibv_ah_attr aa;
  memset(&aa, 0, sizeof(aa));
  aa.is_global = 1;
  aa.grh.dgid = *group;
  aa.grh.sgid_index = 0;
  aa.grh.hop_limit = 64;
  aa.port_num = 1;
  struct ibv_ah *ah = ibv_create_ah(pd, &aa);
  REQUIRE(ah, "ibv_create_ah to the group");
  for (int i = 0; i < count; ++i) {
    struct msg msg;
    memset(&msg, 0, sizeof(msg));
    memcpy(msg.magic, "MCAST01", 8);
    msg.seq = (uint32_t)i;
    msg.sender_qpn = m->qp->qp_num;
    uint8_t *slot = m->buf + (size_t)MAX_MSGS * (GRH_SIZE + MSG_SIZE);
    memset(slot, 0, MSG_SIZE);
    memcpy(slot, &msg, sizeof(msg));
    struct ibv_sge sge = {(uintptr_t)slot, MSG_SIZE, m->mr->lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = (uint64_t)i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = MULTICAST_QPN;
    wr.wr.ud.remote_qkey = QKEY;
    REQUIRE(ibv_post_send(m->qp, &wr, &bad) == 0, "ibv_post_send to the group");
    /* Wait for this send's completion: the buffer is reused. */
    struct ibv_wc wc;
    REQUIRE(poll_n(m->scq, 1, &wc) == 1, "send completion %d", i);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "multicast send status %s",
          ibv_wc_status_str(wc.status));
    if (pace_us) usleep((useconds_t)pace_us);
  }
  CHECK(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah");
}

/* Polls m's CQ for receive completions for `wait_s` seconds or until
 * `expect` arrived (then a little longer, to catch extras); checks each
 * (status, GRH area naming the group, payload) and counts those from
 * sender_qpn (0: any). Returns the count. */
static int recv_messages(struct member *m, const union ibv_gid *group, uint32_t sender_qpn,
                         int expect, double wait_s) {
  int got = 0;
  double deadline = now_s() + wait_s;
  double extra_until = 0;
  while (now_s() < deadline && (extra_until == 0 || now_s() < extra_until)) {
    struct ibv_wc wc[16];
    int r = ibv_poll_cq(m->cq, 16, wc);
    if (r < 0) {
      CHECK(r >= 0, "ibv_poll_cq returned %d", r);
      break;
    }
    for (int i = 0; i < r; ++i) {
      if (wc[i].opcode != IBV_WC_RECV) continue;
      CHECK(wc[i].status == IBV_WC_SUCCESS, "recv status %s", ibv_wc_status_str(wc[i].status));
      CHECK(wc[i].wc_flags & IBV_WC_GRH, "no GRH flag");
      CHECK(wc[i].byte_len == GRH_SIZE + MSG_SIZE, "byte_len %u", wc[i].byte_len);
      const uint8_t *slot = m->buf + wc[i].wr_id * (GRH_SIZE + MSG_SIZE);
      /* RoCE v2 over IPv4: the IPv4 header is in the last 20 bytes of the
       * GRH area; over IPv6 the area is the IPv6 header. Its destination
       * address is the group. */
      if (gid_is_ipv4(group))
        CHECK(memcmp(slot + 20 + 16, &group->raw[12], 4) == 0, "GRH destination is not the group");
      else
        CHECK(memcmp(slot + 24, group->raw, 16) == 0, "GRH destination is not the IPv6 group");
      struct msg msg;
      memcpy(&msg, slot + GRH_SIZE, sizeof(msg));
      CHECK(memcmp(msg.magic, "MCAST01", 8) == 0, "payload magic");
      CHECK(msg.sender_qpn == wc[i].src_qp, "payload names QPN 0x%x, wc.src_qp 0x%x",
            msg.sender_qpn, wc[i].src_qp);
      if (sender_qpn == 0 || wc[i].src_qp == sender_qpn) ++got;
      post_recvs(m, 1);
    }
    if (got >= expect && extra_until == 0) extra_until = now_s() + 0.2;
  }
  return got;
}

static int selftest(void) {
  open_device();
  struct ibv_device_attr da;
  REQUIRE(ibv_query_device(ctx, &da) == 0, "ibv_query_device");
  CHECK(da.max_mcast_grp > 0 && da.max_mcast_qp_attach > 0 &&
            da.max_total_mcast_qp_attach >= da.max_mcast_qp_attach,
        "multicast limits %d %d %d", da.max_mcast_grp, da.max_mcast_qp_attach,
        da.max_total_mcast_qp_attach);

  /* Groups of this process only: tests run in parallel, and another
   * process's members of the same group would hear these datagrams. */
  union ibv_gid g1, g2, unicast;
  char text[32];
  const unsigned pid = (unsigned)getpid();
  snprintf(text, sizeof(text), "239.77.%u.%u", (pid >> 8) & 0xff, pid & 0xff);
  gid_of_ipv4(text, &g1);
  snprintf(text, sizeof(text), "239.78.%u.%u", (pid >> 8) & 0xff, pid & 0xff);
  gid_of_ipv4(text, &g2);
  gid_of_ipv4("10.77.0.1", &unicast);

  /* Errors the man pages and the kernel name. */
  struct ibv_cq *rc_cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
  struct ibv_qp *rc = make_qp(pd, rc_cq, IBV_QPT_RC, NULL, 4, 1);
  REQUIRE(rc_cq && rc, "RC QP");
  CHECK(ibv_attach_mcast(rc, &g1, 0) == EINVAL, "attach of an RC QP");
  struct ibv_qp_init_attr_ex bad;
  memset(&bad, 0, sizeof(bad));
  bad.qp_type = IBV_QPT_RC;
  bad.send_cq = bad.recv_cq = rc_cq;
  bad.cap.max_send_wr = bad.cap.max_recv_wr = 1;
  bad.cap.max_send_sge = bad.cap.max_recv_sge = 1;
  bad.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  bad.pd = pd;
  bad.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
  errno = 0;
  CHECK(ibv_create_qp_ex(ctx, &bad) == NULL && errno == EINVAL,
        "BLOCK_SELF_MCAST_LB on an RC QP: errno %d", errno);
  bad.qp_type = IBV_QPT_UD;
  bad.create_flags = IBV_QP_CREATE_SCATTER_FCS;
  errno = 0;
  CHECK(ibv_create_qp_ex(ctx, &bad) == NULL && errno == EOPNOTSUPP,
        "an unsupported creation flag: errno %d", errno);
  CHECK(ibv_destroy_qp(rc) == 0 && ibv_destroy_cq(rc_cq) == 0, "RC teardown");

  struct member a, b, c, s, t;
  member_init(&a, 0);
  member_init(&b, 0);
  member_init(&c, 0);
  member_init(&s, 1); /* sender that must not hear itself */
  member_init(&t, 0); /* sender that hears itself */
  struct ibv_qp_attr qa;
  memset(&qa, 0, sizeof(qa));
  qa.qkey = OTHER_QKEY;
  CHECK(ibv_modify_qp(c.qp, &qa, IBV_QP_QKEY) == 0, "C's Q_Key");

  CHECK(ibv_attach_mcast(a.qp, &unicast, 0) == EINVAL, "attach to a unicast GID");
  CHECK(ibv_detach_mcast(a.qp, &g1, 0) == EINVAL, "detach of a QP not attached");
  struct member *all[] = {&a, &b, &c, &s, &t};
  for (int i = 0; i < 5; ++i) {
    CHECK(ibv_attach_mcast(all[i]->qp, &g1, 0) == 0, "attach %d", i);
    post_recvs(all[i], 32);
  }
  CHECK(ibv_attach_mcast(a.qp, &g1, 0) == 0, "attaching twice is a no-op");

  /* S sends 5: A, B and T hear them, C (other Q_Key) and S (blocked) do not. */
  send_to_group(&s, &g1, 5, 0);
  CHECK(recv_messages(&a, &g1, s.qp->qp_num, 5, 3.0) == 5, "A got S's 5");
  CHECK(recv_messages(&b, &g1, s.qp->qp_num, 5, 3.0) == 5, "B got S's 5");
  CHECK(recv_messages(&t, &g1, s.qp->qp_num, 5, 3.0) == 5, "T got S's 5");
  CHECK(recv_messages(&c, &g1, 0, 1, 0.3) == 0, "C (another Q_Key) got nothing");
  CHECK(recv_messages(&s, &g1, 0, 1, 0.3) == 0, "S (blocked self loopback) got nothing");

  /* T sends 3: everyone with the Q_Key hears them, T itself too. */
  send_to_group(&t, &g1, 3, 0);
  CHECK(recv_messages(&a, &g1, t.qp->qp_num, 3, 3.0) == 3, "A got T's 3");
  CHECK(recv_messages(&s, &g1, t.qp->qp_num, 3, 3.0) == 3, "S got T's 3 (blocks only itself)");
  CHECK(recv_messages(&t, &g1, t.qp->qp_num, 3, 3.0) == 3, "T heard itself");

  /* An attached QP cannot be destroyed; a detached one hears nothing. */
  CHECK(ibv_destroy_qp(a.qp) == EBUSY, "destroy of an attached QP");
  CHECK(ibv_detach_mcast(a.qp, &g1, 0) == 0, "detach A");
  send_to_group(&s, &g1, 2, 0);
  CHECK(recv_messages(&b, &g1, s.qp->qp_num, 2, 3.0) == 2, "B got 2 after A left");
  CHECK(recv_messages(&a, &g1, 0, 1, 0.3) == 0, "A (detached) got nothing");

  /* A second group: only its member hears it. */
  CHECK(ibv_attach_mcast(a.qp, &g2, 0) == 0, "attach A to g2");
  send_to_group(&s, &g2, 4, 0);
  CHECK(recv_messages(&a, &g2, s.qp->qp_num, 4, 3.0) == 4, "A got 4 on g2");
  CHECK(recv_messages(&b, &g1, 0, 1, 0.3) == 0, "B (g1 only) got nothing of g2");

  CHECK(ibv_detach_mcast(a.qp, &g2, 0) == 0, "detach A from g2");
  for (int i = 1; i < 5; ++i) CHECK(ibv_detach_mcast(all[i]->qp, &g1, 0) == 0, "detach %d", i);
  for (int i = 0; i < 5; ++i) member_free(all[i]);
  CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
  CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
  printf("multicast selftest: %d checks, %d failures\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}

static int member(const char *group_text, int count) {
  open_device();
  union ibv_gid group;
  gid_of_ipv4(group_text, &group);
  struct member m;
  member_init(&m, 0);
  REQUIRE(ibv_attach_mcast(m.qp, &group, 0) == 0, "ibv_attach_mcast");
  post_recvs(&m, count);
  printf("ready qpn 0x%x\n", m.qp->qp_num);
  fflush(stdout);
  int got = recv_messages(&m, &group, 0, count, 30.0);
  printf("received %d of %d\n", got, count);
  CHECK(got == count, "received %d of %d", got, count);
  CHECK(ibv_detach_mcast(m.qp, &group, 0) == 0, "ibv_detach_mcast");
  member_free(&m);
  return g_failures ? 1 : 0;
}

static int sender(const char *group_text, int count, int pace_us) {
  open_device();
  union ibv_gid group;
  gid_of_ipv4(group_text, &group);
  struct member m;
  member_init(&m, 0);
  /* Paced by default (200 us): a datagram service drops what a member
   * cannot take in time; 0 sends a burst. */
  send_to_group(&m, &group, count, pace_us);
  printf("sent %d from qpn 0x%x\n", count, m.qp->qp_num);
  member_free(&m);
  return g_failures ? 1 : 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 2 && strcmp(argv[1], "selftest") == 0) return selftest();
  if (argc == 4 && strcmp(argv[1], "recv") == 0) return member(argv[2], atoi(argv[3]));
  if ((argc == 4 || argc == 5) && strcmp(argv[1], "send") == 0)
    return sender(argv[2], atoi(argv[3]), argc == 5 ? atoi(argv[4]) : 200);
  fprintf(stderr, "usage: %s selftest | recv GROUP COUNT | send GROUP COUNT [PACE_US]\n", argv[0]);
  return 2;
}
