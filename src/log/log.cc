#include "log/log.h"

#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "config/environment.h"

namespace softrnic::log {
namespace {

constexpr const char* kNames[] = {"error", "warn", "info", "debug"};
constexpr int kUnread = -1;
std::atomic<int> g_threshold{kUnread};

std::string VFormat(Level level, uint64_t suppressed, const char* format, va_list args) {
  char body[1024];
  std::vsnprintf(body, sizeof(body), format, args);
  char line[1200];
  int n = std::snprintf(line, sizeof(line), "softrnic[%d] %s: %s", static_cast<int>(getpid()),
                        kNames[static_cast<int>(level)], body);
  std::string out(line, static_cast<size_t>(n < 0 ? 0 : std::min<int>(n, sizeof(line) - 1)));
  if (suppressed > 0)
    out += " (" + std::to_string(suppressed) + " similar messages left out before this one)";
  out += '\n';
  return out;
}

}  // namespace

Level ThresholdFrom(const config::Environment& env) {
  const std::string v = env.Choice("SOFTRNIC_LOG");
  for (int i = 0; i < 4; ++i)
    if (v == kNames[i]) return static_cast<Level>(i);
  return kWarn;
}

Level Threshold() {
  int t = g_threshold.load(std::memory_order_relaxed);
  if (t == kUnread) {
    t = static_cast<int>(ThresholdFrom(config::Environment::FromProcess()));
    g_threshold.store(t, std::memory_order_relaxed);
  }
  return static_cast<Level>(t);
}

void SetThreshold(Level level) { g_threshold.store(static_cast<int>(level), std::memory_order_relaxed); }

bool RateLimit::Allow(int64_t now_ns, uint64_t* suppressed) {
  const int64_t start = window_start_.load(std::memory_order_relaxed);
  if (start == INT64_MIN || now_ns - start >= kWindow.count()) {
    window_start_.store(now_ns, std::memory_order_relaxed);
    in_window_.store(1, std::memory_order_relaxed);
    *suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
    return true;
  }
  if (in_window_.fetch_add(1, std::memory_order_relaxed) < kBurst) {
    *suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
    return true;
  }
  suppressed_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void Write(RateLimit& limit, Level level, const char* format, ...) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  uint64_t suppressed = 0;
  if (!limit.Allow(now, &suppressed)) return;
  va_list args;
  va_start(args, format);
  const std::string line = VFormat(level, suppressed, format, args);
  va_end(args);
  // One write: lines of several threads or processes do not interleave.
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

std::string FormatLine(Level level, uint64_t suppressed, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::string line = VFormat(level, suppressed, format, args);
  va_end(args);
  return line;
}

}  // namespace softrnic::log
