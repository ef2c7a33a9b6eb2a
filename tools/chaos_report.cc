#include "chaos_report.h"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace softrnic::tools {
namespace {

bool ParseField(const std::string& word, const char* key, uint64_t* out) {
  const size_t n = std::strlen(key);
  if (word.size() <= n + 1 || word.compare(0, n, key) != 0 || word[n] != '=') return false;
  const std::string digits = word.substr(n + 1);
  if (digits.empty() || digits.size() > 19 ||
      !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return false;
  *out = std::strtoull(digits.c_str(), nullptr, 10);
  return true;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool CrashSignal(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGABRT;
}

std::string Status(int exit_status, int sig, bool hung) {
  if (hung) return "hung";
  if (sig) return std::string("SIG") + (sigabbrev_np(sig) ? sigabbrev_np(sig) : std::to_string(sig).c_str());
  return std::to_string(exit_status);
}

}  // namespace

bool AddTraceSummary(const std::string& text, TraceTotals* into) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("total ", 0) != 0) continue;
    std::istringstream words(line.substr(6));
    std::string w;
    TraceTotals t;
    while (words >> w) {
      ParseField(w, "qps", &t.qps) || ParseField(w, "retransmitted", &t.retransmitted) ||
          ParseField(w, "timeouts", &t.timeouts) || ParseField(w, "rnr_naks_in", &t.rnr_naks_in) ||
          ParseField(w, "rnr_naks_out", &t.rnr_naks_out) ||
          ParseField(w, "completions_in_error", &t.completions_in_error) ||
          ParseField(w, "faults", &t.faults);
    }
    into->qps += t.qps;
    into->retransmitted += t.retransmitted;
    into->timeouts += t.timeouts;
    into->rnr_naks_in += t.rnr_naks_in;
    into->rnr_naks_out += t.rnr_naks_out;
    into->completions_in_error += t.completions_in_error;
    into->faults += t.faults;
    return true;
  }
  return false;
}

bool LooksLikeError(const std::string& line) {
  const std::string l = Lower(line);
  for (const char* word : {"error", "failed", "failure", "fatal", "abort", "couldn't", "unable"})
    if (l.find(word) != std::string::npos) return true;
  return false;
}

std::string Verdict(const ChaosRun& run) {
  if (CrashSignal(run.signal) || (run.has_server && CrashSignal(run.server_signal))) return "CRASH";
  if (run.hung || (run.has_server && run.server_hung)) return "HANG";
  if (run.signal || run.exit_status != 0 ||
      (run.has_server && !run.server_stopped && (run.server_signal || run.server_exit_status != 0)))
    return "FAILED";
  return "ok";
}

std::string Why(const ChaosRun& run, double limit_seconds) {
  const std::string v = Verdict(run);
  if (v == "ok") return "";
  std::string why;
  auto add = [&why](const std::string& s) { why += (why.empty() ? "" : "; ") + s; };
  char buf[96];
  if (run.hung || run.server_hung) {
    std::snprintf(buf, sizeof buf, "still running after the %.0f s limit: killed", limit_seconds);
    add(buf);
  }
  if (run.signal) add("the command was killed by " + Status(0, run.signal, false));
  if (run.has_server && run.server_stopped)
    add("the server was still waiting 5 s after its client failed: stopped");
  else if (run.has_server && run.server_signal)
    add("the server was killed by " + Status(0, run.server_signal, false));
  if (!run.hung && !run.signal && run.exit_status)
    add("the command exited " + std::to_string(run.exit_status));
  if (run.has_server && !run.server_stopped && !run.server_hung && !run.server_signal &&
      run.server_exit_status)
    add("the server exited " + std::to_string(run.server_exit_status));
  if (run.totals && run.totals->completions_in_error)
    add(std::to_string(run.totals->completions_in_error) + " completions in error reached the application");
  if (!run.first_error_line.empty()) add("\"" + run.first_error_line.substr(0, 100) + "\"");
  return why;
}

std::string FormatChaosTable(const std::vector<ChaosRun>& runs, double limit_seconds) {
  const std::vector<std::string> head = {"scenario", "verdict", "exit", "time(s)", "retransmitted",
                                         "timeouts", "errors", "faults"};
  std::vector<std::vector<std::string>> rows;
  for (const ChaosRun& r : runs) {
    std::string exit = Status(r.exit_status, r.signal, r.hung);
    if (r.has_server)
      exit += "/" + (r.server_stopped ? std::string("stopped")
                                      : Status(r.server_exit_status, r.server_signal, r.server_hung));
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", r.seconds);
    auto n = [&r](uint64_t TraceTotals::*field) {
      return r.totals ? std::to_string((*r.totals).*field) : std::string("-");
    };
    rows.push_back({r.scenario, Verdict(r), exit, secs, n(&TraceTotals::retransmitted),
                    n(&TraceTotals::timeouts), n(&TraceTotals::completions_in_error),
                    n(&TraceTotals::faults)});
  }
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) {
      out += cells[c];
      if (c + 1 < cells.size()) out += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    out += "\n";
  };
  line(head);
  for (const auto& row : rows) line(row);
  bool any = false;
  for (const ChaosRun& r : runs) {
    const std::string why = Why(r, limit_seconds);
    if (why.empty()) continue;
    if (!any) out += "\n";
    any = true;
    out += r.scenario + ": " + Verdict(r) + ": " + why + "\n";
  }
  return out;
}

}  // namespace softrnic::tools
