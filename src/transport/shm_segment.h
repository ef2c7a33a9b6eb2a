// The per-device control segment of the shared-memory transport: one memfd
// per device, mapped by every same-host peer that talks to it.
//
// Layout (fixed offsets, so a peer never follows a pointer or an offset
// read from shared memory):
//
//   [0, 4096)               ShmSegmentHeader: identity (magic, version, pid,
//                           netns, uid, nonce), the device's endpoints, the
//                           "sleeping" doorbell flag and the active-ring mask
//   kRingsOffset ..         kShmRings inbound rings (ShmRingHeader + slots);
//                           a sender claims one ring and is its only producer
//   kExportsOffset ..       exports: MR slots and QP slots that peers read to
//                           execute one-sided operations directly, and per
//                           QP slot the posted receive WQEs a peer's SEND
//                           lands in directly (ShmRecvQueue), then one
//                           such queue per shared receive queue (SRQ)
//
// Trust: everything in a peer's segment is hostile input. Indices and lengths
// are bounds-checked by whoever reads them; a segment is validated (magic,
// version, pid, netns, uid, size, seals) before it is used. The memfd is
// sealed against shrinking and growing, so a mapping of it never SIGBUSes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace softrnic::transport {

inline constexpr uint64_t kShmMagic = 0x314D4853434E5253ull;  // "SRNCSHM1"
// 3: 128 rings, a 128-bit ring mask; 4: packets_read; 5: receive queues
// (direct SEND) and direct_recvs; 6: SRQ receive queues, ShmQpSlot::srq_slot,
// ShmRecvEntry::qpn; 7: napping.
inline constexpr uint32_t kShmVersion = 7;
inline constexpr uint32_t kShmMaxLocals = 16;

// Rings: how many senders can talk to one device at once through shared
// memory (more fall back to UDP), and how many packets each ring holds.
// 128 (issue 17: an MPI job of 32 ranks on one node needs more than the 16
// there were). A ring costs memory only once used: the segment is a sparse
// memfd, ~1 MiB per ring that has carried a full ring of packets.
inline constexpr uint32_t kShmRings = 128;
inline constexpr uint32_t kShmRingMaskWords = kShmRings / 64;
static_assert(kShmRings % 64 == 0);
inline constexpr uint32_t kShmRingSlots = 256;                 // power of two
inline constexpr uint32_t kShmSlotHeader = 16;
inline constexpr uint32_t kShmSlotPayload = 4096 + 128;       // the engine's largest packet
inline constexpr uint32_t kShmSlotSize = kShmSlotHeader + kShmSlotPayload;  // 4240

inline constexpr size_t kCacheLine = 64;

struct alignas(kCacheLine) ShmRingHeader {
  // Sender identity: (pid << 32) | per-device sender id; 0 = free.
  std::atomic<uint64_t> owner;
  uint64_t pad0[7];
  std::atomic<uint64_t> tail;  // written by the producer (the sender)
  uint64_t pad1[7];
  std::atomic<uint64_t> head;  // written by the consumer (the segment owner)
  uint64_t pad2[7];
};
static_assert(sizeof(ShmRingHeader) == 3 * kCacheLine);

// One packet slot. The header is written by the producer before the tail
// release; the consumer copies out and checks every field.
struct ShmSlotHeader {
  uint32_t length;       // BTH .. ICRC inclusive
  uint16_t local_index;  // the consumer's endpoint (GID index) it is addressed to
  uint16_t src_port;
  uint32_t src_ip;       // network order (IPv4-mapped source GID)
  uint32_t reserved;
};
static_assert(sizeof(ShmSlotHeader) == kShmSlotHeader);

inline constexpr size_t kShmRingBytes =
    sizeof(ShmRingHeader) + size_t{kShmRingSlots} * kShmSlotSize;

// --- Exports (one-sided operations without the target's CPU) ---

// An exported memory region. Published by the owner under its engine lock:
// fields are written while `state` is even (invalid), then `state` is set to
// (generation << 1) | 1 with release. Revocation stores an even value and
// waits for `inflight` to drain (see shm_direct.h for the protocol).
struct alignas(kCacheLine) ShmMrSlot {
  std::atomic<uint64_t> state;     // (generation << 1) | valid
  std::atomic<uint64_t> inflight;  // peers inside an access right now
  std::atomic<uint64_t> iova;      // the MR's I/O virtual address (rkey space)
  std::atomic<uint64_t> length;
  std::atomic<uint64_t> addr;      // the MR's address in the owner's address space
  // The part of [addr, addr+length) whose pages are backed by memfd `fd`
  // (in the owner's fd table) at `fd_offset`; share_len 0 = nothing shared.
  std::atomic<uint64_t> share_start;
  std::atomic<uint64_t> share_len;
  std::atomic<uint64_t> key_pd;    // rkey | (pd_id << 32)
  std::atomic<uint64_t> fd_ino;    // the memfd's inode number (fd numbers get reused)
  std::atomic<uint64_t> fd_offset;
  std::atomic<uint32_t> access;
  std::atomic<int32_t> fd;
  uint64_t pad[4];
};
static_assert(sizeof(ShmMrSlot) == 2 * kCacheLine);

// An exported QP: what the responder checks before touching memory. Written
// under the owner's engine lock with a seqlock (odd = being written).
struct alignas(kCacheLine) ShmQpSlot {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> qpn;       // 0 = free
  std::atomic<uint32_t> dest_qpn;
  std::atomic<uint32_t> pd_id;
  std::atomic<uint32_t> access;    // qp_access_flags
  std::atomic<uint32_t> state;     // QpState
  std::atomic<uint32_t> dgid_ip;   // the connected peer's IPv4 (network order)
  // Its SRQ's receive queue: i + 1 for the segment's SRQ queue i, 0 when
  // it has no SRQ or the SRQ is not exported.
  std::atomic<uint32_t> srq_slot;
  uint32_t pad[8];
};
static_assert(sizeof(ShmQpSlot) == kCacheLine);

inline constexpr uint32_t kShmMrSlots = 2048;
inline constexpr uint32_t kShmQpSlots = 1024;
// SRQs whose WQEs peers can fill directly; more SRQs take SENDs as packets.
inline constexpr uint32_t kShmSrqSlots = 128;

// --- Receive queues (direct SEND, engine/same_host/shm_direct_send.cc) ---
//
// The receive WQEs an exported RC QP has posted, as a peer's requester
// needs them to place a SEND itself: a window of kShmRecvEntries WQEs
// from the oldest one not yet consumed. Whoever consumes a WQE (a peer
// placing a SEND, or the owner's responder serving a SEND packet) first
// moves `taken` on by one with a CAS, so each WQE is consumed once.
//
// `taken` = (epoch << kShmRecvEpochShift) | count, plus kShmRecvClosed while
// the QP cannot receive directly. The owner changes the epoch each time it
// opens the queue (a QP entering RTR, a new QP in the slot), so a CAS that
// read `taken` before a close and a reopen fails. An entry is valid for the
// `taken` value t while its `tag` is t + 1 (written by the owner, release);
// the peer that consumed it writes the completion and then `done` = t + 1
// (release).
//
// An SRQ's queue is the same, shared by every QP of the SRQ: the peer also
// writes the number of the QP its SEND is for (`qpn`), and the owner
// completes entries as they are done, not in queue order (a peer stopped
// inside its copy must not hold up the SENDs of other QPs; each QP's own
// SENDs are claimed, and done, in its order).
inline constexpr uint32_t kShmRecvEntries = 64;  // power of two
inline constexpr uint32_t kShmRecvSges = 4;      // WQEs with more go through packets
inline constexpr uint32_t kShmRecvEpochShift = 40;
inline constexpr uint64_t kShmRecvCountMask = (uint64_t{1} << kShmRecvEpochShift) - 1;
inline constexpr uint64_t kShmRecvClosed = uint64_t{1} << 63;
// ShmRecvEntry::num_sge of a WQE a peer must not place directly (a buffer
// outside shared pages, too many SGEs): its SEND goes as packets.
inline constexpr uint32_t kShmRecvNotDirect = ~0u;

struct ShmRecvSge {
  std::atomic<uint64_t> addr;      // in the owner's address space
  std::atomic<uint64_t> mr_state;  // the MR slot's state when exported
  std::atomic<uint32_t> length;
  std::atomic<uint32_t> mr_slot;   // index into the owner's MR slots
};
static_assert(sizeof(ShmRecvSge) == 24);

// Completion flags a peer writes (ShmRecvEntry::flags).
inline constexpr uint32_t kShmRecvWithImm = 1;
inline constexpr uint32_t kShmRecvSolicited = 2;

struct alignas(kCacheLine) ShmRecvEntry {
  // Written by the owner.
  std::atomic<uint64_t> tag;
  std::atomic<uint32_t> num_sge;
  uint32_t pad0;
  ShmRecvSge sge[kShmRecvSges];
  // Written by the peer that consumed it.
  alignas(kCacheLine) std::atomic<uint64_t> done;
  std::atomic<uint32_t> byte_len;
  std::atomic<uint32_t> imm;  // network order, as the packet's ImmDt
  std::atomic<uint32_t> flags;
  std::atomic<uint32_t> qpn;  // SRQ queues: the receiving QP
};
static_assert(sizeof(ShmRecvEntry) == 3 * kCacheLine);

struct alignas(kCacheLine) ShmRecvQueue {
  std::atomic<uint64_t> taken;
  ShmRecvEntry entries[kShmRecvEntries];
  ShmRecvEntry* entry(uint64_t taken_value) {
    return &entries[taken_value & (kShmRecvEntries - 1)];
  }
  // The `taken` value its owner opens it with: count 0 of the epoch after
  // the current one, so that a claim that read `taken` before (an earlier
  // QP or SRQ of the slot, an earlier life of this one) can no longer
  // succeed, and no entry described before matches.
  uint64_t NextEpoch() const {
    constexpr uint64_t kEpochMask = (kShmRecvClosed - 1) >> kShmRecvEpochShift;
    const uint64_t old = taken.load(std::memory_order_relaxed) & ~kShmRecvClosed;
    return (((old >> kShmRecvEpochShift) + 1) & kEpochMask) << kShmRecvEpochShift;
  }
};

struct alignas(kCacheLine) ShmSegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t pid;
  uint64_t netns;
  uint64_t nonce;  // random per segment: tells incarnations apart
  uint32_t uid;
  uint32_t n_locals;
  uint32_t local_ip[kShmMaxLocals];  // network order
  uint16_t local_port[kShmMaxLocals];
  uint64_t total_size;
  alignas(kCacheLine) std::atomic<uint32_t> sleeping;  // the owner's progress thread sleeps
  // 1 while the owner's progress thread naps, leaving the rings to an
  // application thread that polls (engine/progress/progress.cc): a futex
  // word. A sender whose packets sit unread sets it to 0 and wakes the
  // napper (ShmTransport::SoundStallAlarms); the napper bounds its own nap.
  alignas(kCacheLine) std::atomic<uint32_t> napping;
  // Bit i % 64 of word i / 64: ring i has (had) a producer.
  alignas(kCacheLine) std::atomic<uint64_t> active_rings[kShmRingMaskWords];
  // Packets the owner took out of its rings so far: a sender whose packet
  // waits unread sees whether the owner reads at all
  // (ShmTransport::DeliveryPending). Only the owner writes it.
  alignas(kCacheLine) std::atomic<uint64_t> packets_read;
  // SENDs peers placed directly into this device's receive queues: bumped by
  // the peer after each (ShmRecvEntry::done), so that the owner looks.
  alignas(kCacheLine) std::atomic<uint64_t> direct_recvs;
};
static_assert(sizeof(ShmSegmentHeader) <= 4096);

// Marks ring i as used, so that the owner's consumer looks at it.
inline void MarkRingActive(ShmSegmentHeader* h, uint32_t i) {
  h->active_rings[i / 64].fetch_or(uint64_t{1} << (i % 64), std::memory_order_acq_rel);
}

// Whether any ring has a producer.
inline bool AnyRingActive(const ShmSegmentHeader* h,
                          std::memory_order order = std::memory_order_relaxed) {
  for (const auto& word : h->active_rings)
    if (word.load(order) != 0) return true;
  return false;
}

// Calls fn(ring) for each active ring, starting at `first` and wrapping
// around, until fn returns false. Skips idle words and bits without
// looking at each ring (a pass must not cost 128 checks).
template <class Fn>
void ForEachActiveRing(const ShmSegmentHeader* h, uint32_t first, Fn&& fn,
                       std::memory_order order = std::memory_order_acquire) {
  uint64_t words[kShmRingMaskWords];
  for (uint32_t w = 0; w < kShmRingMaskWords; ++w) words[w] = h->active_rings[w].load(order);
  first %= kShmRings;
  for (uint32_t k = 0; k < kShmRings;) {
    const uint32_t i = (first + k) % kShmRings;
    const uint64_t bits = words[i / 64] >> (i % 64);
    if (bits == 0) {
      k += 64 - i % 64;  // the rest of this word
      continue;
    }
    k += static_cast<uint32_t>(__builtin_ctzll(bits));
    // Past the end: the bit found is at or after `first` again.
    if (k >= kShmRings) return;
    if (!fn((first + k) % kShmRings)) return;
    ++k;
  }
}

inline constexpr size_t kRingsOffset = 4096;
inline constexpr size_t kExportsOffset =
    (kRingsOffset + size_t{kShmRings} * kShmRingBytes + 4095) & ~size_t{4095};
inline constexpr size_t kMrSlotsOffset = kExportsOffset;
inline constexpr size_t kQpSlotsOffset = kMrSlotsOffset + size_t{kShmMrSlots} * sizeof(ShmMrSlot);
inline constexpr size_t kRecvQueuesOffset =
    (kQpSlotsOffset + size_t{kShmQpSlots} * sizeof(ShmQpSlot) + 4095) & ~size_t{4095};
inline constexpr size_t kSrqQueuesOffset =
    (kRecvQueuesOffset + size_t{kShmQpSlots} * sizeof(ShmRecvQueue) + 4095) & ~size_t{4095};
inline constexpr size_t kShmSegmentSize =
    (kSrqQueuesOffset + size_t{kShmSrqSlots} * sizeof(ShmRecvQueue) + 4095) & ~size_t{4095};

// A mapped segment (own or a peer's).
class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Creates this process's segment for a device (memfd, sized, sealed, mapped,
  // header filled). Returns false with a message.
  bool Create(std::string* error);
  // Maps a peer's segment from an open descriptor (takes ownership of fd,
  // closed once mapped: fd() is -1 for a peer's segment) and validates it:
  // seals, size, owner uid, magic, version, netns, and that the
  // pid recorded is `expected_pid` (pid reuse: the descriptor was reached
  // through /proc/<pid>/fd). Returns false with a message.
  bool Attach(int fd, uint32_t expected_pid, std::string* error);

  ShmSegmentHeader* header() const { return reinterpret_cast<ShmSegmentHeader*>(base_); }
  ShmRingHeader* ring(uint32_t i) const {
    return reinterpret_cast<ShmRingHeader*>(base_ + kRingsOffset + size_t{i} * kShmRingBytes);
  }
  uint8_t* slot(uint32_t ring_index, uint64_t position) const {
    return base_ + kRingsOffset + size_t{ring_index} * kShmRingBytes + sizeof(ShmRingHeader) +
           size_t(position & (kShmRingSlots - 1)) * kShmSlotSize;
  }
  ShmMrSlot* mr_slot(uint32_t i) const {
    return reinterpret_cast<ShmMrSlot*>(base_ + kMrSlotsOffset) + i;
  }
  ShmQpSlot* qp_slot(uint32_t i) const {
    return reinterpret_cast<ShmQpSlot*>(base_ + kQpSlotsOffset) + i;
  }
  // The receive queue of QP slot i.
  ShmRecvQueue* recv_queue(uint32_t i) const {
    return reinterpret_cast<ShmRecvQueue*>(base_ + kRecvQueuesOffset) + i;
  }
  // The receive queue of SRQ slot i.
  ShmRecvQueue* srq_queue(uint32_t i) const {
    return reinterpret_cast<ShmRecvQueue*>(base_ + kSrqQueuesOffset) + i;
  }
  int fd() const { return fd_; }
  uint8_t* base() const { return base_; }

 private:
  // Maps the segment from `fd` and takes the fd; on failure closes it and
  // says what failed (`what`: whose segment).
  bool Map(int fd, const char* what, std::string* error);
  int fd_ = -1;
  uint8_t* base_ = nullptr;
};

// This process's network namespace inode (stat of /proc/self/ns/net), 0 if
// unknown.
uint64_t NetnsInode();

}  // namespace softrnic::transport
