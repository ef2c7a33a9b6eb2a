// Direct SEND on one host: a SEND placed straight into the receiver's
// posted buffer, with no packet, no ACK and no work by the receiver's
// engine until it collects the completion (docs/shm.md, "Two-sided
// operations without packets").
//
// Receiver (the owner of the receive queue): while an RC QP without SRQ is
// in a state that receives (RTR, RTS, SQD, SQE), its receive queue is open
// in the control segment (transport::ShmRecvQueue): the oldest
// kShmRecvEntries posted WQEs are described there with their buffers as
// (MR slot, generation, address in the owner), for the buffers that lie in
// the shared pages of an MR with local write. Whoever consumes a WQE moves
// the queue's `taken` word on with a CAS first: a peer placing a SEND, or
// this engine's responder serving a SEND packet (ClaimRecvForPacket), so a
// WQE is never consumed twice. The peer writes the completion (length,
// immediate, flags) into the entry and its `done`; this engine collects
// finished entries in queue order (CollectDirectRecvs), before its
// responder takes a WQE for a packet and whenever the segment's
// direct_recvs count moved, and completes them through the normal receive
// completion path (CQ, channel, solicited events).
//
// Requester (TryDirectSend): the same conditions as a direct WRITE (RC, the
// target QP in a receiving state and connected to this QP, nothing of this
// QP in flight, so RC ordering holds against its packets), and the target's
// next WQE exported with room for the message in shared pages of MRs of the
// target QP's PD with local write, unchanged since it was posted (the MR
// slot's generation). Every check is made before the claim; after it the
// copy cannot fail. Anything else goes as packets, and the target's engine
// answers as over UDP (RNR NAK with no WQE, length and protection errors).
// Direct SENDs consume no PSN and no MSN.
//
// Revocation: the peer holds each MR slot's `inflight` raised while it
// copies (shm_direct.h), so a deregistration waits for it or the copy lands
// in the orphaned memfd. Closing a queue (the QP leaves the receiving
// states, is reset or destroyed) sets kShmRecvClosed, so no new claim
// succeeds, and waits (bounded, kRevokeWait) for claimed WQEs to be done;
// one a peer still fills after that (stopped inside the copy) is flushed or
// dropped with the queue, and its late bytes land in the buffer, which is
// still registered.
//
// SRQs (not XRC): an SRQ has one queue in the segment, shared by its QPs,
// whose slots name it (ShmQpSlot::srq_slot). Its oldest WQEs move out of
// srq->rq into the export (SrqExport) as they are described; the peer
// claims the entry at `taken` as above and also writes the QP its SEND is
// for. This engine completes filled entries as they are done, not in
// queue order (CollectSrqRecvs: a peer stopped inside its copy must not
// hold up other QPs' SENDs; one QP's SENDs come from one requester, which
// claims and fills them in order). The responder serving a SEND packet
// claims the entry at `taken` like a peer, after collecting (RC order
// again), or, with every described WQE claimed, takes the SRQ's own front
// WQE. A filled entry naming no QP of the SRQ (destroyed meanwhile, or a
// hostile peer's number) gives its WQE back to the SRQ; one for a QP in
// Error completes it with a flush error.
//
// Not direct: XRC, WRITE_WITH_IMM and SEND_WITH_INV, WQEs with more than
// kShmRecvSges SGEs, and sends while a capture is on (captures show
// packets).
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "engine/engine.h"

namespace softrnic::engine {

using transport::kShmRecvClosed;
using transport::kShmRecvEntries;
using transport::kShmRecvNotDirect;
using transport::kShmRecvSges;
using transport::ShmMrSlot;
using transport::ShmRecvEntry;
using transport::ShmRecvQueue;

namespace {

// Up to this many open receive queues, every pass looks at each of them
// (CollectAllDirectRecvs); beyond, only when direct_recvs moved.
constexpr size_t kScanQueuesUpTo = 8;

}  // namespace

// --- Receiver ---

void Engine::SyncRecvExport(Qp* qp) {
  const bool want = peer_memory_ != nullptr && qp->type == QpType::kRc && qp->srq == nullptr &&
                    qp->xrc == XrcRole::kNone && qp->shm.shm_slot >= 0 && !qp->destroyed &&
                    ReceivesRequests(qp->attr.qp_state);
  if (!want) {
    CloseRecvExport(qp);
    return;
  }
  if (qp->shm.rq_open) return;
  ShmRecvQueue* q = peer_memory_->own_segment().recv_queue(static_cast<uint32_t>(qp->shm.shm_slot));
  const uint64_t base = q->NextEpoch();
  qp->shm.rq_consumed = qp->shm.rq_exported = base;
  qp->shm.rq_open = true;
  recv_exports_.push_back(qp);
  ExportRecvs(qp);
  // Opened last: a peer that sees the new epoch sees its entries.
  q->taken.store(base, std::memory_order_seq_cst);
}

void Engine::CloseRecvExport(Qp* qp) {
  if (!qp->shm.rq_open) return;
  ShmRecvQueue* q = peer_memory_->own_segment().recv_queue(static_cast<uint32_t>(qp->shm.shm_slot));
  // No claim succeeds from now on; those made before are waited for
  // (bounded: a peer stopped inside its copy must not block us).
  const uint64_t taken = q->taken.fetch_or(kShmRecvClosed, std::memory_order_seq_cst);
  const auto deadline = Clock::now() + kRevokeWait;
  int spins = 0;
  while (true) {
    CollectDirectRecvs(qp);
    if (qp->shm.rq_consumed >= (taken & ~kShmRecvClosed)) break;
    if (++spins > 64) {
      if (Clock::now() > deadline) break;
      sched_yield();
    }
  }
  qp->shm.rq_open = false;
  std::erase(recv_exports_, qp);
}

void Engine::ExportRecvs(Qp* qp) {
  if (!qp->shm.rq_open) return;
  const transport::ShmSegment& own = peer_memory_->own_segment();
  ShmRecvQueue* q = own.recv_queue(static_cast<uint32_t>(qp->shm.shm_slot));
  const RecvQueue& rq = qp->rq;
  const uint64_t limit =
      qp->shm.rq_consumed + std::min<uint64_t>(rq.count, kShmRecvEntries);
  for (; qp->shm.rq_exported < limit; ++qp->shm.rq_exported) {
    const uint64_t at = qp->shm.rq_exported;
    const size_t slot = (rq.head + (at - qp->shm.rq_consumed)) % rq.capacity();
    DescribeRecvWqe(q->entry(at), at, qp->pd, &rq.sges[slot * rq.max_sge], rq.num_sge[slot]);
  }
}

void Engine::DescribeRecvWqe(ShmRecvEntry* e, uint64_t at, const Pd* pd, const Sge* sges,
                             uint32_t n) {
  bool direct = n <= kShmRecvSges;
  for (uint32_t i = 0; direct && i < n; ++i) {
    const Sge& s = sges[i];
    uint64_t host = 0;
    uint32_t mr_slot = 0;
    uint64_t mr_state = 0;
    if (s.length > 0) {
      // The buffer, as the responder would check it (ScatterSges), and
      // wholly in the shared pages of an exported MR.
      const Mr* mr = mr_table_.FindByLkey(s.lkey);
      uint8_t* p = nullptr;
      direct = mr != nullptr && mr->shm_slot >= 0 && mr->pd == pd &&
               mr_table_.ResolveLocal(s.lkey, pd, s.addr, s.length, true, &p) == KeyCheck::kOk;
      if (direct) {
        host = reinterpret_cast<uint64_t>(p);
        direct = host >= mr->share.start && host - mr->share.start <= mr->share.length &&
                 s.length <= mr->share.length - (host - mr->share.start);
        mr_slot = static_cast<uint32_t>(mr->shm_slot);
        mr_state = mr->shm_state;
      }
    }
    e->sge[i].addr.store(host, std::memory_order_relaxed);
    e->sge[i].length.store(s.length, std::memory_order_relaxed);
    e->sge[i].mr_slot.store(mr_slot, std::memory_order_relaxed);
    e->sge[i].mr_state.store(mr_state, std::memory_order_relaxed);
  }
  e->num_sge.store(direct ? n : kShmRecvNotDirect, std::memory_order_relaxed);
  e->tag.store(at + 1, std::memory_order_release);
}

bool Engine::CollectDirectRecvs(Qp* qp) {
  // Not while the responder holds a WQE for a message of packets: a peer
  // places nothing before that message has completed (RC ordering), so a
  // `done` seen now would be a hostile peer's, and would take the place of
  // the WQE in progress.
  if (!qp->shm.rq_open || qp->resp.recv_active) return false;
  ShmRecvQueue* q = peer_memory_->own_segment().recv_queue(static_cast<uint32_t>(qp->shm.shm_slot));
  bool any = false;
  while (qp->shm.rq_consumed < qp->shm.rq_exported && !qp->rq.Empty()) {
    ShmRecvEntry* e = q->entry(qp->shm.rq_consumed);
    if (e->done.load(std::memory_order_acquire) != qp->shm.rq_consumed + 1) break;
    const uint32_t byte_len = e->byte_len.load(std::memory_order_relaxed);
    const uint32_t imm = e->imm.load(std::memory_order_relaxed);
    const uint32_t flags = e->flags.load(std::memory_order_relaxed);
    uint64_t capacity = 0;
    for (uint32_t i = 0; i < qp->rq.FrontNumSge(); ++i) capacity += qp->rq.FrontSges()[i].length;
    qp->resp.recv_wr_id = qp->rq.FrontWrId();
    qp->rq.Pop();
    ++qp->shm.rq_consumed;
    // The peer's word is input like a packet: a length beyond the buffer
    // is reported as the responder would (it cannot have been placed).
    const WcStatus status = byte_len <= capacity ? WcStatus::kSuccess : WcStatus::kLocLenErr;
    ++stats_.shm_direct_recv_ops;
    stats_.shm_direct_recv_bytes += byte_len;
    CompleteRecv(qp, status, WcOpcode::kRecv, byte_len, imm,
                 (flags & transport::kShmRecvWithImm) ? kWcWithImm : 0u, 0,
                 (flags & transport::kShmRecvSolicited) != 0);
    any = true;
  }
  if (any) ExportRecvs(qp);
  return any;
}

bool Engine::CollectAllDirectRecvs() {
  if (recv_exports_.empty() && srq_exports_.empty()) return false;
  // With few open queues, a pass looks at the next entry of each (its
  // `done` line, which only the placing peer writes). Reading the
  // device-wide count instead would pull its line back from the peer at
  // every poll, and the peer's next increment would wait for it.
  if (recv_exports_.size() + srq_exports_.size() > kScanQueuesUpTo &&
      !peer_memory_->TakeDirectRecvs())
    return false;
  bool any = false;
  for (Qp* qp : recv_exports_) any |= CollectDirectRecvs(qp);
  for (Srq* srq : srq_exports_) any |= CollectSrqRecvs(srq, false);
  return any;
}

bool Engine::ClaimRecvForPacket(Qp* qp, bool* taken) {
  *taken = false;
  if (qp->srq != nullptr) return ClaimSrqRecvForPacket(qp, taken);
  if (!qp->shm.rq_open) return true;
  // Direct SENDs that came before this packet complete first (RC order:
  // the peer placed them before it sent the packet).
  CollectDirectRecvs(qp);
  if (qp->rq.Empty()) return true;  // the caller answers RNR
  ShmRecvQueue* q = peer_memory_->own_segment().recv_queue(static_cast<uint32_t>(qp->shm.shm_slot));
  uint64_t expected = qp->shm.rq_consumed;
  if (!q->taken.compare_exchange_strong(expected, expected + 1, std::memory_order_acq_rel))
    return false;  // a peer holds the front WQE (or the queue closes)
  ++qp->shm.rq_consumed;
  qp->shm.rq_exported = std::max(qp->shm.rq_exported, qp->shm.rq_consumed);
  return true;
}

// --- Requester ---

bool Engine::TryDirectSend(Qp* qp, SendWqe& w, uint64_t index, const DirectTarget& target) {
  if (capture_ != nullptr) return false;  // captures show SENDs as packets
  const std::shared_ptr<transport::ShmPeer>& peer = qp->shm.shm_peer;
  const transport::ShmSegment& seg = peer->seg;
  // Its own queue, or its SRQ's (which the slot names: bounded here).
  if (target.srq_slot > transport::kShmSrqSlots) return false;
  ShmRecvQueue* q = target.srq_slot != 0 ? seg.srq_queue(target.srq_slot - 1)
                                          : seg.recv_queue(target.qp_slot);
  const uint64_t t = q->taken.load(std::memory_order_acquire);
  if (t & kShmRecvClosed) return false;
  ShmRecvEntry* e = q->entry(t);
  if (e->tag.load(std::memory_order_acquire) != t + 1) return false;  // not posted (RNR)
  const uint32_t n = e->num_sge.load(std::memory_order_relaxed);
  if (n > kShmRecvSges) return false;  // kShmRecvNotDirect among others

  // The local side first: the send's own buffers must pass the checks the
  // packet path makes while gathering, since nothing may fail after the
  // claim.
  if (!w.is_inline) {
    const Sge* sges = qp->WqeSges(index);
    for (uint32_t i = 0; i < w.num_sge; ++i) {
      uint8_t* src = nullptr;
      if (sges[i].length > 0 &&
          mr_table_.ResolveLocal(sges[i].lkey, qp->pd, sges[i].addr, sges[i].length, false,
                                 &src) != KeyCheck::kOk)
        return false;  // the packet path reports it
    }
  }

  // The target's buffers: each in shared pages of an MR of the target QP's
  // PD with local write, unchanged since it was posted. Each MR slot's
  // `inflight` stays raised until the copy is over (shm_direct.h).
  struct Piece {
    uint8_t* dst;
    uint32_t len;
  };
  Piece pieces[kShmRecvSges];
  ShmMrSlot* entered[kShmRecvSges];
  uint32_t n_entered = 0;
  struct Leave {
    ShmMrSlot** slots;
    uint32_t* n;
    ~Leave() {
      for (uint32_t i = 0; i < *n; ++i) slots[i]->inflight.fetch_sub(1, std::memory_order_release);
    }
  } leave{entered, &n_entered};
  uint32_t n_pieces = 0;
  uint32_t remaining = w.length;
  for (uint32_t i = 0; i < n && remaining > 0; ++i) {
    const uint32_t len = e->sge[i].length.load(std::memory_order_relaxed);
    if (len == 0) continue;
    const uint32_t ms = e->sge[i].mr_slot.load(std::memory_order_relaxed);
    if (ms >= transport::kShmMrSlots) return false;
    ShmMrSlot* m = seg.mr_slot(ms);
    m->inflight.fetch_add(1, std::memory_order_seq_cst);
    entered[n_entered++] = m;
    const uint64_t state = m->state.load(std::memory_order_seq_cst);
    if (!(state & 1) || state != e->sge[i].mr_state.load(std::memory_order_relaxed)) return false;
    const auto r = std::memory_order_relaxed;
    const uint64_t share_start = m->share_start.load(r);
    const uint64_t share_len = m->share_len.load(r);
    const uint64_t addr = e->sge[i].addr.load(r);
    if ((m->key_pd.load(r) >> 32) != target.pd_id || !(m->access.load(r) & kLocalWrite) ||
        share_len == 0 || addr < share_start || addr - share_start > share_len ||
        len > share_len - (addr - share_start))
      return false;
    const uint32_t take = std::min(len, remaining);
    uint8_t* p = shm_direct_->MapPeerMemory(peer, m->fd.load(r), m->fd_ino.load(r),
                                            m->fd_offset.load(r) + (addr - share_start), take);
    if (p == nullptr) return false;
    pieces[n_pieces++] = Piece{p, take};
    remaining -= take;
  }
  if (remaining > 0) return false;  // does not fit: the responder reports it

  // The claim: from here on the WQE is this SEND's.
  uint64_t expected = t;
  if (!q->taken.compare_exchange_strong(expected, t + 1, std::memory_order_acq_rel)) return false;
  uint32_t offset = 0;
  for (uint32_t i = 0; i < n_pieces; ++i) {
    // Cannot fail: the buffers were checked above, under the engine lock.
    (void)GatherWqe(qp, index, offset, pieces[i].len, pieces[i].dst);
    offset += pieces[i].len;
  }
  uint32_t flags = 0;
  if (w.opcode == WrOpcode::kSendWithImm) flags |= transport::kShmRecvWithImm;
  if (w.send_flags & kSolicited) flags |= transport::kShmRecvSolicited;
  e->byte_len.store(w.length, std::memory_order_relaxed);
  e->imm.store(w.opcode == WrOpcode::kSendWithImm ? w.imm_data : 0, std::memory_order_relaxed);
  e->flags.store(flags, std::memory_order_relaxed);
  e->qpn.store(qp->attr.dest_qp_num, std::memory_order_relaxed);  // an SRQ's entries need it
  e->done.store(t + 1, std::memory_order_release);
  peer_memory_->NotifyDirectRecv(*peer);

  ++shm_direct_->direct_ops;
  ++stats_.shm_direct_ops;
  stats_.shm_direct_bytes += w.length;
  ++stats_.shm_direct_send_ops;
  stats_.shm_direct_send_bytes += w.length;
  ++qp->counters.shm_direct_ops;
  qp->counters.shm_direct_bytes += w.length;
  NoteQpCounters(qp);
  ++qp->sq_next;
  w.done = true;
  w.status = WcStatus::kSuccess;
  RetireCompletedWqes(qp);
  return true;
}

}  // namespace softrnic::engine
