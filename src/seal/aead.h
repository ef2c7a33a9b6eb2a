// AES-256-GCM for sealed packets, through OpenSSL's EVP interface (AES-NI
// and CLMUL where the CPU has them). One object holds one key's expanded
// schedule; each packet only sets its nonce, so the per-packet cost is the
// cipher itself (docs/sealed.md, "Cost").
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

class Aes256Gcm {
 public:
  Aes256Gcm();
  ~Aes256Gcm();
  Aes256Gcm(const Aes256Gcm&) = delete;
  Aes256Gcm& operator=(const Aes256Gcm&) = delete;

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
  EVP_CIPHER_CTX* enc_ = nullptr;
  EVP_CIPHER_CTX* dec_ = nullptr;
  bool keyed_ = false;
};

}  // namespace softrnic::seal
