#include "rdmacm/rsocket_wire.h"

#include <algorithm>
#include <cstring>

namespace softrnic::rsocket {

namespace {

RsRecvEvent Violation(const char* why) {
  RsRecvEvent ev;
  ev.kind = RsRecvKind::kProtocolError;
  ev.why = why;
  return ev;
}

}  // namespace

RsRecvEvent ClassifyRecv(const RsCompletion& c, const uint8_t* slot, size_t slot_len) {
  RsRecvEvent ev;
  if (!c.success) {
    ev.kind = RsRecvKind::kFlushed;
    return ev;
  }
  if (c.rdma_with_imm) return Violation("RDMA WRITE with immediate (never sent by rsockets)");
  if (!c.recv) return Violation("not a receive completion");
  // The bytes actually in the slot: never more than the slot, whatever the
  // completion claims.
  const size_t in_slot = std::min<size_t>(c.byte_len, std::min(slot_len, kRsSlot));
  if (c.byte_len > in_slot) return Violation("receive longer than its slot");
  if (c.with_imm) {
    if (c.imm != kRsCtlIomap && c.imm != kRsCtlIounmap)
      return Violation("SEND with an unknown immediate value");
    if (c.byte_len != sizeof(RsIomapWire) || slot == nullptr)
      return Violation("mapping message of the wrong length");
    RsIomapWire w;
    std::memcpy(&w, slot, sizeof w);
    ev.map.offset = w.offset;
    ev.map.addr = w.addr;
    ev.map.len = w.len;
    ev.map.rkey = w.rkey;
    if (c.imm == kRsCtlIounmap) {
      ev.kind = RsRecvKind::kIounmap;
      return ev;
    }
    // A mapping must be non-empty and must not wrap, in offsets or
    // addresses: riowrite computes offset + len and addr + (off - offset).
    if (w.len == 0 || w.offset + w.len < w.offset || w.addr + w.len < w.addr)
      return Violation("mapping with an empty or wrapping range");
    ev.kind = RsRecvKind::kIomap;
    return ev;
  }
  if (c.byte_len == 0) {
    ev.kind = RsRecvKind::kEof;
    return ev;
  }
  ev.kind = RsRecvKind::kData;
  ev.length = c.byte_len;
  return ev;
}

const RsPeerMap* FindPeerMap(const std::vector<RsPeerMap>& maps, uint64_t offset) {
  for (const RsPeerMap& m : maps)
    if (offset >= m.offset && offset - m.offset < m.len) return &m;
  return nullptr;
}

bool ApplyPeerMapEvent(std::vector<RsPeerMap>& maps, const RsRecvEvent& ev) {
  if (ev.kind == RsRecvKind::kIounmap) {
    const auto it = std::find_if(maps.begin(), maps.end(),
                                 [&](const RsPeerMap& m) { return m.offset == ev.map.offset; });
    if (it == maps.end()) return false;
    maps.erase(it);
    return true;
  }
  if (ev.kind != RsRecvKind::kIomap) return false;
  if (maps.size() >= kRsMaxPeerMaps) return false;
  const RsPeerMap& n = ev.map;
  for (const RsPeerMap& m : maps)  // [n.offset, n.offset+n.len) against [m.offset, m.offset+m.len)
    if (n.offset < m.offset + m.len && m.offset < n.offset + n.len) return false;
  maps.push_back(n);
  return true;
}

}  // namespace softrnic::rsocket
