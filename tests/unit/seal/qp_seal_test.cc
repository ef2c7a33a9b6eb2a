// Sealed packets (src/seal, docs/sealed.md): what one side seals the other
// opens, once, and nothing else opens: not a changed byte anywhere, not the
// other direction, not another key, not the same packet twice.
#include "seal/qp_seal.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace softrnic::seal {
namespace {

constexpr uint32_t kQpnA = 0x12a4c1, kQpnB = 0x07f3e9;
constexpr uint32_t kHeader = 28;  // BTH + RETH: an RDMA WRITE Only

std::vector<uint8_t> Key(uint8_t fill) { return std::vector<uint8_t>(32, fill); }

// A WRITE Only to `dest_qpn`: BTH (TVer 0, pad count 2 for a payload of
// 10), RETH, payload, pad, then room for the trailer and the ICRC.
struct Packet {
  std::array<uint8_t, 4300> bytes{};
  uint32_t payload = 0, pad = 0;
  uint32_t length() const { return kHeader + payload + pad + kTrailerBytes + 4; }
};

Packet MakeWrite(uint32_t dest_qpn, const std::vector<uint8_t>& payload) {
  Packet p;
  p.payload = static_cast<uint32_t>(payload.size());
  p.pad = (4 - p.payload % 4) % 4;
  p.bytes[0] = 0x0A;  // RC RDMA WRITE Only
  p.bytes[1] = static_cast<uint8_t>(p.pad << 4);
  p.bytes[2] = 0xFF;
  p.bytes[3] = 0xFF;
  p.bytes[5] = static_cast<uint8_t>(dest_qpn >> 16);
  p.bytes[6] = static_cast<uint8_t>(dest_qpn >> 8);
  p.bytes[7] = static_cast<uint8_t>(dest_qpn);
  p.bytes[11] = 7;  // PSN
  for (uint32_t i = 12; i < kHeader; ++i) p.bytes[i] = static_cast<uint8_t>(i * 3);
  if (!payload.empty()) std::memcpy(p.bytes.data() + kHeader, payload.data(), payload.size());
  return p;
}

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(0x41 + i % 26);
  return v;
}

struct Pair {
  std::unique_ptr<QpSeal> a, b;
  explicit Pair(const std::vector<uint8_t>& key_a, const std::vector<uint8_t>& key_b,
                unsigned epoch_shift = kEpochShift)
      : a(QpSeal::Create(key_a, kQpnA, kQpnB, epoch_shift)),
        b(QpSeal::Create(key_b, kQpnB, kQpnA, epoch_shift)) {}
};

TEST(QpSeal, WhatOneSideSealsTheOtherOpensOnce) {
  Pair pair(Key(1), Key(1));
  ASSERT_TRUE(pair.a && pair.b);
  const auto payload = Pattern(1030);
  Packet p = MakeWrite(kQpnB, payload);
  const Packet plain = p;
  ASSERT_TRUE(pair.a->Seal(p.bytes.data(), kHeader, nullptr, p.payload, p.pad));
  EXPECT_EQ(TverOf(p.bytes.data()), kSealedTver);
  // Headers in clear, payload not.
  EXPECT_EQ(0, std::memcmp(p.bytes.data() + 2, plain.bytes.data() + 2, kHeader - 2));
  EXPECT_NE(0, std::memcmp(p.bytes.data() + kHeader, payload.data(), payload.size()));
  const Packet sealed = p;

  uint32_t opened = 0;
  ASSERT_EQ(pair.b->Open(p.bytes.data(), p.length(), kHeader, &opened), OpenResult::kOk);
  EXPECT_EQ(opened, p.length() - kTrailerBytes);
  EXPECT_EQ(TverOf(p.bytes.data()), 0);
  EXPECT_EQ(0, std::memcmp(p.bytes.data(), plain.bytes.data(), kHeader + p.payload + p.pad));

  // The same packet again is a replay, refused before decryption.
  p = sealed;
  EXPECT_EQ(pair.b->Open(p.bytes.data(), p.length(), kHeader, &opened), OpenResult::kReplay);
}

TEST(QpSeal, PayloadFromRegisteredMemoryIsEncryptedIntoThePacket) {
  Pair pair(Key(2), Key(2));
  const auto payload = Pattern(4096);
  Packet p = MakeWrite(kQpnB, {});
  p.payload = 4096;
  ASSERT_TRUE(pair.a->Seal(p.bytes.data(), kHeader, payload.data(), p.payload, 0));
  uint32_t opened = 0;
  ASSERT_EQ(pair.b->Open(p.bytes.data(), p.length(), kHeader, &opened), OpenResult::kOk);
  EXPECT_EQ(0, std::memcmp(p.bytes.data() + kHeader, payload.data(), payload.size()));
}

TEST(QpSeal, AnyChangedByteFailsAuthentication) {
  Pair pair(Key(3), Key(3));
  Packet p = MakeWrite(kQpnB, Pattern(37));
  // Seal several packets so that each mutation gets a fresh counter.
  const uint32_t covered = kHeader + p.payload + p.pad + kTrailerBytes;
  for (uint32_t i = 0; i < covered; ++i) {
    if (i == 1) continue;  // TVer: a changed TVer is not a sealed packet any more
    Packet q = MakeWrite(kQpnB, Pattern(37));
    ASSERT_TRUE(pair.a->Seal(q.bytes.data(), kHeader, nullptr, q.payload, q.pad));
    q.bytes[i] ^= 0x01;
    uint32_t opened = 0;
    const OpenResult r = pair.b->Open(q.bytes.data(), q.length(), kHeader, &opened);
    // A changed counter byte may also land outside the window or the
    // epochs next to it; either way nothing opens.
    EXPECT_NE(r, OpenResult::kOk) << "byte " << i;
  }
  // And an untouched one still opens afterwards: failures left no state.
  ASSERT_TRUE(pair.a->Seal(p.bytes.data(), kHeader, nullptr, p.payload, p.pad));
  uint32_t opened = 0;
  EXPECT_EQ(pair.b->Open(p.bytes.data(), p.length(), kHeader, &opened), OpenResult::kOk);
}

TEST(QpSeal, AnotherKeyOrTheReflectedDirectionDoesNotOpen) {
  Pair wrong(Key(4), Key(5));
  Packet p = MakeWrite(kQpnB, Pattern(64));
  ASSERT_TRUE(wrong.a->Seal(p.bytes.data(), kHeader, nullptr, p.payload, p.pad));
  uint32_t opened = 0;
  EXPECT_EQ(wrong.b->Open(p.bytes.data(), p.length(), kHeader, &opened), OpenResult::kForged);

  // A's own packet sent back to A (a reflection): A opens with B->A keys.
  Pair same(Key(6), Key(6));
  Packet r = MakeWrite(kQpnA, Pattern(64));
  ASSERT_TRUE(same.a->Seal(r.bytes.data(), kHeader, nullptr, r.payload, r.pad));
  EXPECT_EQ(same.a->Open(r.bytes.data(), r.length(), kHeader, &opened), OpenResult::kForged);
}

TEST(QpSeal, ReorderingWithinTheWindowOpensAndOlderIsRefused) {
  Pair pair(Key(7), Key(7));
  std::vector<Packet> sent;
  for (int i = 0; i < 1100; ++i) {
    Packet p = MakeWrite(kQpnB, Pattern(8));
    ASSERT_TRUE(pair.a->Seal(p.bytes.data(), kHeader, nullptr, p.payload, p.pad));
    sent.push_back(p);
  }
  uint32_t opened = 0;
  // The newest first, then one 1,000 behind (inside the window), then the
  // very first (1,099 behind: outside).
  EXPECT_EQ(pair.b->Open(sent[1099].bytes.data(), sent[1099].length(), kHeader, &opened),
            OpenResult::kOk);
  EXPECT_EQ(pair.b->Open(sent[99].bytes.data(), sent[99].length(), kHeader, &opened),
            OpenResult::kOk);
  EXPECT_EQ(pair.b->Open(sent[0].bytes.data(), sent[0].length(), kHeader, &opened),
            OpenResult::kReplay);
}

TEST(QpSeal, KeysChangeEveryEpochAndBothSidesFollow) {
  // Epochs of 16 packets: 100 packets cross six key changes.
  Pair pair(Key(8), Key(8), /*epoch_shift=*/4);
  pair.a->set_next_counter(5);
  for (int i = 0; i < 100; ++i) {
    Packet p = MakeWrite(kQpnB, Pattern(20 + i));
    ASSERT_TRUE(pair.a->Seal(p.bytes.data(), kHeader, nullptr, p.payload, p.pad));
    uint32_t opened = 0;
    ASSERT_EQ(pair.b->Open(p.bytes.data(), p.length(), kHeader, &opened), OpenResult::kOk) << i;
  }
  EXPECT_EQ(pair.a->epochs_sent(), 7u);  // counters 5..104: epochs 0..6
}

TEST(QpSeal, KeysChangeWhenAKeyHasEncryptedItsBudgetOfBytes) {
  // 1,000 bytes per key; 300-byte payloads (plus pad): three packets fit,
  // the fourth moves to the next epoch, at its first counter.
  auto a = QpSeal::Create(Key(7), kQpnA, kQpnB, kEpochShift, 1000);
  auto b = QpSeal::Create(Key(7), kQpnB, kQpnA, kEpochShift, 1000);
  ASSERT_TRUE(a && b);
  a->set_next_counter(40);
  std::vector<uint64_t> counters;
  for (int i = 0; i < 10; ++i) {
    Packet p = MakeWrite(kQpnB, Pattern(300));
    counters.push_back(a->next_counter());
    ASSERT_TRUE(a->Seal(p.bytes.data(), kHeader, nullptr, p.payload, p.pad));
    // The counter the packet carries, in its trailer.
    uint64_t sent = 0;
    const uint8_t* trailer = p.bytes.data() + kHeader + p.payload + p.pad;
    for (int k = 0; k < 8; ++k) sent = (sent << 8) | trailer[k];
    counters.back() = sent;
    uint32_t opened = 0;
    ASSERT_EQ(b->Open(p.bytes.data(), p.length(), kHeader, &opened), OpenResult::kOk) << i;
    EXPECT_EQ(std::vector<uint8_t>(p.bytes.begin() + kHeader, p.bytes.begin() + kHeader + 300),
              Pattern(300))
        << i;
  }
  const uint64_t epoch = uint64_t{1} << kEpochShift;
  EXPECT_EQ(counters[0], 40u);
  EXPECT_EQ(counters[2], 42u);
  EXPECT_EQ(counters[3], epoch);  // the first counter of epoch 1
  EXPECT_EQ(counters[5], epoch + 2);
  EXPECT_EQ(counters[6], 2 * epoch);
  EXPECT_EQ(counters[9], 3 * epoch);
  EXPECT_EQ(a->epochs_sent(), 4u);
}

TEST(QpSeal, AFarEpochIsRefusedOnceTheConnectionIsGoing) {
  Pair pair(Key(9), Key(9), /*epoch_shift=*/4);
  pair.a->set_next_counter(0);
  Packet p = MakeWrite(kQpnB, Pattern(8));
  ASSERT_TRUE(pair.a->Seal(p.bytes.data(), kHeader, nullptr, p.payload, p.pad));
  uint32_t opened = 0;
  ASSERT_EQ(pair.b->Open(p.bytes.data(), p.length(), kHeader, &opened), OpenResult::kOk);
  // Sender jumps 10 epochs ahead (as a forger choosing counters would):
  // the receiver derives no key for it.
  pair.a->set_next_counter(16 * 10);
  Packet far = MakeWrite(kQpnB, Pattern(8));
  ASSERT_TRUE(pair.a->Seal(far.bytes.data(), kHeader, nullptr, far.payload, far.pad));
  EXPECT_EQ(pair.b->Open(far.bytes.data(), far.length(), kHeader, &opened),
            OpenResult::kStaleEpoch);
}

TEST(QpSeal, TooShortForATrailerIsMalformed) {
  Pair pair(Key(1), Key(1));
  std::array<uint8_t, 64> bytes{};
  bytes[1] = kSealedTver;
  uint32_t opened = 0;
  EXPECT_EQ(pair.b->Open(bytes.data(), kHeader + kTrailerBytes + 3, kHeader, &opened),
            OpenResult::kMalformed);
  EXPECT_EQ(pair.b->Open(bytes.data(), 16, 12, &opened), OpenResult::kMalformed);
}

TEST(QpSeal, CountersStartAtRandomPlaces) {
  auto a = QpSeal::Create(Key(1), kQpnA, kQpnB);
  auto b = QpSeal::Create(Key(1), kQpnA, kQpnB);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->next_counter(), b->next_counter());
  EXPECT_LT(a->next_counter(), uint64_t{1} << 62);
}

}  // namespace
}  // namespace softrnic::seal

namespace softrnic::seal {
namespace {

// Issue 43's nonce check: over 2^20 packets with a re-key every 4,096, the
// counters on the wire never repeat (so no key meets a nonce twice: the
// nonce is the direction's salt and the counter, the key the counter's
// epoch), every key change is followed by the receiver, and a second QP
// with the very same keys sends from a counter range of its own.
TEST(QpSeal, NoNonceRepeatsOverAMillionPacketsWithRekeys) {
  constexpr unsigned kShift = 12;  // a new key every 4,096 packets
  constexpr uint64_t kPackets = uint64_t{1} << 20;
  const std::vector<uint8_t> key(32, 0x21);
  auto a = QpSeal::Create(key, kQpnA, kQpnB, kShift);
  auto b = QpSeal::Create(key, kQpnB, kQpnA, kShift);
  auto twin = QpSeal::Create(key, kQpnA, kQpnB, kShift);  // same secret, same QPNs
  ASSERT_TRUE(a && b && twin);
  std::vector<uint64_t> counters;
  counters.reserve(kPackets);
  uint64_t last = 0;
  for (uint64_t i = 0; i < kPackets; ++i) {
    Packet p = MakeWrite(kQpnB, {});  // an ACK-sized packet: headers only
    ASSERT_TRUE(a->Seal(p.bytes.data(), kHeader, nullptr, 0, 0));
    uint64_t c = 0;
    for (int k = 0; k < 8; ++k) c = (c << 8) | p.bytes[kHeader + k];
    ASSERT_TRUE(i == 0 || c == last + 1) << "packet " << i;  // strictly one up
    last = c;
    counters.push_back(c);
    // The receiver follows every key change (every 64th packet opened).
    if (i % 64 == 0) {
      uint32_t opened = 0;
      ASSERT_EQ(b->Open(p.bytes.data(), p.length(), kHeader, &opened), OpenResult::kOk) << i;
    }
  }
  std::sort(counters.begin(), counters.end());
  EXPECT_EQ(std::adjacent_find(counters.begin(), counters.end()), counters.end());
  EXPECT_GE(a->epochs_sent(), kPackets >> kShift);  // 256 keys or more
  // The twin's counters lie outside the first QP's range.
  const uint64_t t = twin->next_counter();
  EXPECT_TRUE(t + kPackets <= counters.front() || t > counters.back());
}

}  // namespace
}  // namespace softrnic::seal
