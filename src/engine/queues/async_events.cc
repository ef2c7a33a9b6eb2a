// Asynchronous events (ibv_get_async_event): one queue per verbs context,
// queue 0 the device's own (async_queue.h). The engine posts an event to
// the queue its router names; a destroyed object's unread events go.
#include <cerrno>

#include "engine/engine.h"

namespace softrnic::engine {

void Engine::PostAsyncEvent(AsyncEventType type, void* handle) {
  const AsyncEvent event{type, handle, 1};
  auto it = async_queues_.end();
  if (async_router_) it = async_queues_.find(async_router_(event));
  if (it == async_queues_.end()) it = async_queues_.find(Device::kDeviceAsyncQueue);
  it->second->Push(event);
}

void Engine::ReportCqOverflow(Cq* cq) {
  ++stats_.cq_overflows;
  if (cq->overflow_reported) return;
  cq->overflow_reported = true;
  PostAsyncEvent(AsyncEventType::kCqErr, cq->handle);
}

// An object is being destroyed: its unread async events go (the kernel's
// uverbs does the same), so no reader is handed its freed handle (M6); and
// the caller learns how many were handed out, to wait for their acks.
void Engine::ForgetAsyncEventsLocked(AsyncObject kind, const void* handle, uint32_t* reported) {
  uint32_t total = 0;
  if (handle != nullptr) {
    for (auto& [id, queue] : async_queues_) {
      queue->Purge(kind, handle);
      total += queue->TakeReported(kind, handle);
    }
  }
  if (reported != nullptr) *reported = total;
}

int Engine::AsyncQueueFdLocked(int queue) const {
  auto it = async_queues_.find(queue);
  return it == async_queues_.end() ? -1 : it->second->read_fd();
}

int Engine::PopAsyncEventLocked(int queue, AsyncEvent* out) {
  auto it = async_queues_.find(queue);
  if (it == async_queues_.end()) return EIO;
  return it->second->Pop(out) ? 0 : EAGAIN;
}

int Engine::AddAsyncQueueLocked(std::unique_ptr<AsyncQueue> queue) {
  const int id = next_async_queue_++;
  async_queues_.emplace(id, std::move(queue));
  return id;
}

std::unique_ptr<AsyncQueue> Engine::TakeAsyncQueueLocked(int queue) {
  auto it = async_queues_.find(queue);
  if (it == async_queues_.end()) return nullptr;
  std::unique_ptr<AsyncQueue> taken = std::move(it->second);
  async_queues_.erase(it);
  return taken;
}

}  // namespace softrnic::engine
