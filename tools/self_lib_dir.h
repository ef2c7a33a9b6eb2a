// Where softrnic's drop-in libraries are, found from the `softrnic` tool's
// own location: for `softrnic run` (puts it first on LD_LIBRARY_PATH) and
// `softrnic doctor` (checks that programs would load from it).
#pragma once

#include <string>

namespace softrnic::tools {

// An installed tool (P/bin/softrnic) uses P/lib/softrnic (the private folder
// `cmake --install` and the Debian package fill), a tool in a build tree
// (BUILD/bin/softrnic, BUILD/CMakeCache.txt) uses BUILD/lib; never P/lib of
// an installed tool (/usr/local/lib may hold another libibverbs). The
// installed folder if neither holds libibverbs.so.1 (for the caller's
// warning); "" if /proc/self/exe cannot be read.
std::string SelfLibDir();

}  // namespace softrnic::tools
