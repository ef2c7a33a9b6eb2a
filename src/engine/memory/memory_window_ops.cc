// Device::AllocMw / DeallocMw (Engine::AddMwLocked / RemoveMwLocked) and the
// engine's bookkeeping that keeps a window, the region under it and the QP
// it was bound through consistent (memory_window.h).
#include <algorithm>
#include <cerrno>

#include "engine/device/device.h"
#include "engine/engine.h"
#include "engine/wr_opcode.h"

namespace softrnic::engine {

int Device::AllocMw(Pd* pd, MwType type, void* handle, Mw** out) {
  SpinLock lock(engine_->mu_);
  return engine_->AddMwLocked(pd, type, handle, out);
}

int Device::DeallocMw(Mw* mw) {
  SpinLock lock(engine_->mu_);
  return engine_->RemoveMwLocked(mw);
}

int Engine::AddMwLocked(Pd* pd, MwType type, void* handle, Mw** out) {
  if (mws_.size() >= attr_.max_mw) return ENOMEM;
  auto mw = std::make_unique<Mw>();
  mw->pd = pd;
  mw->type = type;
  mw->handle = handle;
  mw->rkey = mr_table_.NewWindowKey();
  mr_table_.InsertWindow(mw.get());
  ++pd->users;
  *out = mw.get();
  mws_.push_back(std::move(mw));
  return 0;
}

int Engine::RemoveMwLocked(Mw* mw) {
  auto& v = mws_;
  auto it = std::find_if(v.begin(), v.end(), [mw](const auto& u) { return u.get() == mw; });
  if (it == v.end()) return EINVAL;
  if (BindPending(mw, nullptr)) return EBUSY;
  // Deallocation invalidates the window at once (IBA 10.6.7.1.2): every
  // access checks the key table under this lock.
  Unbind(mw);
  mr_table_.EraseWindow(mw);
  --mw->pd->users;
  v.erase(it);
  return 0;
}

uint32_t Device::MwRkey(const Mw* mw) const {
  SpinLock lock(engine_->mu_);
  return mw->rkey;
}

bool Engine::BindPending(const Mw* mw, const Mr* mr) const {
  for (const auto& [qpn, qp] : qps_) {
    for (uint64_t i = qp->sq_next; i != qp->sq_tail; ++i) {
      const SendWqe& w = qp->Wqe(i);
      if (w.opcode != WrOpcode::kBindMw) continue;
      if ((mw && w.bind_mw == mw) || (mr && w.bind_mr == mr)) return true;
    }
  }
  return false;
}

void Engine::UnbindWindowsOf(const Qp* qp) {
  for (const auto& mw : mws_)
    if (mw->type == MwType::kType2 && mw->qp == qp) Unbind(mw.get());
}

}  // namespace softrnic::engine
