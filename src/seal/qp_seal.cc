#include "seal/qp_seal.h"

#include <openssl/crypto.h>

#include <new>

#include "common/secure_random.h"

namespace softrnic::seal {
namespace {

void PutCounter(uint8_t* out, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<uint8_t>(v);
}
uint64_t GetCounter(const uint8_t* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | in[i];
  return v;
}

bool KeyCipher(const DirectionSecret& direction, uint32_t epoch, Aes256Gcm* cipher) {
  uint8_t key[kKeyBytes];
  const bool ok = DeriveEpochKey(direction, epoch, key) && cipher->SetKey(key);
  OPENSSL_cleanse(key, sizeof key);
  return ok;
}

}  // namespace

std::unique_ptr<QpSeal> QpSeal::Create(std::span<const uint8_t> secret, uint32_t local_qpn,
                                       uint32_t remote_qpn, unsigned epoch_shift,
                                       uint64_t epoch_bytes) {
  std::unique_ptr<QpSeal> s(new QpSeal());
  if (!s->secrets_.ok() || epoch_shift == 0 || epoch_shift > 62 || epoch_bytes == 0)
    return nullptr;
  s->epoch_bytes_ = epoch_bytes;
  s->tx_ = new (s->secrets_.data()) DirectionSecret;
  s->rx_ = new (s->secrets_.data() + sizeof(DirectionSecret)) DirectionSecret;
  if (!DeriveDirection(secret, local_qpn, remote_qpn, s->tx_) ||
      !DeriveDirection(secret, remote_qpn, local_qpn, s->rx_))
    return nullptr;
  s->epoch_shift_ = epoch_shift;
  // A random start (below 2^62: no wrap in any lifetime) keeps nonces apart
  // even between two connections with the same keys.
  uint64_t start = 0;
  SecureRandomFill(&start, sizeof start);
  s->next_counter_ = start & ((uint64_t{1} << 62) - 1);
  return s;
}

bool QpSeal::Seal(uint8_t* packet, uint32_t header_length, const uint8_t* payload,
                  uint32_t payload_length, uint32_t pad_length) {
  // A key that has encrypted its budget of bytes gives way to the next
  // epoch's: the counter jumps to that epoch's first value, which the
  // receiver follows with no message (it derives the epoch next to the
  // last authentic one). Counters skipped are never used.
  const uint64_t bytes = uint64_t{payload_length} + pad_length;
  if (tx_cipher_.has_key() && tx_epoch_bytes_ + bytes > epoch_bytes_)
    next_counter_ = ((next_counter_ >> epoch_shift_) + 1) << epoch_shift_;
  const uint64_t counter = next_counter_++;
  const auto epoch = static_cast<uint32_t>(counter >> epoch_shift_);
  if (!tx_cipher_.has_key() || epoch != tx_epoch_) {
    if (!KeyCipher(*tx_, epoch, &tx_cipher_)) return false;
    tx_epoch_ = epoch;
    ++tx_epochs_;
    tx_epoch_bytes_ = 0;
  }
  tx_epoch_bytes_ += bytes;
  SetTver(packet, kSealedTver);
  uint8_t nonce[kNonceBytes];
  MakeNonce(*tx_, counter, nonce);
  uint8_t* body = packet + header_length;
  const Span pieces[2] = {{payload != nullptr ? payload : body, body, payload_length},
                          {body + payload_length, body + payload_length, pad_length}};
  uint8_t* trailer = body + payload_length + pad_length;
  PutCounter(trailer, counter);
  return tx_cipher_.Seal(nonce, packet, header_length, pieces, 2, trailer + kCounterBytes);
}

Aes256Gcm* QpSeal::RxCipherFor(uint32_t epoch, int* slot) {
  for (int s = 0; s < 2; ++s)
    if (rx_keyed_[s] && rx_epoch_[s] == epoch) {
      *slot = s;
      return &rx_cipher_[s];
    }
  int use = 0;
  if (window_.started()) {
    // Only the epochs next to the last authentic one: a forger cannot make
    // the receiver derive keys at will once the connection is going.
    const uint32_t last = rx_epoch_[rx_last_];
    if (epoch != last + 1 && epoch + 1 != last) return nullptr;
    use = 1 - rx_last_;
  }
  if (!KeyCipher(*rx_, epoch, &rx_cipher_[use])) {
    rx_keyed_[use] = false;
    return nullptr;
  }
  rx_keyed_[use] = true;
  rx_epoch_[use] = epoch;
  *slot = use;
  return &rx_cipher_[use];
}

OpenResult QpSeal::Open(uint8_t* data, uint32_t length, uint32_t header_length,
                        uint32_t* opened_length) {
  if (header_length < 12 || uint64_t{length} < uint64_t{header_length} + kTrailerBytes + 4)
    return OpenResult::kMalformed;
  const uint32_t body_length = length - 4 - kTrailerBytes - header_length;
  uint8_t* trailer = data + header_length + body_length;
  const uint64_t counter = GetCounter(trailer);
  if (!window_.MayAccept(counter)) return OpenResult::kReplay;
  int slot = 0;
  Aes256Gcm* cipher = RxCipherFor(static_cast<uint32_t>(counter >> epoch_shift_), &slot);
  if (cipher == nullptr) return window_.started() ? OpenResult::kStaleEpoch : OpenResult::kError;
  uint8_t nonce[kNonceBytes];
  MakeNonce(*rx_, counter, nonce);
  // The headers as sent (TVer 1 included) are the additional data.
  if (!cipher->Open(nonce, data, header_length, data + header_length, body_length,
                    trailer + kCounterBytes))
    return OpenResult::kForged;
  window_.Accept(counter);
  rx_last_ = static_cast<uint32_t>(slot);
  SetTver(data, 0);
  *opened_length = length - kTrailerBytes;
  return OpenResult::kOk;
}

}  // namespace softrnic::seal
