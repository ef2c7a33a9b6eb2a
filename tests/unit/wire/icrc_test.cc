// ICRC (src/wire/icrc.h), IBA Vol 1 Annex A17.8 (RoCE v2 "Invariant CRC").
//
// Anchors, from most to least independent:
//  1. A CNP captured on a Mellanox ConnectX-4 Lx, published in scapy's
//     test/contrib/roce.uts ("RoCE CNP captured on ConnectX-4 Lx"): hardware
//     computed ICRC bytes 82 fd 00 2a.
//  2. The UC SEND ONLY example of the same file, whose ICRC 0x78f353f3 scapy
//     computes (independent code; exercises MigReq and PadCnt).
//  3. An IPv6 packet whose ICRC was computed with Python's zlib.crc32 from a
//     full IPv6 header masked as Linux rxe_icrc.c does (scapy 2.5 cannot do
//     IPv6 ICRC: its BTH.compute_icrc returns 0 for IPv6).
//  4. A reference implementation in this file that masks a complete, real
//     IP/UDP header (not the synthesised one icrc.cc builds) and runs a
//     bit-at-a-time CRC-32.
#include "wire/icrc.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "wire/byte_order.h"
#include "wire/headers.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace softrnic::wire {
namespace {

// Bitwise CRC-32 (IEEE 802.3, reflected poly 0xEDB88320, init and final
// xor 0xFFFFFFFF): the textbook definition, sharing nothing with ISA-L.
uint32_t RefCrc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

uint32_t Crc32Of(const std::string& s) {
  return Crc32(0, reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// Known CRC-32 check values (the "check" value of the CRC-32/ISO-HDLC
// catalogue entry, and zlib.crc32 results).
TEST(Crc32Test, KnownValues) {
  EXPECT_EQ(Crc32Of("123456789"), 0xCBF43926u);
  EXPECT_EQ(Crc32Of(""), 0x00000000u);
  EXPECT_EQ(Crc32Of("a"), 0xE8B7BE43u);
  EXPECT_EQ(Crc32Of("abc"), 0x352441C2u);
  EXPECT_EQ(Crc32Of("The quick brown fox jumps over the lazy dog"), 0x414FA339u);
}

// Crc32(crc, ...) continues a finalised CRC like zlib's crc32(): ICRC is
// computed in pieces (pseudo header, masked BTH, rest), so this must hold.
TEST(Crc32Test, ChainsLikeZlib) {
  const std::string s = "123456789";
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  for (size_t split = 0; split <= s.size(); ++split) {
    const uint32_t first = Crc32(0, p, split);
    EXPECT_EQ(Crc32(first, p + split, s.size() - split), 0xCBF43926u) << split;
  }
}

// ISA-L has vector code paths by length and alignment; compare against the
// bitwise reference over many lengths and start offsets.
TEST(Crc32Test, MatchesBitwiseReference) {
  std::mt19937 rng(1234);
  std::vector<uint8_t> buf(9000 + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 300; ++n) lengths.push_back(n);
  for (size_t n : {511u, 512u, 1023u, 1024u, 1500u, 4095u, 4096u, 4097u, 8192u, 9000u}) {
    lengths.push_back(n);
  }
  for (size_t n : lengths) {
    for (size_t off : {0u, 1u, 3u, 7u}) {
      ASSERT_EQ(Crc32(0, buf.data() + off, n), RefCrc32(buf.data() + off, n))
          << "len " << n << " off " << off;
    }
  }
}

// Every kernel Crc32 may use (SOFTRNIC_CRC) computes the same function.
TEST(Crc32Test, EveryKernelMatchesBitwiseReference) {
  std::mt19937 rng(99);
  std::vector<uint8_t> buf(9000 + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  int checked = 0;
  for (Crc32Kernel k : {Crc32Kernel::kIsal, Crc32Kernel::kSse, Crc32Kernel::kAvx}) {
    if (!Crc32KernelSupported(k)) continue;
    ++checked;
    for (size_t n : {0u, 1u, 15u, 16u, 17u, 63u, 64u, 255u, 256u, 257u, 1024u, 1500u, 4096u,
                     4100u, 9000u}) {
      for (size_t off : {0u, 1u, 5u}) {
        ASSERT_EQ(Crc32With(k, 0, buf.data() + off, n), RefCrc32(buf.data() + off, n))
            << "kernel " << int(k) << " len " << n << " off " << off;
        // Chained from a non-zero start too (the ICRC is computed in pieces).
        const uint32_t first = Crc32With(k, 0, buf.data(), 7);
        ASSERT_EQ(Crc32With(k, first, buf.data() + 7, n), RefCrc32(buf.data(), n + 7));
      }
    }
  }
  EXPECT_GE(checked, 1);
  EXPECT_TRUE(Crc32KernelSupported(ActiveCrc32Kernel()));
}

// The ICRC of a packet in pieces (head, payload, zero pad) equals that of
// the same bytes in one buffer, for every split and pad.
TEST(IcrcPartsTest, MatchesTheWholePacket) {
  std::mt19937 rng(7);
  IpUdpFields ip;
  ip.src_ip[0] = 10;
  ip.dst_ip[0] = 10;
  ip.dst_ip[3] = 2;
  ip.src_port = 49152;
  ip.ipv4_id = 3;
  for (size_t head : {12u, 28u, 40u}) {
    for (size_t payload : {0u, 1u, 511u, 1024u, 4096u}) {
      const size_t pad = (4 - (payload & 3)) & 3;
      std::vector<uint8_t> whole(head + payload + pad);
      for (auto& b : whole) b = static_cast<uint8_t>(rng());
      std::fill(whole.end() - static_cast<long>(pad), whole.end(), 0);
      const std::vector<uint8_t> h(whole.begin(), whole.begin() + static_cast<long>(head));
      const std::vector<uint8_t> p(whole.begin() + static_cast<long>(head),
                                   whole.begin() + static_cast<long>(head + payload));
      EXPECT_EQ(ComputeIcrcParts(ip, h.data(), head, p.data(), payload, pad),
                ComputeIcrc(ip, whole.data(), whole.size()))
          << "head " << head << " payload " << payload;
    }
  }
  const uint8_t bth[12] = {};
  EXPECT_EQ(ComputeIcrcParts(ip, bth, 11, nullptr, 0, 0), 0u);  // shorter than a BTH
  EXPECT_EQ(ComputeIcrcParts(ip, bth, 12, nullptr, 0, 4), 0u);  // pad above 3
}

// ---------------------------------------------------------------------------
// Helpers to take a whole frame apart.

std::vector<uint8_t> FromHex(const char* hex) {
  std::vector<uint8_t> out;
  int hi = -1;
  for (const char* c = hex; *c; ++c) {
    int v;
    if (*c >= '0' && *c <= '9') v = *c - '0';
    else if (*c >= 'a' && *c <= 'f') v = *c - 'a' + 10;
    else if (*c >= 'A' && *c <= 'F') v = *c - 'A' + 10;
    else continue;
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<uint8_t>(hi << 4 | v));
      hi = -1;
    }
  }
  return out;
}

// Reads IpUdpFields out of an IPv4 or IPv6 header followed by UDP, the way a
// receiver fills them from the datagram it got. Returns the UDP payload offset.
size_t FieldsFromIp(const std::vector<uint8_t>& ip_pkt, IpUdpFields* f) {
  *f = IpUdpFields{};
  size_t udp;
  if ((ip_pkt[0] >> 4) == 4) {
    f->ipv6 = false;
    std::memcpy(f->src_ip, &ip_pkt[12], 4);
    std::memcpy(f->dst_ip, &ip_pkt[16], 4);
    f->ipv4_id = LoadBe16(&ip_pkt[4]);
    f->ipv4_flags_frag = LoadBe16(&ip_pkt[6]);
    udp = (ip_pkt[0] & 0xF) * 4u;
  } else {
    f->ipv6 = true;
    std::memcpy(f->src_ip, &ip_pkt[8], 16);
    std::memcpy(f->dst_ip, &ip_pkt[24], 16);
    udp = 40;
  }
  f->src_port = LoadBe16(&ip_pkt[udp]);
  f->dst_port = LoadBe16(&ip_pkt[udp + 2]);
  return udp + 8;
}

// Reference ICRC straight from A17.8: take the real IP and UDP headers,
// overwrite the variant fields with ones, prepend 8 bytes of ones for the
// LRH, mask BTH byte 4, CRC everything up to the ICRC.
uint32_t RefIcrcFromRealHeaders(std::vector<uint8_t> ip_pkt) {
  size_t udp;
  if ((ip_pkt[0] >> 4) == 4) {
    ip_pkt[1] = 0xFF;                     // TOS (DSCP+ECN)
    ip_pkt[8] = 0xFF;                     // TTL
    ip_pkt[10] = ip_pkt[11] = 0xFF;       // header checksum
    udp = (ip_pkt[0] & 0xF) * 4u;
  } else {
    ip_pkt[0] |= 0x0F;                    // traffic class (high nibble)
    ip_pkt[1] = ip_pkt[2] = ip_pkt[3] = 0xFF;  // traffic class low nibble + flow label
    ip_pkt[7] = 0xFF;                     // hop limit
    udp = 40;
  }
  ip_pkt[udp + 6] = ip_pkt[udp + 7] = 0xFF;  // UDP checksum
  ip_pkt[udp + 8 + 4] = 0xFF;                // BTH FECN/BECN/resv6
  std::vector<uint8_t> all(8, 0xFF);
  all.insert(all.end(), ip_pkt.begin(), ip_pkt.end() - 4);
  return RefCrc32(all.data(), all.size());
}

uint32_t StoredIcrc(const uint8_t* p) {
  // A17.8: the ICRC goes on the wire least-significant byte first (as the
  // Ethernet FCS does), i.e. the CRC register value in little-endian order.
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// scapy test/contrib/roce.uts, "RoCE CNP captured on ConnectX-4 Lx".
// Ethernet (14) | IPv4 TOS 0xc2 ID 0x718c DF TTL 64 10.0.17.1 -> 10.0.18.1 |
// UDP 0 -> 4791 len 40 | BTH CNP becn dqpn 0x118 | 16 reserved | ICRC.
constexpr const char* kCx4CnpFrame =
    "e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2"
    "003c 718c 4000 4011 9161 0a00 1101 0a00"
    "1201 0000 12b7 0028 0000 8100 ffff 4000"
    "0118 0000 0000 0000 0000 0000 0000 0000"
    "0000 0000 0000 82fd 002a";

// scapy test/contrib/roce.uts, "RoCE layer": UC_SEND_ONLY, MigReq, PadCnt 2,
// IPv4 TOS 1, ID 1144, DF; ICRC 0x78f353f3 as scapy computes it.
constexpr const char* kUcSendFrame =
    "248a07a8fa22248a07a8fa22080045010040047840004011b4d5c0a80007c0a80007"
    "c00012b7002caca22460ffff000000d300cf17104630818be28935d90e9a95505401"
    "be885e50000078f353f3";

// IPv6 2001:db8::1 -> 2001:db8::2, TC 0x02, flow 0x12345, hop limit 64,
// UDP 0xc000 -> 4791 (checksum 0x1234: masked, so any value), RC SEND ONLY
// AckReq dqpn 0x11 psn 0x100, payload "hello world!". ICRC computed with
// Python zlib.crc32 over the rxe-style masked header: 0x9e4ba7fc.
constexpr const char* kIpv6SendPacket =
    "6021234500241140"
    "20010db8000000000000000000000001"
    "20010db8000000000000000000000002"
    "c00012b700241234"
    "0400ffff0000001180000100"
    "68656c6c6f20776f726c6421"
    "fca74b9e";

struct Vector {
  const char* name;
  const char* hex;
  size_t l2_header;  // bytes before the IP header
  uint32_t icrc;
};
const Vector kVectors[] = {
    {"cx4_cnp", kCx4CnpFrame, 14, 0x2a00fd82},  // bytes 82 fd 00 2a
    {"scapy_uc_send_only", kUcSendFrame, 14, 0xf353f378},  // bytes 78 f3 53 f3
    {"ipv6_rc_send_only", kIpv6SendPacket, 0, 0x9e4ba7fc},
};

TEST(IcrcVectorTest, PublicVectorsMatch) {
  for (const Vector& v : kVectors) {
    SCOPED_TRACE(v.name);
    const std::vector<uint8_t> frame = FromHex(v.hex);
    const std::vector<uint8_t> ip(frame.begin() + static_cast<ptrdiff_t>(v.l2_header), frame.end());
    IpUdpFields f;
    const size_t bth = FieldsFromIp(ip, &f);
    ASSERT_EQ(f.dst_port, kRoceV2UdpPort);
    const size_t len = ip.size() - bth;  // BTH .. ICRC inclusive
    // Exact-size copy so ASan flags any read past the ICRC.
    auto pkt = std::make_unique<uint8_t[]>(len);
    std::memcpy(pkt.get(), ip.data() + bth, len);

    EXPECT_EQ(StoredIcrc(pkt.get() + len - 4), v.icrc) << "vector transcription";
    EXPECT_EQ(ComputeIcrc(f, pkt.get(), len - 4), v.icrc);
    EXPECT_EQ(RefIcrcFromRealHeaders(ip), v.icrc) << "reference implementation disagrees";
    EXPECT_TRUE(CheckIcrc(f, pkt.get(), len));

    // AppendIcrc reproduces the wire bytes exactly.
    std::vector<uint8_t> copy(pkt.get(), pkt.get() + len);
    std::memset(copy.data() + len - 4, 0, 4);
    AppendIcrc(f, copy.data(), len);
    EXPECT_EQ(0, std::memcmp(copy.data(), pkt.get(), len));

    // And the packet parses.
    Packet p;
    EXPECT_EQ(ParsePacket(pkt.get(), len, &p), ParseError::kOk);
  }
}

TEST(IcrcVectorTest, Cx4CnpBytesAre82fd002a) {
  const std::vector<uint8_t> frame = FromHex(kCx4CnpFrame);
  const std::vector<uint8_t> ip(frame.begin() + 14, frame.end());
  // This is the IPv4 header the hardware sent: ID 0x718c, DF, TOS 0xc2
  // (DSCP 48, ECN CE... masked anyway), TTL 64. IpUdpFields must be able to
  // express the ID and flags (they are covered by the ICRC).
  IpUdpFields f;
  f.ipv4_id = 0x718c;
  f.ipv4_flags_frag = 0x4000;
  const uint8_t src[4] = {10, 0, 17, 1};
  const uint8_t dst[4] = {10, 0, 18, 1};
  std::memcpy(f.src_ip, src, 4);
  std::memcpy(f.dst_ip, dst, 4);
  f.src_port = 0;
  f.dst_port = 4791;
  const size_t len = 12 + 16 + 4;
  std::array<uint8_t, 32> pkt{};
  std::memcpy(pkt.data(), ip.data() + 28, 28);  // BTH + reserved, not the ICRC
  AppendIcrc(f, pkt.data(), len);
  EXPECT_EQ(pkt[28], 0x82);
  EXPECT_EQ(pkt[29], 0xfd);
  EXPECT_EQ(pkt[30], 0x00);
  EXPECT_EQ(pkt[31], 0x2a);

  Packet p;
  ASSERT_EQ(ParsePacket(pkt.data(), len, &p), ParseError::kOk);
  EXPECT_EQ(p.opcode(), op::kCnp);
  EXPECT_EQ(p.payload_length, 16u);
  EXPECT_TRUE(p.bth.becn());
  EXPECT_EQ(p.bth.dest_qp(), 0x118u);
}

// ---------------------------------------------------------------------------
// Which fields are covered and which are masked (A17.8).

struct Built {
  IpUdpFields f;
  std::vector<uint8_t> pkt;  // BTH .. ICRC
};

Built MakeRcWrite(bool ipv6) {
  Built b;
  b.f.ipv6 = ipv6;
  for (int i = 0; i < 16; ++i) {
    b.f.src_ip[i] = static_cast<uint8_t>(0x10 + i);
    b.f.dst_ip[i] = static_cast<uint8_t>(0x40 + i);
  }
  b.f.src_port = 0xC123;
  b.f.ipv4_id = 0;
  b.f.ipv4_flags_frag = 0x4000;
  const OpcodeInfo& info = GetOpcodeInfo(op::kRcWriteOnly);
  b.pkt.assign(info.header_length + 8 + kIcrcSize, 0);
  Bth bth;
  bth.set_opcode(op::kRcWriteOnly);
  bth.set_pkey(kDefaultPkey);
  bth.set_dest_qp(0x000123);
  bth.set_ack_req(true);
  bth.set_psn(0xABCDEF);
  std::memcpy(b.pkt.data(), bth.b.data(), 12);
  Reth reth;
  reth.set_va(0x7f0000001000);
  reth.set_rkey(0x1234);
  reth.set_dma_length(8);
  std::memcpy(b.pkt.data() + info.reth_offset, reth.b.data(), 16);
  for (int i = 0; i < 8; ++i) b.pkt[info.header_length + i] = static_cast<uint8_t>(i);
  AppendIcrc(b.f, b.pkt.data(), b.pkt.size());
  return b;
}

TEST(IcrcMaskTest, VariantBthBitsDoNotChangeIcrc) {
  for (bool v6 : {false, true}) {
    Built b = MakeRcWrite(v6);
    ASSERT_TRUE(CheckIcrc(b.f, b.pkt.data(), b.pkt.size()));
    // A switch may set FECN/BECN in flight (A17.9): the ICRC must survive.
    for (uint8_t byte4 : {0x80, 0x40, 0xC0, 0x3F, 0xFF}) {
      std::vector<uint8_t> m = b.pkt;
      m[4] = byte4;
      EXPECT_TRUE(CheckIcrc(b.f, m.data(), m.size())) << int{byte4};
    }
  }
}

TEST(IcrcMaskTest, InvariantFieldsAreCovered) {
  for (bool v6 : {false, true}) {
    SCOPED_TRACE(v6 ? "ipv6" : "ipv4");
    const Built b = MakeRcWrite(v6);
    // Every byte of the transport packet except BTH byte 4 is covered: flip
    // one bit in each and the check must fail.
    for (size_t i = 0; i + kIcrcSize < b.pkt.size(); ++i) {
      if (i == 4) continue;
      std::vector<uint8_t> m = b.pkt;
      m[i] ^= 0x01;
      EXPECT_FALSE(CheckIcrc(b.f, m.data(), m.size())) << "byte " << i;
    }
    // ICRC bytes themselves.
    std::vector<uint8_t> m = b.pkt;
    m.back() ^= 0x80;
    EXPECT_FALSE(CheckIcrc(b.f, m.data(), m.size()));

    // Invariant IP/UDP fields.
    auto fails_with = [&](auto mutate, const char* what) {
      IpUdpFields f = b.f;
      mutate(f);
      EXPECT_FALSE(CheckIcrc(f, b.pkt.data(), b.pkt.size())) << what;
    };
    fails_with([](IpUdpFields& f) { f.src_ip[0] ^= 1; }, "src ip first byte");
    fails_with([&](IpUdpFields& f) { f.src_ip[v6 ? 15 : 3] ^= 1; }, "src ip last byte");
    fails_with([&](IpUdpFields& f) { f.dst_ip[v6 ? 15 : 3] ^= 1; }, "dst ip last byte");
    fails_with([](IpUdpFields& f) { f.src_port ^= 1; }, "udp source port");
    fails_with([](IpUdpFields& f) { f.dst_port = 4792; }, "udp dest port");
    if (!v6) {
      // The IPv4 ID and flags are NOT masked: a kernel that numbers IDs per
      // socket breaks an ICRC computed for ID 0 (DESIGN.md, wire facts).
      fails_with([](IpUdpFields& f) { f.ipv4_id = 1; }, "ipv4 id");
      fails_with([](IpUdpFields& f) { f.ipv4_flags_frag = 0; }, "ipv4 DF cleared");
    } else {
      // IPv6 has neither; changing them must not matter.
      IpUdpFields f = b.f;
      f.ipv4_id = 0x5555;
      f.ipv4_flags_frag = 0;
      EXPECT_TRUE(CheckIcrc(f, b.pkt.data(), b.pkt.size()));
      // Only the first 4 bytes of the address arrays are IPv4 addresses.
    }
  }
  // For IPv4 the bytes beyond the 4-byte address are ignored.
  Built b4 = MakeRcWrite(false);
  b4.f.src_ip[4] ^= 0xFF;
  b4.f.dst_ip[15] ^= 0xFF;
  EXPECT_TRUE(CheckIcrc(b4.f, b4.pkt.data(), b4.pkt.size()));
}

// Random packets of every valid opcode and payload size, IPv4 and IPv6:
// icrc.cc's synthesised pseudo header must agree with masking a real header.
TEST(IcrcReferenceTest, RandomPacketsMatchReference) {
  std::mt19937 rng(42);
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& info = GetOpcodeInfo(static_cast<uint8_t>(op));
    if (!info.valid()) continue;
    for (bool v6 : {false, true}) {
      for (size_t payload : {0u, 1u, 4u, 61u, 256u, 1024u, 4096u}) {
        if (!info.has(kHasPayload) && payload != 0) continue;
        SCOPED_TRACE(testing::Message() << info.name << (v6 ? " v6 " : " v4 ") << payload);
        const size_t pad = (4 - payload % 4) % 4;
        const size_t tlen = info.header_length + payload + pad + kIcrcSize;
        const size_t iph = v6 ? 40 : 20;
        std::vector<uint8_t> ip(iph + 8 + tlen);
        for (auto& x : ip) x = static_cast<uint8_t>(rng());
        const uint16_t udp_len = static_cast<uint16_t>(8 + tlen);
        if (!v6) {
          ip[0] = 0x45;
          StoreBe16(&ip[2], static_cast<uint16_t>(20 + udp_len));
          ip[9] = 17;
        } else {
          ip[0] = static_cast<uint8_t>(0x60 | (ip[0] & 0xF));
          StoreBe16(&ip[4], udp_len);
          ip[6] = 17;
        }
        StoreBe16(&ip[iph + 2], kRoceV2UdpPort);
        StoreBe16(&ip[iph + 4], udp_len);
        uint8_t* t = &ip[iph + 8];
        t[0] = static_cast<uint8_t>(op);
        t[1] = static_cast<uint8_t>((t[1] & 0xC0) | (pad << 4));  // TVer 0
        IpUdpFields f;
        FieldsFromIp(ip, &f);
        AppendIcrc(f, t, tlen);
        EXPECT_EQ(StoredIcrc(t + tlen - 4), RefIcrcFromRealHeaders(ip));
        EXPECT_TRUE(CheckIcrc(f, t, tlen));
      }
    }
  }
}

TEST(IcrcEdgeTest, ShortInputs) {
  IpUdpFields f;
  // CheckIcrc needs at least a BTH and an ICRC.
  for (size_t n = 0; n < 16; ++n) {
    auto buf = std::make_unique<uint8_t[]>(n + 1);  // +1: never zero-size
    std::memset(buf.get(), 0, n + 1);
    EXPECT_FALSE(CheckIcrc(f, buf.get(), n)) << n;
  }
  // AppendIcrc on a buffer shorter than an ICRC must not write anywhere
  // (before the fix, length-4 wrapped: a ~2^64-byte read, then a store
  // just before the buffer).
  auto tiny = std::make_unique<uint8_t[]>(3);
  tiny[0] = tiny[1] = tiny[2] = 0xAB;
  AppendIcrc(f, tiny.get(), 3);
  EXPECT_EQ(tiny[0], 0xAB);
  EXPECT_EQ(tiny[2], 0xAB);
  // Exactly BTH + ICRC works, and the buffer is exact-size for ASan.
  auto min = std::make_unique<uint8_t[]>(16);
  std::memset(min.get(), 0, 16);
  AppendIcrc(f, min.get(), 16);
  EXPECT_TRUE(CheckIcrc(f, min.get(), 16));
}

}  // namespace
}  // namespace softrnic::wire
