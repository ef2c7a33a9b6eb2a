// The values of a rule's match that are words or addresses rather than
// quantities (quantity.h): direction, peer address, packet class. Shared by
// the TOML and one-line readers so both accept and refuse the same text.
//
// Each returns false with *error saying what is wrong and what was
// expected (no location: the reader adds that).
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "faults/scenario.h"

namespace softrnic::faults {

// "out", "in" or "both".
bool ParseDirection(std::string_view text, Direction* direction, std::string* error);

// An IPv4 address (stored v4-mapped, ::ffff:a.b.c.d, as scenario.h's Match
// keeps peers) or an IPv6 one, without a zone (%eth0): a peer is matched
// by address only.
bool ParsePeer(std::string_view text, std::array<uint8_t, 16>* address, std::string* error);

// One class name (requests, acks, naks, rnr-naks, read-responses, cnps, cm)
// as its PacketClass bit.
bool ParseClassName(std::string_view text, uint16_t* bit, std::string* error);

}  // namespace softrnic::faults
