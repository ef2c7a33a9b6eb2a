// Invariant CRC for RoCE v2 (IBA Annex A17.8).
//
// CRC-32 (IEEE 802.3, reflected, as zlib) over: 8 bytes of 0xFF standing in
// for the LRH, then the IP header with its variant fields (IPv4 TOS, TTL,
// header checksum; IPv6 traffic class, flow label, hop limit) set to ones,
// the UDP header with its checksum set to ones, the BTH with byte 4
// (FECN/BECN/resv6) set to ones, the rest of the packet up to the ICRC. The
// result is stored least-significant byte first.
//
// softrnic never builds IP/UDP headers itself (the kernel does), so the
// caller describes the ones the kernel will send or did receive.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softrnic::wire {

// What the IP and UDP headers of a packet contain, as far as the ICRC sees.
struct IpUdpFields {
  bool ipv6 = false;
  uint8_t src_ip[16] = {};  // IPv4 in the first 4 bytes when !ipv6
  uint8_t dst_ip[16] = {};
  uint16_t src_port = 0;
  uint16_t dst_port = 4791;
  // IPv4 only: identification and the flags/fragment-offset word. An
  // unconnected UDP socket with IP_PMTUDISC_DO sends ID 0 and DF (0x4000).
  uint16_t ipv4_id = 0;
  uint16_t ipv4_flags_frag = 0x4000;
};

// ICRC over `bth_to_end`, the UDP payload from the BTH up to (not including)
// the 4 ICRC bytes, `length` bytes long.
uint32_t ComputeIcrc(const IpUdpFields& ip, const uint8_t* bth_to_end, size_t length);

// The same over a packet held in pieces: `head` (BTH and extension headers,
// at least the BTH), then `payload`, then `pad` (0-3) zero bytes. Returns 0
// for a head shorter than a BTH or a pad above 3 (never a valid layout).
uint32_t ComputeIcrcParts(const IpUdpFields& ip, const uint8_t* head, size_t head_length,
                          const uint8_t* payload, size_t payload_length, size_t pad);

// Writes the ICRC of the first length-4 bytes into the last 4 bytes.
void AppendIcrc(const IpUdpFields& ip, uint8_t* udp_payload, size_t length_with_icrc);

// True when the last 4 bytes hold the right ICRC. length includes the ICRC.
bool CheckIcrc(const IpUdpFields& ip, const uint8_t* udp_payload, size_t length_with_icrc);

// Plain CRC-32 (IEEE, reflected) continuing from `crc` (0 to start), the
// same function as zlib's crc32(); exposed for tests.
uint32_t Crc32(uint32_t crc, const uint8_t* data, size_t length);

// The ISA-L kernels Crc32 may use (icrc.cc says why it does not take
// ISA-L's own choice): SOFTRNIC_CRC=isal|sse|avx, default avx where the CPU
// has AVX and PCLMULQDQ, else sse where it has SSE4.1 and PCLMULQDQ, else
// isal.
enum class Crc32Kernel { kIsal, kSse, kAvx };
bool Crc32KernelSupported(Crc32Kernel kernel);
Crc32Kernel ActiveCrc32Kernel();
uint32_t Crc32With(Crc32Kernel kernel, uint32_t crc, const uint8_t* data, size_t length);

}  // namespace softrnic::wire
