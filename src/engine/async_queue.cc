#include "engine/async_queue.h"

#include <fcntl.h>
#include <unistd.h>

namespace softrnic::engine {

AsyncQueue::AsyncQueue() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  // A full pipe (64 Ki unread events) must not block the engine.
  fcntl(write_fd_, F_SETFL, fcntl(write_fd_, F_GETFL) | O_NONBLOCK);
}

AsyncQueue::~AsyncQueue() {
  if (read_fd_ >= 0) close(read_fd_);
  if (write_fd_ >= 0) close(write_fd_);
}

void AsyncQueue::Push(const AsyncEvent& event) {
  events_.push_back(event);
  const char byte = 1;
  (void)!write(write_fd_, &byte, 1);
}

bool AsyncQueue::Pop(AsyncEvent* out) {
  if (events_.empty()) return false;
  *out = events_.front();
  events_.pop_front();
  return true;
}

}  // namespace softrnic::engine
