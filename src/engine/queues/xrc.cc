// XRC, the eXtended Reliable Connected transport (IBA 9.7 and the XRC
// additions to chapters 9-11; man ibv_open_xrcd, ibv_create_srq_ex,
// ibv_open_qp): XRC domains, XRC SRQs, and how an XRC receive QP borrows
// the SRQ each request names.
//
// An XRC QP is an RC QP with a role (qp.h, XrcRole), so the requester,
// responder and completer run unchanged; what differs is here and in four
// small places: the requester puts the XRC opcode and the XRCETH on each
// request (requester.cc), the responder binds the request to its SRQ
// (BindXrcTarget, responder.cc) and answers with XRC opcodes (OnWire),
// dispatch accepts XRC requests only at receive QPs and XRC responses only
// at send QPs (engine.cc).
//
// XRC QPs never take the same-host direct path (shm_direct.cc): a direct
// operation is checked against the target QP's published PD, and an XRC
// receive QP has none (the PD is the SRQ's, named per request). Their
// packets take the shared-memory rings like any other packet.
//
// Thread-safety: the engine lock (Device methods take it).
#include <cerrno>

#include "common/secure_random.h"
#include "engine/engine.h"
#include "engine/same_host/xrc_share.h"
#include "wire/opcode.h"

namespace softrnic::engine {
namespace {

// A fresh 24-bit XRC SRQ number (the XRCETH field is 24 bits), never 0 and
// not in use. Random like QPNs, so a stale peer's number rarely names a
// new SRQ. `in_use`: the engine's xrc_srqs_ (its lock held).
uint32_t FreshSrqn(const std::unordered_map<uint32_t, Srq*>& in_use) {
  for (;;) {
    const uint32_t n = SecureRandom32() & wire::kQpnMask;
    if (n != 0 && !in_use.contains(n)) return n;
  }
}

}  // namespace

// --- Domains, SRQs, receive QPs: Device checks, the engine does ---

int Device::OpenXrcd(const XrcdInode* inode, bool create, bool exclusive, Xrcd** out) {
  SpinLock lock(engine_->mu_);
  return engine_->OpenXrcdLocked(inode, create, exclusive, out);
}

int Engine::OpenXrcdLocked(const XrcdInode* inode, bool create, bool exclusive, Xrcd** out) {
  if (inode != nullptr) {
    for (auto& x : xrcds_) {
      if (!x->has_inode || x->inode_dev != inode->dev || x->inode != inode->ino) continue;
      // O_EXCL fails when the inode already has a domain (EINVAL, as the
      // kernel's uverbs answers).
      if (exclusive) return EINVAL;
      ++x->opens;
      *out = x.get();
      return 0;
    }
    // No domain for this inode yet: only O_CREAT makes one (EAGAIN, as the
    // kernel's uverbs answers).
    if (!create) return EAGAIN;
  }
  auto x = std::make_unique<Xrcd>();
  if (inode != nullptr) {
    x->has_inode = true;
    x->inode_dev = inode->dev;
    x->inode = inode->ino;
  }
  x->opens = 1;
  *out = x.get();
  xrcds_.push_back(std::move(x));
  return 0;
}

int Device::CloseXrcd(Xrcd* xrcd) {
  SpinLock lock(engine_->mu_);
  return engine_->CloseXrcdLocked(xrcd);
}

int Engine::CloseXrcdLocked(Xrcd* xrcd) {
  // The last close of a domain still in use fails, as ibv_dealloc_pd does.
  if (xrcd->opens == 1 && xrcd->users > 0) return EBUSY;
  if (--xrcd->opens > 0) return 0;
  auto& v = xrcds_;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it->get() != xrcd) continue;
    v.erase(it);
    return 0;
  }
  return EINVAL;
}

int Device::CreateXrcSrq(Pd* pd, Xrcd* xrcd, Cq* cq, const SrqAttr& attr, void* handle,
                         Srq** out) {
  if (pd == nullptr || xrcd == nullptr || cq == nullptr) return EINVAL;
  const int rc = CreateSrq(pd, attr, handle, out);
  if (rc != 0) return rc;
  SpinLock lock(engine_->mu_);
  engine_->MakeXrcSrqLocked(*out, xrcd, cq);
  return 0;
}

void Engine::MakeXrcSrqLocked(Srq* srq, Xrcd* xrcd, Cq* cq) {
  srq->xrcd = xrcd;
  srq->cq = cq;
  srq->srqn = FreshSrqn(xrc_srqs_);
  if (xrcd->has_inode) {
    // A domain opened by file is shared with this user's other processes
    // that open it (xrc_share.h): the number must be free in all of them.
    if (!xrc_share_) xrc_share_ = std::make_unique<XrcShare>(this);
    while (!xrc_share_->Reserve(*xrcd, srq->srqn)) srq->srqn = FreshSrqn(xrc_srqs_);
  }
  ++xrcd->users;
  ++cq->users;
  xrc_srqs_[srq->srqn] = srq;
}

uint32_t Device::SrqNum(const Srq* srq) const { return srq->srqn; }

int Device::CreateXrcRecvQp(Xrcd* xrcd, void* handle, Qp** out) {
  if (xrcd == nullptr) return EINVAL;
  QpCaps caps;
  return CreateQpWithQpn(nullptr, QpType::kXrcRecv, nullptr, nullptr, nullptr, &caps, false,
                         handle, 0, out, xrcd);
}

int Device::OpenXrcRecvQp(Xrcd* xrcd, uint32_t qpn, void* handle, Qp** out) {
  SpinLock lock(engine_->mu_);
  return engine_->OpenXrcRecvQpLocked(xrcd, qpn, handle, out);
}

int Engine::OpenXrcRecvQpLocked(Xrcd* xrcd, uint32_t qpn, void* handle, Qp** out) {
  auto it = qps_.find(qpn);
  // ibv_open_qp(3): only an XRC receive QP of the same domain can be opened.
  if (it == qps_.end() || it->second->xrc != XrcRole::kRecv ||
      it->second->xrcd != xrcd)
    return EINVAL;
  it->second->xrc_handles.push_back(handle);
  *out = it->second.get();
  return 0;
}

// --- Engine: the data path ---

void Engine::ForgetXrcSrq(Srq* srq) {
  xrc_srqs_.erase(srq->srqn);
  if (srq->xrcd->has_inode && xrc_share_) xrc_share_->Unpublish(*srq->xrcd, srq->srqn);
  --srq->xrcd->users;
  --srq->cq->users;
}

Srq* Engine::FindXrcSrq(uint32_t srqn) const {
  auto it = xrc_srqs_.find(srqn);
  return it == xrc_srqs_.end() ? nullptr : it->second;
}

bool Engine::BindXrcTarget(Qp* qp, const wire::Packet& pkt) {
  const uint32_t srqn = pkt.xrceth().srqn();
  Srq* srq = FindXrcSrq(srqn);
  // The XRCETH must name an XRC SRQ of the receive QP's own domain; any
  // other number is an Invalid Request (IBA 9.7, XRC responder checks),
  // NAKed by the caller.
  if (srq != nullptr && srq->xrcd != qp->xrcd) srq = nullptr;
  bool ok = srq != nullptr;
  if (!qp->resp.recv_active) {
    // A message starts: its SRQ is this process's, or, in a domain opened
    // by file, another process's of this user (xrc_share.h; SENDs only).
    qp->resp.xrc_remote = false;
    if (!ok && qp->xrcd->has_inode && pkt.info->has(wire::kIsSend)) {
      if (!xrc_share_) xrc_share_ = std::make_unique<XrcShare>(this);
      ok = qp->resp.xrc_remote = xrc_share_->BindRemote(qp, srqn);
    }
    if (ok) qp->resp.xrc_srqn = srqn;
  } else if (qp->resp.xrc_remote) {
    // The later packets of a message into another process's SRQ name it
    // again; the WQE stays there either way.
    ok = srqn == qp->resp.xrc_srqn;
    srq = nullptr;
  } else if (!ok) {
    // A message's later packets complete the WQE its first packet took.
    srq = FindXrcSrq(qp->resp.xrc_srqn);
    if (srq != nullptr && srq->xrcd != qp->xrcd) srq = nullptr;
  }
  qp->srq = srq;
  qp->pd = srq != nullptr ? srq->pd : nullptr;
  qp->recv_cq = srq != nullptr ? srq->cq : nullptr;
  return ok;
}

bool Engine::ExecuteRemoteSend(Qp* qp, const wire::Packet& pkt) {
  const wire::OpcodeInfo& info = *pkt.info;
  const uint32_t psn = pkt.bth.psn();
  if (info.ieth_offset) {
    // SEND with Invalidate names a memory window of the owner's: not
    // forwarded (xrc_share.h), an Invalid Request as an unknown R_Key is.
    ResponderError(qp, wire::NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
    return false;
  }
  const bool first = info.has(wire::kFirst);
  const bool last = info.has(wire::kLast);
  // A later packet of a message whose receive failed: dropped (responder.cc
  // CheckRecvWqe does the same for a local SRQ).
  if (!first && !qp->resp.recv_active) return false;
  const bool take = !qp->resp.recv_active;
  Completion c;
  c.status = WcStatus::kSuccess;
  c.opcode = WcOpcode::kRecv;
  c.byte_len = (take ? 0 : qp->resp.recv_offset) + pkt.payload_length;
  if (info.imm_offset) {
    c.wc_flags = kWcWithImm;
    c.imm_data = pkt.imm().raw();
  }
  const XrcShare::DeliverResult r = xrc_share_->Deliver(
      qp, take, pkt.payload, pkt.payload_length, last ? &c : nullptr, pkt.bth.solicited());
  if (take && (r == XrcShare::DeliverResult::kOk || r == XrcShare::DeliverResult::kTooShort ||
               r == XrcShare::DeliverResult::kBadBuffer)) {
    // The owner holds a WQE for this message now (an error completes it).
    qp->resp.recv_active = true;
    qp->resp.recv_offset = 0;
  }
  switch (r) {
    case XrcShare::DeliverResult::kOk: break;
    case XrcShare::DeliverResult::kEmpty:
      // IBA 9.7.5.1.6: no receive WQE -> RNR NAK; the PSN is not consumed.
      RefuseRequest(qp, psn, Refusal::kNoRecvWqe);
      return false;
    case XrcShare::DeliverResult::kNotTaken:
      // Its process did not take it in time (stopped, or busy): nothing
      // happened there. A first packet is told RNR like an empty SRQ; a
      // later one is dropped, PSN not consumed, as if lost: the requester
      // resends it.
      if (take) {
        RefuseRequest(qp, psn, Refusal::kNoRecvWqe);
      } else {
        ++stats_.rx_dropped_no_recv;
      }
      return false;
    case XrcShare::DeliverResult::kTooShort:
      RefuseRequest(qp, psn, Refusal::kRecvTooShort);
      return false;
    case XrcShare::DeliverResult::kBadBuffer:
      RefuseRequest(qp, psn, Refusal::kRecvBadBuffer);
      return false;
    case XrcShare::DeliverResult::kGone:
      RefuseRequest(qp, psn, Refusal::kInvalid);
      return false;
  }
  qp->resp.recv_offset += pkt.payload_length;
  qp->resp.in_message = last ? InMessage::kNone : InMessage::kSend;
  if (last) {
    ++qp->resp.msn;
    qp->resp.recv_active = false;
  }
  return true;
}

void Engine::UnbindXrcTarget(Qp* qp) {
  // Nothing of an SRQ is kept between requests: the SRQ may be destroyed
  // (and its number reused) once the request is done.
  qp->srq = nullptr;
  qp->pd = nullptr;
  qp->recv_cq = nullptr;
}

uint8_t Engine::OnWire(const Qp* qp, uint8_t rc_opcode) {
  return qp->xrc == XrcRole::kNone ? rc_opcode : wire::XrcOpcode(rc_opcode);
}

}  // namespace softrnic::engine
