// RoCE v2 over kernel UDP sockets.
//
// One non-blocking, never-connected UDP socket per local endpoint, each bound
// to a specific IPv4 address (the ICRC covers the source address and port, so
// the transport must know exactly what the kernel will put in the IP/UDP
// headers; a wildcard bind would leave the source address to routing).
//
// Reply sockets: each endpoint is a SO_REUSEPORT group of two sockets on the
// same address and port, with a classic BPF program (unprivileged) that
// steers RC responses (opcodes 0x0D-0x12: read responses, ACK, atomic ACK)
// to the second socket and everything else to the first. The wire is
// unchanged (every packet to and from port 4791); only the local delivery
// differs. The engine's progress thread waits on the first sockets always
// and on the reply sockets only when it must (docs/progress.md), so a
// response that an application thread is polling for wakes nobody.
// Who owns an address:port is decided by an abstract unix socket named after
// it (per network namespace, gone when the process dies): a second process
// that joined the group in a race sees the name taken and leaves at once.
// A name held by another uid is ignored (ClaimEndpoint: SO_PEERCRED).
// IP_MTU_DISCOVER=IP_PMTUDISC_DO sets DF, and an unconnected DF socket sends
// IPv4 ID 0, which is what wire::IpUdpFields assumes (a connected socket
// would number IDs from a per-socket counter and break the ICRC).
//
// Fast-path memory: everything SendBurst and RecvBurst touch is allocated in
// Create(): the sendmmsg/recvmmsg headers, the iovecs, the 4-byte ICRC
// staging per message, one 64 KiB hold-back buffer for reordering, and the
// receive buffers. Nothing is allocated per packet.
//
// Transmit is zero-copy: the engine's packet (const) is handed to the kernel
// through an iovec for BTH..pad plus an iovec for the 4 ICRC bytes computed
// into transport-owned staging; the engine's buffer is never written. A
// corrupted packet splits the iovec around one transport-owned byte holding
// the flipped copy. Only a packet held back for reordering is copied (it must
// outlive the SendBurst call).
#include "transport/udp_transport.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <linux/filter.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>

#include "common/secure_random.h"
#include "transport/endpoint_claim.h"
#include "transport/fault_injector.h"
#include "transport/udp_receive.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

namespace softrnic::transport {

uint32_t PerProcessLoopbackAddress(uint32_t pid, uint32_t attempt) {
  const uint32_t a = 1 + ((pid >> 16) + 66 * attempt) % 254;  // 1..254: never 127.0.x.x
  const uint32_t b = (pid >> 8) & 0xff;
  const uint32_t c = pid & 0xff;
  return (127u << 24) | (a << 16) | (b << 8) | c;
}

std::vector<uint32_t> HostIpv4Addresses() {
  std::vector<uint32_t> result;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return result;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) continue;
    if (!(ifa->ifa_flags & IFF_UP) || (ifa->ifa_flags & IFF_LOOPBACK)) continue;
    sockaddr_in sin;
    std::memcpy(&sin, ifa->ifa_addr, sizeof(sin));
    const uint32_t addr = sin.sin_addr.s_addr;
    if ((ntohl(addr) >> 24) == 127 || addr == 0) continue;
    if (std::find(result.begin(), result.end(), addr) == result.end()) result.push_back(addr);
  }
  freeifaddrs(list);
  return result;
}

namespace {

constexpr int kMaxTxBatch = 64;              // messages per sendmmsg
constexpr int kSocketBufferBytes = 4 << 20;  // SO_SNDBUF / SO_RCVBUF
constexpr uint32_t kMinPacket = 12 + 4;      // BTH + ICRC
// RC responses (IBA 9.2: RDMA READ response first .. atomic acknowledge),
// steered to an endpoint's reply socket.
constexpr uint8_t kFirstRcResponseOpcode = wire::op::kRcReadResponseFirst;
constexpr uint8_t kLastRcResponseOpcode = wire::op::kRcAtomicAck;
constexpr uint32_t kMaxLoopbackAttempts = 16;        // derived from the pid
constexpr uint32_t kMaxRandomLoopbackAttempts = 64;  // then unpredictable ones

// 127.a.b.c with a in 1..254 (never 127.0.x.x, never 127.255.255.255), from
// the kernel CSPRNG.
uint32_t RandomLoopbackAddress() {
  const uint32_t a = 1 + SecureRandomBelow(254);
  return (127u << 24) | (a << 16) | (SecureRandom32() & 0xffffu);
}
// UDP segmentation (UDP_SEGMENT / UDP_GRO, Linux >= 5.0). The kernel accepts
// up to UDP_MAX_SEGMENTS (64 before 6.2, 128 since) segments per send.
constexpr int kMaxSegments = 64;
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

std::string Ipv4Text(uint32_t addr_network_order) {
  char text[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = addr_network_order;
  inet_ntop(AF_INET, &a, text, sizeof(text));
  return text;
}

void SetBuffer(int fd, int force_option, int option) {
  const int bytes = kSocketBufferBytes;
  // The *FORCE variants exceed net.core.[rw]mem_max but need CAP_NET_ADMIN;
  // without it the plain option is silently capped at the sysctl limit.
  if (setsockopt(fd, SOL_SOCKET, force_option, &bytes, sizeof(bytes)) == 0) return;
  (void)setsockopt(fd, SOL_SOCKET, option, &bytes, sizeof(bytes));
}

struct LocalSocket {
  int fd = -1;
  sockaddr_in addr{};  // the bound address and port (network order)
  bool gro = false;  // UDP_GRO accepted: datagrams may hold several packets
  uint16_t local = 0;  // the endpoint (index into locals_) it belongs to
  bool reply = false;  // the endpoint's reply socket (see the top of this file)
};

// The sockets of one endpoint (see the top of this file).
struct EndpointSockets {
  LocalSocket main;
  LocalSocket reply;  // fd -1: none
  int owner_fd = -1;  // abstract unix socket naming the address:port, or -1
};

// Sockets one RecvBurst call looks at (epoll_wait on all of them).
constexpr int kMaxReadySockets = 64;
constexpr int kMinShare = 8;  // datagrams one socket may return per RecvBurst (RecvBurst)

// Opens and binds one socket. Returns 0 or the errno of the failing call, and
// a message in *error.
int OpenSocket(uint32_t addr_network_order, uint16_t port, bool gro, bool reuseport,
               LocalSocket* out, std::string* error) {
  const std::string where = Ipv4Text(addr_network_order) + ":" + std::to_string(port);
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    *error = "socket(): " + std::string(std::strerror(err));
    return err;
  }
  const int pmtu = IP_PMTUDISC_DO;
  if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0) {
    const int err = errno;
    *error = "IP_MTU_DISCOVER on " + where + ": " + std::strerror(err);
    close(fd);
    return err;
  }
  SetBuffer(fd, SO_RCVBUFFORCE, SO_RCVBUF);
  SetBuffer(fd, SO_SNDBUFFORCE, SO_SNDBUF);
  const int one = 1;
  (void)setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));  // ECN bits; optional
  // Coalesced receive: a run of equal-sized datagrams arrives as one buffer
  // with its segment size in a UDP_GRO cmsg (RecvBurst splits it again).
  if (gro) out->gro = setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) == 0;
  if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
    const int err = errno;
    *error = "SO_REUSEPORT on " + where + ": " + std::strerror(err);
    close(fd);
    return err;
  }
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = addr_network_order;
  sin.sin_port = htons(port);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&sin), sizeof(sin)) != 0) {
    const int err = errno;
    *error = "cannot bind UDP " + where + ": " + std::strerror(err);
    close(fd);
    return err;
  }
  socklen_t len = sizeof(sin);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len) != 0) {  // port 0 -> real port
    const int err = errno;
    *error = "getsockname on " + where + ": " + std::strerror(err);
    close(fd);
    return err;
  }
  out->fd = fd;
  out->addr = sin;
  return 0;
}

// The steering program of an endpoint's reuseport group: index 1 (the reply
// socket) for RC responses, index 0 otherwise. The program sees the UDP
// payload, i.e. the BTH, at offset 0; a datagram too short to load from
// ends the program with 0 (the first socket).
bool AttachReplySteering(int fd) {
  static sock_filter code[] = {
      {BPF_LD | BPF_B | BPF_ABS, 0, 0, 0},                                 // A = BTH opcode
      {BPF_JMP | BPF_JGE | BPF_K, 0, 2, kFirstRcResponseOpcode},           // < 0x0D: requests
      {BPF_JMP | BPF_JGT | BPF_K, 1, 0, kLastRcResponseOpcode},            // > 0x12: requests
      {BPF_RET | BPF_K, 0, 0, 1},
      {BPF_RET | BPF_K, 0, 0, 0},
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof(code) / sizeof(code[0])), code};
  return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) == 0;
}

// Opens an endpoint: its socket and, if `reply`, its reply socket (see the
// top of this file). Returns 0 or an errno (EADDRINUSE: another process's).
int OpenEndpoint(uint32_t addr_network_order, uint16_t port, bool gro, bool reply,
                 EndpointSockets* out, std::string* error) {
  if (int err = OpenSocket(addr_network_order, port, gro, reply, &out->main, error)) return err;
  if (!reply) return 0;
  out->owner_fd = ClaimEndpoint(out->main.addr);
  if (out->owner_fd < 0) {
    const int err = errno;
    close(out->main.fd);
    out->main.fd = -1;
    if (err == EADDRINUSE) {
      *error = "UDP " + Ipv4Text(addr_network_order) + ":" + std::to_string(port) +
               " is in use by another softrnic process";
      return EADDRINUSE;
    }
    // No unix sockets here (a sandbox): a plain endpoint without the group.
    return OpenSocket(addr_network_order, port, gro, false, &out->main, error);
  }
  std::string ignored;
  if (OpenSocket(addr_network_order, ntohs(out->main.addr.sin_port), gro, true, &out->reply,
                 &ignored) != 0)
    return 0;  // the reply socket is an optimisation only
  if (!AttachReplySteering(out->main.fd)) {
    close(out->reply.fd);
    out->reply.fd = -1;
  }
  return 0;
}

class UdpTransport final : public Transport {
 public:
  static std::unique_ptr<Transport> Create(const UdpConfig& config, std::string* error);
  ~UdpTransport() override;

  std::span<const Endpoint> locals() const override { return locals_; }
  int SendBurst(const TxPacket* packets, int n) override;
  int RecvBurst(RxPacket* packets, int n) override;
  int pollable_fd() const override { return epoll_fd_; }
  int reply_pollable_fd() const override { return reply_epoll_fd_; }
  const TransportCounters& counters() const override { return counters_; }

 private:
  enum class MsgKind : uint8_t { kPrimary, kDuplicate, kHeld };

  // Per-message staging. The iovecs point into the caller's packet and into
  // this struct (icrc, flipped), so a TxMsg is never copied once filled.
  struct TxMsg {
    sockaddr_in dst;
    iovec iov[4];
    uint8_t icrc[4];
    uint8_t flipped;
    MsgKind kind;
    int packet;  // caller's index; for kHeld the packet it was sent after
  };

  explicit UdpTransport(const UdpConfig& config)
      : faults_(config.faults), segmentation_(config.segmentation) {}
  bool Init(std::string* error);
  bool AddEndpoint(const EndpointSockets& e, std::string* error);

  // Makes room for `count` messages on socket `local`; false when a flush
  // hit a full socket buffer (busy_return_ then says how many packets of
  // this burst were consumed).
  bool Reserve(uint16_t local, int count);
  bool Flush();
  void FillPacketMsg(TxMsg* m, const uint8_t* data, uint32_t length, const sockaddr_in& dst,
                     uint32_t icrc, const FaultDecision& d, MsgKind kind, int packet);
  void FillHeldMsg(TxMsg* m, int after_packet);
  void FlushHeldAlone();

  // The segmented send path (no fault injection): runs of packets to one
  // destination with one size (the last may be shorter) become one
  // UDP_SEGMENT message. Returns how many packets were consumed.
  int SendBurstSegmented(const TxPacket* packets, int n);
  bool accepts_split_payload() const override { return segmentation_ && !faults_.enabled(); }
  // Sends the staged segmented messages; false on a full socket buffer
  // (then *consumed = the first packet not handed to the kernel).
  bool FlushSegmented(int* consumed);
  // Turns received datagram `slot` into packets from segment `next_segment_`
  // on (DatagramSplitter, udp_receive.h: the same function the fuzzer
  // calls); returns false when `packets` filled up before the datagram ended.
  bool SplitDatagram(int slot, uint16_t sock, RxPacket* packets, int n, int* produced);

  // Which socket sends packet p: its endpoint's first socket (the reply
  // socket only receives).
  uint16_t TxSocketFor(const TxPacket& p) const { return main_of_local_[p.local_index]; }

  // Every socket, device-port and reply sockets alike; indices below are
  // into this vector.
  std::vector<LocalSocket> sockets_;
  std::vector<uint16_t> main_of_local_;
  std::vector<int> owner_fds_;  // EndpointSockets::owner_fd of each endpoint
  std::vector<Endpoint> locals_;
  int epoll_fd_ = -1;        // the device-port sockets
  int all_epoll_fd_ = -1;    // every socket, for RecvBurst's readiness check
  int reply_epoll_fd_ = -1;  // the reply sockets
  TransportCounters counters_;
  FaultInjector faults_;
  DatagramSplitter splitter_{&counters_};
  uint64_t rx_now_ns_ = 0;  // CLOCK_MONOTONIC_COARSE at the RecvBurst call

  // Transmit batch (one socket at a time).
  TxMsg tx_msgs_[kMaxTxBatch];
  mmsghdr tx_hdrs_[kMaxTxBatch];
  int pending_ = 0;
  uint16_t pending_sock_ = 0;
  int busy_return_ = 0;

  // Reorder hold-back: at most one packet, copied with its ICRC.
  std::unique_ptr<uint8_t[]> hold_buf_;
  bool held_ = false;
  bool held_queued_ = false;  // its message is in the pending batch
  uint32_t held_length_ = 0;
  uint16_t held_sock_ = 0;
  sockaddr_in held_dst_{};
  int held_from_packet_ = -1;  // index in the current SendBurst, else -1

  // Segmented transmit staging (SendBurstSegmented): one message per run,
  // two iovecs (body, ICRC) per packet.
  const bool segmentation_;
  bool gso_refused_ = false;  // the kernel rejected UDP_SEGMENT: send packet by packet
  struct SegMsg {
    sockaddr_in dst;
    int first_packet;
    int packets;
    int first_iov;
    int iovs;
    uint32_t bytes;
    uint16_t segment_size;
    alignas(cmsghdr) uint8_t cmsg[CMSG_SPACE(sizeof(uint16_t))];
  };
  SegMsg seg_msgs_[kMaxTxBatch];
  mmsghdr seg_hdrs_[kMaxTxBatch];
  // Up to three iovecs per packet: head, payload, pad + ICRC.
  iovec seg_iov_[3 * kMaxTxBatch];
  int seg_iovs_ = 0;
  uint8_t seg_icrc_[kMaxTxBatch][8];
  int seg_pending_ = 0;      // messages staged
  int seg_packets_ = 0;      // packets staged (iovec pairs used)
  uint16_t seg_sock_ = 0;   // the socket the staged messages leave from

  // Receive side.
  std::unique_ptr<uint8_t[]>
      rx_buf_;  // kUdpMaxRecvBurst * kUdpRecvBufferSize, untouched until used
  mmsghdr rx_hdrs_[kUdpMaxRecvBurst];
  iovec rx_iov_[kUdpMaxRecvBurst];
  sockaddr_in rx_src_[kUdpMaxRecvBurst];
  alignas(cmsghdr) uint8_t rx_cmsg_[kUdpMaxRecvBurst][64];
  size_t rr_ = 0;  // rotates which ready socket RecvBurst serves first
  // Datagrams received but not yet fully returned (a coalesced datagram can
  // hold more packets than one RecvBurst may return): slots
  // [next_slot_, slots_filled_) of socket split_socket_, the first one from
  // segment next_segment_ on. No new recvmmsg until they are all returned,
  // so the buffers stay valid as the interface promises.
  int next_slot_ = 0;
  int slots_filled_ = 0;
  uint32_t next_segment_ = 0;
  uint16_t split_socket_ = 0;
};

std::unique_ptr<Transport> UdpTransport::Create(const UdpConfig& config, std::string* error) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  std::unique_ptr<UdpTransport> t(new UdpTransport(config));
  if (!t->Init(error)) return nullptr;

  if (!config.bind_addresses.empty()) {
    std::vector<uint32_t> seen;
    for (const std::string& text : config.bind_addresses) {
      in_addr a{};
      if (inet_pton(AF_INET, text.c_str(), &a) != 1) {
        *error = "bind address '" + text + "' is not an IPv4 address";
        return nullptr;
      }
      if (a.s_addr == INADDR_ANY || a.s_addr == INADDR_BROADCAST) {
        *error = "bind address '" + text +
                 "' is not a unicast address (a wildcard bind would leave the ICRC's source "
                 "address to routing)";
        return nullptr;
      }
      if (std::find(seen.begin(), seen.end(), a.s_addr) != seen.end()) {
        *error = "bind address '" + text + "' is listed twice";
        return nullptr;
      }
      seen.push_back(a.s_addr);
      EndpointSockets e;
      if (OpenEndpoint(a.s_addr, config.port, config.segmentation, config.reply_sockets, &e,
                       error) != 0)
        return nullptr;
      if (!t->AddEndpoint(e, error)) return nullptr;
    }
    return t;
  }

  // Automatic: host addresses whose port is free (a taken one belongs to
  // another softrnic process on this host, which then owns hostIP:port)...
  for (uint32_t addr : HostIpv4Addresses()) {
    // Room for the loopback endpoint is kept; further host addresses are
    // left out rather than failing (kMaxReadySockets).
    if (t->sockets_.size() + 4 > static_cast<size_t>(kMaxReadySockets)) break;
    EndpointSockets e;
    std::string ignored;
    if (OpenEndpoint(addr, config.port, config.segmentation, config.reply_sockets, &e, &ignored) !=
        0)
      continue;
    if (!t->AddEndpoint(e, error)) return nullptr;
  }
  // ...then exactly one per-process loopback address: the pid's candidates
  // first (docs/addressing.md; tools/device_view.cc predicts attempt 0),
  // then addresses from the kernel CSPRNG. Another local user can bind every
  // pid-derived candidate of a future pid in advance (security review M5),
  // never a random one: the device still comes up.
  const uint32_t pid = static_cast<uint32_t>(getpid());
  std::string last_error;
  bool bound = false;
  for (uint32_t attempt = 0; attempt < kMaxLoopbackAttempts + kMaxRandomLoopbackAttempts && !bound;
       ++attempt) {
    const uint32_t candidate = attempt < kMaxLoopbackAttempts ? PerProcessLoopbackAddress(pid, attempt)
                                                              : RandomLoopbackAddress();
    EndpointSockets e;
    const int err = OpenEndpoint(htonl(candidate), config.port, config.segmentation,
                                 config.reply_sockets, &e, &last_error);
    if (err == EADDRINUSE) continue;
    if (err != 0) {
      *error = last_error;
      return nullptr;
    }
    if (!t->AddEndpoint(e, error)) return nullptr;
    bound = true;
  }
  if (!bound) {
    *error = "no free per-process loopback address at port " + std::to_string(config.port) +
             " after " + std::to_string(kMaxLoopbackAttempts + kMaxRandomLoopbackAttempts) +
             " tries (" + last_error +
             "); is something bound to 0.0.0.0:" + std::to_string(config.port) +
             "? set SOFTRNIC_PORT or SOFTRNIC_BIND";
    return nullptr;
  }
  return t;
}

bool UdpTransport::Init(std::string* error) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  reply_epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  all_epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0 || reply_epoll_fd_ < 0 || all_epoll_fd_ < 0) {
    *error = "epoll_create1: " + std::string(std::strerror(errno));
    return false;
  }
  hold_buf_.reset(new uint8_t[kUdpMaxPayload]);
  // Deliberately not value-initialised: pages are touched only by the
  // datagrams that land in them.
  rx_buf_.reset(new uint8_t[static_cast<size_t>(kUdpMaxRecvBurst) * kUdpRecvBufferSize]);
  std::memset(tx_hdrs_, 0, sizeof(tx_hdrs_));
  std::memset(rx_hdrs_, 0, sizeof(rx_hdrs_));
  for (int i = 0; i < kUdpMaxRecvBurst; ++i) {
    rx_iov_[i].iov_base = rx_buf_.get() + static_cast<size_t>(i) * kUdpRecvBufferSize;
    rx_iov_[i].iov_len = kUdpRecvBufferSize;
    rx_hdrs_[i].msg_hdr.msg_iov = &rx_iov_[i];
    rx_hdrs_[i].msg_hdr.msg_iovlen = 1;
    rx_hdrs_[i].msg_hdr.msg_name = &rx_src_[i];
    rx_hdrs_[i].msg_hdr.msg_control = rx_cmsg_[i];
  }
  return true;
}

bool UdpTransport::AddEndpoint(const EndpointSockets& e, std::string* error) {
  auto close_all = [&] {
    close(e.main.fd);
    if (e.reply.fd >= 0) close(e.reply.fd);
    if (e.owner_fd >= 0) close(e.owner_fd);
  };
  if (sockets_.size() + 2 > kMaxReadySockets) {
    close_all();
    *error = "too many local addresses";
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = static_cast<uint32_t>(sockets_.size());
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, e.main.fd, &ev) != 0) {
    *error = "epoll_ctl: " + std::string(std::strerror(errno));
    close_all();
    return false;
  }
  if (epoll_ctl(all_epoll_fd_, EPOLL_CTL_ADD, e.main.fd, &ev) != 0 ||
      (e.reply.fd >= 0 && [&] {
        epoll_event rev{};
        rev.events = EPOLLIN;
        rev.data.u32 = static_cast<uint32_t>(sockets_.size() + 1);
        return epoll_ctl(all_epoll_fd_, EPOLL_CTL_ADD, e.reply.fd, &rev) != 0;
      }())) {
    *error = "epoll_ctl: " + std::string(std::strerror(errno));
    close_all();
    return false;
  }
  const uint16_t local = static_cast<uint16_t>(locals_.size());
  main_of_local_.push_back(static_cast<uint16_t>(sockets_.size()));
  sockets_.push_back(e.main);
  sockets_.back().local = local;
  locals_.push_back(Endpoint{Gid::FromIpv4(e.main.addr.sin_addr.s_addr), ntohs(e.main.addr.sin_port)});
  owner_fds_.push_back(e.owner_fd);
  if (e.reply.fd < 0) return true;
  ev.data.u32 = static_cast<uint32_t>(sockets_.size());
  if (epoll_ctl(reply_epoll_fd_, EPOLL_CTL_ADD, e.reply.fd, &ev) != 0) {
    // Still in the group: its packets must be read, so watch it with the rest.
    (void)epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, e.reply.fd, &ev);
  }
  sockets_.push_back(e.reply);
  sockets_.back().local = local;
  sockets_.back().reply = true;
  return true;
}

UdpTransport::~UdpTransport() {
  for (const LocalSocket& s : sockets_) close(s.fd);
  for (int fd : owner_fds_)
    if (fd >= 0) close(fd);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (reply_epoll_fd_ >= 0) close(reply_epoll_fd_);
  if (all_epoll_fd_ >= 0) close(all_epoll_fd_);
}

void UdpTransport::FillPacketMsg(TxMsg* m, const uint8_t* data, uint32_t length,
                                 const sockaddr_in& dst, uint32_t icrc, const FaultDecision& d,
                                 MsgKind kind, int packet) {
  m->dst = dst;
  m->kind = kind;
  m->packet = packet;
  m->icrc[0] = static_cast<uint8_t>(icrc);
  m->icrc[1] = static_cast<uint8_t>(icrc >> 8);
  m->icrc[2] = static_cast<uint8_t>(icrc >> 16);
  m->icrc[3] = static_cast<uint8_t>(icrc >> 24);
  // The kernel only reads iov_base for a send; the const_cast never leads to a write.
  uint8_t* body = const_cast<uint8_t*>(data);
  const uint32_t body_len = length - 4;
  int iovs = 0;
  if (d.corrupt) {
    m->flipped = static_cast<uint8_t>(data[d.corrupt_byte] ^ d.corrupt_mask);
    m->iov[iovs++] = iovec{body, d.corrupt_byte};
    m->iov[iovs++] = iovec{&m->flipped, 1};
    m->iov[iovs++] = iovec{body + d.corrupt_byte + 1, body_len - d.corrupt_byte - 1};
  } else {
    m->iov[iovs++] = iovec{body, body_len};
  }
  m->iov[iovs++] = iovec{m->icrc, 4};
  const int index = static_cast<int>(m - tx_msgs_);
  msghdr& h = tx_hdrs_[index].msg_hdr;
  h.msg_name = &m->dst;
  h.msg_namelen = sizeof(m->dst);
  h.msg_iov = m->iov;
  h.msg_iovlen = static_cast<size_t>(iovs);
  h.msg_control = nullptr;
  h.msg_controllen = 0;
  h.msg_flags = 0;
}

void UdpTransport::FillHeldMsg(TxMsg* m, int after_packet) {
  m->dst = held_dst_;
  m->kind = MsgKind::kHeld;
  m->packet = after_packet;
  m->iov[0] = iovec{hold_buf_.get(), held_length_};
  const int index = static_cast<int>(m - tx_msgs_);
  msghdr& h = tx_hdrs_[index].msg_hdr;
  h.msg_name = &m->dst;
  h.msg_namelen = sizeof(m->dst);
  h.msg_iov = m->iov;
  h.msg_iovlen = 1;
  h.msg_control = nullptr;
  h.msg_controllen = 0;
  h.msg_flags = 0;
  held_queued_ = true;
}

bool UdpTransport::Reserve(uint16_t sock, int count) {
  if (pending_ > 0 && (pending_sock_ != sock || pending_ + count > kMaxTxBatch)) {
    if (!Flush()) return false;
  }
  pending_sock_ = sock;
  return true;
}

bool UdpTransport::Flush() {
  const int fd = sockets_[pending_sock_].fd;
  int off = 0;
  bool ok = true;
  while (off < pending_) {
    const int r = sendmmsg(fd, tx_hdrs_ + off, static_cast<unsigned>(pending_ - off), MSG_DONTWAIT);
    if (r > 0) {
      for (int k = off; k < off + r; ++k) {
        ++counters_.tx_packets;
        counters_.tx_bytes += tx_hdrs_[k].msg_len;
        if (tx_msgs_[k].kind == MsgKind::kHeld) held_ = false;
      }
      off += r;
      continue;
    }
    const int err = r < 0 ? errno : EAGAIN;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS) {
      // Socket buffer full: stop here, never block. Packets from the first
      // unsent primary on are left to the caller.
      ++counters_.tx_busy;
      const TxMsg& m = tx_msgs_[off];
      busy_return_ = m.kind == MsgKind::kPrimary ? m.packet : m.packet + 1;
      ok = false;
      break;
    }
    // A hard error for this one datagram (EMSGSIZE beyond the path MTU with
    // DF, EHOSTUNREACH, EPERM from a firewall...): drop it like a lossy wire.
    ++counters_.tx_errors;
    if (tx_msgs_[off].kind == MsgKind::kHeld) held_ = false;
    ++off;
  }
  pending_ = 0;
  held_queued_ = false;
  return ok;
}

void UdpTransport::FlushHeldAlone() {
  if (!held_ || pending_ != 0) return;
  pending_sock_ = held_sock_;
  FillHeldMsg(&tx_msgs_[0], -1);
  pending_ = 1;
  (void)Flush();  // on EAGAIN it stays held for the next call
}

int UdpTransport::SendBurst(const TxPacket* packets, int n) {
  if (segmentation_ && !faults_.enabled()) return SendBurstSegmented(packets, n);
  busy_return_ = n;
  held_from_packet_ = -1;
  bool busy = false;
  for (int i = 0; i < n && !busy; ++i) {
    const TxPacket& p = packets[i];
    if (p.data == nullptr || p.length < kMinPacket || p.length > kUdpMaxPayload ||
        p.local_index >= locals_.size() || !p.dst.gid.IsV4Mapped() || p.dst.port == 0 ||
        p.payload != nullptr) {  // pieces only on the segmented path (accepts_split_payload)
      ++counters_.tx_errors;  // malformed request: consumed, never retried
      continue;
    }
    const uint16_t sock = TxSocketFor(p);
    const LocalSocket& s = sockets_[sock];
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_addr.s_addr = p.dst.gid.Ipv4();
    dst.sin_port = htons(p.dst.port);

    // The ICRC for exactly the headers the kernel will emit from this socket.
    wire::IpUdpFields ip;
    std::memcpy(ip.src_ip, &s.addr.sin_addr.s_addr, 4);
    std::memcpy(ip.dst_ip, &dst.sin_addr.s_addr, 4);
    ip.src_port = ntohs(s.addr.sin_port);
    ip.dst_port = p.dst.port;
    const uint32_t icrc = wire::ComputeIcrc(ip, p.data, p.length - 4);

    FaultDecision d;
    if (faults_.enabled()) {
      d = faults_.Next(p.length);
      if (d.drop) {
        ++counters_.injected_drops;
        continue;
      }
      if (d.reorder && held_ && held_queued_) {
        // The previous held packet is queued behind an earlier one in this
        // batch: send the batch so the hold buffer is free again.
        if (!Flush()) {
          busy = true;
          break;
        }
      }
      if (d.corrupt) ++counters_.injected_corrupts;
      if (d.reorder && !held_) {
        // Hold this one back (copied: the caller's buffer is free once we
        // return) and send it after the next packet.
        uint8_t* h = hold_buf_.get();
        std::memcpy(h, p.data, p.length - 4);
        h[p.length - 4] = static_cast<uint8_t>(icrc);
        h[p.length - 3] = static_cast<uint8_t>(icrc >> 8);
        h[p.length - 2] = static_cast<uint8_t>(icrc >> 16);
        h[p.length - 1] = static_cast<uint8_t>(icrc >> 24);
        if (d.corrupt) h[d.corrupt_byte] ^= d.corrupt_mask;
        held_ = true;
        held_length_ = p.length;
        held_sock_ = sock;
        held_dst_ = dst;
        held_from_packet_ = i;
        ++counters_.injected_reorders;
        continue;  // a held packet is not also duplicated
      }
      if (d.duplicate) ++counters_.injected_dups;
    }

    const int count = d.duplicate ? 2 : 1;
    if (!Reserve(sock, count)) {
      busy = true;
      break;
    }
    FillPacketMsg(&tx_msgs_[pending_], p.data, p.length, dst, icrc, d, MsgKind::kPrimary, i);
    ++pending_;
    if (d.duplicate) {
      FillPacketMsg(&tx_msgs_[pending_], p.data, p.length, dst, icrc, d, MsgKind::kDuplicate, i);
      ++pending_;
    }
    if (held_ && !held_queued_ && held_from_packet_ != i) {
      if (!Reserve(held_sock_, 1)) {
        busy = true;
        break;
      }
      FillHeldMsg(&tx_msgs_[pending_], i);
      ++pending_;
    }
  }
  if (!busy && pending_ > 0) (void)Flush();
  pending_ = 0;
  held_queued_ = false;
  const int consumed = busy_return_;
  if (held_ && held_from_packet_ >= consumed) {
    // The held packet belongs to the part of the burst the caller will
    // offer again: forget the hold so it is not sent twice.
    held_ = false;
    --counters_.injected_reorders;
  }
  held_from_packet_ = -1;
  return consumed;
}

int UdpTransport::SendBurstSegmented(const TxPacket* packets, int n) {
  seg_pending_ = 0;
  seg_packets_ = 0;
  seg_iovs_ = 0;
  const int max_segments = gso_refused_ ? 1 : kMaxSegments;
  uint32_t last_length = 0;
  for (int i = 0; i < n; ++i) {
    const TxPacket& p = packets[i];
    if (p.data == nullptr || p.length < kMinPacket || p.length > kUdpMaxPayload ||
        p.local_index >= locals_.size() || !p.dst.gid.IsV4Mapped() || p.dst.port == 0 ||
        (p.payload != nullptr && !SplitLayoutValid(p))) {
      ++counters_.tx_errors;  // malformed request: consumed, never retried
      continue;
    }
    const uint16_t sock = TxSocketFor(p);
    const uint32_t dst_ip = p.dst.gid.Ipv4();
    const uint16_t dst_port = htons(p.dst.port);
    SegMsg* m = seg_pending_ > 0 ? &seg_msgs_[seg_pending_ - 1] : nullptr;
    // A packet joins the open run when it goes the same way, is not larger
    // than the run's segment size, every earlier packet of the run had
    // exactly that size (the kernel cuts at segment_size; only the last
    // segment may be shorter), and the datagram stays within UDP's limit.
    const bool join = m != nullptr && seg_sock_ == sock &&
                      m->dst.sin_addr.s_addr == dst_ip && m->dst.sin_port == dst_port &&
                      p.length <= m->segment_size && last_length == m->segment_size &&
                      m->packets < max_segments && m->bytes + p.length <= kUdpMaxPayload &&
                      seg_packets_ < kMaxTxBatch;
    if (!join) {
      if (seg_pending_ > 0 && (seg_sock_ != sock || seg_pending_ == kMaxTxBatch ||
                               seg_packets_ == kMaxTxBatch)) {
        int consumed = n;
        if (!FlushSegmented(&consumed)) return consumed;
      }
      m = &seg_msgs_[seg_pending_++];
      m->dst = sockaddr_in{};
      m->dst.sin_family = AF_INET;
      m->dst.sin_addr.s_addr = dst_ip;
      m->dst.sin_port = dst_port;
      m->first_packet = i;
      m->packets = 0;
      m->first_iov = seg_iovs_;
      m->iovs = 0;
      m->bytes = 0;
      m->segment_size = static_cast<uint16_t>(p.length);
      seg_sock_ = sock;
    }
    // The ICRC for exactly the headers the kernel will emit for this
    // segment: its IPv4 ID is its index in the run (see CheckSegmentIcrc).
    const LocalSocket& s = sockets_[sock];
    wire::IpUdpFields ip;
    std::memcpy(ip.src_ip, &s.addr.sin_addr.s_addr, 4);
    std::memcpy(ip.dst_ip, &dst_ip, 4);
    ip.src_port = ntohs(s.addr.sin_port);
    ip.dst_port = p.dst.port;
    ip.ipv4_id = static_cast<uint16_t>(m->packets);
    uint8_t* staged = seg_icrc_[seg_packets_];
    // The kernel only reads iov_base for a send; the const_casts never lead
    // to a write.
    uint32_t icrc;
    size_t tail = 4;
    if (p.payload == nullptr) {
      icrc = wire::ComputeIcrc(ip, p.data, p.length - 4);
      seg_iov_[seg_iovs_++] = iovec{const_cast<uint8_t*>(p.data), p.length - 4};
    } else {
      // In pieces: the payload goes from the application's memory straight
      // into the kernel's copy; the pad bytes travel with the ICRC.
      const uint32_t pad = p.length - 4 - p.head_length - p.payload_length;
      icrc = wire::ComputeIcrcParts(ip, p.data, p.head_length, p.payload, p.payload_length, pad);
      seg_iov_[seg_iovs_++] = iovec{const_cast<uint8_t*>(p.data), p.head_length};
      if (p.payload_length > 0)
        seg_iov_[seg_iovs_++] = iovec{const_cast<uint8_t*>(p.payload), p.payload_length};
      std::memset(staged, 0, pad);
      staged += pad;
      tail += pad;
    }
    staged[0] = static_cast<uint8_t>(icrc);
    staged[1] = static_cast<uint8_t>(icrc >> 8);
    staged[2] = static_cast<uint8_t>(icrc >> 16);
    staged[3] = static_cast<uint8_t>(icrc >> 24);
    seg_iov_[seg_iovs_++] = iovec{seg_icrc_[seg_packets_], tail};
    m->iovs = seg_iovs_ - m->first_iov;
    ++seg_packets_;
    ++m->packets;
    m->bytes += p.length;
    last_length = p.length;
  }
  int consumed = n;
  if (seg_pending_ > 0) (void)FlushSegmented(&consumed);
  return consumed;
}

bool UdpTransport::FlushSegmented(int* consumed) {
  for (int k = 0; k < seg_pending_; ++k) {
    SegMsg& m = seg_msgs_[k];
    msghdr& h = seg_hdrs_[k].msg_hdr;
    h.msg_name = &m.dst;
    h.msg_namelen = sizeof(m.dst);
    h.msg_iov = &seg_iov_[m.first_iov];
    h.msg_iovlen = static_cast<size_t>(m.iovs);
    h.msg_flags = 0;
    if (m.packets > 1) {
      h.msg_control = m.cmsg;
      h.msg_controllen = sizeof(m.cmsg);
      cmsghdr* c = CMSG_FIRSTHDR(&h);
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      std::memcpy(CMSG_DATA(c), &m.segment_size, sizeof(uint16_t));
    } else {
      h.msg_control = nullptr;
      h.msg_controllen = 0;
    }
  }
  const int fd = sockets_[seg_sock_].fd;
  int off = 0;
  bool ok = true;
  while (off < seg_pending_) {
    const int r =
        sendmmsg(fd, seg_hdrs_ + off, static_cast<unsigned>(seg_pending_ - off), MSG_DONTWAIT);
    if (r > 0) {
      for (int k = off; k < off + r; ++k) {
        counters_.tx_packets += static_cast<uint64_t>(seg_msgs_[k].packets);
        counters_.tx_bytes += seg_hdrs_[k].msg_len;
      }
      off += r;
      continue;
    }
    const int err = r < 0 ? errno : EAGAIN;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS) {
      // Socket buffer full: never block; the caller offers the rest again.
      ++counters_.tx_busy;
      *consumed = seg_msgs_[off].first_packet;
      ok = false;
      break;
    }
    if (seg_msgs_[off].packets > 1 && (err == EINVAL || err == EIO || err == EOPNOTSUPP)) {
      // A kernel (or route: xfrm, UDP-Lite) without UDP segmentation: from
      // now on one packet per datagram. This run is lost like on a lossy
      // wire; RC retransmits it.
      if (!gso_refused_)
        std::fprintf(stderr, "softrnic: UDP_SEGMENT refused (%s); sending packet by packet\n",
                     std::strerror(err));
      gso_refused_ = true;
    }
    // A hard error for this one datagram (EMSGSIZE beyond the path MTU with
    // DF, EHOSTUNREACH, EPERM from a firewall...): drop it like a lossy wire.
    counters_.tx_errors += static_cast<uint64_t>(seg_msgs_[off].packets);
    ++off;
  }
  seg_pending_ = 0;
  seg_packets_ = 0;
  seg_iovs_ = 0;
  return ok;
}

bool UdpTransport::SplitDatagram(int slot, uint16_t sock, RxPacket* packets, int n,
                                 int* produced) {
  const msghdr& h = rx_hdrs_[slot].msg_hdr;
  const LocalSocket& s = sockets_[sock];
  ReceivedDatagram d;
  d.data = static_cast<uint8_t*>(rx_iov_[slot].iov_base);
  d.length = rx_hdrs_[slot].msg_len;
  d.truncated = (h.msg_flags & MSG_TRUNC) != 0;
  d.source_is_ipv4 = h.msg_namelen >= sizeof(sockaddr_in) && rx_src_[slot].sin_family == AF_INET;
  d.src_ip = rx_src_[slot].sin_addr.s_addr;
  d.src_port = ntohs(rx_src_[slot].sin_port);
  d.dst_ip = s.addr.sin_addr.s_addr;
  d.dst_port = ntohs(s.addr.sin_port);
  ReadReceiveControl(h, d.length, &d.gro_segment_size, &d.traffic_class);
  return splitter_.Split(d, s.local, rx_now_ns_, &next_segment_, packets, n, produced);
}

int UdpTransport::RecvBurst(RxPacket* packets, int n) {
  // A packet held back for reordering goes out now at the latest: the engine
  // calls RecvBurst before it sleeps, so nothing stays held while idle.
  if (held_) FlushHeldAlone();
  if (n <= 0) return 0;
  int produced = 0;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  rx_now_ns_ =
      static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
  // First what is left of datagrams received earlier; their slots must not
  // be reused before every packet in them has been returned.
  while (next_slot_ < slots_filled_) {
    if (!SplitDatagram(next_slot_, split_socket_, packets, n, &produced)) return produced;
    ++next_slot_;
  }
  next_slot_ = slots_filled_ = 0;
  if (produced > 0) return produced;

  int used = 0;  // receive slots consumed this call
  const size_t nsock = sockets_.size();
  // Which sockets have datagrams: one epoll_wait instead of a recvmmsg per
  // socket (a device has two sockets per address, and a host address or
  // two besides its loopback one).
  epoll_event ready[kMaxReadySockets];
  int nready = 1;
  if (nsock == 1) {
    ready[0].data.u32 = 0;
  } else {
    nready = epoll_wait(all_epoll_fd_, ready, kMaxReadySockets, 0);
    if (nready <= 0) return 0;
  }
  for (int k = 0; k < nready && used < kUdpMaxRecvBurst && produced < n; ++k) {
    // Rotate the start so that no socket is always served first.
    const size_t si = ready[(static_cast<size_t>(k) + rr_) % static_cast<size_t>(nready)].data.u32;
    LocalSocket& s = sockets_[si];
    // One socket takes at most half a burst per call while others are
    // ready: a flooded socket (a peer retransmitting into it) must not
    // starve the others, least of all the reply socket whose ACKs stop it.
    const int share = nready > 1 ? std::max(kMinShare, n / 2) : n;
    const int want = std::min({n - produced, share, kUdpMaxRecvBurst - used});
    for (int j = used; j < used + want; ++j) {
      msghdr& h = rx_hdrs_[j].msg_hdr;
      h.msg_namelen = sizeof(sockaddr_in);
      h.msg_controllen = sizeof(rx_cmsg_[j]);
      h.msg_flags = 0;
    }
    const int r =
        recvmmsg(s.fd, rx_hdrs_ + used, static_cast<unsigned>(want), MSG_DONTWAIT, nullptr);
    if (r <= 0) continue;  // EAGAIN: another reader took it
    for (int j = used; j < used + r; ++j) {
      next_segment_ = 0;
      if (!SplitDatagram(j, static_cast<uint16_t>(si), packets, n, &produced)) {
        // `packets` is full: the rest of this datagram and the later ones
        // are returned by the next calls.
        next_slot_ = j;
        slots_filled_ = used + r;
        split_socket_ = static_cast<uint16_t>(si);
        ++rr_;
        return produced;
      }
    }
    used += r;
  }
  ++rr_;
  return produced;
}

}  // namespace

std::unique_ptr<Transport> CreateUdpTransport(const UdpConfig& config, std::string* error) {
  return UdpTransport::Create(config, error);
}

}  // namespace softrnic::transport
