// The responder's receive side: where a SEND's bytes land (the receive
// WQE taken from the QP's queue or its SRQ, the scatter over its SGEs, the
// SRQ limit event) and the receive completion (IBA 9.7.5.1.6, 10.8.3;
// rxe_resp.c's send_data_in and do_complete).
#include <algorithm>
#include <cstring>

#include "engine/engine.h"

namespace softrnic::engine {

bool Engine::ScatterSges(const Pd* pd, const Sge* sges, uint32_t num_sge, uint32_t offset,
                         const uint8_t* data, uint32_t len) {
  for (uint32_t i = 0; i < num_sge && len > 0; ++i) {
    const Sge& s = sges[i];
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    const uint32_t chunk = std::min(len, s.length - offset);
    uint8_t* dst = nullptr;
    if (mr_table_.ResolveLocal(s.lkey, pd, s.addr + offset, chunk, true, &dst) != KeyCheck::kOk)
      return false;
    std::memcpy(dst, data, chunk);
    data += chunk;
    len -= chunk;
    offset = 0;
  }
  return len == 0;
}

bool Engine::TakeRecvWqe(Qp* qp) {
  RecvQueue& rq = qp->srq ? qp->srq->rq : qp->rq;
  // Taken from same-host peers' direct SENDs too (shm_direct_send.cc),
  // which may hand over a WQE of an SRQ's export.
  bool taken = false;
  if (!ClaimRecvForPacket(qp, &taken)) return false;
  if (!taken) {
    if (rq.Empty()) return false;
    qp->resp.recv_wr_id = rq.FrontWrId();
    qp->resp.recv_num_sge = rq.FrontNumSge();
    std::copy_n(rq.FrontSges(), qp->resp.recv_num_sge, qp->resp.recv_sges.begin());
    rq.Pop();
  }
  qp->resp.recv_active = true;
  qp->resp.recv_offset = 0;
  if (qp->srq) CheckSrqLimit(qp->srq);
  return true;
}

void Engine::CheckSrqLimit(Srq* srq) {
  if (srq->limit > 0 && SrqWqesHeld(srq) < srq->limit) {
    // IBA 10.2.9.3: the limit event fires once, then the limit disarms.
    srq->limit = 0;
    PostAsyncEvent(AsyncEventType::kSrqLimitReached, srq->handle);
  }
}

std::optional<Engine::Refusal> Engine::ScatterToRecv(Qp* qp, const uint8_t* data, uint32_t len) {
  uint64_t capacity = 0;
  for (uint32_t i = 0; i < qp->resp.recv_num_sge; ++i) capacity += qp->resp.recv_sges[i].length;
  if (qp->resp.recv_offset + uint64_t{len} > capacity) return Refusal::kRecvTooShort;
  if (!ScatterSges(qp->pd, qp->resp.recv_sges.data(), qp->resp.recv_num_sge, qp->resp.recv_offset,
                   data, len))
    return Refusal::kRecvBadBuffer;
  qp->resp.recv_offset += len;
  return std::nullopt;
}

void Engine::CompleteRecv(Qp* qp, WcStatus status, WcOpcode opcode, uint32_t byte_len,
                          uint32_t imm, uint32_t wc_flags, uint32_t src_qp, bool solicited,
                          uint8_t sl) {
  Completion c;
  c.wr_id = qp->resp.recv_wr_id;
  c.status = status;
  c.opcode = opcode;
  c.byte_len = byte_len;
  c.imm_data = imm;
  c.qp_num = qp->qpn;
  c.src_qp = src_qp;
  c.wc_flags = wc_flags;
  c.sl = sl;
  qp->resp.recv_active = false;
  if (status != WcStatus::kSuccess) {
    CountErrorCompletion(qp, status, false);
    if (trace_ != nullptr) TraceCompletion(qp, status, c.wr_id, opcode, false);
  }
  if (qp->resp.xrc_remote) {
    // To the CQ of another process's SRQ (xrc_share.h), before the ACK.
    xrc_share_->Complete(qp, c, solicited);
    return;
  }
  Cq* cq = qp->recv_cq;
  if (cq == nullptr && qp->xrc == XrcRole::kRecv) {
    // Flushed outside a request (xrc.cc): the SRQ the WQE came from.
    const Srq* srq = FindXrcSrq(qp->resp.xrc_srqn);
    if (srq != nullptr && srq->xrcd == qp->xrcd) cq = srq->cq;
  }
  if (cq == nullptr) return;  // that SRQ is gone, and its CQ may be too
  if (!cq->Push(c, solicited)) ReportCqOverflow(cq);
}

}  // namespace softrnic::engine
