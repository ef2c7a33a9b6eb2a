// nicd, the host NIC daemon (daemon.h).
#include "transport/host_nic/daemon.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/secure_random.h"
#include "log/log.h"
#include "transport/endpoint_claim.h"
#include "transport/udp_receive.h"
#include "transport/udp_socket.h"
#include "transport/udp_transport.h"

namespace softrnic::transport::host_nic {
namespace {

using Clock = std::chrono::steady_clock;

// Datagrams Forward takes per recvmmsg, and the room for each: the largest
// UDP datagram (a UDP_GRO run of them included) behind its ForwardHeader,
// which the process's receive buffer holds too (kUdpRecvBufferSize).
constexpr int kForwardBatch = 16;
constexpr size_t kForwardSlot = kUdpRecvBufferSize;

// Whether address:port is free of every socket (no group, no other
// binder): a bind without SO_REUSEPORT succeeds only then. A group nicd
// did not open itself (a process that owns the address on its own, or the
// members a dead nicd left behind) is not joined: its array is unknown.
bool PortFree(const LocalAddress& address, uint16_t port) {
  LocalSocket probe;
  std::string ignored;
  if (OpenSocket(address, port, false, false, &probe, &ignored) != 0) return false;
  close(probe.fd);
  return true;
}

}  // namespace

NicDaemon::NicDaemon(int listen_fd, uint16_t port)
    : listen_fd_(listen_fd), port_(port), serves_other_users_(geteuid() == 0) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  (void)epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = stop_fd_;
  (void)epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &ev);
}

NicDaemon::~NicDaemon() {
  while (!clients_.empty()) End(clients_.begin()->first);
  for (Group& g : groups_) {
    for (Member& m : g.members) close(m.fd);
    if (g.claim_fd >= 0) close(g.claim_fd);
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
  if (listen_fd_ >= 0) close(listen_fd_);
}

void NicDaemon::Stop() {
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
}

int NicDaemon::Run(std::chrono::milliseconds idle_exit) {
  Clock::time_point idle_since = Clock::now();
  for (;;) {
    const Clock::time_point now = Clock::now();
    std::erase_if(quarantine_, [&](const auto& q) { return q.second <= now; });
    if (clients_.empty() && quarantine_.empty() && now - idle_since >= idle_exit) return 0;
    // Sleep until something happens, or until the next quarantine ends or
    // the idle time is up: nicd never wakes on a timer while it serves, so
    // it preempts no polling application.
    Clock::time_point wake = Clock::time_point::max();
    for (const auto& q : quarantine_) wake = std::min(wake, q.second);
    if (clients_.empty()) wake = std::min(wake, idle_since + idle_exit);
    int timeout_ms = -1;
    if (wake != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 1, 60'000));
    }
    epoll_event events[16];
    const int n = epoll_wait(epoll_fd_, events, 16, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == stop_fd_) return 0;
      if (fd == listen_fd_) {
        Accept();
      } else if (forwards_.contains(fd)) {
        Forward(fd);
      } else if (sinks_.contains(fd)) {
        DrainSink(fd);
      } else if (clients_.contains(fd)) {
        if (events[i].events & (EPOLLHUP | EPOLLERR)) {
          End(fd);
        } else {
          Serve(fd);
        }
      }
    }
    if (clients_.empty() && n > 0) idle_since = Clock::now();
  }
}

void NicDaemon::Accept() {
  const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return;
  // Our own user gets members (docs/host-nic.md, "Users"). A member can
  // re-program the whole group, so it never leaves this uid: root's nicd
  // serves the other users through channels (forwarded), any other nicd
  // refuses them.
  const int64_t uid = PeerUid(conn);
  const bool own = uid == static_cast<int64_t>(geteuid());
  if (!own && !(serves_other_users_ && uid >= 0)) {
    ++counters_.leases_refused;
    close(conn);
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = conn;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, conn, &ev) != 0) {
    close(conn);
    return;
  }
  Client c;
  c.forwarded = !own;
  clients_[conn] = c;
}

void NicDaemon::Serve(int conn) {
  union {
    Hello hello;
    Service service;
    uint8_t bytes[64];
  } m{};
  const ssize_t n = recv(conn, &m, sizeof(m), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n == static_cast<ssize_t>(sizeof(Hello)) && m.hello.magic == kHelloMagic &&
      clients_[conn].lane == 0) {
    Lease(conn, m.hello);
    return;
  }
  if (n == static_cast<ssize_t>(sizeof(Service)) && m.service.magic == kServiceMagic &&
      clients_[conn].lane != 0) {
    Client& c = clients_[conn];
    const std::pair<uint16_t, uint16_t> key{m.service.port_space, m.service.port};
    ServiceReply reply;
    if (m.service.op == static_cast<uint16_t>(ServiceOp::kAdd)) {
      for (const auto& [fd, other] : clients_)
        if (fd != conn && other.services.contains(key)) reply.error = EADDRINUSE;
      size_t held = 0;
      for (const auto& [fd, other] : clients_) held += other.services.size();
      if (reply.error == 0 && !c.services.contains(key) && held >= kMaxServices)
        reply.error = ENOSPC;  // the program's limit (steering.h)
      if (reply.error == 0) c.services.insert(key);
    } else if (m.service.op == static_cast<uint16_t>(ServiceOp::kRemove)) {
      c.services.erase(key);
    } else {
      reply.error = EINVAL;
    }
    if (reply.error == 0)
      for (Group& g : groups_) Reprogram(g);
    if (SendMessage(conn, &reply, sizeof(reply)) != 0) End(conn);
    return;
  }
  // EOF, an error, or bytes that are not a message of ours: the lease ends.
  End(conn);
}

int NicDaemon::FreeLane() {
  std::vector<uint8_t> free;
  for (int lane = kFirstLane; lane <= kLastLane; ++lane) {
    const auto l = static_cast<uint8_t>(lane);
    if (quarantine_.contains(l)) continue;
    if (std::any_of(clients_.begin(), clients_.end(),
                    [&](const auto& c) { return c.second.lane == l; }))
      continue;
    free.push_back(l);
  }
  if (free.empty()) return -1;
  // Unpredictable, like the QPNs inside it (docs/security.md, M1).
  return free[SecureRandomBelow(static_cast<uint32_t>(free.size()))];
}

void NicDaemon::RefreshGroups() {
  for (const LocalAddress& a : HostAddresses()) {
    if (std::any_of(groups_.begin(), groups_.end(),
                    [&](const Group& g) { return g.address == a; }))
      continue;
    if (groups_.size() >= kMaxLeaseEndpoints) break;
    Group g;
    g.address = a;
    groups_.push_back(std::move(g));
  }
}

void NicDaemon::Lease(int conn, const Hello& hello) {
  Client& c = clients_[conn];
  ::softrnic::transport::host_nic::Lease lease;
  std::vector<int> fds;
  const int lane = hello.port == port_ ? FreeLane() : -1;
  if (lane < 0) {
    lease.error = hello.port == port_ ? EAGAIN : EINVAL;
    ++counters_.leases_refused;
    if (SendMessage(conn, &lease, sizeof(lease)) != 0) End(conn);
    return;
  }
  c.lane = static_cast<uint8_t>(lane);
  lease.lane = c.lane;
  lease.forwarded = c.forwarded ? 1 : 0;
  std::vector<int> close_after;  // the processes' ends of the channels
  RefreshGroups();
  for (Group& g : groups_) {
    if (lease.count >= kMaxLeaseEndpoints) break;
    if (g.members.empty() && (!PortFree(g.address, port_) || !OpenGroup(g))) continue;
    Member main{-1, conn, false}, reply{-1, conn, true};
    int channel[2] = {-1, -1};
    if (c.forwarded && socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, channel) != 0) continue;
    LocalSocket s;
    std::string error;
    // A forwarded member coalesces too (UDP_GRO): a GSO run arrives whole,
    // so the process's ICRC check knows each segment's IPv4 ID (its index
    // in the run) and nicd forwards one datagram per run instead of 16.
    if (OpenSocket(g.address, port_, true, true, &s, &error) != 0) {
      if (channel[0] >= 0) close(channel[0]), close(channel[1]);
      CloseIfIdle(g);
      continue;
    }
    main.fd = s.fd;
    main.channel = channel[0];
    g.members.push_back(main);
    if (c.forwarded) {
      // The channel runs one way, and nicd never blocks on it: a full one
      // (a process that stopped reading) drops, counted.
      (void)fcntl(channel[0], F_SETFL, O_NONBLOCK);
      EnlargeSocketBuffers(channel[0]);
      EnlargeSocketBuffers(channel[1]);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = main.fd;
      (void)epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, main.fd, &ev);
      forwards_[main.fd] = channel[0];
      LeaseEndpoint& e = lease.endpoints[lease.count++];
      std::memcpy(e.gid, g.address.gid.raw.data(), 16);
      e.scope_id = g.address.scope_id;
      e.port = port_;
      fds.push_back(channel[1]);
      close_after.push_back(channel[1]);
      Reprogram(g);
      continue;
    }
    LocalSocket r;
    if (OpenSocket(g.address, port_, true, true, &r, &error) == 0) {
      reply.fd = r.fd;
      g.members.push_back(reply);
    }
    LeaseEndpoint& e = lease.endpoints[lease.count++];
    std::memcpy(e.gid, g.address.gid.raw.data(), 16);
    e.scope_id = g.address.scope_id;
    e.port = port_;
    e.has_reply = reply.fd >= 0;
    e.gro = s.gro;
    fds.push_back(main.fd);
    if (reply.fd >= 0) fds.push_back(reply.fd);
    if (g.members[0].client < 0) {  // the sink, held by every process of ours
      e.has_sink = 1;
      fds.push_back(g.members[0].fd);
    }
    Reprogram(g);
  }
  ++counters_.leases;
  if (c.forwarded) ++counters_.forwarded_leases;
  const int sent = SendMessage(conn, &lease, sizeof(lease), fds);
  for (int fd : close_after) close(fd);
  if (sent != 0) End(conn);
}

bool NicDaemon::OpenGroup(Group& g) {
  LocalSocket s;
  std::string error;
  if (OpenSocket(g.address, port_, true, true, &s, &error) != 0) return false;
  g.members.push_back(Member{s.fd, -1, false, -1});
  g.gro = s.gro;
  g.claim_fd = ClaimEndpoint(s.endpoint);
  if (g.claim_fd < 0 && errno == EADDRINUSE) {
    // A process of ours owns the address on its own and joined the group
    // we just made: leave it to that process.
    RemoveMember(g, 0);
    return false;
  }
  sinks_.insert(s.fd);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = s.fd;
  (void)epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, s.fd, &ev);
  return true;
}

void NicDaemon::CloseIfIdle(Group& g) {
  // Only the sink left: the group ends, and the port is free again.
  if (g.members.size() == 1 && g.members[0].client < 0) RemoveMember(g, 0);
  if (g.members.empty() && g.claim_fd >= 0) {
    close(g.claim_fd);
    g.claim_fd = -1;
  }
}

void NicDaemon::DrainSink(int fd) {
  uint8_t buf[2048];
  // A coalesced run counts once; what matters is that it went nowhere.
  for (int i = 0; i < 256 && recv(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC) >= 0; ++i)
    ++counters_.stray_datagrams;
}

void NicDaemon::Forward(int fd) {
  const auto it = forwards_.find(fd);
  if (it == forwards_.end()) return;
  const int channel = it->second;
  if (!forward_buf_) forward_buf_.reset(new uint8_t[kForwardBatch * kForwardSlot]);
  mmsghdr in[kForwardBatch], out[kForwardBatch];
  iovec in_iov[kForwardBatch], out_iov[kForwardBatch];
  sockaddr_in6 source[kForwardBatch];
  alignas(cmsghdr) uint8_t control[kForwardBatch][64];
  // Level-triggered: a batch per wake-up at most, so that a flood on one
  // lane does not keep nicd from the others and from its control sockets.
  for (int i = 0; i < kForwardBatch; ++i) {
    uint8_t* slot = forward_buf_.get() + static_cast<size_t>(i) * kForwardSlot;
    in_iov[i] = {slot + sizeof(ForwardHeader), kForwardSlot - sizeof(ForwardHeader)};
    in[i] = {};
    in[i].msg_hdr.msg_iov = &in_iov[i];
    in[i].msg_hdr.msg_iovlen = 1;
    in[i].msg_hdr.msg_name = &source[i];
    in[i].msg_hdr.msg_namelen = sizeof(source[i]);
    in[i].msg_hdr.msg_control = control[i];
    in[i].msg_hdr.msg_controllen = sizeof(control[i]);
  }
  const int n = recvmmsg(fd, in, kForwardBatch, MSG_DONTWAIT, nullptr);
  if (n <= 0) return;
  int ready = 0;
  for (int i = 0; i < n; ++i) {
    const msghdr& h = in[i].msg_hdr;
    if ((h.msg_flags & MSG_TRUNC) != 0 || h.msg_namelen > sizeof(ForwardHeader::source)) {
      ++counters_.forward_drops;
      continue;
    }
    ForwardHeader fh;
    uint32_t gro = 0;
    ReadReceiveControl(h, in[i].msg_len, &gro, &fh.traffic_class);
    fh.gro_segment_size = static_cast<uint16_t>(gro);
    fh.source_length = static_cast<uint8_t>(h.msg_namelen);
    std::memcpy(fh.source, &source[i], h.msg_namelen);
    uint8_t* slot = static_cast<uint8_t*>(in_iov[i].iov_base) - sizeof(ForwardHeader);
    std::memcpy(slot, &fh, sizeof(fh));
    out_iov[ready] = {slot, sizeof(ForwardHeader) + in[i].msg_len};
    out[ready] = {};
    out[ready].msg_hdr.msg_iov = &out_iov[ready];
    out[ready].msg_hdr.msg_iovlen = 1;
    ++ready;
  }
  int sent = 0;
  while (sent < ready) {
    const int r = sendmmsg(channel, out + sent, static_cast<unsigned>(ready - sent), MSG_DONTWAIT);
    if (r <= 0) break;  // full (the process does not read) or gone: dropped
    sent += r;
  }
  counters_.forwarded_datagrams += static_cast<uint64_t>(sent);
  counters_.forward_drops += static_cast<uint64_t>(ready - sent);
}

void NicDaemon::Reprogram(Group& g, int without_client) {
  if (g.members.empty()) return;
  SteeringTable table;
  for (size_t i = 0; i < g.members.size(); ++i)
    if (g.members[i].client < 0) table.miss_index = static_cast<uint32_t>(i);
  table.service_miss_index = table.miss_index;
  bool forwarded_fallback = false;  // service_miss_index is a forwarded lane's
  for (const auto& [conn, c] : clients_) {
    if (conn == without_client || c.lane == 0) continue;
    LaneSockets l{c.lane, kNowhere, kNowhere};
    for (size_t i = 0; i < g.members.size(); ++i) {
      if (g.members[i].client != conn) continue;
      (g.members[i].reply ? l.reply_index : l.main_index) = static_cast<uint32_t>(i);
    }
    if (l.main_index == kNowhere) continue;  // not served at this address
    if (l.reply_index == kNowhere) l.reply_index = l.main_index;
    // A REQ for a service nobody listens on: to a process, whose CM
    // rejects it; one of nicd's own user if there is one.
    if (table.service_miss_index == table.miss_index ||
        (!c.forwarded && forwarded_fallback)) {
      table.service_miss_index = l.main_index;
      forwarded_fallback = c.forwarded;
    }
    table.lanes.push_back(l);
    for (const auto& [ps, port] : c.services) table.services.push_back({ps, port, l.main_index});
  }
  if (AttachSteeringProgram(g.members[0].fd, BuildSteeringProgram(table)) == 0) {
    ++counters_.program_attaches;
  } else {
    ++counters_.program_attach_errors;
  }
}

void NicDaemon::RemoveMember(Group& g, size_t index) {
  // As the kernel does at close (sock_reuseport.c): the last member moves
  // into the hole. Every member is ours, so this close is the last one
  // (a served process's copy is closed already, or is about to be).
  if (g.members[index].channel >= 0) {
    forwards_.erase(g.members[index].fd);
    close(g.members[index].channel);
  }
  sinks_.erase(g.members[index].fd);
  close(g.members[index].fd);
  g.members[index] = g.members.back();
  g.members.pop_back();
}

void NicDaemon::End(int conn) {
  auto it = clients_.find(conn);
  if (it == clients_.end()) return;
  const uint8_t lane = it->second.lane;
  for (Group& g : groups_) {
    const bool served = std::any_of(g.members.begin(), g.members.end(),
                                    [&](const Member& m) { return m.client == conn; });
    if (!served) continue;
    Reprogram(g, conn);  // stop steering the lane before the array moves
    // One at a time: a removal may move another of its members.
    for (;;) {
      auto m = std::find_if(g.members.begin(), g.members.end(),
                            [&](const Member& x) { return x.client == conn; });
      if (m == g.members.end()) break;
      RemoveMember(g, static_cast<size_t>(m - g.members.begin()));
    }
    Reprogram(g, conn);
    CloseIfIdle(g);
  }
  if (lane != 0) {
    quarantine_[lane] = Clock::now() + kLaneQuarantine;
    ++counters_.leases_ended;
  }
  (void)epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn, nullptr);
  close(conn);
  clients_.erase(conn);
}

}  // namespace softrnic::transport::host_nic
