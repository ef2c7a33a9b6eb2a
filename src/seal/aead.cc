#include "seal/aead.h"

#include <gcrypt.h>

namespace softrnic::seal {
namespace {

// libgcrypt asks every user to call gcry_check_version before anything
// else (a library may; the rest of its initialisation, secure memory
// included, is the application's, which may use libgcrypt too).
// Thread-safe, once.
bool GcryptReady() {
  static const bool ready = gcry_check_version(GCRYPT_VERSION) != nullptr;
  return ready;
}

}  // namespace

Aes256Gcm::Aes256Gcm() {
  gcry_cipher_hd_t h = nullptr;
  if (GcryptReady() && gcry_cipher_open(&h, GCRY_CIPHER_AES256, GCRY_CIPHER_MODE_GCM, 0) == 0)
    handle_ = h;
}

Aes256Gcm::~Aes256Gcm() {
  // gcry_cipher_close wipes the handle and its expanded key schedule.
  if (handle_ != nullptr) gcry_cipher_close(handle_);
}

bool Aes256Gcm::SetKey(const uint8_t key[kKeyBytes]) {
  keyed_ = handle_ != nullptr && gcry_cipher_setkey(handle_, key, kKeyBytes) == 0;
  return keyed_;
}

bool Aes256Gcm::Seal(const uint8_t nonce[kNonceBytes], const uint8_t* aad, size_t aad_length,
                     const Span* pieces, int count, uint8_t tag[kTagBytes]) {
  if (!keyed_) return false;
  // The nonce, then the AAD, then the pieces in any lengths: libgcrypt
  // carries a partial block from one call to the next.
  if (gcry_cipher_setiv(handle_, nonce, kNonceBytes) != 0) return false;
  if (aad_length > 0 && gcry_cipher_authenticate(handle_, aad, aad_length) != 0) return false;
  for (int i = 0; i < count; ++i) {
    if (pieces[i].length == 0) continue;
    const bool in_place = pieces[i].in == pieces[i].out;
    if (gcry_cipher_encrypt(handle_, pieces[i].out, pieces[i].length,
                            in_place ? nullptr : pieces[i].in, in_place ? 0 : pieces[i].length) != 0)
      return false;
  }
  return gcry_cipher_gettag(handle_, tag, kTagBytes) == 0;
}

bool Aes256Gcm::Open(const uint8_t nonce[kNonceBytes], const uint8_t* aad, size_t aad_length,
                     uint8_t* data, size_t length, const uint8_t tag[kTagBytes]) {
  if (!keyed_) return false;
  if (gcry_cipher_setiv(handle_, nonce, kNonceBytes) != 0) return false;
  if (aad_length > 0 && gcry_cipher_authenticate(handle_, aad, aad_length) != 0) return false;
  if (length > 0 && gcry_cipher_decrypt(handle_, data, length, nullptr, 0) != 0) return false;
  // gcry_cipher_checktag compares in constant time.
  return gcry_cipher_checktag(handle_, tag, kTagBytes) == 0;
}

}  // namespace softrnic::seal
