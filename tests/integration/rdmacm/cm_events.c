/* rdma_cm event sequences, private data and resource hygiene on softrnic.
 *
 * Built against the system <rdma/rdma_cma.h> and linked with the system
 * -lrdmacm -libverbs (rdma-core's symbol versions), run with LD_LIBRARY_PATH
 * pointing at softrnic's libraries. Server and client live in this one
 * process (the CM MADs still go through QP1 and the transport, to the
 * process's own loopback GID). Checks:
 *   - ADDR_RESOLVED, ROUTE_RESOLVED, CONNECT_REQUEST (listen_id, private
 *     data, responder resources / initiator depth swapped), ESTABLISHED on
 *     both sides with the REP private data, DISCONNECTED on both sides;
 *   - rdma_reject with private data -> REJECTED (status 28) + that data;
 *   - a SEND over the connected QPs (default PD, library-made CQs);
 *   - connect to a port nobody listens on -> REJECTED (status 8), promptly;
 *   - event channel fd: pollable, O_NONBLOCK -> EAGAIN;
 *   - rdma_init_qp_attr for INIT/RTR/RTS;
 *   - both connected QPs at the port's active MTU (test_path_mtu.sh runs
 *     this program where that is 4096 and 2048);
 *   - synchronous ids (rdma_create_ep / rdma_get_request / rdma_connect);
 *   - no fd or thread leak after destroying everything, over several rounds;
 *   - a forked child that exits while connected: DISCONNECTED in the parent;
 *   - rdma_destroy_id purges the id's unread events (M6);
 *   - a blocking rdma_get_cm_event: EINTR without SA_RESTART, waits on with it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
#define CHECK(c, ...)                                          \
  do {                                                         \
    if (!(c)) {                                                \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c); \
      fprintf(stderr, __VA_ARGS__);                            \
      fprintf(stderr, "\n");                                   \
      failures++;                                              \
      return -1;                                               \
    }                                                          \
  } while (0)

static int count_dir(const char* path) {
  DIR* d = opendir(path);
  int n = 0;
  struct dirent* e;
  if (!d) return -1;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* The smallest of several counts 20 ms apart: the device's stats thread
 * opens a file for a moment every 100 ms (capture requests, stats), and one
 * count can catch it; a leaked fd or thread is in every count. */
static int count_dir_settled(const char* path) {
  int best = count_dir(path);
  for (int i = 0; i < 8; i++) {
    usleep(20000);
    int n = count_dir(path);
    if (n < best) best = n;
  }
  return best;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

/* Waits (poll on the channel fd, 10 s) for the next event; checks its type. */
static int expect(struct rdma_event_channel* ch, enum rdma_cm_event_type type,
                  struct rdma_cm_event** out) {
  struct pollfd p = {.fd = ch->fd, .events = POLLIN};
  int r = poll(&p, 1, 10000);
  CHECK(r == 1, "no event within 10 s (waiting for %s)", rdma_event_str(type));
  struct rdma_cm_event* e;
  CHECK(rdma_get_cm_event(ch, &e) == 0, "rdma_get_cm_event: %s", strerror(errno));
  if (e->event != type) {
    fprintf(stderr, "FAIL: got %s (status %d), expected %s\n", rdma_event_str(e->event), e->status,
            rdma_event_str(type));
    rdma_ack_cm_event(e);
    failures++;
    return -1;
  }
  if (out)
    *out = e;
  else
    rdma_ack_cm_event(e);
  return 0;
}

static struct sockaddr_in addr_of(const char* ip, int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

static int port_base;

/* Client side up to ROUTE_RESOLVED. */
static int client_resolve(struct rdma_event_channel* ch, struct rdma_cm_id** id, int port) {
  struct sockaddr_in dst = addr_of("127.0.0.1", port);
  CHECK(rdma_create_id(ch, id, NULL, RDMA_PS_TCP) == 0, "create_id");
  CHECK(rdma_resolve_addr(*id, NULL, (struct sockaddr*)&dst, 2000) == 0, "resolve_addr");
  if (expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL)) return -1;
  CHECK((*id)->verbs != NULL, "no verbs context after ADDR_RESOLVED");
  /* As librdmacm: an id with a device has the device's PD (pyverbs reads it
   * before it creates a QP). */
  CHECK((*id)->pd != NULL && (*id)->pd->context == (*id)->verbs, "no PD after ADDR_RESOLVED");
  CHECK(rdma_resolve_route(*id, 2000) == 0, "resolve_route");
  if (expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL)) return -1;
  CHECK((*id)->route.num_paths == 1, "num_paths %d", (*id)->route.num_paths);
  return 0;
}

static int make_qp(struct rdma_cm_id* id) {
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  /* NULL pd: librdmacm supplies the default PD; NULL CQs: it makes them. */
  CHECK(rdma_create_qp(id, NULL, &a) == 0, "rdma_create_qp: %s", strerror(errno));
  CHECK(id->qp && id->pd && id->send_cq && id->recv_cq && id->send_cq_channel, "QP resources missing");
  return 0;
}

static int round_trip(int round) {
  int port = port_base + round;
  struct rdma_event_channel* sch = rdma_create_event_channel();
  struct rdma_event_channel* cch = rdma_create_event_channel();
  CHECK(sch && cch, "create_event_channel");
  struct rdma_cm_id *listen_id, *cid, *child;
  struct rdma_cm_event* e;
  struct sockaddr_in any = addr_of("0.0.0.0", port);

  /* Non-blocking channel: no event -> EAGAIN. */
  int fl = fcntl(cch->fd, F_GETFL);
  CHECK(fcntl(cch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "fcntl");
  CHECK(rdma_get_cm_event(cch, &e) == -1 && errno == EAGAIN, "nonblocking get: errno %d", errno);
  CHECK(fcntl(cch->fd, F_SETFL, fl) == 0, "fcntl");

  CHECK(rdma_create_id(sch, &listen_id, (void*)0x5eed, RDMA_PS_TCP) == 0, "create listen id");
  CHECK(rdma_bind_addr(listen_id, (struct sockaddr*)&any) == 0, "bind: %s", strerror(errno));
  CHECK(ntohs(rdma_get_src_port(listen_id)) == port, "src port");
  CHECK(rdma_listen(listen_id, 4) == 0, "listen: %s", strerror(errno));

  /* 1. reject with private data. */
  if (client_resolve(cch, &cid, port)) return -1;
  if (make_qp(cid)) return -1;
  struct rdma_conn_param cp;
  memset(&cp, 0, sizeof cp);
  cp.private_data = "hello-req";
  cp.private_data_len = 10;
  cp.responder_resources = 3;
  cp.initiator_depth = 2;
  cp.retry_count = 7;
  cp.rnr_retry_count = 7;
  CHECK(rdma_connect(cid, &cp) == 0, "connect");
  if (expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, &e)) return -1;
  CHECK(e->listen_id == listen_id, "listen_id");
  CHECK(e->id != listen_id && e->id->context == (void*)0x5eed, "child id / context");
  CHECK(e->param.conn.private_data_len >= 10 &&
            memcmp(e->param.conn.private_data, "hello-req", 10) == 0,
        "REQ private data");
  CHECK(e->param.conn.responder_resources == 2 && e->param.conn.initiator_depth == 3,
        "resp res %d init depth %d (must be the peer's, swapped)", e->param.conn.responder_resources,
        e->param.conn.initiator_depth);
  child = e->id;
  rdma_ack_cm_event(e);
  CHECK(rdma_reject(child, "no-thanks", 10) == 0, "reject");
  if (expect(cch, RDMA_CM_EVENT_REJECTED, &e)) return -1;
  CHECK(e->status == 28, "REJECTED status %d (want 28, consumer reject)", e->status);
  CHECK(e->param.conn.private_data_len >= 10 &&
            memcmp(e->param.conn.private_data, "no-thanks", 10) == 0,
        "REJ private data");
  rdma_ack_cm_event(e);
  rdma_destroy_id(child);
  rdma_destroy_qp(cid);
  rdma_destroy_id(cid);

  /* 2. accept, exchange a SEND, disconnect. */
  if (client_resolve(cch, &cid, port)) return -1;
  if (make_qp(cid)) return -1;
  CHECK(rdma_connect(cid, &cp) == 0, "connect");
  if (expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, &e)) return -1;
  child = e->id;
  rdma_ack_cm_event(e);
  if (make_qp(child)) return -1;
  char rbuf[64] = {0}, sbuf[64] = "payload over the connection";
  struct ibv_mr* rmr = ibv_reg_mr(child->pd, rbuf, sizeof rbuf, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr* smr = ibv_reg_mr(cid->pd, sbuf, sizeof sbuf, IBV_ACCESS_LOCAL_WRITE);
  CHECK(rmr && smr, "reg_mr");
  struct ibv_sge rs = {(uintptr_t)rbuf, sizeof rbuf, rmr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1}, *rbad;
  CHECK(ibv_post_recv(child->qp, &rwr, &rbad) == 0, "post_recv");
  /* rdma_init_qp_attr knows the peer now. */
  struct ibv_qp_attr qa;
  int mask = 0;
  memset(&qa, 0, sizeof qa);
  qa.qp_state = IBV_QPS_RTR;
  CHECK(rdma_init_qp_attr(child, &qa, &mask) == 0, "init_qp_attr RTR");
  CHECK(qa.dest_qp_num == cid->qp->qp_num && (mask & IBV_QP_DEST_QPN), "RTR dest_qp_num %u vs %u",
        qa.dest_qp_num, cid->qp->qp_num);
  struct rdma_conn_param ap;
  memset(&ap, 0, sizeof ap);
  ap.private_data = "welcome";
  ap.private_data_len = 8;
  ap.responder_resources = 2;
  ap.initiator_depth = 3;
  ap.rnr_retry_count = 7;
  CHECK(rdma_accept(child, &ap) == 0, "accept: %s", strerror(errno));
  if (expect(cch, RDMA_CM_EVENT_ESTABLISHED, &e)) return -1;
  CHECK(e->param.conn.private_data_len >= 8 && memcmp(e->param.conn.private_data, "welcome", 8) == 0,
        "REP private data");
  rdma_ack_cm_event(e);
  if (expect(sch, RDMA_CM_EVENT_ESTABLISHED, NULL)) return -1;
  /* Both QPs run at the port's active MTU, as the kernel's rdma_cm takes
   * its netdev's (the REQ carries it; the passive side adopts it). */
  struct ibv_port_attr pa;
  CHECK(ibv_query_port(cid->verbs, 1, &pa) == 0, "query_port");
  struct ibv_qp_init_attr qia;
  memset(&qa, 0, sizeof qa);
  CHECK(ibv_query_qp(cid->qp, &qa, IBV_QP_PATH_MTU, &qia) == 0 && qa.path_mtu == pa.active_mtu,
        "active side path_mtu %d, port active_mtu %d", qa.path_mtu, pa.active_mtu);
  memset(&qa, 0, sizeof qa);
  CHECK(ibv_query_qp(child->qp, &qa, IBV_QP_PATH_MTU, &qia) == 0 && qa.path_mtu == pa.active_mtu,
        "passive side path_mtu %d, port active_mtu %d", qa.path_mtu, pa.active_mtu);
  if (round == 0) printf("path MTU %d (port active_mtu %d)\n", 128 << qa.path_mtu, 128 << pa.active_mtu);
  struct ibv_sge ss = {(uintptr_t)sbuf, sizeof sbuf, smr->lkey};
  struct ibv_send_wr swr = {.wr_id = 2, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
                            .send_flags = IBV_SEND_SIGNALED},
                     *sbad;
  CHECK(ibv_post_send(cid->qp, &swr, &sbad) == 0, "post_send");
  struct ibv_wc wc;
  double t0 = now_s();
  int got = 0;
  while (now_s() - t0 < 10 && got < 1) got += ibv_poll_cq(child->recv_cq, 1, &wc);
  CHECK(got == 1 && wc.status == IBV_WC_SUCCESS, "recv completion (got %d status %d)", got, wc.status);
  CHECK(strcmp(rbuf, sbuf) == 0, "payload mismatch");
  got = 0;
  while (now_s() - t0 < 10 && got < 1) got += ibv_poll_cq(cid->send_cq, 1, &wc);
  CHECK(got == 1 && wc.status == IBV_WC_SUCCESS, "send completion");
  CHECK(rdma_disconnect(cid) == 0, "disconnect");
  if (expect(sch, RDMA_CM_EVENT_DISCONNECTED, NULL)) return -1;
  if (expect(cch, RDMA_CM_EVENT_DISCONNECTED, NULL)) return -1;
  CHECK(rdma_disconnect(child) == 0, "second disconnect on the passive side");
  ibv_dereg_mr(rmr);
  ibv_dereg_mr(smr);
  rdma_destroy_qp(child);
  rdma_destroy_id(child);
  rdma_destroy_qp(cid);
  rdma_destroy_id(cid);

  /* 3. a port nobody listens on: REJECTED (invalid service ID), promptly. */
  if (client_resolve(cch, &cid, port + 1000)) return -1;
  double t1 = now_s();
  CHECK(rdma_connect(cid, &cp) == 0, "connect");
  if (expect(cch, RDMA_CM_EVENT_REJECTED, &e)) return -1;
  CHECK(e->status == 8, "status %d (want 8)", e->status);
  CHECK(now_s() - t1 < 5, "REJECTED took %.1f s", now_s() - t1);
  rdma_ack_cm_event(e);
  rdma_destroy_id(cid);

  rdma_destroy_id(listen_id);
  rdma_destroy_event_channel(sch);
  rdma_destroy_event_channel(cch);
  return 0;
}

/* Synchronous ids: rdma_create_ep + rdma_get_request + rdma_connect/accept. */
struct sync_srv {
  struct rdma_cm_id* listen;
  int ok;
};
static void* sync_server(void* arg) {
  struct sync_srv* s = arg;
  struct rdma_cm_id* id;
  if (rdma_get_request(s->listen, &id)) return NULL;
  if (!id->qp || !id->event || id->event->event != RDMA_CM_EVENT_CONNECT_REQUEST) return NULL;
  if (rdma_accept(id, NULL)) return NULL;
  struct rdma_cm_event* e;
  if (rdma_get_cm_event(id->channel, &e)) return NULL;
  s->ok = e->event == RDMA_CM_EVENT_DISCONNECTED;
  rdma_ack_cm_event(e);
  rdma_destroy_ep(id);
  return NULL;
}

static int sync_round(void) {
  char port[16];
  snprintf(port, sizeof port, "%d", port_base + 50);
  struct rdma_addrinfo hints, *res;
  memset(&hints, 0, sizeof hints);
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  CHECK(rdma_getaddrinfo("127.0.0.1", port, &hints, &res) == 0, "getaddrinfo passive");
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.cap.max_send_wr = a.cap.max_recv_wr = 1;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  struct sync_srv s = {0};
  CHECK(rdma_create_ep(&s.listen, res, NULL, &a) == 0, "create_ep passive: %s", strerror(errno));
  rdma_freeaddrinfo(res);
  CHECK(rdma_listen(s.listen, 1) == 0, "listen");
  pthread_t th;
  pthread_create(&th, NULL, sync_server, &s);
  hints.ai_flags = 0;
  CHECK(rdma_getaddrinfo("127.0.0.1", port, &hints, &res) == 0, "getaddrinfo active");
  struct rdma_cm_id* id;
  memset(&a, 0, sizeof a);
  a.cap.max_send_wr = a.cap.max_recv_wr = 1;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  CHECK(rdma_create_ep(&id, res, NULL, &a) == 0, "create_ep active: %s", strerror(errno));
  rdma_freeaddrinfo(res);
  CHECK(rdma_connect(id, NULL) == 0, "sync connect: %s", strerror(errno));
  CHECK(rdma_disconnect(id) == 0, "sync disconnect");
  pthread_join(th, NULL);
  CHECK(s.ok, "sync server did not see DISCONNECTED");
  rdma_destroy_ep(id);
  rdma_destroy_ep(s.listen);
  return 0;
}

/* A forked child (fresh CM and device of its own) connects and exits without
 * disconnecting: the library's exit hook sends a DREQ, so the parent's
 * connection sees DISCONNECTED, as with the kernel CM when a process dies. */
static int exit_round(void) {
  int port = port_base + 77;
  struct rdma_event_channel* ch = rdma_create_event_channel();
  struct rdma_cm_id *listen_id, *child;
  struct rdma_cm_event* e;
  struct sockaddr_in any = addr_of("0.0.0.0", port);
  CHECK(ch && rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP) == 0, "create");
  CHECK(rdma_bind_addr(listen_id, (struct sockaddr*)&any) == 0 && rdma_listen(listen_id, 1) == 0,
        "listen");
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    struct rdma_event_channel* cch = rdma_create_event_channel();
    struct rdma_cm_id* cid;
    if (!cch || client_resolve(cch, &cid, port) || make_qp(cid)) _exit(2);
    if (rdma_connect(cid, NULL) || expect(cch, RDMA_CM_EVENT_ESTABLISHED, NULL)) _exit(3);
    exit(0); /* no disconnect, no destroy */
  }
  if (expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, &e)) return -1;
  child = e->id;
  rdma_ack_cm_event(e);
  if (make_qp(child)) return -1;
  CHECK(rdma_accept(child, NULL) == 0, "accept");
  if (expect(ch, RDMA_CM_EVENT_ESTABLISHED, NULL)) return -1;
  if (expect(ch, RDMA_CM_EVENT_DISCONNECTED, NULL)) return -1;
  int st;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
  rdma_destroy_qp(child);
  rdma_destroy_id(child);
  rdma_destroy_id(listen_id);
  rdma_destroy_event_channel(ch);
  return 0;
}

/* rdma_getaddrinfo(3) with neither node nor service: the hints carry the
 * addresses (libfabric's verbs provider resolves its endpoints this way). */
static int getaddrinfo_from_hints(void) {
  struct sockaddr_in src = addr_of("127.0.0.1", port_base + 60);
  struct sockaddr_in dst = addr_of("127.0.0.2", port_base + 61);
  struct rdma_addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_port_space = RDMA_PS_TCP;
  hints.ai_src_addr = (struct sockaddr*)&src;
  hints.ai_src_len = sizeof src;
  hints.ai_dst_addr = (struct sockaddr*)&dst;
  hints.ai_dst_len = sizeof dst;
  CHECK(rdma_getaddrinfo(NULL, NULL, &hints, &res) == 0, "getaddrinfo from hints: %s", strerror(errno));
  CHECK(res->ai_dst_len == sizeof dst && memcmp(res->ai_dst_addr, &dst, sizeof dst) == 0,
        "destination from the hints");
  CHECK(res->ai_src_len == sizeof src && memcmp(res->ai_src_addr, &src, sizeof src) == 0,
        "source from the hints");
  CHECK(res->ai_qp_type == IBV_QPT_RC, "qp type %d", res->ai_qp_type);
  rdma_freeaddrinfo(res);
  CHECK(rdma_getaddrinfo(NULL, NULL, NULL, &res) == -1 && errno == EINVAL, "no node, service or hints: errno %d", errno);
  return 0;
}

/* rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT / _TOS) take one byte; the
 * timeout reaches the RTS attributes rdma_init_qp_attr gives (it was
 * accepted and ignored before). The TOS goes into the RTR address vector,
 * which needs a connection (rdma_init_qp_attr RTR), so only its argument
 * checks are tested here. */
static int set_option_reaches_qp_attr(void) {
  struct rdma_event_channel* ch = rdma_create_event_channel();
  CHECK(ch, "create_event_channel");
  struct rdma_cm_id* id;
  if (client_resolve(ch, &id, port_base + 70)) return -1;
  uint8_t timeout = 19, tos = 0x48, too_big = 32;
  uint32_t wide = 19;
  CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &wide, sizeof wide) == -1 &&
            errno == EINVAL, "4-byte ACK_TIMEOUT: errno %d", errno);
  CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &too_big, 1) == -1 &&
            errno == EINVAL, "ACK_TIMEOUT 32: errno %d", errno);
  CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, 1) == 0,
        "ACK_TIMEOUT: %s", strerror(errno));
  CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1) == 0, "TOS: %s", strerror(errno));
  struct ibv_qp_attr qa;
  int mask = 0;
  memset(&qa, 0, sizeof qa);
  qa.qp_state = IBV_QPS_RTS;
  CHECK(rdma_init_qp_attr(id, &qa, &mask) == 0 && (mask & IBV_QP_TIMEOUT) && qa.timeout == timeout,
        "RTS timeout %u, want %u", qa.timeout, timeout);
  CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &wide, sizeof wide) == -1 &&
            errno == EINVAL, "4-byte TOS: errno %d", errno);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  return 0;
}

/* Security review M6: rdma_destroy_id takes the id's unread events with it,
 * as the kernel's ucma does. Two ids share a channel, each has an event
 * queued; destroying one leaves exactly the other's (the application never
 * gets an event naming freed memory, and the fd's readiness counts only
 * what is left). A listener destroyed with a CONNECT_REQUEST still queued
 * leaves nothing behind either. */
static int destroy_purges_events(void) {
  struct rdma_event_channel* ch = rdma_create_event_channel();
  CHECK(ch, "create_event_channel");
  CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0, "O_NONBLOCK");
  struct rdma_cm_id *gone, *kept;
  struct sockaddr_in dst = addr_of("127.0.0.1", port_base + 80);
  CHECK(rdma_create_id(ch, &gone, NULL, RDMA_PS_TCP) == 0 && rdma_create_id(ch, &kept, NULL, RDMA_PS_TCP) == 0,
        "create_id");
  CHECK(rdma_resolve_addr(gone, NULL, (struct sockaddr*)&dst, 2000) == 0, "resolve_addr");
  CHECK(rdma_resolve_addr(kept, NULL, (struct sockaddr*)&dst, 2000) == 0, "resolve_addr");
  struct pollfd p = {.fd = ch->fd, .events = POLLIN};
  CHECK(poll(&p, 1, 5000) == 1, "no ADDR_RESOLVED");
  usleep(100000);
  CHECK(rdma_destroy_id(gone) == 0, "destroy_id");
  struct rdma_cm_event* e;
  CHECK(rdma_get_cm_event(ch, &e) == 0, "the kept id's event is gone: %s", strerror(errno));
  CHECK(e->id == kept, "got %s for a destroyed id", rdma_event_str(e->event));
  rdma_ack_cm_event(e);
  CHECK(rdma_get_cm_event(ch, &e) == -1 && errno == EAGAIN, "an event for a destroyed id was still queued");
  CHECK(poll(&p, 1, 0) == 0, "channel fd readable with no event queued");
  rdma_destroy_id(kept);

  /* A listener with an unclaimed CONNECT_REQUEST. */
  struct rdma_event_channel* cch = rdma_create_event_channel();
  CHECK(cch, "create_event_channel");
  struct rdma_cm_id *listener, *client;
  struct sockaddr_in any = addr_of("0.0.0.0", port_base + 81);
  CHECK(rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) == 0, "create_id");
  CHECK(rdma_bind_addr(listener, (struct sockaddr*)&any) == 0 && rdma_listen(listener, 4) == 0, "listen");
  if (client_resolve(cch, &client, port_base + 81)) return -1;
  if (make_qp(client)) return -1;
  CHECK(rdma_connect(client, NULL) == 0, "connect");
  CHECK(poll(&p, 1, 5000) == 1, "no CONNECT_REQUEST");
  CHECK(rdma_destroy_id(listener) == 0, "destroy listener");
  CHECK(rdma_get_cm_event(ch, &e) == -1 && errno == EAGAIN, "the destroyed listener's %s is still queued",
        rdma_event_str(e->event));
  rdma_destroy_qp(client);
  rdma_destroy_id(client);
  rdma_destroy_event_channel(cch);
  rdma_destroy_event_channel(ch);
  return 0;
}

/* A blocking rdma_get_cm_event and signals, as librdmacm's read() of the
 * kernel fd: a handler without SA_RESTART ends the wait with EINTR (programs
 * end wait loops so); with SA_RESTART (glibc's signal()) it goes on waiting
 * and returns the next event. */
static void on_usr1(int sig) { (void)sig; }
struct waiter {
  struct rdma_event_channel* ch;
  int rc, err;
  struct rdma_cm_event* e;
};
static void* wait_event(void* arg) {
  struct waiter* w = arg;
  w->rc = rdma_get_cm_event(w->ch, &w->e);
  w->err = errno;
  return NULL;
}
static int blocking_wait_and_signals(void) {
  for (int restart = 0; restart <= 1; restart++) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGUSR1, &sa, &old);
    struct waiter w = {.ch = rdma_create_event_channel(), .rc = 99};
    CHECK(w.ch, "create_event_channel");
    pthread_t t;
    pthread_create(&t, NULL, wait_event, &w);
    usleep(200000);
    pthread_kill(t, SIGUSR1);
    usleep(200000);
    struct rdma_cm_id* id = NULL;
    if (restart) {
      /* Still waiting: an event now ends the wait. */
      CHECK(w.rc == 99, "SA_RESTART: the wait ended (rc %d errno %d)", w.rc, w.err);
      struct sockaddr_in dst = addr_of("127.0.0.1", port_base + 90);
      CHECK(rdma_create_id(w.ch, &id, NULL, RDMA_PS_TCP) == 0, "create_id");
      CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr*)&dst, 2000) == 0, "resolve_addr");
    }
    pthread_join(t, NULL);
    sigaction(SIGUSR1, &old, NULL);
    if (restart) {
      CHECK(w.rc == 0 && w.e->event == RDMA_CM_EVENT_ADDR_RESOLVED, "SA_RESTART: rc %d errno %d", w.rc, w.err);
      rdma_ack_cm_event(w.e);
      rdma_destroy_id(id);
    } else {
      CHECK(w.rc == -1 && w.err == EINTR, "no SA_RESTART: rc %d errno %d, want EINTR", w.rc, w.err);
    }
    rdma_destroy_event_channel(w.ch);
  }
  return 0;
}

int main(void) {
  port_base = 23000 + getpid() % 2000;
  /* Round 0 warms up the process-wide machinery (device, QP1, CM thread);
   * later rounds must not add a single fd or thread. */
  if (getaddrinfo_from_hints() || set_option_reaches_qp_attr() || destroy_purges_events() ||
      blocking_wait_and_signals() || round_trip(0) ||
      sync_round())
    return 1;
  int fds0 = count_dir_settled("/proc/self/fd"), th0 = count_dir_settled("/proc/self/task");
  for (int r = 1; r <= 3; r++)
    if (round_trip(r) || sync_round()) return 1;
  int fds1 = count_dir_settled("/proc/self/fd"), th1 = count_dir_settled("/proc/self/task");
  printf("fds %d -> %d, threads %d -> %d\n", fds0, fds1, th0, th1);
  if (fds1 != fds0 || th1 != th0) {
    fprintf(stderr, "FAIL: fd or thread leak\n");
    return 1;
  }
  if (exit_round()) return 1;
  if (failures) return 1;
  printf("PASS: rdma_cm events, private data, reject, disconnect, sync ids, no leaks, exit\n");
  return 0;
}
