// The AEAD of sealed packets (src/seal/aead.h): two implementations of
// AES-256-GCM (libsodium below kShortMessage bytes, OpenSSL above) are one
// cipher. Each matches a published test vector, each opens what the other
// sealed at every length around the switch, and neither opens a changed
// byte.
#include "seal/aead.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace softrnic::seal {
namespace {

std::vector<uint8_t> Hex(const std::string& h) {
  std::vector<uint8_t> v;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    v.push_back(static_cast<uint8_t>(std::stoul(h.substr(i, 2), nullptr, 16)));
  return v;
}

// A cipher keyed with `key`, with or without libsodium's short path.
struct Cipher {
  alignas(kShortStateAlign) uint8_t state[kShortStateBytes] = {};
  Aes256Gcm gcm;
  Cipher(const std::vector<uint8_t>& key, bool short_path) {
    if (short_path) gcm.set_short_state(state);
    EXPECT_TRUE(gcm.SetKey(key.data()));
  }
};

// NIST's GCM specification (McGrew and Viega, "The Galois/Counter Mode of
// Operation"), test case 16: AES-256, 60 bytes of plaintext, 20 of AAD.
const std::string kKey = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308";
const std::string kIv = "cafebabefacedbaddecaf888";
const std::string kPlain =
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525"
    "b16aedf5aa0de657ba637b39";
const std::string kAad = "feedfacedeadbeeffeedfacedeadbeefabaddad2";
const std::string kCipher =
    "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b105682883"
    "8c5f61e6393ba7a0abcc9f662";
const std::string kTag = "76fc6ece0f4e1768cddf8853bb2d551b";

class AeadTest : public ::testing::TestWithParam<bool> {};

TEST_P(AeadTest, MatchesThePublishedVectorBothWays) {
  Cipher c(Hex(kKey), GetParam());
  const auto iv = Hex(kIv), aad = Hex(kAad), expected = Hex(kCipher), tag = Hex(kTag);
  auto data = Hex(kPlain);
  uint8_t out_tag[kTagBytes];
  const Span piece{data.data(), data.data(), data.size()};
  ASSERT_TRUE(c.gcm.Seal(iv.data(), aad.data(), aad.size(), &piece, 1, out_tag));
  EXPECT_EQ(data, expected);
  EXPECT_EQ(std::vector<uint8_t>(out_tag, out_tag + kTagBytes), tag);
  ASSERT_TRUE(c.gcm.Open(iv.data(), aad.data(), aad.size(), data.data(), data.size(), tag.data()));
  EXPECT_EQ(data, Hex(kPlain));
}

INSTANTIATE_TEST_SUITE_P(ShortPath, AeadTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "libsodium" : "openssl";
                         });

TEST(Aead, TheTwoImplementationsAreOneCipherAtEveryLengthAroundTheSwitch) {
  std::vector<uint8_t> key(kKeyBytes);
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i * 7 + 1);
  Cipher openssl(key, false), sodium(key, true);
  uint8_t nonce[kNonceBytes] = {9, 8, 7};
  const uint8_t aad[28] = {0x0A, 0, 0xFF, 0xFF, 0, 1, 2, 3};
  // Every length within 8 of the switch, every 37th elsewhere.
  for (size_t len = 0; len <= 2 * kShortMessage;
       len += (len + 8 < kShortMessage || len > kShortMessage + 8) ? 37 : 1) {
    ++nonce[11];
    std::vector<uint8_t> plain(len);
    for (size_t i = 0; i < len; ++i) plain[i] = static_cast<uint8_t>(std::rand());
    // Two pieces, from another buffer into the packet, as QpSeal gives them
    // (payload from registered memory, pad in place).
    const size_t first = len / 2;
    for (Cipher* from : {&openssl, &sodium}) {
      Cipher* to = from == &openssl ? &sodium : &openssl;
      std::vector<uint8_t> packet(len + 1, 0xEE);
      if (len > first)  // (an empty vector's data() may be null: no memcpy from it)
        std::memcpy(packet.data() + first, plain.data() + first, len - first);
      const Span pieces[2] = {{plain.data(), packet.data(), first},
                              {packet.data() + first, packet.data() + first, len - first}};
      uint8_t tag[kTagBytes];
      ASSERT_TRUE(from->gcm.Seal(nonce, aad, sizeof aad, pieces, 2, tag)) << len;
      EXPECT_EQ(packet[len], 0xEE) << "wrote past the message, length " << len;
      if (len > 16) {
        EXPECT_NE(std::memcmp(packet.data(), plain.data(), len), 0) << len;
      }
      std::vector<uint8_t> copy(packet.begin(), packet.begin() + static_cast<long>(len));
      ASSERT_TRUE(to->gcm.Open(nonce, aad, sizeof aad, copy.data(), len, tag)) << len;
      EXPECT_EQ(copy, plain) << len;
      // A flipped byte of the ciphertext, of the AAD or of the tag: refused.
      if (len > 0) {
        std::vector<uint8_t> bad(packet.begin(), packet.begin() + static_cast<long>(len));
        bad[len / 3] ^= 0x20;
        EXPECT_FALSE(to->gcm.Open(nonce, aad, sizeof aad, bad.data(), len, tag)) << len;
      }
      uint8_t bad_aad[sizeof aad];
      std::memcpy(bad_aad, aad, sizeof aad);
      bad_aad[5] ^= 1;
      copy.assign(packet.begin(), packet.begin() + static_cast<long>(len));
      EXPECT_FALSE(to->gcm.Open(nonce, bad_aad, sizeof bad_aad, copy.data(), len, tag)) << len;
      tag[0] ^= 0x80;
      copy.assign(packet.begin(), packet.begin() + static_cast<long>(len));
      EXPECT_FALSE(to->gcm.Open(nonce, aad, sizeof aad, copy.data(), len, tag)) << len;
    }
  }
}

}  // namespace
}  // namespace softrnic::seal
