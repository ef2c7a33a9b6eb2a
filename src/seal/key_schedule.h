// The key schedule of sealed RC (docs/sealed.md, "Keys"): HKDF-SHA256
// (RFC 5869) from the connection's secret to one key per direction, and
// from a direction's key to one AES-256 key per epoch of 2^32 packets
// (re-keying without a message: the epoch is the counter's top half, which
// every packet carries).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "seal/format.h"

namespace softrnic::seal {

// One direction of one connection: a base key (never used to encrypt) and
// the nonce salt.
struct DirectionSecret {
  uint8_t base[kKeyBytes] = {};
  uint8_t salt[kSaltBytes] = {};
};

// The salt of every HKDF of this format: it names the format's version.
std::span<const uint8_t> HkdfSalt();

// HKDF-SHA256(ikm, salt, info) -> out (at most 255 * 32 bytes). False on an
// OpenSSL error.
bool Hkdf(std::span<const uint8_t> ikm, std::span<const uint8_t> salt,
          std::span<const uint8_t> info, std::span<uint8_t> out);

// The direction from the QP numbered `sender_qpn` to its peer numbered
// `receiver_qpn`, under `secret` (the pre-shared key, or a handshake's
// output): both ends compute the same value for each direction, and the
// two directions differ (a packet reflected back to its sender fails).
bool DeriveDirection(std::span<const uint8_t> secret, uint32_t sender_qpn, uint32_t receiver_qpn,
                     DirectionSecret* out);

// The AES-256 key of `epoch` (the counter >> kEpochShift) of a direction.
bool DeriveEpochKey(const DirectionSecret& direction, uint32_t epoch, uint8_t key[kKeyBytes]);

// The nonce of a packet: the direction's salt, then its counter (big endian).
void MakeNonce(const DirectionSecret& direction, uint64_t counter, uint8_t nonce[kNonceBytes]);

}  // namespace softrnic::seal
