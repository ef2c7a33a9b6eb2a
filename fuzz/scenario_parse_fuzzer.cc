// libFuzzer target: the fault lab's scenario readers (src/faults), which
// read files and environment values a user (or a shared CI config) names:
// ParseScenarioText (TOML through toml++) and ParseOneLine.
//
// Properties checked (abort on violation):
//  - parsing is deterministic;
//  - a failure returns no scenario and an error; a TOML error starts with
//    "ORIGIN:LINE:COLUMN: ";
//  - a success keeps every documented bound (src/faults/scenario_limits.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "faults/scenario_limits.h"
#include "faults/scenario_parse.h"

namespace {

using namespace softrnic::faults;

void Check(bool ok) {
  if (!ok) std::abort();
}

bool Same(const ParseResult& a, const ParseResult& b) {
  if (a.ok != b.ok || a.error != b.error || a.scenario.rules.size() != b.scenario.rules.size() ||
      a.scenario.seed != b.scenario.seed || a.scenario.name != b.scenario.name)
    return false;
  for (size_t i = 0; i < a.scenario.rules.size(); ++i) {
    const Rule& x = a.scenario.rules[i];
    const Rule& y = b.scenario.rules[i];
    if (x.name != y.name || x.line != y.line || x.match.from_ns != y.match.from_ns ||
        x.match.for_ns != y.match.for_ns || x.action.drop != y.action.drop ||
        x.action.delay_ns != y.action.delay_ns || x.action.rate_bytes_per_s != y.action.rate_bytes_per_s)
      return false;
  }
  return true;
}

void CheckBounds(const ParseResult& r) {
  if (!r.ok) {
    Check(!r.error.empty() && r.scenario.rules.empty());
    return;
  }
  Check(r.error.empty() && r.scenario.rules.size() <= limits::kMaxRules);
  for (const Rule& rule : r.scenario.rules) {
    const Match& m = rule.match;
    const Action& a = rule.action;
    for (double p : {a.drop, a.duplicate, a.corrupt, a.reorder, a.ecn_mark}) Check(p >= 0 && p <= 1);
    Check(m.from_ns <= limits::kMaxWindowNs && m.for_ns <= limits::kMaxWindowNs);
    Check(a.delay_ns <= limits::kMaxDelayNs && a.jitter_ns <= limits::kMaxDelayNs);
    Check(a.rate_bytes_per_s <= limits::kMaxRateBytesPerS);
    Check(a.reorder_depth >= 1 && a.reorder_depth <= limits::kMaxReorderDepth);
    Check(a.rate_burst_bytes <= limits::kMaxSizeBytes && a.rate_queue_bytes <= limits::kMaxSizeBytes &&
          a.pause_queue_bytes <= limits::kMaxSizeBytes);
    Check(!m.qpn || *m.qpn <= limits::kMax24Bit);
    Check(!m.psn_first || (*m.psn_first <= limits::kMax24Bit && *m.psn_last <= limits::kMax24Bit));
    Check(!m.nth || *m.nth >= 1);
    Check((m.classes & ~kAllClasses) == 0 && m.classes != 0);
    // Outage and pause have a window; ECN marks only received packets.
    Check(!(a.outage || a.pause) || m.for_ns > 0);
    Check(a.ecn_mark == 0 || m.direction == Direction::kIn);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const ParseResult file = ParseScenarioText(text, "fuzz.toml");
  CheckBounds(file);
  Check(Same(file, ParseScenarioText(text, "fuzz.toml")));
  Check(file.ok || file.error.starts_with("fuzz.toml:"));

  const ParseResult line = ParseOneLine(text);
  CheckBounds(line);
  Check(Same(line, ParseOneLine(text)));
  return 0;
}
