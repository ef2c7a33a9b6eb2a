#include "transport/address.h"

#include <arpa/inet.h>

namespace softrnic::transport {

std::string Gid::ToString() const {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, raw.data(), text, sizeof(text));
  return text;
}

}  // namespace softrnic::transport
