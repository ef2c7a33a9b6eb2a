// rdma_cm's key exchange (seal/connection_secret.h, docs/sealed.md "The
// exchange"): both sides reach one secret; the key file, the transcript and
// each side's ephemeral key all change it; a small-order peer key is refused.
#include "seal/connection_secret.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

namespace softrnic::seal {
namespace {

std::vector<uint8_t> Transcript(const EphemeralX25519& offer, const EphemeralX25519& answer) {
  std::vector<uint8_t> t(offer.public_key(), offer.public_key() + kX25519Bytes);
  t.insert(t.end(), answer.public_key(), answer.public_key() + kX25519Bytes);
  return t;
}

std::vector<uint8_t> SecretOf(std::span<const uint8_t> key, const EphemeralX25519& mine,
                              const EphemeralX25519& theirs, std::span<const uint8_t> transcript) {
  std::array<uint8_t, kX25519Bytes> shared{};
  EXPECT_TRUE(mine.Derive(theirs.public_key(), shared.data()));
  auto s = ConnectionSecret::FromExchange(key, shared, transcript);
  EXPECT_NE(s, nullptr);
  return s ? std::vector<uint8_t>(s->bytes().begin(), s->bytes().end()) : std::vector<uint8_t>{};
}

TEST(ConnectionSecret, BothSidesReachOneSecretThatEveryInputChanges) {
  EphemeralX25519 active, passive, stranger;
  ASSERT_TRUE(active.ok() && passive.ok() && stranger.ok());
  const std::vector<uint8_t> key(32, 7), other_key(32, 8);
  const auto transcript = Transcript(active, passive);
  const auto a = SecretOf(key, active, passive, transcript);
  const auto p = SecretOf(key, passive, active, transcript);
  ASSERT_EQ(a.size(), kKeyBytes);
  EXPECT_EQ(a, p);
  EXPECT_NE(a, SecretOf(other_key, passive, active, transcript));  // another key file
  EXPECT_NE(a, SecretOf({}, passive, active, transcript));         // none
  EXPECT_NE(a, SecretOf(key, passive, active, Transcript(passive, active)));
  // A man in the middle with his own key pair reaches another secret.
  EXPECT_NE(a, SecretOf(key, stranger, active, Transcript(active, stranger)));
  EXPECT_NE(std::memcmp(active.public_key(), passive.public_key(), kX25519Bytes), 0);
}

TEST(ConnectionSecret, ASmallOrderPeerKeyIsRefused) {
  EphemeralX25519 mine;
  ASSERT_TRUE(mine.ok());
  const std::array<uint8_t, kX25519Bytes> zero{};  // order 1: shared secret all zeros
  std::array<uint8_t, kX25519Bytes> out{};
  EXPECT_FALSE(mine.Derive(zero.data(), out.data()));
}

}  // namespace
}  // namespace softrnic::seal
