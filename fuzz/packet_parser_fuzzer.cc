// libFuzzer target: the wire layer on arbitrary bytes.
//
// The input is one UDP payload (BTH .. ICRC). It goes through
// wire::ParsePacket, then, if accepted, through every header accessor the
// opcode table says is present, and through CheckIcrc/AppendIcrc for an IPv4
// and an IPv6 header. The input lives in a buffer of exactly its size, so
// AddressSanitizer reports any read past `length`.
//
// Properties checked (abort on violation):
//  - an accepted packet's headers, payload, pad and ICRC add up to its
//    length, and the payload lies inside the buffer;
//  - the opcode table agrees with itself (flag <-> offset, offsets inside
//    header_length);
//  - the BTH round-trips through its setters (reserved bits aside);
//  - AppendIcrc followed by CheckIcrc accepts, and flipping one byte after
//    the masked BTH byte makes CheckIcrc reject.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace {

using namespace softrnic::wire;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "packet_parser_fuzzer: property violated: %s\n", what);
  std::abort();
}
#define CHECK(cond)              \
  do {                           \
    if (!(cond)) Fail(#cond);    \
  } while (0)

// Keeps values alive so the accessors are not optimised away.
volatile uint64_t g_sink;

void CheckOpcodeTable(const OpcodeInfo& info) {
  const struct {
    uint32_t flag;
    uint8_t offset;
    size_t size;
  } headers[] = {
      {kHasReth, info.reth_offset, sizeof(Reth)},
      {kHasAeth, info.aeth_offset, sizeof(Aeth)},
      {kHasAtomicEth, info.atomic_eth_offset, sizeof(AtomicEth)},
      {kHasAtomicAckEth, info.atomic_ack_eth_offset, sizeof(AtomicAckEth)},
      {kHasImm, info.imm_offset, sizeof(ImmDt)},
      {kHasIeth, info.ieth_offset, sizeof(Ieth)},
      {kHasDeth, info.deth_offset, sizeof(Deth)},
  };
  for (const auto& h : headers) {
    CHECK(info.has(h.flag) == (h.offset != 0));
    if (h.offset != 0) {
      CHECK(h.offset >= sizeof(Bth));
      CHECK(h.offset + h.size <= info.header_length);
    }
  }
  CHECK(info.header_length >= sizeof(Bth));
}

void TouchHeaders(const Packet& pkt) {
  const OpcodeInfo& info = *pkt.info;
  uint64_t acc = pkt.bth.opcode() ^ pkt.bth.pkey() ^ pkt.bth.dest_qp() ^ pkt.bth.psn() ^
                 pkt.bth.pad_count() ^ pkt.bth.tver() ^ pkt.bth.solicited() ^
                 pkt.bth.mig_req() ^ pkt.bth.fecn() ^ pkt.bth.becn() ^ pkt.bth.ack_req();
  if (info.reth_offset) {
    const Reth r = pkt.reth();
    acc ^= r.va() ^ r.rkey() ^ r.dma_length();
  }
  if (info.aeth_offset) {
    const Aeth a = pkt.aeth();
    acc ^= a.syndrome() ^ a.msn() ^ static_cast<uint8_t>(SyndromeKind(a.syndrome())) ^
           SyndromeValue(a.syndrome());
  }
  if (info.atomic_eth_offset) {
    const AtomicEth a = pkt.atomic_eth();
    acc ^= a.va() ^ a.rkey() ^ a.swap_add() ^ a.compare();
  }
  if (info.atomic_ack_eth_offset) acc ^= pkt.atomic_ack_eth().orig();
  if (info.imm_offset) acc ^= pkt.imm().raw();
  if (info.ieth_offset) acc ^= pkt.ieth().rkey();
  if (info.deth_offset) {
    const Deth d = pkt.deth();
    acc ^= d.qkey() ^ d.src_qp();
  }
  // The payload is readable to its last byte.
  for (uint32_t i = 0; i < pkt.payload_length; ++i) acc += pkt.payload[i];
  g_sink = acc;
}

void CheckBthRoundTrip(const Bth& in) {
  Bth out;
  out.set_opcode(in.opcode());
  out.set_solicited(in.solicited());
  out.set_mig_req(in.mig_req());
  out.set_pad_count(in.pad_count());
  out.set_tver(in.tver());
  out.set_pkey(in.pkey());
  out.set_fecn(in.fecn());
  out.set_becn(in.becn());
  out.set_dest_qp(in.dest_qp());
  out.set_ack_req(in.ack_req());
  out.set_psn(in.psn());
  Bth masked = in;
  masked.b[4] &= 0xC0;  // resv6
  masked.b[8] &= 0x80;  // resv7
  CHECK(std::memcmp(masked.b.data(), out.b.data(), sizeof(Bth)) == 0);
}

void CheckIcrcProperties(const uint8_t* data, size_t size) {
  IpUdpFields v4;
  const uint8_t a4[4] = {10, 0, 0, 1}, b4[4] = {10, 0, 0, 2};
  std::memcpy(v4.src_ip, a4, 4);
  std::memcpy(v4.dst_ip, b4, 4);
  v4.src_port = 49152;
  IpUdpFields v6;
  v6.ipv6 = true;
  for (int i = 0; i < 16; ++i) {
    v6.src_ip[i] = static_cast<uint8_t>(0x20 + i);
    v6.dst_ip[i] = static_cast<uint8_t>(0x40 + i);
  }
  v6.src_port = 50000;
  g_sink = CheckIcrc(v4, data, size) + CheckIcrc(v6, data, size);
  if (size < sizeof(Bth) + kIcrcSize) return;  // CheckIcrc rejects these outright
  std::vector<uint8_t> copy(data, data + size);
  for (const IpUdpFields* ip : {&v4, &v6}) {
    AppendIcrc(*ip, copy.data(), copy.size());
    CHECK(CheckIcrc(*ip, copy.data(), copy.size()));
    // A single changed byte that the ICRC covers must be caught. Byte 4 of
    // the BTH is masked (FECN/BECN/resv6); the CRC detects every single-byte
    // error, so any other byte before the ICRC will do.
    {
      const size_t at = 5 + (copy[0] % (size - kIcrcSize - 5));
      copy[at] ^= 0x5A;
      CHECK(!CheckIcrc(*ip, copy.data(), copy.size()));
      copy[at] ^= 0x5A;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Exactly-sized heap copy: the parser must never look past it.
  uint8_t* buf = static_cast<uint8_t*>(std::malloc(size ? size : 1));
  if (size) std::memcpy(buf, data, size);

  Packet pkt;
  const ParseError err = ParsePacket(buf, size, &pkt);
  CHECK(!ParseErrorName(err).empty());
  if (size > 0 && GetOpcodeInfo(buf[0]).valid()) CheckOpcodeTable(GetOpcodeInfo(buf[0]));
  if (size >= sizeof(Bth)) {
    Bth bth;
    std::memcpy(bth.b.data(), buf, sizeof(Bth));
    CheckBthRoundTrip(bth);
  }
  if (err == ParseError::kOk) {
    CHECK(pkt.info != nullptr && pkt.info->valid());
    CHECK(pkt.data == buf && pkt.length == size);
    CHECK(pkt.bth.tver() == 0);
    const size_t total =
        size_t{pkt.info->header_length} + pkt.payload_length + pkt.bth.pad_count() + kIcrcSize;
    CHECK(total == size);
    CHECK(pkt.payload == buf + pkt.info->header_length);
    CHECK(pkt.payload + pkt.payload_length <= buf + size - kIcrcSize);
    CHECK((pkt.payload_length + pkt.bth.pad_count()) % 4 == 0);
    // The one exception: a softrnic SACK (an ACK with the sr bit) carries a
    // bitmap of at most kSackMaxBytes, a multiple of 4, no pad (headers.h).
    if (!pkt.info->has(kHasPayload)) {
      if (pkt.opcode() == op::kRcAck && pkt.bth.sr()) {
        CHECK(pkt.payload_length <= kSackMaxBytes && pkt.payload_length % 4 == 0 &&
              pkt.bth.pad_count() == 0);
      } else {
        CHECK(pkt.payload_length == 0);
      }
    }
    CHECK(ServiceOf(pkt.opcode()) != Service::kInvalid);
    TouchHeaders(pkt);
  } else {
    // Rejections are consistent with the bytes.
    if (size < sizeof(Bth) + kIcrcSize) CHECK(err == ParseError::kTooShort);
  }
  CheckIcrcProperties(buf, size);
  std::free(buf);
  return 0;
}
