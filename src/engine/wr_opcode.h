// The work-request opcode table: for each WrOpcode (enum ibv_wr_opcode),
// where it may be posted, what it does at the target, how it completes and
// which packets carry it.
//
// It sits beside the packet-opcode table (wire/opcode.h), as Linux rxe's
// rxe_wr_opcode_info[] sits beside rxe_opcode[]: the packet table says what
// a packet carries, this one maps a work request onto packets. Every place
// that asks "is this a READ or an atomic?", "which right does it need?",
// "which packet opcode comes next?" asks here (verbs TranslateSendWr,
// Device::PostSend, the requester, completer, selective retransmission and
// the same-host direct path), so adding an opcode is a row here, a row in
// the packet table and one execute case in the responder (docs/engine.md,
// "Adding an opcode").
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/types.h"
#include "wire/opcode.h"

namespace softrnic::engine {

// A position in a message that a transport does not carry.
inline constexpr uint8_t kNoPacketOpcode = 0xFF;

// The packet opcodes of one message on one transport by position (IBA 9.2
// table 38; a one-packet message is "only").
struct MessageOpcodes {
  uint8_t first = kNoPacketOpcode;
  uint8_t middle = kNoPacketOpcode;
  uint8_t last = kNoPacketOpcode;
  uint8_t only = kNoPacketOpcode;

  // The opcode of the packet that starts (first) and/or ends (last) the
  // message.
  constexpr uint8_t At(bool first_packet, bool last_packet) const {
    if (first_packet && last_packet) return only;
    if (first_packet) return first;
    return last_packet ? last : middle;
  }
};

// One bit per QpType a WR opcode may be posted on.
enum WrQpTypes : uint8_t { kOnRc = 1, kOnUc = 2, kOnUd = 4 };

struct WrOpcodeInfo {
  std::string_view name;  // as ibv_wr_opcode_str(3); empty: no such opcode
  // Where it may be posted (IBA 9.2 table 38: UC has no READ, atomics or
  // SEND with Invalidate; UD only SEND). 0: softrnic does not offer it;
  // PostSend says EINVAL.
  uint8_t qp_types = 0;
  // Executed by the requester itself, no packet (BIND_MW, LOCAL_INV).
  bool local = false;
  bool read = false;    // RDMA READ: the response carries the data
  bool atomic = false;  // one naturally aligned 8-byte word (IBA 9.4.5)
  // ATOMIC WRITE (IBA 1.5; rxe): 8 bytes, given at post time (SendWr::
  // compare_add), stored at a naturally aligned remote word as one store;
  // needs the remote write right and completes on the ACK, like a WRITE.
  bool atomic_write = false;
  // The target consumes a receive WQE and completes it (SEND*, WRITE with
  // immediate): only these can meet an empty receive queue (RNR, IBA
  // 9.7.5.1.6), and only the others may bypass the target's engine.
  bool consumes_recv_wqe = false;
  // The access right the target's QP and region must grant (IBA 10.6.7,
  // an Access bit); 0: the request names no remote memory.
  uint32_t remote_right = 0;
  // IBV_SEND_INLINE copies the data at post time. READ and atomics write
  // into their SGEs, so for them the flag is ignored.
  bool inline_ok = false;
  WcOpcode wc_opcode = WcOpcode::kSend;  // the send completion's opcode
  MessageOpcodes rc, uc, ud;             // packet opcodes per transport

  constexpr bool known() const { return !name.empty(); }
  constexpr bool PostableOn(QpType t) const { return qp_types & TypeBit(t); }
  // Takes one of max_rd_atomic's slots (IBA 9.5, 10.8.3.3 fence) and
  // completes only on its response (READ response, atomic ACK), never on a
  // plain ACK: an ACK past it means the response was lost (IBA 9.7.5.2.3).
  constexpr bool read_or_atomic() const { return read || atomic; }
  // The operand rule: exactly one naturally aligned 8-byte word at the
  // remote address (IBA 9.4.5, C9-30), checked at post and by the responder.
  constexpr bool one_word() const { return atomic || atomic_write; }
  constexpr const MessageOpcodes& On(QpType t) const {
    return t == QpType::kRc ? rc : t == QpType::kUc ? uc : ud;
  }

 private:
  static constexpr uint8_t TypeBit(QpType t) {
    return t == QpType::kRc ? kOnRc : t == QpType::kUc ? kOnUc : kOnUd;
  }
};

// The packets of an RC READ's response by position (IBA 9.2 table 38), the
// responder's side of the READ row: first, last and only carry an AETH.
inline constexpr MessageOpcodes kRcReadResponses{
    wire::op::kRcReadResponseFirst, wire::op::kRcReadResponseMiddle, wire::op::kRcReadResponseLast,
    wire::op::kRcReadResponseOnly};

// The row of any value (one read from a C caller's enum field included):
// values without a row get an empty one (known() false, postable nowhere).
const WrOpcodeInfo& GetWrOpcodeInfo(uint32_t value);
inline const WrOpcodeInfo& GetWrOpcodeInfo(WrOpcode op) {
  return GetWrOpcodeInfo(static_cast<uint32_t>(op));
}

}  // namespace softrnic::engine
