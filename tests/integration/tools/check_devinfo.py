#!/usr/bin/env python3
"""`softrnic devinfo -j` against Debian's `ibv_devinfo -v` over softrnic's
libibverbs.so.1, field by field.

    check_devinfo.py IBV_DEVINFO_OUTPUT DEVINFO_JSON

Every field of the device and of port 1 that both print is compared (numbers
as numbers: ibv_devinfo's hex, "4096 (5)" and "PORT_ACTIVE (4)" forms are
read as the value it printed in parentheses or in hex). GIDs: the same count,
the same type, and the same host-address GIDs; the per-process loopback GID
of each process is its own (docs/addressing.md), so both must be one and in
the same place. Prints each comparison; exits 1 on any difference.
"""
import json
import re
import sys


def parse_ibv_devinfo(text):
    device, port, gids = {}, {}, []
    section = device
    for line in text.splitlines():
        m = re.match(r"^\s+GID\[\s*(\d+)\]:\s+(\S+),\s*(.+)$", line)
        if m:
            gids.append((int(m.group(1)), m.group(2), m.group(3).strip()))
            continue
        m = re.match(r"^\s+port:\s+(\d+)$", line)
        if m:
            section = port
            continue
        m = re.match(r"^\s+([a-z_0-9]+):\s+(.+)$", line)
        if m:
            section.setdefault(m.group(1), m.group(2).strip())
    return device, port, gids


def value_of(text):
    """The number ibv_devinfo printed: "(N)" at the end, hex, or decimal."""
    m = re.search(r"\((\d+)\)\s*$", text)
    if m:
        return int(m.group(1))
    if re.fullmatch(r"0x[0-9a-fA-F]+", text):
        return int(text, 16)
    if re.fullmatch(r"\d+", text):
        return int(text)
    return text


def main():
    ibv_text = open(sys.argv[1]).read()
    ours = json.load(open(sys.argv[2]))
    device, port, gids = parse_ibv_devinfo(ibv_text)
    failures, compared = [], 0

    def same(where, key, theirs, mine):
        nonlocal compared
        compared += 1
        ok = theirs == mine
        print(f"{'ok  ' if ok else 'DIFF'} {where}.{key}: ibv_devinfo {theirs!r} softrnic devinfo {mine!r}")
        if not ok:
            failures.append(f"{where}.{key}")

    m = re.match(r"^hca_id:\s+(\S+)", ibv_text)
    same("device", "hca_id", m.group(1) if m else None, ours["name"])
    strings = {"fw_ver", "node_guid", "sys_image_guid"}
    for key, text in device.items():
        if key in strings:
            same("device", key, text, ours["device"][key])
        elif key == "transport":
            same("device", key, text.split()[0], ours["device"]["transport"])
        elif key in ours["device"]:
            same("device", key, value_of(text), ours["device"][key])
    for key, text in port.items():
        if key == "link_layer":
            same("port", key, text, ours["port"]["link_layer"])
        elif key in ours["port"]:
            same("port", key, value_of(text), ours["port"][key])

    mine = ours["gids"]
    same("gids", "count", len(gids), len(mine))
    for (index, gid, kind), g in zip(gids, mine):
        same(f"gid[{index}]", "index", index, g["index"])
        same(f"gid[{index}]", "type", kind, g["type"])
        theirs_loop = gid.startswith("::ffff:127.")
        same(f"gid[{index}]", "loopback", theirs_loop, g["loopback"])
        if not theirs_loop:
            same(f"gid[{index}]", "gid", gid, g["gid"])
    if sum(1 for _, gid, _ in gids if gid.startswith("::ffff:127.")) != 1:
        failures.append("ibv_devinfo lists not exactly one per-process loopback GID")

    # The comparison must really have covered the device: every numeric
    # field ibv_devinfo -v prints for the device and the port.
    if compared < 60:
        failures.append(f"only {compared} fields compared")
    print(f"{compared} fields compared, {len(failures)} difference(s)")
    if failures:
        print("FAIL: " + ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
