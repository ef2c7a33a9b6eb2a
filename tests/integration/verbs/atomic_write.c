/* ATOMIC WRITE (IBA 1.5, IBV_WR_ATOMIC_WRITE) through the verbs API, built
 * against the system rdma-core headers like any application: the device
 * says it has it (IB_UVERBS_DEVICE_ATOMIC_WRITE in device_cap_flags_ex), a
 * QP created with IBV_QP_EX_WITH_ATOMIC_WRITE posts it with
 * ibv_wr_atomic_write and ibv_post_send, each stores its 8 bytes at an
 * aligned word of the peer's region and completes as IBV_WC_ATOMIC_WRITE;
 * a misaligned word is EINVAL at post, and a region without remote write
 * gives IBV_WC_REM_ACCESS_ERR and keeps its bytes.
 *
 * A loopback pair in one process (two RC QPs of one device). Under
 * `softrnic capture` its packets include RC_ATOMIC_WRITE (opcode 0x1D)
 * with their ACKs (tests/integration/verbs/test_atomic_write_capture.sh). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "verbs_test_util.h"

/* Linux 6.0's rdma/ib_user_verbs.h; Debian 12's headers predate it. */
#define DEVICE_ATOMIC_WRITE (1ULL << 40)

enum { kSize = 1 << 20 };

static struct ibv_qp *make_qp_ex(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq) {
  struct ibv_qp_init_attr_ex a;
  memset(&a, 0, sizeof a);
  a.send_cq = cq;
  a.recv_cq = cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 16;
  a.cap.max_recv_wr = 16;
  a.cap.max_send_sge = 2;
  a.cap.max_recv_sge = 1;
  a.pd = pd;
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_WRITE;
  return ibv_create_qp_ex(ctx, &a);
}

static uint64_t word_at(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* One completion of `cq`: its status and opcode. */
static int one_completion(struct ibv_cq *cq, struct ibv_wc *wc) {
  return poll_n(cq, 1, wc) == 1 ? 0 : -1;
}

int main(void) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  REQUIRE(list && n > 0, "no device");
  struct ibv_context *ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  REQUIRE(ctx, "ibv_open_device");

  struct ibv_device_attr_ex dev;
  memset(&dev, 0, sizeof dev);
  REQUIRE(ibv_query_device_ex(ctx, NULL, &dev) == 0, "ibv_query_device_ex");
  CHECK(dev.device_cap_flags_ex & DEVICE_ATOMIC_WRITE, "device_cap_flags_ex 0x%" PRIx64,
        (uint64_t)dev.device_cap_flags_ex);

  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  uint8_t *buf = aligned_alloc(4096, kSize);
  REQUIRE(pd && cq && buf, "pd/cq/buffer");
  memset(buf, 0xEE, kSize);
  /* The first half: remote write; the second: remote read only. */
  struct ibv_mr *rw = ibv_reg_mr(pd, buf, kSize / 2,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  struct ibv_mr *ro = ibv_reg_mr(pd, buf + kSize / 2, kSize / 2,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  REQUIRE(rw && ro, "ibv_reg_mr");
  union ibv_gid gid;
  REQUIRE(ibv_query_gid(ctx, 1, 0, &gid) == 0, "ibv_query_gid");
  struct ibv_qp *qp[2];
  for (int i = 0; i < 2; ++i) {
    qp[i] = make_qp_ex(ctx, pd, cq);
    REQUIRE(qp[i] && to_init(qp[i], IBV_QPT_RC) == 0, "QP %d", i);
  }
  for (int i = 0; i < 2; ++i)
    REQUIRE(to_rtr(qp[i], qp[1 - i]->qp_num, &gid) == 0 && to_rts(qp[i], 7) == 0, "connect %d", i);
  struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp[0]);
  REQUIRE(x, "ibv_qp_to_qp_ex");

  /* ibv_wr_atomic_write, at an aligned word in a whole page and in the
   * region's first page. */
  const size_t at[2] = {64 * 1024 + 8, 64};
  for (int i = 0; i < 2; ++i) {
    uint64_t v = 0x1122334455667700ull + (uint64_t)i;
    ibv_wr_start(x);
    x->wr_id = 100 + i;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_write(x, rw->rkey, (uintptr_t)(buf + at[i]), &v);
    v = 0; /* taken at the call */
    CHECK(ibv_wr_complete(x) == 0, "ibv_wr_complete %d", i);
    struct ibv_wc wc;
    REQUIRE(one_completion(cq, &wc) == 0, "no completion for the ibv_wr_atomic_write %d", i);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_ATOMIC_WRITE && wc.wr_id == 100u + i,
          "completion %d: status %d opcode %d wr_id %" PRIu64, i, wc.status, wc.opcode, wc.wr_id);
    CHECK(word_at(buf + at[i]) == 0x1122334455667700ull + (uint64_t)i, "word %d: 0x%" PRIx64, i,
          word_at(buf + at[i]));
    CHECK(word_at(buf + at[i] - 8) == 0xEEEEEEEEEEEEEEEEull &&
              word_at(buf + at[i] + 8) == 0xEEEEEEEEEEEEEEEEull,
          "the neighbours of word %d changed", i);
  }

  /* ibv_post_send: the word is the SGEs' 8 bytes. */
  uint8_t *src = buf + 4096;
  const uint64_t posted = 0x0102030405060708ull;
  memcpy(src, &posted, 8);
  struct ibv_sge sge = {.addr = (uintptr_t)src, .length = 8, .lkey = rw->lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = 7;
  wr.opcode = IBV_WR_ATOMIC_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = (uintptr_t)(buf + 128 * 1024);
  wr.wr.rdma.rkey = rw->rkey;
  CHECK(ibv_post_send(qp[0], &wr, &bad) == 0, "ibv_post_send ATOMIC_WRITE");
  struct ibv_wc wc;
  REQUIRE(one_completion(cq, &wc) == 0, "no completion for the posted ATOMIC_WRITE");
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_ATOMIC_WRITE, "status %d opcode %d",
        wc.status, wc.opcode);
  CHECK(word_at(buf + 128 * 1024) == posted, "posted word 0x%" PRIx64, word_at(buf + 128 * 1024));

  /* A misaligned word, or 4 bytes: EINVAL at post, nothing sent. */
  wr.wr.rdma.remote_addr = (uintptr_t)(buf + 128 * 1024 + 4);
  CHECK(ibv_post_send(qp[0], &wr, &bad) == EINVAL && bad == &wr, "misaligned word not refused");
  wr.wr.rdma.remote_addr = (uintptr_t)(buf + 128 * 1024);
  sge.length = 4;
  CHECK(ibv_post_send(qp[0], &wr, &bad) == EINVAL, "a 4-byte ATOMIC_WRITE not refused");
  CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "a refused post completed");

  /* A region without remote write: REM_ACCESS_ERR, its bytes kept. */
  uint64_t v = 0;
  ibv_wr_start(x);
  x->wr_id = 9;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_write(x, ro->rkey, (uintptr_t)(buf + kSize / 2 + 64), &v);
  CHECK(ibv_wr_complete(x) == 0, "ibv_wr_complete into the read-only region");
  REQUIRE(one_completion(cq, &wc) == 0, "no completion for the read-only region");
  CHECK(wc.status == IBV_WC_REM_ACCESS_ERR, "read-only region: status %d", wc.status);
  CHECK(word_at(buf + kSize / 2 + 64) == 0xEEEEEEEEEEEEEEEEull, "the read-only region changed");

  for (int i = 0; i < 2; ++i) ibv_destroy_qp(qp[i]);
  ibv_dereg_mr(rw);
  ibv_dereg_mr(ro);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  free(buf);
  printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
