// The table of every SOFTRNIC_* environment variable the product reads: its
// name, default, accepted values, what it does and which layer uses it. The
// one place they are listed; docs/configuration.md is generated from it
// (`softrnic config`) and a unit test keeps the two equal. Values are read
// only through Environment (environment.h), which checks them against this
// table.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace softrnic::config {

// How a value is checked (Environment's typed getters).
enum class Kind {
  kFlag,     // "0" or "1"
  kChoice,   // one of the words in `values`, separated by '|'
  kInteger,  // a decimal integer in [min, max]
  kNumber,   // a decimal number > 0
  kText,     // anything; the reader checks it (`values` describes the form)
};

struct Variable {
  std::string_view name;
  Kind kind;
  // For kFlag, kChoice, kInteger and kNumber a value the getter accepts
  // (tests check it); for kText what happens when unset.
  std::string_view default_value;
  // What is accepted: "0|1", "udp|shm|auto", "0..500", or a description.
  std::string_view values;
  std::string_view meaning;
  std::string_view layer;  // who reads it: wire, transport, engine, rdmacm, log, tools
  long min = 0;            // kInteger only
  long max = 0;
};

// Every variable, in the order docs/configuration.md lists them.
std::span<const Variable> Variables();

// The table entry for `name`, or null.
const Variable* FindVariable(std::string_view name);

// The Markdown table of Variables() that docs/configuration.md holds
// between its "generated" markers.
std::string MarkdownTable();

}  // namespace softrnic::config
