// The shared-memory transport: a Transport that wraps the UDP transport and
// moves packets to same-host peers through rings in their control segments.
//
// - SendBurst: a packet whose destination endpoint is published by a peer
//   (shm_registry.h) that this process can map goes into the ring this
//   device claimed in the peer's segment (no ICRC: nothing corrupts memory
//   on the way); everything else goes to UDP, in order.
// - RecvBurst: drains this device's inbound rings (one load of each active
//   ring's tail, no system call), then UDP. While shm traffic flows and UDP
//   has been quiet, UDP is polled only every kUdpPollEvery calls, so a
//   polling application does not pay a recvmmsg per poll.
// - Wake-up: the engine's progress thread sleeps in epoll on the UDP
//   sockets. PrepareToSleep sets the segment's `sleeping` flag and re-checks
//   the rings; a sender that finds the flag set clears it and sends a small
//   doorbell datagram (kShmDoorbell) to the target's UDP endpoint.
// - Liveness: a pidfd per peer, checked every few milliseconds; a dead
//   peer's mapping is dropped (its QPs then time out: error completions
//   within the retry budget). A dead sender's ring in our segment is
//   reclaimed by the next sender that needs one.
//
// Thread-safety: like every Transport, called under the engine lock.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/peer_memory.h"
#include "transport/shm_path.h"
#include "transport/shm_ring.h"
#include "transport/shm_segment.h"
#include "transport/transport.h"

namespace softrnic::transport {

// A same-host peer device whose segment this device has mapped (what the
// engine sees of it, peer_memory.h), with this transport's state for it.
struct ShmRingPeer : ShmPeer {
  // The peer's endpoints (copied once from its header, bounded).
  std::vector<std::pair<uint32_t, uint16_t>> locals;
  int ring = -1;  // the ring this device claimed in the peer's segment
  ShmRingProducer producer;
  bool dirty = false;  // slots written, not yet published
  bool wake = false;   // some of them not quiet: ring the doorbell if it sleeps
  int pidfd = -1;
  bool death_polled = false;  // no pidfd in peer_deaths_fd_: CheckPeers asks the pid
  // Whether the peer reads its rings (DeliveryPending): its packets_read
  // when last looked at, and when that count was last seen to move.
  uint64_t reads_seen = 0;
  std::chrono::steady_clock::time_point reads_moved_at{};
  // Stall alarm (shm_stall_alarm.cc): packets we published that the peer
  // has not read yet are watched; stall_head is the peer's read position
  // when last looked at, stall_since when it was last seen to move.
  bool stall_watch = false;
  uint64_t stall_head = 0;
  std::chrono::steady_clock::time_point stall_since{};
  ~ShmRingPeer();
};

class ShmTransport final : public Transport, public PeerMemory {
 public:
  // Wraps `udp`. Returns nullptr (and *error) if the control segment cannot
  // be created.
  // `report_fallbacks` (SOFTRNIC_TRANSPORT=shm): say on stderr, once, when a
  // peer cannot be reached through shared memory.
  static std::unique_ptr<ShmTransport> Create(std::unique_ptr<Transport> udp,
                                              bool report_fallbacks, std::string* error);
  ~ShmTransport() override;

  std::span<const Endpoint> locals() const override { return udp_->locals(); }
  int SendBurst(const TxPacket* packets, int n) override;
  // Packets in pieces go to UDP as they are and are joined into one piece
  // for a ring slot (the copy the engine would have made).
  bool accepts_split_payload() const override { return udp_->accepts_split_payload(); }
  int RecvBurst(RxPacket* packets, int n) override;
  int pollable_fd() const override { return udp_->pollable_fd(); }
  int reply_pollable_fd() const override { return udp_->reply_pollable_fd(); }
  const TransportCounters& counters() const override;
  // Several threads may sleep at once (the progress thread, and
  // application threads blocked for a completion event): the segment's
  // `sleeping` flag stays up until the last of them wakes (sleepers_).
  bool PrepareToSleep() override;
  void WokeUp() override;
  // WokeUp's two steps, public so that a test can put another thread's
  // PrepareToSleep between them (the race FinishWake handles): counts this
  // sleeper off (true: it was the last), then takes the flag down or not.
  bool CountOffSleeper();
  void FinishWake(bool was_last);
  // Threads between a PrepareToSleep and their WokeUp now (0 when nobody
  // sleeps: each PrepareToSleep has exactly one WokeUp).
  int sleepers() const { return sleepers_.load(std::memory_order_relaxed); }
  // A full ring is drained by another process's (or device's) engine that
  // runs now or was just woken by the doorbell: worth waiting for, like a
  // lossless link (RoCE expects PFC), rather than dropping UC messages.
  bool WaitWhenBusy() const override { return ring_full_; }
  void SetQuiet(bool quiet) override { quiet_ = quiet; }
  void WakePeer(const Endpoint& dst, uint32_t dest_qpn) override;
  // A packet for `dest_qpn` still unread in our ring in the peer's segment
  // while the peer reads its rings, or a packet for `local_qpn` unread in
  // the peer's ring in ours (or in the backlog).
  bool DeliveryPending(const Endpoint& dst, uint32_t dest_qpn, uint32_t local_qpn,
                       std::chrono::nanoseconds period) override;
  // Multicast goes through the UDP transport (the kernel's IP multicast,
  // looped back to same-host members): no peer's ring is a group.
  int JoinMulticast(const Gid& group) override { return udp_->JoinMulticast(group); }
  void LeaveMulticast(const Gid& group) override { udp_->LeaveMulticast(group); }
  uint32_t max_multicast_groups() const override { return udp_->max_multicast_groups(); }
  uint32_t link_mtu() const override { return udp_->link_mtu(); }
  int qpn_lane() const override { return udp_->qpn_lane(); }
  int ClaimCmService(uint16_t port_space, uint16_t port, bool claim) override {
    return udp_->ClaimCmService(port_space, port, claim);
  }
  uint32_t inflight_budget_bytes() const override { return udp_->inflight_budget_bytes(); }

  // While shared-memory traffic is possible, a ring push costs no system
  // call, an ACK has no wake-up to save (deferral measured ~0.5 us slower
  // per ib_send_lat iteration) and a sleeping engine costs its senders a
  // doorbell per packet.
  bool batching_saves_syscalls() const override {
    return !Active() && udp_->batching_saves_syscalls();
  }
  bool delayed_acks_save_wakeups() const override {
    return !Active() && udp_->delayed_acks_save_wakeups();
  }
  bool sleeping_costs_senders() const override { return Active(); }

  // Stall alarm: a peer that naps (its application polled, so its progress
  // thread left the rings to it) while packets we published have waited
  // unread for kStallAlarm is woken; its application stopped polling. A
  // polling reader takes a packet within microseconds; 200 us is what a
  // reader preempted once on a busy CPU may take without being woken.
  static constexpr auto kStallAlarm = std::chrono::microseconds(200);
  static constexpr uint64_t kStallCheckEvery = 64;
  // The segment's `napping` word: a napping progress thread of ours is
  // woken through it by a sender whose packets wait unread.
  std::atomic<uint32_t>* nap_word() override { return &own_.header()->napping; }
  // While packets of ours wait unread in a napping peer's ring: when the
  // next stall check is due, so that a sleeping engine wakes for it.
  std::optional<std::chrono::steady_clock::time_point> next_deadline() const override;

  PeerMemory* peer_memory() override { return this; }
  // PeerMemory: the peer reachable through shared memory at `dst`, or null
  // (UDP); this device's own control segment (exports live there).
  std::shared_ptr<ShmPeer> PeerFor(const Endpoint& dst, uint32_t dest_qpn) override;
  // What PeerFor would decide for `dst` and why, taking no ring and
  // remembering nothing (the peer is mapped and unmapped again).
  ShmPathVerdict ExplainPath(const Endpoint& dst) override;
  const ShmSegment& own_segment() const override { return own_; }
  void NotifyDirectRecv(ShmPeer& peer) override;
  bool TakeDirectRecvs() override;

  // True while shared-memory traffic is possible (a sender uses one of our
  // rings, or we use a peer's). Lock-free: read by the progress thread.
  bool Active() const {
    return AnyRingActive(own_.header()) ||
           has_peers_.load(std::memory_order_relaxed);
  }

 private:
  // A packet in pieces joined for a ring slot (SendBurst).
  std::array<uint8_t, kShmSlotPayload> flat_{};
  ShmTransport(std::unique_ptr<Transport> udp, bool report_fallbacks)
      : udp_(std::move(udp)), report_fallbacks_(report_fallbacks) {}
  bool Init(std::string* error);
  std::shared_ptr<ShmRingPeer> Attach(uint32_t ip, uint16_t port, int lane);
  // Maps the device published at ip:port into `peer` and checks it is one
  // this device may send to (ShmPathStep, up to kEndpointNotListed); takes
  // no ring. Attach and ExplainPath both decide with it.
  // lane >= 0: the link of a host NIC address for that lane (docs/host-nic.md).
  ShmPathStep OpenPeer(uint32_t ip, uint16_t port, int lane, ShmRingPeer* peer,
                       ShmPathVerdict* why) const;
  // Whether a ring with this owner may be claimed: free, or a dead sender's.
  bool RingTakeable(uint64_t owner) const;
  bool ClaimRing(ShmRingPeer* peer);
  // Claims ring i of the peer's segment if it is free, or (reclaim) if its
  // owner is dead.
  bool TryClaimRing(ShmRingPeer* peer, uint32_t i, bool reclaim);
  static void CountExports(const ShmSegment& seg, ShmPathVerdict* why);
  void PublishDirty();
  // Rings the peer's doorbell once if its engine sleeps (PublishDirty and
  // NotifyDirectRecv, after their seq_cst fence).
  void RingDoorbellIfSleeping(ShmRingPeer* p);
  // One doorbell datagram to ip:port (network-order address).
  // Which of a device's endpoints (ip, port; ip 0 for IPv6) a doorbell
  // goes to (shm_transport.cc).
  static size_t DoorbellEndpoint(const std::vector<std::pair<uint32_t, uint16_t>>& locals);
  void SendDoorbell(uint32_t ip, uint16_t port);
  // The datagram alone (no counter): WokeUp sends it without the lock.
  void SendDoorbellDatagram(uint32_t ip, uint16_t port) const;
  // RecvBurst read a doorbell meant for a thread that still sleeps: puts
  // the `sleeping` flag back up (and wakes the sleeper if input came).
  void RearmAfterTakenDoorbell();
  // Stall alarm (shm_stall_alarm.cc): after a publish that should wake
  // `p`, watches its read position; every kStallCheckEvery receives (and
  // after a sleep), a peer that naps while our packets have waited unread
  // for kStallAlarm has its nap ended.
  void WatchForStall(ShmRingPeer* p);
  void SoundStallAlarms();
  // Puts the peer's pidfd in peer_deaths_fd_ (or marks it for a pid check).
  void WatchPeerDeath(ShmRingPeer* peer);
  // Drops the peers that died: one epoll_wait on peer_deaths_fd_, at most
  // every kPeerCheckInterval.
  void CheckPeers();
  void DropPeer(const std::shared_ptr<ShmRingPeer>& peer);
  // Moves packets from our inbound rings into the backlog (see SendBurst).
  void DrainInboundToBacklog();
  // Whether a packet for `dest_qpn` waits unread in our ring of `peer`'s
  // segment while `peer` keeps reading its rings (DeliveryPending).
  bool UnreadToward(ShmRingPeer* peer, uint32_t dest_qpn, std::chrono::nanoseconds period);
  // Whether a packet for our `local_qpn` from `peer` waits unread on our side.
  bool UnreadFrom(const ShmRingPeer& peer, uint32_t local_qpn) const;
  // Pops one packet of inbound ring `ri` into `buf`; false if none. Counts
  // and skips malformed slots.
  bool PopInbound(uint32_t ri, uint8_t* buf, RxPacket* out);

  struct Route {
    std::shared_ptr<ShmRingPeer> peer;  // null: UDP
    uint16_t peer_local_index = 0;
    std::chrono::steady_clock::time_point retry_at{};
  };
  // A route per destination address and port (kOwnAddress), and for a host
  // NIC address, which several processes share, one per QPN lane
  // (docs/host-nic.md).
  static constexpr uint32_t kOwnAddress = 0x100;
  static uint64_t Key(uint32_t ip, uint16_t port, uint32_t lane) {
    return (uint64_t{lane} << 48) | (uint64_t{ip} << 16) | port;
  }
  Route* Lookup(const Endpoint& dst, uint32_t dest_qpn);
  // The route under `key` if it is still good (a live peer, or a negative
  // answer not yet due for a retry), else null; and a new one.
  Route* CachedRoute(uint64_t key);
  Route* StoreRoute(uint64_t key, uint32_t ip, uint16_t port, std::shared_ptr<ShmRingPeer> peer);

  std::unique_ptr<Transport> udp_;
  const bool report_fallbacks_;
  ShmSegment own_;
  uint64_t netns_ = 0;
  uint64_t sender_id_ = 0;
  std::vector<std::string> links_;
  std::unordered_map<uint64_t, Route> routes_;
  std::vector<std::shared_ptr<ShmRingPeer>> peers_;
  std::vector<ShmRingPeer*> dirty_;
  ShmRingConsumer consumers_[kShmRings];
  // This device's endpoints as its segment lists them (ip 0: IPv6).
  std::vector<std::pair<uint32_t, uint16_t>> own_locals_;
  uint32_t rr_ = 0;
  std::unique_ptr<uint8_t[]> rx_buf_;
  // Inbound packets taken out of our rings while our own send waited for a
  // full ring: two engines flooding each other would otherwise each wait
  // (under their locks) for the other to drain. FIFO, served by RecvBurst
  // before the rings, so each ring's order is kept.
  struct Backlogged {
    uint32_t length;
    uint16_t local_index;
    Endpoint src;
  };
  std::unique_ptr<uint8_t[]> backlog_buf_;  // kBacklog slots, allocated on first use
  std::vector<Backlogged> backlog_meta_;
  size_t backlog_head_ = 0, backlog_count_ = 0;
  static constexpr size_t kBacklog = 1024;
  int doorbell_fd_ = -1;
  // Our header's direct_recvs when the engine last looked (TakeDirectRecvs),
  // and when a sleep was last refused for it (PrepareToSleep): apart, so
  // that neither check hides a change from the other.
  uint64_t direct_recvs_seen_ = 0;
  uint64_t direct_recvs_slept_ = 0;
  bool warned_ = false;
  bool ring_full_ = false;  // the last SendBurst stopped at a full ring
  bool quiet_ = false;      // SetQuiet: pushes ring no doorbell
  std::atomic<bool> has_peers_{false};
  // Set by WokeUp, which the progress thread calls without the engine lock.
  std::atomic<bool> force_udp_{true};
  // Threads between a PrepareToSleep and their WokeUp.
  std::atomic<int> sleepers_{0};
  // Doorbells WokeUp rang for a sleeper whose flag it had taken down
  // (counted apart: counters_ is written under the engine lock only).
  std::atomic<uint64_t> raced_doorbells_{0};
  uint32_t udp_quiet_ = 0;
  uint64_t recv_calls_ = 0;
  int stall_watched_ = 0;  // peers with stall_watch set
  std::chrono::steady_clock::time_point next_peer_check_{};
  // The pidfds of the peers (epoll): ready when a peer's process exited.
  int peer_deaths_fd_ = -1;
  size_t peers_polled_by_pid_ = 0;  // peers with death_polled
  uint64_t last_key_ = 0;
  Route* last_route_ = nullptr;  // one-entry cache in front of routes_
  TransportCounters counters_;   // the shared-memory path's own
  mutable TransportCounters merged_;
};

}  // namespace softrnic::transport
