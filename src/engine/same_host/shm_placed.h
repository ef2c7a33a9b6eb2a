// Placed WRITEs: an RDMA WRITE to a same-host peer's region that is only
// partly shared (docs/shm.md, "Partly shared targets").
//
// A region's first and last pages stay private to its owner when they are
// not wholly inside it (shm_memory.h), and an application's buffers are
// rarely page aligned, so a WRITE usually covers some private bytes and
// could not go direct at all. Instead the requester (Engine::TryDirect)
// copies the bytes over whole shared pages straight into the peer's memfd
// when it takes the WQE, and then sends the WRITE through the peer's ring
// as usual, except that each packet carries only the bytes of its range
// that were not placed: none, a prefix or a suffix (the placed bits of the
// BTH, wire::Bth::placed). The responder writes that part at its place in
// the range and advances over the whole range (responder.cc ExecuteWrite).
// PSNs, ACKs, retransmission and the completion are those of one ordinary
// message; only the peer's engine sees fewer bytes.
//
// Ordering (IBA 9.5, RC): a packet of an earlier WQE still in flight must
// not land on bytes a later WQE placed. A WRITE is placed only when every
// WQE in flight before it is a placed WRITE to the same region (the ring
// barrier, ShmPathState): their packets carry only bytes outside the shared
// pages, and a placement writes only inside them. When unplaced bytes lie
// on both sides of the placed ones, those are at least one PMTU long, so no
// packet has unplaced bytes on both sides of them.
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/qp.h"
#include "wire/packet.h"

namespace softrnic::engine {

// The part of the packet range [offset, offset + range) of WQE `w` that a
// packet carries.
struct PlacedSlice {
  uint32_t offset = 0;   // message offset of the first byte carried
  uint32_t length = 0;   // bytes carried
  bool placed = false;   // some of the range was placed: set the BTH bits
  bool suffix = false;   // the carried bytes end the range (else begin it)
};

inline PlacedSlice SliceOf(const SendWqe& w, uint32_t offset, uint32_t range) {
  const uint32_t end = offset + range;
  const uint32_t a = std::max(offset, w.placed_begin);
  const uint32_t b = std::min(end, w.placed_end);
  if (a >= b) return PlacedSlice{offset, range, false, false};  // nothing placed here
  if (a > offset) return PlacedSlice{offset, a - offset, true, false};  // the prefix
  return PlacedSlice{b, end - b, true, true};  // the suffix (empty: all placed)
}

// Packets that would carry nothing in a row go as one (wire::Bth::
// placed_run): the number of whole PMTUs from `offset` on that lie in the
// placed bytes, before the message's last packet, at most kMaxPlacedRun;
// 1 when the packet at `offset` carries something or is the last.
inline constexpr uint32_t kMaxPlacedRun = 64;

inline uint32_t PlacedRunAt(const SendWqe& w, uint32_t offset, uint32_t mtu) {
  uint32_t k = 0;
  // PMTU k + 1 ends at offset + (k + 1) * mtu: inside the placed bytes and
  // strictly before the message's end (the last packet is never in a run).
  while (k < kMaxPlacedRun && offset >= w.placed_begin &&
         uint64_t{offset} + uint64_t{k + 1} * mtu <= w.placed_end &&
         uint64_t{offset} + uint64_t{k + 1} * mtu < w.length)
    ++k;
  return k == 0 ? 1 : k;
}

// Receiver side: the further PSNs (and PMTUs) a placed run stands for; only
// an RC WRITE packet with the placed bit can be one (the bits of packets
// from a network are cleared at dispatch, engine.cc).
inline uint32_t PlacedRunOf(const wire::Packet& pkt) {
  return pkt.info->has(wire::kIsWrite) && pkt.bth.placed() ? pkt.bth.placed_run() : 0;
}

}  // namespace softrnic::engine
