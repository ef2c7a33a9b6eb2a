// pcapng, the capture file format Wireshark and tshark read natively
// (draft-ietf-opsawg-pcapng, "PCAP Now Generic"): what `softrnic capture`
// writes (engine/observe/capture.h) and merges (tools/softrnic_capture.cc).
//
// Only the blocks softrnic needs, little-endian: a Section Header Block, one
// Interface Description Block per captured device (link type Ethernet,
// nanosecond timestamps), and Enhanced Packet Blocks carrying the direction
// (epb_flags: inbound or outbound) and an optional comment. Every block is
// `type, total length, body, total length` with the body padded to 4 bytes;
// options are `code, length, value` padded to 4 bytes, ended by code 0.
//
// Thread-safety: pure functions over caller-owned buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace softrnic::wire::pcapng {

inline constexpr uint32_t kSectionHeaderBlock = 0x0A0D0D0A;
inline constexpr uint32_t kInterfaceBlock = 1;
inline constexpr uint32_t kEnhancedPacketBlock = 6;
inline constexpr uint32_t kByteOrderMagic = 0x1A2B3C4D;
inline constexpr uint16_t kLinkTypeEthernet = 1;

// epb_flags bits 0-1 (pcapng 4.3.1).
enum class Direction : uint8_t { kUnknown = 0, kInbound = 1, kOutbound = 2 };

// Appends a Section Header Block naming the writing application.
void AppendSectionHeader(std::string_view application, std::vector<uint8_t>* out);
// Appends an Interface Description Block: Ethernet, no snap length limit,
// timestamps in nanoseconds (if_tsresol 9).
void AppendInterface(std::string_view name, std::string_view description,
                     std::vector<uint8_t>* out);

struct PacketRecord {
  uint32_t interface_id = 0;
  uint64_t timestamp_ns = 0;  // since the Unix epoch (if_tsresol 9)
  uint32_t original_length = 0;
  Direction direction = Direction::kUnknown;
  std::string_view comment;  // empty: none
};
// Appends an Enhanced Packet Block holding `frame` (the first
// record.original_length bytes of the packet, or fewer when snapped).
void AppendPacket(const PacketRecord& record, std::span<const uint8_t> frame,
                  std::vector<uint8_t>* out);

// --- Reading (tools: merging captures) ---

struct Interface {
  std::string name;
  std::string description;
  uint16_t link_type = 0;
};
struct Packet {
  uint32_t interface_id = 0;  // index into File::interfaces
  uint64_t timestamp_ns = 0;
  uint32_t original_length = 0;
  Direction direction = Direction::kUnknown;
  std::string comment;
  std::vector<uint8_t> frame;
};
struct File {
  std::vector<Interface> interfaces;
  std::vector<Packet> packets;
};

// Parses a little-endian pcapng file of one or more sections (each
// section's interfaces are appended; a packet names the interface of its
// own section). Block types it does not know are skipped. Total: any bytes
// give a File or an error (*error says where the file stops making sense),
// never a crash. Timestamps are read at the interface's resolution if it is
// 10^-n seconds (n <= 9; microseconds when the option is absent) and
// returned in nanoseconds. On an error, `prefix` (if not null) receives
// every block before the one that does not make sense: a file cut short (a
// process killed while writing it) still gives its complete records.
std::optional<File> Parse(std::span<const uint8_t> bytes, std::string* error,
                          File* prefix = nullptr);

}  // namespace softrnic::wire::pcapng
