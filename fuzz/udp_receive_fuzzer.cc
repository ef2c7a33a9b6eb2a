// libFuzzer target: the UDP receive path (src/transport/udp_receive.h), the
// same DatagramSplitter and ReadReceiveControl that UdpTransport::RecvBurst
// calls for every datagram, without sockets.
//
// The input is a stream of datagram records (gen_corpus.cc writes seeds):
//   [flags][source][capacity][time step][gro lo][gro hi][tos][id base]
//   [len lo][len hi][ctl len][control bytes ...][datagram bytes ...]
// flags: bit0 MSG_TRUNC, bit1 not IPv4, bit2 the control bytes are raw
// (else a UDP_GRO cmsg with the gro size and an IP_TOS cmsg are built),
// bit3 rewrite each segment's ICRC as a GSO sender would, for IPv4 ID
// (id base + segment index) mod 64, so mutations get past the ICRC and reach
// the ID retry; bit4 the source is IPv6 (fd77:243::<the sender's IPv4
// bytes>, to fd77:243::1: an IPv6 socket's datagram, no IDs, no retry).
// bit5 the datagram bytes are a forwarded lease's channel datagram
// (host_nic/protocol.h: a ForwardHeader, then the UDP datagram, its source
// and segment size taken from the header, not from the record), opened by
// OpenForwardedDatagram as UdpTransport does for a forwarded socket.
// source picks one of four senders; capacity (1..32) is how
// many packets one Split call may return, so datagrams are resumed across
// calls as RecvBurst does. Each datagram lives in a buffer of exactly its
// size, so AddressSanitizer reports any read past it.
//
// Properties checked (abort on violation):
//  - every returned packet lies inside its datagram, is at least BTH + ICRC
//    long, carries the datagram's source, and its ICRC verifies for some
//    IPv4 ID a GSO run can have;
//  - a forwarded channel datagram opens to exactly the bytes behind its
//    header, or to nothing (a runt) when the header is cut, unmarked or
//    names a source longer than its field;
//  - Split returns false only with the output full, and every segment of a
//    datagram is accounted once: returned, runt, ICRC error or doorbell;
//  - review M7: no ID retry for a segment longer than kMaxGsoSegmentBytes,
//    none from a source that never sent a valid packet (before one of its
//    segments verifies), and at most kMaxGsoIds CRCs per segment; none at
//    all for an IPv6 source, whose returned packets verify for the IPv6
//    headers.
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "transport/host_nic/protocol.h"
#include "transport/udp_receive.h"
#include "wire/icrc.h"

#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace {

using namespace softrnic;
using namespace softrnic::transport;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "udp_receive_fuzzer: property violated: %s\n", what);
  std::abort();
}
#define CHECK(cond)           \
  do {                        \
    if (!(cond)) Fail(#cond); \
  } while (0)

constexpr uint32_t kMinPacket = 16;
constexpr size_t kRecordHeader = 11;
constexpr uint32_t kDstIp = 0x0100000A;  // 10.0.0.1, network order
constexpr uint16_t kDstPort = 4791;
// Senders: ip (network order), port. Seeds use source 0.
constexpr uint32_t kSrcIps[4] = {0x0200000A, 0x0300000A, 0x0200000A, 0x0101A8C0};
constexpr uint16_t kSrcPorts[4] = {4791, 4791, 50000, 4791};

// The IPv6 sender of IPv4 sender `src_ip` (network order), and our address.
Gid Ipv6Of(uint32_t src_ip) {
  Gid g;
  g.raw[0] = 0xfd;
  g.raw[1] = 0x77;
  g.raw[3] = 0x02;
  g.raw[4] = 0x43;
  std::memcpy(&g.raw[12], &src_ip, 4);
  return g;
}

wire::IpUdpFields FieldsFor6(const Gid& src, uint16_t src_port, const Gid& dst) {
  wire::IpUdpFields ip;
  ip.ipv6 = true;
  std::memcpy(ip.src_ip, src.raw.data(), 16);
  std::memcpy(ip.dst_ip, dst.raw.data(), 16);
  ip.src_port = src_port;
  ip.dst_port = kDstPort;
  return ip;
}

wire::IpUdpFields FieldsFor(uint32_t src_ip, uint16_t src_port) {
  wire::IpUdpFields ip;
  std::memcpy(ip.src_ip, &src_ip, 4);
  std::memcpy(ip.dst_ip, &kDstIp, 4);
  ip.src_port = src_port;
  ip.dst_port = kDstPort;
  return ip;
}

bool VerifiesForSomeGsoId(wire::IpUdpFields ip, const uint8_t* p, uint32_t len) {
  for (uint32_t id = 0; id < kMaxGsoIds; ++id) {
    ip.ipv4_id = static_cast<uint16_t>(id);
    if (wire::CheckIcrc(ip, p, len)) return true;
  }
  return false;
}

// Builds a control buffer the way the kernel does: IP_TOS then UDP_GRO.
size_t BuildControl(uint8_t* buf, size_t cap, uint8_t tos, uint16_t gro) {
  msghdr h{};
  h.msg_control = buf;
  h.msg_controllen = cap;
  std::memset(buf, 0, cap);
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = IPPROTO_IP;
  c->cmsg_type = IP_TOS;
  c->cmsg_len = CMSG_LEN(1);
  *CMSG_DATA(c) = tos;
  size_t used = CMSG_SPACE(1);
  if (gro != 0) {
    c = CMSG_NXTHDR(&h, c);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_GRO;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int size = gro;
    std::memcpy(CMSG_DATA(c), &size, sizeof(size));
    used += CMSG_SPACE(sizeof(int));
  }
  return used;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  TransportCounters counters;
  DatagramSplitter splitter(&counters);
  std::set<uint64_t> source_ever_valid;  // senders (IPv4 address, port) that sent a valid packet
  uint64_t now_ns = 1'000'000'000;
  size_t pos = 0;
  while (size - pos >= kRecordHeader) {
    const uint8_t* r = data + pos;
    const uint8_t flags = r[0];
    const uint32_t source = r[1] & 3;
    const int capacity = 1 + r[2] % 32;
    now_ns += uint64_t{r[3]} * 100'000'000;  // up to 25.5 s: sources age out
    const uint16_t gro = static_cast<uint16_t>(r[4] | (r[5] << 8));
    const uint8_t tos = r[6];
    const uint8_t id_base = r[7];
    const uint32_t len = std::min<uint32_t>(r[8] | (r[9] << 8), 65535);
    const size_t ctl_len = r[10];
    pos += kRecordHeader;
    const bool raw_control = flags & 4;
    const size_t ctl_take = raw_control ? std::min(ctl_len, size - pos) : 0;
    // Raw control bytes also live in a buffer of exactly their size.
    std::unique_ptr<uint8_t[]> control(new uint8_t[raw_control ? std::max<size_t>(ctl_take, 1) : 64]);
    size_t control_len = 0;
    if (raw_control) {
      std::memcpy(control.get(), data + pos, ctl_take);
      control_len = ctl_take;
      pos += ctl_take;
    } else {
      control_len = BuildControl(control.get(), 64, tos, gro);
    }
    const uint32_t dlen = static_cast<uint32_t>(std::min<size_t>(len, size - pos));
    // Exactly-sized copy: ASan catches any read past the datagram.
    std::unique_ptr<uint8_t[]> buf(new uint8_t[dlen == 0 ? 1 : dlen]);
    std::memcpy(buf.get(), data + pos, dlen);
    pos += dlen;

    ReceivedDatagram d;
    d.truncated = flags & 1;
    const bool v6 = (flags & 0x10) != 0;
    const bool forwarded = (flags & 0x20) != 0;
    if (forwarded) {
      const Endpoint local{v6 ? Ipv6Of(kDstIp) : Gid::FromIpv4(kDstIp), kDstPort};
      sockaddr_storage src;
      socklen_t src_length = 0;
      constexpr uint32_t kHeader = sizeof(host_nic::ForwardHeader);
      if (OpenForwardedDatagram(buf.get(), dlen, &d, &src, &src_length)) {
        CHECK(dlen >= kHeader && d.data == buf.get() + kHeader && d.length == dlen - kHeader);
        CHECK(src_length <= sizeof(host_nic::ForwardHeader::source));
      } else {
        CHECK(d.length == 0 && src_length == 0);
      }
      CHECK(d.gro_segment_size == 0 || d.gro_segment_size < d.length);
      SetDatagramAddresses(reinterpret_cast<const sockaddr*>(&src), src_length, local, &d);
      if (d.source_is_ipv4) CHECK(d.dst_ip == kDstIp);
      if (d.source_is_ipv6) CHECK(d.dst_ip6 == local.gid);
    } else {
      d.data = buf.get();
      d.length = dlen;
      d.source_is_ipv4 = !(flags & 2) && !v6;
      d.source_is_ipv6 = !(flags & 2) && v6;
      d.src_ip6 = Ipv6Of(kSrcIps[source]);
      d.dst_ip6 = Ipv6Of(kDstIp);
      d.src_ip = kSrcIps[source];
      d.src_port = kSrcPorts[source];
      d.dst_ip = kDstIp;
      d.dst_port = kDstPort;
      msghdr h{};
      h.msg_control = control_len > 0 ? control.get() : nullptr;
      h.msg_controllen = control_len;
      ReadReceiveControl(h, dlen, &d.gro_segment_size, &d.traffic_class);
      CHECK(d.gro_segment_size == 0 || d.gro_segment_size < dlen);
    }
    // The packets' addresses: the record's sender, or the forwarded header's.
    const bool ip6 = forwarded ? d.source_is_ipv6 : v6;
    const uint32_t glen = d.length;

    const uint32_t seg_size = d.gro_segment_size ? d.gro_segment_size : std::max<uint32_t>(glen, 1);
    const uint32_t segments = (glen + seg_size - 1) / seg_size;
    const wire::IpUdpFields ip =
        ip6 ? FieldsFor6(d.src_ip6, d.src_port, d.dst_ip6) : FieldsFor(d.src_ip, d.src_port);
    if (flags & 8) {
      for (uint32_t k = 0; k < segments; ++k) {
        const uint32_t off = k * seg_size;
        const uint32_t slen = std::min(seg_size, glen - off);
        if (slen < kMinPacket) continue;
        wire::IpUdpFields f = ip;
        f.ipv4_id = static_cast<uint16_t>((id_base + k) % kMaxGsoIds);
        wire::AppendIcrc(f, d.data + off, slen);
      }
    }
    uint32_t eligible_segments = 0;  // segments short enough to be GSO segments
    for (uint32_t k = 0; k < segments; ++k) {
      const uint32_t slen = std::min(seg_size, glen - k * seg_size);
      if (slen >= kMinPacket && slen <= kMaxGsoSegmentBytes) ++eligible_segments;
    }
    // The splitter remembers senders by IPv4 address and port.
    const uint64_t sender = (uint64_t{d.src_ip} << 16) | d.src_port;

    const TransportCounters before = counters;
    uint32_t next_segment = 0;
    int calls = 0;
    bool any_returned = false;
    for (;;) {
      RxPacket out[32];
      int produced = 0;
      const bool done = splitter.Split(d, 3, now_ns, &next_segment, out, capacity, &produced);
      CHECK(produced >= 0 && produced <= capacity);
      if (!done) CHECK(produced == capacity);
      for (int i = 0; i < produced; ++i) {
        const RxPacket& p = out[i];
        CHECK(p.data >= d.data && p.length >= kMinPacket && p.data + p.length <= d.data + glen);
        CHECK(p.local_index == 3);
        CHECK((ip6 ? p.src.gid == d.src_ip6 : p.src.gid.Ipv4() == d.src_ip) &&
              p.src.port == d.src_port);
        if (ip6) CHECK(wire::CheckIcrc(ip, p.data, p.length));
        CHECK(p.traffic_class == d.traffic_class);
        CHECK(VerifiesForSomeGsoId(ip, p.data, p.length));
        any_returned = true;
      }
      if (done) break;
      CHECK(++calls < 70000);  // every call consumes at least one segment
    }
    CHECK(next_segment == 0);
    const uint64_t accounted = (counters.rx_packets - before.rx_packets) +
                               (counters.rx_runts - before.rx_runts) +
                               (counters.rx_icrc_errors - before.rx_icrc_errors) +
                               (counters.rx_doorbells - before.rx_doorbells);
    const bool whole_datagram_dropped = counters.rx_doorbells != before.rx_doorbells ||
                                        (glen < kMinPacket || d.truncated ||
                                         d.source_is_ipv4 == d.source_is_ipv6);
    CHECK(accounted == (whole_datagram_dropped ? 1 : segments));
    const uint64_t retry_crcs = counters.rx_icrc_id_retry_crcs - before.rx_icrc_id_retry_crcs;
    if (std::getenv("UDP_RECEIVE_FUZZER_VERBOSE") != nullptr)
      std::fprintf(stderr,
                   "datagram: len %u flags %#x source %u gro %u segments %u eligible %u "
                   "returned %d retry_crcs %llu\n",
                   glen, flags, source, d.gro_segment_size, segments, eligible_segments,
                   any_returned, static_cast<unsigned long long>(retry_crcs));
    // kMaxGsoIds - 1 retries per segment; kMaxGsoIds for a segment whose
    // index is past the IDs a run can carry (its first check used no run ID).
    CHECK(retry_crcs <= uint64_t{eligible_segments} * kMaxGsoIds);
    if (source_ever_valid.count(sender) == 0 && !any_returned) CHECK(retry_crcs == 0);
    if (ip6) CHECK(retry_crcs == 0);  // IPv6 has no identification to retry
    CHECK(counters.rx_icrc_id_retries - before.rx_icrc_id_retries <= eligible_segments);
    if (any_returned) source_ever_valid.insert(sender);
  }
  return 0;
}
