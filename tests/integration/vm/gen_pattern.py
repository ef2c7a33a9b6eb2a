#!/usr/bin/env python3
"""gen_pattern.py FILE MIB: MIB MiB in which every 4 KiB page starts with its
own number (xor a constant) and is filled with a byte derived from it, so a
page that lands at the wrong place or not at all is seen."""
import struct
import sys

with open(sys.argv[1], 'wb') as f:
    for i in range(int(sys.argv[2]) * 256):
        f.write(struct.pack('<Q', i ^ 0x5eed5eed) + bytes([(i * 7 + 1) & 0xff]) * 4088)
