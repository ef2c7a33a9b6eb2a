// Asynchronous events (ibv_get_async_event(3)) of one verbs context.
//
// Every ibv_open_device() gets its own queue and its own async_fd, as the
// kernel gives each opened uverbs file its own event file: middleware that
// opens the device more than once (UCX opens it once per UCP context, Open
// MPI's pml and osc each make one) watches each async_fd separately and
// refuses a second handler for an fd number it already watches. An event
// goes to the queue of the context that created the object it names
// (Engine::PostAsyncEvent asks the router the verbs layer installs).
//
// Lifetime (M6, docs/security.md): an event names its object by the
// application's handle. When the object is destroyed its unread events are
// purged (Purge), as uverbs does, so a reader is never handed a freed
// ibv_qp/ibv_cq/ibv_srq. Events already handed out are counted per handle
// (TakeReported): destroy waits for the application to acknowledge them
// (ibv_ack_async_event(3)), as libibverbs does with the kernel's count.
//
// The fd is one end of a unix socket pair that holds one byte while events
// are queued and none otherwise, so it polls readable exactly while there is
// something to read. A level, not a byte per event: a purge can then take the
// byte back with recv(MSG_DONTWAIT) whatever blocking mode the application
// gave the fd, and the queue's length is not limited by the socket buffer.
//
// Bounded (M6): a peer that keeps driving QPs into error in an application
// that never reads async events (most do not) must not grow the queue without
// limit. The kernel's uverbs list has no limit of its own; softrnic keeps
// kMaxEvents unread events and drops later ones, counted in dropped().
//
// Thread-safety: everything but read_fd() under the engine lock; the reader
// consumes the fd's byte outside the lock (Device::GetAsyncEvent).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <unordered_map>

#include "engine/types.h"

namespace softrnic::engine {

struct AsyncEvent {
  AsyncEventType type = AsyncEventType::kPortActive;
  void* handle = nullptr;  // handle of the QP / CQ / SRQ named by `type`, or null
  uint8_t port = 1;
};

// The kind of object an event names (ibv_async_event.element).
enum class AsyncObject : uint8_t { kNone, kQp, kCq, kSrq };
AsyncObject ObjectOf(AsyncEventType type);

class AsyncQueue {
 public:
  // Unread events kept; later ones are dropped. Thousands of QPs in error at
  // once still fit: each QP reports one error.
  static constexpr size_t kMaxEvents = 4096;

  AsyncQueue();  // ok() is false if the socket pair could not be made
  ~AsyncQueue();
  AsyncQueue(const AsyncQueue&) = delete;
  AsyncQueue& operator=(const AsyncQueue&) = delete;

  bool ok() const { return read_fd_ >= 0; }
  int read_fd() const { return read_fd_; }
  void Push(const AsyncEvent& event);
  // Takes the oldest event, counting it as reported for its handle. False if
  // nothing is queued (its object was destroyed since the fd woke the reader).
  bool Pop(AsyncEvent* out);
  // Drops the unread events naming the `kind` object `handle` (non-null),
  // which is being destroyed. Returns how many.
  size_t Purge(AsyncObject kind, const void* handle);
  // Events of that object handed out by Pop since the last call; forgets them.
  uint32_t TakeReported(AsyncObject kind, const void* handle);

  size_t size() const { return events_.size(); }
  uint64_t dropped() const { return dropped_; }

 private:
  // Makes the fd hold a byte exactly while events are queued.
  void SyncSignal();

  int read_fd_ = -1;
  int write_fd_ = -1;
  std::deque<AsyncEvent> events_;
  struct ObjectKey {
    AsyncObject kind;
    const void* handle;
    bool operator==(const ObjectKey&) const = default;
  };
  struct ObjectKeyHash {
    size_t operator()(const ObjectKey& k) const {
      return std::hash<const void*>()(k.handle) ^ static_cast<size_t>(k.kind);
    }
  };
  std::unordered_map<ObjectKey, uint32_t, ObjectKeyHash> reported_;
  uint64_t dropped_ = 0;
};

}  // namespace softrnic::engine
