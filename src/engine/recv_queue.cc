// Posting to a receive queue (ibv_post_recv after Device::PostRecv's
// argument checks). A QP in ERROR takes the WQE and flushes it at once:
// work posted in the Error state completes with IBV_WC_WR_FLUSH_ERR, as
// on the kernel's rxe.
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

}  // namespace softrnic::engine
