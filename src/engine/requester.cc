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

bool IsReadOrAtomic(WrOpcode op) {
  return op == WrOpcode::kRdmaRead || op == WrOpcode::kAtomicCmpSwp ||
         op == WrOpcode::kAtomicFetchAdd;
}

uint8_t SendOpcode(QpType type, const SendWqe& w, bool first, bool last) {
  using namespace wire::op;
  const uint8_t base = type == QpType::kUc ? 0x20 : 0x00;
  if (type == QpType::kUd) return w.opcode == WrOpcode::kSendWithImm ? kUdSendOnlyImm : kUdSendOnly;
  const bool imm = w.opcode == WrOpcode::kSendWithImm;
  const bool inv = w.opcode == WrOpcode::kSendWithInv;
  if (first && last) {
    if (inv) return kRcSendOnlyInv;
    return base | (imm ? kRcSendOnlyImm : kRcSendOnly);
  }
  if (first) return base | kRcSendFirst;
  if (!last) return base | kRcSendMiddle;
  if (inv) return kRcSendLastInv;
  return base | (imm ? kRcSendLastImm : kRcSendLast);
}

uint8_t WriteOpcode(QpType type, const SendWqe& w, bool first, bool last) {
  using namespace wire::op;
  const uint8_t base = type == QpType::kUc ? 0x20 : 0x00;
  const bool imm = w.opcode == WrOpcode::kRdmaWriteWithImm;
  if (first && last) return base | (imm ? kRcWriteOnlyImm : kRcWriteOnly);
  if (first) return base | kRcWriteFirst;
  if (!last) return base | kRcWriteMiddle;
  return base | (imm ? kRcWriteLastImm : kRcWriteLast);
}

uint32_t PacketsFor(uint32_t length, uint32_t mtu) {
  return length == 0 ? 1 : (length + mtu - 1) / mtu;
}

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
  if (CcWindowFull(qp)) return false;
  if (IsReadOrAtomic(w.opcode)) {
    const uint32_t depth = std::max<uint32_t>(qp->attr.max_rd_atomic, 1);
    if (qp->outstanding_rd_atomic >= depth) return false;
  }
  // IBA 10.8.3.3: a fenced WQE waits for every earlier READ and atomic.
  if ((w.send_flags & kFence) && qp->send_offset == 0 && qp->outstanding_rd_atomic > 0)
    return false;
  return true;
}

void Engine::RunRequester(Qp* qp) {
  if (qp->attr.qp_state != QpState::kRts || qp->rnr_waiting) return;
  // Lost packets first (selective retransmission): they hold the window.
  if (qp->retx_scan) RetransmitLost(qp);
  bool sent = false;
  while (qp->sq_next != qp->sq_tail && qp->attr.qp_state == QpState::kRts) {
    const uint64_t index = qp->sq_next;
    SendWqe& w = qp->Wqe(index);
    // Same-host peer: WRITE/READ/atomics straight into its memory.
    if (shm_direct_ && TryDirect(qp, w, index)) {
      sent = true;
      continue;
    }
    if (!CanSend(qp, w)) break;
    if (!SendNextPacket(qp, w, index)) break;
    sent = true;
  }
  // A deferred ACK leaves after the requests (ack_delay.cc): a peer that
  // sees the ACK, completes and stops polling has the request already.
  if (sent && qp->ack_deferred) PiggybackAck(qp);
}

bool Engine::GatherWqe(Qp* qp, uint64_t index, uint32_t offset, uint32_t len, uint8_t* out) {
  const SendWqe& w = qp->Wqe(index);
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
  if (!w.started) {
    w.started = true;
    w.first_psn = qp->sq_psn;
    w.npackets = (w.opcode == WrOpcode::kAtomicCmpSwp || w.opcode == WrOpcode::kAtomicFetchAdd)
                     ? 1
                     : PacketsFor(w.length, mtu);
    qp->send_offset = 0;
  }
  const AddressVector& av = qp->type == QpType::kUd ? w.ud_av : qp->attr.ah_attr;
  const uint32_t dest_qpn = qp->type == QpType::kUd ? w.remote_qpn : qp->attr.dest_qp_num;

  uint8_t* buf = TxBuffer();
  wire::Bth bth;
  bth.set_pkey(wire::kDefaultPkey);
  bth.set_dest_qp(dest_qpn);
  bth.set_psn(qp->sq_psn);
  // Offer selective retransmission (reserved bit, docs/loss.md).
  if (qp->sr_local) bth.set_sr(true);
  uint32_t payload = 0;
  const uint8_t* direct = nullptr;  // payload left in registered memory
  uint32_t psns_consumed = 1;
  bool last = true;
  const wire::OpcodeInfo* info = nullptr;

  switch (w.opcode) {
    case WrOpcode::kRdmaRead: {
      // A READ resent after a partial response asks only for the rest
      // (IBA 9.7.4.1.4: the requester may reissue from the lost PSN).
      const uint32_t done_bytes = qp->send_offset;
      bth.set_opcode(wire::op::kRcReadRequest);
      bth.set_ack_req(true);
      info = &wire::GetOpcodeInfo(wire::op::kRcReadRequest);
      wire::Reth reth;
      reth.set_va(w.remote_addr + done_bytes);
      reth.set_rkey(w.rkey);
      reth.set_dma_length(w.length - done_bytes);
      std::memcpy(buf + info->reth_offset, reth.b.data(), sizeof(reth));
      psns_consumed = w.npackets - done_bytes / mtu;
      ++qp->outstanding_rd_atomic;
      break;
    }
    case WrOpcode::kAtomicCmpSwp:
    case WrOpcode::kAtomicFetchAdd: {
      const uint8_t opc = w.opcode == WrOpcode::kAtomicCmpSwp ? wire::op::kRcCompareSwap
                                                               : wire::op::kRcFetchAdd;
      bth.set_opcode(opc);
      bth.set_ack_req(true);
      info = &wire::GetOpcodeInfo(opc);
      wire::AtomicEth a;
      a.set_va(w.remote_addr);
      a.set_rkey(w.rkey);
      a.set_swap_add(w.opcode == WrOpcode::kAtomicCmpSwp ? w.swap : w.compare_add);
      a.set_compare(w.opcode == WrOpcode::kAtomicCmpSwp ? w.compare_add : 0);
      std::memcpy(buf + info->atomic_eth_offset, a.b.data(), sizeof(a));
      ++qp->outstanding_rd_atomic;
      break;
    }
    default: {
      const bool first = qp->send_offset == 0;
      payload = std::min(mtu, w.length - qp->send_offset);
      last = qp->send_offset + payload == w.length;
      const bool is_write =
          w.opcode == WrOpcode::kRdmaWrite || w.opcode == WrOpcode::kRdmaWriteWithImm;
      const uint8_t opc =
          is_write ? WriteOpcode(qp->type, w, first, last) : SendOpcode(qp->type, w, first, last);
      bth.set_opcode(opc);
      info = &wire::GetOpcodeInfo(opc);
      const uint32_t pkt_index = wire::PsnDiff(qp->sq_psn, w.first_psn);
      // A resent packet asks for an answer at once: it fills a hole.
      // So does the packet that fills the window (congestion.cc).
      bth.set_ack_req(qp->type == QpType::kRc &&
                      (last || qp->resending || CcFillsWindow(qp) ||
                       pkt_index % kAckReqInterval == kAckReqInterval - 1));
      if (last && (w.send_flags & kSolicited)) bth.set_solicited(true);
      if (info->reth_offset) {
        wire::Reth reth;
        reth.set_va(w.remote_addr);
        reth.set_rkey(w.rkey);
        reth.set_dma_length(w.length);
        std::memcpy(buf + info->reth_offset, reth.b.data(), sizeof(reth));
      }
      if (info->imm_offset) std::memcpy(buf + info->imm_offset, &w.imm_data, 4);
      if (info->ieth_offset) {
        wire::Ieth ieth;
        // For SEND_WITH_INV the rkey travels in imm_data's place (ibv_send_wr
        // invalidate_rkey shares the union), in host order.
        ieth.set_rkey(w.imm_data);
        std::memcpy(buf + info->ieth_offset, ieth.b.data(), sizeof(ieth));
      }
      if (info->deth_offset) {
        wire::Deth deth;
        deth.set_qkey(w.remote_qkey);
        deth.set_src_qp(qp->qpn);
        std::memcpy(buf + info->deth_offset, deth.b.data(), sizeof(deth));
      }
      // Payload straight from registered memory when the transport takes
      // packets in pieces and one SGE holds it (no staging copy);
      // otherwise gathered here (inline data, several SGEs, or a key that
      // fails: GatherWqe reports the error).
      if (payload >= kDirectPayloadMin && !w.is_inline && split_tx_)
        direct = ResolvePayload(qp, index, qp->send_offset, payload);
      if (payload > 0 && direct == nullptr &&
          !GatherWqe(qp, index, qp->send_offset, payload, buf + info->header_length)) {
        // IBA 10.7.3.1: a bad lkey or bounds is a local protection error.
        w.done = true;
        w.status = WcStatus::kLocProtErr;
        RequesterError(qp, WcStatus::kLocProtErr);
        return false;
      }
      break;
    }
  }
  const uint8_t pad = static_cast<uint8_t>((4 - (payload & 3)) & 3);
  bth.set_pad_count(pad);
  std::memcpy(buf, bth.b.data(), sizeof(bth));
  uint32_t length = info->header_length + payload;
  if (direct == nullptr) std::memset(buf + length, 0, pad);
  length += pad + wire::kIcrcSize;
  if (qp->type == QpType::kRc) SrOnTransmit(qp, qp->sq_psn, psns_consumed, payload);
  TxCommit(length, av.sgid_index, av.dgid);
  if (direct != nullptr) {
    transport::TxPacket& p = tx_batch_[tx_count_ - 1];
    p.payload = direct;
    p.payload_length = payload;
    p.head_length = info->header_length;
  }

  qp->sq_psn = wire::PsnAdd(qp->sq_psn, psns_consumed);
  if (last) {
    qp->send_offset = 0;
    ++qp->sq_next;
    if (qp->type != QpType::kRc) {
      // UC and UD complete when the message has left (IBA 9.8.3, 9.8.4).
      w.done = true;
      w.status = WcStatus::kSuccess;
      RetireCompletedWqes(qp);
    }
  } else {
    qp->send_offset += payload;
  }
  if (qp->type == QpType::kRc && !qp->retransmit_armed) ArmRetransmitTimer(qp);
  return true;
}

}  // namespace softrnic::engine
