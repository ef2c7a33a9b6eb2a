// Fault injection as a transport around another one (SOFTRNIC_FAULTS,
// FaultConfig in transport.h): the factory (factory.cc) wraps a device's
// transport in it when faults are configured. Per packet the engine sends,
// one FaultInjector decision (fault_injector.h), applied here:
// - drop: not passed on (injected_drops);
// - corrupt: a copy with one bit flipped *after* its ICRC was framed for the
//   headers the inner transport will send (icrc_framing.h), passed on with
//   TxPacket::icrc_included, so the receiver's ICRC check rejects it the way
//   a real bit error would be caught (injected_corrupts);
// - duplicate: passed on twice (injected_dups);
// - reorder: a copy held back and passed on after the next packet, or at
//   the start of the next RecvBurst call at the latest, so the engine's
//   progress loop never leaves a packet held while idle (injected_reorders).
//   A reorder decision while a packet is held is not applied.
//
// Everything else (receive, sleep, properties) goes to the inner transport.
// Packets in pieces are refused (accepts_split_payload: faults act on whole
// packets), and peer memory is not offered: direct operations would bypass
// the faults.
//
// SendBurst's contract is the inner transport's: it returns how many packets
// from the front were consumed (sent, or dropped for good, injected drops
// included); when the inner one stops early (full socket buffer), the rest
// is offered again by the caller and gets new decisions.
//
// Thread-safety: like every Transport, called under the engine lock.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/fault_injector.h"
#include "transport/transport.h"

namespace softrnic::transport {

class FaultTransport final : public Transport {
 public:
  FaultTransport(std::unique_ptr<Transport> inner, const FaultConfig& faults)
      : inner_(std::move(inner)), injector_(faults) {}

  std::span<const Endpoint> locals() const override { return inner_->locals(); }
  int SendBurst(const TxPacket* packets, int n) override;
  int RecvBurst(RxPacket* packets, int n) override;
  int pollable_fd() const override { return inner_->pollable_fd(); }
  int reply_pollable_fd() const override { return inner_->reply_pollable_fd(); }
  const TransportCounters& counters() const override;
  bool PrepareToSleep() override { return inner_->PrepareToSleep(); }
  void WokeUp() override { inner_->WokeUp(); }
  bool WaitWhenBusy() const override { return inner_->WaitWhenBusy(); }
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

 private:
  enum class Kind : uint8_t { kPrimary, kDuplicate, kHeld };
  // Where each packet passed on came from: the caller's index (for kHeld,
  // the packet it was sent after), to tell the caller how many were consumed.
  struct Origin {
    Kind kind;
    int packet;
  };

  void Queue(const TxPacket& p, Kind kind, int packet);
  // Passes the queued packets on; false when the inner transport stopped
  // early (busy_return_ then says how many of the caller's were consumed).
  bool Flush();
  // A copy of p (whole, ICRC framed for the headers the inner transport
  // sends, then bit `d.corrupt_mask` of byte `d.corrupt_byte` flipped) in
  // buffer `buf`; p itself if its endpoints are not IPv4 (the inner
  // transport counts it as an error).
  TxPacket Corrupted(const TxPacket& p, const FaultDecision& d, std::vector<uint8_t>* buf);
  // Copies p into the hold-back buffer.
  void Hold(const TxPacket& p, int packet);

  std::unique_ptr<Transport> inner_;
  FaultInjector injector_;
  TransportCounters counters_;  // the injected_* ones
  mutable TransportCounters merged_;

  // Packets of the current SendBurst waiting to be passed on, and the
  // copies (corrupted ones) they point into; capacity is kept, so steady
  // state allocates nothing.
  std::vector<TxPacket> out_;
  std::vector<Origin> origin_;
  std::vector<std::vector<uint8_t>> copies_;
  size_t copies_used_ = 0;
  int busy_return_ = 0;

  // Reorder hold-back: at most one packet, copied (ICRC too if corrupted).
  std::vector<uint8_t> held_buf_;
  TxPacket held_packet_{};
  bool held_ = false;
  bool held_queued_ = false;   // it is in out_
  int held_from_packet_ = -1;  // index in the current SendBurst, else -1
};

}  // namespace softrnic::transport
