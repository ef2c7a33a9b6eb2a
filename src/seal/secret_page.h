// Secrets (a pre-shared key, a connection's direction keys) live in pages of
// their own that the kernel leaves out of core dumps (MADV_DONTDUMP), that
// are locked in memory where the limit allows (never swapped out), and that
// are wiped before they are unmapped. docs/sealed.md, "Where keys live",
// says what this covers and what it does not (the expanded AES schedules
// are in libgcrypt's cipher handles, on its heap).
//
// Thread-safety: an owner at a time; the bytes are written once, then read.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <openssl/crypto.h>

namespace softrnic::seal {

class SecretPage {
 public:
  SecretPage() {
    const long page = sysconf(_SC_PAGESIZE);
    size_ = page > 0 ? static_cast<size_t>(page) : 4096;
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    // Without MADV_DONTDUMP the page would land in a core file: refuse it.
    if (madvise(p, size_, MADV_DONTDUMP) != 0) {
      munmap(p, size_);
      return;
    }
    // Also out of a fork's child, which has no business with our keys.
    (void)madvise(p, size_, MADV_WIPEONFORK);
    (void)mlock(p, size_);  // best effort: RLIMIT_MEMLOCK may refuse
    bytes_ = static_cast<uint8_t*>(p);
  }
  ~SecretPage() {
    if (bytes_ == nullptr) return;
    OPENSSL_cleanse(bytes_, size_);
    munlock(bytes_, size_);
    munmap(bytes_, size_);
  }
  SecretPage(const SecretPage&) = delete;
  SecretPage& operator=(const SecretPage&) = delete;

  bool ok() const { return bytes_ != nullptr; }
  uint8_t* data() { return bytes_; }
  const uint8_t* data() const { return bytes_; }
  size_t size() const { return size_; }

 private:
  uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
};

}  // namespace softrnic::seal
