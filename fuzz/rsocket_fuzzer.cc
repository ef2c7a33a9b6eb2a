// libFuzzer target: the receive side of softrnic's rsockets protocol
// (src/rdmacm/rsocket_wire.h), the one place where a peer's completions and
// bytes are judged.
//
// The input is a sequence of receive completions, each as
//   flags (1 byte: bit 0 success, bits 1-2 opcode 0 RECV / 1
//          RECV_RDMA_WITH_IMM / 2 other, bit 3 with immediate),
//   imm (4 bytes), byte_len (4 bytes, clamped to 0..2*kRsSlot when bit 4 of
//   flags is clear so that small lengths are common), slot_len (2 bytes),
//   then slot_len bytes: the slot's contents.
// Each slot lives in a heap buffer of exactly slot_len bytes, so
// AddressSanitizer reports any read past what the slot holds. Every event
// is applied to a peer-mapping table as rsocket.cc does.
//
// Properties checked (abort on violation):
//  - data is only ever taken from a successful IBV_WC_RECV without
//    immediate, its length is byte_len, 1..kRsSlot, and never more than the
//    slot holds; EOF only from such a completion with byte_len 0;
//  - a RECV_RDMA_WITH_IMM completion is never data, EOF or a mapping;
//  - mapping messages only with immediate 1 or 2 and exactly
//    sizeof(RsIomapWire) bytes; announced ranges are non-empty and do not
//    wrap;
//  - the mapping table never exceeds kRsMaxPeerMaps, never holds two
//    overlapping ranges, and FindPeerMap returns a mapping containing the
//    offset it was asked for.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rdmacm/rsocket_wire.h"

namespace {

using namespace softrnic::rsocket;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "rsocket_fuzzer: property violated: %s\n", what);
  std::abort();
}
#define CHECK(cond)           \
  do {                        \
    if (!(cond)) Fail(#cond); \
  } while (0)

struct Reader {
  const uint8_t* p;
  size_t n;
  bool Take(void* out, size_t k) {
    if (n < k) return false;
    std::memcpy(out, p, k);
    p += k;
    n -= k;
    return true;
  }
};

void CheckTable(const std::vector<RsPeerMap>& maps) {
  CHECK(maps.size() <= kRsMaxPeerMaps);
  if (maps.empty()) return;
  // The newest entry against all the others (the older ones were checked
  // when they were added).
  const RsPeerMap& n = maps.back();
  CHECK(n.len > 0 && n.offset + n.len > n.offset);
  for (size_t i = 0; i + 1 < maps.size(); ++i) {
    const RsPeerMap& m = maps[i];
    CHECK(!(n.offset < m.offset + m.len && m.offset < n.offset + n.len));
  }
  const RsPeerMap* f = FindPeerMap(maps, n.offset + n.len - 1);
  CHECK(f != nullptr && n.offset + n.len - 1 >= f->offset &&
        n.offset + n.len - 1 - f->offset < f->len);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in{data, size};
  std::vector<RsPeerMap> maps;
  uint64_t data_bytes = 0, slot_bytes = 0;
  for (int step = 0; step < 4096; ++step) {
    uint8_t flags;
    uint32_t imm, byte_len;
    uint16_t slot_len;
    if (!in.Take(&flags, 1) || !in.Take(&imm, 4) || !in.Take(&byte_len, 4) ||
        !in.Take(&slot_len, 2))
      break;
    if (!(flags & 0x10)) byte_len %= 2 * kRsSlot + 1;
    if (slot_len > in.n) slot_len = static_cast<uint16_t>(in.n);
    std::vector<uint8_t> slot(in.p, in.p + slot_len);  // exactly slot_len bytes
    in.p += slot_len;
    in.n -= slot_len;

    RsCompletion c;
    c.success = flags & 1;
    const int opcode = (flags >> 1) & 3;
    c.recv = opcode == 0;
    c.rdma_with_imm = opcode == 1;
    c.with_imm = flags & 8;
    c.imm = imm;
    c.byte_len = byte_len;
    const RsRecvEvent ev = ClassifyRecv(c, slot.empty() ? nullptr : slot.data(), slot.size());
    switch (ev.kind) {
      case RsRecvKind::kData:
        CHECK(c.success && c.recv && !c.with_imm);
        CHECK(ev.length == byte_len && ev.length >= 1 && ev.length <= kRsSlot);
        CHECK(ev.length <= slot.size());
        data_bytes += ev.length;
        slot_bytes += slot.size();
        CHECK(data_bytes <= slot_bytes);
        break;
      case RsRecvKind::kEof:
        CHECK(c.success && c.recv && !c.with_imm && byte_len == 0);
        break;
      case RsRecvKind::kIomap:
      case RsRecvKind::kIounmap: {
        CHECK(c.success && c.recv && c.with_imm && byte_len == sizeof(RsIomapWire));
        CHECK(slot.size() >= sizeof(RsIomapWire));
        CHECK(ev.kind == RsRecvKind::kIomap ? imm == kRsCtlIomap : imm == kRsCtlIounmap);
        if (ev.kind == RsRecvKind::kIomap)
          CHECK(ev.map.len > 0 && ev.map.offset + ev.map.len > ev.map.offset &&
                ev.map.addr + ev.map.len > ev.map.addr);
        const size_t before = maps.size();
        if (!ApplyPeerMapEvent(maps, ev)) return 0;  // the connection is reset
        if (ev.kind == RsRecvKind::kIomap) {
          CHECK(maps.size() == before + 1);
          CheckTable(maps);
        } else {
          CHECK(maps.size() == before - 1);
        }
        break;
      }
      case RsRecvKind::kFlushed:
        CHECK(!c.success);
        return 0;  // the stream ends
      case RsRecvKind::kProtocolError:
        CHECK(ev.why != nullptr && ev.why[0] != '\0');
        return 0;  // the connection is reset
    }
    CHECK(!(c.rdma_with_imm && c.success));  // never reaches here
  }
  return 0;
}
