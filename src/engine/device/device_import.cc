// Device::FindPd / FindMr: the objects ibv_import_pd and ibv_import_mr name
// by handle (verbs/import.cc).
#include "engine/device/device.h"
#include "engine/engine.h"

namespace softrnic::engine {

Pd* Device::FindPd(uint32_t id) const {
  SpinLock lock(engine_->mu_);
  return engine_->FindPdLocked(id);
}

uint32_t Device::PdId(const Pd* pd) const { return pd->id; }

Mr* Device::FindMr(const Pd* pd, uint32_t lkey) const {
  SpinLock lock(engine_->mu_);
  return engine_->FindMrLocked(pd, lkey);
}

void Device::MrRange(const Mr* mr, void** addr, size_t* length) const {
  SpinLock lock(engine_->mu_);
  *addr = mr->addr;
  *length = mr->length;
}

}  // namespace softrnic::engine
