// The fault lab's per-QP event trace (SOFTRNIC_TRACE, docs/fault-lab-design.md):
// what happened to each QP of a device (state changes, retransmissions,
// RNR NAKs, retries exhausted, completions in error, creation and
// destruction) and every fault the fault transport applied
// (faults/fault_events.h), kept in memory and written as a Chrome trace
// event file ("JSON Object Format", which Perfetto's UI and chrome://tracing
// open) plus a per-QP text summary (`<path>.txt`, the "Trace summary
// format" of the design page).
//
// This file is the recorder and its two writers, with no knowledge of the
// engine: the engine's glue (engine_trace.cc) turns its objects into the
// plain values below, so that the writers are tested on their own
// (tests/unit/engine/trace_format_test.cc).
//
// Layout of the trace: one process track per device (pid: the OS pid), one
// thread track per QP (tid: its QPN; a QPN used again by a later QP gets
// QPN + n * 2^24, past the 24-bit QPN space), and one "wire" track per peer
// for faults no local QP owns (tid 2^31 + n). Events are instants ("ph":
// "i", thread scoped) except the time a QP spent in a state, a complete
// event ("ph": "X") named after the state. Timestamps: CLOCK_MONOTONIC in
// microseconds, so the traces of the processes of one host line up when
// opened together; otherData carries the realtime offset.
//
// Memory is bounded: at most max_events events are kept (then counted in
// otherData.dropped_events) and at most kMaxTracks QP and wire tracks. An
// event is a fixed 72-byte record whose name, category and argument keys
// come from a static schema: recording allocates nothing but a new chunk
// of kChunkEvents records now and then.
//
// Thread-safety: none of its own. The engine calls it under its lock (the
// transport, which reports faults, runs under the same lock); the files are
// written under that lock too, or by the engine's destructor once no other
// thread runs (engine_trace.cc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/qp_counters.h"
#include "faults/fault_events.h"
#include "transport/address.h"

namespace softrnic::engine::trace {

// What an argument value is, for the writer.
enum class ArgType : uint8_t { kNone, kInt, kHex, kString };

// The fixed part of an event kind: its name (null: the name is the string
// in argument 0, e.g. a state span named "RTS"), its category, its argument
// keys and types. Schemas are static (trace_recorder.cc): events point at
// them.
struct EventSchema {
  const char* name;
  const char* category;
  bool complete;  // "ph":"X" (a span with a duration), else an instant
  std::array<const char*, 6> keys;
  std::array<ArgType, 6> types;
};

// The event kinds the engine records (docs: the report of issue 42 names
// each with its arguments).
enum class EventKind : uint8_t {
  kQpCreate,          // type
  kQpDestroy,         // state
  kStateSpan,         // (name: the state) reason
  kStateChange,       // from, to, reason
  kRetransmitTimeout, // psn, outstanding, retry_left, timeouts
  kRewind,            // psn, packets, reason, retry_left
  kSelectiveResend,   // psn, packets, probe
  kRnrNakSent,        // psn, rnr_timer
  kRnrNakReceived,    // psn, rnr_timer, rnr_retry_left
  kRetryExceeded,     // psn, retry_cnt
  kRnrRetryExceeded,  // psn, rnr_retry
  kCompletionError,   // status, wr_id, opcode, queue
  kFault,             // (name: the fault kind) kind, direction, rule, psn, opcode, dest_qpn
  kFaultDelay,        // (name: the fault kind) kind, direction, psn, opcode, dest_qpn, delay_ns
  kCount,
};
const EventSchema& SchemaOf(EventKind kind);

// One recorded event. Values are integers or static strings (the schema
// says which), so an event owns nothing.
struct Event {
  int64_t ts_ns = 0;   // CLOCK_MONOTONIC
  int64_t dur_ns = 0;  // complete events only
  uint32_t tid = 0;
  EventKind kind = EventKind::kQpCreate;
  std::array<uint64_t, 6> v{};
};

// Argument values: an integer, or a static string (never freed).
inline uint64_t Str(const char* s) { return reinterpret_cast<uintptr_t>(s); }

// The monotonic clock the trace uses, in nanoseconds.
int64_t MonotonicNs();

// Appends `s` to *out as a JSON string (quotes included): '"', '\\' and the
// control characters escaped, invalid UTF-8 replaced by U+FFFD, so whatever
// a name holds the file stays valid JSON.
void AppendJsonString(std::string* out, std::string_view s);

// "0x00a1b2" (at least 6 hex digits, as QPNs are shown).
std::string QpnText(uint32_t qpn);

class TraceRecorder final : public faults::FaultEventSink {
 public:
  static constexpr size_t kDefaultMaxEvents = 1'000'000;
  static constexpr size_t kMaxTracks = 1u << 18;
  static constexpr size_t kChunkEvents = 4096;

  // device: the device's name; pid: the process's (the process track).
  TraceRecorder(std::string device, int pid, size_t max_events = kDefaultMaxEvents);

  // --- QPs (the engine's glue calls these) ---
  // A new QP (type "RC", "UC", "UD", "XRC_SEND", "XRC_RECV") in RESET.
  void QpCreated(int64_t now_ns, uint32_t qpn, const char* type);
  // Its peer and destination QPN (after a modify that set them): its
  // thread name, and the key sent packets' faults are matched with.
  void QpPath(uint32_t qpn, const transport::Gid& peer, uint32_t dest_qpn);
  // A state change (or a modify_qp into the same state): closes the span
  // of the state it leaves, records the change.
  void QpState(int64_t now_ns, uint32_t qpn, const char* from, const char* to,
               const char* reason);
  // The QP's counters as they are now (the summary's numbers).
  void QpCounterSnapshot(uint32_t qpn, const QpCounters& counters);
  void QpDestroyed(int64_t now_ns, uint32_t qpn, const QpCounters& counters);
  // An event on the QP's track; ignored for a QP not tracked.
  void Record(int64_t now_ns, uint32_t qpn, EventKind kind, const std::array<uint64_t, 6>& values);

  // --- Faults (Transport::SetFaultEventSink) ---
  void OnFault(const faults::FaultEvent& event) override;

  // --- Output ---
  // The whole trace as JSON, handed to `out` in pieces of about 1 MiB
  // (a full trace is hundreds of MB); spans of states still open end at
  // now_ns.
  void WriteJson(int64_t now_ns, const std::function<void(std::string_view)>& out) const;
  std::string ToJson(int64_t now_ns) const;
  // The per-QP summary, one line per QP in creation order, then the total.
  std::string Summary() const;

  size_t events() const { return count_; }
  uint64_t dropped_events() const { return dropped_; }

 private:
  struct Track {
    uint32_t qpn = 0;
    uint32_t tid = 0;
    const char* type = "RC";
    bool has_peer = false;
    transport::Gid peer;
    uint32_t dest_qpn = 0;
    const char* state = "RESET";
    const char* state_reason = "create";
    int64_t state_since_ns = 0;
    bool destroyed = false;
    QpCounters counters;
    uint64_t faults = 0;
  };
  struct Wire {
    transport::Gid peer;
    uint32_t tid = 0;
  };
  // A sent packet's (peer, BTH destination QPN): the local QP it is from.
  struct PathKey {
    std::array<uint8_t, 16> peer{};
    uint32_t dest_qpn = 0;
    bool operator==(const PathKey&) const = default;
  };
  struct PathKeyHash {
    size_t operator()(const PathKey& k) const noexcept;
  };

  Track* Live(uint32_t qpn);
  void Push(const Event& e);
  const Event& At(size_t i) const { return chunks_[i / kChunkEvents][i % kChunkEvents]; }
  uint32_t WireTid(const std::array<uint8_t, 16>& peer);

  const std::string device_;
  const int pid_;
  const size_t max_events_;
  // Events in fixed chunks: growing never moves (or copies) what is kept.
  std::vector<std::unique_ptr<Event[]>> chunks_;
  size_t count_ = 0;
  uint64_t dropped_ = 0;
  std::vector<Track> tracks_;                      // creation order
  std::unordered_map<uint32_t, size_t> live_;      // QPN -> index in tracks_
  std::unordered_map<uint32_t, uint32_t> reuses_;  // QPN -> how many tracks had it
  uint64_t untracked_qps_ = 0;
  std::unordered_map<PathKey, uint32_t, PathKeyHash> paths_;  // -> local QPN
  std::vector<Wire> wires_;
  uint64_t faults_ = 0;
  uint64_t wire_faults_ = 0;
};

}  // namespace softrnic::engine::trace
