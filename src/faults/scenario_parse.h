// Reading fault scenarios (scenario.h): the TOML scenario file
// (docs/fault-lab-design.md has its format) and the one-line form.
//
// Hostile input: a file is limited in size (1 MiB) and rule count (256);
// every number is range-checked (probabilities in [0, 1], times and rates
// below documented bounds), unknown keys and tables are errors, and every
// error names the file, line and column and what was expected. Nothing is
// half-applied: a scenario with an error is not returned at all.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "faults/scenario.h"

namespace softrnic::config {
class Environment;
}  // namespace softrnic::config

namespace softrnic::faults {

struct ParseResult {
  bool ok = false;
  Scenario scenario;
  std::string error;  // "FILE:LINE:COLUMN: what is wrong" when !ok
};

// A scenario file's text; `origin` names it in errors (its path).
ParseResult ParseScenarioText(std::string_view text, const std::string& origin);
// Reads and parses the file at `path`.
ParseResult ParseScenarioFile(const std::string& path);

// The one-line form: comma-separated key=value pairs making one rule, e.g.
// "drop=0.01,seed=7", "dir=out,class=acks,drop=0.2", "nth=5,drop=1",
// "outage=2s+300ms", "delay=200us,jitter=50us", "rate=100MB". The keys of
// the old SOFTRNIC_FAULTS (drop, dup, reorder, corrupt, seed) keep their
// meaning. An error names the key.
ParseResult ParseOneLine(std::string_view text);

// The scenario the environment asks for: SOFTRNIC_FAULTS_FILE (a file) or
// SOFTRNIC_FAULTS (the one-line form; a value that names an existing file
// ending in .toml is read as a file). Both set: an error. Neither: ok with
// an empty scenario.
ParseResult ScenarioFromEnvironment(const config::Environment& env);

}  // namespace softrnic::faults
