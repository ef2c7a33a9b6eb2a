// The bounds of a scenario (docs/fault-lab-design.md, "Scenario file"),
// shared by the two readers and their tests. They keep hostile or mistyped
// input from asking for absurd work (a 10^300-second window, 10^6 rules)
// and catch unit slips ("delay = 200s" meant 200us) early.
#pragma once

#include <cstdint>

namespace softrnic::faults::limits {

inline constexpr uint64_t kMaxFileBytes = 1 << 20;
inline constexpr uint64_t kMaxRules = 256;
// `from` and `for`: a scenario is for a test run, not for days.
inline constexpr uint64_t kMaxWindowNs = 3600ull * 1000000000;
// `delay` and `jitter`: far beyond any RC retry timer, still finite.
inline constexpr uint64_t kMaxDelayNs = 10ull * 1000000000;
inline constexpr uint64_t kMinRateBytesPerS = 1;
inline constexpr uint64_t kMaxRateBytesPerS = 1000000000000;  // 8 Tbit/s
// rate_burst, rate_queue, pause_queue: what the fault transport may hold.
inline constexpr uint64_t kMaxSizeBytes = 1ull << 30;
inline constexpr uint64_t kMaxReorderDepth = 1024;
inline constexpr uint64_t kMax24Bit = 0xffffff;  // BTH QPN and PSN fields

}  // namespace softrnic::faults::limits
