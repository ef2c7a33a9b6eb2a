// What the responder sends back: ACKs (queued, deferred or sent at once;
// selective ACKs ride along), NAKs with the error that moves the QP to
// Error, READ responses and atomic ACKs (IBA 9.7.5.2, 9.7.4.1.4-5;
// rxe_resp.c's send_ack, send_atomic_ack and read_reply).
#include <algorithm>
#include <cstring>

#include "engine/engine.h"
#include "engine/roles/sr_store.h"
#include "engine/wr_opcode.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::engine {

void Engine::QueueAck(Qp* qp, uint8_t syndrome, uint32_t psn, bool may_defer) {
  qp->resp.ack_pending = true;
  qp->resp.ack_syndrome = syndrome;
  qp->resp.ack_psn = psn;
  if (may_defer && DeferAck(qp, syndrome)) return;
  MarkWork(qp);
}

void Engine::FlushAck(Qp* qp) {
  if (qp->ack_delay.ack_deferred) {
    qp->ack_delay.ack_deferred = false;
    --acks_deferred_;
  }
  if (qp->sr_store.peer_sr_req && (qp->sr_store.sack_pending || qp->resp.ack_pending)) {
    // Selective peer: while anything is kept, every acknowledgement is a
    // SACK (it carries the cumulative part too); with nothing kept, a plain
    // ACK tells the requester the holes are filled.
    qp->sr_store.sack_pending = false;
    if (qp->sr_store.ooo_count > 0) {
      qp->resp.ack_pending = false;
      SendSack(qp);
      return;
    }
    if (!qp->resp.ack_pending) {
      qp->resp.ack_pending = true;
      qp->resp.ack_syndrome = wire::kAckSyndromeNoCredit;
      qp->resp.ack_psn = wire::PsnAdd(qp->resp.epsn, wire::kPsnMask);
    }
  }
  if (!qp->resp.ack_pending) return;
  qp->resp.ack_pending = false;
  SendAckNow(qp, qp->resp.ack_syndrome, qp->resp.ack_psn);
}

void Engine::SendAckNow(Qp* qp, uint8_t syndrome, uint32_t psn) {
  if (wire::SyndromeKind(syndrome) != wire::AckKind::kAck) FlushAck(qp);
  EmitAck(qp->attr.dest_qp_num, psn, syndrome, qp->resp.msn, SourceIndex(qp), qp->attr.ah_attr.dgid,
          qp->sr_store.peer_sr_req, qp->xrc != XrcRole::kNone, qp->seal.get());
  CountTx(qp);
  switch (wire::SyndromeKind(syndrome)) {
    case wire::AckKind::kNak: ++qp->counters.tx_naks; break;
    case wire::AckKind::kRnrNak:
      ++qp->counters.tx_rnr_naks;
      if (trace_ != nullptr)
        TraceEvent(qp, trace::EventKind::kRnrNakSent, {psn, wire::SyndromeValue(syndrome)});
      break;
    default: break;
  }
}

void Engine::EmitAck(uint32_t dest_qpn, uint32_t psn, uint8_t syndrome, uint32_t msn,
                     uint16_t sgid_index, const Gid& dgid, bool sr, bool xrc,
                     seal::QpSeal* seal) {
  StartPacket({.opcode = xrc ? wire::op::kXrcAck : wire::op::kRcAck, .dest_qpn = dest_qpn, .psn = psn, .sr = sr,
               .syndrome = syndrome, .msn = msn},
              0);
  CommitPacket(sgid_index, dgid, nullptr, seal);
}

void Engine::ResponderError(Qp* qp, wire::NakCode code, uint32_t psn, WcStatus recv_status) {
  if (qp->type != QpType::kRc) {
    // UC: the message is dropped, the QP stays usable (IBA 9.8.3.2).
    ++stats_.rx_dropped_invalid;
    qp->resp.in_message = InMessage::kNone;
    return;
  }
  switch (code) {
    case wire::NakCode::kInvalidRequest: ++stats_.tx_naks_invalid_request; break;
    case wire::NakCode::kRemoteAccessError: ++stats_.tx_naks_remote_access; break;
    case wire::NakCode::kRemoteOperationalError: ++stats_.tx_naks_remote_operational; break;
    default: break;
  }
  SendAckNow(qp, wire::MakeSyndrome(wire::AckKind::kNak, static_cast<uint8_t>(code)), psn);
  if (qp->resp.recv_active)
    CompleteRecv(qp, recv_status, WcOpcode::kRecv, 0, 0, 0, 0, false);
  PostAsyncEvent(code == wire::NakCode::kRemoteAccessError ? AsyncEventType::kQpAccessErr
                                                           : AsyncEventType::kQpReqErr,
                 qp->handle);
  MoveToError(qp, code == wire::NakCode::kRemoteAccessError       ? "sent NAK remote access error"
                  : code == wire::NakCode::kRemoteOperationalError ? "sent NAK remote operational error"
                                                                   : "sent NAK invalid request");
}

void Engine::SendReadResponses(Qp* qp, uint32_t first_psn, uint64_t va, uint32_t rkey,
                               uint32_t length, uint32_t /*skip_packets*/) {
  FlushAck(qp);
  const uint32_t mtu = qp->mtu_bytes;
  const uint32_t n = PacketsFor(length, mtu);
  uint8_t* src = nullptr;
  if (length > 0 &&
      mr_table_.ResolveRemote(rkey, qp->pd, va, length, kRemoteRead, &src, qp) != KeyCheck::kOk)
    return;  // checked by the caller; the region cannot vanish under the lock
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t offset = i * mtu;
    const uint32_t payload = std::min(mtu, length - offset);
    uint8_t* out = StartPacket({.opcode = OnWire(qp, kRcReadResponses.At(i == 0, i == n - 1)),
                                .dest_qpn = qp->attr.dest_qp_num,
                                .psn = wire::PsnAdd(first_psn, i),
                                .syndrome = wire::kAckSyndromeNoCredit,
                                .msn = qp->resp.msn},
                               payload);
    if (payload) std::memcpy(out, src + offset, payload);
    CommitToPeer(qp);
  }
}

void Engine::SendAtomicAck(Qp* qp, uint32_t psn, uint64_t orig) {
  FlushAck(qp);
  StartPacket({.opcode = OnWire(qp, wire::op::kRcAtomicAck), .dest_qpn = qp->attr.dest_qp_num, .psn = psn,
               .syndrome = wire::kAckSyndromeNoCredit, .msn = qp->resp.msn, .atomic_orig = orig},
              0);
  CommitToPeer(qp);
}

}  // namespace softrnic::engine
