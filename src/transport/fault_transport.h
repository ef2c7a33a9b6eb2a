// The fault lab's transport (docs/fault-lab.md, docs/fault-lab-design.md):
// around the UDP transport, it applies a faults::Scenario to every packet
// in both directions, one FaultPlan decision (faults/fault_plan.h) per
// packet. The factory (factory.cc) wraps a device's transport in it when
// the scenario has rules.
//
// What each decision does here:
// - drop, outage, rate-limit and pause tail drops: not passed on
//   (injected_drops);
// - corrupt: sent packets get a copy with one bit flipped *after* the ICRC
//   was framed for the headers the inner transport will send
//   (icrc_framing.h), passed on with TxPacket::icrc_included, so the
//   receiver's ICRC check rejects it the way a real bit error is caught;
//   a received packet was checked already, so it is dropped as that check
//   would have dropped it (injected_corrupts);
// - duplicate: passed on twice (a received duplicate comes out of the
//   next RecvBurst) (injected_dups);
// - delay, jitter, rate limit, pause: a copy is held in a time-ordered
//   queue and passed on when due (injected_delays, injected_pauses);
// - reorder: a copy is held until `depth` later packets of its direction
//   were passed on, or kReorderMaxHold at most, so a packet is never held
//   for ever on an idle link (injected_reorders);
// - ECN mark: a received packet's traffic class gets CE (0b11), RFC 3168
//   (injected_ecn_marks).
// Every fault applied is reported to the sink (SetFaultEventSink).
//
// Held packets leave at the start of SendBurst and RecvBurst once due
// (the engine calls RecvBurst in every pass, from the progress thread or an
// application thread that polls), and next_deadline() is the earliest due
// time, so the progress thread wakes for it.
//
// SendBurst's contract: every packet it decides on is consumed (its
// decision is final, so an `nth` pick or a rate bucket never sees a
// packet twice); what the inner transport did not take (a full socket
// buffer) is kept, copied, and sent first next time. While such packets
// wait, SendBurst takes nothing new and returns 0: the caller sees the
// inner transport's back-pressure, and at most one burst is kept.
//
// Scenario time 0 is the first packet sent or received through it (start_).
//
// Everything else (sleep, properties) goes to the inner transport. Packets
// in pieces are refused (accepts_split_payload: faults act on whole
// packets), and peer memory is not offered: direct operations would bypass
// the faults.
//
// Thread-safety: like every Transport, called under the engine lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "faults/fault_events.h"
#include "faults/fault_plan.h"
#include "faults/scenario.h"
#include "transport/transport.h"

namespace softrnic::transport {

class FaultTransport final : public Transport {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // The clock (tests give a fake one); default steady_clock::now.
  using ClockFn = std::function<TimePoint()>;
  // The longest a reordered packet waits for its `depth` later packets.
  static constexpr uint64_t kReorderMaxHoldNs = 100'000;

  FaultTransport(std::unique_ptr<Transport> inner, const faults::Scenario& scenario,
                 ClockFn clock = {});

  std::span<const Endpoint> locals() const override { return inner_->locals(); }
  int SendBurst(const TxPacket* packets, int n) override;
  int RecvBurst(RxPacket* packets, int n) override;
  int pollable_fd() const override { return inner_->pollable_fd(); }
  int reply_pollable_fd() const override { return inner_->reply_pollable_fd(); }
  const TransportCounters& counters() const override;
  bool PrepareToSleep() override { return inner_->PrepareToSleep(); }
  void WokeUp() override { inner_->WokeUp(); }
  std::atomic<uint32_t>* nap_word() override { return inner_->nap_word(); }
  bool WaitWhenBusy() const override { return inner_->WaitWhenBusy(); }
  void SetQuiet(bool quiet) override { inner_->SetQuiet(quiet); }
  void WakePeer(const Endpoint& dst, uint32_t dest_qpn) override { inner_->WakePeer(dst, dest_qpn); }
  int JoinMulticast(const Gid& group) override { return inner_->JoinMulticast(group); }
  void LeaveMulticast(const Gid& group) override { inner_->LeaveMulticast(group); }
  uint32_t max_multicast_groups() const override { return inner_->max_multicast_groups(); }
  uint32_t link_mtu() const override { return inner_->link_mtu(); }
  int qpn_lane() const override { return inner_->qpn_lane(); }
  int ClaimCmService(uint16_t port_space, uint16_t port, bool claim) override {
    return inner_->ClaimCmService(port_space, port, claim);
  }
  uint32_t inflight_budget_bytes() const override { return inner_->inflight_budget_bytes(); }
  bool batching_saves_syscalls() const override { return inner_->batching_saves_syscalls(); }
  bool delayed_acks_save_wakeups() const override { return inner_->delayed_acks_save_wakeups(); }
  bool sleeping_costs_senders() const override { return inner_->sleeping_costs_senders(); }
  std::optional<TimePoint> next_deadline() const override;
  void SetFaultEventSink(faults::FaultEventSink* sink) override { sink_ = sink; }

  // How many packets are held (both directions), for tests and stats.
  size_t held_packets() const { return held_tx_.size() + held_rx_.size(); }

 private:
  // A held packet: a copy of its bytes (ICRC included when framed) and
  // what the inner transport needs to send it, or what RecvBurst returns.
  struct Held {
    std::vector<uint8_t> bytes;
    TxPacket tx;                // out: data points into bytes when released
    RxPacket rx;                // in: likewise
    Gid group{};                // in: the multicast group, if rx.group was set
    uint32_t reorder_left = 0;  // > 0: a reordered packet waiting for later ones
  };
  using Key = std::pair<uint64_t, uint64_t>;  // (due ns, sequence): FIFO at equal times
  using Queue = std::map<Key, Held>;
  static constexpr Key kNoKey{UINT64_MAX, UINT64_MAX};

  uint64_t NowNs() const;
  void StartClockAtFirstPacket();
  std::vector<uint8_t> TakeBuffer(size_t size);
  void Report();
  // Passes on the held sent packets due at now_ns; false when the inner
  // transport stopped early (the rest stay held).
  bool ReleaseDueTx(uint64_t now_ns);
  // Erases a held packet (sent or delivered), keeping its buffer.
  void Forget(Queue* queue, std::vector<Key>* reorders, Queue::iterator it);
  // A copy of p into held_tx_, due at due_ns.
  void HoldTx(const TxPacket& p, uint64_t due_ns, uint32_t reorder_left);
  // A copy of p into held_rx_, due at due_ns.
  void HoldRx(const RxPacket& p, uint64_t due_ns, uint32_t reorder_left);
  // One packet passed on in `queue`'s direction: counts down the reordered
  // ones; those done are made due at now_ns (sent packets: also appended
  // to out_ right away).
  void CountDownReorders(Queue* queue, std::vector<Key>* reorders, uint64_t now_ns, bool tx);
  // The corrupted copy of p in `buf` (ICRC framed, then one bit flipped);
  // p itself if its endpoints are not IPv4 (the inner transport counts it
  // as an error).
  TxPacket Corrupted(const TxPacket& p, const faults::Decision& d, std::vector<uint8_t>* buf);

  std::unique_ptr<Transport> inner_;
  faults::FaultPlan plan_;
  ClockFn clock_;
  // Scenario time 0 (scenario.h): the first packet this device sends or
  // receives, not its opening, so that "link down from 2 s" means 2 s into
  // the traffic whether the program set up in 10 ms or in 2 s (an MPI job,
  // perftest's TCP exchange). Until then the scenario time is 0.
  TimePoint start_;
  bool started_ = false;
  faults::FaultEventSink* sink_ = nullptr;
  std::vector<faults::FaultEvent> events_;
  TransportCounters counters_;  // the injected_* ones
  mutable TransportCounters merged_;
  uint64_t seq_ = 0;

  Queue held_tx_, held_rx_;
  std::vector<Key> reorders_tx_, reorders_rx_;  // keys of reordered packets held
  // Received packets the last RecvBurst returned from the queue (valid
  // until the next call), and the due sent ones being passed on.
  std::vector<Held> delivered_rx_;
  std::vector<TxPacket> release_;
  std::vector<std::vector<uint8_t>> pool_;  // spare buffers, so steady state allocates little

  // The packets of the current SendBurst being passed on, and the copies
  // (corrupted ones) they point into; out_keys_[i] is the held_tx_ key of
  // out_[i] when it is a released reordered packet, else kNoKey.
  std::vector<TxPacket> out_;
  std::vector<Key> out_keys_;
  std::vector<std::vector<uint8_t>> copies_;
  size_t copies_used_ = 0;
};

}  // namespace softrnic::transport
