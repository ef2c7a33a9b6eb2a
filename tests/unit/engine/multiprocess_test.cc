// Acceptance item 7: two processes, each with its own Device on its own
// loopback address, connected over real UDP. The parent forks before it
// creates any device; the child builds its own. They exchange QPN / GID /
// rkey / address over a socketpair, run SEND / WRITE / READ / atomics in both
// directions, and both sides verify the bytes they received.
#include <sys/socket.h>
#include <sys/wait.h>

#include <csignal>

#include <cstring>

#include "fd_exchange.h"
#include "rc_connect.h"
#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

struct Info {
  uint32_t qpn;
  Gid gid;
  uint32_t rkey;
  uint64_t addr;
};

constexpr size_t kBuf = 1 << 20;
constexpr uint32_t kSendLen = 40000, kWriteLen = 100000, kReadLen = 50000;
constexpr size_t kPatternOff = 0;        // each side's own pattern
constexpr size_t kRecvOff = 256 * 1024;  // SEND lands here
constexpr size_t kWriteOff = 384 * 1024; // WRITE lands here
constexpr size_t kReadOff = 640 * 1024;  // READ lands here
constexpr size_t kWordOff = 900 * 1024;  // atomic target
constexpr size_t kResOff = 901 * 1024;   // atomic results

// Connects s to the peer. The first PSN is not 0, as a real peer's (chosen
// at random) is not: both processes' engines then count PSNs from an
// arbitrary start.
int ConnectTo(Side& s, const Info& peer) {
  return ConnectRc(*s.dev, s.qp, RcPeer{peer.qpn, peer.gid}, RcLinkOptions{.psn = 0x123});
}

// Creates PD/CQ/QP/MR with plain returns (usable in the child, no gtest).
bool SetupProcessSide(Side& s, const std::string& address, uint16_t port) {
  transport::UdpConfig config;
  config.bind_addresses = {address};
  config.port = port;  // both processes: the port is implied by the GID
  std::string error;
  s.dev = Device::Create(config, &error);
  if (!s.dev) return false;
  if (s.dev->AllocPd(nullptr, &s.pd) || s.dev->CreateCq(256, nullptr, nullptr, &s.cq)) return false;
  QpCaps caps{64, 64, 4, 4, 0};
  if (s.dev->CreateQp(s.pd, QpType::kRc, s.cq, s.cq, nullptr, &caps, false, nullptr, &s.qp)) return false;
  s.buf.assign(kBuf, 0);
  return s.dev->RegMr(s.pd, s.buf.data(), s.buf.size(), reinterpret_cast<uint64_t>(s.buf.data()),
                      kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic, nullptr, &s.mr) == 0;
}

Info InfoOf(const Side& s) {
  return Info{s.dev->QpNum(s.qp), s.dev->gids()[0], s.dev->MrRkey(s.mr), Addr(s, 0)};
}

bool PollOk(Side& s, size_t n, std::vector<Completion>* out = nullptr) {
  auto c = PollN(s, n, std::chrono::milliseconds(10000));
  if (out) *out = c;
  if (c.size() != n) return false;
  for (const auto& x : c)
    if (x.status != WcStatus::kSuccess) return false;
  return true;
}

bool Matches(const uint8_t* p, size_t n, uint32_t seed, size_t pattern_offset = 0) {
  std::vector<uint8_t> expect(pattern_offset + n);
  FillPattern(expect, 0, expect.size(), seed);
  return std::memcmp(p, expect.data() + pattern_offset, n) == 0;
}

// The child: returns its exit code (0 = every check passed).
int ChildMain(int sock, const std::string& address, uint16_t port) {
  Side s;
  if (!SetupProcessSide(s, address, port)) return 10;
  FillPattern(s.buf, kPatternOff, kReadLen + 1000, 2);
  uint64_t word = 100;
  std::memcpy(s.buf.data() + kWordOff, &word, 8);
  const Info mine = InfoOf(s);
  Info peer;
  if (!WriteAll(sock, &mine, sizeof(mine)) || !ReadAll(sock, &peer, sizeof(peer))) return 11;
  if (ConnectTo(s, peer)) return 12;
  Sge r = SgeOf(s, kRecvOff, 65536);
  if (s.dev->PostRecv(s.qp, RecvWr{55, {&r, 1}})) return 13;
  char go = 'r';
  if (!WriteAll(sock, &go, 1)) return 14;  // ready: receive posted, QP in RTS
  // Parent's SEND arrives.
  std::vector<Completion> c;
  if (!PollOk(s, 1, &c)) return 20;
  if (c[0].wr_id != 55 || c[0].byte_len != kSendLen || c[0].opcode != WcOpcode::kRecv) return 21;
  if (!Matches(s.buf.data() + kRecvOff, kSendLen, 1)) return 22;
  // Wait for the parent's one-sided operations to finish, then check them.
  if (!ReadAll(sock, &go, 1) || go != 'w') return 23;
  if (!Matches(s.buf.data() + kWriteOff, kWriteLen, 1, 1000)) return 24;
  std::memcpy(&word, s.buf.data() + kWordOff, 8);
  if (word != 777) return 25;  // 100 + 5 (FETCH_ADD), then CMP_SWAP 105 -> 777
  // The child's own traffic toward the parent: READ and WRITE.
  Sge rd = SgeOf(s, kReadOff, kReadLen);
  if (s.dev->PostSend(s.qp, MakeWr(WrOpcode::kRdmaRead, 1, {&rd, 1}, peer.addr + kPatternOff, peer.rkey)))
    return 30;
  FillPattern(s.buf, kResOff, 3000, 3);
  Sge wr = SgeOf(s, kResOff, 3000);
  if (s.dev->PostSend(s.qp, MakeWr(WrOpcode::kRdmaWrite, 2, {&wr, 1}, peer.addr + kWriteOff, peer.rkey)))
    return 31;
  if (!PollOk(s, 2, &c) || c[0].wr_id != 1 || c[1].wr_id != 2) return 32;
  if (!Matches(s.buf.data() + kReadOff, kReadLen, 1)) return 33;
  go = 'd';
  if (!WriteAll(sock, &go, 1)) return 34;
  // Stay up until the parent has checked (it may still need ACKs from us).
  if (!ReadAll(sock, &go, 1)) return 35;
  return 0;
}

TEST(MultiProcessTest, TrafficBetweenTwoProcesses) {
  // Addresses picked before the fork, from the parent's pid, so they are
  // unique to this test process and differ between parent and child.
  const std::string parent_addr = TestAddress(4);
  const std::string child_addr = TestAddress(5);
  const uint16_t port = TestPort();
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(sv[0]);
    _exit(ChildMain(sv[1], child_addr, port));
  }
  close(sv[1]);
  const int sock = sv[0];
  int status = 0;
  {
    Side p;
    ASSERT_TRUE(SetupProcessSide(p, parent_addr, port));
    FillPattern(p.buf, kPatternOff, kWriteLen + 1000, 1);
    const Info mine = InfoOf(p);
    Info peer;
    ASSERT_TRUE(ReadAll(sock, &peer, sizeof(peer)));
    ASSERT_TRUE(WriteAll(sock, &mine, sizeof(mine)));
    ASSERT_EQ(ConnectTo(p, peer), 0);
    EXPECT_FALSE(peer.gid == mine.gid);
    char go;
    ASSERT_TRUE(ReadAll(sock, &go, 1));
    ASSERT_EQ(go, 'r');
    Sge s1 = SgeOf(p, kPatternOff, kSendLen);
    ASSERT_EQ(p.dev->PostSend(p.qp, MakeWr(WrOpcode::kSend, 1, {&s1, 1})), 0);
    Sge s2 = SgeOf(p, kPatternOff + 1000, kWriteLen);
    ASSERT_EQ(p.dev->PostSend(p.qp, MakeWr(WrOpcode::kRdmaWrite, 2, {&s2, 1}, peer.addr + kWriteOff, peer.rkey)), 0);
    Sge s3 = SgeOf(p, kReadOff, kReadLen);
    ASSERT_EQ(p.dev->PostSend(p.qp, MakeWr(WrOpcode::kRdmaRead, 3, {&s3, 1}, peer.addr + kPatternOff, peer.rkey)), 0);
    Sge s4 = SgeOf(p, kResOff, 8), s5 = SgeOf(p, kResOff + 8, 8);
    SendWr fa = MakeWr(WrOpcode::kAtomicFetchAdd, 4, {&s4, 1}, peer.addr + kWordOff, peer.rkey);
    fa.compare_add = 5;
    ASSERT_EQ(p.dev->PostSend(p.qp, fa), 0);
    SendWr cs = MakeWr(WrOpcode::kAtomicCmpSwp, 5, {&s5, 1}, peer.addr + kWordOff, peer.rkey);
    cs.compare_add = 105;
    cs.swap = 777;
    ASSERT_EQ(p.dev->PostSend(p.qp, cs), 0);
    std::vector<Completion> c;
    const bool ok = PollOk(p, 5, &c);
    for (size_t i = 0; i < c.size(); ++i) {
      EXPECT_EQ(c[i].wr_id, uint64_t(i + 1));
      EXPECT_EQ(c[i].status, WcStatus::kSuccess) << "WR " << i + 1;
    }
    if (!ok) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "parent's WRs did not all complete (" << c.size() << " of 5)";
    }
    EXPECT_TRUE(Matches(p.buf.data() + kReadOff, kReadLen, 2)) << "READ from the child";
    uint64_t orig1, orig2;
    std::memcpy(&orig1, p.buf.data() + kResOff, 8);
    std::memcpy(&orig2, p.buf.data() + kResOff + 8, 8);
    EXPECT_EQ(orig1, 100u);
    EXPECT_EQ(orig2, 105u);
    go = 'w';
    ASSERT_TRUE(WriteAll(sock, &go, 1));
    // The child READs our pattern and WRITEs 3000 bytes over our kWriteOff.
    ASSERT_TRUE(ReadAll(sock, &go, 1));
    ASSERT_EQ(go, 'd');
    std::vector<uint8_t> expect(3000);
    FillPattern(expect, 0, 3000, 3);
    EXPECT_EQ(FirstDiff(p.buf.data() + kWriteOff, expect.data(), 3000), -1) << "WRITE from the child";
    go = 'x';
    WriteAll(sock, &go, 1);
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
  }
  close(sock);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child failed at check " << WEXITSTATUS(status);
}

}  // namespace
}  // namespace softrnic::engine::testing
