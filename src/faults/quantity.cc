#include "faults/quantity.h"

#include <charconv>
#include <cmath>
#include <span>
#include <system_error>

namespace softrnic::faults {
namespace {

struct Unit {
  std::string_view name;
  double factor;  // in the quantity's base unit (ns, bytes, bytes/s)
};

constexpr Unit kDurationUnits[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};

// Decimal units first as written by network people (kB and KB both seen).
constexpr Unit kSizeUnits[] = {
    {"B", 1},           {"KB", 1e3},           {"kB", 1e3},          {"MB", 1e6},
    {"GB", 1e9},        {"KiB", 1024.0},       {"MiB", 1048576.0},   {"GiB", 1073741824.0},
};

constexpr Unit kBitUnits[] = {
    {"bit", 1.0 / 8}, {"Kbit", 1e3 / 8}, {"kbit", 1e3 / 8}, {"Mbit", 1e6 / 8}, {"Gbit", 1e9 / 8},
};

std::string UnitList(std::span<const Unit> units) {
  std::string out;
  for (const Unit& u : units) {
    if (!out.empty()) out += ", ";
    out += u.name;
  }
  return out;
}

const Unit* FindUnit(std::span<const Unit> units, std::string_view name) {
  for (const Unit& u : units)
    if (u.name == name) return &u;
  return nullptr;
}

// A number as quantities write it: digits with at most one '.', nothing
// else (no sign, exponent, "inf" or "nan": strtod would take those).
bool ParseDecimal(std::string_view text, double* out) {
  bool digit = false;
  int dots = 0;
  for (char c : text) {
    if (c >= '0' && c <= '9') digit = true;
    else if (c == '.') ++dots;
    else return false;
  }
  if (!digit || dots > 1) return false;
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v,
                                         std::chars_format::fixed);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// Splits "1.5 ms" into "1.5" and "ms" (spaces between them allowed).
void SplitNumberAndUnit(std::string_view text, std::string_view* number, std::string_view* unit) {
  size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  *number = text.substr(0, i);
  size_t j = i;
  while (j < text.size() && text[j] == ' ') ++j;
  *unit = text.substr(j);
}

// value * factor rounded to a whole number in [min, max], or false. The
// bounds are checked on the double, before any conversion could overflow.
bool Scale(double value, double factor, uint64_t min, uint64_t max, uint64_t* out) {
  const double scaled = std::round(value * factor);
  if (!(scaled >= static_cast<double>(min)) || !(scaled <= static_cast<double>(max))) return false;
  // A max near 2^64 rounds up to 2^64 as a double, which does not convert.
  if (scaled >= 18446744073709551616.0) return false;
  *out = static_cast<uint64_t>(scaled);
  return *out >= min && *out <= max;
}

std::string SizeText(uint64_t bytes) {
  if (bytes >= 1024 && bytes % (1u << 30) == 0) return std::to_string(bytes >> 30) + "GiB";
  if (bytes >= 1024 && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

}  // namespace

std::string Quoted(std::string_view text) {
  constexpr size_t kMaxShown = 60;
  std::string out = "\"";
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == kMaxShown) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      static constexpr char kHex[] = "0123456789abcdef";
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else {
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string DurationText(uint64_t ns) {
  if (ns != 0 && ns % 1000000000 == 0) return std::to_string(ns / 1000000000) + "s";
  if (ns != 0 && ns % 1000000 == 0) return std::to_string(ns / 1000000) + "ms";
  if (ns != 0 && ns % 1000 == 0) return std::to_string(ns / 1000) + "us";
  return std::to_string(ns) + "ns";
}

bool ParseDuration(std::string_view text, uint64_t max_ns, uint64_t* ns, std::string* error) {
  const std::string expected = "expected a duration up to " + DurationText(max_ns) +
                               ": a number and a unit (" + UnitList(kDurationUnits) +
                               "), e.g. \"300ms\"";
  std::string_view number, unit_name;
  SplitNumberAndUnit(text, &number, &unit_name);
  double value = 0;
  if (!ParseDecimal(number, &value)) {
    *error = Quoted(text) + " is not a duration: " + expected;
    return false;
  }
  if (unit_name.empty()) {
    if (value == 0) {
      *ns = 0;
      return true;
    }
    *error = Quoted(text) + " has no unit: " + expected;
    return false;
  }
  const Unit* unit = FindUnit(kDurationUnits, unit_name);
  if (unit == nullptr) {
    *error = Quoted(text) + " has an unknown unit: " + expected;
    return false;
  }
  if (!Scale(value, unit->factor, 0, max_ns, ns)) {
    *error = Quoted(text) + " is too long: " + expected;
    return false;
  }
  return true;
}

bool ParseRate(std::string_view text, uint64_t min, uint64_t max, uint64_t* bytes_per_s,
               std::string* error) {
  const std::string expected = "expected a rate from " + std::to_string(min) + " to " +
                               std::to_string(max) +
                               " bytes per second: an integer (bytes/s) or a number and a unit (" +
                               UnitList(kSizeUnits) + ", " + UnitList(kBitUnits) +
                               ", each optionally with /s), e.g. \"100MB/s\" or \"1Gbit/s\"";
  std::string_view number, unit_name;
  SplitNumberAndUnit(text, &number, &unit_name);
  if (unit_name.ends_with("/s")) unit_name.remove_suffix(2);
  double value = 0;
  if (!ParseDecimal(number, &value) || (unit_name.empty() && number.find('.') != number.npos)) {
    *error = Quoted(text) + " is not a rate: " + expected;
    return false;
  }
  const Unit* unit = unit_name.empty() ? &kSizeUnits[0] : FindUnit(kSizeUnits, unit_name);
  if (unit == nullptr) unit = FindUnit(kBitUnits, unit_name);
  if (unit == nullptr) {
    *error = Quoted(text) + " has an unknown unit: " + expected;
    return false;
  }
  if (!Scale(value, unit->factor, min, max, bytes_per_s)) {
    *error = Quoted(text) + " is out of range: " + expected;
    return false;
  }
  return true;
}

bool ParseSize(std::string_view text, uint64_t min, uint64_t max, uint64_t* bytes,
               std::string* error) {
  const std::string expected = "expected a size from " + SizeText(min) + " to " + SizeText(max) +
                               ": an integer (bytes) or a number and a unit (" +
                               UnitList(kSizeUnits) + "), e.g. \"16KiB\"";
  std::string_view number, unit_name;
  SplitNumberAndUnit(text, &number, &unit_name);
  double value = 0;
  if (!ParseDecimal(number, &value) || (unit_name.empty() && number.find('.') != number.npos)) {
    *error = Quoted(text) + " is not a size: " + expected;
    return false;
  }
  const Unit* unit = unit_name.empty() ? &kSizeUnits[0] : FindUnit(kSizeUnits, unit_name);
  if (unit == nullptr) {
    *error = Quoted(text) + " has an unknown unit: " + expected;
    return false;
  }
  if (!Scale(value, unit->factor, min, max, bytes)) {
    *error = Quoted(text) + " is out of range: " + expected;
    return false;
  }
  return true;
}

bool ParseProbability(std::string_view text, double* probability, std::string* error) {
  // from_chars, not strtod: no locale, no leading blanks, no hex floats.
  // Exponents are accepted ("1e-4"), as SOFTRNIC_FAULTS always did.
  double v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const bool signed_text = !text.empty() && (text[0] == '-' || text[0] == '+');
  const auto [end, ec] = std::from_chars(first, last, v);
  if (text.empty() || signed_text || ec != std::errc() || end != last || !(v >= 0.0 && v <= 1.0)) {
    *error = Quoted(text) + " is not a probability: expected a number in [0, 1], e.g. 0.01";
    return false;
  }
  *probability = v;
  return true;
}

bool ParseUnsigned(std::string_view text, uint64_t max, uint64_t* value, std::string* error) {
  const std::string expected =
      "expected an integer from 0 to " + std::to_string(max) + " (decimal or 0x hexadecimal)";
  int base = 10;
  std::string_view digits = text;
  if (digits.starts_with("0x") || digits.starts_with("0X")) {
    base = 16;
    digits.remove_prefix(2);
  }
  uint64_t v = 0;
  const char* last = digits.data() + digits.size();
  // from_chars takes no sign for unsigned types, so "-1" and "+1" fail here.
  const auto [end, ec] = std::from_chars(digits.data(), last, v, base);
  if (digits.empty() || ec == std::errc::invalid_argument || end != last) {
    *error = Quoted(text) + " is not an integer: " + expected;
    return false;
  }
  if (ec == std::errc::result_out_of_range || v > max) {
    *error = Quoted(text) + " is too large: " + expected;
    return false;
  }
  *value = v;
  return true;
}

}  // namespace softrnic::faults
