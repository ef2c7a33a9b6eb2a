// Test fixture: two softrnic devices in one process, each with its own
// loopback address, and connected QP pairs between them. Traffic crosses
// real UDP sockets through the kernel.
#pragma once

#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/device/device.h"
#include "engine/engine.h"
#include "engine/observe/stats.h"
#include "faults/scenario.h"

namespace softrnic::engine::testing {

// Loopback addresses unique to this test process (tests run in parallel).
inline std::string TestAddress(int which) {
  const pid_t pid = getpid();
  return "127." + std::to_string(200 + which) + "." + std::to_string((pid >> 8) & 0xff) + "." +
         std::to_string(pid & 0xff);
}

// UDP port every test device of this process uses (each on its own address).
inline uint16_t TestPort() { return static_cast<uint16_t>(20000 + (getpid() % 20000)); }

// The environment's settings (so the suite runs over either transport, see
// tests/CMakeLists.txt), bound to test device `which`'s address and port,
// with `faults`. Tests that need other settings change the result.
// The faults these tests inject: the knobs of the old SOFTRNIC_FAULTS, on
// the packets a device sends, as a one-rule fault scenario
// (faults/scenario.h), reordered packets passed after the next one.
struct TestFaults {
  double drop = 0, duplicate = 0, reorder = 0, corrupt = 0;
  uint64_t seed = 1;
  faults::Scenario ToScenario() const {
    faults::Scenario s;
    s.seed = seed;
    if (drop == 0 && duplicate == 0 && reorder == 0 && corrupt == 0) return s;
    faults::Rule r;
    r.name = "test faults";
    r.match.direction = faults::Direction::kOut;
    r.action.drop = drop;
    r.action.duplicate = duplicate;
    r.action.reorder = reorder;
    r.action.corrupt = corrupt;
    s.rules.push_back(r);
    return s;
  }
};

inline EngineConfig TestConfig(int which, TestFaults faults = {}) {
  EngineConfig config = EngineConfig::FromProcess();
  config.udp.bind_addresses = {TestAddress(which)};
  config.udp.port = TestPort();
  config.udp.faults = faults.ToScenario();
  return config;
}

inline std::shared_ptr<Device> MakeDevice(const EngineConfig& config) {
  std::string error;
  auto dev = Device::Create(config, &error);
  EXPECT_NE(dev, nullptr) << error;
  return dev;
}

inline std::shared_ptr<Device> MakeDevice(int which, TestFaults faults = {}) {
  return MakeDevice(TestConfig(which, faults));
}

struct Side {
  // Declared first so it is destroyed last: the device (and its progress
  // thread, which may still be sending from registered memory) goes first.
  std::vector<uint8_t> buf;
  std::shared_ptr<Device> dev;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  Mr* mr = nullptr;
};

struct QpOptions {
  QpType type = QpType::kRc;
  Mtu mtu = Mtu::k1024;
  uint32_t psn = 0;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;
  uint32_t access = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
  uint32_t max_wr = 256;
  size_t buf_size = 1 << 21;
  uint32_t max_sge = 4;
  uint32_t max_inline = 64;
  uint32_t cq_entries = 4096;
  // QP access flags; kUseMrAccess = the MR's remote rights (access above).
  static constexpr uint32_t kUseMrAccess = ~0u;
  uint32_t qp_access = kUseMrAccess;
  uint8_t max_rd_atomic = 16;
};

// channel: the CQ's completion channel (null: none).
inline void SetupSide(Side& s, std::shared_ptr<Device> dev, const QpOptions& o,
                      CompletionChannel* channel = nullptr) {
  s.dev = std::move(dev);
  ASSERT_EQ(s.dev->AllocPd(nullptr, &s.pd), 0);
  ASSERT_EQ(s.dev->CreateCq(o.cq_entries, channel, &s, &s.cq), 0);  // handle: the Side
  QpCaps caps{o.max_wr, o.max_wr, o.max_sge, o.max_sge, o.max_inline};
  ASSERT_EQ(s.dev->CreateQp(s.pd, o.type, s.cq, s.cq, nullptr, &caps, false, &s, &s.qp), 0);
  s.buf.assign(o.buf_size, 0);
  ASSERT_EQ(s.dev->RegMr(s.pd, s.buf.data(), s.buf.size(), reinterpret_cast<uint64_t>(s.buf.data()),
                         o.access, nullptr, &s.mr),
            0);
}

inline void Connect(Side& a, const Side& b, const QpOptions& o) {
  QpAttr attr;
  attr.qp_state = QpState::kInit;
  attr.port_num = 1;
  attr.pkey_index = 0;
  attr.qp_access_flags = o.qp_access == QpOptions::kUseMrAccess ? (o.access & ~uint32_t{kLocalWrite})
                                                                 : o.qp_access;
  attr.qkey = 0x11111111;
  uint32_t mask = kQpState | kQpPkeyIndex | kQpPort |
                  (o.type == QpType::kUd ? uint32_t{kQpQkey} : uint32_t{kQpAccessFlags});
  ASSERT_EQ(a.dev->ModifyQp(a.qp, attr, mask), 0);
  attr.qp_state = QpState::kRtr;
  attr.path_mtu = o.mtu;
  attr.dest_qp_num = b.dev->QpNum(b.qp);
  attr.rq_psn = o.psn;
  attr.max_dest_rd_atomic = o.max_rd_atomic;
  attr.min_rnr_timer = o.min_rnr_timer;
  attr.ah_attr.is_global = true;
  attr.ah_attr.dgid = b.dev->gids()[0];
  attr.ah_attr.sgid_index = 0;
  mask = kQpState;
  if (o.type == QpType::kRc)
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
  if (o.type == QpType::kUc) mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
  ASSERT_EQ(a.dev->ModifyQp(a.qp, attr, mask), 0);
  attr.qp_state = QpState::kRts;
  attr.sq_psn = o.psn;
  attr.timeout = o.timeout;
  attr.retry_cnt = o.retry_cnt;
  attr.rnr_retry = o.rnr_retry;
  attr.max_rd_atomic = o.max_rd_atomic;
  mask = kQpState | kQpSqPsn;
  if (o.type == QpType::kRc) mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  ASSERT_EQ(a.dev->ModifyQp(a.qp, attr, mask), 0);
}

// Local ACK Timeout for tests on lossy links: 14 (~67 ms, perftest's).
// Tail losses are recovered by the selective-repeat probe well before it,
// so it costs these tests no time; it only has to outlast a peer that the
// machine does not schedule. At 10 (~4 ms) seven timeouts in a row ran out
// under CI load with ASan now and then (CongestionTest, MultiQpLossTest:
// docs/loss.md section 3) and failed the QP with RETRY_EXC_ERR.
inline constexpr uint8_t kLossyLinkTimeout = 14;

// Polls until n completions arrive or the deadline passes.
inline std::vector<Completion> PollN(Side& s, size_t n, std::chrono::milliseconds limit =
                                                            std::chrono::milliseconds(20000)) {
  std::vector<Completion> out;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  Completion wc[16];
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    const int got = s.dev->PollCq(s.cq, 16, wc);
    for (int i = 0; i < got; ++i) out.push_back(wc[i]);
  }
  return out;
}

inline Sge SgeOf(const Side& s, size_t offset, uint32_t length) {
  return Sge{reinterpret_cast<uint64_t>(s.buf.data()) + offset, length, s.dev->MrLkey(s.mr)};
}

inline uint64_t Addr(const Side& s, size_t offset) {
  return reinterpret_cast<uint64_t>(s.buf.data()) + offset;
}

inline void FillPattern(std::span<uint8_t> b, size_t offset, size_t len, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < len; ++i) {
    x = x * 1103515245u + 12345u;
    b[offset + i] = static_cast<uint8_t>(x >> 16);
  }
}

// A snapshot of the engine's counters.
inline EngineStats StatsOf(Device& d) { return d.stats(); }
// The transport's counters (ICRC errors, injected faults).
inline transport::TransportCounters TransportCountersOf(Device& d) {
  return d.transport_counters();
}

// One-sided operations this device executed directly on a same-host peer's
// memory (shared-memory transport), which the peer's engine never sees.
inline uint64_t DirectOpsOf(Device& d) {
  std::lock_guard lock(d.engine().mu_);
  const ShmDirect* s = d.engine().shm_direct();
  return s ? s->direct_ops : 0;
}

// Waits until pred() holds or the limit passes; returns pred().
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    usleep(200);
  }
  return pred();
}

// Polls for `window` and returns whatever arrived (to check that nothing does).
inline std::vector<Completion> PollFor(Side& s, std::chrono::milliseconds window) {
  std::vector<Completion> out;
  const auto deadline = std::chrono::steady_clock::now() + window;
  Completion wc[16];
  while (std::chrono::steady_clock::now() < deadline) {
    const int got = s.dev->PollCq(s.cq, 16, wc);
    for (int i = 0; i < got; ++i) out.push_back(wc[i]);
    if (got == 0) usleep(100);
  }
  return out;
}

// Every async event queued on the device now (async_fd is made non-blocking).
inline std::vector<AsyncEvent> DrainAsync(Device& d) {
  const int fd = d.async_fd();
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::vector<AsyncEvent> out;
  AsyncEvent ev;
  while (d.GetAsyncEvent(&ev) == 0) out.push_back(ev);
  return out;
}

// Builds a send WR.
inline SendWr MakeWr(WrOpcode op, uint64_t wr_id, std::span<const Sge> sges, uint64_t remote_addr = 0,
                     uint32_t rkey = 0, uint32_t flags = kSignaled) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.sges = sges;
  wr.remote_addr = remote_addr;
  wr.rkey = rkey;
  return wr;
}

// The checks below read memory the engine wrote before a completion; between
// two devices of one process that ordering travels through a shared-memory
// ring mapped at two addresses, which ThreadSanitizer cannot pair, so it
// would report (and, suppressed, slowly re-check) every byte. They are not
// instrumented: what they read is the engine's DMA, by design
// (tests/tsan.supp).
#define SOFTRNIC_NO_TSAN __attribute__((no_sanitize("thread")))

// Index of the first byte where [a, a+n) and [b, b+n) differ, or -1.
SOFTRNIC_NO_TSAN inline long FirstDiff(const uint8_t* a, const uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<long>(i);
  return -1;
}

// True if every byte of [p, p+n) equals v.
SOFTRNIC_NO_TSAN inline bool AllBytes(const uint8_t* p, size_t n, uint8_t v) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != v) return false;
  return true;
}

// A signalled WRITE of `len` pattern bytes (seed) from the start of `from`'s
// buffer to `to`'s at offset `at`; checks its completion and the bytes.
inline void WriteAndCheck(Side& from, Side& to, size_t at, uint32_t len, uint32_t seed) {
  FillPattern(from.buf, 0, len, seed);
  Sge sge = SgeOf(from, 0, len);
  ASSERT_EQ(from.dev->PostSend(from.qp, MakeWr(WrOpcode::kRdmaWrite, seed, {&sge, 1},
                                                Addr(to, at), to.dev->MrRkey(to.mr))),
            0);
  const auto c = PollN(from, 1, std::chrono::milliseconds(10000));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(FirstDiff(from.buf.data(), to.buf.data() + at, len), -1);
}

// Whether this run of the suite uses the UDP transport (its .udp variant).
inline bool TransportIsUdp() {
  const char* t = std::getenv("SOFTRNIC_TRANSPORT");
  return t != nullptr && std::strcmp(t, "udp") == 0;
}

class RcPairTest : public ::testing::Test {
 protected:
  void Open(const QpOptions& o, TestFaults faults_a = {},
            TestFaults faults_b = {}) {
    EngineConfig config_a = TestConfig(0, faults_a), config_b = TestConfig(1, faults_b);
    Configure(config_a);
    Configure(config_b);
    OpenWith(o, config_a, config_b);
  }
  // A fixture's settings for both devices Open makes (instead of setenv).
  virtual void Configure(EngineConfig& /*config*/) {}
  // The same with devices of these settings (TestConfig(0) and (1), changed).
  void OpenWith(const QpOptions& o, const EngineConfig& config_a, const EngineConfig& config_b) {
    opts_ = o;
    SetupSide(a_, MakeDevice(config_a), o);
    SetupSide(b_, MakeDevice(config_b), o);
    Connect(a_, b_, o);
    Connect(b_, a_, o);
  }
  QpOptions opts_;
  Side a_, b_;
};

}  // namespace softrnic::engine::testing
