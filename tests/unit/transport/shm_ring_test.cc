// The shared-memory packet ring (shm_ring.h): order and contents across
// many wraps, full and empty, and hostile indices and lengths written by the
// other side.
#include "transport/shm_ring.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace softrnic::transport {
namespace {

std::vector<uint8_t> Packet(uint32_t n, uint32_t len) {
  std::vector<uint8_t> p(len);
  for (uint32_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(n * 31 + i);
  return p;
}

class ShmRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(seg_.Create(&error)) << error;
    out_.resize(kShmSlotPayload);
  }
  ShmSegment seg_;
  std::vector<uint8_t> out_;
};

TEST_F(ShmRingTest, OrderAndContentsAcrossManyWraps) {
  ShmRingProducer prod(&seg_, 3);
  ShmRingConsumer cons(&seg_, 3);
  uint32_t sent = 0, received = 0;
  const uint32_t total = kShmRingSlots * 10 + 7;
  while (received < total) {
    // Bursts of varying size, so the indices cross the wrap at every offset.
    for (uint32_t k = 0; k < (sent % 37) + 1 && sent < total; ++k) {
      const auto p = Packet(sent, 16 + (sent * 97) % (kShmSlotPayload - 16));
      ShmSlotHeader h{};
      h.local_index = static_cast<uint16_t>(sent & 0xF);
      h.src_ip = sent;
      h.src_port = static_cast<uint16_t>(sent);
      if (!prod.Write(h, p.data(), static_cast<uint32_t>(p.size()))) break;
      ++sent;
    }
    prod.Publish();
    uint64_t ready = cons.Ready();
    while (ready-- > 0) {
      ShmSlotHeader h;
      const uint32_t len = cons.Pop(&h, out_.data());
      const auto expect = Packet(received, 16 + (received * 97) % (kShmSlotPayload - 16));
      ASSERT_EQ(len, expect.size()) << received;
      ASSERT_EQ(std::memcmp(out_.data(), expect.data(), len), 0) << received;
      EXPECT_EQ(h.src_ip, received);
      EXPECT_EQ(h.local_index, received & 0xF);
      ++received;
    }
    cons.Release();
  }
  EXPECT_EQ(cons.resyncs(), 0u);
  EXPECT_EQ(seg_.ring(3)->tail.load(), uint64_t{total});
  EXPECT_EQ(seg_.ring(3)->head.load(), uint64_t{total});
}

TEST_F(ShmRingTest, FullRingRefusesUntilTheConsumerFreesASlot) {
  ShmRingProducer prod(&seg_, 0);
  ShmRingConsumer cons(&seg_, 0);
  const auto p = Packet(1, 64);
  ShmSlotHeader h{};
  for (uint32_t i = 0; i < kShmRingSlots; ++i) ASSERT_TRUE(prod.Write(h, p.data(), 64)) << i;
  EXPECT_FALSE(prod.Write(h, p.data(), 64));
  prod.Publish();
  EXPECT_EQ(cons.Ready(), uint64_t{kShmRingSlots});
  EXPECT_FALSE(prod.Write(h, p.data(), 64));  // not released yet
  ASSERT_EQ(cons.Pop(&h, out_.data()), 64u);
  cons.Release();
  EXPECT_TRUE(prod.Write(h, p.data(), 64));
  EXPECT_FALSE(prod.Write(h, p.data(), 64));
}

TEST_F(ShmRingTest, OversizedPacketIsRefused) {
  ShmRingProducer prod(&seg_, 0);
  std::vector<uint8_t> big(kShmSlotPayload + 1);
  ShmSlotHeader h{};
  EXPECT_FALSE(prod.Write(h, big.data(), static_cast<uint32_t>(big.size())));
  EXPECT_TRUE(prod.Write(h, big.data(), kShmSlotPayload));
}

TEST_F(ShmRingTest, HostileTailIsNotFollowed) {
  ShmRingConsumer cons(&seg_, 1);
  // A producer claims far more packets than the ring holds, or a tail behind
  // the head: the consumer drops the ring's contents and resynchronises.
  seg_.ring(1)->tail.store(kShmRingSlots + 1);
  EXPECT_EQ(cons.Ready(), 0u);
  EXPECT_EQ(cons.resyncs(), 1u);
  EXPECT_EQ(seg_.ring(1)->head.load(), uint64_t{kShmRingSlots + 1});
  seg_.ring(1)->tail.store(3);  // behind the head: wraps to a huge count
  EXPECT_EQ(cons.Ready(), 0u);
  EXPECT_EQ(cons.resyncs(), 2u);
  // Back in step, it works again.
  ShmRingProducer prod(&seg_, 1);
  const auto p = Packet(9, 100);
  ShmSlotHeader h{};
  ASSERT_TRUE(prod.Write(h, p.data(), 100));
  prod.Publish();
  EXPECT_EQ(cons.Ready(), 1u);
  EXPECT_EQ(cons.Pop(&h, out_.data()), 100u);
}

TEST_F(ShmRingTest, HostileSlotLengthIsDropped) {
  ShmRingProducer prod(&seg_, 2);
  ShmRingConsumer cons(&seg_, 2);
  const auto p = Packet(1, 64);
  ShmSlotHeader h{};
  ASSERT_TRUE(prod.Write(h, p.data(), 64));
  ASSERT_TRUE(prod.Write(h, p.data(), 64));
  prod.Publish();
  // The producer rewrites the first slot's length after publishing it.
  const uint32_t huge = 0xFFFFFFF0u;
  std::memcpy(seg_.slot(2, 0), &huge, 4);
  ASSERT_EQ(cons.Ready(), 2u);
  EXPECT_EQ(cons.Pop(&h, out_.data()), 0u);   // dropped, nothing copied past the slot
  EXPECT_EQ(cons.Pop(&h, out_.data()), 64u);  // the next one is fine
}

TEST_F(ShmRingTest, HostileHeadMakesTheProducerStop) {
  ShmRingProducer prod(&seg_, 4);
  // A consumer "ahead" of the producer would let it overwrite unread slots
  // without limit; the producer reads it as full instead.
  seg_.ring(4)->head.store(1000);
  ShmSlotHeader h{};
  const auto p = Packet(1, 64);
  for (uint32_t i = 0; i < kShmRingSlots; ++i) (void)prod.Write(h, p.data(), 64);
  EXPECT_FALSE(prod.Write(h, p.data(), 64));
}


// The ring mask (shm_segment.h): ForEachActiveRing visits each marked ring
// once, in order from any start, wrapping, across both mask words; and
// stops when asked.
TEST(ShmRingMask, EachActiveRingOnceFromAnyStart) {
  auto header = std::make_unique<ShmSegmentHeader>();
  for (auto& w : header->active_rings) w.store(0);
  EXPECT_FALSE(AnyRingActive(header.get()));
  const std::vector<uint32_t> marked = {0, 5, 63, 64, 100, kShmRings - 1};
  for (uint32_t i : marked) MarkRingActive(header.get(), i);
  EXPECT_TRUE(AnyRingActive(header.get()));
  for (uint32_t first = 0; first < kShmRings + 3; ++first) {
    std::vector<uint32_t> seen;
    ForEachActiveRing(header.get(), first, [&](uint32_t i) {
      seen.push_back(i);
      return true;
    });
    // Expected: the marked rings rotated to start at the first >= first.
    std::vector<uint32_t> want;
    for (uint32_t i : marked)
      if (i >= first % kShmRings) want.push_back(i);
    for (uint32_t i : marked)
      if (i < first % kShmRings) want.push_back(i);
    EXPECT_EQ(seen, want) << "first " << first;
  }
  int calls = 0;
  ForEachActiveRing(header.get(), 0, [&](uint32_t) { return ++calls < 2; });
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace softrnic::transport
