// The trace's writers (engine/trace/trace_recorder.h) on their own: JSON
// strings escaped, the document well-formed and shaped as the Chrome trace
// event format asks (parsed back with a strict reader), faults put on the
// right track, the event cap, and the summary's exact text.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "engine/trace/trace_recorder.h"
#include "json_lite.h"

namespace softrnic::engine::trace {
namespace {

using softrnic::testing::json::Parser;
using softrnic::testing::json::Value;

std::string Escaped(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

Value ParseOrFail(const std::string& text) {
  Value v;
  Parser p(text);
  EXPECT_TRUE(p.Parse(&v)) << p.error() << "\n" << text.substr(0, 2000);
  return v;
}

transport::Gid Peer(uint8_t last) {
  const uint32_t addr = htonl(0x0A000000u | last);  // 10.0.0.<last>
  return transport::Gid::FromIpv4(addr);
}

TEST(TraceJsonString, EscapesWhatJsonRequires) {
  EXPECT_EQ(Escaped("plain"), "\"plain\"");
  EXPECT_EQ(Escaped("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(Escaped("l1\nl2\tx\r"), "\"l1\\nl2\\tx\\r\"");
  EXPECT_EQ(Escaped(std::string_view("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(Escaped(std::string_view("nul\0x", 5)), "\"nul\\u0000x\"");
  // Valid UTF-8 passes unchanged (the arrow in thread names).
  EXPECT_EQ(Escaped("QP \u2192 peer"), "\"QP \u2192 peer\"");
  EXPECT_EQ(Escaped("\xF0\x9F\x98\x80"), "\"\xF0\x9F\x98\x80\"");
  // Invalid UTF-8 becomes U+FFFD escapes, so the document stays valid.
  EXPECT_EQ(Escaped("a\xFF" "b"), "\"a\\ufffdb\"");
  EXPECT_EQ(Escaped("\xC3"), "\"\\ufffd\"");                   // truncated
  EXPECT_EQ(Escaped("\xC0\xAF"), "\"\\ufffd\\ufffd\"");        // overlong
  EXPECT_EQ(Escaped("\xED\xA0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // surrogate
  // Whatever the bytes, the reader gets them back (or U+FFFD).
  std::string all;
  for (int c = 1; c < 128; ++c) all += static_cast<char>(c);
  Value v = ParseOrFail(Escaped(all));
  EXPECT_EQ(v.text, all);
}

TEST(TraceJsonString, QpnText) {
  EXPECT_EQ(QpnText(0xa1b2), "0x00a1b2");
  EXPECT_EQ(QpnText(0xffffff), "0xffffff");
}

// A device with two QPs: a's events, faults both ways, one for no QP.
class TraceRecorderTest : public ::testing::Test {
 protected:
  TraceRecorder rec{"soft\"rnic\\0", 4242};
  static constexpr uint32_t kA = 0x00a1b2, kB = 0x00c3d4, kPeerA = 0x123456;

  void Populate() {
    rec.QpCreated(1'000'000, kA, "RC");
    rec.QpCreated(1'500'000, kB, "UD");
    rec.QpState(2'000'000, kA, "RESET", "INIT", "modify_qp");
    rec.QpPath(kA, Peer(2), kPeerA);
    rec.QpState(3'000'000, kA, "INIT", "RTR", "modify_qp");
    rec.QpState(4'000'000, kA, "RTR", "RTS", "modify_qp");
    rec.Record(5'000'000, kA, EventKind::kRetransmitTimeout, {100, 8, 6, 1});
    rec.Record(5'000'001, kA, EventKind::kRewind, {100, 8, Str("timeout"), 6});
    rec.Record(5'500'000, kA, EventKind::kRnrNakReceived, {101, 14, 6});
    rec.Record(5'600'000, kA, EventKind::kCompletionError,
               {Str("IBV_WC_RETRY_EXC_ERR"), 0xdeadbeefcafef00dull, Str("IBV_WC_RDMA_WRITE"),
                Str("send")});
    rec.Record(5'700'000, 0x777777, EventKind::kRewind, {1, 1, Str("timeout"), 1});  // no such QP
    faults::FaultEvent out;
    out.kind = faults::FaultKind::kDrop;
    out.direction = faults::Direction::kOut;
    out.peer = Peer(2).raw;
    out.dest_qpn = kPeerA;  // a's peer: a's packet
    out.psn = 100;
    rec.OnFault(out);
    faults::FaultEvent in = out;
    in.direction = faults::Direction::kIn;
    in.kind = faults::FaultKind::kDelay;
    in.dest_qpn = kB;  // ours
    in.delay_ns = 200'000;
    rec.OnFault(in);
    faults::FaultEvent stray = out;
    stray.dest_qpn = 1;  // a CM MAD: no local QP
    stray.peer = Peer(9).raw;
    rec.OnFault(stray);
    QpCounters c;
    c.tx_packets = 1200;
    c.tx_retransmit_packets = 14;
    c.retransmit_timeouts = 2;
    c.rx_rnr_naks = 1;
    c.cqe_errors = 1;
    c.cqe_flushes = 5;  // flushes apart
    rec.QpCounterSnapshot(kA, c);
    rec.QpState(6'000'000, kA, "RTS", "ERR", "IBV_WC_RETRY_EXC_ERR");
    QpCounters cb;
    cb.tx_packets = 3;
    cb.tx_rnr_naks = 4;
    rec.QpDestroyed(7'000'000, kB, cb);
  }
};

TEST_F(TraceRecorderTest, WritesTheChromeTraceEventFormat) {
  Populate();
  const std::string text = rec.ToJson(8'000'000);
  const Value doc = ParseOrFail(text);
  ASSERT_EQ(doc.type, Value::Type::kObject);
  EXPECT_EQ(doc.Str("displayTimeUnit"), "ns");
  const Value* events = doc.Get("traceEvents");
  ASSERT_NE(events, nullptr);
  ASSERT_EQ(events->type, Value::Type::kArray);
  const Value* other = doc.Get("otherData");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->Str("device"), "soft\"rnic\\0");
  EXPECT_EQ(other->Num("dropped_events"), 0);
  EXPECT_EQ(other->Num("faults"), 3);
  EXPECT_EQ(other->Num("wire_faults"), 1);

  std::map<uint32_t, std::string> thread_names;
  std::string process_name;
  std::multiset<std::string> names_on_a, names_on_b, names_on_wire;
  std::set<std::string> a_spans;
  for (const Value& e : events->items) {
    ASSERT_EQ(e.type, Value::Type::kObject);
    const std::string ph = e.Str("ph");
    EXPECT_EQ(e.Num("pid"), 4242);
    const uint32_t tid = static_cast<uint32_t>(e.Num("tid"));
    ASSERT_NE(e.Get("name"), nullptr);
    if (ph == "M") {
      const Value* args = e.Get("args");
      ASSERT_NE(args, nullptr);
      if (e.Str("name") == "process_name") process_name = args->Str("name");
      if (e.Str("name") == "thread_name") thread_names[tid] = args->Str("name");
      continue;
    }
    ASSERT_TRUE(ph == "i" || ph == "X") << ph;
    EXPECT_GE(e.Num("ts"), 0);
    ASSERT_NE(e.Get("cat"), nullptr);
    ASSERT_NE(e.Get("args"), nullptr);
    if (ph == "i") {
      EXPECT_EQ(e.Str("s"), "t");
    } else {
      EXPECT_GE(e.Num("dur"), 0);
    }
    if (tid == kA) {
      names_on_a.insert(e.Str("name"));
      if (ph == "X") a_spans.insert(e.Str("name"));
    } else if (tid == kB) {
      names_on_b.insert(e.Str("name"));
    } else {
      names_on_wire.insert(e.Str("name"));
      EXPECT_GE(tid, 0x7F000000u);
    }
  }
  EXPECT_EQ(process_name, "softrnic soft\"rnic\\0 pid 4242");
  EXPECT_EQ(thread_names[kA], "QP 0x00a1b2 RC \u2192 peer QPN 0x123456 (10.0.0.2)");
  EXPECT_EQ(thread_names[kB], "QP 0x00c3d4 UD");
  EXPECT_EQ(thread_names.size(), 3u);  // a, b and one wire track
  bool wire_named = false;
  for (const auto& [tid, name] : thread_names) wire_named |= name == "wire \u2194 10.0.0.9";
  EXPECT_TRUE(wire_named);
  EXPECT_EQ(names_on_a.count("qp_create"), 1u);
  EXPECT_EQ(names_on_a.count("state_change"), 4u);
  EXPECT_EQ(names_on_a.count("retransmit_timeout"), 1u);
  EXPECT_EQ(names_on_a.count("rewind"), 1u);
  EXPECT_EQ(names_on_a.count("rnr_nak_received"), 1u);
  EXPECT_EQ(names_on_a.count("completion_error"), 1u);
  EXPECT_EQ(names_on_a.count("drop"), 1u);  // the sent packet to a's peer
  EXPECT_EQ(a_spans, (std::set<std::string>{"RESET", "INIT", "RTR", "RTS", "ERR"}));
  EXPECT_EQ(names_on_b.count("delay"), 1u);  // received, for b
  EXPECT_EQ(names_on_b.count("qp_destroy"), 1u);
  EXPECT_EQ(names_on_wire.count("drop"), 1u);

  // Arguments as the report names them; 64-bit values as hex strings.
  for (const Value& e : events->items) {
    if (e.Str("name") == "completion_error") {
      const Value* args = e.Get("args");
      EXPECT_EQ(args->Str("status"), "IBV_WC_RETRY_EXC_ERR");
      EXPECT_EQ(args->Str("wr_id"), "0xdeadbeefcafef00d");
      EXPECT_EQ(args->Str("opcode"), "IBV_WC_RDMA_WRITE");
      EXPECT_EQ(args->Str("queue"), "send");
    }
    if (e.Str("name") == "rewind") {
      EXPECT_EQ(e.Get("args")->Num("psn"), 100);
      EXPECT_EQ(e.Get("args")->Num("packets"), 8);
      EXPECT_EQ(e.Get("args")->Str("reason"), "timeout");
      EXPECT_EQ(e.Str("cat"), "retransmit");
      EXPECT_EQ(e.Get("ts")->text, "5000.001");  // microseconds, exact
    }
    if (e.Str("name") == "delay") {
      EXPECT_EQ(e.Get("args")->Num("delay_ns"), 200000);
      EXPECT_EQ(e.Get("args")->Str("direction"), "in");
    }
    if (e.Str("name") == "RTS" && e.Str("ph") == "X") {
      EXPECT_EQ(e.Get("ts")->text, "4000.000");
      EXPECT_EQ(e.Get("dur")->text, "2000.000");
    }
  }
}

TEST_F(TraceRecorderTest, SummaryIsTheDesignPagesFormat) {
  Populate();
  EXPECT_EQ(rec.Summary(),
            "qp=0x00a1b2 type=RC state=ERR sent=1200 retransmitted=14 timeouts=2 rnr_naks_in=1 "
            "rnr_naks_out=0 completions_in_error=1 faults=1\n"
            "qp=0x00c3d4 type=UD state=RESET sent=3 retransmitted=0 timeouts=0 rnr_naks_in=0 "
            "rnr_naks_out=4 completions_in_error=0 faults=1\n"
            "total qps=2 retransmitted=14 timeouts=2 rnr_naks_in=1 rnr_naks_out=4 "
            "completions_in_error=1 faults=3\n");
}

TEST(TraceRecorderCap, KeepsAtMostMaxEventsAndSaysHowManyWereDropped) {
  TraceRecorder rec("softrnic0", 1, 10);
  rec.QpCreated(0, 5, "RC");
  for (int i = 0; i < 100; ++i)
    rec.Record(i, 5, EventKind::kSelectiveResend, {static_cast<uint64_t>(i), 1, 0});
  EXPECT_EQ(rec.events(), 10u);
  EXPECT_EQ(rec.dropped_events(), 91u);
  const Value doc = ParseOrFail(rec.ToJson(1000));
  EXPECT_EQ(doc.Get("otherData")->Num("dropped_events"), 91);
  EXPECT_EQ(doc.Get("otherData")->Num("events"), 10);
}

TEST(TraceRecorderReuse, AQpnUsedAgainGetsATrackOfItsOwn) {
  TraceRecorder rec("softrnic0", 1);
  rec.QpCreated(0, 5, "RC");
  rec.QpDestroyed(10, 5, {});
  rec.QpCreated(20, 5, "RC");
  const Value doc = ParseOrFail(rec.ToJson(30));
  std::set<double> tids;
  for (const Value& e : doc.Get("traceEvents")->items)
    if (e.Str("name") == "thread_name") tids.insert(e.Num("tid"));
  EXPECT_EQ(tids, (std::set<double>{5, 5 + (1u << 24)}));
}

TEST(TraceRecorderEmpty, IsStillAValidDocument) {
  TraceRecorder rec("softrnic0", 1);
  const Value doc = ParseOrFail(rec.ToJson(0));
  EXPECT_EQ(doc.Get("traceEvents")->items.size(), 1u);  // the process name
  EXPECT_EQ(rec.Summary(),
            "total qps=0 retransmitted=0 timeouts=0 rnr_naks_in=0 rnr_naks_out=0 "
            "completions_in_error=0 faults=0\n");
}

}  // namespace
}  // namespace softrnic::engine::trace
