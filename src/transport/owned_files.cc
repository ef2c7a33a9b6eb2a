#include "transport/owned_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "common/secure_random.h"
#include "log/log.h"

namespace softrnic::transport {

OwnedDir::~OwnedDir() {
  if (fd_ >= 0) close(fd_);
}

OwnedDir::OwnedDir(OwnedDir&& other) noexcept : fd_(other.fd_), why_(std::move(other.why_)) {
  other.fd_ = -1;
}

OwnedDir& OwnedDir::operator=(OwnedDir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    why_ = std::move(other.why_);
    other.fd_ = -1;
  }
  return *this;
}

OwnedDir OwnedDir::Open(const std::string& path, bool create, bool private_dir) {
  OwnedDir dir;
  // mkdir never follows a symlink at the last component (EEXIST instead);
  // whatever exists there is judged by the checks below, not trusted.
  if (create && mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    dir.why_ = path + ": mkdir: " + std::strerror(errno);
    return dir;
  }
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    dir.why_ = path + ": " + (errno == ELOOP || errno == ENOTDIR ? "not a directory (a symlink?)"
                                                                  : std::strerror(errno));
    return dir;
  }
  struct stat st;
  const uid_t me = geteuid();
  const mode_t forbidden = private_dir ? mode_t(S_IRWXG | S_IRWXO) : mode_t(S_IWGRP | S_IWOTH);
  if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    dir.why_ = path + ": not a directory";
  } else if (st.st_uid != me) {
    dir.why_ = path + ": owned by uid " + std::to_string(st.st_uid) + ", not by us (uid " +
               std::to_string(me) + "): another user created it";
  } else if ((st.st_mode & forbidden) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    dir.why_ = path + ": mode " + mode + " lets other users in";
  } else {
    dir.fd_ = fd;
    return dir;
  }
  close(fd);
  return dir;
}

OwnedDir OpenPrivateDirReclaiming(const std::string& path, bool create) {
  OwnedDir dir = OwnedDir::Open(path, create, /*private_dir=*/true);
  struct stat st;
  if (dir.ok() || geteuid() != 0 || lstat(path.c_str(), &st) != 0) return dir;
  const std::string aside = UnpredictableName(path + ".refused.");
  if (rename(path.c_str(), aside.c_str()) != 0) return dir;
  SOFTRNIC_LOG(kWarn, "%s; moved it aside to %s", dir.why().c_str(), aside.c_str());
  return OwnedDir::Open(path, create, /*private_dir=*/true);
}

std::optional<std::string> ReadRegularFileAt(int dirfd, const std::string& name, size_t max_bytes,
                                             FileFacts* facts) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  // O_NOCTTY: a terminal device never becomes our controlling terminal.
  const int fd = openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
      uint64_t(st.st_size) > max_bytes) {
    close(fd);
    return std::nullopt;
  }
  if (facts != nullptr) {
    facts->owner = st.st_uid;
    facts->size = st.st_size;
  }
  // Sized by fstat (callers scan directories of small files: no cap-sized
  // buffer per file); one byte past the cap tells a file that grew after
  // fstat from one that fits: it is refused too.
  std::string data;
  size_t done = 0;
  while (done <= max_bytes) {
    if (data.size() == done) data.resize(std::min(max_bytes + 1, std::max<size_t>(2 * done, size_t(st.st_size) + 1)));
    const ssize_t n = read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  close(fd);
  if (done > max_bytes) return std::nullopt;
  data.resize(done);
  return data;
}

int WriteNewFileAt(int dirfd, const std::string& name, std::string_view data, mode_t mode) {
  const int fd = openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return errno;
  size_t done = 0;
  int rc = 0;
  while (done < data.size()) {
    const ssize_t w = write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      rc = w < 0 ? errno : EIO;
      break;
    }
    done += size_t(w);
  }
  // The umask may have narrowed `mode` at creation; fchmod (on the fd we
  // created, never by path) sets exactly what the caller asked for.
  if (rc == 0 && fchmod(fd, mode) != 0) rc = errno;
  if (close(fd) != 0 && rc == 0) rc = errno;
  if (rc != 0) unlinkat(dirfd, name.c_str(), 0);
  return rc;
}

std::string UnpredictableName(std::string_view prefix) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(SecureRandom64()));
  return std::string(prefix) + hex;
}

}  // namespace softrnic::transport
