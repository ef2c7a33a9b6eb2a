#include "wire/roce_frame.h"

#include <cstring>

#include "wire/icrc.h"

namespace softrnic::wire {
namespace {

void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

// 02:00 then the IPv4 address: locally administered, unicast (IEEE 802
// U/L and I/G bits of the first byte).
void PutMac(uint8_t* p, uint32_t ip_network_order) {
  p[0] = 0x02;
  p[1] = 0x00;
  std::memcpy(p + 2, &ip_network_order, 4);
}

// RFC 791 header checksum: one's complement of the one's-complement sum.
uint16_t Ipv4Checksum(const uint8_t* h) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += uint32_t{h[i]} << 8 | h[i + 1];
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// RFC 8200 8.1 / RFC 768: the UDP checksum over the IPv6 pseudo header
// (addresses, upper-layer length, next header 17) and the UDP datagram,
// whose checksum field is zero while it is summed.
uint16_t Udp6Checksum(const uint8_t* src, const uint8_t* dst, const uint8_t* udp, uint32_t length) {
  uint64_t sum = 0;
  auto add = [&sum](const uint8_t* p, uint32_t n) {
    for (uint32_t i = 0; i + 1 < n; i += 2) sum += uint32_t{p[i]} << 8 | p[i + 1];
    if (n & 1) sum += uint32_t{p[n - 1]} << 8;
  };
  add(src, 16);
  add(dst, 16);
  sum += length >> 16;
  sum += length & 0xFFFF;
  sum += 17;
  add(udp, length);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  const uint16_t c = static_cast<uint16_t>(~sum);
  return c == 0 ? 0xFFFF : c;  // 0 would mean "no checksum"
}

// The UDP header at `udp` (checksum left 0) and the RoCE packet (`head`,
// `payload`; pad and ICRC bytes are left as they are) after it, for
// either IP version; returns where the BTH starts.
uint8_t* PutUdpAndRoce(const FrameAddresses& a, std::span<const uint8_t> head,
                       std::span<const uint8_t> payload, uint32_t roce, uint8_t* udp) {
  Put16(udp, a.src_port);
  Put16(udp + 2, a.dst_port);
  Put16(udp + 4, static_cast<uint16_t>(8 + roce));
  uint8_t* bth = udp + 8;
  if (!head.empty()) std::memcpy(bth, head.data(), head.size());
  if (!payload.empty()) std::memcpy(bth + head.size(), payload.data(), payload.size());
  return bth;
}

void BuildRoceFrame6(const FrameAddresses& a, std::span<const uint8_t> head,
                     std::span<const uint8_t> payload, uint32_t pad, std::vector<uint8_t>* out) {
  const uint32_t roce = static_cast<uint32_t>(head.size() + payload.size()) + pad + 4;
  out->assign(kRoceFrameHeaderLengthIpv6 + roce, 0);
  uint8_t* f = out->data();
  uint32_t mac;
  std::memcpy(&mac, a.dst_ip6 + 12, 4);
  PutMac(f, mac);
  std::memcpy(&mac, a.src_ip6 + 12, 4);
  PutMac(f + 6, mac);
  Put16(f + 12, 0x86DD);  // IPv6
  uint8_t* ip = f + 14;
  ip[0] = static_cast<uint8_t>(0x60 | a.traffic_class >> 4);  // version 6
  ip[1] = static_cast<uint8_t>(a.traffic_class << 4);          // flow label 0
  Put16(ip + 4, static_cast<uint16_t>(8 + roce));              // payload length
  ip[6] = 17;                                                  // next header: UDP
  ip[7] = 64;                                                  // hop limit
  std::memcpy(ip + 8, a.src_ip6, 16);
  std::memcpy(ip + 24, a.dst_ip6, 16);
  uint8_t* udp = ip + 40;
  uint8_t* bth = PutUdpAndRoce(a, head, payload, roce, udp);
  IpUdpFields fields;
  fields.ipv6 = true;
  std::memcpy(fields.src_ip, a.src_ip6, 16);
  std::memcpy(fields.dst_ip, a.dst_ip6, 16);
  fields.src_port = a.src_port;
  fields.dst_port = a.dst_port;
  AppendIcrc(fields, bth, roce);
  Put16(udp + 6, Udp6Checksum(a.src_ip6, a.dst_ip6, udp, 8 + roce));  // over the ICRC too
}

}  // namespace

void BuildRoceFrame(const FrameAddresses& a, std::span<const uint8_t> head,
                    std::span<const uint8_t> payload, uint32_t pad, std::vector<uint8_t>* out) {
  if (a.ipv6) {
    BuildRoceFrame6(a, head, payload, pad, out);
    return;
  }
  const uint32_t roce = static_cast<uint32_t>(head.size() + payload.size()) + pad + 4;
  out->assign(kRoceFrameHeaderLength + roce, 0);
  uint8_t* f = out->data();
  PutMac(f, a.dst_ip);
  PutMac(f + 6, a.src_ip);
  Put16(f + 12, 0x0800);  // IPv4
  uint8_t* ip = f + 14;
  ip[0] = 0x45;  // version 4, 5 words
  ip[1] = a.traffic_class;
  Put16(ip + 2, static_cast<uint16_t>(20 + 8 + roce));
  Put16(ip + 4, 0);       // identification
  Put16(ip + 6, 0x4000);  // DF
  ip[8] = 64;             // TTL
  ip[9] = 17;             // UDP
  std::memcpy(ip + 12, &a.src_ip, 4);
  std::memcpy(ip + 16, &a.dst_ip, 4);
  Put16(ip + 10, Ipv4Checksum(ip));
  uint8_t* udp = ip + 20;
  uint8_t* bth = PutUdpAndRoce(a, head, payload, roce, udp);
  // The pad bytes are already zero.
  IpUdpFields fields;
  std::memcpy(fields.src_ip, &a.src_ip, 4);
  std::memcpy(fields.dst_ip, &a.dst_ip, 4);
  fields.src_port = a.src_port;
  fields.dst_port = a.dst_port;
  fields.ipv4_id = 0;
  fields.ipv4_flags_frag = 0x4000;
  AppendIcrc(fields, bth, roce);
}

}  // namespace softrnic::wire
