// Memory regions in the engine's tables (ibv_reg_mr, ibv_rereg_mr,
// ibv_dereg_mr once Device has checked the arguments and, outside the lock,
// shared the pages with same-host peers): keys, the key table every packet
// is checked against, the export to same-host peers, the PD's reference.
// Revocation happens here, under the lock, so a packet or a direct access
// sees either the old region or the new one, never a mix.
#include <cerrno>

#include "engine/device/device_internal.h"
#include "engine/engine.h"

namespace softrnic::engine {

int Engine::AddMrLocked(std::unique_ptr<Mr>& mr) {
  if (mrs_.size() >= attr_.max_mr) return ENOMEM;
  mr_table_.NewKeys(&mr->lkey, &mr->rkey);
  mr_table_.Insert(mr.get());
  if (shm_direct_) shm_direct_->PublishMr(mr.get(), mr->pd->id);
  ++mr->pd->users;
  mrs_.push_back(std::move(mr));
  return 0;
}

SharedRange Engine::ReregMrLocked(Mr* mr, const MrTranslation& next) {
  // As DeregMr then RegMr under one lock: every packet checks the table
  // under this lock and sees either the old region or the new one, and a
  // same-host peer's direct access to the old range is revoked (and
  // drained) before the new one is published.
  if (shm_direct_) shm_direct_->RevokeMr(mr);
  const SharedRange old_share = mr->share;
  if (next.pd != mr->pd) {
    --mr->pd->users;
    ++next.pd->users;
  }
  mr->pd = next.pd;
  mr->addr = next.addr;
  mr->length = next.length;
  mr->iova = next.iova;
  mr->access = next.access;
  mr->share = next.share;
  // A new registration: remote access that SEND_WITH_INVALIDATE stopped
  // is granted again.
  mr->remote_valid = true;
  if (shm_direct_) shm_direct_->PublishMr(mr, next.pd->id);
  return old_share;
}

Mr* Engine::FindMrLocked(const Pd* pd, uint32_t lkey) const {
  Mr* mr = mr_table_.FindByLkey(lkey);
  return mr != nullptr && mr->pd == pd ? mr : nullptr;
}

int Engine::RemoveMrLocked(Mr* mr, SharedRange* share) {
  // Removing the keys under the lock revokes access at once: every packet
  // is checked against the table under the same lock, and a same-host
  // peer's direct access is revoked (and drained) by RevokeMr.
  // Windows bound to it (or about to be, in a send queue) hold it
  // (IBA 10.6.7.2.6; rxe's dereg says EINVAL, kernel verbs EBUSY).
  if (mr->windows > 0 || BindPending(nullptr, mr)) return EBUSY;
  if (shm_direct_) shm_direct_->RevokeMr(mr);
  *share = mr->share;
  mr_table_.Erase(mr);
  --mr->pd->users;
  if (!EraseOwned(mrs_, mr)) return EINVAL;
  return 0;
}

}  // namespace softrnic::engine
