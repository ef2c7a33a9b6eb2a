#include "faults/rule_values.h"

#include <arpa/inet.h>

#include <cstring>
#include <utility>

#include "faults/quantity.h"

namespace softrnic::faults {
namespace {

constexpr std::pair<std::string_view, uint16_t> kClassNames[] = {
    {"requests", kRequests}, {"acks", kAcks},   {"naks", kNaks},
    {"rnr-naks", kRnrNaks},  {"read-responses", kReadResponses},
    {"cnps", kCnps},         {"cm", kCmMads},
};

}  // namespace

bool ParseDirection(std::string_view text, Direction* direction, std::string* error) {
  if (text == "out") *direction = Direction::kOut;
  else if (text == "in") *direction = Direction::kIn;
  else if (text == "both") *direction = Direction::kBoth;
  else {
    *error = Quoted(text) + " is not a direction: expected out, in or both";
    return false;
  }
  return true;
}

bool ParsePeer(std::string_view text, std::array<uint8_t, 16>* address, std::string* error) {
  // inet_pton needs a NUL-terminated string; INET6_ADDRSTRLEN bounds any
  // valid text, so a longer one is refused before copying.
  char buffer[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  in6_addr v6{};
  if (text.size() < sizeof(buffer) && text.find('\0') == text.npos) {
    std::memcpy(buffer, text.data(), text.size());
    if (inet_pton(AF_INET, buffer, &v4) == 1) {
      *address = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
      std::memcpy(address->data() + 12, &v4, 4);
      return true;
    }
    if (inet_pton(AF_INET6, buffer, &v6) == 1) {
      std::memcpy(address->data(), &v6, 16);
      return true;
    }
  }
  *error = Quoted(text) + " is not an address: expected an IPv4 address (10.0.0.2) or an IPv6 one "
           "(fd00::2) without a zone";
  return false;
}

bool ParseClassName(std::string_view text, uint16_t* bit, std::string* error) {
  for (const auto& [name, value] : kClassNames) {
    if (name == text) {
      *bit = value;
      return true;
    }
  }
  std::string names;
  for (const auto& [name, value] : kClassNames) names += (names.empty() ? "" : ", ") + std::string(name);
  *error = Quoted(text) + " is not a packet class: expected " + names;
  return false;
}

}  // namespace softrnic::faults
