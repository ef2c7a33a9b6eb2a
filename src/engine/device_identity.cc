#include "engine/device_identity.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
#include <fstream>

#include "common/netns.h"

namespace softrnic::engine {
namespace {

// The first line of `path` without surrounding blanks, or "" if unreadable.
std::string FirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  const auto first = line.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  const auto last = line.find_last_not_of(" \t\r");
  return line.substr(first, last - first + 1);
}

void AppendU64(std::string* s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

HostIdentity CurrentHostIdentity() {
  HostIdentity id;
  id.machine_id = FirstLine("/etc/machine-id");
  if (id.machine_id.empty()) id.machine_id = FirstLine("/proc/sys/kernel/random/boot_id");
  const NetnsIdentity netns = NetnsOfSelf();
  id.netns_dev = netns.dev;
  id.netns_ino = netns.ino;
  return id;
}

uint64_t NodeGuid(const HostIdentity& host, std::string_view device_name) {
  // The message names its purpose and version, so another use of the same
  // key (or a later scheme) never yields the same bytes; the name is
  // length-prefixed so no two (name, namespace) pairs share a message.
  std::string msg = "softrnic node GUID v1";
  AppendU64(&msg, device_name.size());
  msg.append(device_name);
  AppendU64(&msg, host.netns_dev);
  AppendU64(&msg, host.netns_ino);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  // HMAC() with a zero-length key is well defined (the key is zero-padded).
  static const unsigned char kNoKey = 0;
  const void* key = host.machine_id.empty() ? static_cast<const void*>(&kNoKey)
                                            : static_cast<const void*>(host.machine_id.data());
  if (HMAC(EVP_sha256(), key, static_cast<int>(host.machine_id.size()),
           reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &mac_len) ==
          nullptr ||
      mac_len < 8) {
    std::memset(mac, 0, 8);  // no digest (cannot happen with the default provider)
  }
  // EUI-64: byte 0's bit 1 is the U/L bit (1 = locally administered, which
  // no vendor's GUID has) and bit 0 the I/G (group) bit, clear in a node's.
  mac[0] = static_cast<unsigned char>((mac[0] | 0x02) & ~0x01);
  uint64_t guid;  // bytes in wire order: network byte order as stored
  std::memcpy(&guid, mac, 8);
  return guid;
}

}  // namespace softrnic::engine
