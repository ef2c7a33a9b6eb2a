// Posting to a receive queue or an SRQ (ibv_post_recv, ibv_post_srq_recv
// after Device's argument checks). A QP in ERROR takes the WQE and flushes
// it at once: work posted in the Error state completes with
// IBV_WC_WR_FLUSH_ERR, as on the kernel's rxe.
#include <cerrno>

#include "engine/engine.h"

namespace softrnic::engine {

int Engine::PostRecvLocked(Qp* qp, const RecvWr& wr) {
  if (qp->attr.qp_state == QpState::kReset) return EINVAL;
  if (qp->rq.Full()) return ENOMEM;
  qp->rq.Push(wr);
  if (qp->attr.qp_state == QpState::kErr) FlushQp(qp);
  ExportRecvs(qp);  // same-host peers may place a SEND in it (shm_direct_send.cc)
  return 0;
}

int Engine::PostSrqRecvLocked(Srq* srq, const RecvWr& wr) {
  // WQEs described to peers (shm_direct_srq.cc) still count: the SRQ holds
  // max_wr WQEs in all.
  if (SrqWqesHeld(srq) >= srq->rq.capacity()) return ENOMEM;
  srq->rq.Push(wr);
  ExportSrqRecvs(srq);
  return 0;
}

int Engine::ResizeSrqLocked(Srq* srq, RecvQueue& next) {
  if (SrqWqesHeld(srq) > next.capacity()) return EINVAL;
  return srq->rq.ResizeInto(next) ? 0 : EINVAL;
}

}  // namespace softrnic::engine
