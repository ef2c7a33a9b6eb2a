#include "transport/fault_transport.h"

#include <algorithm>
#include <cstring>

#include "transport/icrc_framing.h"

namespace softrnic::transport {

namespace {

// Spare buffers kept for held copies: enough for a burst or two of held
// packets without keeping a flood's worth of memory after it.
constexpr size_t kPoolMax = 256;

// ECN CE, the two low bits of the IPv4 TOS / IPv6 traffic class (RFC 3168).
constexpr uint8_t kEcnCe = 0x03;

}  // namespace

FaultTransport::FaultTransport(std::unique_ptr<Transport> inner, const faults::Scenario& scenario,
                               ClockFn clock)
    : inner_(std::move(inner)),
      plan_(scenario),
      clock_(clock ? std::move(clock) : ClockFn([] { return std::chrono::steady_clock::now(); })),
      start_(clock_()) {}

void FaultTransport::StartClockAtFirstPacket() {
  if (started_) return;
  started_ = true;
  start_ = clock_();
}

uint64_t FaultTransport::NowNs() const {
  if (!started_) return 0;
  const auto since = clock_() - start_;
  if (since.count() <= 0) return 0;
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(since).count());
}

const TransportCounters& FaultTransport::counters() const {
  merged_ = inner_->counters();
  merged_.injected_drops += counters_.injected_drops;
  merged_.injected_dups += counters_.injected_dups;
  merged_.injected_reorders += counters_.injected_reorders;
  merged_.injected_corrupts += counters_.injected_corrupts;
  merged_.injected_delays += counters_.injected_delays;
  merged_.injected_pauses += counters_.injected_pauses;
  merged_.injected_ecn_marks += counters_.injected_ecn_marks;
  return merged_;
}

std::optional<FaultTransport::TimePoint> FaultTransport::next_deadline() const {
  std::optional<TimePoint> next = inner_->next_deadline();
  uint64_t due = UINT64_MAX;
  if (!held_tx_.empty()) due = std::min(due, held_tx_.begin()->first.first);
  if (!held_rx_.empty()) due = std::min(due, held_rx_.begin()->first.first);
  if (due != UINT64_MAX) {
    const TimePoint at = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::nanoseconds(due));
    if (!next || at < *next) next = at;
  }
  return next;
}

std::vector<uint8_t> FaultTransport::TakeBuffer(size_t size) {
  std::vector<uint8_t> b;
  if (!pool_.empty()) {
    b = std::move(pool_.back());
    pool_.pop_back();
  }
  b.resize(size);
  return b;
}

void FaultTransport::Report() {
  if (sink_ != nullptr)
    for (const faults::FaultEvent& e : events_) sink_->OnFault(e);
  events_.clear();
}

void FaultTransport::HoldTx(const TxPacket& p, uint64_t due_ns, uint32_t reorder_left) {
  // A packet the inner transport refuses anyway is not kept: held, it
  // would block the queue's head for ever.
  if (p.data == nullptr || p.length < kMinPacketLength) return;
  Held h;
  // Copied: the caller's buffer is free once SendBurst returns.
  h.bytes = TakeBuffer(p.length);
  FlattenTxPacket(p, h.bytes.data());
  if (p.icrc_included) std::memcpy(h.bytes.data() + p.length - 4, p.data + p.length - 4, 4);
  h.tx = p;
  h.tx.data = h.bytes.data();
  h.tx.payload = nullptr;
  h.tx.payload_length = 0;
  h.tx.head_length = 0;
  h.reorder_left = reorder_left;
  const Key key{due_ns, seq_++};
  held_tx_.emplace(key, std::move(h));
  if (reorder_left > 0) reorders_tx_.push_back(key);
}

void FaultTransport::HoldRx(const RxPacket& p, uint64_t due_ns, uint32_t reorder_left) {
  Held h;
  // Copied: the inner transport reuses its buffer at the next RecvBurst.
  h.bytes = TakeBuffer(p.length);
  std::memcpy(h.bytes.data(), p.data, p.length);
  h.rx = p;
  if (p.group != nullptr) h.group = *p.group;  // pointed to again when delivered
  h.reorder_left = reorder_left;
  const Key key{due_ns, seq_++};
  held_rx_.emplace(key, std::move(h));
  if (reorder_left > 0) reorders_rx_.push_back(key);
}

void FaultTransport::CountDownReorders(Queue* queue, std::vector<Key>* reorders, uint64_t now_ns,
                                       bool tx) {
  for (size_t i = 0; i < reorders->size();) {
    auto it = queue->find((*reorders)[i]);
    if (it == queue->end() || --it->second.reorder_left > 0) {
      ++i;
      continue;
    }
    (*reorders)[i] = reorders->back();
    reorders->pop_back();
    // Its `depth` later packets went: it goes now, behind them. Re-keyed
    // as due now, so a failed send or a full RecvBurst keeps it first.
    auto node = queue->extract(it);
    node.key() = Key{now_ns, seq_++};
    auto placed = queue->insert(std::move(node)).position;
    if (tx) {
      placed->second.tx.data = placed->second.bytes.data();
      out_.push_back(placed->second.tx);
      out_keys_.push_back(placed->first);
    }
  }
}

void FaultTransport::Forget(Queue* queue, std::vector<Key>* reorders, Queue::iterator it) {
  if (it->second.reorder_left > 0) {
    auto r = std::find(reorders->begin(), reorders->end(), it->first);
    if (r != reorders->end()) {
      *r = reorders->back();
      reorders->pop_back();
    }
  }
  if (pool_.size() < kPoolMax) pool_.push_back(std::move(it->second.bytes));
  queue->erase(it);
}

bool FaultTransport::ReleaseDueTx(uint64_t now_ns) {
  if (held_tx_.empty() || held_tx_.begin()->first.first > now_ns) return true;
  // Sent straight from the queue (map nodes do not move), erased once the
  // inner transport took them.
  std::vector<TxPacket>& due = release_;
  due.clear();
  for (auto it = held_tx_.begin(); it != held_tx_.end() && it->first.first <= now_ns; ++it) {
    it->second.tx.data = it->second.bytes.data();
    due.push_back(it->second.tx);
  }
  const int m = static_cast<int>(due.size());
  const int sent = inner_->SendBurst(due.data(), m);
  for (int k = 0; k < sent; ++k) Forget(&held_tx_, &reorders_tx_, held_tx_.begin());
  return sent >= m;
}

TxPacket FaultTransport::Corrupted(const TxPacket& p, const faults::Decision& d,
                                   std::vector<uint8_t>* buf) {
  const auto locals = inner_->locals();
  wire::IpUdpFields ip;
  if (p.local_index >= locals.size() || !IcrcFields(locals[p.local_index], p.dst, 0, &ip))
    return p;
  buf->resize(p.length);
  uint8_t* c = buf->data();
  FlattenTxPacket(p, c);
  TxPacket out = p;
  out.data = c;
  out.payload = nullptr;
  out.payload_length = 0;
  out.head_length = 0;
  uint8_t tail[kIcrcTailMax];
  FrameIcrc(ip, out, tail);  // IPv4 ID 0: the packet leaves alone (icrc_included)
  std::memcpy(c + p.length - 4, tail, 4);
  c[d.corrupt_byte] ^= d.corrupt_mask;
  out.icrc_included = true;
  return out;
}

int FaultTransport::SendBurst(const TxPacket* packets, int n) {
  if (n > 0) StartClockAtFirstPacket();
  const uint64_t now = NowNs();
  // What is due goes first; if the inner transport is still busy with it,
  // nothing new is taken (back-pressure, see the header).
  if (!ReleaseDueTx(now)) return 0;
  out_.clear();
  out_keys_.clear();
  copies_used_ = 0;
  const auto copy_buffer = [this]() -> std::vector<uint8_t>* {
    if (copies_used_ == copies_.size()) copies_.emplace_back();
    return &copies_[copies_used_++];
  };
  const auto pass = [this](const TxPacket& p, uint64_t at) {
    out_.push_back(p);
    out_keys_.push_back(kNoKey);
    CountDownReorders(&held_tx_, &reorders_tx_, at, true);
  };
  for (int i = 0; i < n; ++i) {
    TxPacket p = packets[i];
    if (p.data == nullptr || p.length < kMinPacketLength ||
        (p.payload != nullptr && !SplitLayoutValid(p))) {
      // The inner transport refuses it (tx_errors); no decision is drawn.
      out_.push_back(p);
      out_keys_.push_back(kNoKey);
      continue;
    }
    if (p.payload != nullptr) {
      // In pieces (not asked for, accepts_split_payload is false): the
      // plan reads headers from one flat buffer.
      std::vector<uint8_t>* b = copy_buffer();
      b->resize(p.length);
      FlattenTxPacket(p, b->data());
      p.data = b->data();
      p.payload = nullptr;
      p.payload_length = 0;
      p.head_length = 0;
    }
    const faults::Decision d =
        plan_.Decide(faults::Direction::kOut, p.data, p.length, p.dst.gid.raw, now, &events_);
    Report();
    if (d.dropped()) {
      ++counters_.injected_drops;
      continue;
    }
    TxPacket sent = p;
    if (d.corrupt) {
      ++counters_.injected_corrupts;
      sent = Corrupted(p, d, copy_buffer());
    }
    if (d.duplicate) ++counters_.injected_dups;
    if (d.hold_until_ns > now) {
      ++(d.paused ? counters_.injected_pauses : counters_.injected_delays);
      HoldTx(sent, d.hold_until_ns, 0);
      if (d.duplicate) HoldTx(sent, d.hold_until_ns, 0);
      continue;
    }
    if (d.reorder_depth > 0) {
      ++counters_.injected_reorders;
      HoldTx(sent, now + kReorderMaxHoldNs, d.reorder_depth);
      // A duplicate took another path: it goes now (and is one of the
      // packets the original waits for).
      if (d.duplicate) pass(sent, now);
      continue;
    }
    pass(sent, now);
    if (d.duplicate) pass(sent, now);
  }
  const int m = static_cast<int>(out_.size());
  const int taken = m > 0 ? inner_->SendBurst(out_.data(), m) : 0;
  for (int k = 0; k < taken; ++k) {
    if (out_keys_[k] == kNoKey) continue;
    auto it = held_tx_.find(out_keys_[k]);
    if (it != held_tx_.end()) Forget(&held_tx_, &reorders_tx_, it);
  }
  // Stopped early (a full socket buffer): the rest was decided on, so it is
  // kept, in order, due now: it goes first at the next call.
  for (int k = taken; k < m; ++k) {
    if (out_keys_[k] == kNoKey) {
      HoldTx(out_[k], now, 0);
      continue;
    }
    auto it = held_tx_.find(out_keys_[k]);
    if (it == held_tx_.end()) continue;
    auto node = held_tx_.extract(it);
    node.key() = Key{now, seq_++};
    held_tx_.insert(std::move(node));
  }
  out_.clear();
  out_keys_.clear();
  copies_used_ = 0;
  return n;
}

int FaultTransport::RecvBurst(RxPacket* packets, int n) {
  uint64_t now = NowNs();
  // The packets the last call returned from the queue are the caller's no
  // more (transport.h: valid until the next RecvBurst).
  for (Held& h : delivered_rx_)
    if (pool_.size() < kPoolMax) pool_.push_back(std::move(h.bytes));
  delivered_rx_.clear();
  // Sent packets that are due leave here too: the engine calls RecvBurst in
  // every pass, also when it has nothing to send. Busy: they stay held.
  (void)ReleaseDueTx(now);
  if (n <= 0) return 0;

  // Held received packets that are due come first: they arrived earlier.
  delivered_rx_.reserve(static_cast<size_t>(n));
  while (static_cast<int>(delivered_rx_.size()) < n && !held_rx_.empty() &&
         held_rx_.begin()->first.first <= now) {
    auto it = held_rx_.begin();
    if (it->second.reorder_left > 0) {
      auto r = std::find(reorders_rx_.begin(), reorders_rx_.end(), it->first);
      if (r != reorders_rx_.end()) {
        *r = reorders_rx_.back();
        reorders_rx_.pop_back();
      }
    }
    delivered_rx_.push_back(std::move(it->second));
    held_rx_.erase(it);
  }
  int w = 0;
  for (Held& h : delivered_rx_) {  // no reallocation any more: pointers now
    RxPacket p = h.rx;
    p.data = h.bytes.data();
    if (p.group != nullptr) p.group = &h.group;
    packets[w++] = p;
  }
  if (w == n) return w;

  const int got = inner_->RecvBurst(packets + w, n - w);
  if (got > 0 && !started_) {
    StartClockAtFirstPacket();
    now = 0;
  }
  const int end = w + got;
  for (int j = w; j < end; ++j) {
    RxPacket p = packets[j];
    if (p.data == nullptr || p.length < 12) {
      packets[w++] = p;  // not a packet the plan can read: passed on untouched
      continue;
    }
    const faults::Decision d =
        plan_.Decide(faults::Direction::kIn, p.data, p.length, p.src.gid.raw, now, &events_);
    Report();
    if (d.dropped()) {
      ++counters_.injected_drops;
      continue;
    }
    if (d.corrupt) {
      // Its ICRC was checked already (transport.h): a flipped bit would be
      // caught there, so the packet is lost as that check would lose it.
      ++counters_.injected_corrupts;
      continue;
    }
    if (d.ecn_mark) {
      ++counters_.injected_ecn_marks;
      p.traffic_class |= kEcnCe;
    }
    const bool held = d.hold_until_ns > now;
    if (d.duplicate) {
      // From the next RecvBurst (or with the original, if that is held).
      ++counters_.injected_dups;
      HoldRx(p, held ? d.hold_until_ns : now, 0);
    }
    if (held) {
      ++(d.paused ? counters_.injected_pauses : counters_.injected_delays);
      HoldRx(p, d.hold_until_ns, 0);
      continue;
    }
    if (d.reorder_depth > 0) {
      ++counters_.injected_reorders;
      HoldRx(p, now + kReorderMaxHoldNs, d.reorder_depth);
      continue;
    }
    packets[w++] = p;
    // Reordered packets whose later packets came are due now: they come
    // out of the next RecvBurst (this one's slots are the inner's).
    CountDownReorders(&held_rx_, &reorders_rx_, now, false);
  }
  return w;
}

}  // namespace softrnic::transport
