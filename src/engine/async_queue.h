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
// The fd is an EventPipe's: one byte per queued event, so it polls readable
// exactly while events are queued.
//
// Thread-safety: Push and Pop under the engine lock; read_fd() any time.
#pragma once

#include <deque>

#include "engine/event_pipe.h"
#include "engine/types.h"

namespace softrnic::engine {

struct AsyncEvent {
  AsyncEventType type = AsyncEventType::kPortActive;
  void* handle = nullptr;  // handle of the QP / CQ / SRQ named by `type`, or null
  uint8_t port = 1;
};

class AsyncQueue {
 public:
  bool ok() const { return pipe_.ok(); }
  int read_fd() const { return pipe_.read_fd(); }
  void Push(const AsyncEvent& event);
  // The caller has consumed one byte of read_fd(). False if nothing is
  // queued (a byte without an event: never expected).
  bool Pop(AsyncEvent* out);

 private:
  EventPipe pipe_;
  std::deque<AsyncEvent> events_;
};

}  // namespace softrnic::engine
