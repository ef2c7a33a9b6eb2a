// Text from outside the tool (stats files other users may have written,
// process names, paths) made safe for a terminal: never raw escape
// sequences (security review L2).
#pragma once

#include <string>

namespace softrnic::tools {

// Printable ASCII as is; every other byte, and the backslash itself (so
// that no input can fake an escape), as \xNN.
std::string Printable(const std::string& s);

}  // namespace softrnic::tools
