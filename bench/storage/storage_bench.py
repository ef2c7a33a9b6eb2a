#!/usr/bin/env python3
"""Storage and VM rows of docs/benchmarks.md (issue 44) in one run.

    bench/storage/storage_bench.py [--runs N] [--lib-dir DIR] [--seconds S] [--out FILE]

Two network namespaces joined by a veth pair at its defaults stand for two
hosts: T (10.251.0.1) runs tgtd, I (10.251.0.2) the initiators. "one host"
rows run the initiator in T as well (softrnic's shared-memory path); "two
hosts" rows in I (RoCE v2 over UDP). Every softrnic process gets the
libraries of --lib-dir through LD_LIBRARY_PATH (an optimised build; default
build/lib). Placement: unpinned, on whatever CPUs the machine has.

  - iSER against iSCSI/TCP: one tgtd serves the same LUN (a 256 MiB file in
    /dev/shm, so that no disk limits either) as an iSER target and as an
    iSCSI/TCP target; libiscsi's iscsi-perf reads 64 KiB and 256 KiB
    requests, 16 in flight, for --seconds, alternating iSER and TCP run by
    run. MB/s as iscsi-perf reports it, and the CPU time (user + system) the
    initiator and tgtd spent per GB moved.
  - QEMU live migration over rdma: against tcp:, plain: a 256 MiB TCG guest
    with a 192 MiB pattern (verified at the destination each time), total
    time as query-migrate reports it, alternating run by run.

Medians with every run listed. Needs root, tgt, libiscsi-bin, qemu-system-x86.
"""
import argparse
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VM_DIR = os.path.join(ROOT, 'tests', 'integration', 'vm')
NS_T, NS_I, IP_T, IP_I = 'sbsta', 'sbsti', '10.251.0.1', '10.251.0.2'
CONTROL_PORT = 3271
IQN_ISER, IQN_TCP = 'iqn.2026-12.org.softrnic:bench-iser', 'iqn.2026-12.org.softrnic:bench-tcp'
# tgt 1.0.85 refuses iSER logins that no initiator-name rule names
# (docs/storage.md): both targets bind this name.
IQN_INITIATOR = 'iqn.2026-12.org.softrnic:bench-initiator'


def sh(*cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def netns_up():
    netns_down()
    sh('ip', 'netns', 'add', NS_T)
    sh('ip', 'netns', 'add', NS_I)
    sh('ip', 'link', 'add', 'sbstv0', 'type', 'veth', 'peer', 'name', 'sbstv1')
    for ns, dev, ip in ((NS_T, 'sbstv0', IP_T), (NS_I, 'sbstv1', IP_I)):
        sh('ip', 'link', 'set', dev, 'netns', ns)
        sh('ip', '-n', ns, 'link', 'set', 'lo', 'up')
        sh('ip', '-n', ns, 'addr', 'add', ip + '/24', 'dev', dev)
        sh('ip', '-n', ns, 'link', 'set', dev, 'up')
    time.sleep(1)


def netns_down():
    for ns in (NS_T, NS_I):
        sh('ip', 'netns', 'pids', ns, check=False)
        for pid in sh('ip', 'netns', 'pids', ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        sh('ip', 'netns', 'del', ns, check=False)


def cpu_seconds(pid):
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Tgtd:
    def __init__(self, env, lun):
        self.proc = subprocess.Popen(
            ['ip', 'netns', 'exec', NS_T, 'tgtd', '-f', '-C', str(CONTROL_PORT)], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while self.adm('--mode', 'sys', '--op', 'show', check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError('tgtd did not start')
            time.sleep(0.2)
        for tid, lld, iqn in ((1, 'iser', IQN_ISER), (2, 'iscsi', IQN_TCP)):
            self.adm('--lld', lld, '--mode', 'target', '--op', 'new', '--tid', str(tid), '-T', iqn)
            self.adm('--lld', lld, '--mode', 'logicalunit', '--op', 'new', '--tid', str(tid),
                     '--lun', '1', '-b', lun)
            self.adm('--lld', lld, '--mode', 'target', '--op', 'bind', '--tid', str(tid),
                     '-I', 'ALL')
            self.adm('--lld', lld, '--mode', 'target', '--op', 'bind', '--tid', str(tid),
                     '-Q', IQN_INITIATOR)
        # tgtd itself is the child of `ip netns exec`, which execs it.
        self.pid = self.proc.pid

    def adm(self, *args, check=True):
        return sh('tgtadm', '-C', str(CONTROL_PORT), *args, check=check, timeout=20)

    def stop(self):
        # tgtd leaves only once it has no target.
        for tid, lld in ((1, 'iser'), (2, 'iscsi')):
            self.adm('--lld', lld, '--mode', 'target', '--op', 'delete', '--tid', str(tid),
                     '--force', check=False)
        self.adm('--mode', 'system', '--op', 'delete', check=False)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def iscsi_perf(env, ns, url, blocks, seconds, tgtd_pid):
    t0, c0 = cpu_seconds(tgtd_pid), children_cpu()
    out = subprocess.run(['ip', 'netns', 'exec', ns, 'timeout', str(seconds + 30), 'iscsi-perf',
                          '-i', IQN_INITIATOR, '-b', str(blocks), '-m', '16', '-t', str(seconds), url],
                         env=env, capture_output=True, text=True).stdout
    m = re.findall(r'iops average (\d+) \((\d+) MB/s\)', out)
    if not m:
        raise RuntimeError(f'iscsi-perf {url}: no result: {out[-300:]}')
    mbs = int(m[-1][1])
    cpu = (cpu_seconds(tgtd_pid) - t0) + (children_cpu() - c0)
    gb = mbs * seconds / 1000.0
    return mbs, cpu / gb * 1000 if gb > 0 else float('nan')  # MB/s, ms of CPU per GB


def migrate(env, src_ns, dst_ns, dst_ip, transport, port, tmp, pattern):
    qemu = ['qemu-system-x86_64', '-machine', 'pc', '-accel', 'tcg', '-m', '256M', '-nodefaults',
            '-display', 'none', '-device', f'loader,file={pattern},addr=0x1000000']
    uri = f'{transport}:{dst_ip}:{port}'
    socks = {k: os.path.join(tmp, f'{k}-{transport}-{port}.sock') for k in ('src', 'dst')}
    dst = subprocess.Popen(['ip', 'netns', 'exec', dst_ns, *qemu, '-qmp',
                            f'unix:{socks["dst"]},server=on,wait=off', '-incoming', uri],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    src = subprocess.Popen(['ip', 'netns', 'exec', src_ns, *qemu, '-qmp',
                            f'unix:{socks["src"]},server=on,wait=off'],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not all(os.path.exists(s) for s in socks.values()):
            if time.monotonic() > deadline:
                raise RuntimeError('QEMU did not start')
            time.sleep(0.1)
        out = sh(sys.executable, os.path.join(VM_DIR, 'qmp_migrate.py'), socks['src'],
                 socks['dst'], uri, '0', pattern, '0x1000000', os.path.join(tmp, 'dump.bin'),
                 timeout=120, check=False).stdout
        m = re.search(r'completed: total (\d+) ms', out)
        if not m:
            raise RuntimeError(f'migration over {transport}: {out.strip()}')
        return int(m.group(1))
    finally:
        for p in (src, dst):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def row(name, values, unit, fmt='{:.0f}'):
    med = statistics.median(values)
    return med, f'| {name} | {fmt.format(med)} {unit} | {", ".join(fmt.format(v) for v in values)} |'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--seconds', type=int, default=5)
    ap.add_argument('--lib-dir', default=os.path.join(ROOT, 'build', 'lib'))
    ap.add_argument('--out', default=os.path.join(ROOT, 'bench', 'results', 'storage-latest.md'))
    a = ap.parse_args()
    for tool in ('tgtd', 'tgtadm', 'iscsi-perf', 'qemu-system-x86_64'):
        if shutil.which(tool) is None:
            sys.exit(f'{tool} missing (scripts/install-deps.sh)')
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.abspath(a.lib_dir))
    tmp = tempfile.mkdtemp(prefix='softrnic-storage-bench-')
    lun = tempfile.mktemp(prefix='softrnic-bench-lun-', dir='/dev/shm')
    pattern = os.path.join(tmp, 'pattern.bin')
    sh(sys.executable, os.path.join(VM_DIR, 'gen_pattern.py'), pattern, '192')
    lines = []
    try:
        netns_up()
        with open(lun, 'wb') as f:
            f.truncate(256 << 20)
        # Filled, so that reads move real bytes from the page cache.
        with open(lun, 'r+b') as f:
            f.write(os.urandom(1 << 20) * 256)
        tgtd = Tgtd(env, lun)
        try:
            lines += ['| iscsi-perf read, 16 in flight | median | runs |', '|---|---|---|']
            for where, ns in (('one host', NS_T), ('two hosts', NS_I)):
                for size, blocks in (('64 KiB', 128), ('256 KiB', 512)):
                    res = {'iser': [], 'tcp': []}
                    cpu = {'iser': [], 'tcp': []}
                    for _ in range(a.runs):
                        for kind, iqn in (('iser', IQN_ISER), ('tcp', IQN_TCP)):
                            url = f'{"iser" if kind == "iser" else "iscsi"}://{IP_T}/{iqn}/1'
                            mbs, ms_per_gb = iscsi_perf(env, ns, url, blocks, a.seconds,
                                                        tgtd.pid)
                            res[kind].append(mbs)
                            cpu[kind].append(ms_per_gb)
                    mi, li = row(f'iSER {size}, {where}', res['iser'], 'MB/s')
                    mt, lt = row(f'iSCSI/TCP {size}, {where}', res['tcp'], 'MB/s')
                    _, ci = row(f'iSER {size}, {where}: CPU', cpu['iser'], 'ms/GB')
                    _, ct = row(f'iSCSI/TCP {size}, {where}: CPU', cpu['tcp'], 'ms/GB')
                    lines += [li, lt, ci, ct,
                              f'| iSER / TCP {size}, {where} | {mi / mt:.2f}x | |']
                    print('\n'.join(lines[-5:]), flush=True)
        finally:
            tgtd.stop()
        lines += ['', '| QEMU migration, 256 MiB guest | median | runs |', '|---|---|---|']
        port = 4600
        for where, src_ns in (('one host', NS_T), ('two hosts', NS_I)):
            res = {'rdma': [], 'tcp': []}
            for _ in range(a.runs):
                for transport in ('rdma', 'tcp'):
                    port += 1
                    res[transport].append(
                        migrate(env, src_ns, NS_T, IP_T, transport, port, tmp, pattern))
            mr, lr = row(f'rdma:, {where}', res['rdma'], 'ms')
            mt, lt = row(f'tcp:, {where}', res['tcp'], 'ms')
            lines += [lr, lt, f'| rdma: / tcp:, {where} | {mr / mt:.2f}x | |']
            print('\n'.join(lines[-3:]), flush=True)
    finally:
        netns_down()
        for p in (lun,):
            if os.path.exists(p):
                os.unlink(p)
        shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, 'w') as f:
        f.write(f'Storage and VM rows (bench/storage/storage_bench.py --runs {a.runs} '
                f'--seconds {a.seconds}), {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}\n\n')
        f.write('\n'.join(lines) + '\n')
    print(f'written to {a.out}')


if __name__ == '__main__':
    main()
