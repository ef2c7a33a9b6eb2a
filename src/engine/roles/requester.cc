// Requester: turns send-queue WQEs into packets (IBA 9.7.4; rxe_req.c).
//
// Segments at the path MTU, assigns PSNs (a READ consumes one PSN per
// response packet, IBA 9.7.4.1.4), bounds the packets in flight, honours
// max_rd_atomic and the fence, and sets AckReq on the last packet of every
// message and periodically inside long ones so the window keeps moving.
// Go-back-N retransmission rewinds sq_next/send_offset/sq_psn (completer.cc)
// and this code simply sends again from there; selective retransmission
// (selective.cc) resends single packets through SendNextPacket. The packets
// in flight are bounded by the congestion window (congestion.cc).
#include <algorithm>
#include <cstring>

#include "engine/engine.h"
#include "engine/same_host/shm_placed.h"
#include "engine/wr_opcode.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::engine {
namespace {

// Request an ACK at least this often inside a long message.
constexpr uint32_t kAckReqInterval = 32;
// Below this a payload is copied into the packet buffer even when the
// transport could send it from registered memory: a third iovec per packet
// costs more than copying a few hundred bytes.
constexpr uint32_t kDirectPayloadMin = 512;

// The index of the SGE that holds payload byte *offset, with *offset made
// relative to it; num_sge when the payload is shorter.
uint32_t SgeHolding(const Sge* sges, uint32_t num_sge, uint32_t* offset) {
  uint32_t i = 0;
  while (i < num_sge && *offset >= sges[i].length) *offset -= sges[i++].length;
  return i;
}

}  // namespace

bool Engine::CanSend(const Qp* qp, const SendWqe& w) const {
  if (qp->type != QpType::kRc) return true;
  if (CcWindowFull(qp) || DestWindowFull(qp)) return false;
  if (GetWrOpcodeInfo(w.opcode).read_or_atomic()) {
    const uint32_t depth = std::max<uint32_t>(qp->attr.max_rd_atomic, 1);
    if (qp->req.outstanding_rd_atomic >= depth) return false;
  }
  // IBA 10.8.3.3: a fenced WQE waits for every earlier READ and atomic.
  if ((w.send_flags & kFence) && qp->req.send_offset == 0 && qp->req.outstanding_rd_atomic > 0)
    return false;
  return true;
}

void Engine::RunRequester(Qp* qp) {
  if (qp->attr.qp_state != QpState::kRts || qp->comp.rnr_waiting) return;
  // Lost packets first (selective retransmission): they hold the window.
  if (qp->sr.retx_scan) RetransmitLost(qp);
  DestSync(qp);
  bool sent = false;
  while (qp->sq_next != qp->sq_tail && qp->attr.qp_state == QpState::kRts) {
    const uint64_t index = qp->sq_next;
    SendWqe& w = qp->Wqe(index);
    // BIND_MW, LOCAL_INV: run here once everything before them completed
    // (so they take effect in send-queue order and never meet a rewind).
    if (GetWrOpcodeInfo(w.opcode).local) {
      if (qp->sq_next != qp->sq_head) break;
      ExecuteLocalWqe(qp, w);
      continue;
    }
    // A deferred ACK (ack_delay.cc) leaves right before a request that
    // completes at the peer (SEND*, WRITE with immediate), never behind
    // it: the peer would otherwise complete our request, which we sent
    // only after receiving its message, before the send of that message
    // (tgt's iSER target drops a connection whose first command completes
    // before its last login response).
    if (qp->ack_delay.ack_deferred && GetWrOpcodeInfo(w.opcode).consumes_recv_wqe)
      PiggybackAck(qp);
    // Same-host peer: WRITE/READ/atomics straight into its memory.
    if (shm_direct_ && TryDirect(qp, w, index)) {
      sent = true;
      continue;
    }
    if (!CanSend(qp, w)) break;
    if (!SendNextPacket(qp, w, index)) break;
    DestSync(qp);  // the next CanSend and AckReq see this packet
    sent = true;
  }
  // Behind the other requests (WRITE, READ, atomics: nothing completes at
  // the peer): a peer that takes the ACK, completes and stops polling then
  // has the request already. Ahead of a WRITE, the ACK let ib_write_lat's
  // target complete and go back to spinning on memory while the WRITE was
  // still on its way, left for its progress thread: 53 us one-way over
  // UDP instead of 5 (docs/engine.md, "ACK delay").
  if (sent && qp->ack_delay.ack_deferred) PiggybackAck(qp);
}

// --- What the completer asks of the requester (completer.cc) ---
// The requester's cursor (sq_next, send_offset, sq_psn) and READ/atomic
// count are written here only: the completer judges acknowledgements and
// calls these, as rxe's completer asks and its requester retries.

void Engine::RequesterSkipAcked(Qp* qp) {
  // After a go-back-N rewind an acknowledgement may cover packets of the
  // first transmission past the resend cursor (sq_psn): move the cursor to
  // comp_psn instead of resending what the responder has.
  if (wire::PsnDiff(qp->comp.comp_psn, qp->req.sq_psn) <= 0) return;
  qp->req.sq_psn = qp->comp.comp_psn;
  qp->req.send_offset = 0;
  qp->sq_next = qp->sq_head;
  while (qp->sq_next != qp->sq_tail && qp->Wqe(qp->sq_next).done) ++qp->sq_next;
  if (qp->sq_next == qp->sq_tail) return;
  const SendWqe& cur = qp->Wqe(qp->sq_next);
  const int32_t into = wire::PsnDiff(qp->comp.comp_psn, cur.first_psn);
  if (cur.started && into > 0 && !GetWrOpcodeInfo(cur.opcode).read_or_atomic())
    qp->req.send_offset = static_cast<uint32_t>(into) * qp->mtu_bytes;
}

void Engine::RequesterGoBackTo(Qp* qp, uint32_t packets_into_head) {
  // Go-back-N (IBA 9.7.5.1.1): everything from the head WQE's packet
  // `packets_into_head` (comp_psn) is sent again, READs and atomics
  // included, so none of them is outstanding any more.
  qp->sq_next = qp->sq_head;
  qp->req.send_offset = packets_into_head * qp->mtu_bytes;
  qp->req.sq_psn = qp->comp.comp_psn;
  qp->req.outstanding_rd_atomic = 0;
}

void Engine::RequesterAnswered(Qp* qp) {
  // A READ's last response or an atomic's ACK frees its max_rd_atomic slot
  // (IBA 9.5): CanSend may let the next one go.
  if (qp->req.outstanding_rd_atomic) --qp->req.outstanding_rd_atomic;
}

bool Engine::RequesterResend(Qp* qp, uint64_t index, SendWqe& w, uint32_t psn) {
  // The cursor points at the packet, the packet is built as the first
  // time, and the cursor goes back.
  const uint64_t save_next = qp->sq_next;
  const uint32_t save_offset = qp->req.send_offset;
  const uint32_t save_psn = qp->req.sq_psn;
  const uint32_t save_rd = qp->req.outstanding_rd_atomic;
  qp->sq_next = index;
  // A READ request asks from its PSN to its request's end (qp.h); an
  // atomic is one packet.
  qp->req.send_offset = GetWrOpcodeInfo(w.opcode).atomic
                            ? 0
                            : static_cast<uint32_t>(wire::PsnDiff(psn, w.first_psn)) * qp->mtu_bytes;
  qp->req.sq_psn = psn;
  if (!SendNextPacket(qp, w, index)) return false;  // the QP is in error now
  qp->sq_next = save_next;
  qp->req.send_offset = save_offset;
  qp->req.sq_psn = save_psn;
  qp->req.outstanding_rd_atomic = save_rd;
  return true;
}

void Engine::ExecuteLocalWqe(Qp* qp, SendWqe& w) {
  WcStatus status = WcStatus::kSuccess;
  if (w.opcode == WrOpcode::kBindMw) {
    const MwBindRequest bind{.mw = w.bind_mw, .mr = w.bind_mr, .addr = w.remote_addr,
                             .length = w.bind_length, .access = w.bind_access,
                             .new_rkey = w.rkey};
    status = CheckBind(bind, qp, qp->pd);
    if (status == WcStatus::kSuccess) ApplyBind(bind, qp);
  } else {
    // LOCAL_INV (IBA 10.6.7.2.5): a bound type 2 window of this QP's PD.
    // Fast-registered MRs, its other target, do not exist in softrnic.
    Mw* mw = mr_table_.FindWindow(w.imm_data);
    if (mw != nullptr && mw->type == MwType::kType2 && mw->pd == qp->pd && mw->bound())
      Unbind(mw);
    else
      status = WcStatus::kMwBindErr;
  }
  ++qp->sq_next;
  w.done = true;
  w.status = status;
  if (status != WcStatus::kSuccess) {
    RequesterError(qp, status);
    return;
  }
  RetireCompletedWqes(qp);
}

bool Engine::GatherWqe(Qp* qp, uint64_t index, uint32_t offset, uint32_t len, uint8_t* out) {
  const SendWqe& w = qp->Wqe(index);
  if (w.opcode == WrOpcode::kAtomicWrite) {  // its word, copied at post
    if (offset > sizeof(w.compare_add) || len > sizeof(w.compare_add) - offset) return false;
    std::memcpy(out, reinterpret_cast<const uint8_t*>(&w.compare_add) + offset, len);
    return true;
  }
  if (w.is_inline) {
    std::memcpy(out, qp->WqeInline(index) + offset, len);
    return true;
  }
  const Sge* sges = qp->WqeSges(index);
  for (uint32_t i = SgeHolding(sges, w.num_sge, &offset); i < w.num_sge && len > 0;
       ++i, offset = 0) {
    const Sge& s = sges[i];
    if (s.length == 0) continue;  // an empty SGE names no memory to check
    const uint32_t chunk = std::min(len, s.length - offset);
    uint8_t* src = nullptr;
    if (mr_table_.ResolveLocal(s.lkey, qp->pd, s.addr + offset, chunk, false, &src) !=
        KeyCheck::kOk)
      return false;
    std::memcpy(out, src, chunk);
    out += chunk;
    len -= chunk;
  }
  return len == 0;
}

const uint8_t* Engine::ResolvePayload(Qp* qp, uint64_t index, uint32_t offset, uint32_t len) {
  const SendWqe& w = qp->Wqe(index);
  const Sge* sges = qp->WqeSges(index);
  const uint32_t i = SgeHolding(sges, w.num_sge, &offset);
  if (i == w.num_sge || len > sges[i].length - offset) return nullptr;  // spans SGEs: gather it
  uint8_t* p = nullptr;
  if (mr_table_.ResolveLocal(sges[i].lkey, qp->pd, sges[i].addr + offset, len, false, &p) !=
      KeyCheck::kOk)
    return nullptr;
  return p;
}

bool Engine::SendNextPacket(Qp* qp, SendWqe& w, uint64_t index) {
  const uint32_t mtu = qp->mtu_bytes;
  const WrOpcodeInfo& op = GetWrOpcodeInfo(w.opcode);
  if (!w.started) {
    w.started = true;
    w.first_psn = qp->req.sq_psn;
    w.npackets = op.atomic ? 1 : PacketsFor(w.length, mtu);
    qp->req.send_offset = 0;
    // Its packets may carry bytes of a same-host peer's shared pages: no
    // later WRITE is placed before it completes (shm_placed.h).
    if (w.placed_end == w.placed_begin) qp->shm.ring_barrier = index + 1;
  }
  const AddressVector& av = qp->type == QpType::kUd ? w.ud_av : qp->attr.ah_attr;
  PacketFields f{.dest_qpn = qp->type == QpType::kUd ? w.remote_qpn : qp->attr.dest_qp_num,
                 .psn = qp->req.sq_psn,
                 // Offer selective retransmission (reserved bit, docs/loss.md).
                 .sr = qp->sr.sr_local,
                 .va = w.remote_addr,
                 .rkey = w.rkey};
  uint32_t payload = 0;
  // The message bytes the packet stands for, and those it carries (fewer
  // when some were placed directly: shm_placed.h).
  uint32_t range = 0;
  uint32_t payload_offset = qp->req.send_offset;
  uint32_t psns_consumed = 1;
  bool last = true;
  if (op.read_or_atomic()) {
    // One request packet; the READ's PSNs are its response packets'.
    f.opcode = op.On(qp->type).only;
    f.ack_req = true;
    if (op.read) {
      // A long READ is asked for in requests of at most kReadRequestPackets
      // response packets (qp.h); one resent after a partial response asks
      // only for the rest of its request (IBA 9.7.4.1.4: the requester may
      // reissue from the lost PSN). send_offset: the bytes asked for so far.
      const uint32_t from = qp->req.send_offset / mtu;
      const uint32_t end = ReadRequestEnd(from, w.npackets);
      f.va = w.remote_addr + qp->req.send_offset;
      f.dma_length = static_cast<uint32_t>(std::min<uint64_t>(w.length, uint64_t{end} * mtu) -
                                           qp->req.send_offset);
      psns_consumed = end - from;
      last = end == w.npackets;
    } else {
      const bool cmp_swp = f.opcode == wire::op::kRcCompareSwap;
      f.swap_add = cmp_swp ? w.swap : w.compare_add;
      f.compare = cmp_swp ? w.compare_add : 0;
    }
    ++qp->req.outstanding_rd_atomic;
  } else {
    const bool first = qp->req.send_offset == 0;
    range = std::min(mtu, w.length - qp->req.send_offset);
    payload = range;
    if (w.placed_end != w.placed_begin) {
      const PlacedSlice slice = SliceOf(w, qp->req.send_offset, range);
      payload_offset = slice.offset;
      payload = slice.length;
      f.placed = slice.placed;
      f.placed_suffix = slice.suffix;
      if (slice.placed && slice.length == 0 && qp->req.send_offset + range < w.length) {
        // Empty: it and the empty PMTUs after it go as one run.
        psns_consumed = PlacedRunAt(w, qp->req.send_offset, mtu);
        range = psns_consumed * mtu;
        f.placed_run = static_cast<uint8_t>(psns_consumed - 1);
      }
    }
    last = qp->req.send_offset + range == w.length;
    f.opcode = op.On(qp->type).At(first, last);
    const uint32_t pkt_index = wire::PsnDiff(qp->req.sq_psn, w.first_psn);
    // A resent packet asks for an answer at once: it fills a hole.
    // So does the packet that fills the window (congestion.cc).
    f.ack_req = qp->type == QpType::kRc &&
                (last || qp->sr.resending || CcFillsWindow(qp) || DestFillsWindow(qp) ||
                 pkt_index % kAckReqInterval + psns_consumed >= kAckReqInterval);
    f.solicited = last && (w.send_flags & kSolicited);
    f.dma_length = w.length;
    f.imm = w.imm_data;
    // For SEND_WITH_INV the rkey travels in imm_data's place (ibv_send_wr
    // invalidate_rkey shares the union), in host order.
    f.inv_rkey = w.imm_data;
    f.qkey = w.remote_qkey;
    f.src_qp = qp->qpn;
  }
  if (qp->xrc == XrcRole::kSend) {
    // XRC (xrc.cc): the same operation under the XRC prefix, and the
    // XRCETH naming the target's SRQ.
    f.opcode = wire::XrcOpcode(f.opcode);
    f.xrc_srqn = w.xrc_srqn;
  }
  if (f.dest_qpn == kMulticastQpn && qp->type == QpType::kUd) ++stats_.tx_multicast_packets;
  uint8_t* out = StartPacket(f, payload);
  // Payload straight from registered memory when the transport takes
  // packets in pieces and one SGE holds it (no staging copy); otherwise
  // gathered here (inline data, several SGEs, or a key that fails:
  // GatherWqe reports the error).
  const uint8_t* direct = nullptr;
  if (payload >= kDirectPayloadMin && !w.is_inline && split_tx_)
    direct = ResolvePayload(qp, index, payload_offset, payload);
  if (payload > 0 && direct == nullptr && !GatherWqe(qp, index, payload_offset, payload, out)) {
    // IBA 10.7.3.1: a bad lkey or bounds is a local protection error.
    w.done = true;
    w.status = WcStatus::kLocProtErr;
    RequesterError(qp, WcStatus::kLocProtErr);
    return false;
  }
  if (qp->type == QpType::kRc) SrOnTransmit(qp, qp->req.sq_psn, psns_consumed, payload);
  CommitPacket(av.sgid_index, av.dgid, direct, qp->seal.get());
  CountTx(qp);
  // Its doorbell wakes the peer for the ACK sent quietly before it.
  if (qp->ack_delay.wake_owed) AckWakeCarried(qp);

  qp->req.sq_psn = wire::PsnAdd(qp->req.sq_psn, psns_consumed);
  if (last) {
    qp->req.send_offset = 0;
    ++qp->sq_next;
    if (qp->type != QpType::kRc) {
      // UC and UD complete when the message has left (IBA 9.8.3, 9.8.4).
      w.done = true;
      w.status = WcStatus::kSuccess;
      RetireCompletedWqes(qp);
    }
  } else {
    qp->req.send_offset += op.read ? f.dma_length : range;
  }
  if (qp->type == QpType::kRc && !qp->comp.retransmit_armed) ArmRetransmitTimer(qp);
  return true;
}

}  // namespace softrnic::engine
