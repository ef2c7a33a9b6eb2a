// The receive side of softrnic's rsockets wire protocol (rsocket.cc), as a
// pure function of one receive completion and the bytes of its slot, so
// that every decision about bytes a peer sent is made in one place that a
// fuzzer can drive (fuzz/rsocket_fuzzer.cc).
//
// What a conforming peer (this library) ever sends into a receive slot:
//   - a SEND of 1..kRsSlot bytes without immediate data: stream data;
//   - a zero-length SEND without immediate data: end of stream (EOF);
//   - a SEND with immediate kRsCtlIomap and exactly sizeof(RsIomapWire)
//     bytes: a riomap announcement;
//   - a SEND with immediate kRsCtlIounmap and exactly sizeof(RsIomapWire)
//     bytes: the mapping at that offset is gone (riounmap).
// It never sends RDMA WRITE with immediate (which consumes a receive WQE,
// IBA 9.7.5.1.6, but whose byte_len is the WRITE's length, chosen by the
// peer, not a count of bytes in the slot), nor any other immediate value. Anything else is a protocol violation, and
// the connection is reset: a peer that sends it is broken or hostile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace softrnic::rsocket {

inline constexpr size_t kRsSlot = 64 * 1024;   // one receive buffer
inline constexpr uint32_t kRsCtlIomap = 1;     // immediate data: announcement
inline constexpr uint32_t kRsCtlIounmap = 2;   // immediate data: withdrawal
// Live mappings a peer may announce on one connection; one more is a
// protocol violation (each costs memory and a linear search per riowrite).
inline constexpr size_t kRsMaxPeerMaps = 256;

struct RsIomapWire {  // the announcement's payload (host order: same library)
  uint64_t offset, addr, len;
  uint32_t rkey, pad;
};

struct RsPeerMap {
  uint64_t offset = 0, addr = 0, len = 0;
  uint32_t rkey = 0;
};

// One receive completion, reduced to what the protocol looks at.
struct RsCompletion {
  bool success = false;        // wc.status == IBV_WC_SUCCESS
  bool rdma_with_imm = false;  // wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM
  bool recv = false;           // wc.opcode == IBV_WC_RECV
  bool with_imm = false;       // wc.wc_flags & IBV_WC_WITH_IMM
  uint32_t imm = 0;            // host order
  uint32_t byte_len = 0;
};

enum class RsRecvKind {
  kData,           // `length` bytes of stream data in the slot
  kEof,            // the peer shut down its sending side
  kIomap,          // `map` announced
  kIounmap,        // the mapping at `map.offset` withdrawn
  kFlushed,        // an error completion: the QP is in error, the stream ends
  kProtocolError,  // a violation: reset the connection (`why` says which)
};

struct RsRecvEvent {
  RsRecvKind kind = RsRecvKind::kProtocolError;
  uint32_t length = 0;  // kData: 1..kRsSlot, never more than the slot holds
  RsPeerMap map;        // kIomap / kIounmap
  const char* why = "";
};

// Classifies a completion; `slot` is the receive buffer (slot_len bytes,
// normally kRsSlot) the completion consumed. Reads at most
// min(byte_len, slot_len) bytes of it.
RsRecvEvent ClassifyRecv(const RsCompletion& c, const uint8_t* slot, size_t slot_len);

// Applies an announcement or withdrawal to the peer's mappings: false (a
// protocol violation) for more than kRsMaxPeerMaps live mappings, a mapping
// that overlaps a live one, or a withdrawal of an offset never announced.
bool ApplyPeerMapEvent(std::vector<RsPeerMap>& maps, const RsRecvEvent& ev);

// The live mapping containing `offset`, or null.
const RsPeerMap* FindPeerMap(const std::vector<RsPeerMap>& maps, uint64_t offset);

}  // namespace softrnic::rsocket
