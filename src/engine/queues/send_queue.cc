// Posting to a send queue (ibv_post_send after Device::PostSend's argument
// checks): the WQE written into the ring, then the requester run at once,
// and the choice between sending its packets now and letting them wait in
// the transmit batch (doorbell batching, docs/engine.md).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/engine.h"
#include "engine/wr_opcode.h"
#include "wire/headers.h"

namespace softrnic::engine {

int Engine::PostSendLocked(Qp* qp, const SendWr& wr, uint64_t length, bool is_inline) {
  const bool ud = qp->type == QpType::kUd;
  const QpState state = qp->attr.qp_state;
  if (state == QpState::kReset || state == QpState::kInit || state == QpState::kRtr) return EINVAL;
  if (ud && length > qp->mtu_bytes) return EINVAL;
  if (qp->sq_tail - qp->sq_head >= qp->sq.size()) return ENOMEM;

  const uint64_t index = qp->sq_tail;
  SendWqe& w = qp->Wqe(index);
  w = SendWqe{};
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.send_flags = wr.send_flags | (qp->sq_sig_all ? uint32_t{kSignaled} : 0u);
  w.imm_data = wr.imm_data;
  w.remote_addr = wr.remote_addr;
  w.rkey = wr.rkey;
  w.compare_add = wr.compare_add;
  w.swap = wr.swap;
  w.bind_mw = wr.bind_mw;
  w.bind_mr = wr.bind_mr;
  w.bind_length = wr.bind_length;
  w.bind_access = wr.bind_access;
  w.xrc_srqn = wr.xrc_remote_srqn & wire::kQpnMask;
  if (ud) {
    w.ud_av = wr.ah->av;
    w.remote_qpn = wr.remote_qpn & wire::kQpnMask;
    // IBA 10.2.5: a Q_Key with the high bit set means "use the QP's Q_Key".
    w.remote_qkey = (wr.remote_qkey & 0x80000000u) ? qp->attr.qkey : wr.remote_qkey;
  }
  w.length = static_cast<uint32_t>(length);
  w.is_inline = is_inline;
  if (is_inline) {
    // Inline data is copied now: the application may reuse its buffer as
    // soon as ibv_post_send returns (man ibv_post_send, IBV_SEND_INLINE).
    uint8_t* dst = &qp->sq_inline[(index % qp->sq.size()) * qp->caps.max_inline_data];
    for (const Sge& s : wr.sges) {
      // An empty SGE may have a null address (UCX's am_short posts one).
      if (s.length == 0) continue;
      std::memcpy(dst, reinterpret_cast<const void*>(s.addr), s.length);
      dst += s.length;
    }
  } else {
    Sge* dst = &qp->sq_sges[(index % qp->sq.size()) * qp->SgeStride()];
    std::copy(wr.sges.begin(), wr.sges.end(), dst);
    w.num_sge = static_cast<uint32_t>(wr.sges.size());
  }
  ++qp->sq_tail;
  if (state == QpState::kErr || state == QpState::kSqe) {
    FlushSendQueue(qp);
    return 0;
  }
  // Doorbell batching: while earlier packets of this RC QP are in flight
  // and an application thread is polling (the progress thread left the
  // packets to it), the new packets wait in the transmit batch for the next
  // post, the next PollCq (which sends them first) or a full batch, and
  // leave in one sendmmsg, same-size ones as one GSO datagram. A first
  // packet (a ping-pong's) leaves at once. If the application stops calling
  // instead, the progress thread finds it idle within its check interval
  // (<= 200 us) and sends them (docs/engine.md, "Doorbell batching").
  const bool stream = qp->type == QpType::kRc && qp->req.sq_psn != qp->comp.comp_psn;
  RunRequester(qp);
  if (!stream || !MayHoldTx()) {
    FlushTx();
  } else if (tx_.count() > 0) {
    ++stats_.posts_batched;
  }
  // Work left for later, or WQEs that only a response lets go: the
  // progress thread decides whether that needs it awake
  // (Progress::AppPosted).
  progress_.AppPosted(!work_list_.empty(), qp->sq_next != qp->sq_tail,
                      qp->comp.retransmit_armed ? &qp->comp.retransmit_deadline : nullptr);
  return 0;
}

}  // namespace softrnic::engine
