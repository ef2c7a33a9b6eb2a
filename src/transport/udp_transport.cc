// RoCE v2 over kernel UDP sockets: the transport object, its setup and its
// receive loop. The rooms it uses: udp_socket.{h,cc} (endpoints: bind,
// claim, per-process loopback address, reply-socket BPF steering),
// udp_tx.{h,cc} (the transmit pipeline), udp_receive.{h,cc} (a received
// datagram -> packets, ICRC checked), icrc_framing.{h,cc} (the ICRC).
// Fault injection is not here: it wraps this transport (fault_transport.h).
//
// Fast-path memory: everything SendBurst and RecvBurst touch is allocated in
// Create(): the sendmmsg/recvmmsg headers, the iovecs, the ICRC staging and
// the receive buffers. Nothing is allocated per packet.
#include "transport/udp_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>

#include "log/log.h"
#include "transport/host_nic/client.h"
#include "transport/host_nic/protocol.h"
#include "transport/link_mtu.h"
#include "transport/local_address.h"
#include "transport/udp_multicast.h"
#include "transport/udp_receive.h"
#include "transport/udp_socket.h"
#include "transport/udp_tx.h"

namespace softrnic::transport {
namespace {

constexpr int kMinShare = 8;  // datagrams one socket may return per RecvBurst (RecvBurst)

class UdpTransport final : public Transport {
 public:
  static std::unique_ptr<Transport> Create(const UdpConfig& config, std::string* error);
  ~UdpTransport() override;

  std::span<const Endpoint> locals() const override { return locals_; }
  int SendBurst(const TxPacket* packets, int n) override { return sender_.Send(packets, n); }
  // Packets in pieces only where runs are built: per-packet sending exists
  // for fault injection, which acts on whole packets.
  bool accepts_split_payload() const override { return segmented_; }
  int RecvBurst(RxPacket* packets, int n) override;
  int pollable_fd() const override { return epoll_fd_; }
  int reply_pollable_fd() const override { return reply_epoll_fd_; }
  const TransportCounters& counters() const override { return counters_; }
  int JoinMulticast(const Gid& group) override;
  void LeaveMulticast(const Gid& group) override;
  uint32_t max_multicast_groups() const override { return kMaxMulticastGroups; }
  uint32_t link_mtu() const override { return link_mtu_; }
  uint32_t inflight_budget_bytes() const override { return receive_buffer_bytes_; }
  int qpn_lane() const override { return lane_; }
  int ClaimCmService(uint16_t port_space, uint16_t port, bool claim) override {
    if (host_nic_fd_ < 0) return 0;
    return host_nic::RequestService(host_nic_fd_, port_space, port, claim);
  }

 private:
  // Segmented sending is off when faults are injected above this transport
  // (fault_transport.h): those act per packet.
  explicit UdpTransport(const UdpConfig& config)
      : segmented_(config.segmentation && !config.faults.enabled()) {}
  bool Init(std::string* error);
  bool AddEndpoint(const EndpointSockets& e, std::string* error);

  // Turns received datagram `slot` into packets from segment `next_segment_`
  // on (DatagramSplitter, udp_receive.h: the same function the fuzzer
  // calls); returns false when `packets` filled up before the datagram ended.
  bool SplitDatagram(int slot, uint16_t sock, RxPacket* packets, int n, int* produced);

  const bool segmented_;
  // Every socket, device-port, reply and multicast group sockets alike;
  // indices below are into this vector. Its capacity is reserved once
  // (RxPacket::group points into it); a group's slot is reused after it is
  // left (fd -1), never erased, since epoll names sockets by index.
  std::vector<LocalSocket> sockets_;
  int groups_ = 0;  // group sockets open
  std::vector<uint16_t> main_of_local_;  // the socket that sends for each endpoint
  // Held while the transport lives: each endpoint's owner_fd and sink_fd.
  std::vector<int> owner_fds_;
  std::vector<Endpoint> locals_;
  // The host NIC lease (udp_socket.h, OpenEndpoints): its lane and its
  // control connection, closed after every socket (nicd then reclaims
  // them knowing they are gone); -1 without one.
  int lane_ = -1;
  int host_nic_fd_ = -1;
  uint32_t link_mtu_ = 0;  // SmallestLinkMtu(locals_), read once at creation
  // The smallest receive buffer of the device-port sockets, as granted
  // (EnlargeSocketBuffers asks for 4 MiB; without CAP_NET_ADMIN the kernel
  // caps it at net.core.rmem_max). getsockopt reports the kernel's doubled
  // figure (socket(7), SO_RCVBUF: the other half is its bookkeeping), so
  // this is half of it.
  uint32_t receive_buffer_bytes_ = 0;
  int epoll_fd_ = -1;        // the device-port sockets
  int all_epoll_fd_ = -1;    // every socket, for RecvBurst's readiness check
  int reply_epoll_fd_ = -1;  // the reply sockets
  TransportCounters counters_;
  UdpSender sender_{&sockets_, &main_of_local_, &counters_, segmented_};
  DatagramSplitter splitter_{&counters_};
  uint64_t rx_now_ns_ = 0;  // CLOCK_MONOTONIC_COARSE at the RecvBurst call

  // Receive side.
  std::unique_ptr<uint8_t[]>
      rx_buf_;  // kUdpMaxRecvBurst * kUdpRecvBufferSize, untouched until used
  mmsghdr rx_hdrs_[kUdpMaxRecvBurst];
  iovec rx_iov_[kUdpMaxRecvBurst];
  sockaddr_in6 rx_src_[kUdpMaxRecvBurst];  // sockaddr_in from IPv4 sockets
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
  if (!OpenEndpoints(
          config,
          [&](const EndpointSockets& e, std::string* err) { return t->AddEndpoint(e, err); },
          &t->lane_, &t->host_nic_fd_, error))
    return nullptr;
  // Both ends of a connection take the path MTU from their own port, so
  // every process of a network namespace must derive the same one: from
  // every address the automatic scheme may bind, not only those this
  // process got (another process may hold a host address's port), and
  // loopback for the per-process 127.x address. An explicit SOFTRNIC_BIND:
  // from those addresses.
  std::vector<Gid> gids;
  if (config.bind_addresses.empty()) {
    for (const LocalAddress& a : HostAddresses()) gids.push_back(a.gid);
    gids.push_back(Gid::FromIpv4(htonl(INADDR_LOOPBACK)));
  } else {
    for (const Endpoint& e : t->locals_) gids.push_back(e.gid);
  }
  t->link_mtu_ = SmallestLinkMtu(gids);
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
  sockets_.reserve(kMaxReadySockets + kMaxMulticastGroups);
  // Deliberately not value-initialised: pages are touched only by the
  // datagrams that land in them.
  rx_buf_.reset(new uint8_t[static_cast<size_t>(kUdpMaxRecvBurst) * kUdpRecvBufferSize]);
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
    if (e.forwarded.fd >= 0) close(e.forwarded.fd);
    if (e.owner_fd >= 0) close(e.owner_fd);
    if (e.sink_fd >= 0) close(e.sink_fd);
  };
  if (sockets_.size() + 3 > kMaxReadySockets) {
    close_all();
    *error = "too many local addresses";
    return false;
  }
  int rcvbuf = 0;
  socklen_t rcvbuf_len = sizeof rcvbuf;
  if (getsockopt(e.main.fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &rcvbuf_len) == 0 && rcvbuf > 0) {
    const uint32_t granted = static_cast<uint32_t>(rcvbuf) / 2;
    receive_buffer_bytes_ =
        receive_buffer_bytes_ == 0 ? granted : std::min(receive_buffer_bytes_, granted);
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
  // A host NIC channel's endpoint is the address and port peers send to;
  // the main socket's (a port the kernel chose) is only where it sends
  // from, and frames its ICRC with (UdpSender reads the socket's).
  locals_.push_back(e.forwarded.fd >= 0 ? e.forwarded.endpoint : e.main.endpoint);
  owner_fds_.push_back(e.owner_fd);
  owner_fds_.push_back(e.sink_fd);
  if (e.forwarded.fd >= 0) {
    // A host NIC channel: everything sent to the address for this process
    // arrives here (requests and responses alike), so it is watched as the
    // main socket is.
    ev.data.u32 = static_cast<uint32_t>(sockets_.size());
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, e.forwarded.fd, &ev) != 0 ||
        epoll_ctl(all_epoll_fd_, EPOLL_CTL_ADD, e.forwarded.fd, &ev) != 0) {
      *error = "epoll_ctl: " + std::string(std::strerror(errno));
      close(e.forwarded.fd);
      if (e.reply.fd >= 0) close(e.reply.fd);
      return false;
    }
    sockets_.push_back(e.forwarded);
    sockets_.back().local = local;
  }
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
  if (host_nic_fd_ >= 0) close(host_nic_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (reply_epoll_fd_ >= 0) close(reply_epoll_fd_);
  if (all_epoll_fd_ >= 0) close(all_epoll_fd_);
}

bool UdpTransport::SplitDatagram(int slot, uint16_t sock, RxPacket* packets, int n,
                                 int* produced) {
  const msghdr& h = rx_hdrs_[slot].msg_hdr;
  const LocalSocket& s = sockets_[sock];
  ReceivedDatagram d;
  d.truncated = (h.msg_flags & MSG_TRUNC) != 0;
  auto* data = static_cast<uint8_t*>(rx_iov_[slot].iov_base);
  if (s.forwarded) {
    // What nicd's recvmsg said, in front of the datagram (host_nic/protocol.h).
    // The channel's other end is root's nicd; a short or unmarked datagram
    // is dropped as a runt (no source, no length).
    sockaddr_storage source;
    socklen_t source_length = 0;
    OpenForwardedDatagram(data, rx_hdrs_[slot].msg_len, &d, &source, &source_length);
    SetDatagramAddresses(reinterpret_cast<const sockaddr*>(&source), source_length, s.endpoint,
                         &d);
  } else {
    d.data = data;
    d.length = rx_hdrs_[slot].msg_len;
    SetDatagramAddresses(reinterpret_cast<const sockaddr*>(&rx_src_[slot]), h.msg_namelen,
                         s.endpoint, &d);
    ReadReceiveControl(h, d.length, &d.gro_segment_size, &d.traffic_class);
  }
  d.group = s.group ? &s.endpoint.gid : nullptr;
  return splitter_.Split(d, s.local, rx_now_ns_, &next_segment_, packets, n, produced);
}

int UdpTransport::JoinMulticast(const Gid& group) {
  if (groups_ >= kMaxMulticastGroups) return ENOMEM;
  const uint16_t port = locals_.empty() ? uint16_t{4791} : locals_[0].port;
  LocalSocket g;
  std::string error;
  if (const int rc = OpenGroupSocket(group, port, &g, &error)) {
    SOFTRNIC_LOG(kWarn, "multicast join: %s", error.c_str());
    return rc;
  }
  size_t index = sockets_.size();
  for (size_t i = 0; i < sockets_.size(); ++i)
    if (sockets_[i].group && sockets_[i].fd < 0) index = i;  // a left group's slot
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = static_cast<uint32_t>(index);
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, g.fd, &ev) != 0 ||
      epoll_ctl(all_epoll_fd_, EPOLL_CTL_ADD, g.fd, &ev) != 0) {
    const int err = errno;
    close(g.fd);  // closing also leaves either epoll set
    return err;
  }
  if (index == sockets_.size()) sockets_.push_back(g);
  else sockets_[index] = g;
  ++groups_;
  return 0;
}

void UdpTransport::LeaveMulticast(const Gid& group) {
  for (size_t i = 0; i < sockets_.size(); ++i) {
    LocalSocket& s = sockets_[i];
    if (!s.group || s.fd < 0 || !(s.endpoint.gid == group)) continue;
    // Datagrams of it not yet returned go with it (they were addressed to
    // a group this device no longer receives).
    if (split_socket_ == i) next_slot_ = slots_filled_ = 0;
    close(s.fd);  // also removes it from both epoll sets
    s.fd = -1;
    --groups_;
    return;
  }
}

int UdpTransport::RecvBurst(RxPacket* packets, int n) {
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
  // Reply sockets first, then the others, each class from a rotating start
  // so that no socket is always served first. A response waiting in a reply
  // socket is older than, or concurrent with, every request read in the
  // same call: the progress thread does not watch the reply sockets while
  // nobody waits for responses, so an ACK can sit there unread until a
  // later request of the same QP wakes it. Served after that request, the
  // ACK's send completion would follow the request's receive completion,
  // which the peer sent only after it had received (and acknowledged) the
  // SEND: tgt's iSER target closes the connection on a command that
  // completes before its last login response does.
  for (int k = 0; k < 2 * nready && used < kUdpMaxRecvBurst && produced < n; ++k) {
    const bool reply_pass = k < nready;
    const size_t si =
        ready[(static_cast<size_t>(k % nready) + rr_) % static_cast<size_t>(nready)].data.u32;
    if (sockets_[si].reply != reply_pass) continue;
    LocalSocket& s = sockets_[si];
    // One socket takes at most half a burst per call while others are
    // ready: a flooded socket (a peer retransmitting into it) must not
    // starve the others, least of all the reply socket whose ACKs stop it.
    const int share = nready > 1 ? std::max(kMinShare, n / 2) : n;
    const int want = std::min({n - produced, share, kUdpMaxRecvBurst - used});
    for (int j = used; j < used + want; ++j) {
      msghdr& h = rx_hdrs_[j].msg_hdr;
      h.msg_namelen = sizeof(sockaddr_in6);
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
