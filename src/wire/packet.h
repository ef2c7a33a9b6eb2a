// Parsing a received RoCE v2 UDP payload: BTH, extension headers, payload,
// pad, ICRC. The parser takes (pointer, length) and never reads past length;
// it checks only what the bytes themselves say (known opcode, transport
// version, room for the headers, the pad and the ICRC). Checks that need
// state (QPN, PSN, keys, rights) belong to the engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::wire {

enum class ParseError : uint8_t {
  kOk = 0,
  kTooShort,        // shorter than BTH + ICRC
  kUnknownOpcode,   // not in the opcode table
  kBadTver,         // transport header version is not 0 (IBA 9.2.7)
  kTruncated,       // headers the opcode requires do not fit
  kBadPad,          // payload+pad not a 4-byte multiple, pad count larger than the
                    // payload, or payload/pad bytes on an opcode that carries none
};
std::string_view ParseErrorName(ParseError e);

// A parsed packet: pointers into the caller's buffer, valid while it lives.
struct Packet {
  const uint8_t* data = nullptr;  // start of BTH
  size_t length = 0;              // bytes from BTH through ICRC
  const OpcodeInfo* info = nullptr;
  Bth bth;
  const uint8_t* payload = nullptr;
  uint32_t payload_length = 0;  // without pad and ICRC

  uint8_t opcode() const { return bth.opcode(); }
  // The RC opcode of the same operation (wire::RcEquivalent): what the
  // engine compares against, XRC packets included.
  uint8_t rc_opcode() const { return RcEquivalent(bth.opcode()); }
  template <typename H>
  H Header(uint8_t offset) const {
    H h;
    std::memcpy(h.b.data(), data + offset, sizeof(H));
    return h;
  }
  Reth reth() const { return Header<Reth>(info->reth_offset); }
  Aeth aeth() const { return Header<Aeth>(info->aeth_offset); }
  AtomicEth atomic_eth() const { return Header<AtomicEth>(info->atomic_eth_offset); }
  AtomicAckEth atomic_ack_eth() const { return Header<AtomicAckEth>(info->atomic_ack_eth_offset); }
  ImmDt imm() const { return Header<ImmDt>(info->imm_offset); }
  Ieth ieth() const { return Header<Ieth>(info->ieth_offset); }
  Deth deth() const { return Header<Deth>(info->deth_offset); }
  XrcEth xrceth() const { return Header<XrcEth>(info->xrceth_offset); }
};

// Parses `length` bytes (BTH through ICRC inclusive). ICRC is not verified
// here (it needs the IP header fields): see icrc.h.
ParseError ParsePacket(const uint8_t* data, size_t length, Packet* out);

}  // namespace softrnic::wire
