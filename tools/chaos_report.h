// `softrnic chaos`'s pure parts (softrnic_chaos.cc runs the programs): what
// one run under one scenario came to, read from the trace summaries the
// runs' devices wrote (SOFTRNIC_TRACE's `<trace>.txt`, docs/fault-lab.md),
// and the verdict table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace softrnic::tools {

// The `total` line of one or more trace summaries, added up.
struct TraceTotals {
  uint64_t qps = 0;
  uint64_t retransmitted = 0;
  uint64_t timeouts = 0;
  uint64_t rnr_naks_in = 0;
  uint64_t rnr_naks_out = 0;
  uint64_t completions_in_error = 0;
  uint64_t faults = 0;
};

// Adds the `total ...` line of a summary's text to *into; false if the text
// has none (a process that died before writing it, or not a summary).
bool AddTraceSummary(const std::string& text, TraceTotals* into);

struct ChaosRun {
  std::string scenario;     // "none" for the baseline run without faults
  int exit_status = 0;      // the client's (or the one command's) exit status
  int signal = 0;           // the signal that killed it, 0 if it exited
  bool hung = false;        // still running at the limit: killed
  int server_exit_status = 0;
  int server_signal = 0;
  bool server_hung = false;
  // Still running 5 s after its client failed: stopped, not counted (a
  // server may wait for a dead client for ever on any NIC).
  bool server_stopped = false;
  bool has_server = false;
  double seconds = 0;
  std::optional<TraceTotals> totals;  // none: no summary was written
  std::string first_error_line;       // the first line of its output that names an error
};

// "ok", "FAILED", "HANG" or "CRASH" (killed by SIGSEGV, SIGBUS, SIGILL,
// SIGFPE or SIGABRT: a crash, whoever's it is).
std::string Verdict(const ChaosRun& run);
// One sentence saying why, when the verdict is not "ok".
std::string Why(const ChaosRun& run, double limit_seconds);

// The table, one line per run, columns aligned.
std::string FormatChaosTable(const std::vector<ChaosRun>& runs, double limit_seconds);

// Whether a line of a program's output reports an error ("error",
// "failed", "fatal", "abort", case-insensitive).
bool LooksLikeError(const std::string& line);

}  // namespace softrnic::tools
