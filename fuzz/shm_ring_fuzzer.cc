// libFuzzer target: the shared-memory transport's consumer side against a
// hostile peer (src/transport/shm_ring.h, src/transport/shm_segment.cc).
// The fuzzer plays the other process: it writes the ring indices, the slot
// headers and the segment header that softrnic reads from shared memory.
//
// The input is a stream of operations (gen_corpus.cc writes seeds), each
// [op][arg bytes...]:
//   0 [delta lo][delta hi]        tail = consumer head + delta (signed)
//   1 [8 bytes]                   tail = raw 64-bit value
//   2 [slot][16 header bytes]     writes a slot header at head + slot
//   3 [max]                       drains up to max packets as the transport
//                                 does (ShmTransport::PopInbound), releases
//   4 [8 bytes]                   a new consumer whose head is this value
//   5 [fix mask][header bytes]    writes a peer segment header (up to 512
//                                 bytes; mask bits keep fields valid: magic,
//                                 version, pid, netns, uid, size) and
//                                 attaches it with ShmSegment::Attach
// Rings and segments are real sealed memfds mapped as the transport maps them.
//
// Properties checked (abort on violation):
//  - Ready() never reports more than kShmRingSlots packets, and a tail
//    outside [head, head + kShmRingSlots] resynchronises (counted);
//  - Pop returns 0 (dropped) or a length of at most kShmSlotPayload, and
//    copies into a private buffer of exactly kShmSlotPayload bytes (ASan
//    catches an overrun) the bytes the slot held;
//  - the consumer's published head is what it consumed, never past the tail
//    it accepted;
//  - Attach accepts a header only if every identity field is valid and
//    n_locals <= kShmMaxLocals; a refused attach leaves nothing mapped.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "transport/shm_ring.h"
#include "transport/shm_segment.h"

namespace {

using namespace softrnic::transport;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "shm_ring_fuzzer: property violated: %s\n", what);
  std::abort();
}
#define CHECK(cond)           \
  do {                        \
    if (!(cond)) Fail(#cond); \
  } while (0)

constexpr uint32_t kMinPacket = 16;  // BTH + ICRC, as ShmTransport drops shorter ones
constexpr uint32_t kLocals = 2;      // endpoints of the consuming device
constexpr uint32_t kRing = 5;

// The consumer's own segment (its rings are where a peer writes).
ShmSegment& OwnSegment() {
  static ShmSegment* seg = [] {
    auto* s = new ShmSegment;
    std::string error;
    if (!s->Create(&error)) {
      std::fprintf(stderr, "shm_ring_fuzzer: %s\n", error.c_str());
      std::abort();
    }
    return s;
  }();
  return *seg;
}

// A peer's segment file: sealed against shrinking like the real ones, so
// Attach's checks run up to the header. Its first page is rewritten per input.
int PeerSegmentFd() {
  static int fd = [] {
    const int f = memfd_create("fuzz-peer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f < 0 || ftruncate(f, static_cast<off_t>(kShmSegmentSize)) != 0 ||
        fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)
      std::abort();
    return f;
  }();
  return fd;
}

uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

void AttachHostileHeader(uint8_t fix, const uint8_t* bytes, size_t n) {
  ShmSegmentHeader h{};
  std::memcpy(&h, bytes, std::min(n, sizeof(h)));
  const uint32_t pid = static_cast<uint32_t>(getpid());
  if (fix & 1) h.magic = kShmMagic;
  if (fix & 2) h.version = kShmVersion;
  if (fix & 4) h.pid = pid;
  if (fix & 8) h.netns = NetnsInode();
  if (fix & 16) h.uid = static_cast<uint32_t>(geteuid());
  if (fix & 32) h.total_size = kShmSegmentSize;
  if (fix & 64) h.n_locals %= kShmMaxLocals + 1;
  const int fd = PeerSegmentFd();
  CHECK(pwrite(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h)));
  ShmSegment peer;
  std::string error;
  const bool ok = peer.Attach(dup(fd), pid, &error);
  if (ok) {
    const ShmSegmentHeader* a = peer.header();
    CHECK(a->magic == kShmMagic && a->version == kShmVersion && a->pid == pid &&
          a->netns == NetnsInode() && a->uid == geteuid() && a->total_size == kShmSegmentSize);
    CHECK(a->n_locals <= kShmMaxLocals);
    // What ShmTransport::Attach reads next: the peer's endpoints.
    volatile uint32_t sink = 0;
    for (uint32_t i = 0; i < a->n_locals; ++i) sink = sink + a->local_ip[i] + a->local_port[i];
  } else {
    CHECK(!error.empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ShmSegment& seg = OwnSegment();
  ShmRingHeader* ring = seg.ring(kRing);
  ring->head.store(0, std::memory_order_relaxed);
  ring->tail.store(0, std::memory_order_relaxed);
  auto consumer = std::make_unique<ShmRingConsumer>(&seg, kRing);
  uint64_t head = 0;  // the fuzzer's model of the consumer's head
  std::unique_ptr<uint8_t[]> out(new uint8_t[kShmSlotPayload]);
  size_t pos = 0;
  auto take = [&](size_t n) -> const uint8_t* {
    if (size - pos < n) return nullptr;
    const uint8_t* p = data + pos;
    pos += n;
    return p;
  };
  while (pos < size) {
    const uint8_t op = data[pos++] % 6;
    if (op == 0) {
      const uint8_t* a = take(2);
      if (!a) break;
      const int16_t delta = static_cast<int16_t>(a[0] | (a[1] << 8));
      ring->tail.store(head + static_cast<uint64_t>(int64_t{delta}), std::memory_order_release);
    } else if (op == 1) {
      const uint8_t* a = take(8);
      if (!a) break;
      ring->tail.store(Load64(a), std::memory_order_release);
    } else if (op == 2) {
      const uint8_t* a = take(1 + kShmSlotHeader);
      if (!a) break;
      uint8_t* slot = seg.slot(kRing, head + a[0]);
      std::memcpy(slot, a + 1, kShmSlotHeader);
      // A recognisable payload: byte i of the slot is (i * 31) & 0xff.
      for (uint32_t i = 0; i < 64; ++i) slot[kShmSlotHeader + i] = static_cast<uint8_t>(i * 31);
    } else if (op == 3) {
      const uint8_t* a = take(1);
      if (!a) break;
      const uint64_t tail = ring->tail.load(std::memory_order_acquire);
      const uint64_t resyncs = consumer->resyncs();
      const uint64_t ready = consumer->Ready();
      CHECK(ready <= kShmRingSlots);
      if (tail - head > kShmRingSlots) {
        CHECK(ready == 0 && consumer->resyncs() == resyncs + 1);
        CHECK(ring->head.load(std::memory_order_acquire) == tail);
        head = tail;
        continue;
      }
      CHECK(ready == tail - head);
      const uint64_t max = std::min<uint64_t>(a[0], ready);
      for (uint64_t i = 0; i < max; ++i) {
        uint8_t expected[kShmSlotHeader + 64];
        std::memcpy(expected, seg.slot(kRing, head), sizeof(expected));
        ShmSlotHeader h;
        const uint32_t len = consumer->Pop(&h, out.get());
        ++head;
        CHECK(std::memcmp(&h, expected, kShmSlotHeader) == 0);
        if (len == 0) continue;
        CHECK(len == h.length && len <= kShmSlotPayload);
        CHECK(std::memcmp(out.get(), expected + kShmSlotHeader, std::min<uint32_t>(len, 64)) == 0);
        // ShmTransport::PopInbound's own checks before a packet goes on.
        if (len < kMinPacket || h.local_index >= kLocals) continue;
      }
      consumer->Release();
      CHECK(ring->head.load(std::memory_order_acquire) == head);
    } else if (op == 4) {
      const uint8_t* a = take(8);
      if (!a) break;
      ring->head.store(Load64(a), std::memory_order_relaxed);
      consumer = std::make_unique<ShmRingConsumer>(&seg, kRing);
      head = Load64(a);
    } else {
      const uint8_t* a = take(1);
      if (!a) break;
      const size_t n = std::min<size_t>(size - pos, 512);
      AttachHostileHeader(a[0], data + pos, n);
      pos += n;
    }
  }
  return 0;
}
