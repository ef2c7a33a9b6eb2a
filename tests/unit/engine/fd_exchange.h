// Whole-message reads and writes on a socket or pipe, for the tests whose
// processes exchange QP numbers and keys before they connect (the
// multi-process engine tests).
#pragma once

#include <unistd.h>

#include <cstddef>

namespace softrnic::engine::testing {

// Writes all n bytes; false if the descriptor fails or closes first.
inline bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t r = write(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Reads exactly n bytes; false if the descriptor fails or closes first.
inline bool ReadAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace softrnic::engine::testing
