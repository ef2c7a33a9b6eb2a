#include "printable.h"

#include <cstdio>

namespace softrnic::tools {

std::string Printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(char(c));
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", unsigned(c));
      out += esc;
    }
  }
  return out;
}

}  // namespace softrnic::tools
