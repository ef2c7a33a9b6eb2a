// libFuzzer target: the engine's receive path (dispatch, responder,
// completer) driven by a hostile peer, against a live device.
//
// Setup (once): Device::Create bound to 127.0.0.1 (port 0), its progress
// thread stopped and its UDP transport replaced by a RecordingTransport
// (engine_injector.h); two PDs; memory regions with every mix of rights laid
// out in one arena with guard pages between them; one CQ; an RC QP with its
// own RQ, an RC QP on an SRQ, a UC QP and a UD QP.
//
// Per input: every QP goes RESET -> INIT -> RTR -> RTS connected to a fake
// peer (GID ::ffff:10.255.0.2, fixed QPNs and PSNs, the RC one near the PSN
// wrap), receive WQEs are posted, and the RC QPs post a SEND, an RDMA READ,
// two atomics and an RDMA WRITE so that responses have something to match.
// Then the input is played as a sequence of records:
//
//   [ctl][aux][sel][len lo][len hi][len bytes: one packet, BTH .. ICRC]
//
//   ctl bits 0-1  target QP: 0 RC, 1 RC on SRQ, 2 UC, 3 UD
//   ctl bit 2     keep the packet's own DestQP (else patched to the target)
//   ctl bit 3     PSN = expected PSN + (int8)aux (the responder's ePSN for
//                 requests, the completer's oldest unacked PSN for responses)
//   ctl bit 4     RETH / AtomicETH / IETH: rkey of region (sel % 11; 10 =
//                 keep the packet's), VA = region base + (int16)(VA low bits)
//   ctl bit 5     canonical BTH: P_Key 0xFFFF, TVer 0; UD: the QP's Q_Key
//   ctl bit 6     arrive from a stranger's GID instead of the peer's
//   ctl bit 7     after the packet, fire every timer (1 hour ahead)
//   sel bit 7     with target 3 (UD): arrive for the multicast group the UD
//                 QP is attached to, DestQP the multicast QPN 0xFFFFFF
//                 (unless bit 2 keeps the packet's own)
//   sel bit 6     arrive as if through a same-host shared-memory ring, where
//                 softrnic's placement bits are honoured (wire::Bth::placed)
//   len 0         no packet: just fire the timers
//
// Invariants checked after each input (abort on violation):
//  - guard pages between regions and the two regions nothing may touch (a
//    LOCAL_WRITE-only region and an all-rights region of the other PD) are
//    ASan-poisoned, so any access is reported where it happens; the guards
//    are also compared with their fill pattern;
//  - a region without REMOTE_WRITE (or REMOTE_ATOMIC) is unchanged except
//    where the engine may legitimately write it locally: receive buffers
//    only inside the posted SGEs, READ / atomic result buffers only inside
//    the requesting WQE's SGEs;
//  - receive completions never report more bytes than the WQE could hold;
//  - a send-side completion with SUCCESS on the RC QP implies the peer
//    acknowledged it: some response the fuzzer injected from the peer's
//    GID to that QP (ACK/atomic ACK/READ response: its PSN; NAK, RNR NAK,
//    SACK: its PSN - 1) reaches the WQE's last PSN. A SACK's bitmap, a
//    stranger's packet or a packet for another QP never completes anything
//    (security review: "a completion with SUCCESS implies the responder
//    executed it").
#include <sanitizer/asan_interface.h>
#include <arpa/inet.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/device/device.h"
#include "engine/engine.h"
#include "engine/memory/mr_table.h"
#include "engine/queues/queues.h"
#include "fuzz/engine_injector.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace {

using namespace softrnic;
using engine::Access;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "responder_fuzzer: invariant violated: %s\n", what.c_str());
  std::abort();
}

constexpr size_t kGuard = 4096;
constexpr uint32_t kPeerQpn[4] = {0x0000A1, 0x0000A2, 0x0000A3, 0x0000A4};
constexpr uint32_t kRcRqPsn = 0xFFFFF8;  // near the 24-bit wrap
constexpr uint32_t kRcSqPsn = 0xFFFFFA;
constexpr uint32_t kUcRqPsn = 0x000010;
constexpr uint32_t kQkey = 0x11111111;
constexpr size_t kMaxPacket = 4096 + 128;

enum class Policy { kMayChange, kChecked, kPoisoned };

struct Region {
  const char* name;
  size_t size;
  uint32_t access;
  int pd;  // 0 or 1
  bool zero_based;
  Policy policy;
  // Filled in at setup.
  uint8_t* addr = nullptr;
  engine::Mr* mr = nullptr;
  std::vector<uint8_t> pattern;
  // (offset, length) ranges the engine may write this iteration.
  std::vector<std::pair<size_t, size_t>> writable;
};

constexpr uint32_t kAll = Access::kLocalWrite | Access::kRemoteWrite | Access::kRemoteRead |
                          Access::kRemoteAtomic;

enum RegionId { kRw, kRo, kWo, kAtomic, kLocal, kRecv, kSink, kSrc, kOtherPd, kZeroBased, kNumRegions };

struct Fixture {
  std::shared_ptr<engine::Device> dev;
  fuzz::RecordingTransport* tx = nullptr;
  std::vector<Region> regions;
  uint8_t* arena = nullptr;
  size_t arena_size = 0;
  std::vector<std::pair<uint8_t*, size_t>> guards;
  engine::Pd* pd[2] = {};
  engine::Cq* cq = nullptr;
  engine::Srq* srq = nullptr;
  engine::Ah* ah = nullptr;
  engine::Qp* qp[4] = {};  // RC, RC+SRQ, UC, UD
  transport::Endpoint peer, stranger;
  transport::Gid group;  // the UD QP's multicast group
  // Largest receive WQE, for the byte_len check.
  uint32_t max_recv_bytes = 0;
  uint64_t recv_cursor = 0;
  bool verbose = false;
  // Highest PSN of QP 0's send queue the peer acknowledged this input, as
  // PsnDiff from kRcSqPsn (-1: nothing).
  int32_t rc_acked_through = -1;
};

Fixture* g;

void Check(int rc, const char* what) {
  if (rc != 0) {
    std::fprintf(stderr, "responder_fuzzer: setup failed: %s: %d\n", what, rc);
    std::abort();
  }
}

uint8_t PatternByte(int region, size_t i) {
  return static_cast<uint8_t>(region * 37 + i * 7 + (i >> 8));
}

void Poison(uint8_t* p, size_t n) { ASAN_POISON_MEMORY_REGION(p, n); }
void Unpoison(uint8_t* p, size_t n) { ASAN_UNPOISON_MEMORY_REGION(p, n); }

void Setup() {
  g = new Fixture;
  g->verbose = std::getenv("RESPONDER_FUZZER_VERBOSE") != nullptr;
  // The defaults, whatever the environment says (reproducible runs), and no
  // /dev/shm stats file for the fuzzer's device.
  engine::EngineConfig config;
  config.stats_shm = false;
  config.udp.bind_addresses = {"127.0.0.1"};
  config.udp.port = 0;  // any free port: the socket is never used
  std::string error;
  g->dev = engine::Device::Create(config, &error);
  if (!g->dev) {
    std::fprintf(stderr, "responder_fuzzer: Device::Create: %s\n", error.c_str());
    std::abort();
  }
  g->tx = fuzz::DetachTransport(*g->dev);
  engine::Device& d = *g->dev;

  g->peer.gid = transport::Gid::FromIpv4(inet_addr("10.255.0.2"));
  g->stranger.gid = transport::Gid::FromIpv4(inet_addr("10.255.0.3"));

  Check(d.AllocPd(nullptr, &g->pd[0]), "AllocPd");
  Check(d.AllocPd(nullptr, &g->pd[1]), "AllocPd 2");

  g->regions = {
      {"rw", 8192, kAll, 0, false, Policy::kMayChange},
      {"ro", 4096, Access::kRemoteRead, 0, false, Policy::kChecked},
      {"wo", 4096, Access::kLocalWrite | Access::kRemoteWrite, 0, false, Policy::kMayChange},
      {"atomic", 64, Access::kLocalWrite | Access::kRemoteAtomic, 0, false, Policy::kMayChange},
      {"local", 4096, Access::kLocalWrite, 0, false, Policy::kPoisoned},
      {"recv", 16384, Access::kLocalWrite, 0, false, Policy::kChecked},
      {"sink", 8192, Access::kLocalWrite, 0, false, Policy::kChecked},
      {"src", 8192, 0, 0, false, Policy::kChecked},
      {"other_pd", 4096, kAll, 1, false, Policy::kPoisoned},
      {"zero_based", 4096, kAll | Access::kZeroBased, 0, true, Policy::kMayChange},
  };
  // Arena: guard | region | guard | region | ... | guard, page aligned.
  size_t total = kGuard;
  for (const Region& r : g->regions) total += (r.size + 4095) / 4096 * 4096 + kGuard;
  g->arena_size = total;
  g->arena = static_cast<uint8_t*>(std::aligned_alloc(4096, total));
  size_t off = 0;
  for (size_t i = 0; i <= g->regions.size(); ++i) {
    uint8_t* guard = g->arena + off;
    std::memset(guard, 0xE7, kGuard);
    g->guards.emplace_back(guard, kGuard);
    off += kGuard;
    if (i == g->regions.size()) break;
    Region& r = g->regions[i];
    r.addr = g->arena + off;
    // Slack after a region up to the page boundary is guard too.
    const size_t span = (r.size + 4095) / 4096 * 4096;
    if (span > r.size) {
      std::memset(r.addr + r.size, 0xE7, span - r.size);
      g->guards.emplace_back(r.addr + r.size, span - r.size);
    }
    off += span;
    r.pattern.resize(r.size);
    for (size_t j = 0; j < r.size; ++j) r.pattern[j] = PatternByte(static_cast<int>(i), j);
    std::memcpy(r.addr, r.pattern.data(), r.size);
    Check(d.RegMr(g->pd[r.pd], r.addr, r.size, reinterpret_cast<uint64_t>(r.addr), r.access,
                  nullptr, &r.mr),
          r.name);
  }
  for (auto& [p, n] : g->guards) Poison(p, n);
  for (Region& r : g->regions)
    if (r.policy == Policy::kPoisoned) Poison(r.addr, r.size);

  Check(d.CreateCq(4096, nullptr, nullptr, &g->cq), "CreateCq");
  engine::SrqAttr sattr;
  sattr.max_wr = 8;
  sattr.max_sge = 2;
  Check(d.CreateSrq(g->pd[0], sattr, nullptr, &g->srq), "CreateSrq");
  engine::AddressVector av;
  av.is_global = true;
  av.dgid = g->peer.gid;
  Check(d.CreateAh(g->pd[0], av, nullptr, &g->ah), "CreateAh");

  const engine::QpType types[4] = {engine::QpType::kRc, engine::QpType::kRc, engine::QpType::kUc,
                                   engine::QpType::kUd};
  for (int i = 0; i < 4; ++i) {
    engine::QpCaps caps;
    caps.max_send_wr = 16;
    caps.max_recv_wr = 8;
    caps.max_send_sge = 2;
    caps.max_recv_sge = 2;
    caps.max_inline_data = 64;
    Check(d.CreateQp(g->pd[0], types[i], g->cq, g->cq, i == 1 ? g->srq : nullptr, &caps, false,
                     nullptr, &g->qp[i]),
          "CreateQp");
  }
  // The UD QP hears a multicast group too (sel bit 7 delivers to it).
  g->group = transport::Gid::FromIpv4(inet_addr("239.255.0.1"));
  Check(d.AttachMulticast(g->qp[3], g->group), "AttachMulticast");
}

// Marks [p, p+n) of region `id` as legitimately writable this iteration.
void AllowWrite(RegionId id, uint64_t addr, uint64_t n) {
  Region& r = g->regions[id];
  r.writable.emplace_back(addr - reinterpret_cast<uint64_t>(r.addr), n);
}

engine::Sge RegionSge(RegionId id, uint64_t offset, uint32_t length, bool writable) {
  Region& r = g->regions[id];
  engine::Sge s;
  s.addr = reinterpret_cast<uint64_t>(r.addr) + offset;
  s.length = length;
  s.lkey = g->dev->MrLkey(r.mr);
  if (writable) AllowWrite(id, s.addr, length);
  return s;
}

void BringUp(int i) {
  engine::Device& d = *g->dev;
  engine::Qp* qp = g->qp[i];
  const bool ud = i == 3, uc = i == 2;
  engine::QpAttr a;
  a.qp_state = engine::QpState::kReset;
  Check(d.ModifyQp(qp, a, engine::kQpState), "to RESET");

  a.qp_state = engine::QpState::kInit;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qkey = kQkey;
  // The SRQ QP grants REMOTE_WRITE only: READ and atomics must be refused.
  a.qp_access_flags = i == 1 ? uint32_t{Access::kRemoteWrite}
                             : uint32_t{Access::kRemoteWrite | Access::kRemoteRead |
                                        Access::kRemoteAtomic};
  uint32_t mask = engine::kQpState | engine::kQpPkeyIndex | engine::kQpPort |
                  (ud ? engine::kQpQkey : engine::kQpAccessFlags);
  if (uc) a.qp_access_flags = Access::kRemoteWrite;
  Check(d.ModifyQp(qp, a, mask), "to INIT");

  a.qp_state = engine::QpState::kRtr;
  mask = engine::kQpState;
  if (!ud) {
    a.ah_attr.is_global = true;
    a.ah_attr.dgid = g->peer.gid;
    a.path_mtu = engine::Mtu::k1024;
    a.dest_qp_num = kPeerQpn[i];
    a.rq_psn = uc ? kUcRqPsn : kRcRqPsn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    mask |= engine::kQpAv | engine::kQpPathMtu | engine::kQpDestQpn | engine::kQpRqPsn;
    if (!uc) mask |= engine::kQpMaxDestRdAtomic | engine::kQpMinRnrTimer;
  }
  Check(d.ModifyQp(qp, a, mask), "to RTR");

  a.qp_state = engine::QpState::kRts;
  a.sq_psn = uc ? 0x20 : kRcSqPsn;
  a.timeout = 1;
  a.retry_cnt = 2;
  a.rnr_retry = 1;
  a.max_rd_atomic = 4;
  mask = engine::kQpState | engine::kQpSqPsn;
  if (!ud && !uc)
    mask |= engine::kQpTimeout | engine::kQpRetryCnt | engine::kQpRnrRetry | engine::kQpMaxQpRdAtomic;
  Check(d.ModifyQp(qp, a, mask), "to RTS");
}

// Posts a two-SGE receive WQE: the SGEs are separated by a gap that must
// stay untouched.
void PostRecv(int i, uint32_t len0, uint32_t len1) {
  const uint64_t need = len0 + 64 + len1 + 64;
  if (g->recv_cursor + need > g->regions[kRecv].size) g->recv_cursor = 0;
  const uint64_t at = g->recv_cursor;
  g->recv_cursor += need;
  engine::Sge s[2] = {RegionSge(kRecv, at, len0, true), RegionSge(kRecv, at + len0 + 64, len1, true)};
  engine::RecvWr wr;
  wr.wr_id = 0x5000 + at;
  wr.sges = s;
  g->max_recv_bytes = std::max(g->max_recv_bytes, len0 + len1);
  if (i == 1) {
    g->dev->PostSrqRecv(g->srq, wr);  // ENOMEM once full: fine
  } else {
    Check(g->dev->PostRecv(g->qp[i], wr), "PostRecv");
  }
}

void PostRequests() {
  engine::Device& d = *g->dev;
  engine::Qp* rc = g->qp[0];
  {
    engine::Sge s = RegionSge(kSrc, 0, 100, false);
    engine::SendWr wr;
    wr.wr_id = 1;
    wr.opcode = engine::WrOpcode::kSend;
    wr.send_flags = engine::kSignaled;
    wr.sges = {&s, 1};
    Check(d.PostSend(rc, wr), "post SEND");
  }
  {
    engine::Sge s[2] = {RegionSge(kSink, 0, 1500, true), RegionSge(kSink, 1600, 1000, true)};
    engine::SendWr wr;
    wr.wr_id = 2;
    wr.opcode = engine::WrOpcode::kRdmaRead;
    wr.send_flags = engine::kSignaled;
    wr.sges = s;
    wr.remote_addr = 0x10000;
    wr.rkey = 0x1234;
    Check(d.PostSend(rc, wr), "post READ");
  }
  {
    engine::Sge s = RegionSge(kSink, 4096, 8, true);
    engine::SendWr wr;
    wr.wr_id = 3;
    wr.opcode = engine::WrOpcode::kAtomicFetchAdd;
    wr.send_flags = engine::kSignaled;
    wr.sges = {&s, 1};
    wr.remote_addr = 0x20000;
    wr.rkey = 0x1235;
    wr.compare_add = 5;
    Check(d.PostSend(rc, wr), "post FETCH_ADD");
  }
  {
    engine::Sge s = RegionSge(kSrc, 1000, 1500, false);
    engine::SendWr wr;
    wr.wr_id = 4;
    wr.opcode = engine::WrOpcode::kRdmaWrite;
    wr.send_flags = engine::kSignaled;
    wr.sges = {&s, 1};
    wr.remote_addr = 0x30000;
    wr.rkey = 0x1236;
    Check(d.PostSend(rc, wr), "post WRITE");
  }
  {
    engine::Sge s = RegionSge(kSink, 4160, 8, true);
    engine::SendWr wr;
    wr.wr_id = 5;
    wr.opcode = engine::WrOpcode::kAtomicCmpSwp;
    wr.send_flags = engine::kSignaled;
    wr.sges = {&s, 1};
    wr.remote_addr = 0x20008;
    wr.rkey = 0x1235;
    wr.compare_add = 1;
    wr.swap = 2;
    Check(d.PostSend(rc, wr), "post CMP_SWP");
  }
  {
    engine::Sge s = RegionSge(kSrc, 4096, 2000, false);
    engine::SendWr wr;
    wr.wr_id = 6;
    wr.opcode = engine::WrOpcode::kSendWithImm;
    wr.imm_data = 0x01020304;
    wr.sges = {&s, 1};
    Check(d.PostSend(g->qp[1], wr), "post SEND on SRQ QP");
  }
  {
    engine::Sge s = RegionSge(kSrc, 0, 64, false);
    engine::SendWr wr;
    wr.wr_id = 7;
    wr.opcode = engine::WrOpcode::kSend;
    wr.sges = {&s, 1};
    wr.ah = g->ah;
    wr.remote_qpn = 0xA4;
    wr.remote_qkey = kQkey;
    Check(d.PostSend(g->qp[3], wr), "post UD SEND");
  }
}

// The acknowledgement invariant (header comment). Called with the engine
// lock held; QP 0's WQEs keep their PSNs in the send queue after completion
// (nothing is posted during an input).
void CheckSendCompletion(const engine::Completion& c) {
  engine::Qp* rc = g->qp[0];
  if (c.status != engine::WcStatus::kSuccess || c.qp_num != rc->qpn) return;
  if (c.opcode == engine::WcOpcode::kRecv || c.opcode == engine::WcOpcode::kRecvRdmaWithImm) return;
  for (uint64_t k = 0; k < rc->sq.size(); ++k) {
    const engine::SendWqe& w = rc->sq[k];
    if (w.wr_id != c.wr_id || !w.started || w.npackets == 0) continue;
    const uint32_t last = wire::PsnAdd(w.first_psn, w.npackets - 1);
    const int32_t last_rel = wire::PsnDiff(last, kRcSqPsn);
    if (last_rel > g->rc_acked_through)
      Fail("wr_id " + std::to_string(c.wr_id) + " completed with SUCCESS through PSN offset " +
           std::to_string(last_rel) + " but the peer acknowledged only through " +
           std::to_string(g->rc_acked_through));
    return;
  }
}

// What a response packet the fuzzer is about to inject acknowledges (see
// the invariant); only packets to QP 0 from the peer count.
void NoteAcknowledgement(const uint8_t* pkt, uint32_t len, bool from_stranger) {
  if (from_stranger || len < sizeof(wire::Bth)) return;
  wire::Bth bth;
  std::memcpy(bth.b.data(), pkt, sizeof(bth));
  if (bth.dest_qp() != g->qp[0]->qpn) return;
  const uint8_t opcode = bth.opcode();
  const wire::OpcodeInfo& info = wire::GetOpcodeInfo(opcode);
  if (!info.valid() || !info.has(wire::kIsResponse)) return;
  uint32_t through = bth.psn();
  if (info.aeth_offset && info.aeth_offset + sizeof(wire::Aeth) <= len) {
    const wire::AckKind kind = wire::SyndromeKind(pkt[info.aeth_offset]);
    if (kind != wire::AckKind::kAck) through = wire::PsnAdd(through, wire::kPsnMask);  // psn - 1
  }
  g->rc_acked_through = std::max(g->rc_acked_through, wire::PsnDiff(through, kRcSqPsn));
}

void DrainCq(bool check) {
  engine::Engine& e = g->dev->engine();
  std::lock_guard<engine::SpinMutex> lock(e.mu_);
  engine::Completion c[64];
  for (;;) {
    const int n = g->cq->Poll(64, c);
    for (int i = 0; i < n && check && g->verbose; ++i)
      std::fprintf(stderr, "  cqe qp 0x%x wr_id 0x%llx status %d opcode %d byte_len %u\n", c[i].qp_num,
                   static_cast<unsigned long long>(c[i].wr_id), static_cast<int>(c[i].status),
                   static_cast<int>(c[i].opcode), c[i].byte_len);
    for (int i = 0; i < n && check; ++i) CheckSendCompletion(c[i]);
    for (int i = 0; i < n && check; ++i) {
      if (c[i].status == engine::WcStatus::kSuccess && c[i].opcode == engine::WcOpcode::kRecv &&
          c[i].byte_len > g->max_recv_bytes)
        Fail("receive completion of " + std::to_string(c[i].byte_len) + " bytes > WQE capacity " +
             std::to_string(g->max_recv_bytes));
    }
    if (n < 64) break;
  }
  g->cq->overflowed = false;
}

void ResetForInput() {
  DrainCq(false);
  fuzz::DrainAsyncEvents(*g->dev);
  {
    engine::Engine& e = g->dev->engine();
    std::lock_guard<engine::SpinMutex> lock(e.mu_);
    // SEND_WITH_INVALIDATE of an earlier input may have revoked a region.
    for (Region& r : g->regions) r.mr->remote_valid = true;
  }
  for (Region& r : g->regions) {
    if (r.policy == Policy::kPoisoned) continue;
    if (r.policy == Policy::kMayChange || !r.writable.empty())
      std::memcpy(r.addr, r.pattern.data(), r.size);
    r.writable.clear();
  }
  g->recv_cursor = 0;
  for (int i = 0; i < 4; ++i) BringUp(i);
  // Refill the SRQ (it survives QP resets).
  {
    engine::Engine& e = g->dev->engine();
    std::lock_guard<engine::SpinMutex> lock(e.mu_);
    g->srq->rq.Init(8, 2);
  }
  for (int k = 0; k < 3; ++k) PostRecv(0, 512, 1024);
  for (int k = 0; k < 3; ++k) PostRecv(1, 1024, 1024);
  for (int k = 0; k < 2; ++k) PostRecv(2, 700, 400);
  for (int k = 0; k < 3; ++k) PostRecv(3, 40, 1100);
  PostRequests();
  g->tx->Clear();
  g->rc_acked_through = -1;
}

void CheckInvariants() {
  DrainCq(true);
  static const std::vector<uint8_t> kGuardFill(kGuard, 0xE7);
  for (auto& [p, n] : g->guards) {
    Unpoison(p, n);
    if (std::memcmp(p, kGuardFill.data(), n) != 0) {
      size_t i = 0;
      while (p[i] == 0xE7) ++i;
      Fail("guard byte at arena+" + std::to_string(p + i - g->arena) + " changed");
    }
    Poison(p, n);
  }
  // Compare with the fill pattern, the legitimately writable ranges masked.
  static std::vector<uint8_t> scratch;
  for (Region& r : g->regions) {
    if (r.policy != Policy::kChecked) continue;
    scratch.assign(r.addr, r.addr + r.size);
    for (auto [off, n] : r.writable) std::memcpy(&scratch[off], &r.pattern[off], n);
    if (std::memcmp(scratch.data(), r.pattern.data(), r.size) != 0) {
      size_t i = 0;
      while (scratch[i] == r.pattern[i]) ++i;
      Fail(std::string("region '") + r.name + "' (access " + std::to_string(r.access) +
           ") changed at offset " + std::to_string(i) + " outside any writable SGE");
    }
  }
}

int16_t Low16(uint64_t v) { return static_cast<int16_t>(v & 0xFFFF); }

void PatchKeys(uint8_t* pkt, uint32_t len, const wire::OpcodeInfo& info, uint8_t sel) {
  const unsigned which = sel % (kNumRegions + 1);
  const bool keep = which == kNumRegions;
  const Region* r = keep ? nullptr : &g->regions[which];
  const uint32_t rkey = keep ? 0 : g->dev->MrRkey(r->mr);
  const uint64_t base = keep ? 0 : r->mr->iova;
  if (info.reth_offset && info.reth_offset + sizeof(wire::Reth) <= len) {
    wire::Reth reth;
    std::memcpy(reth.b.data(), pkt + info.reth_offset, sizeof(reth));
    if (!keep) {
      reth.set_rkey(rkey);
      reth.set_va(base + static_cast<uint64_t>(int64_t{Low16(reth.va())}));
    }
    std::memcpy(pkt + info.reth_offset, reth.b.data(), sizeof(reth));
  }
  if (info.atomic_eth_offset && info.atomic_eth_offset + sizeof(wire::AtomicEth) <= len && !keep) {
    wire::AtomicEth a;
    std::memcpy(a.b.data(), pkt + info.atomic_eth_offset, sizeof(a));
    a.set_rkey(rkey);
    a.set_va(base + static_cast<uint64_t>(int64_t{Low16(a.va())}));
    std::memcpy(pkt + info.atomic_eth_offset, a.b.data(), sizeof(a));
  }
  if (info.ieth_offset && info.ieth_offset + sizeof(wire::Ieth) <= len && !keep) {
    wire::Ieth ie;
    ie.set_rkey(rkey);
    std::memcpy(pkt + info.ieth_offset, ie.b.data(), sizeof(ie));
  }
}

void PlayRecord(uint8_t ctl, uint8_t aux, uint8_t sel, uint8_t* pkt, uint32_t len) {
  engine::Qp* qp = g->qp[ctl & 3];
  const bool multicast = (ctl & 3) == 3 && (sel & 0x80);
  if (len >= sizeof(wire::Bth)) {
    wire::Bth bth;
    std::memcpy(bth.b.data(), pkt, sizeof(bth));
    const wire::OpcodeInfo& info = wire::GetOpcodeInfo(bth.opcode());
    if (!(ctl & 0x04)) bth.set_dest_qp(multicast ? engine::kMulticastQpn : qp->qpn);
    if (ctl & 0x08) {
      // Single-threaded: the progress thread is stopped, so QP fields can
      // be read without the lock.
      const uint32_t base =
          info.valid() && info.has(wire::kIsResponse) ? qp->comp.comp_psn : qp->resp.epsn;
      bth.set_psn(wire::PsnAdd(base, static_cast<uint32_t>(int32_t{static_cast<int8_t>(aux)})));
    }
    if (ctl & 0x20) {
      bth.set_pkey(wire::kDefaultPkey);
      bth.set_tver(0);
    }
    std::memcpy(pkt, bth.b.data(), sizeof(bth));
    if (info.valid()) {
      if (ctl & 0x10) PatchKeys(pkt, len, info, sel);
      if ((ctl & 0x20) && info.deth_offset && info.deth_offset + sizeof(wire::Deth) <= len) {
        wire::Deth deth;
        std::memcpy(deth.b.data(), pkt + info.deth_offset, sizeof(deth));
        deth.set_qkey(kQkey);
        std::memcpy(pkt + info.deth_offset, deth.b.data(), sizeof(deth));
      }
    }
  }
  NoteAcknowledgement(pkt, len, ctl & 0x40);
  fuzz::Inject(*g->dev, pkt, len, (ctl & 0x40) ? g->stranger : g->peer, 0, 0,
               multicast ? &g->group : nullptr, (sel & 0x40) != 0);
  if (ctl & 0x80) fuzz::FireTimers(*g->dev, std::chrono::hours(1));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ResetForInput();
  size_t pos = 0;
  int records = 0;
  while (size - pos >= 5 && records < 64) {
    const uint8_t ctl = data[pos], aux = data[pos + 1], sel = data[pos + 2];
    size_t len = data[pos + 3] | (size_t{data[pos + 4]} << 8);
    pos += 5;
    len = std::min({len, size - pos, kMaxPacket});
    ++records;
    if (len == 0) {
      fuzz::FireTimers(*g->dev, std::chrono::hours(1));
      continue;
    }
    // Exactly-sized heap copy so ASan sees any read past the packet.
    uint8_t* pkt = static_cast<uint8_t*>(std::malloc(len));
    std::memcpy(pkt, data + pos, len);
    pos += len;
    PlayRecord(ctl, aux, sel, pkt, static_cast<uint32_t>(len));
    std::free(pkt);
  }
  if (g->verbose) {
    // RESPONDER_FUZZER_VERBOSE=1: what each input did (for checking seeds).
    std::fprintf(stderr, "--- %d records, %zu packets sent; QP states:", records, g->tx->sent().size());
    for (engine::Qp* qp : g->qp) std::fprintf(stderr, " %s", engine::QpStateName(qp->attr.qp_state));
    const engine::Qp* rc = g->qp[0];
    std::fprintf(
        stderr,
        "\n  RC requester (PSN offsets from the start): comp %d sent %d max sent %d, peer sr %d\n",
        wire::PsnDiff(rc->comp.comp_psn, kRcSqPsn), wire::PsnDiff(rc->req.sq_psn, kRcSqPsn),
        wire::PsnDiff(rc->sr.sq_psn_max, kRcSqPsn), rc->sr.peer_sr);
    const engine::EngineStats s = g->dev->stats();
    std::string text = engine::FormatStats(s, g->dev->transport_counters());
    // Only the non-zero counters.
    size_t start = 0;
    while (start < text.size()) {
      const size_t end = text.find('\n', start);
      const std::string line = text.substr(start, end - start);
      if (line.size() < 2 || line.substr(line.size() - 2) != " 0") std::fprintf(stderr, "  %s\n", line.c_str());
      start = end + 1;
    }
    for (const auto& p : g->tx->sent())
      std::fprintf(stderr, "  tx opcode 0x%02x len %zu\n", p[0], p.size());
  }
  CheckInvariants();
  g->tx->Clear();
  return 0;
}
