#include "seal/connection_secret.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstring>
#include <vector>

#include "seal/key_schedule.h"

namespace softrnic::seal {

std::unique_ptr<ConnectionSecret> ConnectionSecret::FromExchange(
    std::span<const uint8_t> key, std::span<const uint8_t> exchanged,
    std::span<const uint8_t> transcript) {
  std::unique_ptr<ConnectionSecret> s(new ConnectionSecret());
  if (!s->page_.ok() || key.size() + exchanged.size() > s->page_.size() - kKeyBytes)
    return nullptr;
  // IKM = key file || X25519 output, assembled in the secret page itself
  // (after the 32 bytes the result takes), then wiped.
  uint8_t* ikm = s->page_.data() + kKeyBytes;
  if (!key.empty()) std::memcpy(ikm, key.data(), key.size());
  if (!exchanged.empty()) std::memcpy(ikm + key.size(), exchanged.data(), exchanged.size());
  std::vector<uint8_t> info(2 + transcript.size());
  info[0] = 'c';
  info[1] = 'm';
  if (!transcript.empty()) std::memcpy(info.data() + 2, transcript.data(), transcript.size());
  const bool ok = Hkdf({ikm, key.size() + exchanged.size()}, HkdfSalt(), info,
                       {s->page_.data(), kKeyBytes});
  OPENSSL_cleanse(ikm, key.size() + exchanged.size());
  return ok ? std::move(s) : nullptr;
}

EphemeralX25519::EphemeralX25519() {
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nullptr);
  if (ctx == nullptr) return;
  if (EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_keygen(ctx, &key_) == 1) {
    size_t n = kX25519Bytes;
    if (EVP_PKEY_get_raw_public_key(key_, public_, &n) != 1 || n != kX25519Bytes) {
      EVP_PKEY_free(key_);
      key_ = nullptr;
    }
  }
  EVP_PKEY_CTX_free(ctx);
}

EphemeralX25519::~EphemeralX25519() { EVP_PKEY_free(key_); }

bool EphemeralX25519::Derive(const uint8_t peer[kX25519Bytes], uint8_t out[kX25519Bytes]) const {
  if (key_ == nullptr) return false;
  EVP_PKEY* theirs = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer, kX25519Bytes);
  if (theirs == nullptr) return false;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new(key_, nullptr);
  size_t n = kX25519Bytes;
  // OpenSSL refuses an all-zero shared secret (a small-order peer key).
  const bool ok = ctx != nullptr && EVP_PKEY_derive_init(ctx) == 1 &&
                  EVP_PKEY_derive_set_peer(ctx, theirs) == 1 &&
                  EVP_PKEY_derive(ctx, out, &n) == 1 && n == kX25519Bytes;
  EVP_PKEY_CTX_free(ctx);
  EVP_PKEY_free(theirs);
  return ok;
}

}  // namespace softrnic::seal
