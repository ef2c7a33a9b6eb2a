// A connection's secret from rdma_cm's key exchange (docs/sealed.md, "The
// exchange"): HKDF(key file || X25519 output, transcript), used in place of
// the key file for the QP's direction keys. And the X25519 half of the
// exchange, which librdmacm runs.
//
// Thread-safety: an owner at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "seal/format.h"
#include "seal/secret_page.h"

typedef struct evp_pkey_st EVP_PKEY;

namespace softrnic::seal {

inline constexpr uint32_t kX25519Bytes = 32;

class ConnectionSecret {
 public:
  // key: the key file's bytes (may be empty: unauthenticated); exchanged:
  // the X25519 output; transcript: the REQ's public key, then the REP's.
  // Null if OpenSSL or mmap failed.
  static std::unique_ptr<ConnectionSecret> FromExchange(std::span<const uint8_t> key,
                                                        std::span<const uint8_t> exchanged,
                                                        std::span<const uint8_t> transcript);
  std::span<const uint8_t> bytes() const { return {page_.data(), kKeyBytes}; }

 private:
  ConnectionSecret() = default;
  SecretPage page_;
};

// One side's ephemeral X25519 key pair, from OpenSSL (the kernel CSPRNG
// seeds it). The private half stays inside OpenSSL's object.
class EphemeralX25519 {
 public:
  EphemeralX25519();
  ~EphemeralX25519();
  EphemeralX25519(const EphemeralX25519&) = delete;
  EphemeralX25519& operator=(const EphemeralX25519&) = delete;

  bool ok() const { return key_ != nullptr; }
  const uint8_t* public_key() const { return public_; }
  // The shared X25519 output with the peer's public key; false if OpenSSL
  // refuses it (an all-zero result from a small-order point included).
  bool Derive(const uint8_t peer[kX25519Bytes], uint8_t out[kX25519Bytes]) const;

 private:
  EVP_PKEY* key_ = nullptr;
  uint8_t public_[kX25519Bytes] = {};
};

}  // namespace softrnic::seal
