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
  if (pad > payload_and_pad) return ParseError::kBadPad;
  if (!info.has(kHasPayload) && payload_and_pad != 0) return ParseError::kBadPad;
  out->data = data;
  out->length = length;
  out->info = &info;
  out->payload = data + info.header_length;
  out->payload_length = static_cast<uint32_t>(payload_and_pad - pad);
  return ParseError::kOk;
}

}  // namespace softrnic::wire
