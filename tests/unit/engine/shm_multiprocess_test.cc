// Two processes on one host over the shared-memory transport (docs/shm.md):
// - a target blocked in sleep(), or stopped with SIGSTOP, is written to,
//   read from and atomically updated, and the data is checked afterwards;
// - SENDs into a target stopped with SIGSTOP land in its posted receive
//   buffers and complete there, in order, once it runs again;
// - a WRITE to a deregistered MR, beyond an MR's bounds, or without the
//   right fails with REM_ACCESS_ERR and leaves the target's memory untouched;
// - a target killed or stopped mid-transfer leaves the requester with error
//   completions within its retry budget.
// The parent forks before creating any device; each side has its own.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>

#include "fd_exchange.h"
#include "rc_connect.h"
#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

constexpr int kQps = 3;
constexpr size_t kBig = 1 << 20;
constexpr size_t kSmall = 64 * 1024;
constexpr uint8_t kGuard = 0x77;
// Target pattern, READ from here: inside the shared pages (a range touching
// the buffer's first, partial page would go through the ring, which a
// stopped target does not serve).
constexpr size_t kReadOff = 64 * 1024;
constexpr size_t kWriteOff = 256 * 1024;
constexpr size_t kWordOff = 512 * 1024;
constexpr uint32_t kLen = 64 * 1024;

struct Info {
  uint32_t qpn[kQps];
  Gid gid;
  uint32_t rkey[3];  // 0: full rights, 1: no remote write, 2: deregistered
  uint64_t addr[3];
};

enum class Mode : char {
  kSleep = 's', kStop = 'z', kErrors = 'e', kKill = 'k', kReceive = 'n', kPlaced = 'p',
  kPlacedImm = 'i'
};

// kPlaced: WRITEs over the target's whole big region, whose first and last
// pages are partly outside it (a vector's data is not page aligned), then
// overlapping ones posted back to back, each from its own part of the
// requester's pattern; the last byte written wins, in posting order.
struct PlacedWrite {
  size_t src, dst;
  uint32_t len;
};
std::vector<PlacedWrite> PlacedWrites() {
  std::vector<PlacedWrite> w{{0, 0, static_cast<uint32_t>(kBig)}};
  for (size_t i = 0; i < 16; ++i)
    w.push_back({i * 4099 + 13, i * 32768 + 7, 65536 + static_cast<uint32_t>(i) * 100});
  w.push_back({1000, kBig - 5000, 5000});  // the partial last page
  w.push_back({2000, kBig - 70000, 70000});
  return w;
}
// kPlacedImm: the same WRITEs, every other one (the first, the whole
// region, among them) a WRITE_WITH_IMM whose immediate is its index; the
// target posts a receive for each and checks their completions.
bool PlacedWithImm(size_t i) { return i % 2 == 0; }
size_t PlacedImmCount() {
  size_t n = 0;
  for (size_t i = 0; i < PlacedWrites().size(); ++i) n += PlacedWithImm(i);
  return n;
}
std::vector<uint8_t> PlacedSource() {
  std::vector<uint8_t> src(kBig);
  FillPattern(src, 0, kBig, 3);
  return src;
}
std::vector<uint8_t> AfterPlacedWrites() {
  const std::vector<uint8_t> src = PlacedSource();
  std::vector<uint8_t> mem(kBig, kGuard);
  for (const PlacedWrite& w : PlacedWrites()) std::memcpy(&mem[w.dst], &src[w.src], w.len);
  return mem;
}

// kReceive: receive WQEs the target posts before it is stopped, each
// kRecvLen bytes of its shared pages from kWriteOff on; the parent's SENDs
// fill them (engine/same_host/shm_direct_send.cc) while it is stopped.
constexpr int kRecvs = 32;
constexpr uint32_t kRecvLen = 4096;

// buf[0] starts 16 bytes past a page boundary, where glibc's malloc puts a
// large block, so that its first and last pages are partly outside the
// region whatever the allocator (a sanitizer's returns page-aligned
// blocks): kPlaced depends on it. buf[1] and buf[2] are plain vectors.
constexpr size_t kBigSkew = 16;

struct Proc {
  std::vector<uint8_t> storage[3];
  std::span<uint8_t> buf[3];
  std::shared_ptr<Device> dev;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp[kQps] = {};
  Mr* mr[3] = {};
};

bool SetupProc(Proc& p, const std::string& address, uint16_t port) {
  transport::UdpConfig config;
  config.bind_addresses = {address};
  config.port = port;
  std::string error;
  p.dev = Device::Create(config, &error);
  if (!p.dev) return false;
  if (p.dev->AllocPd(nullptr, &p.pd) || p.dev->CreateCq(4096, nullptr, nullptr, &p.cq))
    return false;
  for (int i = 0; i < kQps; ++i) {
    QpCaps caps{1024, 1024, 4, 4, 64};
    if (p.dev->CreateQp(p.pd, QpType::kRc, p.cq, p.cq, nullptr, &caps, false, nullptr, &p.qp[i]))
      return false;
  }
  const uint32_t rights[3] = {kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic,
                              kLocalWrite | kRemoteRead,
                              kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic};
  for (int i = 0; i < 3; ++i) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t len = i == 0 ? kBig : kSmall;
    p.storage[i].assign(i == 0 ? len + 2 * page : len, kGuard);
    uint8_t* at = p.storage[i].data();
    if (i == 0) {
      const uintptr_t base = reinterpret_cast<uintptr_t>(at);
      at += (base + page - 1) / page * page - base + kBigSkew;
    }
    p.buf[i] = {at, len};
    if (p.dev->RegMr(p.pd, p.buf[i].data(), p.buf[i].size(),
                     reinterpret_cast<uint64_t>(p.buf[i].data()), rights[i], nullptr, &p.mr[i]))
      return false;
  }
  return true;
}

Info InfoOf(const Proc& p) {
  Info info{};
  for (int i = 0; i < kQps; ++i) info.qpn[i] = p.dev->QpNum(p.qp[i]);
  info.gid = p.dev->gids()[0];
  for (int i = 0; i < 3; ++i) {
    info.rkey[i] = p.dev->MrRkey(p.mr[i]);
    info.addr[i] = reinterpret_cast<uint64_t>(p.buf[i].data());
  }
  return info;
}

// Every QP to its peer. 16.8 ms per try (Local ACK Timeout 12) and three
// retries: a killed target must give error completions well within a
// second (KilledTargetGivesErrorCompletionsWithinTheRetryBudget).
int ConnectAll(Proc& p, const Info& peer) {
  for (int i = 0; i < kQps; ++i)
    if (int e = ConnectRc(*p.dev, p.qp[i], RcPeer{peer.qpn[i], peer.gid},
                          RcLinkOptions{.timeout = 12, .retry_cnt = 3, .rnr_retry = 3}))
      return e;
  return 0;
}

// The target process. Returns its exit code (0 = every check passed).
int TargetMain(int sock, Mode mode, const std::string& address, uint16_t port) {
  Proc t;
  if (!SetupProc(t, address, port)) return 10;
  FillPattern(t.buf[0], kReadOff, kLen, 2);
  uint64_t word = 100;
  std::memcpy(t.buf[0].data() + kWordOff, &word, 8);
  const Info mine = InfoOf(t);
  Info peer;
  if (!WriteAll(sock, &mine, sizeof(mine)) || !ReadAll(sock, &peer, sizeof(peer))) return 11;
  if (ConnectAll(t, peer)) return 12;
  if (mode == Mode::kErrors && t.dev->DeregMr(t.mr[2])) return 13;
  if (mode == Mode::kKill) {
    std::vector<Sge> s(512);
    for (int i = 0; i < 512; ++i) {
      s[i] = Sge{reinterpret_cast<uint64_t>(t.buf[0].data()) + kWriteOff, 4096,
                 t.dev->MrLkey(t.mr[0])};
      if (t.dev->PostRecv(t.qp[0], RecvWr{static_cast<uint64_t>(i), {&s[i], 1}})) return 14;
    }
  }
  if (mode == Mode::kPlacedImm) {
    // WRITE_WITH_IMM writes nothing into a receive buffer: any will do.
    for (size_t i = 0; i < PlacedImmCount(); ++i) {
      Sge s{reinterpret_cast<uint64_t>(t.buf[1].data()), 64, t.dev->MrLkey(t.mr[1])};
      if (t.dev->PostRecv(t.qp[0], RecvWr{static_cast<uint64_t>(i), {&s, 1}})) return 14;
    }
  }
  if (mode == Mode::kReceive) {
    for (int i = 0; i < kRecvs; ++i) {
      Sge s{reinterpret_cast<uint64_t>(t.buf[0].data()) + kWriteOff + size_t(i) * kRecvLen,
            kRecvLen, t.dev->MrLkey(t.mr[0])};
      if (t.dev->PostRecv(t.qp[0], RecvWr{static_cast<uint64_t>(i), {&s, 1}})) return 14;
    }
  }
  char c = 'r';
  if (!WriteAll(sock, &c, 1)) return 15;  // connected: the parent may start
  if (mode == Mode::kSleep) sleep(2);      // blocked; the parent works meanwhile
  // (kPlaced: blocked in the read below; our engine serves the packets.)
  if (mode == Mode::kKill) {
    for (;;) pause();  // until SIGKILL
  }
  // (kStop: the parent stops us with SIGSTOP while we block here.)
  if (!ReadAll(sock, &c, 1) || c != 'v') return 16;
  int code = 0;
  if (mode == Mode::kReceive) {
    // Running again: every SEND completes here, in order, with its bytes.
    int got = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::vector<uint8_t> expect(kRecvLen);
    while (got < kRecvs && std::chrono::steady_clock::now() < deadline) {
      Completion wc[8];
      const int n = t.dev->PollCq(t.cq, 8, wc);
      for (int i = 0; i < n; ++i, ++got) {
        if (wc[i].status != WcStatus::kSuccess || wc[i].wr_id != uint64_t(got) ||
            wc[i].byte_len != kRecvLen || wc[i].opcode != WcOpcode::kRecv)
          code = 40;
        FillPattern(expect, 0, kRecvLen, 100 + got);
        if (std::memcmp(t.buf[0].data() + kWriteOff + size_t(got) * kRecvLen, expect.data(),
                        kRecvLen) != 0)
          code = 41;
      }
    }
    if (got != kRecvs) code = 42;
  } else if (mode == Mode::kPlaced || mode == Mode::kPlacedImm) {
    const std::vector<uint8_t> expect = AfterPlacedWrites();
    // The partly carried packets came in through the ring.
    if (t.dev->stats().shm_placed_rx_packets == 0) code = 51;
    if (FirstDiff(t.buf[0].data(), expect.data(), kBig) != -1) code = 50;
    // Each WRITE_WITH_IMM completed a receive, in order, with its length
    // and its immediate (the index of the WRITE), and nothing else did.
    const std::vector<PlacedWrite> writes = PlacedWrites();
    std::vector<size_t> imm_writes;
    for (size_t i = 0; mode == Mode::kPlacedImm && i < writes.size(); ++i)
      if (PlacedWithImm(i)) imm_writes.push_back(i);
    size_t got = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (code == 0 && got < imm_writes.size() && std::chrono::steady_clock::now() < deadline) {
      Completion wc[8];
      const int n = t.dev->PollCq(t.cq, 8, wc);
      for (int i = 0; i < n && code == 0; ++i, ++got) {
        if (got >= imm_writes.size()) {
          code = 52;
          break;
        }
        const size_t w = imm_writes[got];
        if (wc[i].status != WcStatus::kSuccess || wc[i].opcode != WcOpcode::kRecvRdmaWithImm ||
            wc[i].wr_id != got || wc[i].byte_len != writes[w].len ||
            wc[i].imm_data != static_cast<uint32_t>(w) || !(wc[i].wc_flags & kWcWithImm))
          code = 53;
      }
    }
    if (code == 0 && got != imm_writes.size()) code = 54;
    Completion extra;
    if (code == 0 && t.dev->PollCq(t.cq, 1, &extra) != 0) code = 55;
  } else if (mode == Mode::kSleep || mode == Mode::kStop) {
    std::vector<uint8_t> expect(kLen);
    FillPattern(expect, 0, kLen, 1);
    if (std::memcmp(t.buf[0].data() + kWriteOff, expect.data(), kLen) != 0) code = 20;
    std::memcpy(&word, t.buf[0].data() + kWordOff, 8);
    if (word != 777) code = 21;  // 100 + 5 (FETCH_ADD), then CMP_SWAP 105 -> 777
  } else {
    // Nothing of the failed WRITEs landed anywhere.
    if (!AllBytes(t.buf[1].data(), kSmall, kGuard)) code = 30;
    if (!AllBytes(t.buf[2].data(), kSmall, kGuard)) code = 31;
    if (!AllBytes(t.buf[0].data() + kBig - 4096, 4096, kGuard)) code = 32;
  }
  c = static_cast<char>(code);
  (void)WriteAll(sock, &c, 1);
  return code;
}

class ShmMultiProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* t = std::getenv("SOFTRNIC_TRANSPORT");
    const char* d = std::getenv("SOFTRNIC_SHM_DIRECT");
    if ((t && std::strcmp(t, "udp") == 0) || (d && std::strcmp(d, "0") == 0))
      GTEST_SKIP() << "shared memory disabled by the environment";
  }
  void TearDown() override {
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
    }
    if (sock_ >= 0) close(sock_);
  }

  // Forks the target and connects to it; the parent's side is p_.
  void Start(Mode mode) {
    const std::string parent_addr = TestAddress(6);
    const std::string child_addr = TestAddress(7);
    const uint16_t port = TestPort();
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    child_ = fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {
      close(sv[0]);
      _exit(TargetMain(sv[1], mode, child_addr, port));
    }
    close(sv[1]);
    sock_ = sv[0];
    ASSERT_TRUE(SetupProc(p_, parent_addr, port));
    FillPattern(p_.buf[0], 0, kLen, 1);
    const Info mine = InfoOf(p_);
    ASSERT_TRUE(ReadAll(sock_, &peer_, sizeof(peer_)));
    ASSERT_TRUE(WriteAll(sock_, &mine, sizeof(mine)));
    ASSERT_EQ(ConnectAll(p_, peer_), 0);
    char c;
    ASSERT_TRUE(ReadAll(sock_, &c, 1));
    ASSERT_EQ(c, 'r');
  }

  // Asks the target to check its memory; returns its verdict (0 = good).
  int Verify() {
    char c = 'v';
    if (!WriteAll(sock_, &c, 1) || !ReadAll(sock_, &c, 1)) return -1;
    int status = 0;
    waitpid(child_, &status, 0);
    child_ = -1;
    return c;
  }

  void SignalledTargetEndsSendsWithRetryExceeded(int signal);
  // WritesToPartlySharedRegions...: kPlaced or kPlacedImm.
  void PlacedWritesInOrder(Mode mode);

  // SIGSTOP, and waits until the target is stopped for sure (a signal is
  // delivered asynchronously; its engine may run on meanwhile).
  void StopTarget() {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child_, &status, WUNTRACED), child_);
    ASSERT_TRUE(WIFSTOPPED(status));
  }

  Sge Local(size_t off, uint32_t len) {
    return Sge{reinterpret_cast<uint64_t>(p_.buf[0].data()) + off, len, p_.dev->MrLkey(p_.mr[0])};
  }

  std::vector<Completion> Poll(size_t n, std::chrono::milliseconds limit) {
    std::vector<Completion> out;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    Completion wc[16];
    while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
      const int got = p_.dev->PollCq(p_.cq, 16, wc);
      for (int i = 0; i < got; ++i) out.push_back(wc[i]);
    }
    return out;
  }

  uint64_t DirectOps() {
    std::lock_guard lock(p_.dev->engine().mu_);
    const ShmDirect* d = p_.dev->engine().shm_direct();
    return d ? d->direct_ops : 0;
  }

  // WRITE, READ, FETCH_ADD, CMP_SWAP on a target that runs no code at all.
  void OneSidedOnPassiveTarget() {
    const uint64_t direct0 = DirectOps();
    const EngineStats stats0 = p_.dev->stats();
    Sge w = Local(0, kLen);
    ASSERT_EQ(p_.dev->PostSend(p_.qp[0], MakeWr(WrOpcode::kRdmaWrite, 1, {&w, 1},
                                                peer_.addr[0] + kWriteOff, peer_.rkey[0])),
              0);
    Sge r = Local(kWriteOff, kLen);
    ASSERT_EQ(p_.dev->PostSend(p_.qp[0], MakeWr(WrOpcode::kRdmaRead, 2, {&r, 1},
                                                peer_.addr[0] + kReadOff, peer_.rkey[0])),
              0);
    Sge a1 = Local(kWordOff, 8), a2 = Local(kWordOff + 8, 8);
    SendWr fa = MakeWr(WrOpcode::kAtomicFetchAdd, 3, {&a1, 1}, peer_.addr[0] + kWordOff,
                       peer_.rkey[0]);
    fa.compare_add = 5;
    ASSERT_EQ(p_.dev->PostSend(p_.qp[0], fa), 0);
    SendWr cs = MakeWr(WrOpcode::kAtomicCmpSwp, 4, {&a2, 1}, peer_.addr[0] + kWordOff,
                       peer_.rkey[0]);
    cs.compare_add = 105;
    cs.swap = 777;
    ASSERT_EQ(p_.dev->PostSend(p_.qp[0], cs), 0);
    // A stopped target cannot answer a packet: these complete only because
    // they were executed on its memory directly.
    auto c = Poll(4, std::chrono::milliseconds(1500));
    ASSERT_EQ(c.size(), 4u);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(c[i].status, WcStatus::kSuccess) << i;
      EXPECT_EQ(c[i].wr_id, uint64_t(i + 1));
    }
    EXPECT_EQ(DirectOps() - direct0, 4u);
    // The published counters show them, though no packet was sent.
    const EngineStats stats1 = p_.dev->stats();
    EXPECT_EQ(stats1.shm_direct_ops - stats0.shm_direct_ops, 4u);
    EXPECT_EQ(stats1.shm_direct_bytes - stats0.shm_direct_bytes, 2u * kLen + 16u);
    // Per opcode: one WRITE and one READ of kLen, two atomics.
    EXPECT_EQ(stats1.shm_direct_write_ops - stats0.shm_direct_write_ops, 1u);
    EXPECT_EQ(stats1.shm_direct_write_bytes - stats0.shm_direct_write_bytes, kLen);
    EXPECT_EQ(stats1.shm_direct_read_ops - stats0.shm_direct_read_ops, 1u);
    EXPECT_EQ(stats1.shm_direct_read_bytes - stats0.shm_direct_read_bytes, kLen);
    EXPECT_EQ(stats1.shm_direct_atomic_ops - stats0.shm_direct_atomic_ops, 2u);
    std::vector<uint8_t> expect(kLen);
    FillPattern(expect, 0, kLen, 2);
    EXPECT_EQ(FirstDiff(p_.buf[0].data() + kWriteOff, expect.data(), kLen), -1);
    uint64_t orig1, orig2;
    std::memcpy(&orig1, p_.buf[0].data() + kWordOff, 8);
    std::memcpy(&orig2, p_.buf[0].data() + kWordOff + 8, 8);
    EXPECT_EQ(orig1, 100u);
    EXPECT_EQ(orig2, 105u);
  }

  Proc p_;
  Info peer_{};
  pid_t child_ = -1;
  int sock_ = -1;
};

TEST_F(ShmMultiProcessTest, TargetBlockedInSleepIsWrittenReadAndUpdated) {
  Start(Mode::kSleep);
  OneSidedOnPassiveTarget();
  EXPECT_EQ(Verify(), 0);
}

TEST_F(ShmMultiProcessTest, TargetStoppedWithSigstopIsWrittenReadAndUpdated) {
  Start(Mode::kStop);
  ASSERT_NO_FATAL_FAILURE(StopTarget());
  OneSidedOnPassiveTarget();
  ASSERT_EQ(kill(child_, SIGCONT), 0);
  EXPECT_EQ(Verify(), 0);
}

// SENDs into a target stopped with SIGSTOP: they complete at the sender
// because they were placed in the receive buffers the target had posted
// (a stopped process's NIC receives too), and the target, continued, finds
// their completions in order with their bytes.
TEST_F(ShmMultiProcessTest, TargetStoppedWithSigstopReceivesSendsInItsPostedBuffers) {
  Start(Mode::kReceive);
  ASSERT_NO_FATAL_FAILURE(StopTarget());
  const EngineStats stats0 = p_.dev->stats();
  for (int i = 0; i < kRecvs; ++i) {
    FillPattern(p_.buf[0], size_t(i) * kRecvLen, kRecvLen, 100 + i);
    Sge s = Local(size_t(i) * kRecvLen, kRecvLen);
    ASSERT_EQ(p_.dev->PostSend(p_.qp[0], MakeWr(WrOpcode::kSend, uint64_t(i), {&s, 1})), 0);
  }
  const auto c = Poll(kRecvs, std::chrono::milliseconds(1500));
  ASSERT_EQ(c.size(), size_t{kRecvs});
  for (int i = 0; i < kRecvs; ++i) {
    EXPECT_EQ(c[i].status, WcStatus::kSuccess) << i;
    EXPECT_EQ(c[i].wr_id, uint64_t(i));
  }
  const EngineStats stats1 = p_.dev->stats();
  EXPECT_EQ(stats1.shm_direct_send_ops - stats0.shm_direct_send_ops, uint64_t{kRecvs});
  EXPECT_EQ(stats1.shm_direct_send_bytes - stats0.shm_direct_send_bytes,
            uint64_t{kRecvs} * kRecvLen);
  ASSERT_EQ(kill(child_, SIGCONT), 0);
  EXPECT_EQ(Verify(), 0);
}

// WRITEs to a region whose first and last pages are not shared
// (docs/shm.md, "Partly shared targets"): the shared pages are placed
// directly, the rest goes as packets the target's engine writes; WRITEs
// posted back to back overlap, and the target finds the last one's bytes
// everywhere, as if each had landed whole in posting order.
TEST_F(ShmMultiProcessTest, WritesToPartlySharedRegionsPlaceTheSharedPagesInOrder) {
  PlacedWritesInOrder(Mode::kPlaced);
}

// The same with every other WRITE a WRITE_WITH_IMM: each is placed too (one
// in whole shared pages entirely: it cannot complete without the target's
// engine, which makes the receive completion from its last packet), and the
// target finds the bytes, then a receive completion per WRITE_WITH_IMM with
// its immediate, in order.
TEST_F(ShmMultiProcessTest, WritesWithImmediateToPartlySharedRegionsArePlacedToo) {
  PlacedWritesInOrder(Mode::kPlacedImm);
}

void ShmMultiProcessTest::PlacedWritesInOrder(Mode mode) {
  Start(mode);
  const EngineStats stats0 = p_.dev->stats();
  const std::vector<uint8_t> src = PlacedSource();
  std::copy(src.begin(), src.end(), p_.buf[0].begin());  // the registered buffer stays
  const std::vector<PlacedWrite> writes = PlacedWrites();
  // The target's shared pages: the whole ones inside its region.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t shared_begin = (peer_.addr[0] + page - 1) / page * page;
  const uint64_t shared_end = (peer_.addr[0] + kBig) / page * page;
  ASSERT_NE(shared_begin, peer_.addr[0]) << "buf[0] starts on a page boundary (kBigSkew)";
  uint64_t shared_bytes = 0;
  // Packets a placed WRITE may take at most: its head and tail (up to two
  // each: an edge may straddle a PMTU boundary), the last one, and one run
  // per 64 empty PMTUs (ConnectRc's path MTU is 1024).
  constexpr uint64_t kMtu = 1024;
  uint64_t pmtus = 0, packet_bound = 0;
  for (const PlacedWrite& w : writes) {
    const uint64_t n = (w.len + kMtu - 1) / kMtu;
    pmtus += n;
    packet_bound += 5 + n / 64;
  }
  for (size_t i = 0; i < writes.size(); ++i) {
    Sge s = Local(writes[i].src, writes[i].len);
    const uint64_t to = peer_.addr[0] + writes[i].dst;
    const bool imm = mode == Mode::kPlacedImm && PlacedWithImm(i);
    SendWr wr = MakeWr(imm ? WrOpcode::kRdmaWriteWithImm : WrOpcode::kRdmaWrite, i, {&s, 1}, to,
                       peer_.rkey[0]);
    wr.imm_data = static_cast<uint32_t>(i);
    ASSERT_EQ(p_.dev->PostSend(p_.qp[0], wr), 0);
    const uint64_t a = std::max(to, shared_begin), b = std::min(to + writes[i].len, shared_end);
    shared_bytes += b > a ? b - a : 0;
  }
  const auto c = Poll(writes.size(), std::chrono::milliseconds(5000));
  ASSERT_EQ(c.size(), writes.size());
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].status, WcStatus::kSuccess) << i;
    EXPECT_EQ(c[i].wr_id, uint64_t(i));
  }
  // Every shared byte went directly: placed, or whole WRITEs done directly
  // when nothing was in flight; the first WRITE is always placed, and so
  // is every WRITE_WITH_IMM (never done wholly directly).
  const EngineStats stats1 = p_.dev->stats();
  const uint64_t placed = stats1.shm_placed_write_ops - stats0.shm_placed_write_ops;
  EXPECT_GE(placed, mode == Mode::kPlacedImm ? PlacedImmCount() : 1u);
  EXPECT_EQ(placed + stats1.shm_direct_write_ops - stats0.shm_direct_write_ops, writes.size());
  EXPECT_EQ(stats1.shm_placed_write_bytes - stats0.shm_placed_write_bytes +
                stats1.shm_direct_write_bytes - stats0.shm_direct_write_bytes,
            shared_bytes);
  // Empty packets in a row went as runs: far fewer packets than PMTUs.
  EXPECT_LE(stats1.tx_packets - stats0.tx_packets, packet_bound) << pmtus << " PMTUs";
  EXPECT_EQ(Verify(), 0);
}

TEST_F(ShmMultiProcessTest, BadWritesFailWithRemoteAccessErrorAndTouchNothing) {
  Start(Mode::kErrors);
  const EngineStats stats0 = p_.dev->stats();
  Sge s = Local(0, 4096);
  // QP 0: beyond the MR's end (starts inside, runs 1 byte past it).
  ASSERT_EQ(p_.dev->PostSend(p_.qp[0], MakeWr(WrOpcode::kRdmaWrite, 10, {&s, 1},
                                              peer_.addr[0] + kBig - 4095, peer_.rkey[0])),
            0);
  // QP 1: an MR registered without REMOTE_WRITE.
  ASSERT_EQ(p_.dev->PostSend(p_.qp[1], MakeWr(WrOpcode::kRdmaWrite, 11, {&s, 1}, peer_.addr[1],
                                              peer_.rkey[1])),
            0);
  // QP 2: an MR the target has deregistered.
  ASSERT_EQ(p_.dev->PostSend(p_.qp[2], MakeWr(WrOpcode::kRdmaWrite, 12, {&s, 1}, peer_.addr[2],
                                              peer_.rkey[2])),
            0);
  auto c = Poll(3, std::chrono::milliseconds(5000));
  ASSERT_EQ(c.size(), 3u);
  for (const Completion& x : c) EXPECT_EQ(x.status, WcStatus::kRemAccessErr) << x.wr_id;
  // Refused ones went through the ring as packets: no direct operation counted.
  const EngineStats stats1 = p_.dev->stats();
  EXPECT_EQ(stats1.shm_direct_ops, stats0.shm_direct_ops);
  EXPECT_EQ(stats1.shm_direct_write_ops, stats0.shm_direct_write_ops);
  EXPECT_EQ(stats1.shm_direct_write_bytes, stats0.shm_direct_write_bytes);
  EXPECT_EQ(Verify(), 0);
}

// SENDs go through the ring and need the target's engine to acknowledge:
// a target that dies, or stops (SIGSTOP: its engine reads nothing more,
// so unread packets are not "merely late", Transport::DeliveryPending),
// `signal` mid-transfer leaves the requester with RETRY_EXC_ERR within its
// retry budget, never a hang.
void ShmMultiProcessTest::SignalledTargetEndsSendsWithRetryExceeded(int signal) {
  Start(Mode::kKill);
  int posted = 0, done = 0;
  bool signalled = false;
  WcStatus first_error = WcStatus::kSuccess;
  const auto start = std::chrono::steady_clock::now();
  auto signalled_at = start;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    if (posted - done < 64 && posted < 400) {
      Sge s = Local(0, 4096);
      if (p_.dev->PostSend(p_.qp[0], MakeWr(WrOpcode::kSend, posted, {&s, 1})) == 0) ++posted;
    }
    if (!signalled && done >= 50) {
      ASSERT_EQ(kill(child_, signal), 0);  // mid-transfer
      if (signal == SIGSTOP) {
        // Stopped for sure before the clock starts (a signal is delivered
        // asynchronously; the target's engine may run on meanwhile).
        int status = 0;
        ASSERT_EQ(waitpid(child_, &status, WUNTRACED), child_);
        ASSERT_TRUE(WIFSTOPPED(status));
      }
      signalled = true;
      signalled_at = std::chrono::steady_clock::now();
    }
    Completion wc[16];
    const int got = p_.dev->PollCq(p_.cq, 16, wc);
    for (int i = 0; i < got; ++i) {
      ++done;
      if (wc[i].status != WcStatus::kSuccess && first_error == WcStatus::kSuccess)
        first_error = wc[i].status;
    }
    if (first_error != WcStatus::kSuccess) break;
  }
  ASSERT_TRUE(signalled);
  EXPECT_EQ(first_error, WcStatus::kRetryExcErr);
  // retry_cnt 3 at 16.8 ms each (a stopped reader one period more): well
  // under a second, never a hang.
  EXPECT_LT(std::chrono::steady_clock::now() - signalled_at, std::chrono::seconds(2));
  if (signal == SIGKILL) {
    waitpid(child_, nullptr, 0);
    child_ = -1;
  }  // (a stopped target is killed by TearDown)
}

TEST_F(ShmMultiProcessTest, KilledTargetGivesErrorCompletionsWithinTheRetryBudget) {
  SignalledTargetEndsSendsWithRetryExceeded(SIGKILL);
}

TEST_F(ShmMultiProcessTest, StoppedTargetGivesErrorCompletionsWithinTheRetryBudget) {
  SignalledTargetEndsSendsWithRetryExceeded(SIGSTOP);
}

}  // namespace
}  // namespace softrnic::engine::testing
