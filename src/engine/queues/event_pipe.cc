#include "engine/queues/event_pipe.h"

#include <fcntl.h>
#include <unistd.h>

namespace softrnic::engine {

EventPipe::EventPipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  fcntl(write_fd_, F_SETFL, fcntl(write_fd_, F_GETFL) | O_NONBLOCK);
}

EventPipe::~EventPipe() { Close(); }

void EventPipe::Close() {
  if (read_fd_ >= 0) close(read_fd_);
  if (write_fd_ >= 0) close(write_fd_);
  read_fd_ = write_fd_ = -1;
}

void EventPipe::Signal() const {
  const char byte = 1;
  (void)!write(write_fd_, &byte, 1);
}

}  // namespace softrnic::engine
