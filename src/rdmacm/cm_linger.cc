// Lingering DREQs: the disconnect of an id destroyed before its peer
// answered.
//
// The kernel's CM keeps a destroyed id in TimeWait and goes on sending its
// DREQ until the DREP comes, even after the process has exited (IBA 12.9.6:
// DREQ Sent retransmits until DREP or timeout). Here the CM lives in the
// process, so rdma_destroy_id hands the id's unanswered DREQ to this list:
// the CM thread sends it again every SOFTRNIC_CM_TIMEOUT_MS, at most
// SOFTRNIC_CM_RETRIES times, and the exit hook (cm_qp1.cc) sends all of them
// again while it waits for its DREPs. Without it, a DREQ lost on the way
// (rdma_disconnect, then rdma_destroy_id and exit, as rping's client does)
// left the peer connected to nobody: rping's server at 10 % loss waited
// for a DISCONNECTED that never came.
#include <algorithm>

#include "rdmacm/cm_internal.h"

namespace softrnic::rdmacm {

void LingerDreq(const Id* id) {
  Cm& g = G();
  if (g.lingering.size() >= kMaxLingering) g.lingering.pop_front();
  g.lingering.push_back(Cm::LingeringDreq{id->sgid_index, id->dgid, id->local_comm_id, id->remote_comm_id,
                                          id->remote_qpn, Retries(),
                                          Now() + std::chrono::milliseconds(RetryMs())});
}

void ResendLingeringDreqs(Clock::time_point now, bool all) {
  Cm& g = G();
  for (Cm::LingeringDreq& d : g.lingering) {
    if (!all && d.next > now) continue;
    SendDreqTo(d.sgid_index, d.dgid, d.local_comm_id, d.remote_comm_id, d.remote_qpn);
    --d.retries_left;
    d.next = now + std::chrono::milliseconds(RetryMs());
  }
  std::erase_if(g.lingering, [](const Cm::LingeringDreq& d) { return d.retries_left <= 0; });
}

bool TakeLingeringDrep(uint32_t ours, uint32_t theirs, const ibv_gid& peer) {
  Cm& g = G();
  const auto it = std::find_if(g.lingering.begin(), g.lingering.end(), [&](const Cm::LingeringDreq& d) {
    return d.local_comm_id == ours && d.remote_comm_id == theirs &&
           std::equal(std::begin(d.dgid.raw), std::end(d.dgid.raw), std::begin(peer.raw));
  });
  if (it == g.lingering.end()) return false;
  g.lingering.erase(it);
  return true;
}

}  // namespace softrnic::rdmacm
