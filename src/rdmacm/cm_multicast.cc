// rdma_join_multicast(3), rdma_join_multicast_ex(3), rdma_leave_multicast(3)
// over RoCE v2, as the kernel's rdma_cm does them for an Ethernet port
// (cma_iboe_join_multicast) and librdmacm completes them (ucma_process_join):
//
// - The group is an IPv4 multicast address; its MGID is the IPv4-mapped
//   GID ::ffff:a.b.c.d (cma_iboe_set_mgid for RoCE v2). An IPv6 group is
//   EOPNOTSUPP, as the kernel answers for RoCE v2; an address that is not
//   multicast is EINVAL (the kernel's attach would refuse its MGID).
// - There is no subnet manager: joining is local. The id's UD QP (if it has
//   one and the join is not send-only) is attached to the MGID at once,
//   which makes the device receive the group's datagrams
//   (engine/queues/multicast.h), and RDMA_CM_EVENT_MULTICAST_JOIN follows with
//   what a sender needs: an address vector to the MGID from the id's
//   source GID (hop limit 64, as the kernel sets), the multicast QPN
//   0xFFFFFF and RDMA_UDP_QKEY, the Q_Key rdma_cm gives UD QPs of
//   RDMA_PS_UDP. If the attach fails, the event is MULTICAST_ERROR with its
//   errno (librdmacm's behaviour).
// - Leaving detaches the QP; an address never joined is EADDRNOTAVAIL.
//   rdma_destroy_qp detaches a QP still attached first (the kernel would
//   refuse to destroy it: EBUSY), so destroying an id's QP without leaving
//   does not leak it.
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "rdmacm/cm_internal.h"
#include "rdmacm/cma.h"

using namespace softrnic::rdmacm;

namespace softrnic::rdmacm {
namespace {

constexpr uint8_t kMulticastHopLimit = 64;  // IPV6_DEFAULT_HOPLIMIT, the kernel's choice
constexpr uint32_t kMulticastQpn = 0xFFFFFF;

// Same address and port as a joined one (librdmacm compares the whole
// sockaddr of the address's length).
bool SameGroupAddress(const sockaddr_storage& joined, const sockaddr* addr) {
  const size_t len = addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  return joined.ss_family == addr->sa_family && std::memcmp(&joined, addr, len) == 0;
}

int Join(rdma_cm_id* cid, const sockaddr* addr, uint16_t join_flags, void* context) {
  if (!cid || !addr) return Fail(EINVAL);
  if (addr->sa_family == AF_INET6) return Fail(EOPNOTSUPP);  // as the kernel for RoCE v2
  if (addr->sa_family != AF_INET) return Fail(EINVAL);
  sockaddr_in sin;
  std::memcpy(&sin, addr, sizeof sin);
  const uint32_t group_ip = ntohl(sin.sin_addr.s_addr);
  if (!IN_MULTICAST(group_ip)) return Fail(EINVAL);
  Id* id = ToId(cid);
  {
    std::lock_guard<std::mutex> l(G().mu);
    // The kernel's rdma_join_multicast: an id with an address (bound to a
    // device or resolved), of a UD port space.
    if (!id->bound || !cid->verbs || cid->qp_type != IBV_QPT_UD) return Fail(EINVAL);
    if (id->st != St::kIdle && id->st != St::kAddrResolved && id->st != St::kRouteResolved)
      return Fail(EINVAL);
    McJoin j;
    std::memcpy(&j.addr, &sin, sizeof sin);
    SetGidFromIp(&j.mgid, group_ip);
    j.join_flags = join_flags;
    j.context = context;
    int status = 0;
    if (cid->qp && join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
      status = ibv_attach_mcast(cid->qp, &j.mgid, 0);
      j.attached = status == 0;
    }
    Event* e = NewEvent(id, status ? RDMA_CM_EVENT_MULTICAST_ERROR : RDMA_CM_EVENT_MULTICAST_JOIN,
                        -status);
    rdma_ud_param& ud = e->ev.param.ud;
    ud.private_data = context;
    ud.ah_attr.is_global = 1;
    ud.ah_attr.port_num = cid->port_num ? cid->port_num : 1;
    ud.ah_attr.grh.dgid = j.mgid;
    ud.ah_attr.grh.sgid_index = static_cast<uint8_t>(id->sgid_index);
    ud.ah_attr.grh.hop_limit = kMulticastHopLimit;
    ud.ah_attr.grh.traffic_class = id->tos;
    ud.qp_num = kMulticastQpn;
    ud.qkey = RDMA_UDP_QKEY;
    CM_DBG("join %s: %s", GidStr(j.mgid).c_str(), status ? strerror(status) : "attached");
    // Kept even after a failed attach, as librdmacm keeps it: the
    // application leaves it.
    id->multicast.push_back(j);
    Deliver(id, e);
  }
  return Complete(id);
}

}  // namespace

void DetachAllMulticast(Id* id, ibv_qp* qp) {
  for (McJoin& j : id->multicast) {
    if (j.attached && qp) ibv_detach_mcast(qp, &j.mgid, 0);
    j.attached = false;
  }
}

}  // namespace softrnic::rdmacm

CMA_EXPORT int rdma_join_multicast(rdma_cm_id* cid, sockaddr* addr, void* context) {
  return Join(cid, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

CMA_EXPORT int rdma_join_multicast_ex(rdma_cm_id* cid, rdma_cm_join_mc_attr_ex* attr,
                                      void* context) {
  if (!cid || !attr) return Fail(EINVAL);
  if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED) return Fail(EOPNOTSUPP);
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS)) return Fail(EINVAL);
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
      attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
    return Fail(EINVAL);
  return Join(cid, attr->addr, static_cast<uint16_t>(attr->join_flags), context);
}

CMA_EXPORT int rdma_leave_multicast(rdma_cm_id* cid, sockaddr* addr) {
  if (!cid || !addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
    return Fail(EINVAL);
  Id* id = ToId(cid);
  std::lock_guard<std::mutex> l(G().mu);
  auto& joins = id->multicast;
  auto it = std::find_if(joins.begin(), joins.end(),
                         [&](const McJoin& j) { return SameGroupAddress(j.addr, addr); });
  if (it == joins.end()) return Fail(EADDRNOTAVAIL);
  if (it->attached && cid->qp) ibv_detach_mcast(cid->qp, &it->mgid, 0);
  joins.erase(it);
  return 0;
}
