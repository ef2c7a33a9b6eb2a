// pcapng (src/wire/pcapng.h): what the writer produces reads back, the block
// layout is the one the format defines (checked byte by byte where the
// format fixes it), and the reader is total on hostile bytes.
#include "wire/pcapng.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace softrnic::wire::pcapng {
namespace {

uint32_t Le32(const std::vector<uint8_t>& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, &b[at], 4);
  return v;
}

std::vector<uint8_t> SampleFile() {
  std::vector<uint8_t> f;
  AppendSectionHeader("softrnic-test", &f);
  AppendInterface("softrnic0", "pid 1 gid ::ffff:10.0.0.1", &f);
  const std::vector<uint8_t> frame = {1, 2, 3, 4, 5};  // length 5: padded to 8
  PacketRecord r;
  r.timestamp_ns = 1'700'000'000'123'456'789ull;
  r.original_length = 5;
  r.direction = Direction::kOutbound;
  r.comment = "rendered";
  AppendPacket(r, frame, &f);
  r.direction = Direction::kInbound;
  r.comment = {};
  r.timestamp_ns += 1;
  AppendPacket(r, frame, &f);
  return f;
}

TEST(Pcapng, BlocksAreLaidOutAsTheFormatSays) {
  const std::vector<uint8_t> f = SampleFile();
  // Section header: type, length, byte-order magic, version 1.0, length -1.
  ASSERT_GE(f.size(), 28u);
  EXPECT_EQ(Le32(f, 0), kSectionHeaderBlock);
  const uint32_t shb = Le32(f, 4);
  EXPECT_EQ(shb % 4, 0u);
  EXPECT_EQ(Le32(f, shb - 4), shb) << "trailing length repeats the leading one";
  EXPECT_EQ(Le32(f, 8), kByteOrderMagic);
  EXPECT_EQ(f[12] | f[13] << 8, 1);
  EXPECT_EQ(Le32(f, 16), 0xFFFFFFFFu);
  // Interface: link type 1 (Ethernet), snap length 0.
  EXPECT_EQ(Le32(f, shb), kInterfaceBlock);
  EXPECT_EQ(f[shb + 8] | f[shb + 9] << 8, kLinkTypeEthernet);
  EXPECT_EQ(Le32(f, shb + 12), 0u);
  // Every block's length is a multiple of 4 and the blocks tile the file.
  size_t at = 0;
  int blocks = 0;
  while (at < f.size()) {
    const uint32_t total = Le32(f, at + 4);
    ASSERT_EQ(total % 4, 0u);
    ASSERT_GE(total, 12u);
    ASSERT_LE(at + total, f.size());
    ASSERT_EQ(Le32(f, at + total - 4), total);
    at += total;
    ++blocks;
  }
  EXPECT_EQ(at, f.size());
  EXPECT_EQ(blocks, 4);
}

TEST(Pcapng, WhatIsWrittenReadsBack) {
  std::string error;
  const auto file = Parse(SampleFile(), &error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->interfaces.size(), 1u);
  EXPECT_EQ(file->interfaces[0].name, "softrnic0");
  EXPECT_EQ(file->interfaces[0].description, "pid 1 gid ::ffff:10.0.0.1");
  EXPECT_EQ(file->interfaces[0].link_type, kLinkTypeEthernet);
  ASSERT_EQ(file->packets.size(), 2u);
  const Packet& p = file->packets[0];
  EXPECT_EQ(p.timestamp_ns, 1'700'000'000'123'456'789ull);
  EXPECT_EQ(p.frame, (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(p.original_length, 5u);
  EXPECT_EQ(p.direction, Direction::kOutbound);
  EXPECT_EQ(p.comment, "rendered");
  EXPECT_EQ(file->packets[1].direction, Direction::kInbound);
  EXPECT_EQ(file->packets[1].comment, "");
  EXPECT_EQ(file->packets[1].timestamp_ns, p.timestamp_ns + 1);
}

TEST(Pcapng, SecondSectionAddsItsInterfaces) {
  std::vector<uint8_t> f = SampleFile();
  const std::vector<uint8_t> again = SampleFile();
  f.insert(f.end(), again.begin(), again.end());
  std::string error;
  const auto file = Parse(f, &error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->interfaces.size(), 2u);
  ASSERT_EQ(file->packets.size(), 4u);
  EXPECT_EQ(file->packets[0].interface_id, 0u);
  EXPECT_EQ(file->packets[3].interface_id, 1u) << "a packet names its own section's interface";
}

TEST(Pcapng, EveryTruncationIsRefusedOrReadsAPrefix) {
  const std::vector<uint8_t> f = SampleFile();
  for (size_t n = 0; n < f.size(); ++n) {
    std::string error;
    const auto file = Parse(std::span(f.data(), n), &error);
    if (file) {
      EXPECT_LE(file->packets.size(), 2u);
    } else {
      EXPECT_FALSE(error.empty()) << "length " << n;
    }
  }
}

TEST(Pcapng, AFileCutShortGivesItsCompleteRecords) {
  const std::vector<uint8_t> f = SampleFile();
  // Cut inside the last packet block: the first packet is complete.
  const size_t cut = f.size() - 10;
  std::string error;
  File prefix;
  EXPECT_FALSE(Parse(std::span(f.data(), cut), &error, &prefix));
  EXPECT_EQ(prefix.interfaces.size(), 1u);
  ASSERT_EQ(prefix.packets.size(), 1u);
  EXPECT_EQ(prefix.packets[0].comment, "rendered");
}

TEST(Pcapng, HostileBlocksAreRefusedWithAReason) {
  std::vector<uint8_t> f = SampleFile();
  const uint32_t shb = Le32(f, 4);
  std::string error;
  // A packet naming an interface that was never declared.
  std::vector<uint8_t> bad = f;
  const uint32_t idb = Le32(bad, shb + 4);
  const size_t epb = shb + idb;
  bad[epb + 8] = 7;
  EXPECT_FALSE(Parse(bad, &error));
  EXPECT_NE(error.find("undeclared interface"), std::string::npos) << error;
  // A captured length past its block.
  bad = f;
  bad[epb + 20] = 0xFF;
  bad[epb + 21] = 0xFF;
  EXPECT_FALSE(Parse(bad, &error));
  // A block length that is not a multiple of 4, and one past the file.
  bad = f;
  bad[shb + 4] += 1;
  EXPECT_FALSE(Parse(bad, &error));
  bad = f;
  bad[shb + 6] = 0x10;
  EXPECT_FALSE(Parse(bad, &error));
  // A big-endian section (softrnic writes and reads little-endian only).
  bad = f;
  std::swap(bad[8], bad[11]);
  std::swap(bad[9], bad[10]);
  EXPECT_FALSE(Parse(bad, &error));
  // Random bytes never crash the reader.
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> junk = f;
    for (int k = 0; k < 4; ++k) junk[rng() % junk.size()] = static_cast<uint8_t>(rng());
    (void)Parse(junk, &error);
  }
}

}  // namespace
}  // namespace softrnic::wire::pcapng
