// Which scenario the environment asks for (scenario_parse.h). The readers
// themselves: scenario_file.cc (TOML) and one_line.cc.
#include "faults/scenario_parse.h"

#include <filesystem>
#include <string>

#include "config/environment.h"

namespace softrnic::faults {

ParseResult ScenarioFromEnvironment(const config::Environment& env) {
  const char* file = env.Raw("SOFTRNIC_FAULTS_FILE");
  const char* line = env.Raw("SOFTRNIC_FAULTS");
  if (file != nullptr && line != nullptr) {
    ParseResult both;
    both.error = "SOFTRNIC_FAULTS and SOFTRNIC_FAULTS_FILE are both set: expected one of them "
                 "(a file holds any number of rules)";
    return both;
  }
  if (file != nullptr) return ParseScenarioFile(file);
  if (line == nullptr) return ParseResult{.ok = true};
  // `softrnic run --faults` takes a line or a file and passes it here as
  // SOFTRNIC_FAULTS. A value ending in .toml with no '=' cannot be a line,
  // so it is read as a file even when missing: "cannot read x.toml" says
  // more than "x.toml has no value".
  const std::string_view value = line;
  std::error_code ec;
  if (value.ends_with(".toml") &&
      (value.find('=') == value.npos || std::filesystem::is_regular_file(value, ec)))
    return ParseScenarioFile(line);
  ParseResult result = ParseOneLine(value);
  if (!result.ok) result.error = "SOFTRNIC_FAULTS: " + result.error;
  return result;
}

}  // namespace softrnic::faults
