// What the files implementing Device share (device.cc, device_queues.cc):
// helpers over the engine's object lists. Not for callers of Device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/async_queue.h"

namespace softrnic::engine {

class Engine;

// Destroys the object p owned by v; false if v does not hold it.
template <typename T>
bool EraseOwned(std::vector<std::unique_ptr<T>>& v, T* p) {
  auto it = std::find_if(v.begin(), v.end(), [p](const auto& u) { return u.get() == p; });
  if (it == v.end()) return false;
  v.erase(it);
  return true;
}

// Blocking read of one byte honouring the descriptor's O_NONBLOCK flag.
// 0, or the errno (EAGAIN, EINTR, ...; EIO at end of file).
int ReadEventByte(int fd);

// An object is being destroyed: its unread async events go (the kernel's
// uverbs does the same), so no reader is handed its freed handle (M6); and
// the caller learns how many were handed out, to wait for their acks.
// REQUIRES: engine.mu_.
void ForgetAsyncEvents(Engine& engine, AsyncObject kind, const void* handle, uint32_t* reported);

}  // namespace softrnic::engine
