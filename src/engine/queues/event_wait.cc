// Waiting for a completion event (ibv_get_cq_event on a blocking channel).
//
// A blocking ibv_get_cq_event waits for the packets that make completions
// as well as for the event, and applies them itself (issue 17, event-driven
// completions). Waiting on the channel alone cost two wake-ups in a row per
// event, each ~40 us across cores here: the packet woke the progress
// thread, whose completion woke this thread through the channel. Now the
// packet wakes both at once, and whichever takes the engine lock first
// makes the completion; this thread, already awake, takes the event.
// The transport's descriptors are level-triggered (readable while a
// socket holds datagrams), so a packet the progress thread has not taken
// yet is never missed, and one it took leaves them quiet. Shared-memory
// rings are seen through their doorbell, which peers ring while the
// progress thread sleeps; when it is awake, it makes the event as before.
// An event this thread's own pass makes is taken without the channel's
// pipe (queues.h, CompletionChannel): on one core, where both ends of a
// ping-pong block, its write, poll and read were three of the ten system
// calls of a one-way trip.
// A channel fd the application made non-blocking is only read (EAGAIN
// when empty): its owner polls it, and a packet is not an event.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "common/restart_after_signal.h"
#include "engine/device/device_internal.h"
#include "engine/engine.h"
#include "engine/timeout.h"

namespace softrnic::engine {

bool Engine::PollOnceForWaiterLocked(CompletionChannel* channel) {
  CompletionChannel::waiter_in_pass = channel;
  const bool progressed = PollOnceLocked();
  CompletionChannel::waiter_in_pass = nullptr;
  return progressed;
}

int Engine::AwaitChannelEvent(CompletionChannel* channel) {
  const int event_fd = channel->pipe.read_fd();
  const int flags = fcntl(event_fd, F_GETFL);
  if (flags < 0 || (flags & O_NONBLOCK)) return ReadEventByte(event_fd);
  pollfd fds[3] = {{event_fd, POLLIN, 0}, {transport_->pollable_fd(), POLLIN, 0}, {-1, 0, 0}};
  nfds_t n = 2;
  if (const int reply = transport_->reply_pollable_fd(); reply >= 0) fds[n++] = {reply, POLLIN, 0};
  // The progress thread leaves the packets and timers to this thread while
  // it blocks (Progress::WaiterBlocks), and does not wake for its arms.
  progress_.WaiterStarts();
  for (;;) {
    Clock::time_point deadline;
    bool refused_sleep = false;
    bool look_again = false;  // the fd without blocking, then another pass
    {
      // Packets: a pass, as a polling application runs (PollCq); the lock
      // is held for microseconds by whoever has it. An event it makes for
      // this channel is this thread's at once (queues.h). Then, still under
      // the lock, the sleep is announced to shared-memory peers (their
      // doorbell), and refused if input arrived meanwhile (transport.h).
      SpinLock lock(mu_);
      if (channel->destroyed) break;
      const bool progressed = PollOnceForWaiterLocked(channel);
      if (channel->TakeUnsignaled()) {
        ++stats_.cq_events_inline;
        return 0;
      }
      if (progressed) {
        look_again = true;
      } else if (!transport_->PrepareToSleep()) {
        refused_sleep = look_again = true;
      } else {
        // The timers (retransmission, deferred ACKs) are this thread's too
        // while it blocks: the progress thread leaves the work to it.
        deadline = NextDeadlineLocked();
      }
    }
    // Every PrepareToSleep has its WokeUp (transport.h), and only those: one
    // more would count off a sleeper that never announced itself.
    if (refused_sleep) transport_->WokeUp();
    if (look_again) {
      if (poll(fds, 1, 0) > 0) return ReadEventByte(event_fd);
      continue;
    }
    timespec timeout;
    progress_.WaiterBlocks();
    const int r = ppoll(fds, n, TimeoutUntil(deadline, &timeout), nullptr);
    const int poll_errno = errno;
    progress_.WaiterWoke();
    transport_->WokeUp();
    if (r < 0) {
      if (poll_errno == EINTR && RestartAfterSignal()) continue;
      return poll_errno;
    }
    // The event first: another reader of the channel may have taken it
    // meanwhile, and then this blocking read waits for the next one, as a
    // plain read of the channel would.
    if (fds[0].revents != 0) return ReadEventByte(event_fd);
  }
  // The application destroyed the channel while this thread waited on it.
  // A read of a real channel's fd blocks on (closing an fd does not end a
  // read of it in another thread): so does this thread, without touching
  // the engine again (the process may be tearing it down). pause() is a
  // cancellation point, as the read is.
  for (;;) pause();
}

}  // namespace softrnic::engine
