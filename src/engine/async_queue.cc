#include "engine/async_queue.h"

namespace softrnic::engine {

void AsyncQueue::Push(const AsyncEvent& event) {
  events_.push_back(event);
  pipe_.Signal();
}

bool AsyncQueue::Pop(AsyncEvent* out) {
  if (events_.empty()) return false;
  *out = events_.front();
  events_.pop_front();
  return true;
}

}  // namespace softrnic::engine
