// What the files implementing Device share (device.cc, device_queues.cc):
// helpers over the engine's object lists. Not for callers of Device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <vector>

#include "common/thread_annotations.h"
#include "engine/queues/async_queue.h"
#include "engine/engine.h"
#include "engine/queues/queues.h"

namespace softrnic::engine {

// Destroys the object p owned by v; false if v does not hold it.
template <typename T>
bool EraseOwned(std::vector<std::unique_ptr<T>>& v, T* p) {
  auto it = std::find_if(v.begin(), v.end(), [p](const auto& u) { return u.get() == p; });
  if (it == v.end()) return false;
  v.erase(it);
  return true;
}

// Takes the object p out of v, for the caller to destroy (after the engine
// lock, when its destructor gives queue memory back: queues.h); null if v
// does not hold it.
template <typename T>
std::unique_ptr<T> TakeOwned(std::vector<std::unique_ptr<T>>& v, T* p) {
  auto it = std::find_if(v.begin(), v.end(), [p](const auto& u) { return u.get() == p; });
  if (it == v.end()) return nullptr;
  std::unique_ptr<T> taken = std::move(*it);
  v.erase(it);
  return taken;
}

// The memory a queue is made in: the caller's, or the engine's own.
inline std::pmr::memory_resource* QueueMemoryOrDefault(std::pmr::memory_resource* memory) {
  return memory != nullptr ? memory : DefaultQueueMemory();
}

// Blocking read of one byte honouring the descriptor's O_NONBLOCK flag.
// 0, or the errno (EAGAIN, EINTR, ...; EIO at end of file).
int ReadEventByte(int fd);


}  // namespace softrnic::engine
