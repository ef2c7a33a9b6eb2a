// shm_all_to_all: many processes on one host, every one connected to every
// other by an RC QP, exchange verified messages (issue 17, "processes on
// one host reaching one device over shared memory: 128, all-to-all, no
// fallback to UDP").
//
//   shm_all_to_all [-n PROCESSES] [-m MESSAGES] [-s BYTES] [-t SECONDS]
//                  [-T ACK_TIMEOUT] [-u K] [-v] [-k DIR]
//
// -T: the QPs' Local ACK Timeout field (default 20: 4.3 s per try); -u K:
// the first K processes run with SOFTRNIC_TRANSPORT=udp (mixed paths; their
// UDP packets are then expected); -v: every counter summed over the
// processes; -k DIR: each process's last counters file (with its per-QP
// lines) as DIR/process-<i>.stats and the QP numbers as DIR/qpns.tsv
// ("i j qpn": process i's QP toward j), to find a stuck pair.
//
// The parent forks PROCESSES children before any of them opens a device
// (a fork after a device's threads exist would copy a process in the
// middle of them). Each child opens the first device with a GID of its own
// (the per-process loopback address softrnic gives every process,
// docs/addressing.md), creates one RC QP per other child, publishes its
// GID and QP numbers in a shared table, connects every QP to its peer's,
// then SENDs MESSAGES messages of BYTES bytes to every peer and checks
// every message it receives byte for byte. Completions are awaited on a
// completion channel, so 128 processes share two CPUs without spinning.
//
// What "no fallback to UDP" means is read from softrnic's own counters:
// each child, once everyone is done, reads its live counters file
// ($SOFTRNIC_STATS_DIR or /dev/shm, softrnic-<pid>.stats: docs/hardening.md)
// and reports udp_tx_packets + udp_rx_packets (every RoCE packet sent or
// received over a UDP socket; doorbells, 8-byte wake-ups of a sleeping
// peer, are counted apart) and shm_tx_packets. Over another libibverbs the
// file does not exist and the counts print as -1.
//
// Prints one line of key=value pairs and exits 0 only if every message of
// every pair arrived intact and, where counters exist, no packet went over
// UDP.
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxProcesses = 512;

struct Options {
  int processes = 128;
  int messages = 2;
  uint32_t bytes = 4096;
  int timeout_s = 300;
  int ack_timeout = 20;   // -T: the QPs' Local ACK Timeout field (4.096 us x 2^T)
  bool verbose = false;  // -v: every counter, summed over the processes
  int udp_only = 0;      // -u K: processes 0..K-1 run with SOFTRNIC_TRANSPORT=udp (mixed paths)
  std::string keep_dir;  // -k: each process's last counters file, and the QPNs, kept here
};

// One child's row of the table the parent maps before forking.
struct Row {
  uint8_t gid[16];
  std::atomic<uint32_t> qpn[kMaxProcesses];  // qpn[j]: this child's QP toward child j
  // Results.
  std::atomic<int> done;  // 1: finished (ok or not)
  std::atomic<int> ok;
  std::atomic<uint64_t> verified;    // messages received intact
  std::atomic<int64_t> udp_packets;  // -1: counters not available
  std::atomic<int64_t> shm_packets;
  std::atomic<int64_t> retransmits;  // tx_retransmit_packets
  std::atomic<int64_t> rnr_naks;     // tx_rnr_naks
  std::atomic<int64_t> doorbells;    // shm_doorbells_sent
  char error[160];
  char counters[65536];  // the counters file as read at the end (-v, -k)
};

struct Shared {
  std::atomic<int> barrier[4];
  std::atomic<int> abort;
  double setup_s[kMaxProcesses];
  double exchange_s[kMaxProcesses];
  Row rows[kMaxProcesses];
};

// The byte `at` of message k from child `src` to child `dst`.
uint8_t Pattern(int src, int dst, int k, uint32_t at) {
  return static_cast<uint8_t>(src * 131 + dst * 31 + k * 17 + at * 7 + 1);
}

// Waits until all `n` processes reached barrier `b` (or someone aborted).
bool Barrier(Shared* sh, int b, int n, Clock::time_point deadline) {
  sh->barrier[b].fetch_add(1);
  while (sh->barrier[b].load() < n) {
    if (sh->abort.load() != 0 || Clock::now() > deadline) return false;
    usleep(500);
  }
  return true;
}

bool IsOwnLoopback(const ibv_gid& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  // ::ffff:127.a.b.c with a != 0: softrnic's per-process loopback address
  // (127.0.0.1 is shared by every process and never a device's own).
  return std::memcmp(g.raw, prefix, 12) == 0 && g.raw[12] == 127 && g.raw[13] != 0;
}

struct Counters {
  int64_t udp = -1, shm = -1, retransmits = -1, rnr_naks = -1, doorbells = -1;
};

// This process's live counters (stats_publisher.h); -1s if there is none.
// The file's text goes to `text` too (up to `size` bytes).
Counters ReadCounters(char* text, size_t size) {
  Counters c;
  const char* dir = std::getenv("SOFTRNIC_STATS_DIR");
  const std::string path = std::string(dir != nullptr && *dir ? dir : "/dev/shm") +
                           "/softrnic-" + std::to_string(getpid()) + ".stats";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return c;
  char line[512];
  char key[96];
  long long value = 0;
  int64_t udp_tx = -1, udp_rx = -1, shm_tx = -1;
  size_t used = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    const size_t len = std::strlen(line);
    if (used + len < size) {
      std::memcpy(text + used, line, len + 1);
      used += len;
    }
    if (std::sscanf(line, "%95s %lld", key, &value) != 2) continue;
    if (std::strcmp(key, "udp_tx_packets") == 0) udp_tx = value;
    if (std::strcmp(key, "udp_rx_packets") == 0) udp_rx = value;
    if (std::strcmp(key, "shm_tx_packets") == 0) shm_tx = value;
    if (std::strcmp(key, "tx_retransmit_packets") == 0) c.retransmits = value;
    if (std::strcmp(key, "tx_rnr_naks") == 0) c.rnr_naks = value;
    if (std::strcmp(key, "shm_doorbells_sent") == 0) c.doorbells = value;
  }
  std::fclose(f);
  if (udp_tx >= 0 && udp_rx >= 0) c.udp = udp_tx + udp_rx;
  c.shm = shm_tx;
  return c;
}

class Child {
 public:
  Child(const Options& o, Shared* sh, int me) : o_(o), sh_(sh), me_(me), row_(sh->rows[me]) {}
  ~Child() {
    for (ibv_qp* q : qps_)
      if (q != nullptr) ibv_destroy_qp(q);
    if (mr_ != nullptr) ibv_dereg_mr(mr_);
    if (cq_ != nullptr) ibv_destroy_cq(cq_);
    if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
    if (pd_ != nullptr) ibv_dealloc_pd(pd_);
    if (ctx_ != nullptr) ibv_close_device(ctx_);
  }

  int Run() {
    deadline_ = Clock::now() + std::chrono::seconds(o_.timeout_s);
    const auto t0 = Clock::now();
    if (!Open() || !CreateQps()) return Fail();
    if (!Barrier(sh_, 0, o_.processes, deadline_)) return Fail("barrier 0 (QPs published)");
    if (!ConnectAll() || !PostReceives()) return Fail();
    if (!Barrier(sh_, 1, o_.processes, deadline_)) return Fail("barrier 1 (receives posted)");
    const auto t1 = Clock::now();
    if (!SendAll() || !Complete()) return Fail();
    const auto t2 = Clock::now();
    sh_->setup_s[me_] = std::chrono::duration<double>(t1 - t0).count();
    sh_->exchange_s[me_] = std::chrono::duration<double>(t2 - t1).count();
    // Everyone done before anyone tears down: a peer's last ACK may still
    // be on its way to us.
    if (!Barrier(sh_, 2, o_.processes, deadline_)) return Fail("barrier 2 (all verified)");
    // The counters file is rewritten at most every 100 ms.
    usleep(350 * 1000);
    const Counters c = ReadCounters(row_.counters, sizeof(row_.counters));
    row_.udp_packets.store(c.udp);
    row_.shm_packets.store(c.shm);
    row_.retransmits.store(c.retransmits);
    row_.rnr_naks.store(c.rnr_naks);
    row_.doorbells.store(c.doorbells);
    row_.ok.store(1);
    row_.done.store(1);
    // Stay until every process has read its counters: our exit would not
    // change theirs, but keep the device up while others still measure.
    Barrier(sh_, 3, o_.processes, deadline_);
    return 0;
  }

 private:
  int Fail(const char* what = nullptr) {
    if (what != nullptr) error_ = what;
    std::snprintf(row_.error, sizeof(row_.error), "%s", error_.c_str());
    sh_->abort.store(1);
    if (!o_.keep_dir.empty()) {
      // The counters as they stand (per QP too) for -k: the file is
      // rewritten at most every 100 ms.
      usleep(350 * 1000);
      ReadCounters(row_.counters, sizeof(row_.counters));
    }
    row_.ok.store(0);
    row_.done.store(1);
    return 1;
  }
  bool Error(const std::string& what) {
    error_ = what + ": " + std::strerror(errno);
    return false;
  }

  bool Open() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr || n == 0) return Error("no RDMA device");
    ctx_ = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (ctx_ == nullptr) return Error("ibv_open_device");
    ibv_port_attr port{};
    if (ibv_query_port(ctx_, 1, &port) != 0) return Error("ibv_query_port");
    mtu_ = port.active_mtu;
    gid_index_ = -1;
    for (int i = 0; i < port.gid_tbl_len && gid_index_ < 0; ++i) {
      ibv_gid g{};
      if (ibv_query_gid(ctx_, 1, i, &g) == 0 && IsOwnLoopback(g)) {
        gid_index_ = i;
        std::memcpy(row_.gid, g.raw, 16);
      }
    }
    if (gid_index_ < 0) {
      errno = ENOENT;
      return Error("no per-process loopback GID (127.a.b.c, a != 0)");
    }
    pd_ = ibv_alloc_pd(ctx_);
    channel_ = ibv_create_comp_channel(ctx_);
    if (pd_ == nullptr || channel_ == nullptr) return Error("ibv_alloc_pd / ibv_create_comp_channel");
    // The channel is polled with a timeout, so a lost event shows as a hang
    // report instead of a hang.
    fcntl(channel_->fd, F_SETFL, fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
    const int per_peer = o_.messages;
    const int cqe = 2 * (o_.processes - 1) * per_peer + 16;
    cq_ = ibv_create_cq(ctx_, cqe, nullptr, channel_, 0);
    if (cq_ == nullptr) return Error("ibv_create_cq");
    // [send area | receive area], one slot of `bytes` per peer and message.
    slots_ = size_t(o_.processes) * size_t(per_peer);
    buf_.assign(2 * slots_ * o_.bytes, 0);
    mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE);
    if (mr_ == nullptr) return Error("ibv_reg_mr");
    return true;
  }

  uint8_t* Slot(bool recv, int peer, int k) {
    return buf_.data() + (recv ? slots_ * o_.bytes : 0) +
           (size_t(peer) * o_.messages + k) * o_.bytes;
  }

  bool CreateQps() {
    qps_.assign(o_.processes, nullptr);
    for (int j = 0; j < o_.processes; ++j) {
      if (j == me_) continue;
      ibv_qp_init_attr a{};
      a.send_cq = cq_;
      a.recv_cq = cq_;
      a.qp_type = IBV_QPT_RC;
      a.cap.max_send_wr = o_.messages;
      a.cap.max_recv_wr = o_.messages;
      a.cap.max_send_sge = 1;
      a.cap.max_recv_sge = 1;
      qps_[j] = ibv_create_qp(pd_, &a);
      if (qps_[j] == nullptr) return Error("ibv_create_qp toward " + std::to_string(j));
      ibv_qp_attr m{};
      m.qp_state = IBV_QPS_INIT;
      m.port_num = 1;
      m.pkey_index = 0;
      m.qp_access_flags = 0;
      if (ibv_modify_qp(qps_[j], &m,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
        return Error("INIT");
      row_.qpn[j].store(qps_[j]->qp_num);
    }
    return true;
  }

  bool ConnectAll() {
    for (int j = 0; j < o_.processes; ++j) {
      if (j == me_) continue;
      ibv_qp_attr m{};
      m.qp_state = IBV_QPS_RTR;
      m.path_mtu = mtu_;
      m.dest_qp_num = sh_->rows[j].qpn[me_].load();
      m.rq_psn = 0;
      m.max_dest_rd_atomic = 1;
      m.min_rnr_timer = 12;
      m.ah_attr.is_global = 1;
      std::memcpy(m.ah_attr.grh.dgid.raw, sh_->rows[j].gid, 16);
      m.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
      m.ah_attr.grh.hop_limit = 64;
      m.ah_attr.port_num = 1;
      if (ibv_modify_qp(qps_[j], &m,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
        return Error("RTR toward " + std::to_string(j));
      ibv_qp_attr s{};
      s.qp_state = IBV_QPS_RTS;
      // Default 20, 4.3 s per try: 128 processes share two CPUs, and a
      // peer may wait long for its turn to answer.
      s.timeout = static_cast<uint8_t>(o_.ack_timeout);
      s.retry_cnt = 7;
      s.rnr_retry = 7;
      s.sq_psn = 0;
      s.max_rd_atomic = 1;
      if (ibv_modify_qp(qps_[j], &s,
                        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                            IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
        return Error("RTS toward " + std::to_string(j));
    }
    return true;
  }

  static uint64_t WrId(bool recv, int peer, int k) {
    return (uint64_t{recv} << 63) | (uint64_t(peer) << 16) | uint64_t(k);
  }

  bool PostReceives() {
    for (int j = 0; j < o_.processes; ++j) {
      if (j == me_) continue;
      for (int k = 0; k < o_.messages; ++k) {
        ibv_sge sge{reinterpret_cast<uintptr_t>(Slot(true, j, k)), o_.bytes, mr_->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = WrId(true, j, k);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        if (ibv_post_recv(qps_[j], &wr, &bad) != 0) return Error("ibv_post_recv");
      }
    }
    return true;
  }

  bool SendAll() {
    // Peers in a different order in each process, so the 127 senders do
    // not all start with the same target.
    for (int step = 1; step < o_.processes; ++step) {
      const int j = (me_ + step) % o_.processes;
      for (int k = 0; k < o_.messages; ++k) {
        uint8_t* p = Slot(false, j, k);
        for (uint32_t at = 0; at < o_.bytes; ++at) p[at] = Pattern(me_, j, k, at);
        ibv_sge sge{reinterpret_cast<uintptr_t>(p), o_.bytes, mr_->lkey};
        ibv_send_wr wr{};
        wr.wr_id = WrId(false, j, k);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        ibv_send_wr* bad = nullptr;
        if (ibv_post_send(qps_[j], &wr, &bad) != 0) return Error("ibv_post_send");
      }
    }
    return true;
  }

  bool Check(const ibv_wc& wc) {
    const bool recv = (wc.wr_id >> 63) != 0;
    const int peer = static_cast<int>((wc.wr_id >> 16) & 0xffff);
    const int k = static_cast<int>(wc.wr_id & 0xffff);
    if (wc.status != IBV_WC_SUCCESS) {
      errno = EIO;
      return Error(std::string(recv ? "receive from " : "send to ") + std::to_string(peer) + ": " +
                   ibv_wc_status_str(wc.status));
    }
    if (!recv) {
      ++sends_done_;
      return true;
    }
    ++recvs_done_;
    const uint8_t* p = Slot(true, peer, k);
    bool intact = wc.byte_len == o_.bytes;
    for (uint32_t at = 0; intact && at < o_.bytes; ++at) intact = p[at] == Pattern(peer, me_, k, at);
    if (!intact) {
      errno = EBADMSG;
      return Error("message " + std::to_string(k) + " from " + std::to_string(peer) + " corrupt");
    }
    row_.verified.fetch_add(1);
    return true;
  }

  bool Complete() {
    const uint64_t want = uint64_t(o_.processes - 1) * o_.messages;
    ibv_wc wc[32];
    while (sends_done_ < want || recvs_done_ < want) {
      int n = ibv_poll_cq(cq_, 32, wc);
      if (n < 0) return Error("ibv_poll_cq");
      for (int i = 0; i < n; ++i)
        if (!Check(wc[i])) return false;
      if (n > 0) continue;
      // Nothing: arm, look once more (a completion may have come in
      // between), then sleep on the channel.
      if (ibv_req_notify_cq(cq_, 0) != 0) return Error("ibv_req_notify_cq");
      n = ibv_poll_cq(cq_, 32, wc);
      for (int i = 0; i < n; ++i)
        if (!Check(wc[i])) return false;
      if (n > 0) continue;
      pollfd pfd{channel_->fd, POLLIN, 0};
      if (poll(&pfd, 1, 1000) < 0 && errno != EINTR) return Error("poll");
      ibv_cq* ev_cq = nullptr;
      void* ev_ctx = nullptr;
      if ((pfd.revents & POLLIN) && ibv_get_cq_event(channel_, &ev_cq, &ev_ctx) == 0)
        ibv_ack_cq_events(ev_cq, 1);
      if (sh_->abort.load() != 0) {
        errno = ECANCELED;
        return Error("another process failed");
      }
      if (Clock::now() > deadline_) {
        errno = ETIMEDOUT;
        return Error("sends " + std::to_string(sends_done_) + "/" + std::to_string(want) +
                     ", receives " + std::to_string(recvs_done_) + "/" + std::to_string(want));
      }
    }
    return true;
  }

  const Options& o_;
  Shared* sh_;
  const int me_;
  Row& row_;
  Clock::time_point deadline_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<ibv_qp*> qps_;
  std::vector<uint8_t> buf_;
  size_t slots_ = 0;
  ibv_mtu mtu_ = IBV_MTU_1024;
  int gid_index_ = -1;
  uint64_t sends_done_ = 0;
  uint64_t recvs_done_ = 0;
  std::string error_ = "failed";
};

// -v: each numeric counter of the processes' counters files, summed, in
// the files' order; zeros left out.
void PrintCounterSums(const Shared& sh, int processes) {
  std::vector<std::pair<std::string, long long>> sums;
  for (int i = 0; i < processes; ++i) {
    const char* text = sh.rows[i].counters;
    const char* end = text + ::strnlen(text, sizeof(sh.rows[i].counters));
    while (text < end) {
      const char* nl = std::find(text, end, '\n');
      const std::string line(text, nl);
      text = nl + 1;
      char key[96];
      long long value = 0;
      char rest = 0;
      // "key number" only (not "gid 0 ::ffff:..", "qp ..", "comm ..").
      if (std::sscanf(line.c_str(), "%95s %lld %c", key, &value, &rest) != 2) continue;
      const std::string k(key);
      if (k == "pid" || k == "time_ns" || k == "seq" || k == "softrnic-stats" || k == "qps") continue;
      auto it = std::find_if(sums.begin(), sums.end(), [&](const auto& kv) { return kv.first == k; });
      if (it == sums.end())
        sums.emplace_back(k, value);
      else
        it->second += value;
    }
  }
  for (const auto& [k, v] : sums)
    if (v != 0) std::printf("# %s %lld\n", k.c_str(), v);
}

// -k DIR: DIR/process-<i>.stats (that process's last counters file, with
// its per-QP lines) and DIR/qpns.tsv ("i j qpn": process i's QP toward j).
void KeepCounters(const Shared& sh, int processes, const std::string& dir) {
  FILE* q = std::fopen((dir + "/qpns.tsv").c_str(), "w");
  for (int i = 0; i < processes; ++i) {
    const std::string path = dir + "/process-" + std::to_string(i) + ".stats";
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      std::fputs(sh.rows[i].counters, f);
      std::fclose(f);
    }
    for (int j = 0; q != nullptr && j < processes; ++j)
      if (j != i) std::fprintf(q, "%d\t%d\t%u\n", i, j, sh.rows[i].qpn[j].load());
  }
  if (q != nullptr) std::fclose(q);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int c; (c = getopt(argc, argv, "n:m:s:t:T:vk:u:")) != -1;) {
    switch (c) {
      case 'n': o.processes = std::atoi(optarg); break;
      case 'm': o.messages = std::atoi(optarg); break;
      case 's': o.bytes = static_cast<uint32_t>(std::atol(optarg)); break;
      case 't': o.timeout_s = std::atoi(optarg); break;
      case 'T': o.ack_timeout = std::atoi(optarg); break;
      case 'v': o.verbose = true; break;
      case 'k': o.keep_dir = optarg; break;
      case 'u': o.udp_only = std::atoi(optarg); break;
      default:
        std::fprintf(stderr, "usage: %s [-n PROCESSES] [-m MESSAGES] [-s BYTES] [-t SECONDS] [-T ACK_TIMEOUT] [-v] [-k DIR]\n",
                     argv[0]);
        return 2;
    }
  }
  if (o.processes < 2 || o.processes > kMaxProcesses || o.messages < 1 || o.messages > 0xffff ||
      o.bytes < 1 || o.bytes > (64u << 20) || o.timeout_s < 1 || o.ack_timeout < 0 ||
      o.ack_timeout > 31) {
    std::fprintf(stderr, "shm_all_to_all: -n 2..%d, -m 1..65535, -s 1..64 MiB, -t >= 1, -T 0..31\n",
                 kMaxProcesses);
    return 2;
  }
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  auto* sh = new (mem) Shared();
  const auto t0 = Clock::now();
  std::vector<pid_t> pids;
  for (int i = 0; i < o.processes; ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      sh->abort.store(1);
      break;
    }
    if (pid == 0) {
      if (i < o.udp_only) setenv("SOFTRNIC_TRANSPORT", "udp", 1);
      int rc;
      {
        Child child(o, sh, i);
        rc = child.Run();
      }
      // exit, not _exit: softrnic's exit handler removes the counters file.
      std::exit(rc);
    }
    pids.push_back(pid);
  }
  int exited_ok = 0;
  for (pid_t pid : pids) {
    int status = 0;
    if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      ++exited_ok;
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();

  const uint64_t expected = uint64_t(o.processes) * (o.processes - 1) * o.messages;
  uint64_t verified = 0;
  int64_t udp = 0, shm = 0, retransmits = 0, rnr_naks = 0, doorbells = 0;
  bool counters = true;
  int ok = 0, gave_up = 0;
  std::vector<double> setup, exchange;
  for (int i = 0; i < o.processes; ++i) {
    const Row& r = sh->rows[i];
    verified += r.verified.load();
    if (r.ok.load() != 0) {
      ++ok;
      setup.push_back(sh->setup_s[i]);
      exchange.push_back(sh->exchange_s[i]);
    } else if (std::strncmp(r.error, "another process failed", 22) == 0) {
      ++gave_up;  // stopped because of the failure reported below
    } else if (r.error[0] != '\0') {
      std::fprintf(stderr, "# process %d: %s\n", i, r.error);
    }
    if (r.udp_packets.load() < 0 || r.shm_packets.load() < 0) {
      counters = false;
    } else {
      udp += r.udp_packets.load();
      shm += r.shm_packets.load();
      retransmits += r.retransmits.load();
      rnr_naks += r.rnr_naks.load();
      doorbells += r.doorbells.load();
    }
  }
  if (gave_up > 0) std::fprintf(stderr, "# %d other processes stopped after that failure\n", gave_up);
  if (!counters || ok < o.processes) udp = shm = retransmits = rnr_naks = doorbells = -1;
  // -u: UDP is expected (the processes told to use it), not a fallback.
  const bool pass = exited_ok == o.processes && verified == expected && (o.udp_only > 0 || udp <= 0);
  if (o.verbose && !exchange.empty()) {
    std::sort(exchange.begin(), exchange.end());
    std::printf("# exchange_s min %.3f p10 %.3f p50 %.3f p90 %.3f max %.3f\n", exchange.front(),
                exchange[exchange.size() / 10], exchange[exchange.size() / 2],
                exchange[exchange.size() * 9 / 10], exchange.back());
  }
  std::printf(
      "processes=%d messages_per_pair=%d bytes=%u verified=%llu expected=%llu "
      "udp_packets=%lld shm_packets=%lld retransmits=%lld rnr_naks=%lld doorbells=%lld setup_s=%.3f exchange_s=%.3f wall_s=%.3f result=%s\n",
      o.processes, o.messages, o.bytes, static_cast<unsigned long long>(verified),
      static_cast<unsigned long long>(expected), static_cast<long long>(udp),
      static_cast<long long>(shm), static_cast<long long>(retransmits),
      static_cast<long long>(rnr_naks), static_cast<long long>(doorbells), Median(setup), Median(exchange), wall, pass ? "ok" : "FAILED");
  if (o.verbose) PrintCounterSums(*sh, o.processes);
  if (!o.keep_dir.empty()) KeepCounters(*sh, o.processes, o.keep_dir);
  munmap(mem, sizeof(Shared));
  return pass ? 0 : 1;
}
