// The sealed packet format (docs/sealed.md has the full description, so
// that another implementation can follow it).
//
// A sealed RoCE v2 packet is an ordinary one with three changes:
//
//   BTH (TVer = 1) | extension headers | E(payload || pad) | counter | tag | ICRC
//
// - BTH TVer (byte 1, low nibble) is 1. A plain RoCE v2 receiver drops a
//   packet whose TVer is not 0 (IBA 9.2.7; the kernel's rxe and softrnic's
//   own parser do), so a sealed packet can never be taken for a plain one:
//   it is refused cleanly, not misread.
// - The payload and its pad bytes are encrypted with AES-256-GCM (same
//   length); the BTH and every extension header are its additional
//   authenticated data, byte for byte as sent (nothing in them is changed
//   by routing: IP and UDP headers are, and are not covered).
// - 24 bytes follow the pad: the 64-bit packet counter (big endian), which
//   with the direction's 4-byte salt makes the 96-bit GCM nonce, then the
//   16-byte tag. The ICRC covers all of it, as usual.
//
// Thread-safety: constants and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softrnic::seal {

inline constexpr uint8_t kSealedTver = 1;
inline constexpr uint32_t kCounterBytes = 8;
inline constexpr uint32_t kTagBytes = 16;
// What sealing adds to a packet.
inline constexpr uint32_t kTrailerBytes = kCounterBytes + kTagBytes;
inline constexpr uint32_t kKeyBytes = 32;   // AES-256
inline constexpr uint32_t kSaltBytes = 4;   // the nonce's fixed part
inline constexpr uint32_t kNonceBytes = 12;

// BTH byte 1: SE | M | PadCnt(2) | TVer(4) (IBA 9.2).
inline uint8_t TverOf(const uint8_t* bth) { return bth[1] & 0x0F; }
inline bool IsSealed(const uint8_t* data, size_t length) {
  return length >= 12 && TverOf(data) == kSealedTver;
}
inline void SetTver(uint8_t* bth, uint8_t tver) {
  bth[1] = static_cast<uint8_t>((bth[1] & 0xF0) | (tver & 0x0F));
}
// The destination QPN (BTH bytes 5-7).
inline uint32_t DestQpnOf(const uint8_t* bth) {
  return (uint32_t{bth[5]} << 16) | (uint32_t{bth[6]} << 8) | bth[7];
}

}  // namespace softrnic::seal
