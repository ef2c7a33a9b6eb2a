// The AEAD of sealed packets (src/seal/aead.h): libgcrypt's AES-256-GCM as
// softrnic calls it is the standard cipher. It matches a published test
// vector both ways; at every length a packet has, split into the pieces
// QpSeal gives it, it seals exactly what an independent implementation
// (OpenSSL's EVP, which sealed softrnic's packets until session 38) seals,
// and opens what that one sealed; and it opens nothing with a changed byte.
#include "seal/aead.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
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

TEST(Aead, MatchesThePublishedVectorBothWays) {
  Aes256Gcm gcm;
  ASSERT_TRUE(gcm.SetKey(Hex(kKey).data()));
  const auto iv = Hex(kIv), aad = Hex(kAad), expected = Hex(kCipher), tag = Hex(kTag);
  auto data = Hex(kPlain);
  uint8_t out_tag[kTagBytes];
  const Span piece{data.data(), data.data(), data.size()};
  ASSERT_TRUE(gcm.Seal(iv.data(), aad.data(), aad.size(), &piece, 1, out_tag));
  EXPECT_EQ(data, expected);
  EXPECT_EQ(std::vector<uint8_t>(out_tag, out_tag + kTagBytes), tag);
  ASSERT_TRUE(gcm.Open(iv.data(), aad.data(), aad.size(), data.data(), data.size(), tag.data()));
  EXPECT_EQ(data, Hex(kPlain));
}

TEST(Aead, NothingIsSealedOrOpenedWithoutAKey) {
  Aes256Gcm gcm;
  uint8_t nonce[kNonceBytes] = {}, tag[kTagBytes] = {}, data[4] = {};
  const Span piece{data, data, sizeof data};
  EXPECT_FALSE(gcm.has_key());
  EXPECT_FALSE(gcm.Seal(nonce, nullptr, 0, &piece, 1, tag));
  EXPECT_FALSE(gcm.Open(nonce, nullptr, 0, data, sizeof data, tag));
}

// OpenSSL's AES-256-GCM of `plain` (the reference).
void Reference(const uint8_t* key, const uint8_t* nonce, const uint8_t* aad, size_t aad_length,
               const std::vector<uint8_t>& plain, std::vector<uint8_t>* cipher, uint8_t* tag) {
  std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(EVP_CIPHER_CTX_new(),
                                                                       EVP_CIPHER_CTX_free);
  cipher->assign(plain.size(), 0);
  int n = 0;
  ASSERT_EQ(EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key, nonce), 1);
  ASSERT_EQ(EVP_EncryptUpdate(ctx.get(), nullptr, &n, aad, static_cast<int>(aad_length)), 1);
  if (!plain.empty()) {
    ASSERT_EQ(EVP_EncryptUpdate(ctx.get(), cipher->data(), &n, plain.data(),
                                static_cast<int>(plain.size())),
              1);
  }
  ASSERT_EQ(EVP_EncryptFinal_ex(ctx.get(), nullptr, &n), 1);
  ASSERT_EQ(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, tag), 1);
}

TEST(Aead, SealsWhatAnotherImplementationSealsAtEveryPacketLengthInPieces) {
  std::vector<uint8_t> key(kKeyBytes);
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i * 7 + 1);
  Aes256Gcm gcm;
  ASSERT_TRUE(gcm.SetKey(key.data()));
  uint8_t nonce[kNonceBytes] = {9, 8, 7};
  const uint8_t aad[28] = {0x0A, 0, 0xFF, 0xFF, 0, 1, 2, 3};
  // Every length up to 80 (partial blocks on both sides of each piece),
  // then every 37th up to a 4 KiB MTU's payload and its pad.
  for (size_t len = 0; len <= 4100; len += len < 80 ? 1 : 37) {
    ++nonce[11];
    if (nonce[11] == 0) ++nonce[10];
    std::vector<uint8_t> plain(len);
    for (size_t i = 0; i < len; ++i) plain[i] = static_cast<uint8_t>(std::rand());
    std::vector<uint8_t> expected;
    uint8_t expected_tag[kTagBytes];
    Reference(key.data(), nonce, aad, sizeof aad, plain, &expected, expected_tag);
    // Pieces as QpSeal gives them: the payload from another buffer (the
    // registered memory) into the packet, then the pad bytes in place;
    // and three pieces, the middle one of 1 byte.
    const size_t first = len / 2, second = len > first ? 1 : 0;
    for (int count : {1, 2, 3}) {
      std::vector<uint8_t> packet(len + 1, 0xEE);
      if (len > first)
        std::memcpy(packet.data() + first, plain.data() + first, len - first);
      Span pieces[3];
      if (count == 1) {
        if (len > 0) std::memcpy(packet.data(), plain.data(), len);  // (data() may be null)
        pieces[0] = {packet.data(), packet.data(), len};
      } else if (count == 2) {
        pieces[0] = {plain.data(), packet.data(), first};
        pieces[1] = {packet.data() + first, packet.data() + first, len - first};
      } else {
        pieces[0] = {plain.data(), packet.data(), first};
        pieces[1] = {plain.data() + first, packet.data() + first, second};
        pieces[2] = {packet.data() + first + second, packet.data() + first + second,
                     len - first - second};
      }
      uint8_t tag[kTagBytes];
      ASSERT_TRUE(gcm.Seal(nonce, aad, sizeof aad, pieces, count, tag)) << len;
      EXPECT_EQ(packet[len], 0xEE) << "wrote past the message, length " << len;
      ASSERT_TRUE(std::equal(expected.begin(), expected.end(), packet.begin())) << len << " " << count;
      ASSERT_EQ(std::memcmp(tag, expected_tag, kTagBytes), 0) << len << " " << count;
    }
    // Opens what the reference sealed.
    std::vector<uint8_t> copy = expected;
    ASSERT_TRUE(gcm.Open(nonce, aad, sizeof aad, copy.data(), len, expected_tag)) << len;
    EXPECT_EQ(copy, plain) << len;
    // A flipped byte of the ciphertext, of the AAD or of the tag: refused.
    if (len > 0) {
      copy = expected;
      copy[len / 3] ^= 0x20;
      EXPECT_FALSE(gcm.Open(nonce, aad, sizeof aad, copy.data(), len, expected_tag)) << len;
    }
    uint8_t bad_aad[sizeof aad];
    std::memcpy(bad_aad, aad, sizeof aad);
    bad_aad[5] ^= 1;
    copy = expected;
    EXPECT_FALSE(gcm.Open(nonce, bad_aad, sizeof bad_aad, copy.data(), len, expected_tag)) << len;
    uint8_t bad_tag[kTagBytes];
    std::memcpy(bad_tag, expected_tag, kTagBytes);
    bad_tag[kTagBytes - 1] ^= 0x80;
    copy = expected;
    EXPECT_FALSE(gcm.Open(nonce, aad, sizeof aad, copy.data(), len, bad_tag)) << len;
  }
}

}  // namespace
}  // namespace softrnic::seal
