// IBTA transport headers used by RoCE v2 (IBA Vol 1 ch. 9, Annex A17).
//
// Each header is a fixed-size byte array with named big-endian accessors.
// Sizes are static_asserted against the spec. Views never own memory; the
// packet parser (packet.h) guarantees a view is only formed over bytes that
// exist.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "wire/byte_order.h"

namespace softrnic::wire {

inline constexpr uint16_t kRoceV2UdpPort = 4791;
inline constexpr uint32_t kPsnMask = 0x00FFFFFF;
inline constexpr uint32_t kQpnMask = 0x00FFFFFF;
inline constexpr size_t kIcrcSize = 4;
inline constexpr uint16_t kDefaultPkey = 0xFFFF;

// Base Transport Header, IBA 9.2. 12 bytes.
//   byte 0: opcode
//   byte 1: SE(1) M(1) PadCnt(2) TVer(4)
//   bytes 2-3: P_Key
//   byte 4: FECN(1) BECN(1) resv6  (masked to ones in the ICRC, A17.8)
//   bytes 5-7: DestQP
//   byte 8: AckReq(1) resv7
//   bytes 9-11: PSN
struct Bth {
  std::array<uint8_t, 12> b{};

  uint8_t opcode() const { return b[0]; }
  bool solicited() const { return b[1] & 0x80; }
  bool mig_req() const { return b[1] & 0x40; }
  uint8_t pad_count() const { return (b[1] >> 4) & 0x3; }
  uint8_t tver() const { return b[1] & 0xF; }
  uint16_t pkey() const { return LoadBe16(&b[2]); }
  bool fecn() const { return b[4] & 0x80; }
  bool becn() const { return b[4] & 0x40; }
  uint32_t dest_qp() const { return LoadBe24(&b[5]); }
  bool ack_req() const { return b[8] & 0x80; }
  // softrnic's selective-retransmission bit: the most significant bit of
  // BTH byte 8's resv7 field. IBA 9.2 (C9-3/C9-4 style rule for reserved
  // fields): reserved bits are sent as 0 and ignored on receive, so a
  // standard peer neither sees a difference nor sets it. softrnic sets it on
  // its requests and responses when SOFTRNIC_RETRANSMIT=selective, and uses
  // the selective mode on a QP only once the peer has shown it
  // (docs/loss.md).
  bool sr() const { return b[8] & 0x40; }
  // softrnic's placement bits, the next two of resv7, honoured only on
  // packets that came through a same-host shared-memory ring (the engine
  // clears them on every other packet, as IBA 9.2 asks of reserved bits):
  // a WRITE packet with `placed` set carries only part of its range, the
  // prefix (`placed_suffix` clear) or the suffix (set); the sender wrote the
  // rest of the range directly into the target's shared pages before it
  // sent the packet (docs/shm.md, "Partly shared targets").
  bool placed() const { return b[8] & 0x20; }
  bool placed_suffix() const { return b[8] & 0x10; }
  // With `placed` and no payload: the packet stands for 1 + placed_run()
  // PMTUs and PSNs, all placed (BTH byte 4's resv6 field; a run never
  // holds the message's last packet).
  uint8_t placed_run() const { return b[4] & 0x3F; }
  uint32_t psn() const { return LoadBe24(&b[9]); }

  void set_opcode(uint8_t v) { b[0] = v; }
  void set_solicited(bool v) { b[1] = static_cast<uint8_t>((b[1] & 0x7F) | (v ? 0x80 : 0)); }
  void set_mig_req(bool v) { b[1] = static_cast<uint8_t>((b[1] & 0xBF) | (v ? 0x40 : 0)); }
  void set_pad_count(uint8_t v) { b[1] = static_cast<uint8_t>((b[1] & 0xCF) | ((v & 3) << 4)); }
  void set_tver(uint8_t v) { b[1] = static_cast<uint8_t>((b[1] & 0xF0) | (v & 0xF)); }
  void set_pkey(uint16_t v) { StoreBe16(&b[2], v); }
  void set_fecn(bool v) { b[4] = static_cast<uint8_t>((b[4] & 0x7F) | (v ? 0x80 : 0)); }
  void set_becn(bool v) { b[4] = static_cast<uint8_t>((b[4] & 0xBF) | (v ? 0x40 : 0)); }
  void set_dest_qp(uint32_t v) { StoreBe24(&b[5], v & kQpnMask); }
  void set_ack_req(bool v) { b[8] = static_cast<uint8_t>((b[8] & 0x7F) | (v ? 0x80 : 0)); }
  void set_sr(bool v) { b[8] = static_cast<uint8_t>((b[8] & 0xBF) | (v ? 0x40 : 0)); }
  void set_placed_run(uint8_t v) { b[4] = static_cast<uint8_t>((b[4] & 0xC0) | (v & 0x3F)); }
  void set_placed(bool v) { b[8] = static_cast<uint8_t>((b[8] & 0xDF) | (v ? 0x20 : 0)); }
  void set_placed_suffix(bool v) {
    b[8] = static_cast<uint8_t>((b[8] & 0xEF) | (v ? 0x10 : 0));
  }
  void set_psn(uint32_t v) { StoreBe24(&b[9], v & kPsnMask); }
};
static_assert(sizeof(Bth) == 12);

// RDMA Extended Transport Header, IBA 9.3.3. 16 bytes.
struct Reth {
  std::array<uint8_t, 16> b{};
  uint64_t va() const { return LoadBe64(&b[0]); }
  uint32_t rkey() const { return LoadBe32(&b[8]); }
  uint32_t dma_length() const { return LoadBe32(&b[12]); }
  void set_va(uint64_t v) { StoreBe64(&b[0], v); }
  void set_rkey(uint32_t v) { StoreBe32(&b[8], v); }
  void set_dma_length(uint32_t v) { StoreBe32(&b[12], v); }
};
static_assert(sizeof(Reth) == 16);

// ACK Extended Transport Header, IBA 9.3.5. 4 bytes: Syndrome(8) MSN(24).
struct Aeth {
  std::array<uint8_t, 4> b{};
  uint8_t syndrome() const { return b[0]; }
  uint32_t msn() const { return LoadBe24(&b[1]); }
  void set_syndrome(uint8_t v) { b[0] = v; }
  void set_msn(uint32_t v) { StoreBe24(&b[1], v & 0xFFFFFF); }
};
static_assert(sizeof(Aeth) == 4);

// AETH syndrome, IBA 9.7.5.2.1 table 44: bits 6:5 select the kind.
enum class AckKind : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };
// NAK codes (syndrome bits 4:0 when kind is kNak), IBA table 45.
enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};
inline constexpr AckKind SyndromeKind(uint8_t syndrome) {
  return static_cast<AckKind>((syndrome >> 5) & 0x3);
}
inline constexpr uint8_t SyndromeValue(uint8_t syndrome) { return syndrome & 0x1F; }
inline constexpr uint8_t MakeSyndrome(AckKind kind, uint8_t value) {
  return static_cast<uint8_t>((static_cast<uint8_t>(kind) << 5) | (value & 0x1F));
}
// Credit count 0x1F in an ACK means "no credits advertised" (IBA 9.7.5.2.1).
inline constexpr uint8_t kAckSyndromeNoCredit = MakeSyndrome(AckKind::kAck, 0x1F);

// Selective acknowledgement (softrnic only, docs/loss.md): an RC ACK packet
// (opcode 0x11) with the BTH sr bit set, AETH syndrome "NAK: PSN sequence
// error", BTH PSN = the responder's expected PSN (everything before it is
// acknowledged, as for any NAK, IBA 9.7.5.2.2), and a payload bitmap: bit i
// (byte i/8, bit i%8, LSB first) says PSN epsn+1+i has been received and is
// kept. At most kSackMaxBytes, a multiple of 4 (no pad). Only ever sent to a
// peer that set the sr bit; the parser accepts a payload on an ACK only with
// the bit set, so standard ACKs are checked exactly as before.
inline constexpr uint32_t kSackMaxBytes = 64;
inline constexpr uint32_t kSackMaxBits = kSackMaxBytes * 8;

// XRC Extended Transport Header (XRCETH, IBA 9.3). 4 bytes: reserved(8), the XRC
// SRQ number(24) the request's receive WQE comes from. Follows the BTH in
// every XRC request packet.
struct XrcEth {
  std::array<uint8_t, 4> b{};
  uint32_t srqn() const { return LoadBe24(&b[1]); }
  void set_srqn(uint32_t v) { StoreBe24(&b[1], v & 0xFFFFFF); }
};
static_assert(sizeof(XrcEth) == 4);

// Atomic Extended Transport Header, IBA 9.3.4. 28 bytes.
struct AtomicEth {
  std::array<uint8_t, 28> b{};
  uint64_t va() const { return LoadBe64(&b[0]); }
  uint32_t rkey() const { return LoadBe32(&b[8]); }
  uint64_t swap_add() const { return LoadBe64(&b[12]); }
  uint64_t compare() const { return LoadBe64(&b[20]); }
  void set_va(uint64_t v) { StoreBe64(&b[0], v); }
  void set_rkey(uint32_t v) { StoreBe32(&b[8], v); }
  void set_swap_add(uint64_t v) { StoreBe64(&b[12], v); }
  void set_compare(uint64_t v) { StoreBe64(&b[20], v); }
};
static_assert(sizeof(AtomicEth) == 28);

// Atomic Acknowledge Extended Transport Header, IBA 9.5.3. 8 bytes.
struct AtomicAckEth {
  std::array<uint8_t, 8> b{};
  uint64_t orig() const { return LoadBe64(&b[0]); }
  void set_orig(uint64_t v) { StoreBe64(&b[0], v); }
};
static_assert(sizeof(AtomicAckEth) == 8);

// Immediate Data Extended Transport Header, IBA 9.3.6. 4 bytes, opaque.
struct ImmDt {
  std::array<uint8_t, 4> b{};
  // Immediate data is carried as given by the application (already in
  // network order in ibv_send_wr.imm_data), so it is copied, not swapped.
  uint32_t raw() const {
    uint32_t v;
    std::memcpy(&v, b.data(), 4);
    return v;
  }
  void set_raw(uint32_t v) { std::memcpy(b.data(), &v, 4); }
};
static_assert(sizeof(ImmDt) == 4);

// Invalidate Extended Transport Header, IBA 9.3.7. 4 bytes: the rkey.
struct Ieth {
  std::array<uint8_t, 4> b{};
  uint32_t rkey() const { return LoadBe32(&b[0]); }
  void set_rkey(uint32_t v) { StoreBe32(&b[0], v); }
};
static_assert(sizeof(Ieth) == 4);

// Datagram Extended Transport Header, IBA 9.3.2. 8 bytes: Q_Key, resv8, SrcQP.
struct Deth {
  std::array<uint8_t, 8> b{};
  uint32_t qkey() const { return LoadBe32(&b[0]); }
  uint32_t src_qp() const { return LoadBe24(&b[5]); }
  void set_qkey(uint32_t v) { StoreBe32(&b[0], v); }
  void set_src_qp(uint32_t v) {
    b[4] = 0;
    StoreBe24(&b[5], v & kQpnMask);
  }
};
static_assert(sizeof(Deth) == 8);

// Global Route Header, IBA 8.3. 40 bytes. Not carried by RoCE v2 (the IP
// header takes its place) but delivered in the first 40 bytes of a UD receive
// buffer, built from the IP header (IBA A17.4.5.1).
struct Grh {
  std::array<uint8_t, 40> b{};
  uint8_t ip_version() const { return b[0] >> 4; }
  uint8_t traffic_class() const { return static_cast<uint8_t>(((b[0] & 0xF) << 4) | (b[1] >> 4)); }
  uint32_t flow_label() const { return LoadBe32(&b[0]) & 0xFFFFF; }
  uint16_t payload_length() const { return LoadBe16(&b[4]); }
  uint8_t next_header() const { return b[6]; }
  uint8_t hop_limit() const { return b[7]; }
  const uint8_t* sgid() const { return &b[8]; }
  const uint8_t* dgid() const { return &b[24]; }

  void set_version_class_flow(uint8_t version, uint8_t tclass, uint32_t flow) {
    StoreBe32(&b[0], (uint32_t{version} << 28) | (uint32_t{tclass} << 20) | (flow & 0xFFFFF));
  }
  void set_payload_length(uint16_t v) { StoreBe16(&b[4], v); }
  void set_next_header(uint8_t v) { b[6] = v; }
  void set_hop_limit(uint8_t v) { b[7] = v; }
  uint8_t* mutable_sgid() { return &b[8]; }
  uint8_t* mutable_dgid() { return &b[24]; }
};
static_assert(sizeof(Grh) == 40);

// 24-bit PSN arithmetic (IBA 9.7.1: PSNs wrap modulo 2^24).
inline constexpr uint32_t PsnAdd(uint32_t psn, uint32_t n) { return (psn + n) & kPsnMask; }
// Signed distance a - b in the 24-bit circle, in [-2^23, 2^23).
inline constexpr int32_t PsnDiff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(((a - b) & kPsnMask) << 8) >> 8;
}

}  // namespace softrnic::wire
