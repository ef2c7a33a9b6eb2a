#include "wire/pcapng.h"

#include <algorithm>
#include <cstring>

namespace softrnic::wire::pcapng {
namespace {

// Option codes (pcapng 4.2-4.3).
constexpr uint16_t kOptEnd = 0;
constexpr uint16_t kOptComment = 1;
constexpr uint16_t kShbUserApplication = 4;
constexpr uint16_t kIfName = 2;
constexpr uint16_t kIfDescription = 3;
constexpr uint16_t kIfTsresol = 9;
constexpr uint16_t kEpbFlags = 2;

// Past this a block is refused when reading: larger than any frame softrnic
// writes (a 4 KiB MTU packet) by far, small enough that a hostile length
// cannot make the reader allocate much.
constexpr uint32_t kMaxBlockLength = 1u << 24;

uint32_t Padded(size_t n) { return static_cast<uint32_t>((n + 3) & ~size_t{3}); }

void Put16(std::vector<uint8_t>* out, uint16_t v) {
  out->push_back(static_cast<uint8_t>(v));
  out->push_back(static_cast<uint8_t>(v >> 8));
}
void Put32(std::vector<uint8_t>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void PutBytes(std::vector<uint8_t>* out, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  out->insert(out->end(), p, p + n);
  out->resize(out->size() + (Padded(n) - n), 0);
}
void PutOption(std::vector<uint8_t>* out, uint16_t code, const void* data, size_t n) {
  Put16(out, code);
  Put16(out, static_cast<uint16_t>(n));
  PutBytes(out, data, n);
}
void PutTextOption(std::vector<uint8_t>* out, uint16_t code, std::string_view text) {
  if (text.empty()) return;
  // An option's length field is 16 bits.
  PutOption(out, code, text.data(), std::min<size_t>(text.size(), 0xFFF0));
}

// Opens a block: type and a length placeholder; CloseBlock fills it in.
size_t OpenBlock(std::vector<uint8_t>* out, uint32_t type) {
  const size_t start = out->size();
  Put32(out, type);
  Put32(out, 0);
  return start;
}
void CloseBlock(std::vector<uint8_t>* out, size_t start) {
  const uint32_t total = static_cast<uint32_t>(out->size() - start + 4);
  Put32(out, total);
  std::memcpy(out->data() + start + 4, &total, 4);  // little-endian host (x86-64, arm64)
}

uint16_t Get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t Get32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// Calls f(code, value) for each option in [p, end); false if they overrun.
template <typename F>
bool ForEachOption(const uint8_t* p, const uint8_t* end, F f) {
  while (end - p >= 4) {
    const uint16_t code = Get16(p);
    const uint16_t len = Get16(p + 2);
    p += 4;
    if (code == kOptEnd) return true;
    if (static_cast<size_t>(end - p) < Padded(len)) return false;
    f(code, std::string_view(reinterpret_cast<const char*>(p), len));
    p += Padded(len);
  }
  return p == end;
}

}  // namespace

void AppendSectionHeader(std::string_view application, std::vector<uint8_t>* out) {
  const size_t start = OpenBlock(out, kSectionHeaderBlock);
  Put32(out, kByteOrderMagic);
  Put16(out, 1);  // major version
  Put16(out, 0);  // minor version
  Put32(out, 0xFFFFFFFF);  // section length: not given (-1)
  Put32(out, 0xFFFFFFFF);
  PutTextOption(out, kShbUserApplication, application);
  Put32(out, kOptEnd);
  CloseBlock(out, start);
}

void AppendInterface(std::string_view name, std::string_view description,
                     std::vector<uint8_t>* out) {
  const size_t start = OpenBlock(out, kInterfaceBlock);
  Put16(out, kLinkTypeEthernet);
  Put16(out, 0);  // reserved
  Put32(out, 0);  // snap length: no limit
  PutTextOption(out, kIfName, name);
  PutTextOption(out, kIfDescription, description);
  const uint8_t nanoseconds = 9;
  PutOption(out, kIfTsresol, &nanoseconds, 1);
  Put32(out, kOptEnd);
  CloseBlock(out, start);
}

void AppendPacket(const PacketRecord& r, std::span<const uint8_t> frame,
                  std::vector<uint8_t>* out) {
  const size_t start = OpenBlock(out, kEnhancedPacketBlock);
  Put32(out, r.interface_id);
  Put32(out, static_cast<uint32_t>(r.timestamp_ns >> 32));
  Put32(out, static_cast<uint32_t>(r.timestamp_ns));
  Put32(out, static_cast<uint32_t>(frame.size()));
  Put32(out, r.original_length);
  PutBytes(out, frame.data(), frame.size());
  if (r.direction != Direction::kUnknown) {
    const uint32_t flags = static_cast<uint32_t>(r.direction);
    uint8_t bytes[4];
    std::memcpy(bytes, &flags, 4);
    PutOption(out, kEpbFlags, bytes, 4);
  }
  PutTextOption(out, kOptComment, r.comment);
  Put32(out, kOptEnd);
  CloseBlock(out, start);
}

std::optional<File> Parse(std::span<const uint8_t> bytes, std::string* error, File* prefix) {
  File file;
  // Per interface of the current section: its index in file.interfaces and
  // its timestamp unit as a multiplier (ns per tick) or divisor.
  struct Resolution {
    uint64_t multiply = 1000, divide = 1;
  };
  std::vector<size_t> section_interfaces;
  std::vector<Resolution> resolutions;
  bool in_section = false;
  size_t at = 0;
  auto fail = [&](const char* what) -> std::optional<File> {
    *error = std::string(what) + " at byte " + std::to_string(at);
    if (prefix != nullptr) *prefix = std::move(file);
    return std::nullopt;
  };
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) return fail("truncated block header");
    const uint8_t* b = bytes.data() + at;
    const uint32_t type = Get32(b);
    const uint32_t length = Get32(b + 4);
    if (length < 12 || length % 4 != 0 || length > kMaxBlockLength ||
        length > bytes.size() - at)
      return fail("bad block length");
    if (Get32(b + length - 4) != length) return fail("block lengths disagree");
    const uint8_t* body = b + 8;
    const uint8_t* end = b + length - 4;
    if (type == kSectionHeaderBlock) {
      if (end - body < 16) return fail("short section header");
      if (Get32(body) != kByteOrderMagic) return fail("not a little-endian pcapng section");
      if (Get16(body + 4) != 1) return fail("unknown pcapng major version");
      in_section = true;
      section_interfaces.clear();
      resolutions.clear();
    } else if (!in_section) {
      return fail("no section header");
    } else if (type == kInterfaceBlock) {
      if (end - body < 8) return fail("short interface block");
      Interface iface;
      iface.link_type = Get16(body);
      Resolution res;
      bool ok_resolution = true;
      if (!ForEachOption(body + 8, end, [&](uint16_t code, std::string_view v) {
            if (code == kIfName) iface.name = v;
            if (code == kIfDescription) iface.description = v;
            if (code == kIfTsresol && v.size() == 1) {
              const uint8_t t = static_cast<uint8_t>(v[0]);
              // 10^-t seconds; binary (bit 7) and finer than ns are refused.
              if (t & 0x80 || t > 9) {
                ok_resolution = false;
              } else {
                res.multiply = 1;
                for (int i = t; i < 9; ++i) res.multiply *= 10;
              }
            }
          }))
        return fail("bad interface options");
      if (!ok_resolution) return fail("unsupported timestamp resolution");
      section_interfaces.push_back(file.interfaces.size());
      resolutions.push_back(res);
      file.interfaces.push_back(std::move(iface));
    } else if (type == kEnhancedPacketBlock) {
      if (end - body < 20) return fail("short packet block");
      const uint32_t iface = Get32(body);
      if (iface >= section_interfaces.size()) return fail("packet of an undeclared interface");
      Packet p;
      p.interface_id = static_cast<uint32_t>(section_interfaces[iface]);
      const uint64_t ticks = uint64_t{Get32(body + 4)} << 32 | Get32(body + 8);
      p.timestamp_ns = ticks * resolutions[iface].multiply / resolutions[iface].divide;
      const uint32_t captured = Get32(body + 12);
      p.original_length = Get32(body + 16);
      const uint8_t* data = body + 20;
      if (static_cast<size_t>(end - data) < Padded(captured)) return fail("packet overruns block");
      p.frame.assign(data, data + captured);
      if (!ForEachOption(data + Padded(captured), end, [&](uint16_t code, std::string_view v) {
            if (code == kEpbFlags && v.size() == 4)
              p.direction = static_cast<Direction>(static_cast<uint8_t>(v[0]) & 3);
            if (code == kOptComment) p.comment = v;
          }))
        return fail("bad packet options");
      file.packets.push_back(std::move(p));
    }
    at += length;
  }
  if (!in_section) return fail("empty file");
  return file;
}

}  // namespace softrnic::wire::pcapng
