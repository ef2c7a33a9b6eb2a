// The BTH opcode table (IBA 9.2.1 table 38 and 9.3): for each opcode, the
// transport service, which extension headers follow the BTH (and where), and
// where the packet sits in a message (first/middle/last/only).
//
// One table drives both packet building and parsing, as in Linux rxe's
// rxe_opcode.c, so the two can never disagree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace softrnic::wire {

// Transport service: the top three bits of the opcode.
enum class Service : uint8_t { kRc = 0, kUc = 1, kRd = 2, kUd = 3, kCnp = 4, kXrc = 5, kInvalid = 0xFF };

namespace op {
// RC
inline constexpr uint8_t kRcSendFirst = 0x00;
inline constexpr uint8_t kRcSendMiddle = 0x01;
inline constexpr uint8_t kRcSendLast = 0x02;
inline constexpr uint8_t kRcSendLastImm = 0x03;
inline constexpr uint8_t kRcSendOnly = 0x04;
inline constexpr uint8_t kRcSendOnlyImm = 0x05;
inline constexpr uint8_t kRcWriteFirst = 0x06;
inline constexpr uint8_t kRcWriteMiddle = 0x07;
inline constexpr uint8_t kRcWriteLast = 0x08;
inline constexpr uint8_t kRcWriteLastImm = 0x09;
inline constexpr uint8_t kRcWriteOnly = 0x0A;
inline constexpr uint8_t kRcWriteOnlyImm = 0x0B;
inline constexpr uint8_t kRcReadRequest = 0x0C;
inline constexpr uint8_t kRcReadResponseFirst = 0x0D;
inline constexpr uint8_t kRcReadResponseMiddle = 0x0E;
inline constexpr uint8_t kRcReadResponseLast = 0x0F;
inline constexpr uint8_t kRcReadResponseOnly = 0x10;
inline constexpr uint8_t kRcAck = 0x11;
inline constexpr uint8_t kRcAtomicAck = 0x12;
inline constexpr uint8_t kRcCompareSwap = 0x13;
inline constexpr uint8_t kRcFetchAdd = 0x14;
inline constexpr uint8_t kRcSendLastInv = 0x16;
inline constexpr uint8_t kRcSendOnlyInv = 0x17;
// IBA 1.5 (as Linux rxe): an 8-byte store as one word, RETH + 8-byte
// payload, acknowledged like an RDMA WRITE. RC only here (no XRC row).
inline constexpr uint8_t kRcAtomicWrite = 0x1D;
// UC
inline constexpr uint8_t kUcSendFirst = 0x20;
inline constexpr uint8_t kUcSendMiddle = 0x21;
inline constexpr uint8_t kUcSendLast = 0x22;
inline constexpr uint8_t kUcSendLastImm = 0x23;
inline constexpr uint8_t kUcSendOnly = 0x24;
inline constexpr uint8_t kUcSendOnlyImm = 0x25;
inline constexpr uint8_t kUcWriteFirst = 0x26;
inline constexpr uint8_t kUcWriteMiddle = 0x27;
inline constexpr uint8_t kUcWriteLast = 0x28;
inline constexpr uint8_t kUcWriteLastImm = 0x29;
inline constexpr uint8_t kUcWriteOnly = 0x2A;
inline constexpr uint8_t kUcWriteOnlyImm = 0x2B;
// UD
inline constexpr uint8_t kUdSendOnly = 0x64;
inline constexpr uint8_t kUdSendOnlyImm = 0x65;
// Congestion Notification Packet (RoCE v2 Annex A17.9.3).
inline constexpr uint8_t kCnp = 0x81;
// XRC (IBA 9.2 table 38, transport prefix 101b): the RC operations with the
// same low five bits (0xA0 SEND_FIRST ... 0xB7 SEND_ONLY_WITH_INVALIDATE);
// every request carries an XRCETH right after the BTH, responses do not.
inline constexpr uint8_t kXrcPrefix = 0xA0;
inline constexpr uint8_t kXrcSendOnly = 0xA4;
inline constexpr uint8_t kXrcAck = 0xB1;
}  // namespace op

// The XRC opcode of an RC one (same operation, XRC transport prefix).
inline constexpr uint8_t XrcOpcode(uint8_t rc_opcode) {
  return static_cast<uint8_t>(op::kXrcPrefix | (rc_opcode & 0x1F));
}

// Flags describing an opcode.
enum OpFlag : uint32_t {
  kHasReth = 1u << 0,
  kHasAeth = 1u << 1,
  kHasAtomicEth = 1u << 2,
  kHasAtomicAckEth = 1u << 3,
  kHasImm = 1u << 4,
  kHasIeth = 1u << 5,
  kHasDeth = 1u << 6,
  kHasPayload = 1u << 7,
  kFirst = 1u << 8,
  kMiddle = 1u << 9,
  kLast = 1u << 10,
  kOnly = kFirst | kLast,
  kIsSend = 1u << 11,
  kIsWrite = 1u << 12,
  kIsReadRequest = 1u << 13,
  kIsReadResponse = 1u << 14,
  kIsAtomic = 1u << 15,
  kIsAck = 1u << 16,      // ACK or ATOMIC ACK
  kIsRequest = 1u << 17,  // travels requester -> responder
  kIsResponse = 1u << 18, // travels responder -> requester
  kIsCnp = 1u << 19,
  kHasXrcEth = 1u << 20,  // XRC requests (XRCETH, IBA 9.3)
  kIsAtomicWrite = 1u << 21,  // ATOMIC WRITE (also kIsWrite: a one-packet WRITE of one word)
  kValid = 1u << 31,
};

struct OpcodeInfo {
  std::string_view name;
  uint32_t flags = 0;
  // Byte offsets from the start of the BTH. 0 means "not present".
  uint8_t deth_offset = 0;
  uint8_t reth_offset = 0;
  uint8_t atomic_eth_offset = 0;
  uint8_t aeth_offset = 0;
  uint8_t atomic_ack_eth_offset = 0;
  uint8_t imm_offset = 0;
  uint8_t ieth_offset = 0;
  uint8_t xrceth_offset = 0;
  // Total bytes of BTH + extension headers; payload starts here.
  uint8_t header_length = 0;

  constexpr bool valid() const { return flags & kValid; }
  constexpr bool has(uint32_t f) const { return (flags & f) == f; }
};

// Table lookup; an unknown opcode yields an entry with valid() == false.
const OpcodeInfo& GetOpcodeInfo(uint8_t opcode);

inline constexpr Service ServiceOf(uint8_t opcode) {
  switch (opcode >> 5) {
    case 0: return Service::kRc;
    case 1: return Service::kUc;
    case 2: return Service::kRd;
    case 3: return Service::kUd;
    case 4: return Service::kCnp;
    case 5: return Service::kXrc;
    default: return Service::kInvalid;
  }
}

// The opcode with the same meaning on RC: XRC opcodes lose their transport
// prefix, every other opcode is returned unchanged. The engine runs XRC QPs
// with RC's requester, responder and completer, so it compares against RC
// opcodes.
inline constexpr uint8_t RcEquivalent(uint8_t opcode) {
  return ServiceOf(opcode) == Service::kXrc ? static_cast<uint8_t>(opcode & 0x1F) : opcode;
}

}  // namespace softrnic::wire
