/* The victim side of the forged-CM tests (test_forged_cm.sh,
 * test_req_flood.sh): rdma_cm endpoints that report every CM event they get
 * while an attacker sends forged MADs, then prove the connection still works.
 *
 *   cm_victim server PORT GOFILE        accept one connection; until GOFILE
 *                                       exists any CM event is a failure;
 *                                       then echo one SEND, wait DISCONNECTED
 *   cm_victim client IP PORT GOFILE     connect; same watch; then SEND, get
 *                                       the echo back, rdma_disconnect
 *   cm_victim pending IP PORT GOFILE    connect to an address that never
 *                                       answers; until GOFILE no event may
 *                                       arrive (a forged REP/REJ would give
 *                                       ESTABLISHED/REJECTED)
 *   cm_victim udpending IP PORT GOFILE  the same for a UD id (SIDR_REQ;
 *                                       a forged SIDR_REP gives ESTABLISHED)
 *   cm_victim listen PORT GOFILE BACKLOG  synchronous listener (rdma_create_ep
 *                                       + rdma_get_request) that takes no
 *                                       request until GOFILE exists; then it
 *                                       rejects requests without the "legit"
 *                                       private data and serves the first
 *                                       that has it (one echoed SEND)
 *   cm_victim legit IP PORT             the client for "listen"
 *
 * Prints "ESTABLISHED" / "READY" when the attack may start, and "OK" at the
 * end; exits non-zero with a FAIL line otherwise. Every wait is bounded.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAIL(...)                                 \
  do {                                            \
    fprintf(stdout, "FAIL: " __VA_ARGS__);        \
    fprintf(stdout, "\n");                        \
    exit(1);                                      \
  } while (0)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static struct sockaddr_in addr_of(const char* ip, int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  if (ip) inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

/* Next CM event within `secs`, of type `want` (else FAIL). */
static struct rdma_cm_event* expect(struct rdma_event_channel* ch, enum rdma_cm_event_type want,
                                    double secs) {
  struct pollfd p = {.fd = ch->fd, .events = POLLIN};
  if (poll(&p, 1, (int)(secs * 1000)) != 1) FAIL("no event within %.0f s (waiting for %s)", secs, rdma_event_str(want));
  struct rdma_cm_event* e;
  if (rdma_get_cm_event(ch, &e)) FAIL("rdma_get_cm_event: %s", strerror(errno));
  if (e->event != want) FAIL("got %s (status %d), expected %s", rdma_event_str(e->event), e->status, rdma_event_str(want));
  return e;
}

/* Until `go` exists (60 s at most): any CM event on `ch` is the attack
 * working. */
static void watch_until(struct rdma_event_channel* ch, const char* go) {
  double end = now_s() + 60;
  while (access(go, F_OK) != 0) {
    if (now_s() > end) FAIL("%s never appeared", go);
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    if (poll(&p, 1, 100) == 1) {
      struct rdma_cm_event* e;
      if (rdma_get_cm_event(ch, &e) == 0)
        FAIL("forged MAD took effect: got %s (status %d)", rdma_event_str(e->event), e->status);
    }
  }
}

struct conn {
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_mr* mr;
  char buf[2][64];
};

static void make_qp(struct rdma_cm_id* id, struct conn* c) {
  c->pd = ibv_alloc_pd(id->verbs);
  c->cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
  if (!c->pd || !c->cq) FAIL("pd/cq");
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.send_cq = a.recv_cq = c->cq;
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.qp_type = IBV_QPT_RC;
  if (rdma_create_qp(id, c->pd, &a)) FAIL("rdma_create_qp: %s", strerror(errno));
  c->mr = ibv_reg_mr(c->pd, c->buf, sizeof c->buf, IBV_ACCESS_LOCAL_WRITE);
  if (!c->mr) FAIL("reg_mr");
  if (rdma_post_recv(id, NULL, c->buf[1], 64, c->mr)) FAIL("post_recv");
}

static struct ibv_wc poll_one(struct conn* c) {
  struct ibv_wc wc;
  double end = now_s() + 10;
  for (;;) {
    int n = ibv_poll_cq(c->cq, 1, &wc);
    if (n == 1) {
      if (wc.status != IBV_WC_SUCCESS) FAIL("completion status %s", ibv_wc_status_str(wc.status));
      return wc;
    }
    if (now_s() > end) FAIL("no completion within 10 s");
    usleep(1000);
  }
}

/* Sends `msg`; with `echo`, first waits for the peer's message and checks
 * it is `msg` (the server echoes what the client sent). */
static void exchange(struct rdma_cm_id* id, struct conn* c, const char* msg, int client) {
  if (!client) {
    struct ibv_wc wc = poll_one(c);
    if (wc.opcode != IBV_WC_RECV || strcmp(c->buf[1], msg) != 0) FAIL("server got '%.63s'", c->buf[1]);
  }
  snprintf(c->buf[0], 64, "%s", msg);
  if (rdma_post_send(id, NULL, c->buf[0], 64, c->mr, IBV_SEND_SIGNALED)) FAIL("post_send");
  if (client) {
    int got_recv = 0, got_send = 0;
    while (!got_recv || !got_send) {
      struct ibv_wc wc = poll_one(c);
      if (wc.opcode == IBV_WC_RECV) got_recv = 1; else got_send = 1;
    }
    if (strcmp(c->buf[1], msg) != 0) FAIL("client got '%.63s' back", c->buf[1]);
  } else {
    poll_one(c);
  }
}

static void teardown(struct rdma_cm_id* id, struct conn* c) {
  rdma_destroy_qp(id);
  ibv_dereg_mr(c->mr);
  ibv_destroy_cq(c->cq);
  ibv_dealloc_pd(c->pd);
}

static int run_server(int port, const char* go) {
  struct rdma_event_channel* ch = rdma_create_event_channel();
  struct rdma_cm_id *l, *id;
  struct conn c;
  if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP)) FAIL("create id");
  struct sockaddr_in a = addr_of(NULL, port);
  if (rdma_bind_addr(l, (struct sockaddr*)&a) || rdma_listen(l, 8)) FAIL("bind/listen: %s", strerror(errno));
  printf("LISTENING\n");
  fflush(stdout);
  struct rdma_cm_event* e = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 30);
  id = e->id;
  rdma_ack_cm_event(e);
  make_qp(id, &c);
  if (rdma_accept(id, NULL)) FAIL("accept: %s", strerror(errno));
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED, 10));
  printf("ESTABLISHED\n");
  fflush(stdout);
  watch_until(ch, go);
  exchange(id, &c, "after the attack", 0);
  /* The real peer's DREQ is still seen (the harness can see a disconnect). */
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED, 10));
  teardown(id, &c);
  rdma_destroy_id(id);
  rdma_destroy_id(l);
  rdma_destroy_event_channel(ch);
  printf("OK\n");
  return 0;
}

static int run_client(const char* ip, int port, const char* go, int pending) {
  struct rdma_event_channel* ch = rdma_create_event_channel();
  struct rdma_cm_id* id;
  struct conn c;
  if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) FAIL("create id");
  struct sockaddr_in d = addr_of(ip, port);
  if (rdma_resolve_addr(id, NULL, (struct sockaddr*)&d, 2000)) FAIL("resolve_addr");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5));
  if (rdma_resolve_route(id, 2000)) FAIL("resolve_route");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5));
  make_qp(id, &c);
  struct rdma_conn_param p;
  memset(&p, 0, sizeof p);
  p.responder_resources = p.initiator_depth = 1;
  p.retry_count = p.rnr_retry_count = 7;
  if (rdma_connect(id, &p)) FAIL("connect: %s", strerror(errno));
  if (pending) {
    printf("READY\n");
    fflush(stdout);
    watch_until(ch, go);
    printf("OK\n");
    return 0;
  }
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED, 10));
  printf("ESTABLISHED\n");
  fflush(stdout);
  watch_until(ch, go);
  exchange(id, &c, "after the attack", 1);
  if (rdma_disconnect(id)) FAIL("disconnect");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED, 10));
  teardown(id, &c);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  printf("OK\n");
  return 0;
}

/* A UD client (RDMA_PS_UDP): its SIDR_REQ is never answered; until `go`
 * no event may arrive (a forged SIDR_REP would give ESTABLISHED with the
 * attacker's QPN and Q_Key). */
static int run_ud_pending(const char* ip, int port, const char* go) {
  struct rdma_event_channel* ch = rdma_create_event_channel();
  struct rdma_cm_id* id;
  if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_UDP)) FAIL("create id");
  struct sockaddr_in d = addr_of(ip, port);
  if (rdma_resolve_addr(id, NULL, (struct sockaddr*)&d, 2000)) FAIL("resolve_addr");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5));
  if (rdma_resolve_route(id, 2000)) FAIL("resolve_route");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5));
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.qp_type = IBV_QPT_UD;
  if (rdma_create_qp(id, NULL, &a)) FAIL("rdma_create_qp: %s", strerror(errno));
  if (rdma_connect(id, NULL)) FAIL("connect: %s", strerror(errno));
  printf("READY\n");
  fflush(stdout);
  watch_until(ch, go);
  printf("OK\n");
  return 0;
}

static int run_listen(int port, const char* go, int backlog) {
  struct rdma_addrinfo hints, *res;
  memset(&hints, 0, sizeof hints);
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  if (rdma_getaddrinfo(NULL, service, &hints, &res)) FAIL("getaddrinfo: %s", strerror(errno));
  struct rdma_cm_id* l;
  if (rdma_create_ep(&l, res, NULL, NULL)) FAIL("create_ep: %s", strerror(errno));
  rdma_freeaddrinfo(res);
  if (rdma_listen(l, backlog)) FAIL("listen: %s", strerror(errno));
  printf("READY\n");
  fflush(stdout);
  double end = now_s() + 120;
  while (access(go, F_OK) != 0) {
    if (now_s() > end) FAIL("%s never appeared", go);
    usleep(50000);
  }
  int forged = 0;
  for (;;) {
    struct rdma_cm_id* id;
    if (rdma_get_request(l, &id)) FAIL("get_request: %s", strerror(errno));
    const struct rdma_conn_param* cp = &id->event->param.conn;
    if (!cp->private_data || memcmp(cp->private_data, "legit", 5) != 0) {
      forged++;
      rdma_reject(id, NULL, 0);
      rdma_destroy_id(id);
      continue;
    }
    printf("requests taken before the legitimate one: %d\n", forged);
    struct conn c;
    make_qp(id, &c);
    if (rdma_accept(id, NULL)) FAIL("accept: %s", strerror(errno));
    exchange(id, &c, "legit data", 0);
    printf("OK\n");
    fflush(stdout);
    _exit(0);  /* the flood's leftovers are not this test's business */
  }
}

static int run_legit(const char* ip, int port) {
  struct rdma_event_channel* ch = rdma_create_event_channel();
  struct rdma_cm_id* id;
  struct conn c;
  if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) FAIL("create id");
  struct sockaddr_in d = addr_of(ip, port);
  if (rdma_resolve_addr(id, NULL, (struct sockaddr*)&d, 2000)) FAIL("resolve_addr");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5));
  if (rdma_resolve_route(id, 2000)) FAIL("resolve_route");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5));
  make_qp(id, &c);
  struct rdma_conn_param p;
  memset(&p, 0, sizeof p);
  p.responder_resources = p.initiator_depth = 1;
  p.retry_count = p.rnr_retry_count = 7;
  p.private_data = "legit";
  p.private_data_len = 6;
  if (rdma_connect(id, &p)) FAIL("connect: %s", strerror(errno));
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED, 20));
  exchange(id, &c, "legit data", 1);
  printf("OK\n");
  fflush(stdout);
  /* exit(), not _exit(): it is how a client ends, and the library's exit
   * handler sends the ACK of the echo it may still defer (ack_delay.cc);
   * without it the listener's echo retried into RETRY_EXC_ERR. */
  exit(0);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 4 && !strcmp(argv[1], "server")) return run_server(atoi(argv[2]), argv[3]);
  if (argc == 5 && !strcmp(argv[1], "client")) return run_client(argv[2], atoi(argv[3]), argv[4], 0);
  if (argc == 5 && !strcmp(argv[1], "pending")) return run_client(argv[2], atoi(argv[3]), argv[4], 1);
  if (argc == 5 && !strcmp(argv[1], "udpending")) return run_ud_pending(argv[2], atoi(argv[3]), argv[4]);
  if (argc == 5 && !strcmp(argv[1], "listen")) return run_listen(atoi(argv[2]), argv[3], atoi(argv[4]));
  if (argc == 4 && !strcmp(argv[1], "legit")) return run_legit(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: see the comment at the top of cm_victim.c\n");
  return 2;
}
