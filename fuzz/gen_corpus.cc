// Writes the seed corpora of the fuzzers: a few valid packets of each
// opcode, built with the wire layer's own header types and opcode table.
//
//   gen_corpus OUT_DIR      writes OUT_DIR/packet_parser/* and OUT_DIR/responder/*
//
// packet_parser seeds are bare packets (BTH .. ICRC, ICRC computed for
// 10.0.0.1 -> 10.0.0.2). responder seeds are record streams in the format
// described in responder_fuzzer.cc: [ctl][aux][sel][len lo][len hi][packet].
// The committed files in fuzz/corpus/ come from this program; rerun it after
// changing the record format (cmake --build <dir> --target fuzz_corpus).
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

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
      {op::kRcSendOnlyInv, 12}, {op::kUcSendFirst, 1024}, {op::kUcSendMiddle, 1024},
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
  ParserSeeds();
  ResponderSeeds();
  std::printf("seed corpora written to %s\n", g_out.c_str());
  return 0;
}
