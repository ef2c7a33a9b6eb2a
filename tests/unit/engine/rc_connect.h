// Connecting an RC QP to a peer QP known only by its number and GID, for the
// multi-process engine tests: each process creates its QPs, the processes
// exchange QP numbers and GIDs over a socketpair (fd_exchange.h), and each
// then moves its QPs INIT -> RTR -> RTS with ConnectRc. It returns an errno
// instead of asserting, so a forked child that runs no gtest can call it.
// (Two devices of one process connect their Sides with rc_pair.h's Connect.)
#pragma once

#include <cstdint>

#include "engine/device/device.h"

namespace softrnic::engine::testing {

// The remote QP, as the peer process reported it.
struct RcPeer {
  uint32_t qpn = 0;
  Gid gid;
};

// What the tests' connections differ in. The rest is the same for all:
// path MTU 1024, remote write, read and atomic rights, 8 READs/atomics
// outstanding each way, RNR NAK timer 1 (0.01 ms).
struct RcLinkOptions {
  uint32_t psn = 0;      // the first PSN, both directions
  uint8_t timeout = 14;  // Local ACK Timeout: 4.096 us * 2^14 = 67 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
};

// INIT -> RTR -> RTS toward `peer`; 0, or the errno of the first
// transition that failed.
inline int ConnectRc(Device& dev, Qp* qp, const RcPeer& peer, const RcLinkOptions& o = {}) {
  QpAttr attr;
  attr.qp_state = QpState::kInit;
  attr.qp_access_flags = kRemoteWrite | kRemoteRead | kRemoteAtomic;
  if (int e = dev.ModifyQp(qp, attr, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags)) return e;
  attr.qp_state = QpState::kRtr;
  attr.path_mtu = Mtu::k1024;
  attr.dest_qp_num = peer.qpn;
  attr.rq_psn = o.psn;
  attr.max_dest_rd_atomic = 8;
  attr.min_rnr_timer = 1;
  attr.ah_attr.is_global = true;
  attr.ah_attr.dgid = peer.gid;
  if (int e = dev.ModifyQp(qp, attr,
                           kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                               kQpMaxDestRdAtomic | kQpMinRnrTimer))
    return e;
  attr.qp_state = QpState::kRts;
  attr.sq_psn = o.psn;
  attr.timeout = o.timeout;
  attr.retry_cnt = o.retry_cnt;
  attr.rnr_retry = o.rnr_retry;
  attr.max_rd_atomic = 8;
  return dev.ModifyQp(qp, attr,
                      kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic);
}

}  // namespace softrnic::engine::testing
