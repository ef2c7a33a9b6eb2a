// The progress thread and its policy (progress.h). docs/engine.md,
// "Progress", tells the story behind each constant below.
#include "engine/progress/progress.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "common/background_thread.h"
#include "common/shared_futex.h"
#include "engine/progress/adaptive_spin.h"
#include "engine/timeout.h"
#include "transport/transport.h"

namespace softrnic::engine {
namespace {

// While an application thread polls its CQ (shared-memory rings), the
// thread naps off the CPU, and each nap that finds the application still
// polling is kNapGrowth times longer, up to kShmMaxPollingWindow. Each nap's
// end is a wake-up, and on 2 CPUs with two polling applications every
// wake-up preempts one of them for ~14 us: with checks every 500 us, ~2,000
// per second per process set the p99.9 of ib_write_lat (15 us against a
// 0.22 us median; session 26), and at 4 ms they were still half of its
// samples over 10 us (session 36: 540 per million, 280 with 50 ms naps; the
// shared-memory floor has 375). A long nap is safe because it ends early
// when it must: a same-host sender whose packets sit unread for
// kStallAlarm (transport/shm_stall_alarm.cc) and an application that arms
// a completion channel (ChannelArmed) end it through the nap word. What
// is left to the bound is the engine's own timers (retransmission, RNR
// retry) when the application stops polling without arming.
constexpr auto kAppPollingWindow = std::chrono::nanoseconds(20000);
constexpr auto kShmMaxPollingWindow = std::chrono::nanoseconds(16000000);
constexpr int kNapGrowth = 4;
// The longest the progress thread sleeps while QPs exist: timers due later
// than this never need a wake-up from the posting thread.
constexpr auto kIdleTick = std::chrono::milliseconds(5);
// An application thread that polled its CQ less than kAppPolledRecently
// ago, or less than kAppWaitingWindow ago and found nothing (it is in a
// poll loop waiting for a completion), counts as polling: the progress
// thread leaves the packets to it and looks again after kAppCheckFirst,
// then at doubling intervals up to kAppCheckMax while it keeps polling
// (2 ms: checks every 200 us, ~5,000 wake-ups per second, preempted the
// application ~6,000 times a second under ib_write_lat over UDP and set its
// p99.9 near 200 us; see kShmMaxPollingWindow).
constexpr auto kAppPolledRecently = std::chrono::nanoseconds(3000);
constexpr auto kAppWaitingWindow = std::chrono::nanoseconds(20000);
constexpr auto kAppCheckFirst = std::chrono::nanoseconds(20000);
constexpr auto kAppCheckMax = std::chrono::nanoseconds(2000000);
// How soon the progress thread looks again when an application thread held
// the engine lock as a packet arrived.
constexpr auto kLockBusyRecheck = std::chrono::nanoseconds(20000);

// Polls or posts after the last arm beyond which an armed channel no longer
// means "about to block": rc_pingpong -e and rsockets make 2-5 between
// arming and blocking; UCP's worker loop makes millions a second.
constexpr uint64_t kPollsAfterArm = 64;

// This thread has blocked in ibv_get_cq_event (Progress::WaiterStarts): it
// takes its packets itself, and will again after arming.
thread_local bool t_waits_for_events = false;

inline void CpuRelax() { __builtin_ia32_pause(); }

// Asks the scheduler for a short time slice (EEVDF, Linux >= 6.12: a fair
// task's sched_runtime is its slice request). A task with a short slice has
// an early virtual deadline, so when a packet wakes this thread it preempts
// an application thread spinning on the CPU at once instead of waiting for
// that thread's slice (~3 ms) to end. No privilege is needed; on older
// kernels the call is accepted and ignored, or fails harmlessly.
void RequestShortSlice() {
  struct SchedAttr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
  } attr{};
  attr.size = sizeof(attr);
  attr.sched_policy = 0;              // SCHED_OTHER
  attr.sched_runtime = 100 * 1000;    // 100 us, the smallest slice allowed
  syscall(SYS_sched_setattr, 0, &attr, 0);
}

// SOFTRNIC_PLACEMENT=away: when the application is pinned to one CPU, run
// the progress thread on the other CPUs. Linux (PREEMPT_LAZY, 6.x) preempts
// a running fair task for a woken one only at the next tick (4 ms here) or
// when the running task returns from a system call; a peer's packet wakes
// this thread inside the peer's sendmsg, on the peer's CPU, which then lets
// it run at once. That made a passive target's wake-up cheaper, but it puts
// the thread on the CPU of a pinned peer application: a receiving engine
// thread then shares that CPU with the sending application while its own
// application's CPU idles. Measured pinned (client cpu0, server cpu1), with
// away / without: ib_write_bw 64 KiB 1.46 / 2.68 GB/s, 64 B 0.96 / 1.85 M
// msg/s, ib_write_lat and ib_send_lat ~5 us both (the polling applications
// apply packets themselves now), ib_read_lat 9.9 / 13.5 us. Off by default.
void PlaceAwayFromApplication(const cpu_set_t& app_cpus) {
  if (CPU_COUNT(&app_cpus) != 1) return;
  cpu_set_t all;
  CPU_ZERO(&all);
  if (sched_getaffinity(0, sizeof(all), &all) != 0) return;
  // The thread inherited the application's mask; widen it to every online
  // CPU first (allowed: a thread may choose any CPU of its cpuset).
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t other;
  CPU_ZERO(&other);
  for (long c = 0; c < ncpu && c < CPU_SETSIZE; ++c)
    if (!CPU_ISSET(c, &app_cpus)) CPU_SET(c, &other);
  if (CPU_COUNT(&other) == 0) return;
  sched_setaffinity(0, sizeof(other), &other);
}

// Whether the calling thread may run on two CPUs or more: a spin on a
// thread confined to one CPU only takes it from the application.
bool MayCpuSpin() {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) return false;
  return CPU_COUNT(&mine) >= 2;
}

// SOFTRNIC_PROGRESS_RT=1: run the progress thread SCHED_FIFO (needs
// CAP_SYS_NICE or an RLIMIT_RTPRIO; silently stays SCHED_OTHER otherwise). A
// woken real-time thread preempts at once, whatever the application does.
bool MakeRealtime() {
  sched_param p{};
  p.sched_priority = 1;
  return pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) == 0;
}

}  // namespace

Progress::Progress(ProgressHost& host, transport::Transport& transport, ProgressSettings settings)
    : host_(host), transport_(&transport), nap_word_(transport.nap_word()), settings_(settings) {}

Progress::~Progress() { Stop(); }

void Progress::ReplaceTransport(transport::Transport& next) {
  transport_ = &next;
  nap_word_ = next.nap_word();
}

void Progress::Start() {
  stop_.store(false);  // a thread stopped earlier may be started again
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  // Edge-triggered: the thread drains the sockets before it sleeps (a pass
  // that receives nothing), so an edge is only missed for packets that an
  // application thread polling inline takes anyway.
  ev.events = EPOLLIN | EPOLLET;
  ev.data.fd = transport_->pollable_fd();
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ev.data.fd, &ev);
  watching_requests_ = true;
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  reply_fd_ = transport_->reply_pollable_fd();
  watching_replies_.store(false, std::memory_order_relaxed);
  CPU_ZERO(&app_cpus_);
  sched_getaffinity(0, sizeof(app_cpus_), &app_cpus_);
  thread_ = StartBackgroundThread("softrnic-engine", [this] { Run(); });
}

void Progress::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  EndNap();
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  close(epoll_fd_);
  close(wake_fd_);
  epoll_fd_ = wake_fd_ = -1;
}

// ---------------------------------------------------------------- told by applications

void Progress::ChannelArmed() {
  // A thread about to block for this CQ's event needs the progress thread
  // to take responses (RepliesNeededLocked), and to take the requests if
  // it left them to polling applications: woken now. Not for a thread
  // that blocks in ibv_get_cq_event (it did before): that wait takes the
  // packets itself (Engine::AwaitChannelEvent), and the wake-up would cost
  // a CPU per event (ibv_rc_pingpong -e over UDP on one core: 80-88 us a
  // round trip with it, 14-16 without).
  activity_at_arm_.store(app_activity_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // seq_cst: then the nap word (Dekker with NapWhileAppPolls).
  channel_armed_.store(true, std::memory_order_seq_cst);
  if (t_waits_for_events) return;
  if (app_owns_packets() || RepliesUnwatched()) Wake();
  EndNap();
}

void Progress::TimerArmed(Clock::time_point deadline) {
  // The sleeping thread wakes by itself at sleep_until_; only a timer due
  // before that needs the (cross-core, ~40 us here) eventfd wake-up. With
  // the usual Local ACK Timeouts (ms) a post never pays it.
  if (!sleeping_.load(std::memory_order_acquire)) return;
  // A polling application runs the timers in its own passes.
  if (app_owns_packets()) return;
  if (deadline.time_since_epoch().count() >= sleep_until_.load(std::memory_order_relaxed)) return;
  Wake();
}

void Progress::WaiterStarts() {
  t_waits_for_events = true;
  AppActive();
}

void Progress::WaiterBlocks() {
  blocked_waiters_.fetch_add(1, std::memory_order_relaxed);
  waiter_blocks_.fetch_add(1, std::memory_order_relaxed);
}

void Progress::WaiterWoke() {
  blocked_waiters_.fetch_sub(1, std::memory_order_relaxed);
  AppActive();
}

void Progress::Wake() {
  if (sleeping_.load(std::memory_order_acquire)) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
}

// ---------------------------------------------------------------- the thread

bool Progress::WaitersTakePackets() const {
  // Not over shared memory: a waiter sees ring packets through the doorbell
  // peers ring while the process sleeps, and a doorbell can be missed in
  // the instant another sleeper wakes (ShmTransport::WokeUp); the progress
  // thread's passes cover that gap, so it never leaves them to a waiter
  // there (ibv_rc_pingpong -e -s 4096 hung in 1 run of 2 when it did).
  return !transport_->sleeping_costs_senders();
}

bool Progress::AppAboutToBlock() const {
  if (!channel_armed_.load(std::memory_order_relaxed)) return false;
  const uint64_t since_arm = app_activity_.load(std::memory_order_relaxed) -
                             activity_at_arm_.load(std::memory_order_relaxed);
  return since_arm < kPollsAfterArm;
}

bool Progress::AppTakesPackets(bool may_leave) const {
  if (WaitersTakePackets() && blocked_waiters_.load(std::memory_order_relaxed) > 0) return true;
  if (!may_leave) return false;
  const Clock::time_point polled_at{Clock::duration{app_polled_at_.load(std::memory_order_relaxed)}};
  const auto since_poll = Clock::now() - polled_at;
  return since_poll < kAppPolledRecently ||
         (since_poll < kAppWaitingWindow && app_waiting_.load(std::memory_order_relaxed));
}

void Progress::LeaveToApplication() {
  // Over shared memory, naps (Run): one short nap, and Run's next round
  // naps longer while the application keeps polling. Staying in the loop
  // below would check every kAppCheckMax for as long as it polls, with
  // nothing to end the wait when its packets sit unread.
  if (transport_->sleeping_costs_senders()) {
    NapWhileAppPolls(kAppCheckFirst);
    return;
  }
  std::chrono::nanoseconds period = kAppCheckFirst;
  while (SleepWhileAppPolls(period) && !stop_.load(std::memory_order_relaxed))
    period = std::min<std::chrono::nanoseconds>(period * 2, kAppCheckMax);
}

void Progress::NapWhileAppPolls(std::chrono::nanoseconds window) {
  if (nap_word_ == nullptr) {
    const timespec ts{0, static_cast<long>(window.count())};
    nanosleep(&ts, nullptr);
    return;
  }
  // The word first, then the reasons not to nap: ChannelArmed and Stop
  // write theirs first, then look at the word, so one of the two sees the
  // other (both seq_cst).
  nap_word_->store(1, std::memory_order_seq_cst);
  if (!AppAboutToBlock() && !stop_.load(std::memory_order_seq_cst))
    SharedFutexWait(nap_word_, 1, window);
  nap_word_->store(0, std::memory_order_relaxed);
}

void Progress::EndNap() {
  if (nap_word_ != nullptr && nap_word_->load(std::memory_order_seq_cst) == 1 &&
      nap_word_->exchange(0, std::memory_order_seq_cst) == 1)
    SharedFutexWake(nap_word_);
}

void Progress::WaitForEvents(const timespec* timeout) {
  epoll_event events[4];
  const int n = epoll_pwait2(epoll_fd_, events, 4, timeout, nullptr);
  for (int i = 0; i < n; ++i) {
    if (events[i].data.fd != wake_fd_) continue;
    uint64_t drained;
    (void)!read(wake_fd_, &drained, sizeof(drained));
  }
}

void Progress::WatchRequests(bool on) {
  if (on == watching_requests_) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.fd = transport_->pollable_fd();
  // Adding reports a socket that already holds datagrams at once, so
  // nothing that arrived meanwhile waits for the next edge.
  epoll_ctl(epoll_fd_, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, ev.data.fd, &ev);
  watching_requests_ = on;
}

bool Progress::SleepWhileAppPolls(std::chrono::nanoseconds period) {
  WatchRequests(false);
  const Clock::time_point start = Clock::now();
  const uint64_t activity = app_activity_.load(std::memory_order_relaxed);
  const uint64_t waits = waiter_blocks_.load(std::memory_order_relaxed);
  sleep_until_.store((start + period).time_since_epoch().count(), std::memory_order_relaxed);
  app_owns_packets_.store(true, std::memory_order_relaxed);
  sleeping_.store(true, std::memory_order_release);
  const timespec timeout{0, static_cast<long>(period.count())};
  // Woken early only by wake_fd_ (ChannelArmed, a post that left work) or,
  // when responses are awaited, the reply socket.
  WaitForEvents(&timeout);
  sleeping_.store(false, std::memory_order_release);
  app_owns_packets_.store(false, std::memory_order_relaxed);
  // A thread blocked in ibv_get_cq_event takes the packets and timers
  // itself, and one that blocked there again meanwhile will again.
  if (WaitersTakePackets() && (blocked_waiters_.load(std::memory_order_relaxed) > 0 ||
                               waiter_blocks_.load(std::memory_order_relaxed) != waits))
    return true;
  if (AppAboutToBlock()) return false;
  // Still calling: PollCq or PostSend (an application that posts must poll
  // for its completions before long), or inside one call still (a post of
  // a large message, a pass that answers a burst of ACKs with new packets:
  // tens of microseconds).
  return app_activity_.load(std::memory_order_relaxed) != activity || host_.EngineBusy();
}

void Progress::AnnounceSleepLocked(bool replies_needed, bool channel_armed,
                                   Clock::time_point next_deadline, bool has_qps) {
  // Responses: waited for only when nobody else will take them.
  const bool replies = reply_fd_ >= 0 && replies_needed;
  channel_armed_.store(channel_armed, std::memory_order_relaxed);
  if (replies != watching_replies_.load(std::memory_order_relaxed)) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.fd = reply_fd_;
    epoll_ctl(epoll_fd_, replies ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, reply_fd_, &ev);
    watching_replies_.store(replies, std::memory_order_relaxed);
  }
  // Timers are checked at least every kIdleTick, so a post whose timer is
  // later than that needs no wake-up (TimerArmed).
  sleep_deadline_ = std::min(next_deadline, has_qps ? Clock::now() + kIdleTick : Clock::time_point::max());
  sleep_until_.store(sleep_deadline_.time_since_epoch().count(), std::memory_order_relaxed);
  sleeping_.store(true, std::memory_order_release);
}

void Progress::Run() {
  // Sleeps must be short and precise (the default 50 us timer slack would
  // stretch every wait).
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  RequestShortSlice();
  if (settings_.placement_away) PlaceAwayFromApplication(app_cpus_);
  // Under SCHED_FIFO this thread must never spin on the lock: it would
  // starve the application thread holding it (the loop below never does).
  const bool realtime = settings_.realtime && MakeRealtime();
  AdaptiveSpin adaptive(settings_.adaptive_spin, !realtime && MayCpuSpin());
  Clock::time_point last_work = Clock::now();
  uint64_t seen_activity = app_activity_.load(std::memory_order_relaxed);
  std::chrono::nanoseconds polling_window = kAppPollingWindow;
  while (!stop_.load(std::memory_order_relaxed)) {
    // Shared-memory peers ring a doorbell (a datagram) for every packet
    // while this thread sleeps. An application polling its CQ drains the
    // rings itself, so while it does, this thread stays awake-but-off-CPU
    // (not "sleeping" to the peers: it naps), backing off while the
    // application keeps polling. When the application stops polling, a
    // sender whose packets wait unread ends the nap (kStallAlarm), as does
    // an application that arms a channel; the engine's own timers wait up
    // to the nap (kShmMaxPollingWindow). An application that armed a
    // channel is about to block: not napped on.
    const uint64_t activity = app_activity_.load(std::memory_order_relaxed);
    if (activity != seen_activity && transport_->sleeping_costs_senders() && !AppAboutToBlock()) {
      seen_activity = activity;
      polling_window =
          std::min<std::chrono::nanoseconds>(polling_window * kNapGrowth, kShmMaxPollingWindow);
      NapWhileAppPolls(polling_window);
      continue;
    }
    seen_activity = activity;
    polling_window = kAppPollingWindow;
    // An application thread polling its CQ takes the packets itself
    // (Device::PollCq). Taking them here would contend with it for the lock
    // and, on two CPUs, for the CPU: every packet's wake-up would preempt
    // one of the two spinning applications (ib_write_lat over UDP: 22 us
    // one-way with those wake-ups, 7.5 us without). So while it polls, this
    // thread stops watching the request sockets and only checks, at
    // doubling intervals, that it still does. An application about to
    // block arms its CQ first (ChannelArmed, AppAboutToBlock); one that
    // leaves the library without arming (ib_write_lat's target spins on
    // memory) leaves its packets for at most kAppCheckMax.
    const bool may_leave = !AppAboutToBlock();
    if (AppTakesPackets(may_leave)) {
      LeaveToApplication();
      continue;
    }
    WatchRequests(true);
    const Clock::time_point now = Clock::now();
    // SOFTRNIC_SPIN_US spins after every work; otherwise the spin adapts.
    const bool may_sleep = settings_.spin.count() > 0 ? now - last_work >= settings_.spin
                                                      : adaptive.MaySleep(now);
    switch (host_.ProgressThreadPass(may_sleep)) {
      case PassResult::kLockBusy:
        // An application thread is inside the engine (a streaming client
        // posting a burst, or polling): leave the packets to it while it
        // keeps calling. Its PollCq often finds completions without running
        // a pass, so app_polled_at_ may look old.
        if (may_leave) {
          LeaveToApplication();
          continue;
        }
        // A CQ is armed for a channel, so the application will block soon:
        // look again after kLockBusyRecheck in case the packet that woke us
        // is still unread (edge-triggered epoll will not report it twice).
        // A timed sleep, not an epoll wait: under a flood every arriving
        // packet would end that wait at once and this thread would spin
        // against the application holding the lock. Not a short sleep loop
        // either: a 5 us loop took the CPU (with pinned applications, the
        // peer's) every 13 us.
        {
          const timespec recheck{0, static_cast<long>(kLockBusyRecheck.count())};
          nanosleep(&recheck, nullptr);
        }
        continue;
      case PassResult::kWorked:
        // More may be queued (a pass is bounded; edge-triggered epoll would
        // not report it again): go round before sleeping.
        last_work = now;
        adaptive.Worked(now);
        continue;
      case PassResult::kIdle:
        adaptive.Idle(now);
        CpuRelax();  // spinning
        continue;
      case PassResult::kSleepRefused:
        continue;
      case PassResult::kSleep:
        break;
    }
    timespec timeout;
    // Woken by a packet, a wake_fd_ write or the next timer.
    WaitForEvents(TimeoutUntil(sleep_deadline_, &timeout));
    sleeping_.store(false, std::memory_order_release);
    transport_->WokeUp();
    adaptive.WokeUp();
  }
}

}  // namespace softrnic::engine
