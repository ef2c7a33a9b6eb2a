// Completion queues, completion channels, receive queues and SRQs.
//
// Thread-safety: not synchronised; the engine calls these under its lock.
// CompletionChannel's fd is read by application threads without the lock
// (see GetCqEvent in engine.cc).
//
// Queue memory: the entries of a CQ, a receive queue (and so an SRQ) and a
// QP's send queue live in memory from the std::pmr::memory_resource the
// object was made with: the engine's own (operator new) unless the verbs
// layer passes a parent domain's allocators (ibv_alloc_parent_domain(3),
// verbs/domain_allocator.h). Each array is one allocation, made when the
// object is made or resized and given back when it is destroyed or resized;
// never while posting or polling. The resource may run application code, so
// Device allocates before it takes the engine lock and frees after it let
// go (device_queues.cc, device.cc).
#pragma once

#include <cstdint>
#include <deque>
#include <memory_resource>
#include <vector>

#include "engine/queues/event_pipe.h"
#include "engine/types.h"

namespace softrnic::engine {

class Pd {
 public:
  void* handle = nullptr;
  int users = 0;  // MRs, QPs, SRQs, AHs
  uint32_t id = 0;  // exported to shm peers (a pointer means nothing to them)
};

class Ah {
 public:
  Pd* pd = nullptr;
  AddressVector av;
  void* handle = nullptr;
};

class Cq;

// A pipe carrying one byte per event plus the queue of CQs the bytes stand
// for; readers honour O_NONBLOCK on the read end because they read() it.
//
// An event made by the very thread that waits for it (a blocking
// ibv_get_cq_event running the engine's pass itself, event_wait.cc) skips
// the pipe: that thread takes it at once, under the same lock hold, so the
// byte's write, poll and read (three system calls per event) buy nothing.
// Invariant: bytes in the pipe plus bytes and takes claimed by readers not
// yet popped == pending.size() - unsignaled.
class CompletionChannel {
 public:
  bool ok() const { return pipe.ok(); }
  void Notify(Cq* cq);
  // Claims one event made without its byte, for the waiting thread; any
  // more such events get their bytes now (other readers must see them).
  bool TakeUnsignaled();

  EventPipe pipe;
  std::deque<Cq*> pending;
  int users = 0;
  // Threads inside ibv_get_cq_event on it (Device::GetCqEvent). A channel
  // destroyed while some are is kept (Engine::RemoveChannelLocked) until
  // they leave, and they never get an event: as a read of a real channel's
  // fd that another thread closed, they block (AwaitChannelEvent). One
  // destroyed before a call takes the engine lock fails that call with
  // EBADF; it is kept a while for such late calls too.
  int waiters = 0;
  bool destroyed = false;
  // Events in `pending` whose byte was not written (see above).
  uint32_t unsignaled = 0;
  // The channel whose waiter is running a pass on this thread (set around
  // that pass only): its events are taken without the pipe.
  static thread_local const CompletionChannel* waiter_in_pass;
};

// The engine's own queue memory.
inline std::pmr::memory_resource* DefaultQueueMemory() { return std::pmr::new_delete_resource(); }

class Cq {
 public:
  explicit Cq(std::pmr::memory_resource* memory = DefaultQueueMemory()) : ring(memory) {}

  // Appends a completion; returns false on overflow (the entry is lost and
  // the CQ is marked in error, IBA 11.4.2.1: CQ overrun is an async error).
  bool Push(const Completion& c, bool solicited);
  int Poll(int n, Completion* out);
  uint32_t capacity() const { return static_cast<uint32_t>(ring.size()); }
  std::pmr::memory_resource* memory() const { return ring.get_allocator().resource(); }
  // Resizing in two steps, so that no allocator runs under the engine lock:
  // the caller makes `next` (the new size, from memory()) before, this
  // moves the waiting completions into it and swaps it with the ring, and
  // the caller frees the old ring, now in `next`, after. False (nothing
  // changed) if more completions wait than `next` holds.
  bool ResizeInto(std::pmr::vector<Completion>& next);
  // Drops the completions of QP `qpn` not yet polled, keeping the order of
  // the others (a QP moved to Reset: qp_control.cc).
  void RemoveQp(uint32_t qpn);

  std::pmr::vector<Completion> ring;
  size_t head = 0;
  size_t count = 0;
  CompletionChannel* channel = nullptr;
  void* handle = nullptr;
  // 0: not armed; 1: next completion; 2: next solicited or error completion.
  int armed = 0;
  bool overflowed = false;
  // One IBV_EVENT_CQ_ERR per overflow episode, so a flood cannot grow the
  // async event queue without bound.
  bool overflow_reported = false;
  unsigned events_delivered = 0;
  unsigned events_acked = 0;
  int users = 0;
};

// A ring of receive WQEs with preallocated SGE storage (no allocation when
// posting).
class RecvQueue {
 public:
  explicit RecvQueue(std::pmr::memory_resource* memory = DefaultQueueMemory())
      : wr_ids(memory), num_sge(memory), sges(memory) {}

  // Allocates the ring (from memory()); empty.
  void Init(uint32_t capacity, uint32_t max_sge);
  // Empties it (IBA 10.3.1.1, a QP to RESET) without allocating.
  void Clear() { head = count = 0; }
  uint32_t capacity() const { return static_cast<uint32_t>(wr_ids.size()); }
  std::pmr::memory_resource* memory() const { return wr_ids.get_allocator().resource(); }
  bool Full() const { return count == wr_ids.size(); }
  bool Empty() const { return count == 0; }
  // REQUIRES: !Full() and wr.sges.size() <= max_sge.
  void Push(const RecvWr& wr);
  uint64_t FrontWrId() const { return wr_ids[head]; }
  const Sge* FrontSges() const { return &sges[head * max_sge]; }
  uint32_t FrontNumSge() const { return num_sge[head]; }
  void Pop();
  // Resizing in two steps, as Cq::ResizeInto: `next` was Init()ed with the
  // new capacity and the same max_sge from memory(); the waiting WQEs move
  // into it, in order, and it becomes this queue, `next` the old one.
  // False (nothing changed) if more WQEs wait than `next` holds.
  bool ResizeInto(RecvQueue& next);

  std::pmr::vector<uint64_t> wr_ids;
  std::pmr::vector<uint32_t> num_sge;
  std::pmr::vector<Sge> sges;
  uint32_t max_sge = 0;
  size_t head = 0;
  size_t count = 0;
};

// An XRC domain (ibv_open_xrcd(3); IBA 9.7, the XRC transport): XRC SRQs and XRC receive
// QPs of one domain serve each other. Opened by file (its inode) or
// anonymously; each open of the same inode in this process returns it
// again (opens counts them).
class Xrcd {
 public:
  bool has_inode = false;
  uint64_t inode_dev = 0;
  uint64_t inode = 0;
  int opens = 0;
  int users = 0;  // XRC SRQs and XRC receive QPs
};

// An SRQ's WQEs as same-host peers see them (engine/same_host/shm_direct_srq.cc):
// the oldest WQEs leave the SRQ's `rq` when they are described in the
// control segment's SRQ queue `slot`, and wait here, per entry (index: the
// entry's `taken` value modulo the queue's entries), until a peer's SEND
// fills one or the responder takes one for a packet.
struct SrqExport {
  int slot = -1;  // -1: not exported
  // As values of the queue's `taken` word: the oldest entry not finished
  // (completed, handed to the responder, or given back) and one past the
  // last described.
  uint64_t oldest = 0;
  uint64_t exported = 0;
  uint32_t live = 0;         // entries in [oldest, exported) not finished
  uint32_t idle_passes = 0;  // collection passes that found the oldest entry not done
  std::vector<uint64_t> wr_id;
  std::vector<uint32_t> num_sge;
  std::vector<Sge> sges;  // rq.max_sge per entry
  std::vector<uint8_t> finished;
};

class Srq {
 public:
  explicit Srq(std::pmr::memory_resource* memory = DefaultQueueMemory()) : rq(memory) {}

  Pd* pd = nullptr;
  // XRC SRQs (ibv_create_srq_ex, IBV_SRQT_XRC): the domain, the CQ their
  // receive completions go to, and the number XRC requests name.
  Xrcd* xrcd = nullptr;
  Cq* cq = nullptr;
  uint32_t srqn = 0;
  RecvQueue rq;
  uint32_t limit = 0;  // armed when non-zero (IBA 10.2.9.3)
  void* handle = nullptr;
  int users = 0;
  bool in_error = false;
  SrqExport shm;
};

}  // namespace softrnic::engine
