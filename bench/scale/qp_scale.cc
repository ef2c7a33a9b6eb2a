// qp_scale: what many QPs on one device cost (issue 17, "QPs per device").
//
//   qp_scale [-n MAX_QPS] [-d DEPTH] [-l LAT_ITERS]
//
// Creates idle RC QPs on one device in steps (0, 1k, 4k, 16k, 64k, ...
// up to MAX_QPS, or until creation fails), each moved to INIT, with DEPTH
// send and receive slots. After each step it measures, on one pair of QPs
// of the same device connected to each other:
//   - the creation cost of that step's QPs (median and slowest create+INIT)
//   - the memory each idle QP costs (resident set growth / QPs created)
//   - the round trip of an 8-byte signalled RDMA WRITE (median, p99)
// so the table shows whether the device's cost stays flat as QPs are added
// (a progress engine that scans every QP per pass would not). The QPs are
// not connected: an idle connected QP costs the same scans and memory.
//
// Runs over whatever libibverbs.so.1 the loader finds: run it with
// LD_LIBRARY_PATH=<build>/lib for softrnic. Prints one table row per step.
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

long ResidentKiB() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
  std::fclose(f);
  return pages_resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// What this machine charges for the first write to a fresh page of
// anonymous memory (mmap, one write per 4 KiB page, munmap): every QP
// create touches fresh memory for the QP and its queues, so this bounds
// how cheap a create can be here (a PVM guest measured ~20 us per page,
// bare metal well under 1).
double FreshPageTouchMicros() {
  constexpr size_t kBytes = 16 << 20;
  const auto t0 = Clock::now();
  void* m = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 0;
  auto* bytes = static_cast<volatile char*>(m);
  for (size_t off = 0; off < kBytes; off += 4096) bytes[off] = 1;
  const double us = Micros(Clock::now() - t0) / (kBytes / 4096);
  munmap(m, kBytes);
  return us;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

ibv_qp* NewRcQp(ibv_pd* pd, ibv_cq* cq, uint32_t depth) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = depth;
  init.cap.max_recv_wr = depth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &init);
  if (qp == nullptr) return nullptr;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    ibv_destroy_qp(qp);
    return nullptr;
  }
  return qp;
}

// INIT -> RTR -> RTS towards `remote_qpn` at `gid` (same device).
bool Connect(ibv_qp* qp, uint32_t remote_qpn, const ibv_gid& gid) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.sgid_index = 0;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return false;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

// Round trips of signalled 8-byte WRITEs from `qp` into `mr` (microseconds).
std::vector<double> WriteRoundTrips(ibv_qp* qp, ibv_cq* cq, ibv_mr* mr, int iters) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(iters));
  auto* buf = static_cast<uint8_t*>(mr->addr);
  for (int i = 0; i < iters; ++i) {
    ibv_sge sge{reinterpret_cast<uint64_t>(buf), 8, mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = static_cast<uint64_t>(i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(buf) + 4096;
    wr.wr.rdma.rkey = mr->rkey;
    const auto t0 = Clock::now();
    if (ibv_post_send(qp, &wr, &bad) != 0) return {};
    ibv_wc wc{};
    int n = 0;
    const auto give_up = t0 + std::chrono::seconds(10);
    while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && Clock::now() < give_up) {
    }
    if (n != 1 || wc.status != IBV_WC_SUCCESS) return {};
    out.push_back(Micros(Clock::now() - t0));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  long max_qps = 131072;
  uint32_t depth = 16;
  int lat_iters = 2000;
  for (int c; (c = getopt(argc, argv, "n:d:l:h")) != -1;) {
    switch (c) {
      case 'n': max_qps = std::atol(optarg); break;
      case 'd': depth = static_cast<uint32_t>(std::atoi(optarg)); break;
      case 'l': lat_iters = std::atoi(optarg); break;
      default:
        std::fprintf(stderr, "usage: qp_scale [-n MAX_QPS] [-d DEPTH] [-l LAT_ITERS]\n");
        return 2;
    }
  }
  int num = 0;
  ibv_device** list = ibv_get_device_list(&num);
  if (list == nullptr || num == 0) {
    std::fprintf(stderr, "qp_scale: no RDMA device\n");
    return 1;
  }
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_device_attr dattr{};
  ibv_gid gid{};
  if (ctx == nullptr || ibv_query_device(ctx, &dattr) || ibv_query_gid(ctx, 1, 0, &gid)) {
    std::fprintf(stderr, "qp_scale: cannot open or query %s\n", ibv_get_device_name(list[0]));
    return 1;
  }
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
  void* mem = nullptr;
  if (posix_memalign(&mem, 4096, 1 << 16) != 0) return 1;
  std::memset(mem, 0, 1 << 16);
  ibv_mr* mr = ibv_reg_mr(pd, mem, 1 << 16,
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ibv_qp* a = pd && cq ? NewRcQp(pd, cq, 64) : nullptr;
  ibv_qp* b = pd && cq ? NewRcQp(pd, cq, 64) : nullptr;
  if (mr == nullptr || a == nullptr || b == nullptr || !Connect(a, b->qp_num, gid) ||
      !Connect(b, a->qp_num, gid)) {
    std::fprintf(stderr, "qp_scale: setting up the measuring pair failed (errno %d)\n", errno);
    return 1;
  }
  std::printf("# device %s, max_qp %d, idle QPs with %u send + %u receive slots, in INIT\n",
              ibv_get_device_name(list[0]), dattr.max_qp, depth, depth);
  std::printf("# fresh page first touch: %.2f us per 4 KiB page\n", FreshPageTouchMicros());
  std::printf("%10s %12s %12s %14s %14s %14s\n", "idle_qps", "create_med", "create_max",
              "KiB_per_qp", "write_rtt_med", "write_rtt_p99");
  std::printf("%10s %12s %12s %14s %14s %14s\n", "", "us", "us", "", "us", "us");
  std::vector<ibv_qp*> idle;
  const long steps[] = {0, 1000, 4000, 16000, 64000, 131072, 262144};
  int rc = 0;
  for (long target : steps) {
    if (target > max_qps) break;
    std::vector<double> creates;
    const long rss_before = ResidentKiB();
    const size_t had = idle.size();
    bool full = false;
    while (static_cast<long>(idle.size()) < target) {
      const auto t0 = Clock::now();
      ibv_qp* qp = NewRcQp(pd, cq, depth);
      if (qp == nullptr) {
        std::printf("# creating QP %zu failed: %s\n", idle.size() + 1, std::strerror(errno));
        full = true;
        break;
      }
      creates.push_back(Micros(Clock::now() - t0));
      idle.push_back(qp);
    }
    const size_t added = idle.size() - had;
    const double per_qp =
        added ? static_cast<double>(ResidentKiB() - rss_before) / static_cast<double>(added) : 0;
    const std::vector<double> rtt = WriteRoundTrips(a, cq, mr, lat_iters);
    if (rtt.empty()) {
      std::printf("# the measuring pair failed with %zu idle QPs\n", idle.size());
      rc = 1;
      break;
    }
    std::printf("%10zu %12.1f %12.1f %14.2f %14.2f %14.2f\n", idle.size(), Percentile(creates, 0.5),
                creates.empty() ? 0.0 : *std::max_element(creates.begin(), creates.end()), per_qp,
                Percentile(rtt, 0.5), Percentile(rtt, 0.99));
    std::fflush(stdout);
    if (full) break;
  }
  const auto t0 = Clock::now();
  for (ibv_qp* qp : idle) ibv_destroy_qp(qp);
  std::printf("# destroyed %zu QPs in %.1f ms\n", idle.size(), Micros(Clock::now() - t0) / 1000);
  ibv_destroy_qp(a);
  ibv_destroy_qp(b);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  std::free(mem);
  return rc;
}
