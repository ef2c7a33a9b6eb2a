#!/usr/bin/python3
"""An on-path attacker against a sealed RC connection (docs/sealed.md).

    seal_attacker.py CAPTURE.pcap DST_IP

Reads the sealed RoCE v2 packets to DST_IP:4791 in CAPTURE (what the
attacker saw on the path) and sends them back to DST_IP through a raw IPv4
socket (root), each kind with a valid ICRC, as an attacker who can read and
write the path would:

  replay    every captured packet again, unchanged
  reorder   the same packets again, last first
  bitflip   each packet with its counter moved ahead of anything sent (so
            that only the tag can refuse it) and one bit of its tag flipped
  forge     each packet with its counter moved ahead and its body and tag
            randomized

Prints one line per kind, "<kind> <count>", and exits 0; 2 on bad input.
The ICRC is computed as tests/integration/icrc_judge.py's own_icrc does.
"""

import os
import socket
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from icrc_judge import own_icrc  # noqa: E402

TRAILER = 24  # counter (8) + tag (16), docs/sealed.md


def read_pcap(path):
    """The IPv4 datagrams of a classic pcap file (Ethernet or Linux cooked)."""
    data = open(path, "rb").read()
    if len(data) < 24:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    off, out = 24, []
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        frame = data[off + 16:off + 16 + incl]
        off += 16 + incl
        if linktype == 1 and len(frame) > 14 and frame[12:14] == b"\x08\x00":
            out.append(frame[14:])
        elif linktype == 113 and len(frame) > 16 and frame[14:16] == b"\x08\x00":
            out.append(frame[16:])
    return out


def sealed_to(datagrams, dst):
    for ip in datagrams:
        ihl = (ip[0] & 0xF) * 4
        if ip[9] != 17 or socket.inet_ntoa(ip[16:20]) != dst:
            continue
        if struct.unpack(">H", ip[ihl + 2:ihl + 4])[0] != 4791:
            continue
        bth = ip[ihl + 8:]
        if len(bth) >= 12 + TRAILER + 4 and (bth[1] & 0x0F) == 1:
            yield bytearray(ip)


def with_icrc(ip):
    ip = bytearray(ip)
    ihl = (ip[0] & 0xF) * 4
    ip[ihl + 6:ihl + 8] = b"\x00\x00"  # no UDP checksum (IPv4 allows it)
    ip[-4:] = own_icrc(bytes(ip))
    return bytes(ip)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    packets = list(sealed_to(read_pcap(argv[1]), argv[2]))
    if not packets:
        print("no sealed packets to %s in %s" % (argv[2], argv[1]), file=sys.stderr)
        return 2
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    dst = (argv[2], 0)

    def send(ip):
        sock.sendto(with_icrc(ip), dst)

    for p in packets:
        send(p)
    print("replay %d" % len(packets))
    for p in reversed(packets):
        send(p)
    print("reorder %d" % len(packets))
    def ahead(q, by):
        """Moves q's counter `by` ahead: past what the receiver has seen (the
        capture is seconds old), so that only the tag can refuse it."""
        at = len(q) - 4 - TRAILER
        counter = struct.unpack(">Q", bytes(q[at:at + 8]))[0] + by
        q[at:at + 8] = struct.pack(">Q", counter)
        return at

    for i, p in enumerate(packets):
        q = bytearray(p)
        ahead(q, (1 << 20) + i)
        # One bit of the tag (the last 16 bytes before the ICRC).
        q[len(q) - 4 - 1 - (i % 16)] ^= 1 << (i % 8)
        send(q)
    print("bitflip %d" % len(packets))
    for i, p in enumerate(packets):
        q = bytearray(p)
        at = ahead(q, (1 << 21) + i)
        ihl = (q[0] & 0xF) * 4
        body = ihl + 8 + 12  # past the BTH: extension headers and body
        q[body:at] = os.urandom(at - body)
        q[at + 8:at + TRAILER] = os.urandom(16)
        send(q)
    print("forge %d" % len(packets))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
