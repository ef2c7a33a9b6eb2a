#include "wire/packet.h"

namespace softrnic::wire {

std::string_view ParseErrorName(ParseError e) {
  switch (e) {
    case ParseError::kOk: return "ok";
    case ParseError::kTooShort: return "too_short";
    case ParseError::kUnknownOpcode: return "unknown_opcode";
    case ParseError::kBadTver: return "bad_tver";
    case ParseError::kTruncated: return "truncated";
    case ParseError::kBadPad: return "bad_pad";
  }
  return "unknown";
}

ParseError ParsePacket(const uint8_t* data, size_t length, Packet* out) {
  if (data == nullptr || length < sizeof(Bth) + kIcrcSize) return ParseError::kTooShort;
  std::memcpy(out->bth.b.data(), data, sizeof(Bth));
  const OpcodeInfo& info = GetOpcodeInfo(out->bth.opcode());
  if (!info.valid()) return ParseError::kUnknownOpcode;
  if (out->bth.tver() != 0) return ParseError::kBadTver;
  const size_t body = length - kIcrcSize;
  if (body < info.header_length) return ParseError::kTruncated;
  const size_t payload_and_pad = body - info.header_length;
  const uint8_t pad = out->bth.pad_count();
  // PadCnt exists to bring the payload to a 4-byte multiple (IBA 9.2: the
  // ICRC starts on a 4-byte boundary; in native IB the LRH PktLen counts
  // 4-byte words, so an unaligned packet cannot even be expressed). Every
  // extension header is a multiple of 4 bytes, so payload+pad must be too.
  // Over UDP the length is free-form, so a datagram that is not a multiple
  // of 4 is malformed and would otherwise yield a payload length that does
  // not match what the sender's PadCnt says.
  if (payload_and_pad % 4 != 0) return ParseError::kBadPad;
  if (pad > payload_and_pad) return ParseError::kBadPad;
  // A softrnic SACK (headers.h) is the one ACK that carries bytes after the
  // AETH: a bitmap, a multiple of 4 bytes, no pad, at most kSackMaxBytes.
  const bool sack = out->bth.opcode() == op::kRcAck && out->bth.sr() && payload_and_pad != 0;
  if (sack && (pad != 0 || payload_and_pad > kSackMaxBytes)) return ParseError::kBadPad;
  if (!sack && !info.has(kHasPayload) && payload_and_pad != 0) return ParseError::kBadPad;
  out->data = data;
  out->length = length;
  out->info = &info;
  out->payload = data + info.header_length;
  out->payload_length = static_cast<uint32_t>(payload_and_pad - pad);
  return ParseError::kOk;
}

}  // namespace softrnic::wire
