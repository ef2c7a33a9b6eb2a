/* Verbs API conformance test for softrnic's libibverbs.so.1.
 *
 * Compiled against the system <infiniband/verbs.h> (rdma-core 44) like any
 * application, and run with LD_LIBRARY_PATH pointing at softrnic's libraries.
 * Part 1 checks the errors the man pages document for misuse; part 2 runs a
 * short loopback data path (two RC QPs in one process, a UD pair) through
 * the inline ops table, the extended CQ and the ibv_qp_ex wr_* API, so that
 * the error checks are known to be about misuse and not a dead device.
 *
 * Exit status: 0 when every check passes, 1 otherwise. Each failure prints
 * one "FAIL" line with the check and what was seen.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "verbs_test_util.h"

int main(void) {
  int num = -1;
  struct ibv_device **list = ibv_get_device_list(&num);
  REQUIRE(list && num == 1, "num=%d", num);
  CHECK(strcmp(ibv_get_device_name(list[0]), "softrnic0") == 0, "name=%s",
        ibv_get_device_name(list[0]));
  CHECK(list[1] == NULL, "list not NULL-terminated");
  CHECK(ibv_get_device_index(list[0]) == 0, "index");
  struct ibv_context *ctx = ibv_open_device(list[0]);
  REQUIRE(ctx, "open_device errno=%d", errno);
  CHECK(ibv_get_device_guid(list[0]) != 0, "guid is zero");
  /* Each opened context has its own async_fd, as each opened uverbs file has
   * (UCX watches every context's fd and refuses an fd number twice). */
  struct ibv_context *ctx2 = ibv_open_device(list[0]);
  REQUIRE(ctx2, "second open_device errno=%d", errno);
  CHECK(ctx2->async_fd >= 0 && ctx2->async_fd != ctx->async_fd, "async_fd %d shared with %d",
        ctx2->async_fd, ctx->async_fd);
  CHECK(ibv_close_device(ctx2) == 0, "close second context");

  /* ---- device / port / gid queries ---- */
  struct ibv_device_attr dattr;
  CHECK(ibv_query_device(ctx, &dattr) == 0, "query_device");
  CHECK(dattr.vendor_part_id == 0x5ef7, "vendor_part_id=0x%x", dattr.vendor_part_id);
  CHECK(dattr.phys_port_cnt == 1, "ports=%d", dattr.phys_port_cnt);
  struct ibv_device_attr_ex dex;
  CHECK(ibv_query_device_ex(ctx, NULL, &dex) == 0, "query_device_ex");
  CHECK(dex.orig_attr.max_qp == dattr.max_qp, "ex max_qp");
  struct ibv_query_device_ex_input in = {.comp_mask = 1};
  CHECK(ibv_query_device_ex(ctx, &in, &dex) == EINVAL, "query_device_ex comp_mask");

  struct ibv_port_attr pattr;
  CHECK(ibv_query_port(ctx, 1, &pattr) == 0, "query_port");
  CHECK(pattr.state == IBV_PORT_ACTIVE, "state=%d", pattr.state);
  CHECK(pattr.link_layer == IBV_LINK_LAYER_ETHERNET, "link_layer=%d", pattr.link_layer);
  CHECK(pattr.gid_tbl_len >= 1, "gid_tbl_len=%d", pattr.gid_tbl_len);
  CHECK(pattr.active_mtu >= IBV_MTU_256 && pattr.active_mtu <= pattr.max_mtu, "mtu");
  CHECK(ibv_query_port(ctx, 2, &pattr) == EINVAL, "query_port(2)");

  union ibv_gid gid0, gid;
  CHECK(ibv_query_gid(ctx, 1, 0, &gid0) == 0, "query_gid 0");
  CHECK(gid0.raw[10] == 0xff && gid0.raw[11] == 0xff, "GID 0 not IPv4-mapped");
  CHECK(ibv_query_gid(ctx, 1, pattr.gid_tbl_len, &gid) == -1, "query_gid past table");
  struct ibv_gid_entry ge;
  CHECK(ibv_query_gid_ex(ctx, 1, 0, &ge, 0) == 0, "query_gid_ex");
  CHECK(ge.gid_type == IBV_GID_TYPE_ROCE_V2, "gid_type=%u", ge.gid_type);
  CHECK(memcmp(ge.gid.raw, gid0.raw, 16) == 0, "gid_ex != gid");
  CHECK(ibv_query_gid_ex(ctx, 1, 0, &ge, 1) == EINVAL, "query_gid_ex flags");
  __be16 pkey = 0;
  CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0 && pkey == 0xffff, "pkey=0x%x", pkey);
  CHECK(ibv_query_pkey(ctx, 1, 1, &pkey) != 0, "pkey index 1");
  CHECK(ibv_get_pkey_index(ctx, 1, 0xffff) == 0, "pkey index of 0xffff");

  /* ---- strings and helpers ---- */
  CHECK(strcmp(ibv_wc_status_str(IBV_WC_SUCCESS), "success") == 0, "wc_status_str");
  CHECK(strcmp(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error") == 0, "flush");
  CHECK(strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "active") == 0, "port_state_str");
  CHECK(strcmp(ibv_event_type_str(IBV_EVENT_COMM_EST), "communication established") == 0, "event");
  CHECK(ibv_rate_to_mbps(IBV_RATE_100_GBPS) == 103125, "rate_to_mbps");
  CHECK(ibv_rate_to_mult(IBV_RATE_10_GBPS) == 4, "rate_to_mult");
  CHECK(mult_to_ibv_rate(4) == IBV_RATE_10_GBPS, "mult_to_rate");
  CHECK(ibv_fork_init() == 0, "fork_init");
  CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED, "fork status");

  /* ---- PD and MR ---- */
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  REQUIRE(pd, "alloc_pd errno=%d", errno);
  size_t len = 1 << 16;
  char *buf = aligned_alloc(4096, len);
  char *buf2 = aligned_alloc(4096, len);
  memset(buf, 0, len);
  memset(buf2, 0, len);
  errno = 0;
  CHECK(ibv_reg_mr(pd, buf, len, IBV_ACCESS_REMOTE_WRITE) == NULL && errno == EINVAL,
        "REMOTE_WRITE without LOCAL_WRITE: errno=%d", errno);
  errno = 0;
  CHECK(ibv_reg_mr(pd, buf, len, IBV_ACCESS_REMOTE_ATOMIC) == NULL && errno == EINVAL,
        "REMOTE_ATOMIC without LOCAL_WRITE: errno=%d", errno);
  errno = 0;
  CHECK(ibv_reg_mr(pd, buf, len, 1 << 15) == NULL && errno == EINVAL,
        "unknown access bit: errno=%d", errno);
  /* Optional bits (RELAXED_ORDERING) are hints: must be accepted. Passing a
   * variable sends the call through ibv_reg_mr_iova2, as perftest does. */
  volatile unsigned relaxed = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING;
  struct ibv_mr *mr_relaxed = ibv_reg_mr(pd, buf2, len, relaxed);
  CHECK(mr_relaxed != NULL, "RELAXED_ORDERING rejected errno=%d", errno);
  struct ibv_mr *mr_iova = ibv_reg_mr_iova(pd, buf2, 4096, 0x10000, IBV_ACCESS_LOCAL_WRITE);
  CHECK(mr_iova != NULL, "reg_mr_iova errno=%d", errno);
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
               IBV_ACCESS_REMOTE_ATOMIC;
  struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, access);
  REQUIRE(mr, "reg_mr errno=%d", errno);
  CHECK(mr->addr == buf && mr->length == len && mr->pd == pd, "mr fields");
  /* ibv_rereg_mr(3): an input error leaves the MR valid; a change keeps
   * the keys here. The access is put back for the traffic below. */
  const uint32_t lkey = mr->lkey, rkey = mr->rkey;
  errno = 0;
  CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE) ==
            IBV_REREG_MR_ERR_INPUT && errno == EINVAL,
        "rereg access without CHANGE_ACCESS: errno=%d", errno);
  CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE) == 0,
        "rereg access errno=%d", errno);
  CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS, NULL, buf,
                     len, access) == 0 && mr->lkey == lkey && mr->rkey == rkey && mr->addr == buf,
        "rereg back errno=%d", errno);
  errno = 0;
  CHECK(ibv_alloc_mw(pd, (enum ibv_mw_type)3) == NULL && errno == EINVAL, "alloc_mw type 3 errno=%d",
        errno);
  struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
  CHECK(mw && ibv_dealloc_mw(mw) == 0, "alloc_mw type 1 errno=%d", errno);
  struct ibv_xrcd_init_attr xattr = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
                                     .fd = -1, .oflags = 0};
  errno = 0;
  CHECK(ibv_open_xrcd(ctx, &xattr) == NULL && errno != 0, "open_xrcd must fail");

  /* ---- CQ ---- */
  errno = 0;
  CHECK(ibv_create_cq(ctx, 0, NULL, NULL, 0) == NULL && errno == EINVAL, "cqe 0: errno=%d", errno);
  errno = 0;
  CHECK(ibv_create_cq(ctx, dattr.max_cqe + 1, NULL, NULL, 0) == NULL && errno == EINVAL,
        "cqe > max_cqe: errno=%d", errno);
  errno = 0;
  CHECK(ibv_create_cq(ctx, 16, NULL, NULL, ctx->num_comp_vectors) == NULL && errno == EINVAL,
        "bad comp_vector: errno=%d", errno);
  struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
  REQUIRE(ch, "comp_channel errno=%d", errno);
  CHECK(ch->fd >= 0, "channel fd");
  struct ibv_cq *cq = ibv_create_cq(ctx, 256, (void *)0x1234, ch, 0);
  REQUIRE(cq, "create_cq errno=%d", errno);
  CHECK(cq->cqe >= 256, "cqe=%d", cq->cqe);
  CHECK(ibv_destroy_comp_channel(ch) == EBUSY, "destroy channel with CQ");
  CHECK(ibv_resize_cq(cq, 512) == 0 && cq->cqe >= 512, "resize_cq cqe=%d", cq->cqe);
  struct ibv_cq_init_attr_ex cqx_attr;
  memset(&cqx_attr, 0, sizeof(cqx_attr));
  cqx_attr.cqe = 64;
  cqx_attr.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
  errno = 0;
  CHECK(ibv_create_cq_ex(ctx, &cqx_attr) == NULL && errno == EOPNOTSUPP,
        "timestamps not offered: errno=%d", errno);
  cqx_attr.wc_flags = IBV_WC_STANDARD_FLAGS;
  struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &cqx_attr);
  REQUIRE(cqx, "create_cq_ex errno=%d", errno);
  struct ibv_cq *cq2 = ibv_cq_ex_to_cq(cqx);

  /* ---- QP creation ---- */
  struct ibv_qp_init_attr qia;
  memset(&qia, 0, sizeof(qia));
  qia.send_cq = cq;
  qia.recv_cq = cq;
  qia.qp_type = IBV_QPT_RC;
  qia.cap.max_send_wr = dattr.max_qp_wr + 1;
  qia.cap.max_recv_wr = 1;
  qia.cap.max_send_sge = 1;
  qia.cap.max_recv_sge = 1;
  errno = 0;
  CHECK(ibv_create_qp(pd, &qia) == NULL && errno == EINVAL, "max_send_wr too big: errno=%d", errno);
  qia.cap.max_send_wr = 1;
  qia.cap.max_send_sge = dattr.max_sge + 1;
  errno = 0;
  CHECK(ibv_create_qp(pd, &qia) == NULL && errno == EINVAL, "max_send_sge too big: errno=%d", errno);
  qia.cap.max_send_sge = 1;
  qia.qp_type = IBV_QPT_RAW_PACKET;
  errno = 0;
  CHECK(ibv_create_qp(pd, &qia) == NULL && (errno == EOPNOTSUPP || errno == EINVAL),
        "raw packet QP: errno=%d", errno);
  qia.qp_type = IBV_QPT_RC;
  qia.send_cq = NULL;
  errno = 0;
  CHECK(ibv_create_qp(pd, &qia) == NULL && errno == EINVAL, "no send CQ: errno=%d", errno);

  struct ibv_qp *qa = make_qp(pd, cq, IBV_QPT_RC, NULL, 16, 2);
  REQUIRE(qa, "create_qp errno=%d", errno);
  CHECK(qa->state == IBV_QPS_RESET && qa->qp_num > 1, "new QP state=%d qpn=%u", qa->state, qa->qp_num);

  /* ---- posting before the QP is ready ---- */
  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
  struct ibv_send_wr swr, *bad = NULL;
  memset(&swr, 0, sizeof(swr));
  swr.wr_id = 1;
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  CHECK(ibv_post_send(qa, &swr, &bad) != 0 && bad == &swr, "post_send in RESET");
  struct ibv_recv_wr rwr, *rbad = NULL;
  memset(&rwr, 0, sizeof(rwr));
  rwr.wr_id = 2;
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  CHECK(ibv_post_recv(qa, &rwr, &rbad) != 0 && rbad == &rwr, "post_recv in RESET");

  /* ---- modify_qp masks ---- */
  struct ibv_qp_attr qattr;
  memset(&qattr, 0, sizeof(qattr));
  qattr.qp_state = IBV_QPS_INIT;
  CHECK(ibv_modify_qp(qa, &qattr, IBV_QP_STATE) == EINVAL, "RESET->INIT without required attrs");
  qattr.qp_state = IBV_QPS_RTS;
  CHECK(ibv_modify_qp(qa, &qattr, IBV_QP_STATE) == EINVAL, "RESET->RTS");
  CHECK(to_init(qa, IBV_QPT_RC) == 0, "RESET->INIT");
  CHECK(qa->state == IBV_QPS_INIT, "state after INIT=%d", qa->state);
  bad = NULL;
  CHECK(ibv_post_send(qa, &swr, &bad) != 0 && bad == &swr, "post_send in INIT");
  CHECK(ibv_post_recv(qa, &rwr, &rbad) == 0, "post_recv in INIT is allowed");
  memset(&qattr, 0, sizeof(qattr));
  qattr.qp_state = IBV_QPS_RTR;
  CHECK(ibv_modify_qp(qa, &qattr, IBV_QP_STATE) == EINVAL, "INIT->RTR without AV etc.");
  qattr.qp_state = IBV_QPS_RTS;
  qattr.timeout = 14;
  CHECK(ibv_modify_qp(qa, &qattr, IBV_QP_STATE | IBV_QP_TIMEOUT) == EINVAL, "INIT->RTS");
  qattr.qp_state = IBV_QPS_INIT;
  qattr.path_mtu = 9;
  CHECK(ibv_modify_qp(qa, &qattr, IBV_QP_STATE | IBV_QP_PATH_MTU) == EINVAL, "bad path_mtu");
  CHECK(ibv_modify_qp(qa, &qattr, 1 << 30) == EINVAL, "unknown mask bit");
  struct ibv_qp_init_attr qinit;
  CHECK(ibv_query_qp(qa, &qattr, IBV_QP_STATE, &qinit) == 0 && qattr.qp_state == IBV_QPS_INIT,
        "query_qp state=%d", qattr.qp_state);
  CHECK(qinit.send_cq == cq && qinit.qp_type == IBV_QPT_RC, "query_qp init_attr");

  /* ---- resources in use ---- */
  CHECK(ibv_destroy_cq(cq) == EBUSY, "destroy_cq with a QP attached");
  CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd in use");

  /* ---- loopback RC: qa <-> qb over GID 0 ---- */
  struct ibv_qp *qb = make_qp(pd, cq, IBV_QPT_RC, NULL, 16, 2);
  REQUIRE(qb, "create qb errno=%d", errno);
  CHECK(to_init(qb, IBV_QPT_RC) == 0, "qb INIT");
  CHECK(to_rtr(qa, qb->qp_num, &gid0) == 0, "qa RTR");
  CHECK(to_rtr(qb, qa->qp_num, &gid0) == 0, "qb RTR");
  bad = NULL;
  CHECK(ibv_post_send(qa, &swr, &bad) != 0, "post_send in RTR");
  CHECK(to_rts(qa, 7) == 0, "qa RTS");
  CHECK(to_rts(qb, 7) == 0, "qb RTS");
  CHECK(qa->state == IBV_QPS_RTS, "state=%d", qa->state);

  /* too many SGEs for the QP: EINVAL (man ibv_post_send) */
  struct ibv_sge sges[8];
  for (int i = 0; i < 8; ++i) sges[i] = sge;
  struct ibv_send_wr big = swr;
  big.sg_list = sges;
  big.num_sge = 8;
  bad = NULL;
  CHECK(ibv_post_send(qa, &big, &bad) == EINVAL && bad == &big, "num_sge > max_send_sge");
  struct ibv_send_wr inl = swr;
  struct ibv_sge big_inline = {.addr = (uintptr_t)buf, .length = 4096, .lkey = mr->lkey};
  inl.sg_list = &big_inline;
  inl.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  bad = NULL;
  CHECK(ibv_post_send(qa, &inl, &bad) == EINVAL, "inline longer than max_inline_data");
  struct ibv_send_wr badop = swr;
  badop.opcode = (enum ibv_wr_opcode)77;
  bad = NULL;
  CHECK(ibv_post_send(qa, &badop, &bad) == EINVAL && bad == &badop, "unknown opcode");

  /* SEND qa -> qb (qa already has a receive posted from INIT; qb needs one) */
  struct ibv_sge rsge = {.addr = (uintptr_t)(buf + 8192), .length = 4096, .lkey = mr->lkey};
  struct ibv_recv_wr rwr_b = {.wr_id = 20, .sg_list = &rsge, .num_sge = 1};
  CHECK(ibv_post_recv(qb, &rwr_b, &rbad) == 0, "qb post_recv");
  memcpy(buf, "hello softrnic", 15);
  CHECK(ibv_req_notify_cq(cq, 0) == 0, "req_notify_cq");
  CHECK(ibv_post_send(qa, &swr, &bad) == 0, "post_send SEND");
  struct ibv_wc wc[4];
  /* Wait for the event through the channel fd, as ibv_rc_pingpong -e does. */
  struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
  CHECK(poll(&pfd, 1, 5000) == 1, "completion channel fd never became readable");
  struct ibv_cq *ev_cq = NULL;
  void *ev_ctx = NULL;
  CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == cq && ev_ctx == (void *)0x1234,
        "get_cq_event");
  ibv_ack_cq_events(cq, 1);
  int n = poll_n(cq, 2, wc);
  CHECK(n == 2, "SEND completions: %d", n);
  for (int i = 0; i < n; ++i) {
    CHECK(wc[i].status == IBV_WC_SUCCESS, "wc status %s", ibv_wc_status_str(wc[i].status));
    if (wc[i].opcode == IBV_WC_RECV) {
      CHECK(wc[i].wr_id == 20 && wc[i].byte_len == 64 && wc[i].qp_num == qb->qp_num,
            "recv wc wr_id=%" PRIu64 " len=%u", wc[i].wr_id, wc[i].byte_len);
      CHECK(memcmp(buf + 8192, "hello softrnic", 15) == 0, "payload");
    } else {
      CHECK(wc[i].opcode == IBV_WC_SEND && wc[i].wr_id == 1, "send wc opcode=%d", wc[i].opcode);
    }
  }

  /* RDMA WRITE, READ and atomics qa -> qb's buffer (same MR, other half) */
  struct ibv_send_wr w;
  memset(&w, 0, sizeof(w));
  struct ibv_sge ws = {.addr = (uintptr_t)buf, .length = 256, .lkey = mr->lkey};
  for (int i = 0; i < 256; ++i) buf[i] = (char)i;
  w.wr_id = 30;
  w.sg_list = &ws;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = IBV_SEND_SIGNALED;
  w.wr.rdma.remote_addr = (uintptr_t)(buf + 32768);
  w.wr.rdma.rkey = mr->rkey;
  CHECK(ibv_post_send(qa, &w, &bad) == 0, "post RDMA WRITE");
  n = poll_n(cq, 1, wc);
  CHECK(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_RDMA_WRITE,
        "write wc n=%d status=%d", n, n ? (int)wc[0].status : -1);
  CHECK(memcmp(buf, buf + 32768, 256) == 0, "RDMA WRITE data");
  w.wr_id = 31;
  w.opcode = IBV_WR_RDMA_READ;
  ws.addr = (uintptr_t)(buf + 40960);
  CHECK(ibv_post_send(qa, &w, &bad) == 0, "post RDMA READ");
  n = poll_n(cq, 1, wc);
  CHECK(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_RDMA_READ,
        "read wc n=%d", n);
  CHECK(memcmp(buf, buf + 40960, 256) == 0, "RDMA READ data");
  uint64_t *target = (uint64_t *)(buf + 49152);
  *target = 5;
  w.wr_id = 32;
  w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  ws.addr = (uintptr_t)(buf + 49160);
  ws.length = 8;
  w.wr.atomic.remote_addr = (uintptr_t)target;
  w.wr.atomic.rkey = mr->rkey;
  w.wr.atomic.compare_add = 3;
  CHECK(ibv_post_send(qa, &w, &bad) == 0, "post FETCH_ADD");
  n = poll_n(cq, 1, wc);
  CHECK(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_FETCH_ADD, "fadd wc");
  CHECK(*target == 8 && *(uint64_t *)(buf + 49160) == 5, "fetch_add result %" PRIu64, *target);
  /* remote access error: bad rkey must complete with REM_ACCESS_ERR */
  w.wr_id = 33;
  w.opcode = IBV_WR_RDMA_WRITE;
  ws.length = 8;
  w.wr.rdma.remote_addr = (uintptr_t)(buf + 32768);
  w.wr.rdma.rkey = mr->rkey ^ 0x5a5a00;
  CHECK(ibv_post_send(qa, &w, &bad) == 0, "post bad-rkey WRITE");
  n = poll_n(cq, 1, wc);
  CHECK(n == 1 && wc[0].status == IBV_WC_REM_ACCESS_ERR, "bad rkey status=%s",
        n ? ibv_wc_status_str(wc[0].status) : "none");
  /* qa is in ERR now: later WRs flush */
  ibv_query_qp(qa, &qattr, IBV_QP_STATE, &qinit);
  CHECK(qattr.qp_state == IBV_QPS_ERR, "qa state after access error=%d", qattr.qp_state);
  n = poll_n(cq, 4, wc);  /* the receive posted in INIT flushes */
  CHECK(n >= 1 && wc[0].status == IBV_WC_WR_FLUSH_ERR, "flush n=%d", n);
  /* qb saw the bad request: it is in ERR too or still fine; drain events */
  while (ibv_poll_cq(cq, 4, wc) > 0) {
  }

  /* ---- send queue full -> ENOMEM: peer QPN that does not exist ---- */
  struct ibv_qp *qc = make_qp(pd, cq2, IBV_QPT_RC, NULL, 4, 1);
  REQUIRE(qc, "qc errno=%d", errno);
  CHECK(to_init(qc, IBV_QPT_RC) == 0 && to_rtr(qc, 0xabcde, &gid0) == 0 && to_rts(qc, 7) == 0,
        "qc to RTS");
  struct ibv_send_wr u = swr;
  u.send_flags = 0;
  int rc = 0, posted = 0;
  for (int i = 0; i < 64 && rc == 0; ++i) {
    rc = ibv_post_send(qc, &u, &bad);
    if (rc == 0) ++posted;
  }
  CHECK(rc == ENOMEM, "full send queue rc=%d after %d posts", rc, posted);
  CHECK(ibv_destroy_qp(qc) == 0, "destroy qc");

  /* ---- SRQ ---- */
  struct ibv_srq_init_attr sia;
  memset(&sia, 0, sizeof(sia));
  sia.attr.max_wr = dattr.max_srq_wr + 1;
  sia.attr.max_sge = 1;
  errno = 0;
  CHECK(ibv_create_srq(pd, &sia) == NULL && errno == EINVAL, "srq max_wr too big: %d", errno);
  sia.attr.max_wr = 16;
  struct ibv_srq *srq = ibv_create_srq(pd, &sia);
  REQUIRE(srq, "create_srq errno=%d", errno);
  CHECK(sia.attr.max_wr >= 16, "srq max_wr written back");
  struct ibv_qp *qs = make_qp(pd, cq2, IBV_QPT_RC, srq, 4, 1);
  REQUIRE(qs, "qp with srq errno=%d", errno);
  CHECK(ibv_destroy_srq(srq) == EBUSY, "destroy_srq in use");
  CHECK(ibv_post_recv(qs, &rwr, &rbad) != 0, "post_recv on a QP with SRQ");
  CHECK(ibv_post_srq_recv(srq, &rwr, &rbad) == 0, "post_srq_recv");
  struct ibv_srq_attr sattr;
  CHECK(ibv_query_srq(srq, &sattr) == 0 && sattr.max_wr >= 16, "query_srq");
  sattr.srq_limit = 4;
  CHECK(ibv_modify_srq(srq, &sattr, IBV_SRQ_LIMIT) == 0, "modify_srq limit");
  CHECK(ibv_modify_srq(srq, &sattr, 1 << 5) == EINVAL, "modify_srq bad mask");
  CHECK(ibv_destroy_qp(qs) == 0, "destroy qs");
  CHECK(ibv_destroy_srq(srq) == 0, "destroy srq");

  /* ---- UD ---- */
  struct ibv_qp *ua = make_qp(pd, cq2, IBV_QPT_UD, NULL, 8, 1);
  struct ibv_qp *ub = make_qp(pd, cq2, IBV_QPT_UD, NULL, 8, 1);
  REQUIRE(ua && ub, "UD QPs errno=%d", errno);
  CHECK(ud_ready(ua) == 0 && ud_ready(ub) == 0, "UD to RTS");
  struct ibv_ah_attr aha;
  memset(&aha, 0, sizeof(aha));
  aha.port_num = 1;
  errno = 0;
  CHECK(ibv_create_ah(pd, &aha) == NULL && errno == EINVAL, "AH without GRH on RoCE: %d", errno);
  aha.is_global = 1;
  aha.grh.dgid = gid0;
  aha.grh.hop_limit = 1;
  struct ibv_ah *ah = ibv_create_ah(pd, &aha);
  REQUIRE(ah, "create_ah errno=%d", errno);
  struct ibv_sge us = {.addr = (uintptr_t)(buf + 4096), .length = 40 + 128, .lkey = mr->lkey};
  struct ibv_recv_wr urw = {.wr_id = 50, .sg_list = &us, .num_sge = 1};
  CHECK(ibv_post_recv(ub, &urw, &rbad) == 0, "UD post_recv");
  struct ibv_sge usnd = {.addr = (uintptr_t)buf, .length = 128, .lkey = mr->lkey};
  struct ibv_send_wr uw;
  memset(&uw, 0, sizeof(uw));
  uw.wr_id = 51;
  uw.sg_list = &usnd;
  uw.num_sge = 1;
  uw.opcode = IBV_WR_RDMA_WRITE;
  uw.send_flags = IBV_SEND_SIGNALED;
  uw.wr.ud.ah = ah;
  uw.wr.ud.remote_qpn = ub->qp_num;
  uw.wr.ud.remote_qkey = 0x11111111;
  CHECK(ibv_post_send(ua, &uw, &bad) == EINVAL, "RDMA WRITE on UD");
  uw.opcode = IBV_WR_SEND;
  CHECK(ibv_post_send(ua, &uw, &bad) == 0, "UD SEND");
  n = poll_n(cq2, 2, wc);
  CHECK(n == 2, "UD completions n=%d", n);
  for (int i = 0; i < n; ++i) {
    CHECK(wc[i].status == IBV_WC_SUCCESS, "UD wc %s", ibv_wc_status_str(wc[i].status));
    if (wc[i].opcode == IBV_WC_RECV) {
      CHECK(wc[i].byte_len == 128 + 40 && (wc[i].wc_flags & IBV_WC_GRH) &&
                wc[i].src_qp == ua->qp_num,
            "UD recv len=%u flags=0x%x src_qp=%u", wc[i].byte_len, wc[i].wc_flags, wc[i].src_qp);
      CHECK(memcmp(buf + 4096 + 40, buf, 128) == 0, "UD payload after the 40-byte GRH");
      struct ibv_ah_attr from;
      int r = ibv_init_ah_from_wc(ctx, 1, &wc[i], (struct ibv_grh *)(buf + 4096), &from);
      CHECK(r == 0 && from.is_global && memcmp(from.grh.dgid.raw, gid0.raw, 16) == 0,
            "init_ah_from_wc rc=%d", r);
      struct ibv_ah *reply = ibv_create_ah_from_wc(pd, &wc[i], (struct ibv_grh *)(buf + 4096), 1);
      CHECK(reply != NULL, "create_ah_from_wc errno=%d", errno);
      if (reply) ibv_destroy_ah(reply);
    }
  }
  CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd with AH");
  CHECK(ibv_destroy_ah(ah) == 0, "destroy_ah");

  /* ---- ibv_qp_ex wr_* API and extended CQ polling ---- */
  struct ibv_qp_init_attr_ex qx;
  memset(&qx, 0, sizeof(qx));
  qx.send_cq = cq2;
  qx.recv_cq = cq2;
  qx.qp_type = IBV_QPT_RC;
  qx.cap.max_send_wr = 8;
  qx.cap.max_recv_wr = 8;
  qx.cap.max_send_sge = 1;
  qx.cap.max_recv_sge = 1;
  qx.cap.max_inline_data = 64;
  qx.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qx.pd = pd;
  qx.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
  struct ibv_qp *xa = ibv_create_qp_ex(ctx, &qx);
  struct ibv_qp *xb = ibv_create_qp_ex(ctx, &qx);
  REQUIRE(xa && xb, "create_qp_ex errno=%d", errno);
  CHECK(ibv_qp_to_qp_ex(xa) != NULL, "qp_to_qp_ex");
  CHECK(ibv_qp_to_qp_ex(qb) == NULL, "qp_to_qp_ex on a plain QP");
  /* The XRC domain is read only for an XRC receive QP (as the kernel
   * does): on an RC QP the mask changes nothing. */
  qx.comp_mask |= IBV_QP_INIT_ATTR_XRCD;
  qx.xrcd = NULL;
  struct ibv_qp *xq = ibv_create_qp_ex(ctx, &qx);
  CHECK(xq != NULL && xq->qp_type == IBV_QPT_RC, "XRCD mask on an RC QP: errno=%d", errno);
  if (xq) CHECK(ibv_destroy_qp(xq) == 0, "destroy it");
  qx.comp_mask &= ~(uint32_t)IBV_QP_INIT_ATTR_XRCD;
  CHECK(to_init(xa, IBV_QPT_RC) == 0 && to_init(xb, IBV_QPT_RC) == 0, "x INIT");
  CHECK(to_rtr(xa, xb->qp_num, &gid0) == 0 && to_rtr(xb, xa->qp_num, &gid0) == 0, "x RTR");
  CHECK(to_rts(xa, 7) == 0 && to_rts(xb, 7) == 0, "x RTS");
  struct ibv_sge xr = {.addr = (uintptr_t)(buf + 12288), .length = 256, .lkey = mr->lkey};
  struct ibv_recv_wr xrw = {.wr_id = 60, .sg_list = &xr, .num_sge = 1};
  CHECK(ibv_post_recv(xb, &xrw, &rbad) == 0, "xb post_recv");
  struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(xa);
  ibv_wr_start(qpx);
  qpx->wr_id = 61;
  qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qpx);
  ibv_wr_set_inline_data(qpx, "inline via qp_ex", 17);
  qpx->wr_id = 62;
  ibv_wr_rdma_write(qpx, mr->rkey, (uintptr_t)(buf + 20480));
  ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf, 64);
  CHECK(ibv_wr_complete(qpx) == 0, "wr_complete");
  int seen = 0, ok = 1;
  double deadline = now_s() + 5.0;
  struct ibv_poll_cq_attr pca = {.comp_mask = 0};
  while (seen < 3 && now_s() < deadline) {
    int r = ibv_start_poll(cqx, &pca);
    if (r == ENOENT) continue;
    if (r) {
      ok = 0;
      break;
    }
    do {
      ++seen;
      if (cqx->status != IBV_WC_SUCCESS) ok = 0;
      if (ibv_wc_read_opcode(cqx) == IBV_WC_RECV) {
        if (cqx->wr_id != 60 || ibv_wc_read_byte_len(cqx) != 17 ||
            ibv_wc_read_qp_num(cqx) != xb->qp_num)
          ok = 0;
      }
    } while (seen < 3 && ibv_next_poll(cqx) == 0);
    ibv_end_poll(cqx);
  }
  CHECK(seen == 3 && ok, "cq_ex polling: seen=%d ok=%d", seen, ok);
  CHECK(strcmp(buf + 12288, "inline via qp_ex") == 0, "qp_ex inline SEND payload");
  CHECK(memcmp(buf + 20480, buf, 64) == 0, "qp_ex RDMA WRITE payload");
  CHECK(ibv_start_poll(cqx, &pca) == ENOENT, "empty cq_ex");
  pca.comp_mask = 1;
  CHECK(ibv_start_poll(cqx, &pca) == EINVAL, "start_poll comp_mask");

  /* ---- ECE, multicast: documented as unsupported ---- */
  struct ibv_ece ece;
  CHECK(ibv_query_ece(xa, &ece) == EOPNOTSUPP, "query_ece");
  CHECK(ibv_attach_mcast(ua, &gid0, 0) != 0, "attach_mcast must not silently succeed");

  /* ---- teardown in order ---- */
  CHECK(ibv_destroy_qp(xa) == 0 && ibv_destroy_qp(xb) == 0, "destroy x QPs");
  CHECK(ibv_destroy_qp(ua) == 0 && ibv_destroy_qp(ub) == 0, "destroy UD QPs");
  CHECK(ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0, "destroy RC QPs");
  CHECK(ibv_destroy_cq(cq) == 0, "destroy cq");
  CHECK(ibv_destroy_cq(cq2) == 0, "destroy cq_ex");
  CHECK(ibv_destroy_comp_channel(ch) == 0, "destroy channel");
  CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd with MRs");
  CHECK(ibv_dereg_mr(mr) == 0 && ibv_dereg_mr(mr_iova) == 0, "dereg");
  if (mr_relaxed) CHECK(ibv_dereg_mr(mr_relaxed) == 0, "dereg relaxed");
  CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
  CHECK(ibv_close_device(ctx) == 0, "close_device");
  ibv_free_device_list(list);
  free(buf);
  free(buf2);

  printf("%s: %d checks, %d failures\n", g_failures ? "FAIL" : "PASS", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
