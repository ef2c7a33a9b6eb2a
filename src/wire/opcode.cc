#include "wire/opcode.h"

#include <array>

#include "wire/headers.h"

namespace softrnic::wire {
namespace {

constexpr uint8_t kBth = sizeof(Bth);

// Lays out the extension headers in the order IBA 9.2 fixes:
// BTH, XRCETH | DETH, RETH | AtomicETH, AETH, AtomicAckETH, ImmDt | IETH,
// payload.
constexpr OpcodeInfo Make(std::string_view name, uint32_t flags) {
  OpcodeInfo info;
  info.name = name;
  info.flags = flags | kValid;
  uint8_t off = kBth;
  if (flags & kHasXrcEth) { info.xrceth_offset = off; off += sizeof(XrcEth); }
  if (flags & kHasDeth) { info.deth_offset = off; off += sizeof(Deth); }
  if (flags & kHasReth) { info.reth_offset = off; off += sizeof(Reth); }
  if (flags & kHasAtomicEth) { info.atomic_eth_offset = off; off += sizeof(AtomicEth); }
  if (flags & kHasAeth) { info.aeth_offset = off; off += sizeof(Aeth); }
  if (flags & kHasAtomicAckEth) { info.atomic_ack_eth_offset = off; off += sizeof(AtomicAckEth); }
  if (flags & kHasImm) { info.imm_offset = off; off += sizeof(ImmDt); }
  if (flags & kHasIeth) { info.ieth_offset = off; off += sizeof(Ieth); }
  info.header_length = off;
  return info;
}

constexpr uint32_t kReq = kIsRequest;
constexpr uint32_t kResp = kIsResponse;
constexpr uint32_t kSend = kIsSend | kHasPayload | kReq;
constexpr uint32_t kWrite = kIsWrite | kHasPayload | kReq;

// The names Wireshark's InfiniBand dissector uses for the XRC opcodes,
// indexed by the low five bits (empty where RC has no opcode).
constexpr std::string_view kXrcNames[0x18] = {
    "XRC_SEND_FIRST", "XRC_SEND_MIDDLE", "XRC_SEND_LAST",
    "XRC_SEND_LAST_WITH_IMMEDIATE", "XRC_SEND_ONLY", "XRC_SEND_ONLY_WITH_IMMEDIATE",
    "XRC_RDMA_WRITE_FIRST", "XRC_RDMA_WRITE_MIDDLE", "XRC_RDMA_WRITE_LAST",
    "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "XRC_RDMA_WRITE_ONLY",
    "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", "XRC_RDMA_READ_REQUEST",
    "XRC_RDMA_READ_RESPONSE_FIRST", "XRC_RDMA_READ_RESPONSE_MIDDLE",
    "XRC_RDMA_READ_RESPONSE_LAST", "XRC_RDMA_READ_RESPONSE_ONLY", "XRC_ACKNOWLEDGE",
    "XRC_ATOMIC_ACKNOWLEDGE", "XRC_COMPARE_SWAP", "XRC_FETCH_ADD", "",
    "XRC_SEND_LAST_WITH_INVALIDATE", "XRC_SEND_ONLY_WITH_INVALIDATE"};

constexpr std::array<OpcodeInfo, 256> BuildTable() {
  std::array<OpcodeInfo, 256> t{};
  // Reliable and unreliable connected share operation codes in the low five
  // bits (IBA table 38); UC lacks READ, atomics and ACKs.
  for (uint8_t base : {uint8_t{0x00}, uint8_t{0x20}}) {
    const bool rc = base == 0x00;
    t[base | 0x00] = Make(rc ? "RC_SEND_FIRST" : "UC_SEND_FIRST", kSend | kFirst);
    t[base | 0x01] = Make(rc ? "RC_SEND_MIDDLE" : "UC_SEND_MIDDLE", kSend | kMiddle);
    t[base | 0x02] = Make(rc ? "RC_SEND_LAST" : "UC_SEND_LAST", kSend | kLast);
    t[base | 0x03] = Make(rc ? "RC_SEND_LAST_WITH_IMMEDIATE" : "UC_SEND_LAST_WITH_IMMEDIATE",
                          kSend | kLast | kHasImm);
    t[base | 0x04] = Make(rc ? "RC_SEND_ONLY" : "UC_SEND_ONLY", kSend | kOnly);
    t[base | 0x05] = Make(rc ? "RC_SEND_ONLY_WITH_IMMEDIATE" : "UC_SEND_ONLY_WITH_IMMEDIATE",
                          kSend | kOnly | kHasImm);
    t[base | 0x06] = Make(rc ? "RC_RDMA_WRITE_FIRST" : "UC_RDMA_WRITE_FIRST",
                          kWrite | kFirst | kHasReth);
    t[base | 0x07] = Make(rc ? "RC_RDMA_WRITE_MIDDLE" : "UC_RDMA_WRITE_MIDDLE", kWrite | kMiddle);
    t[base | 0x08] = Make(rc ? "RC_RDMA_WRITE_LAST" : "UC_RDMA_WRITE_LAST", kWrite | kLast);
    t[base | 0x09] = Make(rc ? "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE"
                             : "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
                          kWrite | kLast | kHasImm);
    t[base | 0x0A] = Make(rc ? "RC_RDMA_WRITE_ONLY" : "UC_RDMA_WRITE_ONLY",
                          kWrite | kOnly | kHasReth);
    t[base | 0x0B] = Make(rc ? "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"
                             : "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
                          kWrite | kOnly | kHasReth | kHasImm);
  }
  t[op::kRcReadRequest] = Make("RC_RDMA_READ_REQUEST", kIsReadRequest | kReq | kOnly | kHasReth);
  t[op::kRcReadResponseFirst] = Make("RC_RDMA_READ_RESPONSE_FIRST",
                                     kIsReadResponse | kResp | kFirst | kHasAeth | kHasPayload);
  t[op::kRcReadResponseMiddle] = Make("RC_RDMA_READ_RESPONSE_MIDDLE",
                                      kIsReadResponse | kResp | kMiddle | kHasPayload);
  t[op::kRcReadResponseLast] = Make("RC_RDMA_READ_RESPONSE_LAST",
                                    kIsReadResponse | kResp | kLast | kHasAeth | kHasPayload);
  t[op::kRcReadResponseOnly] = Make("RC_RDMA_READ_RESPONSE_ONLY",
                                    kIsReadResponse | kResp | kOnly | kHasAeth | kHasPayload);
  t[op::kRcAck] = Make("RC_ACKNOWLEDGE", kIsAck | kResp | kOnly | kHasAeth);
  t[op::kRcAtomicAck] = Make("RC_ATOMIC_ACKNOWLEDGE",
                             kIsAck | kResp | kOnly | kHasAeth | kHasAtomicAckEth);
  t[op::kRcCompareSwap] = Make("RC_COMPARE_SWAP", kIsAtomic | kReq | kOnly | kHasAtomicEth);
  t[op::kRcFetchAdd] = Make("RC_FETCH_ADD", kIsAtomic | kReq | kOnly | kHasAtomicEth);
  // A WRITE of one word in one packet (kIsWrite: the responder's WRITE
  // checks apply; ExecuteWrite adds the word's).
  t[op::kRcAtomicWrite] = Make("RC_ATOMIC_WRITE", kWrite | kOnly | kHasReth | kIsAtomicWrite);
  t[op::kRcSendLastInv] = Make("RC_SEND_LAST_WITH_INVALIDATE", kSend | kLast | kHasIeth);
  t[op::kRcSendOnlyInv] = Make("RC_SEND_ONLY_WITH_INVALIDATE", kSend | kOnly | kHasIeth);
  t[op::kUdSendOnly] = Make("UD_SEND_ONLY", kSend | kOnly | kHasDeth);
  t[op::kUdSendOnlyImm] = Make("UD_SEND_ONLY_WITH_IMMEDIATE", kSend | kOnly | kHasDeth | kHasImm);
  // XRC (IBA 9.2 table 38): RC's operations under the 101b prefix, each
  // request with an XRCETH after the BTH, responses as RC's.
  for (uint8_t code = 0x00; code <= 0x17; ++code) {
    const OpcodeInfo& rc = t[code];
    if (!rc.valid()) continue;
    uint32_t flags = rc.flags & ~kValid;
    if (flags & kIsRequest) flags |= kHasXrcEth;
    t[XrcOpcode(code)] = Make(kXrcNames[code], flags);
  }
  // A CNP carries 16 reserved bytes after the BTH (A17.9.3); treat them as
  // payload so the length check covers them.
  t[op::kCnp] = Make("CNP", kIsCnp | kHasPayload);
  return t;
}

constexpr std::array<OpcodeInfo, 256> kTable = BuildTable();

}  // namespace

const OpcodeInfo& GetOpcodeInfo(uint8_t opcode) { return kTable[opcode]; }

}  // namespace softrnic::wire
