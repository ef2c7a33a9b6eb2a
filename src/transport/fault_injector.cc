#include "transport/fault_injector.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace softrnic::transport {

uint64_t FaultInjector::NextU64() {
  // splitmix64 (Steele, Lea, Flood 2014): tiny state, good statistical
  // quality, and trivially reproducible from a seed.
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

FaultDecision FaultInjector::Next(uint32_t length) {
  const double r_drop = NextUnit();
  const double r_corrupt = NextUnit();
  const double r_dup = NextUnit();
  const double r_reorder = NextUnit();
  const uint64_t r_pos = NextU64();

  FaultDecision d;
  if (r_drop < config_.drop) {
    d.drop = true;
    return d;
  }
  d.duplicate = r_dup < config_.duplicate;
  d.reorder = r_reorder < config_.reorder;
  // Corrupt a bit that the ICRC covers: anything before the ICRC except BTH
  // byte 4 (FECN/BECN/resv6), which the ICRC masks to ones. Needs at least
  // 6 bytes before the ICRC; the transport rejects shorter packets anyway.
  if (r_corrupt < config_.corrupt && length >= 4 + 6) {
    const uint32_t candidates = length - 4 - 1;
    uint32_t byte = static_cast<uint32_t>((r_pos >> 3) % candidates);
    if (byte >= 4) ++byte;
    d.corrupt = true;
    d.corrupt_byte = byte;
    d.corrupt_mask = static_cast<uint8_t>(1u << (r_pos & 7));
  }
  return d;
}

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ParseProbability(std::string_view text, double* out) {
  if (text.empty()) return false;
  std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(copy.c_str(), &end);
  if (errno != 0 || end != copy.c_str() + copy.size()) return false;
  if (!std::isfinite(v) || v < 0.0 || v > 1.0) return false;
  *out = v;
  return true;
}

bool ParseSeed(std::string_view text, uint64_t* out) {
  if (text.empty() || text.front() == '-' || text.front() == '+') return false;
  std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(copy.c_str(), &end, 0);  // decimal or 0x..
  if (errno != 0 || end != copy.c_str() + copy.size()) return false;
  *out = v;
  return true;
}

}  // namespace

bool FaultConfig::Parse(const std::string& text, FaultConfig* out) {
  FaultConfig parsed;  // starts from "no faults, seed 1"
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = Trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) {
      // Tolerate "drop=0.1," but not ",,", nor a lone ",".
      if (!rest.empty() || comma == 0) return false;
      continue;
    }
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return false;
    const std::string_view key = Trim(item.substr(0, eq));
    const std::string_view value = Trim(item.substr(eq + 1));
    bool ok = false;
    if (key == "drop") {
      ok = ParseProbability(value, &parsed.drop);
    } else if (key == "dup" || key == "duplicate") {
      ok = ParseProbability(value, &parsed.duplicate);
    } else if (key == "reorder") {
      ok = ParseProbability(value, &parsed.reorder);
    } else if (key == "corrupt") {
      ok = ParseProbability(value, &parsed.corrupt);
    } else if (key == "seed") {
      ok = ParseSeed(value, &parsed.seed);
    }
    if (!ok) return false;
  }
  *out = parsed;
  return true;
}

}  // namespace softrnic::transport
