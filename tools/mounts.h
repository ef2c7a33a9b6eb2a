// Small mount(2) helpers for `softrnic run` and `softrnic setup`. Each
// returns "" on success or a message naming the operation, the path and the
// errno text, for the caller to print.
#pragma once

#include <string>
#include <vector>

#include "device_view.h"

namespace softrnic::tools {

// A fresh tmpfs on `dir` (mode 0755, nosuid; `extra_flags` e.g. MS_NOEXEC).
std::string MountTmpfs(const std::string& dir, unsigned long extra_flags);
// Bind `source` onto `target` (which must exist: a directory for a
// directory, any file for a file); recursive: with the mounts below it.
std::string BindMount(const std::string& source, const std::string& target, bool recursive);
// MS_MOVE `source`'s mount (with everything mounted below it) onto `target`.
std::string MoveMount(const std::string& source, const std::string& target);
// Makes the tmpfs on `dir` read-only (the mounts below it keep their flags).
std::string RemountReadOnly(const std::string& dir, unsigned long extra_flags);
// Makes the mount on `dir` read-only, not its filesystem: another mount of
// the same tmpfs (a bind mount) stays writable.
std::string RemountMountReadOnly(const std::string& dir, unsigned long extra_flags);
// An empty regular file at `path` with the /dev/null character device bound
// onto it: a character device anyone can open read-write, even where
// mknod is not allowed (user namespaces).
std::string BindDevNull(const std::string& path);
// Writes the rendered /sys/class/infiniband tree into the tmpfs on `dir`
// and makes it read-only, as sysfs is.
std::string FillSysfs(const std::string& dir, const std::vector<TreeNode>& tree);

// True if `path` is a directory (following symlinks).
bool IsDir(const std::string& path);
// True if `path` exists (not following a final symlink).
bool Exists(const std::string& path);

}  // namespace softrnic::tools
