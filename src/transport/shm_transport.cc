#include "transport/shm_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/fd_table.h"
#include "common/process_exists.h"
#include "common/secure_random.h"
#include "transport/shm_registry.h"
#include "log/log.h"

namespace softrnic::transport {
namespace {

constexpr uint32_t kMinPacket = 12 + 4;  // BTH + ICRC
constexpr int kMaxRx = 64;
// While rings are active and UDP has been quiet this many polls, UDP is
// polled only every kUdpPollEvery calls (the idle sleep still waits on the
// sockets, so UDP traffic is never missed, only noticed a few polls later).
constexpr uint32_t kUdpQuietAfter = 64;
constexpr uint64_t kUdpPollEvery = 32;
constexpr auto kNegativeRetry = std::chrono::milliseconds(200);
constexpr auto kPeerCheckInterval = std::chrono::milliseconds(5);
// Descriptors the table is grown to hold when the device opens
// (common/fd_table.h): a pidfd per peer device, and room for the
// application's own.
constexpr int kFdsReserved = 4 * static_cast<int>(kShmRings);


}  // namespace

ShmRingPeer::~ShmRingPeer() {
  if (pidfd >= 0) close(pidfd);
}

std::unique_ptr<ShmTransport> ShmTransport::Create(std::unique_ptr<Transport> udp,
                                                   bool report_fallbacks, std::string* error) {
  std::unique_ptr<ShmTransport> t(new ShmTransport(std::move(udp), report_fallbacks));
  if (!t->Init(error)) return nullptr;
  return t;
}

bool ShmTransport::Init(std::string* error) {
  if (!own_.Create(error)) return false;
  netns_ = NetnsInode();
  ShmSegmentHeader* h = own_.header();
  const auto eps = udp_->locals();
  h->n_locals = static_cast<uint32_t>(std::min<size_t>(eps.size(), kShmMaxLocals));
  for (uint32_t i = 0; i < h->n_locals; ++i) {
    h->local_ip[i] = eps[i].gid.IsV4Mapped() ? eps[i].gid.Ipv4() : 0;
    h->local_port[i] = eps[i].port;
    own_locals_.emplace_back(h->local_ip[i], h->local_port[i]);
  }
  for (uint32_t i = 0; i < kShmRings; ++i) consumers_[i] = ShmRingConsumer(&own_, i);
  sender_id_ = (uint64_t{static_cast<uint32_t>(getpid())} << 32) | (SecureRandom32() | 1);
  // A pidfd per peer device (up to kShmRings of them) is opened later
  // under the engine lock: the descriptor table grows now instead.
  ReserveFdTable(own_.fd(), kFdsReserved);
  rx_buf_.reset(new uint8_t[size_t{kMaxRx} * kShmSlotPayload]);
  doorbell_fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  // Publish last: peers may use the segment as soon as a link exists.
  ShmSweepStaleLinks();
  // An address shared through the host NIC (docs/host-nic.md) is every
  // process's at once: its link carries this device's lane (the top byte
  // of its QPNs), and a sender looks it up by the lane of the QPN it sends
  // to (Lookup).
  const int lane = udp_->qpn_lane();
  for (uint32_t i = 0; i < h->n_locals; ++i) {
    if (h->local_ip[i] == 0) continue;
    const bool shared = lane >= 0 && (ntohl(h->local_ip[i]) >> 24) != 127;
    std::string path =
        ShmPublish(netns_, h->local_ip[i], h->local_port[i], own_.fd(), shared ? lane : -1);
    if (!path.empty()) links_.push_back(std::move(path));
  }
  return true;
}

ShmTransport::~ShmTransport() {
  for (const std::string& l : links_) ShmUnpublish(l, own_.fd());
  // Release our rings in peers' segments.
  for (auto& p : peers_) {
    if (p->ring >= 0 && !p->dead) {
      uint64_t expect = sender_id_;
      p->seg.ring(static_cast<uint32_t>(p->ring))
          ->owner.compare_exchange_strong(expect, 0, std::memory_order_acq_rel);
    }
  }
  if (doorbell_fd_ >= 0) close(doorbell_fd_);
  if (peer_deaths_fd_ >= 0) close(peer_deaths_fd_);
}

const TransportCounters& ShmTransport::counters() const {
  // UDP's counters plus the shared-memory path's own.
  merged_ = udp_->counters();
  merged_.tx_errors += counters_.tx_errors;
  merged_.tx_busy += counters_.tx_busy;
  merged_.rx_runts += counters_.rx_runts;
  merged_.shm_tx_packets = counters_.shm_tx_packets;
  merged_.shm_tx_bytes = counters_.shm_tx_bytes;
  merged_.shm_rx_packets = counters_.shm_rx_packets;
  merged_.doorbells_sent = counters_.doorbells_sent + raced_doorbells_.load(std::memory_order_relaxed);
  merged_.shm_stall_alarms = counters_.shm_stall_alarms;
  return merged_;
}

bool ShmTransport::RingTakeable(uint64_t owner) const {
  if (owner == 0) return true;
  // A dead sender's ring is reclaimed.
  return (owner >> 32) != (sender_id_ >> 32) && !ProcessExists(static_cast<pid_t>(owner >> 32));
}

bool ShmTransport::ClaimRing(ShmRingPeer* peer) {
  // Free rings first: judging an owned ring asks the kernel whether its
  // owner lives (kill(pid, 0)), and a segment whose 127 other peers each
  // own a ring made every claim 127 system calls (128 processes all-to-all:
  // bench/scale/shm_all_to_all.cc). Dead owners' rings only when none is free.
  // Each sender starts at a place of its own: every ring header lies on a
  // page of its own, which a first look maps (a page fault), and senders
  // that all started at ring 0 looked at every taken ring before theirs.
  const uint32_t start = static_cast<uint32_t>((sender_id_ >> 1) % kShmRings);  // bit 0 is always set
  for (const bool reclaim : {false, true}) {
    for (uint32_t k = 0; k < kShmRings; ++k) {
      if (TryClaimRing(peer, (start + k) % kShmRings, reclaim)) return true;
    }
  }
  return false;
}

bool ShmTransport::TryClaimRing(ShmRingPeer* peer, uint32_t i, bool reclaim) {
  ShmRingHeader* r = peer->seg.ring(i);
  uint64_t owner = r->owner.load(std::memory_order_acquire);
  if (owner != 0 && (!reclaim || !RingTakeable(owner))) return false;
  if (!r->owner.compare_exchange_strong(owner, sender_id_, std::memory_order_acq_rel)) return false;
  peer->ring = static_cast<int>(i);
  // Continue from the current tail: packets a dead sender left are still
  // consumed in order (they are addressed to QPs of that sender's peers).
  peer->producer = ShmRingProducer(&peer->seg, i);
  peer->reads_seen = peer->seg.header()->packets_read.load(std::memory_order_relaxed);
  peer->reads_moved_at = std::chrono::steady_clock::now();
  MarkRingActive(peer->seg.header(), i);
  return true;
}

ShmPathStep ShmTransport::OpenPeer(uint32_t ip, uint16_t port, int lane, ShmRingPeer* peer,
                                   ShmPathVerdict* why) const {
  uint32_t pid = 0;
  const int fd = ShmLookup(netns_, ip, port, &pid, why, lane);
  if (fd < 0) return why->step;
  if (!peer->seg.Attach(fd, pid, &why->detail)) return ShmPathStep::kSegmentRejected;
  const ShmSegmentHeader* h = peer->seg.header();
  peer->pid = pid;
  peer->nonce = h->nonce;
  // This device itself (a QP connected to a QP of the same device): UDP.
  // Our own engine drains the ring only between passes, so a burst larger
  // than the ring would be lost, where the socket buffer absorbs it.
  if (peer->nonce == own_.header()->nonce) return ShmPathStep::kOwnDevice;
  const uint32_t n = std::min(h->n_locals, kShmMaxLocals);
  bool listed = false;
  for (uint32_t i = 0; i < n; ++i) {
    peer->locals.emplace_back(h->local_ip[i], h->local_port[i]);
    if (h->local_ip[i] == ip && h->local_port[i] == port) listed = true;
  }
  // The link was replaced between readlink and open.
  return listed ? ShmPathStep::kShared : ShmPathStep::kEndpointNotListed;
}

std::shared_ptr<ShmRingPeer> ShmTransport::Attach(uint32_t ip, uint16_t port, int lane) {
  auto peer = std::make_shared<ShmRingPeer>();
  ShmPathVerdict why;
  const ShmPathStep step = OpenPeer(ip, port, lane, peer.get(), &why);
  if (step == ShmPathStep::kSegmentRejected && report_fallbacks_ && !warned_) {
    warned_ = true;
    SOFTRNIC_LOG(kWarn, "SOFTRNIC_TRANSPORT=shm: peer pid %u: %s; using UDP", why.pid,
                 why.detail.c_str());
  }
  if (step != ShmPathStep::kShared) {
    // Every time (a route is retried every kNegativeRetry): SOFTRNIC_LOG=debug
    // shows why a same-host peer's traffic went over UDP, which the counters
    // cannot (docs/benchmarks.md, "128 processes all-to-all").
    SOFTRNIC_LOG(kDebug, "shm route to %s:%u: %s%s%s; UDP for now", Gid::FromIpv4(ip).ToString().c_str(),
                 unsigned{port}, ShmPathStepName(step), why.detail.empty() ? "" : ": ",
                 why.detail.c_str());
    return nullptr;
  }
  // The same peer device may already be mapped under another endpoint.
  for (auto& p : peers_) {
    if (p->pid == peer->pid && p->nonce == peer->nonce && !p->dead) return p;
  }
  peer->pidfd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(peer->pid), 0));
  if (!ClaimRing(peer.get())) {
    SOFTRNIC_LOG(kDebug, "shm route to %s:%u: %s; UDP for now", Gid::FromIpv4(ip).ToString().c_str(),
                 unsigned{port}, ShmPathStepName(ShmPathStep::kNoFreeRing));
    if (report_fallbacks_ && !warned_) {
      warned_ = true;
      SOFTRNIC_LOG(kWarn,
                   "SOFTRNIC_TRANSPORT=shm: peer pid %u has no free ring; using UDP",
                   peer->pid);
    }
    return nullptr;
  }
  WatchPeerDeath(peer.get());  // only peers kept: it counts those asked by pid
  peers_.push_back(peer);
  has_peers_.store(true, std::memory_order_relaxed);
  return peer;
}

ShmPathVerdict ShmTransport::ExplainPath(const Endpoint& dst) {
  ShmPathVerdict why;
  if (!dst.gid.IsV4Mapped()) {
    why.step = ShmPathStep::kNotIpv4;
    return why;
  }
  const uint32_t ip = dst.gid.Ipv4();
  // A peer this device already sends to keeps its ring.
  for (const auto& p : peers_) {
    if (p->dead) continue;
    for (const auto& [pip, pport] : p->locals) {
      if (pip == ip && pport == dst.port) {
        why.step = ShmPathStep::kShared;
        why.pid = p->pid;
        why.link = ShmEndpointPath(netns_, ip, dst.port);
        CountExports(p->seg, &why);
        return why;
      }
    }
  }
  ShmRingPeer peer;
  why.step = OpenPeer(ip, dst.port, -1, &peer, &why);
  if (why.step != ShmPathStep::kShared) return why;
  bool free_ring = false;
  for (uint32_t i = 0; i < kShmRings && !free_ring; ++i)
    free_ring = RingTakeable(peer.seg.ring(i)->owner.load(std::memory_order_acquire));
  if (!free_ring) why.step = ShmPathStep::kNoFreeRing;
  CountExports(peer.seg, &why);
  return why;
}

void ShmTransport::CountExports(const ShmSegment& seg, ShmPathVerdict* why) {
  // Hostile input like the rest of the segment: only counted.
  for (uint32_t i = 0; i < kShmQpSlots; ++i)
    if (seg.qp_slot(i)->qpn.load(std::memory_order_relaxed) != 0) ++why->exported_qps;
  for (uint32_t i = 0; i < kShmMrSlots; ++i)
    if (seg.mr_slot(i)->state.load(std::memory_order_relaxed) & 1) ++why->exported_mrs;
}

ShmTransport::Route* ShmTransport::CachedRoute(uint64_t key) {
  if (last_route_ != nullptr && last_key_ == key) {
    if (last_route_->peer ? !last_route_->peer->dead
                          : std::chrono::steady_clock::now() < last_route_->retry_at)
      return last_route_;
  }
  auto it = routes_.find(key);
  if (it == routes_.end()) return nullptr;
  Route& r = it->second;
  if ((r.peer && !r.peer->dead) || (!r.peer && std::chrono::steady_clock::now() < r.retry_at)) {
    last_key_ = key;
    last_route_ = &r;
    return &r;
  }
  return nullptr;
}

ShmTransport::Route* ShmTransport::StoreRoute(uint64_t key, uint32_t ip, uint16_t port,
                                              std::shared_ptr<ShmRingPeer> peer) {
  Route r;
  r.peer = std::move(peer);
  if (r.peer) {
    for (size_t i = 0; i < r.peer->locals.size(); ++i)
      if (r.peer->locals[i].first == ip && r.peer->locals[i].second == port)
        r.peer_local_index = static_cast<uint16_t>(i);
  } else {
    r.retry_at = std::chrono::steady_clock::now() + kNegativeRetry;
  }
  last_route_ = nullptr;  // the map may rehash
  Route& slot = routes_[key];
  slot = std::move(r);
  last_key_ = key;
  last_route_ = &slot;
  return &slot;
}

ShmTransport::Route* ShmTransport::Lookup(const Endpoint& dst, uint32_t dest_qpn) {
  if (!dst.gid.IsV4Mapped()) return nullptr;
  const uint32_t ip = dst.gid.Ipv4();
  // A device's own address: one route for every QP sent there.
  Route* own = CachedRoute(Key(ip, dst.port, kOwnAddress));
  if (own == nullptr) own = StoreRoute(Key(ip, dst.port, kOwnAddress), ip, dst.port,
                                       Attach(ip, dst.port, -1));
  if (own->peer) return own;
  // Else a host NIC address shared by several processes (docs/host-nic.md):
  // a route per lane, the top byte of the destination QPN.
  const uint32_t lane = (dest_qpn >> 16) & 0xff;
  if (Route* r = CachedRoute(Key(ip, dst.port, lane))) return r;
  Route* r = StoreRoute(Key(ip, dst.port, lane), ip, dst.port,
                        Attach(ip, dst.port, static_cast<int>(lane)));
  if (!r->peer && report_fallbacks_ && !warned_) {
    warned_ = true;
    SOFTRNIC_LOG(kWarn,
                 "SOFTRNIC_TRANSPORT=shm: %s:%u is not a same-host softrnic peer "
                 "this process can map; using UDP",
                 dst.gid.ToString().c_str(), unsigned{dst.port});
  }
  return r;
}

std::shared_ptr<ShmPeer> ShmTransport::PeerFor(const Endpoint& dst, uint32_t dest_qpn) {
  Route* r = Lookup(dst, dest_qpn);
  return r ? r->peer : nullptr;
}

void ShmTransport::PublishDirty() {
  for (ShmRingPeer* p : dirty_) {
    p->dirty = false;
    p->producer.Publish();
    // Only quiet packets (SetQuiet): published, where the peer's next pass
    // finds them (a peer about to sleep re-checks its rings after raising
    // its flag), but a sleeping peer is left asleep.
    if (!p->wake) continue;
    p->wake = false;
    WatchForStall(p);
    // Dekker with the target's PrepareToSleep: our tail store, then its flag;
    // its flag store, then our tail. seq_cst on both sides means at least one
    // of us sees the other.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    RingDoorbellIfSleeping(p);
  }
  dirty_.clear();
}

void ShmTransport::RingDoorbellIfSleeping(ShmRingPeer* p) {
  std::atomic<uint32_t>& sleeping = p->seg.header()->sleeping;
  if (sleeping.load(std::memory_order_relaxed) != 0 &&
      sleeping.exchange(0, std::memory_order_acq_rel) != 0 && !p->locals.empty()) {
    // The target sleeps in epoll on its UDP sockets: ring its doorbell once.
    const auto& [ip, port] = p->locals[DoorbellEndpoint(p->locals)];
    if (ip != 0) SendDoorbell(ip, port);
  }
}

size_t ShmTransport::DoorbellEndpoint(const std::vector<std::pair<uint32_t, uint16_t>>& locals) {
  // The per-process loopback endpoint when there is one: a host NIC address
  // is shared by every process of the user, and a doorbell carries no QPN
  // for the steering program to read (docs/host-nic.md), so one rung there
  // could wake another process.
  for (size_t i = 0; i < locals.size(); ++i)
    if (locals[i].first != 0 && (ntohl(locals[i].first) >> 24) == 127) return i;
  return 0;
}

void ShmTransport::SendDoorbellDatagram(uint32_t ip, uint16_t port) const {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = ip;
  sin.sin_port = htons(port);
  (void)sendto(doorbell_fd_, kShmDoorbell, sizeof(kShmDoorbell), MSG_DONTWAIT,
               reinterpret_cast<const sockaddr*>(&sin), sizeof(sin));
}

void ShmTransport::SendDoorbell(uint32_t ip, uint16_t port) {
  SendDoorbellDatagram(ip, port);
  ++counters_.doorbells_sent;
}

void ShmTransport::WakePeer(const Endpoint& dst, uint32_t dest_qpn) {
  Route* r = Lookup(dst, dest_qpn);
  if (r == nullptr || !r->peer) return;  // UDP: the datagram woke it
  // Dekker with the target's PrepareToSleep, as in PublishDirty: the quiet
  // packet's tail was published before.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  RingDoorbellIfSleeping(r->peer.get());
}

void ShmTransport::NotifyDirectRecv(ShmPeer& peer) {
  // Every ShmPeer this transport hands out (PeerFor) is a ShmRingPeer.
  auto* p = static_cast<ShmRingPeer*>(&peer);
  // Dekker with the target's PrepareToSleep, as for a ring's tail: our
  // count, then its flag; its flag, then our count.
  p->seg.header()->direct_recvs.fetch_add(1, std::memory_order_seq_cst);
  RingDoorbellIfSleeping(p);
}

bool ShmTransport::TakeDirectRecvs() {
  const uint64_t now = own_.header()->direct_recvs.load(std::memory_order_acquire);
  if (now == direct_recvs_seen_) return false;
  direct_recvs_seen_ = now;
  return true;
}

int ShmTransport::SendBurst(const TxPacket* packets, int n) {
  ring_full_ = false;
  const auto eps = udp_->locals();
  // The shared-memory peer a packet goes to, or null for UDP.
  auto peer_of = [&](const TxPacket& p, uint16_t* peer_index) -> ShmRingPeer* {
    if (p.local_index >= eps.size() || !eps[p.local_index].gid.IsV4Mapped()) return nullptr;
    // BTH byte 5: the top byte of DestQP, a host NIC address's lane.
    const uint32_t dest_qpn = p.length > 7 ? uint32_t{p.data[5]} << 16 : 0;
    Route* r = Lookup(p.dst, dest_qpn);
    if (r == nullptr || !r->peer) return nullptr;
    *peer_index = r->peer_local_index;
    return r->peer.get();
  };
  int i = 0;
  int consumed = n;
  while (i < n) {
    const TxPacket& p = packets[i];
    uint16_t peer_index = 0;
    ShmRingPeer* peer = peer_of(p, &peer_index);
    if (peer == nullptr) {
      // A run of UDP packets goes out in one call.
      int j = i + 1;
      uint16_t ignored;
      while (j < n && peer_of(packets[j], &ignored) == nullptr) ++j;
      const int sent = udp_->SendBurst(packets + i, j - i);
      if (sent < j - i) {
        consumed = i + sent;
        break;
      }
      i = j;
      continue;
    }
    if (p.data == nullptr || p.length < kMinPacket || p.length > kShmSlotPayload) {
      ++counters_.tx_errors;
      ++i;
      continue;
    }
    ShmSlotHeader h{};
    h.local_index = peer_index;
    h.src_ip = eps[p.local_index].gid.Ipv4();
    h.src_port = eps[p.local_index].port;
    const uint8_t* bytes = p.data;
    if (p.payload != nullptr) {
      if (!SplitLayoutValid(p)) {
        ++counters_.tx_errors;
        ++i;
        continue;
      }
      FlattenTxPacket(p, flat_.data());
      std::memset(flat_.data() + p.length - 4, 0, 4);
      bytes = flat_.data();
    }
    if (!peer->producer.Write(h, bytes, p.length)) {
      // Ring full: tell the caller like a full socket buffer; it waits for
      // the consumer (WaitWhenBusy) and offers the rest again. Meanwhile our
      // own inbound rings are emptied into the backlog, so a peer that is
      // itself waiting on a full ring toward us can go on.
      DrainInboundToBacklog();
      ++counters_.tx_busy;
      ring_full_ = true;
      consumed = i;
      break;
    }
    ++counters_.shm_tx_packets;
    counters_.shm_tx_bytes += p.length;
    if (!peer->dirty) {
      peer->dirty = true;
      dirty_.push_back(peer);
    }
    if (!quiet_) peer->wake = true;
    ++i;
  }
  PublishDirty();
  return consumed;
}

bool ShmTransport::DeliveryPending(const Endpoint& dst, uint32_t dest_qpn, uint32_t local_qpn,
                                   std::chrono::nanoseconds period) {
  if (!dst.gid.IsV4Mapped()) return false;
  // Only a route already taken (Lookup would attach to a new one): the
  // address's own, else the destination lane's.
  auto it = routes_.find(Key(dst.gid.Ipv4(), dst.port, kOwnAddress));
  if (it == routes_.end() || !it->second.peer)
    it = routes_.find(Key(dst.gid.Ipv4(), dst.port, (dest_qpn >> 16) & 0xff));
  if (it == routes_.end() || !it->second.peer || it->second.peer->dead) return false;
  ShmRingPeer* peer = it->second.peer.get();
  return UnreadToward(peer, dest_qpn, period) || UnreadFrom(*peer, local_qpn);
}

bool ShmTransport::UnreadToward(ShmRingPeer* peer, uint32_t dest_qpn,
                                std::chrono::nanoseconds period) {
  const auto now = std::chrono::steady_clock::now();
  // Whether the peer reads: any of its rings, for it serves them in turn
  // (128 senders' packets queue there; ours may be far behind the first).
  const uint64_t reads = peer->seg.header()->packets_read.load(std::memory_order_relaxed);
  if (reads != peer->reads_seen) {
    peer->reads_seen = reads;
    peer->reads_moved_at = now;
  }
  // A peer that read nothing for a whole period is not merely late
  // (stopped, wedged, or gone without its pidfd telling yet): the timer
  // goes on and the retry budget ends it as over UDP. (A peer could keep
  // counting and our slots rewritten forever; it is a process of our own
  // user, which could as well stop us outright.)
  if (now - peer->reads_moved_at >= period) return false;
  const uint32_t ri = static_cast<uint32_t>(peer->ring);
  const uint64_t head = peer->seg.ring(ri)->head.load(std::memory_order_acquire);
  return RingHoldsPacketFor(peer->seg, ri, head, peer->producer.tail(), dest_qpn);
}

bool ShmTransport::UnreadFrom(const ShmRingPeer& peer, uint32_t local_qpn) const {
  // Read by this engine's next passes: waiting for them can never hang.
  bool found = false;
  ForEachActiveRing(own_.header(), 0, [&](uint32_t ri) {
    const ShmRingHeader* r = own_.ring(ri);
    // The peer's ring: its owner word names the peer's pid.
    if ((r->owner.load(std::memory_order_acquire) >> 32) != peer.pid) return true;
    found = RingHoldsPacketFor(own_, ri, consumers_[ri].head(),
                               r->tail.load(std::memory_order_acquire), local_qpn);
    return !found;
  });
  for (size_t k = 0; k < backlog_count_ && !found; ++k) {
    const uint8_t* bth = backlog_buf_.get() + ((backlog_head_ + k) % kBacklog) * kShmSlotPayload;
    found = BthDestQp(bth) == local_qpn;
  }
  return found;
}

bool ShmTransport::PopInbound(uint32_t ri, uint8_t* buf, RxPacket* out) {
  ShmRingConsumer& c = consumers_[ri];
  const size_t nlocals = udp_->locals().size();
  while (c.Ready() > 0) {
    ShmSlotHeader h;
    const uint32_t len = c.Pop(&h, buf);
    if (len < kMinPacket || h.local_index >= nlocals) {
      ++counters_.rx_runts;
      continue;
    }
    out->data = buf;
    out->length = len;
    out->local_index = h.local_index;
    out->src = Endpoint{Gid::FromIpv4(h.src_ip), h.src_port};
    out->traffic_class = 0;
    out->group = nullptr;  // multicast is never sent through the rings
    out->via_shm = true;
    ++counters_.shm_rx_packets;
    // Senders judge their Local ACK Timeouts by it (DeliveryPending).
    own_.header()->packets_read.store(counters_.shm_rx_packets, std::memory_order_relaxed);
    return true;
  }
  return false;
}

void ShmTransport::DrainInboundToBacklog() {
  if (!AnyRingActive(own_.header(), std::memory_order_acquire)) return;
  if (!backlog_buf_) {
    backlog_buf_.reset(new uint8_t[kBacklog * kShmSlotPayload]);
    backlog_meta_.resize(kBacklog);
  }
  ForEachActiveRing(own_.header(), 0, [&](uint32_t ri) {
    while (backlog_count_ < kBacklog) {
      const size_t slot = (backlog_head_ + backlog_count_) % kBacklog;
      RxPacket p;
      if (!PopInbound(ri, backlog_buf_.get() + slot * kShmSlotPayload, &p)) break;
      backlog_meta_[slot] = Backlogged{p.length, p.local_index, p.src};
      ++backlog_count_;
    }
    consumers_[ri].Release();
    return backlog_count_ < kBacklog;
  });
}

int ShmTransport::RecvBurst(RxPacket* packets, int n) {
  n = std::min(n, kMaxRx);
  int produced = 0;
  // The backlog first (older than anything still in the rings). Copied out:
  // its slots may be refilled by a SendBurst during this burst's dispatch.
  while (backlog_count_ > 0 && produced < n) {
    const Backlogged& b = backlog_meta_[backlog_head_];
    uint8_t* buf = rx_buf_.get() + size_t(produced) * kShmSlotPayload;
    std::memcpy(buf, backlog_buf_.get() + backlog_head_ * kShmSlotPayload, b.length);
    RxPacket& out = packets[produced++];
    out.data = buf;
    out.length = b.length;
    out.local_index = b.local_index;
    out.src = b.src;
    out.traffic_class = 0;
    out.group = nullptr;
    out.via_shm = true;
    backlog_head_ = (backlog_head_ + 1) % kBacklog;
    --backlog_count_;
  }
  const bool any_ring = AnyRingActive(own_.header(), std::memory_order_acquire);
  if (any_ring && backlog_count_ == 0 && produced < n) {
    // From a different ring each burst, so no sender is always served last.
    ForEachActiveRing(own_.header(), rr_, [&](uint32_t ri) {
      bool any = false;
      while (produced < n &&
             PopInbound(ri, rx_buf_.get() + size_t(produced) * kShmSlotPayload, &packets[produced])) {
        ++produced;
        any = true;
      }
      if (any) consumers_[ri].Release();
      return produced < n;
    });
    rr_ = (rr_ + 1) % kShmRings;
  }
  ++recv_calls_;
  if ((recv_calls_ & 1023) == 0 && !peers_.empty()) CheckPeers();
  // Every kStallCheckEvery receives, and at once after a sleep (force_udp_:
  // the wake-up may be next_deadline's).
  if (stall_watched_ > 0 && ((recv_calls_ & (kStallCheckEvery - 1)) == 0 ||
                             force_udp_.load(std::memory_order_relaxed)))
    SoundStallAlarms();
  if (produced < n) {
    // UDP: always when no ring is in use (the UDP path is unchanged then);
    // with shm traffic, at a reduced rate once UDP has been quiet.
    const bool poll_udp = force_udp_.load(std::memory_order_relaxed) || !any_ring ||
                          udp_quiet_ < kUdpQuietAfter || recv_calls_ % kUdpPollEvery == 0;
    if (poll_udp) {
      force_udp_.store(false, std::memory_order_relaxed);
      const uint64_t doorbells = udp_->counters().rx_doorbells;
      const int got = udp_->RecvBurst(packets + produced, n - produced);
      udp_quiet_ = got > 0 ? 0 : udp_quiet_ + 1;
      produced += got;
      if (udp_->counters().rx_doorbells != doorbells) RearmAfterTakenDoorbell();
    }
  }
  return produced;
}

void ShmTransport::RearmAfterTakenDoorbell() {
  // A doorbell meant for a sleeping thread was read here instead (an
  // application thread polling inline got to the socket first; epoll then
  // finds nothing to report and the sleeper sleeps on). The sender that
  // rang took the `sleeping` flag down, so later senders would not ring
  // again while the sleeper still sleeps, possibly with no timeout: a
  // packet or a direct SEND would then wait until someone polls. So the
  // flag goes up again for the sleeper, and input that arrived before it
  // did, which no sender will ring for, wakes the sleeper with a doorbell
  // of our own.
  if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
  ShmSegmentHeader* h = own_.header();
  h->sleeping.store(1, std::memory_order_seq_cst);
  bool input = h->direct_recvs.load(std::memory_order_seq_cst) != direct_recvs_slept_;
  if (!input)
    ForEachActiveRing(
        h, 0, [&](uint32_t i) { return !(input = consumers_[i].Ready() != 0); },
        std::memory_order_seq_cst);
  if (!input || own_locals_.empty()) return;
  const auto& [ip, port] = own_locals_[DoorbellEndpoint(own_locals_)];
  if (ip != 0) SendDoorbell(ip, port);
}

bool ShmTransport::PrepareToSleep() {
  // Counted whatever the answer: the caller's WokeUp follows either way.
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  if (backlog_count_ > 0 || !udp_->PrepareToSleep()) return false;
  ShmSegmentHeader* h = own_.header();
  h->sleeping.store(1, std::memory_order_seq_cst);
  // Re-check the rings after publishing the flag (see PublishDirty).
  bool input = false;
  ForEachActiveRing(
      h, 0, [&](uint32_t i) { return !(input = consumers_[i].Ready() != 0); },
      std::memory_order_seq_cst);
  if (input) return false;  // the flag comes down in WokeUp
  // A SEND a peer placed directly (NotifyDirectRecv) is input too: the
  // sleep is refused once, and the caller's next pass collects it.
  if (const uint64_t d = h->direct_recvs.load(std::memory_order_seq_cst); d != direct_recvs_slept_) {
    direct_recvs_slept_ = d;
    return false;
  }
  // Peers are checked while idle too, so a dead peer's mapping goes away.
  if (!peers_.empty()) CheckPeers();
  return true;
}

void ShmTransport::WokeUp() {
  // Called without the engine lock: only atomics and one datagram here.
  // The flag comes down with the last sleeper, and goes up again if
  // another thread announced a sleep meanwhile. That thread may have put
  // the flag up and re-checked the rings before our store of 0, and a
  // sender in between saw no sleeper and rang nothing: its packet would
  // wait for the sleeper's timeout (up to kIdleTick, 5 ms; the p99.9
  // finding of docs/benchmarks.md). So in that case the flag goes back up
  // and we ring the sleeper's doorbell ourselves: it wakes and looks. The
  // window is nanoseconds wide, so the spare wake-up is rare.
  FinishWake(CountOffSleeper());
}

bool ShmTransport::CountOffSleeper() { return sleepers_.fetch_sub(1, std::memory_order_seq_cst) == 1; }

void ShmTransport::FinishWake(bool was_last) {
  ShmSegmentHeader* h = own_.header();
  if (was_last) {
    h->sleeping.store(0, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      h->sleeping.store(1, std::memory_order_seq_cst);
      if (!own_locals_.empty()) {
        const auto& [ip, port] = own_locals_[DoorbellEndpoint(own_locals_)];
        if (ip != 0) {
          SendDoorbellDatagram(ip, port);
          raced_doorbells_.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
  }
  force_udp_.store(true, std::memory_order_relaxed);  // drain the doorbell at once
}

void ShmTransport::WatchPeerDeath(ShmRingPeer* peer) {
  if (peer->pidfd >= 0 && peer_deaths_fd_ < 0) peer_deaths_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;  // a pidfd reads ready once its process has exited
  ev.data.fd = peer->pidfd;
  if (peer->pidfd >= 0 && peer_deaths_fd_ >= 0 &&
      epoll_ctl(peer_deaths_fd_, EPOLL_CTL_ADD, peer->pidfd, &ev) == 0)
    return;
  // No pidfd (or no epoll for it): CheckPeers asks the pid itself.
  peer->death_polled = true;
  ++peers_polled_by_pid_;
}

void ShmTransport::CheckPeers() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_peer_check_) return;
  next_peer_check_ = now + kPeerCheckInterval;
  // One system call whatever the number of peers: with 127 peers in each of
  // 128 processes, a poll() per pidfd every 5 ms was more than two CPUs'
  // worth of work (bench/scale/shm_all_to_all.cc, docs/shm.md).
  std::vector<ShmRingPeer*> dead;
  if (peer_deaths_fd_ >= 0) {
    // More deaths than fit here are found at the next check: DropPeer takes
    // each dead peer's pidfd out of the set.
    epoll_event evs[64];
    const int n = epoll_wait(peer_deaths_fd_, evs, 64, 0);
    for (int i = 0; i < n; ++i)
      for (const auto& p : peers_)
        if (p->pidfd == evs[i].data.fd) dead.push_back(p.get());
  }
  if (peers_polled_by_pid_ > 0)
    for (const auto& p : peers_)
      if (p->death_polled && !ProcessExists(static_cast<pid_t>(p->pid))) dead.push_back(p.get());
  for (ShmRingPeer* d : dead)
    for (const auto& p : peers_)
      if (p.get() == d) {
        DropPeer(p);
        break;
      }
}

void ShmTransport::DropPeer(const std::shared_ptr<ShmRingPeer>& peer) {
  if (peer->dead) return;
  peer->dead = true;
  if (peer->stall_watch) {
    peer->stall_watch = false;
    --stall_watched_;
  }
  if (peer->death_polled) {
    --peers_polled_by_pid_;
  } else if (peer->pidfd >= 0) {
    epoll_ctl(peer_deaths_fd_, EPOLL_CTL_DEL, peer->pidfd, nullptr);
  }
  last_route_ = nullptr;
  std::erase_if(routes_, [&](const auto& kv) { return kv.second.peer == peer; });
  std::erase_if(dirty_, [&](ShmRingPeer* p) { return p == peer.get(); });
  std::erase(peers_, peer);
  has_peers_.store(!peers_.empty(), std::memory_order_relaxed);
}

}  // namespace softrnic::transport
