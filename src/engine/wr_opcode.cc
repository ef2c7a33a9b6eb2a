#include "engine/wr_opcode.h"

#include <array>

#include "wire/opcode.h"

namespace softrnic::engine {
namespace {

using namespace wire::op;

// A message that fits the transport's first/middle/last/only pattern.
constexpr MessageOpcodes Message(uint8_t first, uint8_t middle, uint8_t last, uint8_t only) {
  return MessageOpcodes{first, middle, last, only};
}
// A one-packet request (READ request, atomics, UD SEND).
constexpr MessageOpcodes OnePacket(uint8_t only) {
  return MessageOpcodes{kNoPacketOpcode, kNoPacketOpcode, kNoPacketOpcode, only};
}

constexpr uint8_t kConnected = kOnRc | kOnUc;
constexpr uint8_t kAll = kOnRc | kOnUc | kOnUd;

constexpr std::array<WrOpcodeInfo, 16> BuildTable() {
  std::array<WrOpcodeInfo, 16> t{};
  auto row = [&t](WrOpcode op) -> WrOpcodeInfo& { return t[static_cast<uint8_t>(op)]; };
  row(WrOpcode::kRdmaWrite) = {
      .name = "RDMA_WRITE", .qp_types = kConnected, .remote_right = kRemoteWrite,
      .inline_ok = true, .wc_opcode = WcOpcode::kRdmaWrite,
      .rc = Message(kRcWriteFirst, kRcWriteMiddle, kRcWriteLast, kRcWriteOnly),
      .uc = Message(kUcWriteFirst, kUcWriteMiddle, kUcWriteLast, kUcWriteOnly)};
  row(WrOpcode::kRdmaWriteWithImm) = {
      .name = "RDMA_WRITE_WITH_IMM", .qp_types = kConnected, .consumes_recv_wqe = true,
      .remote_right = kRemoteWrite, .inline_ok = true, .wc_opcode = WcOpcode::kRdmaWrite,
      .rc = Message(kRcWriteFirst, kRcWriteMiddle, kRcWriteLastImm, kRcWriteOnlyImm),
      .uc = Message(kUcWriteFirst, kUcWriteMiddle, kUcWriteLastImm, kUcWriteOnlyImm)};
  row(WrOpcode::kSend) = {
      .name = "SEND", .qp_types = kAll, .consumes_recv_wqe = true, .inline_ok = true,
      .wc_opcode = WcOpcode::kSend,
      .rc = Message(kRcSendFirst, kRcSendMiddle, kRcSendLast, kRcSendOnly),
      .uc = Message(kUcSendFirst, kUcSendMiddle, kUcSendLast, kUcSendOnly),
      .ud = OnePacket(kUdSendOnly)};
  row(WrOpcode::kSendWithImm) = {
      .name = "SEND_WITH_IMM", .qp_types = kAll, .consumes_recv_wqe = true, .inline_ok = true,
      .wc_opcode = WcOpcode::kSend,
      .rc = Message(kRcSendFirst, kRcSendMiddle, kRcSendLastImm, kRcSendOnlyImm),
      .uc = Message(kUcSendFirst, kUcSendMiddle, kUcSendLastImm, kUcSendOnlyImm),
      .ud = OnePacket(kUdSendOnlyImm)};
  row(WrOpcode::kSendWithInv) = {
      .name = "SEND_WITH_INV", .qp_types = kOnRc, .consumes_recv_wqe = true, .inline_ok = true,
      .wc_opcode = WcOpcode::kSend,
      .rc = Message(kRcSendFirst, kRcSendMiddle, kRcSendLastInv, kRcSendOnlyInv)};
  row(WrOpcode::kRdmaRead) = {
      .name = "RDMA_READ", .qp_types = kOnRc, .read = true, .remote_right = kRemoteRead,
      .wc_opcode = WcOpcode::kRdmaRead, .rc = OnePacket(kRcReadRequest)};
  row(WrOpcode::kAtomicCmpSwp) = {
      .name = "ATOMIC_CMP_AND_SWP", .qp_types = kOnRc, .atomic = true,
      .remote_right = kRemoteAtomic, .wc_opcode = WcOpcode::kCompSwap,
      .rc = OnePacket(kRcCompareSwap)};
  row(WrOpcode::kAtomicFetchAdd) = {
      .name = "ATOMIC_FETCH_AND_ADD", .qp_types = kOnRc, .atomic = true,
      .remote_right = kRemoteAtomic, .wc_opcode = WcOpcode::kFetchAdd,
      .rc = OnePacket(kRcFetchAdd)};
  row(WrOpcode::kAtomicWrite) = {
      .name = "ATOMIC_WRITE", .qp_types = kOnRc, .atomic_write = true,
      .remote_right = kRemoteWrite, .wc_opcode = WcOpcode::kAtomicWrite,
      .rc = OnePacket(kRcAtomicWrite)};
  // Local operations on memory windows (memory_window.h): executed by the
  // requester in send-queue order, no packet (IBA 10.6.7.2.3, 10.6.7.2.5).
  // Posted on RC and UC, the transports whose QPs can carry windows.
  row(WrOpcode::kLocalInv) = {.name = "LOCAL_INV", .qp_types = kOnRc | kOnUc, .local = true,
                              .wc_opcode = WcOpcode::kLocalInv};
  row(WrOpcode::kBindMw) = {.name = "BIND_MW", .qp_types = kOnRc | kOnUc, .local = true,
                            .wc_opcode = WcOpcode::kBindMw};
  return t;
}

constexpr std::array<WrOpcodeInfo, 16> kTable = BuildTable();
constexpr WrOpcodeInfo kUnknown{};

}  // namespace

const WrOpcodeInfo& GetWrOpcodeInfo(uint32_t value) {
  return value < kTable.size() ? kTable[value] : kUnknown;
}

}  // namespace softrnic::engine
