#include "transport/icrc_framing.h"

#include <cstring>

namespace softrnic::transport {

wire::IpUdpFields IcrcFields(uint32_t src_ip, uint16_t src_port, uint32_t dst_ip,
                             uint16_t dst_port, uint16_t ipv4_id) {
  wire::IpUdpFields ip;
  std::memcpy(ip.src_ip, &src_ip, 4);
  std::memcpy(ip.dst_ip, &dst_ip, 4);
  ip.src_port = src_port;
  ip.dst_port = dst_port;
  ip.ipv4_id = ipv4_id;
  return ip;
}

wire::IpUdpFields IcrcFields(const Endpoint& src, const Endpoint& dst, uint16_t ipv4_id) {
  if (src.gid.IsV4Mapped())
    return IcrcFields(src.gid.Ipv4(), src.port, dst.gid.Ipv4(), dst.port, ipv4_id);
  wire::IpUdpFields ip;
  ip.ipv6 = true;
  std::memcpy(ip.src_ip, src.gid.raw.data(), 16);
  std::memcpy(ip.dst_ip, dst.gid.raw.data(), 16);
  ip.src_port = src.port;
  ip.dst_port = dst.port;
  return ip;
}

bool IcrcFields(const Endpoint& src, const Endpoint& dst, uint16_t ipv4_id,
                wire::IpUdpFields* out) {
  if (src.gid.IsV4Mapped() != dst.gid.IsV4Mapped()) return false;
  *out = IcrcFields(src, dst, ipv4_id);
  return true;
}

uint32_t FrameIcrc(const wire::IpUdpFields& ip, const TxPacket& p, uint8_t tail[kIcrcTailMax]) {
  uint32_t icrc;
  uint32_t pad = 0;
  if (p.payload == nullptr) {
    icrc = wire::ComputeIcrc(ip, p.data, p.length - 4);
  } else {
    // In pieces: the pad bytes are not in the packet's memory; they travel
    // with the ICRC.
    pad = p.length - 4 - p.head_length - p.payload_length;
    icrc = wire::ComputeIcrcParts(ip, p.data, p.head_length, p.payload, p.payload_length, pad);
    std::memset(tail, 0, pad);
  }
  tail[pad] = static_cast<uint8_t>(icrc);
  tail[pad + 1] = static_cast<uint8_t>(icrc >> 8);
  tail[pad + 2] = static_cast<uint8_t>(icrc >> 16);
  tail[pad + 3] = static_cast<uint8_t>(icrc >> 24);
  return pad + 4;
}

}  // namespace softrnic::transport
