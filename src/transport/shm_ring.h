// A single-producer single-consumer ring of packet slots in shared memory.
//
// The ring lives in the consumer's segment (shm_segment.h). The producer
// (one claimed sender) writes slots and publishes them with a release store
// of `tail`; the consumer copies slots out and frees them with a release
// store of `head`. Indices are free-running 64-bit counters.
//
// Both sides treat the other's index as hostile: the producer never writes
// more than kShmRingSlots ahead of the head it read (a head that is "ahead"
// of the tail or too far behind reads as full); the consumer accepts a tail
// only if 0 <= tail - head <= kShmRingSlots (else it resynchronises, dropping
// what the ring holds) and a slot's length only if it fits the slot. The
// consumer copies every packet into private memory before parsing it, so a
// producer rewriting a slot after publishing cannot change what is parsed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transport/shm_segment.h"

namespace softrnic::transport {

class ShmRingProducer {
 public:
  ShmRingProducer() = default;
  ShmRingProducer(const ShmSegment* seg, uint32_t ring) : seg_(seg), ring_(ring) {
    tail_ = seg->ring(ring)->tail.load(std::memory_order_relaxed);
    head_ = seg->ring(ring)->head.load(std::memory_order_acquire);
  }
  bool valid() const { return seg_ != nullptr; }

  // Copies one packet into the next slot (not yet visible to the consumer).
  // False if the ring is full or the packet does not fit a slot.
  bool Write(const ShmSlotHeader& hdr, const uint8_t* data, uint32_t length) {
    if (length > kShmSlotPayload) return false;
    if (!HasRoom()) return false;
    uint8_t* s = seg_->slot(ring_, tail_);
    ShmSlotHeader h = hdr;
    h.length = length;
    std::memcpy(s, &h, sizeof(h));
    std::memcpy(s + kShmSlotHeader, data, length);
    ++tail_;
    return true;
  }
  // Makes every written slot visible to the consumer.
  void Publish() { seg_->ring(ring_)->tail.store(tail_, std::memory_order_release); }
  // The position the next packet goes to (every earlier one is written).
  uint64_t tail() const { return tail_; }

 private:
  bool HasRoom() {
    uint64_t used = tail_ - head_;
    if (used < kShmRingSlots) return true;
    head_ = seg_->ring(ring_)->head.load(std::memory_order_acquire);
    used = tail_ - head_;
    // A head beyond our tail (used wraps huge) is a lying consumer: full.
    return used < kShmRingSlots;
  }
  const ShmSegment* seg_ = nullptr;
  uint32_t ring_ = 0;
  uint64_t tail_ = 0;
  uint64_t head_ = 0;  // last head seen
};

class ShmRingConsumer {
 public:
  ShmRingConsumer() = default;
  ShmRingConsumer(const ShmSegment* seg, uint32_t ring) : seg_(seg), ring_(ring) {
    head_ = seg->ring(ring)->head.load(std::memory_order_relaxed);
  }

  // How many packets are ready (0 without touching anything but `tail`).
  uint64_t Ready() {
    const uint64_t tail = seg_->ring(ring_)->tail.load(std::memory_order_acquire);
    const uint64_t n = tail - head_;
    if (n > kShmRingSlots) {
      // Hostile or corrupted tail: drop whatever is there and resynchronise.
      head_ = tail;
      ++resyncs_;
      Release();
      return 0;
    }
    return n;
  }
  // Copies the next packet (Ready() must have said so) into out (at least
  // kShmSlotPayload bytes). Returns its length, or 0 for a malformed slot
  // (consumed and dropped).
  uint32_t Pop(ShmSlotHeader* hdr, uint8_t* out) {
    const uint8_t* s = seg_->slot(ring_, head_);
    std::memcpy(hdr, s, sizeof(*hdr));
    ++head_;
    const uint32_t len = hdr->length;
    if (len == 0 || len > kShmSlotPayload) return 0;
    std::memcpy(out, s + kShmSlotHeader, len);
    return len;
  }
  // Frees the popped slots for the producer.
  void Release() { seg_->ring(ring_)->head.store(head_, std::memory_order_release); }
  // The position of the next packet to pop.
  uint64_t head() const { return head_; }
  uint64_t resyncs() const { return resyncs_; }

 private:
  const ShmSegment* seg_ = nullptr;
  uint32_t ring_ = 0;
  uint64_t head_ = 0;
  uint64_t resyncs_ = 0;
};

// The destination QP a BTH names (bytes 5..7, IBA 9.2).
inline uint32_t BthDestQp(const uint8_t* bth) {
  return (uint32_t{bth[5]} << 16) | (uint32_t{bth[6]} << 8) | bth[7];
}

// The destination QP named by the BTH of the packet in slot `position` of
// ring `ring_index` (BTH bytes 5..7, IBA 9.2), or false for a slot too short
// to hold one. Whoever may write the slot could rewrite it meanwhile: the
// answer is a hint about what the slot held, never parsed further.
inline bool SlotDestQp(const ShmSegment& seg, uint32_t ring_index, uint64_t position,
                       uint32_t* qpn) {
  const uint8_t* s = seg.slot(ring_index, position);
  uint32_t length = 0;
  std::memcpy(&length, s + offsetof(ShmSlotHeader, length), sizeof(length));
  if (length < 12 || length > kShmSlotPayload) return false;
  *qpn = BthDestQp(s + kShmSlotHeader);
  return true;
}

// Whether a packet for QP `qpn` sits in slots [head, tail) of ring
// `ring_index`: the slots one side has written and the other not yet read.
// A span longer than the ring is a lying index: no.
inline bool RingHoldsPacketFor(const ShmSegment& seg, uint32_t ring_index, uint64_t head,
                               uint64_t tail, uint32_t qpn) {
  if (tail - head > kShmRingSlots) return false;
  for (uint64_t pos = head; pos != tail; ++pos) {
    uint32_t dest = 0;
    if (SlotDestQp(seg, ring_index, pos, &dest) && dest == qpn) return true;
  }
  return false;
}

}  // namespace softrnic::transport
