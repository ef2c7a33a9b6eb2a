// QP state machine (IBA 10.3.1, figure 120) and the attribute masks each
// transition requires and allows (IBA 11.2.5.2 table 91; the same table as
// the Linux kernel's ib_modify_qp_is_ok), plus the transitions' effects.
#include <algorithm>
#include <cerrno>

#include "engine/engine.h"
#include "engine/host_addresses.h"

namespace softrnic::engine {
namespace {

struct Transition {
  bool valid = false;
  uint32_t required[5] = {};  // indexed by TypeIndex: UD, UC, RC, XRC send, XRC receive
  uint32_t optional[5] = {};
};

int TypeIndex(const Qp& qp) {
  if (qp.xrc == XrcRole::kSend) return 3;
  if (qp.xrc == XrcRole::kRecv) return 4;
  return qp.type == QpType::kUd ? 0 : qp.type == QpType::kUc ? 1 : 2;
}

constexpr int kStates = 7;

struct TransitionTableT {
  Transition t[kStates][kStates];
};

// table.t[from][to]; transitions to RESET and ERR are always valid with no
// other attributes.
TransitionTableT BuildTransitionTable() {
    TransitionTableT table;
    auto& t = table.t;
    const auto R = [](QpState s) { return static_cast<int>(s); };
    // Any state may go to RESET; any state but RESET may go to ERR (the
    // kernel's qp_state_table has no RESET -> ERR entry).
    for (int from = 0; from < kStates; ++from) {
      t[from][R(QpState::kReset)].valid = true;
      if (from != R(QpState::kReset)) t[from][R(QpState::kErr)].valid = true;
    }
    // RESET -> INIT
    {
      Transition& x = t[R(QpState::kReset)][R(QpState::kInit)];
      x.valid = true;
      x.required[0] = kQpPkeyIndex | kQpPort | kQpQkey;
      x.required[1] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
      x.required[2] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
    }
    // INIT -> INIT
    {
      Transition& x = t[R(QpState::kInit)][R(QpState::kInit)];
      x.valid = true;
      x.optional[0] = kQpPkeyIndex | kQpPort | kQpQkey;
      x.optional[1] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
      x.optional[2] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
    }
    // INIT -> RTR
    {
      Transition& x = t[R(QpState::kInit)][R(QpState::kRtr)];
      x.valid = true;
      x.required[1] = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
      x.required[2] = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic |
                      kQpMinRnrTimer;
      x.optional[0] = kQpPkeyIndex | kQpQkey;
      x.optional[1] = kQpAltPath | kQpAccessFlags | kQpPkeyIndex;
      x.optional[2] = kQpAltPath | kQpAccessFlags | kQpPkeyIndex;
    }
    // RTR -> RTS
    {
      Transition& x = t[R(QpState::kRtr)][R(QpState::kRts)];
      x.valid = true;
      x.required[0] = kQpSqPsn;
      x.required[1] = kQpSqPsn;
      x.required[2] = kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic;
      x.optional[0] = kQpCurState | kQpQkey;
      x.optional[1] = kQpCurState | kQpAltPath | kQpAccessFlags | kQpPathMigState;
      x.optional[2] = kQpCurState | kQpAltPath | kQpAccessFlags | kQpMinRnrTimer | kQpPathMigState;
    }
    // RTS -> RTS, SQD -> RTS
    for (QpState from : {QpState::kRts, QpState::kSqd}) {
      Transition& x = t[R(from)][R(QpState::kRts)];
      x.valid = true;
      x.optional[0] = kQpCurState | kQpQkey;
      x.optional[1] = kQpCurState | kQpAccessFlags | kQpAltPath | kQpPathMigState;
      x.optional[2] = kQpCurState | kQpAccessFlags | kQpAltPath | kQpPathMigState | kQpMinRnrTimer;
    }
    // RTS -> SQD
    {
      Transition& x = t[R(QpState::kRts)][R(QpState::kSqd)];
      x.valid = true;
      for (int i = 0; i < 3; ++i) x.optional[i] = kQpEnSqdAsyncNotify;
    }
    // SQD -> SQD
    {
      Transition& x = t[R(QpState::kSqd)][R(QpState::kSqd)];
      x.valid = true;
      x.optional[0] = kQpPkeyIndex | kQpQkey;
      x.optional[1] = kQpAv | kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpPathMigState;
      x.optional[2] = kQpPort | kQpAv | kQpTimeout | kQpRetryCnt | kQpRnrRetry |
                      kQpMaxQpRdAtomic | kQpMaxDestRdAtomic | kQpAltPath | kQpAccessFlags |
                      kQpPkeyIndex | kQpMinRnrTimer | kQpPathMigState;
    }
    // SQE -> RTS (UD and UC only; an RC QP never enters SQE, IBA 10.3.1.6)
    {
      Transition& x = t[R(QpState::kSqe)][R(QpState::kRts)];
      x.valid = true;
      x.optional[0] = kQpCurState | kQpQkey;
      x.optional[1] = kQpCurState | kQpAccessFlags;
    }
    // XRC send and receive QPs (the kernel's XRC_INI and XRC_TGT columns):
    // RC's rules, but a send QP has no responder and a receive QP no
    // requester, so neither needs the other side's attributes. They are
    // still accepted (ignored), as ibv_xsrq_pingpong and pyverbs' helpers
    // pass RC's full set.
    for (auto& row : t) {
      for (Transition& x : row) {
        x.required[3] = x.required[4] = x.required[2];
        x.optional[3] = x.optional[4] = x.optional[2];
      }
    }
    {
      Transition& x = t[R(QpState::kInit)][R(QpState::kRtr)];
      x.required[3] = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
      x.optional[3] |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    }
    {
      Transition& x = t[R(QpState::kRtr)][R(QpState::kRts)];
      x.required[4] = kQpTimeout | kQpSqPsn;
      x.optional[4] |= kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
    }
    return table;
}

const TransitionTableT& TransitionTable() {
  static const TransitionTableT table = BuildTransitionTable();
  return table;
}

}  // namespace

const char* QpStateName(QpState s) {
  switch (s) {
    case QpState::kReset: return "RESET";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kSqd: return "SQD";
    case QpState::kSqe: return "SQE";
    case QpState::kErr: return "ERR";
  }
  return "?";
}

Clock::duration RnrTimerDelay(uint8_t field) {
  // IBA table 45, in units of 10 microseconds; field 0 means 655.36 ms.
  static constexpr uint32_t kTensOfMicros[32] = {
      65536, 1,    2,    3,    4,    6,    8,    12,   16,   24,   32,
      48,    64,   96,   128,  192,  256,  384,  512,  768,  1024, 1536,
      2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return std::chrono::microseconds(10ull * kTensOfMicros[field & 31]);
}

int Engine::ModifyQpLocked(Qp* qp, const QpAttr& attr, uint32_t mask) {
  const QpState from = qp->attr.qp_state;
  const int rc = TransitionQp(qp, attr, mask);
  // A move to Error was recorded before its flushes (TransitionQp).
  if (trace_ != nullptr && rc == 0 && (mask & kQpState) && attr.qp_state != QpState::kErr)
    TraceState(qp, from, qp->attr.qp_state, "modify_qp");
  PublishQp(qp);  // same-host peers check state, access and path (shm_direct.h)
  FlushTx();      // a move to ERROR may have queued packets
  return rc;
}

int Engine::TransitionQp(Qp* qp, const QpAttr& a, uint32_t mask) {
  NoteQpCounters(qp);  // its stats line shows the state and the peer
  const QpState cur = qp->attr.qp_state;
  const QpState next = (mask & kQpState) ? a.qp_state : cur;
  if (static_cast<int>(next) >= kStates) return EINVAL;
  if ((mask & kQpCurState) && a.cur_qp_state != cur) return EINVAL;
  const Transition& tr = TransitionTable().t[static_cast<int>(cur)][static_cast<int>(next)];
  if (!tr.valid) return EINVAL;
  if (cur == QpState::kSqe && next == QpState::kRts && qp->type == QpType::kRc) return EINVAL;
  const int ti = TypeIndex(*qp);
  const uint32_t attrs = mask & ~uint32_t{kQpState};
  if ((attrs & tr.required[ti]) != tr.required[ti]) return EINVAL;
  if (attrs & ~(tr.required[ti] | tr.optional[ti])) return EINVAL;

  // Range checks (man ibv_modify_qp; IBA 11.2.5.2).
  if ((mask & kQpPort) && a.port_num != 1) return EINVAL;
  if ((mask & kQpPkeyIndex) && a.pkey_index >= attr_.max_pkeys) return EINVAL;
  // Region-only bits (ZERO_BASED, ON_DEMAND) mean nothing to a QP and are
  // accepted as mlx5 accepts them: rdma-core's tests pass an MR's access
  // flags to the QP unchanged.
  if ((mask & kQpAccessFlags) &&
      (a.qp_access_flags & ~uint32_t{kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic |
                                     kMwBind | kZeroBased | kOnDemand}))
    return EINVAL;
  if ((mask & kQpPathMtu) &&
      (static_cast<uint8_t>(a.path_mtu) < 1 || a.path_mtu > attr_.max_mtu))
    return EINVAL;
  if (mask & kQpAv) {
    // RoCE addresses by GID: the AV must carry a GRH (IBA A17.4.5).
    if (!a.ah_attr.is_global || a.ah_attr.sgid_index >= gids_.size() || a.ah_attr.port_num != 1)
      return EINVAL;
  }
  if ((mask & kQpTimeout) && a.timeout > 31) return EINVAL;
  if ((mask & kQpRetryCnt) && a.retry_cnt > 7) return EINVAL;
  if ((mask & kQpRnrRetry) && a.rnr_retry > 7) return EINVAL;
  if ((mask & kQpMinRnrTimer) && a.min_rnr_timer > 31) return EINVAL;
  if ((mask & kQpMaxQpRdAtomic) && a.max_rd_atomic > attr_.max_qp_init_rd_atom) return EINVAL;
  if ((mask & kQpMaxDestRdAtomic) && a.max_dest_rd_atomic > attr_.max_qp_rd_atom) return EINVAL;
  if ((mask & kQpDestQpn) && a.dest_qp_num > wire::kQpnMask) return EINVAL;

  // Apply.
  QpAttr& q = qp->attr;
  if (mask & kQpPort) q.port_num = a.port_num;
  if (mask & kQpPkeyIndex) q.pkey_index = a.pkey_index;
  if (mask & kQpAccessFlags) q.qp_access_flags = a.qp_access_flags;
  if (mask & kQpQkey) q.qkey = a.qkey;
  if (mask & kQpAv) {
    q.ah_attr = a.ah_attr;
    qp->peer_on_host = IsHostAddress(a.ah_attr.dgid);
  }
  if (mask & kQpPathMtu) {
    q.path_mtu = a.path_mtu;
    qp->mtu_bytes = MtuBytes(a.path_mtu);
  }
  if (mask & kQpDestQpn) q.dest_qp_num = a.dest_qp_num;
  if (mask & kQpRqPsn) q.rq_psn = a.rq_psn & wire::kPsnMask;
  if (mask & kQpSqPsn) q.sq_psn = a.sq_psn & wire::kPsnMask;
  if (mask & kQpMaxDestRdAtomic) q.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & kQpMaxQpRdAtomic) q.max_rd_atomic = a.max_rd_atomic;
  if (mask & kQpMinRnrTimer) q.min_rnr_timer = a.min_rnr_timer;
  if (mask & kQpTimeout) q.timeout = a.timeout;
  if (mask & kQpRetryCnt) q.retry_cnt = a.retry_cnt;
  if (mask & kQpRnrRetry) q.rnr_retry = a.rnr_retry;
  if (mask & kQpEnSqdAsyncNotify) q.en_sqd_async_notify = a.en_sqd_async_notify;

  if (next == QpState::kReset) {
    ResetQp(qp);
    // Its completions still in its CQs go too, as libmlx5 cleans them
    // (mlx5_cq_clean on a move to Reset): a QP brought back from Error must
    // not hand its next poll the flushed work requests of its old life.
    // XRC QPs lack one CQ or both (an XRC receive QP's completions are in
    // its SRQs' CQs, which it does not own: they stay).
    if (qp->send_cq) qp->send_cq->RemoveQp(qp->qpn);
    if (qp->recv_cq && qp->recv_cq != qp->send_cq) qp->recv_cq->RemoveQp(qp->qpn);
    return 0;
  }
  if (next == QpState::kErr) {
    if (trace_ != nullptr) TraceState(qp, cur, QpState::kErr, "modify_qp");
    q.qp_state = QpState::kErr;
    MoveToError(qp, nullptr);
    return 0;
  }
  if (cur == QpState::kReset && next == QpState::kInit && qp->type == QpType::kUd) {
    // UD has no path: its MTU is the port's (IBA 10.2.5: UD messages are one packet).
    qp->mtu_bytes = MtuBytes(attr_.active_mtu);
    q.path_mtu = attr_.active_mtu;
  }
  // Each role starts from its initial state (qp.h): ResetQp left it there,
  // and a QP in RESET or INIT drops every packet (engine.cc).
  if (cur == QpState::kInit && next == QpState::kRtr) {
    if (const int e = SealAtRtr(qp); e != 0) return e;
    qp->resp = {};
    qp->resp.epsn = q.rq_psn;
    qp->resp.resources.assign(std::max<uint32_t>(q.max_dest_rd_atomic, 1), RdAtomicResource{});
    SrPrepareResponder(qp);
  }
  if (cur == QpState::kRtr && next == QpState::kRts) {
    qp->req = {};
    qp->req.sq_psn = q.sq_psn;
    qp->comp = {};
    qp->comp.comp_psn = q.sq_psn;
    qp->comp.retry_left = q.retry_cnt;
    qp->comp.rnr_retry_left = q.rnr_retry;
    SrPrepareRequester(qp);
    CcInit(qp);
    DestAttach(qp);
  }
  if (cur == QpState::kRts && next == QpState::kSqd) {
    q.qp_state = QpState::kSqd;
    q.sq_draining = true;
    // softrnic drains at once when nothing is in flight.
    if (qp->sq_next == qp->sq_tail && qp->comp.comp_psn == qp->req.sq_psn) {
      q.sq_draining = false;
      if (q.en_sqd_async_notify) PostAsyncEvent(AsyncEventType::kSqDrained, qp->handle);
    }
    return 0;
  }
  q.qp_state = next;
  if (next == QpState::kRts) MarkWork(qp);
  return 0;
}

void Engine::ResetQp(Qp* qp) {
  // IBA 10.3.1.1: RESET empties both queues without completions. Peers
  // stop placing SENDs in the receive queue first (shm_direct_send.cc).
  CloseRecvExport(qp);
  SendDeferredAck(qp);  // before the destination goes with attr
  DestRelease(qp);  // before attr (its destination) goes
  QpCaps caps = qp->caps;
  QpAttr fresh;
  fresh.cap = caps;
  qp->attr = fresh;
  qp->sq_head = qp->sq_next = qp->sq_tail = 0;
  // Emptied in place: the queue keeps its memory (which may be the
  // application's, queues.h) and nothing is allocated under the lock.
  qp->rq.Clear();
  // Every role back to its initial state: a reused QP behaves as a fresh
  // one (qp.h). The shared-memory path state stays (qp.h, ShmPathState).
  qp->req = {};
  qp->comp = {};
  qp->resp = {};
  qp->ack_delay = {};
  SrReleaseQp(qp);
  qp->cc = {};
  qp->seal.reset();
  qp->cm_secret.reset();
  qp->cm_declined_seal = false;
}

int Engine::SealAtRtr(Qp* qp) {
  // RC and XRC only (docs/sealed.md): UD and UC stay plain.
  if (qp->type == QpType::kUd || qp->type == QpType::kUc) return 0;
  if (!config_.seal_required && !config_.seal_preferred) return 0;
  std::span<const uint8_t> secret;
  if (qp->cm_secret != nullptr) {
    secret = qp->cm_secret->bytes();  // rdma_cm's exchange
  } else if (qp->cm_declined_seal || !config_.seal_required) {
    return 0;  // prefer: the peer offered none, or no rdma_cm at all
  } else if (config_.seal_key == nullptr) {
    // Required without a key (the key file failed): refuse to connect
    // rather than send in clear.
    return EACCES;
  } else {
    secret = config_.seal_key->bytes();
  }
  // Both directions' keys depend only on the secret and the two QPNs, so
  // the responder can open and answer from RTR on (key_schedule.h).
  qp->seal = seal::QpSeal::Create(secret, qp->qpn, qp->attr.dest_qp_num);
  if (qp->seal == nullptr) return ENOMEM;
  ++stats_.qps_sealed;
  return 0;
}

int Engine::SealQpByCmLocked(Qp* qp, std::span<const uint8_t> exchanged,
                             std::span<const uint8_t> transcript) {
  if (!config_.seal_required && !config_.seal_preferred) return EINVAL;
  if (qp->attr.qp_state != QpState::kReset && qp->attr.qp_state != QpState::kInit) return EINVAL;
  qp->cm_secret.reset();
  if (exchanged.empty() && config_.seal_required) {
    // require: a peer that offered or answered no exchange is plain (or
    // cannot make room for the exchange); rdma_cm refuses the connection
    // with a REJ rather than leave it to time out (docs/sealed.md).
    ++stats_.cm_seal_refused;
    return EACCES;
  }
  qp->cm_declined_seal = exchanged.empty();
  if (exchanged.empty()) {
    ++stats_.cm_seal_declined;
    return 0;
  }
  // The key file (when there is one) authenticates the exchange: a man in
  // the middle without it derives other keys, and nothing opens.
  const std::span<const uint8_t> key =
      config_.seal_key != nullptr ? config_.seal_key->bytes() : std::span<const uint8_t>{};
  qp->cm_secret = seal::ConnectionSecret::FromExchange(key, exchanged, transcript);
  if (qp->cm_secret == nullptr) return ENOMEM;
  ++stats_.cm_seal_exchanges;
  return 0;
}

void Engine::MoveToError(Qp* qp, const char* reason) {
  // Recorded before the flushes it causes, so they follow it in the trace.
  if (trace_ != nullptr && reason != nullptr)
    TraceState(qp, qp->attr.qp_state, QpState::kErr, reason);
  // Requests this QP executed stay acknowledged (ack_delay.cc).
  SendDeferredAck(qp);
  qp->attr.qp_state = QpState::kErr;
  NoteQpCounters(qp);  // its stats line shows the state
  PublishQp(qp);  // peers stop executing directly on this QP at once
  qp->comp.retransmit_armed = false;
  qp->comp.rnr_waiting = false;
  // Kept out-of-order packets will never run.
  SrClearStore(qp);
  qp->sr_store.sack_pending = false;
  DestSync(qp);  // nothing of an errored QP is in flight any more
  FlushQp(qp);
}

void Engine::FlushQp(Qp* qp) {
  // IBA 10.3.1.7 / 11.4.2: in the Error state every outstanding WQE completes
  // with a flush error, signaled or not.
  FlushSendQueue(qp);
  FlushRecvQueue(qp);
}

void Engine::FlushSendQueue(Qp* qp) {
  while (qp->sq_head != qp->sq_tail) {
    SendWqe& w = qp->Wqe(qp->sq_head);
    if (!w.done) {
      w.done = true;
      w.status = WcStatus::kWrFlushErr;
    }
    CompleteSendWqe(qp, w, w.status);
    ++qp->sq_head;
  }
  qp->sq_next = qp->sq_tail;
  qp->req.send_offset = 0;
  qp->req.outstanding_rd_atomic = 0;
}

void Engine::FlushRecvQueue(Qp* qp) {
  if (qp->resp.recv_active) {
    qp->resp.recv_active = false;
    CompleteRecv(qp, WcStatus::kWrFlushErr, WcOpcode::kRecv, 0, 0, 0, 0, false);
  }
  if (!qp->srq) {
    while (!qp->rq.Empty()) {
      qp->resp.recv_wr_id = qp->rq.FrontWrId();
      qp->rq.Pop();
      CompleteRecv(qp, WcStatus::kWrFlushErr, WcOpcode::kRecv, 0, 0, 0, 0, false);
    }
  }
}

}  // namespace softrnic::engine
