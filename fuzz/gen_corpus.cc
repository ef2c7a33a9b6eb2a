// Writes the seed corpora of the fuzzers: a few valid packets of each
// opcode, built with the wire layer's own header types and opcode table.
//
//   gen_corpus OUT_DIR      writes OUT_DIR/<fuzzer>/* for packet_parser,
//                           responder, udp_receive, shm_ring, stats_file
//
// packet_parser seeds are bare packets (BTH .. ICRC, ICRC computed for
// 10.0.0.1 -> 10.0.0.2). responder seeds are record streams in the format
// described in responder_fuzzer.cc: [ctl][aux][sel][len lo][len hi][packet].
// The committed files in fuzz/corpus/ come from this program; rerun it after
// changing the record format (cmake --build <dir> --target fuzz_corpus).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "transport/host_nic/protocol.h"
#include "transport/shm_segment.h"
#include "transport/transport.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

namespace {

using namespace softrnic::wire;
using Bytes = std::vector<uint8_t>;

struct Fields {
  uint32_t dest_qp = 0x123;
  uint32_t psn = 0;
  bool ack_req = false;
  bool sr = false;  // softrnic's selective-retransmission bit (docs/loss.md)
  bool solicited = false;
  uint64_t va = 0x10;
  uint32_t rkey = 0x1234;
  uint32_t dma_length = 0;
  uint8_t syndrome = kAckSyndromeNoCredit;
  uint32_t msn = 0;
  uint64_t swap_add = 1;
  uint64_t compare = 0;
  uint64_t orig = 0x1122334455667788ull;
  uint32_t imm = 0xDEADBEEF;
  uint32_t qkey = 0x11111111;
  uint32_t src_qp = 0xA4;
};

Bytes Build(uint8_t opcode, uint32_t payload_len, const Fields& f = {}) {
  const OpcodeInfo& info = GetOpcodeInfo(opcode);
  const uint8_t pad = static_cast<uint8_t>((4 - (payload_len & 3)) & 3);
  Bytes p(info.header_length + payload_len + pad + kIcrcSize, 0);
  Bth bth;
  bth.set_opcode(opcode);
  bth.set_pkey(kDefaultPkey);
  bth.set_dest_qp(f.dest_qp);
  bth.set_psn(f.psn);
  bth.set_ack_req(f.ack_req);
  bth.set_solicited(f.solicited);
  bth.set_sr(f.sr);
  bth.set_pad_count(pad);
  std::memcpy(p.data(), bth.b.data(), sizeof(bth));
  if (info.reth_offset) {
    Reth r;
    r.set_va(f.va);
    r.set_rkey(f.rkey);
    r.set_dma_length(f.dma_length);
    std::memcpy(&p[info.reth_offset], r.b.data(), sizeof(r));
  }
  if (info.aeth_offset) {
    Aeth a;
    a.set_syndrome(f.syndrome);
    a.set_msn(f.msn);
    std::memcpy(&p[info.aeth_offset], a.b.data(), sizeof(a));
  }
  if (info.atomic_eth_offset) {
    AtomicEth a;
    a.set_va(f.va);
    a.set_rkey(f.rkey);
    a.set_swap_add(f.swap_add);
    a.set_compare(f.compare);
    std::memcpy(&p[info.atomic_eth_offset], a.b.data(), sizeof(a));
  }
  if (info.atomic_ack_eth_offset) {
    AtomicAckEth a;
    a.set_orig(f.orig);
    std::memcpy(&p[info.atomic_ack_eth_offset], a.b.data(), sizeof(a));
  }
  if (info.imm_offset) {
    ImmDt i;
    i.set_raw(f.imm);
    std::memcpy(&p[info.imm_offset], i.b.data(), sizeof(i));
  }
  if (info.ieth_offset) {
    Ieth i;
    i.set_rkey(f.rkey);
    std::memcpy(&p[info.ieth_offset], i.b.data(), sizeof(i));
  }
  if (info.deth_offset) {
    Deth d;
    d.set_qkey(f.qkey);
    d.set_src_qp(f.src_qp);
    std::memcpy(&p[info.deth_offset], d.b.data(), sizeof(d));
  }
  for (uint32_t i = 0; i < payload_len; ++i)
    p[info.header_length + i] = static_cast<uint8_t>(0x30 + i % 64);
  IpUdpFields ip;
  const uint8_t a[4] = {10, 0, 0, 1}, b[4] = {10, 0, 0, 2};
  std::memcpy(ip.src_ip, a, 4);
  std::memcpy(ip.dst_ip, b, 4);
  ip.src_port = 49152;
  AppendIcrc(ip, p.data(), p.size());
  return p;
}

// Record control bits (responder_fuzzer.cc).
enum : uint8_t {
  kQpRc = 0, kQpRcSrq = 1, kQpUc = 2, kQpUd = 3,
  kKeepQpn = 0x04, kPatchPsn = 0x08, kPatchKeys = 0x10, kCanonical = 0x20,
  kStranger = 0x40, kTimers = 0x80,
};
// Region indices (responder_fuzzer.cc RegionId).
enum : uint8_t { kRw, kRo, kWo, kAtomic, kLocal, kRecv, kSink, kSrc, kOtherPd, kZeroBased };

struct Stream {
  Bytes bytes;
  Stream& Add(uint8_t ctl, int8_t aux, uint8_t sel, const Bytes& pkt) {
    bytes.push_back(ctl);
    bytes.push_back(static_cast<uint8_t>(aux));
    bytes.push_back(sel);
    bytes.push_back(static_cast<uint8_t>(pkt.size() & 0xFF));
    bytes.push_back(static_cast<uint8_t>(pkt.size() >> 8));
    bytes.insert(bytes.end(), pkt.begin(), pkt.end());
    return *this;
  }
  // A request or response on `qp` at the expected PSN, keys patched.
  Stream& Req(uint8_t qp, uint8_t sel, const Bytes& pkt, int8_t aux = 0) {
    return Add(qp | kPatchPsn | kPatchKeys | kCanonical, aux, sel, pkt);
  }
  Stream& Timers() {
    bytes.insert(bytes.end(), {0, 0, 0, 0, 0});
    return *this;
  }
};

std::string g_out;

void Write(const std::string& dir, const std::string& name, const Bytes& b) {
  const std::string path = g_out + "/" + dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
}

Fields WithDma(uint32_t len, uint64_t va = 0x10) {
  Fields f;
  f.dma_length = len;
  f.va = va;
  f.ack_req = true;
  return f;
}

Fields Syn(uint8_t syndrome) {
  Fields f;
  f.syndrome = syndrome;
  return f;
}

void ParserSeeds() {
  const struct {
    uint8_t op;
    uint32_t len;
  } ops[] = {
      {op::kRcSendFirst, 1024}, {op::kRcSendMiddle, 1024}, {op::kRcSendLast, 3},
      {op::kRcSendLastImm, 17}, {op::kRcSendOnly, 100}, {op::kRcSendOnlyImm, 0},
      {op::kRcWriteFirst, 1024}, {op::kRcWriteMiddle, 1024}, {op::kRcWriteLast, 5},
      {op::kRcWriteLastImm, 8}, {op::kRcWriteOnly, 64}, {op::kRcWriteOnlyImm, 2},
      {op::kRcReadRequest, 0}, {op::kRcReadResponseFirst, 1024},
      {op::kRcReadResponseMiddle, 1024}, {op::kRcReadResponseLast, 7},
      {op::kRcReadResponseOnly, 33}, {op::kRcAck, 0}, {op::kRcAtomicAck, 0},
      {op::kRcCompareSwap, 0}, {op::kRcFetchAdd, 0}, {op::kRcSendLastInv, 9},
      {op::kRcSendOnlyInv, 12}, {op::kRcAtomicWrite, 8}, {op::kUcSendFirst, 1024}, {op::kUcSendMiddle, 1024},
      {op::kUcSendLast, 1}, {op::kUcSendLastImm, 4}, {op::kUcSendOnly, 40},
      {op::kUcSendOnlyImm, 41}, {op::kUcWriteFirst, 1024}, {op::kUcWriteMiddle, 1024},
      {op::kUcWriteLast, 10}, {op::kUcWriteLastImm, 11}, {op::kUcWriteOnly, 12},
      {op::kUcWriteOnlyImm, 13}, {op::kUdSendOnly, 200}, {op::kUdSendOnlyImm, 201},
      {op::kCnp, 0},
  };
  for (const auto& o : ops) {
    char name[64];
    std::snprintf(name, sizeof(name), "op%02x_%s", o.op,
                  std::string(GetOpcodeInfo(o.op).name).c_str());
    for (char* c = name; *c; ++c)
      if (*c == ' ' || *c == '/') *c = '_';
    Write("packet_parser", name, Build(o.op, o.len, WithDma(o.len)));
  }
}

void ResponderSeeds() {
  const std::string d = "responder";
  // --- RC responder (QP 0).
  Write(d, "rc_send_only", Stream().Req(kQpRc, 0, Build(op::kRcSendOnly, 100)).bytes);
  Write(d, "rc_send_multi",
        Stream()
            .Req(kQpRc, 0, Build(op::kRcSendFirst, 1024))
            .Req(kQpRc, 0, Build(op::kRcSendMiddle, 1024))
            .Req(kQpRc, 0, Build(op::kRcSendLast, 200, WithDma(0)))
            .bytes);
  Write(d, "rc_send_imm_inv",
        Stream()
            .Req(kQpRc, 0, Build(op::kRcSendOnlyImm, 10))
            .Req(kQpRc, kRw, Build(op::kRcSendOnlyInv, 20))
            .Req(kQpRc, 0, Build(op::kRcSendFirst, 1024))
            .Req(kQpRc, kRw, Build(op::kRcSendLastInv, 4))
            .bytes);
  Write(d, "rc_send_too_long",
        Stream()
            .Req(kQpRc, 0, Build(op::kRcSendFirst, 1024))
            .Req(kQpRc, 0, Build(op::kRcSendMiddle, 1024))
            .Req(kQpRc, 0, Build(op::kRcSendLast, 1000))
            .bytes);
  Write(d, "rc_write_only", Stream().Req(kQpRc, kRw, Build(op::kRcWriteOnly, 64, WithDma(64))).bytes);
  // ATOMIC WRITE: one aligned word, the same again (a duplicate), then a
  // misaligned one and one naming 16 bytes (both Invalid Request).
  Write(d, "rc_atomic_write",
        Stream()
            .Req(kQpRc, kRw, Build(op::kRcAtomicWrite, 8, WithDma(8)))
            .Req(kQpRc, kRw, Build(op::kRcAtomicWrite, 8, WithDma(8)), -1)
            .Req(kQpRc, kRw, Build(op::kRcAtomicWrite, 8, WithDma(8, 0x13)))
            .Req(kQpRc, kRw, Build(op::kRcAtomicWrite, 8, WithDma(16)))
            .bytes);
  Write(d, "rc_write_multi",
        Stream()
            .Req(kQpRc, kRw, Build(op::kRcWriteFirst, 1024, WithDma(2500, 0x20)))
            .Req(kQpRc, kRw, Build(op::kRcWriteMiddle, 1024))
            .Req(kQpRc, kRw, Build(op::kRcWriteLastImm, 452))
            .bytes);
  Write(d, "rc_write_imm", Stream().Req(kQpRc, kZeroBased, Build(op::kRcWriteOnlyImm, 8, WithDma(8))).bytes);
  Write(d, "rc_write_no_right", Stream().Req(kQpRc, kRo, Build(op::kRcWriteOnly, 64, WithDma(64))).bytes);
  Write(d, "rc_write_out_of_bounds",
        Stream().Req(kQpRc, kAtomic, Build(op::kRcWriteOnly, 64, WithDma(64, 0x20))).bytes);
  Write(d, "rc_write_other_pd",
        Stream().Req(kQpRc, kOtherPd, Build(op::kRcWriteOnly, 16, WithDma(16))).bytes);
  Write(d, "rc_read",
        Stream()
            .Req(kQpRc, kRw, Build(op::kRcReadRequest, 0, WithDma(3000)))
            .Req(kQpRc, kRo, Build(op::kRcReadRequest, 0, WithDma(100)))
            .Req(kQpRc, kRw, Build(op::kRcReadRequest, 0, WithDma(3000)), -4)  // duplicate
            .bytes);
  Write(d, "rc_read_no_right", Stream().Req(kQpRc, kWo, Build(op::kRcReadRequest, 0, WithDma(16))).bytes);
  {
    Fields cas = WithDma(0, 0x8);
    cas.compare = 0;
    cas.swap_add = 7;
    Write(d, "rc_atomics",
          Stream()
              .Req(kQpRc, kAtomic, Build(op::kRcFetchAdd, 0, WithDma(0, 0x8)))
              .Req(kQpRc, kAtomic, Build(op::kRcCompareSwap, 0, cas))
              .Req(kQpRc, kAtomic, Build(op::kRcCompareSwap, 0, cas), -1)  // duplicate
              .Req(kQpRc, kAtomic, Build(op::kRcFetchAdd, 0, WithDma(0, 0x3)))  // misaligned
              .bytes);
  }
  Write(d, "rc_out_of_sequence",
        Stream()
            .Req(kQpRc, 0, Build(op::kRcSendOnly, 8), 3)
            .Req(kQpRc, 0, Build(op::kRcSendOnly, 8), 4)
            .Req(kQpRc, 0, Build(op::kRcSendOnly, 8), -2)
            .Req(kQpRc, 0, Build(op::kRcSendMiddle, 8))
            .bytes);
  Write(d, "rc_rnr",
        Stream()
            .Req(kQpRc, 0, Build(op::kRcSendOnly, 8))
            .Req(kQpRc, 0, Build(op::kRcSendOnly, 8))
            .Req(kQpRc, 0, Build(op::kRcSendOnly, 8))
            .Req(kQpRc, 0, Build(op::kRcSendOnly, 8))
            .Req(kQpRc, 0, Build(op::kRcWriteOnlyImm, 8, WithDma(8)))
            .bytes);
  Write(d, "rc_stranger",
        Stream().Add(kQpRc | kPatchPsn | kCanonical | kStranger, 0, 0, Build(op::kRcSendOnly, 8)).bytes);
  // --- RC completer (QP 0): responses to the posted SEND, READ (3
  // packets), FETCH_ADD, WRITE (2 packets), CMP_SWP.
  Write(d, "rc_responses",
        Stream()
            .Req(kQpRc, 0, Build(op::kRcAck, 0))
            .Req(kQpRc, 0, Build(op::kRcReadResponseFirst, 1024))
            .Req(kQpRc, 0, Build(op::kRcReadResponseMiddle, 1024))
            .Req(kQpRc, 0, Build(op::kRcReadResponseLast, 452))
            .Req(kQpRc, 0, Build(op::kRcAtomicAck, 0))
            .Req(kQpRc, 0, Build(op::kRcAck, 0), 1)
            .Req(kQpRc, 0, Build(op::kRcAtomicAck, 0))
            .bytes);
  Write(d, "rc_read_response_bad",
        Stream()
            .Req(kQpRc, 0, Build(op::kRcAck, 0))
            .Req(kQpRc, 0, Build(op::kRcReadResponseOnly, 2500))
            .bytes);
  Write(d, "rc_implied_nak",
        Stream().Req(kQpRc, 0, Build(op::kRcAck, 0), 5).Req(kQpRc, 0, Build(op::kRcAck, 0)).bytes);
  Write(d, "rc_nak_sequence",
        Stream()
            .Req(kQpRc, 0, Build(op::kRcAck, 0, Syn(MakeSyndrome(AckKind::kNak, 0))), 1)
            .Req(kQpRc, 0, Build(op::kRcAck, 0))
            .bytes);
  Write(d, "rc_nak_fatal",
        Stream().Req(kQpRc, 0, Build(op::kRcAck, 0, Syn(MakeSyndrome(AckKind::kNak, 2)))).bytes);
  Write(d, "rc_nak_invalid",
        Stream().Req(kQpRc, 0, Build(op::kRcAck, 0, Syn(MakeSyndrome(AckKind::kNak, 1)))).bytes);
  Write(d, "rc_rnr_nak",
        Stream()
            .Req(kQpRc, 0, Build(op::kRcAck, 0, Syn(MakeSyndrome(AckKind::kRnrNak, 1))))
            .Timers()
            .Req(kQpRc, 0, Build(op::kRcAck, 0, Syn(MakeSyndrome(AckKind::kRnrNak, 1))))
            .Timers()
            .bytes);
  Write(d, "rc_timeouts", Stream().Timers().Timers().Timers().bytes);
  // --- RC on an SRQ (QP 1): REMOTE_WRITE only.
  Write(d, "srq_send",
        Stream()
            .Req(kQpRcSrq, 0, Build(op::kRcSendOnly, 300))
            .Req(kQpRcSrq, 0, Build(op::kRcSendFirst, 1024))
            .Req(kQpRcSrq, 0, Build(op::kRcSendLastImm, 1000))
            .Req(kQpRcSrq, 0, Build(op::kRcAck, 0))
            .Req(kQpRcSrq, 0, Build(op::kRcAck, 0), 1)
            .bytes);
  Write(d, "srq_read_refused", Stream().Req(kQpRcSrq, kRw, Build(op::kRcReadRequest, 0, WithDma(8))).bytes);
  // --- UC (QP 2).
  Write(d, "uc_send",
        Stream()
            .Req(kQpUc, 0, Build(op::kUcSendOnly, 100))
            .Req(kQpUc, 0, Build(op::kUcSendFirst, 1024))
            .Req(kQpUc, 0, Build(op::kUcSendLastImm, 10))
            .Req(kQpUc, 0, Build(op::kUcSendOnlyImm, 2000))
            .bytes);
  Write(d, "uc_write",
        Stream()
            .Req(kQpUc, kWo, Build(op::kUcWriteOnly, 64, WithDma(64)))
            .Req(kQpUc, kWo, Build(op::kUcWriteFirst, 1024, WithDma(1500)))
            .Req(kQpUc, kWo, Build(op::kUcWriteLastImm, 476))
            .Req(kQpUc, kRw, Build(op::kUcWriteFirst, 1024, WithDma(3000)), 2)  // gap
            .Req(kQpUc, kRw, Build(op::kUcWriteMiddle, 1024))
            .bytes);
  // --- UD (QP 3).
  Write(d, "ud_send",
        Stream()
            .Req(kQpUd, 0, Build(op::kUdSendOnly, 1000))
            .Req(kQpUd, 0, Build(op::kUdSendOnlyImm, 0))
            .Add(kQpUd | kStranger, 0, 0, Build(op::kUdSendOnly, 16))
            .bytes);
  {
    Fields badq;
    badq.qkey = 0x22222222;
    Write(d, "ud_bad_qkey", Stream().Add(kQpUd, 0, 0, Build(op::kUdSendOnly, 16, badq)).bytes);
  }
  // --- Selective retransmission (docs/loss.md; security review: no sr or
  // SACK seeds). Responder: requests with the sr bit ahead of the expected
  // PSN go to the reorder store, the missing one replays them, one past the
  // store is dropped.
  {
    Fields sr;
    sr.sr = true;
    // The store opens only after an in-order request with the bit passed.
    Write(d, "sr_reorder_store",
          Stream()
              .Req(kQpRc, 0, Build(op::kRcSendOnly, 16, sr))
              .Req(kQpRc, 0, Build(op::kRcSendOnly, 16, sr), 2)
              .Req(kQpRc, 0, Build(op::kRcSendOnly, 16, sr), 1)
              .Req(kQpRc, kRw, Build(op::kRcWriteOnly, 32, [] {
                     Fields f = WithDma(32);
                     f.sr = true;
                     return f;
                   }()),
                   3)
              .Req(kQpRc, 0, Build(op::kRcSendOnly, 16, sr))
              .bytes);
    Write(d, "sr_store_overflow_and_duplicate",
          Stream()
              .Req(kQpRc, kRw, Build(op::kRcWriteOnly, 0, [] {
                     Fields f = WithDma(0);
                     f.sr = true;
                     return f;
                   }()))
              .Req(kQpRc, 0, Build(op::kRcSendOnly, 16, sr), 100)
              .Req(kQpRc, 0, Build(op::kRcSendOnly, 16, sr), 1)
              .Req(kQpRc, 0, Build(op::kRcSendOnly, 16, sr), 1)  // kept twice: first copy wins
              .Req(kQpRc, 0, Build(op::kRcSendOnly, 16, sr), -1)
              .Req(kQpRc, 0, Build(op::kRcSendOnly, 16, sr))
              .bytes);
    Write(d, "sr_without_bit_then_with",
          Stream()
              .Req(kQpRc, 0, Build(op::kRcSendOnly, 16), 2)
              .Req(kQpRc, 0, Build(op::kRcSendOnly, 16, sr), 2)
              .Add(kQpRc | kPatchPsn | kCanonical | kStranger, 1, 0, Build(op::kRcSendOnly, 16, sr))
              .bytes);
    // Completer: a response with the sr bit makes the QP selective
    // (peer_sr), and the retransmission timer resends what is outstanding
    // with scoreboard entries; then SACKs: ACK opcode, sr bit, NAK-sequence
    // syndrome, the bitmap of kept PSNs after the AETH. One in range, one
    // naming PSNs never sent, one from a stranger; and a SACK as the very
    // first response.
    Fields sack = Syn(MakeSyndrome(AckKind::kNak, 0));
    sack.sr = true;
    const uint32_t at = GetOpcodeInfo(op::kRcAck).header_length;
    // Build fills payloads with a pattern; a bitmap starts empty.
    auto bitmap = [&](uint32_t bytes) {
      Bytes b = Build(op::kRcAck, bytes, sack);
      std::fill(b.begin() + at, b.begin() + at + bytes, 0);
      return b;
    };
    Bytes bitmap_ok = bitmap(4);
    bitmap_ok[at] = 0x05;  // PSNs cumulative+1 and +3 kept
    Bytes bitmap_far = bitmap(64);
    bitmap_far[at + 63] = 0x80;  // 512 PSNs ahead: never sent
    Fields ack_sr;
    ack_sr.sr = true;
    Write(d, "sack_after_sr_response",
          Stream()
              .Req(kQpRc, 0, Build(op::kRcAck, 0, ack_sr))
              .Req(kQpRc, 0, bitmap_ok)
              .Timers()
              .Req(kQpRc, 0, bitmap_ok, 1)
              .Req(kQpRc, 0, bitmap_far, 1)
              .Add(kQpRc | kPatchPsn | kCanonical | kStranger, 2, 0, bitmap_ok)
              .Req(kQpRc, 0, Build(op::kRcAck, 0, ack_sr), 7)
              .bytes);
    Write(d, "sack_as_first_response", Stream().Req(kQpRc, 0, bitmap_ok, 1).Timers().bytes);
    Write(d, "sack_then_timeout",
          Stream()
              .Req(kQpRc, 0, Build(op::kRcAck, 0, ack_sr))
              .Req(kQpRc, 0, bitmap_ok, 1)
              .Timers()
              .Req(kQpRc, 0, Build(op::kRcAck, 0, ack_sr), 7)
              .bytes);
  }
  // --- Dispatch-level rejections.
  Write(d, "cnp", Stream().Add(kQpRc, 0, 0, Build(op::kCnp, 0)).bytes);
  {
    Bytes bad = Build(op::kRcSendOnly, 8);
    bad[2] = 0x12;  // P_Key
    Write(d, "bad_pkey", Stream().Add(kQpRc | kPatchPsn, 0, 0, bad).bytes);
  }
  Write(d, "wrong_service", Stream().Req(kQpUc, 0, Build(op::kRcSendOnly, 8)).bytes);
  Write(d, "unknown_qp", Stream().Add(kKeepQpn, 0, 0, Build(op::kRcSendOnly, 8)).bytes);
}

// --- udp_receive: datagram records (udp_receive_fuzzer.cc).
constexpr uint8_t kUdpTrunc = 1, kUdpNotIpv4 = 2, kUdpRawControl = 4, kUdpFixIcrc = 8, kUdpIpv6 = 16,
                  kUdpForwarded = 32;

struct Datagrams {
  Bytes bytes;
  Datagrams& Add(uint8_t flags, uint8_t source, uint8_t capacity, uint8_t time_step,
                 uint16_t gro, uint8_t id_base, const Bytes& datagram, const Bytes& control = {}) {
    const uint8_t head[11] = {flags,
                              source,
                              capacity,
                              time_step,
                              static_cast<uint8_t>(gro),
                              static_cast<uint8_t>(gro >> 8),
                              0x02 /* tos: ECT(0) */,
                              id_base,
                              static_cast<uint8_t>(datagram.size()),
                              static_cast<uint8_t>(datagram.size() >> 8),
                              static_cast<uint8_t>(control.size())};
    bytes.insert(bytes.end(), head, head + sizeof(head));
    bytes.insert(bytes.end(), control.begin(), control.end());
    bytes.insert(bytes.end(), datagram.begin(), datagram.end());
    return *this;
  }
};

// A run of `count` equal packets (the last `last_len` long) back to back, as
// GRO hands a coalesced datagram to the receiver.
Bytes Run(uint32_t count, uint32_t payload, uint32_t last_payload) {
  Bytes out;
  for (uint32_t k = 0; k < count; ++k) {
    Fields f;
    f.psn = k;
    const Bytes p = Build(k + 1 == count ? op::kRcSendLast : op::kRcSendMiddle,
                          k + 1 == count ? last_payload : payload, f);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

// A forwarded lease's channel datagram (transport/host_nic/protocol.h):
// nicd's ForwardHeader for `datagram` from 10.0.0.2:4791 (the fuzzer's
// sender 0), then the datagram.
Bytes Forwarded(const Bytes& datagram, uint16_t gro = 0) {
  softrnic::transport::host_nic::ForwardHeader fh;
  fh.gro_segment_size = gro;
  fh.traffic_class = 0x02;
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = 0x0200000A;
  sin.sin_port = htons(4791);
  fh.source_length = sizeof(sin);
  std::memcpy(fh.source, &sin, sizeof(sin));
  Bytes out(sizeof(fh));
  std::memcpy(out.data(), &fh, sizeof(fh));
  out.insert(out.end(), datagram.begin(), datagram.end());
  return out;
}

void UdpReceiveSeeds() {
  const std::string d = "udp_receive";
  const Bytes one = Build(op::kRcSendOnly, 200);
  Write(d, "single_valid", Datagrams().Add(kUdpFixIcrc, 0, 32, 0, 0, 0, one).bytes);
  {
    Datagrams run;  // a GSO run cut on the way: IDs 0, 1, 2 as single datagrams
    for (uint8_t k = 0; k < 3; ++k)
      run.Add(kUdpFixIcrc, 0, 32, 0, 0, k, Build(op::kRcSendMiddle, 1024));
    Write(d, "run_cut_on_the_way", run.bytes);
  }
  const uint32_t seg = static_cast<uint32_t>(Build(op::kRcSendMiddle, 1024).size());
  Write(d, "gro_coalesced",
        Datagrams().Add(kUdpFixIcrc, 0, 32, 0, static_cast<uint16_t>(seg), 0, Run(4, 1024, 100)).bytes);
  Write(d, "gro_resumed_capacity_1",
        Datagrams().Add(kUdpFixIcrc, 0, 1, 0, static_cast<uint16_t>(seg), 0, Run(5, 1024, 1024)).bytes);
  {
    // A coalesced datagram whose run did not start at ID 0 (GRO merged the
    // tail of a run): every segment needs the ID retry.
    Write(d, "gro_run_tail", Datagrams()
                                 .Add(kUdpFixIcrc, 0, 32, 0, 0, 0, one)
                                 .Add(kUdpFixIcrc, 0, 32, 0, static_cast<uint16_t>(seg), 5,
                                      Run(3, 1024, 1024))
                                 .bytes);
  }
  {
    Bytes junk(8000, 0x5A);
    junk[0] = op::kRcSendOnly;
    Write(d, "junk_oversized_stranger", Datagrams().Add(0, 1, 32, 0, 0, 0, junk).bytes);
    Write(d, "junk_after_valid", Datagrams()
                                     .Add(kUdpFixIcrc, 0, 32, 0, 0, 0, one)
                                     .Add(0, 0, 32, 0, 0, 0, Bytes(one.size(), 0x33))
                                     .bytes);
  }
  // IPv6 sources (issue 15): a valid packet, a coalesced run, and a packet
  // from an IPv6 source with a junk ICRC (no ID retry for IPv6).
  Write(d, "ipv6_single_valid", Datagrams().Add(kUdpFixIcrc | kUdpIpv6, 0, 32, 0, 0, 0, one).bytes);
  Write(d, "ipv6_gro_coalesced",
        Datagrams()
            .Add(kUdpFixIcrc | kUdpIpv6, 0, 32, 0, static_cast<uint16_t>(seg), 0, Run(4, 1024, 100))
            .Add(kUdpIpv6, 0, 32, 0, 0, 0, Bytes(one.size(), 0x44))
            .bytes);
  // Forwarded channel datagrams (root's nicd serving another user): one
  // packet, a coalesced run, and a channel datagram cut inside its header.
  Write(d, "forwarded_single_valid",
        Datagrams().Add(kUdpForwarded | kUdpFixIcrc, 0, 32, 0, 0, 0, Forwarded(one)).bytes);
  {
    const Bytes run = Forwarded(Run(4, 1024, 100), static_cast<uint16_t>(seg));
    Write(d, "forwarded_gro_and_cut",
          Datagrams()
              .Add(kUdpForwarded | kUdpFixIcrc, 0, 32, 0, 0, 0, run)
              .Add(kUdpForwarded, 0, 32, 0, 0, 0, Bytes(run.begin(), run.begin() + 20))
              .bytes);
  }
  Write(d, "aged_source", Datagrams()
                              .Add(kUdpFixIcrc, 2, 32, 0, 0, 0, one)
                              .Add(kUdpFixIcrc, 2, 32, 30, 0, 3, one)
                              .bytes);
  Write(d, "doorbell",
        Datagrams().Add(0, 0, 32, 0, 0, 0, Bytes(softrnic::transport::kShmDoorbell, softrnic::transport::kShmDoorbell + 8)).bytes);
  Write(d, "runt_truncated_not_ipv4", Datagrams()
                                          .Add(0, 0, 32, 0, 0, 0, Bytes(10, 1))
                                          .Add(kUdpTrunc | kUdpFixIcrc, 0, 32, 0, 0, 0, one)
                                          .Add(kUdpNotIpv4 | kUdpFixIcrc, 0, 32, 0, 0, 0, one)
                                          .bytes);
  {
    // Raw control bytes: an IP_TOS and a UDP_GRO cmsg laid out by hand
    // (cmsg_len 17 / 20 on x86-64: 16-byte header + data).
    Bytes control(48, 0);
    auto put = [&](size_t at, uint64_t len, int32_t level, int32_t type) {
      std::memcpy(&control[at], &len, 8);
      std::memcpy(&control[at + 8], &level, 4);
      std::memcpy(&control[at + 12], &type, 4);
    };
    put(0, 17, 0 /* IPPROTO_IP */, 1 /* IP_TOS */);
    control[16] = 0x03;
    put(24, 20, 17 /* SOL_UDP */, 104 /* UDP_GRO */);
    const int32_t gro = static_cast<int32_t>(seg);
    std::memcpy(&control[40], &gro, 4);
    Write(d, "raw_control_gro",
          Datagrams().Add(kUdpRawControl | kUdpFixIcrc, 0, 32, 0, 0, 0, Run(3, 1024, 16), control).bytes);
    Bytes lying = control;
    const uint64_t huge = 4000;
    std::memcpy(&lying[24], &huge, 8);
    Write(d, "raw_control_lying_length",
          Datagrams().Add(kUdpRawControl | kUdpFixIcrc, 0, 32, 0, 0, 0, Run(3, 1024, 16), lying).bytes);
  }
}

// --- shm_ring: operation streams (shm_ring_fuzzer.cc).
struct ShmOps {
  Bytes bytes;
  ShmOps& TailDelta(int16_t delta) {
    bytes.push_back(0);
    bytes.push_back(static_cast<uint8_t>(delta));
    bytes.push_back(static_cast<uint8_t>(static_cast<uint16_t>(delta) >> 8));
    return *this;
  }
  ShmOps& TailRaw(uint64_t tail) {
    bytes.push_back(1);
    Append64(tail);
    return *this;
  }
  ShmOps& Slot(uint8_t index, uint32_t length, uint16_t local_index) {
    bytes.push_back(2);
    bytes.push_back(index);
    softrnic::transport::ShmSlotHeader h{};
    h.length = length;
    h.local_index = local_index;
    h.src_port = 4791;
    h.src_ip = 0x0200000A;
    const auto* p = reinterpret_cast<const uint8_t*>(&h);
    bytes.insert(bytes.end(), p, p + sizeof(h));
    return *this;
  }
  ShmOps& Drain(uint8_t max) {
    bytes.push_back(3);
    bytes.push_back(max);
    return *this;
  }
  ShmOps& NewConsumer(uint64_t head) {
    bytes.push_back(4);
    Append64(head);
    return *this;
  }
  ShmOps& Attach(uint8_t fix_mask, uint32_t n_locals) {
    bytes.push_back(5);
    bytes.push_back(fix_mask);
    softrnic::transport::ShmSegmentHeader h{};
    h.n_locals = n_locals;
    h.local_port[0] = 4791;
    const auto* p = reinterpret_cast<const uint8_t*>(&h);
    bytes.insert(bytes.end(), p, p + std::min<size_t>(sizeof(h), 512));
    return *this;
  }
  void Append64(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
};

void ShmRingSeeds() {
  const std::string d = "shm_ring";
  Write(d, "three_packets",
        ShmOps().Slot(0, 64, 0).Slot(1, 200, 1).Slot(2, 4224, 0).TailDelta(3).Drain(10).bytes);
  Write(d, "bad_slots", ShmOps()
                            .Slot(0, 0, 0)
                            .Slot(1, 5000, 0)
                            .Slot(2, 10, 0)
                            .Slot(3, 64, 7)
                            .Slot(4, 0xFFFFFFFF, 0)
                            .TailDelta(5)
                            .Drain(5)
                            .bytes);
  Write(d, "tail_too_far", ShmOps().TailDelta(257).Drain(10).TailDelta(1).Drain(1).bytes);
  Write(d, "tail_behind_head", ShmOps().TailDelta(-1).Drain(10).bytes);
  Write(d, "tail_raw_huge", ShmOps().TailRaw(~uint64_t{0}).Drain(10).bytes);
  Write(d, "head_near_wrap", ShmOps()
                                 .NewConsumer(~uint64_t{0} - 1)
                                 .Slot(0, 64, 0)
                                 .Slot(1, 64, 0)
                                 .Slot(2, 64, 0)
                                 .TailDelta(3)
                                 .Drain(2)
                                 .Drain(2)
                                 .bytes);
  Write(d, "full_ring", ShmOps().Slot(0, 64, 0).Slot(255, 64, 0).TailDelta(256).Drain(255).Drain(255).bytes);
  Write(d, "attach_valid", ShmOps().Attach(0x7F, 1).bytes);
  Write(d, "attach_too_many_locals", ShmOps().Attach(0x3F, 200).bytes);
  Write(d, "attach_wrong_pid", ShmOps().Attach(0x7F & ~4, 1).bytes);
  Write(d, "attach_garbage", ShmOps().Attach(0, 3).bytes);
}

// --- stats_file: file contents (stats_file_fuzzer.cc).
void StatsFileSeeds() {
  const std::string d = "stats_file";
  auto text = [](const std::string& s) { return Bytes(s.begin(), s.end()); };
  const std::string good =
      "softrnic-stats 1\npid 4242\ncomm ib_write_bw\ndevice softrnic0\n"
      "gid 0 ::ffff:10.0.0.1\ngid 1 ::ffff:127.1.16.146\ntime_ns 1700000000123456\nseq 17\n"
      "rx_packets 1234\ntx_packets 1200\nudp_rx_icrc_errors 0\nudp_rx_icrc_id_retries 3\n";
  Write(d, "publisher_format", text(good));
  Write(d, "no_header", text("pid 1\nrx_packets 5\n"));
  Write(d, "pid_zero", text("softrnic-stats 1\npid 0\nrx_packets 5\n"));
  Write(d, "overflowing_numbers",
        text("softrnic-stats 1\npid 99999999999999999999\ntime_ns 18446744073709551616\n"
             "seq -1\nrx_packets 0x10\ntx_packets 12abc\n"));
  static const char kBinary[] =
      "softrnic-stats 1\npid 7\ncomm \x1b[31mred\x1b[0m\ndevice a\tb\r\n"
      "gid\ngid 0\n \n x 1\nkey  2\n\0\xff\xfe 3\n";
  Write(d, "escapes_and_binary", Bytes(kBinary, kBinary + sizeof(kBinary) - 1));
  Write(d, "no_trailing_newline", text("softrnic-stats 1\npid 12\nrx_packets 9"));
  // Version 2: per-QP lines (stats_publisher.h).
  Write(d, "publisher_format_v2",
        text("softrnic-stats 2\npid 4242\ncomm ib_write_bw\ndevice softrnic0\n"
             "gid 0 ::ffff:10.0.0.1\ntime_ns 1700000000123456\nseq 17\nrx_packets 1234\n"
             "tx_bytes 99\nqps 3\n"
             "qp 17 rc RTS ::ffff:10.0.0.2 18 tx_packets=9 tx_bytes=9512 rx_packets=4 rx_bytes=64 "
             "tx_retransmit_packets=0 retransmit_timeouts=0 tx_naks=0 tx_rnr_naks=0 rx_naks=0 "
             "rx_rnr_naks=0 shm_direct_ops=2 shm_direct_bytes=8192 cqe_errors=0 cqe_flushes=1\n"
             "qp 19 ud RTS - - tx_packets=1\nqp 20 uc INIT - - \n"));
  Write(d, "qp_lines_malformed",
        text("softrnic-stats 2\npid 5\nqps 18446744073709551616\nqp\nqp 16777216 rc RTS - - a=1\n"
             "qp -1 rc\nqp 7 rc RTS -\nqp 8 rc RTS - - =1 a== b=x c=18446744073709551616 d\n"
             "qp 9  rc  RTS  -  -  e=1\nqp 10 \x1b[31m \xff - - f=2\n"));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  g_out = argv[1];
  mkdir(g_out.c_str(), 0755);
  mkdir((g_out + "/packet_parser").c_str(), 0755);
  mkdir((g_out + "/responder").c_str(), 0755);
  for (const char* dir : {"udp_receive", "shm_ring", "stats_file"})
    mkdir((g_out + "/" + dir).c_str(), 0755);
  ParserSeeds();
  ResponderSeeds();
  UdpReceiveSeeds();
  ShmRingSeeds();
  StatsFileSeeds();
  std::printf("seed corpora written to %s\n", g_out.c_str());
  return 0;
}
