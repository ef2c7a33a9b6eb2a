#!/usr/bin/python3
"""report.py - turn bench/run_bench.sh raw results into markdown + plots.

Inputs (tab-separated, written by run_bench.sh):
  results:  id label placement size metric unit value rep
  sweep:    series kind(lat|bw) size value
  meta:     key value
  failures: id placement rep what
Usage: report.py --results R --sweep S --meta M --failures F --out FILE.md
                 --img-dir DIR [--img-prefix P]
       report.py --results R --meta M --tail-md FILE.md
         writes only the p99.9 / median section of that run (issue 17), for
         bench/tail_results.md, which every report includes (as ab_results.md)
"""
import argparse
import collections
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_issue17 import issue17_section  # noqa: E402

# The project's targets (issue tracker): id, metric, op, value, text.
TARGETS = [
    ("sr_write_lat", "lat", "<=", 2.5, "ib_write_lat 8 B one-way latency <= 2.5 us"),
    ("sr_send_lat", "lat", "<=", 3.0, "ib_send_lat 8 B one-way latency <= 3 us"),
    ("sr_write_bw", "bw", ">=", 4.0, "ib_write_bw 64 KiB >= 4 GB/s"),
    ("sr_write_bw", "cpu_per_gb", "<=", 440.0, "... at <= 440 ms CPU per GB (both processes)"),
    ("sr_write_rate", "rate", ">=", 1.0, "ib_write_bw 64 B >= 1 M msg/s"),
    ("sr_shm_write_lat", "lat", "<=", 0.25, "shm: ib_write_lat 8 B one-way latency <= 0.25 us"),
    ("sr_shm_send_lat", "lat", "<=", 0.35, "shm: ib_send_lat 8 B one-way latency <= 0.35 us"),
    ("sr_shm_write_bw", "bw", ">=", 20.0, "shm: ib_write_bw 64 KiB >= 20 GB/s"),
    ("sr_shm_read_bw", "bw", ">=", 15.0, "shm: ib_read_bw 64 KiB >= 15 GB/s"),
]
# The kernel UDP floor each UDP target stands on (bench/floor/udp_floor.cc,
# same run): the least any RoCE v2 implementation on kernel UDP sockets must
# do. Latency: the request + ACK datagram per trip, what an RC ping-pong
# that waits for each completion sends (an ACK cannot ride inside a RoCE
# request: one BTH per datagram, IBA 9.2). Bandwidth and CPU: a GSO/GRO
# stream of the same packets with the CRC-32 the ICRC needs at both ends
# (IBA 7.8.1, A17.8: computed by the sender, checked by the receiver) and nothing
# else (no placement).
TARGET_FLOOR = {
    ("sr_write_lat", "lat"): ("floor_udp_lat_reqack", "lat"),
    ("sr_send_lat", "lat"): ("floor_udp_lat_reqack", "lat"),
    ("sr_write_bw", "bw"): ("floor_udp_stream_crc", "bw"),
    ("sr_write_bw", "cpu_per_gb"): ("floor_udp_stream_crc", "cpu_per_gb"),
}
# softrnic figures next to the floor doing the same work per trip / per byte.
FLOOR_PAIRS = [
    ("sr_write_lat", "lat", "floor_udp_lat_reqack",
     "ib_write_lat 8 B vs a ping-pong of the same request + ACK datagram"),
    ("sr_send_lat", "lat", "floor_udp_lat_reqack",
     "ib_send_lat 8 B vs a ping-pong of the same request + ACK datagram"),
    ("sr_write_bw", "bw", "floor_udp_stream_crcplace",
     "ib_write_bw 64 KiB vs a stream with the same ICRC and placement work"),
    ("sr_write_bw", "cpu_per_gb", "floor_udp_stream_crcplace",
     "ib_write_bw 64 KiB CPU vs the same stream's CPU"),
]
# Issue 17: the tail of every latency figure, p99.9 <= 3x the median, on both
# of softrnic's paths (UDP and shm). Checked per run (p99.9 and median of the
# same run), for softrnic's rows; the kernel UDP floor's rows are shown
# beside them for reference (not counted).
TAIL_TARGET = 3.0
TAIL_ROWS = ["sr_write_lat", "sr_send_lat", "sr_read_lat", "sr_atomic_lat", "sr_shm_write_lat",
             "sr_shm_send_lat", "floor_udp_lat_single", "floor_udp_lat_reqack", "floor_shm_lat"]
PLACEMENTS = ["unpinned", "pinned"]
SR_LAT = ["sr_write_lat", "sr_send_lat", "sr_read_lat", "sr_atomic_lat", "sr_shm_write_lat",
          "sr_shm_send_lat"]
# Peers that move data through shared memory are compared with softrnic's
# shared-memory path, the others with its UDP path.
SHM_PEERS = {"peer_ucx_posix_lat", "peer_ucx_posix_bw", "peer_fi_shm_lat", "peer_fi_shm_bw"}


def sr_id(peer_id, base):
    """softrnic's figure to compare a peer with: sr_X (UDP) or sr_shm_X."""
    return base.replace("sr_", "sr_shm_", 1) if peer_id in SHM_PEERS else base
SR_BW = ["sr_write_bw", "sr_read_bw", "sr_send_bw"]
PEER_LAT = ["peer_tcp_lat", "peer_ucx_tcp_lat", "peer_fi_tcp_lat", "peer_fi_udp_lat",
            "peer_ucx_posix_lat", "peer_fi_shm_lat"]
PEER_BW = ["peer_tcp_bw", "peer_iperf3", "peer_ucx_tcp_bw", "peer_fi_tcp_bw", "peer_fi_rxd_bw",
           "peer_ucx_posix_bw", "peer_fi_shm_bw"]
PEER_NOTES = {
    "peer_tcp_lat": "kernel TCP, blocking sockets; half round trip (average)",
    "peer_tcp_bw": "kernel TCP stream, 64 KiB writes",
    "peer_iperf3": "kernel TCP stream, 64 KiB writes",
    "peer_ucx_tcp_lat": "busy-polling over TCP; one-way (average)",
    "peer_ucx_tcp_bw": "streaming tag sends over TCP",
    "peer_ucx_posix_lat": "shared memory (same-host path); one-way (average)",
    "peer_ucx_posix_bw": "shared memory (same-host path)",
    "peer_fi_tcp_lat": "half round trip (average)",
    "peer_fi_tcp_bw": "PING-PONG bandwidth (one message in flight), not streaming",
    "peer_fi_udp_lat": "unreliable datagrams; half round trip (average)",
    "peer_fi_rxd_bw": "reliable datagrams over UDP; ping-pong bandwidth",
    "peer_fi_shm_lat": "shared memory; half round trip (average)",
    "peer_fi_shm_bw": "shared memory; ping-pong bandwidth",
}
METRIC_TEXT = {
    "lat": ("latency", "us"), "lat_avg": ("latency avg", "us"), "lat_p99": ("latency p99", "us"),
    "lat_p999": ("latency p99.9", "us"),
    "bw": ("bandwidth", "GB/s"), "rate": ("message rate", "M msg/s"),
    "cpu_per_gb": ("CPU per GB", "ms/GB"), "iters": ("iterations (-n)", ""),
}


def read_tsv(path, ncols):
    rows = []
    if not path or not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= ncols:
                rows.append(parts)
    return rows


def fmt(v):
    if v is None:
        return "n/a"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.01:
        return f"{v:.3f}"
    return f"{v:.2g}"


def size_text(s):
    s = int(s)
    if s >= 1 << 20 and s % (1 << 20) == 0:
        return f"{s >> 20} MiB"
    if s >= 1024 and s % 1024 == 0:
        return f"{s >> 10} KiB"
    return f"{s} B"


class Data:
    def __init__(self, rows):
        self.vals = collections.defaultdict(list)
        self.by_rep = collections.defaultdict(dict)
        self.label = {}
        self.size = {}
        self.order = []
        for id_, label, place, size, metric, unit, value, rep in (r[:8] for r in rows):
            try:
                v = float(value)
            except ValueError:
                continue
            self.vals[(id_, place, metric)].append(v)
            self.by_rep[(id_, place, metric)][rep] = v
            self.label[id_] = label
            self.size[id_] = size
            if id_ not in self.order:
                self.order.append(id_)

    def stat(self, id_, place, metric):
        v = self.vals.get((id_, place, metric))
        if not v:
            return None
        return statistics.median(v), min(v), max(v), len(v)

    def med(self, id_, place, metric):
        s = self.stat(id_, place, metric)
        return s[0] if s else None

    def has(self, id_):
        return id_ in self.label

    def ratio_stat(self, id_, place, num, den):
        """num / den computed within each run (same rep), then median, min,
        max and count over the runs, as stat()."""
        a, b = self.by_rep.get((id_, place, num), {}), self.by_rep.get((id_, place, den), {})
        v = [a[r] / b[r] for r in a if r in b and b[r] > 0]
        if not v:
            return None
        return statistics.median(v), min(v), max(v), len(v)


def cell(s):
    if not s:
        return "n/a", "", "", "0"
    return fmt(s[0]), fmt(s[1]), fmt(s[2]), str(s[3])


def stat_rows(w, d, ids, metrics_of, extra_of=None):
    """Table rows: label, size, placement, metric, median, min, max, n (and
    extra_of(id, placement) as a last column when given), for every metric
    of metrics_of(id) that has results."""
    for id_ in ids:
        for place in PLACEMENTS:
            for metric in metrics_of(id_):
                st = d.stat(id_, place, metric)
                if not st:
                    continue
                mt, unit = METRIC_TEXT[metric]
                c = cell(st)
                row = (f"| {d.label[id_]} | {size_text(d.size[id_])} | {place} | {mt} ({unit}) | "
                       f"{c[0]} | {c[1]} | {c[2]} | {c[3]} |")
                w(row + (f" {extra_of(id_, place)} |" if extra_of else ""))


def tail_table(w, d, meta=None):
    """Issue 17's tail target: p99.9 / median per latency row and run. With
    meta: a section of its own (bench/tail_results.md) that names its run."""
    rows = [i for i in TAIL_ROWS if any(d.stat(i, p, "lat_p999") for p in PLACEMENTS)]
    if not rows:
        return False
    w("### Tail latency: p99.9 / median (target: p99.9 <= %gx the median on both paths)"
      % TAIL_TARGET)
    w("")
    if meta is not None:
        w(f"Recorded {meta.get('date', '?')} from the latency rows of one run of "
          f"`{meta.get('command', 'bench/run_bench.sh')}` ({meta.get('runs', '?')} runs per "
          f"figure; softrnic commit {meta.get('commit', '?')}; {meta.get('cpus', '?')} vCPUs, "
          f"{meta.get('cpu_model', '?')}; load average before {meta.get('loadavg_before', '?')}, "
          f"after {meta.get('loadavg_after', '?')}), then `bench/report.py --results "
          "bench/results/tail-latest.tsv --meta bench/results/tail-latest-meta.tsv --tail-md "
          "bench/tail_results.md`. Not the run of the tables above.")
        w("")
    w("Per run, perftest's (udp_floor's) 99.9th percentile divided by the median of the same "
      "run; the ratio column is the median of those per-run ratios (min - max over the runs); "
      "*met* when that median is <= %gx. Latency columns are medians over the runs (one-way, "
      "us). The floors' rows (reference, not counted) are a ping-pong of softrnic's datagrams "
      "over the kernel's UDP path, and one through shared memory, with no RDMA engine at all, "
      "measured in the same run: a tail a floor shows too is there without softrnic."
      % TAIL_TARGET)
    w("")
    w("| latency row | placement | median (us) | p99 (us) | p99.9 (us) | p99.9 / median | "
      "round trips per run | status |")
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    summary = []
    for id_ in rows:
        for place in PLACEMENTS:
            r = d.ratio_stat(id_, place, "lat_p999", "lat")
            if not r:
                continue
            it = d.med(id_, place, "iters")
            met = r[0] <= TAIL_TARGET
            status = "**met**" if met else f"missed: {fmt(r[0] / TAIL_TARGET)}x too high"
            label = d.label[id_] + (" (reference)" if id_.startswith("floor_") else "")
            w(f"| {label} | {place} | {fmt(d.med(id_, place, 'lat'))} | "
              f"{fmt(d.med(id_, place, 'lat_p99'))} | {fmt(d.med(id_, place, 'lat_p999'))} | "
              f"{fmt(r[0])}x ({fmt(r[1])} - {fmt(r[2])}) | {int(it) if it else ''} | {status} |")
            if id_.startswith("sr_"):
                summary.append(met)
    w("")
    few = [i for i in rows for p in PLACEMENTS if (d.med(i, p, "iters") or 1e9) < 1000]
    if few:
        w("Rows with fewer than 1,000 round trips per run: their p99.9 is the slowest trip of "
          "the run, not a percentile.")
        w("")
    if summary:
        w(f"{sum(summary)} of {len(summary)} softrnic latency rows meet the tail target "
          "(both placements counted).")
        w("")
    return True


AB_BEGIN = "<!-- ab_results.md begin -->"
AB_END = "<!-- ab_results.md end -->"
def include_kept(w, name, begin, end):
    """Writes the file `name` kept next to this script (by hand or by another
    script), between its markers, if it exists."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    if os.path.exists(path):
        w(begin)
        with open(path) as f:
            w(f.read().rstrip())
        w(end)
        w("")


TAIL_BEGIN = "<!-- tail_results.md begin -->"
TAIL_END = "<!-- tail_results.md end -->"
CM_BEGIN = "<!-- cm_rate_results.md begin -->"
CM_END = "<!-- cm_rate_results.md end -->"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--sweep")
    ap.add_argument("--meta")
    ap.add_argument("--failures")
    ap.add_argument("--out")
    ap.add_argument("--img-dir")
    ap.add_argument("--img-prefix", default="")
    ap.add_argument("--tail-md")
    a = ap.parse_args()
    if not a.tail_md and not (a.out and a.img_dir):
        ap.error("--out and --img-dir are required (unless --tail-md)")

    d = Data(read_tsv(a.results, 8))
    meta = {r[0]: r[1] for r in read_tsv(a.meta, 2)}
    if a.tail_md:
        L = []
        tail_table(L.append, d, meta)
        if not L:
            sys.exit("report: no p99.9 figures in %s" % a.results)
        with open(a.tail_md, "w") as f:
            f.write("\n".join(L).rstrip() + "\n")
        print(f"report: wrote {a.tail_md}")
        return
    fails = read_tsv(a.failures, 4)
    sweep = read_tsv(a.sweep, 4)
    out_dir = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(a.img_dir, exist_ok=True)

    L = []
    w = L.append
    quick = meta.get("mode") == "quick"
    w("# softrnic benchmarks" + (" (QUICK smoke run: not representative)" if quick else ""))
    w("")
    w("Generated by `bench/run_bench.sh`; do not edit by hand: rerun the script. "
      "Every figure is the **median of %s separate runs** with min and max, measured in one run "
      "of the script, softrnic and its peers side by side on the same machine." % meta.get("runs", "?"))
    w("")
    w("Reproduce (from a clone of the repository, as root so missing Debian packages can be "
      "installed):")
    w("")
    w("```sh")
    w(meta.get("command", "bench/run_bench.sh"))
    w("```")
    w("")
    w("## Machine")
    w("")
    w("| | |")
    w("| --- | --- |")
    for k, t in [("date", "date (UTC)"), ("cpu_model", "CPU"), ("cpus", "vCPUs"), ("mem", "memory"),
                 ("kernel", "kernel"), ("os", "OS"), ("loadavg_before", "load average before"),
                 ("loadavg_after", "load average after"), ("commit", "softrnic commit"),
                 ("build", "softrnic build"), ("perftest", "perftest"), ("qperf", "qperf"),
                 ("ucx", "UCX (ucx-utils)"), ("libfabric", "libfabric (libfabric-bin)"),
                 ("iperf3", "iperf3"), ("cpus_pinned", "pinned placement"),
                 ("softrnic_mtu", "softrnic MTU"), ("duration_s", "script run time (s)")]:
        if meta.get(k):
            w(f"| {t} | {meta[k]} |")
    if meta.get("lscpu"):
        w(f"| lscpu | {meta['lscpu'].replace(';', '; ')} |")
    w("")

    try:
        loads = [float(meta.get(k, "0").split()[0]) for k in ("loadavg_before", "loadavg_after")]
        ncpu = int(meta.get("cpus", "0") or 0)
    except ValueError:
        loads, ncpu = [0.0], 0
    if ncpu and max(loads) > 0.5 * ncpu:
        w(f"> **Warning: the machine was busy during this run** (load average {max(loads):.1f} on "
          f"{ncpu} vCPUs: other processes were competing for the cores). Busy-polling tools "
          "(UCX, libfabric, softrnic) suffer most; all figures below are disturbed and the peers' "
          "in particular are far from what they reach on an idle machine. Rerun on an idle "
          "machine for representative numbers.")
        w("")

    # ---------------------------------------------------------- targets
    w("## Where softrnic stands against its targets")
    w("")
    w("*kernel UDP floor*: the same figure of the kernel's UDP path alone in this run, with no "
      "RDMA work at all (`bench/floor/udp_floor.cc`, section \"Floors\" below). Latency: a "
      "ping-pong of the datagram softrnic sends per trip, the 8 B request with the ACK of the "
      "peer's previous one as a second GSO segment, the least a RoCE RC ping-pong that waits "
      "for every completion can send (an ACK is a packet of its own); bandwidth and CPU: a "
      "GSO/GRO stream of the same 4096-byte packets whose only work is the CRC-32 that the "
      "ICRC needs at both ends (no placement; the same stream with no work at all is in the "
      "floors table). A target beyond its floor cannot be met by any design that sends "
      "RoCE v2 through kernel UDP sockets on this machine.")
    w("")
    w("| target | placement | softrnic median (min - max) | target | kernel UDP floor | status |")
    w("| --- | --- | --- | --- | --- | --- |")
    summary = []
    for id_, metric, op, tv, text in TARGETS:
        for place in PLACEMENTS:
            s = d.stat(id_, place, metric)
            unit = METRIC_TEXT[metric][1]
            floor_key = TARGET_FLOOR.get((id_, metric))
            fl = d.stat(floor_key[0], place, floor_key[1]) if floor_key else None
            floor_text = f"{fmt(fl[0])} {unit} ({fmt(fl[1])} - {fmt(fl[2])})" if fl else ""
            if not s:
                w(f"| {text} | {place} | no result | {op} {fmt(tv)} {unit} | {floor_text} | not measured |")
                continue
            m = s[0]
            met = m <= tv if op == "<=" else m >= tv
            if met:
                status = "**met**"
            elif op == "<=":
                status = f"missed: {fmt(m / tv)}x too high"
            else:
                status = f"missed: {fmt(tv / m) if m > 0 else 'inf'}x too low"
            if fl and not met and ((op == "<=" and fl[0] > tv) or (op == ">=" and fl[0] < tv)):
                status += "; beyond the kernel UDP floor"
            w(f"| {text} | {place} | {fmt(m)} {unit} ({fmt(s[1])} - {fmt(s[2])}) | {op} {fmt(tv)} {unit} | {floor_text} | {status} |")
            if place == "pinned":
                summary.append((text, met, m, unit))
    w("")
    missed = [t for t in summary if not t[1]]
    if summary:
        if not missed:
            w("All targets are met (pinned placement).")
        else:
            w(f"{len(summary) - len(missed)} of {len(summary)} targets met (pinned placement). "
              "softrnic is still far from its targets where marked *missed*; what limits each "
              "figure is below.")
        w("")
    has_tail = tail_table(w, d)
    # The tail section of a separately recorded run (report.py --tail-md),
    # kept next to this script as ab_results.md is; only while the report's
    # own run has no p99.9 figures (runs from before run_bench.sh recorded
    # them), so that a new full run's table is not followed by an older one.
    if not has_tail:
        include_kept(w, "tail_results.md", TAIL_BEGIN, TAIL_END)
    # Sections recorded by their own scripts or by hand (the host NIC across
    # namespaces, sealed RC, storage and VMs), kept next to this script so
    # that a full run does not drop them.
    for kept in ("host_nic_results.md", "sealed_results.md", "storage_results.md"):
        include_kept(w, kept, f"<!-- {kept} begin -->", f"<!-- {kept} end -->")
    # Issue 17's table, every row from this run (bench/report_issue17.py).
    issue17_section(w, d, meta, fails, fmt)
    # What limits the figures: analysis kept by hand next to this script.
    findings = os.path.join(os.path.dirname(os.path.abspath(__file__)), "findings.md")
    if os.path.exists(findings):
        with open(findings) as f:
            w(f.read().rstrip())
        w("")

    # ---------------------------------------------------------- softrnic detail
    w("## softrnic: Debian's perftest, unmodified, on softrnic's libibverbs.so.1")
    w("")
    w("Server and client are two processes on this host (out-of-band exchange over TCP, "
      "RoCE v2 / same-host path chosen by softrnic). *unpinned*: both processes and softrnic's "
      "threads scheduled freely, as users run it; *pinned*: %s with `taskset -c` "
      "(softrnic's progress thread then moves to the other CPU, docs/engine.md). Latency: perftest's t_typical "
      "(median, one-way = half round trip); bandwidth: BW average converted from MiB/s to GB/s "
      "(1e9 B/s); CPU per GB: user+system CPU time of **both** processes (including setup) "
      "divided by the bytes moved." % meta.get("cpus_pinned", "client cpu0, server cpu1"))
    w("")
    w("| test | size | placement | metric | median | min | max | n | -n iterations |")
    w("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    def sr_metrics(id_):
        return ["lat", "lat_avg", "lat_p99", "lat_p999"] if id_ in SR_LAT else (
            ["rate", "bw", "cpu_per_gb"] if id_ == "sr_write_rate" else ["bw", "cpu_per_gb", "rate"])

    def sr_iterations(id_, place):
        it = d.med(id_, place, "iters")
        return str(int(it)) if it else ""

    stat_rows(w, d, [i for i in d.order if i.startswith("sr_")], sr_metrics, sr_iterations)
    w("")

    # ---------------------------------------------------------- floors
    floor_ids = [i for i in d.order if i.startswith("floor_")]
    if floor_ids:
        w("## Floors: the kernel's UDP path alone, and shared memory alone, same run")
        w("")
        w("`bench/floor/udp_floor.cc`: two processes on this host, softrnic's datagrams, no RDMA "
          "engine. Ping-pong: busy-polling `recvmmsg`, `sendmmsg`; one-way = half round trip, "
          "median (*single*: one 40-byte datagram per trip, an 8 B RDMA WRITE; *reqack*: that "
          "request plus a 20-byte ACK in one GSO datagram, what softrnic's `ib_write_lat` sends "
          "per trip). Stream: 64 KiB messages as 16 packets of 12 + 4096 + 4 bytes, sent with UDP "
          "GSO straight from the source buffer, received with UDP GRO, 16 messages in flight, "
          "blocking receives (CPU counts work, not polling); *copy*: no per-packet work (the "
          "kernel's copy in and copy out only); *crc*: plus a CRC-32 over every packet at both "
          "ends (ISA-L, as softrnic's ICRC); *crcplace*: plus the receiver copying each payload "
          "to its destination, as softrnic's responder places an RDMA WRITE. "
          "`bench/floor/shm_floor.cc` (*shared-memory ping-pong*): two processes, a cache line "
          "each way in one shared mapping, busy-polled, 8 bytes copied per trip, no system call "
          "and no engine: the floor of softrnic's shared-memory latency and of its tail. "
          "Placements as above.")
        w("")
        w("| floor | size | placement | metric | median | min | max | n |")
        w("| --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
        stat_rows(w, d, floor_ids,
                  lambda _: ["lat", "lat_avg", "lat_p99", "lat_p999", "bw", "cpu_per_gb"])
        w("")
        w("softrnic against the floor doing the same work (medians; ratio = softrnic / floor; "
          "the difference is what softrnic's engine, verbs layer and perftest add):")
        w("")
        w("| comparison | placement | softrnic | floor | ratio | difference |")
        w("| --- | --- | ---: | ---: | ---: | ---: |")
        for sid, metric, fid, text in FLOOR_PAIRS:
            for place in PLACEMENTS:
                sv, fv = d.med(sid, place, metric), d.med(fid, place, metric)
                if sv is None or fv is None:
                    continue
                unit = METRIC_TEXT[metric][1]
                ratio = fmt(sv / fv) if fv else "n/a"
                w(f"| {text} | {place} | {fmt(sv)} {unit} | {fmt(fv)} {unit} | {ratio} | "
                  f"{fmt(sv - fv)} {unit} |")
        w("")

    # ---------------------------------------------------------- peers
    peer_ids = [i for i in d.order if i.startswith("peer_")]
    if peer_ids:
        w("## Peers measured in the same run")
        w("")
        w("What a user would run instead: kernel TCP (qperf, iperf3), UCX's ucx_perftest and "
          "libfabric's fi_pingpong (fabtests is not packaged in Debian 12). Same placements as "
          "softrnic. CPU per GB as for softrnic (both processes).")
        w("")
        w("| peer | size | placement | metric | median | min | max | n | note |")
        w("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
        stat_rows(w, d, peer_ids, lambda _: ["lat", "lat_avg", "bw", "cpu_per_gb"],
                  lambda id_, place: PEER_NOTES.get(id_, ""))
        w("")

        # ratios
        w("## Ratios: softrnic vs each peer (medians, same placement)")
        w("")
        w("Latency ratio = softrnic / peer (above 1: softrnic is slower). Bandwidth ratio = "
          "softrnic / peer (below 1: softrnic is slower). CPU ratio = softrnic / peer (above 1: "
          "softrnic spends more CPU per byte).")
        w("")
        w("### 8 B latency")
        w("")
        w("| peer | placement | softrnic path | peer (us) | ib_write_lat (us) | write_lat ratio | ib_send_lat (us) | send_lat ratio |")
        w("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for pid in PEER_LAT:
            if not d.has(pid):
                continue
            path = "shm" if pid in SHM_PEERS else "udp"
            for place in PLACEMENTS:
                p = d.med(pid, place, "lat")
                wl = d.med(sr_id(pid, "sr_write_lat"), place, "lat")
                sl = d.med(sr_id(pid, "sr_send_lat"), place, "lat")
                r1 = fmt(wl / p) if p and wl else "n/a"
                r2 = fmt(sl / p) if p and sl else "n/a"
                w(f"| {d.label[pid]} | {place} | {path} | {fmt(p)} | {fmt(wl)} | {r1} | {fmt(sl)} | {r2} |")
        w("")
        w("### 64 KiB bandwidth and CPU cost")
        w("")
        w("| peer | placement | softrnic path | peer (GB/s) | ib_write_bw (GB/s) | bw ratio | peer CPU (ms/GB) | ib_write_bw CPU (ms/GB) | CPU ratio |")
        w("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for pid in PEER_BW:
            if not d.has(pid):
                continue
            path = "shm" if pid in SHM_PEERS else "udp"
            for place in PLACEMENTS:
                p = d.med(pid, place, "bw")
                sb = d.med(sr_id(pid, "sr_write_bw"), place, "bw")
                pc = d.med(pid, place, "cpu_per_gb")
                sc = d.med(sr_id(pid, "sr_write_bw"), place, "cpu_per_gb")
                r1 = fmt(sb / p) if p and sb else "n/a"
                r2 = fmt(sc / pc) if pc and sc else "n/a"
                w(f"| {d.label[pid]} | {place} | {path} | {fmt(p)} | {fmt(sb)} | {r1} | {fmt(pc)} | {fmt(sc)} | {r2} |")
        w("")

    # ---------------------------------------------------------- plots
    imgs = plot(sweep, a.img_dir, a.img_prefix)
    if imgs:
        w("## Size sweeps")
        w("")
        w("softrnic: `ib_write_lat -a` and `ib_write_bw -a` (pinned placement, few iterations per "
          "size); UCX `tag_lat` / `tag_bw` over tcp and posix shared memory for reference "
          "(pinned).")
        w("")
        for title, path in imgs:
            rel = os.path.relpath(path, out_dir)
            w(f"![{title}]({rel})")
            w("")
        # the data behind the plots, as a table
        series = collections.OrderedDict()
        for name, kind, size, val in sweep:
            series.setdefault((name, kind), {})[int(size)] = val
        sizes = sorted({int(r[2]) for r in sweep})
        for kind, unit in [("lat", "latency, us"), ("bw", "bandwidth, GB/s")]:
            names = [n for (n, k) in series if k == kind]
            if not names:
                continue
            w(f"| size | " + " | ".join(f"{n} ({unit})" for n in names) + " |")
            w("| ---: |" + " ---: |" * len(names))
            for s in sizes:
                vals = []
                for n in names:
                    v = series[(n, kind)].get(s)
                    try:
                        vals.append(fmt(float(v)) if v not in (None, "") else "")
                    except ValueError:
                        vals.append("")
                if any(vals):
                    w(f"| {size_text(s)} | " + " | ".join(vals) + " |")
            w("")

    # ---------------------------------------------------------- failures + method
    # A/B comparisons of two builds (bench/ab_compare.sh --record): kept in
    # bench/ab_results.md so that regenerating this report keeps them; the
    # markers let ab_compare.sh refresh the section without a full run.
    include_kept(w, "ab_results.md", AB_BEGIN, AB_END)

    w("## Failed or timed-out runs")
    w("")
    if fails:
        w("| test | placement | rep | what |")
        w("| --- | --- | --- | --- |")
        for f in fails:
            w(f"| {f[0]} | {f[1]} | {f[2]} | `{f[3]}` |")
    else:
        w("None.")
    w("")
    w("## Method")
    w("")
    w("- softrnic's perftest runs: before the measured runs, each test is probed once (not "
      "counted) and `-n` is chosen so that one measured run lasts about 2 s (latency: from "
      "the probe's median, bounded to 10000..200000 round trips so that a p99.9 rests on at "
      "least 10 trips; bandwidth: bounded to 200..5000000 messages); the "
      "`-n iterations` column shows the value used. All runs use `-F` (no cpufreq check).")
    w("- Latency is always one-way (half a round trip). perftest's figure is its median "
      "(t_typical); the peers' are averages (qperf and fi_pingpong only report averages; "
      "ucx_perftest's percentile covers only its last report interval). perftest's average, "
      "99th and 99.9th percentiles are in the softrnic table: compare those with the peers when "
      "the distribution is skewed.")
    w("- Percentiles (p99, p99.9) come from perftest (softrnic) and udp_floor (the floor), each "
      "over all the measured round trips of one run (udp_floor: the sorted samples at n*99/100 "
      "and n*999/1000). The peers have none: qperf and fi_pingpong print averages only, and "
      "ucx_perftest's percentile (`-R`) is taken over a ring of its last 2048 samples "
      "(`TIMING_QUEUE_SIZE` in UCX's libperf), not over the run, so no p99 or p99.9 is recorded "
      "for them. A p99.9 stands on the slowest 0.1 % of the trips (100 of 100,000): a handful of "
      "slow trips decides it; with fewer than 1,000 trips per run it is the slowest trip.")
    w("- Bandwidth is GB/s = 1e9 bytes/s (perftest and UCX print MiB/s; converted). "
      "fi_pingpong's 64 KiB figure is ping-pong bandwidth (one message in flight), lower than "
      "a stream by construction.")
    w("- CPU per GB: user + system CPU time of server and client processes (every thread, "
      "including softrnic's engine threads and the test's own setup) from getrusage of the "
      "waited-for processes, divided by bytes moved (iterations x size; ping-pong counts both "
      "directions). qperf's server forks per test: its CPU is read from /proc after the child is "
      "reaped. Kernel work done in softirq context on behalf of a socket may be charged to "
      "whichever process was running, so kernel-TCP figures are approximate.")
    w("- On a 2-vCPU VM a blocking wake-up across cores costs ~40 us; busy-polling peers (UCX, "
      "libfabric) spin on both cores. Anything else running on the machine (builds, other "
      "benchmarks) disturbs the figures: compare min/max spread and the load average above.")
    w("- Raw per-run values of the full run: `bench/results/latest*.tsv`.")
    w("")

    # rdma_cm connection rate analysis (bench/cm_rate.sh runs), kept by hand
    # next to this script as findings.md is.
    include_kept(w, "cm_rate_results.md", CM_BEGIN, CM_END)

    with open(a.out, "w") as f:
        f.write("\n".join(L))
    print(f"report: wrote {a.out} ({len(imgs)} plots)")


def plot(sweep, img_dir, prefix):
    if not sweep:
        return []
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # plots are optional
        print(f"report: matplotlib unavailable ({e}); no plots", file=sys.stderr)
        return []
    imgs = []
    for kind, ylabel, fname, title in [
            ("lat", "one-way latency (us, log)", "latency_vs_size.png", "Latency vs message size"),
            ("bw", "bandwidth (GB/s, log)", "bandwidth_vs_size.png", "Bandwidth vs message size")]:
        series = collections.OrderedDict()
        for name, k, size, val in sweep:
            if k != kind:
                continue
            try:
                v = float(val)
            except ValueError:
                continue
            if v > 0:
                series.setdefault(name, []).append((int(size), v))
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(8, 5))
        for name, pts in series.items():
            pts.sort()
            style = "-o" if name.startswith("softrnic") else "--s"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=name, markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.set_title(title + " (pinned: client cpu0, server cpu1)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(img_dir, prefix + fname)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        imgs.append((title, path))
    return imgs


if __name__ == "__main__":
    main()
