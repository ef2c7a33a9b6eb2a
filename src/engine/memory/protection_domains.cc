// Protection domains and address handles in the engine's tables (ibv_alloc_pd,
// ibv_dealloc_pd, ibv_create_ah, ibv_destroy_ah after Device's argument
// checks). A PD counts its users (MRs, QPs, AHs, windows, SRQs) and cannot
// go while it has any (man ibv_dealloc_pd: EBUSY).
#include <cerrno>

#include "engine/device/device_internal.h"
#include "engine/engine.h"

namespace softrnic::engine {

int Engine::AddPdLocked(void* handle, Pd** out) {
  if (pds_.size() >= attr_.max_pd) return ENOMEM;
  auto pd = std::make_unique<Pd>();
  pd->handle = handle;
  pd->id = ++next_pd_id_;
  *out = pd.get();
  pds_.push_back(std::move(pd));
  return 0;
}

int Engine::RemovePdLocked(Pd* pd) {
  if (pd->users > 0) return EBUSY;
  return EraseOwned(pds_, pd) ? 0 : EINVAL;
}

Pd* Engine::FindPdLocked(uint32_t id) const {
  for (const auto& pd : pds_)
    if (pd->id == id) return pd.get();
  return nullptr;
}

int Engine::AddAhLocked(Pd* pd, const AddressVector& av, void* handle, Ah** out) {
  if (ahs_.size() >= attr_.max_ah) return ENOMEM;
  auto ah = std::make_unique<Ah>();
  ah->pd = pd;
  ah->av = av;
  ah->handle = handle;
  ++pd->users;
  *out = ah.get();
  ahs_.push_back(std::move(ah));
  return 0;
}

int Engine::RemoveAhLocked(Ah* ah) {
  --ah->pd->users;
  return EraseOwned(ahs_, ah) ? 0 : EINVAL;
}

}  // namespace softrnic::engine
