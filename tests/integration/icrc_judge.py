#!/usr/bin/python3
"""Outside judge for RoCE v2 captures: ICRC with scapy, BTH decode with tshark.

    icrc_judge.py CAPTURE.pcap [--min-packets N] [--expect-opcodes 0x04,0x11]
                               [--expect-dqpn 0x12,0x13] [--no-tshark] [-v]
    icrc_judge.py --self-test

For every UDP packet to port 4791 in the capture it checks the ICRC (IBA Vol 1
Annex A17.8) three ways and fails on any disagreement:

  * scapy's own BTH.compute_icrc() (Debian python3-scapy, scapy.contrib.roce)
    - the independent judge. scapy 2.5 only implements it for IPv4; for IPv6
    (it warns and returns 0) the judge does what scapy does for IPv4 with
    scapy's IPv6 layer: copy the dissected packet, set the fields IBA
    A17.4.5.1 masks (traffic class, flow label, hop limit, UDP checksum, BTH
    FECN/BECN/resv6) to ones through scapy's field setters, rebuild it with
    scapy and CRC it (scapy_ipv6_icrc), independent of the byte offsets the
    next check uses.
  * this script's own implementation: the real IP/UDP header bytes from the
    capture with the variant fields set to ones exactly as Linux rxe_icrc.c
    does (IPv4 TOS/TTL/checksum, IPv6 traffic class/flow label/hop limit,
    UDP checksum, BTH byte 4), 8 bytes of ones in front, zlib.crc32, stored
    least-significant byte first.
  * the 4 ICRC bytes in the packet.

Then it runs tshark over the same file and confirms Wireshark's InfiniBand
dissector decodes the same BTH (opcode, DestQP, PSN, PadCnt, P_Key, AckReq,
SE, MigReq, TVer) for exactly the same frames, and the same ICRC value where
tshark shows one.

Expectations: --min-packets N (at least N RoCE packets), --require-ipv6
(every RoCE packet is IPv6 and was checked by the scapy-based computation), --expect-opcodes
(each listed opcode occurs at least once), --expect-dqpn (every packet's
DestQP is one of the listed QPNs; list both directions' QPNs for a two-way
capture).

Exit status: 0 all good, 1 a check failed (each failure is printed), 2 the
judge could not run (bad arguments, unreadable file, scapy or tshark missing).

The PATH python3 may lack scapy (e.g. a pyenv interpreter); the script then
re-executes itself with /usr/bin/python3, where Debian's python3-scapy lives.
"""

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

EXIT_OK, EXIT_FAIL, EXIT_CANNOT_RUN = 0, 1, 2
ROCE_PORT = 4791
SYSTEM_PYTHON = "/usr/bin/python3"


def _import_scapy():
    try:
        import scapy  # noqa: F401
    except ImportError:
        if (os.environ.get("ICRC_JUDGE_REEXEC") is None and os.path.exists(SYSTEM_PYTHON)
                and os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON)):
            os.environ["ICRC_JUDGE_REEXEC"] = "1"
            os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
        print("icrc_judge: scapy is not importable (apt-get install python3-scapy)",
              file=sys.stderr)
        sys.exit(EXIT_CANNOT_RUN)
    import logging
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)  # IPv6 ICRC warning etc.


_import_scapy()

from scapy.contrib.roce import BTH, AETH, cnp  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402
from scapy.utils import PcapReader, wrpcap  # noqa: E402

TSHARK_FIELDS = [
    # (tshark field, our key)
    ("frame.number", "frame"),
    ("infiniband.bth.opcode", "opcode"),
    ("infiniband.bth.destqp", "dqpn"),
    ("infiniband.bth.psn", "psn"),
    ("infiniband.bth.padcnt", "padcount"),
    ("infiniband.bth.p_key", "pkey"),
    ("infiniband.bth.a", "ackreq"),
    ("infiniband.bth.se", "solicited"),
    ("infiniband.bth.m", "migreq"),
    ("infiniband.bth.tver", "version"),
    ("infiniband.invariant.crc", "icrc_be"),
]


# ---------------------------------------------------------------- ICRC ----

def own_icrc(ip_bytes):
    """ICRC of one IP datagram (IP header .. ICRC), per A17.8 / rxe_icrc.c.

    Returns the 4 bytes that belong on the wire.
    """
    b = bytearray(ip_bytes)
    version = b[0] >> 4
    if version == 4:
        ihl = (b[0] & 0xF) * 4
        b[1] = 0xFF                    # TOS
        b[8] = 0xFF                    # TTL
        b[10:12] = b"\xff\xff"         # header checksum
        udp = ihl
    elif version == 6:
        b[0] |= 0x0F                   # traffic class, high nibble
        b[1:4] = b"\xff\xff\xff"       # traffic class low nibble + flow label
        b[7] = 0xFF                    # hop limit
        udp = 40
    else:
        raise ValueError("not IP")
    b[udp + 6:udp + 8] = b"\xff\xff"   # UDP checksum
    b[udp + 8 + 4] = 0xFF              # BTH: FECN, BECN, resv6
    crc = zlib.crc32(b"\xff" * 8 + bytes(b[:-4])) & 0xFFFFFFFF
    return struct.pack("<I", crc)


def _ip_datagram_bytes(ip):
    """Exact bytes of the IP datagram as captured, without link padding."""
    raw = bytes(ip)
    if isinstance(ip, IP):
        return raw[:ip.len]
    return raw[:40 + ip.plen]


def scapy_ipv6_icrc(pkt):
    """ICRC of a dissected IPv6 RoCE packet the way scapy computes it for IPv4.

    scapy's BTH.compute_icrc() has no IPv6 branch ("TODO support IPv6"); this
    is that function's IPv4 branch with the IPv6 header's variant fields
    (IBA A17.4.5.1: traffic class, flow label, hop limit) instead of IPv4's.
    """
    from scapy.compat import raw
    pshdr = Raw(b"\xff" * 8) / pkt.copy()
    pshdr[IPv6].tc = 0xFF
    pshdr[IPv6].fl = 0xFFFFF
    pshdr[IPv6].hlim = 0xFF
    pshdr[UDP].chksum = 0xFFFF
    pshdr[BTH].fecn = 1
    pshdr[BTH].becn = 1
    pshdr[BTH].resv6 = 0xFF
    bth = pshdr[BTH].self_build()
    payload = raw(pshdr[BTH].payload)
    # scapy dissects the ICRC into BTH's FCS field, not the payload: a
    # placeholder takes its place, as in scapy's IPv4 branch.
    pshdr[UDP].payload = Raw(bth + payload + b"\xff\xff\xff\xff")
    return struct.pack("<I", zlib.crc32(raw(pshdr)[:-4]) & 0xFFFFFFFF)


def scapy_icrc(ip_bytes):
    """scapy's own ICRC for one IP datagram, or None where scapy cannot compute it.

    The datagram is re-dissected from its exact bytes: on a frame with
    Ethernet trailer padding (frames under 60 bytes) scapy would otherwise
    append the Padding layer to the BTH payload and CRC the trailer too.
    """
    ipv6 = ip_bytes[0] >> 4 == 6
    pkt = IPv6(ip_bytes) if ipv6 else IP(ip_bytes)
    bth = pkt.getlayer(BTH)
    if bth is None:
        return None
    if ipv6:
        out = bth.compute_icrc(None)
        if out == b"\0\0\0\0":  # scapy 2.5: "TODO support IPv6"
            out = scapy_ipv6_icrc(pkt)
        return out
    return bth.compute_icrc(None)


def judge_packet(pkt):
    """Returns (record, [problems]) for a UDP/4791 packet, or (None, []) otherwise."""
    ip = pkt.getlayer(IP) or pkt.getlayer(IPv6)
    if ip is None:
        return None, []
    if isinstance(ip, IP) and (ip.frag or ip.flags.MF):
        # A RoCE datagram must never be fragmented (it would need the whole
        # datagram to check); a fragment carrying port 4791 is an error.
        if ip.frag == 0 and ip.haslayer(UDP) and ip[UDP].dport == ROCE_PORT:
            return {"fragment": True}, ["IPv4-fragmented RoCE packet (id %#x)" % ip.id]
        return None, []
    udp = ip.getlayer(UDP)
    if udp is None or udp.dport != ROCE_PORT:
        return None, []
    problems = []
    ip_bytes = _ip_datagram_bytes(ip)
    hdr = (ip.ihl * 4 if isinstance(ip, IP) else 40) + 8
    transport = ip_bytes[hdr:]
    if len(transport) < 16:
        return {"short": True}, ["RoCE payload of %d bytes: shorter than BTH+ICRC" % len(transport)]
    if udp.len != 8 + len(transport):
        problems.append("UDP length %d does not match datagram (%d)" % (udp.len, 8 + len(transport)))
    stored = transport[-4:]
    mine = own_icrc(ip_bytes)
    theirs = scapy_icrc(ip_bytes)
    if theirs is not None and theirs != mine:
        problems.append("JUDGE BUG: scapy ICRC %s != own ICRC %s" % (theirs.hex(), mine.hex()))
    if stored != mine:
        problems.append("ICRC mismatch: packet has %s, expected %s%s" % (
            stored.hex(), mine.hex(), "" if theirs is None else " (scapy %s)" % theirs.hex()))
    # Decode the BTH from the bytes ourselves (not from scapy's binding, which
    # only exists for dport 4791 and might change between versions).
    bth = BTH(transport)
    rec = {
        "opcode": bth.opcode, "dqpn": bth.dqpn, "psn": bth.psn, "padcount": bth.padcount,
        "pkey": bth.pkey, "ackreq": bth.ackreq, "solicited": bth.solicited,
        "migreq": bth.migreq, "version": bth.version, "fecn": bth.fecn, "becn": bth.becn,
        "icrc_be": int.from_bytes(stored, "big"), "ipv6": isinstance(ip, IPv6),
        "scapy_checked": theirs is not None,
    }
    return rec, problems


# -------------------------------------------------------------- tshark ----

def _to_int(s):
    s = s.strip()
    if s in ("True", "true"):
        return 1
    if s in ("False", "false"):
        return 0
    return int(s, 0)


def _tshark(args):
    tshark = shutil.which("tshark")
    if tshark is None:
        raise FileNotFoundError("tshark not found (apt-get install tshark)")
    res = subprocess.run([tshark] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, check=False)
    if res.returncode != 0:
        raise RuntimeError("tshark failed (%d): %s" % (res.returncode, res.stderr.strip()))
    return res.stdout


def _no_payload_heuristics():
    """--disable-protocol for every sub-dissector tshark tries on RoCE payloads.

    Otherwise e.g. the RPC-over-RDMA heuristic claims arbitrary test payloads
    and reports them as malformed, which says nothing about our headers.
    `tshark -G heuristic-decodes` lists them as (parent, protocol, enabled);
    "ethertype" is skipped because disabling it would stop Ethernet decoding.
    """
    out = _tshark(["-G", "heuristic-decodes"])
    args = []
    for line in out.splitlines():
        cols = line.split("\t")
        if len(cols) >= 2 and cols[0] == "infiniband.payload" and cols[1] != "ethertype":
            args += ["--disable-protocol", cols[1]]
    return args


def run_tshark(path):
    """tshark's BTH decode per frame, plus frames it flags malformed or in error."""
    base = ["-r", path] + _no_payload_heuristics()
    cmd = base + ["-Y", "infiniband", "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"]
    for field, _ in TSHARK_FIELDS:
        cmd += ["-e", field]
    stdout = _tshark(cmd)
    # PI_ERROR is 0x00800000 in epan/proto.h: malformed or error-level expert info.
    bad = _tshark(base + ["-Y", "infiniband && (_ws.malformed || _ws.expert.severity >= 0x00800000)",
                          "-T", "fields", "-e", "frame.number", "-e", "_ws.expert.message"])
    frames = {}
    for line in stdout.splitlines():
        cols = line.split("\t")
        rec = {}
        for (_, key), val in zip(TSHARK_FIELDS, cols):
            if val.strip():
                rec[key] = _to_int(val)
        if "frame" in rec:
            frames[rec.pop("frame")] = rec
    for line in bad.splitlines():
        cols = line.split("\t")
        if cols and cols[0].strip() and int(cols[0]) in frames:
            frames[int(cols[0])]["malformed"] = cols[1] if len(cols) > 1 else "malformed"
    return frames


def compare_with_tshark(records, tshark_frames):
    problems = []
    for frame, rec in sorted(records.items()):
        ts = tshark_frames.get(frame)
        if ts is None:
            problems.append("frame %d: tshark did not decode it as InfiniBand" % frame)
            continue
        if "malformed" in ts:
            problems.append("frame %d: tshark reports a malformed packet: %s" % (frame, ts["malformed"]))
        for _, key in TSHARK_FIELDS[1:]:
            if key not in ts:
                if key == "icrc_be":
                    continue  # tshark shows no ICRC for some opcodes (e.g. CNP)
                problems.append("frame %d: tshark has no %s" % (frame, key))
                continue
            if ts[key] != rec[key]:
                problems.append("frame %d: %s scapy=%#x tshark=%#x" % (frame, key, rec[key], ts[key]))
    for frame in sorted(set(tshark_frames) - set(records)):
        problems.append("frame %d: tshark decodes InfiniBand the judge did not check" % frame)
    return problems


# ---------------------------------------------------------------- main ----

def _int_list(s):
    return [int(x, 0) for x in s.split(",") if x.strip()]


def judge_file(path, min_packets=0, expect_opcodes=(), expect_dqpn=(), use_tshark=True,
               verbose=False, out=sys.stdout, require_ipv6=False):
    """Returns an exit status; prints one line per problem."""
    records, problems = {}, []
    try:
        reader = PcapReader(path)
    except Exception as e:  # scapy raises Scapy_Exception / OSError
        print("icrc_judge: cannot read %s: %s" % (path, e), file=sys.stderr)
        return EXIT_CANNOT_RUN
    with reader:
        for frame, pkt in enumerate(reader, start=1):
            rec, probs = judge_packet(pkt)
            if rec is None:
                continue
            problems += ["frame %d: %s" % (frame, p) for p in probs]
            if "opcode" in rec:
                records[frame] = rec
                if verbose:
                    print("frame %d: opcode %#04x dqpn %#08x psn %d icrc %08x%s" % (
                        frame, rec["opcode"], rec["dqpn"], rec["psn"], rec["icrc_be"],
                        "" if rec["scapy_checked"] else " (own check only: scapy could not)"),
                        file=out)
    if require_ipv6:
        for frame, rec in sorted(records.items()):
            if not rec["ipv6"]:
                problems.append("frame %d: IPv4 RoCE packet (--require-ipv6)" % frame)
            elif not rec["scapy_checked"]:
                problems.append("frame %d: IPv6 ICRC not checked by scapy" % frame)
    if len(records) < min_packets:
        problems.append("only %d RoCE packets, expected at least %d" % (len(records), min_packets))
    seen = {r["opcode"] for r in records.values()}
    for op in expect_opcodes:
        if op not in seen:
            problems.append("opcode %#04x never seen (seen: %s)" % (
                op, ",".join("%#04x" % o for o in sorted(seen)) or "none"))
    if expect_dqpn:
        for frame, rec in sorted(records.items()):
            if rec["dqpn"] not in expect_dqpn:
                problems.append("frame %d: DestQP %#x not in %s" % (
                    frame, rec["dqpn"], ",".join("%#x" % q for q in expect_dqpn)))
    if use_tshark:
        try:
            problems += compare_with_tshark(records, run_tshark(path))
        except (FileNotFoundError, RuntimeError) as e:
            print("icrc_judge: %s" % e, file=sys.stderr)
            return EXIT_CANNOT_RUN
    n6 = sum(1 for r in records.values() if r["ipv6"])
    for p in problems:
        print("FAIL %s" % p, file=out)
    print("%s: %d RoCE packets (%d IPv6), %d problems%s" % (
        path, len(records), n6, len(problems), "" if use_tshark else " (tshark skipped)"), file=out)
    return EXIT_FAIL if problems else EXIT_OK


# ----------------------------------------------------------- self-test ----

# scapy test/contrib/roce.uts: CNP captured on a ConnectX-4 Lx (hardware ICRC).
CX4_CNP = bytes.fromhex(
    "e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2"
    "003c 718c 4000 4011 9161 0a00 1101 0a00"
    "1201 0000 12b7 0028 0000 8100 ffff 4000"
    "0118 0000 0000 0000 0000 0000 0000 0000"
    "0000 0000 0000 82fd 002a")
# Same file: UC SEND ONLY (MigReq, PadCnt 2), ICRC as scapy computes it.
UC_SEND = bytes.fromhex(
    "248a07a8fa22248a07a8fa22080045010040047840004011b4d5c0a80007c0a80007"
    "c00012b7002caca22460ffff000000d300cf17104630818be28935d90e9a95505401"
    "be885e50000078f353f3")
# IPv6 vector shared with tests/unit/wire/icrc_test.cc (kIpv6SendPacket).
IPV6_SEND = bytes.fromhex(
    "602123450024114020010db800000000000000000000000120010db8000000000000"
    "000000000002c00012b7002412340400ffff000000118000010068656c6c6f20776f"
    "726c6421fca74b9e")

MAC = dict(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def _v4(bth, payload=b"", **ip):
    ip.setdefault("src", "10.0.0.1")
    ip.setdefault("dst", "10.0.0.2")
    ip.setdefault("id", 0)
    ip.setdefault("flags", "DF")
    p = Ether(**MAC) / IP(**ip) / UDP(sport=0xC001, dport=ROCE_PORT) / bth
    if payload:
        p = p / Raw(payload)
    return Ether(bytes(p))  # scapy fills lengths, checksums and the ICRC


def _v6(bth_bytes):
    """IPv6 RoCE packet; scapy 2.5 cannot compute IPv6 ICRC, so use own_icrc."""
    p = IPv6(src="2001:db8::a", dst="2001:db8::b", tc=0x60, fl=0xBEEF, hlim=9) / \
        UDP(sport=0xC002, dport=ROCE_PORT) / Raw(bth_bytes + b"\0\0\0\0")
    raw = bytearray(bytes(p))
    raw[-4:] = own_icrc(bytes(raw))
    return Ether(**MAC) / IPv6(bytes(raw))


def _good_packets():
    reth = struct.pack("!QII", 0x7F0000001000, 0x1234, 6)
    deth = struct.pack("!II", 0x11111111, 0x000777)
    pk = [
        _v4(BTH(opcode=0x04, dqpn=0x12, psn=0xFFFFFF, ackreq=1), b"hello!!!"),
        _v4(BTH(opcode=0x0A, dqpn=0x12, psn=0, padcount=2), reth + b"abcdef\0\0"),
        _v4(BTH(opcode=0x11, dqpn=0x13, psn=0) / AETH(syndrome=0x1F, msn=1)),
        _v4(BTH(opcode=0x64, dqpn=1, psn=5), deth + b"x" * 64),
        _v4(cnp(0x12)),
        # Unusual but legal IPv4 header values, all covered or masked right.
        _v4(BTH(opcode=0x04, dqpn=0x12, psn=7), b"abcd", id=0x1234, flags=0, tos=0x03, ttl=1),
        Ether(CX4_CNP),
        Ether(UC_SEND),
        Ether(**MAC) / IPv6(IPV6_SEND),
        _v6(bytes(BTH(opcode=0x04, dqpn=0x12, psn=9, solicited=1, icrc=0))[:12] + b"ipv6"),
    ]
    # Variant fields rewritten in flight: TTL, TOS/ECN, FECN/BECN, checksums.
    p = _v4(BTH(opcode=0x04, dqpn=0x12, psn=3), b"in-flight")
    raw = bytearray(bytes(p))
    raw[14 + 1] = 0x03           # ECN CE
    raw[14 + 8] -= 1             # TTL decremented by a router
    raw[14 + 10:14 + 12] = b"\x12\x34"  # stale IP checksum
    raw[14 + 20 + 6:14 + 20 + 8] = b"\0\0"  # UDP checksum zeroed
    raw[14 + 28 + 4] = 0xC0      # FECN + BECN
    pk.append(Ether(bytes(raw)))
    # A 58-byte zero-length SEND padded to Ethernet's 60-byte minimum, as a
    # NIC capture shows it: the trailer is not part of the ICRC.
    short = bytes(_v4(BTH(opcode=0x04, dqpn=0x12, psn=4)))
    assert len(short) == 58
    pk.append(Ether(short + b"\0\0"))
    return pk


def _bad_packets():
    """(description, packet) that must each be rejected."""
    bad = []
    base = bytes(_v4(BTH(opcode=0x04, dqpn=0x12, psn=1), b"payload!"))

    def mut(desc, offset, xor):
        raw = bytearray(base)
        raw[offset] ^= xor
        bad.append((desc, Ether(bytes(raw))))
    mut("ICRC byte flipped", len(base) - 1, 0x01)
    mut("payload bit flipped", len(base) - 5, 0x80)
    mut("IPv4 ID changed after ICRC", 14 + 4, 0x01)
    mut("DestQP changed", 14 + 28 + 7, 0x01)
    mut("UDP source port changed", 14 + 20 + 1, 0x01)
    # A correct scapy packet whose ICRC bytes were written big-endian.
    raw = bytearray(base)
    raw[-4:] = raw[-4:][::-1]
    bad.append(("ICRC stored in the wrong byte order", Ether(bytes(raw))))
    v6 = bytearray(bytes(Ether(**MAC) / IPv6(IPV6_SEND)))
    v6[14 + 8] ^= 0x01  # source address
    bad.append(("IPv6 source address changed", Ether(bytes(v6))))
    return bad


def self_test():
    failures = []

    def check(cond, what):
        print("%s %s" % ("ok  " if cond else "FAIL", what))
        if not cond:
            failures.append(what)

    # 1. The independent implementation reproduces the public vectors.
    check(own_icrc(CX4_CNP[14:]) == bytes.fromhex("82fd002a"), "own ICRC = ConnectX-4 Lx CNP 82fd002a")
    check(own_icrc(UC_SEND[14:]) == bytes.fromhex("78f353f3"), "own ICRC = scapy UC vector 78f353f3")
    check(scapy_icrc(CX4_CNP[14:]) == bytes.fromhex("82fd002a"), "scapy ICRC = ConnectX-4 Lx CNP")
    check(own_icrc(IPV6_SEND) == IPV6_SEND[-4:], "own ICRC = IPv6 vector fca74b9e")
    check(scapy_icrc(IPV6_SEND) == IPV6_SEND[-4:], "scapy-based IPv6 ICRC = IPv6 vector fca74b9e")
    bad6 = bytearray(IPV6_SEND)
    bad6[60] ^= 1  # a payload byte
    check(scapy_icrc(bytes(bad6)) != IPV6_SEND[-4:], "scapy-based IPv6 ICRC sees a payload change")
    var6 = bytearray(IPV6_SEND)
    var6[1] ^= 0x5A  # traffic class / flow label: masked
    var6[7] ^= 0x11  # hop limit: masked
    check(scapy_icrc(bytes(var6)) == IPV6_SEND[-4:], "scapy-based IPv6 ICRC masks tc, flow label, hop limit")
    sane_crc = zlib.crc32(b"123456789") == 0xCBF43926
    check(sane_crc, "zlib.crc32('123456789') == 0xCBF43926")

    tshark = shutil.which("tshark") is not None
    if not tshark:
        print("note: tshark not installed; tshark cross-check skipped in self-test")
    me = [sys.executable, os.path.abspath(__file__)]
    with tempfile.TemporaryDirectory(prefix="icrc_judge_") as tmp:
        good = os.path.join(tmp, "good.pcap")
        wrpcap(good, _good_packets())
        args = [good, "--min-packets", str(len(_good_packets())),
                "--expect-opcodes", "0x04,0x0a,0x11,0x64,0x81,0x24"]
        if not tshark:
            args.append("--no-tshark")
        rc = subprocess.call(me + args)
        check(rc == EXIT_OK, "judge accepts %d good packets (exit %d)" % (len(_good_packets()), rc))

        for desc, pkt in _bad_packets():
            path = os.path.join(tmp, "bad.pcap")
            wrpcap(path, _good_packets()[:2] + [pkt])
            res = subprocess.run(me + [path] + ([] if tshark else ["--no-tshark"]),
                                 stdout=subprocess.PIPE, universal_newlines=True, check=False)
            named = "frame 3:" in res.stdout and "ICRC mismatch" in res.stdout
            check(res.returncode == EXIT_FAIL and named,
                  "judge rejects: %s (exit %d, names frame 3: %s)" % (desc, res.returncode, named))

        # Expectations.
        rc = subprocess.call(me + [good, "--no-tshark", "--min-packets", "999"],
                             stdout=subprocess.DEVNULL)
        check(rc == EXIT_FAIL, "--min-packets too high fails")
        rc = subprocess.call(me + [good, "--no-tshark", "--expect-opcodes", "0x13"],
                             stdout=subprocess.DEVNULL)
        check(rc == EXIT_FAIL, "--expect-opcodes with an absent opcode fails")
        rc = subprocess.call(me + [good, "--no-tshark", "--expect-dqpn", "0x12"],
                             stdout=subprocess.DEVNULL)
        check(rc == EXIT_FAIL, "--expect-dqpn fails when another QPN is present")
        rc = subprocess.call(me + [good, "--no-tshark", "--expect-dqpn", "0x12,0x13,1,0x118,0xd3,0x11"],
                             stdout=subprocess.DEVNULL)
        check(rc == EXIT_OK, "--expect-dqpn passes with every QPN listed")

        # A capture with no RoCE at all is not a pass when packets are expected.
        empty = os.path.join(tmp, "empty.pcap")
        wrpcap(empty, [Ether(**MAC) / IP() / UDP(dport=53) / Raw(b"dns")])
        rc = subprocess.call(me + [empty, "--no-tshark", "--min-packets", "1"],
                             stdout=subprocess.DEVNULL)
        check(rc == EXIT_FAIL, "capture without RoCE fails --min-packets 1")
        rc = subprocess.call(me + [os.path.join(tmp, "missing.pcap")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        check(rc == EXIT_CANNOT_RUN, "unreadable capture exits 2")

        if tshark:
            # tshark and scapy must agree field by field; make sure the
            # comparison can fail by feeding it a doctored decode.
            recs = {1: dict(opcode=4, dqpn=0x12, psn=5, padcount=0, pkey=0xFFFF, ackreq=0,
                            solicited=0, migreq=0, version=0, icrc_be=1)}
            ts = {1: dict(recs[1], psn=6)}
            check(any("psn" in p for p in compare_with_tshark(recs, ts)),
                  "tshark comparison detects a PSN disagreement")
            check(any("did not decode" in p for p in compare_with_tshark(recs, {})),
                  "tshark comparison detects a frame tshark skipped")
            # A WRITE ONLY whose RETH is cut short but whose ICRC is right:
            # only tshark's header decode can catch it.
            cut = os.path.join(tmp, "cut.pcap")
            wrpcap(cut, [_v4(BTH(opcode=0x0A, dqpn=0x12, psn=1), b"1234")])
            res = subprocess.run(me + [cut], stdout=subprocess.PIPE, universal_newlines=True,
                                 check=False)
            check(res.returncode == EXIT_FAIL and "malformed" in res.stdout
                  and "ICRC mismatch" not in res.stdout,
                  "judge rejects a truncated RETH via tshark (exit %d)" % res.returncode)
            frames = run_tshark(good)
            check(frames.get(1, {}).get("psn") == 0xFFFFFF and frames.get(1, {}).get("dqpn") == 0x12,
                  "tshark decodes frame 1 PSN 0xffffff DestQP 0x12")

    print("self-test: %s" % ("FAILED: %d" % len(failures) if failures else "all passed"))
    return EXIT_FAIL if failures else EXIT_OK


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pcap", nargs="?", help="capture file (pcap or pcapng)")
    ap.add_argument("--self-test", action="store_true", help="test the judge itself")
    ap.add_argument("--min-packets", type=int, default=0)
    ap.add_argument("--expect-opcodes", type=_int_list, default=[],
                    help="comma-separated opcodes that must each appear (e.g. 0x04,0x11)")
    ap.add_argument("--expect-dqpn", type=_int_list, default=[],
                    help="comma-separated QPNs; every packet's DestQP must be one of them")
    ap.add_argument("--no-tshark", action="store_true", help="skip the tshark cross-check")
    ap.add_argument("--require-ipv6", action="store_true",
                    help="every RoCE packet must be IPv6, its ICRC checked by scapy")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every RoCE packet")
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test()
    if not args.pcap:
        ap.print_usage(sys.stderr)
        return EXIT_CANNOT_RUN
    return judge_file(args.pcap, args.min_packets, args.expect_opcodes, args.expect_dqpn,
                      use_tshark=not args.no_tshark, verbose=args.verbose,
                      require_ipv6=args.require_ipv6)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
