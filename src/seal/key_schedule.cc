#include "seal/key_schedule.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <cstring>

namespace softrnic::seal {
namespace {

constexpr char kSalt[] = "softrnic sealed RC v1";

void PutBe(uint8_t* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) out[i] = static_cast<uint8_t>(v);
}

}  // namespace

std::span<const uint8_t> HkdfSalt() {
  return {reinterpret_cast<const uint8_t*>(kSalt), sizeof kSalt - 1};
}

bool Hkdf(std::span<const uint8_t> ikm, std::span<const uint8_t> salt,
          std::span<const uint8_t> info, std::span<uint8_t> out) {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (kdf == nullptr) return false;
  EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (ctx == nullptr) return false;
  char digest[] = "SHA256";
  // OSSL_PARAM takes non-const pointers; HKDF only reads them.
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(ikm.data()),
                                        ikm.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<uint8_t*>(salt.data()),
                                        salt.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<uint8_t*>(info.data()),
                                        info.size()),
      OSSL_PARAM_construct_end()};
  const bool ok = EVP_KDF_derive(ctx, out.data(), out.size(), params) == 1;
  EVP_KDF_CTX_free(ctx);
  return ok;
}

bool DeriveDirection(std::span<const uint8_t> secret, uint32_t sender_qpn, uint32_t receiver_qpn,
                     DirectionSecret* out) {
  // info = "direction" | sender QPN (3 bytes) | receiver QPN (3 bytes)
  uint8_t info[9 + 6];
  std::memcpy(info, "direction", 9);
  PutBe(info + 9, sender_qpn & 0xFFFFFF, 3);
  PutBe(info + 12, receiver_qpn & 0xFFFFFF, 3);
  uint8_t okm[kKeyBytes + kSaltBytes];
  const bool ok = Hkdf(secret, HkdfSalt(), info, okm);
  if (ok) {
    std::memcpy(out->base, okm, kKeyBytes);
    std::memcpy(out->salt, okm + kKeyBytes, kSaltBytes);
  }
  OPENSSL_cleanse(okm, sizeof okm);
  return ok;
}

bool DeriveEpochKey(const DirectionSecret& direction, uint32_t epoch, uint8_t key[kKeyBytes]) {
  uint8_t info[5 + 4];
  std::memcpy(info, "epoch", 5);
  PutBe(info + 5, epoch, 4);
  return Hkdf(direction.base, HkdfSalt(), info, {key, kKeyBytes});
}

void MakeNonce(const DirectionSecret& direction, uint64_t counter, uint8_t nonce[kNonceBytes]) {
  std::memcpy(nonce, direction.salt, kSaltBytes);
  PutBe(nonce + kSaltBytes, counter, 8);
}

}  // namespace softrnic::seal
