// Replay protection of sealed packets (docs/sealed.md, "Replays"): every
// packet of a direction carries a distinct counter (a resent request gets a
// new one), so a counter seen before is a replay, whatever its PSN. The
// window remembers the highest authentic counter and which of the
// kWindow below it were seen, as IPsec's anti-replay window does
// (RFC 4303, 3.4.3); older counters are refused. 1,024 packets of
// reordering is far beyond what a path between two hosts does.
//
// Only authentic packets are recorded (after the tag checked), so a forger
// cannot move the window.
//
// Thread-safety: not synchronised; one owner.
#pragma once

#include <array>
#include <cstdint>

namespace softrnic::seal {

class ReplayWindow {
 public:
  static constexpr uint64_t kWindow = 1024;

  // Whether `counter` may be new (checked before the tag, so that a replay
  // costs no decryption).
  bool MayAccept(uint64_t counter) const {
    if (!started_ || counter > highest_) return true;
    const uint64_t behind = highest_ - counter;
    if (behind >= kWindow) return false;
    return !Seen(counter);
  }
  // Records an authentic `counter` (MayAccept was true).
  void Accept(uint64_t counter) {
    if (!started_) {
      started_ = true;
      highest_ = counter;
      bits_.fill(0);
      Mark(counter);
      return;
    }
    if (counter > highest_) {
      const uint64_t ahead = counter - highest_;
      if (ahead >= kWindow) {
        bits_.fill(0);
      } else {
        // Forget the slots that fall out of the window.
        for (uint64_t c = highest_ + 1; c <= counter; ++c) Clear(c);
      }
      highest_ = counter;
    }
    Mark(counter);
  }
  bool started() const { return started_; }
  uint64_t highest() const { return highest_; }

 private:
  static constexpr uint64_t kWords = kWindow / 64;
  bool Seen(uint64_t c) const { return (bits_[(c / 64) % kWords] >> (c % 64)) & 1; }
  void Mark(uint64_t c) { bits_[(c / 64) % kWords] |= uint64_t{1} << (c % 64); }
  void Clear(uint64_t c) { bits_[(c / 64) % kWords] &= ~(uint64_t{1} << (c % 64)); }

  bool started_ = false;
  uint64_t highest_ = 0;
  std::array<uint64_t, kWords> bits_{};
};

}  // namespace softrnic::seal
