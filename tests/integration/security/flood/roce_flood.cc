// roce_flood: sends forged RoCE v2 packets with valid ICRCs, as fast as it
// can for a fixed time, from a spoofed source (raw socket, IP_HDRINCL: the
// source address and UDP port are whatever the attacker writes, here the
// victim connection's own peer, exactly). Issue 14's "Must show" flood.
//
//   roce_flood SRC_IP SRC_PORT DST_IP DST_PORT SECONDS [QPN REQ_PSN RESP_PSN]
//
// Every packet is one of (in turn):
//   - blind: a destination QPN swept through the whole 24-bit space (from a
//     random start) with a random PSN: WRITE ONLY (random rkey and VA, 64
//     bytes), SEND ONLY, READ REQUEST, ACK, NAK (remote access error), RNR
//     NAK: what an off-path attacker who knows nothing tries;
//   - with QPN, REQ_PSN, RESP_PSN (an on-path observer who saw the
//     connection's QPN and initial PSNs): the same opcodes to that QPN,
//     requests 2^21..2^22 PSNs behind REQ_PSN (where the QP's responder
//     started: duplicates) and responses as far ahead of RESP_PSN (where its
//     requester started: never sent). Every one reaches the PSN checks and
//     must be refused there without harming the connection. (A forger that
//     hits the live PSN window succeeds: RoCE carries no authentication. A
//     first version of this test aimed requests at the wrong base and landed
//     13 packets in the selective-retransmission window: the connection
//     failed, as it would on any RoCE NIC for an exact PSN.)
// ROCE_FLOOD_PPS=N paces the flood to N packets per second (default: as
// fast as it can). Prints "sent N packets in S s (R pps)". Needs CAP_NET_RAW
// (exit 77 without).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "common/secure_random.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

namespace {

using namespace softrnic;

constexpr int kBatch = 64;
constexpr size_t kMaxPacket = 256;

// The flood's own choices (PSNs, keys, addresses): a xorshift generator
// seeded from the CSPRNG. Attack traffic, not identifiers: fast matters
// here, and one getrandom per field would cap the rate.
struct Xorshift {
  uint64_t s = SecureRandom64() | 1;
  uint64_t Next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};
Xorshift rng;

struct Target {
  in_addr src{}, dst{};
  uint16_t src_port = 0, dst_port = 0;
};

// Builds IPv4 + UDP + BTH.. + ICRC into out; returns the datagram length.
size_t BuildPacket(const Target& t, uint8_t opcode, uint32_t qpn, uint32_t psn, uint8_t* out) {
  const wire::OpcodeInfo& info = wire::GetOpcodeInfo(opcode);
  const uint32_t payload = (opcode == wire::op::kRcWriteOnly || opcode == wire::op::kRcSendOnly) ? 64 : 0;
  const size_t roce_len = info.header_length + payload + wire::kIcrcSize;
  uint8_t* roce = out + sizeof(iphdr) + sizeof(udphdr);
  std::memset(roce, 0, roce_len);
  wire::Bth bth;
  bth.set_opcode(opcode);
  bth.set_pkey(wire::kDefaultPkey);
  bth.set_dest_qp(qpn);
  bth.set_psn(psn);
  bth.set_ack_req(opcode != wire::op::kRcAck);
  bth.set_sr(true);  // also try to switch on selective mode
  if (opcode == wire::op::kCnp) bth.set_becn(true);
  std::memcpy(roce, bth.b.data(), sizeof(bth));
  if (info.reth_offset) {
    wire::Reth r;
    r.set_va(rng.Next() & ~uint64_t{0xFFF});
    r.set_rkey(static_cast<uint32_t>(rng.Next()));
    r.set_dma_length(opcode == wire::op::kRcReadRequest ? 4096 : payload);
    std::memcpy(roce + info.reth_offset, r.b.data(), sizeof(r));
  }
  if (info.aeth_offset) {
    wire::Aeth a;
    const uint32_t pick = psn % 3;
    a.set_syndrome(pick == 0   ? wire::kAckSyndromeNoCredit
                   : pick == 1 ? wire::MakeSyndrome(wire::AckKind::kNak,
                                                    static_cast<uint8_t>(wire::NakCode::kRemoteAccessError))
                               : wire::MakeSyndrome(wire::AckKind::kRnrNak, 31));
    std::memcpy(roce + info.aeth_offset, a.b.data(), sizeof(a));
  }
  if (payload) std::memset(roce + info.header_length, 0xEE, payload);
  wire::IpUdpFields f;
  std::memcpy(f.src_ip, &t.src, 4);
  std::memcpy(f.dst_ip, &t.dst, 4);
  f.src_port = t.src_port;
  f.dst_port = t.dst_port;
  f.ipv4_id = 1;
  wire::AppendIcrc(f, roce, roce_len);
  // IPv4 ID 1 with DF. The ICRC covers the ID; a receiver tries the ID
  // a datagram's place in a GSO run implies (0 for a lone one) and then a few
  // others (udp_transport.cc). ID 0 would match first, but the kernel
  // replaces a zero ID in a raw packet with its own; a nonzero one it keeps.
  auto* ip = reinterpret_cast<iphdr*>(out);
  std::memset(ip, 0, sizeof(*ip));
  ip->id = htons(1);
  ip->version = 4;
  ip->ihl = 5;
  ip->tot_len = htons(static_cast<uint16_t>(sizeof(iphdr) + sizeof(udphdr) + roce_len));
  ip->frag_off = htons(0x4000);
  ip->ttl = 64;
  ip->protocol = IPPROTO_UDP;
  ip->saddr = t.src.s_addr;
  ip->daddr = t.dst.s_addr;
  auto* udp = reinterpret_cast<udphdr*>(out + sizeof(iphdr));
  udp->source = htons(t.src_port);
  udp->dest = htons(t.dst_port);
  udp->len = htons(static_cast<uint16_t>(sizeof(udphdr) + roce_len));
  udp->check = 0;  // none (IPv4)
  return sizeof(iphdr) + sizeof(udphdr) + roce_len;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 && argc != 9) {
    std::fprintf(stderr, "usage: %s SRC_IP SRC_PORT DST_IP DST_PORT SECONDS [QPN REQ_PSN RESP_PSN]\n", argv[0]);
    return 2;
  }
  Target t;
  if (inet_pton(AF_INET, argv[1], &t.src) != 1 || inet_pton(AF_INET, argv[3], &t.dst) != 1) {
    std::fprintf(stderr, "roce_flood: bad IPv4 address\n");
    return 2;
  }
  t.src_port = static_cast<uint16_t>(std::atoi(argv[2]));
  t.dst_port = static_cast<uint16_t>(std::atoi(argv[4]));
  const double seconds = std::atof(argv[5]);
  const bool known = argc == 9;
  const uint32_t known_qpn = known ? static_cast<uint32_t>(std::strtoul(argv[6], nullptr, 0)) : 0;
  const uint32_t req_psn = known ? static_cast<uint32_t>(std::strtoul(argv[7], nullptr, 0)) : 0;
  const uint32_t resp_psn = known ? static_cast<uint32_t>(std::strtoul(argv[8], nullptr, 0)) : 0;

  double pps = 0;
  if (const char* p = std::getenv("ROCE_FLOOD_PPS")) pps = std::atof(p);

  const int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
  if (fd < 0) {
    std::fprintf(stderr, "roce_flood: raw socket: %s\n", std::strerror(errno));
    return errno == EPERM ? 77 : 1;
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr = t.dst;

  static const uint8_t kOpcodes[] = {wire::op::kRcWriteOnly, wire::op::kRcSendOnly,
                                     wire::op::kRcReadRequest, wire::op::kRcAck};
  std::vector<uint8_t> bufs(size_t{kBatch} * kMaxPacket);
  iovec iov[kBatch];
  mmsghdr msgs[kBatch];
  uint32_t sweep_qpn = SecureRandom32() & wire::kQpnMask;
  uint64_t sent = 0, blind = 0, aimed = 0, errors = 0, n = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (pps > 0) {
      // Paced: the next batch leaves when the rate allows it.
      const auto due = start + std::chrono::duration<double>(static_cast<double>(sent) / pps);
      std::this_thread::sleep_until(std::min(due, end));
      if (std::chrono::steady_clock::now() >= end) break;
    }
    for (int i = 0; i < kBatch; ++i, ++n) {
      uint8_t* p = &bufs[size_t(i) * kMaxPacket];
      const uint8_t opcode = kOpcodes[n % 4];
      const bool is_request = opcode != wire::op::kRcAck;
      uint32_t qpn, psn;
      if (known && (n / 4) % 2 == 1) {
        // Aimed at the live QPN, 2^21..2^22 PSNs away from the live window.
        const uint32_t away = (1u << 21) + static_cast<uint32_t>(rng.Next() & ((1u << 21) - 1));
        qpn = known_qpn;
        psn = (is_request ? req_psn - away : resp_psn + away) & wire::kPsnMask;
        ++aimed;
      } else {
        qpn = sweep_qpn;
        sweep_qpn = (sweep_qpn + 1) & wire::kQpnMask;
        psn = static_cast<uint32_t>(rng.Next()) & wire::kPsnMask;
        ++blind;
      }
      iov[i].iov_base = p;
      iov[i].iov_len = BuildPacket(t, opcode, qpn, psn, p);
      std::memset(&msgs[i], 0, sizeof(msgs[i]));
      msgs[i].msg_hdr.msg_name = &to;
      msgs[i].msg_hdr.msg_namelen = sizeof(to);
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    const int r = sendmmsg(fd, msgs, kBatch, 0);
    if (r > 0) sent += static_cast<uint64_t>(r);
    else ++errors;  // ENOBUFS under load: the flood just goes on
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("sent %llu packets in %.1f s (%.0f pps; blind %llu, aimed at qpn 0x%06x %llu; send errors %llu)\n",
              static_cast<unsigned long long>(sent), took, static_cast<double>(sent) / took,
              static_cast<unsigned long long>(blind), known_qpn, static_cast<unsigned long long>(aimed),
              static_cast<unsigned long long>(errors));
  close(fd);
  return sent > 0 ? 0 : 1;
}
