#include "mounts.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace softrnic::tools {
namespace {

std::string Failed(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

std::string MountTmpfs(const std::string& dir, unsigned long extra_flags) {
  if (mount("softrnic", dir.c_str(), "tmpfs", MS_NOSUID | extra_flags, "mode=0755,size=4m") != 0)
    return Failed("mount a tmpfs on " + dir);
  return "";
}

std::string BindMount(const std::string& source, const std::string& target, bool recursive) {
  if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND | (recursive ? MS_REC : 0), nullptr) !=
      0)
    return Failed("bind-mount " + source + " on " + target);
  return "";
}

std::string MoveMount(const std::string& source, const std::string& target) {
  if (mount(source.c_str(), target.c_str(), nullptr, MS_MOVE, nullptr) != 0)
    return Failed("move the mount " + source + " to " + target);
  return "";
}

std::string RemountReadOnly(const std::string& dir, unsigned long extra_flags) {
  if (mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | extra_flags,
            "mode=0755,size=4m") != 0)
    return Failed("remount " + dir + " read-only");
  return "";
}

std::string RemountMountReadOnly(const std::string& dir, unsigned long extra_flags) {
  if (mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | extra_flags,
            nullptr) != 0)
    return Failed("remount " + dir + " read-only");
  return "";
}

std::string BindDevNull(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return Failed("create " + path);
  close(fd);
  return BindMount("/dev/null", path, false);
}

std::string FillSysfs(const std::string& dir, const std::vector<TreeNode>& tree) {
  if (std::string e = WriteTree(dir, tree); !e.empty()) return e;
  return RemountReadOnly(dir, MS_NOEXEC | MS_NODEV);
}

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

}  // namespace softrnic::tools
