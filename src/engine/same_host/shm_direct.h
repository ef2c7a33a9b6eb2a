// One-sided operations without the target's CPU (docs/shm.md).
//
// Target side (ShmDirect::PublishMr/RevokeMr/PublishQp/RemoveQp): every MR
// with remote rights and shared pages (shm_memory.h) and every RC QP are
// exported in the device's control segment, where same-host peers
// read them.
//
// Requester side (Engine::TryDirect): an RDMA WRITE, READ, CMP_SWAP or
// FETCH_ADD of an RC QP whose peer is reachable through shared memory is
// executed with plain copies / atomic instructions on the peer's memfd,
// mapped here, after the same checks the responder makes (responder.cc,
// MrTable::ResolveRemote): target QP state, QP access flags, rkey, PD,
// region right, bounds. It is then completed locally through the normal
// completion path. Anything that does not pass (or is not in the shared
// part of the region) goes through the ring as a packet, and the target's
// engine answers it exactly as over UDP (NAK remote access etc.).
//
// Revocation protocol (the MR slot's `state` and `inflight`, seq_cst):
//   requester: inflight += 1; s = state; if valid: check, access; inflight -= 1
//   owner:     state = invalid; wait until inflight == 0 (bounded, kRevokeWait)
// Either the requester sees the invalid state, or the owner sees its
// increment and waits until the access is over. The wait is bounded (a
// peer stopped, throttled or killed inside an access would block dereg
// forever), so it cannot be what makes revocation safe. What does: a
// requester reaches the owner's memory only through the owner's memfd,
// mapped in the requester, never through the owner's address space
// (no process_vm_writev/readv, which write wherever the address points
// when they run), and only MRs with shared pages are exported. When the
// last registration covering a page goes, the owner turns it back into
// private memory before DeregMr returns (shm_memory.h), so an access that
// passed its checks before the deregistration and runs after it, however
// late, lands in the orphaned memfd and never in memory the application
// has freed or reused. A slot whose count did not drain is quarantined
// until it does. Not covered: pages that could not be copied back (out of
// memory: they stay shared), a device destroyed with MRs still registered
// and memory freed before its deregistration (their pages stay shared: the
// application may already be reusing them), and a same-user peer, which
// can open /proc/<pid>/mem anyway.
//
// RC ordering: a WQE goes direct only when every earlier WQE of its QP has
// completed (nothing in flight through the ring), so it can neither pass nor
// be passed by a packet of the same QP. Direct operations consume no PSN.
//
// Thread-safety: under the engine lock; the shared slots are atomics.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/shm_segment.h"

namespace softrnic::transport {
struct ShmPeer;
}

namespace softrnic::engine {

class Mr;
class Qp;

// How long DeregMr waits for peers inside an access to leave.
inline constexpr auto kRevokeWait = std::chrono::milliseconds(100);

class ShmDirect {
 public:
  explicit ShmDirect(const transport::ShmSegment* own);
  ~ShmDirect();

  // --- Target side ---
  void PublishMr(Mr* mr, uint32_t pd_id);
  // Marks the slot invalid and waits for in-flight peer accesses to drain.
  void RevokeMr(Mr* mr);
  // srq_slot: the SRQ queue its SRQ is exported in, -1 for none.
  void PublishQp(Qp* qp, uint32_t pd_id, int srq_slot);
  void RemoveQp(Qp* qp);
  // An SRQ queue of the segment for an SRQ (shm_direct_send.cc); -1 when
  // all are taken (its SENDs go as packets).
  int TakeSrqSlot();
  void GiveBackSrqSlot(int slot) { free_srq_.push_back(static_cast<uint32_t>(slot)); }

  // --- Requester side ---
  // The peer's memfd mapping covering [fd_offset, fd_offset+len) for an MR
  // slot, opened through /proc/<pid>/fd/<fd> and cached by (peer, inode).
  // Null if it cannot be mapped.
  uint8_t* MapPeerMemory(const std::shared_ptr<transport::ShmPeer>& peer, int fd, uint64_t ino,
                         uint64_t fd_offset, uint64_t len);
  // The slot index of `qpn` in the peer's QP table (hint first), or -1.
  static int FindQpSlot(const transport::ShmSegment& seg, uint32_t qpn, int hint);
  // The slot index of `rkey` in the peer's MR table, or -1.
  int FindMrSlot(const transport::ShmPeer* peer, uint32_t rkey);

  uint64_t direct_ops = 0;  // through the mapped memfd

 private:
  const transport::ShmSegment* own_;
  std::vector<uint32_t> free_mr_;
  std::vector<uint32_t> quarantined_mr_;  // revoked with inflight != 0
  std::vector<uint32_t> free_qp_;
  std::vector<uint32_t> free_srq_;
  uint64_t generation_ = 0;

  struct Mapping {
    const transport::ShmPeer* peer;
    uint64_t pid_nonce;
    uint64_t ino;
    uint8_t* base;
    uint64_t size;
  };
  std::vector<Mapping> mappings_;
  struct RkeyHint {
    const transport::ShmPeer* peer;
    uint32_t rkey;
    uint32_t slot;    // kNoSlot: known not to be exported
    uint32_t misses;
  };
  std::vector<RkeyHint> rkey_hints_;  // small, most-recent first
  void DropMappingsOf(const transport::ShmPeer* peer);
  bool TakeFreeMrSlot(uint32_t* out);
};

}  // namespace softrnic::engine
