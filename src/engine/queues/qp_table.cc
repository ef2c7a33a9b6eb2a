// The QP table (qps_): a QP joins it with a QPN of its own and a reference
// on each object it uses, and leaves it with every list, export and
// binding that still names it (Device::CreateQp and DestroyQp check the
// arguments and hold the lock).
#include <algorithm>
#include <cerrno>

#include "common/secure_random.h"
#include "engine/device/device_internal.h"
#include "engine/engine.h"
#include "engine/queues/multicast.h"

namespace softrnic::engine {

// A QPN for a new QP: a fresh 24-bit value from the kernel CSPRNG every time
// (M1, docs/security.md). A sequence would let a blind injector that knows
// one of our QPNs walk to the next; a random one also keeps a restarted
// process off the QPNs its previous incarnation's peers may still send to.
// Skips QP0 and QP1 (the special SMI and GSI QPs), 0xFFFFFF (the multicast
// destination QPN), and QPNs live or lingering (Engine::StartLinger).
// With a host NIC lane (docs/host-nic.md) the top byte is the lane and the
// other 16 bits are random: the host's shared port steers by that byte.
// 0 when the lane has no free QPN left.
uint32_t Engine::FreshQpnLocked() const {
  const int lane = transport_->qpn_lane();
  const uint32_t mask = lane < 0 ? wire::kQpnMask : 0xFFFFu;
  const uint32_t top = lane < 0 ? 0 : static_cast<uint32_t>(lane) << 16;
  // Random draws; a lane nearly full is searched in order from a random
  // point instead of drawing forever.
  const uint32_t start = SecureRandom32() & mask;
  for (uint32_t i = 0; i < 64 + mask + 1; ++i) {
    const uint32_t qpn = top | ((i < 64 ? SecureRandom32() : start + i) & mask);
    if (qpn < 2 || qpn == kMulticastQpn) continue;
    if (qps_.contains(qpn) || IsLingering(qpn)) continue;
    return qpn;
  }
  return 0;
}

int Engine::AddQpLocked(std::unique_ptr<Qp>& qp, uint32_t fixed_qpn) {
  if (qps_.size() >= attr_.max_qp) return ENOMEM;
  if (fixed_qpn != 0) {
    if (qps_.contains(fixed_qpn)) return EBUSY;
    qp->qpn = fixed_qpn;
  } else {
    qp->qpn = FreshQpnLocked();
    if (qp->qpn == 0) return ENOMEM;
  }
  if (qp->pd) ++qp->pd->users;
  if (qp->send_cq) ++qp->send_cq->users;
  if (qp->recv_cq) ++qp->recv_cq->users;
  if (qp->srq) ++qp->srq->users;
  if (qp->xrcd) ++qp->xrcd->users;
  PublishQp(qp.get());
  const uint32_t qpn = qp->qpn;
  if (trace_ != nullptr) TraceQpCreated(qp.get());
  qps_[qpn] = std::move(qp);
  return 0;
}

int Engine::RemoveQpLocked(Qp* qp, uint32_t* async_events_reported, void* handle,
                           std::unique_ptr<Qp>* doomed) {
  auto it = qps_.find(qp->qpn);
  if (it == qps_.end() || it->second.get() != qp) return EINVAL;
  if (qp->multicast_attachments > 0) return EBUSY;  // multicast.h
  if (qp->xrc == XrcRole::kRecv && qp->xrc_handles.size() > 1) {
    // Other handles (ibv_open_qp) keep the QP; events name one of them
    // from now on, never the one going away.
    if (async_events_reported != nullptr) *async_events_reported = 0;
    if (handle == nullptr) handle = qp->handle;
    std::erase(qp->xrc_handles, handle);
    if (handle == qp->handle) {
      ForgetAsyncEventsLocked(AsyncObject::kQp, handle, async_events_reported);
      qp->handle = qp->xrc_handles.front();
    }
    return 0;
  }
  ForgetAsyncEventsLocked(AsyncObject::kQp, qp->handle, async_events_reported);
  // The application may have seen the completion its deferred ACK
  // acknowledges and exit next (ack_delay.cc): it leaves now.
  SendDeferredAck(qp);
  if (tx_.count() > 0) FlushTx();
  auto& wl = work_list_;
  wl.erase(std::remove(wl.begin(), wl.end(), qp), wl.end());
  auto& tl = timer_list_;
  tl.erase(std::remove(tl.begin(), tl.end(), qp), tl.end());
  StartLinger(qp);
  DestRelease(qp);
  if (qp_rows_wanted_) qps_destroyed_.push_back(qp->qpn);  // stats_publisher.h
  CloseRecvExport(qp);  // peers stop placing SENDs here (shm_direct_send.cc)
  if (shm_direct_) shm_direct_->RemoveQp(qp);
  UnbindWindowsOf(qp);
  if (qp->xrc == XrcRole::kRecv) {
    // Its PD, SRQ and CQ are only borrowed per request (xrc.cc).
    --qp->xrcd->users;
  } else {
    --qp->pd->users;
    --qp->send_cq->users;
    if (qp->recv_cq) --qp->recv_cq->users;
    if (qp->srq) --qp->srq->users;
  }
  if (trace_ != nullptr) TraceQpDestroyed(qp);
  *doomed = std::move(it->second);
  qps_.erase(it);
  return 0;
}

}  // namespace softrnic::engine
