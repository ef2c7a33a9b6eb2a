// The engine behind Device: object tables, packet dispatch, the three QP
// engines, timers and the progress thread.
//
// Locking: one mutex (mu_) guards all engine state. Application threads take
// it for each verb; the progress thread takes it for each pass and releases
// it between passes. Nothing here blocks while holding it.
#pragma once

#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <ctime>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/thread_annotations.h"
#include "engine/observe/capture.h"
#include "engine/device/device.h"
#include "engine/engine_config.h"
#include "engine/memory/mr_table.h"
#include "engine/queues/multicast.h"
#include "engine/packet_builder.h"
#include "engine/pass_clock.h"
#include "engine/progress/progress.h"
#include "engine/same_host/shm_direct.h"
#include "engine/qp.h"
#include "engine/spin_mutex.h"
#include "engine/queues/queues.h"
#include "engine/observe/stats.h"
#include "engine/observe/stats_handover.h"
#include "engine/trace/trace_recorder.h"
#include "engine/wr_opcode.h"
#include "engine/same_host/xrc_share.h"
#include "transport/peer_memory.h"
#include "transport/transport.h"
#include "wire/packet.h"

namespace softrnic::engine {

class Engine : private ProgressHost {
 public:
  // The transport is the engine's; its capabilities (peer memory, split
  // payloads, multicast groups) shape the device (engine.cc).
  Engine(std::unique_ptr<transport::Transport> transport, DeviceAttr attr,
         const EngineConfig& config);
  ~Engine();

  // What the device was created with (engine_config.h).
  const EngineConfig& config() const { return config_; }

  // The progress thread (engine/progress/progress.h).
  void StartProgressThread();
  void StopProgressThread();

  // The device lock: Device takes it for each verb, the progress thread for
  // each pass. Everything below marked REQUIRES(mu_) runs under it.
  SpinMutex mu_;

  // --- What the device is: fixed at construction, read without the lock ---
  const DeviceAttr& attr() const { return attr_; }
  std::span<const Gid> gids() const { return gids_; }
  const std::string& name() const { return name_; }
  uint16_t udp_port() const { return udp_port_; }
  // The transport's peer memory capability (null without shared memory).
  transport::PeerMemory* peer_memory() const { return peer_memory_; }
  // The host NIC lane (Transport::qpn_lane; fixed at creation, so no lock).
  int qpn_lane() const { return transport_->qpn_lane(); }
  int ClaimCmServiceLocked(uint16_t port_space, uint16_t port, bool claim) REQUIRES(mu_) {
    return transport_->ClaimCmService(port_space, port, claim);
  }
  // Direct one-sided operations on same-host peers (null when off).
  const ShmDirect* shm_direct() const { return shm_direct_.get(); }

  // --- The verbs' work under the lock ---
  // Each Device verb checks the arguments that need no lock, takes mu_ and
  // calls one of these (docs/architecture.md, "Threads and locks").

  // Async events (async_events.cc).
  // The queue's readable fd, or -1 if there is no such queue.
  int AsyncQueueFdLocked(int queue) const REQUIRES(mu_);
  // 0 (an event in *out), EAGAIN (none), EIO (the queue is gone).
  int PopAsyncEventLocked(int queue, AsyncEvent* out) REQUIRES(mu_);
  // A new queue's id.
  int AddAsyncQueueLocked(std::unique_ptr<AsyncQueue> queue) REQUIRES(mu_);
  // The queue, out of the table (null if there is none), for the caller to
  // close after the lock.
  std::unique_ptr<AsyncQueue> TakeAsyncQueueLocked(int queue) REQUIRES(mu_);
  // Device::SetAsyncRouter: where the events of objects of other verbs
  // contexts go.
  void SetAsyncRouterLocked(Device::AsyncRouter router) REQUIRES(mu_) { async_router_ = router; }

  // Device::stats, Device::transport_counters: snapshots.
  EngineStats StatsLocked() const REQUIRES(mu_) { return stats_; }
  transport::TransportCounters TransportCountersLocked() const REQUIRES(mu_) {
    return transport_->counters();
  }

  // One pass (pass.cc): receive a burst, dispatch, flush ACKs,
  // run timers and requesters, transmit. Returns true if it did any work.
  // Device::ProgressInline runs one from an application thread.
  bool PollOnceLocked() REQUIRES(mu_);

  // ibv_modify_qp (qp_control.cc): the transition, then peers see the new
  // state, access and path at once and the packets it queued leave.
  int ModifyQpLocked(Qp* qp, const QpAttr& attr, uint32_t mask) REQUIRES(mu_);
  // ibv_post_recv once Device::PostRecv has checked the SGE count
  // (recv_queue.cc): EINVAL in RESET, ENOMEM when the queue is full.
  int PostRecvLocked(Qp* qp, const RecvWr& wr) REQUIRES(mu_);
  // ENOMEM when the SRQ holds max_wr WQEs (those described to peers too).
  int PostSrqRecvLocked(Srq* srq, const RecvWr& wr) REQUIRES(mu_);
  // ibv_modify_srq's max_wr (RecvQueue::ResizeInto): EINVAL if the SRQ
  // holds more WQEs than `next` does.
  int ResizeSrqLocked(Srq* srq, RecvQueue& next) REQUIRES(mu_);

  // Destroyed QPs linger (Lingering below): expires those whose time is
  // over and returns whether any remain (the exit handler waits for them).
  bool ExpireLingeringLocked(Clock::time_point now) REQUIRES(mu_);
  // SOFTRNIC_TRACE (trace/engine_trace.cc): writes the trace and its
  // summary now (atomically: a temporary file renamed); no-op without one.
  void WriteTraceLocked() REQUIRES(mu_);
  // Sends every deferred ACK now and the transmit batch with it: the
  // process is exiting, and a completion its application saw must not
  // leave the peer's request unacknowledged (ack_delay.cc).
  void FlushDeferredAcksLocked() REQUIRES(mu_);

  // --- Completion events (event_wait.cc) ---
  // A blocking ibv_get_cq_event: waits for the channel's event byte and,
  // meanwhile, for the packets that make completions, and runs passes
  // itself. 0 once an event byte was read or an event this thread made was
  // claimed (CompletionChannel::TakeUnsignaled), else the errno.
  int AwaitChannelEvent(CompletionChannel* channel) EXCLUDES(mu_);
  // A pass whose events for `channel` skip its pipe.
  bool PollOnceForWaiterLocked(CompletionChannel* channel) REQUIRES(mu_);

  // --- Completion channels, CQs and SRQs (queue_tables.cc) ---
  // Add*: ENOMEM at the device's limit (the object stays the caller's, to
  // free after the lock); Remove*: EBUSY while it has users, EINVAL if not
  // this device's, else moved into *doomed for the caller to free after the
  // lock (queues.h: queue memory is never freed under it).
  void AddChannelLocked(std::unique_ptr<CompletionChannel> channel) REQUIRES(mu_);
  int RemoveChannelLocked(CompletionChannel* channel) REQUIRES(mu_);
  // A thread leaves ibv_get_cq_event on `channel` (it entered with
  // ++channel->waiters): a destroyed channel goes with its last waiter.
  void LeaveChannelLocked(CompletionChannel* channel) REQUIRES(mu_);
  int AddCqLocked(std::unique_ptr<Cq>& cq) REQUIRES(mu_);
  int RemoveCqLocked(Cq* cq, uint32_t* async_events_reported, std::unique_ptr<Cq>* doomed)
      REQUIRES(mu_);
  // ibv_poll_cq: held-back packets leave, a pass runs if the CQ holds
  // fewer than n, and the progress thread learns that an application polls.
  // The ACKs still held for the messages whose receive completions it
  // hands out leave before it returns (ack_delay.cc).
  int PollCqLocked(Cq* cq, int n, Completion* out) REQUIRES(mu_);
  // ibv_req_notify_cq: the arm, and the progress thread told to watch for
  // responses when the caller will block on a channel.
  void ArmCqLocked(Cq* cq, bool solicited_only) REQUIRES(mu_);
  int AddSrqLocked(std::unique_ptr<Srq>& srq) REQUIRES(mu_);
  int RemoveSrqLocked(Srq* srq, uint32_t* async_events_reported, std::unique_ptr<Srq>* doomed)
      REQUIRES(mu_);

  // --- PDs and AHs (protection_domains.cc) ---
  // ENOMEM: the table is at the device's limit; EBUSY: the PD has users;
  // EINVAL: not this device's.
  int AddPdLocked(void* handle, Pd** out) REQUIRES(mu_);
  int RemovePdLocked(Pd* pd) REQUIRES(mu_);
  // The PD with this id (ibv_import_pd), or null.
  Pd* FindPdLocked(uint32_t id) const REQUIRES(mu_);
  int AddAhLocked(Pd* pd, const AddressVector& av, void* handle, Ah** out) REQUIRES(mu_);
  int RemoveAhLocked(Ah* ah) REQUIRES(mu_);

  // ibv_advise_mr (odp.cc): each range resolved and faulted in under the
  // lock; the errnos ibv_advise_mr(3) names.
  int AdviseMrLocked(const Pd* pd, MrAdvice advice, const Sge* sges, uint32_t num_sge)
      REQUIRES(mu_);

  // --- Memory regions (memory_regions.cc) ---
  // Gives mr (filled in by Device: PD, range, access, shared pages) its
  // keys, its table entry, its export and its PD reference, and moves it
  // into mrs_. ENOMEM: mr stays the caller's (its pages to unshare).
  int AddMrLocked(std::unique_ptr<Mr>& mr) REQUIRES(mu_);
  // What ibv_rereg_mr changes, all at once (the unchanged parts as they were).
  struct MrTranslation {
    Pd* pd = nullptr;
    uint8_t* addr = nullptr;
    uint64_t length = 0;
    uint64_t iova = 0;
    uint32_t access = 0;
    SharedRange share;
  };
  // Revokes the old region, applies `next`, publishes the new one; returns
  // the old shared pages for the caller to unshare after the lock.
  SharedRange ReregMrLocked(Mr* mr, const MrTranslation& next) REQUIRES(mu_);
  // EBUSY: windows are bound to it or a BIND_MW naming it waits in a send
  // queue. Else revoked, out of the tables and freed; *share: its pages,
  // for the caller to unshare after the lock.
  int RemoveMrLocked(Mr* mr, SharedRange* share) REQUIRES(mu_);
  // The region of pd with this lkey (ibv_import_mr), or null.
  Mr* FindMrLocked(const Pd* pd, uint32_t lkey) const REQUIRES(mu_);
  // Memory windows (memory_window_ops.cc): ENOMEM at the device's limit;
  // EINVAL not this device's, EBUSY while a BIND_MW naming it waits.
  int AddMwLocked(Pd* pd, MwType type, void* handle, Mw** out) REQUIRES(mu_);
  int RemoveMwLocked(Mw* mw) REQUIRES(mu_);

  // --- The QP table (qp_table.cc) ---
  // Gives qp a QPN (fixed_qpn, else a fresh random one), its references on
  // its PD, CQs, SRQ and XRC domain, its export, and moves it into qps_.
  // ENOMEM (the table is full) or EBUSY (fixed_qpn taken): qp stays the
  // caller's, to free after the lock (queues.h).
  int AddQpLocked(std::unique_ptr<Qp>& qp, uint32_t fixed_qpn) REQUIRES(mu_);
  // ibv_destroy_qp's work: the QP leaves every list, export and binding and
  // the table, moved into *doomed for the caller to free after the lock;
  // or, for an XRC receive QP still opened by other handles, only `handle`
  // goes. EINVAL (not ours), EBUSY (multicast attachments: multicast.h).
  int RemoveQpLocked(Qp* qp, uint32_t* async_events_reported, void* handle,
                     std::unique_ptr<Qp>* doomed) REQUIRES(mu_);
  uint32_t FreshQpnLocked() const REQUIRES(mu_);

  // ibv_attach_mcast / ibv_detach_mcast (multicast.cc): EOPNOTSUPP on a
  // device without multicast, EINVAL for a non-UD QP, a unicast GID or (on
  // detach) an attachment that does not exist, ENOMEM past the limits.
  int AttachMulticastLocked(Qp* qp, const Gid& gid) REQUIRES(mu_);
  int DetachMulticastLocked(Qp* qp, const Gid& gid) REQUIRES(mu_);

  // --- Send queue (send_queue.cc) ---
  // ibv_post_send's work once Device::PostSend has checked the arguments
  // that need no lock (length: the SGEs' sum; is_inline: inline data that
  // the opcode allows): the state and ring checks, the WQE, the requester
  // run at once, doorbell batching and waking the progress thread.
  // 0, EINVAL or ENOMEM (man ibv_post_send).
  int PostSendLocked(Qp* qp, const SendWr& wr, uint64_t length, bool is_inline) REQUIRES(mu_);

  // --- XRC (xrc.cc) ---
  // The verbs' bodies under the lock (Device::OpenXrcd, CloseXrcd,
  // CreateXrcSrq after CreateSrq, OpenXrcRecvQp): errnos as those say.
  int OpenXrcdLocked(const XrcdInode* inode, bool create, bool exclusive, Xrcd** out)
      REQUIRES(mu_);
  int CloseXrcdLocked(Xrcd* xrcd) REQUIRES(mu_);
  // srq (just created) becomes an XRC SRQ of xrcd completing on cq: a
  // fresh number, free in every process sharing the domain.
  void MakeXrcSrqLocked(Srq* srq, Xrcd* xrcd, Cq* cq) REQUIRES(mu_);
  int OpenXrcRecvQpLocked(Xrcd* xrcd, uint32_t qpn, void* handle, Qp** out) REQUIRES(mu_);

 private:
  // The engine's own parts that reach into its state: the publisher copies
  // counters and QP rows (stats_publisher.h), capture control switches
  // capture_ (capture_control.h), the XRC share runs requests of other
  // processes' receive QPs (xrc_share.h). Tests and fuzzers inject packets
  // and read state through EngineTestPeer (tests/unit/engine).
  friend class StatsPublisher;
  friend class CaptureControl;
  friend class XrcShare;
  friend class EngineTestPeer;

  // The settings in config_ become the fields below (attr_.active_mtu,
  // selective_, cc_settings_, ack_delay_, ...); the rest are read from
  // config() where used.
  const EngineConfig config_;
  DeviceAttr attr_;
  std::vector<Gid> gids_;
  std::string name_ = "softrnic0";
  EngineStats stats_ GUARDED_BY(mu_);
  // A copy of the counters for the stats publisher when it found the lock
  // busy (observe/stats_handover.h): made by PollCqLocked.
  StatsHandover stats_handover_;

  // Objects (owned).
  std::vector<std::unique_ptr<Pd>> pds_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Mr>> mrs_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Mw>> mws_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Cq>> cqs_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<CompletionChannel>> channels_ GUARDED_BY(mu_);
  // Destroyed channels, kept for threads still waiting or on their way in
  // (RemoveChannelLocked): every one with a waiter, and the last
  // kRetiredChannels without.
  static constexpr size_t kRetiredChannels = 64;
  std::vector<std::unique_ptr<CompletionChannel>> destroyed_channels_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Srq>> srqs_ GUARDED_BY(mu_);
  // XRC (xrc.cc): the domains, and the XRC SRQs by the number requests name.
  std::vector<std::unique_ptr<Xrcd>> xrcds_ GUARDED_BY(mu_);
  std::unordered_map<uint32_t, Srq*> xrc_srqs_ GUARDED_BY(mu_);
  // XRC domains shared with other processes (xrc_share.h): made when an SRQ
  // or a receive QP of a domain opened by file first needs it.
  std::unique_ptr<XrcShare> xrc_share_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Ah>> ahs_ GUARDED_BY(mu_);
  std::unordered_map<uint32_t, std::unique_ptr<Qp>> qps_ GUARDED_BY(mu_);
  MrTable mr_table_ GUARDED_BY(mu_);
  // UD multicast attachments (multicast.h).
  MulticastGroups multicast_ GUARDED_BY(mu_);

  // Async events, one queue per verbs context (async_queue.h); queue 0 is
  // the device's own and always exists.
  std::unordered_map<int, std::unique_ptr<AsyncQueue>> async_queues_ GUARDED_BY(mu_);
  int next_async_queue_ GUARDED_BY(mu_) = 1;
  Device::AsyncRouter async_router_ GUARDED_BY(mu_) = nullptr;
  // (async_events.cc)
  void PostAsyncEvent(AsyncEventType type, void* handle) REQUIRES(mu_);
  void ReportCqOverflow(Cq* cq) REQUIRES(mu_);
  // An object is being destroyed: its unread async events go (the kernel's
  // uverbs does the same), so no reader is handed its freed handle (M6); and
  // the caller learns how many were handed out, to wait for their acks.
  void ForgetAsyncEventsLocked(AsyncObject kind, const void* handle, uint32_t* reported)
      REQUIRES(mu_);

  // Hands n received packets to capture_ (REQUIRES: capture_).
  void RecordReceived(const transport::RxPacket* rx, int n) REQUIRES(mu_);
  // ProgressHost: a pass of the progress thread (pass.cc).
  PassResult ProgressThreadPass(bool may_sleep) override EXCLUDES(mu_);
  PassResult ProgressThreadPassLocked(bool may_sleep) REQUIRES(mu_);
  bool EngineBusy() const override;
  Clock::time_point NextDeadlineLocked() const REQUIRES(mu_);
  // Whether PostSend may leave a streaming QP's packets in the transmit
  // batch (device.cc, doorbell batching): only while that saves system
  // calls (Transport::batching_saves_syscalls), SOFTRNIC_TX_BATCH=0 turns
  // it off.
  bool hold_tx_ = true;
  // The transport takes packets in pieces: RC/UC/UD payloads are sent from
  // registered memory without a staging copy (requester.cc);
  // SOFTRNIC_ZEROCOPY_TX=0 turns it off.
  bool split_tx_ = false;
  bool MayHoldTx() const {
    return hold_tx_ && progress_.app_owns_packets() && transport_->batching_saves_syscalls();
  }
  Clock::time_point last_pass_ GUARDED_BY(mu_){};
  PassClock pass_clock_ GUARDED_BY(mu_);  // a pass's time (pass_clock.h)
  // What a pass receives into (PollOnceLocked). A member, not a local: a
  // local array of them is constructed (2 KiB zeroed) at every pass, ~11%
  // of a UCX tag_lat client's CPU, which runs a pass per ibv_poll_cq.
  static constexpr int kRxBurst = 32;
  std::array<transport::RxPacket, kRxBurst> rx_burst_ GUARDED_BY(mu_);
  // Whether the progress thread must also wait for responses (the
  // transport's reply_pollable_fd): an armed CQ with a completion channel,
  // or a send queue holding WQEs that only a response can let go. Otherwise
  // whoever waits for a response polls its CQ, and the response need not
  // wake this thread (a cross-core wake-up costs tens of microseconds).
  bool RepliesNeededLocked() const REQUIRES(mu_);
  bool ChannelArmedLocked() const REQUIRES(mu_);
  // SOFTRNIC_RETRANSMIT=gbn|selective (default selective): whether QPs
  // created from now on offer selective retransmission (docs/loss.md).
  // Read when a QP enters RTR/RTS (EngineConfig::selective).
  bool selective_ = true;
  // SOFTRNIC_CC (the algorithm, or 0 for none), SOFTRNIC_CC_TARGET_US,
  // SOFTRNIC_CC_DELAY: congestion_control.h. Used when a QP enters RTS (it
  // gets its controller then); EngineConfig::cc.
  CcSettings cc_settings_;
  Clock::time_point next_timer_check_ GUARDED_BY(mu_){};
  // The first pass that put the due timers off because received packets
  // were still waiting (pass.cc); {} while none is.
  Clock::time_point timers_deferred_since_ GUARDED_BY(mu_){};
  // SOFTRNIC_ACK_DELAY_US: how long a plain ACK may wait for a request of
  // its QP to carry it (ack_delay.cc); 0 = never.
  std::chrono::microseconds ack_delay_{20};
  // No deferred ACK is due before this (may be stale-early, never late).
  Clock::time_point ack_deadline_min_ = Clock::time_point::max();
  // QPs whose ACK is deferred now (AckDelayState::ack_deferred set): while
  // none is, a poll hands out receive completions without looking up QPs.
  uint32_t acks_deferred_ GUARDED_BY(mu_) = 0;

  // --- Transmit (packet_builder.h) ---
  // Builds a packet into the transmit batch (sending a full batch first):
  // the headers from f, then room for payload_length bytes, returned for
  // the caller to fill (or to name as `direct` in CommitPacket).
  uint8_t* StartPacket(const PacketFields& f, uint32_t payload_length) REQUIRES(mu_);
  // Queues the packet StartPacket built, to dst's device port, sealed
  // with `seal` if there is one (a sealed QP's, docs/sealed.md).
  void CommitPacket(uint16_t local_index, const Gid& dst, const uint8_t* direct = nullptr,
                    seal::QpSeal* seal = nullptr) REQUIRES(mu_);
  // The same, to the QP's peer, counted as the QP's.
  void CommitToPeer(Qp* qp) REQUIRES(mu_) {
    CommitPacket(SourceIndex(qp), qp->attr.ah_attr.dgid, nullptr, qp->seal.get());
    CountTx(qp);
  }
  // Bytes of the packet CommitPacket queued last (BTH to ICRC).
  uint32_t last_tx_bytes_ GUARDED_BY(mu_) = 0;
  void FlushTx() REQUIRES(mu_) {
    tx_.Flush(*transport_);
    // The fault transport may now hold a packet due before the progress
    // thread's next wake-up (a delay rule, fault_transport.h): wake it for
    // it. Nullopt (every other transport) costs a virtual call.
    if (const auto due = transport_->next_deadline()) progress_.TimerArmed(*due);
  }
  TxBatch tx_ GUARDED_BY(mu_);
  std::unique_ptr<transport::Transport> transport_;
  // Who runs passes, and when: the progress thread and its policy
  // (engine/progress/progress.h). After transport_, which it watches.
  Progress progress_;
  // SOFTRNIC_CAPTURE (capture.h): every packet sent and received, and the
  // direct operations as the packets they replace; null when off.
  std::unique_ptr<PacketCapture> capture_ GUARDED_BY(mu_);
  // The pcapng interface description of this device's captures: pid, GIDs.
  std::string CaptureDescription() const;
  // SOFTRNIC_TRACE (trace/trace_recorder.h, trace/engine_trace.cc): the
  // per-QP event trace and the transport's faults; null when off. Each hook
  // in the engine's files is `if (trace_ != nullptr) Trace...(...)`: off, a
  // predictable branch on a null pointer; the work is out of line.
  std::unique_ptr<trace::TraceRecorder> trace_ GUARDED_BY(mu_);
  std::string trace_path_;  // %p expanded; fixed at construction
  pid_t trace_pid_ = 0;     // who writes it (a forked child does not)
  // Constructor only: no other thread can see the engine yet.
  void OpenTrace() NO_THREAD_SAFETY_ANALYSIS;
  // Destructor, after the progress thread stopped: the last write.
  void CloseTrace() NO_THREAD_SAFETY_ANALYSIS;
  // The exit handler: every engine still tracing writes its files.
  static void WriteTracesAtExit();
  void TraceQpCreated(const Qp* qp) REQUIRES(mu_);
  void TraceQpDestroyed(const Qp* qp) REQUIRES(mu_);
  void TraceState(const Qp* qp, QpState from, QpState to, const char* reason) REQUIRES(mu_);
  void TraceEvent(const Qp* qp, trace::EventKind kind, const std::array<uint64_t, 6>& v)
      REQUIRES(mu_);
  // Retry or RNR retry exhausted (the QP's move to Error is recorded apart).
  void TraceRequesterError(const Qp* qp, WcStatus status) REQUIRES(mu_);
  void TraceCompletion(const Qp* qp, WcStatus status, uint64_t wr_id, WcOpcode opcode, bool send)
      REQUIRES(mu_);
  // transport_'s peer memory capability (else null): peers for direct
  // one-sided operations and this device's exports.
  transport::PeerMemory* peer_memory_ = nullptr;
  // Exports and direct one-sided operations (shm_direct.h); null without shm.
  std::unique_ptr<ShmDirect> shm_direct_;
  uint32_t next_pd_id_ GUARDED_BY(mu_) = 0;
  // Executes an RC WRITE/READ/atomic directly on a same-host peer's memory,
  // or places a SEND in its receive queue (TryDirectSend), and completes it;
  // false if it must go through the packet path.
  bool TryDirect(Qp* qp, SendWqe& w, uint64_t index) REQUIRES(mu_);
  // The target QP of a direct operation as its peer exports it, checked as
  // its responder would (state, connected to this QP and GID); false if the
  // operation must go as packets.
  struct DirectTarget {
    uint32_t qp_slot = 0;
    uint32_t pd_id = 0;
    uint32_t access = 0;  // its qp_access_flags
    // Where its receive WQEs are: 0 its own queue (qp_slot's), i + 1 the
    // peer's SRQ queue i (unchecked: the requester bounds it).
    uint32_t srq_slot = 0;
  };
  bool FindDirectTarget(Qp* qp, DirectTarget* out) REQUIRES(mu_);
  // --- Direct SEND (shm_direct_send.cc) ---
  // Requester: places a SEND / SEND_WITH_IMM in the target's next exported
  // receive WQE and completes it; false: packets.
  bool TryDirectSend(Qp* qp, SendWqe& w, uint64_t index, const DirectTarget& target)
      REQUIRES(mu_);
  // Receiver: opens or closes the QP's receive queue to peers as its state
  // allows (PublishQp), describes newly posted WQEs (ExportRecvs), and
  // completes the WQEs peers filled (CollectDirectRecvs; every open queue:
  // CollectAllDirectRecvs).
  void SyncRecvExport(Qp* qp) REQUIRES(mu_);
  void CloseRecvExport(Qp* qp) REQUIRES(mu_);
  void ExportRecvs(Qp* qp) REQUIRES(mu_);
  bool CollectDirectRecvs(Qp* qp) REQUIRES(mu_);
  bool CollectAllDirectRecvs() REQUIRES(mu_);
  // The responder serving a SEND packet takes the front WQE from peers too
  // (the CAS on `taken`); false: a peer holds it (RNR NAK). For a QP of an
  // exported SRQ it may hand over a WQE of the SRQ's export (*taken true,
  // qp->resp filled), else the caller takes the SRQ's front WQE.
  bool ClaimRecvForPacket(Qp* qp, bool* taken) REQUIRES(mu_);
  bool ClaimSrqRecvForPacket(Qp* qp, bool* taken) REQUIRES(mu_);
  // Describes WQE (sges, n) of a QP or SRQ of `pd` in entry e for the
  // `taken` value `at` (its tag last, release).
  void DescribeRecvWqe(transport::ShmRecvEntry* e, uint64_t at, const Pd* pd, const Sge* sges,
                       uint32_t n) REQUIRES(mu_);
  // RC QPs whose receive queue is open to peers (rq_open).
  std::vector<Qp*> recv_exports_ GUARDED_BY(mu_);
  // SRQs (not XRC) describe their oldest WQEs to peers from the time a QP
  // of theirs is first published (OpenSrqExport) until they are destroyed
  // (CloseSrqExport, RemoveSrqLocked); WQEs move from srq->rq into the
  // export as they are described (ExportSrqRecvs), and come back through
  // CollectSrqRecvs (direct SENDs) or ClaimRecvForPacket (packets).
  void OpenSrqExport(Srq* srq) REQUIRES(mu_);
  void CloseSrqExport(Srq* srq) REQUIRES(mu_);
  void ExportSrqRecvs(Srq* srq) REQUIRES(mu_);
  // thorough: look past an entry a peer claimed but has not filled yet
  // (otherwise only now and then: it costs a read of the shared `taken`).
  bool CollectSrqRecvs(Srq* srq, bool thorough) REQUIRES(mu_);
  // The segment's queue an exported SRQ (shm.slot >= 0) is described in.
  transport::ShmRecvQueue* SrqSharedQueue(const Srq* srq) const;
  // The SRQ's WQEs neither consumed nor completed: its own and the
  // export's (for ENOMEM at post, resizing and the limit event).
  static uint32_t SrqWqesHeld(const Srq* srq) {
    return static_cast<uint32_t>(srq->rq.count) + srq->shm.live;
  }
  std::vector<Srq*> srq_exports_ GUARDED_BY(mu_);
  // Renders a direct operation that succeeded into capture_ as the packets
  // it replaced (REQUIRES: capture_).
  void RecordDirect(const Qp* qp, const SendWqe& w, const WrOpcodeInfo& op, const uint8_t* target,
                    const Gid& sgid, uint64_t atomic_orig) REQUIRES(mu_);
  // Re-exports a QP after a change peers check (state, access, path).
  void PublishQp(Qp* qp) REQUIRES(mu_) {
    // XRC QPs never take the direct path (xrc.cc says why).
    if (!shm_direct_ || qp->xrc != XrcRole::kNone) return;
    // An RC QP of an SRQ (only RC SENDs go direct): the SRQ's queue is
    // opened first, so that the QP slot names it.
    if (qp->srq != nullptr && qp->type == QpType::kRc) OpenSrqExport(qp->srq);
    shm_direct_->PublishQp(qp, qp->pd->id, qp->srq != nullptr ? qp->srq->shm.slot : -1);
    qp->shm.shm_peer_qp_slot = -1;  // as a requester: the path may have changed
    SyncRecvExport(qp);
  }
  uint16_t udp_port_ = wire::kRoceV2UdpPort;

  // Destroyed RC QPs keep answering duplicates for a while, like TCP's
  // TIME_WAIT: on a lossy network the last ACK a responder sent may be lost
  // while the application, having its data, destroys the QP and exits; the
  // peer would then retry into silence and fail with RETRY_EXC_ERR.
  struct Lingering {
    uint32_t qpn = 0;
    Gid peer;
    uint32_t dest_qpn = 0;
    uint16_t sgid_index = 0;
    uint32_t epsn = 0;
    uint32_t msn = 0;
    Clock::time_point until{};
    std::unique_ptr<seal::QpSeal> seal;  // a sealed QP's, to answer sealed
  };
  std::vector<Lingering> lingering_ GUARDED_BY(mu_);
  static constexpr auto kLinger = std::chrono::milliseconds(300);
  void StartLinger(Qp* qp) REQUIRES(mu_);  // takes its seal
  // INIT -> RTR: the QP's seal when the device requires sealing; 0 or the
  // errno ibv_modify_qp returns.
  int SealAtRtr(Qp* qp) REQUIRES(mu_);
 public:
  // rdma_cm's key exchange (docs/sealed.md): before RTR, the X25519 output
  // and the transcript (both public keys) of the QP's connection; empty
  // `exchanged`: the peer offered no seal. 0 or an errno.
  int SealQpByCmLocked(Qp* qp, std::span<const uint8_t> exchanged,
                       std::span<const uint8_t> transcript) REQUIRES(mu_);
  // 0 off, 1 prefer, 2 require.
  int seal_mode() const { return config_.seal_required ? 2 : config_.seal_preferred ? 1 : 0; }
 private:
  bool IsLingering(uint32_t qpn) const REQUIRES(mu_);
  // Answers a request for a lingering QPN; false if it is not one.
  bool AnswerLingering(const wire::Packet& pkt, const transport::RxPacket& rx) REQUIRES(mu_);
  // Counts a dropped packet and says why at SOFTRNIC_LOG=debug.
  void Dropped(uint64_t& counter, const char* why, const transport::RxPacket& rx, uint32_t qpn) REQUIRES(mu_);
  void ExpireLingering(Clock::time_point now) REQUIRES(mu_);

  // Work list: QPs whose requester may be able to send or that owe an ACK.
  std::vector<Qp*> work_list_ GUARDED_BY(mu_);
  void MarkWork(Qp* qp) REQUIRES(mu_);
  void RunWorkList() REQUIRES(mu_);

  // Timer list (pass.cc): the QPs that may have a timer running (Local
  // ACK, RNR, selective-repeat probe, deferred ACK). The periodic checks
  // (every kTimerCheckInterval, 50 us) and the next-deadline computation
  // walk it instead of every QP, so an idle QP costs no time per pass
  // (issue 17: with 4,000 idle QPs a same-device WRITE round trip took 10x
  // longer). A QP joins when it arms a timer or has packets in flight
  // (WatchTimers) and leaves when a check finds nothing armed.
  std::vector<Qp*> timer_list_ GUARDED_BY(mu_);
  void WatchTimers(Qp* qp) REQUIRES(mu_);
  static bool TimersArmed(const Qp* qp);
  void CheckListedTimers(Clock::time_point now) REQUIRES(mu_);

  // --- QP control (qp_control.cc) ---
  // ModifyQpLocked's transition (IBA 10.3.1, the table in qp_control.cc);
  // 0 or EINVAL.
  int TransitionQp(Qp* qp, const QpAttr& attr, uint32_t mask) REQUIRES(mu_);
  // reason: why, for the trace (null: the caller recorded the change).
  void MoveToError(Qp* qp, const char* reason) REQUIRES(mu_);
  void FlushQp(Qp* qp) REQUIRES(mu_);
  void FlushSendQueue(Qp* qp) REQUIRES(mu_);
  void FlushRecvQueue(Qp* qp) REQUIRES(mu_);
  void ResetQp(Qp* qp) REQUIRES(mu_);

  // The engine's own steps from here to the per-QP counters: the packet
  // handlers and the requester, called only by the engine's passes and
  // verbs bodies above (docs/architecture.md, "One RDMA WRITE").
  // --- Requester (requester.cc) ---
  void RunRequester(Qp* qp) REQUIRES(mu_);
  // Builds and queues the next packet of Wqe(sq_next). Returns false if the
  // WQE failed locally (completion already generated).
  bool SendNextPacket(Qp* qp, SendWqe& wqe, uint64_t index) REQUIRES(mu_);
  bool CanSend(const Qp* qp, const SendWqe& wqe) const REQUIRES(mu_);
  // What the completer asks of the requester (the completer writes no
  // requester state itself): move the send cursor past what an
  // acknowledgement covered, or go back to comp_psn (go-back-N),
  // `packets_into_head` packets into the head WQE.
  void RequesterSkipAcked(Qp* qp) REQUIRES(mu_);
  void RequesterGoBackTo(Qp* qp, uint32_t packets_into_head) REQUIRES(mu_);
  // A READ or atomic was answered in full: its slot is free.
  void RequesterAnswered(Qp* qp) REQUIRES(mu_);
  // What selective repeat asks of it: the packet `psn` of WQE `index` sent
  // again exactly as the first time (same PSN, opcode, headers, bytes),
  // the cursor left where it was. False if the WQE failed locally.
  bool RequesterResend(Qp* qp, uint64_t index, SendWqe& w, uint32_t psn) REQUIRES(mu_);

  // --- Selective retransmission (selective.cc, docs/loss.md) ---
  void SrPrepareResponder(Qp* qp);   // at RTR: the reorder store
  void SrPrepareRequester(Qp* qp);   // at RTS: the scoreboard
  void SrReleaseQp(Qp* qp);          // at RESET
  // Responder: keeps an out-of-order request; false if it cannot (the caller
  // then drops it, counted).
  void SrKeep(Qp* qp, const wire::Packet& pkt, int32_t diff) REQUIRES(mu_);
  void SrClearStore(Qp* qp) REQUIRES(mu_);
  // Responder: runs the kept packets that have become in order.
  void SrDrain(Qp* qp, const transport::RxPacket& rx) REQUIRES(mu_);
  void SendSack(Qp* qp) REQUIRES(mu_);
  // Requester: a SACK arrived (validated here).
  void HandleSack(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  // Requester: resends the packets the scoreboard shows lost.
  // probe: also resend the oldest unacknowledged packet (tail-loss probe).
  void RetransmitLost(Qp* qp, bool probe = false) REQUIRES(mu_);
  // Requester: acknowledgement progress from comp_before to comp_psn.
  // Returns whether it took an RTT sample (for CcOnAck).
  bool SrOnCumAck(Qp* qp, uint32_t comp_before) REQUIRES(mu_);
  // Requester: the tail-loss probe deadline (time_point::max() if none).
  Clock::time_point SrProbeDeadline(const Qp* qp) const REQUIRES(mu_);
  void SrCheckProbe(Qp* qp, Clock::time_point now) REQUIRES(mu_);
  // Requester: scoreboard and counters for a packet about to leave.
  void SrOnTransmit(Qp* qp, uint32_t psn, uint32_t psns, uint32_t payload) REQUIRES(mu_);
  void SrForgetSacks(Qp* qp) REQUIRES(mu_);

  // --- Packets in flight per destination (congestion.cc, dest_window.h) ---
  void DestAttach(Qp* qp) REQUIRES(mu_);   // at RTS
  void DestRelease(Qp* qp) REQUIRES(mu_);  // at RESET and destruction
  // Recomputes the QP's share from its state: after it sent, after an
  // acknowledgement, on any state change.
  void DestSync(Qp* qp) REQUIRES(mu_);
  // The destination has no room for another packet of this QP.
  bool DestWindowFull(const Qp* qp) const REQUIRES(mu_);
  // ... and will have none once the packet at sq_psn leaves (AckReq).
  bool DestFillsWindow(const Qp* qp) const REQUIRES(mu_);
  std::unordered_map<Gid, DestFlight, GidHash> dest_flight_ GUARDED_BY(mu_);

  // --- Congestion control (congestion.cc, docs/loss.md) ---
  void CcInit(Qp* qp) REQUIRES(mu_);
  bool CcWindowFull(const Qp* qp) const REQUIRES(mu_);
  bool CcFillsWindow(const Qp* qp) const REQUIRES(mu_);
  // rtt_sampled: SrOnCumAck took an RTT sample from this acknowledgement.
  void CcOnAck(Qp* qp, uint32_t newly_acked, bool rtt_sampled) REQUIRES(mu_);
  void CcOnLoss(Qp* qp) REQUIRES(mu_);
  void CcOnTimeout(Qp* qp) REQUIRES(mu_);
  void HandleCnp(Qp* qp) REQUIRES(mu_);
  // DCQCN notification point: a request that arrived with ECN CE.
  void MaybeSendCnp(Qp* qp, const transport::RxPacket& rx) REQUIRES(mu_);

  // --- Completer (completer.cc) ---
  void HandleResponse(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  // HandleResponse's steps, in order (completer.cc says what each checks).
  bool CheckResponseState(Qp* qp) REQUIRES(mu_);
  bool CheckResponsePsn(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  void HandleAck(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  void HandleRnrNak(Qp* qp, uint32_t psn, uint8_t syndrome) REQUIRES(mu_);
  void HandleNak(Qp* qp, uint32_t psn, uint8_t syndrome) REQUIRES(mu_);
  SendWqe* MatchResponse(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  void HandleAtomicAck(Qp* qp, const wire::Packet& pkt, SendWqe& w) REQUIRES(mu_);
  void HandleReadResponse(Qp* qp, const wire::Packet& pkt, SendWqe& w) REQUIRES(mu_);
  // Acknowledgement progress: comp_psn has moved on from comp_before. The
  // bookkeeping every kind of progress shares: selective retransmission
  // and congestion control hear of it, retries are restored, completed
  // WQEs retire, the timer re-arms and the requester may send.
  void AckProgress(Qp* qp, uint32_t comp_before, bool restore_rnr_retry) REQUIRES(mu_);
  void CompleteSendWqe(Qp* qp, SendWqe& wqe, WcStatus status) REQUIRES(mu_);
  void RetireCompletedWqes(Qp* qp) REQUIRES(mu_);
  bool ImplicitAck(Qp* qp, uint32_t psn_inclusive) REQUIRES(mu_);
  // reason: what revealed the loss, for the trace ("timeout", "nak_sequence",
  // "rnr_nak", "implied_nak", "read_gap").
  void Rewind(Qp* qp, const char* reason) REQUIRES(mu_);
  void RequesterError(Qp* qp, WcStatus status) REQUIRES(mu_);
  void CheckTimers(Qp* qp, Clock::time_point now) REQUIRES(mu_);
  void ArmRetransmitTimer(Qp* qp) REQUIRES(mu_);

  // --- XRC internals (xrc.cc) ---
  // The XRC SRQ numbered srqn, or null.
  Srq* FindXrcSrq(uint32_t srqn) const REQUIRES(mu_);
  // An XRC receive QP takes the SRQ, PD and CQ of the XRC SRQ the request's
  // XRCETH names for the time of one request (UnbindXrcTarget after it).
  // False when the number names no SRQ of the QP's domain (an Invalid
  // Request); the QP is then bound to the SRQ of the message in progress,
  // if any, so that its receive WQE can still complete in error.
  bool BindXrcTarget(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  void UnbindXrcTarget(Qp* qp) REQUIRES(mu_);
  // DestroySrq's XRC part: the number leaves the tables and the registry.
  void ForgetXrcSrq(Srq* srq) REQUIRES(mu_);
  // ExecuteSend for a receive QP whose message goes to another process's
  // XRC SRQ (xrc_share.h).
  bool ExecuteRemoteSend(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  // The packet opcode an RC opcode becomes on qp (XRC QPs: the XRC one).
  static uint8_t OnWire(const Qp* qp, uint8_t rc_opcode);

  // --- Multicast (multicast.cc) ---
  // A packet that arrived for a joined group (rx.group): a copy to every
  // attached UD QP.
  void DispatchMulticast(const wire::Packet& pkt, const transport::RxPacket& rx) REQUIRES(mu_);
  // Whether `ep` is one of this device's own endpoints (its GIDs, its port).
  bool IsOwnEndpoint(const transport::Endpoint& ep) const REQUIRES(mu_);

  // --- Responder (responder.cc) ---
  void HandleRequest(Qp* qp, const wire::Packet& pkt, const transport::RxPacket& rx) REQUIRES(mu_);
  void HandleRequestOne(Qp* qp, const wire::Packet& pkt, const transport::RxPacket& rx) REQUIRES(mu_);
  // The steps after the QP state (xrc_srq_ok: false for an XRC request
  // whose XRCETH names no SRQ of the QP's domain).
  void RunResponderSteps(Qp* qp, const wire::Packet& pkt, bool xrc_srq_ok) REQUIRES(mu_);
  // HandleRequestOne's steps, in order (responder.cc says what each checks).
  // A check returns whether the packet goes on; one that stops it has
  // answered it, dropped it or failed the QP.
  bool CheckQpState(Qp* qp) REQUIRES(mu_);
  bool CheckPsn(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  void HandleOutOfSequence(Qp* qp, const wire::Packet& pkt, int32_t diff) REQUIRES(mu_);
  void HandleDuplicate(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  bool CheckOpSequence(const Qp* qp, const wire::Packet& pkt) const REQUIRES(mu_);
  bool CheckLength(const Qp* qp, const wire::Packet& pkt) const REQUIRES(mu_);
  bool CheckRdAtomicResources(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  bool CheckRecvWqe(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  bool CheckRemoteAccess(Qp* qp, const wire::Packet& pkt, uint8_t** atomic_target) REQUIRES(mu_);
  bool Execute(Qp* qp, const wire::Packet& pkt, uint8_t* atomic_target) REQUIRES(mu_);
  bool ExecuteSend(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  bool ExecuteWrite(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  void Acknowledge(Qp* qp, const wire::Packet& pkt) REQUIRES(mu_);
  // Why a request is refused: RC answers (an RNR NAK, or an Invalid Request
  // NAK that fails the QP), UC loses the message and resynchronises.
  // kRecvBadBuffer: the receive WQE's own SGEs fail their checks (bad
  // lkey, another PD, no local write, an ODP page that cannot be faulted
  // in): the responder's local protection error, a Remote Operational
  // Error for the requester (IBA 9.7.5.2.4).
  enum class Refusal : uint8_t { kInvalid, kNoRecvWqe, kRecvTooShort, kRecvBadBuffer };
  void RefuseRequest(Qp* qp, uint32_t psn, Refusal why) REQUIRES(mu_);
  void HandleUdRequest(Qp* qp, const wire::Packet& pkt, const transport::RxPacket& rx) REQUIRES(mu_);
  // may_defer: a plain ACK a request of this QP may carry (ack_delay.cc).
  void QueueAck(Qp* qp, uint8_t syndrome, uint32_t psn, bool may_defer = false) REQUIRES(mu_);
  void SendAckNow(Qp* qp, uint8_t syndrome, uint32_t psn) REQUIRES(mu_);
  // Queues one ACK/NAK packet (BTH + AETH) for transmission.
  // sr: set the selective-retransmission bit (the peer showed it).
  // xrc: an XRC receive QP's (opcode XRC ACKNOWLEDGE).
  // seal: the sealed QP's (or lingering QP's) seal, else null.
  void EmitAck(uint32_t dest_qpn, uint32_t psn, uint8_t syndrome, uint32_t msn,
               uint16_t sgid_index, const Gid& dgid, bool sr = false, bool xrc = false,
               seal::QpSeal* seal = nullptr) REQUIRES(mu_);
  void FlushAck(Qp* qp) REQUIRES(mu_);
  // --- Delayed ACKs (ack_delay.cc) ---
  // Whether the plain ACK just queued on qp may wait for a request of qp's
  // to carry it (then it is not put on the work list).
  bool DeferAck(Qp* qp, uint8_t syndrome) REQUIRES(mu_);
  // qp has just sent a request: its deferred ACK follows it.
  void PiggybackAck(Qp* qp) REQUIRES(mu_);
  // Sends the deferred ACKs whose delay is over.
  void ExpireDeferredAcks(Clock::time_point now) REQUIRES(mu_);
  // qp leaves service (error, reset, destroy): its deferred ACK goes now.
  void SendDeferredAck(Qp* qp) REQUIRES(mu_);
  // The application is about to see these completions (ibv_poll_cq): the
  // ACKs held for the QPs of the receive completions among them (SEND,
  // WRITE_WITH_IMM) are sent now, the transmit batch with them.
  void SendAcksOfPolledReceives(const Completion* c, int n) REQUIRES(mu_);
  // The wake-up an ACK sent quietly owes its peer: rung now
  // (Transport::WakePeer), or carried by a request of the QP pushed with
  // its doorbell (SendNextPacket).
  void WakeOwedPeer(Qp* qp) REQUIRES(mu_);
  void AckWakeCarried(Qp* qp) REQUIRES(mu_);
  void ResponderError(Qp* qp, wire::NakCode code, uint32_t psn, WcStatus recv_status) REQUIRES(mu_);
  void SendReadResponses(Qp* qp, uint32_t first_psn, uint64_t va, uint32_t rkey, uint32_t length,
                         uint32_t skip_packets) REQUIRES(mu_);
  void SendAtomicAck(Qp* qp, uint32_t psn, uint64_t orig) REQUIRES(mu_);
  bool TakeRecvWqe(Qp* qp) REQUIRES(mu_);
  // IBA 10.2.9.3: SRQ_LIMIT_REACHED once the SRQ holds fewer WQEs than its
  // armed limit.
  void CheckSrqLimit(Srq* srq) REQUIRES(mu_);
  void CompleteRecv(Qp* qp, WcStatus status, WcOpcode opcode, uint32_t byte_len, uint32_t imm,
                    uint32_t wc_flags, uint32_t src_qp, bool solicited, uint8_t sl = 0) REQUIRES(mu_);
  // Scatter `len` bytes into the active receive WQE at recv_offset.
  // kInvalid is never returned: kRecvTooShort (the message outgrows the
  // buffer) or kRecvBadBuffer (ScatterSges refused an SGE), else nullopt.
  std::optional<Refusal> ScatterToRecv(Qp* qp, const uint8_t* data, uint32_t len) REQUIRES(mu_);

  // --- Per-QP counters (qp_counters.h; read by stats_publisher.cc) ---
  // The packet just committed was qp's.
  void CountTx(Qp* qp) REQUIRES(mu_) {
    ++qp->counters.tx_packets;
    qp->counters.tx_bytes += last_tx_bytes_;
    NoteQpCounters(qp);
  }
  // A received packet has passed the checks that make it qp's.
  void CountRx(Qp* qp, uint32_t bytes) REQUIRES(mu_) {
    ++qp->counters.rx_packets;
    qp->counters.rx_bytes += bytes;
    NoteQpCounters(qp);
  }
  // qp completes a WQE of its send (else receive) queue with an error
  // status: counted per QP and per device, flushes apart.
  void CountErrorCompletion(Qp* qp, WcStatus status, bool send) REQUIRES(mu_);
  // qp's counters or the facts its stats line shows (state, peer) changed:
  // the publisher copies its row at the next snapshot. By QP number, not
  // pointer, so a QP destroyed meanwhile needs no removal (the snapshot no
  // longer finds it); counters_noted keeps a QP listed once. Without a
  // publisher nothing is listed (nobody would empty the list).
  void NoteQpCounters(Qp* qp) REQUIRES(mu_) {
    if (qp->counters_noted || !qp_rows_wanted_) return;
    qp->counters_noted = true;
    qp_counters_noted_.push_back(qp->qpn);
  }
  std::vector<uint32_t> qp_counters_noted_ GUARDED_BY(mu_);
  // QPs destroyed since the last snapshot, for the publisher to forget.
  std::vector<uint32_t> qps_destroyed_ GUARDED_BY(mu_);
  // A stats publisher reads the two lists (set when it starts): only then
  // are they kept.
  bool qp_rows_wanted_ GUARDED_BY(mu_) = false;

  // --- Receive dispatch (engine.cc) ---
  void DispatchPacket(const transport::RxPacket& arrived) REQUIRES(mu_);
  // Sealed RC: the seal of QP `qpn` (live or lingering), or null
  // (*known: whether there is such a QP at all); opens a sealed packet into
  // *opened (false: dropped and counted).
  seal::QpSeal* SealFor(uint32_t qpn, bool* known) REQUIRES(mu_);
  bool OpenSealed(const transport::RxPacket& arrived, transport::RxPacket* opened) REQUIRES(mu_);
  uint16_t SourceIndex(const Qp* qp) const { return qp->attr.ah_attr.sgid_index; }

  // Gathers `len` bytes at `offset` of a WQE's data (inline or SGEs) into out.
  // Where the `len` payload bytes at `offset` of WQE `index` are, if one SGE
  // holds them and its lkey checks out; else null (gather them instead).
  const uint8_t* ResolvePayload(Qp* qp, uint64_t index, uint32_t offset, uint32_t len) REQUIRES(mu_);
  bool GatherWqe(Qp* qp, uint64_t index, uint32_t offset, uint32_t len, uint8_t* out) REQUIRES(mu_);
  // Runs a BIND_MW or LOCAL_INV WQE (memory_window.h) and completes it; a
  // failure completes it with MW_BIND_ERR and moves the QP to error.
  void ExecuteLocalWqe(Qp* qp, SendWqe& w) REQUIRES(mu_);
  // Whether a BIND_MW not yet executed names `mw` or `mr` (either may be
  // null): they must outlive it (memory_window_ops.cc).
  bool BindPending(const Mw* mw, const Mr* mr) const REQUIRES(mu_);
  // A destroyed QP takes its type 2 windows' bindings with it.
  void UnbindWindowsOf(const Qp* qp) REQUIRES(mu_);
  // Scatters into an SGE list at offset (local write required).
  bool ScatterSges(const Pd* pd, const Sge* sges, uint32_t num_sge, uint32_t offset,
                   const uint8_t* data, uint32_t len) REQUIRES(mu_);
};

}  // namespace softrnic::engine
