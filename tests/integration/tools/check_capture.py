#!/usr/bin/python3
"""Judges a `softrnic capture` of one perftest run against what perftest said.

    check_capture.py CAPTURE TOOL SIZE ITERS MTU CLIENT_QPN CLIENT_PSN SERVER_QPN SERVER_PSN

TOOL is write_bw, send_lat, read_lat or atomic_lat; QPNs and PSNs are the hex
values perftest printed ("local address: ... QPN 0x.. PSN 0x.."). tshark
decodes the capture; every frame must be RoCE v2 (InfiniBand BTH over UDP),
and:
  * destination QPs: only the two QPs of the run;
  * opcodes: those the tool's operation uses, and nothing else;
  * PSNs: each side's requests start at the PSN it announced and go up by
    one per request packet sent, no gap, no repeat (no loss on these paths).
    A direct shared-memory operation (a frame whose comment says so)
    consumes no PSN: its packets carry the PSNs the next request would
    take. Responses carry PSNs of requests the other side sent.
  * lengths: every message (FIRST .. LAST or ONLY) carries SIZE payload
    bytes, a WRITE's or READ's RETH asks for SIZE bytes; ITERS messages
    (per direction for send_lat).
Exit 0 when all hold; 1 with every failure printed.
"""
import subprocess
import sys

# Extension header bytes after the BTH, by opcode (IBA 9.2-9.3).
RETH, AETH, ATOMIC_ETH, ATOMIC_ACK_ETH = 16, 4, 28, 8
EXT = {0x00: 0, 0x01: 0, 0x02: 0, 0x04: 0, 0x06: RETH, 0x07: 0, 0x08: 0, 0x0A: RETH,
       0x0C: RETH, 0x0D: AETH, 0x0E: 0, 0x0F: AETH, 0x10: AETH, 0x11: AETH,
       0x12: AETH + ATOMIC_ACK_ETH, 0x13: ATOMIC_ETH, 0x14: ATOMIC_ETH}
REQUESTS = {0x00, 0x01, 0x02, 0x04, 0x06, 0x07, 0x08, 0x0A, 0x0C, 0x13, 0x14}
FIRST = {0x00, 0x06, 0x0D}
LAST = {0x02, 0x08, 0x0F}
ONLY = {0x04, 0x0A, 0x10}
ALLOWED = {
    "write_bw": {0x06, 0x07, 0x08, 0x0A, 0x11},
    "send_lat": {0x00, 0x01, 0x02, 0x04, 0x11},
    "read_lat": {0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11},
    "atomic_lat": {0x13, 0x14, 0x12, 0x11},
}
STARTS = {0x00, 0x04, 0x06, 0x0A, 0x0C, 0x13, 0x14}  # requests that begin a message
# The packets that begin a message, counted for their sender (READ: the
# client's request and the server's response).
MESSAGE_OPCODES = {"write_bw": {0x06, 0x0A}, "send_lat": {0x00, 0x04},
                   "read_lat": {0x0C, 0x0D, 0x10}, "atomic_lat": {0x13, 0x14}}


def main():
    if len(sys.argv) != 10:
        print(__doc__)
        return 2
    path, tool = sys.argv[1], sys.argv[2]
    size, iters, mtu = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    cqpn, cpsn, sqpn, spsn = (int(x, 16) for x in sys.argv[6:10])
    fields = ["frame.number", "infiniband.bth.opcode", "infiniband.bth.destqp",
              "infiniband.bth.psn", "infiniband.bth.padcnt", "udp.length",
              "infiniband.reth.dmalen", "frame.comment"]
    cmd = ["tshark", "-r", path, "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    problems = []
    next_psn = {cqpn: cpsn, sqpn: spsn}  # by sender QPN
    direct_psn = dict(next_psn)
    sent_psns = {cqpn: set(), sqpn: set()}
    messages = {cqpn: 0, sqpn: 0}
    payload = {cqpn: None, sqpn: None}  # bytes of the message in progress, by receiver of data
    frames = 0
    resent = 0
    for line in out.splitlines():
        frames += 1
        num, op, dqp, psn, pad, udplen, dmalen, comment = line.split("|")
        if not op:
            problems.append("frame %s is not decoded as RoCE v2" % num)
            continue
        op, dqp, psn = int(op), int(dqp, 16), int(psn)
        direct = "direct shared-memory" in comment
        if dqp not in (cqpn, sqpn):
            problems.append("frame %s to QP 0x%x, not a QP of the run" % (num, dqp))
            continue
        sender = sqpn if dqp == cqpn else cqpn
        if op not in ALLOWED[tool]:
            problems.append("frame %s: opcode 0x%x is not one %s uses" % (num, op, tool))
            continue
        if op in REQUESTS:
            # A message's first packet starts at the sender's next PSN; a
            # direct operation's packets count on from there without
            # consuming it.
            # A READ request takes one PSN per response packet (IBA 9.7.1).
            span = max(1, -(-int(dmalen) // mtu)) if op == 0x0C and dmalen else 1
            if direct:
                if op in STARTS:
                    direct_psn[sender] = next_psn[sender]
                expect = direct_psn[sender]
                direct_psn[sender] = (expect + span) & 0xFFFFFF
            else:
                expect = next_psn[sender]
                if psn != expect and psn in sent_psns[sender]:
                    # Sent again (after a NAK, an RNR NAK or a timeout: IBA
                    # 9.7.5.1): a PSN this side used before, never one ahead.
                    resent += 1
                    continue
                next_psn[sender] = (expect + span) & 0xFFFFFF
            if psn != expect:
                problems.append("frame %s: request PSN %d, expected %d (%s)" %
                                (num, psn, expect, "direct" if direct else "packet path"))
            for k in range(span):
                sent_psns[sender].add((psn + k) & 0xFFFFFF)
        else:
            # A response names a PSN of a request the other side sent.
            if psn not in sent_psns[dqp]:
                problems.append("frame %s: response PSN %d answers no request of QP 0x%x" %
                                (num, psn, dqp))
        # Lengths.
        if dmalen and op in (0x06, 0x0A, 0x0C) and int(dmalen) != size:
            problems.append("frame %s: RETH DMA length %s, expected %d" % (num, dmalen, size))
        data = int(udplen) - 8 - 12 - EXT.get(op, 0) - 4 - int(pad or 0)
        if data < 0 or data > mtu:
            problems.append("frame %s: payload of %d bytes" % (num, data))
        if op in MESSAGE_OPCODES[tool]:
            messages[sender] += 1
        receiver = dqp
        if op in FIRST:
            payload[receiver] = data
        elif op in (0x01, 0x07, 0x0E) or op in LAST:
            if payload[receiver] is None:
                problems.append("frame %s: middle/last packet without a first" % num)
            else:
                payload[receiver] += data
        if op in ONLY:
            payload[receiver] = data
        if op in LAST | ONLY:
            if payload[receiver] != size:
                problems.append("frame %s: message of %s bytes, expected %d" %
                                (num, payload[receiver], size))
            payload[receiver] = None
    want = {"write_bw": {cqpn: iters, sqpn: 0}, "send_lat": {cqpn: iters, sqpn: iters},
            "read_lat": {cqpn: iters, sqpn: iters}, "atomic_lat": {cqpn: iters, sqpn: 0}}[tool]
    for q, n in want.items():
        if messages[q] != n:
            problems.append("QP 0x%x sent %d messages, expected %d" % (q, messages[q], n))
    for p in problems[:40]:
        print("check_capture: %s: %s" % (path, p))
    print("check_capture: %s: %d frames (%d requests sent again), %s, %d problems" %
          (path, frames, resent,
           ", ".join("QP 0x%x sent %d messages" % kv for kv in messages.items()), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
