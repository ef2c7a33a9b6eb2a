// The one door tests and fuzzers have into Engine's private state
// (engine.h befriends this class). Each member is a step the engine takes
// itself, exposed so a test can take it at a moment of its choosing: a
// packet delivered as if received, timers fired as if time had passed, the
// transport swapped for a recording one. Production code never includes
// this header.
//
// Every member except ReplaceTransport needs the engine lock held.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/engine.h"

namespace softrnic::engine {

class EngineTestPeer {
 public:
  // A packet (BTH .. ICRC, the ICRC taken as verified) handed to the
  // receive dispatch, as the progress pass does for each received packet.
  static void Dispatch(Engine& e, const transport::RxPacket& rx) { e.DispatchPacket(rx); }
  // What a pass runs after a receive burst: the work list (coalesced ACKs,
  // requesters), if any QP is on it.
  static void RunWork(Engine& e) {
    if (!e.work_list_.empty()) e.RunWorkList();
  }
  // The transmit batch leaves now.
  static void FlushTx(Engine& e) { e.FlushTx(); }
  // One progress pass, as a polling application or the progress thread
  // runs it: receive, timers when due, the work list, the transmit flush.
  static bool PollOnce(Engine& e) { return e.PollOnceLocked(); }
  // ibv_poll_cq's work, the lock already held by the caller.
  static int PollCq(Engine& e, Cq* cq, int n, Completion* out) { return e.PollCqLocked(cq, n, out); }
  // The timers of every listed QP run as if the clock read `when`.
  static void FireTimers(Engine& e, Clock::time_point when) { e.CheckListedTimers(when); }

  static void PostAsyncEvent(Engine& e, AsyncEventType type, void* handle) {
    e.PostAsyncEvent(type, handle);
  }
  // Events the queue dropped because it was full.
  static uint64_t AsyncEventsDropped(Engine& e, int queue) {
    return e.async_queues_.at(queue)->dropped();
  }
  // The progress thread left the request sockets to a polling application
  // (progress/progress.cc, SleepWhileAppPolls) and is waiting for it to stop.
  static bool AppOwnsPackets(const Engine& e) { return e.progress_.app_owns_packets(); }
  static const MrTable& mr_table(const Engine& e) { return e.mr_table_; }
  static transport::Transport& transport(Engine& e) { return *e.transport_; }
  // How many times a thread blocked in AwaitChannelEvent (event_wait.cc).
  static uint64_t WaiterBlocks(const Engine& e) { return e.progress_.waiter_blocks(); }
  static const EngineStats& stats(const Engine& e) { return e.stats_; }
  static const transport::Transport& transport(const Engine& e) { return *e.transport_; }
  // Packets in flight per destination (dest_window.h), and a smaller budget
  // for every destination known now, so a test can make it bind.
  static const std::unordered_map<Gid, DestFlight, GidHash>& dest_flights(const Engine& e) {
    return e.dest_flight_;
  }
  static void SetDestBudget(Engine& e, uint64_t bytes) {
    for (auto& [gid, flight] : e.dest_flight_) flight.budget_bytes = bytes;
  }

  // The engine sends and receives through `next` from now on. The
  // shared-memory path (if the device had one) goes with the old transport,
  // and with it direct one-sided operations and the exports in its segment.
  // The progress thread must be stopped and the lock held.
  static void ReplaceTransport(Engine& e, std::unique_ptr<transport::Transport> next) {
    e.shm_direct_.reset();
    e.peer_memory_ = nullptr;
    e.transport_ = std::move(next);
    e.progress_.ReplaceTransport(*e.transport_);
  }
};

}  // namespace softrnic::engine
