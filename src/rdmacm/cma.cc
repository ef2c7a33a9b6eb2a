// softrnic's rdma_cm: the librdmacm API over softrnic's libibverbs.so.1.
//
// Connection management is done in user space by this library, the way the
// kernel's ib_cm + rdma_cm do it for a hardware RNIC: IBA CM MADs (REQ, REP,
// RTU, REJ, DREQ, DREP, SIDR_REQ, SIDR_REP; mad.h) carried as UD SENDs on the
// device's QP1 (Q_Key 0x80010000), with rdma_cm's IP header in the REQ private
// data. A CM thread per process receives MADs from QP1 and drives retries and
// timeouts. See docs/rdmacm.md for the design and its limits. This file is
// the API and the QP1 plumbing; the CM protocol (MAD handlers, who may change
// a connection) is cm_protocol.cc, the event channels cm_channel.cc, what
// they share cm_internal.h.
//
// Locking: one mutex (Cm::mu) guards every id and the CM's tables; each event
// channel has its own mutex for its queue. Nothing blocks while holding Cm::mu.
#include "rdmacm/cma.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/secure_random.h"
#include "rdmacm/cm_internal.h"
#include "rdmacm/host_registry.h"
#include "rdmacm/mad.h"

namespace softrnic::rdmacm {

// ---------------------------------------------------------------- tunables
// Retransmission of REQ / REP / DREQ / SIDR_REQ: every kRetryMs, kRetries
// times, then the timeout event. SOFTRNIC_CM_TIMEOUT_MS overrides the
// interval, SOFTRNIC_CM_RETRIES the count.
int RetryMs() {
  static int v = [] {
    const char* s = getenv("SOFTRNIC_CM_TIMEOUT_MS");
    int x = s ? atoi(s) : 0;
    return x > 0 ? x : 500;
  }();
  return v;
}
int Retries() {
  static int v = [] {
    const char* s = getenv("SOFTRNIC_CM_RETRIES");
    int x = s ? atoi(s) : -1;
    return x >= 0 ? x : 9;
  }();
  return v;
}
bool Debug() {
  static bool v = getenv("SOFTRNIC_CM_DEBUG") != nullptr;
  return v;
}

// Never destroyed: the CM thread may outlive static destructors. A forked
// child starts over with a fresh CM (its own device, QP1 and thread, as the
// verbs shim gives it its own device); ids inherited from the parent are not
// usable in the child.
Cm* g_cm = new Cm;
Cm& G() { return *g_cm; }
void AtForkChild() { g_cm = new Cm; }

// ---------------------------------------------------------------- helpers
void SetGidFromIp(ibv_gid* g, uint32_t ip_host) {
  std::memset(g, 0, sizeof(*g));
  g->raw[10] = 0xff;
  g->raw[11] = 0xff;
  uint32_t n = htonl(ip_host);
  std::memcpy(&g->raw[12], &n, 4);
}
uint32_t IpFromGid(const uint8_t* raw) {
  uint32_t n;
  std::memcpy(&n, raw + 12, 4);
  return ntohl(n);
}
std::string IpStr(uint32_t ip_host) {
  in_addr a{htonl(ip_host)};
  char b[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, b, sizeof b);
  return b;
}

int GidIndexForIp(uint32_t ip) {
  Cm& g = G();
  for (size_t i = 0; i < g.gid_ip.size(); ++i)
    if (g.gid_ip[i] == ip && ip) return int(i);
  return -1;
}

bool IsLocalIp(uint32_t ip) {
  if ((ip >> 24) == 127) return true;
  if (GidIndexForIp(ip) >= 0) return true;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return false;
  bool found = false;
  for (ifaddrs* p = ifa; p; p = p->ifa_next) {
    if (p->ifa_addr && p->ifa_addr->sa_family == AF_INET &&
        ntohl(reinterpret_cast<sockaddr_in*>(p->ifa_addr)->sin_addr.s_addr) == ip) {
      found = true;
      break;
    }
  }
  freeifaddrs(ifa);
  return found;
}

// The source address the kernel would use to reach `dst` (0 and errno-style
// error if there is no route).
int RouteSource(uint32_t dst, uint32_t* src) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(4791);
  a.sin_addr.s_addr = htonl(dst);
  int rc = 0;
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    rc = errno;
  } else {
    socklen_t l = sizeof a;
    if (getsockname(s, reinterpret_cast<sockaddr*>(&a), &l) != 0)
      rc = errno;
    else
      *src = ntohl(a.sin_addr.s_addr);
  }
  close(s);
  return rc;
}

uint16_t SinPort(const sockaddr_in& s) { return ntohs(s.sin_port); }

// ---------------------------------------------------------------- host registry
// Same-host listeners are found through the per-user registry
// (rdmacm/host_registry.h: /dev/shm/softrnic-cm-<euid>, security review H3).
// Called with G().mu held.
HostRegistry& Registry() {
  static HostRegistry* registry = new HostRegistry(HostRegistry::DefaultDirectory(),  // outlives exit
                                                     HostRegistry::FallbackDirectory());
  return *registry;
}

bool RegRead(int ps, uint16_t port, long* pid, uint32_t* ip) {
  const std::optional<RegistryEntry> e = Registry().Lookup(G().netns, ps, port);
  if (!e) return false;
  *pid = e->pid;
  *ip = e->ip;
  return true;
}

int RegAdd(int ps, uint16_t port) {
  Cm& g = G();
  if (g.loop_idx < 0) return 0;  // nothing to publish (explicit SOFTRNIC_BIND)
  return Registry().Add(g.netns, ps, port, g.gid_ip[g.loop_idx]);
}

void RegRemove(int ps, uint16_t port) { Registry().Remove(G().netns, ps, port); }

// ---------------------------------------------------------------- devices
ibv_pd* DefaultPd(ibv_context* ctx) {
  Cm& g = G();
  auto it = g.default_pd.find(ctx);
  if (it != g.default_pd.end()) return it->second;
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (pd) g.default_pd[ctx] = pd;
  return pd;
}

// Binds the id to the process's device, as librdmacm's ucma_get_device
// does: verbs context, port and the device's shared PD (rdma_cm_id.pd is
// set as soon as the id has a device; applications and pyverbs read it
// before they create a QP).
void AttachDevice(Id* id) {
  Cm& g = G();
  id->id.verbs = g.ctx;
  id->id.port_num = 1;
  if (!id->id.pd) id->id.pd = DefaultPd(g.ctx);
}

// ---------------------------------------------------------------- QP transitions
void QpToErr(Id* id) {
  if (!id->id.qp) return;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(id->id.qp, &a, IBV_QP_STATE);
}

int InitQpAttr(Id* id, ibv_qp_attr* a, int* mask) {
  bool ud = id->id.qp_type == IBV_QPT_UD;
  switch (a->qp_state) {
    case IBV_QPS_INIT:
      a->pkey_index = 0;
      a->port_num = 1;
      if (ud) {
        a->qkey = RDMA_UDP_QKEY;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
      } else {
        a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                             IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR:
      if (ud) {
        *mask = IBV_QP_STATE;
        return 0;
      }
      if (!id->remote_qpn) return EINVAL;
      a->path_mtu = IBV_MTU_1024;
      a->dest_qp_num = id->remote_qpn;
      a->rq_psn = id->remote_psn;
      a->max_dest_rd_atomic = id->resp_res;
      a->min_rnr_timer = 12;
      std::memset(&a->ah_attr, 0, sizeof a->ah_attr);
      a->ah_attr.is_global = 1;
      a->ah_attr.grh.dgid = id->dgid;
      a->ah_attr.grh.sgid_index = uint8_t(id->sgid_index);
      a->ah_attr.grh.hop_limit = 64;
      a->ah_attr.grh.traffic_class = id->tos;
      a->ah_attr.port_num = 1;
      *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      return 0;
    case IBV_QPS_RTS:
      a->sq_psn = ud ? 0 : id->local_psn;
      if (ud) {
        *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        return 0;
      }
      a->timeout = id->ack_timeout;
      a->retry_cnt = id->retry_cnt;
      a->rnr_retry = id->rnr_retry;
      a->max_rd_atomic = id->init_depth;
      *mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
              IBV_QP_MAX_QP_RD_ATOMIC;
      return 0;
    default:
      return EINVAL;
  }
}

int ModifyTo(Id* id, ibv_qp_state s) {
  ibv_qp_attr a{};
  int mask = 0;
  a.qp_state = s;
  int rc = InitQpAttr(id, &a, &mask);
  if (rc) return rc;
  return ibv_modify_qp(id->id.qp, &a, mask);
}

int QpToRts(Id* id) {
  if (!id->id.qp) return 0;
  int rc = ModifyTo(id, IBV_QPS_RTR);
  if (!rc) rc = ModifyTo(id, IBV_QPS_RTS);
  if (rc) CM_DBG("modify QP to RTR/RTS failed: %d", rc);
  return rc;
}

void SendOrDefer(Id* id, const CmMsg& m, Timer t, bool defer) {
  id->invalid_sid_retries = kLookups;
  if (!defer) {
    SendMsg(id->sgid_index, id->dgid, m, id);
    ArmTimer(id, t);
    return;
  }
  EncodeCm(m, id->last_mad);
  id->have_last = true;
  id->pending_lookup = true;
  id->lookups_left = kLookups;
  id->timer = t;
  id->deadline = Clock::now() + std::chrono::milliseconds(kLookupMs);
}

uint8_t ClampRd(uint8_t v) { return v > kMaxRdAtomic ? kMaxRdAtomic : v; }

void RunTimers() {
  auto now = Clock::now();
  for (Id* id : G().ids) {
    if (id->timer == Timer::kNone || now < id->deadline) continue;
    if (id->pending_lookup) {
      long pid;
      uint32_t lip;
      if (RegRead(id->id.ps, SinPort(id->id.route.addr.dst_sin), &pid, &lip)) {
        id->pending_lookup = false;
        SetGidFromIp(&id->dgid, lip);
        id->id.route.addr.addr.ibaddr.dgid = id->dgid;
        if (id->id.route.path_rec) id->id.route.path_rec->dgid = id->dgid;
        if (id->id.qp_type != IBV_QPT_UD) std::memcpy(id->last_mad + kMadHeader + 72, id->dgid.raw, 16);
        SendRaw(id->sgid_index, id->dgid, id->last_mad);
        ArmTimer(id, id->timer);
      } else if (--id->lookups_left > 0) {
        id->deadline = now + std::chrono::milliseconds(kLookupMs);
      } else {
        // Nobody on this host listens on the port: what the destination's
        // CM answers (REJ, invalid service ID), without a round trip.
        id->pending_lookup = false;
        StopTimer(id);
        id->st = St::kRejected;
        bool ud = id->id.qp_type == IBV_QPT_UD;
        Simple(id, ud ? RDMA_CM_EVENT_UNREACHABLE : RDMA_CM_EVENT_REJECTED,
               ud ? -ECONNREFUSED : kRejInvalidServiceId);
      }
      continue;
    }
    if (id->retries_left > 0 && id->have_last) {
      --id->retries_left;
      id->deadline = now + std::chrono::milliseconds(RetryMs());
      CM_DBG("retransmit");
      SendRaw(id->sgid_index, id->dgid, id->last_mad);
      continue;
    }
    Timer t = id->timer;
    StopTimer(id);
    switch (t) {
      case Timer::kReq:
      case Timer::kSidr:
        id->st = St::kError;
        // The QP is the application's: it moves it (rdma_disconnect) or destroys it,
        // possibly right now on its own thread, so the CM thread leaves it alone
        // (as rdma-core's librdmacm does).
        Simple(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
        break;
      case Timer::kRep:
        id->st = St::kError;
        // The QP is the application's: it moves it (rdma_disconnect) or destroys it,
        // possibly right now on its own thread, so the CM thread leaves it alone
        // (as rdma-core's librdmacm does).
        Simple(id, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
        break;
      case Timer::kDreq:
        id->st = St::kDisconnected;
        Simple(id, RDMA_CM_EVENT_DISCONNECTED, 0);
        break;
      case Timer::kNone: break;
    }
  }
}

void PollGsiCq() {
  Cm& g = G();
  ibv_wc wc[16];
  int n;
  while ((n = ibv_poll_cq(g.cq, 16, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      if (!(wc[i].wr_id & kRecvTag)) {  // send completion
        g.send_slots.Completed();
        continue;
      }
      int slot = int(wc[i].wr_id & 0xffffffff);
      uint8_t* b = g.bufs + size_t(kSendSlots + slot) * kSlotSize;
      if (wc[i].status == IBV_WC_SUCCESS) HandleMad(b, wc[i].byte_len);
      ibv_sge sge{reinterpret_cast<uintptr_t>(b), kSlotSize, g.mr->lkey};
      ibv_recv_wr wr{}, *bad = nullptr;
      wr.wr_id = kRecvTag | uint64_t(slot);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      ibv_post_recv(g.qp, &wr, &bad);
    }
  }
}

void CmThread() {
  Cm& g = G();
  for (;;) {
    pollfd p{g.cc->fd, POLLIN, 0};
    poll(&p, 1, 50);
    if (p.revents & POLLIN) {
      ibv_cq* cq;
      void* ctx;
      if (ibv_get_cq_event(g.cc, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
    }
    ibv_req_notify_cq(g.cq, 0);
    std::lock_guard<std::mutex> l(g.mu);
    PollGsiCq();
    RunTimers();
    ReclaimUnclaimedRequests();
  }
}

// ---------------------------------------------------------------- start-up
std::string NetnsId() {
  char b[128] = {};
  ssize_t n = readlink("/proc/self/ns/net", b, sizeof b - 1);
  std::string s;
  for (ssize_t i = 0; i < n; ++i)
    if (b[i] >= '0' && b[i] <= '9') s += b[i];
  return s.empty() ? "0" : s;
}

// At exit, tell the peers of connected ids, as the kernel's CM does when a
// process's rdma_cm fd is closed: a DREQ each, then passes over QP1's CQ
// until the engine has transmitted them and the DREPs are in. A DREQ lost on
// the way would leave the peer waiting for a disconnect that nothing else
// announces (the kernel's CM keeps retrying after the process is gone), so
// an unanswered one is sent again every 30 ms, for at most ~300 ms
// in all. (Seen: rping's server waiting forever at 10 % loss when the
// client's DREQ and its one copy at exit were both dropped.)
void DisconnectAllAtExit() {
  Cm& g = G();
  if (!g.started || g.exited) return;
  std::unique_lock<std::mutex> l(g.mu, std::defer_lock);
  for (int i = 0; i < 200 && !l.try_lock(); ++i) usleep(500);  // the CM thread's pass
  if (!l.owns_lock()) return;
  g.exited = true;  // once: a handler inherited across fork finds it done
  std::vector<Id*> told;
  const auto send_dreq = [](Id* id) {
    CmMsg m;
    m.attr = kAttrDreq;
    m.local_comm_id = id->local_comm_id;
    m.remote_comm_id = id->remote_comm_id;
    m.qpn = id->remote_qpn;
    SendMsg(id->sgid_index, id->dgid, m);
  };
  for (Id* id : g.ids) {
    if (id->id.qp_type == IBV_QPT_UD) continue;
    if (id->st != St::kConnected && id->st != St::kRepSent && id->st != St::kRepRcvd &&
        id->st != St::kDreqSent)
      continue;
    send_dreq(id);
    StopTimer(id);  // the CM thread's retransmissions do not run any more
    id->st = St::kDreqSent;  // HandleDrep ends it
    told.push_back(id);
  }
  constexpr int kPassUs = 500;
  constexpr int kPassesPerRetry = 30 * 1000 / kPassUs;  // 30 ms
  for (int i = 0; !told.empty() && i < 600; ++i) {
    PollGsiCq();
    bool unanswered = false;
    for (Id* id : told) unanswered |= id->st == St::kDreqSent;
    if (!unanswered && g.send_slots.done() >= g.send_slots.posted()) break;
    if (unanswered && i % kPassesPerRetry == kPassesPerRetry - 1) {
      for (Id* id : told)
        if (id->st == St::kDreqSent) send_dreq(id);
    }
    usleep(kPassUs);
  }
  for (Id* id : told) id->st = St::kDisconnected;
}

int StartLocked() {
  Cm& g = G();
  if (g.started) return 0;
  if (g.init_error) return g.init_error;
  auto fail = [&](const char* what) {
    int e = errno ? errno : ENODEV;
    fprintf(stderr, "softrnic-cm: %s failed: %s\n", what, strerror(e));
    g.init_error = e;
    return e;
  };
  static bool atfork = (pthread_atfork(nullptr, nullptr, AtForkChild), true);
  (void)atfork;
  g.netns = NetnsId();
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) {
    if (list) ibv_free_device_list(list);
    errno = ENODEV;
    return fail("ibv_get_device_list");
  }
  g.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!g.ctx) return fail("ibv_open_device");
  ibv_port_attr pa{};
  int tbl = 16;
  if (ibv_query_port(g.ctx, 1, &pa) == 0 && pa.gid_tbl_len > 0) tbl = pa.gid_tbl_len;
  g.gid_ip.assign(size_t(tbl), 0);
  for (int i = 0; i < tbl; ++i) {
    ibv_gid gid{};
    if (ibv_query_gid(g.ctx, 1, i, &gid) != 0) continue;
    if (gid.raw[10] != 0xff || gid.raw[11] != 0xff) continue;
    g.gid_ip[size_t(i)] = IpFromGid(gid.raw);
    if ((g.gid_ip[size_t(i)] >> 24) == 127 && g.loop_idx < 0) g.loop_idx = i;
  }
  g.pd = ibv_alloc_pd(g.ctx);
  if (!g.pd) return fail("ibv_alloc_pd");
  g.cc = ibv_create_comp_channel(g.ctx);
  if (!g.cc) return fail("ibv_create_comp_channel");
  g.cq = ibv_create_cq(g.ctx, kSendSlots + kRecvSlots + 16, nullptr, g.cc, 0);
  if (!g.cq) return fail("ibv_create_cq");
  ibv_qp_cap cap{};
  cap.max_send_wr = kSendSlots;
  cap.max_recv_wr = kRecvSlots;
  cap.max_send_sge = 1;
  cap.max_recv_sge = 1;
  g.qp = softrnic_create_gsi_qp(g.pd, g.cq, g.cq, &cap);
  if (!g.qp) return fail("creating QP1 (softrnic_create_gsi_qp)");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qkey = kGsiQkey;
  if (int rc = ibv_modify_qp(g.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) {
    errno = rc;
    return fail("QP1 to INIT");
  }
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTR;
  if (int rc = ibv_modify_qp(g.qp, &a, IBV_QP_STATE)) {
    errno = rc;
    return fail("QP1 to RTR");
  }
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  if (int rc = ibv_modify_qp(g.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) {
    errno = rc;
    return fail("QP1 to RTS");
  }
  size_t sz = size_t(kSendSlots + kRecvSlots) * kSlotSize;
  g.bufs = static_cast<uint8_t*>(aligned_alloc(4096, sz));
  if (!g.bufs) return fail("buffer allocation");
  std::memset(g.bufs, 0, sz);
  g.mr = ibv_reg_mr(g.pd, g.bufs, sz, IBV_ACCESS_LOCAL_WRITE);
  if (!g.mr) return fail("ibv_reg_mr");
  for (int i = 0; i < kRecvSlots; ++i) {
    uint8_t* b = g.bufs + size_t(kSendSlots + i) * kSlotSize;
    ibv_sge sge{reinterpret_cast<uintptr_t>(b), kSlotSize, g.mr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = kRecvTag | uint64_t(i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (int rc = ibv_post_recv(g.qp, &wr, &bad)) {
      errno = rc;
      return fail("ibv_post_recv on QP1");
    }
  }
  ibv_req_notify_cq(g.cq, 0);
  // Registered per CM (a forked child registers its own, after its own
  // device exists, so that it runs before that device is torn down).
  atexit(DisconnectAllAtExit);
  g.th = std::thread(CmThread);
  g.th.detach();
  g.started = true;
  return 0;
}

int Start() {
  std::lock_guard<std::mutex> l(G().mu);
  return StartLocked();
}

Id* NewIdLocked(Channel* c, void* ctx, rdma_port_space ps, ibv_qp_type qpt) {
  auto* id = new Id;
  std::memset(&id->id, 0, sizeof id->id);
  id->chan = c;
  id->id.channel = &c->ch;
  id->id.context = ctx;
  id->id.ps = ps;
  id->id.qp_type = qpt;
  G().ids.insert(id);
  return id;
}

int Fail(int err) {
  errno = err;
  return -1;
}

// ucma_complete: waits for the event of a synchronous id's operation.
int Complete(Id* id) {
  if (!id->sync) return 0;
  if (id->id.event) {
    rdma_ack_cm_event(id->id.event);
    id->id.event = nullptr;
  }
  if (rdma_get_cm_event(id->id.channel, &id->id.event) != 0) return -1;
  rdma_cm_event* e = id->id.event;
  if (e->status) {
    if (e->event == RDMA_CM_EVENT_REJECTED) return Fail(ECONNREFUSED);
    return Fail(e->status < 0 ? -e->status : e->status);
  }
  switch (e->event) {
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR: return Fail(EHOSTUNREACH);
    case RDMA_CM_EVENT_REJECTED: return Fail(ECONNREFUSED);
    default: return 0;
  }
}

uint16_t EphemeralPort(int ps) {
  Cm& g = G();
  for (;;) {
    uint16_t p = uint16_t(32768 + SecureRandomBelow(28000));
    bool used = false;
    for (Id* i : g.ids)
      if (i->bound && i->id.ps == ps && SinPort(i->id.route.addr.src_sin) == p) used = true;
    if (!used) return p;
  }
}

int BindLocked(Id* id, const sockaddr* addr) {
  Cm& g = G();
  if (!addr) return EINVAL;
  if (addr->sa_family != AF_INET) return EAFNOSUPPORT;
  sockaddr_in s;
  std::memcpy(&s, addr, sizeof s);
  uint32_t ip = ntohl(s.sin_addr.s_addr);
  if (ip != INADDR_ANY && !IsLocalIp(ip)) return EADDRNOTAVAIL;
  uint16_t port = SinPort(s);
  if (port) {
    for (Id* i : g.ids)
      if (i != id && i->bound && i->id.ps == id->id.ps && SinPort(i->id.route.addr.src_sin) == port &&
          (i->st == St::kListen || i->st == St::kIdle))
        return EADDRINUSE;
  } else {
    port = EphemeralPort(id->id.ps);
  }
  s.sin_port = htons(port);
  std::memcpy(&id->id.route.addr.src_sin, &s, sizeof s);
  id->bound = true;
  // The kernel's cma_any_addr() is "zero or loopback": rdma_bind_addr() to
  // 0.0.0.0 or to any 127/8 address binds no device (librdmacm leaves
  // id->verbs NULL), and a listener bound so takes requests for any local
  // address on its port, through every device (cma_listen_on_all). libfabric's
  // verbs provider relies on it: it binds "localhost" when given no address
  // and, finding no device on the id, uses its interfaces' addresses instead
  // (vrb_fill_addr). A specific address binds the device that has its GID.
  bool any = ip == INADDR_ANY || (ip >> 24) == 127;
  if (!any) AttachDevice(id);
  if (ip != INADDR_ANY) {
    int gi = (ip >> 24) == 127 ? g.loop_idx : GidIndexForIp(ip);
    if (gi < 0) gi = g.loop_idx >= 0 ? g.loop_idx : 0;
    id->sgid_index = gi;
    SetGidFromIp(&id->id.route.addr.addr.ibaddr.sgid, g.gid_ip[size_t(gi)]);
  }
  return 0;
}


void DestroyOwnCqs(Id* id) {
  if (id->own_recv_cq && id->id.recv_cq) {
    ibv_destroy_cq(id->id.recv_cq);
    id->id.recv_cq = nullptr;
    if (id->id.recv_cq_channel) ibv_destroy_comp_channel(id->id.recv_cq_channel);
    id->id.recv_cq_channel = nullptr;
    id->own_recv_cq = false;
  }
  if (id->own_send_cq && id->id.send_cq) {
    ibv_destroy_cq(id->id.send_cq);
    id->id.send_cq = nullptr;
    if (id->id.send_cq_channel) ibv_destroy_comp_channel(id->id.send_cq_channel);
    id->id.send_cq_channel = nullptr;
    id->own_send_cq = false;
  }
}

int CreateOwnCq(Id* id, int size, ibv_comp_channel** ch, ibv_cq** cq) {
  *ch = ibv_create_comp_channel(id->id.verbs);
  if (!*ch) return errno ? errno : ENOMEM;
  *cq = ibv_create_cq(id->id.verbs, std::max(size, 1), &id->id, *ch, 0);
  if (!*cq) {
    int e = errno ? errno : ENOMEM;
    ibv_destroy_comp_channel(*ch);
    *ch = nullptr;
    return e;
  }
  return 0;
}

}  // namespace softrnic::rdmacm

using namespace softrnic::rdmacm;

// ================================================================ API

CMA_EXPORT rdma_event_channel* rdma_create_event_channel(void) {
  if (int rc = Start()) {
    errno = rc;
    return nullptr;
  }
  Channel* c = NewChannel();
  return c ? &c->ch : nullptr;
}

CMA_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel) FreeChannel(ToChannel(channel));
}

CMA_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (!channel || !event) return Fail(EINVAL);
  if (PopEvent(ToChannel(channel), event) != 0) return -1;
  return 0;
}

CMA_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
  if (!event) return Fail(EINVAL);
  delete reinterpret_cast<Event*>(event);
  return 0;
}

CMA_EXPORT const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";
}

CMA_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  if (int rc = Start()) {
    errno = rc;
    if (num_devices) *num_devices = 0;
    return nullptr;
  }
  auto** l = static_cast<ibv_context**>(calloc(2, sizeof(ibv_context*)));
  if (!l) return nullptr;
  l[0] = G().ctx;
  if (num_devices) *num_devices = 1;
  return l;
}

CMA_EXPORT void rdma_free_devices(ibv_context** list) { free(list); }

static int CreateId2(rdma_event_channel* channel, rdma_cm_id** out, void* context,
                     rdma_port_space ps, ibv_qp_type qpt) {
  if (!out) return Fail(EINVAL);
  if (int rc = Start()) return Fail(rc);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB)
    return Fail(EINVAL);
  Channel* c = channel ? ToChannel(channel) : NewChannel();
  if (!c) return -1;
  std::lock_guard<std::mutex> l(G().mu);
  Id* id = NewIdLocked(c, context, ps, qpt);
  id->sync = channel == nullptr;
  *out = &id->id;
  return 0;
}

CMA_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                              rdma_port_space ps) {
  ibv_qp_type qpt = (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ? IBV_QPT_UD : IBV_QPT_RC;
  return CreateId2(channel, id, context, ps, qpt);
}

CMA_EXPORT int rdma_destroy_id(rdma_cm_id* cid) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  {
    std::lock_guard<std::mutex> l(G().mu);
    Cm& g = G();
    bool rc_conn = id->id.qp_type != IBV_QPT_UD;
    if (rc_conn && (id->st == St::kConnected || id->st == St::kRepSent || id->st == St::kRepRcvd)) {
      CmMsg m;  // tell the peer, as the kernel CM does when an id goes away
      m.attr = kAttrDreq;
      m.local_comm_id = id->local_comm_id;
      m.remote_comm_id = id->remote_comm_id;
      m.qpn = id->remote_qpn;
      SendMsg(id->sgid_index, id->dgid, m);
    } else if (id->st == St::kReqRcvd) {
      CmMsg m;
      if (rc_conn) {
        m.attr = kAttrRej;
        m.local_comm_id = id->local_comm_id;
        m.remote_comm_id = id->remote_comm_id;
        m.reason = kRejConsumer;
      } else {
        m.attr = kAttrSidrRep;
        m.local_comm_id = id->remote_comm_id;
        m.sidr_status = kSidrReject;
      }
      SendMsg(id->sgid_index, id->dgid, m);
    }
    if (id->registered) RegRemove(id->id.ps, SinPort(id->id.route.addr.src_sin));
    if (id->st == St::kListen) ReleaseListener(id);
    ForgetId(id);
    g.ids.erase(id);
    // Its unread events go with it (M6): none may reach the application
    // naming freed memory.
    if (!id->sync) PurgeEvents(id->chan, id);
  }
  if (id->id.event) rdma_ack_cm_event(id->id.event);
  free(id->id.route.path_rec);
  if (id->sync) FreeChannel(id->chan);
  delete id;
  return 0;
}

CMA_EXPORT int rdma_bind_addr(rdma_cm_id* cid, sockaddr* addr) {
  if (!cid || !addr) return Fail(EINVAL);
  std::lock_guard<std::mutex> l(G().mu);
  int rc = BindLocked(ToId(cid), addr);
  return rc ? Fail(rc) : 0;
}

CMA_EXPORT int rdma_resolve_addr(rdma_cm_id* cid, sockaddr* src, sockaddr* dst, int timeout_ms) {
  (void)timeout_ms;
  if (!cid || !dst) return Fail(EINVAL);
  Id* id = ToId(cid);
  if (dst->sa_family != AF_INET) return Fail(EAFNOSUPPORT);
  {
    std::lock_guard<std::mutex> l(G().mu);
    Cm& g = G();
    if (src && src->sa_family == AF_INET && !id->bound) {
      if (int rc = BindLocked(id, src)) return Fail(rc);
    }
    sockaddr_in d;
    std::memcpy(&d, dst, sizeof d);
    std::memcpy(&id->id.route.addr.dst_sin, &d, sizeof d);
    uint32_t dip = ntohl(d.sin_addr.s_addr);
    AttachDevice(id);
    uint32_t sip = 0;
    int gi = -1, err = 0;
    if (dip == INADDR_ANY || dip == INADDR_BROADCAST) {
      err = EADDRNOTAVAIL;
    } else if (IsLocalIp(dip)) {
      id->local_dst = true;
      gi = g.loop_idx >= 0 ? g.loop_idx : 0;
      sip = (dip >> 24) == 127 ? dip : dip;
    } else {
      id->local_dst = false;
      err = RouteSource(dip, &sip);
      if (!err) {
        gi = GidIndexForIp(sip);
        if (gi < 0) {
          fprintf(stderr,
                  "softrnic-cm: no softrnic GID for source address %s (another softrnic process "
                  "owns %s:4791?): cannot reach %s\n",
                  IpStr(sip).c_str(), IpStr(sip).c_str(), IpStr(dip).c_str());
          err = EADDRNOTAVAIL;
        }
      }
    }
    if (err) {
      CM_DBG("resolve_addr %s: %s", IpStr(dip).c_str(), strerror(err));
      Simple(id, RDMA_CM_EVENT_ADDR_ERROR, -err);
    } else {
      id->sgid_index = gi;
      sockaddr_in& s = id->id.route.addr.src_sin;
      if (!id->bound) {
        s.sin_family = AF_INET;
        s.sin_port = htons(EphemeralPort(id->id.ps));
        s.sin_addr.s_addr = htonl(sip);
        id->bound = true;
      } else if (s.sin_addr.s_addr == INADDR_ANY) {
        s.sin_addr.s_addr = htonl(sip);
      }
      SetGidFromIp(&id->id.route.addr.addr.ibaddr.sgid, g.gid_ip[size_t(gi)]);
      SetGidFromIp(&id->dgid, dip);
      if (id->local_dst) {
        long pid;
        uint32_t lip;
        if (RegRead(id->id.ps, SinPort(d), &pid, &lip)) SetGidFromIp(&id->dgid, lip);
      }
      id->id.route.addr.addr.ibaddr.dgid = id->dgid;
      id->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
      id->st = St::kAddrResolved;
      Simple(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    }
  }
  return Complete(id);
}

CMA_EXPORT int rdma_resolve_route(rdma_cm_id* cid, int timeout_ms) {
  (void)timeout_ms;
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  {
    std::lock_guard<std::mutex> l(G().mu);
    if (id->st != St::kAddrResolved && id->st != St::kRouteResolved) return Fail(EINVAL);
    if (!id->id.route.path_rec) {
      id->id.route.path_rec = static_cast<ibv_sa_path_rec*>(calloc(1, sizeof(ibv_sa_path_rec)));
      if (!id->id.route.path_rec) return Fail(ENOMEM);
    }
    ibv_sa_path_rec* p = id->id.route.path_rec;
    p->dgid = id->dgid;
    p->sgid = id->id.route.addr.addr.ibaddr.sgid;
    p->pkey = htons(0xffff);
    p->hop_limit = 64;
    p->reversible = 1;
    p->numb_path = 1;
    p->mtu_selector = 2;
    p->mtu = IBV_MTU_1024;
    p->rate_selector = 2;
    p->rate = 3;  // 10 Gb/s
    p->packet_life_time_selector = 2;
    p->packet_life_time = 14;
    id->id.route.num_paths = 1;
    id->st = St::kRouteResolved;
    Simple(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  }
  return Complete(id);
}

CMA_EXPORT int rdma_create_qp_ex(rdma_cm_id* cid, ibv_qp_init_attr_ex* attr) {
  if (!cid || !attr) return Fail(EINVAL);
  Id* id = ToId(cid);
  if (!id->id.verbs) return Fail(EINVAL);
  if (id->id.qp) return Fail(EINVAL);
  std::lock_guard<std::mutex> l(G().mu);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->pd = id->id.pd ? id->id.pd : DefaultPd(id->id.verbs);
    if (!attr->pd) return -1;
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  if (!attr->send_cq) {
    if (int rc = CreateOwnCq(id, int(attr->cap.max_send_wr), &id->id.send_cq_channel, &id->id.send_cq))
      return Fail(rc);
    id->own_send_cq = true;
    attr->send_cq = id->id.send_cq;
  }
  if (!attr->recv_cq) {
    if (int rc = CreateOwnCq(id, int(attr->cap.max_recv_wr), &id->id.recv_cq_channel, &id->id.recv_cq)) {
      DestroyOwnCqs(id);
      return Fail(rc);
    }
    id->own_recv_cq = true;
    attr->recv_cq = id->id.recv_cq;
  }
  if (id->id.srq && !attr->srq) attr->srq = id->id.srq;
  ibv_qp* qp;
  if (attr->comp_mask == IBV_QP_INIT_ATTR_PD) {
    ibv_qp_init_attr a{};
    a.qp_context = attr->qp_context;
    a.send_cq = attr->send_cq;
    a.recv_cq = attr->recv_cq;
    a.srq = attr->srq;
    a.cap = attr->cap;
    a.qp_type = attr->qp_type;
    a.sq_sig_all = attr->sq_sig_all;
    qp = ibv_create_qp(attr->pd, &a);
    if (qp) attr->cap = a.cap;
  } else {
    qp = ibv_create_qp_ex(id->id.verbs, attr);
  }
  if (!qp) {
    int e = errno;
    DestroyOwnCqs(id);
    return Fail(e ? e : ENOMEM);
  }
  id->id.qp = qp;
  id->id.qp_type = attr->qp_type;
  if (!id->id.pd) id->id.pd = attr->pd;
  int rc = ModifyTo(id, IBV_QPS_INIT);
  if (!rc && attr->qp_type == IBV_QPT_UD) {
    rc = ModifyTo(id, IBV_QPS_RTR);
    if (!rc) rc = ModifyTo(id, IBV_QPS_RTS);
  }
  // A passive id created after the REQ arrived may go straight on (accept).
  if (rc) {
    ibv_destroy_qp(qp);
    id->id.qp = nullptr;
    DestroyOwnCqs(id);
    return Fail(rc);
  }
  return 0;
}

CMA_EXPORT int rdma_create_qp(rdma_cm_id* cid, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!cid || !qp_init_attr) return Fail(EINVAL);
  if (pd && cid->verbs && pd->context != cid->verbs) return Fail(EINVAL);
  ibv_qp_init_attr_ex a{};
  a.qp_context = qp_init_attr->qp_context;
  a.send_cq = qp_init_attr->send_cq;
  a.recv_cq = qp_init_attr->recv_cq;
  a.srq = qp_init_attr->srq;
  a.cap = qp_init_attr->cap;
  a.qp_type = qp_init_attr->qp_type;
  a.sq_sig_all = qp_init_attr->sq_sig_all;
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  int rc = rdma_create_qp_ex(cid, &a);
  if (rc) return rc;
  qp_init_attr->send_cq = a.send_cq;
  qp_init_attr->recv_cq = a.recv_cq;
  qp_init_attr->srq = a.srq;
  qp_init_attr->cap = a.cap;
  return 0;
}

CMA_EXPORT void rdma_destroy_qp(rdma_cm_id* cid) {
  if (!cid) return;
  Id* id = ToId(cid);
  // Detach under the CM lock: the CM thread moves id->id.qp to ERR when a
  // DREQ or REJ arrives, holding that lock, and must never see a QP that is
  // being destroyed.
  ibv_qp* qp;
  {
    std::lock_guard<std::mutex> l(G().mu);
    qp = id->id.qp;
    id->id.qp = nullptr;
  }
  if (qp) ibv_destroy_qp(qp);
  DestroyOwnCqs(id);
}

CMA_EXPORT int rdma_connect(rdma_cm_id* cid, rdma_conn_param* param) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  {
    std::lock_guard<std::mutex> l(G().mu);
    if (id->st != St::kRouteResolved) return Fail(EINVAL);
    bool ud = id->id.qp_type == IBV_QPT_UD;
    size_t max_user = (ud ? kSidrReqPdata : kReqPdata) - kCmaHdr;
    if (param && param->private_data_len > max_user) return Fail(EINVAL);
    uint16_t dport = SinPort(id->id.route.addr.dst_sin);
    bool defer = false;
    if (id->local_dst) {
      long pid;
      uint32_t lip;
      if (RegRead(id->id.ps, dport, &pid, &lip)) {
        SetGidFromIp(&id->dgid, lip);
        id->id.route.addr.addr.ibaddr.dgid = id->dgid;
      } else {
        CM_DBG("no listener registered for port %u on this host (yet)", dport);
        defer = true;
      }
    }
    {
      CmMsg m;
      m.service_id = (uint64_t(id->id.ps) << 16) | dport;
      NewCommId(id);
      m.local_comm_id = id->local_comm_id;
      uint32_t sip = ntohl(id->id.route.addr.src_sin.sin_addr.s_addr);
      FillCmaHdr(m.pdata, sip, SinPort(id->id.route.addr.src_sin), IpFromGid(id->dgid.raw));
      // The header names the address the client asked for, not the GID.
      uint32_t dn = id->id.route.addr.dst_sin.sin_addr.s_addr;
      std::memcpy(m.pdata + 32, &dn, 4);
      if (param && param->private_data_len)
        std::memcpy(m.pdata + kCmaHdr, param->private_data, param->private_data_len);
      m.pdata_len = kCmaHdr + (param ? param->private_data_len : 0);
      if (ud) {
        m.attr = kAttrSidrReq;
        SendOrDefer(id, m, Timer::kSidr, defer);
      } else {
        m.attr = kAttrReq;
        m.tid = softrnic::SecureRandom64();  // names nothing about this process (IBA 13.4.6.4)
        id->local_psn = NewPsn();
        m.starting_psn = id->local_psn;
        m.qpn = id->id.qp ? id->id.qp->qp_num : (param ? param->qp_num : 0);
        m.qkey = 0;
        id->resp_res = ClampRd(param ? param->responder_resources : kMaxRdAtomic);
        id->init_depth = ClampRd(param ? param->initiator_depth : kMaxRdAtomic);
        id->retry_cnt = param ? std::min<uint8_t>(param->retry_count, 7) : 7;
        id->rnr_retry = param ? std::min<uint8_t>(param->rnr_retry_count, 7) : 7;
        m.responder_resources = id->resp_res;
        m.initiator_depth = id->init_depth;
        m.retry_count = id->retry_cnt;
        m.rnr_retry_count = id->rnr_retry;
        m.flow_control = param ? param->flow_control : 1;
        m.srq = id->id.srq || (param && param->srq) ? 1 : 0;
        m.transport = id->id.qp_type == IBV_QPT_UC ? 1 : 0;
        m.mtu = IBV_MTU_1024;
        std::memcpy(m.sgid, id->id.route.addr.addr.ibaddr.sgid.raw, 16);
        std::memcpy(m.dgid, id->dgid.raw, 16);
        SendOrDefer(id, m, Timer::kReq, defer);
      }
      id->st = St::kReqSent;
    }
  }
  return Complete(id);
}

CMA_EXPORT int rdma_establish(rdma_cm_id* cid) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  std::lock_guard<std::mutex> l(G().mu);
  if (id->st != St::kRepRcvd) return Fail(EINVAL);
  SendRtu(id);
  id->st = St::kConnected;
  return 0;
}

CMA_EXPORT int rdma_listen(rdma_cm_id* cid, int backlog) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  std::lock_guard<std::mutex> l(G().mu);
  if (!id->bound) {
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (int rc = BindLocked(id, reinterpret_cast<sockaddr*>(&any))) return Fail(rc);
  }
  if (id->st == St::kListen) return 0;
  uint16_t port = SinPort(id->id.route.addr.src_sin);
  if (int rc = RegAdd(id->id.ps, port)) return Fail(rc);
  id->registered = true;
  id->st = St::kListen;
  AddListener(id, backlog);
  return 0;
}

CMA_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** out) {
  if (!listen || !out) return Fail(EINVAL);
  Id* l = ToId(listen);
  if (!l->sync) return Fail(EINVAL);
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(listen->channel, &e) != 0) return -1;
  if (e->status) {
    int s = e->status;
    rdma_ack_cm_event(e);
    return Fail(s < 0 ? -s : s);
  }
  if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    rdma_ack_cm_event(e);
    return Fail(EINVAL);
  }
  rdma_cm_id* c = e->id;
  if (l->has_ep_attr) {
    ibv_qp_init_attr a = l->ep_attr;
    if (rdma_create_qp(c, l->ep_pd, &a) != 0) {
      int err = errno;
      rdma_ack_cm_event(e);
      rdma_destroy_id(c);
      return Fail(err);
    }
  }
  c->event = e;
  *out = c;
  return 0;
}

CMA_EXPORT int rdma_accept(rdma_cm_id* cid, rdma_conn_param* param) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  bool wait = false;
  {
    std::lock_guard<std::mutex> l(G().mu);
    if (id->st != St::kReqRcvd) return Fail(EINVAL);
    bool ud = id->id.qp_type == IBV_QPT_UD;
    size_t max_user = ud ? kSidrRepPdata : kRepPdata;
    if (param && param->private_data_len > max_user) return Fail(EINVAL);
    CmMsg m;
    if (param && param->private_data_len) std::memcpy(m.pdata, param->private_data, param->private_data_len);
    m.pdata_len = param ? param->private_data_len : 0;
    if (ud) {
      m.attr = kAttrSidrRep;
      m.local_comm_id = id->remote_comm_id;
      m.sidr_status = kSidrOk;
      m.qpn = id->id.qp ? id->id.qp->qp_num : (param ? param->qp_num : 0);
      m.qkey = RDMA_UDP_QKEY;
      m.service_id = (uint64_t(id->id.ps) << 16) | SinPort(id->id.route.addr.src_sin);
      SendMsg(id->sgid_index, id->dgid, m, id);
      id->st = St::kConnected;
      return 0;
    }
    id->resp_res = ClampRd(param ? param->responder_resources : kMaxRdAtomic);
    id->init_depth = ClampRd(param ? param->initiator_depth : kMaxRdAtomic);
    if (id->id.qp) {
      if (int rc = QpToRts(id)) return Fail(rc);
    }
    m.attr = kAttrRep;
    m.local_comm_id = id->local_comm_id;
    m.remote_comm_id = id->remote_comm_id;
    m.qpn = id->id.qp ? id->id.qp->qp_num : (param ? param->qp_num : 0);
    m.starting_psn = id->local_psn;
    m.responder_resources = id->resp_res;
    m.initiator_depth = id->init_depth;
    m.rnr_retry_count = param ? std::min<uint8_t>(param->rnr_retry_count, 7) : 7;
    m.flow_control = param ? param->flow_control : 1;
    m.srq = id->id.srq || (param && param->srq) ? 1 : 0;
    SendMsg(id->sgid_index, id->dgid, m, id);
    ArmTimer(id, Timer::kRep);
    id->st = St::kRepSent;
    wait = id->sync;
  }
  return wait ? Complete(id) : 0;
}

static int RejectImpl(rdma_cm_id* cid, const void* pdata, uint8_t len) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  std::lock_guard<std::mutex> l(G().mu);
  if (id->st != St::kReqRcvd) return Fail(EINVAL);
  CmMsg m;
  bool ud = id->id.qp_type == IBV_QPT_UD;
  size_t max = ud ? kSidrRepPdata : kRejPdata;
  if (len > max) return Fail(EINVAL);
  if (len && pdata) std::memcpy(m.pdata, pdata, len);
  m.pdata_len = len;
  if (ud) {
    m.attr = kAttrSidrRep;
    m.local_comm_id = id->remote_comm_id;
    m.sidr_status = kSidrReject;
  } else {
    m.attr = kAttrRej;
    m.local_comm_id = id->local_comm_id;
    m.remote_comm_id = id->remote_comm_id;
    m.msg_rejected = 0;
    m.reason = kRejConsumer;
  }
  SendMsg(id->sgid_index, id->dgid, m, id);
  id->st = St::kRejected;
  return 0;
}

CMA_EXPORT int rdma_reject(rdma_cm_id* cid, const void* private_data, uint8_t private_data_len) {
  return RejectImpl(cid, private_data, private_data_len);
}

CMA_EXPORT int rdma_reject_ece(rdma_cm_id* cid, const void* private_data, uint8_t private_data_len) {
  return RejectImpl(cid, private_data, private_data_len);
}

CMA_EXPORT int rdma_notify(rdma_cm_id* cid, ibv_event_type) { return cid ? 0 : Fail(EINVAL); }

CMA_EXPORT int rdma_disconnect(rdma_cm_id* cid) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  std::lock_guard<std::mutex> l(G().mu);
  if (id->id.qp_type == IBV_QPT_UD) return 0;
  switch (id->st) {
    case St::kConnected:
    case St::kRepSent:
    case St::kRepRcvd: {
      StopTimer(id);
      QpToErr(id);
      CmMsg m;
      m.attr = kAttrDreq;
      m.local_comm_id = id->local_comm_id;
      m.remote_comm_id = id->remote_comm_id;
      m.qpn = id->remote_qpn;
      SendMsg(id->sgid_index, id->dgid, m, id);
      ArmTimer(id, Timer::kDreq);
      id->st = St::kDreqSent;
      return 0;
    }
    case St::kDreqSent:
    case St::kDisconnected:
      // Already disconnecting / disconnected by the peer; like rdma-core,
      // still move the application's QP to ERR so its WRs flush.
      QpToErr(id);
      return 0;
    default:
      return Fail(EINVAL);
  }
}

CMA_EXPORT int rdma_init_qp_attr(rdma_cm_id* cid, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (!cid || !qp_attr || !qp_attr_mask) return Fail(EINVAL);
  std::lock_guard<std::mutex> l(G().mu);
  int rc = InitQpAttr(ToId(cid), qp_attr, qp_attr_mask);
  return rc ? Fail(rc) : 0;
}

CMA_EXPORT int rdma_set_option(rdma_cm_id* cid, int level, int optname, void* optval, size_t optlen) {
  if (!cid || (optlen && !optval)) return Fail(EINVAL);
  if (level == RDMA_OPTION_ID) {
    switch (optname) {
      case RDMA_OPTION_ID_TOS:
      case RDMA_OPTION_ID_ACK_TIMEOUT: {
        // Both take one byte (rdma_set_option(3)); they apply to the QP at its
        // next rdma_init_qp_attr, as the kernel's rdma_cm does. The QP's
        // timeout field has 5 bits (IBA 11.2.4.2, ibv_modify_qp(3)).
        if (optlen != sizeof(uint8_t)) return Fail(EINVAL);
        const uint8_t v = *static_cast<const uint8_t*>(optval);
        if (optname == RDMA_OPTION_ID_ACK_TIMEOUT && v > 31) return Fail(EINVAL);
        std::lock_guard<std::mutex> l(G().mu);
        (optname == RDMA_OPTION_ID_TOS ? ToId(cid)->tos : ToId(cid)->ack_timeout) = v;
        return 0;
      }
      case RDMA_OPTION_ID_REUSEADDR:
      case RDMA_OPTION_ID_AFONLY: return 0;  // accepted; binding is IPv4-only here
      default: return Fail(ENOSYS);
    }
  }
  if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) return 0;
  return Fail(ENOSYS);
}

CMA_EXPORT int rdma_migrate_id(rdma_cm_id* cid, rdma_event_channel* channel) {
  if (!cid) return Fail(EINVAL);
  Id* id = ToId(cid);
  Channel* c = channel ? ToChannel(channel) : NewChannel();
  if (!c) return -1;
  std::lock_guard<std::mutex> l(G().mu);
  Channel* old = id->chan;
  bool old_sync = id->sync;
  // Pending events of this id move with it.
  {
    std::scoped_lock ql(old->mu);
    for (auto it = old->q.begin(); it != old->q.end();) {
      if ((*it)->ev.id == cid) {
        Event* e = *it;
        it = old->q.erase(it);
        uint64_t v;
        (void)!read(old->ch.fd, &v, sizeof v);
        Push(c, e);
      } else {
        ++it;
      }
    }
  }
  id->chan = c;
  id->id.channel = &c->ch;
  id->sync = channel == nullptr;
  if (old_sync) FreeChannel(old);
  return 0;
}

CMA_EXPORT __be16 rdma_get_src_port(rdma_cm_id* cid) { return cid ? cid->route.addr.src_sin.sin_port : 0; }
CMA_EXPORT __be16 rdma_get_dst_port(rdma_cm_id* cid) { return cid ? cid->route.addr.dst_sin.sin_port : 0; }

CMA_EXPORT int rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) { return Fail(ENOSYS); }
CMA_EXPORT int rdma_leave_multicast(rdma_cm_id*, sockaddr*) { return Fail(ENOSYS); }
CMA_EXPORT int rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) { return Fail(ENOSYS); }

CMA_EXPORT int rdma_set_local_ece(rdma_cm_id* cid, ibv_ece*) { return cid ? 0 : Fail(EINVAL); }
CMA_EXPORT int rdma_get_remote_ece(rdma_cm_id* cid, ibv_ece* ece) {
  if (!cid || !ece) return Fail(EINVAL);
  std::memset(ece, 0, sizeof(*ece));
  return 0;
}

CMA_EXPORT int rdma_create_srq_ex(rdma_cm_id* cid, ibv_srq_init_attr_ex* attr) {
  if (!cid || !attr || !cid->verbs) return Fail(EINVAL);
  ibv_pd* pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd : cid->pd;
  if (!pd) {
    std::lock_guard<std::mutex> l(G().mu);
    pd = DefaultPd(cid->verbs);
  }
  if (!pd) return -1;
  ibv_srq_init_attr a{};
  a.srq_context = attr->srq_context;
  a.attr = attr->attr;
  ibv_srq* srq = ibv_create_srq(pd, &a);
  if (!srq) return -1;
  cid->srq = srq;
  if (!cid->pd) cid->pd = pd;
  return 0;
}

CMA_EXPORT int rdma_create_srq(rdma_cm_id* cid, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!attr) return Fail(EINVAL);
  ibv_srq_init_attr_ex a{};
  a.srq_context = attr->srq_context;
  a.attr = attr->attr;
  a.comp_mask = IBV_SRQ_INIT_ATTR_PD;
  a.pd = pd;
  return rdma_create_srq_ex(cid, &a);
}

CMA_EXPORT void rdma_destroy_srq(rdma_cm_id* cid) {
  if (!cid || !cid->srq) return;
  ibv_destroy_srq(cid->srq);
  cid->srq = nullptr;
}

CMA_EXPORT int rdma_create_ep(rdma_cm_id** out, rdma_addrinfo* res, ibv_pd* pd,
                              ibv_qp_init_attr* qp_init_attr) {
  if (!out || !res) return Fail(EINVAL);
  rdma_port_space ps = res->ai_port_space ? rdma_port_space(res->ai_port_space) : RDMA_PS_TCP;
  ibv_qp_type qpt = res->ai_qp_type ? ibv_qp_type(res->ai_qp_type)
                                    : (ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC);
  rdma_cm_id* cid = nullptr;
  if (CreateId2(nullptr, &cid, nullptr, ps, qpt) != 0) return -1;
  Id* id = ToId(cid);
  int rc = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    rc = rdma_bind_addr(cid, res->ai_src_addr);
    if (rc) goto err;
    if (qp_init_attr) {
      qp_init_attr->qp_type = qpt;
      id->has_ep_attr = true;
      id->ep_attr = *qp_init_attr;
      id->ep_pd = pd;
    }
    cid->pd = pd;
    *out = cid;
    return 0;
  }
  rc = rdma_resolve_addr(cid, res->ai_src_len ? res->ai_src_addr : nullptr, res->ai_dst_addr, 2000);
  if (rc) goto err;
  rc = rdma_resolve_route(cid, 2000);
  if (rc) goto err;
  if (qp_init_attr) {
    qp_init_attr->qp_type = qpt;
    rc = rdma_create_qp(cid, pd, qp_init_attr);
    if (rc) goto err;
  }
  if (pd && !cid->pd) cid->pd = pd;
  *out = cid;
  return 0;
err : {
  int e = errno;
  rdma_destroy_id(cid);
  errno = e;
  return -1;
}
}

CMA_EXPORT void rdma_destroy_ep(rdma_cm_id* cid) {
  if (!cid) return;
  if (cid->qp) rdma_destroy_qp(cid);
  if (cid->srq) rdma_destroy_srq(cid);
  rdma_destroy_id(cid);
}

// ---------------------------------------------------------------- rdma_getaddrinfo

static sockaddr* DupAddr(const sockaddr* a, socklen_t len) {
  auto* p = static_cast<sockaddr*>(malloc(len));
  if (p) std::memcpy(p, a, len);
  return p;
}

CMA_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* n = res->ai_next;
    free(res->ai_src_addr);
    free(res->ai_dst_addr);
    free(res->ai_src_canonname);
    free(res->ai_dst_canonname);
    free(res->ai_route);
    free(res->ai_connect);
    free(res);
    res = n;
  }
}

CMA_EXPORT int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                                rdma_addrinfo** res) {
  // rdma_getaddrinfo(3): node and service may both be NULL when the hints
  // carry the addresses (libfabric's verbs provider resolves that way).
  if (!res || (!node && !service && !hints)) return Fail(EINVAL);
  if (hints && hints->ai_family && hints->ai_family != AF_INET) {
    // Only IPv4 is supported by softrnic's transport.
    if (hints->ai_family == AF_INET6 || hints->ai_family == AF_IB) return Fail(EAFNOSUPPORT);
  }
  int flags = hints ? hints->ai_flags : 0;
  addrinfo* ai = nullptr;
  if (node || service) {
    addrinfo h{};
    h.ai_family = AF_INET;
    h.ai_socktype = SOCK_STREAM;
    if (flags & RAI_NUMERICHOST) h.ai_flags |= AI_NUMERICHOST;
    if (flags & RAI_PASSIVE) h.ai_flags |= AI_PASSIVE;
    int rc = getaddrinfo(node, service, &h, &ai);
    if (rc) {
      errno = rc == EAI_SYSTEM ? errno : (rc == EAI_NONAME ? ENOENT : EADDRNOTAVAIL);
      return -1;  // rdma_getaddrinfo returns -1 with errno (rdma-core >= 1.0)
    }
  } else if ((hints->ai_src_len && hints->ai_src_addr->sa_family != AF_INET) ||
             (hints->ai_dst_len && hints->ai_dst_addr->sa_family != AF_INET)) {
    return Fail(EAFNOSUPPORT);
  }
  auto* r = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
  if (!r) {
    freeaddrinfo(ai);
    return Fail(ENOMEM);
  }
  r->ai_flags = flags;
  r->ai_family = AF_INET;
  r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : 0;
  r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : 0;
  if (!r->ai_port_space) r->ai_port_space = r->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP;
  if (!r->ai_qp_type) r->ai_qp_type = r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  if (ai && (flags & RAI_PASSIVE)) {
    r->ai_src_len = ai->ai_addrlen;
    r->ai_src_addr = DupAddr(ai->ai_addr, ai->ai_addrlen);
  } else if (ai) {
    r->ai_dst_len = ai->ai_addrlen;
    r->ai_dst_addr = DupAddr(ai->ai_addr, ai->ai_addrlen);
  } else if (hints->ai_dst_len) {
    r->ai_dst_len = hints->ai_dst_len;
    r->ai_dst_addr = DupAddr(hints->ai_dst_addr, hints->ai_dst_len);
  }
  // A source address from the hints is kept when the name gave none.
  if (!r->ai_src_len && hints && hints->ai_src_addr && hints->ai_src_len) {
    r->ai_src_len = hints->ai_src_len;
    r->ai_src_addr = DupAddr(hints->ai_src_addr, hints->ai_src_len);
  }
  if (node) {
    if (flags & RAI_PASSIVE)
      r->ai_src_canonname = strdup(node);
    else
      r->ai_dst_canonname = strdup(node);
  }
  freeaddrinfo(ai);
  *res = r;
  return 0;
}
