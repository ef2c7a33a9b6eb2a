#include "seal/aead.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sodium.h>

#include <climits>
#include <cstring>

namespace softrnic::seal {
namespace {

static_assert(sizeof(crypto_aead_aes256gcm_state) == kShortStateBytes);
static_assert(alignof(crypto_aead_aes256gcm_state) <= kShortStateAlign);

// libsodium's AES-256-GCM needs AES-NI and CLMUL; sodium_init is
// idempotent and thread-safe, and picks the implementations once.
bool SodiumAesAvailable() {
  static const bool available = sodium_init() >= 0 && crypto_aead_aes256gcm_is_available() == 1;
  return available;
}

crypto_aead_aes256gcm_state* AsState(uint8_t* storage) {
  return reinterpret_cast<crypto_aead_aes256gcm_state*>(storage);
}

}  // namespace

Aes256Gcm::Aes256Gcm() : enc_(EVP_CIPHER_CTX_new()), dec_(EVP_CIPHER_CTX_new()) {}

Aes256Gcm::~Aes256Gcm() {
  // EVP_CIPHER_CTX_free cleanses the expanded key schedule.
  EVP_CIPHER_CTX_free(enc_);
  EVP_CIPHER_CTX_free(dec_);
}

bool Aes256Gcm::SetKey(const uint8_t key[kKeyBytes]) {
  keyed_ = false;
  if (enc_ == nullptr || dec_ == nullptr) return false;
  // The default nonce length of GCM in OpenSSL is 12 bytes (kNonceBytes).
  if (EVP_EncryptInit_ex(enc_, EVP_aes_256_gcm(), nullptr, key, nullptr) != 1) return false;
  if (EVP_DecryptInit_ex(dec_, EVP_aes_256_gcm(), nullptr, key, nullptr) != 1) return false;
  short_keyed_ = short_state_ != nullptr && SodiumAesAvailable() &&
                 crypto_aead_aes256gcm_beforenm(AsState(short_state_), key) == 0;
  keyed_ = true;
  return true;
}

bool Aes256Gcm::Seal(const uint8_t nonce[kNonceBytes], const uint8_t* aad, size_t aad_length,
                     const Span* pieces, int count, uint8_t tag[kTagBytes]) {
  if (!keyed_ || aad_length > INT_MAX) return false;
  size_t total = 0;
  bool contiguous = true;
  for (int i = 0; i < count; ++i) {
    total += pieces[i].length;
    if (i > 0 && pieces[i].out != pieces[i - 1].out + pieces[i - 1].length) contiguous = false;
  }
  if (Short(total) && contiguous) {
    // libsodium takes one message: the pieces are gathered into their
    // (adjacent) places first, then encrypted there.
    for (int i = 0; i < count; ++i)
      if (pieces[i].length > 0 && pieces[i].in != pieces[i].out)
        std::memmove(pieces[i].out, pieces[i].in, pieces[i].length);
    // libsodium declares its buffers non-null, even for an empty message.
    uint8_t none = 0;
    uint8_t* message = count > 0 && pieces[0].out != nullptr ? pieces[0].out : &none;
    return crypto_aead_aes256gcm_encrypt_detached_afternm(message, tag, nullptr, message, total, aad,
                                                          aad_length, nullptr, nonce,
                                                          AsState(short_state_)) == 0;
  }
  int n = 0;
  if (EVP_EncryptInit_ex(enc_, nullptr, nullptr, nullptr, nonce) != 1) return false;
  if (aad_length > 0 &&
      EVP_EncryptUpdate(enc_, nullptr, &n, aad, static_cast<int>(aad_length)) != 1)
    return false;
  for (int i = 0; i < count; ++i) {
    if (pieces[i].length == 0) continue;
    if (pieces[i].length > INT_MAX ||
        EVP_EncryptUpdate(enc_, pieces[i].out, &n, pieces[i].in,
                          static_cast<int>(pieces[i].length)) != 1)
      return false;
  }
  if (EVP_EncryptFinal_ex(enc_, nullptr, &n) != 1) return false;
  return EVP_CIPHER_CTX_ctrl(enc_, EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) == 1;
}

bool Aes256Gcm::Open(const uint8_t nonce[kNonceBytes], const uint8_t* aad, size_t aad_length,
                     uint8_t* data, size_t length, const uint8_t tag[kTagBytes]) {
  if (!keyed_ || aad_length > INT_MAX || length > INT_MAX) return false;
  if (Short(length)) {  // checks the tag in constant time; zeroes `data` if it fails
    uint8_t none = 0;  // libsodium declares its buffers non-null, even for no bytes
    uint8_t* message = data != nullptr ? data : &none;
    return crypto_aead_aes256gcm_decrypt_detached_afternm(message, nullptr, message, length, tag, aad,
                                                          aad_length, nonce, AsState(short_state_)) == 0;
  }
  int n = 0;
  if (EVP_DecryptInit_ex(dec_, nullptr, nullptr, nullptr, nonce) != 1) return false;
  if (aad_length > 0 &&
      EVP_DecryptUpdate(dec_, nullptr, &n, aad, static_cast<int>(aad_length)) != 1)
    return false;
  if (length > 0 && EVP_DecryptUpdate(dec_, data, &n, data, static_cast<int>(length)) != 1)
    return false;
  // OpenSSL wants a writable tag buffer for the SET_TAG control.
  uint8_t expected[kTagBytes];
  for (uint32_t i = 0; i < kTagBytes; ++i) expected[i] = tag[i];
  if (EVP_CIPHER_CTX_ctrl(dec_, EVP_CTRL_GCM_SET_TAG, kTagBytes, expected) != 1) return false;
  // The tag comparison inside DecryptFinal is constant-time.
  return EVP_DecryptFinal_ex(dec_, nullptr, &n) == 1;
}

}  // namespace softrnic::seal
