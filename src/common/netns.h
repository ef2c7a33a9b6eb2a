// The network namespace a process is in, read one way everywhere: the
// device and inode numbers of /proc/<pid>/ns/net. Two processes share a
// network namespace exactly when both numbers match (namespaces(7)); the
// inode alone is what readlink shows ("net:[4026531840]") and what tools
// compare within one host.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

namespace softrnic {

struct NetnsIdentity {
  uint64_t dev = 0;  // 0, 0: unknown (no /proc, or the process is gone)
  uint64_t ino = 0;
};

inline NetnsIdentity NetnsAt(const char* ns_path) {
  struct stat st {};
  if (stat(ns_path, &st) != 0) return {};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

inline NetnsIdentity NetnsOfSelf() { return NetnsAt("/proc/self/ns/net"); }

inline NetnsIdentity NetnsOfPid(int pid) {
  return NetnsAt(("/proc/" + std::to_string(pid) + "/ns/net").c_str());
}

}  // namespace softrnic
