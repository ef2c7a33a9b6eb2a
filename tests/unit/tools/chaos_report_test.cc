// `softrnic chaos`'s table and verdicts (tools/chaos_report.h).
#include "chaos_report.h"

#include <csignal>

#include <gtest/gtest.h>

namespace softrnic::tools {
namespace {

TEST(ChaosReport, AddsTheTotalLinesOfSeveralSummaries) {
  TraceTotals t;
  EXPECT_TRUE(AddTraceSummary(
      "qp=0x00a1b2 type=RC state=RTS sent=10 retransmitted=3 timeouts=1 rnr_naks_in=0 rnr_naks_out=0 "
      "completions_in_error=0 faults=4\n"
      "total qps=1 retransmitted=3 timeouts=1 rnr_naks_in=0 rnr_naks_out=2 completions_in_error=0 faults=4\n",
      &t));
  EXPECT_TRUE(AddTraceSummary("total qps=2 retransmitted=5 timeouts=0 rnr_naks_in=1 rnr_naks_out=0 "
                              "completions_in_error=7 faults=9\n",
                              &t));
  EXPECT_EQ(t.qps, 3u);
  EXPECT_EQ(t.retransmitted, 8u);
  EXPECT_EQ(t.timeouts, 1u);
  EXPECT_EQ(t.rnr_naks_in, 1u);
  EXPECT_EQ(t.rnr_naks_out, 2u);
  EXPECT_EQ(t.completions_in_error, 7u);
  EXPECT_EQ(t.faults, 13u);
}

TEST(ChaosReport, ASummaryWithoutATotalLineOrWithJunkAddsNothing) {
  TraceTotals t;
  EXPECT_FALSE(AddTraceSummary("qp=0x1 retransmitted=3\n", &t));
  EXPECT_FALSE(AddTraceSummary("", &t));
  // Junk values are ignored, not misread.
  EXPECT_TRUE(AddTraceSummary("total retransmitted=-4 faults=12x timeouts=99999999999999999999999 qps=2\n", &t));
  EXPECT_EQ(t.retransmitted, 0u);
  EXPECT_EQ(t.faults, 0u);
  EXPECT_EQ(t.timeouts, 0u);
  EXPECT_EQ(t.qps, 2u);
}

TEST(ChaosReport, VerdictsSayCrashHangFailedOrOk) {
  ChaosRun ok;
  EXPECT_EQ(Verdict(ok), "ok");
  EXPECT_EQ(Why(ok, 60), "");
  ChaosRun failed;
  failed.exit_status = 1;
  EXPECT_EQ(Verdict(failed), "FAILED");
  ChaosRun hung;
  hung.hung = true;
  EXPECT_EQ(Verdict(hung), "HANG");
  EXPECT_NE(Why(hung, 30).find("30 s limit"), std::string::npos);
  ChaosRun crash;
  crash.signal = SIGSEGV;
  EXPECT_EQ(Verdict(crash), "CRASH");
  ChaosRun killed;
  killed.signal = SIGTERM;
  EXPECT_EQ(Verdict(killed), "FAILED");
  // The server counts too.
  ChaosRun server_failed;
  server_failed.has_server = true;
  server_failed.server_exit_status = 2;
  EXPECT_EQ(Verdict(server_failed), "FAILED");
  EXPECT_NE(Why(server_failed, 60).find("server exited 2"), std::string::npos);
  ChaosRun server_crash;
  server_crash.has_server = true;
  server_crash.server_signal = SIGABRT;
  EXPECT_EQ(Verdict(server_crash), "CRASH");
}

TEST(ChaosReport, TheTableHasOneAlignedLinePerRunAndSaysWhy) {
  ChaosRun a;
  a.scenario = "none";
  a.seconds = 1.234;
  a.totals = TraceTotals{2, 0, 0, 0, 0, 0, 0};
  ChaosRun b;
  b.scenario = "outage-300ms";
  b.exit_status = 1;
  b.seconds = 2;
  b.totals = TraceTotals{2, 40, 7, 0, 0, 1, 300};
  b.first_error_line = "Failed status transport retry counter exceeded (12)";
  ChaosRun c;
  c.scenario = "peer-pause";
  c.hung = true;
  const std::string t = FormatChaosTable({a, b, c}, 10);
  EXPECT_NE(t.find("scenario"), std::string::npos);
  EXPECT_NE(t.find("none          ok       0     1.23"), std::string::npos) << t;
  EXPECT_NE(t.find("outage-300ms  FAILED   1     2.00     40"), std::string::npos) << t;
  EXPECT_NE(t.find("peer-pause    HANG     hung"), std::string::npos) << t;
  EXPECT_NE(t.find("outage-300ms: FAILED: the command exited 1; 1 completions in error reached the "
                   "application; \"Failed status transport retry counter exceeded (12)\""),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("peer-pause: HANG: still running after the 10 s limit: killed"), std::string::npos) << t;
}

TEST(ChaosReport, ErrorLinesAreRecognised) {
  EXPECT_TRUE(LooksLikeError("Failed status transport retry counter exceeded (12) for wr_id 2"));
  EXPECT_TRUE(LooksLikeError("ERROR: something"));
  EXPECT_TRUE(LooksLikeError("Couldn't connect to 10.0.0.1:18515"));
  EXPECT_FALSE(LooksLikeError(" 65536      5000           4000.00            3900.00"));
}

}  // namespace
}  // namespace softrnic::tools
