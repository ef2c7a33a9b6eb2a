/* Custom allocators of a parent domain (ibv_alloc_parent_domain(3),
 * IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS; issue 15) through the C API, as an
 * application built against the system <infiniband/verbs.h> uses them over
 * softrnic's libibverbs.so.1.
 *
 * The allocator records every call. It hands out zeroed memory aligned
 * exactly as asked and no more (a library that relied on more alignment
 * than it asked for would trip UBSan in the CI build), or answers
 * IBV_ALLOCATOR_USE_DEFAULT, or NULL, as each case wants. Checked:
 *   - CQs (ibv_create_cq_ex with IBV_CQ_INIT_ATTR_MASK_PD), QPs and SRQs
 *     made on the parent domain ask for memory of their resource type, of
 *     a size that holds their entries, with a power-of-two alignment that
 *     posix_memalign(3) accepts; objects not made on it never ask;
 *   - traffic (RC SEND/RECV into a receive queue and into an SRQ, RDMA
 *     WRITE) runs with the queues in that memory: the work request ids the
 *     engine stores appear in it, written by no one else;
 *   - ibv_resize_cq and ibv_modify_srq (IBV_SRQ_MAX_WR) move the entries
 *     to a new block and give the old one back;
 *   - destroy gives every block back exactly once, with its type;
 *   - IBV_ALLOCATOR_USE_DEFAULT: the library's own memory, free is never
 *     called;
 *   - NULL: creation fails with ENOMEM, at every allocation of a QP's, and
 *     whatever was allocated before the failure is given back; a misaligned
 *     block is refused (ENOMEM) and given back.
 * Traffic is between two QPs of this process (a loopback pair over GID 0;
 * SOFTRNIC_TRANSPORT=udp: RoCE v2 packets through the kernel).
 *
 * Exit status: 0 when every check passes, 1 otherwise ("FAIL" lines say
 * which).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "verbs_test_util.h"

/* softrnic's resource types (docs/user-guide.md, "Thread domains and parent
 * domains"): mlx5's codes, no driver id in the upper half. */
#define RES_QP 1u
#define RES_SRQ 4u
#define RES_CQ 5u

static struct ibv_context *g_ctx;
static union ibv_gid g_gid;

enum mode { MODE_MEMALIGN, MODE_DEFAULT, MODE_NULL, MODE_MISALIGNED };

struct block {
  void *ptr;   /* what alloc returned */
  void *base;  /* what posix_memalign gave (null once freed) */
  size_t size;
  size_t align;
  uint64_t type;
  int frees;
};

#define MAX_BLOCKS 512

struct recorder {
  enum mode mode;
  int fail_after;  /* >= 0: every call after this many blocks returns NULL */
  struct ibv_pd *parent;
  int allocs, frees, bad_calls, unknown_frees;
  int nblocks;
  struct block blocks[MAX_BLOCKS];
};

static struct recorder g_rec;

static void recorder_reset(enum mode mode) {
  memset(&g_rec, 0, sizeof(g_rec));
  g_rec.mode = mode;
  g_rec.fail_after = -1;
}

static void *rec_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
                       uint64_t type) {
  struct recorder *r = pd_context;
  ++r->allocs;
  if (r != &g_rec || pd != r->parent) ++r->bad_calls;
  if (alignment < sizeof(void *) || (alignment & (alignment - 1)) || size == 0) ++r->bad_calls;
  if (type != RES_QP && type != RES_SRQ && type != RES_CQ) ++r->bad_calls;
  if (r->mode == MODE_DEFAULT) return IBV_ALLOCATOR_USE_DEFAULT;
  if (r->mode == MODE_NULL || (r->fail_after >= 0 && r->nblocks >= r->fail_after)) return NULL;
  if (r->nblocks == MAX_BLOCKS) return NULL;
  /* The block starts `alignment` bytes into a region aligned to twice
   * that: aligned as asked, never more. */
  void *base = NULL;
  if (posix_memalign(&base, 2 * alignment, size + 2 * alignment)) return NULL;
  uint8_t *p = (uint8_t *)base + alignment;
  if (r->mode == MODE_MISALIGNED) p += alignment / 2;
  memset(p, 0, size); /* ibv_alloc_parent_domain(3): the callback zeroes it */
  struct block *b = &r->blocks[r->nblocks++];
  b->ptr = p;
  b->base = base;
  b->size = size;
  b->align = alignment;
  b->type = type;
  b->frees = 0;
  return p;
}

static void rec_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t type) {
  struct recorder *r = pd_context;
  ++r->frees;
  if (r != &g_rec || pd != r->parent) ++r->bad_calls;
  for (int i = 0; i < r->nblocks; ++i) {
    struct block *b = &r->blocks[i];
    if (b->ptr != ptr || b->base == NULL) continue;
    if (b->type != type) ++r->bad_calls;
    ++b->frees;
    free(b->base);
    b->base = NULL;
    return;
  }
  ++r->unknown_frees; /* not ours, or given back twice */
}

/* Blocks not given back yet. */
static int outstanding(void) {
  int n = 0;
  for (int i = 0; i < g_rec.nblocks; ++i) n += g_rec.blocks[i].base != NULL;
  return n;
}

/* Blocks of `type` from index `from` on, and their bytes. */
static int blocks_of(uint64_t type, int from, size_t *bytes) {
  int n = 0;
  size_t total = 0;
  for (int i = from; i < g_rec.nblocks; ++i) {
    if (g_rec.blocks[i].type != type) continue;
    ++n;
    total += g_rec.blocks[i].size;
  }
  if (bytes) *bytes = total;
  return n;
}

/* Whether the 8 bytes of `value` are in a live block of `type`. */
static int in_blocks(uint64_t type, uint64_t value) {
  for (int i = 0; i < g_rec.nblocks; ++i) {
    const struct block *b = &g_rec.blocks[i];
    if (b->type != type || b->base == NULL) continue;
    for (size_t off = 0; off + 8 <= b->size; off += 8) {
      uint64_t v;
      memcpy(&v, (const uint8_t *)b->ptr + off, 8);
      if (v == value) return 1;
    }
  }
  return 0;
}

static struct ibv_pd *parent_with_allocators(struct ibv_pd *pd) {
  struct ibv_parent_domain_init_attr a;
  memset(&a, 0, sizeof(a));
  a.pd = pd;
  a.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  a.alloc = rec_alloc;
  a.free = rec_free;
  a.pd_context = &g_rec;
  struct ibv_pd *parent = ibv_alloc_parent_domain(g_ctx, &a);
  g_rec.parent = parent;
  return parent;
}

static struct ibv_cq *cq_on(struct ibv_pd *parent, int cqe) {
  struct ibv_cq_init_attr_ex a;
  memset(&a, 0, sizeof(a));
  a.cqe = cqe;
  a.wc_flags = IBV_WC_STANDARD_FLAGS;
  a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
  a.parent_domain = parent;
  struct ibv_cq_ex *cq = ibv_create_cq_ex(g_ctx, &a);
  return cq ? ibv_cq_ex_to_cq(cq) : NULL;
}

static int connect_rc(struct ibv_qp *a, struct ibv_qp *b) {
  if (to_init(a, IBV_QPT_RC) || to_init(b, IBV_QPT_RC)) return -1;
  if (to_rtr(a, b->qp_num, &g_gid) || to_rtr(b, a->qp_num, &g_gid)) return -1;
  return to_rts(a, 7) || to_rts(b, 7);
}

static int post_recv(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t wr_id, void *buf,
                     uint32_t len, uint32_t lkey) {
  struct ibv_sge s = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
  struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &s, .num_sge = 1}, *bad = NULL;
  return srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad);
}

static int post_send(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *buf,
                     uint32_t len, uint32_t lkey, uint64_t remote, uint32_t rkey) {
  struct ibv_sge s = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  return ibv_post_send(qp, &wr, &bad);
}

/* The next completion of cq is `wr_id`, successful. */
static int completed(struct ibv_cq *cq, uint64_t wr_id) {
  struct ibv_wc wc;
  if (poll_n(cq, 1, &wc) != 1) return 0;
  return wc.status == IBV_WC_SUCCESS && wc.wr_id == wr_id;
}

static int check_blocks_freed_once(void) {
  int ok = 1;
  for (int i = 0; i < g_rec.nblocks; ++i) ok &= g_rec.blocks[i].frees == 1;
  return ok && g_rec.unknown_frees == 0;
}

/* Queues in the application's memory, with traffic through them. */
static void test_application_memory(struct ibv_pd *pd) {
  recorder_reset(MODE_MEMALIGN);
  struct ibv_pd *parent = parent_with_allocators(pd);
  REQUIRE(parent, "alloc_parent_domain with allocators errno=%d", errno);
  CHECK(g_rec.allocs == 0, "the domain itself allocates nothing (%d)", g_rec.allocs);

  /* Objects not made on the parent domain never ask. */
  struct ibv_cq *plain = ibv_create_cq(g_ctx, 16, NULL, NULL, 0);
  REQUIRE(plain, "plain CQ");
  struct ibv_qp *plain_qp = make_qp(pd, plain, IBV_QPT_RC, NULL, 8, 1);
  REQUIRE(plain_qp, "QP on the plain PD");
  CHECK(g_rec.allocs == 0, "a plain CQ and a QP on the protection domain allocate nothing");
  CHECK(ibv_destroy_qp(plain_qp) == 0 && ibv_destroy_cq(plain) == 0, "destroy the plain ones");

  /* CQs: one block each that holds 64 entries (each at least a wr_id and
   * a status: 16 bytes), not absurdly more (a KiB per entry). */
  struct ibv_cq *cqa = cq_on(parent, 64), *cqb = cq_on(parent, 64);
  REQUIRE(cqa && cqb, "CQs on the parent domain errno=%d", errno);
  size_t bytes = 0;
  CHECK(blocks_of(RES_CQ, 0, &bytes) == 2 && g_rec.nblocks == 2, "one CQ block per CQ (%d)",
        g_rec.nblocks);
  CHECK(bytes >= 2 * 64 * 16 && bytes <= 2 * 64 * 1024, "CQ blocks of %zu bytes for 2 x 64", bytes);

  /* QPs: 16 send and 16 receive WRs of 2 SGEs each; every SGE slot (16
   * bytes: address, length, key) of both queues is in their memory. */
  int from = g_rec.nblocks;
  struct ibv_qp *qa = make_qp(parent, cqa, IBV_QPT_RC, NULL, 16, 2);
  struct ibv_qp *qb = make_qp(parent, cqb, IBV_QPT_RC, NULL, 16, 2);
  REQUIRE(qa && qb, "QPs on the parent domain errno=%d", errno);
  const int per_qp = (g_rec.nblocks - from) / 2;
  CHECK(per_qp >= 1 && blocks_of(RES_QP, from, &bytes) == 2 * per_qp,
        "QP blocks: %d per QP, all of type QP", per_qp);
  CHECK(bytes >= 2 * (16 * 2 + 16 * 2) * 16, "QP blocks of %zu bytes for 2 QPs", bytes);
  CHECK(qa->pd == parent, "qp->pd is the parent domain");

  /* An SRQ of 32 WRs of one SGE: at least a wr_id and an SGE each. */
  from = g_rec.nblocks;
  struct ibv_srq_init_attr sa;
  memset(&sa, 0, sizeof(sa));
  sa.attr.max_wr = 32;
  sa.attr.max_sge = 1;
  struct ibv_srq *srq = ibv_create_srq(parent, &sa);
  REQUIRE(srq, "SRQ on the parent domain errno=%d", errno);
  CHECK(blocks_of(RES_SRQ, from, &bytes) >= 1 && blocks_of(RES_SRQ, from, NULL) ==
            g_rec.nblocks - from, "SRQ blocks, all of type SRQ");
  CHECK(bytes >= 32 * (8 + 16), "SRQ blocks of %zu bytes for 32 WRs", bytes);
  from = g_rec.nblocks;
  struct ibv_qp *qc = make_qp(parent, cqa, IBV_QPT_RC, NULL, 16, 2);
  struct ibv_qp *qd = make_qp(parent, cqb, IBV_QPT_RC, srq, 16, 2);
  REQUIRE(qc && qd, "QPs with an SRQ errno=%d", errno);
  CHECK(blocks_of(RES_QP, from, NULL) == g_rec.nblocks - from, "their blocks are of type QP");
  CHECK(g_rec.bad_calls == 0, "alloc was handed the parent domain, its context, a power-of-two "
                              "alignment and a known type (%d bad)", g_rec.bad_calls);
  for (int i = 0; i < g_rec.nblocks; ++i)
    CHECK(g_rec.blocks[i].align >= sizeof(void *) && g_rec.blocks[i].size > 0,
          "block %d: %zu bytes aligned to %zu", i, g_rec.blocks[i].size, g_rec.blocks[i].align);

  REQUIRE(connect_rc(qa, qb) == 0 && connect_rc(qc, qd) == 0, "connect errno=%d", errno);
  uint8_t *buf = calloc(1, 16384);
  REQUIRE(buf, "calloc");
  struct ibv_mr *mr = ibv_reg_mr(parent, buf, 16384,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(mr, "MR errno=%d", errno);

  /* SEND/RECV through the QPs' own queues. The ids are values nobody but
   * the engine writes into the blocks. */
  const uint64_t recv_id = 0x5ec0de0000000001ull, send_id = 0x5ec0de0000000002ull;
  CHECK(!in_blocks(RES_QP, recv_id) && !in_blocks(RES_CQ, send_id), "blocks start clean");
  memset(buf, 0xa5, 1024);
  CHECK(post_recv(qb, NULL, recv_id, buf + 4096, 1024, mr->lkey) == 0, "post_recv");
  CHECK(in_blocks(RES_QP, recv_id), "the receive WQE is in the QP's block");
  CHECK(post_send(qa, IBV_WR_SEND, send_id, buf, 1024, mr->lkey, 0, 0) == 0, "post_send");
  CHECK(in_blocks(RES_QP, send_id), "the send WQE is in the QP's block");
  CHECK(completed(cqa, send_id) && completed(cqb, recv_id), "SEND completed on both sides");
  CHECK(buf[4096] == 0xa5 && buf[4096 + 1023] == 0xa5, "SEND landed");
  CHECK(in_blocks(RES_CQ, send_id) && in_blocks(RES_CQ, recv_id),
        "the completions went through the CQs' blocks");

  /* RDMA WRITE, 8 KiB (several packets). */
  memset(buf, 0x3c, 8192);
  CHECK(post_send(qa, IBV_WR_RDMA_WRITE, 3, buf, 8192, mr->lkey, (uintptr_t)(buf + 8192),
                  mr->rkey) == 0 && completed(cqa, 3), "RDMA WRITE completed");
  CHECK(buf[8192] == 0x3c && buf[16383] == 0x3c, "WRITE landed");

  /* SEND into the SRQ. */
  const uint64_t srq_id = 0x5ec0de0000000004ull;
  memset(buf, 0x6b, 512);
  CHECK(post_recv(NULL, srq, srq_id, buf + 4096, 512, mr->lkey) == 0, "post_srq_recv");
  CHECK(in_blocks(RES_SRQ, srq_id), "the SRQ's WQE is in its block");
  CHECK(post_send(qc, IBV_WR_SEND, 5, buf, 512, mr->lkey, 0, 0) == 0 && completed(cqa, 5) &&
            completed(cqb, srq_id) && buf[4096] == 0x6b, "SEND through the SRQ");

  /* ibv_resize_cq: a pending completion moves to the new block, the old
   * block is given back. */
  CHECK(post_send(qa, IBV_WR_RDMA_WRITE, 6, buf, 64, mr->lkey, (uintptr_t)(buf + 8192),
                  mr->rkey) == 0, "WRITE before resize");
  double deadline = now_s() + 5;
  while (!in_blocks(RES_CQ, 6) && now_s() < deadline) usleep(1000);
  from = g_rec.nblocks;
  int frees = g_rec.frees;
  CHECK(ibv_resize_cq(cqa, 256) == 0 && cqa->cqe >= 256, "resize_cq errno=%d", errno);
  CHECK(blocks_of(RES_CQ, from, &bytes) == 1 && bytes >= 256 * 16 && g_rec.frees == frees + 1,
        "resize: a new CQ block (%zu bytes), the old one given back", bytes);
  CHECK(completed(cqa, 6), "the completion waiting at resize survived it");

  /* ibv_modify_srq(IBV_SRQ_MAX_WR): a waiting receive moves with it. */
  CHECK(post_recv(NULL, srq, srq_id + 1, buf + 4096, 512, mr->lkey) == 0, "post_srq_recv");
  from = g_rec.nblocks;
  frees = g_rec.frees;
  const int srq_blocks = blocks_of(RES_SRQ, 0, NULL);
  struct ibv_srq_attr ma = {.max_wr = 128};
  CHECK(ibv_modify_srq(srq, &ma, IBV_SRQ_MAX_WR) == 0, "modify_srq max_wr errno=%d", errno);
  CHECK(blocks_of(RES_SRQ, from, NULL) == srq_blocks && g_rec.frees == frees + srq_blocks,
        "SRQ resize: new blocks, the old ones given back");
  CHECK(post_send(qc, IBV_WR_SEND, 7, buf, 256, mr->lkey, 0, 0) == 0 && completed(cqa, 7) &&
            completed(cqb, srq_id + 1), "the receive posted before the resize is used");

  /* Destroy: every block back once, each object's when it goes. */
  CHECK(ibv_dealloc_pd(parent) == EBUSY, "dealloc of the domain in use: EBUSY");
  frees = g_rec.frees;
  CHECK(ibv_destroy_qp(qa) == 0 && g_rec.frees == frees + per_qp, "destroy_qp gives its blocks back");
  CHECK(ibv_destroy_qp(qb) == 0 && ibv_destroy_qp(qc) == 0 && ibv_destroy_qp(qd) == 0, "destroy QPs");
  frees = g_rec.frees;
  CHECK(ibv_destroy_srq(srq) == 0 && g_rec.frees == frees + srq_blocks, "destroy_srq");
  frees = g_rec.frees;
  CHECK(ibv_destroy_cq(cqa) == 0 && g_rec.frees == frees + 1, "destroy_cq");
  CHECK(ibv_destroy_cq(cqb) == 0, "destroy_cq");
  CHECK(ibv_dereg_mr(mr) == 0, "dereg");
  CHECK(outstanding() == 0 && check_blocks_freed_once() && g_rec.frees == g_rec.allocs,
        "every block given back exactly once (%d allocs, %d frees, %d unknown)", g_rec.allocs,
        g_rec.frees, g_rec.unknown_frees);
  CHECK(g_rec.bad_calls == 0, "no bad call (%d)", g_rec.bad_calls);
  CHECK(ibv_dealloc_pd(parent) == 0, "dealloc parent domain");
  free(buf);
}

/* IBV_ALLOCATOR_USE_DEFAULT: asked, then the library's own memory. */
static void test_use_default(struct ibv_pd *pd) {
  recorder_reset(MODE_DEFAULT);
  struct ibv_pd *parent = parent_with_allocators(pd);
  REQUIRE(parent, "parent domain errno=%d", errno);
  struct ibv_cq *cqa = cq_on(parent, 32), *cqb = cq_on(parent, 32);
  struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
  struct ibv_srq *srq = ibv_create_srq(parent, &sa);
  REQUIRE(cqa && cqb && srq, "CQs and SRQ errno=%d", errno);
  struct ibv_qp *qa = make_qp(parent, cqa, IBV_QPT_RC, NULL, 8, 1);
  struct ibv_qp *qb = make_qp(parent, cqb, IBV_QPT_RC, srq, 8, 1);
  REQUIRE(qa && qb && connect_rc(qa, qb) == 0, "QPs errno=%d", errno);
  CHECK(g_rec.allocs >= 5, "each queue asked (%d calls)", g_rec.allocs);
  uint8_t *buf = calloc(1, 4096);
  struct ibv_mr *mr = ibv_reg_mr(parent, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(buf && mr, "MR errno=%d", errno);
  memset(buf, 0x42, 256);
  CHECK(post_recv(NULL, srq, 1, buf + 1024, 256, mr->lkey) == 0 &&
            post_send(qa, IBV_WR_SEND, 2, buf, 256, mr->lkey, 0, 0) == 0 && completed(cqa, 2) &&
            completed(cqb, 1) && buf[1024] == 0x42, "SEND with default memory");
  CHECK(post_send(qa, IBV_WR_RDMA_WRITE, 3, buf, 256, mr->lkey, (uintptr_t)(buf + 2048),
                  mr->rkey) == 0 && completed(cqa, 3) && buf[2048] == 0x42,
        "WRITE with default memory");
  CHECK(ibv_resize_cq(cqa, 128) == 0, "resize with default memory");
  CHECK(ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0 && ibv_destroy_srq(srq) == 0 &&
            ibv_destroy_cq(cqa) == 0 && ibv_destroy_cq(cqb) == 0 && ibv_dereg_mr(mr) == 0,
        "destroy");
  CHECK(g_rec.frees == 0, "free is never called for default memory (%d)", g_rec.frees);
  CHECK(g_rec.bad_calls == 0, "no bad call (%d)", g_rec.bad_calls);
  CHECK(ibv_dealloc_pd(parent) == 0, "dealloc parent domain");
  free(buf);
}

/* NULL: ENOMEM, nothing held, nothing kept. */
static void test_failure(struct ibv_pd *pd) {
  recorder_reset(MODE_NULL);
  struct ibv_pd *parent = parent_with_allocators(pd);
  REQUIRE(parent, "parent domain errno=%d", errno);
  errno = 0;
  CHECK(cq_on(parent, 16) == NULL && errno == ENOMEM, "CQ: ENOMEM (errno %d)", errno);
  struct ibv_cq *cq = ibv_create_cq(g_ctx, 16, NULL, NULL, 0);
  REQUIRE(cq, "plain CQ");
  errno = 0;
  CHECK(make_qp(parent, cq, IBV_QPT_RC, NULL, 8, 1) == NULL && errno == ENOMEM,
        "QP: ENOMEM (errno %d)", errno);
  errno = 0;
  CHECK(make_qp(parent, cq, IBV_QPT_UD, NULL, 8, 1) == NULL && errno == ENOMEM,
        "UD QP: ENOMEM (errno %d)", errno);
  struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
  errno = 0;
  CHECK(ibv_create_srq(parent, &sa) == NULL && errno == ENOMEM, "SRQ: ENOMEM (errno %d)", errno);
  CHECK(g_rec.allocs >= 4 && g_rec.frees == 0, "asked %d times, nothing to give back",
        g_rec.allocs);

  /* A failure at each of a QP's allocations: the ones before it are given
   * back. */
  g_rec.mode = MODE_MEMALIGN;
  struct ibv_qp *qp = make_qp(parent, cq, IBV_QPT_RC, NULL, 8, 1);
  REQUIRE(qp, "QP errno=%d", errno);
  const int per_qp = g_rec.nblocks;
  CHECK(ibv_destroy_qp(qp) == 0 && outstanding() == 0, "a QP's blocks back");
  for (int k = 0; k < per_qp; ++k) {
    g_rec.fail_after = g_rec.nblocks + k;
    errno = 0;
    CHECK(make_qp(parent, cq, IBV_QPT_RC, NULL, 8, 1) == NULL && errno == ENOMEM,
          "QP, allocation %d of %d fails: ENOMEM (errno %d)", k + 1, per_qp, errno);
    CHECK(outstanding() == 0, "the %d blocks before it were given back", k);
  }
  g_rec.fail_after = -1;
  struct ibv_srq_init_attr sb = {.attr = {.max_wr = 8, .max_sge = 1}};
  struct ibv_srq *srq = ibv_create_srq(parent, &sb);
  REQUIRE(srq, "SRQ errno=%d", errno);
  const int per_srq = outstanding();
  CHECK(ibv_destroy_srq(srq) == 0 && outstanding() == 0, "an SRQ's blocks back");
  for (int k = 0; k < per_srq; ++k) {
    g_rec.fail_after = g_rec.nblocks + k;
    errno = 0;
    CHECK(ibv_create_srq(parent, &sb) == NULL && errno == ENOMEM && outstanding() == 0,
          "SRQ, allocation %d of %d fails: ENOMEM, nothing kept", k + 1, per_srq);
  }
  g_rec.fail_after = -1;

  /* A block misaligned for what was asked is refused and given back. */
  g_rec.mode = MODE_MISALIGNED;
  const int frees = g_rec.frees;
  errno = 0;
  CHECK(cq_on(parent, 16) == NULL && errno == ENOMEM, "misaligned CQ block: ENOMEM (errno %d)",
        errno);
  CHECK(g_rec.frees == frees + 1 && outstanding() == 0, "the misaligned block was given back");

  /* A resize that cannot get memory leaves the CQ as it was. */
  g_rec.mode = MODE_MEMALIGN;
  struct ibv_cq *pcq = cq_on(parent, 16);
  REQUIRE(pcq, "CQ errno=%d", errno);
  g_rec.mode = MODE_NULL;
  CHECK(ibv_resize_cq(pcq, 64) == ENOMEM && pcq->cqe >= 16 && pcq->cqe < 64,
        "resize without memory: ENOMEM, the CQ unchanged");
  CHECK(ibv_destroy_cq(pcq) == 0 && outstanding() == 0, "its block back");

  CHECK(check_blocks_freed_once(), "every block given back exactly once");
  CHECK(g_rec.bad_calls == 0, "no bad call (%d)", g_rec.bad_calls);
  CHECK(ibv_destroy_cq(cq) == 0, "destroy plain CQ");
  CHECK(ibv_dealloc_pd(parent) == 0, "failed creations hold no reference on the domain");
}

/* Allocators given without functions: the library's memory, as mlx5. */
static void test_without_functions(struct ibv_pd *pd) {
  struct ibv_parent_domain_init_attr a;
  memset(&a, 0, sizeof(a));
  a.pd = pd;
  a.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
  struct ibv_pd *parent = ibv_alloc_parent_domain(g_ctx, &a);
  REQUIRE(parent, "parent domain, null allocators errno=%d", errno);
  struct ibv_cq *cq = cq_on(parent, 16);
  CHECK(cq != NULL, "CQ on it errno=%d", errno);
  if (cq) ibv_destroy_cq(cq);
  CHECK(ibv_dealloc_pd(parent) == 0, "dealloc");
}

int main(void) {
  int num = 0;
  struct ibv_device **list = ibv_get_device_list(&num);
  REQUIRE(list && num >= 1, "no device");
  g_ctx = ibv_open_device(list[0]);
  REQUIRE(g_ctx, "open_device errno=%d", errno);
  REQUIRE(ibv_query_gid(g_ctx, 1, 0, &g_gid) == 0, "query_gid");
  struct ibv_pd *pd = ibv_alloc_pd(g_ctx);
  REQUIRE(pd, "alloc_pd");

  test_application_memory(pd);
  test_use_default(pd);
  test_failure(pd);
  test_without_functions(pd);

  CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd at the end");
  ibv_close_device(g_ctx);
  ibv_free_device_list(list);
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
