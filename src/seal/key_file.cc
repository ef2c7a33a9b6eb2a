#include "seal/key_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace softrnic::seal {

std::shared_ptr<const PreSharedKey> LoadKeyFile(const std::string& path, std::string* error) {
  const auto fail = [&](const std::string& why) -> std::shared_ptr<const PreSharedKey> {
    *error = "sealed RC key file " + path + ": " + why;
    return nullptr;
  };
  if (path.empty()) return fail("no path");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return fail(std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    return fail(std::strerror(e));
  }
  std::string why;
  if (!S_ISREG(st.st_mode))
    why = "not a regular file";
  else if (st.st_uid != geteuid() && st.st_uid != 0)
    why = "owned by uid " + std::to_string(st.st_uid) + ", not by this user or root";
  else if ((st.st_mode & 077) != 0)
    why = "other users may read or write it (mode " +
          std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
          std::to_string(st.st_mode & 7) + "; chmod 600 it)";
  else if (st.st_size < static_cast<off_t>(kMinKeyFileBytes))
    why = "shorter than " + std::to_string(kMinKeyFileBytes) + " bytes";
  else if (st.st_size > static_cast<off_t>(kMaxKeyFileBytes))
    why = "longer than " + std::to_string(kMaxKeyFileBytes) + " bytes";
  if (!why.empty()) {
    close(fd);
    return fail(why);
  }
  auto key = std::shared_ptr<PreSharedKey>(new PreSharedKey());
  if (!key->page_.ok()) {
    close(fd);
    return fail("no memory kept out of core dumps (mmap/madvise failed)");
  }
  // Read into the protected page only: the secret never sits in a stack
  // or heap buffer.
  size_t got = 0;
  while (got < kMaxKeyFileBytes + 1) {
    const ssize_t n = read(fd, key->page_.data() + got, kMaxKeyFileBytes + 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      close(fd);
      return fail(std::strerror(e));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  // The file may have changed between fstat and read.
  if (got < kMinKeyFileBytes || got > kMaxKeyFileBytes)
    return fail("changed while it was read");
  key->length_ = got;
  return key;
}

}  // namespace softrnic::seal
