// A pipe that polls readable while notifications are pending: the writer
// puts one byte per notification, the reader takes one byte per event it
// consumes. Completion channels (ibv_get_cq_event) and async event queues
// (ibv_get_async_event) hand the read end to the application as their fd.
//
// Thread-safety: Signal from the engine (under its lock); the read end is
// read by the application's thread, outside the lock.
#pragma once

namespace softrnic::engine {

class EventPipe {
 public:
  EventPipe();  // O_CLOEXEC; ok() is false if the pipe could not be made
  ~EventPipe();
  EventPipe(const EventPipe&) = delete;
  EventPipe& operator=(const EventPipe&) = delete;

  bool ok() const { return read_fd_ >= 0; }
  int read_fd() const { return read_fd_; }
  // One byte for one notification. The write end is non-blocking: the
  // engine never waits on a reader; a full pipe (64 Ki unread notifications)
  // drops the byte.
  void Signal() const;
  // Closes both ends now (a destroyed channel nobody waits on: its struct
  // outlives its descriptors, Engine::RemoveChannelLocked).
  void Close();

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
};

}  // namespace softrnic::engine
