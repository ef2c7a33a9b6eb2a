// Diagnostics on stderr: one verbosity setting (SOFTRNIC_LOG), one line per
// message naming the object it is about, and a rate limit per call site so
// that a storm (a flood of forged or malformed packets, each one dropped
// and logged at debug level) cannot flood a log.
//
//   SOFTRNIC_LOG(kWarn, "device %s: QP 0x%06x: ...; set X to fix", ...);
//
// prints, if kWarn is at or above the threshold (SOFTRNIC_LOG=error|warn|
// info|debug, default warn),
//
//   softrnic[1234] warn: device softrnic0: QP 0x00a1b2: ...; set X to fix
//
// in one write(2), and at most kBurst lines per call site per kWindow; the
// first line after a quiet window says how many were left out. The check
// when a level is off is one relaxed load; nothing is formatted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace softrnic::config {
class Environment;
}

namespace softrnic::log {

enum class Level : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };
inline constexpr Level kError = Level::kError;
inline constexpr Level kWarn = Level::kWarn;
inline constexpr Level kInfo = Level::kInfo;
inline constexpr Level kDebug = Level::kDebug;

// The threshold SOFTRNIC_LOG gives (its table default when unset).
Level ThresholdFrom(const config::Environment& env);
// The process's threshold: SOFTRNIC_LOG read once, at the first call.
Level Threshold();
inline bool Enabled(Level level) { return static_cast<int>(level) <= static_cast<int>(Threshold()); }
// For tests: sets the process's threshold.
void SetThreshold(Level level);

// At most kBurst messages per kWindow from one call site.
class RateLimit {
 public:
  static constexpr uint32_t kBurst = 10;
  static constexpr std::chrono::nanoseconds kWindow = std::chrono::seconds(1);

  // Whether a message at time `now_ns` (steady clock) may go out; if so,
  // *suppressed is how many this site left out since the last one that
  // did. Thread-safe; a race may let a message or two more through.
  bool Allow(int64_t now_ns, uint64_t* suppressed);

 private:
  std::atomic<int64_t> window_start_{INT64_MIN};
  std::atomic<uint32_t> in_window_{0};
  std::atomic<uint64_t> suppressed_{0};
};

// Formats and writes one line (printf-style), rate-limited by `limit`.
void Write(RateLimit& limit, Level level, const char* format, ...)
    __attribute__((format(printf, 3, 4)));
// The line Write would print, without the rate limit (for tests).
std::string FormatLine(Level level, uint64_t suppressed, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

}  // namespace softrnic::log

// One rate limit per call site (the static), checked only when enabled.
#define SOFTRNIC_LOG(level, ...)                                         \
  do {                                                                   \
    if (::softrnic::log::Enabled(::softrnic::log::level)) {              \
      static ::softrnic::log::RateLimit softrnic_log_site_limit_;        \
      ::softrnic::log::Write(softrnic_log_site_limit_, ::softrnic::log::level, __VA_ARGS__); \
    }                                                                    \
  } while (0)
