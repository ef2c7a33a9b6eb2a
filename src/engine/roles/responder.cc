// Responder: checks and executes requests arriving at a QP (IBA 9.7.5.1,
// 9.8; rxe_resp.c).
//
// Order of checks, each before any memory is touched: QP state, PSN
// (duplicate / out of sequence), opcode sequence, packet length, receive
// WQE (or RNR), then key, protection domain, QP and MR access rights, bounds
// and atomic alignment. A failed RC check is NAKed with the code the spec
// names and moves the responder to the Error state (IBA 9.9.3 class B/C/D
// errors); UC and UD silently drop.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "engine/engine.h"
#include "engine/same_host/shm_placed.h"
#include "engine/roles/sr_store.h"
#include "engine/wr_opcode.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::engine {
namespace {

// Builds the 40-byte GRH area of a UD receive buffer. For an IPv4 source
// RoCE v2 delivers the IPv4 header in the last 20 bytes, as Linux rxe and
// mlx5 do and as ibv_init_ah_from_wc expects.
void BuildGrh(const transport::RxPacket& rx, const Gid& local, uint32_t udp_payload_len,
              uint8_t out[40]) {
  std::memset(out, 0, 40);
  if (rx.src.gid.IsV4Mapped()) {
    uint8_t* ip = out + 20;
    ip[0] = 0x45;
    ip[1] = rx.traffic_class;
    wire::StoreBe16(ip + 2, static_cast<uint16_t>(20 + 8 + udp_payload_len));
    wire::StoreBe16(ip + 6, 0x4000);
    ip[8] = 64;
    ip[9] = 17;
    std::memcpy(ip + 12, &rx.src.gid.raw[12], 4);
    std::memcpy(ip + 16, &local.raw[12], 4);
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += wire::LoadBe16(ip + i);
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    wire::StoreBe16(ip + 10, static_cast<uint16_t>(~sum));
  } else {
    wire::Grh grh;
    grh.set_version_class_flow(6, rx.traffic_class, 0);
    grh.set_payload_length(static_cast<uint16_t>(8 + udp_payload_len));
    grh.set_next_header(17);
    grh.set_hop_limit(64);
    std::memcpy(grh.mutable_sgid(), rx.src.gid.raw.data(), 16);
    std::memcpy(grh.mutable_dgid(), local.raw.data(), 16);
    std::memcpy(out, grh.b.data(), 40);
  }
}

// The responder resource a READ or atomic is saved in (IBA 9.7.5.1.3):
// recycled oldest first (CheckRdAtomicResources says why that is safe).
RdAtomicResource& NextRdAtomicResource(Qp* qp) {
  return qp->resp.resources[qp->resp.next_resource++ % qp->resp.resources.size()];
}
const RdAtomicResource& LastRdAtomicResource(const Qp* qp) {
  return qp->resp.resources[(qp->resp.next_resource - 1) % qp->resp.resources.size()];
}

}  // namespace

void Engine::HandleRequest(Qp* qp, const wire::Packet& pkt, const transport::RxPacket& rx) {
  // A softrnic requester offering selective retransmission (docs/loss.md);
  // only if this side offers it too (the store exists). Honoured only once
  // negotiated (issue 14, M1): by the sr bit of a packet that arrived at
  // exactly the expected PSN and passed every check (it moved ePSN on).
  // Before that, an out-of-order packet gets go-back-N's answer whatever
  // its sr bit says: otherwise any forged packet within kSrWindow PSNs
  // ahead would switch the store on and be kept, where plain RC accepts
  // only the one expected PSN (IBA 9.7.5.1.1).
  const uint32_t epsn_before = qp->resp.epsn;
  const bool offers_sr = pkt.bth.sr() && qp->sr_store.offered &&
                         !qp->sr_store.peer_sr_req && qp->type == QpType::kRc &&
                         pkt.bth.psn() == epsn_before;
  HandleRequestOne(qp, pkt, rx);
  if (offers_sr && qp->resp.epsn != epsn_before && ReceivesRequests(qp->attr.qp_state))
    qp->sr_store.peer_sr_req = true;
  // Kept packets that are now in order run next, as if they arrived now.
  if (qp->sr_store.ooo_count > 0 && !qp->sr_store.draining) SrDrain(qp, rx);
}

// The responder's pipeline, in the order the file comment gives (rxe_resp.c:
// check_psn -> check_op_seq -> check_length -> check_resource -> check_rkey
// -> execute -> acknowledge). Each check returns whether the packet goes on;
// one that stops it has dealt with it (answered, dropped or failed the QP).
void Engine::HandleRequestOne(Qp* qp, const wire::Packet& pkt, const transport::RxPacket& rx) {
  (void)rx;
  if (!CheckQpState(qp)) return;
  if (qp->xrc == XrcRole::kNone) {
    RunResponderSteps(qp, pkt, true);
    return;
  }
  // An XRC receive QP works with the SRQ (and its PD and CQ) the request's
  // XRCETH names, for this request only (xrc.cc).
  const bool srq_ok = BindXrcTarget(qp, pkt);
  RunResponderSteps(qp, pkt, srq_ok);
  UnbindXrcTarget(qp);
}

void Engine::RunResponderSteps(Qp* qp, const wire::Packet& pkt, bool xrc_srq_ok) {
  if (!CheckPsn(qp, pkt)) return;
  // XRC: an XRCETH naming no SRQ of the QP's domain is an Invalid Request
  // (xrc.cc); a duplicate was answered above without needing one.
  if (!xrc_srq_ok) {
    RefuseRequest(qp, pkt.bth.psn(), Refusal::kInvalid);
    return;
  }
  if (!CheckOpSequence(qp, pkt) || !CheckLength(qp, pkt)) {
    RefuseRequest(qp, pkt.bth.psn(), Refusal::kInvalid);
    return;
  }
  if (!CheckRdAtomicResources(qp, pkt)) return;
  if (!CheckRecvWqe(qp, pkt)) return;
  uint8_t* atomic_target = nullptr;
  if (!CheckRemoteAccess(qp, pkt, &atomic_target)) return;
  if (!Execute(qp, pkt, atomic_target)) return;
  Acknowledge(qp, pkt);
}

void Engine::RefuseRequest(Qp* qp, uint32_t psn, Refusal why) {
  if (qp->type == QpType::kRc) {
    switch (why) {
      case Refusal::kNoRecvWqe:
        // IBA 9.7.5.1.6: no receive WQE -> RNR NAK; the PSN is not consumed.
        ++stats_.tx_rnr_naks;
        SendAckNow(qp, wire::MakeSyndrome(wire::AckKind::kRnrNak, qp->attr.min_rnr_timer), psn);
        return;
      case Refusal::kRecvTooShort:
        // IBA 9.7.5.1.5: Invalid Request NAK, a local length error here.
        ResponderError(qp, wire::NakCode::kInvalidRequest, psn, WcStatus::kLocLenErr);
        return;
      case Refusal::kRecvBadBuffer:
        // IBA 9.7.5.2.4 / 10.8.3.2: the receive buffer's own protection
        // check failed: Remote Operational Error NAK, a local protection
        // error here (as mlx5 and rxe report it).
        ResponderError(qp, wire::NakCode::kRemoteOperationalError, psn, WcStatus::kLocProtErr);
        return;
      case Refusal::kInvalid:
        ResponderError(qp, wire::NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
        return;
    }
  }
  // UC (IBA 9.8.3.2): the message is lost, the QP stays usable and picks
  // up at the next PSN.
  switch (why) {
    case Refusal::kNoRecvWqe: ++stats_.rx_dropped_no_recv; break;
    case Refusal::kRecvTooShort:
      CompleteRecv(qp, WcStatus::kLocLenErr, WcOpcode::kRecv, 0, 0, 0, 0, false);
      break;
    case Refusal::kRecvBadBuffer:
      CompleteRecv(qp, WcStatus::kLocProtErr, WcOpcode::kRecv, 0, 0, 0, 0, false);
      break;
    case Refusal::kInvalid: ++stats_.rx_dropped_invalid; break;
  }
  qp->resp.in_message = InMessage::kNone;
  qp->resp.epsn = wire::PsnAdd(psn, 1);
}

// IBA 9.7.5.1 / 10.3.1: only a QP in RTR, RTS, SQD or SQE receives.
bool Engine::CheckQpState(Qp* qp) {
  if (ReceivesRequests(qp->attr.qp_state)) return true;
  ++stats_.rx_dropped_qp_state;
  return false;
}

// IBA 9.7.5.1.1 (RC) and 9.8.3.2 (UC): only the expected PSN executes.
bool Engine::CheckPsn(Qp* qp, const wire::Packet& pkt) {
  const uint32_t psn = pkt.bth.psn();
  if (qp->type != QpType::kRc) {
    if (psn != qp->resp.epsn) {
      // UC: a gap loses the message in progress; resynchronise on this
      // packet if it starts a message.
      ++stats_.rx_out_of_sequence;
      qp->resp.in_message = InMessage::kNone;
      qp->resp.recv_offset = 0;
      qp->resp.epsn = psn;
    }
    return true;
  }
  const int32_t diff = wire::PsnDiff(psn, qp->resp.epsn);
  if (diff > 0) {
    HandleOutOfSequence(qp, pkt, diff);
    return false;
  }
  if (diff < 0) {
    HandleDuplicate(qp, pkt);
    return false;
  }
  qp->resp.nak_sequence_sent = false;
  SrForgetRun(qp, psn);
  return true;
}

void Engine::HandleOutOfSequence(Qp* qp, const wire::Packet& pkt, int32_t diff) {
  ++stats_.rx_out_of_sequence;
  if (qp->sr_store.peer_sr_req && pkt.bth.sr()) {
    // Selective peer: keep it, answer with a SACK (selective.cc).
    SrKeep(qp, pkt, diff);
    return;
  }
  if (pkt.bth.sr() && qp->sr_store.offered) ++stats_.rx_sr_unnegotiated;
  // IBA 9.7.5.1.1 (C9-111): NAK the first out-of-sequence packet once,
  // then stay silent until the expected PSN arrives.
  if (qp->resp.nak_sequence_sent) return;
  qp->resp.nak_sequence_sent = true;
  ++stats_.tx_naks_sequence;
  SendAckNow(qp,
             wire::MakeSyndrome(wire::AckKind::kNak,
                                static_cast<uint8_t>(wire::NakCode::kPsnSequenceError)),
             qp->resp.epsn);
}

// IBA 9.7.5.1.3: duplicates are answered, never executed again.
void Engine::HandleDuplicate(Qp* qp, const wire::Packet& pkt) {
  const wire::OpcodeInfo& info = *pkt.info;
  const uint32_t psn = pkt.bth.psn();
  if (!info.has(wire::kIsReadRequest) && !info.has(wire::kIsAtomic) &&
      SrRunCopyDiffers(*qp, pkt)) {
    // The packet the reorder store ran for this PSN and this copy
    // differ: one was forged (sr_store.h). Its bytes are in memory and
    // cannot be taken back; fail the QP rather than report success
    // over them. The NAK names the last PSN accepted, which the
    // requester may still have outstanding.
    ++stats_.rx_ooo_forgery_detected;
    ResponderError(qp, wire::NakCode::kInvalidRequest,
                   wire::PsnAdd(qp->resp.epsn, wire::kPsnMask), WcStatus::kRemInvReqErr);
    return;
  }
  ++stats_.rx_duplicates;
  if (info.has(wire::kIsReadRequest)) {
    // Replayed from the saved request (C9-104..C9-106).
    for (const RdAtomicResource& r : qp->resp.resources) {
      if (!r.valid || !r.is_read) continue;
      const int32_t into = wire::PsnDiff(psn, r.first_psn);
      if (into < 0 || static_cast<uint32_t>(into) >= r.npackets) continue;
      const wire::Reth reth = pkt.reth();
      // The resent request asks for the rest of the original; it must
      // stay inside what the original was allowed to read.
      const uint64_t skip = uint64_t{static_cast<uint32_t>(into)} * qp->mtu_bytes;
      if (reth.rkey() != r.rkey || reth.va() != r.va + skip ||
          uint64_t{reth.dma_length()} + skip != r.length)
        return;
      uint8_t* ignored;
      if (reth.dma_length() > 0 &&
          mr_table_.ResolveRemote(reth.rkey(), qp->pd, reth.va(), reth.dma_length(),
                                  kRemoteRead, &ignored, qp) != KeyCheck::kOk)
        return;
      SendReadResponses(qp, psn, reth.va(), reth.rkey(), reth.dma_length(), 0);
      return;
    }
    return;
  }
  if (info.has(wire::kIsAtomic)) {
    // Answered from the saved result, never executed twice.
    for (const RdAtomicResource& r : qp->resp.resources) {
      if (r.valid && !r.is_read && r.first_psn == psn) {
        SendAtomicAck(qp, psn, r.atomic_orig);
        return;
      }
    }
    return;
  }
  QueueAck(qp, wire::kAckSyndromeNoCredit, wire::PsnAdd(qp->resp.epsn, wire::kPsnMask));
}

// IBA 9.7.5.1.2 (C9-95..C9-97): a middle or last packet continues the
// message in progress, of the same kind; anything else starts one.
bool Engine::CheckOpSequence(const Qp* qp, const wire::Packet& pkt) const {
  const wire::OpcodeInfo& info = *pkt.info;
  const bool first = info.has(wire::kFirst);
  switch (qp->resp.in_message) {
    case InMessage::kSend: return info.has(wire::kIsSend) && !first;
    case InMessage::kWrite: return info.has(wire::kIsWrite) && !first;
    default: return first;
  }
}

// IBA 9.7.5.1.2 (C9-98..C9-100): first and middle packets of a SEND or
// WRITE carry exactly one PMTU, last and only at most one.
bool Engine::CheckLength(const Qp* qp, const wire::Packet& pkt) const {
  const wire::OpcodeInfo& info = *pkt.info;
  if (!info.has(wire::kIsSend) && !info.has(wire::kIsWrite)) return true;
  const uint32_t len = pkt.payload_length;
  // A placed WRITE packet carries part of its range (ExecuteWrite checks
  // the range itself).
  if (info.has(wire::kIsWrite) && pkt.bth.placed()) return len <= qp->mtu_bytes;
  return info.has(wire::kLast) ? len <= qp->mtu_bytes : len == qp->mtu_bytes;
}

bool Engine::CheckRdAtomicResources(Qp* qp, const wire::Packet& pkt) {
  const wire::OpcodeInfo& info = *pkt.info;
  if (!info.has(wire::kIsReadRequest) && !info.has(wire::kIsAtomic)) return true;
  if (qp->attr.max_dest_rd_atomic > 0) return true;
  // IBA 9.5 / 9.7.5.1 (issue 14, L5): READ and atomic requests need a
  // responder resource, max_dest_rd_atomic of them; none granted makes
  // such a request an Invalid Request (rxe: RESPST_ERR_TOO_MANY_RDMA_ATM_REQ,
  // class C). With some granted, the saved responses are recycled oldest
  // first, as rxe does: each request is answered completely before the
  // next packet is read, so no resource is ever busy when one is needed.
  if (qp->type == QpType::kRc) ++stats_.tx_naks_rd_atomic_limit;
  ResponderError(qp, wire::NakCode::kInvalidRequest, pkt.bth.psn(), WcStatus::kRemInvReqErr);
  return false;
}

// IBA 9.7.5.1.6: a SEND's first packet and a WRITE with immediate need a
// receive WQE, taken before any byte moves so that an RNR retry finds the
// same state.
bool Engine::CheckRecvWqe(Qp* qp, const wire::Packet& pkt) {
  const wire::OpcodeInfo& info = *pkt.info;
  const bool needs_wqe = info.has(wire::kIsSend) ? info.has(wire::kFirst)
                                                 : info.has(wire::kIsWrite) && info.imm_offset != 0;
  // Another process's XRC SRQ (xrc_share.h): the WQE is taken there with
  // the first packet's data, in one call (ExecuteRemoteSend).
  if (qp->resp.xrc_remote) return true;
  if (needs_wqe && !qp->resp.recv_active && !TakeRecvWqe(qp)) {
    RefuseRequest(qp, pkt.bth.psn(), Refusal::kNoRecvWqe);
    return false;
  }
  // A SEND continuing a message whose receive is gone (it failed): dropped.
  return !info.has(wire::kIsSend) || qp->resp.recv_active;
}

// The remote memory a request names (access rights, IBA 10.6.7; rxe
// check_rkey): the QP's access flags, then the R_Key resolved to a region
// of this QP's PD that grants the right, and the range inside it
// (MrTable::ResolveRemote). A WRITE is checked on its first packet against
// the whole RETH length, then per packet as it executes; an atomic also
// needs a naturally aligned word (IBA 9.4.5, C9-30), returned in *target.
bool Engine::CheckRemoteAccess(Qp* qp, const wire::Packet& pkt, uint8_t** target) {
  const wire::OpcodeInfo& info = *pkt.info;
  const uint32_t psn = pkt.bth.psn();
  const auto access_error = [&]() REQUIRES(mu_) {
    ResponderError(qp, wire::NakCode::kRemoteAccessError, psn, WcStatus::kRemAccessErr);
    return false;
  };
  if (info.has(wire::kIsAtomic)) {
    const wire::AtomicEth a = pkt.atomic_eth();
    if (a.va() & 7) {
      ResponderError(qp, wire::NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
      return false;
    }
    if (!(qp->attr.qp_access_flags & kRemoteAtomic) ||
        mr_table_.ResolveRemote(a.rkey(), qp->pd, a.va(), 8, kRemoteAtomic, target, qp) !=
            KeyCheck::kOk)
      return access_error();
    if (reinterpret_cast<uintptr_t>(*target) & 7) {
      // The va is aligned but the host word is not (a zero-based MR, or
      // ibv_reg_mr_iova with an iova aligned unlike the address): an
      // atomic there would be undefined behaviour and a split lock. C9-30
      // asks for an aligned word; this one cannot be had: refused alike.
      ResponderError(qp, wire::NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
      return false;
    }
    return true;
  }
  if (!info.reth_offset) return true;  // SEND; WRITE middle and last
  const wire::Reth reth = pkt.reth();
  const uint32_t right = info.has(wire::kIsReadRequest) ? kRemoteRead : kRemoteWrite;
  if (right == kRemoteWrite) {
    qp->resp.write_va = reth.va();
    qp->resp.write_rkey = reth.rkey();
    qp->resp.write_remaining = reth.dma_length();
    qp->resp.write_total = reth.dma_length();
  }
  uint8_t* ignored;
  if (!(qp->attr.qp_access_flags & right) ||
      (reth.dma_length() > 0 &&
       mr_table_.ResolveRemote(reth.rkey(), qp->pd, reth.va(), reth.dma_length(), right,
                               &ignored, qp) != KeyCheck::kOk))
    return access_error();
  return true;
}

bool Engine::Execute(Qp* qp, const wire::Packet& pkt, uint8_t* atomic_target) {
  const wire::OpcodeInfo& info = *pkt.info;
  if (info.has(wire::kIsSend)) return ExecuteSend(qp, pkt);
  if (info.has(wire::kIsWrite)) return ExecuteWrite(qp, pkt);
  if (info.has(wire::kIsReadRequest)) {
    // The data leaves as the acknowledgement (Acknowledge); saved for
    // duplicates (IBA 9.7.5.1.3).
    const wire::Reth reth = pkt.reth();
    const uint32_t n = PacketsFor(reth.dma_length(), qp->mtu_bytes);
    NextRdAtomicResource(qp) = RdAtomicResource{true, true, pkt.bth.psn(), n, reth.va(),
                                                reth.rkey(), reth.dma_length(), 0};
    ++qp->resp.msn;
    return true;
  }
  // Atomic, against other users of the memory too (local CPU, shm peers).
  const wire::AtomicEth a = pkt.atomic_eth();
  std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(atomic_target));
  uint64_t orig;
  if (pkt.rc_opcode() == wire::op::kRcCompareSwap) {
    orig = a.compare();
    word.compare_exchange_strong(orig, a.swap_add());
  } else {
    orig = word.fetch_add(a.swap_add());
  }
  NextRdAtomicResource(qp) =
      RdAtomicResource{true, false, pkt.bth.psn(), 1, a.va(), a.rkey(), 8, orig};
  ++qp->resp.msn;
  return true;
}

bool Engine::ExecuteSend(Qp* qp, const wire::Packet& pkt) {
  // Into another process's XRC SRQ (xrc.cc, xrc_share.h).
  if (qp->resp.xrc_remote) return ExecuteRemoteSend(qp, pkt);
  const wire::OpcodeInfo& info = *pkt.info;
  const uint32_t psn = pkt.bth.psn();
  if (const auto refusal = ScatterToRecv(qp, pkt.payload, pkt.payload_length)) {
    RefuseRequest(qp, psn, *refusal);
    return false;
  }
  const bool last = info.has(wire::kLast);
  qp->resp.in_message = last ? InMessage::kNone : InMessage::kSend;
  if (!last) return true;
  uint32_t flags = 0;
  uint32_t imm = 0;
  if (info.imm_offset) {
    flags |= kWcWithImm;
    imm = pkt.imm().raw();
  }
  if (info.ieth_offset) {
    // SEND with Invalidate (IBA 10.6.7.2.5, issue 14 M4): only a bound
    // type 2 window, bound through this QP, can be invalidated by a peer.
    // An ordinary MR (ibv_reg_mr) must never be revoked remotely (rxe
    // accepts only fast-registered MRs, which softrnic has not). Anything
    // else is treated as an unknown R_Key (rxe: Class J error): Invalid
    // Request NAK, the receive completes with REM_INV_REQ_ERR, the QP fails.
    const uint32_t inv_rkey = pkt.ieth().rkey();
    Mw* mw = mr_table_.FindWindow(inv_rkey);
    if (mw == nullptr || mw->type != MwType::kType2 || !mw->bound() || mw->qp != qp) {
      ResponderError(qp, wire::NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
      return false;
    }
    Unbind(mw);
    flags |= kWcWithInv;
    imm = inv_rkey;  // host order, as ibv_wc.invalidated_rkey
  }
  ++qp->resp.msn;
  CompleteRecv(qp, WcStatus::kSuccess, WcOpcode::kRecv, qp->resp.recv_offset, imm, flags, 0,
               pkt.bth.solicited());
  return true;
}

bool Engine::ExecuteWrite(Qp* qp, const wire::Packet& pkt) {
  const uint32_t psn = pkt.bth.psn();
  const uint32_t len = pkt.payload_length;
  if (pkt.info->has(wire::kIsAtomicWrite)) {
    // ATOMIC WRITE (IBA 1.5; rxe: atomic_write_reply): the RETH names
    // exactly one naturally aligned word (IBA 9.4.5, C9-30, as for the
    // other atomics), the payload is its 8 bytes, stored as one word so no
    // reader (local CPU, a same-host peer) sees half of it. A same-host
    // peer never places one, so placement bits make it invalid too.
    // Duplicates are acknowledged, not executed again (as a WRITE's).
    uint8_t* dst = nullptr;
    if (len != 8 || qp->resp.write_total != 8 || (qp->resp.write_va & 7) || pkt.bth.placed()) {
      ResponderError(qp, wire::NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
      return false;
    }
    if (mr_table_.ResolveRemote(qp->resp.write_rkey, qp->pd, qp->resp.write_va, 8, kRemoteWrite,
                                &dst, qp) != KeyCheck::kOk) {
      ResponderError(qp, wire::NakCode::kRemoteAccessError, psn, WcStatus::kRemAccessErr);
      return false;
    }
    if (reinterpret_cast<uintptr_t>(dst) & 7) {
      // The va is aligned but the host word is not (see CheckRemoteAccess).
      ResponderError(qp, wire::NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
      return false;
    }
    uint64_t word;
    std::memcpy(&word, pkt.payload, 8);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(dst)).store(word);
    qp->resp.write_va += 8;
    qp->resp.write_remaining = 0;
    qp->resp.in_message = InMessage::kNone;
    ++qp->resp.msn;
    return true;
  }
  const bool last = pkt.info->has(wire::kLast);
  // The range the packet stands for: its payload, or for a placed packet
  // from a same-host peer (wire::Bth::placed) a whole PMTU (first, middle)
  // or the rest of the message (last, only), of which the payload is the
  // prefix or the suffix; the peer wrote the rest into our shared pages.
  // A run (wire::Bth::placed_run) stands for several PMTUs, carries
  // nothing and never ends the message.
  const bool placed = pkt.bth.placed();
  const uint32_t run = PlacedRunOf(pkt);
  const uint64_t range = !placed ? len
                         : last  ? qp->resp.write_remaining
                                 : uint64_t{qp->mtu_bytes} * (1 + run);
  if (range > qp->resp.write_remaining || (last && range != qp->resp.write_remaining) ||
      (placed && (len > range || len > qp->mtu_bytes || (last && range > qp->mtu_bytes))) ||
      (run > 0 && (len != 0 || last || range >= qp->resp.write_remaining))) {
    // The payloads must add up to the RETH DMA length (rxe check_length:
    // RESPST_ERR_LENGTH).
    ResponderError(qp, wire::NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
    return false;
  }
  if (len > 0) {
    const uint64_t va = qp->resp.write_va + (pkt.bth.placed_suffix() ? range - len : 0);
    uint8_t* dst = nullptr;
    // Resolved per packet: a region deregistered mid-message stops here.
    if (mr_table_.ResolveRemote(qp->resp.write_rkey, qp->pd, va, len, kRemoteWrite, &dst, qp) !=
        KeyCheck::kOk) {
      ResponderError(qp, wire::NakCode::kRemoteAccessError, psn, WcStatus::kRemAccessErr);
      return false;
    }
    std::memcpy(dst, pkt.payload, len);
  }
  if (placed) ++stats_.shm_placed_rx_packets;
  qp->resp.write_va += range;
  qp->resp.write_remaining -= static_cast<uint32_t>(range);
  qp->resp.in_message = last ? InMessage::kNone : InMessage::kWrite;
  if (last) {
    ++qp->resp.msn;
    if (pkt.info->imm_offset)
      CompleteRecv(qp, WcStatus::kSuccess, WcOpcode::kRecvRdmaWithImm, qp->resp.write_total,
                   pkt.imm().raw(), kWcWithImm, 0, pkt.bth.solicited());
  }
  return true;
}

// The responder's answer (IBA 9.7.5; rxe acknowledge): a READ is answered by its response packets and an atomic by an
// atomic ACK, each moving ePSN past the PSNs it consumed; SEND and WRITE
// packets that ask for it (AckReq) get a coalesced, possibly delayed, ACK.
void Engine::Acknowledge(Qp* qp, const wire::Packet& pkt) {
  const uint32_t psn = pkt.bth.psn();
  if (pkt.info->has(wire::kIsReadRequest) || pkt.info->has(wire::kIsAtomic)) {
    const RdAtomicResource& r = LastRdAtomicResource(qp);
    if (r.is_read)
      SendReadResponses(qp, psn, r.va, r.rkey, r.length, 0);
    else
      SendAtomicAck(qp, psn, r.atomic_orig);
    qp->resp.epsn = wire::PsnAdd(psn, r.npackets);
    return;
  }
  // A placed run consumed the PSNs of all the PMTUs it stands for.
  const uint32_t last_psn = wire::PsnAdd(psn, PlacedRunOf(pkt));
  qp->resp.epsn = wire::PsnAdd(last_psn, 1);
  if (qp->type == QpType::kRc && pkt.bth.ack_req())
    QueueAck(qp, wire::kAckSyndromeNoCredit, last_psn, /*may_defer=*/true);
}

void Engine::HandleUdRequest(Qp* qp, const wire::Packet& pkt, const transport::RxPacket& rx) {
  if (!ReceivesRequests(qp->attr.qp_state)) {
    ++stats_.rx_dropped_qp_state;
    return;
  }
  // IBA 10.2.5 (C10-15): the Q_Key must match the receiving QP's.
  if (pkt.deth().qkey() != qp->attr.qkey) {
    ++stats_.rx_dropped_qkey;
    return;
  }
  if (pkt.payload_length > qp->mtu_bytes && pkt.payload_length > MtuBytes(attr_.max_mtu)) {
    ++stats_.rx_dropped_parse;
    return;
  }
  if (!TakeRecvWqe(qp)) {
    ++stats_.rx_dropped_no_recv;
    return;
  }
  uint8_t grh[40];
  // The GRH's destination: the group of a multicast datagram, else the
  // GID it arrived at.
  const Gid& local = rx.group != nullptr                ? *rx.group
                     : rx.local_index < gids_.size() ? gids_[rx.local_index]
                                                     : gids_[0];
  BuildGrh(rx, local, static_cast<uint32_t>(pkt.length), grh);
  auto refusal = ScatterToRecv(qp, grh, sizeof(grh));
  if (!refusal) refusal = ScatterToRecv(qp, pkt.payload, pkt.payload_length);
  if (refusal) {
    const WcStatus status =
        *refusal == Refusal::kRecvBadBuffer ? WcStatus::kLocProtErr : WcStatus::kLocLenErr;
    CompleteRecv(qp, status, WcOpcode::kRecv, 0, 0, 0, 0, false);
    return;
  }
  uint32_t flags = kWcGrh;
  uint32_t imm = 0;
  if (pkt.info->imm_offset) {
    flags |= kWcWithImm;
    imm = pkt.imm().raw();
  }
  const RoceL3Type l3 = rx.src.gid.IsV4Mapped() ? RoceL3Type::kIpv4 : RoceL3Type::kIpv6;
  CompleteRecv(qp, WcStatus::kSuccess, WcOpcode::kRecv, qp->resp.recv_offset, imm, flags,
               pkt.deth().src_qp(), pkt.bth.solicited(), static_cast<uint8_t>(l3));
}

}  // namespace softrnic::engine
