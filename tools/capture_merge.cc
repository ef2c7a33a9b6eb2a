#include "capture_merge.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "wire/roce_frame.h"

namespace softrnic::tools {
namespace {

using wire::pcapng::Direction;

// The frame as both ends of a packet render it: TOS (ECN bits the receiver
// saw) and the IPv4 header checksum over it are zeroed; for IPv6 the traffic
// class (the UDP checksum does not cover it).
std::string SamePacketKey(const std::vector<uint8_t>& frame) {
  std::string key(frame.begin(), frame.end());
  constexpr size_t kTos = 14 + 1, kChecksum = 14 + 10;
  if (key.size() >= wire::kRoceFrameHeaderLengthIpv6 && (uint8_t(key[14]) >> 4) == 6) {
    key[14] = char(uint8_t(key[14]) & 0xF0);
    key[15] = char(uint8_t(key[15]) & 0x0F);
  } else if (key.size() >= wire::kRoceFrameHeaderLength) {
    key[kTos] = 0;
    key[kChecksum] = 0;
    key[kChecksum + 1] = 0;
  }
  return key;
}

struct Ref {
  uint64_t timestamp_ns;
  uint32_t interface_id;  // in the merged file
  const wire::pcapng::Packet* packet;
};

}  // namespace

MergeResult MergeCaptures(const std::vector<wire::pcapng::File>& inputs) {
  MergeResult result;
  wire::pcapng::AppendSectionHeader("softrnic capture", &result.bytes);
  std::unordered_map<std::string, uint64_t> outbound;  // key -> records not yet matched
  for (const auto& file : inputs)
    for (const auto& p : file.packets)
      if (p.direction == Direction::kOutbound) ++outbound[SamePacketKey(p.frame)];
  std::vector<Ref> kept;
  uint32_t base = 0;
  for (const auto& file : inputs) {
    for (const auto& iface : file.interfaces)
      wire::pcapng::AppendInterface(iface.name, iface.description, &result.bytes);
    for (const auto& p : file.packets) {
      if (p.direction == Direction::kInbound) {
        auto it = outbound.find(SamePacketKey(p.frame));
        if (it != outbound.end() && it->second > 0) {
          --it->second;
          ++result.duplicates;
          continue;
        }
      }
      kept.push_back(Ref{p.timestamp_ns, base + p.interface_id, &p});
    }
    base += static_cast<uint32_t>(file.interfaces.size());
  }
  std::stable_sort(kept.begin(), kept.end(),
                   [](const Ref& a, const Ref& b) { return a.timestamp_ns < b.timestamp_ns; });
  for (const Ref& r : kept) {
    wire::pcapng::PacketRecord rec;
    rec.interface_id = r.interface_id;
    rec.timestamp_ns = r.timestamp_ns;
    rec.original_length = r.packet->original_length;
    rec.direction = r.packet->direction;
    rec.comment = r.packet->comment;
    wire::pcapng::AppendPacket(rec, r.packet->frame, &result.bytes);
  }
  result.packets = kept.size();
  return result;
}

}  // namespace softrnic::tools
