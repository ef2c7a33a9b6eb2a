/* An rsockets server against a hostile peer (security review H4 and L6).
 *
 *   it_rsocket_hostile_peer MODE
 *
 * A forked child is the victim: an rsocket server (rsocket/rbind/rlisten/
 * raccept from <rdma/rsocket.h>) that riomaps a 4 MiB buffer and then reads
 * the stream with rrecv(buf, 4 MiB) until end of stream or an error. The
 * parent is the attacker: a plain rdma_cm + verbs client that speaks just
 * enough of softrnic's rsockets protocol (src/rdmacm/rsocket_wire.h): it
 * connects, takes the victim's riomap announcement (a SEND with immediate 1
 * carrying offset, address, length, rkey), sends "hello" as ordinary stream
 * data, then, by MODE:
 *   write1m   RDMA WRITE with immediate 2 of 1 MiB into the announced mapping
 *             (its completion's byte_len is 1 MiB, the slot is 64 KiB);
 *   write4m   the same with 4 MiB: past the end of the victim's 3 MiB slot
 *             buffer (ASan: heap-buffer-overflow before the fix);
 *   zerolen   a zero-length WRITE with immediate (needs no rkey): a fake EOF;
 *   shortmap  a "riomap announcement" (SEND, immediate 1) of 4 bytes;
 *   mapflood  1000 distinct announcements; the victim then riowrites at the
 *             offset of the last one (accepted before the fix: the victim
 *             kept every mapping);
 * then a legitimate end of stream (zero-length SEND). The victim must see
 * exactly "hello" and then ECONNRESET (the connection reset for a protocol
 * violation), never the slot's neighbours, never a fake EOF.
 *   unmap     no attack: the victim riounmaps its mapping right away, and
 *             the peer must receive the withdrawal (a SEND with immediate 2
 *             naming the same offset, review L6); the victim then sees
 *             "hello" and the end of stream.
 *
 * Built against the system rdma-core headers and libraries, run with
 * LD_LIBRARY_PATH at softrnic's (as rdmacm_cm_events is).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rsocket_listen.h"

#define MAP_BYTES (4u << 20)
#define FLOOD_MAPS 1000

struct iomap_wire { /* rsocket_wire.h RsIomapWire */
  uint64_t offset, addr, len;
  uint32_t rkey, pad;
};

/* What the victim saw, sent to the parent through a pipe. */
struct verdict {
  long total;          /* stream bytes rrecv returned */
  char head[8];        /* the first of them */
  int end_rc;          /* the rrecv that ended the loop: 0 (EOF) or -1 */
  int end_errno;
  long riowrite_rc;    /* mapflood only */
  int riowrite_errno;
};

static int fail(const char* what) {
  fprintf(stderr, "attacker: %s: %s\n", what, strerror(errno));
  return 2;
}

/* ---- the victim (child) ---- */

static void victim(const char* mode, int port_pipe, int verdict_pipe) {
  struct verdict v;
  memset(&v, 0, sizeof v);
  uint16_t port;
  int l = listen_loopback("victim", &port);
  if (l < 0) _exit(3);
  if (write(port_pipe, &port, sizeof port) != sizeof port) _exit(3);
  int s = raccept(l, NULL, NULL);
  if (s < 0) {
    perror("victim: raccept");
    _exit(3);
  }
  char* map = calloc(1, MAP_BYTES);
  if (riomap(s, map, MAP_BYTES, PROT_WRITE, 0, 0) != 0) {
    perror("victim: riomap");
    _exit(3);
  }
  if (strcmp(mode, "unmap") == 0 && riounmap(s, map, MAP_BYTES) != 0) {
    perror("victim: riounmap");
    _exit(3);
  }
  size_t cap = 4u << 20;
  char* buf = malloc(cap);
  for (;;) {
    struct pollfd p = {.fd = s, .events = POLLIN};
    if (rpoll(&p, 1, 10000) != 1) {
      v.end_rc = -2; /* nothing within 10 s */
      break;
    }
    ssize_t n = rrecv(s, buf, cap, 0);
    if (n <= 0) {
      v.end_rc = (int)n;
      v.end_errno = n < 0 ? errno : 0;
      break;
    }
    if (v.total < (long)sizeof v.head)
      memcpy(v.head + v.total, buf,
             (size_t)n < sizeof v.head - v.total ? (size_t)n : sizeof v.head - v.total);
    v.total += n;
    if (strcmp(mode, "mapflood") == 0 && v.total >= 5) {
      /* Every announcement was sent before this point (the attacker waited
         for their completions), so they are all in the receive queue. */
      char msg[16] = "victim";
      size_t w = riowrite(s, msg, sizeof msg, (off_t)(FLOOD_MAPS - 1) * 4096, 0);
      v.riowrite_rc = (long)w;
      v.riowrite_errno = w == (size_t)-1 ? errno : 0;
    }
  }
  if (write(verdict_pipe, &v, sizeof v) != sizeof v) _exit(3);
  rclose(s);
  rclose(l);
  _exit(0);
}

/* ---- the attacker (parent) ---- */

static struct rdma_event_channel* ch;

static int expect(enum rdma_cm_event_type t) {
  struct pollfd p = {.fd = ch->fd, .events = POLLIN};
  struct rdma_cm_event* e;
  if (poll(&p, 1, 10000) != 1 || rdma_get_cm_event(ch, &e) != 0) return -1;
  int ok = e->event == t;
  if (!ok) fprintf(stderr, "attacker: got %s, wanted %s\n", rdma_event_str(e->event), rdma_event_str(t));
  rdma_ack_cm_event(e);
  return ok ? 0 : -1;
}

static int wait_wc(struct ibv_cq* cq, struct ibv_wc* wc) {
  for (int i = 0; i < 10000; ++i) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n < 0) return -1;
    if (n == 1) return 0;
    usleep(1000);
  }
  errno = ETIMEDOUT;
  return -1;
}

static int post(struct rdma_cm_id* id, enum ibv_wr_opcode op, void* addr, uint32_t len,
                uint32_t lkey, uint32_t imm, uint64_t raddr, uint32_t rkey) {
  struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = op,
                           .send_flags = IBV_SEND_SIGNALED};
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  struct ibv_send_wr* bad;
  if (ibv_post_send(id->qp, &wr, &bad) != 0) return -1;
  struct ibv_wc wc;
  if (wait_wc(id->send_cq, &wc) != 0) return -1;
  if (wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "attacker: send completion %s\n", ibv_wc_status_str(wc.status));
    return 1; /* the victim may already have reset the connection */
  }
  return 0;
}

static int attack(const char* mode, uint16_t port) {
  struct rdma_cm_id* id;
  ch = rdma_create_event_channel();
  if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) != 0) return fail("create id");
  struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(port)};
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (rdma_resolve_addr(id, NULL, (struct sockaddr*)&dst, 2000) != 0 ||
      expect(RDMA_CM_EVENT_ADDR_RESOLVED) != 0 || rdma_resolve_route(id, 2000) != 0 ||
      expect(RDMA_CM_EVENT_ROUTE_RESOLVED) != 0)
    return fail("resolve");
  struct ibv_qp_init_attr qa = {.qp_type = IBV_QPT_RC, .sq_sig_all = 1};
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, NULL, &qa) != 0) return fail("create qp");
  size_t size = MAP_BYTES + 4096;
  char* buf = calloc(1, size);
  struct ibv_mr* mr = ibv_reg_mr(id->pd, buf, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr) return fail("reg mr");
  char* rx = buf + MAP_BYTES; /* two 2 KiB receives: announcement, withdrawal */
  for (int i = 0; i < 2; ++i) {
    struct ibv_sge rsge = {.addr = (uintptr_t)rx + 2048 * i, .length = 2048, .lkey = mr->lkey};
    struct ibv_recv_wr rwr = {.sg_list = &rsge, .num_sge = 1}, *rbad;
    if (ibv_post_recv(id->qp, &rwr, &rbad) != 0) return fail("post recv");
  }
  struct rdma_conn_param cp = {.responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
                               .rnr_retry_count = 7};
  if (rdma_connect(id, &cp) != 0 || expect(RDMA_CM_EVENT_ESTABLISHED) != 0) return fail("connect");

  struct ibv_wc wc;
  if (wait_wc(id->recv_cq, &wc) != 0 || wc.status != IBV_WC_SUCCESS ||
      !(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != 1)
    return fail("no riomap announcement from the victim");
  struct iomap_wire w;
  memcpy(&w, rx, sizeof w);
  fprintf(stderr, "attacker: victim mapped offset %llu addr 0x%llx len %llu rkey 0x%x\n",
          (unsigned long long)w.offset, (unsigned long long)w.addr, (unsigned long long)w.len,
          w.rkey);

  if (strcmp(mode, "unmap") == 0) {
    struct iomap_wire u;
    if (wait_wc(id->recv_cq, &wc) != 0 || wc.status != IBV_WC_SUCCESS ||
        !(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != 2 || wc.byte_len != sizeof u)
      return fail("no riounmap withdrawal from the victim");
    memcpy(&u, rx + 2048, sizeof u);
    if (u.offset != w.offset) return fail("the withdrawal names another offset");
    fprintf(stderr, "attacker: victim withdrew offset %llu\n", (unsigned long long)u.offset);
  }
  memcpy(buf, "hello", 5);
  if (post(id, IBV_WR_SEND, buf, 5, mr->lkey, 0, 0, 0) != 0) return fail("send hello");
  int r = 0;
  if (strcmp(mode, "unmap") == 0) {
    /* nothing hostile */
  } else
  if (strcmp(mode, "write1m") == 0 || strcmp(mode, "write4m") == 0) {
    uint32_t n = mode[5] == '1' ? 1u << 20 : 4u << 20;
    memset(buf, 'A', n);
    r = post(id, IBV_WR_RDMA_WRITE_WITH_IMM, buf, n, mr->lkey, 2, w.addr, w.rkey);
  } else if (strcmp(mode, "zerolen") == 0) {
    r = post(id, IBV_WR_RDMA_WRITE_WITH_IMM, buf, 0, mr->lkey, 2, 0, 0);
  } else if (strcmp(mode, "shortmap") == 0) {
    r = post(id, IBV_WR_SEND_WITH_IMM, buf, 4, mr->lkey, 1, 0, 0);
  } else if (strcmp(mode, "mapflood") == 0) {
    for (int i = 0; i < FLOOD_MAPS && r == 0; ++i) {
      struct iomap_wire m = {.offset = (uint64_t)i * 4096, .addr = (uintptr_t)buf,
                             .len = 4096, .rkey = mr->rkey};
      memcpy(buf + MAP_BYTES - 4096, &m, sizeof m);
      r = post(id, IBV_WR_SEND_WITH_IMM, buf + MAP_BYTES - 4096, sizeof m, mr->lkey, 1, 0, 0);
    }
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  if (r < 0) return fail(mode);
  /* The legitimate end of the stream, if the connection still stands. */
  post(id, IBV_WR_SEND, buf, 0, mr->lkey, 0, 0, 0);
  /* Keep the connection up until the victim has reported. */
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s write1m|write4m|zerolen|shortmap|mapflood|unmap\n", argv[0]);
    return 2;
  }
  const char* mode = argv[1];
  int port_pipe[2], verdict_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(verdict_pipe) != 0) return 2;
  pid_t pid = fork();
  if (pid == 0) {
    close(port_pipe[0]);
    close(verdict_pipe[0]);
    victim(mode, port_pipe[1], verdict_pipe[1]);
  }
  close(port_pipe[1]);
  close(verdict_pipe[1]);
  uint16_t port;
  if (read(port_pipe[0], &port, sizeof port) != sizeof port) {
    fprintf(stderr, "victim did not start\n");
    return 2;
  }
  int ar = attack(mode, port);
  struct verdict v;
  ssize_t got = read(verdict_pipe[0], &v, sizeof v);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != sizeof v) {
    fprintf(stderr, "FAIL %s: the victim died before reporting (status 0x%x%s)\n", mode, status,
            WIFSIGNALED(status) ? ", killed by a signal" : ", see its sanitizer report above");
    return 1;
  }
  fprintf(stderr,
          "%s: victim received %ld stream bytes (head \"%.5s\"), then rrecv %d (%s); riowrite %ld (%s)\n",
          mode, v.total, v.head, v.end_rc, v.end_errno ? strerror(v.end_errno) : "-", v.riowrite_rc,
          v.riowrite_errno ? strerror(v.riowrite_errno) : "-");
  int bad = 0;
  if (ar != 0) {
    fprintf(stderr, "FAIL %s: the attack could not be set up\n", mode);
    bad = 1;
  }
  if (v.total != 5 || memcmp(v.head, "hello", 5) != 0) {
    fprintf(stderr, "FAIL %s: the victim received %ld bytes, expected exactly \"hello\"\n", mode,
            v.total);
    bad = 1;
  }
  if (strcmp(mode, "unmap") == 0) {
    if (v.end_rc != 0) {
      fprintf(stderr, "FAIL unmap: the stream ended with rrecv %d (%s), expected its end (0)\n",
              v.end_rc, strerror(v.end_errno));
      bad = 1;
    }
  } else if (v.end_rc != -1 || v.end_errno != ECONNRESET) {
    fprintf(stderr, "FAIL %s: the stream ended with rrecv %d (%s), expected ECONNRESET\n", mode,
            v.end_rc, v.end_errno ? strerror(v.end_errno) : "end of stream");
    bad = 1;
  }
  if (strcmp(mode, "mapflood") == 0 && v.riowrite_rc != -1) {
    fprintf(stderr, "FAIL mapflood: riowrite into the 1000th announced mapping returned %ld\n",
            v.riowrite_rc);
    bad = 1;
  }
  if (!bad) printf("PASS %s\n", mode);
  return bad;
}
