#include "engine/trace/trace_recorder.h"

#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace softrnic::engine::trace {
namespace {

using enum ArgType;

// One row per EventKind, in its order.
constexpr EventSchema kSchemas[] = {
    {"qp_create", "qp", false, {"type"}, {kString}},
    {"qp_destroy", "qp", false, {"state"}, {kString}},
    {nullptr, "state", true, {"state", "reason"}, {kString, kString}},
    {"state_change", "state", false, {"from", "to", "reason"}, {kString, kString, kString}},
    {"retransmit_timeout",
     "retransmit",
     false,
     {"psn", "outstanding", "retry_left", "timeouts"},
     {kInt, kInt, kInt, kInt}},
    {"rewind",
     "retransmit",
     false,
     {"psn", "packets", "reason", "retry_left"},
     {kInt, kInt, kString, kInt}},
    {"selective_resend", "retransmit", false, {"psn", "packets", "probe"}, {kInt, kInt, kInt}},
    {"rnr_nak_sent", "rnr", false, {"psn", "rnr_timer"}, {kInt, kInt}},
    {"rnr_nak_received",
     "rnr",
     false,
     {"psn", "rnr_timer", "rnr_retry_left"},
     {kInt, kInt, kInt}},
    {"retry_exceeded", "error", false, {"psn", "retry_cnt"}, {kInt, kInt}},
    {"rnr_retry_exceeded", "error", false, {"psn", "rnr_retry"}, {kInt, kInt}},
    {"completion_error",
     "completion",
     false,
     {"status", "wr_id", "opcode", "queue"},
     {kString, kHex, kString, kString}},
    {nullptr,
     "fault",
     false,
     {"kind", "direction", "rule", "psn", "opcode", "dest_qpn"},
     {kString, kString, kInt, kInt, kHex, kHex}},
    {nullptr,
     "fault",
     false,
     {"kind", "direction", "psn", "opcode", "dest_qpn", "delay_ns"},
     {kString, kString, kInt, kHex, kHex, kInt}},
};
static_assert(std::size(kSchemas) == static_cast<size_t>(EventKind::kCount));
// What keeps a million events affordable (the header's bound).
static_assert(sizeof(Event) <= 72);

// Past the 24-bit QPN space, so no QP's tid is a wire track's.
constexpr uint32_t kWireTidBase = 0x7F000000;

const char* AsString(uint64_t v) {
  const char* s = reinterpret_cast<const char*>(static_cast<uintptr_t>(v));
  return s != nullptr ? s : "";
}

// "1234.567": nanoseconds as microseconds, exactly (no floating point).
void AppendMicros(std::string* out, int64_t ns) {
  char buf[32];
  const char* sign = ns < 0 ? "-" : "";
  const uint64_t a = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  std::snprintf(buf, sizeof buf, "%s%" PRIu64 ".%03" PRIu64, sign, a / 1000, a % 1000);
  *out += buf;
}

// A peer as people write it: IPv4 without the ::ffff: of its GID.
std::string PeerText(const transport::Gid& g) {
  if (g.IsV4Mapped()) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
    return buf;
  }
  return g.ToString();
}

// Length of the valid UTF-8 sequence at s[i], or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

}  // namespace

const EventSchema& SchemaOf(EventKind kind) { return kSchemas[static_cast<size_t>(kind)]; }

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void AppendJsonString(std::string* out, std::string_view s) {
  *out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = Utf8Length(s, i);
      if (n == 0) {
        *out += "\\ufffd";
        ++i;
      } else {
        out->append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
    ++i;
  }
  *out += '"';
}

std::string QpnText(uint32_t qpn) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%06x", qpn);
  return buf;
}

size_t TraceRecorder::PathKeyHash::operator()(const PathKey& k) const noexcept {
  uint64_t h = k.dest_qpn * 0x9E3779B97F4A7C15ull;
  for (uint8_t b : k.peer) h = (h ^ b) * 0x100000001B3ull;
  return static_cast<size_t>(h);
}

TraceRecorder::TraceRecorder(std::string device, int pid, size_t max_events)
    : device_(std::move(device)), pid_(pid), max_events_(max_events) {}

TraceRecorder::Track* TraceRecorder::Live(uint32_t qpn) {
  const auto it = live_.find(qpn);
  return it == live_.end() ? nullptr : &tracks_[it->second];
}

void TraceRecorder::Push(const Event& e) {
  if (count_ >= max_events_) {
    ++dropped_;
    return;
  }
  if (count_ == chunks_.size() * kChunkEvents)
    chunks_.push_back(std::make_unique<Event[]>(kChunkEvents));
  chunks_[count_ / kChunkEvents][count_ % kChunkEvents] = e;
  ++count_;
}

void TraceRecorder::QpCreated(int64_t now_ns, uint32_t qpn, const char* type) {
  if (tracks_.size() >= kMaxTracks) {
    ++untracked_qps_;
    return;
  }
  // A QPN seen before (its QP destroyed, the number drawn again) gets a
  // track of its own: same QPN in the name, another tid.
  const uint32_t reuse = std::min<uint32_t>(reuses_[qpn]++, 126);
  Track t;
  t.qpn = qpn;
  t.tid = qpn + (reuse << 24);
  t.type = type;
  t.state_since_ns = now_ns;
  live_[qpn] = tracks_.size();
  tracks_.push_back(t);
  Push(Event{now_ns, 0, t.tid, EventKind::kQpCreate, {Str(type)}});
}

void TraceRecorder::QpPath(uint32_t qpn, const transport::Gid& peer, uint32_t dest_qpn) {
  Track* t = Live(qpn);
  if (t == nullptr) return;
  if (t->has_peer && t->peer == peer && t->dest_qpn == dest_qpn) return;
  if (t->has_peer) {
    const auto it = paths_.find(PathKey{t->peer.raw, t->dest_qpn});
    if (it != paths_.end() && it->second == qpn) paths_.erase(it);
  }
  t->has_peer = true;
  t->peer = peer;
  t->dest_qpn = dest_qpn;
  paths_[PathKey{peer.raw, dest_qpn}] = qpn;
}

void TraceRecorder::QpState(int64_t now_ns, uint32_t qpn, const char* from, const char* to,
                            const char* reason) {
  Track* t = Live(qpn);
  if (t == nullptr) return;
  if (std::strcmp(from, to) != 0 || std::strcmp(t->state, to) != 0) {
    Push(Event{t->state_since_ns, now_ns - t->state_since_ns, t->tid, EventKind::kStateSpan,
               {Str(t->state), Str(t->state_reason)}});
    t->state = to;
    t->state_reason = reason;
    t->state_since_ns = now_ns;
  }
  Push(Event{now_ns, 0, t->tid, EventKind::kStateChange, {Str(from), Str(to), Str(reason)}});
}

void TraceRecorder::QpCounterSnapshot(uint32_t qpn, const QpCounters& counters) {
  if (Track* t = Live(qpn)) t->counters = counters;
}

void TraceRecorder::QpDestroyed(int64_t now_ns, uint32_t qpn, const QpCounters& counters) {
  Track* t = Live(qpn);
  if (t == nullptr) return;
  Push(Event{t->state_since_ns, now_ns - t->state_since_ns, t->tid, EventKind::kStateSpan,
             {Str(t->state), Str(t->state_reason)}});
  Push(Event{now_ns, 0, t->tid, EventKind::kQpDestroy, {Str(t->state)}});
  t->counters = counters;
  t->destroyed = true;
  if (t->has_peer) {
    const auto it = paths_.find(PathKey{t->peer.raw, t->dest_qpn});
    if (it != paths_.end() && it->second == qpn) paths_.erase(it);
  }
  live_.erase(qpn);
}

void TraceRecorder::Record(int64_t now_ns, uint32_t qpn, EventKind kind,
                           const std::array<uint64_t, 6>& values) {
  const Track* t = Live(qpn);
  if (t == nullptr) return;
  Push(Event{now_ns, 0, t->tid, kind, values});
}

uint32_t TraceRecorder::WireTid(const std::array<uint8_t, 16>& peer) {
  for (const Wire& w : wires_)
    if (w.peer.raw == peer) return w.tid;
  if (wires_.size() >= kMaxTracks) return kWireTidBase;  // the first wire track takes the rest
  Wire w;
  w.peer.raw = peer;
  w.tid = kWireTidBase + static_cast<uint32_t>(wires_.size());
  wires_.push_back(w);
  return w.tid;
}

void TraceRecorder::OnFault(const faults::FaultEvent& f) {
  ++faults_;
  // Whose packet: a received one names our QP in its BTH; a sent one names
  // the peer's QP, which with the peer's address names the local QP
  // connected to it. Anything else (a CM MAD, a packet for a QP gone) goes
  // on the peer's wire track.
  Track* t = nullptr;
  if (f.direction == faults::Direction::kIn) {
    t = Live(f.dest_qpn);
  } else {
    const auto it = paths_.find(PathKey{f.peer, f.dest_qpn});
    if (it != paths_.end()) t = Live(it->second);
  }
  uint32_t tid;
  if (t != nullptr) {
    ++t->faults;
    tid = t->tid;
  } else {
    ++wire_faults_;
    tid = WireTid(f.peer);
  }
  const char* kind = faults::FaultKindName(f.kind);
  const char* dir = f.direction == faults::Direction::kIn ? "in" : "out";
  const int64_t now = MonotonicNs();
  if (f.kind == faults::FaultKind::kDelay || f.kind == faults::FaultKind::kPause) {
    Push(Event{now, 0, tid, EventKind::kFaultDelay,
               {Str(kind), Str(dir), f.psn, f.opcode, f.dest_qpn, f.delay_ns}});
  } else {
    Push(Event{now, 0, tid, EventKind::kFault,
               {Str(kind), Str(dir), f.rule, f.psn, f.opcode, f.dest_qpn}});
  }
}

void TraceRecorder::WriteJson(int64_t now_ns,
                              const std::function<void(std::string_view)>& out) const {
  std::string s;
  s.reserve((1u << 20) + 4096);
  const auto flush_if_full = [&] {
    if (s.size() < (1u << 20)) return;
    out(s);
    s.clear();
  };
  const std::string pid = std::to_string(pid_);
  bool first = true;
  const auto open = [&](const char* name, const char* ph, uint32_t tid) {
    s += first ? "\n" : ",\n";
    first = false;
    s += "{\"name\":";
    AppendJsonString(&s, name);
    s += ",\"ph\":\"";
    s += ph;
    s += "\",\"pid\":" + pid + ",\"tid\":" + std::to_string(tid);
  };
  const auto metadata = [&](const char* name, uint32_t tid, const char* key,
                            const std::string& value, bool quoted) {
    open(name, "M", tid);
    s += ",\"args\":{";
    AppendJsonString(&s, key);
    s += ':';
    if (quoted)
      AppendJsonString(&s, value);
    else
      s += value;
    s += "}}";
  };

  s += "{\"traceEvents\":[";
  metadata("process_name", 0, "name", "softrnic " + device_ + " pid " + pid, true);
  // Tracks in creation order, wire tracks last.
  uint32_t sort = 0;
  for (const Track& t : tracks_) {
    std::string name = "QP " + QpnText(t.qpn) + " " + t.type;
    if (t.has_peer)
      name += " \u2192 peer QPN " + QpnText(t.dest_qpn) + " (" + PeerText(t.peer) + ")";
    metadata("thread_name", t.tid, "name", name, true);
    metadata("thread_sort_index", t.tid, "sort_index", std::to_string(sort++), false);
  }
  for (const Wire& w : wires_) {
    metadata("thread_name", w.tid, "name", "wire \u2194 " + PeerText(w.peer), true);
    metadata("thread_sort_index", w.tid, "sort_index", std::to_string(sort++), false);
  }
  flush_if_full();

  const auto event = [&](const Event& e) {
    const EventSchema& schema = SchemaOf(e.kind);
    open(schema.name != nullptr ? schema.name : AsString(e.v[0]), schema.complete ? "X" : "i",
         e.tid);
    s += ",\"cat\":\"";
    s += schema.category;
    s += "\",\"ts\":";
    AppendMicros(&s, e.ts_ns);
    if (schema.complete) {
      s += ",\"dur\":";
      AppendMicros(&s, e.dur_ns);
    } else {
      s += ",\"s\":\"t\"";
    }
    s += ",\"args\":{";
    bool first_arg = true;
    for (size_t i = 0; i < schema.keys.size() && schema.keys[i] != nullptr; ++i) {
      if (!first_arg) s += ',';
      first_arg = false;
      AppendJsonString(&s, schema.keys[i]);
      s += ':';
      switch (schema.types[i]) {
        case kString: AppendJsonString(&s, AsString(e.v[i])); break;
        case kHex: {
          char buf[24];
          std::snprintf(buf, sizeof buf, "\"0x%" PRIx64 "\"", e.v[i]);
          s += buf;
          break;
        }
        case kInt:
        case kNone: s += std::to_string(e.v[i]); break;
      }
    }
    s += "}}";
    flush_if_full();
  };
  for (size_t i = 0; i < count_; ++i) event(At(i));
  // The states QPs are in now: spans up to now.
  for (const Track& t : tracks_) {
    if (t.destroyed) continue;
    event(Event{t.state_since_ns, now_ns - t.state_since_ns, t.tid, EventKind::kStateSpan,
                {Str(t.state), Str(t.state_reason)}});
  }

  // The realtime clock at the monotonic one's zero: ts + this = Unix time.
  timespec mono{}, real{};
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  const int64_t offset_ns = (int64_t{real.tv_sec} - mono.tv_sec) * 1'000'000'000 +
                            (real.tv_nsec - mono.tv_nsec);
  s += "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"softrnic SOFTRNIC_TRACE\"";
  s += ",\"device\":";
  AppendJsonString(&s, device_);
  s += ",\"pid\":" + pid;
  s += ",\"clock\":\"CLOCK_MONOTONIC\",\"realtime_offset_us\":";
  AppendMicros(&s, offset_ns);
  s += ",\"events\":" + std::to_string(count_);
  s += ",\"max_events\":" + std::to_string(max_events_);
  s += ",\"dropped_events\":" + std::to_string(dropped_);
  s += ",\"qps\":" + std::to_string(tracks_.size());
  s += ",\"untracked_qps\":" + std::to_string(untracked_qps_);
  s += ",\"faults\":" + std::to_string(faults_);
  s += ",\"wire_faults\":" + std::to_string(wire_faults_);
  s += "}}\n";
  out(s);
}

std::string TraceRecorder::ToJson(int64_t now_ns) const {
  std::string all;
  WriteJson(now_ns, [&](std::string_view part) { all.append(part); });
  return all;
}

std::string TraceRecorder::Summary() const {
  std::string s;
  uint64_t retransmitted = 0, timeouts = 0, rnr_in = 0, rnr_out = 0, errors = 0;
  char line[320];
  for (const Track& t : tracks_) {
    const QpCounters& c = t.counters;
    std::snprintf(line, sizeof line,
                  "qp=%s type=%s state=%s sent=%" PRIu64 " retransmitted=%" PRIu64
                  " timeouts=%" PRIu64 " rnr_naks_in=%" PRIu64 " rnr_naks_out=%" PRIu64
                  " completions_in_error=%" PRIu64 " faults=%" PRIu64 "\n",
                  QpnText(t.qpn).c_str(), t.type, t.state, c.tx_packets, c.tx_retransmit_packets,
                  c.retransmit_timeouts, c.rx_rnr_naks, c.tx_rnr_naks, c.cqe_errors, t.faults);
    s += line;
    retransmitted += c.tx_retransmit_packets;
    timeouts += c.retransmit_timeouts;
    rnr_in += c.rx_rnr_naks;
    rnr_out += c.tx_rnr_naks;
    errors += c.cqe_errors;
  }
  // faults: every fault of the device, the wire tracks' too.
  std::snprintf(line, sizeof line,
                "total qps=%zu retransmitted=%" PRIu64 " timeouts=%" PRIu64 " rnr_naks_in=%" PRIu64
                " rnr_naks_out=%" PRIu64 " completions_in_error=%" PRIu64 " faults=%" PRIu64 "\n",
                tracks_.size(), retransmitted, timeouts, rnr_in, rnr_out, errors, faults_);
  s += line;
  return s;
}

}  // namespace softrnic::engine::trace
