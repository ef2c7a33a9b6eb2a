"""report_issue17.py - the "Issue 17 targets" section of docs/benchmarks.md.

Every row of issue 17's target table, from the results of one run of
bench/run_bench.sh (the main sections' rows plus bench/issue17/*.sh's i17_*
rows), each compared with the peer, floor or softrnic figure of the same run
that its target names. Used by report.py: issue17_section(w, d, meta, fails).
"""

# Where bench/findings.md says what limits a figure (the bullet's opening words).
LIMITS = {
    "shm_lat": "findings: \"Same-host shared memory\"; \"Tail latency (issue 17)\"",
    "ucx": "findings: \"Session 7\"",
    "udp_lat": "findings: \"`ib_write_lat` over UDP\", \"`ib_send_lat` over UDP\"",
    "udp_bw": "findings: \"`ib_write_bw` 64 KiB over UDP\"",
    "netns": "findings: \"Between two network namespaces (issue 17)\"; UDP over loopback: \"`ib_write_lat` over UDP\", \"`ib_write_bw` 64 KiB over UDP\"",
    "events": "findings: \"Event-driven completions (issue 17)\"",
    "tail": "findings: \"Tail latency (issue 17)\"",
    "qps": "findings: \"QPs per device (issue 17)\", \"QP creation cost (issue 17)\"",
    "many_qps": "findings: \"Aggregate bandwidth over many QPs (issue 17)\"",
    "reg": "findings: \"Memory registration (issue 17)\"",
    "a2a": "findings: \"128 processes all-to-all over shared memory (issue 17)\"",
    "big": "findings: \"Large messages (issue 17)\"",
    "cm": "the slowest of a burst of 1,000 queues behind the other 999 (the burst lasts 1,000 / the rate above: 15-23 ms in these runs); section \"rdma_cm connection rate\" below",
}


def _fmt_stat(fmt, s, unit):
    if not s:
        return None
    u = unit if unit in ("", "x") else f" {unit}"
    if s[3] == 1 or s[1] == s[2]:
        return f"{fmt(s[0])}{u}"
    return f"{fmt(s[0])}{u} ({fmt(s[1])} - {fmt(s[2])})"


def issue17_section(w, d, meta, fails, fmt):
    """Writes the section. d: report.Data of the run; fails: failure rows
    (id, placement, rep, what); fmt: report.fmt."""
    failed_ids = {f[0] for f in fails}
    quick = meta.get("mode") == "quick"
    counts = {"met": 0, "missed": 0, "other": 0}

    def nodata(ids):
        bad = [i for i in ids if i in failed_ids]
        return ("**failed** (" + ", ".join(sorted(set(bad))) + ": see \"Failed or timed-out runs\")"
                if bad else "not measured")

    def row(measure, place, sr, sr_unit, ref_text, target_text, status, limit_key):
        w(f"| {measure} | {place} | {sr or 'no result'} | {ref_text} | {target_text} | {status} | "
          f"{LIMITS.get(limit_key, '') if status.startswith('missed') else ''} |")

    def judge(value, op, bound):
        """status text and counter for value op bound."""
        met = value <= bound if op == "<=" else value >= bound
        counts["met" if met else "missed"] += 1
        if met:
            return "**met**"
        factor = value / bound if op == "<=" else (bound / value if value > 0 else float("inf"))
        return f"missed: {fmt(factor)}x"

    def absolute(measure, id_, place, metric, unit, op, bound, limit, ids=None):
        s = d.stat(id_, place, metric)
        if not s:
            counts["other"] += 1
            row(measure, place, None, unit, "", f"{op} {fmt(bound)} {unit}", nodata(ids or [id_]), limit)
            return
        row(measure, place, _fmt_stat(fmt, s, unit), unit, "-", f"{op} {fmt(bound)} {unit}",
            judge(s[0], op, bound), limit)

    def reference(measure, id_, place, metric, unit):
        """A figure shown beside the targets, judged against nothing."""
        s = d.stat(id_, place, metric)
        row(measure, place, _fmt_stat(fmt, s, unit), unit, "-", "-", "reference" if s else nodata([id_]), "")

    def relative(measure, id_, place, metric, unit, ref, ref_place, ref_metric, ref_label, op, factor,
                 limit, ids=None):
        """softrnic's median op factor x the reference's median (same run)."""
        s, r = d.stat(id_, place, metric), d.stat(ref, ref_place, ref_metric)
        tt = f"{op} {fmt(factor)}x {ref_label}"
        ref_text = f"{ref_label}: {_fmt_stat(fmt, r, unit)}" if r else f"{ref_label}: no result"
        if not s or not r or r[0] <= 0:
            counts["other"] += 1
            row(measure, place, _fmt_stat(fmt, s, unit), unit, ref_text, tt,
                nodata((ids or [id_]) + [ref]), limit)
            return
        ratio = s[0] / r[0]
        st = judge(ratio, op, factor)
        row(measure, place, _fmt_stat(fmt, s, unit), unit, ref_text, tt, f"{st} (ratio {fmt(ratio)}x)",
            limit)

    w("## Issue 17 targets")
    w("")
    w("Every row of issue 17's target table, measured in this run of "
      f"`{meta.get('command', 'bench/run_bench.sh')}` ({meta.get('runs', '?')} runs per figure, "
      f"script run time {meta.get('duration_s', '?')} s), each against the figure of the same run "
      "that its target names. softrnic column: median (min - max) over the runs; the reference "
      "column likewise; a ratio is the ratio of the two medians. *missed: F x*: the figure is F "
      "times worse than the target allows; the last column points to what limits it "
      "(the findings above; profiles there). Measured by `bench/run_bench.sh` itself and "
      "`bench/issue17/one_host.sh` / `bench/issue17/netns.sh` (raw rows `i17_*` in "
      "`bench/results/latest.tsv`).")
    w("")
    if quick:
        w("> QUICK run: tiny counts (`qp_scale -n 4000`, 1 s per `-q N` run, ...): the scale rows "
          "cannot reach their targets; not representative.")
        w("")
    w("- Latency is one-way (perftest's median, t_typical; UCX: the p50 of ucx_perftest's last "
      "2,048 samples); *round trip* rows are `ibv_rc_pingpong`'s usec/iter and twice qperf's "
      "one-way `tcp_lat`.")
    w(f"- *netns*: two network namespaces `sbn17a` / `sbn17b` joined by a veth pair at its "
      f"defaults (MTU {meta.get('i17_ns_mtu', '1500')}), created and deleted by the bench, server "
      "in one, client in the other (10.248.0.1 -> 10.248.0.2). softrnic there runs with **no "
      "SOFTRNIC_\\* setting at all**: UDP (the peer is in another namespace), active MTU taken "
      "from the veth's (1500 -> 1024). The one-host UDP rows above use `SOFTRNIC_MTU` as stated "
      "in \"Machine\".")
    w("- *onecore*: both processes `taskset -c %s`; *pinned*: %s."
      % (meta.get("cpus_pinned", "client cpu0").split(",")[0].split("cpu")[-1],
         meta.get("cpus_pinned", "client cpu0, server cpu1")))
    w("")
    w("| measure | placement | softrnic median (min - max) | reference, same run | target | status "
      "| what limits it |")
    w("| --- | --- | --- | --- | --- | --- | --- |")
    both = ["unpinned", "pinned"]

    # 1. shm latency
    for place in both:
        absolute("shm `ib_send_lat` 8 B", "sr_shm_send_lat", place, "lat", "us", "<=", 0.35, "shm_lat")
    for place in both:
        absolute("shm `ib_write_lat` 8 B", "sr_shm_write_lat", place, "lat", "us", "<=", 0.25, "shm_lat")
    # 2. UCX's rc_verbs over softrnic
    for place in both:
        relative("UCX `rc_verbs` put_lat 8 B over softrnic, one host", "i17_ucx_put_lat", place, "lat",
                 "us", "sr_shm_write_lat", place, "lat", "softrnic shm `ib_write_lat`", "<=", 1.5, "ucx")
    # 3. UDP latency vs the kernel UDP floor
    for id_, tool in [("sr_write_lat", "ib_write_lat"), ("sr_send_lat", "ib_send_lat")]:
        for place in both:
            relative(f"UDP `{tool}` 8 B", id_, place, "lat", "us", "floor_udp_lat_reqack", place, "lat",
                     "kernel UDP floor (request + ACK ping-pong)", "<=", 1.2, "udp_lat")
    # 4. UDP bandwidth
    for place in both:
        relative("UDP `ib_write_bw` 64 KiB", "sr_write_bw", place, "bw", "GB/s", "floor_udp_stream_copy",
                 place, "bw", "no-work GSO floor", ">=", 0.9, "udp_bw")
        relative("UDP `ib_write_bw` 64 KiB", "sr_write_bw", place, "bw", "GB/s", "peer_tcp_bw", place,
                 "bw", "kernel TCP (qperf tcp_bw)", ">=", 1.0, "udp_bw")
        relative("UDP `ib_write_bw` 64 KiB, CPU per GB", "sr_write_bw", place, "cpu_per_gb", "ms/GB",
                 "floor_udp_stream_copy", place, "cpu_per_gb", "no-work GSO floor", "<=", 1.2, "udp_bw")
    # 5. two namespaces
    relative("netns `ib_write_lat` 8 B", "i17_ns_write_lat", "netns", "lat", "us", "i17_ns_ucx_tcp_lat",
             "netns", "lat", "UCX tcp tag_lat 8 B", "<=", 0.8, "netns")
    relative("netns `ib_write_bw` 64 KiB", "i17_ns_write_bw", "netns", "bw", "GB/s", "i17_ns_tcp_bw",
             "netns", "bw", "kernel TCP (qperf tcp_bw)", ">=", 1.0, "netns")
    # 6. event-driven completions
    for tr in ["shm", "udp"]:
        for place in ["unpinned", "onecore"]:
            relative(f"{tr} `ibv_rc_pingpong -e -s 64` round trip", f"i17_ev_{tr}", place, "rtt", "us",
                     "i17_tcp_rtt", place, "rtt", "kernel TCP blocking round trip (qperf tcp_lat x 2)",
                     "<=", 1.0, "events")
    # 7. tail
    for id_, text in [("sr_write_lat", "UDP `ib_write_lat`"), ("sr_send_lat", "UDP `ib_send_lat`"),
                      ("sr_shm_write_lat", "shm `ib_write_lat`"), ("sr_shm_send_lat", "shm `ib_send_lat`"),
                      ("i17_ns_write_lat", "netns `ib_write_lat`")]:
        for place in (["netns"] if id_.startswith("i17_") else both):
            r = d.ratio_stat(id_, place, "lat_p999", "lat")
            med = d.stat(id_, place, "lat")
            measure = f"{text} 8 B p99.9 / median"
            if not r:
                counts["other"] += 1
                row(measure, place, None, "", "", "<= 3x", nodata([id_]), "tail")
                continue
            row(measure, place, _fmt_stat(fmt, r, "x"), "x",
                f"median {_fmt_stat(fmt, med, 'us')}, p99.9 {fmt(d.med(id_, place, 'lat_p999'))} us",
                "<= 3x (per run)", judge(r[0], "<=", 3.0), "tail")
    # 8. QPs per device
    absolute("RC QPs per device, one process (`qp_scale`)", "i17_qp_scale", "unpinned", "qps", "", ">=",
             100000, "qps")
    absolute("idle QP memory beyond its queues (`qp_scale` at 16+16 and 1+1 slots: "
             "m1 - (m16 - m1) / 15, largest step)", "i17_qp_scale", "unpinned", "kib_beyond_queues", "KiB",
             "<=", 4, "qps")
    reference("idle QP memory with its 16+16 slots (`qp_scale`, largest step)", "i17_qp_scale", "unpinned",
              "kib_per_qp", "KiB")
    reference("idle QP memory with its 1+1 slots (`qp_scale`, largest step)", "i17_qp_scale", "unpinned",
              "kib_per_qp_d1", "KiB")
    absolute("QP create + INIT, median (`qp_scale`, largest step)", "i17_qp_scale", "unpinned",
             "create_us", "us", "<=", 10, "qps")
    reference("QP create + INIT with 1+1 slots, median (`qp_scale -d 1`)", "i17_qp_scale", "unpinned",
              "create_us_d1", "us")
    reference("first write to a fresh 4 KiB page of this machine (`qp_scale`: mmap 16 MiB, one write per "
              "page)", "i17_qp_scale", "unpinned", "page_touch_us", "us")
    # 9. aggregate bandwidth over many QPs
    for tr in ["shm", "udp"]:
        reference(f"{tr} `ib_write_bw` 64 KiB `-q 1` (the reference)", f"i17_mq_{tr}_q1", "pinned", "bw", "GB/s")
        for q in [16, 256, 1000]:
            relative(f"{tr} `ib_write_bw` 64 KiB `-q {q:,}` aggregate", f"i17_mq_{tr}_q{q}", "pinned", "bw",
                     "GB/s", f"i17_mq_{tr}_q1", "pinned", "bw", "`-q 1`", ">=", 0.9, "many_qps")
    # 10. processes over shm: every run must have all 128 verified and no UDP packet
    a2a_measure = "processes on one host over shm, all-to-all, every message verified, no UDP packet"
    ok, udp = d.stat("i17_a2a", "unpinned", "processes_ok"), d.stat("i17_a2a", "unpinned", "udp_packets")
    if not ok or not udp:
        counts["other"] += 1
        row(a2a_measure, "unpinned", None, "", "", ">= 128",
            nodata(["i17_a2a"]) + " (spot runs: " + LIMITS["a2a"] + ")", "a2a")
    else:
        ex = d.stat("i17_a2a", "unpinned", "exchange_s")
        # The worst run counts: fewest processes, most UDP packets.
        status = judge(ok[1], ">=", 128) if udp[2] == 0 else judge(0, ">=", 128) + " (UDP packets)"
        if "i17_a2a" in failed_ids:  # a run that failed is not hidden by the others
            if status.startswith("**met**"):
                counts["met"] -= 1
                counts["missed"] += 1
            status = "missed: a run failed (see \"Failed or timed-out runs\")"
        row(a2a_measure, "unpinned", f"{fmt(ok[1])} processes, {fmt(udp[2])} UDP packets (worst run)", "",
            f"exchange (median process): {_fmt_stat(fmt, ex, 's')}" if ex else "-", ">= 128", status, "a2a")
    # 11. registration
    for kind in ["untouched", "zeroed", "filled"]:
        absolute(f"`ibv_reg_mr` 1 GiB, {kind} buffer", f"i17_reg_{kind}", "unpinned", "reg_ms", "ms",
                 "<=", 50, "reg", ["i17_reg_cost", f"i17_reg_{kind}"])
        absolute(f"`ibv_dereg_mr` 1 GiB, {kind} buffer", f"i17_reg_{kind}", "unpinned", "dereg_ms", "ms",
                 "<=", 50, "reg", ["i17_reg_cost", f"i17_reg_{kind}"])
    # 12. 256 MiB messages
    for tr, ref in [("shm", "sr_shm_write_bw"), ("udp", "sr_write_bw")]:
        relative(f"{tr} `ib_write_bw` 256 MiB", f"i17_big_{tr}_write", "unpinned", "bw", "GB/s", ref,
                 "unpinned", "bw", "64 KiB `ib_write_bw`", ">=", 0.8, "big")
    s = d.stat("i17_big_udp_read", "unpinned", "bw")
    if s:
        counts["met"] += 1
    else:
        counts["other"] += 1
    row("UDP `ib_read_bw` 256 MiB completes", "unpinned", _fmt_stat(fmt, s, "GB/s"), "GB/s", "-",
        "completes", "**met** (completed)" if s else nodata(["i17_big_udp_read"]), "big")
    # 13. rdma_cm
    absolute("`cmtime -c 1000` connects per second", "i17_cm_rate", "unpinned", "connects_s", "/s", ">=",
             10000, "cm")
    absolute("`cmtime -c 1000` slowest connect", "i17_cm_rate", "unpinned", "max_ms", "ms", "<=", 1, "cm")
    w("")
    w(f"{counts['met']} rows met, {counts['missed']} missed, {counts['other']} without a result "
      "(failed or not measured).")
    w("")
