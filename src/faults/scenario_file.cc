// The TOML scenario file (docs/fault-lab-design.md, "Scenario file"):
// toml++ parses the syntax and keeps a source region for every key and
// value; this file walks the tree, checks every key, type and bound, and
// builds the Scenario. Errors are "ORIGIN:LINE:COLUMN: what is wrong:
// what was expected" at the key (unknown keys) or at the value (wrong type,
// out of range).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "faults/quantity.h"
#include "faults/rule_values.h"
#include "faults/scenario_limits.h"
#include "faults/scenario_parse.h"

namespace softrnic::faults {
namespace {

constexpr std::string_view kRuleKeys =
    "name, direction, peer, qpn, class, psn, nth, from, for, drop, duplicate, corrupt, reorder, "
    "reorder_depth, delay, jitter, rate, rate_burst, rate_queue, outage, pause, pause_queue, "
    "ecn_mark";

std::string TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}

// A table name as written in a header: bare if TOML allows it bare.
std::string TableName(std::string_view name) {
  const bool bare = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  return bare ? std::string(name) : Quoted(name);
}

std::string NumberText(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", v);
  return buffer;
}

using Entry = std::pair<const toml::key*, const toml::node*>;

// A table's entries in the order they appear in the file (toml::table
// iterates sorted by key), so that the first error reported is the first
// one in the file.
std::vector<Entry> InFileOrder(const toml::table& table) {
  std::vector<Entry> entries;
  for (const auto& [key, node] : table) entries.emplace_back(&key, &node);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    const toml::source_position pa = a.first->source().begin, pb = b.first->source().begin;
    return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
  });
  return entries;
}

class ScenarioFileReader {
 public:
  explicit ScenarioFileReader(const std::string& origin) : origin_(origin) {}

  ParseResult Read(std::string_view text) {
    ParseResult result;
    if (text.size() > limits::kMaxFileBytes) {
      result.error = Location({1, 1}) + "the scenario is " + std::to_string(text.size()) +
                     " bytes: expected at most " + std::to_string(limits::kMaxFileBytes) +
                     " (1 MiB)";
      return result;
    }
    toml::table top;
    try {
      top = toml::parse(text, std::string_view(origin_));
    } catch (const toml::parse_error& e) {
      result.error = Location(e.source().begin) + std::string(e.description());
      return result;
    }
    Scenario scenario;
    scenario.name = std::filesystem::path(origin_).stem().string();
    if (!ReadTop(top, &scenario)) {
      result.error = std::move(error_);
      return result;
    }
    result.ok = true;
    result.scenario = std::move(scenario);
    return result;
  }

 private:
  std::string Location(const toml::source_position& at) const {
    return origin_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": ";
  }

  bool Fail(const toml::source_region& where, const std::string& what) {
    error_ = Location(where.begin) + what;
    return false;
  }

  bool WrongType(const toml::key& key, const toml::node& value, std::string_view expected) {
    return Fail(value.source(), std::string(key.str()) + " is " + TypeName(value) + ": expected " +
                                    std::string(expected));
  }

  bool ReadTop(const toml::table& top, Scenario* scenario) {
    for (const auto& [key, node] : InFileOrder(top)) {
      if (key->str() == "name") {
        if (!GetString(*key, *node, &scenario->name)) return false;
      } else if (key->str() == "description") {
        if (!GetString(*key, *node, &scenario->description)) return false;
      } else if (key->str() == "seed") {
        if (!GetInteger(*key, *node, 0, INT64_MAX, &scenario->seed)) return false;
      } else if (key->str() == "rule") {
        if (!ReadRules(*key, *node, &scenario->rules)) return false;
      } else if (node->is_table() && !node->as_table()->is_inline()) {
        return Fail(node->source(), "unknown table [" + TableName(key->str()) +
                                        "]: expected only [[rule]] tables");
      } else {
        return Fail(key->source(), "unknown key " + Quoted(key->str()) +
                                       ": expected name, description, seed or [[rule]] tables");
      }
    }
    return true;
  }

  bool ReadRules(const toml::key& key, const toml::node& node, std::vector<Rule>* rules) {
    const toml::array* array = node.as_array();
    if (array == nullptr) {
      return Fail(node.source(), "rule is " + TypeName(node) +
                                     ": expected [[rule]] tables (double brackets, one per rule)");
    }
    for (const toml::node& element : *array) {
      const toml::table* table = element.as_table();
      if (table == nullptr) return WrongType(key, element, "[[rule]] tables");
      if (rules->size() == limits::kMaxRules) {
        return Fail(element.source(), "rule " + std::to_string(rules->size() + 1) +
                                          ": expected at most " +
                                          std::to_string(limits::kMaxRules) + " rules");
      }
      Rule rule;
      rule.name = "rule " + std::to_string(rules->size() + 1);
      rule.line = static_cast<int>(element.source().begin.line);
      if (!ReadRule(*table, &rule)) return false;
      rules->push_back(std::move(rule));
    }
    return true;
  }

  // The keys whose meaning depends on another key, remembered while
  // reading a rule so that the combinations can be checked at the end.
  struct RuleKeys {
    const toml::key* window_length = nullptr;  // for
    const toml::key* direction = nullptr;
    const toml::key* reorder = nullptr;
    const toml::key* reorder_depth = nullptr;
    const toml::key* rate = nullptr;
    const toml::key* rate_burst = nullptr;
    const toml::key* rate_queue = nullptr;
    const toml::key* outage = nullptr;  // only when true
    const toml::key* pause = nullptr;   // only when true
    const toml::key* pause_queue = nullptr;
    const toml::key* ecn_mark = nullptr;
  };

  bool ReadRule(const toml::table& table, Rule* rule) {
    Match& m = rule->match;
    Action& a = rule->action;
    RuleKeys seen;
    for (const auto& [key_pointer, node_pointer] : InFileOrder(table)) {
      const toml::key& key = *key_pointer;
      const toml::node& node = *node_pointer;
      const std::string_view name = key.str();
      bool ok = true;
      if (name == "name") {
        ok = GetString(key, node, &rule->name);
      } else if (name == "direction") {
        seen.direction = &key;
        ok = GetWord(key, node, [&](std::string_view text, std::string* error) {
          return ParseDirection(text, &m.direction, error);
        });
      } else if (name == "peer") {
        std::array<uint8_t, 16> address{};
        ok = GetWord(key, node, [&](std::string_view text, std::string* error) {
          return ParsePeer(text, &address, error);
        });
        if (ok) m.peer = address;
      } else if (name == "qpn") {
        uint64_t qpn = 0;
        ok = GetInteger(key, node, 0, limits::kMax24Bit, &qpn);
        if (ok) m.qpn = static_cast<uint32_t>(qpn);
      } else if (name == "class") {
        ok = GetClasses(key, node, &m.classes);
      } else if (name == "psn") {
        ok = GetPsnRange(key, node, &m);
      } else if (name == "nth") {
        uint64_t nth = 0;
        ok = GetInteger(key, node, 1, INT64_MAX, &nth);
        if (ok) m.nth = nth;
      } else if (name == "from") {
        ok = GetDuration(key, node, limits::kMaxWindowNs, &m.from_ns);
      } else if (name == "for") {
        seen.window_length = &key;
        ok = GetDuration(key, node, limits::kMaxWindowNs, &m.for_ns);
        // 0 would mean "for ever" (scenario.h), which is leaving `for` out.
        if (ok && m.for_ns == 0)
          ok = Fail(node.source(), "for is 0: expected a window length > 0 (leave `for` out "
                                   "for a window that never ends)");
      } else if (name == "drop") {
        ok = GetProbability(key, node, &a.drop);
      } else if (name == "duplicate") {
        ok = GetProbability(key, node, &a.duplicate);
      } else if (name == "corrupt") {
        ok = GetProbability(key, node, &a.corrupt);
      } else if (name == "reorder") {
        seen.reorder = &key;
        ok = GetProbability(key, node, &a.reorder);
      } else if (name == "reorder_depth") {
        seen.reorder_depth = &key;
        uint64_t depth = 0;
        ok = GetInteger(key, node, 1, limits::kMaxReorderDepth, &depth);
        a.reorder_depth = static_cast<uint32_t>(depth);
      } else if (name == "delay") {
        ok = GetDuration(key, node, limits::kMaxDelayNs, &a.delay_ns);
      } else if (name == "jitter") {
        ok = GetDuration(key, node, limits::kMaxDelayNs, &a.jitter_ns);
      } else if (name == "rate") {
        seen.rate = &key;
        ok = GetRate(key, node, &a.rate_bytes_per_s);
      } else if (name == "rate_burst") {
        seen.rate_burst = &key;
        // A burst of 0 bytes would never let a packet through.
        ok = GetSize(key, node, 1, &a.rate_burst_bytes);
      } else if (name == "rate_queue") {
        seen.rate_queue = &key;
        ok = GetSize(key, node, 0, &a.rate_queue_bytes);
      } else if (name == "outage") {
        ok = GetBool(key, node, &a.outage);
        if (a.outage) seen.outage = &key;
      } else if (name == "pause") {
        ok = GetBool(key, node, &a.pause);
        if (a.pause) seen.pause = &key;
      } else if (name == "pause_queue") {
        seen.pause_queue = &key;
        ok = GetSize(key, node, 0, &a.pause_queue_bytes);
      } else if (name == "ecn_mark") {
        seen.ecn_mark = &key;
        ok = GetProbability(key, node, &a.ecn_mark);
      } else if (node.is_table() && !node.as_table()->is_inline()) {
        ok = Fail(node.source(), "unknown table [rule." + TableName(name) +
                                     "]: a [[rule]] has keys only, expected one of " +
                                     std::string(kRuleKeys));
      } else {
        ok = Fail(key.source(), "unknown key " + Quoted(name) + " in [[rule]]: expected one of " +
                                    std::string(kRuleKeys));
      }
      if (!ok) return false;
    }
    return CheckCombinations(*rule, seen);
  }

  // What no single key shows: settings that need another one.
  bool CheckCombinations(const Rule& rule, const RuleKeys& seen) {
    const auto needs = [&](const toml::key* key, const toml::key* needed, const char* why) {
      return key == nullptr || needed != nullptr ||
             Fail(key->source(), std::string(key->str()) + " without " + why);
    };
    if (seen.outage != nullptr && seen.window_length == nullptr)
      return Fail(seen.outage->source(), "outage without `for`: expected a window (from, for); an "
                                         "outage for ever would cut the link for the whole run");
    if (seen.pause != nullptr && seen.window_length == nullptr)
      return Fail(seen.pause->source(), "pause without `for`: expected a window (from, for) after "
                                        "which the held packets are passed on");
    if (seen.outage != nullptr && seen.pause != nullptr)
      return Fail(seen.pause->source(), "outage and pause in one rule: the outage would drop what "
                                        "the pause holds; expected one of them (use two rules)");
    if (seen.ecn_mark != nullptr && rule.match.direction != Direction::kIn)
      return Fail(seen.ecn_mark->source(), "ecn_mark marks received packets: expected "
                                           "direction = \"in\" in the same rule");
    return needs(seen.reorder_depth, seen.reorder, "reorder: expected reorder = P too") &&
           needs(seen.rate_burst, seen.rate, "rate: expected rate = \"...\" too") &&
           needs(seen.rate_queue, seen.rate, "rate: expected rate = \"...\" too") &&
           needs(seen.pause_queue, seen.pause, "pause = true: expected pause = true too");
  }

  // --- typed values ---

  bool GetString(const toml::key& key, const toml::node& node, std::string* out) {
    const auto* value = node.as_string();
    if (value == nullptr) return WrongType(key, node, "a string");
    *out = value->get();
    return true;
  }

  bool GetBool(const toml::key& key, const toml::node& node, bool* out) {
    const auto* value = node.as_boolean();
    if (value == nullptr) return WrongType(key, node, "true or false");
    *out = value->get();
    return true;
  }

  bool GetInteger(const toml::key& key, const toml::node& node, int64_t min, uint64_t max,
                  uint64_t* out) {
    const std::string expected = "an integer from " + std::to_string(min) + " to " +
                                 std::to_string(max);
    const auto* value = node.as_integer();
    if (value == nullptr) return WrongType(key, node, expected);
    const int64_t v = value->get();
    if (v < min || static_cast<uint64_t>(v) > max)
      return Fail(node.source(), std::string(key.str()) + " = " + std::to_string(v) +
                                     " is out of range: expected " + expected);
    *out = static_cast<uint64_t>(v);
    return true;
  }

  bool GetProbability(const toml::key& key, const toml::node& node, double* out) {
    // `drop = 1` is as natural as `drop = 1.0`: take integers too.
    double v = 0;
    if (const auto* f = node.as_floating_point()) v = f->get();
    else if (const auto* i = node.as_integer()) v = static_cast<double>(i->get());
    else return WrongType(key, node, "a probability (a number in [0, 1])");
    if (!(v >= 0.0 && v <= 1.0))  // also refuses nan
      return Fail(node.source(), std::string(key.str()) + " = " + NumberText(v) +
                                     " is out of range: expected a probability in [0, 1]");
    *out = v;
    return true;
  }

  // A string value checked by `parse(text, &error)`.
  template <typename ParseWord>
  bool GetWord(const toml::key& key, const toml::node& node, ParseWord parse) {
    const auto* value = node.as_string();
    if (value == nullptr) return WrongType(key, node, "a string");
    std::string error;
    if (!parse(std::string_view(value->get()), &error))
      return Fail(node.source(), std::string(key.str()) + ": " + error);
    return true;
  }

  // A quantity with units: a string, or an integer that the same parser
  // reads as its bare form (bytes, bytes/s; for durations only 0).
  template <typename ParseQuantity>
  bool GetQuantity(const toml::key& key, const toml::node& node, std::string_view example,
                   ParseQuantity parse) {
    std::string text;
    if (const auto* s = node.as_string()) text = s->get();
    else if (const auto* i = node.as_integer()) text = std::to_string(i->get());
    else return WrongType(key, node, "a string like " + std::string(example));
    std::string error;
    if (!parse(std::string_view(text), &error))
      return Fail(node.source(), std::string(key.str()) + ": " + error);
    return true;
  }

  bool GetDuration(const toml::key& key, const toml::node& node, uint64_t max_ns, uint64_t* out) {
    return GetQuantity(key, node, "\"300ms\"", [&](std::string_view text, std::string* error) {
      return ParseDuration(text, max_ns, out, error);
    });
  }

  bool GetRate(const toml::key& key, const toml::node& node, uint64_t* out) {
    return GetQuantity(key, node, "\"100MB/s\"", [&](std::string_view text, std::string* error) {
      return ParseRate(text, limits::kMinRateBytesPerS, limits::kMaxRateBytesPerS, out, error);
    });
  }

  bool GetSize(const toml::key& key, const toml::node& node, uint64_t min, uint64_t* out) {
    return GetQuantity(key, node, "\"16KiB\"", [&](std::string_view text, std::string* error) {
      return ParseSize(text, min, limits::kMaxSizeBytes, out, error);
    });
  }

  bool GetClasses(const toml::key& key, const toml::node& node, uint16_t* classes) {
    constexpr std::string_view kExpected = "a class name or an array of them";
    uint16_t bits = 0;
    const auto add = [&](const toml::node& element) {
      const auto* name = element.as_string();
      if (name == nullptr) return WrongType(key, element, kExpected);
      std::string error;
      uint16_t bit = 0;
      if (!ParseClassName(name->get(), &bit, &error))
        return Fail(element.source(), "class: " + error);
      bits |= bit;
      return true;
    };
    if (const toml::array* array = node.as_array()) {
      if (array->empty())
        return Fail(node.source(), "class is empty: expected at least one class (leave `class` "
                                   "out for every packet)");
      for (const toml::node& element : *array)
        if (!add(element)) return false;
    } else if (node.is_string()) {
      if (!add(node)) return false;
    } else {
      return WrongType(key, node, kExpected);
    }
    *classes = bits;
    return true;
  }

  bool GetPsnRange(const toml::key& key, const toml::node& node, Match* m) {
    const toml::array* array = node.as_array();
    if (array == nullptr || array->size() != 2)
      return Fail(node.source(), "psn is " + (array ? "an array of " + std::to_string(array->size()) +
                                                          " values"
                                                    : TypeName(node)) +
                                     ": expected [first, last], two PSNs (inclusive)");
    uint64_t first = 0, last = 0;
    if (!GetInteger(key, (*array)[0], 0, limits::kMax24Bit, &first) ||
        !GetInteger(key, (*array)[1], 0, limits::kMax24Bit, &last))
      return false;
    m->psn_first = static_cast<uint32_t>(first);
    m->psn_last = static_cast<uint32_t>(last);
    return true;
  }

  const std::string& origin_;
  std::string error_;
};

}  // namespace

ParseResult ParseScenarioText(std::string_view text, const std::string& origin) {
  return ScenarioFileReader(origin).Read(text);
}

ParseResult ParseScenarioFile(const std::string& path) {
  ParseResult result;
  const auto fail = [&](const std::string& what) {
    result.error = path + ":1:1: " + what;
    return result;
  };
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found)
    return fail("cannot read: no such file");
  if (ec) return fail("cannot read: " + ec.message());
  // Not a FIFO or a device: reading one could block or never end.
  if (!std::filesystem::is_regular_file(status))
    return fail("not a regular file: expected a .toml file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot open for reading");
  // One byte more than allowed tells "too large" without reading it all.
  std::string text(limits::kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return fail("read error");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > limits::kMaxFileBytes)
    return fail("the file is larger than 1 MiB: expected at most " +
                std::to_string(limits::kMaxFileBytes) + " bytes");
  return ParseScenarioText(text, path);
}

}  // namespace softrnic::faults
