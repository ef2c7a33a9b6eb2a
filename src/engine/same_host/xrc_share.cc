// XRC domains shared between processes: the SRQ-number registry, the
// mailbox, its server thread and the forwarder's calls (xrc_share.h says
// why it is built this way).
#include "engine/same_host/xrc_share.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>

#include "common/background_thread.h"
#include "common/secure_random.h"
#include "common/shared_futex.h"
#include "engine/engine.h"
#include "log/log.h"
#include "transport/owned_files.h"
#include "transport/shm_registry.h"
#include "transport/shm_segment.h"

namespace softrnic::engine {
namespace {

constexpr uint64_t kMagic = 0x31786d7478726373ULL;  // "scrxtmx1"
constexpr uint32_t kVersion = 1;
constexpr int kSlots = 16;
// The largest payload of one packet: the largest path MTU.
constexpr uint32_t kMaxPayload = 4096;
// How long a forwarder leaves a message's first packet for the owner to
// take before it withdraws it and answers RNR (the owner is stopped, or
// busy: on a loaded 2-vCPU host a runnable thread can wait tens of ms for
// a CPU). The requester retries after its RNR timer.
constexpr auto kTakeWait = std::chrono::milliseconds(100);
// How long a forwarder waits for a later packet (its message's WQE is held
// there, so giving up costs a retransmission: only for an owner that does
// not run at all) and for a request the owner took (it works on it under
// its lock, which takes microseconds; past this the owner is taken for
// gone, stopped or dead in the middle).
constexpr auto kServeWait = std::chrono::seconds(2);

// kOpDeliver: take a WQE first when `take` is set, scatter at offset,
// complete when `complete` is set. kOpComplete: complete (in error).
enum Op : uint32_t { kOpDeliver = 2, kOpComplete = 3 };
enum State : uint32_t { kFree = 0, kRequest = 1, kClaimed = 2, kDone = 3 };
// Results (kNotTaken: withdrawn by the forwarder, nothing happened).
enum Result : uint32_t {
  kOk = 1,
  kEmpty = 2,
  kGone = 3,
  kTooShort = 4,
  kBadBuffer = 5,
  kNotTaken = 6,
};

bool Alive(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

}  // namespace

// What a forwarder asks; written before the slot's state becomes kRequest,
// read by the owner after it claimed the slot (a same-user peer writes it:
// the owner copies it and checks every field).
struct XrcShare::Request {
  uint32_t op = 0;
  uint32_t srqn = 0;
  uint32_t qpn = 0;  // the forwarder's receive QP
  uint32_t offset = 0;
  uint32_t len = 0;
  uint32_t solicited = 0;
  uint32_t complete = 0;
  uint32_t take = 0;
  uint64_t forwarder = 0;
  uint64_t dom_dev = 0;
  uint64_t dom_ino = 0;
  Completion completion;
};

struct XrcShare::Slot {
  std::atomic<uint64_t> owner;   // the forwarder holding the slot, 0 when free
  std::atomic<uint32_t> state;   // State; futex word the forwarder waits on
  uint32_t result;
  Request req;
  uint8_t payload[kMaxPayload];
};

struct XrcShare::Mailbox {
  uint64_t magic;
  uint32_t version;
  uint32_t pid;
  uint32_t uid;
  uint32_t slots;
  uint64_t netns;
  std::atomic<uint32_t> doorbell;  // futex word the server thread sleeps on
  Slot slot[kSlots];
};

XrcShare::XrcShare(Engine* engine)
    : engine_(engine),
      netns_(transport::NetnsInode()),
      self_id_((static_cast<uint64_t>(getpid()) << 32) | (SecureRandom32() | 1u)) {}

XrcShare::~XrcShare() {
  if (server_.joinable()) {
    stop_.store(true);
    box_->doorbell.fetch_add(1);
    SharedFutexWake(&box_->doorbell);
    server_.join();
  }
  const transport::OwnedDir dir = transport::OwnedDir::Open(
      transport::ShmEndpointDirectory(), /*create=*/false, /*private_dir=*/true);
  for (const std::string& name : published_) {
    // Only a link that is still ours (a later owner may have replaced it).
    char buf[64];
    const ssize_t n = dir.ok() ? readlinkat(dir.fd(), name.c_str(), buf, sizeof(buf) - 1) : -1;
    if (n <= 0) continue;
    buf[n] = '\0';
    if (std::string(buf) == "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(box_fd_))
      unlinkat(dir.fd(), name.c_str(), 0);
  }
  for (auto& p : peers_) munmap(p->box, p->bytes);
  if (box_ != nullptr) munmap(box_, box_bytes_);
  if (box_fd_ >= 0) close(box_fd_);
}

std::string XrcShare::LinkName(const Xrcd& xrcd, uint32_t srqn) const {
  char name[128];
  std::snprintf(name, sizeof(name), "xrc-%llu-%llx-%llx-%06x",
                static_cast<unsigned long long>(netns_),
                static_cast<unsigned long long>(xrcd.inode_dev),
                static_cast<unsigned long long>(xrcd.inode), srqn);
  return name;
}

bool XrcShare::EnsureMailbox() {
  if (box_ != nullptr) return true;
  const int fd = memfd_create("softrnic-xrc", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return false;
  const size_t bytes = (sizeof(Mailbox) + 4095) & ~size_t{4095};
  void* m = MAP_FAILED;
  // Sealed against shrinking, so a peer's mapping never faults (docs/shm.md).
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
      (m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
    close(fd);
    return false;
  }
  struct stat st{};
  fstat(fd, &st);
  auto* box = static_cast<Mailbox*>(m);  // zero-filled: every slot kFree, no owner
  box->version = kVersion;
  box->pid = static_cast<uint32_t>(getpid());
  box->uid = static_cast<uint32_t>(geteuid());
  box->slots = kSlots;
  box->netns = netns_;
  std::atomic_thread_fence(std::memory_order_release);
  box->magic = kMagic;
  box_fd_ = fd;
  box_ = box;
  box_bytes_ = bytes;
  box_dev_ = st.st_dev;
  box_ino_ = st.st_ino;
  server_ = StartBackgroundThread("softrnic-xrc", [this] {
    while (!stop_.load()) {
      const uint32_t seen = box_->doorbell.load();
      if (seen != served_doorbell_.load(std::memory_order_relaxed)) {
        // New requests (an engine pass of this device may take them first).
        SpinLock lock(engine_->mu_);
        ServeLocked();
        continue;
      }
      // Bounded: a wake-up lost to a peer that died mid-call costs 100 ms.
      SharedFutexWait(&box_->doorbell, seen, std::chrono::microseconds(100000));
    }
  });
  return true;
}

bool XrcShare::Reserve(const Xrcd& xrcd, uint32_t srqn) {
  const transport::OwnedDir dir =
      transport::OpenPrivateDirReclaiming(transport::ShmEndpointDirectory(), /*create=*/true);
  if (!dir.ok() || !EnsureMailbox()) {
    SOFTRNIC_LOG(kWarn,
                 "device %s: XRC SRQ 0x%06x is reachable from this process only (no link "
                 "directory or mailbox: %s)",
                 engine_->name_.c_str(), srqn, dir.why().c_str());
    return true;
  }
  const std::string name = LinkName(xrcd, srqn);
  const std::string target =
      "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(box_fd_);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (symlinkat(target.c_str(), dir.fd(), name.c_str()) == 0) {
      published_.push_back(name);
      return true;
    }
    if (errno != EEXIST) return true;  // not shareable, but usable here
    // Taken: by a live process (its link opens), or left by a dead one.
    const int fd = openat(dir.fd(), name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      close(fd);
      return false;
    }
    unlinkat(dir.fd(), name.c_str(), 0);
  }
  return false;
}

void XrcShare::Unpublish(const Xrcd& xrcd, uint32_t srqn) {
  const std::string name = LinkName(xrcd, srqn);
  auto it = std::find(published_.begin(), published_.end(), name);
  if (it != published_.end()) {
    const transport::OwnedDir dir = transport::OwnedDir::Open(
        transport::ShmEndpointDirectory(), /*create=*/false, /*private_dir=*/true);
    if (dir.ok()) unlinkat(dir.fd(), name.c_str(), 0);
    published_.erase(it);
  }
  std::erase_if(held_, [&](const auto& h) { return h.second.srqn == srqn; });
}

XrcShare::Peer* XrcShare::Attach(int fd, pid_t pid) {
  struct stat st{};
  if (fstat(fd, &st) != 0) return nullptr;
  for (auto& p : peers_)
    if (p->dev == st.st_dev && p->ino == st.st_ino && p->pid == pid) return p.get();
  // A same-user peer's file: checked like a shared-memory segment (size,
  // seals, header) before it is used.
  const size_t bytes = (sizeof(Mailbox) + 4095) & ~size_t{4095};
  const int seals = fcntl(fd, F_GET_SEALS);
  if (static_cast<size_t>(st.st_size) != bytes || seals < 0 || !(seals & F_SEAL_SHRINK))
    return nullptr;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* box = static_cast<Mailbox*>(m);
  if (box->magic != kMagic || box->version != kVersion || box->pid != static_cast<uint32_t>(pid) ||
      box->uid != static_cast<uint32_t>(geteuid()) || box->netns != netns_ ||
      box->slots != kSlots) {
    munmap(m, bytes);
    return nullptr;
  }
  // Mailboxes of processes gone since are dropped when a new one comes.
  // (A receive QP bound to one loses the binding: its message cannot
  // complete anyway.)
  std::erase_if(peers_, [&](const std::unique_ptr<Peer>& p) {
    if (Alive(p->pid)) return false;
    std::erase_if(bound_, [&](const auto& b) { return b.second == p.get(); });
    munmap(p->box, p->bytes);
    return true;
  });
  auto p = std::make_unique<Peer>();
  p->dev = st.st_dev;
  p->ino = st.st_ino;
  p->pid = pid;
  p->box = box;
  p->bytes = bytes;
  peers_.push_back(std::move(p));
  return peers_.back().get();
}

bool XrcShare::BindRemote(const Qp* qp, uint32_t srqn) {
  const transport::OwnedDir dir = transport::OwnedDir::Open(
      transport::ShmEndpointDirectory(), /*create=*/false, /*private_dir=*/true);
  if (!dir.ok()) return false;
  const std::string name = LinkName(*qp->xrcd, srqn);
  char buf[64];
  const ssize_t n = readlinkat(dir.fd(), name.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return false;
  buf[n] = '\0';
  unsigned long owner = 0;
  int peer_fd = 0;
  if (std::sscanf(buf, "/proc/%lu/fd/%d", &owner, &peer_fd) != 2 || owner == 0 ||
      owner > 0x7fffffff)
    return false;
  const int fd = openat(dir.fd(), name.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;  // its owner is gone, or is another user
  struct stat st{};
  Peer* peer = nullptr;
  // Our own mailbox: the SRQ would be in this engine, where it was not found.
  if (fstat(fd, &st) == 0 && !(box_ != nullptr && st.st_dev == box_dev_ && st.st_ino == box_ino_))
    peer = Attach(fd, static_cast<pid_t>(owner));
  close(fd);
  if (peer == nullptr) return false;
  bound_[qp->qpn] = peer;
  return true;
}

uint32_t XrcShare::Call(Peer& peer, const Request& req, const uint8_t* payload,
                        std::chrono::milliseconds claim_wait) {
  Mailbox* box = peer.box;
  Slot* slot = nullptr;
  for (Slot& s : box->slot) {
    uint64_t expected = 0;
    if (s.owner.compare_exchange_strong(expected, self_id_)) {
      slot = &s;
      break;
    }
  }
  if (slot == nullptr) {
    // Every slot held: take one whose forwarder died.
    for (Slot& s : box->slot) {
      uint64_t held = s.owner.load();
      if (Alive(static_cast<pid_t>(held >> 32))) continue;
      if (s.owner.compare_exchange_strong(held, self_id_)) {
        slot = &s;
        break;
      }
    }
  }
  if (slot == nullptr) return kNotTaken;
  slot->state.store(kFree);
  slot->req = req;
  if (req.len > 0) std::memcpy(slot->payload, payload, req.len);
  slot->result = 0;
  slot->state.store(kRequest, std::memory_order_release);
  box->doorbell.fetch_add(1);
  SharedFutexWake(&box->doorbell);
  const auto start = Clock::now();
  uint32_t result = kGone;
  for (;;) {
    const uint32_t st = slot->state.load(std::memory_order_acquire);
    if (st == kDone) {
      result = slot->result;
      break;
    }
    const auto waited = Clock::now() - start;
    if (st == kRequest && waited >= claim_wait) {
      uint32_t expected = kRequest;
      if (slot->state.compare_exchange_strong(expected, kFree)) {
        result = kNotTaken;  // withdrawn: the owner will never act on it
        break;
      }
      continue;
    }
    if (st == kClaimed && waited >= std::chrono::milliseconds(1) &&
        (!Alive(peer.pid) || waited >= kServeWait))
      break;  // kGone
    // Serve our own mailbox meanwhile: its owner may be waiting for us.
    if (ServeLocked()) continue;
    SharedFutexWait(&slot->state, st, std::chrono::microseconds(50));
  }
  slot->state.store(kFree);
  slot->owner.store(0, std::memory_order_release);
  return result;
}

bool XrcShare::ServeLocked() {
  if (box_ == nullptr) return false;
  // A forwarder stores kRequest, then bumps the doorbell: a count this
  // scan has seen means every request before it is visible to the scan.
  const uint32_t bell = box_->doorbell.load(std::memory_order_acquire);
  if (bell == served_doorbell_.load(std::memory_order_relaxed)) return false;
  served_doorbell_.store(bell, std::memory_order_relaxed);
  bool served = false;
  for (Slot& s : box_->slot) {
    uint32_t expected = kRequest;
    if (s.state.load(std::memory_order_acquire) != kRequest ||
        !s.state.compare_exchange_strong(expected, kClaimed))
      continue;
    const Request req = s.req;  // copied: the forwarder's memory too
    s.result = req.len <= kMaxPayload ? Serve(req, s.payload) : kGone;
    s.state.store(kDone, std::memory_order_release);
    SharedFutexWake(&s.state);
    served = true;
  }
  return served;
}

// The owner's side: what its responder does with a local SRQ
// (responder.cc TakeRecvWqe, ScatterToRecv, CompleteRecv).
uint32_t XrcShare::Serve(const Request& req, const uint8_t* payload) {
  // ServeAll's caller holds it; xrc_share.h cannot name Engine's lock
  // (engine.h includes it).
  engine_->mu_.AssertHeld();
  Srq* srq = engine_->FindXrcSrq(req.srqn);
  // Only an SRQ of the very inode the forwarder's domain is: never one of
  // an anonymous domain, never one of another file.
  if (srq == nullptr || srq->xrcd == nullptr || !srq->xrcd->has_inode ||
      srq->xrcd->inode_dev != req.dom_dev || srq->xrcd->inode != req.dom_ino)
    return kGone;
  const HeldKey key{req.forwarder, req.qpn};
  switch (req.op) {
    case kOpDeliver: {
      if (req.take != 0) {
        if (auto old = held_.find(key); old != held_.end()) {
          // The forwarder abandoned that message (its QP was reset): the
          // WQE completes flushed, as a local one would on the way to Error.
          Completion c;
          c.wr_id = old->second.wr_id;
          c.status = WcStatus::kWrFlushErr;
          c.opcode = WcOpcode::kRecv;
          c.qp_num = req.qpn;
          if (Srq* o = engine_->FindXrcSrq(old->second.srqn);
              o != nullptr && !o->cq->Push(c, false))
            engine_->ReportCqOverflow(o->cq);
          held_.erase(old);
        }
        RecvQueue& rq = srq->rq;
        if (rq.Empty()) return kEmpty;
        Held h;
        h.srqn = req.srqn;
        h.wr_id = rq.FrontWrId();
        h.num_sge = rq.FrontNumSge();
        h.sges.assign(rq.FrontSges(), rq.FrontSges() + h.num_sge);
        rq.Pop();
        engine_->CheckSrqLimit(srq);
        held_[key] = std::move(h);
      }
      auto it = held_.find(key);
      if (it == held_.end() || it->second.srqn != req.srqn) return kGone;
      Held& h = it->second;
      uint64_t capacity = 0;
      for (const Sge& s : h.sges) capacity += s.length;
      if (uint64_t{req.offset} + req.len > capacity) return kTooShort;
      if (!engine_->ScatterSges(srq->pd, h.sges.data(), h.num_sge, req.offset, payload, req.len))
        return kBadBuffer;
      if (req.complete == 0) return kOk;
      [[fallthrough]];
    }
    case kOpComplete: {
      auto it = held_.find(key);
      if (it == held_.end() || it->second.srqn != req.srqn) return kGone;
      Completion c = req.completion;
      c.wr_id = it->second.wr_id;
      c.qp_num = req.qpn;
      held_.erase(it);
      if (!srq->cq->Push(c, req.solicited != 0)) engine_->ReportCqOverflow(srq->cq);
      return kOk;
    }
    default: return kGone;
  }
}

// --- The forwarder's side: the responder's steps for a remote SRQ ---

XrcShare::DeliverResult XrcShare::Deliver(Qp* qp, bool take, const uint8_t* data, uint32_t len,
                                          const Completion* last, bool solicited) {
  auto it = bound_.find(qp->qpn);
  if (it == bound_.end()) return DeliverResult::kGone;
  if (len > kMaxPayload) return DeliverResult::kBadBuffer;
  Request req;
  req.op = kOpDeliver;
  req.srqn = qp->resp.xrc_srqn;
  req.qpn = qp->qpn;
  req.offset = take ? 0 : qp->resp.recv_offset;
  req.len = len;
  req.take = take ? 1 : 0;
  req.forwarder = self_id_;
  req.dom_dev = qp->xrcd->inode_dev;
  req.dom_ino = qp->xrcd->inode;
  if (last != nullptr) {
    req.complete = 1;
    req.solicited = solicited ? 1 : 0;
    req.completion = *last;
  }
  switch (Call(*it->second, req, data,
               take ? kTakeWait
                    : std::chrono::duration_cast<std::chrono::milliseconds>(kServeWait))) {
    case kOk: return DeliverResult::kOk;
    case kEmpty: return DeliverResult::kEmpty;
    case kNotTaken: return DeliverResult::kNotTaken;
    case kTooShort: return DeliverResult::kTooShort;
    case kBadBuffer: return DeliverResult::kBadBuffer;
    default: return DeliverResult::kGone;
  }
}

void XrcShare::Complete(Qp* qp, const Completion& c, bool solicited) {
  auto it = bound_.find(qp->qpn);
  if (it == bound_.end()) return;  // that SRQ's process is gone
  Request req;
  req.op = kOpComplete;
  req.srqn = qp->resp.xrc_srqn;
  req.qpn = qp->qpn;
  req.solicited = solicited ? 1 : 0;
  req.forwarder = self_id_;
  req.dom_dev = qp->xrcd->inode_dev;
  req.dom_ino = qp->xrcd->inode;
  req.completion = c;
  Call(*it->second, req, nullptr, std::chrono::duration_cast<std::chrono::milliseconds>(kServeWait));
}

}  // namespace softrnic::engine
