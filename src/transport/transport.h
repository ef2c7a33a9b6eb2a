// The packet transport under the engine: a burst interface in the style of
// eRPC's tx_burst/rx_burst.
//
// A transport owns one or more local endpoints (each one is a GID of the
// device, in order). The engine hands it packets laid out from the BTH to
// the end with 4 bytes of room for the ICRC; the transport frames the ICRC
// for the IP/UDP headers the kernel will put on (UDP, icrc_framing.h) or
// skips it (shared memory), and verifies it on receive, dropping and
// counting bad packets.
//
// The engine sees only this interface: which transport a device gets is
// decided in factory.cc, and what the engine needs beyond packets it asks
// for as properties and capabilities (the end of the class below).
//
// Thread-safety: a Transport is not internally synchronised; the engine
// calls it under its own lock.
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "faults/scenario.h"
#include "transport/address.h"

namespace softrnic::config {
class Environment;
}  // namespace softrnic::config

namespace softrnic::faults {
class FaultEventSink;  // faults/fault_events.h
}  // namespace softrnic::faults

namespace softrnic::transport {

class PeerMemory;  // peer_memory.h

// The shortest packet: a BTH and the ICRC.
inline constexpr uint32_t kMinPacketLength = 12 + 4;

struct TxPacket {
  const uint8_t* data = nullptr;  // BTH .. ICRC (ICRC bytes are written by the transport)
  uint32_t length = 0;            // including the 4 ICRC bytes
  uint16_t local_index = 0;       // which local endpoint sends it (the QP's sgid_index)
  Endpoint dst;
  // A packet in pieces (only to a transport whose accepts_split_payload()
  // is true): `data` holds the first head_length bytes (BTH and extension
  // headers); the payload is read from `payload` when the packet is sent
  // (the application's registered memory: no copy into a staging buffer);
  // then come length - 4 - head_length - payload_length (0-3) zero pad
  // bytes and the ICRC.
  const uint8_t* payload = nullptr;
  uint32_t payload_length = 0;
  uint32_t head_length = 0;
  // The last 4 bytes already hold the ICRC, framed for IPv4 ID 0 (a fault
  // injector's corrupted copy, fault_transport.h): sent as they are, alone
  // in their datagram. Whole packets only.
  bool icrc_included = false;
};

// Whether a packet in pieces adds up: a head holding at least the BTH,
// head + payload + ICRC within length, at most 3 pad bytes.
inline bool SplitLayoutValid(const TxPacket& p) {
  return p.head_length >= 12 && uint64_t{p.head_length} + p.payload_length + 4 <= p.length &&
         p.length - 4 - p.head_length - p.payload_length <= 3;
}

// Writes packet p's bytes before the ICRC (length - 4 of them) to `out`,
// whether it is in pieces or not.
inline void FlattenTxPacket(const TxPacket& p, uint8_t* out) {
  if (p.payload == nullptr) {
    std::memcpy(out, p.data, p.length - 4);
    return;
  }
  std::memcpy(out, p.data, p.head_length);
  std::memcpy(out + p.head_length, p.payload, p.payload_length);
  std::memset(out + p.head_length + p.payload_length, 0,
              p.length - 4 - p.head_length - p.payload_length);
}

struct RxPacket {
  uint8_t* data = nullptr;  // buffer owned by the transport until the next RecvBurst
  uint32_t length = 0;      // BTH .. ICRC inclusive; ICRC already verified
  uint16_t local_index = 0; // the local endpoint it arrived on
  Endpoint src;
  // IPv4 TOS / IPv6 traffic class if the transport knows it (ECN bits), else 0.
  uint8_t traffic_class = 0;
  // The multicast group it was sent to (a group joined with JoinMulticast;
  // valid until the next RecvBurst), or null for a packet to this device's
  // own endpoint. Every producer sets it.
  const Gid* group = nullptr;
  // It came through a same-host shared-memory ring (not a network): only
  // then are softrnic's placement bits honoured (wire::Bth::placed). Every
  // producer sets it.
  bool via_shm = false;
};

struct TransportCounters {
  uint64_t tx_packets = 0, tx_bytes = 0, tx_errors = 0;
  uint64_t rx_packets = 0, rx_bytes = 0;
  uint64_t rx_icrc_errors = 0, rx_runts = 0;
  // Packets whose ICRC matched only with another IPv4 ID than their index in
  // the received datagram (a GSO run cut or regrouped on the way).
  uint64_t rx_icrc_id_retries = 0;
  // CRCs computed while trying other IPv4 IDs (matched or not): what ID
  // retries cost. Only datagrams that can be GSO segments from a source
  // with recent valid traffic are retried (udp_receive.h, review M7).
  uint64_t rx_icrc_id_retry_crcs = 0;
  // The fault transport's (fault_transport.h): drops of every kind
  // (drop, outage, rate and pause queue drops), duplicates, reorders,
  // corrupted packets, packets held for delay/jitter/rate or by a pause,
  // received packets marked ECN CE.
  uint64_t injected_drops = 0, injected_dups = 0, injected_reorders = 0, injected_corrupts = 0;
  uint64_t injected_delays = 0, injected_pauses = 0, injected_ecn_marks = 0;
  // Sends refused because the socket buffer was full (EAGAIN/ENOBUFS); SendBurst
  // returned fewer than offered and the caller retries the rest.
  uint64_t tx_busy = 0;
  // Shared-memory transport (shm_transport.h): packets through rings, and
  // doorbell datagrams (a sender waking a sleeping target; not errors).
  uint64_t shm_tx_packets = 0, shm_rx_packets = 0;
  uint64_t shm_tx_bytes = 0;  // packet bytes written to peers' rings
  uint64_t doorbells_sent = 0, rx_doorbells = 0;
  // Naps of same-host peers' progress threads ended because our packets
  // waited unread in their rings (shm_stall_alarm.cc).
  uint64_t shm_stall_alarms = 0;
};

// The doorbell datagram a shared-memory sender sends to the UDP endpoint of
// a target whose progress thread sleeps in epoll: 8 bytes, recognised and
// dropped by the UDP receive path (shorter than any RoCE packet).
inline constexpr uint8_t kShmDoorbell[8] = {'S', 'R', 'N', 'C', 'D', 'B', 'L', '1'};

class Transport {
 public:
  virtual ~Transport() = default;

  // The local endpoints, in GID-table order. Index 0 is the default.
  virtual std::span<const Endpoint> locals() const = 0;

  // Sends up to n packets; returns how many were handed to the kernel (the
  // rest may be retried later; RC recovers loss anyway). Never blocks.
  virtual int SendBurst(const TxPacket* packets, int n) = 0;
  // Whether SendBurst takes packets in pieces (TxPacket::payload).
  virtual bool accepts_split_payload() const { return false; }

  // Receives up to n packets without blocking; returns how many.
  // Buffers stay valid until the next RecvBurst call. Sets every field of
  // each packet it returns: the engine reuses one array for all calls.
  virtual int RecvBurst(RxPacket* packets, int n) = 0;

  // A descriptor that becomes readable when RecvBurst would return packets
  // (an epoll fd over the sockets), for the engine's idle sleep.
  virtual int pollable_fd() const = 0;
  // A descriptor readable when responses arrived for this side's requests
  // on sockets of their own (UDP reply sockets), or -1 when responses come
  // through pollable_fd(). The progress thread waits on it only when no
  // application thread is expected to poll for them (docs/progress.md).
  virtual int reply_pollable_fd() const { return -1; }

  virtual const TransportCounters& counters() const = 0;

  // The engine's progress thread is about to sleep in epoll on pollable_fd().
  // A transport with inputs epoll cannot see (shared-memory rings) publishes
  // that it sleeps and returns false if input arrived meanwhile (then the
  // engine runs another pass instead of sleeping). Called with the engine
  // lock held; several threads may sleep at once (an application thread
  // blocked in ibv_get_cq_event waits on pollable_fd() too), and each call
  // is followed by one WokeUp() from the same thread, whatever it returned.
  virtual bool PrepareToSleep() { return true; }
  // The sleeping thread woke up (or did not sleep). Called WITHOUT the
  // engine lock: an implementation may only touch atomics here.
  virtual void WokeUp() {}

  // The word the engine's progress thread naps on while an application
  // thread polls and takes the packets itself (engine/progress/progress.cc):
  // the thread sets it to 1 and futex-waits while it stays 1 (at most its
  // own bound); whoever needs the thread sets it to 0 and wakes it
  // (SharedFutexWake). A shared-memory transport's word is in its segment,
  // so that a same-host sender whose packets wait unread can end the nap
  // (ShmTransport::SoundStallAlarms). Null: the thread naps on a timer only.
  virtual std::atomic<uint32_t>* nap_word() { return nullptr; }

  // Quiet sends (engine/roles/ack_delay.cc: an ACK sent when the application
  // polls the completion it acknowledges, which the peer needs only when
  // it next looks): while set, SendBurst wakes no sleeping peer; a packet
  // put in a shared-memory ring is published there, where the peer finds
  // it at its next pass, but its doorbell is not rung. A datagram is sent
  // as always (its arrival is the peer's wake-up). WakePeer rings what a
  // quiet packet did not: `dst`'s doorbell, if it sleeps.
  virtual void SetQuiet(bool quiet) { (void)quiet; }
  virtual void WakePeer(const Endpoint& dst, uint32_t dest_qpn) { (void)dst, (void)dest_qpn; }

  // After SendBurst returned short: true if the receiver is known to drain
  // soon, so the caller should keep offering for a while (bounded) instead
  // of giving up after a few tries as for a full socket buffer.
  virtual bool WaitWhenBusy() const { return false; }

  // Whether this transport knows that a packet the engine sent toward
  // `dst`'s QP `dest_qpn`, or the peer's answer to our QP `local_qpn`, is
  // still on its way rather than lost: unread in a shared-memory ring while
  // the peer keeps reading (it read something within the last `period`),
  // or waiting in one of our own rings. The engine's Local ACK Timeout
  // (IBA 9.7.6.1.3) then waits another period instead of spending a retry:
  // the timer exists to find lost packets, and a ring loses none, so on a
  // host with more runnable threads than CPUs a late reader would
  // otherwise be answered with copies of what it has not read yet.
  // Default: nothing is known (a datagram may always be lost).
  virtual bool DeliveryPending(const Endpoint& dst, uint32_t dest_qpn, uint32_t local_qpn,
                               std::chrono::nanoseconds period) {
    (void)dst, (void)dest_qpn, (void)local_qpn, (void)period;
    return false;
  }

  // --- What the engine decides by (docs/engine.md, "Transports") ---
  // Properties of the transport's current traffic, not of its kind: they
  // may change as peers come and go. Lock-free: the progress thread reads
  // them without the engine lock.
  //
  // Each SendBurst costs a system call, so PostSend's doorbell batching
  // (holding a streaming QP's packets for the next burst) saves one per post.
  virtual bool batching_saves_syscalls() const { return true; }
  // A plain ACK delayed to ride behind its QP's next request saves the peer
  // a wake-up (engine/roles/ack_delay.cc).
  virtual bool delayed_acks_save_wakeups() const { return true; }
  // While the engine's progress thread sleeps, senders pay per packet to
  // wake it (a doorbell), so it stays awake, off the CPU, while an
  // application polls (engine/progress/progress.cc).
  virtual bool sleeping_costs_senders() const { return false; }

  // --- Multicast (IBA 10.5.2.5: UD datagrams to a multicast GID) ---
  // Starts receiving what is sent to `group` (a multicast GID: IPv4-mapped
  // 224.0.0.0/4, as RoCE v2 carries IPv4 multicast, or IPv6 ff00::/8) at
  // this device's port: such packets come out of RecvBurst with
  // RxPacket::group set. Joining a group twice is the caller's bug (the
  // engine counts attachments). 0, or an errno: EOPNOTSUPP without
  // multicast, ENOMEM when max_multicast_groups() are joined, another errno
  // the socket calls gave. Sending to a group needs nothing: a TxPacket
  // whose dst is the group.
  virtual int JoinMulticast(const Gid& group) {
    (void)group;
    return EOPNOTSUPP;
  }
  virtual void LeaveMulticast(const Gid& group) { (void)group; }
  // How many groups JoinMulticast holds at once: the device's
  // max_mcast_grp (ibv_query_device), which the engine enforces. 0: the
  // transport joins none (the device then reports no multicast and
  // ibv_attach_mcast is EOPNOTSUPP, engine/queues/multicast.cc). A transport that
  // wraps another reports the inner one's.
  virtual uint32_t max_multicast_groups() const { return 0; }

  // The smallest MTU (bytes of IP packet) of the links the endpoints are
  // on (link_mtu.h), from which the engine derives the port's active MTU
  // when none is configured; 0: unknown. A wrapping transport reports the
  // inner one's.
  virtual uint32_t link_mtu() const { return 0; }

  // Bytes of packets that may be in flight towards one destination before
  // the peer's receive buffer overflows, shared by every QP sending there
  // (engine/roles/dest_window.h); 0: no bound (the transport pushes back instead
  // of dropping). A datagram transport reports its own socket receive
  // buffer, the best guess of a peer that runs the same software on a host
  // set up alike. A wrapping transport reports the inner one's.
  virtual uint32_t inflight_budget_bytes() const { return 0; }

  // --- The host NIC (docs/host-nic.md) ---
  // The lane the host NIC daemon gave this device, the top byte of every
  // QPN (and rdma_cm comm ID) it may hand out, by which the host's shared
  // port steers packets to this process; -1: the device owns its addresses
  // itself and any 24-bit QPN will do. A wrapping transport reports the
  // inner one's.
  virtual int qpn_lane() const { return -1; }
  // Asks that CM REQs for rdma_cm's (port space, port) arriving at the
  // host's shared addresses reach this process (claim) or no longer do.
  // 0 (also when there is no host NIC: the device's own addresses need no
  // steering), EADDRINUSE (another process of the host listens there), or
  // the errno of the exchange with the daemon.
  virtual int ClaimCmService(uint16_t port_space, uint16_t port, bool claim) {
    (void)port_space, (void)port, (void)claim;
    return 0;
  }

  // --- The fault lab (docs/fault-lab.md) ---
  // When a packet must leave or be delivered later than now (a delayed,
  // rate-limited or paused packet of the fault transport): the earliest
  // such time, so the progress thread wakes for it instead of sleeping on
  // the descriptors; nullopt: nothing waits. A wrapping transport reports
  // its own and the inner one's earliest.
  virtual std::optional<std::chrono::steady_clock::time_point> next_deadline() const {
    return std::nullopt;
  }
  // Where to report each fault applied (the engine's trace); null: report
  // nothing. Only the fault transport has anything to report.
  virtual void SetFaultEventSink(faults::FaultEventSink* sink) { (void)sink; }

  // --- Capabilities (null: not offered) ---
  // Same-host peers' memory for direct one-sided operations (peer_memory.h).
  virtual PeerMemory* peer_memory() { return nullptr; }
};

struct UdpConfig {
  // Addresses to bind, e.g. {"10.0.0.1", "127.0.0.1"}; empty means automatic
  // (every non-loopback IPv4 address of the host whose port is free, then a
  // per-process loopback address 127.x.y.z derived from the pid).
  std::vector<std::string> bind_addresses;
  uint16_t port = 4791;
  // The fault lab's scenario (SOFTRNIC_FAULTS, SOFTRNIC_FAULTS_FILE,
  // faults/scenario_parse.h): with rules, the transport is wrapped in the
  // fault transport (fault_transport.h), UDP to every peer.
  faults::Scenario faults;
  // Why the scenario the environment asked for could not be read; not
  // empty: CreateTransport fails with it (running without the faults asked
  // for would make a test pass for the wrong reason).
  std::string faults_error;
  // UDP segmentation offload: runs of equal-sized packets to one peer leave
  // in one sendmsg (UDP_SEGMENT) and arrive coalesced (UDP_GRO), so the
  // kernel's per-datagram cost is paid once per run. Off when faults are
  // injected (those act per packet). SOFTRNIC_GSO=0 turns it off.
  bool segmentation = true;
  // A reply socket per endpoint (udp_transport.cc): responses to this
  // side's RC requests from softrnic peers arrive apart from requests.
  // SOFTRNIC_REPLY_SOCKET=0 turns it off.
  bool reply_sockets = true;
  // The host NIC (docs/host-nic.md): with automatic binding at a fixed
  // port, the host's addresses are shared with the user's other processes
  // through nicd, which steers by QPN. SOFTRNIC_HOST_NIC=0 turns it off
  // (then the first process owns them, as before); SOFTRNIC_NICD names
  // the daemon's executable ("": beside the library).
  bool host_nic = true;
  std::string nicd_path;
};

// Reads SOFTRNIC_BIND, SOFTRNIC_PORT, SOFTRNIC_FAULTS, SOFTRNIC_FAULTS_FILE,
// SOFTRNIC_GSO and SOFTRNIC_REPLY_SOCKET from `env`; a bad value is
// reported on stderr and keeps its default, except a bad fault scenario,
// which is kept in faults_error.
UdpConfig UdpConfigFromEnvironment(const config::Environment& env);

}  // namespace softrnic::transport
