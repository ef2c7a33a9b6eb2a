// A transport capability: the memory of same-host peer devices, for the
// engine's direct one-sided operations (engine/same_host/shm_direct.h, docs/shm.md).
//
// The engine never names a concrete transport. It asks its transport for
// this capability (Transport::peer_memory(), null when the transport has
// none) and, when it gets one, exports its MRs and QPs in the device's own
// control segment and executes RC WRITE/READ/atomics on a peer's memory
// itself. The shared-memory transport (shm_transport.h) implements it.
//
// Thread-safety: like the Transport that returns it, called under the
// engine lock.
#pragma once

#include <cstdint>
#include <memory>

#include "transport/address.h"
#include "transport/shm_path.h"
#include "transport/shm_segment.h"

namespace softrnic::transport {

// A same-host peer device whose control segment this device has mapped:
// what the engine reads to go direct (its exports, and who it is).
struct ShmPeer {
  uint32_t pid = 0;
  uint64_t nonce = 0;  // tells a restarted device with a reused pid apart
  ShmSegment seg;
  // The peer died and its mapping was dropped: look it up again (PeerFor).
  bool dead = false;
};

class PeerMemory {
 public:
  // This device's own control segment: its exports live there.
  virtual const ShmSegment& own_segment() const = 0;
  // The peer device reachable at `dst` through shared memory, or null (its
  // packets go another way, and so must its one-sided operations).
  // `dest_qpn`: the QP it is for (its top byte picks the process at a
  // host NIC address, docs/host-nic.md).
  virtual std::shared_ptr<ShmPeer> PeerFor(const Endpoint& dst, uint32_t dest_qpn) = 0;
  // Why PeerFor finds a peer at `dst` or not, without attaching to it
  // (`softrnic devinfo --peer`, shm_path.h).
  virtual ShmPathVerdict ExplainPath(const Endpoint& dst) = 0;
  // Direct SEND (engine/same_host/shm_direct_send.cc): a SEND was placed in one of
  // `peer`'s receive queues. Counts it in the peer's segment and rings the
  // peer's doorbell if its engine sleeps, as a ring packet would.
  virtual void NotifyDirectRecv(ShmPeer& peer) = 0;
  // Whether peers placed SENDs in this device's receive queues since the
  // last call (an engine with many open queues then looks at them all).
  virtual bool TakeDirectRecvs() = 0;

 protected:
  ~PeerMemory() = default;  // owned by the transport that implements it
};

}  // namespace softrnic::transport
