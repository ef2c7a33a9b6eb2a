// libFuzzer target: the pcapng reader `softrnic capture --merge` runs on
// files a user names (wire::pcapng::Parse, src/wire/pcapng.cc), which may
// be truncated (a process killed while writing) or made by anyone.
//
// Properties checked (abort on violation):
//  - parsing is deterministic;
//  - every packet names an interface the file declared;
//  - writing what was parsed (one section, its interfaces and packets, in
//    the writer's format) and parsing that gives the same interfaces and
//    packets (names, link types, timestamps, frames, directions, comments).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "wire/pcapng.h"

namespace {

using namespace softrnic::wire::pcapng;

void Check(bool ok) {
  if (!ok) std::abort();
}

bool SamePackets(const File& a, const File& b) {
  if (a.packets.size() != b.packets.size()) return false;
  for (size_t i = 0; i < a.packets.size(); ++i) {
    const Packet& x = a.packets[i];
    const Packet& y = b.packets[i];
    if (x.interface_id != y.interface_id || x.timestamp_ns != y.timestamp_ns ||
        x.original_length != y.original_length || x.frame != y.frame ||
        x.direction != y.direction || x.comment != y.comment)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string error;
  const std::span<const uint8_t> bytes(data, size);
  const auto first = Parse(bytes, &error);
  const auto second = Parse(bytes, &error);
  Check(first.has_value() == second.has_value());
  if (!first) return 0;
  Check(SamePackets(*first, *second));
  for (const Packet& p : first->packets) Check(p.interface_id < first->interfaces.size());
  // Round trip through the writer. Option values longer than the writer
  // keeps (0xFFF0 bytes) cannot occur: an option length is 16 bits.
  std::vector<uint8_t> out;
  AppendSectionHeader("fuzz", &out);
  for (const Interface& i : first->interfaces) AppendInterface(i.name, i.description, &out);
  for (const Packet& p : first->packets) {
    PacketRecord r;
    r.interface_id = p.interface_id;
    r.timestamp_ns = p.timestamp_ns;
    r.original_length = p.original_length;
    r.direction = p.direction;
    r.comment = p.comment;
    AppendPacket(r, p.frame, &out);
  }
  const auto again = Parse(out, &error);
  Check(again.has_value());
  Check(again->interfaces.size() == first->interfaces.size());
  for (size_t i = 0; i < first->interfaces.size(); ++i)
    Check(again->interfaces[i].name == first->interfaces[i].name &&
          again->interfaces[i].description == first->interfaces[i].description &&
          again->interfaces[i].link_type == kLinkTypeEthernet);
  Check(SamePackets(*first, *again));
  return 0;
}
