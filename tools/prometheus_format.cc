#include "prometheus_format.h"

#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>

#include "counter_help.h"

namespace softrnic::tools {
namespace {

// HELP text escapes only `\` and newline.
std::string HelpText(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out.push_back(c);
  }
  return out;
}

std::string MetricName(const std::string& counter) {
  // A counter family's samples end in _total; a counter already named so
  // keeps its name.
  const bool has_total = counter.size() >= 6 && counter.compare(counter.size() - 6, 6, "_total") == 0;
  return "softrnic_" + counter + (has_total ? "" : "_total");
}

std::string Labels(const engine::StatsFile& f) {
  return "pid=\"" + std::to_string(f.pid) + "\",uid=\"" + std::to_string(f.owner) + "\",device=\"" +
         LabelValue(f.device) + "\",port=\"1\"";
}

std::string QpLabels(const engine::StatsFile& f, const engine::StatsFile::Qp& qp) {
  return Labels(f) + ",qpn=\"" + std::to_string(qp.qpn) + "\",type=\"" + LabelValue(qp.type) + "\"";
}

// A QP listed twice in one file (only a forged file does that) would give
// two samples with the same labels, which a parser rejects: the first wins.
bool FirstOfItsQpn(const engine::StatsFile& f, size_t index) {
  for (size_t j = 0; j < index; ++j)
    if (f.qps[j].qpn == f.qps[index].qpn) return false;
  return true;
}

std::string FormatQpFamilies(const std::vector<engine::StatsFile>& files) {
  // Families in the order of the first "qp" line that has them.
  std::vector<std::string> order;
  std::set<std::string> seen;
  for (const engine::StatsFile& f : files)
    for (const engine::StatsFile::Qp& qp : f.qps)
      for (const auto& [name, v] : qp.counters) {
        (void)v;
        if (ValidCounterName(name) && seen.insert(MetricName("qp_" + name)).second)
          order.push_back(name);
      }
  std::string out;
  char num[32];
  for (const std::string& name : order) {
    const std::string metric = MetricName("qp_" + name);
    out += "# HELP " + metric + " " + HelpText(QpCounterHelp(name)) + "\n";
    out += "# TYPE " + metric + " counter\n";
    for (const engine::StatsFile& f : files) {
      for (size_t i = 0; i < f.qps.size(); ++i) {
        if (!FirstOfItsQpn(f, i)) continue;
        const engine::StatsFile::Qp& qp = f.qps[i];
        // The last field of a name wins, as for the device's counters.
        bool found = false;
        uint64_t value = 0;
        for (const auto& [k, v] : qp.counters)
          if (k == name) found = true, value = v;
        if (!found) continue;
        std::snprintf(num, sizeof num, "%" PRIu64, value);
        out += metric + "{" + QpLabels(f, qp) + "} " + num + "\n";
      }
    }
  }
  out += "# HELP softrnic_qp_info A QP listed in a softrnic stats file: its state and peer.\n";
  out += "# TYPE softrnic_qp_info gauge\n";
  for (const engine::StatsFile& f : files)
    for (size_t i = 0; i < f.qps.size(); ++i) {
      if (!FirstOfItsQpn(f, i)) continue;
      const engine::StatsFile::Qp& qp = f.qps[i];
      out += "softrnic_qp_info{" + QpLabels(f, qp) + ",state=\"" + LabelValue(qp.state) +
             "\",peer_gid=\"" + LabelValue(qp.peer_gid) + "\",peer_qpn=\"" +
             LabelValue(qp.peer_qpn) + "\"} 1\n";
    }
  return out;
}

}  // namespace

std::string LabelValue(const std::string& raw) {
  std::string out;
  out.reserve(raw.size());
  for (const unsigned char c : raw) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(char(c));
    } else {
      // The backslash of \xNN is itself escaped: the parsed value holds the
      // four characters, never a raw control byte or invalid UTF-8.
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\\\x%02x", unsigned(c));
      out += esc;
    }
  }
  return out;
}

bool ValidCounterName(const std::string& name) {
  if (name.empty()) return false;
  for (const char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  return true;
}

std::string FormatPrometheus(const std::vector<engine::StatsFile>& files, bool per_qp) {
  // Per file: name -> value, the last line of a name winning, as in
  // `softrnic stat -j`. Families in the order the first file lists them
  // (then names only later files have), so the output reads like the file.
  std::vector<std::map<std::string, uint64_t>> values(files.size());
  std::vector<std::string> order;
  std::set<std::string> seen_metric;
  for (size_t i = 0; i < files.size(); ++i) {
    for (const auto& [name, v] : files[i].counters) {
      if (!ValidCounterName(name)) continue;
      values[i][name] = v;
      // Two counters must not map to one metric (x and x_total): the first wins.
      if (seen_metric.insert(MetricName(name)).second) order.push_back(name);
    }
  }
  std::string out;
  char num[32];
  for (const std::string& name : order) {
    const std::string metric = MetricName(name);
    out += "# HELP " + metric + " " + HelpText(CounterHelp(name)) + "\n";
    out += "# TYPE " + metric + " counter\n";
    for (size_t i = 0; i < files.size(); ++i) {
      const auto it = values[i].find(name);
      if (it == values[i].end()) continue;
      std::snprintf(num, sizeof num, "%" PRIu64, it->second);
      out += metric + "{" + Labels(files[i]) + "} " + num + "\n";
    }
  }
  out += "# HELP softrnic_device_info A running softrnic device: its process name and GIDs.\n";
  out += "# TYPE softrnic_device_info gauge\n";
  for (const engine::StatsFile& f : files) {
    std::string gids;
    for (const std::string& g : f.gids) gids += (gids.empty() ? "" : ",") + g;
    out += "softrnic_device_info{" + Labels(f) + ",comm=\"" + LabelValue(f.comm) + "\",gids=\"" +
           LabelValue(gids) + "\"} 1\n";
  }
  if (per_qp) out += FormatQpFamilies(files);
  return out;
}

}  // namespace softrnic::tools
