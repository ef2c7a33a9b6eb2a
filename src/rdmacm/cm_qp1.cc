// QP1, the CM's MAD port: start-up of the process's CM (device, QP1, its CQ
// and buffers, the CM thread), MADs out (Qp1Send) and in (PollGsiCq), the CM
// thread's loop, and the exit hook that disconnects every connected id.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rdmacm/cm_internal.h"
#include "common/background_thread.h"
#include "common/netns.h"
#include "rdmacm/cma.h"
#include "log/log.h"

namespace softrnic::rdmacm {
namespace {

ibv_ah* GetAh(int sgid_index, const ibv_gid& dgid) {
  Cm& g = G();
  auto key = std::make_pair(sgid_index, std::string(reinterpret_cast<const char*>(dgid.raw), 16));
  auto it = g.ahs.find(key);
  if (it != g.ahs.end()) return it->second;
  ibv_ah_attr a{};
  a.is_global = 1;
  a.grh.dgid = dgid;
  a.grh.sgid_index = uint8_t(sgid_index);
  a.grh.hop_limit = 64;
  a.port_num = 1;
  ibv_ah* ah = ibv_create_ah(g.pd, &a);
  if (ah) g.ahs[key] = ah;
  return ah;
}

void DrainGsiCq();
void PollGsiCq();

// Copies the MAD into free send buffer `slot` (cm_send_slots.h) and posts
// it.
int PostMad(int slot, ibv_ah* ah, const uint8_t* mad) {
  Cm& g = G();
  uint8_t* b = g.bufs + size_t(slot) * kSlotSize;
  std::memcpy(b, mad, kMadSize);
  ibv_sge sge{reinterpret_cast<uintptr_t>(b), uint32_t(kMadSize), g.mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = uint64_t(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = 1;
  wr.wr.ud.remote_qkey = kGsiQkey;
  int rc = ibv_post_send(g.qp, &wr, &bad);
  if (!rc) g.send_slots.Posted();
  return rc;
}

// Posts backlogged MADs, oldest first, while send buffers are free.
void FlushSendBacklog() {
  Cm& g = G();
  while (!g.send_backlog.empty()) {
    const int slot = g.send_slots.Free();
    if (slot < 0) return;
    const Cm::BackloggedMad& m = g.send_backlog.front();
    if (ibv_ah* ah = GetAh(m.sgid_index, m.dgid)) PostMad(slot, ah, m.mad);
    g.send_backlog.pop_front();
  }
}

// The CM's MAD port (Cm::send_mad). A send buffer is never reused while its
// MAD may still be waiting to go out (security review L7): with every
// buffer queued, the MAD waits in Cm::send_backlog (at most
// kMaxPendingMads, beyond that it is dropped, ENOMEM: the CM retransmits
// what matters) until completions free one. Dropping it at once, as
// before, cost a burst of 1000 DREQs (cmtime) a 500 ms retransmission for
// every one past the 256th.
int Qp1Send(int sgid_index, const ibv_gid& dgid, const uint8_t* mad) {
  Cm& g = G();
  ibv_ah* ah = GetAh(sgid_index, dgid);
  if (!ah) return errno ? errno : EINVAL;
  // Completions only: handling MADs here would nest inside the handler that
  // is sending. Draining also posts what is backlogged, oldest first.
  if (g.send_slots.Free() < 0 || !g.send_backlog.empty()) DrainGsiCq();
  const int slot = g.send_backlog.empty() ? g.send_slots.Free() : -1;
  if (slot < 0) {
    if (g.send_backlog.size() >= kMaxPendingMads) {
      CM_DBG("QP1 send queue full: %s dropped", CmAttrName(MadAttr(mad)));
      return ENOMEM;
    }
    Cm::BackloggedMad& m = g.send_backlog.emplace_back();
    m.sgid_index = sgid_index;
    m.dgid = dgid;
    std::memcpy(m.mad, mad, kMadSize);
    return 0;
  }
  return PostMad(slot, ah, mad);
}

// Takes every completion off QP1's CQ: a received MAD is copied to
// Cm::pending_mads and its buffer reposted at once, so the receive queue
// stays full however long handling takes (a REP's handler moves the data QP
// to RTR and RTS, which can take milliseconds; with 128 buffers handled one
// by one, a burst of 1000 REQs or REPs overflowed the queue and every MAD
// dropped cost a 500 ms retransmission).
void DrainGsiCq() {
  Cm& g = G();
  ibv_wc wc[32];
  int n;
  while ((n = ibv_poll_cq(g.cq, 32, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      if (!(wc[i].wr_id & kRecvTag)) {  // send completion
        g.send_slots.Completed();
        continue;
      }
      int slot = int(wc[i].wr_id & 0xffffffff);
      uint8_t* b = g.bufs + size_t(kSendSlots + slot) * kSlotSize;
      if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= kGrh + kMadSize) {
        if (g.pending_mads.size() < kMaxPendingMads) {
          Cm::PendingMad& m = g.pending_mads.emplace_back();
          m.len = uint32_t(kGrh + kMadSize);
          std::memcpy(m.buf, b, kGrh + kMadSize);
        } else {
          ++g.pending_mad_drops;
          CM_DBG("%zu MADs waiting: one dropped (%llu dropped)", g.pending_mads.size(),
                 (unsigned long long)g.pending_mad_drops);
        }
      }
      ibv_sge sge{reinterpret_cast<uintptr_t>(b), kSlotSize, g.mr->lkey};
      ibv_recv_wr wr{}, *bad = nullptr;
      wr.wr_id = kRecvTag | uint64_t(slot);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      ibv_post_recv(g.qp, &wr, &bad);
    }
  }
  FlushSendBacklog();
}

// Drains QP1's CQ and handles the MADs in arrival order, draining again
// after each one (see DrainGsiCq). Not re-entered: a handler's send drains
// completions only.
void PollGsiCq() {
  Cm& g = G();
  DrainGsiCq();
  while (!g.pending_mads.empty()) {
    const Cm::PendingMad m = g.pending_mads.front();
    g.pending_mads.pop_front();
    HandleMad(m.buf, m.len);
    DrainGsiCq();
  }
}

// The CM thread sleeps until QP1's completion channel fires or the next CM
// deadline (a retransmission, a registry lookup, an unclaimed request's
// reclaim), at most kMaxSleepMs: no fixed tick delays a MAD, and an idle CM
// costs one wake-up per kMaxSleepMs.
constexpr int kMaxSleepMs = 50;

int SleepMs() {
  const Clock::time_point next = NextCmDeadline();
  if (next == Clock::time_point::max()) return kMaxSleepMs;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Now()).count();
  return int(std::clamp<long long>(left, 0, kMaxSleepMs));
}

void CmThread() {
  Cm& g = G();
  int sleep_ms = kMaxSleepMs;
  for (;;) {
    pollfd p{g.cc->fd, POLLIN, 0};
    poll(&p, 1, sleep_ms);
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
    sleep_ms = SleepMs();
  }
}

// ---------------------------------------------------------------- start-up
// The digits readlink shows for /proc/self/ns/net ("0" if unknown).
std::string NetnsId() { return std::to_string(NetnsOfSelf().ino); }

// At exit, tell the peers of connected ids, as the kernel's CM does when a
// process's rdma_cm fd is closed: a DREQ each, then passes over QP1's CQ
// until the engine has transmitted them and the DREPs are in. A DREQ lost on
// the way would leave the peer waiting for a disconnect that nothing else
// announces (the kernel's CM keeps retrying after the process is gone), so
// an unanswered one is sent again every 30 ms, for at most ~300 ms
// in all. (Seen: rping's server waiting forever at 10 % loss when the
// client's DREQ and its one copy at exit were both dropped.) The DREQs of
// ids destroyed before their DREP came (cm_linger.cc) go again with them.
void DisconnectAllAtExit() {
  Cm& g = G();
  if (!g.started || g.exited) return;
  std::unique_lock<std::mutex> l(g.mu, std::defer_lock);
  for (int i = 0; i < 200 && !l.try_lock(); ++i) usleep(500);  // the CM thread's pass
  if (!l.owns_lock()) return;
  g.exited = true;  // once: a handler inherited across fork finds it done
  std::vector<Id*> told;
  for (Id* id : g.ids) {
    if (id->id.qp_type == IBV_QPT_UD) continue;
    const CmTransition* t = FindTransition(id->st, CmEvent::kExit);
    if (!t) continue;
    // This DREQ stands for the kernel's at fd close, after the process: the
    // connection's events are no longer delivered (Deliver). One the
    // application's rdma_disconnect sent already keeps its DISCONNECTED.
    if (id->st != St::kDreqSent) id->exit_dreq = true;
    SendDreq(id, /*remember=*/false);
    Apply(id, *t);  // DREQ Sent, timer stopped: the CM thread's retransmissions do not run any more
    told.push_back(id);
  }
  constexpr int kPassUs = 500;
  constexpr int kPassesPerRetry = 30 * 1000 / kPassUs;  // 30 ms
  for (int i = 0; (!told.empty() || !g.lingering.empty()) && i < 600; ++i) {
    PollGsiCq();
    bool unanswered = !g.lingering.empty();
    for (Id* id : told) unanswered |= id->st == St::kDreqSent;
    if (!unanswered && g.send_backlog.empty() && g.send_slots.done() >= g.send_slots.posted()) break;
    if (unanswered && i % kPassesPerRetry == kPassesPerRetry - 1) {
      for (Id* id : told)
        if (id->st == St::kDreqSent) SendDreq(id, /*remember=*/false);
      ResendLingeringDreqs(Now(), /*all=*/true);
    }
    usleep(kPassUs);
  }
  for (Id* id : told) {
    if (const CmTransition* t = FindTransition(id->st, CmEvent::kExitDone)) Apply(id, *t);
  }
}

int StartLocked() {
  Cm& g = G();
  if (g.started) return 0;
  if (g.init_error) return g.init_error;
  auto fail = [&](const char* what) {
    int e = errno ? errno : ENODEV;
    SOFTRNIC_LOG(kError, "%s failed: %s", what, strerror(e));
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
  g.lane = softrnic_cm_lane(g.ctx);
  ibv_port_attr pa{};
  int tbl = 16;
  if (ibv_query_port(g.ctx, 1, &pa) == 0 && pa.gid_tbl_len > 0) tbl = pa.gid_tbl_len;
  g.gid_ip.assign(size_t(tbl), 0);
  g.gid6.assign(size_t(tbl), ibv_gid{});
  for (int i = 0; i < tbl; ++i) {
    ibv_gid gid{};
    if (ibv_query_gid(g.ctx, 1, i, &gid) != 0) continue;
    if (!GidIsIpv4(gid)) {
      g.gid6[size_t(i)] = gid;  // an IPv6 address of the host (issue 15)
      continue;
    }
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
  g.th = StartBackgroundThread("softrnic-cm", CmThread);
  g.th.detach();
  g.send_mad = Qp1Send;
  g.started = true;
  return 0;
}

}  // namespace

int Start() {
  std::lock_guard<std::mutex> l(G().mu);
  return StartLocked();
}


}  // namespace softrnic::rdmacm
