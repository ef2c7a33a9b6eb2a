// Direct SEND into a shared receive queue (the receiver's side; the
// requester is shm_direct_send.cc's TryDirectSend, and the protocol of a
// queue is there and in transport/shm_segment.h).
//
// An SRQ is exported once a QP of it is published (OpenSrqExport), in one
// of the segment's SRQ queues, which every QP slot of the SRQ names. Its
// oldest WQEs (up to kShmRecvEntries) leave srq->rq for the export
// (ExportSrqRecvs): the engine keeps each one's wr_id and SGEs per entry
// (SrqExport), and describes it in the shared entry. From there a WQE
// leaves in one of three ways, each finishing its entry:
//   - a peer claims it (the CAS on `taken`), fills it and marks it done;
//     CollectSrqRecvs completes it on the QP the peer named;
//   - the responder claims it for a SEND packet (ClaimSrqRecvForPacket),
//     after collecting what peers filled before (RC order);
//   - a filled entry that names no QP of this SRQ gives its WQE back to
//     srq->rq, to be described again.
// Entries finish out of order (peers of different QPs fill them at their
// own pace), so the export's window moves on from its oldest entry once
// that one has finished; a peer stopped inside its copy holds the window
// at its entry, and the SRQ's other WQEs then go to packets only.
//
// The SRQ counts its WQEs in the export as its own (SrqWqesHeld): posting
// beyond max_wr is ENOMEM, a resize below them EINVAL, and the limit event
// (IBA 10.2.9.3) fires when a peer's SEND is collected as when a packet
// takes a WQE.
#include <sched.h>

#include <algorithm>
#include <atomic>

#include "engine/engine.h"

namespace softrnic::engine {

using transport::kShmRecvClosed;
using transport::kShmRecvEntries;
using transport::ShmRecvEntry;
using transport::ShmRecvQueue;

namespace {

constexpr uint64_t kEntryMask = kShmRecvEntries - 1;
// An SRQ whose oldest entry is not done is looked past (which reads the
// `taken` word peers write) once in this many collection passes.
constexpr uint32_t kLookPastEvery = 64;

// Entry i's WQE has left the export (completed, handed to the responder,
// given back); the window moves on past its oldest finished entries.
void FinishEntry(SrqExport& x, size_t i) {
  x.finished[i] = 1;
  --x.live;
  while (x.oldest < x.exported && x.finished[x.oldest & kEntryMask]) ++x.oldest;
}

}  // namespace

transport::ShmRecvQueue* Engine::SrqSharedQueue(const Srq* srq) const {
  return peer_memory_->own_segment().srq_queue(static_cast<uint32_t>(srq->shm.slot));
}

void Engine::OpenSrqExport(Srq* srq) {
  if (srq->shm.slot >= 0 || !shm_direct_ || peer_memory_ == nullptr || srq->xrcd != nullptr)
    return;
  const int slot = shm_direct_->TakeSrqSlot();
  if (slot < 0) return;  // all taken: this SRQ's SENDs go as packets
  SrqExport& x = srq->shm;
  x.wr_id.assign(kShmRecvEntries, 0);
  x.num_sge.assign(kShmRecvEntries, 0);
  x.sges.assign(size_t{kShmRecvEntries} * srq->rq.max_sge, Sge{});
  x.finished.assign(kShmRecvEntries, 1);
  x.slot = slot;
  ShmRecvQueue* q = SrqSharedQueue(srq);
  const uint64_t base = q->NextEpoch();
  x.oldest = x.exported = base;
  x.live = 0;
  x.idle_passes = 0;
  srq_exports_.push_back(srq);
  ExportSrqRecvs(srq);
  // Opened last: a peer that sees the new epoch sees its entries.
  q->taken.store(base, std::memory_order_seq_cst);
}

void Engine::CloseSrqExport(Srq* srq) {
  SrqExport& x = srq->shm;
  if (x.slot < 0) return;
  ShmRecvQueue* q = SrqSharedQueue(srq);
  // No claim succeeds from now on; those made before are waited for,
  // bounded, as CloseRecvExport does.
  const uint64_t claimed = q->taken.fetch_or(kShmRecvClosed, std::memory_order_seq_cst) &
                           ~kShmRecvClosed;
  const auto deadline = Clock::now() + kRevokeWait;
  int spins = 0;
  while (true) {
    CollectSrqRecvs(srq, true);
    if (x.oldest >= claimed || x.oldest == x.exported) break;
    if (++spins > 64) {
      if (Clock::now() > deadline) break;
      sched_yield();
    }
  }
  // A queue a stopped peer may still write into is not handed out again.
  if (x.oldest >= claimed || x.oldest == x.exported) shm_direct_->GiveBackSrqSlot(x.slot);
  x.slot = -1;
  x.live = 0;
  std::erase(srq_exports_, srq);
}

void Engine::ExportSrqRecvs(Srq* srq) {
  SrqExport& x = srq->shm;
  if (x.slot < 0) return;
  ShmRecvQueue* q = SrqSharedQueue(srq);
  RecvQueue& rq = srq->rq;
  while (!rq.Empty() && x.exported < x.oldest + kShmRecvEntries) {
    const uint64_t at = x.exported;
    const size_t i = at & kEntryMask;
    const uint32_t n = rq.FrontNumSge();
    Sge* sges = &x.sges[i * rq.max_sge];
    x.wr_id[i] = rq.FrontWrId();
    x.num_sge[i] = n;
    std::copy_n(rq.FrontSges(), n, sges);
    x.finished[i] = 0;
    rq.Pop();
    ++x.live;
    ++x.exported;
    DescribeRecvWqe(q->entry(at), at, srq->pd, sges, n);
  }
}

bool Engine::CollectSrqRecvs(Srq* srq, bool thorough) {
  SrqExport& x = srq->shm;
  if (x.slot < 0 || x.live == 0) return false;
  ShmRecvQueue* q = SrqSharedQueue(srq);
  bool any = false;
  uint64_t claimed = 0;  // read once, when needed
  bool claimed_read = false;
  for (uint64_t at = x.oldest; at < x.exported; ++at) {
    // Looking past (below): only entries claimed before `taken` was read.
    if (claimed_read && at >= claimed) break;
    const size_t i = at & kEntryMask;
    if (x.finished[i]) continue;
    ShmRecvEntry* e = q->entry(at);
    uint64_t done = e->done.load(std::memory_order_acquire);
    if (done != at + 1 && !claimed_read) {
      // Not filled: not claimed (and then no later entry is either), or
      // claimed by a peer still copying, which later entries do not wait
      // for. Looking past it reads `taken`, which peers write: now and
      // then, or when the responder needs every SEND before its packet.
      if (!thorough && ++x.idle_passes < kLookPastEvery) break;
      x.idle_passes = 0;
      claimed = q->taken.load(std::memory_order_acquire) & ~kShmRecvClosed;
      claimed_read = true;
      if (at >= claimed) break;
      // One QP's requester claims and fills its entries in order, so RC
      // order holds if every `done` looked at past here is read after
      // `taken`: an entry claimed before that read had every earlier entry
      // of its requester filled before it, and the read makes those `done`s
      // visible. Hence this entry is read again, and no entry at or beyond
      // `claimed` is looked at (filled meanwhile, it may be the next SEND
      // of this entry's requester). Both were seen with UCX's am_bw.
      done = e->done.load(std::memory_order_acquire);
    }
    if (done != at + 1) continue;  // looked past
    const uint32_t qpn = e->qpn.load(std::memory_order_relaxed);
    const auto it = qps_.find(qpn);
    Qp* qp = it != qps_.end() && it->second->srq == srq && !it->second->destroyed
                 ? it->second.get()
                 : nullptr;
    // Its message of packets completes first (CollectDirectRecvs says why).
    if (qp != nullptr && qp->resp.recv_active) continue;
    // Its WQE (x.wr_id[i], x.sges) stays here until ExportSrqRecvs, after
    // the loop, describes another in this entry.
    FinishEntry(x, i);
    any = true;
    const Sge* sges = &x.sges[i * srq->rq.max_sge];
    if (qp == nullptr || qp->attr.qp_state == QpState::kReset) {
      // No QP of this SRQ (gone since the claim, or a hostile peer's
      // number): the WQE is the SRQ's again. Room: it was counted.
      srq->rq.Push(RecvWr{x.wr_id[i], {sges, x.num_sge[i]}});
      continue;
    }
    const uint32_t byte_len = e->byte_len.load(std::memory_order_relaxed);
    const uint32_t imm = e->imm.load(std::memory_order_relaxed);
    const uint32_t flags = e->flags.load(std::memory_order_relaxed);
    uint64_t capacity = 0;
    for (uint32_t k = 0; k < x.num_sge[i]; ++k) capacity += sges[k].length;
    // The peer's words are input like a packet (CollectDirectRecvs); a QP
    // moved to Error since the claim flushes the WQE it consumed.
    WcStatus status = byte_len <= capacity ? WcStatus::kSuccess : WcStatus::kLocLenErr;
    if (!ReceivesRequests(qp->attr.qp_state)) status = WcStatus::kWrFlushErr;
    qp->resp.recv_wr_id = x.wr_id[i];
    ++stats_.shm_direct_recv_ops;
    stats_.shm_direct_recv_bytes += byte_len;
    CompleteRecv(qp, status, WcOpcode::kRecv, byte_len, imm,
                 (flags & transport::kShmRecvWithImm) ? kWcWithImm : 0u, 0,
                 (flags & transport::kShmRecvSolicited) != 0);
  }
  if (any) {
    x.idle_passes = 0;
    ExportSrqRecvs(srq);
    CheckSrqLimit(srq);
  }
  return any;
}

bool Engine::ClaimSrqRecvForPacket(Qp* qp, bool* taken) {
  Srq* srq = qp->srq;
  SrqExport& x = srq->shm;
  if (x.slot < 0) return true;
  // Direct SENDs of this QP that came before the packet complete first
  // (RC order), wherever they are in the queue.
  CollectSrqRecvs(srq, true);
  ShmRecvQueue* q = SrqSharedQueue(srq);
  // Peers of other QPs claim entries concurrently: a few tries, then RNR.
  for (int tries = 0; tries < 8; ++tries) {
    uint64_t t = q->taken.load(std::memory_order_acquire);
    // Every described WQE claimed (or the queue closing): the SRQ's own.
    if ((t & kShmRecvClosed) || t >= x.exported) return true;
    if (!q->taken.compare_exchange_strong(t, t + 1, std::memory_order_acq_rel)) continue;
    const size_t i = t & kEntryMask;
    // Finished before its claim: a `done` no peer may write yet (hostile)
    // made the collector complete it. Its WQE is gone, and the slot may
    // describe a later one already: claim the next.
    if (t < x.oldest || x.finished[i]) continue;
    qp->resp.recv_wr_id = x.wr_id[i];
    qp->resp.recv_num_sge = x.num_sge[i];
    std::copy_n(&x.sges[i * srq->rq.max_sge], x.num_sge[i], qp->resp.recv_sges.begin());
    FinishEntry(x, i);
    ExportSrqRecvs(srq);
    *taken = true;
    return true;
  }
  return false;
}

}  // namespace softrnic::engine
