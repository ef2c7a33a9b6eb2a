// Identifiers an attacker could use against softrnic (memory keys, QPNs,
// initial PSNs, CM comm IDs and transaction IDs, ephemeral ports) come from
// the kernel's CSPRNG and nowhere else: not std::mt19937 (624 outputs give its
// whole state away), not pids, addresses or clocks. docs/security.md.
//
// Every draw is one getrandom(2) call (~0.3 us): identifiers are made on
// control paths (registration, QP and connection setup), never per packet, and
// a per-process buffer would hand the same values to both sides of a fork().
#pragma once

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace softrnic {

// Fills `out` with `len` bytes from the kernel CSPRNG. getrandom() blocks
// only until the pool is first initialised at boot; on a kernel without it
// (ENOSYS: before 3.17) /dev/urandom is read instead. If neither works the
// process stops: a guessable key is worse than no key.
inline void SecureRandomFill(void* out, size_t len) {
  auto* p = static_cast<unsigned char*>(out);
  size_t done = 0;
  while (done < len) {
    const ssize_t n = getrandom(p + done, len - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  if (done == len) return;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  while (fd >= 0 && done < len) {
    const ssize_t n = read(fd, p + done, len - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  if (fd >= 0) close(fd);
  if (done == len) return;
  std::fputs("softrnic: no kernel randomness (getrandom and /dev/urandom failed); refusing to make guessable keys\n",
             stderr);
  std::abort();
}

inline uint32_t SecureRandom32() {
  uint32_t v = 0;
  SecureRandomFill(&v, sizeof(v));
  return v;
}

inline uint64_t SecureRandom64() {
  uint64_t v = 0;
  SecureRandomFill(&v, sizeof(v));
  return v;
}

// A uniformly distributed value in [0, bound) (bound > 0), without the modulo
// bias of `SecureRandom32() % bound`.
inline uint32_t SecureRandomBelow(uint32_t bound) {
  const uint32_t limit = UINT32_MAX - UINT32_MAX % bound;
  for (;;) {
    const uint32_t v = SecureRandom32();
    if (v < limit) return v % bound;
  }
}

}  // namespace softrnic
