"""Checks `softrnic stat --prometheus` against `softrnic stat -j` of the same
moment (tests/integration/tools/test_prometheus.sh).

  check_prometheus.py PROM JSON [PID:COUNTER[+COUNTER...] ...]

PROM is parsed with prometheus_client's own text parser. Every counter of
every process in JSON must be a counter family softrnic_<name> with a HELP
text and a sample softrnic_<name>_total{pid,uid,device,port="1"} of the same
value; the output must hold nothing else (besides softrnic_device_info, one
per process), and no series twice. Each PID:A+B argument requires A + B > 0
for that pid (traffic was counted). Exit 0 if all holds, else 1 with what
differs.
"""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    prom_text = open(sys.argv[1], encoding="utf-8").read()
    procs = {p["pid"]: p for p in json.load(open(sys.argv[2], encoding="utf-8"))}
    errors = []
    values = {}  # (pid, counter) -> value
    infos = {}
    series = set()
    for fam in text_string_to_metric_families(prom_text):
        if fam.name == "softrnic_device_info":
            if fam.type != "gauge":
                errors.append(f"softrnic_device_info has type {fam.type}")
            for s in fam.samples:
                infos[int(s.labels["pid"])] = s.labels
            continue
        if not fam.name.startswith("softrnic_"):
            errors.append(f"family {fam.name} lacks the softrnic_ prefix")
            continue
        if fam.type != "counter":
            errors.append(f"{fam.name}: type {fam.type}, not counter")
        if not fam.documentation:
            errors.append(f"{fam.name}: no HELP text")
        counter = fam.name[len("softrnic_"):]
        if counter.endswith("_total"):  # parsers before 0.10 keep the suffix
            counter = counter[: -len("_total")]
        for s in fam.samples:
            if not s.name.endswith("_total"):
                if s.name.endswith("_created"):
                    errors.append(f"unexpected _created sample {s.name}")
                else:
                    errors.append(f"counter sample {s.name} does not end in _total")
                continue
            if set(s.labels) != {"pid", "uid", "device", "port"}:
                errors.append(f"{s.name}: labels {sorted(s.labels)}")
                continue
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in series:
                errors.append(f"series twice: {key}")
            series.add(key)
            pid = int(s.labels["pid"])
            p = procs.get(pid)
            if p is None:
                errors.append(f"{s.name}: pid {pid} not in the JSON")
                continue
            if s.labels["uid"] != str(p["uid"]) or s.labels["device"] != p["device"] or s.labels["port"] != "1":
                errors.append(f"{s.name}: labels {s.labels} vs JSON uid {p['uid']} device {p['device']!r}")
            values[(pid, counter)] = s.value
    for pid, p in procs.items():
        for name, v in p["counters"].items():
            got = values.pop((pid, name), None)
            if got is None:
                errors.append(f"pid {pid}: counter {name} missing from the Prometheus output")
            elif got != v:
                errors.append(f"pid {pid}: {name} = {got} in Prometheus, {v} in JSON")
        info = infos.get(pid)
        if info is None or info.get("comm") != p["comm"]:
            errors.append(f"pid {pid}: softrnic_device_info {info} vs JSON comm {p['comm']!r}")
    for (pid, name), v in values.items():
        errors.append(f"pid {pid}: {name} = {v} in Prometheus, not in the JSON")
    for spec in sys.argv[3:]:
        pid, names = spec.split(":")
        total = sum(procs.get(int(pid), {}).get("counters", {}).get(n, 0) for n in names.split("+"))
        if total <= 0:
            errors.append(f"pid {pid}: {names} = 0 (no traffic counted)")
    checked = sum(len(p["counters"]) for p in procs.values())
    for e in errors:
        print("MISMATCH:", e)
    print(f"{checked} counters of {len(procs)} process(es) compared, {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
