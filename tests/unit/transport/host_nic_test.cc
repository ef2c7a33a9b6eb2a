// The host NIC (docs/host-nic.md) against the real kernel: the steering
// program in a real SO_REUSEPORT group (the kernel's array order, the
// move-last-into-the-hole rule nicd relies on), and nicd serving leases
// to processes (here: client objects in one process) over its real
// control socket.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "common/secure_random.h"
#include "transport/host_nic/client.h"
#include "transport/host_nic/daemon.h"
#include "transport/host_nic/protocol.h"
#include "transport/host_nic/steering.h"
#include "transport/udp_socket.h"
#include "wire/opcode.h"

namespace softrnic::transport::host_nic {
namespace {

LocalAddress Loopback() { return LocalAddress{Gid::FromIpv4(htonl(INADDR_LOOPBACK)), 0, "lo"}; }

// A RoCE v2 payload long enough for every load of the program: a BTH with
// `opcode` and `dest_qpn`; for QP1, a CM MAD with `attribute`, comm IDs
// and service ID.
std::vector<uint8_t> Packet(uint8_t opcode, uint32_t dest_qpn, uint16_t attribute = 0,
                            uint32_t local_comm = 0, uint32_t remote_comm = 0,
                            uint64_t service_id = 0) {
  std::vector<uint8_t> p(128, 0);
  p[0] = opcode;
  p[5] = static_cast<uint8_t>(dest_qpn >> 16);
  p[6] = static_cast<uint8_t>(dest_qpn >> 8);
  p[7] = static_cast<uint8_t>(dest_qpn);
  auto put = [&](size_t at, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) p[at + i] = static_cast<uint8_t>(v >> (8 * (bytes - 1 - i)));
  };
  put(20 + 16, attribute, 2);
  put(44, local_comm, 4);
  put(48, remote_comm, 4);
  put(52, service_id, 8);
  return p;
}

// Which of `fds` the datagram sent to `to` arrives at (-1: none within
// 1 s); exactly one must get it.
int ArrivesAt(int sender, const Endpoint& to, const std::vector<uint8_t>& packet,
              const std::vector<int>& fds, int timeout_ms = 1000) {
  sockaddr_in6 sa{};
  const socklen_t len = ToSockaddr(to, 0, &sa);
  EXPECT_EQ(sendto(sender, packet.data(), packet.size(), 0, reinterpret_cast<sockaddr*>(&sa), len),
            static_cast<ssize_t>(packet.size()));
  std::vector<pollfd> p;
  for (int fd : fds) p.push_back({fd, POLLIN, 0});
  if (poll(p.data(), p.size(), timeout_ms) <= 0) return -1;
  int at = -1, count = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    uint8_t buf[256];
    while (recv(fds[i], buf, sizeof buf, MSG_DONTWAIT) > 0) {
      at = static_cast<int>(i);
      ++count;
    }
  }
  EXPECT_EQ(count, 1);
  return at;
}

class SteeringGroup : public ::testing::Test {
 protected:
  void SetUp() override {
    sender_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(sender_, 0);
    for (int i = 0; i < 4; ++i) {
      LocalSocket s;
      std::string error;
      ASSERT_EQ(OpenSocket(Loopback(), port_, false, true, &s, &error), 0) << error;
      port_ = s.endpoint.port;  // the first bind picks it; the others join its group
      to_ = s.endpoint;
      fds_.push_back(s.fd);
    }
  }
  void TearDown() override {
    for (int fd : fds_)
      if (fd >= 0) close(fd);
    close(sender_);
  }
  int sender_ = -1;
  uint16_t port_ = 0;
  Endpoint to_;
  std::vector<int> fds_;
};

TEST_F(SteeringGroup, LanesRequestsAndResponsesAndCmMadsReachTheirSockets) {
  SteeringTable t;
  t.lanes = {{0x80, 2, 3}, {0x03, 0, 1}};
  t.services = {{0x0106, 18515, 2}, {0x0111, 7, 1}};
  ASSERT_EQ(AttachSteeringProgram(fds_[0], BuildSteeringProgram(t)), 0);
  using namespace wire::op;
  EXPECT_EQ(ArrivesAt(sender_, to_, Packet(kRcSendOnly, 0x03abcd), fds_), 0);
  EXPECT_EQ(ArrivesAt(sender_, to_, Packet(kRcAck, 0x03abcd), fds_), 1);
  EXPECT_EQ(ArrivesAt(sender_, to_, Packet(kRcReadResponseFirst, 0x030001), fds_), 1);
  EXPECT_EQ(ArrivesAt(sender_, to_, Packet(kRcAtomicAck, 0x03ffff), fds_), 1);
  EXPECT_EQ(ArrivesAt(sender_, to_, Packet(kRcWriteOnly, 0x801234), fds_), 2);
  EXPECT_EQ(ArrivesAt(sender_, to_, Packet(kRcReadResponseLast, 0x801234), fds_), 3);
  EXPECT_EQ(ArrivesAt(sender_, to_, Packet(kUdSendOnly, 0x80ffff), fds_), 2);
  // QP1: a REQ by its service ID, other MADs by the addressed comm ID.
  const uint8_t ud = kUdSendOnly;
  EXPECT_EQ(ArrivesAt(sender_, to_, Packet(ud, 1, 0x0010, 0x55000001, 0, 0x0000000001064853ull),
                      fds_), 2);
  EXPECT_EQ(ArrivesAt(sender_, to_, Packet(ud, 1, 0x0017, 0x55000001, 0, 0x0000000001110007ull),
                      fds_), 1);
  EXPECT_EQ(ArrivesAt(sender_, to_, Packet(ud, 1, 0x0013, 0x77000001, 0x03123456), fds_), 0);
  EXPECT_EQ(ArrivesAt(sender_, to_, Packet(ud, 1, 0x0015, 0x77000001, 0x80123456), fds_), 2);
  EXPECT_EQ(ArrivesAt(sender_, to_, Packet(ud, 1, 0x0018, 0x80000009, 0), fds_), 2);
  // Unknown lanes and services still reach exactly one socket (by hash).
  EXPECT_NE(ArrivesAt(sender_, to_, Packet(kRcSendOnly, 0x50abcd), fds_), -1);
  EXPECT_NE(ArrivesAt(sender_, to_, Packet(ud, 1, 0x0010, 1, 0, 0x0000000001069999ull), fds_),
            -1);
}

// What nicd's bookkeeping assumes of the kernel (daemon.cc RemoveMember):
// closing member i moves the last member into slot i.
TEST_F(SteeringGroup, ClosingAMemberMovesTheLastIntoItsSlot) {
  close(fds_[1]);
  fds_[1] = fds_[3];
  fds_[3] = -1;
  std::vector<int> live = {fds_[0], fds_[1], fds_[2]};
  SteeringTable t;
  t.lanes = {{0x10, 0, 0}, {0x11, 1, 1}, {0x12, 2, 2}};
  ASSERT_EQ(AttachSteeringProgram(live[0], BuildSteeringProgram(t)), 0);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(ArrivesAt(sender_, to_, Packet(wire::op::kRcSendOnly, (0x10u + i) << 16 | 7), live),
              i);
}

TEST(SteeringProgram, StaysWithinTheKernelLimitAtItsLargest) {
  SteeringTable t;
  for (int lane = kFirstLane; lane <= kLastLane; ++lane)
    t.lanes.push_back({static_cast<uint8_t>(lane), static_cast<uint32_t>(2 * lane),
                       static_cast<uint32_t>(2 * lane + 1)});
  for (uint16_t port = 1; port <= kMaxServices; ++port) t.services.push_back({0x0106, port, port});
  EXPECT_LE(BuildSteeringProgram(t).size(), static_cast<size_t>(BPF_MAXINSNS));
}

// nicd's control socket for `port`, bound and listening (the daemon takes it).
int ListenControlSocket(uint16_t port) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const std::string name = ControlSocketName(static_cast<uint32_t>(geteuid()), port);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path + 1, name.data(), name.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa),
           static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())) != 0 ||
      listen(fd, 16) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Closes what a lease gave (as a process that ends does).
void ReleaseLease(ClientLease& l) {
  for (EndpointSockets& e : l.endpoints) {
    close(e.main.fd);
    if (e.reply.fd >= 0) close(e.reply.fd);
    if (e.sink_fd >= 0) close(e.sink_fd);
  }
  close(l.control_fd);
}

// The lease's first IPv4 endpoint (reachable from this host), or null.
const EndpointSockets* FirstIpv4(const ClientLease& l) {
  for (const EndpointSockets& e : l.endpoints)
    if (e.main.endpoint.gid.IsV4Mapped()) return &e;
  return nullptr;
}

// nicd in a thread of this process, on its real control socket, serving
// two leases at the host's loopback-reachable addresses. Skipped where the
// host has no address of its own (nicd then serves none).
class NicdInProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    if (HostAddresses().empty()) GTEST_SKIP() << "no host address to share";
    port_ = static_cast<uint16_t>(20000 + SecureRandomBelow(20000));
    const int fd = ListenControlSocket(port_);
    ASSERT_GE(fd, 0);
    daemon_ = std::make_unique<NicDaemon>(fd, port_);
    thread_ = std::thread([this] { daemon_->Run(std::chrono::hours(1)); });
    sender_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  }
  void TearDown() override {
    if (!daemon_) return;
    daemon_->Stop();
    if (thread_.joinable()) thread_.join();
    daemon_.reset();
    close(sender_);
  }
  static void Release(ClientLease& l) { ReleaseLease(l); }
  uint16_t port_ = 0;
  int sender_ = -1;
  std::unique_ptr<NicDaemon> daemon_;
  std::thread thread_;
};

TEST_F(NicdInProcess, EachLeaseGetsItsLaneAndKeepsItAsOthersComeAndGo) {
  std::string why;
  auto a = AcquireLease(port_, "/nonexistent", &why);
  ASSERT_TRUE(a) << why;
  auto b = AcquireLease(port_, "/nonexistent", &why);
  ASSERT_TRUE(b) << why;
  ASSERT_FALSE(a->endpoints.empty());
  EXPECT_NE(a->lane, b->lane);
  const EndpointSockets* ea = FirstIpv4(*a);
  const EndpointSockets* eb = FirstIpv4(*b);
  if (ea == nullptr || eb == nullptr) GTEST_SKIP() << "no IPv4 host address";
  ASSERT_GE(ea->reply.fd, 0);
  const Endpoint to = ea->main.endpoint;
  const std::vector<int> fds = {ea->main.fd, ea->reply.fd, eb->main.fd, eb->reply.fd};
  using namespace wire::op;
  const uint32_t qa = uint32_t{a->lane} << 16 | 0x1234, qb = uint32_t{b->lane} << 16 | 0x4321;
  EXPECT_EQ(ArrivesAt(sender_, to, Packet(kRcSendOnly, qa), fds), 0);
  EXPECT_EQ(ArrivesAt(sender_, to, Packet(kRcAck, qa), fds), 1);
  EXPECT_EQ(ArrivesAt(sender_, to, Packet(kRcWriteOnly, qb), fds), 2);
  EXPECT_EQ(ArrivesAt(sender_, to, Packet(kRcAtomicAck, qb), fds), 3);

  // A claims an rdma_cm service; B cannot take it while A holds it.
  EXPECT_EQ(RequestService(a->control_fd, 0x0106, 18515, true), 0);
  EXPECT_EQ(RequestService(b->control_fd, 0x0106, 18515, true), EADDRINUSE);
  EXPECT_EQ(ArrivesAt(sender_, to,
                      Packet(kUdSendOnly, 1, 0x0010, 9, 0, 0x0000000001064853ull), fds),
            0);

  // A ends (as a killed process would: its descriptors close); B's packets
  // still reach B although its sockets moved in the array, and a newcomer
  // gets a lane other than A's (quarantined).
  const uint8_t lane_a = a->lane;
  Release(*a);
  a.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // nicd handles the EOF
  const std::vector<int> fds_b = {eb->main.fd, eb->reply.fd};
  EXPECT_EQ(ArrivesAt(sender_, to, Packet(kRcWriteOnly, qb), fds_b), 0);
  EXPECT_EQ(ArrivesAt(sender_, to, Packet(kRcAtomicAck, qb), fds_b), 1);
  auto c = AcquireLease(port_, "/nonexistent", &why);
  ASSERT_TRUE(c) << why;
  EXPECT_NE(c->lane, lane_a);
  EXPECT_NE(c->lane, b->lane);
  const EndpointSockets* ec = FirstIpv4(*c);
  ASSERT_NE(ec, nullptr);
  const std::vector<int> fds_bc = {eb->main.fd, eb->reply.fd, ec->main.fd, ec->reply.fd};
  const uint32_t qc = uint32_t{c->lane} << 16 | 0x0077;
  EXPECT_EQ(ArrivesAt(sender_, to, Packet(kRcSendOnly, qc), fds_bc), 2);
  EXPECT_EQ(ArrivesAt(sender_, to, Packet(kRcReadResponseOnly, qc), fds_bc), 3);
  EXPECT_EQ(ArrivesAt(sender_, to, Packet(kRcSendOnly, qb), fds_bc), 0);
  Release(*b);
  Release(*c);
}

// A packet that no live lane claims (an unknown lane, the lane of a process
// that ended, a datagram too short to steer) reaches no process: nicd's
// sink takes it. Without the sink the kernel picks a member by hash, and
// in root's nicd that may be the member of another user's forwarded lane.
TEST_F(NicdInProcess, APacketForNoLiveLaneReachesNoProcess) {
  std::string why;
  auto a = AcquireLease(port_, "/nonexistent", &why);
  ASSERT_TRUE(a) << why;
  auto b = AcquireLease(port_, "/nonexistent", &why);
  ASSERT_TRUE(b) << why;
  const EndpointSockets* ea = FirstIpv4(*a);
  const EndpointSockets* eb = FirstIpv4(*b);
  if (ea == nullptr || eb == nullptr) GTEST_SKIP() << "no IPv4 host address";
  const Endpoint to = ea->main.endpoint;
  std::vector<int> fds = {ea->main.fd, ea->reply.fd, eb->main.fd, eb->reply.fd};
  using namespace wire::op;
  constexpr int kNothing = 200;  // ms to wait for a datagram that must not come
  // A lane nobody holds: neither a's nor b's, nor next to them.
  uint8_t unknown = 0x80;
  while (unknown == a->lane || unknown == b->lane) ++unknown;
  // Several source ports: by hash, at least one would have reached a process.
  for (int i = 0; i < 4; ++i) {
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(s, 0);
    const uint32_t qpn = uint32_t{unknown} << 16 | 0x0101;
    EXPECT_EQ(ArrivesAt(s, to, Packet(kRcSendOnly, qpn), fds, kNothing), -1);
    EXPECT_EQ(ArrivesAt(s, to, Packet(kRcAck, qpn), fds, kNothing), -1);
    // Shorter than a BTH: the program's load fails and returns 0.
    EXPECT_EQ(ArrivesAt(s, to, std::vector<uint8_t>{0x04, 0x00, 0xff}, fds, kNothing), -1);
    // A CM REQ for a service nobody listens on still reaches a process's
    // main socket, whose CM answers it with a REJ (connection refused).
    const int at =
        ArrivesAt(s, to, Packet(kUdSendOnly, 1, 0x0010, 9, 0, 0x0000000001060101ull), fds);
    EXPECT_TRUE(at == 0 || at == 2) << at;
    close(s);
  }
  // The lane of a process that ended (quarantined): not the survivor's.
  const uint8_t lane_a = a->lane;
  Release(*a);
  a.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // nicd handles the EOF
  fds = {eb->main.fd, eb->reply.fd};
  EXPECT_EQ(ArrivesAt(sender_, to, Packet(kRcWriteOnly, uint32_t{lane_a} << 16 | 0x0202), fds,
                      kNothing),
            -1);
  // The survivor's own packets still arrive.
  EXPECT_EQ(ArrivesAt(sender_, to, Packet(kRcWriteOnly, uint32_t{b->lane} << 16 | 0x0202), fds), 0);
  daemon_->Stop();
  thread_.join();
  EXPECT_GE(daemon_->counters().stray_datagrams, 13u);
  Release(*b);
}

// nicd killed with SIGKILL: the kernel closes its copies, and a member of
// which nicd held the only copy would move the last member of the array
// into its slot, under a program nobody updates any more. The processes
// hold every member nicd gives them, the sink included, so nothing moves
// and both lanes' requests and responses still reach their sockets.
TEST(NicdKilled, EveryServedLaneStillReachesItsSockets) {
  if (HostAddresses().empty()) GTEST_SKIP() << "no host address to share";
  const auto port = static_cast<uint16_t>(20000 + SecureRandomBelow(20000));
  const int fd = ListenControlSocket(port);
  ASSERT_GE(fd, 0);
  const pid_t nicd = fork();
  ASSERT_GE(nicd, 0);
  if (nicd == 0) {
    NicDaemon daemon(fd, port);
    _exit(daemon.Run(std::chrono::seconds(30)) == 0 ? 0 : 1);
  }
  close(fd);
  std::string why;
  auto a = AcquireLease(port, "/nonexistent", &why);
  auto b = a ? AcquireLease(port, "/nonexistent", &why) : std::nullopt;
  kill(nicd, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(nicd, &status, 0), nicd);
  ASSERT_TRUE(a && b) << why;
  const EndpointSockets* ea = FirstIpv4(*a);
  const EndpointSockets* eb = FirstIpv4(*b);
  if (ea == nullptr || eb == nullptr) GTEST_SKIP() << "no IPv4 host address";
  EXPECT_GE(ea->sink_fd, 0);
  EXPECT_GE(eb->sink_fd, 0);
  const std::vector<int> fds = {ea->main.fd, ea->reply.fd, eb->main.fd, eb->reply.fd};
  using namespace wire::op;
  const uint32_t qa = uint32_t{a->lane} << 16 | 0x1234, qb = uint32_t{b->lane} << 16 | 0x4321;
  // From several source ports: a lane left to the kernel's hash would miss.
  for (int i = 0; i < 4; ++i) {
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(s, 0);
    EXPECT_EQ(ArrivesAt(s, ea->main.endpoint, Packet(kRcSendOnly, qa), fds), 0);
    EXPECT_EQ(ArrivesAt(s, ea->main.endpoint, Packet(kRcAck, qa), fds), 1);
    EXPECT_EQ(ArrivesAt(s, ea->main.endpoint, Packet(kRcWriteOnly, qb), fds), 2);
    EXPECT_EQ(ArrivesAt(s, ea->main.endpoint, Packet(kRcAtomicAck, qb), fds), 3);
    close(s);
  }
  ReleaseLease(*a);
  ReleaseLease(*b);
}

// Root's nicd serves another uid without handing it a member: the lease
// is forwarded (a channel per address; the process's own socket, at another
// port, for sending), and a datagram for its lane arrives on the channel
// behind a ForwardHeader naming its true source.
TEST_F(NicdInProcess, AnotherUserIsForwardedThroughAChannelNeverAMember) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a second uid)";
  int to_parent[2], to_child[2];
  ASSERT_EQ(pipe(to_parent), 0);
  ASSERT_EQ(pipe(to_child), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The other user: nobody. Exit codes name what failed.
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(10);
    std::string why;
    auto lease = AcquireLease(port_, "/nonexistent", &why);
    if (!lease) _exit(11);
    if (!lease->forwarded) _exit(12);
    const EndpointSockets* v4 = nullptr;
    for (const EndpointSockets& e : lease->endpoints) {
      if (e.reply.fd >= 0 || e.sink_fd >= 0 || e.forwarded.fd < 0) _exit(13);  // a member, or no channel
      if (e.main.endpoint.port == port_) _exit(14);         // its own socket is not at the port
      if (e.main.endpoint.gid.IsV4Mapped() && v4 == nullptr) v4 = &e;
    }
    if (v4 == nullptr) _exit(20);  // no IPv4 host address: skipped by the parent
    uint8_t msg[7] = {lease->lane};
    std::memcpy(msg + 1, v4->main.endpoint.gid.raw.data() + 12, 4);
    msg[5] = static_cast<uint8_t>(v4->main.endpoint.port >> 8);
    msg[6] = static_cast<uint8_t>(v4->main.endpoint.port);
    if (write(to_parent[1], msg, sizeof msg) != sizeof msg) _exit(15);
    uint8_t go;
    if (read(to_child[0], &go, 1) != 1) _exit(16);
    pollfd p{v4->forwarded.fd, POLLIN, 0};
    if (poll(&p, 1, 2000) != 1) _exit(17);
    uint8_t buf[512];
    const ssize_t n = recv(v4->forwarded.fd, buf, sizeof buf, 0);
    ForwardHeader fh;
    if (n < static_cast<ssize_t>(sizeof fh)) _exit(18);
    std::memcpy(&fh, buf, sizeof fh);
    Endpoint src;
    if (fh.magic != kForwardMagic ||
        !FromSockaddr(reinterpret_cast<const sockaddr*>(fh.source), fh.source_length, &src, nullptr))
      _exit(19);
    const std::vector<uint8_t> want =
        Packet(wire::op::kRcSendOnly, uint32_t{lease->lane} << 16 | 0x0abc);
    if (static_cast<size_t>(n) != sizeof fh + want.size() ||
        std::memcmp(buf + sizeof fh, want.data(), want.size()) != 0)
      _exit(21);
    // The source travels along: the sender's IPv4 socket and its port.
    if (!src.gid.IsV4Mapped() || src.port == 0) _exit(22);
    // Nothing else (the packet for another lane) arrives.
    if (poll(&p, 1, 300) != 0) _exit(23);
    _exit(0);
  }
  close(to_parent[1]);
  close(to_child[0]);
  uint8_t msg[7];
  const ssize_t got = read(to_parent[0], msg, sizeof msg);
  int status = 0;
  if (got != sizeof msg) {
    waitpid(child, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 20) GTEST_SKIP() << "no IPv4 host address";
    FAIL() << "the other user's lease failed: exit " << WEXITSTATUS(status);
  }
  Endpoint to;
  uint32_t ip;
  std::memcpy(&ip, msg + 1, 4);
  to.gid = Gid::FromIpv4(ip);
  to.port = port_;
  const uint8_t lane = msg[0];
  // The other user's socket for sending is its own, at another port.
  EXPECT_NE((msg[5] << 8) | msg[6], port_);
  auto send = [&](const std::vector<uint8_t>& packet) {
    sockaddr_in6 sa{};
    const socklen_t len = ToSockaddr(to, 0, &sa);
    EXPECT_EQ(sendto(sender_, packet.data(), packet.size(), 0, reinterpret_cast<sockaddr*>(&sa), len),
              static_cast<ssize_t>(packet.size()));
  };
  // Root's own lease, so that a second lane exists (its packets must not
  // reach the other user).
  std::string why;
  auto mine = AcquireLease(port_, "/nonexistent", &why);
  ASSERT_TRUE(mine) << why;
  EXPECT_FALSE(mine->forwarded);
  const uint8_t go = 1;
  ASSERT_EQ(write(to_child[1], &go, 1), 1);
  send(Packet(wire::op::kRcSendOnly, uint32_t{lane} << 16 | 0x0abc));
  send(Packet(wire::op::kRcSendOnly, uint32_t{mine->lane} << 16 | 0x0abc));
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the other user's check failed: exit " << WEXITSTATUS(status);
  close(to_parent[0]);
  close(to_child[1]);
  Release(*mine);
}

TEST(HostNicProtocol, MalformedMessagesAreRefusedAndCloseTheirDescriptors) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  Lease lease;
  // Too short.
  ASSERT_EQ(SendMessage(sv[0], &lease, sizeof(lease) - 1), 0);
  std::vector<int> fds;
  EXPECT_EQ(ReceiveMessage(sv[1], &lease, sizeof(lease), 1000, &fds, 4), EPROTO);
  // Too many descriptors.
  const int extra = dup(sv[0]);
  ASSERT_EQ(SendMessage(sv[0], &lease, sizeof(lease), {extra, extra, extra}), 0);
  EXPECT_EQ(ReceiveMessage(sv[1], &lease, sizeof(lease), 1000, &fds, 2), EPROTO);
  EXPECT_TRUE(fds.empty());
  close(extra);
  // Nothing arrives.
  EXPECT_EQ(ReceiveMessage(sv[1], &lease, sizeof(lease), 10, &fds, 2), ETIMEDOUT);
  close(sv[0]);
  EXPECT_EQ(ReceiveMessage(sv[1], &lease, sizeof(lease), 1000, &fds, 2), ECONNRESET);
  close(sv[1]);
}

}  // namespace
}  // namespace softrnic::transport::host_nic
