// The work-request opcode table (wr_opcode.h) against the packet table
// (wire/opcode.h), and the packet builder (packet_builder.h) against the
// parser: what one side writes, the other reads back.
#include "engine/packet_builder.h"
#include "engine/wr_opcode.h"

#include <gtest/gtest.h>

#include "wire/headers.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace softrnic::engine {
namespace {

constexpr QpType kTypes[] = {QpType::kRc, QpType::kUc, QpType::kUd};

wire::Service ServiceFor(QpType t) {
  return t == QpType::kRc ? wire::Service::kRc
         : t == QpType::kUc ? wire::Service::kUc
                            : wire::Service::kUd;
}

// Every packet opcode a postable WR opcode can produce exists on the QP's
// transport, is a request, and sits where MessageOpcodes says. Local
// operations (BIND_MW, LOCAL_INV) produce no packet at all.
TEST(WrOpcodeTable, PacketOpcodesMatchThePacketTable) {
  for (uint32_t v = 0; v < 256; ++v) {
    const WrOpcodeInfo& op = GetWrOpcodeInfo(v);
    for (QpType t : kTypes) {
      if (!op.PostableOn(t)) continue;
      if (op.local) {
        EXPECT_EQ(op.On(t).only, kNoPacketOpcode) << op.name;
        EXPECT_EQ(op.remote_right, 0u) << op.name;
        continue;
      }
      SCOPED_TRACE(std::string(op.name) + " on type " + std::to_string(static_cast<int>(t)));
      const MessageOpcodes& m = op.On(t);
      ASSERT_NE(m.only, kNoPacketOpcode);
      const struct {
        uint8_t opcode;
        uint32_t position;
      } positions[] = {{m.first, wire::kFirst}, {m.middle, wire::kMiddle},
                       {m.last, wire::kLast}, {m.only, wire::kOnly}};
      for (const auto& p : positions) {
        if (p.opcode == kNoPacketOpcode) continue;
        const wire::OpcodeInfo& info = wire::GetOpcodeInfo(p.opcode);
        ASSERT_TRUE(info.valid()) << int(p.opcode);
        EXPECT_EQ(wire::ServiceOf(p.opcode), ServiceFor(t)) << info.name;
        EXPECT_TRUE(info.has(wire::kIsRequest)) << info.name;
        EXPECT_EQ(info.flags & (wire::kFirst | wire::kMiddle | wire::kLast), p.position)
            << info.name;
        EXPECT_EQ(info.has(wire::kIsReadRequest), op.read) << info.name;
        EXPECT_EQ(info.has(wire::kIsAtomic), op.atomic) << info.name;
        // Whatever names remote memory carries a RETH or AtomicETH on its first packet.
        if (op.remote_right != 0 && (p.position & wire::kFirst)) {
          EXPECT_TRUE(info.reth_offset != 0 || info.atomic_eth_offset != 0) << info.name;
        }
      }
      // A message of several packets: all four positions or none.
      if (m.first != kNoPacketOpcode) {
        EXPECT_NE(m.middle, kNoPacketOpcode);
        EXPECT_NE(m.last, kNoPacketOpcode);
      }
    }
    if (!op.known()) {
      EXPECT_EQ(op.qp_types, 0) << v;
    }
    if (op.read_or_atomic()) {
      EXPECT_FALSE(op.inline_ok) << op.name;
    }
  }
  EXPECT_FALSE(GetWrOpcodeInfo(0x1000u).known());
}

TEST(WrOpcodeTable, WhereEachOpcodeMayBePosted) {
  EXPECT_TRUE(GetWrOpcodeInfo(WrOpcode::kSend).PostableOn(QpType::kUd));
  EXPECT_FALSE(GetWrOpcodeInfo(WrOpcode::kRdmaWrite).PostableOn(QpType::kUd));
  EXPECT_TRUE(GetWrOpcodeInfo(WrOpcode::kRdmaWrite).PostableOn(QpType::kUc));
  EXPECT_FALSE(GetWrOpcodeInfo(WrOpcode::kRdmaRead).PostableOn(QpType::kUc));
  EXPECT_FALSE(GetWrOpcodeInfo(WrOpcode::kSendWithInv).PostableOn(QpType::kUc));
  // Memory-window operations: RC and UC, run locally.
  for (WrOpcode o : {WrOpcode::kLocalInv, WrOpcode::kBindMw}) {
    EXPECT_TRUE(GetWrOpcodeInfo(o).PostableOn(QpType::kRc));
    EXPECT_TRUE(GetWrOpcodeInfo(o).PostableOn(QpType::kUc));
    EXPECT_FALSE(GetWrOpcodeInfo(o).PostableOn(QpType::kUd));
    EXPECT_TRUE(GetWrOpcodeInfo(o).local);
  }
  EXPECT_FALSE(GetWrOpcodeInfo(WrOpcode::kSend).local);
}

// Builds a packet of every valid opcode with distinct field values and
// parses it back.
TEST(PacketBuilder, EveryOpcodeParsesBackToItsFields) {
  for (uint32_t opc = 0; opc < 256; ++opc) {
    const wire::OpcodeInfo& info = wire::GetOpcodeInfo(static_cast<uint8_t>(opc));
    if (!info.valid()) continue;
    SCOPED_TRACE(std::string(info.name));
    const PacketFields f{.opcode = static_cast<uint8_t>(opc), .dest_qpn = 0x123456,
                         .psn = 0xABCDEF, .ack_req = true, .solicited = true, .becn = true,
                         .sr = true, .va = 0x1122334455667788, .rkey = 0xCAFEF00D,
                         .dma_length = 77, .swap_add = 0x0102030405060708,
                         .compare = 0x1020304050607080, .syndrome = 0x1F, .msn = 0x654321,
                         .atomic_orig = 0xFEDCBA9876543210, .imm = 0x11223344,
                         .inv_rkey = 0xDEADBEEF, .qkey = 0x80010000, .src_qp = 0x00BEEF};
    uint32_t payload = info.has(wire::kHasPayload) ? 13 : 0;
    if (info.has(wire::kIsCnp)) payload = 16;
    uint8_t buf[256] = {};
    const uint32_t head = WritePacketHeaders(f, payload, buf);
    ASSERT_EQ(head, info.header_length);
    for (uint32_t i = 0; i < payload; ++i) buf[head + i] = static_cast<uint8_t>(i);
    const uint32_t pad = (4 - (payload & 3)) & 3;
    const size_t length = head + payload + pad + wire::kIcrcSize;
    wire::Packet pkt;
    // SACK-style payload on an ACK is accepted only with sr set (it is).
    ASSERT_EQ(wire::ParsePacket(buf, length, &pkt), wire::ParseError::kOk);
    EXPECT_EQ(pkt.payload_length, payload);
    EXPECT_EQ(pkt.bth.dest_qp(), f.dest_qpn);
    EXPECT_EQ(pkt.bth.psn(), f.psn);
    EXPECT_EQ(pkt.bth.pad_count(), pad);
    EXPECT_EQ(pkt.bth.pkey(), wire::kDefaultPkey);
    EXPECT_TRUE(pkt.bth.ack_req() && pkt.bth.solicited() && pkt.bth.becn() && pkt.bth.sr());
    if (info.reth_offset) {
      EXPECT_EQ(pkt.reth().va(), f.va);
      EXPECT_EQ(pkt.reth().rkey(), f.rkey);
      EXPECT_EQ(pkt.reth().dma_length(), f.dma_length);
    }
    if (info.atomic_eth_offset) {
      EXPECT_EQ(pkt.atomic_eth().va(), f.va);
      EXPECT_EQ(pkt.atomic_eth().swap_add(), f.swap_add);
      EXPECT_EQ(pkt.atomic_eth().compare(), f.compare);
    }
    if (info.aeth_offset) {
      EXPECT_EQ(pkt.aeth().syndrome(), f.syndrome);
      EXPECT_EQ(pkt.aeth().msn(), f.msn);
    }
    if (info.atomic_ack_eth_offset) {
      EXPECT_EQ(pkt.atomic_ack_eth().orig(), f.atomic_orig);
    }
    if (info.imm_offset) {
      EXPECT_EQ(pkt.imm().raw(), f.imm);
    }
    if (info.ieth_offset) {
      EXPECT_EQ(pkt.ieth().rkey(), f.inv_rkey);
    }
    if (info.deth_offset) {
      EXPECT_EQ(pkt.deth().qkey(), f.qkey);
      EXPECT_EQ(pkt.deth().src_qp(), f.src_qp);
    }
  }
}

}  // namespace
}  // namespace softrnic::engine
