#include "transport/fault_transport.h"

#include <cstring>

#include "transport/icrc_framing.h"

namespace softrnic::transport {
const TransportCounters& FaultTransport::counters() const {
  merged_ = inner_->counters();
  merged_.injected_drops += counters_.injected_drops;
  merged_.injected_dups += counters_.injected_dups;
  merged_.injected_reorders += counters_.injected_reorders;
  merged_.injected_corrupts += counters_.injected_corrupts;
  return merged_;
}

void FaultTransport::Queue(const TxPacket& p, Kind kind, int packet) {
  out_.push_back(p);
  origin_.push_back(Origin{kind, packet});
}

bool FaultTransport::Flush() {
  const int m = static_cast<int>(out_.size());
  const int sent = m > 0 ? inner_->SendBurst(out_.data(), m) : 0;
  for (int k = 0; k < sent; ++k)
    if (origin_[k].kind == Kind::kHeld) held_ = false;
  bool ok = true;
  if (sent < m) {
    // Stopped early: packets from the first one not consumed on are the
    // caller's to offer again (a duplicate or held packet went after its
    // primary, which was consumed).
    const Origin& o = origin_[sent];
    busy_return_ = o.kind == Kind::kPrimary ? o.packet : o.packet + 1;
    ok = false;
  }
  out_.clear();
  origin_.clear();
  copies_used_ = 0;
  held_queued_ = false;
  return ok;
}

TxPacket FaultTransport::Corrupted(const TxPacket& p, const FaultDecision& d,
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

void FaultTransport::Hold(const TxPacket& p, int packet) {
  // Copied: the caller's buffer is free once SendBurst returns.
  held_buf_.resize(p.length);
  FlattenTxPacket(p, held_buf_.data());
  if (p.icrc_included) std::memcpy(held_buf_.data() + p.length - 4, p.data + p.length - 4, 4);
  held_packet_ = p;
  held_packet_.data = held_buf_.data();
  held_packet_.payload = nullptr;
  held_packet_.payload_length = 0;
  held_packet_.head_length = 0;
  held_ = true;
  held_from_packet_ = packet;
}

int FaultTransport::SendBurst(const TxPacket* packets, int n) {
  busy_return_ = n;
  held_from_packet_ = -1;
  bool busy = false;
  for (int i = 0; i < n && !busy; ++i) {
    const TxPacket& p = packets[i];
    if (p.data == nullptr || p.length < kMinPacketLength) {
      // The inner transport refuses it (tx_errors); no decision is drawn.
      Queue(p, Kind::kPrimary, i);
      continue;
    }
    const FaultDecision d = injector_.Next(p.length);
    if (d.drop) {
      ++counters_.injected_drops;
      continue;
    }
    if (d.reorder && held_ && held_queued_) {
      // The previous held packet is queued behind an earlier one in this
      // burst: pass the queue on so the hold buffer is free again.
      if (!Flush()) {
        busy = true;
        break;
      }
    }
    TxPacket sent = p;
    if (d.corrupt) {
      ++counters_.injected_corrupts;
      if (copies_used_ == copies_.size()) copies_.emplace_back();
      sent = Corrupted(p, d, &copies_[copies_used_++]);
    }
    if (d.reorder && !held_) {
      Hold(sent, i);
      ++counters_.injected_reorders;
      continue;  // a held packet is not also duplicated
    }
    Queue(sent, Kind::kPrimary, i);
    if (d.duplicate) {
      ++counters_.injected_dups;
      Queue(sent, Kind::kDuplicate, i);
    }
    if (held_ && !held_queued_ && held_from_packet_ != i) {
      Queue(held_packet_, Kind::kHeld, i);
      held_queued_ = true;
    }
  }
  if (!busy) (void)Flush();
  out_.clear();
  origin_.clear();
  copies_used_ = 0;
  held_queued_ = false;
  const int consumed = busy_return_;
  if (held_ && held_from_packet_ >= consumed) {
    // The held packet belongs to the part of the burst the caller will
    // offer again: forget the hold so it is not sent twice.
    held_ = false;
    --counters_.injected_reorders;
  }
  held_from_packet_ = -1;
  return consumed;
}

int FaultTransport::RecvBurst(RxPacket* packets, int n) {
  // A packet held back for reordering goes out now at the latest: the
  // engine calls RecvBurst before it sleeps, so nothing stays held while
  // idle. If the inner transport is busy it stays held for the next call.
  if (held_ && inner_->SendBurst(&held_packet_, 1) == 1) held_ = false;
  return inner_->RecvBurst(packets, n);
}

}  // namespace softrnic::transport
