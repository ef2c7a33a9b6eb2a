#include "self_lib_dir.h"

#include <limits.h>
#include <unistd.h>

namespace softrnic::tools {

std::string SelfLibDir() {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "";
  std::string path(exe, static_cast<size_t>(n));
  for (int up = 0; up < 2; ++up) {  // .../bin/softrnic -> ...
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return "";
    path.resize(slash);
  }
  const std::string installed = path + "/lib/softrnic";
  if (access((installed + "/libibverbs.so.1").c_str(), R_OK) == 0) return installed;
  const std::string build_tree = path + "/lib";
  if (access((path + "/CMakeCache.txt").c_str(), R_OK) == 0 &&
      access((build_tree + "/libibverbs.so.1").c_str(), R_OK) == 0)
    return build_tree;
  return installed;
}

}  // namespace softrnic::tools
