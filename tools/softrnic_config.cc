// `softrnic config`: the SOFTRNIC_* environment variables (the table in
// src/config/variables.cc), each with its value in this environment.
// `softrnic config --markdown` prints the table docs/configuration.md holds.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"
#include "config/environment.h"
#include "config/variables.h"

namespace softrnic::tools {

int ConfigMain(int argc, char** argv) {
  if (argc == 2 && !std::strcmp(argv[1], "--markdown")) {
    std::fputs(config::MarkdownTable().c_str(), stdout);
    return 0;
  }
  if (argc != 1) {
    std::fprintf(stderr,
                 "usage: softrnic config [--markdown]\n"
                 "  every SOFTRNIC_* variable: its value here (or its default), and what it does\n"
                 "  --markdown: the table of docs/configuration.md\n");
    return argc == 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) ? 0 : 2;
  }
  const config::Environment env = config::Environment::FromProcess();
  for (const config::Variable& v : config::Variables()) {
    const char* value = env.Raw(v.name);
    std::printf("%-24s %-10s %s\n", std::string(v.name).c_str(),
                value != nullptr ? value : ("(" + std::string(v.default_value) + ")").c_str(),
                std::string(v.values).c_str());
  }
  std::printf("(values in parentheses are defaults; docs/configuration.md says what each does)\n");
  return 0;
}

}  // namespace softrnic::tools
