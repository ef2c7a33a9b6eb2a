// AES-256-GCM for sealed packets, by two implementations of the same
// cipher (one wire format): OpenSSL's EVP interface (AES-NI, and on this
// project's machines its VAES/AVX-512 code) for packets of kShortMessage
// bytes or more, and libsodium's for shorter ones (ACKs, small SENDs and
// WRITEs: the latency path). Measured per packet on one core
// (bench/sealed/aead_bench.cc, docs/benchmarks.md "Sealed RC"): OpenSSL
// costs ~270 ns + 0.2 ns/byte, most of the fixed part in OpenSSL 3's
// parameter handling; libsodium ~145 ns + 0.43 ns/byte; they cross near
// 550 bytes. One object holds one key's expanded schedule (both
// implementations'); each packet only sets its nonce.
//
// Where the schedules live: OpenSSL's in its own heap objects; libsodium's
// (ShortState) in memory the owner gives, a SecretPage (secret_page.h).
//
// Thread-safety: not synchronised; one owner (a QP's seal, under the engine
// lock).
#pragma once

#include <cstddef>
#include <cstdint>

#include "seal/format.h"

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;

namespace softrnic::seal {

// One piece of data to encrypt or decrypt, in order.
struct Span {
  const uint8_t* in = nullptr;
  uint8_t* out = nullptr;  // may equal `in` (in place)
  size_t length = 0;
};

// Messages shorter than this go through libsodium (when the owner gave a
// ShortState and the CPU has AES-NI and CLMUL).
inline constexpr size_t kShortMessage = 512;
// The size and alignment of libsodium's crypto_aead_aes256gcm_state.
inline constexpr size_t kShortStateBytes = 512, kShortStateAlign = 16;

class Aes256Gcm {
 public:
  Aes256Gcm();
  ~Aes256Gcm();
  Aes256Gcm(const Aes256Gcm&) = delete;
  Aes256Gcm& operator=(const Aes256Gcm&) = delete;

  // Memory for libsodium's expanded key (kShortStateBytes, aligned to
  // kShortStateAlign), kept by the owner until this object is keyed anew or
  // destroyed; null (the default): OpenSSL for every size. Before SetKey.
  void set_short_state(uint8_t* storage) { short_state_ = storage; }

  // False if OpenSSL refused (out of memory): the caller must not seal.
  bool SetKey(const uint8_t key[kKeyBytes]);
  bool has_key() const { return keyed_; }

  // Encrypts the pieces in order under `nonce` with `aad` authenticated,
  // and writes the tag. False on an OpenSSL error (nothing to send).
  bool Seal(const uint8_t nonce[kNonceBytes], const uint8_t* aad, size_t aad_length,
            const Span* pieces, int count, uint8_t tag[kTagBytes]);
  // Decrypts `length` bytes in place and checks the tag: false if the tag
  // does not match (the bytes are then garbage and must not be used).
  bool Open(const uint8_t nonce[kNonceBytes], const uint8_t* aad, size_t aad_length,
            uint8_t* data, size_t length, const uint8_t tag[kTagBytes]);

 private:
  // True when this message goes through libsodium.
  bool Short(size_t length) const { return short_keyed_ && length < kShortMessage; }

  EVP_CIPHER_CTX* enc_ = nullptr;
  EVP_CIPHER_CTX* dec_ = nullptr;
  bool keyed_ = false;
  uint8_t* short_state_ = nullptr;
  bool short_keyed_ = false;
};

}  // namespace softrnic::seal
