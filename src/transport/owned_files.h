// Files that softrnic keeps in directories other local users can write to
// (/dev/shm, $SOFTRNIC_STATS_DIR): the open discipline that keeps another
// user from redirecting, replacing, blocking or forging them (security
// review H3, L1, L2, L4; docs/security.md).
//
// - A directory is used only if it is a real directory (lstat-free: opened
//   with O_NOFOLLOW|O_DIRECTORY, then fstat), owned by the effective uid and
//   not writable by group or others. Everything after that is relative to
//   its fd (openat, linkat, unlinkat), so a rename of a path component
//   cannot swap the directory under us.
// - A file is created with O_CREAT|O_EXCL|O_NOFOLLOW (never truncates or
//   follows what somebody planted at the name) and its mode is set at
//   creation: nothing chmods by path.
// - A file is read with O_NOFOLLOW|O_NONBLOCK (a FIFO cannot block the
//   open), accepted only if fstat says it is a regular file, and read only up
//   to a size cap (a sparse multi-GB file cannot exhaust memory).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace softrnic::transport {

// An open directory fd (closed on destruction), or invalid (fd() < 0) with
// why() saying what was wrong with the path.
class OwnedDir {
 public:
  OwnedDir() = default;
  ~OwnedDir();
  OwnedDir(OwnedDir&& other) noexcept;
  OwnedDir& operator=(OwnedDir&& other) noexcept;
  OwnedDir(const OwnedDir&) = delete;
  OwnedDir& operator=(const OwnedDir&) = delete;

  // Opens `path`, creating it with mode 0700 first if it is missing and
  // `create` is set, and keeps it only if it is a directory (not a symlink
  // to one) owned by geteuid() with no group/other write permission.
  // `private_dir` additionally requires no group/other access at all (0700):
  // for state other users must not even read.
  static OwnedDir Open(const std::string& path, bool create, bool private_dir);

  int fd() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  const std::string& why() const { return why_; }

 private:
  int fd_ = -1;
  std::string why_;
};

// OwnedDir::Open(path, create, private_dir=true), except that when `path`
// exists but is refused (another user made it first, or it is a symlink)
// and we are root, it is renamed aside (rename never follows a link) and a
// fresh one made. A non-root user cannot move another user's entry out of
// sticky /dev/shm: the refused directory is returned (not ok()).
OwnedDir OpenPrivateDirReclaiming(const std::string& path, bool create);

// What fstat said about a file that was read.
struct FileFacts {
  uid_t owner = 0;
  off_t size = 0;
};

// Reads `name` in the directory `dirfd` (AT_FDCWD for a plain path): only a
// regular file, opened O_RDONLY|O_NOFOLLOW|O_NONBLOCK, of at most
// `max_bytes`. nullopt for a missing file, a symlink, a FIFO, a device, a
// directory or a larger file. `facts` (if not null) gets its owner and size.
std::optional<std::string> ReadRegularFileAt(int dirfd, const std::string& name, size_t max_bytes,
                                             FileFacts* facts = nullptr);

// Creates `name` in `dirfd` with O_CREAT|O_EXCL|O_NOFOLLOW and `mode`, writes
// `data` and closes it. 0, or the errno (EEXIST if anything, including a
// symlink or a FIFO, already has that name: it is left alone).
int WriteNewFileAt(int dirfd, const std::string& name, std::string_view data, mode_t mode);

// A name no other user can predict: `prefix` + 16 hex digits from the kernel
// CSPRNG (for temporary files that are renamed or linked into place).
std::string UnpredictableName(std::string_view prefix);

}  // namespace softrnic::transport
