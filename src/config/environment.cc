#include "config/environment.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace softrnic::config {
namespace {

const Variable& Lookup(std::string_view name, Kind kind) {
  const Variable* v = FindVariable(name);
  if (v == nullptr || v->kind != kind) {
    std::fprintf(stderr, "softrnic: internal error: %.*s is not a variable of that kind in the table\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return *v;
}

bool IsChoice(const Variable& v, std::string_view value) {
  std::string_view rest = v.values;
  while (true) {
    const size_t bar = rest.find('|');
    if (rest.substr(0, bar) == value) return true;
    if (bar == std::string_view::npos) return false;
    rest.remove_prefix(bar + 1);
  }
}

bool ParseLong(const char* text, long* out) {
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return false;
  *out = x;
  return true;
}

bool ParseDouble(const char* text, double* out) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0') return false;
  *out = x;
  return true;
}

void Warn(const Variable& v, const char* value) {
  std::fprintf(stderr, "%s\n", Environment::Rejection(v, value).c_str());
}

}  // namespace

Environment Environment::FromProcess() {
  Values values;
  for (const Variable& v : Variables()) {
    const std::string name(v.name);
    if (const char* value = std::getenv(name.c_str())) values.emplace(name, value);
  }
  return Environment(std::move(values));
}

Environment::Environment(Values values) : values_(std::move(values)) {}

std::string Environment::Rejection(const Variable& v, std::string_view value) {
  return "softrnic: ignoring " + std::string(v.name) + "=" + std::string(value) +
         " (accepted: " + std::string(v.values) + ")";
}

const char* Environment::Raw(std::string_view name) const {
  if (FindVariable(name) == nullptr) {
    std::fprintf(stderr, "softrnic: internal error: %.*s is not in the table\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return nullptr;
  return it->second.c_str();
}

bool Environment::Flag(std::string_view name) const {
  const Variable& v = Lookup(name, Kind::kFlag);
  if (const char* s = Raw(name)) {
    if (std::string_view(s) == "0") return false;
    if (std::string_view(s) == "1") return true;
    Warn(v, s);
  }
  return v.default_value == "1";
}

std::string Environment::Choice(std::string_view name) const {
  const Variable& v = Lookup(name, Kind::kChoice);
  if (const char* s = Raw(name)) {
    if (IsChoice(v, s)) return s;
    Warn(v, s);
  }
  return std::string(v.default_value);
}

bool Environment::StrictChoice(std::string_view name, std::string* out, std::string* error) const {
  const Variable& v = Lookup(name, Kind::kChoice);
  const char* s = Raw(name);
  if (s == nullptr) {
    *out = std::string(v.default_value);
    return true;
  }
  if (IsChoice(v, s)) {
    *out = s;
    return true;
  }
  if (error != nullptr)
    *error = "softrnic: " + std::string(v.name) + "=" + s + ": unknown value (accepted: " +
             std::string(v.values) + ")";
  return false;
}

long Environment::Integer(std::string_view name) const {
  const Variable& v = Lookup(name, Kind::kInteger);
  if (const char* s = Raw(name)) {
    long x;
    if (ParseLong(s, &x) && x >= v.min && x <= v.max) return x;
    Warn(v, s);
  }
  long x = 0;
  ParseLong(std::string(v.default_value).c_str(), &x);
  return x;
}

double Environment::Number(std::string_view name) const {
  const Variable& v = Lookup(name, Kind::kNumber);
  if (const char* s = Raw(name)) {
    double x;
    if (ParseDouble(s, &x) && x > 0) return x;
    Warn(v, s);
  }
  double x = 0;
  ParseDouble(std::string(v.default_value).c_str(), &x);
  return x;
}

std::string Environment::Text(std::string_view name) const {
  const Variable& v = Lookup(name, Kind::kText);
  if (const char* s = Raw(name)) return s;
  return std::string(v.default_value);
}

}  // namespace softrnic::config
