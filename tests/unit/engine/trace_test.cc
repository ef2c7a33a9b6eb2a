// SOFTRNIC_TRACE through the engine (engine/trace/engine_trace.cc): two
// devices with a QP pair, the files each writes when it closes, and what
// they must hold: retransmissions on a lossy link, RNR NAKs both ways,
// state changes with their reasons, completions in error, and the faults a
// transport reports through Transport::SetFaultEventSink on the QP whose
// packet they touched.
#include <arpa/inet.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "faults/fault_events.h"
#include "json_lite.h"
#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

using softrnic::testing::json::Parser;
using softrnic::testing::json::Value;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// What a trace file says about one tid: event names (with repeats).
struct Track {
  std::string thread_name;
  std::multiset<std::string> names;
  std::vector<const Value*> events;
};

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/softrnic-trace-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    // The devices before their buffers (Side's order).
    a_.dev.reset();
    b_.dev.reset();
    std::filesystem::remove_all(dir_);
  }
  // Device `which`'s settings with a trace (over UDP: RNR NAKs and faults
  // need packets, not the same-host direct path).
  EngineConfig Traced(int which, TestFaults faults = {}) {
    EngineConfig c = TestConfig(which, faults);
    c.transport_mode = transport::TransportMode::kUdp;
    c.trace.path = dir_ + "/dev" + std::to_string(which) + "-%p.json";
    return c;
  }
  std::string PathOf(int which) const {
    return dir_ + "/dev" + std::to_string(which) + "-" + std::to_string(getpid()) + ".json";
  }
  void Open(const QpOptions& o, const EngineConfig& ca, const EngineConfig& cb) {
    SetupSide(a_, MakeDevice(ca), o);
    SetupSide(b_, MakeDevice(cb), o);
    Connect(a_, b_, o);
    Connect(b_, a_, o);
    qpn_a_ = a_.dev->QpNum(a_.qp);
    qpn_b_ = b_.dev->QpNum(b_.qp);
  }
  // Closes both devices: each writes its trace.
  void Close() {
    a_.dev.reset();
    b_.dev.reset();
  }
  // Parses device `which`'s trace: per tid, its thread name and events.
  std::map<uint32_t, Track> Load(int which) {
    text_[which] = ReadFile(PathOf(which));
    Parser p(text_[which]);
    EXPECT_TRUE(p.Parse(&doc_[which])) << p.error();
    std::map<uint32_t, Track> tracks;
    const Value* events = doc_[which].Get("traceEvents");
    if (events == nullptr) {
      ADD_FAILURE() << "no traceEvents in " << PathOf(which);
      return tracks;
    }
    for (const Value& e : events->items) {
      Track& t = tracks[static_cast<uint32_t>(e.Num("tid"))];
      if (e.Str("ph") == "M") {
        if (e.Str("name") == "thread_name") t.thread_name = e.Get("args")->Str("name");
        continue;
      }
      t.names.insert(e.Str("name"));
      t.events.push_back(&e);
    }
    return tracks;
  }
  // Device `which`'s summary line for qpn.
  std::string SummaryLine(int which, uint32_t qpn) {
    std::istringstream in(ReadFile(PathOf(which) + ".txt"));
    const std::string prefix = "qp=" + trace::QpnText(qpn) + " ";
    for (std::string line; std::getline(in, line);)
      if (line.starts_with(prefix)) return line;
    return {};
  }
  static uint64_t Field(const std::string& line, const std::string& key) {
    const size_t at = line.find(" " + key + "=");
    if (at == std::string::npos) return ~uint64_t{0};
    return std::stoull(line.substr(at + key.size() + 2));
  }

  std::string dir_;
  Side a_, b_;
  uint32_t qpn_a_ = 0, qpn_b_ = 0;
  std::string text_[2];
  Value doc_[2];
};

// 5% of the packets lost each way (the fault transport, as SOFTRNIC_FAULTS=
// drop=0.05 makes it): the requester's track shows its retransmissions,
// and its summary line counts them.
TEST_F(TraceTest, LossyPairRecordsRetransmissions) {
  QpOptions o;
  o.timeout = kLossyLinkTimeout;
  TestFaults fa, fb;
  fa.drop = fb.drop = 0.05;
  fa.seed = 11;
  fb.seed = 12;
  Open(o, Traced(0, fa), Traced(1, fb));
  constexpr uint32_t kLen = 16 * 1024;  // 16 packets of 1 KiB
  for (uint32_t i = 0; i < 40; ++i) {
    WriteAndCheck(a_, b_, (i % 16) * kLen, kLen, i + 1);
    if (::testing::Test::HasFailure()) return;
  }
  const uint64_t resent = StatsOf(*a_.dev).tx_retransmit_packets;
  ASSERT_GT(resent, 0u) << "no loss at 5% in 640+ packets?";
  Close();

  auto tracks = Load(0);
  ASSERT_TRUE(tracks.contains(qpn_a_));
  const Track& a = tracks[qpn_a_];
  EXPECT_EQ(a.thread_name, "QP " + trace::QpnText(qpn_a_) + " RC \u2192 peer QPN " +
                               trace::QpnText(qpn_b_) + " (" + TestAddress(1) + ")");
  const size_t retransmissions = a.names.count("rewind") + a.names.count("selective_resend") +
                                 a.names.count("retransmit_timeout");
  EXPECT_GT(retransmissions, 0u) << text_[0].substr(0, 4000);
  for (const Value* e : a.events) {
    if (e->Str("name") != "selective_resend" && e->Str("name") != "rewind") continue;
    EXPECT_EQ(e->Str("cat"), "retransmit");
    EXPECT_GE(e->Get("args")->Num("packets"), 0);
    EXPECT_GE(e->Get("args")->Num("psn"), 0);
  }
  EXPECT_EQ(a.names.count("qp_create"), 1u);
  EXPECT_EQ(a.names.count("qp_destroy"), 0u);  // the device closed with it
  EXPECT_EQ(a.names.count("state_change"), 3u);  // INIT, RTR, RTS
  const std::string line = SummaryLine(0, qpn_a_);
  ASSERT_FALSE(line.empty()) << ReadFile(PathOf(0) + ".txt");
  EXPECT_EQ(Field(line, "retransmitted"), resent);
  EXPECT_NE(line.find(" type=RC state=RTS "), std::string::npos) << line;
  EXPECT_GT(Field(line, "sent"), 640u);
  // No temporary file is left behind.
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
  }
  EXPECT_EQ(files, 4u);  // two traces, two summaries
}

// A SEND with no receive posted: b sends RNR NAKs, a receives them; then a
// moves to Error with a receive posted, which is flushed.
TEST_F(TraceTest, RnrNaksStateChangesAndErrorCompletions) {
  QpOptions o;
  o.min_rnr_timer = 1;  // 10 us between attempts
  Open(o, Traced(0), Traced(1));
  Sge sge = SgeOf(a_, 0, 64);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kSend, 1, {&sge, 1})), 0);
  ASSERT_TRUE(WaitFor([&] { return StatsOf(*b_.dev).tx_rnr_naks > 0; }));
  Sge rsge = SgeOf(b_, 0, 64);
  ASSERT_EQ(b_.dev->PostRecv(b_.qp, RecvWr{2, {&rsge, 1}}), 0);
  ASSERT_EQ(PollN(a_, 1).size(), 1u);
  ASSERT_EQ(PollN(b_, 1).size(), 1u);
  Sge flushed = SgeOf(a_, 4096, 64);
  ASSERT_EQ(a_.dev->PostRecv(a_.qp, RecvWr{0x77, {&flushed, 1}}), 0);
  QpAttr attr;
  attr.qp_state = QpState::kErr;
  ASSERT_EQ(a_.dev->ModifyQp(a_.qp, attr, kQpState), 0);
  const auto c = PollN(a_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
  ASSERT_EQ(a_.dev->DestroyQp(a_.qp), 0);
  a_.qp = nullptr;
  Close();

  auto ta = Load(0);
  auto tb = Load(1);
  const Track& a = ta[qpn_a_];
  const Track& b = tb[qpn_b_];
  EXPECT_GE(b.names.count("rnr_nak_sent"), 1u);
  EXPECT_GE(a.names.count("rnr_nak_received"), 1u);
  EXPECT_GE(a.names.count("rewind"), 1u);  // the resend after the RNR wait
  EXPECT_EQ(a.names.count("qp_destroy"), 1u);
  std::vector<std::string> changes;
  std::string flush_status, flush_wr_id, flush_queue;
  bool error_before_flush = false;
  for (const Value* e : a.events) {
    if (e->Str("name") == "state_change") {
      changes.push_back(e->Get("args")->Str("from") + ">" + e->Get("args")->Str("to") + " " +
                        e->Get("args")->Str("reason"));
    }
    if (e->Str("name") == "completion_error") {
      flush_status = e->Get("args")->Str("status");
      flush_wr_id = e->Get("args")->Str("wr_id");
      flush_queue = e->Get("args")->Str("queue");
      error_before_flush = !changes.empty() && changes.back().starts_with("RTS>ERR");
    }
  }
  EXPECT_EQ(changes, (std::vector<std::string>{"RESET>INIT modify_qp", "INIT>RTR modify_qp",
                                               "RTR>RTS modify_qp", "RTS>ERR modify_qp"}));
  EXPECT_EQ(flush_status, "IBV_WC_WR_FLUSH_ERR");
  EXPECT_EQ(flush_wr_id, "0x77");
  EXPECT_EQ(flush_queue, "recv");
  EXPECT_TRUE(error_before_flush);
  // The time in each state, as spans named after it.
  std::set<std::string> spans;
  for (const Value* e : a.events)
    if (e->Str("ph") == "X") spans.insert(e->Str("name"));
  EXPECT_EQ(spans, (std::set<std::string>{"RESET", "INIT", "RTR", "RTS", "ERR"}));
  const std::string la = SummaryLine(0, qpn_a_), lb = SummaryLine(1, qpn_b_);
  EXPECT_GE(Field(la, "rnr_naks_in"), 1u) << la;
  EXPECT_GE(Field(lb, "rnr_naks_out"), 1u) << lb;
  EXPECT_NE(la.find(" state=ERR "), std::string::npos) << la;
  EXPECT_EQ(Field(la, "completions_in_error"), 0u) << la;  // flushes apart
}

// What a LosingTransport saw; outlives it (the device owns the transport).
struct LossLog {
  faults::FaultEventSink* sink = nullptr;
  int sink_calls = 0;
  int dropped = 0;
  bool destroyed = false;
  faults::FaultEventSink* sink_at_destruction = nullptr;
};

// A transport that loses every 8th request it sends and reports each loss
// to the sink it was given, as the fault transport does.
class LosingTransport final : public transport::Transport {
 public:
  LosingTransport(std::unique_ptr<transport::Transport> udp, LossLog* log)
      : udp_(std::move(udp)), log_(log) {}
  ~LosingTransport() override {
    log_->destroyed = true;
    log_->sink_at_destruction = log_->sink;
  }
  std::span<const transport::Endpoint> locals() const override { return udp_->locals(); }
  int SendBurst(const transport::TxPacket* p, int n) override {
    std::vector<transport::TxPacket> kept;
    for (int i = 0; i < n; ++i) {
      const uint8_t* bth = p[i].data;
      const uint8_t opcode = bth[0];
      const bool request = opcode != 0x11;  // RC ACKNOWLEDGE
      if (request && ++requests_ % 8 == 0 && log_->sink != nullptr) {
        faults::FaultEvent f;
        f.kind = faults::FaultKind::kDrop;
        f.direction = faults::Direction::kOut;
        f.peer = p[i].dst.gid.raw;
        f.dest_qpn = (uint32_t{bth[5]} << 16) | (uint32_t{bth[6]} << 8) | bth[7];
        f.psn = ((uint32_t{bth[9]} << 16) | (uint32_t{bth[10]} << 8) | bth[11]) & 0xFFFFFF;
        f.opcode = opcode;
        f.length = p[i].length;
        log_->sink->OnFault(f);
        ++log_->dropped;
        continue;
      }
      kept.push_back(p[i]);
    }
    if (!kept.empty()) udp_->SendBurst(kept.data(), static_cast<int>(kept.size()));
    return n;
  }
  int RecvBurst(transport::RxPacket* p, int n) override { return udp_->RecvBurst(p, n); }
  int pollable_fd() const override { return udp_->pollable_fd(); }
  const transport::TransportCounters& counters() const override { return udp_->counters(); }
  void SetFaultEventSink(faults::FaultEventSink* sink) override {
    log_->sink = sink;
    ++log_->sink_calls;
  }

 private:
  std::unique_ptr<transport::Transport> udp_;
  LossLog* log_;
  uint64_t requests_ = 0;
};

TEST_F(TraceTest, FaultsTheTransportReportsLandOnTheQpWhosePacketItWas) {
  QpOptions o;
  o.timeout = kLossyLinkTimeout;
  EngineConfig ca = Traced(0);
  std::string error;
  auto udp = transport::CreateTransport(ca.udp, transport::TransportMode::kUdp, &error);
  ASSERT_NE(udp, nullptr) << error;
  LossLog log;
  auto dev = Device::Create(std::make_unique<LosingTransport>(std::move(udp), &log), ca);
  ASSERT_NE(dev, nullptr);
  EXPECT_NE(log.sink, nullptr);  // the trace registered itself
  SetupSide(a_, dev, o);
  dev.reset();
  SetupSide(b_, MakeDevice(Traced(1)), o);
  Connect(a_, b_, o);
  Connect(b_, a_, o);
  qpn_a_ = a_.dev->QpNum(a_.qp);
  qpn_b_ = b_.dev->QpNum(b_.qp);
  for (uint32_t i = 0; i < 10; ++i) {
    WriteAndCheck(a_, b_, 0, 8 * 1024, i + 1);
    if (::testing::Test::HasFailure()) return;
  }
  a_.dev.reset();
  ASSERT_TRUE(log.destroyed);
  // Closing took the sink back before the trace went.
  EXPECT_EQ(log.sink_calls, 2);
  EXPECT_EQ(log.sink_at_destruction, nullptr);
  b_.dev.reset();
  ASSERT_GT(log.dropped, 0);

  auto tracks = Load(0);
  const Track& a = tracks[qpn_a_];
  EXPECT_EQ(a.names.count("drop"), static_cast<size_t>(log.dropped));
  char want[16];
  std::snprintf(want, sizeof want, "0x%x", qpn_b_);
  for (const Value* e : a.events) {
    if (e->Str("name") != "drop") continue;
    EXPECT_EQ(e->Str("cat"), "fault");
    EXPECT_EQ(e->Get("args")->Str("direction"), "out");
    EXPECT_EQ(e->Get("args")->Str("dest_qpn"), want);
  }
  EXPECT_EQ(doc_[0].Get("otherData")->Num("faults"), log.dropped);
  EXPECT_EQ(doc_[0].Get("otherData")->Num("wire_faults"), 0);
  EXPECT_EQ(Field(SummaryLine(0, qpn_a_), "faults"), static_cast<uint64_t>(log.dropped));
}

// Without SOFTRNIC_TRACE: no sink for the transport, no file.
TEST_F(TraceTest, OffMeansNoSinkAndNoFile) {
  EngineConfig c = TestConfig(0);
  c.transport_mode = transport::TransportMode::kUdp;
  std::string error;
  auto udp = transport::CreateTransport(c.udp, transport::TransportMode::kUdp, &error);
  ASSERT_NE(udp, nullptr) << error;
  LossLog log;
  auto dev = Device::Create(std::make_unique<LosingTransport>(std::move(udp), &log), c);
  ASSERT_NE(dev, nullptr);
  dev.reset();
  EXPECT_TRUE(log.destroyed);
  EXPECT_EQ(log.sink_calls, 0);
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

}  // namespace
}  // namespace softrnic::engine::testing
