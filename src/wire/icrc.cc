#include "wire/icrc.h"

#include <isa-l/crc.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "config/environment.h"
#include "wire/byte_order.h"
#include "wire/headers.h"

// ISA-L's SSE4.1 and AVX kernels (PCLMULQDQ, 128-bit registers): exported
// by libisal.so.2 but not declared in <isa-l/crc.h>.
extern "C" {
uint32_t crc32_gzip_refl_by8(uint32_t crc, const unsigned char* data, uint64_t length);
uint32_t crc32_gzip_refl_by8_02(uint32_t crc, const unsigned char* data, uint64_t length);
}

namespace softrnic::wire {
namespace {

using Crc32Fn = uint32_t (*)(uint32_t, const unsigned char*, uint64_t);

Crc32Fn KernelFn(Crc32Kernel kernel) {
  switch (kernel) {
    case Crc32Kernel::kSse: return crc32_gzip_refl_by8;
    case Crc32Kernel::kAvx: return crc32_gzip_refl_by8_02;
    case Crc32Kernel::kIsal: break;
  }
  return crc32_gzip_refl;
}

// ISA-L's dispatcher picks its AVX-512 (VPCLMULQDQ) kernel where the CPU
// has one. Alone it is the fastest (~50 GB/s for 4 KiB here, against ~18
// for the AVX one), but in the engine, between system calls and context
// switches, it made ib_write_bw over UDP ~35 % slower on the (nested
// virtualised) machines measured: 0.85-1.06 GB/s against 1.35-1.56 with the
// AVX kernel, the same as with no CRC at all (bench/findings.md). Using
// 512-bit registers has costs outside the function (larger register state to
// save at every switch, frequency changes) that a micro-benchmark does not
// see, so the 128-bit kernels are the default.
Crc32Kernel ChooseKernel() {
  // SOFTRNIC_CRC (docs/configuration.md): read once per process.
  const std::string e = config::Environment::FromProcess().Choice("SOFTRNIC_CRC");
  if (e != "auto") {
    const Crc32Kernel k = e == "sse"   ? Crc32Kernel::kSse
                          : e == "avx" ? Crc32Kernel::kAvx
                                       : Crc32Kernel::kIsal;
    if (Crc32KernelSupported(k)) return k;
  }
  if (Crc32KernelSupported(Crc32Kernel::kAvx)) return Crc32Kernel::kAvx;
  if (Crc32KernelSupported(Crc32Kernel::kSse)) return Crc32Kernel::kSse;
  return Crc32Kernel::kIsal;
}

}  // namespace

bool Crc32KernelSupported(Crc32Kernel kernel) {
  switch (kernel) {
    case Crc32Kernel::kSse:
      return __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("pclmul");
    case Crc32Kernel::kAvx:
      return __builtin_cpu_supports("avx") && __builtin_cpu_supports("pclmul");
    case Crc32Kernel::kIsal:
      return true;
  }
  return false;
}

Crc32Kernel ActiveCrc32Kernel() {
  static const Crc32Kernel kernel = ChooseKernel();
  return kernel;
}

uint32_t Crc32With(Crc32Kernel kernel, uint32_t crc, const uint8_t* data, size_t length) {
  return KernelFn(kernel)(crc, data, length);
}

uint32_t Crc32(uint32_t crc, const uint8_t* data, size_t length) {
  // ISA-L's kernels take and return the finalised value, like zlib.
  static const Crc32Fn fn = KernelFn(ActiveCrc32Kernel());
  return fn(crc, data, length);
}

namespace {

// CRC of the pseudo header (LRH stand-in, masked IP and UDP headers) for a
// packet whose BTH..ICRC-exclusive part is `length` bytes.
uint32_t PseudoHeaderCrc(const IpUdpFields& ip, size_t length) {
  // Pseudo header: 8 x 0xFF (LRH stand-in), masked IP header, masked UDP header.
  uint8_t pseudo[8 + 40 + 8];
  std::memset(pseudo, 0xFF, 8);
  size_t n = 8;
  const size_t udp_length = 8 + length + kIcrcSize;
  if (!ip.ipv6) {
    uint8_t* h = pseudo + n;
    h[0] = 0x45;
    h[1] = 0xFF;  // TOS masked
    StoreBe16(h + 2, static_cast<uint16_t>(20 + udp_length));
    StoreBe16(h + 4, ip.ipv4_id);
    StoreBe16(h + 6, ip.ipv4_flags_frag);
    h[8] = 0xFF;  // TTL masked
    h[9] = 17;    // UDP
    h[10] = 0xFF;  // header checksum masked
    h[11] = 0xFF;
    std::memcpy(h + 12, ip.src_ip, 4);
    std::memcpy(h + 16, ip.dst_ip, 4);
    n += 20;
  } else {
    uint8_t* h = pseudo + n;
    // Version 6, traffic class and flow label masked to ones.
    h[0] = 0x6F;
    h[1] = 0xFF;
    h[2] = 0xFF;
    h[3] = 0xFF;
    StoreBe16(h + 4, static_cast<uint16_t>(udp_length));
    h[6] = 17;
    h[7] = 0xFF;  // hop limit masked
    std::memcpy(h + 8, ip.src_ip, 16);
    std::memcpy(h + 24, ip.dst_ip, 16);
    n += 40;
  }
  uint8_t* u = pseudo + n;
  StoreBe16(u, ip.src_port);
  StoreBe16(u + 2, ip.dst_port);
  StoreBe16(u + 4, static_cast<uint16_t>(udp_length));
  u[6] = 0xFF;  // UDP checksum masked
  u[7] = 0xFF;
  n += 8;

  return Crc32(0, pseudo, n);
}

// Continues `crc` over the BTH with byte 4 (FECN, BECN, resv6) masked.
uint32_t MaskedBthCrc(uint32_t crc, const uint8_t* bth_in) {
  uint8_t bth[sizeof(Bth)];
  std::memcpy(bth, bth_in, sizeof(Bth));
  bth[4] = 0xFF;
  return Crc32(crc, bth, sizeof(Bth));
}

}  // namespace

uint32_t ComputeIcrc(const IpUdpFields& ip, const uint8_t* bth_to_end, size_t length) {
  uint32_t crc = PseudoHeaderCrc(ip, length);
  if (length < sizeof(Bth)) return Crc32(crc, bth_to_end, length);
  crc = MaskedBthCrc(crc, bth_to_end);
  return Crc32(crc, bth_to_end + sizeof(Bth), length - sizeof(Bth));
}

uint32_t ComputeIcrcParts(const IpUdpFields& ip, const uint8_t* head, size_t head_length,
                          const uint8_t* payload, size_t payload_length, size_t pad) {
  static constexpr uint8_t kZeros[4] = {};
  if (head_length < sizeof(Bth) || pad > 3) return 0;
  uint32_t crc = PseudoHeaderCrc(ip, head_length + payload_length + pad);
  crc = MaskedBthCrc(crc, head);
  crc = Crc32(crc, head + sizeof(Bth), head_length - sizeof(Bth));
  crc = Crc32(crc, payload, payload_length);
  return Crc32(crc, kZeros, pad);
}

void AppendIcrc(const IpUdpFields& ip, uint8_t* udp_payload, size_t length_with_icrc) {
  // Without this guard length - 4 wraps to ~2^64: the CRC would read far past
  // the buffer and the store would land 1-3 bytes before it. A buffer too short
  // for the ICRC itself is a caller bug; leave it untouched.
  if (length_with_icrc < kIcrcSize) return;
  const size_t body = length_with_icrc - kIcrcSize;
  const uint32_t crc = ComputeIcrc(ip, udp_payload, body);
  uint8_t* out = udp_payload + body;
  out[0] = static_cast<uint8_t>(crc);
  out[1] = static_cast<uint8_t>(crc >> 8);
  out[2] = static_cast<uint8_t>(crc >> 16);
  out[3] = static_cast<uint8_t>(crc >> 24);
}

bool CheckIcrc(const IpUdpFields& ip, const uint8_t* udp_payload, size_t length_with_icrc) {
  if (length_with_icrc < sizeof(Bth) + kIcrcSize) return false;
  const size_t body = length_with_icrc - kIcrcSize;
  const uint32_t crc = ComputeIcrc(ip, udp_payload, body);
  const uint8_t* in = udp_payload + body;
  const uint32_t got = uint32_t{in[0]} | (uint32_t{in[1]} << 8) | (uint32_t{in[2]} << 16) |
                       (uint32_t{in[3]} << 24);
  return crc == got;
}

}  // namespace softrnic::wire
