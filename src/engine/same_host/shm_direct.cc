#include "engine/same_host/shm_direct.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "engine/engine.h"
#include "engine/wr_opcode.h"

namespace softrnic::engine {

using transport::ShmMrSlot;
using transport::ShmQpSlot;

namespace {

constexpr size_t kMaxMappings = 64;
constexpr size_t kMaxRkeyHints = 16;
constexpr uint32_t kNoSlot = ~0u;
constexpr uint32_t kRescanEvery = 256;

// A state read from a peer's segment (any value).
bool ResponderStateForDirect(uint32_t s) {
  return s <= 0xff && ReceivesRequests(static_cast<QpState>(s));
}

}  // namespace

ShmDirect::ShmDirect(const transport::ShmSegment* own) : own_(own) {
  free_mr_.reserve(transport::kShmMrSlots);
  for (uint32_t i = transport::kShmMrSlots; i-- > 0;) free_mr_.push_back(i);
  free_qp_.reserve(transport::kShmQpSlots);
  for (uint32_t i = transport::kShmQpSlots; i-- > 0;) free_qp_.push_back(i);
  free_srq_.reserve(transport::kShmSrqSlots);
  for (uint32_t i = transport::kShmSrqSlots; i-- > 0;) free_srq_.push_back(i);
}

int ShmDirect::TakeSrqSlot() {
  if (free_srq_.empty()) return -1;
  const uint32_t slot = free_srq_.back();
  free_srq_.pop_back();
  return static_cast<int>(slot);
}

ShmDirect::~ShmDirect() {
  for (const Mapping& m : mappings_) munmap(m.base, m.size);
}

// --- Target side ---

// A slot can be handed out only with nobody inside it: an `inflight` left
// raised by a peer stopped or killed inside an access (or by a same-user
// peer pinning it) would make the next owner's RevokeMr wait for nothing.
// Such slots wait in quarantine until their count is back at zero.
bool ShmDirect::TakeFreeMrSlot(uint32_t* out) {
  std::erase_if(quarantined_mr_, [&](uint32_t i) {
    if (own_->mr_slot(i)->inflight.load(std::memory_order_seq_cst) != 0) return false;
    free_mr_.push_back(i);
    return true;
  });
  while (!free_mr_.empty()) {
    const uint32_t i = free_mr_.back();
    free_mr_.pop_back();
    if (own_->mr_slot(i)->inflight.load(std::memory_order_seq_cst) == 0) {
      *out = i;
      return true;
    }
    quarantined_mr_.push_back(i);
  }
  return false;
}

void ShmDirect::PublishMr(Mr* mr, uint32_t pd_id) {
  // Only regions with shared pages are exported: a peer reaches nothing
  // else directly (the partial first and last pages, memory that is not
  // private anonymous, overlapping registrations go through the ring).
  if (mr->share.length == 0) return;
  // Local write: a receive buffer a peer's direct SEND may fill (the
  // requester checks the right it needs: remote ones for WRITE, READ and
  // atomics, local write for a SEND's receive buffer).
  if (!(mr->access & (kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic))) return;
  uint32_t i;
  if (!TakeFreeMrSlot(&i)) return;
  ShmMrSlot* s = own_->mr_slot(i);
  const auto r = std::memory_order_relaxed;
  s->iova.store(mr->iova, r);
  s->length.store(mr->length, r);
  s->addr.store(reinterpret_cast<uint64_t>(mr->addr), r);
  s->share_start.store(mr->share.start, r);
  s->share_len.store(mr->share.length, r);
  s->key_pd.store(uint64_t{mr->rkey} | (uint64_t{pd_id} << 32), r);
  s->fd_ino.store(mr->share.ino, r);
  s->fd_offset.store(mr->share.fd_offset, r);
  s->access.store(mr->access, r);
  s->fd.store(mr->share.fd, r);
  // Publication: the fields above become visible with the valid state.
  mr->shm_state = (++generation_ << 1) | 1;
  s->state.store(mr->shm_state, std::memory_order_seq_cst);
  mr->shm_slot = static_cast<int>(i);
}

void ShmDirect::RevokeMr(Mr* mr) {
  if (mr->shm_slot < 0) return;
  ShmMrSlot* s = own_->mr_slot(static_cast<uint32_t>(mr->shm_slot));
  s->state.store(s->state.load(std::memory_order_relaxed) & ~uint64_t{1},
                 std::memory_order_seq_cst);
  // Wait (bounded) for peers already inside an access to leave, so that an
  // access racing with the deregistration completes before it returns.
  // Safety does not depend on this wait (shm_direct.h): a peer still inside
  // after the deadline reaches only the memfd, which the last deregistration
  // of the pages detaches from this process's memory.
  const auto deadline = Clock::now() + kRevokeWait;
  int spins = 0;
  bool drained = true;
  while (s->inflight.load(std::memory_order_seq_cst) != 0) {
    if (++spins > 64) {
      if (Clock::now() > deadline) {
        drained = false;
        break;
      }
      sched_yield();
    }
  }
  s->key_pd.store(0, std::memory_order_relaxed);
  // A slot whose counter did not drain is quarantined until it does (a
  // stale increment would make its next owner wait; TakeFreeMrSlot).
  (drained ? free_mr_ : quarantined_mr_).push_back(static_cast<uint32_t>(mr->shm_slot));
  mr->shm_slot = -1;
}

void ShmDirect::PublishQp(Qp* qp, uint32_t pd_id, int srq_slot) {
  if (qp->type != QpType::kRc) return;
  if (qp->shm.shm_slot < 0) {
    if (free_qp_.empty()) return;
    qp->shm.shm_slot = static_cast<int>(free_qp_.back());
    free_qp_.pop_back();
  }
  ShmQpSlot* s = own_->qp_slot(static_cast<uint32_t>(qp->shm.shm_slot));
  // Seqlock: odd while the fields change.
  const uint32_t seq = s->seq.load(std::memory_order_relaxed);
  s->seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const auto r = std::memory_order_relaxed;
  s->qpn.store(qp->qpn, r);
  s->dest_qpn.store(qp->attr.dest_qp_num, r);
  s->pd_id.store(pd_id, r);
  s->access.store(qp->attr.qp_access_flags, r);
  s->state.store(static_cast<uint32_t>(qp->attr.qp_state), r);
  s->dgid_ip.store(qp->attr.ah_attr.dgid.IsV4Mapped() ? qp->attr.ah_attr.dgid.Ipv4() : 0, r);
  s->srq_slot.store(srq_slot < 0 ? 0u : static_cast<uint32_t>(srq_slot) + 1, r);
  s->seq.store(seq + 2, std::memory_order_release);
}

void ShmDirect::RemoveQp(Qp* qp) {
  if (qp->shm.shm_slot < 0) return;
  ShmQpSlot* s = own_->qp_slot(static_cast<uint32_t>(qp->shm.shm_slot));
  const uint32_t seq = s->seq.load(std::memory_order_relaxed);
  s->seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->qpn.store(0, std::memory_order_relaxed);
  s->state.store(static_cast<uint32_t>(QpState::kReset), std::memory_order_relaxed);
  s->seq.store(seq + 2, std::memory_order_release);
  free_qp_.push_back(static_cast<uint32_t>(qp->shm.shm_slot));
  qp->shm.shm_slot = -1;
}

// --- Requester side ---

int ShmDirect::FindQpSlot(const transport::ShmSegment& seg, uint32_t qpn, int hint) {
  if (hint >= 0 && static_cast<uint32_t>(hint) < transport::kShmQpSlots &&
      seg.qp_slot(static_cast<uint32_t>(hint))->qpn.load(std::memory_order_relaxed) == qpn)
    return hint;
  for (uint32_t i = 0; i < transport::kShmQpSlots; ++i)
    if (seg.qp_slot(i)->qpn.load(std::memory_order_relaxed) == qpn) return static_cast<int>(i);
  return -1;
}

int ShmDirect::FindMrSlot(const transport::ShmPeer* peer, uint32_t rkey) {
  const transport::ShmSegment& seg = peer->seg;
  for (size_t k = 0; k < rkey_hints_.size(); ++k) {
    RkeyHint& h = rkey_hints_[k];
    if (h.peer != peer || h.rkey != rkey) continue;
    if (h.slot == kNoSlot) {
      // Not exported (no remote right, table full, peer without direct
      // operations): the full scan is repeated only now and then.
      if (++h.misses % kRescanEvery != 0) return -1;
      rkey_hints_.erase(rkey_hints_.begin() + static_cast<long>(k));
      break;
    }
    if (static_cast<uint32_t>(seg.mr_slot(h.slot)->key_pd.load(std::memory_order_relaxed)) == rkey)
      return static_cast<int>(h.slot);
  }
  for (uint32_t i = 0; i < transport::kShmMrSlots; ++i) {
    const ShmMrSlot* s = seg.mr_slot(i);
    if ((s->state.load(std::memory_order_relaxed) & 1) &&
        static_cast<uint32_t>(s->key_pd.load(std::memory_order_relaxed)) == rkey) {
      if (rkey_hints_.size() >= kMaxRkeyHints) rkey_hints_.pop_back();
      rkey_hints_.insert(rkey_hints_.begin(), RkeyHint{peer, rkey, i, 0});
      return static_cast<int>(i);
    }
  }
  if (rkey_hints_.size() >= kMaxRkeyHints) rkey_hints_.pop_back();
  rkey_hints_.insert(rkey_hints_.begin(), RkeyHint{peer, rkey, kNoSlot, 0});
  return -1;
}

void ShmDirect::DropMappingsOf(const transport::ShmPeer* peer) {
  std::erase_if(mappings_, [&](const Mapping& m) {
    if (m.peer != peer) return false;
    munmap(m.base, m.size);
    return true;
  });
  std::erase_if(rkey_hints_, [&](const RkeyHint& h) { return h.peer == peer; });
}

uint8_t* ShmDirect::MapPeerMemory(const std::shared_ptr<transport::ShmPeer>& peer, int fd,
                                  uint64_t ino, uint64_t fd_offset, uint64_t len) {
  const uint64_t pid_nonce = peer->nonce ^ (uint64_t{peer->pid} << 40);
  for (const Mapping& m : mappings_) {
    if (m.peer == peer.get() && m.pid_nonce == pid_nonce && m.ino == ino) {
      if (fd_offset > m.size || len > m.size - fd_offset) return nullptr;
      return m.base + fd_offset;
    }
  }
  if (fd < 0) return nullptr;
  // Mappings of peers that are gone (or too many) are dropped first.
  std::erase_if(mappings_, [&](const Mapping& m) {
    const bool stale = m.peer == peer.get() && m.pid_nonce != pid_nonce;
    if (stale || mappings_.size() >= kMaxMappings) {
      munmap(m.base, m.size);
      return true;
    }
    return false;
  });
  const std::string path = "/proc/" + std::to_string(peer->pid) + "/fd/" + std::to_string(fd);
  const int mfd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (mfd < 0) return nullptr;
  struct stat st{};
  const int seals = fcntl(mfd, F_GET_SEALS);
  // The descriptor must be the memfd the peer published (fd numbers are
  // reused; inode numbers are not while it is open), of this user, and
  // sealed against shrinking so that the mapping can never SIGBUS.
  if (fstat(mfd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_ino) != ino ||
      st.st_uid != geteuid() || seals < 0 || !(seals & F_SEAL_SHRINK) || st.st_size <= 0 ||
      fd_offset > static_cast<uint64_t>(st.st_size) ||
      len > static_cast<uint64_t>(st.st_size) - fd_offset) {
    close(mfd);
    return nullptr;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  close(mfd);
  if (p == MAP_FAILED) return nullptr;
  mappings_.push_back(Mapping{peer.get(), pid_nonce, ino, static_cast<uint8_t*>(p), size});
  return static_cast<uint8_t*>(p) + fd_offset;
}

// --- The requester hook ---

bool Engine::FindDirectTarget(Qp* qp, DirectTarget* out) {
  using transport::ShmPeer;
  // The peer device (cached per QP; revalidated when it dies or the path changes).
  const Gid& dgid = qp->attr.ah_attr.dgid;
  if (!qp->shm.shm_peer || qp->shm.shm_peer->dead || !(qp->shm.shm_peer_gid == dgid)) {
    qp->shm.shm_peer =
        peer_memory_->PeerFor(transport::Endpoint{dgid, udp_port_}, qp->attr.dest_qp_num);
    qp->shm.shm_peer_gid = dgid;
    qp->shm.shm_peer_qp_slot = -1;
    if (!qp->shm.shm_peer) return false;
  }
  const transport::ShmSegment& seg = qp->shm.shm_peer->seg;

  // Target QP, as the responder would check it (state, connected to us).
  // Seqlock read: retry-free, a torn read just goes the ring.
  const uint32_t dest = qp->attr.dest_qp_num;
  // A peer QP that is not exported (peer without direct operations, table
  // full) is looked for again only every 256 WQEs: the scan is 1024 loads.
  if (qp->shm.shm_peer_qp_slot == -2 && (++qp->shm.shm_peer_qp_misses & 255) != 0) return false;
  const int qs = ShmDirect::FindQpSlot(seg, dest, qp->shm.shm_peer_qp_slot);
  if (qs < 0) {
    qp->shm.shm_peer_qp_slot = -2;
    return false;
  }
  qp->shm.shm_peer_qp_slot = qs;
  const ShmQpSlot* q = seg.qp_slot(static_cast<uint32_t>(qs));
  const uint32_t seq1 = q->seq.load(std::memory_order_acquire);
  const uint32_t t_qpn = q->qpn.load(std::memory_order_relaxed);
  const uint32_t t_dest = q->dest_qpn.load(std::memory_order_relaxed);
  const uint32_t t_pd = q->pd_id.load(std::memory_order_relaxed);
  const uint32_t t_access = q->access.load(std::memory_order_relaxed);
  const uint32_t t_state = q->state.load(std::memory_order_relaxed);
  const uint32_t t_dgid = q->dgid_ip.load(std::memory_order_relaxed);
  const uint32_t t_srq = q->srq_slot.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if ((seq1 & 1) || q->seq.load(std::memory_order_relaxed) != seq1) return false;
  const Gid& sgid = gids_[std::min<size_t>(SourceIndex(qp), gids_.size() - 1)];
  if (t_qpn != dest || t_dest != qp->qpn || !ResponderStateForDirect(t_state) ||
      !sgid.IsV4Mapped() || t_dgid != sgid.Ipv4())
    return false;
  *out = DirectTarget{
      .qp_slot = static_cast<uint32_t>(qs), .pd_id = t_pd, .access = t_access, .srq_slot = t_srq};
  return true;
}

bool Engine::TryDirect(Qp* qp, SendWqe& w, uint64_t index) {
  using transport::ShmPeer;
  // Not XRC: the target's PD is its SRQ's, named per request (xrc.cc).
  if (peer_memory_ == nullptr || !shm_direct_ || qp->type != QpType::kRc ||
      qp->xrc != XrcRole::kNone)
    return false;
  const WrOpcodeInfo& op = GetWrOpcodeInfo(w.opcode);
  const uint32_t right = op.remote_right;
  // SEND and SEND_WITH_IMM go into the target's receive queue
  // (TryDirectSend). A WRITE_WITH_IMM is only ever placed: its last packet
  // carries the immediate through the ring, and the target's engine makes
  // the receive completion from it (shm_placed.h). SEND_WITH_INV goes as
  // packets.
  const bool send = w.opcode == WrOpcode::kSend || w.opcode == WrOpcode::kSendWithImm;
  const bool with_imm = w.opcode == WrOpcode::kRdmaWriteWithImm;
  if (!send && (right == 0 || (op.consumes_recv_wqe && !with_imm))) return false;
  // RC ordering: only when nothing of this QP is in flight, or, for a
  // WRITE whose shared pages are placed and whose packets go through the
  // ring, when only such WRITEs to the same region are (shm_placed.h).
  if (w.started || w.placed_end != w.placed_begin || (!send && w.length == 0)) return false;
  const bool idle = qp->sq_next == qp->sq_head;
  const bool may_place = (w.opcode == WrOpcode::kRdmaWrite || with_imm) &&
                         qp->shm.ring_barrier <= qp->sq_head &&
                         (idle || qp->shm.placed_rkey == w.rkey);
  if (!idle && !may_place) return false;
  DirectTarget t;
  if (!FindDirectTarget(qp, &t)) return false;
  if (send) return TryDirectSend(qp, w, index, t);
  if (!(t.access & right)) return false;
  const std::shared_ptr<ShmPeer>& peer = qp->shm.shm_peer;
  const transport::ShmSegment& seg = peer->seg;
  const uint32_t t_pd = t.pd_id;
  const Gid& sgid = gids_[std::min<size_t>(SourceIndex(qp), gids_.size() - 1)];

  // The region.
  const int ms = shm_direct_->FindMrSlot(peer.get(), w.rkey);
  if (ms < 0) return false;
  ShmMrSlot* m = seg.mr_slot(static_cast<uint32_t>(ms));
  m->inflight.fetch_add(1, std::memory_order_seq_cst);
  struct Leave {
    ShmMrSlot* slot;
    ~Leave() { slot->inflight.fetch_sub(1, std::memory_order_release); }
  } leave{m};
  if (!(m->state.load(std::memory_order_seq_cst) & 1)) return false;
  const auto r = std::memory_order_relaxed;
  const uint64_t key_pd = m->key_pd.load(r);
  const uint64_t iova = m->iova.load(r);
  const uint64_t mr_len = m->length.load(r);
  const uint64_t addr = m->addr.load(r);
  const uint64_t share_start = m->share_start.load(r);
  const uint64_t share_len = m->share_len.load(r);
  const uint32_t mr_access = m->access.load(r);
  const uint64_t va = w.remote_addr;
  const uint64_t len = w.length;
  // MrTable::ResolveRemote's rules, overflow-safe: key, PD, right, bounds.
  if (static_cast<uint32_t>(key_pd) != w.rkey || (key_pd >> 32) != t_pd ||
      (mr_access & right) != right || va < iova || va - iova > mr_len ||
      len > mr_len - (va - iova))
    return false;
  const uint64_t target = addr + (va - iova);  // in the owner's address space
  if (target < addr) return false;
  // Only the shared pages, through the memfd: never the owner's address
  // space itself (process_vm_writev/readv would write wherever `target`
  // points when it runs, even after the owner deregistered the region and
  // reused the memory; shm_direct.h). The partial first/last pages and
  // memory that is not shared go through the ring.
  const bool whole = share_len != 0 && target >= share_start &&
                     target - share_start <= share_len && len <= share_len - (target - share_start);
  if (!whole || !idle || with_imm) {
    // Partly shared, placed WRITEs in flight, or an immediate to deliver:
    // the shared part (for a WRITE_WITH_IMM in whole shared pages, all of
    // it) is placed here and the WRITE goes as packets carrying the rest.
    if (!may_place) return false;
    const uint64_t a = std::max(target, share_start);
    const uint64_t b = std::min(target + len, share_start + share_len);
    if (share_len == 0 || a >= b || target + len < target) return false;
    // No packet may carry unplaced bytes on both sides of the placed ones.
    if (a > target && b < target + len && b - a < qp->mtu_bytes) return false;
    uint8_t* p = shm_direct_->MapPeerMemory(peer, m->fd.load(r), m->fd_ino.load(r),
                                            m->fd_offset.load(r) + (a - share_start), b - a);
    if (p == nullptr) return false;
    const auto begin = static_cast<uint32_t>(a - target);
    const auto placed = static_cast<uint32_t>(b - a);
    // A bad local key: the packets report it (SendNextPacket), nothing placed.
    if (!GatherWqe(qp, index, begin, placed, p)) return false;
    w.placed_begin = begin;
    w.placed_end = begin + placed;
    qp->shm.placed_rkey = w.rkey;
    ++stats_.shm_placed_write_ops;
    stats_.shm_placed_write_bytes += placed;
    return false;  // the packets go now
  }
  // An atomic's va is 8-aligned (checked at post), but its host word is not
  // when the MR's iova is aligned unlike its address: an atomic there would
  // be undefined behaviour and a split lock. The ring's responder refuses it
  // with the Invalid Request NAK a peer over UDP gets (responder.cc).
  if (op.one_word() && (target & 7) != 0) return false;
  uint8_t* p = shm_direct_->MapPeerMemory(peer, m->fd.load(r), m->fd_ino.load(r),
                                          m->fd_offset.load(r) + (target - share_start), len);
  if (p == nullptr) return false;  // the mapping was refused: the ring serves it

  WcStatus status = WcStatus::kSuccess;
  uint64_t atomic_orig = 0;
  if (op.atomic_write) {
    // One store of the word (the ring's responder does the same).
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p))
        .store(w.compare_add, std::memory_order_seq_cst);
  } else if (!op.read_or_atomic()) {
    if (!GatherWqe(qp, index, 0, static_cast<uint32_t>(len), p)) status = WcStatus::kLocProtErr;
  } else if (op.read) {
    if (!ScatterSges(qp->pd, qp->WqeSges(index), w.num_sge, 0, p, static_cast<uint32_t>(len)))
      status = WcStatus::kLocProtErr;
  } else {
    // Real atomic instructions on the shared word: atomic with respect to
    // the target's own engine (responder.cc uses atomic_ref too) and to
    // every other peer.
    std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(p));
    uint64_t orig;
    if (w.opcode == WrOpcode::kAtomicCmpSwp) {
      orig = w.compare_add;
      word.compare_exchange_strong(orig, w.swap, std::memory_order_seq_cst);
    } else {
      orig = word.fetch_add(w.compare_add, std::memory_order_seq_cst);
    }
    atomic_orig = orig;
    uint8_t bytes[8];
    std::memcpy(bytes, &orig, 8);
    if (!ScatterSges(qp->pd, qp->WqeSges(index), w.num_sge, 0, bytes, 8))
      status = WcStatus::kLocProtErr;
  }
  // Plain increments under the engine lock, like every EngineStats counter.
  ++shm_direct_->direct_ops;
  ++stats_.shm_direct_ops;
  stats_.shm_direct_bytes += len;
  ++qp->counters.shm_direct_ops;
  qp->counters.shm_direct_bytes += len;
  NoteQpCounters(qp);
  if (op.atomic) {
    ++stats_.shm_direct_atomic_ops;
  } else if (op.read) {
    ++stats_.shm_direct_read_ops;
    stats_.shm_direct_read_bytes += len;
  } else {
    ++stats_.shm_direct_write_ops;
    stats_.shm_direct_write_bytes += len;
  }
  ++qp->sq_next;
  if (status != WcStatus::kSuccess) {
    w.done = true;
    w.status = status;
    RequesterError(qp, status);
    return true;
  }
  if (capture_ != nullptr) RecordDirect(qp, w, op, p, sgid, atomic_orig);
  w.done = true;
  w.status = WcStatus::kSuccess;
  RetireCompletedWqes(qp);
  return true;
}

void Engine::RecordDirect(const Qp* qp, const SendWqe& w, const WrOpcodeInfo& op,
                          const uint8_t* target, const Gid& sgid, uint64_t atomic_orig) {
  DirectOpRecord r;
  r.op = &op;
  r.requester_qpn = qp->qpn;
  r.responder_qpn = qp->attr.dest_qp_num;
  r.psn = qp->req.sq_psn;
  r.mtu = qp->mtu_bytes;
  r.va = w.remote_addr;
  r.rkey = w.rkey;
  r.length = w.length;
  // The bytes the packets would have carried: written to, or read from,
  // the target's memory (an atomic carries its operands and result instead).
  r.data = op.atomic ? nullptr : target;
  r.compare_add = w.compare_add;
  r.swap = w.swap;
  r.atomic_orig = atomic_orig;
  r.requester = transport::Endpoint{sgid, udp_port_};
  r.responder = transport::Endpoint{qp->attr.ah_attr.dgid, udp_port_};
  capture_->RecordDirect(r);
}

}  // namespace softrnic::engine
