// Sealed RC's receive side against hostile bytes (docs/sealed.md): whatever
// arrives, QpSeal::Open never reads or writes outside the packet, and it
// opens only what the peer sealed, unchanged, once.
//
// Input: byte 0 chooses the case; the rest is data.
//   even: the data is a packet as received (BTH first); byte 1 is its
//         header length. Open must not return kOk (no key is known to the
//         input) unless the bytes are a packet this fuzzer sealed.
//   odd:  a packet is sealed from the data, then the data's first bytes
//         name (position, xor) mutations applied before it is opened: it
//         opens iff no byte before the ICRC changed, and then to the
//         payload that was sealed.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "seal/qp_seal.h"

namespace {

using softrnic::seal::OpenResult;
using softrnic::seal::QpSeal;

constexpr uint32_t kQpnA = 0x010203, kQpnB = 0x040506;

struct Pair {
  std::unique_ptr<QpSeal> a, b;
  Pair() {
    const std::vector<uint8_t> key(32, 0x42);
    a = QpSeal::Create(key, kQpnA, kQpnB, 4);
    b = QpSeal::Create(key, kQpnB, kQpnA, 4);
    if (!a || !b) std::abort();
    a->set_next_counter(0);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  Pair pair;  // fresh windows: inputs do not depend on each other
  if ((data[0] & 1) == 0) {
    const uint32_t header = data[1];
    std::vector<uint8_t> packet(data + 2, data + size);
    uint32_t opened = 0;
    const OpenResult r = pair.b->Open(packet.data(), static_cast<uint32_t>(packet.size()),
                                      header, &opened);
    if (r != OpenResult::kOk) return 0;
    // Forging a tag without the key is not something a fuzzer does, but it
    // learns the packets the odd case seals from that case's comparisons
    // and may offer one here. So an input that opens must be exactly what
    // this key seals from the opened bytes at the input's counter.
    const size_t body = opened - header - 4;
    uint64_t counter = 0;
    for (size_t k = 0; k < 8; ++k) counter = (counter << 8) | data[2 + header + body + k];
    Pair again;
    again.a->set_next_counter(counter);
    std::vector<uint8_t> resealed = packet;
    if (!again.a->Seal(resealed.data(), header, nullptr, static_cast<uint32_t>(body), 0))
      std::abort();
    const size_t covered = header + body + softrnic::seal::kTrailerBytes;
    if (!std::equal(resealed.begin(), resealed.begin() + static_cast<long>(covered), data + 2))
      std::abort();
    return 0;
  }
  // Seal a WRITE-like packet of 12 header bytes and the payload below.
  const size_t payload = size > 40 ? size - 40 : 0;
  const uint32_t pad = (4 - payload % 4) % 4;
  const uint32_t header = 12;
  std::vector<uint8_t> packet(header + payload + pad + softrnic::seal::kTrailerBytes + 4, 0);
  packet[0] = 0x0A;
  packet[5] = kQpnB >> 16;
  packet[6] = (kQpnB >> 8) & 0xFF;
  packet[7] = kQpnB & 0xFF;
  if (payload > 0) std::memcpy(packet.data() + header, data + 40, payload);
  if (!pair.a->Seal(packet.data(), header, nullptr, static_cast<uint32_t>(payload), pad))
    std::abort();
  const std::vector<uint8_t> sealed = packet;
  // Up to 19 mutations from bytes 2..39: (position, xor) pairs.
  const uint32_t covered = header + static_cast<uint32_t>(payload) + pad +
                           softrnic::seal::kTrailerBytes;
  for (size_t i = 2; i + 1 < std::min<size_t>(size, 40); i += 2)
    packet[data[i] % packet.size()] ^= data[i + 1];
  // Everything but the ICRC is authenticated (the AAD is the headers as
  // received, TVer included): any change there must fail, none must not.
  const bool changed = !std::equal(packet.begin(), packet.begin() + covered, sealed.begin());
  uint32_t opened = 0;
  const OpenResult r = pair.b->Open(packet.data(), static_cast<uint32_t>(packet.size()), header,
                                    &opened);
  if (changed == (r == OpenResult::kOk)) std::abort();
  if (r == OpenResult::kOk && (opened != packet.size() - softrnic::seal::kTrailerBytes ||
                               (payload > 0 && std::memcmp(packet.data() + header, data + 40,
                                                           payload) != 0)))
    std::abort();
  return 0;
}
