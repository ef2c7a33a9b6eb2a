// The receive half of the RoCE v2 UDP transport (udp_receive.h).
#include "transport/udp_receive.h"

#include <netinet/in.h>
#include <netinet/udp.h>

#include <algorithm>
#include <cstring>

#include "transport/host_nic/protocol.h"
#include "transport/icrc_framing.h"
#include "transport/local_address.h"

namespace softrnic::transport {

namespace {

constexpr uint32_t kMinPacket = 12 + 4;  // BTH + ICRC
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

}  // namespace

void ReadReceiveControl(const msghdr& h, uint32_t datagram_length, uint32_t* gro_segment_size,
                        uint8_t* traffic_class) {
  *gro_segment_size = 0;
  *traffic_class = 0;
  // The kernel writes well-formed control messages, but a cmsg_len that ran
  // past msg_controllen would make CMSG_DATA read beyond the buffer:
  // anything not wholly inside it is ignored.
  const auto* control_end = static_cast<const uint8_t*>(h.msg_control) + h.msg_controllen;
  for (const cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr;
       c = CMSG_NXTHDR(const_cast<msghdr*>(&h), const_cast<cmsghdr*>(c))) {
    const auto* start = reinterpret_cast<const uint8_t*>(c);
    if (c->cmsg_len > static_cast<size_t>(control_end - start)) break;
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS && c->cmsg_len >= CMSG_LEN(1)) {
      *traffic_class = *CMSG_DATA(c);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS &&
               c->cmsg_len >= CMSG_LEN(sizeof(int))) {
      int tclass = 0;
      std::memcpy(&tclass, CMSG_DATA(c), sizeof(tclass));
      *traffic_class = static_cast<uint8_t>(tclass);
    } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO &&
               c->cmsg_len >= CMSG_LEN(sizeof(int))) {
      int size = 0;
      std::memcpy(&size, CMSG_DATA(c), sizeof(size));
      if (size > 0 && static_cast<uint32_t>(size) < datagram_length)
        *gro_segment_size = static_cast<uint32_t>(size);
    }
  }
}

bool OpenForwardedDatagram(uint8_t* data, uint32_t length, ReceivedDatagram* d,
                           sockaddr_storage* source, socklen_t* source_length) {
  d->data = data;
  d->length = 0;
  d->gro_segment_size = 0;
  d->traffic_class = 0;
  *source_length = 0;
  host_nic::ForwardHeader fh;
  if (length < sizeof(fh)) return false;
  std::memcpy(&fh, data, sizeof(fh));
  if (fh.magic != host_nic::kForwardMagic || fh.source_length > sizeof(fh.source)) return false;
  static_assert(sizeof(fh.source) <= sizeof(sockaddr_storage));
  std::memset(source, 0, sizeof(*source));
  std::memcpy(source, fh.source, fh.source_length);
  *source_length = fh.source_length;
  d->data = data + sizeof(fh);
  d->length = length - static_cast<uint32_t>(sizeof(fh));
  d->gro_segment_size = fh.gro_segment_size < d->length ? fh.gro_segment_size : 0;
  d->traffic_class = fh.traffic_class;
  return true;
}

void SetDatagramAddresses(const sockaddr* source, socklen_t source_length, const Endpoint& local,
                          ReceivedDatagram* d) {
  Endpoint src;
  const bool ok = source_length > 0 && FromSockaddr(source, source_length, &src, nullptr);
  d->source_is_ipv4 = false;
  d->source_is_ipv6 = false;
  if (ok && src.gid.IsV4Mapped() == local.gid.IsV4Mapped()) {
    if (src.gid.IsV4Mapped()) {
      d->source_is_ipv4 = true;
      d->src_ip = src.gid.Ipv4();
      d->dst_ip = local.gid.Ipv4();
    } else {
      d->source_is_ipv6 = true;
      d->src_ip6 = src.gid;
      d->dst_ip6 = local.gid;
    }
  }
  d->src_port = src.port;
  d->dst_port = local.port;
}

bool DatagramSplitter::RecentlyValid(uint32_t ip, uint16_t port, uint64_t now_ns) const {
  for (const RecentSource& r : recent_) {
    if (r.used && r.ip == ip && r.port == port)
      return now_ns - r.last_valid_ns <= kRecentSourceWindowNs;
  }
  return false;
}

void DatagramSplitter::NoteValid(uint32_t ip, uint16_t port, uint64_t now_ns) {
  RecentSource* victim = &recent_[0];
  for (RecentSource& r : recent_) {
    if (r.used && r.ip == ip && r.port == port) {
      r.last_valid_ns = now_ns;
      return;
    }
    // Replace an unused entry, else the one whose last valid packet is oldest.
    if (!r.used || (victim->used && r.last_valid_ns < victim->last_valid_ns)) victim = &r;
  }
  *victim = RecentSource{ip, port, now_ns, true};
}

bool DatagramSplitter::CheckSegmentIcrc(wire::IpUdpFields& ip, const uint8_t* data, uint32_t len,
                                        uint32_t segment, bool retry_allowed) {
  // A GSO run carries IPv4 IDs 0 .. kMaxGsoIds - 1 (its segments' index);
  // a later segment of a GRO-merged datagram began another run, so its own
  // index is no ID any sender used: only the retry below can match it. (It
  // used to be tried as an ID: the fuzzer built a segment at index >= 64
  // whose ICRC was computed with that index, and it was accepted.)
  if (segment < kMaxGsoIds) {
    ip.ipv4_id = static_cast<uint16_t>(segment);
    if (IcrcValid(ip, data, len)) return true;
  }
  if (!retry_allowed) return false;
  // A run segmented before it reached us (by a NIC, a veth without GSO, a
  // router) arrives as single datagrams whose IPv4 IDs are their index in
  // the run, which the datagram no longer shows; a fixed-ID GRO flow keeps
  // ID 0 (docs/wire.md). Try those IDs: at most kMaxGsoIds - 1 CRCs of at
  // most one MTU, only for a segment that Split found eligible.
  for (uint32_t id = 0; id < kMaxGsoIds; ++id) {
    if (id == segment) continue;
    ip.ipv4_id = static_cast<uint16_t>(id);
    ++counters_->rx_icrc_id_retry_crcs;
    if (IcrcValid(ip, data, len)) {
      ++counters_->rx_icrc_id_retries;
      return true;
    }
  }
  return false;
}

bool DatagramSplitter::Split(const ReceivedDatagram& d, uint16_t local_index, uint64_t now_ns,
                             uint32_t* next_segment, RxPacket* out, int n, int* produced) {
  const uint32_t len = d.length;
  if (len == sizeof(kShmDoorbell) && std::memcmp(d.data, kShmDoorbell, len) == 0) {
    ++counters_->rx_doorbells;  // a shared-memory peer woke us: not a packet
    *next_segment = 0;
    return true;
  }
  if (len < kMinPacket || d.truncated || d.source_is_ipv4 == d.source_is_ipv6) {
    ++counters_->rx_runts;
    *next_segment = 0;
    return true;
  }
  const bool coalesced = d.gro_segment_size > 0 && d.gro_segment_size < len;
  const uint32_t segment_size = coalesced ? d.gro_segment_size : len;
  const bool v6 = d.source_is_ipv6;
  wire::IpUdpFields ip = v6 ? IcrcFields(Endpoint{d.src_ip6, d.src_port},
                                         Endpoint{d.dst_ip6, d.dst_port})
                            : IcrcFields(d.src_ip, d.src_port, d.dst_ip, d.dst_port);
  // Whether segments of this datagram may be tried with other IPv4 IDs: its
  // source sent a valid packet lately, possibly an earlier segment of this
  // very datagram (coalescing alone proves nothing: GRO merges any flow's
  // equal-sized datagrams). Looked up only when a segment fails.
  enum class Known : uint8_t { kUnknown, kYes, kNo };
  Known source_known = Known::kUnknown;
  bool any_valid = false;
  const Endpoint src{v6 ? d.src_ip6 : Gid::FromIpv4(d.src_ip), d.src_port};
  const uint32_t segments = (len + segment_size - 1) / segment_size;
  for (; *next_segment < segments; ++*next_segment) {
    if (*produced >= n) {
      if (any_valid && !v6) NoteValid(d.src_ip, d.src_port, now_ns);
      return false;
    }
    const uint32_t offset = *next_segment * segment_size;
    const uint32_t seg_len = std::min(segment_size, len - offset);
    uint8_t* seg = d.data + offset;
    if (seg_len < kMinPacket) {
      ++counters_->rx_runts;
      continue;
    }
    bool retry_allowed = false;
    if (seg_len <= kMaxGsoSegmentBytes && !v6) {
      if (source_known == Known::kUnknown)
        source_known = RecentlyValid(d.src_ip, d.src_port, now_ns) ? Known::kYes : Known::kNo;
      retry_allowed = source_known == Known::kYes;
    }
    if (v6 ? !IcrcValid(ip, seg, seg_len)
           : !CheckSegmentIcrc(ip, seg, seg_len, *next_segment, retry_allowed)) {
      ++counters_->rx_icrc_errors;
      continue;
    }
    any_valid = true;
    source_known = Known::kYes;
    RxPacket& p = out[(*produced)++];
    p.data = seg;
    p.length = seg_len;
    p.local_index = local_index;
    p.src = src;
    p.traffic_class = d.traffic_class;
    p.group = d.group;
    p.via_shm = false;
    ++counters_->rx_packets;
    counters_->rx_bytes += seg_len;
  }
  if (any_valid && !v6) NoteValid(d.src_ip, d.src_port, now_ns);
  *next_segment = 0;
  return true;
}

}  // namespace softrnic::transport
