// UD multicast: which QPs of this device are attached to which group
// (ibv_attach_mcast(3) / ibv_detach_mcast(3)).
//
// A group is a multicast GID (transport/udp_multicast.h says which GIDs are
// multicast and how the UDP transport receives them). A UD datagram whose
// address vector names a group and whose BTH DestQP is the multicast QPN
// 0xFFFFFF goes to the group's IP address like any datagram; every device
// with QPs attached receives a copy and hands it to each of them, checking
// each QP's Q_Key as for a datagram addressed to it (multicast.cc). The
// device joins the transport's group when its first QP attaches and leaves
// it when its last one detaches.
//
// The rules are the kernel's (ib_attach_mcast, uverbs): only UD QPs, only
// multicast GIDs (EINVAL otherwise); attaching a QP twice is a no-op;
// detaching a QP that is not attached is EINVAL; a QP with attachments
// cannot be destroyed (EBUSY) until it detaches.
//
// Thread-safety: engine state, guarded by Engine::mu_.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/types.h"

namespace softrnic::engine {

class Qp;

// The multicast QPN (BTH DestQP of every multicast packet).
inline constexpr uint32_t kMulticastQpn = 0xFFFFFF;

class MulticastGroups {
 public:
  // Limits the device reports (ibv_device_attr.max_mcast_qp_attach and
  // max_total_mcast_qp_attach): QPs per group, and attachments in all. The
  // groups per device are the transport's (Transport::max_multicast_groups,
  // the device's max_mcast_grp), checked by Device::AttachMulticast.
  static constexpr uint32_t kMaxQpsPerGroup = 64;
  static constexpr uint32_t kMaxAttachments = 4096;

  struct Group {
    Gid gid;
    std::vector<Qp*> qps;
  };

  // The group's QPs, or null if no QP of this device is attached to it.
  const Group* Find(const Gid& gid) const;
  // Adds qp to the group (creating the group: *created true). false when
  // the group is full or the device's attachments are used up.
  bool Attach(const Gid& gid, Qp* qp, bool* created);
  bool IsAttached(const Gid& gid, const Qp* qp) const;
  // Removes qp; *emptied: the group has no QP left and is gone.
  bool Detach(const Gid& gid, Qp* qp, bool* emptied);
  size_t group_count() const { return groups_.size(); }

 private:
  Group* FindMutable(const Gid& gid);
  std::vector<Group> groups_;  // few: a device's max_mcast_grp is small
  uint32_t attachments_ = 0;
};

}  // namespace softrnic::engine
