// `softrnic`: command-line tool for running softrnic devices.
//
//   softrnic stat [-p PID] [-w SECS [-c COUNT]] [-r | -j | -P] [-q] [-d DIR] [--clean]
//
// Lists every live process with a softrnic device and its counters, read
// from the files the engine's StatsPublisher keeps in /dev/shm. A user sees
// its own processes, root everyone's; each is labelled with its uid (the
// owner of the file, which must also run the pid). Files are read as other
// users may have planted them: regular files only, at most 1 MiB, never
// through a symlink or FIFO, and their strings printed escaped
// (src/engine/observe/stats_publisher.h), in the spirit of `rdma statistic`:
// packets and bytes per direction, retransmissions, NAKs by kind, RNR,
// drops by reason, ICRC errors, duplicates.
//
//   -p PID     only this process
//   -w SECS    watch: every SECS seconds print per-second rates of the
//              counters that changed (Ctrl-C to stop; -c COUNT intervals)
//   -r         raw: "pid PID name value" per counter (for scripts)
//   -j         JSON: one object per process
//   -P, --prometheus  the Prometheus text exposition format
//              (prometheus_format.h; not with -w: Prometheus computes rates)
//   -q, --qp   also the per-QP counters: the busiest 256 QPs of each
//              process (stats_publisher.h), in each form (not with -w)
//   -d DIR     read DIR instead of $SOFTRNIC_STATS_DIR or /dev/shm
//   --clean    also remove files whose pid now runs another program
//
// Every run first sweeps what this user's dead processes left behind (a
// process killed by SIGKILL cannot remove its own files): their stats files
// (SweepStaleStatsFiles) and their shared-memory endpoint links
// (transport::ShmSweepStaleLinks). Other users' files are never touched.
//
// Exit status: 0 on success, 1 if no process matched, 2 on usage errors.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "prometheus_format.h"
#include "printable.h"
#include "engine/observe/stats_publisher.h"
#include "transport/shm_registry.h"

namespace {

using softrnic::engine::ReadStatsDir;
using softrnic::engine::StatsFile;
using softrnic::engine::StatsPublisher;

struct Options {
  int pid = 0;
  double watch = 0;
  long count = 0;  // 0 = forever
  bool raw = false;
  bool json = false;
  bool prometheus = false;
  bool qp = false;
  bool clean = false;
  std::string dir;
};

volatile sig_atomic_t g_stop = 0;

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: softrnic stat [-p PID] [-w SECS [-c COUNT]] [-r | -j | -P] [-q] [-d DIR] [--clean]\n"
               "Shows the counters of every running softrnic device (see docs/hardening.md):\n"
               "-r \"pid PID name value\" lines, -j JSON, -P (--prometheus) the Prometheus text\n"
               "format (softrnic_<counter>_total{pid,uid,device,port}); -w SECS per-second rates;\n"
               "-q (--qp) also per-QP counters of the busiest 256 QPs of each process\n"
               "(softrnic_qp_<counter>_total{...,qpn,type} with -P; not with -w).\n"
               "Removes the stats files and endpoint links that this user's dead processes left\n"
               "in the directory; --clean also those whose pid now runs another program.\n"
               "Exit status: 0 on success, 1 if no process matched, 2 on usage errors.\n");
}

// Human-readable groups: (title, {(label, counter)...}).
struct Group {
  const char* title;
  std::vector<std::pair<const char*, const char*>> items;
};
const std::vector<Group>& Groups() {
  static const std::vector<Group> groups = {
      {"packets", {{"rx", "udp_rx_packets"}, {"tx", "udp_tx_packets"},
                   {"engine_rx", "rx_packets"}, {"engine_tx", "tx_packets"}}},
      {"bytes", {{"rx", "udp_rx_bytes"}, {"tx", "udp_tx_bytes"},
                 {"engine_rx", "rx_bytes"}, {"engine_tx", "tx_bytes"}}},
      {"retransmit", {{"timeouts", "retransmit_timeouts"}, {"rewinds", "retransmit_rewinds"},
                      {"packets", "tx_retransmit_packets"}, {"bytes", "tx_retransmit_bytes"},
                      {"probes", "retransmit_probes"}, {"deferred", "retransmit_timeouts_deferred"}}},
      {"selective", {{"sacks_tx", "tx_sacks"}, {"sacks_rx", "rx_sacks"},
                     {"sacks_invalid", "rx_sacks_invalid"}, {"ooo_kept", "rx_ooo_kept"},
                     {"ooo_dropped", "rx_ooo_dropped"}}},
      {"congestion", {{"cnp_tx", "tx_cnp"}, {"loss_cuts", "cc_loss_cuts"},
                      {"cnp_cuts", "cc_cnp_cuts"}, {"delay_cuts", "cc_delay_cuts"},
                      {"loss_ignored", "cc_loss_ignored"}}},
      {"naks_tx", {{"seq", "tx_naks_sequence"}, {"inv_req", "tx_naks_invalid_request"},
                   {"rem_access", "tx_naks_remote_access"},
                   {"rem_op", "tx_naks_remote_operational"}}},
      {"naks_rx", {{"all", "rx_naks"}}},
      {"rnr", {{"tx", "tx_rnr_naks"}, {"rx", "rx_rnr_naks"}}},
      {"drops", {{"parse", "rx_dropped_parse"}, {"unknown_qp", "rx_dropped_unknown_qp"},
                 {"qp_state", "rx_dropped_qp_state"}, {"source", "rx_dropped_source"},
                 {"service", "rx_dropped_service"}, {"pkey", "rx_dropped_pkey"},
                 {"qkey", "rx_dropped_qkey"}, {"no_recv", "rx_dropped_no_recv"}, {"invalid", "rx_dropped_invalid"}}},
      // Sealed RC (docs/sealed.md): connections and packets sealed, and
      // what was refused.
      {"sealed", {{"qps", "qps_sealed"}, {"tx", "tx_sealed_packets"}, {"rx", "rx_sealed_packets"},
                  {"forged", "rx_dropped_seal_auth"}, {"replays", "rx_dropped_seal_replay"},
                  {"plain_refused", "rx_dropped_unsealed"},
                  {"unexpected", "rx_dropped_seal_unexpected"}, {"errors", "tx_seal_errors"},
                  {"cm_exchanges", "cm_seal_exchanges"}, {"cm_declined", "cm_seal_declined"},
                  {"cm_refused", "cm_seal_refused"}}},
      {"errors", {{"icrc", "udp_rx_icrc_errors"}, {"icrc_id_retries", "udp_rx_icrc_id_retries"},
                  {"runts", "udp_rx_runts"},
                  {"tx_errors", "udp_tx_errors"}, {"tx_busy", "udp_tx_busy"},
                  {"cq_overflows", "cq_overflows"}}},
      {"cqe_errors", {{"send", "send_cqe_errors"}, {"recv", "recv_cqe_errors"},
                      {"send_flush", "send_cqe_flushes"}, {"recv_flush", "recv_cqe_flushes"},
                      {"retry_exc", "retry_exceeded_errors"},
                      {"rnr_retry_exc", "rnr_retry_exceeded_errors"}}},
      {"sequence", {{"duplicates", "rx_duplicates"}, {"out_of_seq", "rx_out_of_sequence"},
                    {"cnp", "rx_cnp"}}},
      // Refused as forged or impossible (docs/security.md, "Packets from the network").
      {"refused", {{"src_port", "rx_dropped_source_port"}, {"resp_unsent", "rx_responses_unsent"},
                   {"resp_stale", "rx_responses_stale"}, {"resp_bad_syn", "rx_responses_bad_syndrome"},
                   {"rnr_invalid", "rx_rnr_naks_invalid"},
                   {"cnp_ignored", "rx_cnp_ignored"}, {"sr_unneg", "rx_sr_unnegotiated"},
                   {"ooo_conflicts", "rx_ooo_conflicts"}, {"ooo_forged", "rx_ooo_forgery_detected"},
                   {"rd_atomic_limit", "tx_naks_rd_atomic_limit"},
                   {"icrc_retry_crcs", "udp_rx_icrc_id_retry_crcs"}}},
      {"faults", {{"drops", "fault_drops"}, {"dups", "fault_dups"},
                  {"reorders", "fault_reorders"}, {"corrupts", "fault_corrupts"},
                  {"delays", "fault_delays"}, {"pauses", "fault_pauses"},
                  {"ecn_marks", "fault_ecn_marks"}}},
      // Same-host paths: packets through shared-memory rings, and one-sided
      // operations done directly on the peer's memory (no packet at all).
      {"shm", {{"tx", "shm_tx_packets"}, {"tx_bytes", "shm_tx_bytes"}, {"rx", "shm_rx_packets"},
               {"doorbells_tx", "shm_doorbells_sent"}, {"doorbells_rx", "shm_rx_doorbells"},
               {"stall_alarms", "shm_stall_alarms"}}},
      {"direct", {{"ops", "shm_direct_ops"}, {"bytes", "shm_direct_bytes"},
                  {"write", "shm_direct_write_ops"}, {"write_bytes", "shm_direct_write_bytes"},
                  {"read", "shm_direct_read_ops"}, {"read_bytes", "shm_direct_read_bytes"},
                  {"atomic", "shm_direct_atomic_ops"}, {"send", "shm_direct_send_ops"},
                  {"send_bytes", "shm_direct_send_bytes"}, {"recv", "shm_direct_recv_ops"},
                  {"recv_bytes", "shm_direct_recv_bytes"}, {"placed", "shm_placed_write_ops"},
                  {"placed_bytes", "shm_placed_write_bytes"},
                  {"placed_rx", "shm_placed_rx_packets"}}},
  };
  return groups;
}

// Strings in a stats file are whatever bytes its writer put there (security
// review L2): never sent to the terminal raw (escape sequences, Printable)
// or into JSON unescaped.
using softrnic::tools::Printable;

// A JSON string literal (with quotes) for any bytes: ASCII control
// characters and every non-ASCII byte become \u00NN, so the output is valid
// JSON (and valid UTF-8) whatever the file held.
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(char(c));
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(char(c));
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", unsigned(c));
      out += esc;
    }
  }
  return out + "\"";
}

bool Known(const std::string& name) {
  for (const Group& g : Groups())
    for (const auto& item : g.items)
      if (name == item.second) return true;
  return false;
}

std::string Gids(const StatsFile& f) {
  std::string s;
  for (const std::string& g : f.gids) s += (s.empty() ? "" : ",") + Printable(g);
  return s.empty() ? "-" : s;
}

std::string Num(double v, bool rate) {
  char buf[64];
  if (rate && v != static_cast<double>(static_cast<uint64_t>(v)))
    std::snprintf(buf, sizeof(buf), "%.1f", v);
  else
    std::snprintf(buf, sizeof(buf), "%" PRIu64, static_cast<uint64_t>(v));
  return buf;
}

// values: counter -> value (a total, or a per-second rate in watch mode).
void PrintHuman(const StatsFile& f, const std::map<std::string, double>& values, bool rate,
                bool only_nonzero) {
  std::printf("pid %d %s %s gid %s uid %u%s\n", f.pid, Printable(f.comm).c_str(),
              Printable(f.device).c_str(), Gids(f).c_str(), unsigned(f.owner), rate ? " (per second)" : "");
  auto value = [&](const char* name) {
    auto it = values.find(name);
    return it == values.end() ? 0.0 : it->second;
  };
  for (const Group& g : Groups()) {
    std::string line;
    bool any = false;
    for (const auto& [label, name] : g.items) {
      const double v = value(name);
      if (v != 0) any = true;
      line += std::string(" ") + label + " " + Num(v, rate);
    }
    if (only_nonzero && !any) continue;
    std::printf("    %-11s%s\n", g.title, line.c_str());
  }
  // Counters added to the engine after this tool was written.
  std::string extra;
  for (const auto& [name, v] : values)
    if (!Known(name) && (!only_nonzero || v != 0)) extra += " " + Printable(name) + " " + Num(v, rate);
  if (!extra.empty()) std::printf("    %-11s%s\n", "other", extra.c_str());
}

// --qp: one line per QP listed, then its counters.
void PrintHumanQps(const StatsFile& f) {
  if (!f.has_qps) {
    std::printf("    qps        (not in this file: a softrnic older than per-QP counters)\n");
    return;
  }
  std::printf("    qps        %" PRIu64 " live, %zu listed%s\n", f.live_qps, f.qps.size(),
              f.live_qps > f.qps.size() ? " (the busiest; idle QPs are listed once used)" : "");
  for (const StatsFile::Qp& qp : f.qps) {
    std::printf("    qp %u %s %s peer %s qpn %s\n", qp.qpn, Printable(qp.type).c_str(),
                Printable(qp.state).c_str(), Printable(qp.peer_gid).c_str(),
                Printable(qp.peer_qpn).c_str());
    std::string line;
    for (const auto& [name, v] : qp.counters) line += " " + Printable(name) + " " + Num(double(v), false);
    std::printf("       %s\n", line.c_str());
  }
}

void PrintRawQps(const StatsFile& f) {
  for (const StatsFile::Qp& qp : f.qps)
    for (const auto& [name, v] : qp.counters)
      std::printf("pid %d qp %u %s %" PRIu64 "\n", f.pid, qp.qpn, Printable(name).c_str(), v);
}

// The "qps" member of a process's JSON object (with its leading ", ").
std::string JsonQps(const StatsFile& f) {
  std::string out = ", \"live_qps\": " + std::to_string(f.live_qps) + ", \"qps\": [";
  for (size_t i = 0; i < f.qps.size(); ++i) {
    const StatsFile::Qp& qp = f.qps[i];
    out += std::string(i ? ", " : "") + "{\"qpn\": " + std::to_string(qp.qpn) +
           ", \"type\": " + JsonString(qp.type) + ", \"state\": " + JsonString(qp.state) +
           ", \"peer_gid\": " + JsonString(qp.peer_gid) + ", \"peer_qpn\": " +
           JsonString(qp.peer_qpn) + ", \"counters\": {";
    // The last field of a name wins (a duplicate key would make the JSON ambiguous).
    std::map<std::string, uint64_t> values;
    for (const auto& [name, v] : qp.counters) values[name] = v;
    std::map<std::string, bool> printed;
    bool first = true;
    for (const auto& [name, v] : qp.counters) {
      (void)v;
      if (printed[name]) continue;
      printed[name] = true;
      out += std::string(first ? "" : ", ") + JsonString(name) + ": " + std::to_string(values[name]);
      first = false;
    }
    out += "}}";
  }
  return out + "]";
}

void PrintRaw(const StatsFile& f, const std::map<std::string, double>& values, bool rate) {
  for (const auto& [name, v] : f.counters) {
    (void)v;
    auto it = values.find(name);
    std::printf("pid %d %s %s\n", f.pid, Printable(name).c_str(), Num(it->second, rate).c_str());
  }
}

void PrintJson(const StatsFile& f, const std::map<std::string, double>& values, bool rate, bool last,
               bool qps) {
  std::printf("  {\"pid\": %d, \"uid\": %u, \"comm\": %s, \"device\": %s, \"gids\": [", f.pid,
              unsigned(f.owner), JsonString(f.comm).c_str(), JsonString(f.device).c_str());
  for (size_t i = 0; i < f.gids.size(); ++i)
    std::printf("%s%s", i ? ", " : "", JsonString(f.gids[i]).c_str());
  std::printf("], \"%s\": {", rate ? "rates" : "counters");
  // A counter named twice (a forged or corrupt file) is printed once: JSON
  // objects with duplicate keys are ambiguous.
  std::map<std::string, bool> printed;
  bool first = true;
  for (const auto& [name, v] : f.counters) {
    (void)v;
    if (printed[name]) continue;
    printed[name] = true;
    std::printf("%s%s: %s", first ? "" : ", ", JsonString(name).c_str(), Num(values.at(name), rate).c_str());
    first = false;
  }
  std::printf("}%s}%s\n", qps ? JsonQps(f).c_str() : "", last ? "" : ",");
}

std::vector<StatsFile> Load(const Options& o) {
  std::vector<StatsFile> files = ReadStatsDir(o.dir, o.clean);
  if (o.pid) {
    std::vector<StatsFile> mine;
    for (auto& f : files)
      if (f.pid == o.pid) mine.push_back(std::move(f));
    files.swap(mine);
  }
  return files;
}

std::map<std::string, double> Totals(const StatsFile& f) {
  std::map<std::string, double> m;
  for (const auto& [k, v] : f.counters) m[k] = static_cast<double>(v);
  return m;
}

void Print(const std::vector<StatsFile>& files,
           const std::vector<std::map<std::string, double>>& values, const Options& o, bool rate) {
  if (o.json) std::printf("[\n");
  for (size_t i = 0; i < files.size(); ++i) {
    if (o.json) {
      PrintJson(files[i], values[i], rate, i + 1 == files.size(), o.qp);
    } else if (o.raw) {
      PrintRaw(files[i], values[i], rate);
      if (o.qp) PrintRawQps(files[i]);
    } else {
      PrintHuman(files[i], values[i], rate, rate);
      if (o.qp) PrintHumanQps(files[i]);
    }
  }
  if (o.json) std::printf("]\n");
  std::fflush(stdout);
}

int Show(const Options& o) {
  const std::vector<StatsFile> files = Load(o);
  if (files.empty()) {
    std::fprintf(stderr, "softrnic: no running softrnic device%s in %s\n",
                 o.pid ? (" with pid " + std::to_string(o.pid)).c_str() : "", o.dir.c_str());
    return 1;
  }
  if (o.prometheus) {
    const std::string text = softrnic::tools::FormatPrometheus(files, o.qp);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return 0;
  }
  std::vector<std::map<std::string, double>> values;
  for (const StatsFile& f : files) values.push_back(Totals(f));
  Print(files, values, o, false);
  return 0;
}

int Watch(const Options& o) {
  using Clock = std::chrono::steady_clock;
  // Keyed by file path: a process may have several devices.
  std::map<std::string, std::map<std::string, double>> prev;
  Clock::time_point prev_t = Clock::now();
  for (const StatsFile& f : Load(o)) prev[f.path] = Totals(f);
  if (prev.empty()) {
    std::fprintf(stderr, "softrnic: no running softrnic device in %s\n", o.dir.c_str());
    return 1;
  }
  for (long n = 0; !g_stop && (o.count == 0 || n < o.count); ++n) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.watch));
    if (g_stop) break;
    const Clock::time_point now = Clock::now();
    const double dt = std::chrono::duration<double>(now - prev_t).count();
    prev_t = now;
    const std::vector<StatsFile> files = Load(o);
    std::vector<std::map<std::string, double>> rates;
    std::map<std::string, std::map<std::string, double>> next;
    for (const StatsFile& f : files) {
      std::map<std::string, double> cur = Totals(f), r;
      const auto it = prev.find(f.path);
      for (const auto& [k, v] : cur) {
        const double before = it == prev.end() ? 0.0 : it->second.count(k) ? it->second.at(k) : 0.0;
        r[k] = v >= before ? (v - before) / dt : 0.0;
      }
      rates.push_back(std::move(r));
      next[f.path] = std::move(cur);
    }
    prev.swap(next);
    if (!o.json && !o.raw) {
      char ts[32];
      const time_t t = time(nullptr);
      strftime(ts, sizeof(ts), "%H:%M:%S", localtime(&t));
      std::printf("--- %s, %zu process%s, interval %.2f s\n", ts, files.size(),
                  files.size() == 1 ? "" : "es", dt);
    }
    Print(files, rates, o, true);
  }
  return 0;
}

}  // namespace

// argv[0] is "stat" (main in softrnic.cc dispatches here).
int softrnic::tools::StatMain(int argc, char** argv) {
  Options o;
  o.dir = StatsPublisher::Directory();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto need = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "softrnic: %s needs %s\n", a.c_str(), what);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "show") continue;  // `softrnic stat show`, as `rdma statistic show`
    if (a == "-p" || a == "--pid") o.pid = std::atoi(need("a pid"));
    else if (a == "-w" || a == "--watch") o.watch = std::atof(need("seconds"));
    else if (a == "-c" || a == "--count") o.count = std::atol(need("a count"));
    else if (a == "-r" || a == "--raw") o.raw = true;
    else if (a == "-j" || a == "--json") o.json = true;
    else if (a == "-P" || a == "--prometheus") o.prometheus = true;
    else if (a == "-q" || a == "--qp") o.qp = true;
    else if (a == "-d" || a == "--dir") o.dir = need("a directory");
    else if (a == "--clean") o.clean = true;
    else if (a == "-h" || a == "--help") {
      Usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "softrnic: unknown option '%s'\n", a.c_str());
      Usage(stderr);
      return 2;
    }
  }
  if ((o.pid < 0) || (o.watch < 0) || (int(o.raw) + int(o.json) + int(o.prometheus) > 1) ||
      (o.prometheus && o.watch > 0) || (o.qp && o.watch > 0)) {
    Usage(stderr);
    return 2;
  }
  // Leftovers of this user's processes killed by a signal (files of live
  // processes, and every other user's files, stay).
  softrnic::engine::SweepStaleStatsFiles(o.dir);
  softrnic::transport::ShmSweepStaleLinks();
  signal(SIGINT, [](int) { g_stop = 1; });
  signal(SIGTERM, [](int) { g_stop = 1; });
  return o.watch > 0 ? Watch(o) : Show(o);
}
