// Progress: who runs the engine, and when.
//
// A passive target never calls into the library, so a progress thread must
// receive and answer for it. An application that polls its CQ runs the same
// pass inline (Device::PollCq) so it pays no thread hop. The thread spins
// for SOFTRNIC_SPIN_US (default 200 us) after the last work it saw, then
// sleeps in epoll on the sockets and an eventfd until the next timer.
// See docs/progress.md.
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <time.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "engine/engine.h"

namespace softrnic::engine {
namespace {

constexpr int kRxBurst = 32;
// How recently an application must have polled to count as polling.
constexpr auto kAppPollingWindow = std::chrono::microseconds(100);
constexpr auto kTimerCheckInterval = std::chrono::microseconds(50);

inline void CpuRelax() { __builtin_ia32_pause(); }

}  // namespace

bool Engine::PollOnceLocked() {
  transport::RxPacket rx[kRxBurst];
  bool did = false;
  // Bounded so one pass cannot starve the caller (a CQ poller) forever.
  for (int round = 0; round < 4; ++round) {
    const int n = transport_->RecvBurst(rx, kRxBurst);
    for (int i = 0; i < n; ++i) DispatchPacket(rx[i]);
    if (n > 0) did = true;
    if (n < kRxBurst) break;
  }
  const Clock::time_point now = Clock::now();
  if (now >= next_timer_check_) {
    next_timer_check_ = now + kTimerCheckInterval;
    for (auto& [qpn, qp] : qps_) CheckTimers(qp.get(), now);
  }
  if (!work_list_.empty()) {
    did = true;
    RunWorkList();
  }
  FlushTx();
  return did;
}

Clock::time_point Engine::NextDeadlineLocked() const {
  Clock::time_point next = Clock::time_point::max();
  for (const auto& [qpn, qp] : qps_) {
    if (qp->rnr_waiting) next = std::min(next, qp->rnr_deadline);
    else if (qp->retransmit_armed) next = std::min(next, qp->retransmit_deadline);
  }
  return next;
}

void Engine::WakeProgressThread() {
  if (sleeping_.load(std::memory_order_acquire)) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
}

void Engine::StartProgressThread() {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = transport_->pollable_fd();
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ev.data.fd, &ev);
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  progress_thread_ = std::thread([this] { ProgressThreadMain(); });
}

void Engine::StopProgressThread() {
  if (!progress_thread_.joinable()) return;
  stop_.store(true);
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  progress_thread_.join();
  close(epoll_fd_);
  close(wake_fd_);
}

void Engine::ProgressThreadMain() {
  // Sleeps must be short and precise (the default 50 us timer slack would
  // stretch every wait).
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const auto spin = std::chrono::microseconds(spin_us_);
  Clock::time_point last_work = Clock::now();
  while (!stop_.load(std::memory_order_relaxed)) {
    const Clock::time_point now = Clock::now();
    // An application thread polling its CQ runs the engine itself; stay out
    // of its way (and off its CPU) while it does.
    const int64_t app_ns = last_app_progress_ns_.load(std::memory_order_relaxed);
    const bool app_polling =
        now.time_since_epoch().count() - app_ns < std::chrono::nanoseconds(kAppPollingWindow).count();
    bool did = false;
    Clock::time_point deadline = Clock::time_point::max();
    bool sleep = false;
    if (mu_.try_lock()) {
      did = PollOnceLocked();
      if (did) last_work = now;
      if (!did && (app_polling || now - last_work >= spin)) {
        // Decided under the lock, so a PostSend after this sees sleeping_
        // and wakes us.
        sleep = true;
        deadline = NextDeadlineLocked();
        sleeping_.store(true, std::memory_order_release);
      }
      mu_.unlock();
    }
    if (!sleep) {
      CpuRelax();
      continue;
    }
    int timeout_ms = -1;
    if (deadline != Clock::time_point::max()) {
      const auto left = deadline - Clock::now();
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::microseconds>(left).count() / 1000 + 1));
    }
    if (app_polling) {
      // The poller handles packets; wake up only to check it still polls.
      timespec ts{0, static_cast<long>(std::chrono::nanoseconds(kAppPollingWindow).count())};
      nanosleep(&ts, nullptr);
    } else {
      epoll_event events[4];
      epoll_wait(epoll_fd_, events, 4, timeout_ms);
    }
    sleeping_.store(false, std::memory_order_release);
    uint64_t drained;
    (void)!read(wake_fd_, &drained, sizeof(drained));
    last_work = Clock::now();
  }
}

}  // namespace softrnic::engine
