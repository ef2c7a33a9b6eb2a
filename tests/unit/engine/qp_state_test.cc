// Acceptance item 6: the QP state machine against the IBTA / Linux kernel
// table (ib_modify_qp_is_ok), attribute ranges, MR registration rules, CQ
// overflow and SRQ sharing / limit event.
#include <cstring>
#include <set>

#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

using S = QpState;
constexpr int kTypes = 3;  // UD, UC, RC (index)
constexpr QpType kTypeOf[kTypes] = {QpType::kUd, QpType::kUc, QpType::kRc};
const char* TypeName(int t) { return t == 0 ? "UD" : t == 1 ? "UC" : "RC"; }

struct Rule {
  S from, to;
  uint32_t req[kTypes];
  uint32_t opt[kTypes];
};

// Transcribed from the Linux kernel's qp_state_table (drivers/infiniband/
// core/verbs.c), which follows IBA 11.2.5.2 table 91. Any pair not listed is
// an invalid transition.
const std::vector<Rule>& Rules() {
  static const std::vector<Rule> rules = [] {
    std::vector<Rule> r;
    for (S from : {S::kReset, S::kInit, S::kRtr, S::kRts, S::kSqd, S::kSqe, S::kErr})
      r.push_back({from, S::kReset, {0, 0, 0}, {0, 0, 0}});
    for (S from : {S::kInit, S::kRtr, S::kRts, S::kSqd, S::kSqe, S::kErr})
      r.push_back({from, S::kErr, {0, 0, 0}, {0, 0, 0}});
    r.push_back({S::kReset, S::kInit,
                 {kQpPkeyIndex | kQpPort | kQpQkey, kQpPkeyIndex | kQpPort | kQpAccessFlags,
                  kQpPkeyIndex | kQpPort | kQpAccessFlags},
                 {0, 0, 0}});
    r.push_back({S::kInit, S::kInit,
                 {0, 0, 0},
                 {kQpPkeyIndex | kQpPort | kQpQkey, kQpPkeyIndex | kQpPort | kQpAccessFlags,
                  kQpPkeyIndex | kQpPort | kQpAccessFlags}});
    r.push_back({S::kInit, S::kRtr,
                 {0, kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn,
                  kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer},
                 {kQpPkeyIndex | kQpQkey, kQpAltPath | kQpAccessFlags | kQpPkeyIndex,
                  kQpAltPath | kQpAccessFlags | kQpPkeyIndex}});
    r.push_back({S::kRtr, S::kRts,
                 {kQpSqPsn, kQpSqPsn,
                  kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic},
                 {kQpCurState | kQpQkey, kQpCurState | kQpAltPath | kQpAccessFlags | kQpPathMigState,
                  kQpCurState | kQpAltPath | kQpAccessFlags | kQpMinRnrTimer | kQpPathMigState}});
    for (S from : {S::kRts, S::kSqd})
      r.push_back({from, S::kRts,
                   {0, 0, 0},
                   {kQpCurState | kQpQkey, kQpCurState | kQpAccessFlags | kQpAltPath | kQpPathMigState,
                    kQpCurState | kQpAccessFlags | kQpAltPath | kQpPathMigState | kQpMinRnrTimer}});
    r.push_back({S::kRts, S::kSqd, {0, 0, 0},
                 {kQpEnSqdAsyncNotify, kQpEnSqdAsyncNotify, kQpEnSqdAsyncNotify}});
    r.push_back({S::kSqd, S::kSqd,
                 {0, 0, 0},
                 {kQpPkeyIndex | kQpQkey,
                  kQpAv | kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpPathMigState,
                  kQpPort | kQpAv | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic |
                      kQpMaxDestRdAtomic | kQpAltPath | kQpAccessFlags | kQpPkeyIndex |
                      kQpMinRnrTimer | kQpPathMigState}});
    // SQE -> RTS: UD/UC only (RC never enters SQE). Not reachable from the
    // API, so not exercised below.
    return r;
  }();
  return rules;
}

const Rule* FindRule(S from, S to) {
  for (const Rule& r : Rules())
    if (r.from == from && r.to == to) return &r;
  return nullptr;
}

class QpStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dev_ = MakeDevice(0);
    ASSERT_NE(dev_, nullptr);
    ASSERT_EQ(dev_->AllocPd(nullptr, &pd_), 0);
    ASSERT_EQ(dev_->CreateCq(64, nullptr, nullptr, &cq_), 0);
  }
  void TearDown() override {
    for (Qp* q : qps_) dev_->DestroyQp(q);
  }
  Qp* NewQp(QpType type) {
    QpCaps caps{8, 8, 1, 1, 0};
    Qp* qp = nullptr;
    EXPECT_EQ(dev_->CreateQp(pd_, type, cq_, cq_, nullptr, &caps, false, nullptr, &qp), 0);
    qps_.push_back(qp);
    return qp;
  }
  // Attribute values that are valid for every transition.
  QpAttr Good(Qp* qp) {
    QpAttr a;
    a.cur_qp_state = dev_->GetQpState(qp);
    a.port_num = 1;
    a.pkey_index = 0;
    a.qkey = 0x1234;
    a.qp_access_flags = kRemoteWrite | kRemoteRead;
    a.ah_attr.is_global = true;
    a.ah_attr.dgid = dev_->gids()[0];
    a.path_mtu = Mtu::k1024;
    a.dest_qp_num = 0x123;
    a.rq_psn = 5;
    a.sq_psn = 6;
    a.max_dest_rd_atomic = 4;
    a.max_rd_atomic = 4;
    a.min_rnr_timer = 12;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    return a;
  }
  int Modify(Qp* qp, S to, uint32_t attrs) {
    QpAttr a = Good(qp);
    a.qp_state = to;
    return dev_->ModifyQp(qp, a, kQpState | attrs);
  }
  int TypeIdx(QpType t) { return t == QpType::kUd ? 0 : t == QpType::kUc ? 1 : 2; }
  // Drives a new QP to `target` along RESET -> INIT -> RTR -> RTS -> SQD/ERR.
  Qp* QpIn(QpType type, S target) {
    Qp* qp = NewQp(type);
    const int t = TypeIdx(type);
    const S path[] = {S::kInit, S::kRtr, S::kRts};
    S cur = S::kReset;
    for (S next : path) {
      if (cur == target) break;
      if (target == S::kErr && cur == S::kRts) break;
      EXPECT_EQ(Modify(qp, next, FindRule(cur, next)->req[t]), 0)
          << TypeName(t) << " " << QpStateName(cur) << "->" << QpStateName(next);
      cur = next;
    }
    if (target == S::kSqd || target == S::kErr) {
      EXPECT_EQ(Modify(qp, target, 0), 0);
      cur = target;
    }
    EXPECT_EQ(dev_->GetQpState(qp), target);
    return qp;
  }

  std::shared_ptr<Device> dev_;
  Pd* pd_ = nullptr;
  Cq* cq_ = nullptr;
  std::vector<Qp*> qps_;
};

constexpr uint32_t kAllAttrBits = (1u << 21) - 2;  // every IBV_QP_* bit but STATE

TEST_F(QpStateTest, EveryValidTransitionWithRequiredMaskSucceeds) {
  for (int t = 0; t < kTypes; ++t) {
    for (const Rule& r : Rules()) {
      if (r.from == S::kSqe) continue;  // unreachable through the API
      SCOPED_TRACE(std::string(TypeName(t)) + " " + QpStateName(r.from) + "->" + QpStateName(r.to));
      Qp* qp = QpIn(kTypeOf[t], r.from);
      EXPECT_EQ(Modify(qp, r.to, r.req[t]), 0);
      EXPECT_EQ(dev_->GetQpState(qp), r.to);
      // Required plus every optional attribute is accepted too.
      Qp* qp2 = QpIn(kTypeOf[t], r.from);
      EXPECT_EQ(Modify(qp2, r.to, r.req[t] | r.opt[t]), 0);
      EXPECT_EQ(dev_->GetQpState(qp2), r.to);
    }
  }
}

TEST_F(QpStateTest, MissingRequiredOrExtraBitIsEinval) {
  for (int t = 0; t < kTypes; ++t) {
    for (const Rule& r : Rules()) {
      if (r.from == S::kSqe) continue;
      SCOPED_TRACE(std::string(TypeName(t)) + " " + QpStateName(r.from) + "->" + QpStateName(r.to));
      Qp* qp = QpIn(kTypeOf[t], r.from);
      for (int bit = 1; bit <= 20; ++bit) {
        const uint32_t b = 1u << bit;
        if (r.req[t] & b) {
          EXPECT_EQ(Modify(qp, r.to, r.req[t] & ~b), EINVAL) << "without required bit " << bit;
        } else if (!(r.opt[t] & b)) {
          EXPECT_EQ(Modify(qp, r.to, r.req[t] | b), EINVAL) << "with disallowed bit " << bit;
        }
        ASSERT_EQ(dev_->GetQpState(qp), r.from) << "a refused modify changed the state";
      }
    }
  }
}

TEST_F(QpStateTest, InvalidTransitionsAreEinval) {
  const S states[] = {S::kReset, S::kInit, S::kRtr, S::kRts, S::kSqd, S::kErr};
  for (int t = 0; t < kTypes; ++t) {
    for (S from : states) {
      for (S to : {S::kReset, S::kInit, S::kRtr, S::kRts, S::kSqd, S::kSqe, S::kErr}) {
        if (FindRule(from, to)) continue;
        if (from == S::kReset && to == S::kErr) continue;  // separate test below
        SCOPED_TRACE(std::string(TypeName(t)) + " " + QpStateName(from) + "->" + QpStateName(to));
        Qp* qp = QpIn(kTypeOf[t], from);
        EXPECT_EQ(Modify(qp, to, 0), EINVAL);
        // Whatever attributes come with it.
        const Rule* fwd = nullptr;
        for (const Rule& r : Rules())
          if (r.to == to && r.from != S::kReset) fwd = &r;
        if (fwd) {
          EXPECT_EQ(Modify(qp, to, fwd->req[t]), EINVAL);
        }
        EXPECT_EQ(dev_->GetQpState(qp), from);
      }
    }
  }
}

// The kernel's table (and rxe) has no RESET -> ERR transition.
TEST_F(QpStateTest, ResetToErrIsEinval) {
  for (int t = 0; t < kTypes; ++t) {
    SCOPED_TRACE(TypeName(t));
    Qp* qp = NewQp(kTypeOf[t]);
    EXPECT_EQ(Modify(qp, S::kErr, 0), EINVAL);
    EXPECT_EQ(dev_->GetQpState(qp), S::kReset);
  }
}

TEST_F(QpStateTest, CurStateMustMatch) {
  Qp* qp = QpIn(QpType::kRc, S::kRtr);
  QpAttr a = Good(qp);
  a.qp_state = S::kRts;
  a.cur_qp_state = S::kInit;
  const Rule* r = FindRule(S::kRtr, S::kRts);
  EXPECT_EQ(dev_->ModifyQp(qp, a, kQpState | kQpCurState | r->req[2]), EINVAL);
  a.cur_qp_state = S::kRtr;
  EXPECT_EQ(dev_->ModifyQp(qp, a, kQpState | kQpCurState | r->req[2]), 0);
}

TEST_F(QpStateTest, OutOfRangeValuesAreEinval) {
  struct Case {
    const char* what;
    S from, to;
    uint32_t bit;
    void (*set)(QpAttr&, const Device&);
  };
  const Case cases[] = {
      {"port 2", S::kReset, S::kInit, kQpPort, [](QpAttr& a, const Device&) { a.port_num = 2; }},
      {"port 0", S::kReset, S::kInit, kQpPort, [](QpAttr& a, const Device&) { a.port_num = 0; }},
      {"pkey_index 1", S::kReset, S::kInit, kQpPkeyIndex, [](QpAttr& a, const Device&) { a.pkey_index = 1; }},
      {"path_mtu 6", S::kInit, S::kRtr, kQpPathMtu,
       [](QpAttr& a, const Device&) { a.path_mtu = static_cast<Mtu>(6); }},
      {"path_mtu 0", S::kInit, S::kRtr, kQpPathMtu,
       [](QpAttr& a, const Device&) { a.path_mtu = static_cast<Mtu>(0); }},
      {"sgid_index beyond table", S::kInit, S::kRtr, kQpAv,
       [](QpAttr& a, const Device& d) { a.ah_attr.sgid_index = static_cast<uint8_t>(d.gids().size()); }},
      {"non-global AV", S::kInit, S::kRtr, kQpAv, [](QpAttr& a, const Device&) { a.ah_attr.is_global = false; }},
      {"AV port 2", S::kInit, S::kRtr, kQpAv, [](QpAttr& a, const Device&) { a.ah_attr.port_num = 2; }},
      {"dest_qpn 2^24", S::kInit, S::kRtr, kQpDestQpn, [](QpAttr& a, const Device&) { a.dest_qp_num = 1u << 24; }},
      {"min_rnr_timer 32", S::kInit, S::kRtr, kQpMinRnrTimer, [](QpAttr& a, const Device&) { a.min_rnr_timer = 32; }},
      {"max_dest_rd_atomic > max", S::kInit, S::kRtr, kQpMaxDestRdAtomic,
       [](QpAttr& a, const Device& d) { a.max_dest_rd_atomic = static_cast<uint8_t>(d.attr().max_qp_rd_atom + 1); }},
      {"retry_cnt 8", S::kRtr, S::kRts, kQpRetryCnt, [](QpAttr& a, const Device&) { a.retry_cnt = 8; }},
      {"rnr_retry 8", S::kRtr, S::kRts, kQpRnrRetry, [](QpAttr& a, const Device&) { a.rnr_retry = 8; }},
      {"timeout 32", S::kRtr, S::kRts, kQpTimeout, [](QpAttr& a, const Device&) { a.timeout = 32; }},
      {"max_rd_atomic > max", S::kRtr, S::kRts, kQpMaxQpRdAtomic,
       [](QpAttr& a, const Device& d) { a.max_rd_atomic = static_cast<uint8_t>(d.attr().max_qp_init_rd_atom + 1); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Qp* qp = QpIn(QpType::kRc, c.from);
    const Rule* r = FindRule(c.from, c.to);
    QpAttr a = Good(qp);
    a.qp_state = c.to;
    c.set(a, *dev_);
    const int rc = dev_->ModifyQp(qp, a, kQpState | r->req[2] | c.bit);
    EXPECT_EQ(rc, EINVAL);
    if (rc != EINVAL) continue;
    EXPECT_EQ(dev_->GetQpState(qp), c.from);
    // The same transition with good values works (the case is not refused for another reason).
    EXPECT_EQ(Modify(qp, c.to, r->req[2] | c.bit), 0);
  }
}

// Each verbs context has its own async queue and fd (engine/queues/async_queue.h);
// the router installed by the verbs layer picks the queue of an event.
int g_async_route_to = 0;
int RouteToChosenQueue(const AsyncEvent&) { return g_async_route_to; }

std::vector<AsyncEvent> DrainQueue(Device& d, int queue) {
  const int fd = d.async_fd(queue);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::vector<AsyncEvent> out;
  AsyncEvent ev;
  while (d.GetAsyncEvent(&ev, queue) == 0) out.push_back(ev);
  return out;
}

TEST_F(QpStateTest, AsyncEventsGoToTheRoutedQueueOnly) {
  const int q1 = dev_->OpenAsyncQueue(), q2 = dev_->OpenAsyncQueue();
  ASSERT_GT(q1, 0);
  ASSERT_GT(q2, 0);
  const int fd0 = dev_->async_fd(), fd1 = dev_->async_fd(q1), fd2 = dev_->async_fd(q2);
  EXPECT_TRUE(fd0 >= 0 && fd1 >= 0 && fd2 >= 0 && fd0 != fd1 && fd1 != fd2 && fd0 != fd2);
  DrainAsync(*dev_);
  dev_->SetAsyncRouter(RouteToChosenQueue);
  g_async_route_to = q2;
  Qp* qp = QpIn(QpType::kRc, S::kRts);
  QpAttr a = Good(qp);
  a.qp_state = S::kSqd;
  a.en_sqd_async_notify = true;
  ASSERT_EQ(dev_->ModifyQp(qp, a, kQpState | kQpEnSqdAsyncNotify), 0);
  auto ev = DrainQueue(*dev_, q2);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, AsyncEventType::kSqDrained);
  EXPECT_TRUE(DrainQueue(*dev_, q1).empty());
  EXPECT_TRUE(DrainAsync(*dev_).empty());
  // A closed queue's events fall back to the device's own queue.
  dev_->CloseAsyncQueue(q2);
  EXPECT_EQ(dev_->async_fd(q2), -1);
  AsyncEvent none;
  EXPECT_EQ(dev_->GetAsyncEvent(&none, q2), EINVAL);
  a = Good(qp);
  a.qp_state = S::kRts;
  ASSERT_EQ(dev_->ModifyQp(qp, a, kQpState), 0);
  a.qp_state = S::kSqd;
  a.en_sqd_async_notify = true;
  ASSERT_EQ(dev_->ModifyQp(qp, a, kQpState | kQpEnSqdAsyncNotify), 0);
  EXPECT_EQ(DrainAsync(*dev_).size(), 1u);
  EXPECT_TRUE(DrainQueue(*dev_, q1).empty());
  dev_->SetAsyncRouter(nullptr);
  dev_->CloseAsyncQueue(q1);
}

TEST_F(QpStateTest, QueryReflectsAttributesAndSqdNotifies) {
  Qp* qp = QpIn(QpType::kRc, S::kRts);
  QpAttr q;
  ASSERT_EQ(dev_->QueryQp(qp, &q), 0);
  EXPECT_EQ(q.qp_state, S::kRts);
  EXPECT_EQ(q.path_mtu, Mtu::k1024);
  EXPECT_EQ(q.dest_qp_num, 0x123u);
  EXPECT_EQ(q.rq_psn, 5u);
  EXPECT_EQ(q.sq_psn, 6u);
  EXPECT_EQ(q.timeout, 14);
  EXPECT_EQ(q.retry_cnt, 7);
  EXPECT_EQ(q.rnr_retry, 7);
  EXPECT_EQ(q.min_rnr_timer, 12);
  EXPECT_EQ(q.max_rd_atomic, 4);
  EXPECT_EQ(q.max_dest_rd_atomic, 4);
  EXPECT_EQ(q.qp_access_flags, uint32_t{kRemoteWrite | kRemoteRead});
  DrainAsync(*dev_);
  QpAttr a = Good(qp);
  a.qp_state = S::kSqd;
  a.en_sqd_async_notify = true;
  ASSERT_EQ(dev_->ModifyQp(qp, a, kQpState | kQpEnSqdAsyncNotify), 0);
  EXPECT_EQ(dev_->GetQpState(qp), S::kSqd);
  auto ev = DrainAsync(*dev_);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, AsyncEventType::kSqDrained);
  // SQD -> SQD may change the retry parameters (RC), then back to RTS.
  a = Good(qp);
  a.qp_state = S::kSqd;
  a.retry_cnt = 3;
  a.timeout = 9;
  ASSERT_EQ(dev_->ModifyQp(qp, a, kQpState | kQpRetryCnt | kQpTimeout), 0);
  ASSERT_EQ(dev_->QueryQp(qp, &q), 0);
  EXPECT_EQ(q.retry_cnt, 3);
  EXPECT_EQ(q.timeout, 9);
  EXPECT_EQ(Modify(qp, S::kRts, 0), 0);
  EXPECT_EQ(dev_->GetQpState(qp), S::kRts);
}

// ---- MR rules ----

TEST_F(QpStateTest, MrRemoteWriteOrAtomicNeedsLocalWrite) {
  std::vector<uint8_t> buf(4096);
  Mr* mr = nullptr;
  EXPECT_EQ(dev_->RegMr(pd_, buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()), kRemoteWrite, nullptr, &mr),
            EINVAL);
  EXPECT_EQ(dev_->RegMr(pd_, buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()), kRemoteAtomic, nullptr, &mr),
            EINVAL);
  EXPECT_EQ(dev_->RegMr(pd_, buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()),
                        kRemoteRead | kRemoteWrite, nullptr, &mr),
            EINVAL);
  ASSERT_EQ(dev_->RegMr(pd_, buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()), kRemoteRead, nullptr, &mr),
            0);
  EXPECT_EQ(dev_->DeregMr(mr), 0);
  ASSERT_EQ(dev_->RegMr(pd_, buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()),
                        kLocalWrite | kRemoteWrite | kRemoteAtomic, nullptr, &mr),
            0);
  EXPECT_EQ(dev_->DeregMr(mr), 0);
}

TEST_F(QpStateTest, KeysDifferBetweenRegistrationsOfSameMemory) {
  std::vector<uint8_t> buf(4096);
  std::vector<Mr*> mrs(8);
  std::set<uint32_t> lkeys, rkeys;
  for (auto& mr : mrs) {
    ASSERT_EQ(dev_->RegMr(pd_, buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()),
                          kLocalWrite | kRemoteWrite, nullptr, &mr),
              0);
    lkeys.insert(dev_->MrLkey(mr));
    rkeys.insert(dev_->MrRkey(mr));
  }
  EXPECT_EQ(lkeys.size(), mrs.size());
  EXPECT_EQ(rkeys.size(), mrs.size());
  // A PD with MRs cannot be freed.
  EXPECT_EQ(dev_->DeallocPd(pd_), EBUSY);
  for (Mr* mr : mrs) EXPECT_EQ(dev_->DeregMr(mr), 0);
}

// ---- CQ overflow (pair) ----

class CqOverflow : public RcPairTest {};

TEST_F(CqOverflow, MoreCompletionsThanEntries) {
  QpOptions o;
  o.cq_entries = 4;
  Open(o);
  ASSERT_EQ(a_.dev->CqCapacity(a_.cq), 4u);
  DrainAsync(*a_.dev);
  const int n = 7;
  FillPattern(a_.buf, 0, 64, 1);
  Sge s = SgeOf(a_, 0, 64);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, i, {&s, 1}, Addr(b_, i * 64),
                                             b_.dev->MrRkey(b_.mr))),
              0);
  // Do not poll the CQ: let the progress thread fill and overrun it.
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*a_.dev).cq_overflows > 0; }));
  std::vector<AsyncEvent> ev;
  ASSERT_TRUE(WaitFor([&] {
    auto more = DrainAsync(*a_.dev);
    ev.insert(ev.end(), more.begin(), more.end());
    return !ev.empty();
  }));
  EXPECT_EQ(ev[0].type, AsyncEventType::kCqErr);
  EXPECT_EQ(ev[0].handle, &a_);  // the CQ's handle
  Completion wc[8];
  EXPECT_LE(a_.dev->PollCq(a_.cq, 8, wc), 4);
}

// ---- SRQ (pair with two QPs on b sharing one SRQ) ----

TEST(SrqTest, SharedByTwoQpsAndLimitFiresOnce) {
  QpOptions o;
  Side a1, a2, b1, b2;
  auto da = MakeDevice(0);
  auto db = MakeDevice(1);
  SetupSide(a1, da, o);
  SetupSide(a2, da, o);
  // b: one PD, one CQ, one SRQ, two QPs, one MR.
  b1.dev = b2.dev = db;
  ASSERT_EQ(db->AllocPd(nullptr, &b1.pd), 0);
  b2.pd = b1.pd;
  ASSERT_EQ(db->CreateCq(256, nullptr, nullptr, &b1.cq), 0);
  b2.cq = b1.cq;
  int srq_handle = 0;
  Srq* srq = nullptr;
  ASSERT_EQ(db->CreateSrq(b1.pd, SrqAttr{64, 1, 0}, &srq_handle, &srq), 0);
  for (Side* s : {&b1, &b2}) {
    QpCaps caps{16, 16, 1, 1, 0};
    ASSERT_EQ(db->CreateQp(b1.pd, QpType::kRc, b1.cq, b1.cq, srq, &caps, false, nullptr, &s->qp), 0);
    EXPECT_EQ(caps.max_recv_wr, 0u);
  }
  b1.buf.assign(1 << 20, 0);
  ASSERT_EQ(db->RegMr(b1.pd, b1.buf.data(), b1.buf.size(), reinterpret_cast<uint64_t>(b1.buf.data()),
                      kLocalWrite | kRemoteWrite, nullptr, &b1.mr),
            0);
  Connect(a1, b1, o);
  Connect(b1, a1, o);
  Connect(a2, b2, o);
  Connect(b2, a2, o);
  // PostRecv on a QP with an SRQ is refused.
  Sge dummy = SgeOf(b1, 0, 8);
  EXPECT_EQ(db->PostRecv(b1.qp, RecvWr{1, {&dummy, 1}}), EINVAL);

  const int posted = 10;
  std::vector<Sge> rs(posted);
  for (int i = 0; i < posted; ++i) {
    rs[i] = SgeOf(b1, i * 8192, 8192);
    ASSERT_EQ(db->PostSrqRecv(srq, RecvWr{uint64_t(100 + i), {&rs[i], 1}}), 0);
  }
  ASSERT_EQ(db->ModifySrq(srq, SrqAttr{0, 0, 5}, 2), 0);
  SrqAttr q;
  ASSERT_EQ(db->QuerySrq(srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 5u);
  DrainAsync(*db);

  auto send = [&](Side& from, int k) {
    FillPattern(from.buf, k * 8192, 1000 + k, 700 + k);
    Sge s = SgeOf(from, k * 8192, 1000 + k);
    ASSERT_EQ(from.dev->PostSend(from.qp, MakeWr(WrOpcode::kSend, k, {&s, 1})), 0);
    auto c = PollN(from, 1);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  };
  std::vector<Completion> recvs;
  // Five messages: 10 -> 5 WQEs left, not below the limit yet.
  for (int k = 0; k < 5; ++k) send(k % 2 ? a2 : a1, k);
  {
    auto c = PollN(b1, 5);
    recvs.insert(recvs.end(), c.begin(), c.end());
  }
  EXPECT_TRUE(DrainAsync(*db).empty()) << "limit event before the count dropped below the limit";
  // Sixth: 4 < 5 -> exactly one event.
  send(a2, 5);
  {
    auto c = PollN(b1, 1);
    recvs.insert(recvs.end(), c.begin(), c.end());
  }
  std::vector<AsyncEvent> ev;
  ASSERT_TRUE(WaitFor([&] {
    auto more = DrainAsync(*db);
    ev.insert(ev.end(), more.begin(), more.end());
    return !ev.empty();
  }));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, AsyncEventType::kSrqLimitReached);
  EXPECT_EQ(ev[0].handle, &srq_handle);
  ASSERT_EQ(db->QuerySrq(srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 0u) << "limit must disarm after firing";
  // More consumption: no further event.
  send(a1, 6);
  send(a2, 7);
  {
    auto c = PollN(b1, 2);
    recvs.insert(recvs.end(), c.begin(), c.end());
  }
  EXPECT_TRUE(DrainAsync(*db).empty());
  // Every receive: right QP, WQEs consumed in SRQ order, data exact.
  ASSERT_EQ(recvs.size(), 8u);
  for (int k = 0; k < 8; ++k) {
    const Side& from = (k % 2) ? a2 : a1;
    const uint32_t expect_qp = db->QpNum((k % 2) ? b2.qp : b1.qp);
    EXPECT_EQ(recvs[k].status, WcStatus::kSuccess);
    EXPECT_EQ(recvs[k].qp_num, expect_qp) << k;
    EXPECT_EQ(recvs[k].wr_id, uint64_t(100 + k));
    EXPECT_EQ(recvs[k].byte_len, uint32_t(1000 + k));
    EXPECT_EQ(FirstDiff(b1.buf.data() + k * 8192, from.buf.data() + k * 8192, 1000 + k), -1) << k;
  }
  EXPECT_EQ(db->DestroySrq(srq), EBUSY);
}

}  // namespace
}  // namespace softrnic::engine::testing
