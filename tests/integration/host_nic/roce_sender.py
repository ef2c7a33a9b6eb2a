#!/usr/bin/python3
"""A standard RoCE v2 sender that is not softrnic: scapy builds RC SEND-only
packets (BTH, payload, ICRC computed by scapy.contrib.roce) for the exact
IPv4/UDP header an unconnected Don't-Fragment UDP socket puts on them (ID 0,
flags DF), and a plain UDP socket sends their UDP payload to DST:4791, as a
hardware RNIC's packets would arrive.

    roce_sender.py SRC_IP DST_IP DEST_QPN COUNT
"""
import logging
import socket
import sys

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.all import IP, UDP, Raw  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

ROCE_PORT = 4791
IP_MTU_DISCOVER, IP_PMTUDISC_DO = 10, 2


def main():
    src, dst, qpn, count = sys.argv[1], sys.argv[2], int(sys.argv[3], 0), int(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)  # DF, ID 0
    s.bind((src, 0))
    sport = s.getsockname()[1]
    for psn in range(count):
        pkt = IP(src=src, dst=dst, id=0, flags="DF", ttl=64) / \
            UDP(sport=sport, dport=ROCE_PORT) / \
            BTH(opcode=0x04, dqpn=qpn, psn=psn, ackreq=1) / Raw(b"not softrnic!!!!")
        udp_payload = bytes(IP(bytes(pkt))[UDP].payload)  # BTH .. ICRC, as scapy framed it
        s.sendto(udp_payload, (dst, ROCE_PORT))
    print("sent %d RC SEND packets to %s QPN 0x%06x from port %d" % (count, dst, qpn, sport))


if __name__ == "__main__":
    main()
