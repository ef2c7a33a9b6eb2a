// The table itself (variables.h). Meanings say what a setting changes and
// point at the document that explains why; docs/configuration.md is
// generated from this file, so edit here and regenerate there.
#include "config/variables.h"

#include <array>

namespace softrnic::config {
namespace {

constexpr std::array kVariables = {
    // --- Transport: how packets travel (src/transport) ---
    Variable{"SOFTRNIC_TRANSPORT", Kind::kChoice, "auto", "auto|udp|shm",
             "The packet path. `auto`: peers on this host, in this network namespace and of this "
             "user go through shared memory (RDMA WRITE/READ/atomics run directly on the peer's "
             "memory), others over UDP (RoCE v2); `shm`: the same, and says on stderr (once) when "
             "a peer cannot use shared memory; `udp`: never shared memory. Any other value makes "
             "device creation fail (the device does not appear). `SOFTRNIC_FAULTS` always means "
             "UDP. docs/shm.md",
             "transport"},
    Variable{"SOFTRNIC_BIND", Kind::kText, "automatic (docs/addressing.md)",
             "comma-separated IPv4 or IPv6 addresses (a link-local one with `%interface`), e.g. `10.0.0.1,fd77::1,fe80::1%eth0`",
             "The addresses to bind instead of the automatic scheme; GID index = position in the "
             "list. A bind failure makes device creation fail with the address and reason on "
             "stderr",
             "transport"},
    Variable{"SOFTRNIC_PORT", Kind::kInteger, "4791", "0..65535",
             "The UDP port of every local endpoint; `0` lets the kernel pick (tests only: real "
             "RoCE always sends to 4791)",
             "transport", 0, 65535},
    Variable{"SOFTRNIC_FAULTS", Kind::kText, "none",
             "one fault rule as key=value pairs, e.g. "
             "`drop=0.01,dup=0.01,reorder=0.02,corrupt=0.001,seed=7`, "
             "`dir=out,class=acks+naks,drop=0.2`, `nth=5,drop=1`, `outage=2s+300ms`, "
             "`delay=200us,jitter=50us`, `rate=100MB`; keys drop, dup, reorder, depth, corrupt, "
             "seed, delay, jitter, rate, dir, peer, qpn, class, psn, nth, from, for, outage, pause, "
             "ecn (docs/fault-lab-design.md); or the path of a `.toml` scenario file",
             "Fault injection, to test behaviour on a lossy or broken network: drops, duplicates, "
             "corruption, reordering, delay, rate limits, outages, a paused peer, ECN marks, for "
             "the packets a rule matches (docs/loss.md, docs/fault-lab-design.md). An error in it "
             "injects nothing and is reported",
             "faults, transport"},
    Variable{"SOFTRNIC_FAULTS_FILE", Kind::kText, "none",
             "a TOML scenario file (at most 1 MiB and 256 rules); `softrnic chaos` ships some in "
             "share/softrnic/scenarios",
             "Fault injection by a scenario of several rules (docs/fault-lab-design.md, \"Scenario "
             "file\"); not together with `SOFTRNIC_FAULTS`. An error in the file injects nothing "
             "and is reported with its line",
             "faults, transport"},
    Variable{"SOFTRNIC_GSO", Kind::kFlag, "1", "0|1",
             "`0`: send and receive packet by packet instead of in UDP GSO/GRO runs (docs/wire.md); "
             "for comparisons",
             "transport"},
    Variable{"SOFTRNIC_REPLY_SOCKET", Kind::kFlag, "1", "0|1",
             "`0`: one socket per address instead of a `SO_REUSEPORT` pair whose second socket "
             "receives RC responses (docs/engine.md, progress); for comparisons",
             "transport"},
    Variable{"SOFTRNIC_HOST_NIC", Kind::kFlag, "1", "0|1",
             "`1`: with automatic binding, every process of this user shares the host's "
             "addresses at the port through the host NIC daemon `softrnic-nicd`, which steers "
             "each packet to its process by destination QPN, as an RNIC does; `0`: the first "
             "process owns them and later ones get only their loopback address (docs/host-nic.md)",
             "transport"},
    Variable{"SOFTRNIC_NICD", Kind::kText, "`softrnic-nicd` beside the library", "a path",
             "The host NIC daemon's executable, started when none runs (docs/host-nic.md)",
             "transport"},
    // --- Wire: packet formats (src/wire) ---
    Variable{"SOFTRNIC_CRC", Kind::kChoice, "auto", "auto|avx|sse|isal",
             "Which ISA-L CRC-32 kernel computes the ICRC (docs/wire.md): `auto` is `avx` where the "
             "CPU has it, else `sse`, else `isal`; `isal` lets ISA-L choose (AVX-512 where present, "
             "measured slower in the engine). A kernel the CPU lacks falls back to `auto`",
             "wire"},
    // --- Engine: the RDMA protocol (src/engine) ---
    Variable{"SOFTRNIC_MTU", Kind::kChoice, "auto", "auto|256|512|1024|2048|4096",
             "The port's `active_mtu`, which perftest and rdma_cm take as the path MTU. `auto`: "
             "the largest whose packets (payload + 88 header bytes) fit the smallest MTU of the "
             "interfaces that are up with an address (with SOFTRNIC_BIND: of the bound addresses' "
             "interfaces), as rxe derives it from its netdev: 1024 with a 1500-byte Ethernet "
             "interface (softrnic sends with Don't Fragment), 4096 where every one carries at "
             "least 4184 bytes (loopback only, jumbo frames). Both ends must agree, as with a "
             "NIC's MTU",
             "engine"},
    Variable{"SOFTRNIC_RETRANSMIT", Kind::kChoice, "selective", "selective|gbn",
             "`selective`: offer selective retransmission to softrnic peers (the BTH sr bit; used "
             "on a QP only once the peer has shown it); `gbn`: plain go-back-N only, as hardware "
             "does (docs/loss.md)",
             "engine"},
    Variable{"SOFTRNIC_CC", Kind::kChoice, "aimd", "aimd|delay|0",
             "Congestion control: `aimd` the AIMD window; `delay` a delay-based window "
             "(Swift-like, docs/engine.md \"Swapping congestion control\"); `0` no congestion "
             "window (only the fixed in-flight cap)",
             "engine"},
    Variable{"SOFTRNIC_CC_TARGET_US", Kind::kNumber, "1000", "a number > 0",
             "RTT (us) above which a loss counts as congestion (with `SOFTRNIC_CC_DELAY=1` also the "
             "delay target); with `SOFTRNIC_CC=delay` the target delay",
             "engine"},
    Variable{"SOFTRNIC_CC_DELAY", Kind::kFlag, "0", "0|1",
             "`1`: the AIMD window also cuts on delay alone (docs/loss.md)", "engine"},
    Variable{"SOFTRNIC_ACK_DELAY_US", Kind::kInteger, "20", "0..1000000 (more than 500 means 500)",
             "How long (us) a plain ACK may wait for a request of its QP to carry it (docs/engine.md, "
             "\"Delayed ACKs\"); `0` sends every ACK at once; capped at 500 and at an eighth of the "
             "QP's Local ACK Timeout",
             "engine", 0, 1000000},
    Variable{"SOFTRNIC_TX_BATCH", Kind::kFlag, "1", "0|1",
             "`0`: every post sends its packets at once, instead of letting a streaming QP's "
             "packets wait for the next post or poll (docs/engine.md, \"Doorbell batching\")",
             "engine"},
    Variable{"SOFTRNIC_ZEROCOPY_TX", Kind::kFlag, "1", "0|1",
             "`0`: copy every payload into a packet buffer instead of sending it from registered "
             "memory (docs/wire.md, UDP segmentation)",
             "engine"},
    Variable{"SOFTRNIC_SHM_DIRECT", Kind::kFlag, "1", "0|1",
             "`0`: no direct one-sided operations over shared memory (everything goes through the "
             "shared-memory rings as packets)",
             "engine"},
    Variable{"SOFTRNIC_SPIN_US", Kind::kInteger, "0", "0..1000000",
             "How long (us) the progress thread keeps busy-polling after the last work it saw "
             "before it sleeps in epoll; larger = lower wake-up latency for passive targets, more "
             "CPU burnt (on a 2-CPU machine it competes with the application). `0`: the spin "
             "adapts (SOFTRNIC_ADAPTIVE_SPIN_US)",
             "engine", 0, 1000000},
    Variable{"SOFTRNIC_ADAPTIVE_SPIN_US", Kind::kInteger, "50", "0..1000",
             "How long (us) the progress thread busy-polls after its last work while requests "
             "keep arriving densely (a spin that catches work, or a sleep that ends in work within "
             "100 us, earns the next spin; an empty one costs four); never on a thread allowed one "
             "CPU. `0`: never spin (docs/engine.md, \"Adaptive spin\")",
             "engine", 0, 1000},
    Variable{"SOFTRNIC_PROGRESS_RT", Kind::kFlag, "0", "0|1",
             "`1`: run the progress thread `SCHED_FIFO` priority 1 (needs root, `CAP_SYS_NICE` or "
             "an `RLIMIT_RTPRIO`; ignored otherwise). Helps passive targets such as "
             "`ib_write_lat`'s, costs polling workloads (docs/engine.md)",
             "engine"},
    Variable{"SOFTRNIC_PLACEMENT", Kind::kChoice, "default", "default|away",
             "`away`: move the progress thread off a single-CPU-pinned application's CPU "
             "(docs/engine.md, progress item 7); `default`: leave it where it was created",
             "engine"},
    Variable{"SOFTRNIC_SEAL", Kind::kChoice, "off", "off|prefer|require",
             "Sealed RC (docs/sealed.md): `require` authenticates and encrypts every packet of "
             "every RC and XRC queue pair (AES-256-GCM; rdma_cm connections with fresh keys from "
             "an X25519 exchange mixed with `SOFTRNIC_SEAL_KEY`, others with that key alone) and "
             "drops every plain packet sent to one; both ends need it and the same key. `prefer`: "
             "seal the rdma_cm connections whose peer offers it, leave the others plain (with a "
             "key file, authenticated; without, encrypted only). `off`: plain RoCE v2. Any other "
             "value, or `require` without a usable key file, makes device creation fail",
             "engine, seal"},
    Variable{"SOFTRNIC_SEAL_KEY", Kind::kText, "none",
             "the path of a file of 32 to 1024 secret bytes, owned by the user (or root), mode 600, "
             "e.g. made by `head -c 32 /dev/urandom`",
             "The pre-shared key of sealed RC; every peer needs the same file. Read once when the "
             "device is created and kept in memory left out of core dumps (docs/sealed.md)",
             "engine, seal"},
    Variable{"SOFTRNIC_STATS", Kind::kFlag, "0", "0|1",
             "`1`: print every counter to stderr when the process exits", "engine"},
    Variable{"SOFTRNIC_STATS_SHM", Kind::kFlag, "1", "0|1",
             "`0`: do not publish live counters in `softrnic-<pid>.stats` (read by `softrnic stat`, "
             "docs/hardening.md)",
             "engine"},
    Variable{"SOFTRNIC_STATS_DIR", Kind::kText, "/dev/shm", "a directory",
             "Where the live counters are published, and where `softrnic stat` looks for them",
             "engine, tools"},
    Variable{"SOFTRNIC_CAPTURE", Kind::kText, "", "a file path (%p: the pid)",
             "Write every RoCE v2 packet the device sends and receives, on every path, to this "
             "pcapng file (docs/capture.md; `softrnic capture` sets it)",
             "engine, tools"},
    Variable{"SOFTRNIC_CAPTURE_SIZE_MB", Kind::kInteger, "256", "1..1048576",
             "Largest capture file (MiB): then the capture stops, or rotates with "
             "SOFTRNIC_CAPTURE_FILES > 1",
             "engine, tools", 1, 1048576},
    Variable{"SOFTRNIC_CAPTURE_FILES", Kind::kInteger, "1", "1..1000",
             "`1`: the capture stops when its file is full (the start is kept); N: rotate through "
             "N files (path, path.1, ...), keeping the most recent",
             "engine, tools", 1, 1000},
    Variable{"SOFTRNIC_TRACE", Kind::kText, "", "a file path (%p: the pid)",
             "Record each QP's state changes, retransmissions, RNR NAKs, completions in error "
             "and the faults injected into a Chrome/Perfetto trace JSON written to this path "
             "when the device closes or the process exits, and a per-QP summary to `<path>.txt` "
             "(docs/fault-lab.md)",
             "engine"},
    // --- rdmacm: connection management (src/rdmacm) ---
    Variable{"SOFTRNIC_CM_TIMEOUT_MS", Kind::kInteger, "500", "1..3600000",
             "Interval (ms) between retransmissions of a CM REQ, REP, DREQ or SIDR_REQ "
             "(docs/rdmacm.md)",
             "rdmacm", 1, 3600000},
    Variable{"SOFTRNIC_CM_RETRIES", Kind::kInteger, "9", "0..1000",
             "How many times a CM message is resent before the timeout event (docs/rdmacm.md)",
             "rdmacm", 0, 1000},
    Variable{"SOFTRNIC_CM_TIMEWAIT_MS", Kind::kInteger, "512", "0..3600000",
             "How long (ms) a disconnected id stays in TimeWait before its "
             "RDMA_CM_EVENT_TIMEWAIT_EXIT; the default is the kernel's for RoCE (docs/rdmacm.md)",
             "rdmacm", 0, 3600000},
    // --- Diagnostics (src/log) ---
    Variable{"SOFTRNIC_LOG", Kind::kChoice, "warn", "error|warn|info|debug",
             "How much softrnic says on stderr: `error` only what stops a device or a call; "
             "`warn` also what degrades (a setting ignored, a fallback); `info` also each device "
             "and peer path; `debug` also every packet dropped and why (QP, peer, reason). Each "
             "line names the device, QP or peer, and at most 10 lines per second come from one "
             "place in the code (a flood of bad packets cannot flood the log)",
             "log"},
    Variable{"SOFTRNIC_CM_DEBUG", Kind::kFlag, "0", "0|1",
             "`1`: trace the connection manager's messages and state changes on stderr", "rdmacm"},
};

// One table cell: '|' would end it.
std::string Cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

// "a|b|c" as "`a`, `b`, `c`".
std::string Words(std::string_view values) {
  std::string out;
  while (true) {
    const size_t bar = values.find('|');
    if (!out.empty()) out += ", ";
    out += "`" + std::string(values.substr(0, bar)) + "`";
    if (bar == std::string_view::npos) break;
    values.remove_prefix(bar + 1);
  }
  return out;
}

}  // namespace

std::span<const Variable> Variables() { return kVariables; }

const Variable* FindVariable(std::string_view name) {
  for (const Variable& v : kVariables)
    if (v.name == name) return &v;
  return nullptr;
}

std::string MarkdownTable() {
  std::string out = "| variable | default | values | meaning | layer |\n| --- | --- | --- | --- | --- |\n";
  for (const Variable& v : kVariables) {
    const bool worded = v.kind == Kind::kFlag || v.kind == Kind::kChoice;
    const bool literal_default = v.kind != Kind::kText || v.default_value.starts_with('/');
    out += "| `" + std::string(v.name) + "` | ";
    out += literal_default ? "`" + std::string(v.default_value) + "`" : Cell(v.default_value);
    out += " | " + (worded ? Words(v.values) : Cell(v.values));
    out += " | " + Cell(v.meaning) + " | " + std::string(v.layer) + " |\n";
  }
  return out;
}

}  // namespace softrnic::config
