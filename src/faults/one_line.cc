// The one-line form (SOFTRNIC_FAULTS, `softrnic run --faults`): one rule
// as comma-separated key=value pairs. It grew from the old SOFTRNIC_FAULTS
// ("drop=0.01,dup=0.01,reorder=0.02,corrupt=0.001,seed=7"), whose syntax it
// keeps: blanks around keys and values are ignored, one trailing comma is
// tolerated, an empty item elsewhere is an error, and a line whose rule
// does nothing ("drop=0") is no scenario at all, as before.
//
// Values are read by the same functions as the file's (quantity.h,
// rule_values.h), so "200us" or "acks" mean the same in both. Each error
// names the key it is about.
#include <optional>
#include <string>
#include <string_view>

#include "faults/quantity.h"
#include "faults/rule_values.h"
#include "faults/scenario_limits.h"
#include "faults/scenario_parse.h"

namespace softrnic::faults {
namespace {

constexpr std::string_view kKeys =
    "drop, dup (duplicate), reorder, depth (reorder_depth), corrupt, seed, delay, jitter, rate, "
    "dir (direction), peer, qpn, class, psn, nth, from, for, outage, pause, ecn (ecn_mark)";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The keys, with their aliases folded, so "dup" and "duplicate" are one key
// for the "given twice" check.
enum class Key {
  kDrop, kDuplicate, kReorder, kReorderDepth, kCorrupt, kSeed, kDelay, kJitter, kRate,
  kDirection, kPeer, kQpn, kClass, kPsn, kNth, kFrom, kFor, kOutage, kPause, kEcnMark,
  kCount
};

bool LookUpKey(std::string_view name, Key* key) {
  static constexpr std::pair<std::string_view, Key> kNames[] = {
      {"drop", Key::kDrop},       {"dup", Key::kDuplicate},        {"duplicate", Key::kDuplicate},
      {"reorder", Key::kReorder}, {"depth", Key::kReorderDepth},   {"reorder_depth", Key::kReorderDepth},
      {"corrupt", Key::kCorrupt}, {"seed", Key::kSeed},            {"delay", Key::kDelay},
      {"jitter", Key::kJitter},   {"rate", Key::kRate},            {"dir", Key::kDirection},
      {"direction", Key::kDirection}, {"peer", Key::kPeer},        {"qpn", Key::kQpn},
      {"class", Key::kClass},     {"psn", Key::kPsn},              {"nth", Key::kNth},
      {"from", Key::kFrom},       {"for", Key::kFor},              {"outage", Key::kOutage},
      {"pause", Key::kPause},     {"ecn", Key::kEcnMark},          {"ecn_mark", Key::kEcnMark},
  };
  for (const auto& [text, value] : kNames) {
    if (text == name) {
      *key = value;
      return true;
    }
  }
  return false;
}

// Whether a rule changes anything: without an action it would only force
// the UDP path (docs/fault-lab-design.md, "Settings") for nothing.
bool HasEffect(const Action& a) {
  return a.drop > 0 || a.duplicate > 0 || a.corrupt > 0 || a.reorder > 0 || a.ecn_mark > 0 ||
         a.delay_ns > 0 || a.jitter_ns > 0 || a.rate_bytes_per_s > 0 || a.outage || a.pause;
}

class OneLineReader {
 public:
  ParseResult Read(std::string_view text) {
    ParseResult result;
    Scenario scenario;
    Rule rule;
    rule.name = "rule 1";
    std::string_view rest = text;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view item = Trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (item.empty()) {
        // "drop=0.1," is fine; ",,", ", x" and "," are not (as before).
        if (!rest.empty() || comma == 0) {
          result.error = "empty item in " + Quoted(text) + ": expected key=value pairs separated "
                         "by single commas";
          return result;
        }
        continue;
      }
      if (!ReadItem(item, &scenario, &rule)) {
        result.error = std::move(error_);
        return result;
      }
    }
    if (!CheckCombinations(rule)) {
      result.error = std::move(error_);
      return result;
    }
    scenario.name = std::string(Trim(text));
    if (HasEffect(rule.action)) scenario.rules.push_back(std::move(rule));
    result.ok = true;
    result.scenario = std::move(scenario);
    return result;
  }

 private:
  bool Fail(std::string_view key, const std::string& what) {
    error_ = std::string(key) + ": " + what;
    return false;
  }

  bool ReadItem(std::string_view item, Scenario* scenario, Rule* rule) {
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      error_ = Quoted(item) + " has no value: expected key=value with a key among " +
               std::string(kKeys);
      return false;
    }
    const std::string_view name = Trim(item.substr(0, eq));
    const std::string_view value = Trim(item.substr(eq + 1));
    Key key{};
    if (!LookUpKey(name, &key)) {
      error_ = "unknown key " + Quoted(name) + ": expected one of " + std::string(kKeys);
      return false;
    }
    const auto index = static_cast<size_t>(key);
    if (given_[index])
      return Fail(name, "given twice (also as " + Quoted(*given_[index]) + "): expected each key once");
    given_[index] = std::string(name);

    Match& m = rule->match;
    Action& a = rule->action;
    std::string error;
    bool ok = true;
    uint64_t number = 0;
    switch (key) {
      case Key::kDrop: ok = ParseProbability(value, &a.drop, &error); break;
      case Key::kDuplicate: ok = ParseProbability(value, &a.duplicate, &error); break;
      case Key::kReorder: ok = ParseProbability(value, &a.reorder, &error); break;
      case Key::kCorrupt: ok = ParseProbability(value, &a.corrupt, &error); break;
      case Key::kEcnMark: ok = ParseProbability(value, &a.ecn_mark, &error); break;
      case Key::kReorderDepth:
        ok = ParseUnsigned(value, limits::kMaxReorderDepth, &number, &error);
        if (ok && number == 0) {
          ok = false;
          error = "0 is too small: expected a depth from 1 to " +
                  std::to_string(limits::kMaxReorderDepth);
        }
        a.reorder_depth = static_cast<uint32_t>(number);
        break;
      case Key::kSeed:
        ok = ParseUnsigned(value, UINT64_MAX, &scenario->seed, &error);
        break;
      case Key::kDelay: ok = ParseDuration(value, limits::kMaxDelayNs, &a.delay_ns, &error); break;
      case Key::kJitter: ok = ParseDuration(value, limits::kMaxDelayNs, &a.jitter_ns, &error); break;
      case Key::kRate:
        ok = ParseRate(value, limits::kMinRateBytesPerS, limits::kMaxRateBytesPerS,
                       &a.rate_bytes_per_s, &error);
        break;
      case Key::kDirection: ok = ParseDirection(value, &m.direction, &error); break;
      case Key::kPeer: {
        std::array<uint8_t, 16> address{};
        ok = ParsePeer(value, &address, &error);
        if (ok) m.peer = address;
        break;
      }
      case Key::kQpn:
        ok = ParseUnsigned(value, limits::kMax24Bit, &number, &error);
        if (ok) m.qpn = static_cast<uint32_t>(number);
        break;
      case Key::kClass: ok = ReadClasses(value, &m.classes, &error); break;
      case Key::kPsn: ok = ReadPsnRange(value, &m, &error); break;
      case Key::kNth:
        ok = ParseUnsigned(value, INT64_MAX, &number, &error);
        if (ok && number == 0) {
          ok = false;
          error = "0: expected a packet number from 1 (the first)";
        }
        if (ok) m.nth = number;
        break;
      case Key::kFrom: ok = ParseDuration(value, limits::kMaxWindowNs, &m.from_ns, &error); break;
      case Key::kFor: ok = ReadWindowLength(value, &m.for_ns, &error); break;
      case Key::kOutage: ok = ReadWindow(value, &m, &error); a.outage = ok; break;
      case Key::kPause: ok = ReadWindow(value, &m, &error); a.pause = ok; break;
      case Key::kCount: break;
    }
    return ok || Fail(name, error);
  }

  // What no single key shows; the window keys: from/for and outage/pause
  // both set the window, so only one of them may.
  bool CheckCombinations(const Rule& rule) {
    const auto given = [&](Key k) -> const std::optional<std::string>& {
      return given_[static_cast<size_t>(k)];
    };
    const Key window_setter = given(Key::kOutage) ? Key::kOutage : Key::kPause;
    if (given(window_setter)) {
      if (given(Key::kOutage) && given(Key::kPause))
        return Fail(*given(Key::kPause), "with outage: the outage would drop what the pause holds; "
                                         "expected one of them");
      for (Key k : {Key::kFrom, Key::kFor}) {
        if (given(k))
          return Fail(*given(k), "with " + *given(window_setter) + "=FROM+LEN, which sets the "
                                 "window already: expected one of them");
      }
    }
    if (given(Key::kEcnMark) && rule.match.direction != Direction::kIn)
      return Fail(*given(Key::kEcnMark), "marks received packets: expected dir=in too");
    if (given(Key::kReorderDepth) && !given(Key::kReorder))
      return Fail(*given(Key::kReorderDepth), "without reorder: expected reorder=P too");
    return true;
  }

  static bool ReadWindowLength(std::string_view text, uint64_t* for_ns, std::string* error) {
    if (!ParseDuration(text, limits::kMaxWindowNs, for_ns, error)) return false;
    if (*for_ns == 0) {
      // 0 would mean "for ever" (scenario.h), which is leaving `for` out.
      *error = "0: expected a window length > 0 (leave it out for a window that never ends)";
      return false;
    }
    return true;
  }

  // outage=FROM+LEN, pause=FROM+LEN: both durations ("2s+300ms").
  static bool ReadWindow(std::string_view text, Match* m, std::string* error) {
    const size_t plus = text.find('+');
    if (plus == std::string_view::npos) {
      *error = Quoted(text) + " is not a window: expected FROM+LEN, e.g. 2s+300ms";
      return false;
    }
    return ParseDuration(Trim(text.substr(0, plus)), limits::kMaxWindowNs, &m->from_ns, error) &&
           ReadWindowLength(Trim(text.substr(plus + 1)), &m->for_ns, error);
  }

  // class=acks+naks
  static bool ReadClasses(std::string_view text, uint16_t* classes, std::string* error) {
    uint16_t bits = 0;
    while (true) {
      const size_t plus = text.find('+');
      uint16_t bit = 0;
      if (!ParseClassName(Trim(text.substr(0, plus)), &bit, error)) return false;
      bits |= bit;
      if (plus == std::string_view::npos) break;
      text.remove_prefix(plus + 1);
    }
    *classes = bits;
    return true;
  }

  // psn=A-B (inclusive, may wrap) or psn=A.
  static bool ReadPsnRange(std::string_view text, Match* m, std::string* error) {
    const size_t dash = text.find('-');
    uint64_t first = 0, last = 0;
    if (!ParseUnsigned(Trim(text.substr(0, dash)), limits::kMax24Bit, &first, error)) return false;
    last = first;
    if (dash != std::string_view::npos &&
        !ParseUnsigned(Trim(text.substr(dash + 1)), limits::kMax24Bit, &last, error))
      return false;
    m->psn_first = static_cast<uint32_t>(first);
    m->psn_last = static_cast<uint32_t>(last);
    return true;
  }

  // For each key given: the name it was given under (for messages).
  std::optional<std::string> given_[static_cast<size_t>(Key::kCount)];
  std::string error_;
};

}  // namespace

ParseResult ParseOneLine(std::string_view text) { return OneLineReader().Read(text); }

}  // namespace softrnic::faults
