/* On-demand paging, device memory, memory windows, thread and parent
 * domains, importing a context's objects (issue 15)
 * through the C API, as an application built against the system
 * <infiniband/verbs.h> calls them, over softrnic's libibverbs.so.1.
 *
 * Traffic runs between two RC QPs of this process (a loopback pair over GID
 * 0): with SOFTRNIC_TRANSPORT=udp as RoCE v2 packets through the kernel,
 * with =shm through the shared-memory path (the direct path where it
 * applies: device memory is ordinary registered memory; ODP regions are
 * reached through packets). Each error case is the one the man pages
 * (ibv_reg_mr(3), ibv_advise_mr(3), ibv_alloc_dm(3), ibv_alloc_mw(3),
 * ibv_bind_mw(3), ibv_alloc_td(3), ibv_alloc_parent_domain(3)) name.
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
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "verbs_test_util.h"

static struct ibv_context *g_ctx;
static union ibv_gid g_gid;
static long g_page;

/* Two connected RC QPs on one CQ each, made on `pd` (a PD or a parent
 * domain). */
struct pair {
  struct ibv_cq *cqa, *cqb;
  struct ibv_qp *qa, *qb;
};

static int pair_open(struct pair *p, struct ibv_pd *pd) {
  memset(p, 0, sizeof(*p));
  p->cqa = ibv_create_cq(g_ctx, 64, NULL, NULL, 0);
  p->cqb = ibv_create_cq(g_ctx, 64, NULL, NULL, 0);
  if (!p->cqa || !p->cqb) return -1;
  p->qa = make_qp(pd, p->cqa, IBV_QPT_RC, NULL, 16, 2);
  p->qb = make_qp(pd, p->cqb, IBV_QPT_RC, NULL, 16, 2);
  if (!p->qa || !p->qb) return -1;
  if (to_init(p->qa, IBV_QPT_RC) || to_init(p->qb, IBV_QPT_RC)) return -1;
  if (to_rtr(p->qa, p->qb->qp_num, &g_gid) || to_rtr(p->qb, p->qa->qp_num, &g_gid)) return -1;
  /* retry_cnt 1: an access error is reported at once, not retried */
  if (to_rts(p->qa, 1) || to_rts(p->qb, 1)) return -1;
  return 0;
}

static void pair_close(struct pair *p) {
  if (p->qa) ibv_destroy_qp(p->qa);
  if (p->qb) ibv_destroy_qp(p->qb);
  if (p->cqa) ibv_destroy_cq(p->cqa);
  if (p->cqb) ibv_destroy_cq(p->cqb);
  memset(p, 0, sizeof(*p));
}

/* Posts one signaled one-sided WR (WRITE/READ/atomic) on qa and returns its
 * completion status (-1: no completion within the deadline). */
static int one_sided(struct pair *p, enum ibv_wr_opcode op, void *local, uint32_t len,
                     uint32_t lkey, uint64_t remote, uint32_t rkey) {
  struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.opcode = op;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
    wr.wr.atomic.remote_addr = remote;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = 5;
  } else {
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
  }
  if (ibv_post_send(p->qa, &wr, &bad)) return -2;
  struct ibv_wc wc;
  if (poll_n(p->cqa, 1, &wc) != 1) return -1;
  return wc.status;
}

/* A SEND of [src, src+len) from qa into a receive of [dst, dst+len) on qb;
 * returns the sender's status, and the receiver's through *recv_status. */
static int send_recv(struct pair *p, void *src, uint32_t src_lkey, void *dst, uint32_t dst_lkey,
                     uint32_t len, int *recv_status) {
  struct ibv_sge rs = {.addr = (uintptr_t)dst, .length = len, .lkey = dst_lkey};
  struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &rs, .num_sge = 1}, *rbad = NULL;
  if (ibv_post_recv(p->qb, &rwr, &rbad)) return -2;
  struct ibv_sge ss = {.addr = (uintptr_t)src, .length = len, .lkey = src_lkey};
  struct ibv_send_wr swr, *sbad = NULL;
  memset(&swr, 0, sizeof(swr));
  swr.opcode = IBV_WR_SEND;
  swr.sg_list = &ss;
  swr.num_sge = 1;
  swr.send_flags = IBV_SEND_SIGNALED;
  if (ibv_post_send(p->qa, &swr, &sbad)) return -2;
  struct ibv_wc wc;
  if (poll_n(p->cqa, 1, &wc) != 1) return -1;
  *recv_status = -1;
  struct ibv_wc rwc;
  memset(&rwc, 0, sizeof(rwc));
  if (wc.status == IBV_WC_SUCCESS && poll_n(p->cqb, 1, &rwc) == 1) *recv_status = rwc.status;
  return wc.status;
}

/* An anonymous mapping of n pages nobody has touched yet. */
static uint8_t *fresh_pages(size_t n) {
  void *m = mmap(NULL, n * g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return m == MAP_FAILED ? NULL : (uint8_t *)m;
}

/* How many of the n pages at p are resident (mincore(2)). */
static size_t resident_pages(const uint8_t *p, size_t n) {
  unsigned char vec[64];
  if (n > sizeof(vec) || mincore((void *)p, n * g_page, vec)) return (size_t)-1;
  size_t r = 0;
  for (size_t i = 0; i < n; ++i) r += vec[i] & 1;
  return r;
}

static const int kRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

static void test_odp_caps(void) {
  struct ibv_device_attr_ex ex;
  REQUIRE(ibv_query_device_ex(g_ctx, NULL, &ex) == 0, "query_device_ex");
  CHECK((ex.odp_caps.general_caps & (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT)) ==
            (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT),
        "general_caps 0x%llx", (unsigned long long)ex.odp_caps.general_caps);
  const uint32_t rc_all = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                          IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
  CHECK((ex.odp_caps.per_transport_caps.rc_odp_caps & rc_all) == rc_all, "rc_odp_caps 0x%x",
        ex.odp_caps.per_transport_caps.rc_odp_caps);
  CHECK(ex.odp_caps.per_transport_caps.ud_odp_caps & IBV_ODP_SUPPORT_SEND, "ud_odp_caps");
  CHECK(ex.max_dm_size == 4u << 20, "max_dm_size %llu", (unsigned long long)ex.max_dm_size);
}

/* Explicit ODP: a region of pages nobody touched is written, read, added to
 * and received into; the pages appear as the accesses need them. */
static void test_odp_explicit(struct ibv_pd *pd) {
  struct pair p;
  REQUIRE(pair_open(&p, pd) == 0, "pair errno=%d", errno);
  const size_t n = 8;
  uint8_t *odp = fresh_pages(n);
  REQUIRE(odp, "mmap");
  struct ibv_mr *omr = ibv_reg_mr(pd, odp, n * g_page, kRemote | IBV_ACCESS_ON_DEMAND);
  REQUIRE(omr, "reg ODP MR errno=%d", errno);
  CHECK(resident_pages(odp, n) == 0, "registration touched %zu pages", resident_pages(odp, n));
  uint8_t *buf = calloc(1, 2 * g_page);
  struct ibv_mr *mr = ibv_reg_mr(pd, buf, 2 * g_page, kRemote);
  REQUIRE(buf && mr, "plain MR");

  memset(buf, 0x5a, g_page);
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, buf, g_page, mr->lkey, (uintptr_t)(odp + 3 * g_page),
                  omr->rkey) == IBV_WC_SUCCESS, "WRITE into an untouched ODP page");
  CHECK(odp[3 * g_page] == 0x5a && odp[4 * g_page - 1] == 0x5a, "WRITE data in the ODP page");
  CHECK(resident_pages(odp, n) == 1, "pages resident after one WRITE: %zu", resident_pages(odp, n));

  memset(buf + g_page, 0, g_page);
  CHECK(one_sided(&p, IBV_WR_RDMA_READ, buf + g_page, 128, mr->lkey,
                  (uintptr_t)(odp + 3 * g_page), omr->rkey) == IBV_WC_SUCCESS, "READ from ODP");
  CHECK(buf[g_page] == 0x5a && buf[g_page + 127] == 0x5a, "READ data");
  /* A READ of a page never touched returns zeros (it is faulted in). */
  memset(buf + g_page, 0xee, 64);
  CHECK(one_sided(&p, IBV_WR_RDMA_READ, buf + g_page, 64, mr->lkey, (uintptr_t)(odp + 6 * g_page),
                  omr->rkey) == IBV_WC_SUCCESS && buf[g_page] == 0, "READ of an untouched page");

  uint64_t *word = (uint64_t *)(odp + 5 * g_page);
  CHECK(one_sided(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, buf, 8, mr->lkey, (uintptr_t)word,
                  omr->rkey) == IBV_WC_SUCCESS && *word == 5, "FETCH_ADD into ODP: %llu",
        (unsigned long long)*word);

  int rs = -1;
  memset(buf, 0x77, 256);
  CHECK(send_recv(&p, buf, mr->lkey, odp + 7 * g_page, omr->lkey, 256, &rs) == IBV_WC_SUCCESS &&
            rs == IBV_WC_SUCCESS && odp[7 * g_page + 255] == 0x77,
        "SEND into an ODP receive buffer (recv status %d)", rs);
  /* The sender's gather from ODP memory. */
  memset(odp + 2 * g_page, 0x31, 100);
  CHECK(send_recv(&p, odp + 2 * g_page, omr->lkey, buf, mr->lkey, 100, &rs) == IBV_WC_SUCCESS &&
            rs == IBV_WC_SUCCESS && buf[99] == 0x31,
        "SEND gathered from ODP memory");

  /* A page of the region made read-only: a remote WRITE there fails with a
   * remote access error, as an unresolvable ODP fault does on hardware. */
  REQUIRE(mprotect(odp + g_page, g_page, PROT_READ) == 0, "mprotect");
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, buf, 64, mr->lkey, (uintptr_t)(odp + g_page), omr->rkey) ==
            IBV_WC_REM_ACCESS_ERR, "WRITE into a read-only ODP page");
  pair_close(&p);
  CHECK(ibv_dereg_mr(omr) == 0 && ibv_dereg_mr(mr) == 0, "dereg");
  munmap(odp, n * g_page);
  free(buf);
}

/* Implicit ODP: one key for the whole address space; memory mapped after
 * the registration is reachable, memory not mapped fails the access. */
static void test_odp_implicit(struct ibv_pd *pd) {
  struct ibv_mr *imr = ibv_reg_mr(pd, NULL, SIZE_MAX, kRemote | IBV_ACCESS_ON_DEMAND);
  REQUIRE(imr, "implicit ODP MR errno=%d", errno);
  CHECK(imr->addr == NULL && imr->length == SIZE_MAX, "implicit MR addr %p length %zu", imr->addr,
        imr->length);
  CHECK(ibv_reg_mr(pd, NULL, SIZE_MAX, kRemote) == NULL && errno == EINVAL,
        "NULL/SIZE_MAX without ON_DEMAND errno=%d", errno);
  CHECK(ibv_reg_mr(pd, NULL, SIZE_MAX, kRemote | IBV_ACCESS_ON_DEMAND | IBV_ACCESS_ZERO_BASED) ==
            NULL && errno == EINVAL, "implicit zero-based errno=%d", errno);

  struct pair p;
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  uint8_t *later = fresh_pages(2); /* mapped after the registration */
  uint8_t *src = fresh_pages(1);
  REQUIRE(later && src, "mmap");
  memset(src, 0x42, g_page);
  /* Both sides through the one implicit key. */
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, src, 512, imr->lkey, (uintptr_t)(later + 100),
                  imr->rkey) == IBV_WC_SUCCESS && later[100] == 0x42 && later[611] == 0x42,
        "WRITE through the implicit key into memory mapped after it");

  /* A hole: an address in page 0, below vm.mmap_min_addr (at least 4096),
   * which no mapping can ever take (a page unmapped by the test could be
   * reused by the next mmap, e.g. a sanitizer's allocator, before the
   * WRITE runs). */
  uint8_t *hole = (uint8_t *)(uintptr_t)0x100;
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, src, 64, imr->lkey, (uintptr_t)hole, imr->rkey) ==
            IBV_WC_REM_ACCESS_ERR, "WRITE into unmapped memory: remote access error");
  pair_close(&p);

  REQUIRE(pair_open(&p, pd) == 0, "pair 2");
  CHECK(one_sided(&p, IBV_WR_RDMA_READ, hole, 64, imr->lkey, (uintptr_t)later, imr->rkey) ==
            IBV_WC_LOC_PROT_ERR, "READ landing in unmapped local memory: local protection error");
  pair_close(&p);
  REQUIRE(pair_open(&p, pd) == 0, "pair 3");
  /* The engine survived both: traffic goes on. */
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, src, 64, imr->lkey, (uintptr_t)(later + g_page),
                  imr->rkey) == IBV_WC_SUCCESS && later[g_page] == 0x42, "traffic after the errors");
  pair_close(&p);
  CHECK(ibv_dereg_mr(imr) == 0, "dereg implicit");
  munmap(later, 2 * g_page);
  munmap(src, g_page);
}

static void test_advise(struct ibv_pd *pd) {
  const size_t n = 4;
  uint8_t *odp = fresh_pages(n);
  REQUIRE(odp, "mmap");
  struct ibv_mr *omr = ibv_reg_mr(pd, odp, n * g_page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
  struct ibv_mr *ro = ibv_reg_mr(pd, odp, n * g_page, IBV_ACCESS_ON_DEMAND);
  uint8_t plain[64];
  struct ibv_mr *pmr = ibv_reg_mr(pd, plain, sizeof(plain), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(omr && ro && pmr, "MRs errno=%d", errno);
  struct ibv_sge sge = {.addr = (uintptr_t)(odp + g_page), .length = 2 * g_page, .lkey = omr->lkey};
  CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, &sge, 1) == 0 &&
            resident_pages(odp, n) == 0, "PREFETCH_NO_FAULT faults nothing in");
  CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1) ==
            0, "PREFETCH_WRITE");
  CHECK(resident_pages(odp, n) == 2, "prefetched pages resident: %zu", resident_pages(odp, n));
  CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1) == 0, "PREFETCH");
  struct ibv_sge s2 = sge;
  s2.lkey = ro->lkey;
  CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &s2, 1) == EPERM,
        "PREFETCH_WRITE without local write: EPERM");
  s2 = sge;
  s2.length = n * g_page;
  CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s2, 1) == EFAULT,
        "range past the region: EFAULT");
  s2 = sge;
  s2.lkey ^= 0x5a5a00;
  CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s2, 1) == EFAULT, "bad lkey: EFAULT");
  struct ibv_sge ps = {.addr = (uintptr_t)plain, .length = 64, .lkey = pmr->lkey};
  CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &ps, 1) == EINVAL,
        "not an ODP region: EINVAL");
  CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0x80, &sge, 1) == EINVAL,
        "unknown flag: EINVAL");
  CHECK(ibv_advise_mr(pd, (enum ibv_advise_mr_advice)7, 0, &sge, 1) == EOPNOTSUPP,
        "unknown advice: EOPNOTSUPP");
  /* Part of the range unmapped: the fault cannot be resolved. */
  munmap(odp + 3 * g_page, g_page);
  s2 = sge;
  s2.addr = (uintptr_t)(odp + 2 * g_page);
  CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s2, 1) == EFAULT,
        "range with a hole: EFAULT");
  CHECK(ibv_dereg_mr(omr) == 0 && ibv_dereg_mr(ro) == 0 && ibv_dereg_mr(pmr) == 0, "dereg");
  munmap(odp, 3 * g_page);
}

static void test_device_memory(struct ibv_pd *pd) {
  struct ibv_alloc_dm_attr big = {.length = (4u << 20) + 4};
  errno = 0;
  CHECK(ibv_alloc_dm(g_ctx, &big) == NULL && errno == ENOMEM, "DM past max_dm_size errno=%d", errno);
  struct ibv_alloc_dm_attr masked = {.length = 64, .comp_mask = 1};
  CHECK(ibv_alloc_dm(g_ctx, &masked) == NULL && errno == EINVAL, "DM comp_mask errno=%d", errno);
  struct ibv_alloc_dm_attr a = {.length = 8192, .log_align_req = 6};
  struct ibv_dm *dm = ibv_alloc_dm(g_ctx, &a);
  REQUIRE(dm, "alloc_dm errno=%d", errno);
  /* The whole budget is this process's: a second DM of all of it fails. */
  struct ibv_alloc_dm_attr rest = {.length = 4u << 20};
  CHECK(ibv_alloc_dm(g_ctx, &rest) == NULL && errno == ENOMEM, "over the budget errno=%d", errno);

  uint8_t in[256], out[256];
  for (int i = 0; i < 256; ++i) in[i] = (uint8_t)(i * 7 + 1);
  CHECK(ibv_memcpy_to_dm(dm, 1024, in, 256) == 0, "memcpy_to_dm");
  memset(out, 0, sizeof(out));
  CHECK(ibv_memcpy_from_dm(out, dm, 1024, 256) == 0 && memcmp(in, out, 256) == 0,
        "memcpy_from_dm returns what was written");
  CHECK(ibv_memcpy_to_dm(dm, 3, in, 4) == EINVAL, "unaligned offset");
  CHECK(ibv_memcpy_to_dm(dm, 4, in, 3) == EINVAL, "unaligned length");
  CHECK(ibv_memcpy_from_dm(out, dm, 8192 + 4, 4) == EINVAL, "offset past the end");
  CHECK(ibv_memcpy_from_dm(out, dm, 0, 8192 + 4) == EINVAL, "length past the end");

  CHECK(ibv_reg_dm_mr(pd, dm, 0, 4096, kRemote) == NULL && errno == EINVAL,
        "DM MR without ZERO_BASED errno=%d", errno);
  CHECK(ibv_reg_dm_mr(pd, dm, 4096, 8192, kRemote | IBV_ACCESS_ZERO_BASED) == NULL &&
            errno == EINVAL, "DM MR past the allocation errno=%d", errno);
  struct ibv_mr *dmr = ibv_reg_dm_mr(pd, dm, 1024, 4096, kRemote | IBV_ACCESS_ZERO_BASED);
  REQUIRE(dmr, "reg_dm_mr errno=%d", errno);
  CHECK(dmr->addr == NULL && dmr->length == 4096, "DM MR addr %p", dmr->addr);
  CHECK(ibv_free_dm(dm) == EBUSY, "free_dm while registered: EBUSY");

  struct pair p;
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  uint8_t *buf = calloc(1, 4096);
  struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, kRemote);
  REQUIRE(buf && mr, "plain MR");
  /* READ through the zero-based key: va 0 is dm offset 1024. */
  CHECK(one_sided(&p, IBV_WR_RDMA_READ, buf, 256, mr->lkey, 0, dmr->rkey) == IBV_WC_SUCCESS &&
            memcmp(buf, in, 256) == 0, "READ from device memory");
  memset(buf, 0xc3, 512);
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, buf, 512, mr->lkey, 2048, dmr->rkey) == IBV_WC_SUCCESS,
        "WRITE into device memory");
  memset(out, 0, sizeof(out));
  CHECK(ibv_memcpy_from_dm(out, dm, 1024 + 2048, 256) == 0 && out[0] == 0xc3 && out[255] == 0xc3,
        "the WRITE is in device memory");
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, buf, 64, mr->lkey, 4096 - 32, dmr->rkey) ==
            IBV_WC_REM_ACCESS_ERR, "WRITE past the DM MR: remote access error");
  pair_close(&p);
  REQUIRE(pair_open(&p, pd) == 0, "pair 2");
  int rs = -1;
  /* Local SGEs of a zero-based MR are offsets too. */
  CHECK(send_recv(&p, (void *)(uintptr_t)0, dmr->lkey, buf, mr->lkey, 128, &rs) ==
            IBV_WC_SUCCESS && rs == IBV_WC_SUCCESS && memcmp(buf, in, 128) == 0,
        "SEND gathered from device memory");
  pair_close(&p);
  CHECK(ibv_dereg_mr(dmr) == 0 && ibv_dereg_mr(mr) == 0, "dereg");
  CHECK(ibv_free_dm(dm) == 0, "free_dm");
  dm = ibv_alloc_dm(g_ctx, &rest);
  CHECK(dm != NULL, "the whole budget is free again errno=%d", errno);
  if (dm) ibv_free_dm(dm);
  free(buf);
}

/* Polls one completion of `cq`; its status, or -1. */
static int next_status(struct ibv_cq *cq, enum ibv_wc_opcode *op, struct ibv_wc *out) {
  struct ibv_wc wc;
  if (poll_n(cq, 1, &wc) != 1) return -1;
  if (op) *op = wc.opcode;
  if (out) *out = wc;
  return wc.status;
}

/* A type 2 bind posted on qp (IBV_WR_BIND_MW); the completion's status. */
static int bind_type2(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mw *mw, uint32_t rkey,
                      struct ibv_mr *mr, void *addr, size_t len, unsigned access) {
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info.mr = mr;
  wr.bind_mw.bind_info.addr = (uintptr_t)addr;
  wr.bind_mw.bind_info.length = len;
  wr.bind_mw.bind_info.mw_access_flags = access;
  if (ibv_post_send(qp, &wr, &bad)) return -2;
  enum ibv_wc_opcode op = IBV_WC_SEND;
  const int st = next_status(cq, &op, NULL);
  if (st == IBV_WC_SUCCESS && op != IBV_WC_BIND_MW) return -3;
  return st;
}

/* A type 1 bind with ibv_bind_mw on qp; the completion's status. */
static int bind_type1(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mw *mw, struct ibv_mr *mr,
                      void *addr, size_t len, unsigned access) {
  struct ibv_mw_bind b;
  memset(&b, 0, sizeof(b));
  b.wr_id = 77;
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info.mr = mr;
  b.bind_info.addr = (uintptr_t)addr;
  b.bind_info.length = len;
  b.bind_info.mw_access_flags = access;
  const int rc = ibv_bind_mw(qp, mw, &b);
  if (rc) return -100 - rc;
  return next_status(cq, NULL, NULL);
}

/* Memory windows: the window lives on qb's side and is bound through qb;
 * qa reaches it. */
static void test_memory_windows(struct ibv_pd *pd) {
  const int rw = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  errno = 0;
  CHECK(ibv_alloc_mw(pd, (enum ibv_mw_type)3) == NULL && errno == EINVAL, "type 3 errno=%d", errno);
  uint8_t *buf = calloc(1, 8192), *src = calloc(1, 4096);
  REQUIRE(buf && src, "calloc");
  /* The region grants no remote right itself: only the windows do. */
  struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  struct ibv_mr *nobind = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  struct ibv_mr *smr = ibv_reg_mr(pd, src, 4096, IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr && nobind && smr, "MRs errno=%d", errno);
  struct pair p;

  /* ---- type 1 ---- */
  struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
  REQUIRE(mw1 && mw1->type == IBV_MW_TYPE_1, "alloc_mw type 1 errno=%d", errno);
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  const uint32_t unbound = mw1->rkey;
  CHECK(bind_type1(p.qb, p.cqb, mw1, mr, buf + 1024, 2048, rw) == IBV_WC_SUCCESS,
        "type 1 bind");
  CHECK(mw1->rkey != unbound && (mw1->rkey >> 8) == (unbound >> 8),
        "bind gives a new key byte: %#x -> %#x", unbound, mw1->rkey);
  memset(src, 0x6b, 4096);
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, src, 512, smr->lkey, (uintptr_t)(buf + 1024), mw1->rkey) ==
            IBV_WC_SUCCESS && buf[1024] == 0x6b && buf[1535] == 0x6b && buf[1023] == 0,
        "WRITE through a type 1 window");
  CHECK(one_sided(&p, IBV_WR_RDMA_READ, src + 2048, 256, smr->lkey, (uintptr_t)(buf + 1024),
                  mw1->rkey) == IBV_WC_SUCCESS && src[2048] == 0x6b, "READ through it");
  CHECK(ibv_dereg_mr(mr) == EBUSY, "dereg of a region with a bound window: EBUSY");
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, src, 64, smr->lkey, (uintptr_t)(buf + 3072 - 32),
                  mw1->rkey) == IBV_WC_REM_ACCESS_ERR, "WRITE past the window: remote access error");
  pair_close(&p);
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, src, 64, smr->lkey, (uintptr_t)(buf + 1024), unbound) ==
            IBV_WC_REM_ACCESS_ERR, "the key before the bind: remote access error");
  pair_close(&p);
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  /* Zero length unbinds (ibv_bind_mw(3)); then the window's key is dead. */
  CHECK(bind_type1(p.qb, p.cqb, mw1, mr, buf, 0, 0) == IBV_WC_SUCCESS, "type 1 unbind");
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, src, 64, smr->lkey, (uintptr_t)(buf + 1024), mw1->rkey) ==
            IBV_WC_REM_ACCESS_ERR, "WRITE through an unbound window: remote access error");
  pair_close(&p);
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  CHECK(bind_type1(p.qb, p.cqb, mw1, nobind, buf, 64, rw) == IBV_WC_MW_BIND_ERR,
        "bind to a region without MW_BIND: IBV_WC_MW_BIND_ERR");
  pair_close(&p);
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  CHECK(bind_type1(p.qb, p.cqb, mw1, mr, buf, 64, rw | IBV_ACCESS_ZERO_BASED) ==
            IBV_WC_MW_BIND_ERR, "zero-based type 1 window: IBV_WC_MW_BIND_ERR");
  pair_close(&p);

  /* ---- type 2 ---- */
  struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  REQUIRE(mw2, "alloc_mw type 2 errno=%d", errno);
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  struct ibv_send_wr wr1, *bad = NULL;
  memset(&wr1, 0, sizeof(wr1));
  wr1.opcode = IBV_WR_BIND_MW;
  wr1.bind_mw.mw = mw1;
  wr1.bind_mw.rkey = ibv_inc_rkey(mw1->rkey);
  wr1.bind_mw.bind_info.mr = mr;
  wr1.bind_mw.bind_info.length = 64;
  CHECK(ibv_post_send(p.qb, &wr1, &bad) == EINVAL, "IBV_WR_BIND_MW of a type 1 window: EINVAL");
  uint32_t k = ibv_inc_rkey(mw2->rkey);
  CHECK(bind_type2(p.qb, p.cqb, mw2, k, mr, buf + 4096, 4096, rw | IBV_ACCESS_ZERO_BASED) ==
            IBV_WC_SUCCESS, "type 2 bind, zero-based");
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, src, 100, smr->lkey, 16, k) == IBV_WC_SUCCESS &&
            buf[4096 + 16] == 0x6b && buf[4096 + 115] == 0x6b, "WRITE at window offset 16");
  pair_close(&p); /* the QP it was bound through goes: so does the binding */
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, src, 16, smr->lkey, 0, k) == IBV_WC_REM_ACCESS_ERR,
        "a type 2 window dies with its QP");
  pair_close(&p);
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  k = ibv_inc_rkey(k);
  CHECK(bind_type2(p.qb, p.cqb, mw2, k, mr, buf + 4096, 4096, rw | IBV_ACCESS_ZERO_BASED) ==
            IBV_WC_SUCCESS, "type 2 bind again");
  struct pair other;
  REQUIRE(pair_open(&other, pd) == 0, "other pair");
  CHECK(one_sided(&other, IBV_WR_RDMA_WRITE, src, 16, smr->lkey, 0, k) == IBV_WC_REM_ACCESS_ERR,
        "type 2 window through another QP of its PD: remote access error");
  pair_close(&other);
  /* LOCAL_INV through the owner's send queue. */
  struct ibv_send_wr inv;
  memset(&inv, 0, sizeof(inv));
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = k;
  enum ibv_wc_opcode op = IBV_WC_SEND;
  CHECK(ibv_post_send(p.qb, &inv, &bad) == 0 && next_status(p.cqb, &op, NULL) == IBV_WC_SUCCESS &&
            op == IBV_WC_LOCAL_INV, "LOCAL_INV");
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, src, 16, smr->lkey, 0, k) == IBV_WC_REM_ACCESS_ERR,
        "access through an invalidated window: remote access error");
  pair_close(&p);
  /* A peer's SEND with Invalidate. */
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  k = ibv_inc_rkey(k);
  CHECK(bind_type2(p.qb, p.cqb, mw2, k, mr, buf, 1024, rw) == IBV_WC_SUCCESS,
        "type 2 bind, not zero-based");
  CHECK(bind_type2(p.qb, p.cqb, mw2, ibv_inc_rkey(k), mr, buf, 1024, rw) == IBV_WC_MW_BIND_ERR,
        "binding a bound type 2 window: IBV_WC_MW_BIND_ERR");
  pair_close(&p);
  /* The failed bind's QP is gone, and with it the binding: free again. */
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  k = ibv_inc_rkey(k);
  CHECK(bind_type2(p.qb, p.cqb, mw2, k, mr, buf, 1024, rw) == IBV_WC_SUCCESS, "bind for SEND_WITH_INV");
  struct ibv_sge rs = {.addr = (uintptr_t)(buf + 6000), .length = 64, .lkey = mr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 5, .sg_list = &rs, .num_sge = 1}, *rbad = NULL;
  struct ibv_sge ss = {.addr = (uintptr_t)src, .length = 32, .lkey = smr->lkey};
  struct ibv_send_wr swr;
  memset(&swr, 0, sizeof(swr));
  swr.opcode = IBV_WR_SEND_WITH_INV;
  swr.sg_list = &ss;
  swr.num_sge = 1;
  swr.send_flags = IBV_SEND_SIGNALED;
  swr.invalidate_rkey = k;
  struct ibv_wc rwc;
  memset(&rwc, 0, sizeof(rwc));
  CHECK(ibv_post_recv(p.qb, &rwr, &rbad) == 0 && ibv_post_send(p.qa, &swr, &bad) == 0 &&
            next_status(p.cqa, NULL, NULL) == IBV_WC_SUCCESS &&
            next_status(p.cqb, NULL, &rwc) == IBV_WC_SUCCESS &&
            (rwc.wc_flags & IBV_WC_WITH_INV) && rwc.invalidated_rkey == k,
        "SEND_WITH_INV invalidates the window (flags %#x rkey %#x)", rwc.wc_flags,
        rwc.invalidated_rkey);
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, src, 16, smr->lkey, (uintptr_t)buf, k) ==
            IBV_WC_REM_ACCESS_ERR, "access after SEND_WITH_INV: remote access error");
  pair_close(&p);
  /* SEND_WITH_INV naming an ordinary region's rkey is refused (a peer must
   * never revoke an MR). */
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  rwr.wr_id = 6;
  swr.invalidate_rkey = nobind->rkey;
  CHECK(ibv_post_recv(p.qb, &rwr, &rbad) == 0 && ibv_post_send(p.qa, &swr, &bad) == 0 &&
            next_status(p.cqa, NULL, NULL) == IBV_WC_REM_INV_REQ_ERR,
        "SEND_WITH_INV of a region's rkey: remote invalid request");
  pair_close(&p);
  /* Dealloc of a bound window invalidates it. */
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  k = ibv_inc_rkey(k);
  CHECK(bind_type2(p.qb, p.cqb, mw2, k, mr, buf, 1024, rw) == IBV_WC_SUCCESS, "bind before dealloc");
  CHECK(ibv_dealloc_mw(mw2) == 0, "dealloc bound type 2 window");
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, src, 16, smr->lkey, (uintptr_t)buf, k) ==
            IBV_WC_REM_ACCESS_ERR, "access after dealloc: remote access error");
  pair_close(&p);
  CHECK(ibv_dealloc_mw(mw1) == 0, "dealloc type 1");
  CHECK(ibv_dereg_mr(mr) == 0 && ibv_dereg_mr(nobind) == 0 && ibv_dereg_mr(smr) == 0,
        "dereg once no window is bound");
  free(buf);
  free(src);
}

/* ibv_import_device / _pd / _mr within the process (verbs/import.cc). */
static void test_import(struct ibv_pd *pd) {
  CHECK(g_ctx->cmd_fd >= 0, "cmd_fd %d", g_ctx->cmd_fd);
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0, "pipe");
  errno = 0;
  CHECK(ibv_import_device(pipefd[0]) == NULL && errno == EOPNOTSUPP,
        "import of a descriptor that is no context's: EOPNOTSUPP errno=%d", errno);
  close(pipefd[0]);
  close(pipefd[1]);
  struct ibv_context *ictx = ibv_import_device(dup(g_ctx->cmd_fd));
  REQUIRE(ictx, "import_device errno=%d", errno);
  CHECK(ibv_import_pd(ictx, pd->handle + 1000) == NULL && errno == ENOENT, "no such PD: ENOENT");
  struct ibv_pd *ipd = ibv_import_pd(ictx, pd->handle);
  REQUIRE(ipd && ipd->handle == pd->handle && ipd->context == ictx, "import_pd errno=%d", errno);
  uint8_t *buf = calloc(1, 4096);
  struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(buf && mr, "reg_mr");
  CHECK(ibv_import_mr(ipd, mr->handle ^ 0x100) == NULL && errno == ENOENT, "no such MR: ENOENT");
  struct ibv_mr *imr = ibv_import_mr(ipd, mr->handle);
  REQUIRE(imr, "import_mr errno=%d", errno);
  CHECK(imr->lkey == mr->lkey && imr->rkey == mr->rkey && imr->addr == mr->addr &&
            imr->length == mr->length && imr->pd == ipd, "imported MR names the same region");
  /* A pair made on the imported context and PD, its keys from the import. */
  struct ibv_context *saved = g_ctx;
  g_ctx = ictx;
  struct pair p;
  REQUIRE(pair_open(&p, ipd) == 0, "pair on the imported context errno=%d", errno);
  g_ctx = saved;
  memset(buf, 0x3c, 512);
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, buf, 512, imr->lkey, (uintptr_t)(buf + 2048), imr->rkey) ==
            IBV_WC_SUCCESS && buf[2048] == 0x3c && buf[2559] == 0x3c,
        "WRITE with the imported keys on the imported context");
  pair_close(&p);
  ibv_unimport_mr(imr);
  ibv_unimport_pd(ipd);
  CHECK(ibv_close_device(ictx) == 0, "close the imported context");
  CHECK(ibv_dereg_mr(mr) == 0, "the original MR survives the unimport");
  free(buf);
}

/* A receive buffer that fails its own protection check (a region of
 * another PD): the sender sees a remote operational error, the receiver a
 * local protection error (IBA 9.7.5.2.4, what mlx5 reports). Moving the QP
 * to Reset then drops its unpolled completions, as libmlx5 does. */
static void test_recv_protection(struct ibv_pd *pd) {
  struct ibv_pd *other = ibv_alloc_pd(g_ctx);
  uint8_t *buf = calloc(1, 4096);
  struct ibv_mr *mine = ibv_reg_mr(pd, buf, 2048, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr *theirs = ibv_reg_mr(other, buf + 2048, 2048, IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(other && buf && mine && theirs, "setup errno=%d", errno);
  struct pair p;
  REQUIRE(pair_open(&p, pd) == 0, "pair");
  int rs = -1;
  struct ibv_sge rsg = {.addr = (uintptr_t)(buf + 2048), .length = 64, .lkey = theirs->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 9, .sg_list = &rsg, .num_sge = 1}, *rbad = NULL;
  struct ibv_sge ssg = {.addr = (uintptr_t)buf, .length = 64, .lkey = mine->lkey};
  struct ibv_send_wr swr, *sbad = NULL;
  memset(&swr, 0, sizeof(swr));
  swr.opcode = IBV_WR_SEND;
  swr.sg_list = &ssg;
  swr.num_sge = 1;
  swr.send_flags = IBV_SEND_SIGNALED;
  CHECK(ibv_post_recv(p.qb, &rwr, &rbad) == 0 && ibv_post_send(p.qa, &swr, &sbad) == 0, "post");
  CHECK(next_status(p.cqa, NULL, NULL) == IBV_WC_REM_OP_ERR,
        "SEND into a buffer of another PD: remote operational error at the sender");
  CHECK((rs = next_status(p.cqb, NULL, NULL)) == IBV_WC_LOC_PROT_ERR,
        "and a local protection error at the receiver (%d)", rs);
  /* qa is in Error: a posted send is flushed into cqa; Reset drops it. */
  swr.wr_id = 10;
  CHECK(ibv_post_send(p.qa, &swr, &sbad) == 0, "post in Error");
  struct ibv_qp_attr ra = {.qp_state = IBV_QPS_RESET};
  CHECK(ibv_modify_qp(p.qa, &ra, IBV_QP_STATE) == 0, "to Reset");
  struct ibv_wc wc;
  CHECK(ibv_poll_cq(p.cqa, 1, &wc) == 0, "Reset dropped the QP's unpolled completions");
  pair_close(&p);
  CHECK(ibv_dereg_mr(mine) == 0 && ibv_dereg_mr(theirs) == 0 && ibv_dealloc_pd(other) == 0, "free");
  free(buf);
}

static void test_domains(struct ibv_pd *pd) {
  struct ibv_td_init_attr tda = {.comp_mask = 1};
  CHECK(ibv_alloc_td(g_ctx, &tda) == NULL && errno == EINVAL, "alloc_td comp_mask errno=%d", errno);
  tda.comp_mask = 0;
  struct ibv_td *td = ibv_alloc_td(g_ctx, &tda);
  REQUIRE(td, "alloc_td errno=%d", errno);

  struct ibv_parent_domain_init_attr pa;
  memset(&pa, 0, sizeof(pa));
  pa.pd = pd;
  pa.td = td;
  /* Custom allocators: parent_domain_alloc.c. */
  pa.comp_mask = 1u << 7;
  CHECK(ibv_alloc_parent_domain(g_ctx, &pa) == NULL && errno == EINVAL, "unknown mask errno=%d",
        errno);
  pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  pa.pd_context = &pa;
  struct ibv_pd *parent = ibv_alloc_parent_domain(g_ctx, &pa);
  REQUIRE(parent, "alloc_parent_domain errno=%d", errno);
  pa.pd = parent;
  CHECK(ibv_alloc_parent_domain(g_ctx, &pa) == NULL && errno == EINVAL,
        "a parent domain of a parent domain errno=%d", errno);
  CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd under a parent domain: EBUSY");
  CHECK(ibv_dealloc_td(td) == EBUSY, "dealloc_td under a parent domain: EBUSY");

  struct ibv_cq_init_attr_ex cqa;
  memset(&cqa, 0, sizeof(cqa));
  cqa.cqe = 16;
  cqa.wc_flags = IBV_WC_STANDARD_FLAGS;
  cqa.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
  cqa.parent_domain = pd;
  CHECK(ibv_create_cq_ex(g_ctx, &cqa) == NULL && errno == EINVAL,
        "CQ on a PD that is no parent domain errno=%d", errno);
  cqa.parent_domain = parent;
  struct ibv_cq_ex *cq = ibv_create_cq_ex(g_ctx, &cqa);
  CHECK(cq != NULL, "CQ on a parent domain errno=%d", errno);

  /* Traffic on QPs and an MR made on the parent domain. */
  struct pair p;
  REQUIRE(pair_open(&p, parent) == 0, "pair on parent domain errno=%d", errno);
  CHECK(p.qa->pd == parent, "qp->pd is the parent domain");
  uint8_t *buf = calloc(1, 4096);
  struct ibv_mr *mr = ibv_reg_mr(parent, buf, 4096, kRemote);
  REQUIRE(buf && mr, "MR on parent domain errno=%d", errno);
  memset(buf, 0x19, 1024);
  CHECK(one_sided(&p, IBV_WR_RDMA_WRITE, buf, 1024, mr->lkey, (uintptr_t)(buf + 2048), mr->rkey) ==
            IBV_WC_SUCCESS && buf[2048] == 0x19 && buf[3071] == 0x19, "WRITE on a parent domain");
  int rs = -1;
  CHECK(send_recv(&p, buf, mr->lkey, buf + 1024, mr->lkey, 512, &rs) == IBV_WC_SUCCESS &&
            rs == IBV_WC_SUCCESS, "SEND on a parent domain");
  /* An MR of the protection domain serves QPs of its parent domain. */
  struct ibv_mr *pmr = ibv_reg_mr(pd, buf, 4096, kRemote);
  CHECK(pmr && one_sided(&p, IBV_WR_RDMA_READ, buf + 3072, 64, mr->lkey, (uintptr_t)buf,
                         pmr->rkey) == IBV_WC_SUCCESS, "the PD's MR through the parent's QP");
  CHECK(ibv_dealloc_pd(parent) == EBUSY, "dealloc of a parent domain in use: EBUSY");
  pair_close(&p);
  CHECK(ibv_dereg_mr(mr) == 0, "dereg");
  if (pmr) ibv_dereg_mr(pmr);
  CHECK(ibv_dealloc_pd(parent) == EBUSY, "dealloc with its CQ alive: EBUSY");
  if (cq) ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
  CHECK(ibv_dealloc_pd(parent) == 0, "dealloc parent domain");
  CHECK(ibv_dealloc_td(td) == 0, "dealloc_td");
  free(buf);
}

int main(void) {
  g_page = sysconf(_SC_PAGESIZE);
  int num = 0;
  struct ibv_device **list = ibv_get_device_list(&num);
  REQUIRE(list && num >= 1, "no device");
  g_ctx = ibv_open_device(list[0]);
  REQUIRE(g_ctx, "open_device errno=%d", errno);
  REQUIRE(ibv_query_gid(g_ctx, 1, 0, &g_gid) == 0, "query_gid");
  struct ibv_pd *pd = ibv_alloc_pd(g_ctx);
  REQUIRE(pd, "alloc_pd");

  test_odp_caps();
  test_odp_explicit(pd);
  test_odp_implicit(pd);
  test_advise(pd);
  test_device_memory(pd);
  test_memory_windows(pd);
  test_import(pd);
  test_recv_protection(pd);
  test_domains(pd);

  CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd at the end");
  ibv_close_device(g_ctx);
  ibv_free_device_list(list);
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
