// Progress: who runs the engine, and when (issue 40: "progress as one
// object"). docs/engine.md, "Progress", explains the policy; this class is
// where it lives.
//
// A passive target never calls into the library, so a thread must receive
// and answer for it. An application that polls its CQ runs the same pass
// inline (Device::PollCq) so it pays no thread hop, and the thread leaves
// the packets to it while it polls. Otherwise the thread runs passes until
// the transport is drained, then sleeps in edge-triggered epoll on the
// request sockets (and the reply sockets only when it must), an eventfd
// and the next timer.
//
// Progress owns the thread, its descriptors, the signals application
// threads leave for it and the decisions made from them (when to poll,
// when to sleep, whom to wake). The engine keeps the work: a pass, the
// timers, the queues (ProgressHost below). The rest of the engine talks to
// it through the "tell" methods: an application polled, posted, armed a
// channel, is about to block in ibv_get_cq_event; a timer was armed.
//
// Thread-safety: the tell methods are called by application threads, most
// under the engine lock, and read or write only atomics; AnnounceSleepLocked
// runs on the progress thread under the engine lock; everything else is the
// progress thread's own.
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "engine/types.h"

namespace softrnic::transport {
class Transport;
}  // namespace softrnic::transport

namespace softrnic::engine {

// What a pass of the progress thread came to (ProgressHost::ProgressThreadPass).
enum class PassResult {
  kLockBusy,      // an application thread holds the engine lock: no pass ran
  kWorked,        // the pass did work; more may be queued
  kIdle,          // nothing to do, and the thread may not sleep yet (spinning)
  kSleepRefused,  // the transport saw input arrive as the sleep was announced
  kSleep,         // the sleep is announced (AnnounceSleepLocked): wait now
};

// What the progress thread asks of the engine it runs.
class ProgressHost {
 public:
  // One pass, if the engine lock is free. When it did nothing and
  // `may_sleep`, it prepares the sleep under the same hold of the lock (the
  // transport's PrepareToSleep, then Progress::AnnounceSleepLocked), so
  // that a post after it sees the thread asleep and wakes it.
  virtual PassResult ProgressThreadPass(bool may_sleep) = 0;
  // Whether an application thread is inside the engine now (a hint).
  virtual bool EngineBusy() const = 0;

 protected:
  ~ProgressHost() = default;
};

struct ProgressSettings {
  std::chrono::microseconds spin{0};  // SOFTRNIC_SPIN_US: busy-poll after the last work
  // SOFTRNIC_ADAPTIVE_SPIN_US: busy-poll while requests arrive densely
  // (adaptive_spin.h); used when `spin` is 0.
  std::chrono::microseconds adaptive_spin{50};
  bool realtime = false;              // SOFTRNIC_PROGRESS_RT
  bool placement_away = false;        // SOFTRNIC_PLACEMENT=away
};

class Progress {
 public:
  Progress(ProgressHost& host, transport::Transport& transport, ProgressSettings settings);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();

  // The thread, its eventfd and epoll set. Start may follow a Stop.
  void Start();
  void Stop();
  // The engine sends and receives through `next` from now on (tests only:
  // EngineTestPeer::ReplaceTransport). The thread must be stopped.
  void ReplaceTransport(transport::Transport& next);

  // --- Told by application threads ---
  // An application thread polled or posted (no clock read: a clock_gettime
  // per poll is a measurable part of a sub-microsecond poll loop).
  void AppActive() {
    app_activity_.store(app_activity_.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
  }
  // ibv_poll_cq ran a pass at `pass_time` (the pass's own clock read, so
  // polling costs no extra one).
  void AppRanPass(Clock::time_point pass_time) {
    app_polled_at_.store(pass_time.time_since_epoch().count(), std::memory_order_relaxed);
  }
  // What that poll found: nothing means the application is in a poll loop
  // waiting for a completion and will be back at once.
  void AppPollFound(int completions) {
    app_waiting_.store(completions == 0, std::memory_order_relaxed);
  }
  // ibv_post_send left work for a later pass (`work_left`) or WQEs that
  // only a response lets go (`awaits_response`); `timer`, when not null, is
  // the retransmission deadline of its QP.
  // Inline: every ibv_post_send calls it.
  void AppPosted(bool work_left, bool awaits_response, const Clock::time_point* timer) {
    // Work left for later, or WQEs that only a response lets go while the
    // thread does not wait for responses: it must run (or start waiting),
    // unless it left the packets to an application thread that polls
    // (whose passes run the work list and take the responses). TimerArmed
    // makes the same exception.
    if (!app_owns_packets() && (work_left || (awaits_response && RepliesUnwatched())))
      Wake();
    else if (timer != nullptr)
      TimerArmed(*timer);
    // A posting application is active too: the thread backs off.
    AppActive();
  }
  // ibv_req_notify_cq on a CQ with a completion channel: its thread may
  // block soon.
  void ChannelArmed();
  // A timer was armed for `deadline`: the sleeping thread is woken only if
  // that is before it wakes by itself.
  void TimerArmed(Clock::time_point deadline);
  // ibv_get_cq_event (Engine::AwaitChannelEvent): the calling thread waits
  // for events and runs passes itself; it blocks in between.
  void WaiterStarts();
  void WaiterBlocks();
  void WaiterWoke();

  // --- Asked by the engine ---
  // The thread left the packets to a polling application: PostSend may
  // hold packets back for that application's next call (doorbell batching).
  bool app_owns_packets() const { return app_owns_packets_.load(std::memory_order_relaxed); }
  // How many times a thread blocked in ibv_get_cq_event (tests).
  uint64_t waiter_blocks() const { return waiter_blocks_.load(std::memory_order_relaxed); }

  // --- The progress thread, under the engine lock (ProgressThreadPass) ---
  // Whether the sleep it announces must watch the reply sockets too is
  // asked only when the transport has them.
  bool has_reply_fd() const { return reply_fd_ >= 0; }
  // `replies_needed`: an armed channel or WQEs waiting for a response
  // (Engine::RepliesNeededLocked); `channel_armed`: a CQ with a channel is
  // armed; `next_deadline`: the engine's next timer; `has_qps`: timers may
  // be armed by a post without a wake-up only while the thread wakes by
  // itself within kIdleTick.
  void AnnounceSleepLocked(bool replies_needed, bool channel_armed, Clock::time_point next_deadline,
                           bool has_qps);

 private:
  void Run();
  // An application thread takes the packets (it polls, or a waiter blocks
  // in ibv_get_cq_event): the thread sleeps while it does.
  bool AppTakesPackets(bool may_leave) const;
  void LeaveToApplication();
  // Sleeps while an application polls; returns whether it still does.
  bool SleepWhileAppPolls(std::chrono::nanoseconds period);
  bool AppAboutToBlock() const;
  // Off the CPU for up to `window` while an application polls the
  // shared-memory rings (Transport::nap_word); ended early by EndNap.
  void NapWhileAppPolls(std::chrono::nanoseconds window);
  // Ends a nap now (an application about to block, Stop).
  void EndNap();
  bool WaitersTakePackets() const;
  void WatchRequests(bool on);
  // A wake-up needed because the thread does not wait for responses.
  bool RepliesUnwatched() const {
    return reply_fd_ >= 0 && !watching_replies_.load(std::memory_order_relaxed);
  }
  void Wake();
  // One epoll wait (nullptr: no timeout); drains wake_fd_ if it fired.
  void WaitForEvents(const timespec* timeout);

  ProgressHost& host_;
  transport::Transport* transport_;
  std::atomic<uint32_t>* nap_word_;  // transport_->nap_word()
  const ProgressSettings settings_;

  std::thread thread_;
  int wake_fd_ = -1;   // eventfd to wake the sleeping thread
  int epoll_fd_ = -1;
  int reply_fd_ = -1;  // the transport's reply_pollable_fd
  cpu_set_t app_cpus_{};  // the starting thread's CPUs (SOFTRNIC_PLACEMENT=away)

  std::atomic<bool> stop_{false};
  // Set while the thread sleeps (in epoll or off the CPU while an
  // application polls); read by threads that may need it awake.
  std::atomic<bool> sleeping_{false};
  // When the sleeping thread wakes by itself (steady_clock ticks).
  std::atomic<Clock::rep> sleep_until_{0};
  // Bumped by application threads that poll or post. The thread treats a
  // change within its last window as "an application is polling".
  std::atomic<uint64_t> app_activity_{0};
  std::atomic<Clock::rep> app_polled_at_{0};  // AppRanPass
  std::atomic<bool> app_waiting_{false};      // AppPollFound
  // A CQ with a completion channel was armed: its thread will block, and
  // this thread must watch every socket. Set by ChannelArmed, recomputed at
  // every announced sleep.
  std::atomic<bool> channel_armed_{false};
  // app_activity_ when a CQ with a channel was last armed. An application
  // that arms and then blocks polls a few times in between (the poll that
  // closes the race with a completion); one that arms some CQs and keeps
  // polling others (UCP arms the CQs of the interfaces it does not use, so
  // that traffic on them wakes its worker) is not about to block.
  std::atomic<uint64_t> activity_at_arm_{0};
  // Application threads blocked in ibv_get_cq_event, which wait for the
  // transport's descriptors and run the engine's passes and timers
  // themselves: while there are any, the thread leaves the packets to them
  // as to a polling application.
  std::atomic<int> blocked_waiters_{0};
  // How many times a thread blocked there (a waiter that wakes for each
  // event is back within microseconds: still the one taking the packets).
  std::atomic<uint64_t> waiter_blocks_{0};
  // The thread left the request sockets to a polling application.
  std::atomic<bool> app_owns_packets_{false};
  // Whether the sleep watches the reply sockets (AnnounceSleepLocked).
  std::atomic<bool> watching_replies_{false};
  bool watching_requests_ = true;           // the thread's own
  Clock::time_point sleep_deadline_{};      // the announced sleep's end (the thread's own)
};

}  // namespace softrnic::engine
