// The pre-shared key of sealed RC (SOFTRNIC_SEAL_KEY, docs/sealed.md): a
// file the user makes, e.g. `head -c 32 /dev/urandom > key; chmod 600 key`,
// and gives both ends. Its bytes, all of them, are the secret.
//
// A key file is a local file another user may have planted or loosened, so
// it is refused, with the reason, unless it is a regular file owned by the
// effective user (or root) that no other user can read or write (mode
// & 077 == 0), 32 to 1024 bytes long. It is opened without blocking (a FIFO
// would hang the device) and read once.
//
// Thread-safety: pure function.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "seal/secret_page.h"

namespace softrnic::seal {

inline constexpr size_t kMinKeyFileBytes = 32;
inline constexpr size_t kMaxKeyFileBytes = 1024;  // well inside one SecretPage

class PreSharedKey {
 public:
  std::span<const uint8_t> bytes() const { return {page_.data(), length_}; }

 private:
  friend std::shared_ptr<const PreSharedKey> LoadKeyFile(const std::string&, std::string*);
  SecretPage page_;
  size_t length_ = 0;
};

// The key in `path`, or null with *error saying why.
std::shared_ptr<const PreSharedKey> LoadKeyFile(const std::string& path, std::string* error);

}  // namespace softrnic::seal
