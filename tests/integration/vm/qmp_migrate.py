#!/usr/bin/env python3
"""Drives a QEMU live migration over QMP and judges the destination's memory.

    qmp_migrate.py SRC.sock DST.sock URI PIN_ALL(0|1) PATTERN ADDR DUMP

Sets rdma-pin-all on both sides when asked, starts `migrate` to URI on the
source, waits (60 s at most) for query-migrate to say completed, checks that
the destination runs, saves ADDR..ADDR+len(PATTERN) of its guest memory to
DUMP with pmemsave and compares it with PATTERN byte for byte. Prints one
line of figures (total time, downtime, Mbit/s, bytes); exit 0 when every
check passed. Both QEMUs are told to quit at the end either way.
"""
import json
import os
import socket
import sys
import time


class Qmp:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(30)
        self.sock.connect(path)
        self.f = self.sock.makefile('rw')
        json.loads(self.f.readline())  # the greeting
        self.call('qmp_capabilities')

    def call(self, cmd, **args):
        self.f.write(json.dumps({'execute': cmd, 'arguments': args}) + '\n')
        self.f.flush()
        while True:
            reply = json.loads(self.f.readline())
            if 'event' not in reply:
                if 'error' in reply:
                    raise RuntimeError(f'{cmd}: {reply["error"]}')
                return reply['return']


def main():
    src_path, dst_path, uri, pin_all, pattern, addr, dump = sys.argv[1:8]
    addr = int(addr, 0)
    size = os.path.getsize(pattern)
    src, dst = Qmp(src_path), Qmp(dst_path)
    ok = False
    try:
        if pin_all == '1':
            for q in (src, dst):
                q.call('migrate-set-capabilities',
                       capabilities=[{'capability': 'rdma-pin-all', 'state': True}])
        src.call('migrate', uri=uri)
        deadline = time.monotonic() + 60
        while True:
            r = src.call('query-migrate')
            if r.get('status') in ('completed', 'failed', 'cancelled'):
                break
            if time.monotonic() > deadline:
                print('FAIL: migration not finished after 60 s:', r)
                return 1
            time.sleep(0.1)
        if r['status'] != 'completed':
            print('FAIL: migration', r['status'], r.get('error-desc', ''))
            return 1
        status = dst.call('query-status')
        if status.get('status') != 'running':
            print('FAIL: the destination is', status.get('status'))
            return 1
        dst.call('pmemsave', val=addr, size=size, filename=dump)
        with open(pattern, 'rb') as a, open(dump, 'rb') as b:
            want, got = a.read(), b.read()
        if want != got:
            bad = next(i for i in range(min(len(want), len(got))) if want[i] != got[i]) \
                if len(want) == len(got) else min(len(want), len(got))
            print(f'FAIL: destination memory differs from the pattern at guest '
                  f'address {addr + bad:#x}')
            return 1
        ram = r.get('ram', {})
        print(f'completed: total {r.get("total-time")} ms, downtime {r.get("downtime")} ms, '
              f'{ram.get("mbps", 0):.0f} Mbit/s, {ram.get("transferred", 0)} bytes, '
              f'{size} pattern bytes verified')
        ok = True
    finally:
        for q in (src, dst):
            try:
                q.call('quit')
            except (OSError, RuntimeError, ValueError):
                pass
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
