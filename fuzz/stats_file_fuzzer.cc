// libFuzzer target: the stats-file parser `softrnic stat` runs on every
// /dev/shm/softrnic-*.stats it may read (engine::ParseStatsFile,
// src/engine/observe/stats_publisher.cc). Another local user can put any bytes in
// such a file (security review L2); the reader must neither crash nor
// invent data. The input is the file's contents, in a buffer of exactly its
// size, so AddressSanitizer reports any read past it.
//
// Properties checked (abort on violation):
//  - true only for a text whose first line starts with "softrnic-stats "
//    and that names a pid > 0;
//  - no more counters, GIDs and QP lines than the text has lines, and every
//    string kept (comm, device, GIDs, counter names, a QP line's fields and
//    counter names) occurs in the text; a QP number fits in 24 bits;
//  - parsing is deterministic: a second parse gives the same result;
//  - re-serialising what was parsed, in the publisher's format, and parsing
//    that gives the same pid, time, sequence and counters, and the same QP
//    lines (those whose fields can be written back).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/observe/stats_publisher.h"

namespace {

using softrnic::engine::ParseStatsFile;
using softrnic::engine::StatsFile;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "stats_file_fuzzer: property violated: %s\n", what);
  std::abort();
}
#define CHECK(cond)           \
  do {                        \
    if (!(cond)) Fail(#cond); \
  } while (0)

bool Same(const StatsFile& a, const StatsFile& b) {
  if (a.qps.size() != b.qps.size()) return false;
  for (size_t i = 0; i < a.qps.size(); ++i) {
    const StatsFile::Qp &x = a.qps[i], &y = b.qps[i];
    if (x.qpn != y.qpn || x.type != y.type || x.state != y.state || x.peer_gid != y.peer_gid ||
        x.peer_qpn != y.peer_qpn || x.counters != y.counters)
      return false;
  }
  return a.pid == b.pid && a.comm == b.comm && a.device == b.device && a.gids == b.gids &&
         a.time_ns == b.time_ns && a.seq == b.seq && a.counters == b.counters &&
         a.has_qps == b.has_qps && a.live_qps == b.live_qps;
}

// A QP line's field that can be written back as one field.
bool Writable(const std::string& f) {
  return !f.empty() && f.find_first_of(" \n") == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<char[]> buf(new char[size == 0 ? 1 : size]);
  if (size > 0) std::memcpy(buf.get(), data, size);
  const std::string_view text(buf.get(), size);

  StatsFile f;
  const bool ok = ParseStatsFile(text, &f);
  StatsFile again;
  CHECK(ParseStatsFile(text, &again) == ok);
  CHECK(Same(f, again));
  if (!ok) return 0;

  CHECK(text.starts_with("softrnic-stats "));
  CHECK(f.pid > 0);
  size_t lines = 1;
  for (char c : text) lines += c == '\n';
  CHECK(f.counters.size() + f.gids.size() + f.qps.size() < lines);
  CHECK(text.find(f.comm) != std::string_view::npos);
  CHECK(text.find(f.device) != std::string_view::npos);
  for (const std::string& g : f.gids) CHECK(text.find(g) != std::string_view::npos);
  for (const auto& [name, value] : f.counters) {
    CHECK(text.find(name) != std::string_view::npos);
    (void)value;
  }
  for (const StatsFile::Qp& qp : f.qps) {
    CHECK(qp.qpn <= 0xFFFFFF);
    for (const std::string* s : {&qp.type, &qp.state, &qp.peer_gid, &qp.peer_qpn})
      CHECK(text.find(*s) != std::string_view::npos);
    CHECK(!qp.peer_qpn.empty());
    for (const auto& [name, value] : qp.counters) {
      CHECK(!name.empty() && name.find('=') == std::string::npos);
      CHECK(text.find(name) != std::string_view::npos);
      (void)value;
    }
  }

  // The publisher's format again, from what was parsed; strings with a
  // newline cannot be written back as one line and are left out.
  std::string out = "softrnic-stats 1\npid " + std::to_string(f.pid) + "\n";
  out += "time_ns " + std::to_string(f.time_ns) + "\nseq " + std::to_string(f.seq) + "\n";
  for (const auto& [name, value] : f.counters) {
    if (name.empty() || name.find_first_of(" \n") != std::string::npos || name == "pid" ||
        name == "comm" || name == "device" || name == "gid" || name == "time_ns" || name == "seq" ||
        name == "qp" || name == "qps")
      continue;
    out += name + " " + std::to_string(value) + "\n";
  }
  // QP lines with fields that can be written back, in order.
  std::vector<const StatsFile::Qp*> qps;
  for (const StatsFile::Qp& qp : f.qps) {
    bool ok_line = Writable(qp.type) && Writable(qp.state) && Writable(qp.peer_gid) && Writable(qp.peer_qpn);
    for (const auto& [name, value] : qp.counters) ok_line = ok_line && Writable(name);
    if (!ok_line) continue;
    qps.push_back(&qp);
    out += "qp " + std::to_string(qp.qpn) + " " + qp.type + " " + qp.state + " " + qp.peer_gid + " " +
           qp.peer_qpn;
    for (const auto& [name, value] : qp.counters) out += " " + name + "=" + std::to_string(value);
    out += "\n";
  }
  StatsFile round;
  CHECK(ParseStatsFile(out, &round));
  CHECK(round.qps.size() == qps.size());
  for (size_t i = 0; i < qps.size(); ++i) {
    CHECK(round.qps[i].qpn == qps[i]->qpn && round.qps[i].type == qps[i]->type &&
          round.qps[i].state == qps[i]->state && round.qps[i].peer_gid == qps[i]->peer_gid &&
          round.qps[i].peer_qpn == qps[i]->peer_qpn && round.qps[i].counters == qps[i]->counters);
  }
  CHECK(round.pid == f.pid && round.time_ns == f.time_ns && round.seq == f.seq);
  size_t k = 0;
  for (const auto& [name, value] : f.counters) {
    if (name.empty() || name.find_first_of(" \n") != std::string::npos || name == "pid" ||
        name == "comm" || name == "device" || name == "gid" || name == "time_ns" || name == "seq" ||
        name == "qp" || name == "qps")
      continue;
    CHECK(k < round.counters.size());
    CHECK(round.counters[k].first == name && round.counters[k].second == value);
    ++k;
  }
  CHECK(k == round.counters.size());
  return 0;
}
