// AES-256-GCM for sealed packets, from libgcrypt (AES-NI / VAES counter
// mode with a carry-less-multiply GHASH where the CPU has them, portable
// code where it does not). Measured per packet on one core
// (bench/sealed/aead_bench.cc, docs/sealed.md "The cipher"): libgcrypt
// ~120 ns + 0.18 ns/byte; libsodium ~145 ns + 0.43 ns/byte; OpenSSL 3.0's
// EVP interface ~270 ns + 0.2 ns/byte, most of its fixed part in OpenSSL
// 3's parameter handling. Until session 38 softrnic used libsodium below
// 512 bytes and OpenSSL above; libgcrypt is faster than either at every
// packet size, and the wire is the same cipher. One object holds one key's
// expanded schedule; each packet only sets its nonce.
//
// Where the schedule lives: in libgcrypt's cipher handle, on the heap
// (wiped when the handle is closed; docs/sealed.md "Where keys live").
//
// Thread-safety: not synchronised; one owner (a QP's seal, under the engine
// lock).
#pragma once

#include <cstddef>
#include <cstdint>

#include "seal/format.h"

struct gcry_cipher_handle;  // <gcrypt.h>: gcry_cipher_hd_t

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

  // False if libgcrypt refused (out of memory): the caller must not seal.
  bool SetKey(const uint8_t key[kKeyBytes]);
  bool has_key() const { return keyed_; }

  // Encrypts the pieces in order under `nonce` with `aad` authenticated,
  // and writes the tag. False on a library error (nothing to send).
  bool Seal(const uint8_t nonce[kNonceBytes], const uint8_t* aad, size_t aad_length,
            const Span* pieces, int count, uint8_t tag[kTagBytes]);
  // Decrypts `length` bytes in place and checks the tag: false if the tag
  // does not match (the bytes are then garbage and must not be used).
  bool Open(const uint8_t nonce[kNonceBytes], const uint8_t* aad, size_t aad_length,
            uint8_t* data, size_t length, const uint8_t tag[kTagBytes]);

 private:
  gcry_cipher_handle* handle_ = nullptr;  // for both directions
  bool keyed_ = false;
};

}  // namespace softrnic::seal
