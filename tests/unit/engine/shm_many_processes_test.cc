// 128 processes on one host reach one device through shared memory (issue
// 17; docs/shm.md): every inbound ring of the server's segment is taken by
// a client process of its own (32 under ThreadSanitizer), each client SENDs a message of its own to
// the server and gets one back, both checked byte for byte, and every data
// packet the server received came through a ring, none over UDP.
//
// The parent forks the clients before it creates any device (a fork after
// the engine's threads exist would copy a process in the middle of them);
// each side exchanges QP numbers over a socketpair.
#include <sys/socket.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>

#include "fd_exchange.h"
#include "rc_connect.h"
#include "rc_pair.h"
#include "transport/shm_segment.h"

namespace softrnic::engine::testing {
namespace {

// Every ring; under ThreadSanitizer (a process costs it far more memory and
// time) 32, still twice the 16 rings a segment had before version 3.
#if defined(__SANITIZE_THREAD__)
constexpr int kClients = 32;
#else
constexpr int kClients = static_cast<int>(transport::kShmRings);
#endif
constexpr uint32_t kMsg = 4096;

struct Hello {
  uint32_t qpn = 0;
  Gid gid;
};

// Client i's message, and the server's answer to it.
uint8_t RequestByte(int i, size_t at) { return static_cast<uint8_t>(i * 31 + at * 7 + 1); }
uint8_t ReplyByte(int i, size_t at) { return static_cast<uint8_t>(i * 17 + at * 13 + 5); }

// Client i's device: an address of its own (a peer's port is not part of
// its GID, so devices of one host that talk to each other need addresses of
// their own, docs/addressing.md), 127.(72 + i).x.y with the test process's
// pid in x.y like TestAddress, below the 127.200+ addresses other tests
// use; the server's port (TestPort() of the parent: computed in a child it
// would differ).
EngineConfig ClientConfig(int i, pid_t parent, uint16_t port) {
  EngineConfig config = TestConfig(0);
  config.udp.bind_addresses = {"127." + std::to_string(72 + i) + "." +
                               std::to_string((parent >> 8) & 0xff) + "." +
                               std::to_string(parent & 0xff)};
  config.udp.port = port;
  return config;
}
static_assert(72 + kClients <= 200);

// INIT -> RTR -> RTS toward `peer`: 4 s per try (Local ACK Timeout 20),
// since 129 processes share two CPUs here (more under a sanitizer), and a
// process may wait long for its turn to answer.
int ConnectQp(Device& dev, Qp* qp, const Hello& peer) {
  return ConnectRc(dev, qp, RcPeer{peer.qpn, peer.gid}, RcLinkOptions{.timeout = 20});
}

// Polls until one completion arrives (or 120 s pass); its status, or -1.
int PollOne(Device& dev, Cq* cq, Completion* out) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (dev.PollCq(cq, 1, out) == 1) return static_cast<int>(out->status);
    usleep(50);
  }
  return -1;
}

// A client process: returns its exit code (0: its exchange checked out).
int ClientMain(int i, int fd, pid_t parent, uint16_t port) {
  std::string error;
  auto dev = Device::Create(ClientConfig(i, parent, port), &error);
  if (!dev) return 10;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  Mr* mr = nullptr;
  CompletionChannel* channel = nullptr;
  std::vector<uint8_t> buf(2 * kMsg);
  QpCaps caps{4, 4, 1, 1, 0};
  if (dev->CreateCompletionChannel(&channel) || dev->AllocPd(nullptr, &pd) ||
      dev->CreateCq(16, channel, nullptr, &cq) ||
      dev->CreateQp(pd, QpType::kRc, cq, cq, nullptr, &caps, false, nullptr, &qp) ||
      dev->RegMr(pd, buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()), kLocalWrite,
                 nullptr, &mr))
    return 11;
  const Hello mine{dev->QpNum(qp), dev->gids()[0]};
  Hello server;
  if (!WriteAll(fd, &mine, sizeof(mine)) || !ReadAll(fd, &server, sizeof(server))) return 12;
  if (ConnectQp(*dev, qp, server) != 0) return 13;
  const uint32_t lkey = dev->MrLkey(mr);
  Sge recv{reinterpret_cast<uint64_t>(buf.data()) + kMsg, kMsg, lkey};
  if (dev->PostRecv(qp, RecvWr{2, {&recv, 1}}) != 0) return 14;
  for (size_t at = 0; at < kMsg; ++at) buf[at] = RequestByte(i, at);
  Sge send{reinterpret_cast<uint64_t>(buf.data()), kMsg, lkey};
  if (dev->PostSend(qp, MakeWr(WrOpcode::kSend, 1, {&send, 1})) != 0) return 15;
  // Clients block for their completions (128 polling processes would
  // starve the server of the two CPUs), as event-driven servers do.
  bool sent = false, answered = false;
  while (!sent || !answered) {
    if (dev->ArmCq(cq, false) != 0) return 16;
    Completion wc;
    if (dev->PollCq(cq, 1, &wc) == 0) {
      void* handle = nullptr;
      if (dev->GetCqEvent(channel, &handle) != 0) return 17;
      dev->AckCqEvents(cq, 1);
      continue;
    }
    if (wc.status != WcStatus::kSuccess) return 18;
    (wc.wr_id == 1 ? sent : answered) = true;
  }
  for (size_t at = 0; at < kMsg; ++at)
    if (buf[kMsg + at] != ReplyByte(i, at)) return 19;
  // Stay until the server has counted everything (it closes the socket).
  char c;
  (void)!read(fd, &c, 1);
  return 0;
}

TEST(ShmManyProcesses, EveryRingTakenByAClientProcessExchangesVerifiedData) {
  if (EngineConfig::FromProcess().transport_mode == transport::TransportMode::kUdp)
    GTEST_SKIP() << "shared memory is off (SOFTRNIC_TRANSPORT=udp)";
  std::vector<pid_t> pids;
  std::vector<int> fds;
  const pid_t parent = getpid();
  const uint16_t port = TestPort();
  for (int i = 0; i < kClients; ++i) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(150);  // a client that never hears back must not hang the test
      for (int fd : fds) close(fd);
      close(sv[0]);
      _exit(ClientMain(i, sv[1], parent, port));
    }
    close(sv[1]);
    pids.push_back(pid);
    fds.push_back(sv[0]);
  }

  {
    auto server = MakeDevice(TestConfig(0));
    ASSERT_NE(server, nullptr);
    if (server->engine().peer_memory() == nullptr) {
      for (int fd : fds) close(fd);
      for (pid_t pid : pids) waitpid(pid, nullptr, 0);
      GTEST_SKIP() << "no shared-memory transport";
    }
    Pd* pd = nullptr;
    Cq* cq = nullptr;
    Mr* mr = nullptr;
    ASSERT_EQ(server->AllocPd(nullptr, &pd), 0);
    ASSERT_EQ(server->CreateCq(4 * kClients, nullptr, nullptr, &cq), 0);
    std::vector<uint8_t> buf(2 * size_t{kMsg} * kClients, 0);
    ASSERT_EQ(server->RegMr(pd, buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()),
                            kLocalWrite, nullptr, &mr),
              0);
    const uint32_t lkey = server->MrLkey(mr);
    auto request_area = [&](int i) { return buf.data() + size_t(i) * kMsg; };
    auto reply_area = [&](int i) { return buf.data() + (size_t(kClients) + size_t(i)) * kMsg; };
    std::vector<Qp*> qps(kClients);
    for (int i = 0; i < kClients; ++i) {
      QpCaps caps{4, 4, 1, 1, 0};
      ASSERT_EQ(server->CreateQp(pd, QpType::kRc, cq, cq, nullptr, &caps, false, nullptr, &qps[i]), 0);
      Hello client;
      ASSERT_TRUE(ReadAll(fds[i], &client, sizeof(client))) << "client " << i << " died";
      ASSERT_EQ(ConnectQp(*server, qps[i], client), 0);
      Sge recv{reinterpret_cast<uint64_t>(request_area(i)), kMsg, lkey};
      ASSERT_EQ(server->PostRecv(qps[i], RecvWr{uint64_t(i), {&recv, 1}}), 0);
      const Hello mine{server->QpNum(qps[i]), server->gids()[0]};
      ASSERT_TRUE(WriteAll(fds[i], &mine, sizeof(mine)));
    }
    // Every request, checked and answered at once (the answers' own
    // completions arrive on the same CQ meanwhile).
    std::vector<bool> got(kClients, false);
    int requests = 0, answers = 0;
    while (requests < kClients || answers < kClients) {
      Completion wc;
      ASSERT_EQ(PollOne(*server, cq, &wc), static_cast<int>(WcStatus::kSuccess))
          << requests << " requests, " << answers << " answers";
      if (wc.wr_id >= 1000) {
        ++answers;
        continue;
      }
      ASSERT_LT(wc.wr_id, uint64_t(kClients));
      const int i = static_cast<int>(wc.wr_id);
      EXPECT_FALSE(got[i]);
      got[i] = true;
      ++requests;
      EXPECT_EQ(wc.byte_len, kMsg);
      size_t bad = 0;
      for (size_t at = 0; at < kMsg; ++at) bad += request_area(i)[at] != RequestByte(i, at);
      EXPECT_EQ(bad, 0u) << "client " << i;
      for (size_t at = 0; at < kMsg; ++at) reply_area(i)[at] = ReplyByte(i, at);
      Sge send{reinterpret_cast<uint64_t>(reply_area(i)), kMsg, lkey};
      ASSERT_EQ(server->PostSend(qps[i], MakeWr(WrOpcode::kSend, uint64_t(1000 + i), {&send, 1})), 0);
    }
    // Every request came through shared memory: placed directly in its
    // receive buffer (engine/same_host/shm_direct_send.cc) or as packets through a
    // ring (128 requests of 4 KiB at MTU 1024 are 512 packets; the clients'
    // ACKs of the answers come on top); nothing arrived over UDP but
    // doorbells, which are not packets.
    const transport::TransportCounters tc = TransportCountersOf(*server);
    const uint64_t direct = StatsOf(*server).shm_direct_recv_ops;
    EXPECT_GE(tc.shm_rx_packets + direct * (kMsg / 1024), uint64_t(kClients) * (kMsg / 1024));
    EXPECT_EQ(tc.rx_packets, 0u) << "packets over UDP";
    for (int fd : fds) close(fd);  // the clients may go
  }
  for (int i = 0; i < kClients; ++i) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "client " << i << " status " << status;
  }
}

}  // namespace
}  // namespace softrnic::engine::testing
