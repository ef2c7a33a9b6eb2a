// The seal of one sealed queue pair (docs/sealed.md): it seals every packet
// the QP sends and opens every packet sent to it, in place, in the
// engine's buffers. Keys per direction from the connection's secret and
// the two QPNs (key_schedule.h); a fresh AES key every 2^32 packets (the
// epoch, the counter's top half); a counter that starts at a random value
// from the kernel CSPRNG for each QP, so that two connections that happen
// to derive the same keys (the same secret and the same two QPNs) still
// never use one nonce twice (docs/sealed.md, "Nonces").
//
// Thread-safety: not synchronised; the engine lock.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "seal/aead.h"
#include "seal/format.h"
#include "seal/key_schedule.h"
#include "seal/replay_window.h"
#include "seal/secret_page.h"

namespace softrnic::seal {

// Packets per AES key: 2^32 (the epoch is counter >> kEpochShift).
inline constexpr unsigned kEpochShift = 32;
// Bytes encrypted per AES key at most: 2^36 (64 GiB, 2^32 AES blocks), so
// that GCM's bound on what an observer learns from one key's ciphertext,
// about (blocks)^2 / 2^129, stays below 2^-64 (docs/sealed.md, "Keys").
// The sender then moves its counter to the next epoch's first value.
inline constexpr uint64_t kEpochBytes = uint64_t{1} << 36;

enum class OpenResult : uint8_t {
  kOk = 0,
  kMalformed,  // too short for the trailer, or the lengths do not add up
  kReplay,     // its counter was seen, or is older than the window
  kStaleEpoch, // its epoch is not next to the last authentic one
  kForged,     // the tag does not match: forged, corrupted, or another key
  kError,      // the cipher library failed (out of memory): dropped, not judged
};

class QpSeal {
 public:
  // Null if the keys cannot be made (OpenSSL, libgcrypt or mmap failed).
  // epoch_shift and epoch_bytes: tests only (small ones show re-keying).
  static std::unique_ptr<QpSeal> Create(std::span<const uint8_t> secret, uint32_t local_qpn,
                                        uint32_t remote_qpn, unsigned epoch_shift = kEpochShift,
                                        uint64_t epoch_bytes = kEpochBytes);
  // For tests: the first counter this side will send.
  void set_next_counter(uint64_t c) { next_counter_ = c; }
  uint64_t next_counter() const { return next_counter_; }

  // Seals a packet whose headers (header_length bytes, BTH first) are at
  // `packet`, followed by room for payload_length + pad_length body bytes
  // and kTrailerBytes: the payload is read from `payload` (registered
  // memory) or, if null, is already in place; the pad bytes are in place.
  // Sets the BTH's TVer. False on a cipher library error (the packet must
  // not leave).
  bool Seal(uint8_t* packet, uint32_t header_length, const uint8_t* payload,
            uint32_t payload_length, uint32_t pad_length);

  // Opens a sealed packet in place: `length` bytes from the BTH through the
  // ICRC, its headers header_length bytes. On kOk the body is plaintext,
  // the TVer is 0 again and *opened_length is the packet's length without
  // the trailer (the ICRC's 4 bytes still counted, as a parser expects).
  OpenResult Open(uint8_t* data, uint32_t length, uint32_t header_length,
                  uint32_t* opened_length);

  uint64_t epochs_sent() const { return tx_epochs_; }

 private:
  QpSeal() = default;
  Aes256Gcm* RxCipherFor(uint32_t epoch, int* slot);

  SecretPage secrets_;  // holds the two DirectionSecrets
  DirectionSecret* tx_ = nullptr;
  DirectionSecret* rx_ = nullptr;
  unsigned epoch_shift_ = kEpochShift;

  uint64_t next_counter_ = 0;
  Aes256Gcm tx_cipher_;
  uint32_t tx_epoch_ = 0;
  uint64_t tx_epochs_ = 0;  // keys made for sending (1 + re-keys)
  uint64_t epoch_bytes_ = kEpochBytes;
  uint64_t tx_epoch_bytes_ = 0;  // encrypted under the current key

  // Two receive keys: the last authentic epoch's and one more (the next,
  // or the previous for late packets).
  Aes256Gcm rx_cipher_[2];
  uint32_t rx_epoch_[2] = {};
  bool rx_keyed_[2] = {};
  uint32_t rx_last_ = 0;  // slot of the last authentic packet's epoch
  ReplayWindow window_;
};

}  // namespace softrnic::seal
