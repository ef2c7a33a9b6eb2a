// ParsePacket (src/wire/packet.h): every error path, header extraction at
// the table's offsets, pad and payload arithmetic. Every input lives in a
// heap buffer of exactly its length (ExactBuffer), so an overread of even one
// byte is a heap-buffer-overflow under the CI build's AddressSanitizer.
#include "wire/packet.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::wire {
namespace {

class ExactBuffer {
 public:
  explicit ExactBuffer(const std::vector<uint8_t>& bytes)
      : size_(bytes.size()), data_(new uint8_t[bytes.empty() ? 1 : bytes.size()]) {
    if (!bytes.empty()) std::memcpy(data_.get(), bytes.data(), bytes.size());
  }
  // Zero-length buffers still need a valid, unreadable-beyond pointer.
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  size_t size_;
  std::unique_ptr<uint8_t[]> data_;
};

ParseError Parse(const std::vector<uint8_t>& bytes, Packet* p) {
  ExactBuffer buf(bytes);
  // Note: p's pointers dangle after return; callers here only look at
  // scalar results. Tests that inspect pointers use ExactBuffer directly.
  return ParsePacket(buf.data(), buf.size(), p);
}

// A well-formed packet: BTH, zeroed extension headers, `payload` bytes of
// 0xA5, pad to 4, 4 ICRC bytes (not verified by the parser).
std::vector<uint8_t> Build(uint8_t opcode, size_t payload) {
  const OpcodeInfo& info = GetOpcodeInfo(opcode);
  const size_t pad = (4 - payload % 4) % 4;
  std::vector<uint8_t> v(info.header_length + payload + pad + kIcrcSize, 0);
  Bth bth;
  bth.set_opcode(opcode);
  bth.set_pad_count(static_cast<uint8_t>(pad));
  bth.set_pkey(kDefaultPkey);
  bth.set_dest_qp(0x42);
  bth.set_psn(7);
  std::memcpy(v.data(), bth.b.data(), 12);
  std::memset(v.data() + info.header_length, 0xA5, payload);
  return v;
}

std::vector<uint8_t> ValidOpcodes() {
  std::vector<uint8_t> ops;
  for (int op = 0; op < 256; ++op) {
    if (GetOpcodeInfo(static_cast<uint8_t>(op)).valid()) ops.push_back(static_cast<uint8_t>(op));
  }
  return ops;
}

TEST(ParsePacketTest, ErrorNames) {
  EXPECT_EQ(ParseErrorName(ParseError::kOk), "ok");
  EXPECT_EQ(ParseErrorName(ParseError::kTooShort), "too_short");
  EXPECT_EQ(ParseErrorName(ParseError::kUnknownOpcode), "unknown_opcode");
  EXPECT_EQ(ParseErrorName(ParseError::kBadTver), "bad_tver");
  EXPECT_EQ(ParseErrorName(ParseError::kTruncated), "truncated");
  EXPECT_EQ(ParseErrorName(ParseError::kBadPad), "bad_pad");
}

TEST(ParsePacketTest, TooShort) {
  Packet p;
  EXPECT_EQ(ParsePacket(nullptr, 100, &p), ParseError::kTooShort);
  // Anything below BTH (12) + ICRC (4) is too short, whatever the bytes say.
  for (size_t n = 0; n < 16; ++n) {
    std::vector<uint8_t> v(n, 0);
    EXPECT_EQ(Parse(v, &p), ParseError::kTooShort) << n;
  }
  // 16 bytes of an opcode with no extension headers and no payload: fine.
  EXPECT_EQ(Parse(Build(op::kRcSendOnly, 0), &p), ParseError::kOk);
}

TEST(ParsePacketTest, UnknownOpcodes) {
  for (int op = 0; op < 256; ++op) {
    if (GetOpcodeInfo(static_cast<uint8_t>(op)).valid()) continue;
    std::vector<uint8_t> v(64, 0);
    v[0] = static_cast<uint8_t>(op);
    Packet p;
    EXPECT_EQ(Parse(v, &p), ParseError::kUnknownOpcode) << op;
  }
}

// IBA 9.2: TVer is 0 for this version of the transport; anything else is
// dropped (C9-4 style "unsupported header version").
TEST(ParsePacketTest, BadTver) {
  for (uint8_t tver = 1; tver < 16; ++tver) {
    std::vector<uint8_t> v = Build(op::kRcSendOnly, 8);
    v[1] = static_cast<uint8_t>((v[1] & 0xF0) | tver);
    Packet p;
    EXPECT_EQ(Parse(v, &p), ParseError::kBadTver) << int{tver};
  }
}

// For every opcode: the minimal packet parses, and every shorter length
// (down to the BTH+ICRC floor) is rejected, never read past.
TEST(ParsePacketTest, TruncatedHeadersEveryOpcode) {
  for (uint8_t op : ValidOpcodes()) {
    const OpcodeInfo& info = GetOpcodeInfo(op);
    SCOPED_TRACE(info.name);
    const std::vector<uint8_t> full = Build(op, 0);
    ASSERT_EQ(full.size(), info.header_length + kIcrcSize);
    Packet p;
    EXPECT_EQ(Parse(full, &p), ParseError::kOk);
    for (size_t n = 16; n < full.size(); ++n) {
      std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
      const ParseError e = Parse(cut, &p);
      // Lengths that are a 4-byte multiple lack headers; the others are
      // also misaligned, which the parser may report either way.
      if (n % 4 == 0) {
        EXPECT_EQ(e, ParseError::kTruncated) << n;
      } else {
        EXPECT_TRUE(e == ParseError::kTruncated || e == ParseError::kBadPad) << n;
      }
    }
  }
}

TEST(ParsePacketTest, PayloadAndPadArithmetic) {
  for (uint8_t op : ValidOpcodes()) {
    const OpcodeInfo& info = GetOpcodeInfo(op);
    if (!info.has(kHasPayload)) continue;
    SCOPED_TRACE(info.name);
    for (size_t payload : {0u, 1u, 2u, 3u, 4u, 5u, 255u, 256u, 1024u, 4093u, 4096u}) {
      const std::vector<uint8_t> v = Build(op, payload);
      ExactBuffer buf(v);
      Packet p;
      ASSERT_EQ(ParsePacket(buf.data(), buf.size(), &p), ParseError::kOk) << payload;
      EXPECT_EQ(p.payload_length, payload);
      EXPECT_EQ(p.payload, buf.data() + info.header_length);
      EXPECT_EQ(p.data, buf.data());
      EXPECT_EQ(p.length, buf.size());
      EXPECT_EQ(p.info, &info);
      EXPECT_EQ(p.opcode(), op);
      if (payload > 0) {
        EXPECT_EQ(p.payload[0], 0xA5);
        EXPECT_EQ(p.payload[payload - 1], 0xA5);
      }
    }
  }
}

TEST(ParsePacketTest, BadPad) {
  Packet p;
  // Pad count larger than the payload+pad area (here: no payload at all).
  for (uint8_t pad = 1; pad < 4; ++pad) {
    std::vector<uint8_t> v = Build(op::kRcSendOnly, 0);
    v[1] = static_cast<uint8_t>(v[1] | pad << 4);
    EXPECT_EQ(Parse(v, &p), ParseError::kBadPad) << int{pad};
  }
  // Payload+pad not a multiple of 4: the UDP length says 4n+1..4n+3 bytes.
  for (size_t extra = 1; extra < 4; ++extra) {
    std::vector<uint8_t> v = Build(op::kRcSendOnly, 8);
    v.insert(v.begin() + 12, extra, 0);
    EXPECT_EQ(Parse(v, &p), ParseError::kBadPad) << extra;
  }
  // Payload bytes on opcodes that carry none (ACK, READ request, atomics).
  for (uint8_t op : ValidOpcodes()) {
    const OpcodeInfo& info = GetOpcodeInfo(op);
    if (info.has(kHasPayload)) continue;
    std::vector<uint8_t> v = Build(op, 0);
    v.insert(v.begin() + info.header_length, 4, 0);
    EXPECT_EQ(Parse(v, &p), ParseError::kBadPad) << info.name;
  }
  // A pad of 3 over exactly 4 payload+pad bytes is legal: 1 payload byte.
  std::vector<uint8_t> v = Build(op::kRcSendOnly, 1);
  ASSERT_EQ(Parse(v, &p), ParseError::kOk);
  EXPECT_EQ(p.payload_length, 1u);
  EXPECT_EQ(p.bth.pad_count(), 3);
}

// The order of checks: an unknown opcode is reported even when the TVer is
// also wrong, and TVer before lengths (so counters name the first problem).
TEST(ParsePacketTest, CheckOrder) {
  std::vector<uint8_t> v(16, 0);
  v[0] = 0xFF;
  v[1] = 0x0F;
  Packet p;
  EXPECT_EQ(Parse(v, &p), ParseError::kUnknownOpcode);
  v[0] = op::kRcWriteOnly;  // needs 28+4 bytes
  EXPECT_EQ(Parse(v, &p), ParseError::kBadTver);
  v[1] = 0;
  EXPECT_EQ(Parse(v, &p), ParseError::kTruncated);
}

TEST(ParsePacketTest, ExtensionHeadersReadAtTheirOffsets) {
  // WRITE ONLY with immediate: BTH | RETH | ImmDt | payload.
  {
    const OpcodeInfo& info = GetOpcodeInfo(op::kRcWriteOnlyImm);
    std::vector<uint8_t> v = Build(op::kRcWriteOnlyImm, 5);
    Reth r;
    r.set_va(0x1122334455667788ull);
    r.set_rkey(0xAABBCCDD);
    r.set_dma_length(5);
    std::memcpy(&v[info.reth_offset], r.b.data(), 16);
    const uint8_t imm[4] = {1, 2, 3, 4};
    std::memcpy(&v[info.imm_offset], imm, 4);
    ExactBuffer buf(v);
    Packet p;
    ASSERT_EQ(ParsePacket(buf.data(), buf.size(), &p), ParseError::kOk);
    EXPECT_EQ(p.reth().va(), 0x1122334455667788ull);
    EXPECT_EQ(p.reth().rkey(), 0xAABBCCDDu);
    EXPECT_EQ(p.reth().dma_length(), 5u);
    EXPECT_EQ(0, std::memcmp(p.imm().b.data(), imm, 4));
    EXPECT_EQ(p.payload_length, 5u);
    EXPECT_EQ(p.bth.dest_qp(), 0x42u);
    EXPECT_EQ(p.bth.psn(), 7u);
  }
  // ATOMIC ACK: BTH | AETH | AtomicAckETH.
  {
    const OpcodeInfo& info = GetOpcodeInfo(op::kRcAtomicAck);
    std::vector<uint8_t> v = Build(op::kRcAtomicAck, 0);
    Aeth a;
    a.set_syndrome(kAckSyndromeNoCredit);
    a.set_msn(0xFEDCBA);
    AtomicAckEth aa;
    aa.set_orig(0x0123456789ABCDEFull);
    std::memcpy(&v[info.aeth_offset], a.b.data(), 4);
    std::memcpy(&v[info.atomic_ack_eth_offset], aa.b.data(), 8);
    ExactBuffer buf(v);
    Packet p;
    ASSERT_EQ(ParsePacket(buf.data(), buf.size(), &p), ParseError::kOk);
    EXPECT_EQ(p.aeth().syndrome(), kAckSyndromeNoCredit);
    EXPECT_EQ(p.aeth().msn(), 0xFEDCBAu);
    EXPECT_EQ(p.atomic_ack_eth().orig(), 0x0123456789ABCDEFull);
    EXPECT_EQ(p.payload_length, 0u);
  }
  // COMPARE SWAP: BTH | AtomicETH (the last byte of the packet before ICRC).
  {
    const OpcodeInfo& info = GetOpcodeInfo(op::kRcCompareSwap);
    std::vector<uint8_t> v = Build(op::kRcCompareSwap, 0);
    AtomicEth a;
    a.set_va(8);
    a.set_rkey(9);
    a.set_swap_add(10);
    a.set_compare(0xFFFFFFFFFFFFFFFEull);
    std::memcpy(&v[info.atomic_eth_offset], a.b.data(), 28);
    ExactBuffer buf(v);
    Packet p;
    ASSERT_EQ(ParsePacket(buf.data(), buf.size(), &p), ParseError::kOk);
    EXPECT_EQ(p.atomic_eth().va(), 8u);
    EXPECT_EQ(p.atomic_eth().rkey(), 9u);
    EXPECT_EQ(p.atomic_eth().swap_add(), 10u);
    EXPECT_EQ(p.atomic_eth().compare(), 0xFFFFFFFFFFFFFFFEull);
  }
  // UD SEND ONLY with immediate: BTH | DETH | ImmDt.
  {
    const OpcodeInfo& info = GetOpcodeInfo(op::kUdSendOnlyImm);
    std::vector<uint8_t> v = Build(op::kUdSendOnlyImm, 3);
    Deth d;
    d.set_qkey(0x11111111);
    d.set_src_qp(0x000777);
    std::memcpy(&v[info.deth_offset], d.b.data(), 8);
    v[info.imm_offset + 3] = 0x5A;
    ExactBuffer buf(v);
    Packet p;
    ASSERT_EQ(ParsePacket(buf.data(), buf.size(), &p), ParseError::kOk);
    EXPECT_EQ(p.deth().qkey(), 0x11111111u);
    EXPECT_EQ(p.deth().src_qp(), 0x777u);
    EXPECT_EQ(p.imm().b[3], 0x5A);
    EXPECT_EQ(p.payload_length, 3u);
  }
  // SEND LAST with invalidate: BTH | IETH.
  {
    const OpcodeInfo& info = GetOpcodeInfo(op::kRcSendLastInv);
    std::vector<uint8_t> v = Build(op::kRcSendLastInv, 4);
    Ieth i;
    i.set_rkey(0xDEADBEEF);
    std::memcpy(&v[info.ieth_offset], i.b.data(), 4);
    ExactBuffer buf(v);
    Packet p;
    ASSERT_EQ(ParsePacket(buf.data(), buf.size(), &p), ParseError::kOk);
    EXPECT_EQ(p.ieth().rkey(), 0xDEADBEEFu);
    EXPECT_EQ(p.payload_length, 4u);
  }
}

// Fuzz-ish: random lengths and bytes. Whatever ParsePacket returns, it must
// not read outside the buffer (ASan), and on success the payload must lie
// inside it.
TEST(ParsePacketTest, RandomInputsStayInBounds) {
  uint32_t x = 0x12345678;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
  };
  for (int iter = 0; iter < 20000; ++iter) {
    const size_t n = next() % 80;
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(next());
    if (n > 1 && (iter & 1)) {
      v[0] = ValidOpcodes()[next() % ValidOpcodes().size()];
      v[1] &= 0xF0;  // TVer 0 so the length checks are reached
    }
    ExactBuffer buf(v);
    Packet p;
    if (ParsePacket(buf.data(), buf.size(), &p) == ParseError::kOk) {
      ASSERT_GE(p.payload, buf.data());
      ASSERT_LE(p.payload + p.payload_length + p.bth.pad_count() + kIcrcSize,
                buf.data() + buf.size());
      ASSERT_EQ((p.payload_length + p.bth.pad_count()) % 4, 0u);
    }
  }
}

}  // namespace
}  // namespace softrnic::wire
