// UD multicast (multicast.h): the attachment table, the verbs that change
// it, and the delivery of a received multicast datagram to every attached QP.
#include "engine/queues/multicast.h"

#include <algorithm>
#include <cerrno>
#include <mutex>

#include "engine/engine.h"

namespace softrnic::engine {

// ---------------------------------------------------------------- the table

MulticastGroups::Group* MulticastGroups::FindMutable(const Gid& gid) {
  for (Group& g : groups_)
    if (g.gid == gid) return &g;
  return nullptr;
}

const MulticastGroups::Group* MulticastGroups::Find(const Gid& gid) const {
  for (const Group& g : groups_)
    if (g.gid == gid) return &g;
  return nullptr;
}

bool MulticastGroups::IsAttached(const Gid& gid, const Qp* qp) const {
  const Group* g = Find(gid);
  return g != nullptr && std::find(g->qps.begin(), g->qps.end(), qp) != g->qps.end();
}

bool MulticastGroups::Attach(const Gid& gid, Qp* qp, bool* created) {
  Group* g = FindMutable(gid);
  *created = g == nullptr;
  if (attachments_ >= kMaxAttachments || (g != nullptr && g->qps.size() >= kMaxQpsPerGroup))
    return false;
  if (g == nullptr) g = &groups_.emplace_back(Group{gid, {}});
  g->qps.push_back(qp);
  ++attachments_;
  return true;
}

bool MulticastGroups::Detach(const Gid& gid, Qp* qp, bool* emptied) {
  *emptied = false;
  Group* g = FindMutable(gid);
  if (g == nullptr) return false;
  auto it = std::find(g->qps.begin(), g->qps.end(), qp);
  if (it == g->qps.end()) return false;
  g->qps.erase(it);
  --attachments_;
  if (g->qps.empty()) {
    *emptied = true;
    std::erase_if(groups_, [&](const Group& x) { return x.gid == gid; });
  }
  return true;
}

// ---------------------------------------------------------------- verbs

int Device::AttachMulticast(Qp* qp, const Gid& gid) {
  SpinLock lock(engine_->mu_);
  return engine_->AttachMulticastLocked(qp, gid);
}

int Device::DetachMulticast(Qp* qp, const Gid& gid) {
  SpinLock lock(engine_->mu_);
  return engine_->DetachMulticastLocked(qp, gid);
}

// A transport that joins no group makes a device without multicast, for
// which the kernel's ib_attach_mcast and ib_detach_mcast answer EOPNOTSUPP
// before any other check (as does such a transport's JoinMulticast,
// transport.h).
int Engine::AttachMulticastLocked(Qp* qp, const Gid& gid) {
  if (attr_.max_mcast_grp == 0) return EOPNOTSUPP;
  if (qp->type != QpType::kUd || !gid.IsMulticast()) return EINVAL;
  if (multicast_.IsAttached(gid, qp)) return 0;  // the kernel's answer, too
  const bool new_group = multicast_.Find(gid) == nullptr;
  if (new_group) {
    if (multicast_.group_count() >= attr_.max_mcast_grp) return ENOMEM;
    if (const int rc = transport_->JoinMulticast(gid)) return rc;
  }
  bool created = false;
  if (!multicast_.Attach(gid, qp, &created)) {
    if (new_group) transport_->LeaveMulticast(gid);
    return ENOMEM;
  }
  ++qp->multicast_attachments;
  return 0;
}

int Engine::DetachMulticastLocked(Qp* qp, const Gid& gid) {
  if (attr_.max_mcast_grp == 0) return EOPNOTSUPP;
  bool emptied = false;
  if (!multicast_.Detach(gid, qp, &emptied)) return EINVAL;
  --qp->multicast_attachments;
  if (emptied) transport_->LeaveMulticast(gid);
  return 0;
}

void Device::BlockSelfMulticastLoopback(Qp* qp) {
  SpinLock lock(engine_->mu_);
  qp->block_self_multicast = true;
}

// ---------------------------------------------------------------- receive

bool Engine::IsOwnEndpoint(const transport::Endpoint& ep) const {
  if (ep.port != udp_port_) return false;
  return std::find(gids_.begin(), gids_.end(), ep.gid) != gids_.end();
}

void Engine::DispatchMulticast(const wire::Packet& pkt, const transport::RxPacket& rx) {
  // Only UD carries multicast, always to the multicast QPN.
  if (wire::ServiceOf(pkt.opcode()) != wire::Service::kUd ||
      pkt.bth.dest_qp() != kMulticastQpn) {
    Dropped(stats_.rx_dropped_service, "multicast packet that is not a UD datagram to QPN 0xFFFFFF",
            rx, pkt.bth.dest_qp());
    return;
  }
  ++stats_.rx_multicast_packets;
  const MulticastGroups::Group* group = multicast_.Find(*rx.group);
  if (group == nullptr) {
    // Left while the datagram was on its way.
    Dropped(stats_.rx_dropped_unknown_qp, "no QP attached to the multicast group", rx,
            kMulticastQpn);
    return;
  }
  // IBV_QP_CREATE_BLOCK_SELF_MCAST_LB: a QP does not hear what it sent itself.
  const bool from_here = IsOwnEndpoint(rx.src);
  const uint32_t src_qp = pkt.deth().src_qp();
  for (Qp* qp : group->qps) {
    if (qp->block_self_multicast && from_here && src_qp == qp->qpn) continue;
    CountRx(qp, rx.length);
    HandleUdRequest(qp, pkt, rx);  // the Q_Key and receive-queue checks of any datagram
  }
}

}  // namespace softrnic::engine
