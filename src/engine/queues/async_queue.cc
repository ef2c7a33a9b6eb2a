#include "engine/queues/async_queue.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "log/log.h"

namespace softrnic::engine {

AsyncObject ObjectOf(AsyncEventType type) {
  switch (type) {
    case AsyncEventType::kCqErr: return AsyncObject::kCq;
    case AsyncEventType::kQpFatal:
    case AsyncEventType::kQpReqErr:
    case AsyncEventType::kQpAccessErr:
    case AsyncEventType::kCommEst:
    case AsyncEventType::kSqDrained:
    case AsyncEventType::kPathMig:
    case AsyncEventType::kPathMigErr:
    case AsyncEventType::kQpLastWqeReached: return AsyncObject::kQp;
    case AsyncEventType::kSrqErr:
    case AsyncEventType::kSrqLimitReached: return AsyncObject::kSrq;
    default: return AsyncObject::kNone;
  }
}

AsyncQueue::AsyncQueue() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  shutdown(read_fd_, SHUT_WR);  // the application's end is for reading only
}

AsyncQueue::~AsyncQueue() {
  if (read_fd_ >= 0) close(read_fd_);
  if (write_fd_ >= 0) close(write_fd_);
}

void AsyncQueue::SyncSignal() {
  // Readers only ever take the byte (outside the lock), so a peek that finds
  // it may be stale and the recv below may find nothing: both are harmless.
  // MSG_DONTWAIT: never block under the engine lock, whatever O_NONBLOCK the
  // application set on the fd.
  char byte = 1;
  const bool present = recv(read_fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
  if (events_.empty() && present) {
    (void)!recv(read_fd_, &byte, 1, MSG_DONTWAIT);
  } else if (!events_.empty() && !present) {
    (void)!send(write_fd_, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
}

void AsyncQueue::Push(const AsyncEvent& event) {
  if (events_.size() >= kMaxEvents) {
    if (dropped_++ == 0)
      SOFTRNIC_LOG(kWarn,
                   "%zu async events unread; dropping later ones (the application should call "
                   "ibv_get_async_event)",
                   kMaxEvents);
    return;
  }
  events_.push_back(event);
  SyncSignal();
}

bool AsyncQueue::Pop(AsyncEvent* out) {
  if (events_.empty()) return false;
  *out = events_.front();
  events_.pop_front();
  if (const AsyncObject kind = ObjectOf(out->type); kind != AsyncObject::kNone && out->handle != nullptr)
    ++reported_[ObjectKey{kind, out->handle}];
  SyncSignal();
  return true;
}

size_t AsyncQueue::Purge(AsyncObject kind, const void* handle) {
  const size_t purged = std::erase_if(
      events_, [&](const AsyncEvent& e) { return e.handle == handle && ObjectOf(e.type) == kind; });
  if (purged > 0) SyncSignal();
  return purged;
}

uint32_t AsyncQueue::TakeReported(AsyncObject kind, const void* handle) {
  auto it = reported_.find(ObjectKey{kind, handle});
  if (it == reported_.end()) return 0;
  const uint32_t n = it->second;
  reported_.erase(it);
  return n;
}

}  // namespace softrnic::engine
