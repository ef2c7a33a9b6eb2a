// The opcode table (src/wire/opcode.cc) against an independent transcription
// of IBA Vol 1 table 38 (9.2.1) and the header layout rules of 9.3, as the
// Linux soft-RoCE driver encodes them in drivers/infiniband/sw/rxe/
// rxe_opcode.c (rxe_opcode[]: .mask, .length, .offset). The offsets below are
// written out by hand from that table, not computed the way opcode.cc
// computes them, so a layout bug cannot hide in shared code.
#include "wire/opcode.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include "wire/headers.h"

namespace softrnic::wire {
namespace {

enum Pos : uint8_t { kPosFirst, kPosMiddle, kPosLast, kPosOnly, kPosNone };
enum Dir : uint8_t { kReqDir, kRespDir, kNoDir };

struct Expect {
  uint8_t op;
  Service svc;
  uint32_t kind;  // one of kIsSend/kIsWrite/kIsReadRequest/kIsReadResponse/kIsAtomic/kIsAck/kIsCnp
  Pos pos;
  Dir dir;
  bool payload;
  // Offsets from the start of the BTH (0 = absent), per rxe_opcode.c.
  uint8_t deth, reth, atomic_eth, aeth, atomic_ack_eth, imm, ieth;
  uint8_t header_length;  // rxe's .length (BTH + extension headers)
};

constexpr Service RC = Service::kRc;
constexpr Service UC = Service::kUc;
constexpr Service UD = Service::kUd;

// clang-format off
const Expect kExpected[] = {
  //  op    svc kind             pos          dir       pay   deth reth aeth_a aeth aack imm ieth len
  // RC (IBA table 38, transport 000)
  {0x00, RC, kIsSend,         kPosFirst,  kReqDir,  true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x01, RC, kIsSend,         kPosMiddle, kReqDir,  true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x02, RC, kIsSend,         kPosLast,   kReqDir,  true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x03, RC, kIsSend,         kPosLast,   kReqDir,  true,  0,  0,  0,  0,  0, 12,  0, 16},
  {0x04, RC, kIsSend,         kPosOnly,   kReqDir,  true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x05, RC, kIsSend,         kPosOnly,   kReqDir,  true,  0,  0,  0,  0,  0, 12,  0, 16},
  {0x06, RC, kIsWrite,        kPosFirst,  kReqDir,  true,  0, 12,  0,  0,  0,  0,  0, 28},
  {0x07, RC, kIsWrite,        kPosMiddle, kReqDir,  true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x08, RC, kIsWrite,        kPosLast,   kReqDir,  true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x09, RC, kIsWrite,        kPosLast,   kReqDir,  true,  0,  0,  0,  0,  0, 12,  0, 16},
  {0x0A, RC, kIsWrite,        kPosOnly,   kReqDir,  true,  0, 12,  0,  0,  0,  0,  0, 28},
  {0x0B, RC, kIsWrite,        kPosOnly,   kReqDir,  true,  0, 12,  0,  0,  0, 28,  0, 32},
  {0x0C, RC, kIsReadRequest,  kPosOnly,   kReqDir,  false, 0, 12,  0,  0,  0,  0,  0, 28},
  {0x0D, RC, kIsReadResponse, kPosFirst,  kRespDir, true,  0,  0,  0, 12,  0,  0,  0, 16},
  {0x0E, RC, kIsReadResponse, kPosMiddle, kRespDir, true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x0F, RC, kIsReadResponse, kPosLast,   kRespDir, true,  0,  0,  0, 12,  0,  0,  0, 16},
  {0x10, RC, kIsReadResponse, kPosOnly,   kRespDir, true,  0,  0,  0, 12,  0,  0,  0, 16},
  {0x11, RC, kIsAck,          kPosOnly,   kRespDir, false, 0,  0,  0, 12,  0,  0,  0, 16},
  {0x12, RC, kIsAck,          kPosOnly,   kRespDir, false, 0,  0,  0, 12, 16,  0,  0, 24},
  {0x13, RC, kIsAtomic,       kPosOnly,   kReqDir,  false, 0,  0, 12,  0,  0,  0,  0, 40},
  {0x14, RC, kIsAtomic,       kPosOnly,   kReqDir,  false, 0,  0, 12,  0,  0,  0,  0, 40},
  {0x16, RC, kIsSend,         kPosLast,   kReqDir,  true,  0,  0,  0,  0,  0,  0, 12, 16},
  {0x17, RC, kIsSend,         kPosOnly,   kReqDir,  true,  0,  0,  0,  0,  0,  0, 12, 16},
  // IBA 1.5 ATOMIC WRITE (rxe: IB_OPCODE_RC_ATOMIC_WRITE): RETH + 8-byte payload.
  {0x1D, RC, kIsWrite,        kPosOnly,   kReqDir,  true,  0, 12,  0,  0,  0,  0,  0, 28},
  // UC (transport 001): sends and writes only.
  {0x20, UC, kIsSend,         kPosFirst,  kReqDir,  true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x21, UC, kIsSend,         kPosMiddle, kReqDir,  true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x22, UC, kIsSend,         kPosLast,   kReqDir,  true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x23, UC, kIsSend,         kPosLast,   kReqDir,  true,  0,  0,  0,  0,  0, 12,  0, 16},
  {0x24, UC, kIsSend,         kPosOnly,   kReqDir,  true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x25, UC, kIsSend,         kPosOnly,   kReqDir,  true,  0,  0,  0,  0,  0, 12,  0, 16},
  {0x26, UC, kIsWrite,        kPosFirst,  kReqDir,  true,  0, 12,  0,  0,  0,  0,  0, 28},
  {0x27, UC, kIsWrite,        kPosMiddle, kReqDir,  true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x28, UC, kIsWrite,        kPosLast,   kReqDir,  true,  0,  0,  0,  0,  0,  0,  0, 12},
  {0x29, UC, kIsWrite,        kPosLast,   kReqDir,  true,  0,  0,  0,  0,  0, 12,  0, 16},
  {0x2A, UC, kIsWrite,        kPosOnly,   kReqDir,  true,  0, 12,  0,  0,  0,  0,  0, 28},
  {0x2B, UC, kIsWrite,        kPosOnly,   kReqDir,  true,  0, 12,  0,  0,  0, 28,  0, 32},
  // UD (transport 011): DETH, then ImmDt.
  {0x64, UD, kIsSend,         kPosOnly,   kReqDir,  true, 12,  0,  0,  0,  0,  0,  0, 20},
  {0x65, UD, kIsSend,         kPosOnly,   kReqDir,  true, 12,  0,  0,  0,  0, 20,  0, 24},
  // CNP (RoCE v2 Annex A17.9.3): BTH + 16 reserved bytes, carried as payload.
  {0x81, Service::kCnp, kIsCnp, kPosNone, kNoDir,   true,  0,  0,  0,  0,  0,  0,  0, 12},
};
// clang-format on

constexpr uint32_t kKindFlags =
    kIsSend | kIsWrite | kIsReadRequest | kIsReadResponse | kIsAtomic | kIsAck | kIsCnp;

TEST(OpcodeTableTest, EveryExpectedOpcodeMatchesRxe) {
  for (const Expect& e : kExpected) {
    SCOPED_TRACE(testing::Message() << "opcode 0x" << std::hex << int{e.op});
    const OpcodeInfo& info = GetOpcodeInfo(e.op);
    ASSERT_TRUE(info.valid());
    EXPECT_FALSE(info.name.empty());
    EXPECT_EQ(ServiceOf(e.op), e.svc);
    EXPECT_EQ(info.flags & kKindFlags, e.kind) << info.name;

    EXPECT_EQ(info.has(kFirst), e.pos == kPosFirst || e.pos == kPosOnly) << info.name;
    EXPECT_EQ(info.has(kLast), e.pos == kPosLast || e.pos == kPosOnly) << info.name;
    EXPECT_EQ(info.has(kMiddle), e.pos == kPosMiddle) << info.name;
    EXPECT_EQ(info.has(kOnly), e.pos == kPosOnly) << info.name;

    EXPECT_EQ(info.has(kIsRequest), e.dir == kReqDir) << info.name;
    EXPECT_EQ(info.has(kIsResponse), e.dir == kRespDir) << info.name;
    EXPECT_EQ(info.has(kHasPayload), e.payload) << info.name;

    EXPECT_EQ(info.deth_offset, e.deth) << info.name;
    EXPECT_EQ(info.reth_offset, e.reth) << info.name;
    EXPECT_EQ(info.atomic_eth_offset, e.atomic_eth) << info.name;
    EXPECT_EQ(info.aeth_offset, e.aeth) << info.name;
    EXPECT_EQ(info.atomic_ack_eth_offset, e.atomic_ack_eth) << info.name;
    EXPECT_EQ(info.imm_offset, e.imm) << info.name;
    EXPECT_EQ(info.ieth_offset, e.ieth) << info.name;
    EXPECT_EQ(info.header_length, e.header_length) << info.name;

    // The kHas* flags agree with the offsets.
    EXPECT_EQ(info.has(kHasDeth), e.deth != 0) << info.name;
    EXPECT_EQ(info.has(kHasReth), e.reth != 0) << info.name;
    EXPECT_EQ(info.has(kHasAtomicEth), e.atomic_eth != 0) << info.name;
    EXPECT_EQ(info.has(kHasAeth), e.aeth != 0) << info.name;
    EXPECT_EQ(info.has(kHasAtomicAckEth), e.atomic_ack_eth != 0) << info.name;
    EXPECT_EQ(info.has(kHasImm), e.imm != 0) << info.name;
    EXPECT_EQ(info.has(kHasIeth), e.ieth != 0) << info.name;
  }
}

TEST(OpcodeTableTest, NamesFollowServicePrefix) {
  for (const Expect& e : kExpected) {
    const std::string name(GetOpcodeInfo(e.op).name);
    const char* prefix = e.svc == Service::kRc   ? "RC_"
                         : e.svc == Service::kUc ? "UC_"
                         : e.svc == Service::kUd ? "UD_"
                                                 : "CNP";
    EXPECT_EQ(name.rfind(prefix, 0), 0u) << name;
  }
  EXPECT_EQ(GetOpcodeInfo(op::kRcSendOnly).name, "RC_SEND_ONLY");
  EXPECT_EQ(GetOpcodeInfo(op::kRcAtomicAck).name, "RC_ATOMIC_ACKNOWLEDGE");
}

// Exactly the opcodes above and their XRC twins are valid: everything
// else, including RD (0x40-0x5F, not supported by softrnic, like rxe's
// verbs), reserved RC and XRC codes 0x15/0xB5 (RESYNC is RD only) and
// 0x18-0x1F/0xB8-0xBF, reserved UC codes and manufacturer-specific
// 0xC0-0xFF, must be rejected.
TEST(OpcodeTableTest, AllOtherOpcodesAreInvalid) {
  std::map<int, bool> expected_valid;
  for (const Expect& e : kExpected) {
    expected_valid[e.op] = true;
    // XRC has RC's operations but not ATOMIC WRITE (wire/opcode.h).
    if (e.svc == Service::kRc && e.op != op::kRcAtomicWrite) expected_valid[XrcOpcode(e.op)] = true;
  }
  int valid_count = 0;
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& info = GetOpcodeInfo(static_cast<uint8_t>(op));
    EXPECT_EQ(info.valid(), expected_valid.count(op) == 1) << "opcode 0x" << std::hex << op;
    if (!info.valid()) {
      EXPECT_EQ(info.header_length, 0) << op;
      EXPECT_EQ(info.flags, 0u) << op;
    } else {
      ++valid_count;
    }
  }
  EXPECT_EQ(valid_count, 24 + 12 + 2 + 1 + 23);  // RC + UC + UD + CNP + XRC
}

// Structural rules every valid entry must obey, independent of the table
// above: headers follow IBA 9.3's order (DETH, RETH|AtomicETH, AETH,
// AtomicAckETH, ImmDt|IETH), are contiguous from byte 12, and header_length
// is their sum. All lengths are multiples of 4 so payload starts aligned.
TEST(OpcodeTableTest, LayoutInvariants) {
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& info = GetOpcodeInfo(static_cast<uint8_t>(op));
    if (!info.valid()) continue;
    SCOPED_TRACE(info.name);
    struct H {
      uint8_t offset;
      size_t size;
    };
    const H in_order[] = {
        {info.xrceth_offset, sizeof(XrcEth)},
        {info.deth_offset, sizeof(Deth)},          {info.reth_offset, sizeof(Reth)},
        {info.atomic_eth_offset, sizeof(AtomicEth)}, {info.aeth_offset, sizeof(Aeth)},
        {info.atomic_ack_eth_offset, sizeof(AtomicAckEth)}, {info.imm_offset, sizeof(ImmDt)},
        {info.ieth_offset, sizeof(Ieth)},
    };
    size_t next = sizeof(Bth);
    for (const H& h : in_order) {
      if (h.offset == 0) continue;
      EXPECT_EQ(h.offset, next);
      next += h.size;
    }
    EXPECT_EQ(info.header_length, next);
    EXPECT_EQ(info.header_length % 4, 0);
    // A middle packet is never first or last.
    if (info.has(kMiddle)) {
      EXPECT_FALSE(info.flags & (kFirst | kLast));
    }
    // Never both RETH and AtomicETH, never both ImmDt and IETH.
    EXPECT_FALSE(info.has(kHasReth) && info.has(kHasAtomicEth));
    EXPECT_FALSE(info.has(kHasImm) && info.has(kHasIeth));
    // Requests and responses are disjoint.
    EXPECT_FALSE(info.has(kIsRequest) && info.has(kIsResponse));
  }
}

TEST(OpcodeTableTest, ServiceOfUsesTopThreeBits) {
  for (int op = 0; op < 256; ++op) {
    const Service s = ServiceOf(static_cast<uint8_t>(op));
    switch (op >> 5) {
      case 0: EXPECT_EQ(s, Service::kRc) << op; break;
      case 1: EXPECT_EQ(s, Service::kUc) << op; break;
      case 2: EXPECT_EQ(s, Service::kRd) << op; break;
      case 3: EXPECT_EQ(s, Service::kUd) << op; break;
      case 4: EXPECT_EQ(s, Service::kCnp) << op; break;
      case 5: EXPECT_EQ(s, Service::kXrc) << op; break;
      default: EXPECT_EQ(s, Service::kInvalid) << op; break;  // reserved, vendor
    }
  }
}

// The named constants are the table's keys; a typo would silently point the
// engine at another row.
TEST(OpcodeTableTest, NamedConstantsMatchTable38) {
  EXPECT_EQ(op::kRcSendFirst, 0x00);
  EXPECT_EQ(op::kRcSendLastImm, 0x03);
  EXPECT_EQ(op::kRcWriteOnlyImm, 0x0B);
  EXPECT_EQ(op::kRcReadRequest, 0x0C);
  EXPECT_EQ(op::kRcReadResponseOnly, 0x10);
  EXPECT_EQ(op::kRcAck, 0x11);
  EXPECT_EQ(op::kRcAtomicAck, 0x12);
  EXPECT_EQ(op::kRcCompareSwap, 0x13);
  EXPECT_EQ(op::kRcFetchAdd, 0x14);
  EXPECT_EQ(op::kRcSendLastInv, 0x16);
  EXPECT_EQ(op::kRcSendOnlyInv, 0x17);
  EXPECT_EQ(op::kUcSendFirst, 0x20);
  EXPECT_EQ(op::kUcWriteOnlyImm, 0x2B);
  EXPECT_EQ(op::kUdSendOnly, 0x64);
  EXPECT_EQ(op::kUdSendOnlyImm, 0x65);
  EXPECT_EQ(op::kCnp, 0x81);
  // UC code = RC code | 0x20 for every shared operation.
  EXPECT_EQ(op::kUcSendOnlyImm, op::kRcSendOnlyImm | 0x20);
  EXPECT_EQ(op::kUcWriteLast, op::kRcWriteLast | 0x20);
  EXPECT_EQ(op::kUcWriteMiddle, op::kRcWriteMiddle | 0x20);
}

}  // namespace
}  // namespace softrnic::wire

namespace softrnic::wire {
namespace {

// XRC (IBA 9.2 table 38): each RC opcode's twin under the 101b prefix, with
// the same headers, plus an XRCETH right after the BTH on requests only
// (responses carry none), and the name Wireshark gives it.
TEST(OpcodeTableTest, XrcOpcodesAreRcsWithAnXrcEthOnRequests) {
  int twins = 0;
  for (int rc = 0; rc < 0x20; ++rc) {
    const OpcodeInfo& r = GetOpcodeInfo(static_cast<uint8_t>(rc));
    const OpcodeInfo& x = GetOpcodeInfo(XrcOpcode(static_cast<uint8_t>(rc)));
    if (rc == op::kRcAtomicWrite) {  // RC only (wire/opcode.h)
      EXPECT_FALSE(x.valid());
      continue;
    }
    ASSERT_EQ(r.valid(), x.valid()) << rc;
    if (!r.valid()) continue;
    ++twins;
    SCOPED_TRACE(x.name);
    EXPECT_EQ(RcEquivalent(XrcOpcode(static_cast<uint8_t>(rc))), rc);
    EXPECT_EQ(std::string(x.name), "XRC_" + std::string(r.name).substr(3));
    const uint32_t extra = r.has(kIsRequest) ? uint32_t{kHasXrcEth} : 0u;
    EXPECT_EQ(x.flags, r.flags | extra);
    const uint8_t shift = r.has(kIsRequest) ? 4 : 0;
    EXPECT_EQ(x.xrceth_offset, r.has(kIsRequest) ? 12 : 0);
    EXPECT_EQ(x.header_length, r.header_length + shift);
    if (r.reth_offset) {
      EXPECT_EQ(x.reth_offset, r.reth_offset + shift);
    }
    if (r.atomic_eth_offset) {
      EXPECT_EQ(x.atomic_eth_offset, r.atomic_eth_offset + shift);
    }
    if (r.aeth_offset) {
      EXPECT_EQ(x.aeth_offset, r.aeth_offset);
    }
  }
  EXPECT_EQ(twins, 23);
  EXPECT_EQ(op::kXrcSendOnly, XrcOpcode(op::kRcSendOnly));
  EXPECT_EQ(op::kXrcAck, XrcOpcode(op::kRcAck));
  // UC, UD and CNP opcodes are their own RC equivalent (unchanged).
  EXPECT_EQ(RcEquivalent(op::kUcSendOnly), op::kUcSendOnly);
  EXPECT_EQ(RcEquivalent(op::kCnp), op::kCnp);
}

// The XRCETH is the 24-bit SRQ number behind a reserved byte, big-endian.
TEST(OpcodeTableTest, XrcEthCarriesTheSrqNumber) {
  XrcEth h;
  h.set_srqn(0x12345678);
  EXPECT_EQ(h.b[0], 0);
  EXPECT_EQ(h.b[1], 0x34);
  EXPECT_EQ(h.b[2], 0x56);
  EXPECT_EQ(h.b[3], 0x78);
  EXPECT_EQ(h.srqn(), 0x345678u);
}

}  // namespace
}  // namespace softrnic::wire
