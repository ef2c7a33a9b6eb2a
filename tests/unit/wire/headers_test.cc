// Header views (src/wire/headers.h): sizes, field round trips, and exact bit
// placement. Every bit-field test starts from all-ones (or all-zeros) so that
// a setter touching a neighbouring field shows up as a changed byte.
//
// Layouts checked against IBA Vol 1 rel 1.4: BTH 9.2 (fig. 76), DETH 9.3.2,
// RETH 9.3.3, AtomicETH 9.3.4, AETH 9.3.5, ImmDt 9.3.6, IETH 9.3.7,
// AtomicAckETH 9.5.3, GRH 8.3; and against real bytes from scapy's
// test/contrib/roce.uts (a ConnectX-4 Lx CNP and a UC SEND ONLY).
#include "wire/headers.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace softrnic::wire {
namespace {

template <typename H>
H AllOnes() {
  H h;
  h.b.fill(0xFF);
  return h;
}

// The spec sizes; a view that grows or shrinks would shift every offset in
// the opcode table.
static_assert(sizeof(Bth) == 12 && sizeof(Deth) == 8 && sizeof(Reth) == 16 &&
              sizeof(AtomicEth) == 28 && sizeof(Aeth) == 4 && sizeof(AtomicAckEth) == 8 &&
              sizeof(ImmDt) == 4 && sizeof(Ieth) == 4 && sizeof(Grh) == 40);
// Views are copied around as raw bytes (memcpy into packets).
static_assert(std::is_trivially_copyable_v<Bth> && std::is_trivially_copyable_v<Reth> &&
              std::is_trivially_copyable_v<AtomicEth> && std::is_trivially_copyable_v<Grh>);
static_assert(alignof(Bth) == 1 && alignof(Reth) == 1 && alignof(AtomicEth) == 1,
              "views must not depend on alignment: packets are byte streams");

TEST(HeadersTest, ValueInitialisedViewsAreZero) {
  Bth bth;
  for (uint8_t byte : bth.b) {
    EXPECT_EQ(byte, 0);
  }
  AtomicEth a;
  for (uint8_t byte : a.b) {
    EXPECT_EQ(byte, 0);
  }
}

// ---------------------------------------------------------------- BTH ----

TEST(BthTest, OpcodeIsByteZero) {
  Bth h = AllOnes<Bth>();
  h.set_opcode(0x0A);
  EXPECT_EQ(h.b[0], 0x0A);
  EXPECT_EQ(h.opcode(), 0x0A);
  for (size_t i = 1; i < 12; ++i) {
    EXPECT_EQ(h.b[i], 0xFF) << i;
  }
}

// Byte 1 is SE(7) M(6) PadCnt(5:4) TVer(3:0), IBA 9.2 figure 76.
TEST(BthTest, Byte1BitPacking) {
  struct Case {
    const char* name;
    void (*clear)(Bth&);
    uint8_t expect_byte1_after_clear;
  };
  const Case cases[] = {
      {"se", [](Bth& h) { h.set_solicited(false); }, 0x7F},
      {"m", [](Bth& h) { h.set_mig_req(false); }, 0xBF},
      {"padcnt", [](Bth& h) { h.set_pad_count(0); }, 0xCF},
      {"tver", [](Bth& h) { h.set_tver(0); }, 0xF0},
  };
  for (const Case& c : cases) {
    Bth h = AllOnes<Bth>();
    c.clear(h);
    EXPECT_EQ(h.b[1], c.expect_byte1_after_clear) << c.name;
    for (size_t i = 0; i < 12; ++i) {
      if (i != 1) {
        EXPECT_EQ(h.b[i], 0xFF) << c.name << " byte " << i;
      }
    }
  }
  Bth z;
  z.set_solicited(true);
  EXPECT_EQ(z.b[1], 0x80);
  EXPECT_TRUE(z.solicited());
  z = Bth{};
  z.set_mig_req(true);
  EXPECT_EQ(z.b[1], 0x40);
  EXPECT_TRUE(z.mig_req());
  z = Bth{};
  z.set_pad_count(3);
  EXPECT_EQ(z.b[1], 0x30);
  EXPECT_EQ(z.pad_count(), 3);
  z = Bth{};
  z.set_tver(0xF);
  EXPECT_EQ(z.b[1], 0x0F);
  EXPECT_EQ(z.tver(), 0xF);
}

TEST(BthTest, PadCountAndTverAreMaskedToTheirWidth) {
  Bth h;
  h.set_pad_count(0xFF);  // only 2 bits exist
  EXPECT_EQ(h.pad_count(), 3);
  EXPECT_EQ(h.b[1], 0x30) << "pad count must not spill into SE/M or TVer";
  h = Bth{};
  h.set_tver(0xFF);
  EXPECT_EQ(h.tver(), 0xF);
  EXPECT_EQ(h.b[1], 0x0F);
  for (uint8_t pad = 0; pad < 4; ++pad) {
    h.set_pad_count(pad);
    EXPECT_EQ(h.pad_count(), pad);
    EXPECT_EQ(h.tver(), 0xF);
  }
}

TEST(BthTest, PkeyBigEndianBytes2And3) {
  Bth h = AllOnes<Bth>();
  h.set_pkey(0x1234);
  EXPECT_EQ(h.b[2], 0x12);
  EXPECT_EQ(h.b[3], 0x34);
  EXPECT_EQ(h.pkey(), 0x1234);
  EXPECT_EQ(h.b[1], 0xFF);
  EXPECT_EQ(h.b[4], 0xFF);
}

// Byte 4 is FECN(7) BECN(6) resv6; the whole byte is masked in the ICRC.
TEST(BthTest, FecnBecnBits) {
  Bth h = AllOnes<Bth>();
  h.set_fecn(false);
  EXPECT_EQ(h.b[4], 0x7F);
  EXPECT_FALSE(h.fecn());
  EXPECT_TRUE(h.becn());
  h = AllOnes<Bth>();
  h.set_becn(false);
  EXPECT_EQ(h.b[4], 0xBF);
  EXPECT_TRUE(h.fecn());
  EXPECT_FALSE(h.becn());
  Bth z;
  z.set_fecn(true);
  EXPECT_EQ(z.b[4], 0x80);
  z.set_becn(true);
  EXPECT_EQ(z.b[4], 0xC0);
  EXPECT_EQ(z.dest_qp(), 0u) << "FECN/BECN must not leak into DestQP";
}

TEST(BthTest, DestQpIs24BitsAndLeavesByte4Alone) {
  Bth h;
  h.set_dest_qp(0xFFFFFFFF);  // upper 8 bits do not exist on the wire
  EXPECT_EQ(h.dest_qp(), 0xFFFFFFu);
  EXPECT_EQ(h.b[4], 0x00) << "a 32-bit store would clobber FECN/BECN/resv6";
  EXPECT_EQ(h.b[5], 0xFF);
  EXPECT_EQ(h.b[7], 0xFF);
  h = AllOnes<Bth>();
  h.set_dest_qp(0x123456);
  EXPECT_EQ(h.b[4], 0xFF);
  EXPECT_EQ(h.b[5], 0x12);
  EXPECT_EQ(h.b[6], 0x34);
  EXPECT_EQ(h.b[7], 0x56);
  EXPECT_EQ(h.b[8], 0xFF);
  EXPECT_EQ(h.dest_qp(), 0x123456u);
  h.set_dest_qp(1);  // QP1 (GSI) is a valid destination
  EXPECT_EQ(h.dest_qp(), 1u);
}

// Byte 8 is AckReq(7) resv7; bytes 9-11 the PSN.
TEST(BthTest, AckReqAndPsn) {
  Bth h = AllOnes<Bth>();
  h.set_ack_req(false);
  EXPECT_EQ(h.b[8], 0x7F);
  EXPECT_FALSE(h.ack_req());
  EXPECT_EQ(h.psn(), 0xFFFFFFu);
  Bth z;
  z.set_ack_req(true);
  EXPECT_EQ(z.b[8], 0x80);
  z.set_psn(0xFFFFFFFF);
  EXPECT_EQ(z.psn(), 0xFFFFFFu);
  EXPECT_EQ(z.b[8], 0x80) << "PSN store must not touch AckReq";
  z.set_psn(0xABCDEF);
  EXPECT_EQ(z.b[9], 0xAB);
  EXPECT_EQ(z.b[10], 0xCD);
  EXPECT_EQ(z.b[11], 0xEF);
  z.set_psn(0x1000000);  // wraps to 0 on the wire
  EXPECT_EQ(z.psn(), 0u);
}

// Real bytes: the BTH of the ConnectX-4 Lx CNP in scapy's roce.uts
// (opcode 0x81, BECN set, DestQP 0x118) and of its UC SEND ONLY example
// (MigReq, PadCnt 2, DestQP 211, PSN 13571856).
TEST(BthTest, DecodesRealPackets) {
  Bth cnp;
  const uint8_t cnp_bytes[12] = {0x81, 0x00, 0xff, 0xff, 0x40, 0x00,
                                 0x01, 0x18, 0x00, 0x00, 0x00, 0x00};
  std::memcpy(cnp.b.data(), cnp_bytes, 12);
  EXPECT_EQ(cnp.opcode(), 0x81);
  EXPECT_FALSE(cnp.solicited());
  EXPECT_EQ(cnp.pad_count(), 0);
  EXPECT_EQ(cnp.tver(), 0);
  EXPECT_EQ(cnp.pkey(), 0xFFFF);
  EXPECT_FALSE(cnp.fecn());
  EXPECT_TRUE(cnp.becn());
  EXPECT_EQ(cnp.dest_qp(), 0x118u);
  EXPECT_FALSE(cnp.ack_req());
  EXPECT_EQ(cnp.psn(), 0u);

  // Build the UC packet's BTH with setters and compare to the wire bytes.
  Bth uc;
  uc.set_opcode(0x24);
  uc.set_mig_req(true);
  uc.set_pad_count(2);
  uc.set_pkey(0xFFFF);
  uc.set_dest_qp(211);
  uc.set_psn(13571856);
  const std::array<uint8_t, 12> want = {0x24, 0x60, 0xff, 0xff, 0x00, 0x00,
                                        0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10};
  EXPECT_EQ(uc.b, want);
}

// --------------------------------------------------- extension headers ----

TEST(RethTest, FieldsAndByteOrder) {
  Reth r;
  r.set_va(0x0102030405060708ull);
  r.set_rkey(0x11223344);
  r.set_dma_length(0xA0B0C0D0);
  const std::array<uint8_t, 16> want = {1,    2,    3,    4,    5,    6,    7,    8,
                                        0x11, 0x22, 0x33, 0x44, 0xA0, 0xB0, 0xC0, 0xD0};
  EXPECT_EQ(r.b, want);
  EXPECT_EQ(r.va(), 0x0102030405060708ull);
  EXPECT_EQ(r.rkey(), 0x11223344u);
  EXPECT_EQ(r.dma_length(), 0xA0B0C0D0u);
  // Edges: a READ of 2 GiB and the top of the address space.
  r.set_va(~0ull);
  r.set_dma_length(0x80000000u);
  EXPECT_EQ(r.va(), ~0ull);
  EXPECT_EQ(r.dma_length(), 0x80000000u);
  EXPECT_EQ(r.rkey(), 0x11223344u);
}

TEST(AethTest, FieldsAndByteOrder) {
  Aeth a = AllOnes<Aeth>();
  a.set_msn(0);
  EXPECT_EQ(a.b[0], 0xFF) << "MSN store must not touch the syndrome";
  EXPECT_EQ(a.msn(), 0u);
  a.set_syndrome(0x60);
  a.set_msn(0x1FFFFFF);  // 24 bits
  EXPECT_EQ(a.msn(), 0xFFFFFFu);
  EXPECT_EQ(a.syndrome(), 0x60);
  a.set_msn(0x123456);
  const std::array<uint8_t, 4> want = {0x60, 0x12, 0x34, 0x56};
  EXPECT_EQ(a.b, want);
}

// IBA 9.7.5.2.1 table 44: syndrome bit 7 reserved, bits 6:5 = 00 ACK (credit
// count in 4:0), 01 RNR NAK (timer in 4:0), 10 reserved, 11 NAK (code in
// 4:0, table 45).
TEST(AethTest, SyndromeEncoding) {
  EXPECT_EQ(MakeSyndrome(AckKind::kAck, 0), 0x00);
  EXPECT_EQ(MakeSyndrome(AckKind::kAck, 0x1F), 0x1F);
  EXPECT_EQ(kAckSyndromeNoCredit, 0x1F);
  EXPECT_EQ(MakeSyndrome(AckKind::kRnrNak, 0), 0x20);
  EXPECT_EQ(MakeSyndrome(AckKind::kRnrNak, 0x1F), 0x3F);
  EXPECT_EQ(MakeSyndrome(AckKind::kNak, static_cast<uint8_t>(NakCode::kPsnSequenceError)), 0x60);
  EXPECT_EQ(MakeSyndrome(AckKind::kNak, static_cast<uint8_t>(NakCode::kInvalidRequest)), 0x61);
  EXPECT_EQ(MakeSyndrome(AckKind::kNak, static_cast<uint8_t>(NakCode::kRemoteAccessError)), 0x62);
  EXPECT_EQ(MakeSyndrome(AckKind::kNak, static_cast<uint8_t>(NakCode::kRemoteOperationalError)),
            0x63);
  EXPECT_EQ(MakeSyndrome(AckKind::kNak, static_cast<uint8_t>(NakCode::kInvalidRdRequest)), 0x64);
  // Value wider than 5 bits must not change the kind.
  EXPECT_EQ(MakeSyndrome(AckKind::kAck, 0xFF), 0x1F);
  for (int s = 0; s < 256; ++s) {
    const auto syn = static_cast<uint8_t>(s);
    EXPECT_EQ(static_cast<uint8_t>(SyndromeKind(syn)), (s >> 5) & 3) << s;
    EXPECT_EQ(SyndromeValue(syn), s & 0x1F) << s;
    if (s < 128) {
      EXPECT_EQ(MakeSyndrome(SyndromeKind(syn), SyndromeValue(syn)), syn) << s;
    }
  }
  // Bit 7 (reserved) is ignored when decoding.
  EXPECT_EQ(SyndromeKind(0xE2), AckKind::kNak);
  EXPECT_EQ(SyndromeValue(0xE2), 2);
}

TEST(AtomicEthTest, FieldsAndByteOrder) {
  AtomicEth a;
  a.set_va(0x1122334455667788ull);
  a.set_rkey(0xCAFEBABE);
  a.set_swap_add(0x0102030405060708ull);
  a.set_compare(0xF0E0D0C0B0A09080ull);
  const std::array<uint8_t, 28> want = {
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // VA
      0xCA, 0xFE, 0xBA, 0xBE,                          // R_Key
      1,    2,    3,    4,    5,    6,    7,    8,     // Swap/Add data
      0xF0, 0xE0, 0xD0, 0xC0, 0xB0, 0xA0, 0x90, 0x80,  // Compare data
  };
  EXPECT_EQ(a.b, want);
  EXPECT_EQ(a.va(), 0x1122334455667788ull);
  EXPECT_EQ(a.rkey(), 0xCAFEBABEu);
  EXPECT_EQ(a.swap_add(), 0x0102030405060708ull);
  EXPECT_EQ(a.compare(), 0xF0E0D0C0B0A09080ull);
}

TEST(AtomicAckEthTest, FieldsAndByteOrder) {
  AtomicAckEth a;
  a.set_orig(0x8000000000000001ull);
  const std::array<uint8_t, 8> want = {0x80, 0, 0, 0, 0, 0, 0, 0x01};
  EXPECT_EQ(a.b, want);
  EXPECT_EQ(a.orig(), 0x8000000000000001ull);
}

TEST(ImmDtTest, CarriedVerbatimNotSwapped) {
  // ibv_send_wr.imm_data is already big-endian (__be32); the value the
  // application wrote must reach the wire byte for byte.
  const uint8_t wire[4] = {0xDE, 0xAD, 0xBE, 0xEF};
  uint32_t app_value;
  std::memcpy(&app_value, wire, 4);
  ImmDt i;
  i.set_raw(app_value);
  EXPECT_EQ(0, std::memcmp(i.b.data(), wire, 4));
  EXPECT_EQ(i.raw(), app_value);
}

TEST(IethTest, RkeyBigEndian) {
  Ieth i;
  i.set_rkey(0x01020304);
  const std::array<uint8_t, 4> want = {1, 2, 3, 4};
  EXPECT_EQ(i.b, want);
  EXPECT_EQ(i.rkey(), 0x01020304u);
}

TEST(DethTest, QkeyReservedSrcQp) {
  Deth d = AllOnes<Deth>();
  d.set_qkey(0x80010002);  // high bit set: a "controlled" Q_Key (IBA 10.2.5)
  d.set_src_qp(0xABCDEF01);
  const std::array<uint8_t, 8> want = {0x80, 0x01, 0x00, 0x02, 0x00, 0xCD, 0xEF, 0x01};
  EXPECT_EQ(d.b, want) << "resv8 (byte 4) is zeroed, SrcQP keeps 24 bits";
  EXPECT_EQ(d.qkey(), 0x80010002u);
  EXPECT_EQ(d.src_qp(), 0xCDEF01u);
}

TEST(GrhTest, VersionClassFlowPacking) {
  Grh g;
  g.set_version_class_flow(6, 0xAB, 0xFFFFFFFF);  // flow label is 20 bits
  EXPECT_EQ(g.b[0], 0x6A);
  EXPECT_EQ(g.b[1], 0xBF);
  EXPECT_EQ(g.b[2], 0xFF);
  EXPECT_EQ(g.b[3], 0xFF);
  EXPECT_EQ(g.ip_version(), 6);
  EXPECT_EQ(g.traffic_class(), 0xAB);
  EXPECT_EQ(g.flow_label(), 0xFFFFFu);
  g.set_version_class_flow(6, 0xFF, 0x12345);
  EXPECT_EQ(g.traffic_class(), 0xFF);
  EXPECT_EQ(g.flow_label(), 0x12345u);
  EXPECT_EQ(g.ip_version(), 6);
  g.set_payload_length(0x1234);
  g.set_next_header(0x1B);  // IBA 8.3: 0x1B = IBA transport header
  g.set_hop_limit(0x40);
  EXPECT_EQ(g.b[4], 0x12);
  EXPECT_EQ(g.b[5], 0x34);
  EXPECT_EQ(g.payload_length(), 0x1234);
  EXPECT_EQ(g.next_header(), 0x1B);
  EXPECT_EQ(g.hop_limit(), 0x40);
  for (int i = 0; i < 16; ++i) {
    g.mutable_sgid()[i] = static_cast<uint8_t>(i);
    g.mutable_dgid()[i] = static_cast<uint8_t>(0xF0 + i);
  }
  EXPECT_EQ(g.b[8], 0);
  EXPECT_EQ(g.b[23], 15);
  EXPECT_EQ(g.b[24], 0xF0);
  EXPECT_EQ(g.b[39], 0xFF);
  EXPECT_EQ(g.sgid(), g.b.data() + 8);
  EXPECT_EQ(g.dgid(), g.b.data() + 24);
}

// ------------------------------------------------------------- PSNs ----

// IBA 9.7.1: PSNs are 24 bits and wrap; comparisons are modulo 2^24 over a
// half window.
static_assert(PsnAdd(0xFFFFFF, 1) == 0);
static_assert(PsnDiff(0, 0xFFFFFF) == 1);

TEST(PsnTest, AddWraps) {
  EXPECT_EQ(PsnAdd(0, 0), 0u);
  EXPECT_EQ(PsnAdd(0xFFFFFF, 1), 0u);
  EXPECT_EQ(PsnAdd(0xFFFFFE, 5), 3u);
  EXPECT_EQ(PsnAdd(0x123456, 0x1000000), 0x123456u) << "adding 2^24 is the identity";
  EXPECT_EQ(PsnAdd(0xFFFFFF, 0xFFFFFFFF), 0xFFFFFEu) << "uint32 overflow is masked too";
  EXPECT_EQ(PsnAdd(5, 0xFFFFFF), 4u) << "adding 2^24-1 is subtracting one";
}

TEST(PsnTest, DiffIsSignedAcrossWrap) {
  EXPECT_EQ(PsnDiff(5, 5), 0);
  EXPECT_EQ(PsnDiff(6, 5), 1);
  EXPECT_EQ(PsnDiff(5, 6), -1);
  EXPECT_EQ(PsnDiff(0, 0xFFFFFF), 1) << "0 comes right after 0xFFFFFF";
  EXPECT_EQ(PsnDiff(0xFFFFFF, 0), -1);
  EXPECT_EQ(PsnDiff(2, 0xFFFFFE), 4);
  // The half-window edges: range is [-2^23, 2^23).
  EXPECT_EQ(PsnDiff(0x7FFFFF, 0), 0x7FFFFF);
  EXPECT_EQ(PsnDiff(0x800000, 0), -0x800000);
  EXPECT_EQ(PsnDiff(0, 0x800000), -0x800000);
  EXPECT_EQ(PsnDiff(0, 0x7FFFFF), -0x7FFFFF);
  // Bits above 24 in the inputs do not matter.
  EXPECT_EQ(PsnDiff(0x01000005, 5), 0);
  EXPECT_EQ(PsnDiff(0xFF000000, 0), 0);
}

TEST(PsnTest, AddAndDiffAreInverse) {
  const uint32_t bases[] = {0, 1, 0x7FFFFF, 0x800000, 0xFFFFF0, 0xFFFFFF};
  const int32_t deltas[] = {0, 1, -1, 100, -100, 0x7FFFFF, -0x800000};
  for (uint32_t b : bases) {
    for (int32_t d : deltas) {
      const uint32_t a = PsnAdd(b, static_cast<uint32_t>(d));
      EXPECT_LE(a, kPsnMask);
      EXPECT_EQ(PsnDiff(a, b), d) << "base " << b << " delta " << d;
    }
  }
}

}  // namespace
}  // namespace softrnic::wire
