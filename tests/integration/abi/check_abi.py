#!/usr/bin/python3
"""Every ELF file of Debian's RDMA consumers must load against softrnic.

For every executable and shared object (python extension modules and the
UCX / libfabric / Open MPI / MPICH plugins included) shipped by PACKAGES:

 1. static check: every version it requires (verneed) from one of SONAMES
    is defined by softrnic's library of that soname; every undefined symbol
    bound to such a version is defined by ours at that version; every
    unversioned undefined symbol that one of Debian's real libraries of
    SONAMES defines is defined by ours too;
 2. loader check: for files that NEED one of SONAMES,
    `LD_LIBRARY_PATH=LIBDIR ldd -r FILE` resolves those sonames into LIBDIR
    and reports no "version ... not found" / "undefined symbol" naming our
    libraries or a symbol Debian's libraries define.

usage: check_abi.py LIBDIR [--system-lib-dir DIR] [--skip-ldd]
exit 0 all resolve, 1 on a miss or a missing package/library, 2 usage.
"""

import argparse
import collections
import os
import re
import subprocess
import sys

PACKAGES = [
    "python3-pyverbs", "libucx0", "ucx-utils", "libfabric1", "libfabric-bin",
    "openmpi-bin", "libopenmpi3", "mpich", "libmpich12", "perftest", "qperf",
    "rdmacm-utils", "ibverbs-utils",
]
SONAMES = [
    "libibverbs.so.1", "librdmacm.so.1",
    "libmlx5.so.1", "libmlx4.so.1", "libefa.so.1", "libmana.so.1",
]


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return r.returncode, r.stdout, r.stderr


class Elf:
    """What the dynamic loader sees of one file (from readelf)."""

    def __init__(self, path):
        self.path = path
        _, dyn, _ = run(["readelf", "-d", "-W", path])
        self.needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
        m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dyn)
        self.soname = m.group(1) if m else None
        _, ver, _ = run(["readelf", "-V", "-W", path])
        # verneed: version index -> (file, version name)
        self.verneed = {}
        self.verdef = set()
        section = None
        cur_file = None
        for line in ver.splitlines():
            if "Version needs section" in line:
                section = "need"
                continue
            if "Version definition section" in line:
                section = "def"
                continue
            if "Version symbols section" in line:
                section = None
                continue
            if section == "need":
                f = re.search(r"File: (\S+)", line)
                if f:
                    cur_file = f.group(1)
                    continue
                n = re.search(r"Name: (\S+)\s+Flags: \S+\s+Version: (\d+)", line)
                if n:
                    self.verneed[int(n.group(2))] = (cur_file, n.group(1))
            elif section == "def":
                d = re.search(r"Flags: (\S+)\s+Index: \d+\s+Cnt: \d+\s+Name: (\S+)", line)
                if d and d.group(1) != "BASE":
                    self.verdef.add(d.group(2))
        _, syms, _ = run(["readelf", "--dyn-syms", "-W", path])
        self.undefined = []  # (name, version or None, file or None, bind)
        self.defined = set()  # (name, version or None)
        for line in syms.splitlines():
            f = line.split()
            if len(f) < 8 or not f[0].endswith(":") or f[4] == "LOCAL":
                continue
            full = f[7]
            idx = None
            if len(f) >= 9:
                m = re.match(r"\((\d+)\)", f[8])
                idx = int(m.group(1)) if m else None
            name, sep, ver = full.partition("@")
            ver = ver.lstrip("@") or None
            if f[6] == "UND":
                if not name:
                    continue
                need_file = self.verneed.get(idx, (None, None))[0] if ver else None
                self.undefined.append((name, ver, need_file, f[4]))
            elif f[6] != "ABS" or ver:
                self.defined.add((name, ver))
        self.names = {n for n, _ in self.defined}


def is_elf_object(path):
    try:
        with open(path, "rb") as fh:
            head = fh.read(18)
    except OSError:
        return False
    if len(head) < 18 or head[:4] != b"\x7fELF":
        return False
    e_type = int.from_bytes(head[16:18], "little")
    return e_type in (2, 3)  # ET_EXEC, ET_DYN (ET_REL objects are not loaded)


def package_files():
    missing = []
    files = {}
    for pkg in PACKAGES:
        code, status, _ = run(["dpkg-query", "-W", "-f=${Status}", pkg])
        if code != 0 or status.strip() != "install ok installed":
            missing.append(pkg)
            continue
        _, listing, _ = run(["dpkg", "-L", pkg])
        for p in listing.splitlines():
            if os.path.isfile(p) and not os.path.islink(p) and is_elf_object(p):
                files.setdefault(os.path.realpath(p), pkg)
    return missing, files


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("libdir")
    ap.add_argument("--system-lib-dir", default="/usr/lib/x86_64-linux-gnu")
    ap.add_argument("--skip-ldd", action="store_true")
    a = ap.parse_args()
    libdir = os.path.abspath(a.libdir)
    if not os.path.isdir(libdir):
        print("usage: check_abi.py LIBDIR (no such directory %s)" % libdir, file=sys.stderr)
        return 2

    missing, files = package_files()
    if missing:
        print("FAIL: packages not installed: %s\n  install them: apt-get install %s "
              "(scripts/install-deps.sh does)" % (" ".join(missing), " ".join(missing)))
        return 1

    fail = False
    real, ours = {}, {}
    for so in SONAMES:
        rp = os.path.join(a.system_lib_dir, so)
        op = os.path.join(libdir, so)
        if not os.path.exists(rp):
            print("FAIL: Debian's %s not found (install ibverbs-providers, libibverbs1, "
                  "librdmacm1)" % rp)
            return 1
        real[so] = Elf(rp)
        if not os.path.exists(op):
            print("FAIL: softrnic's %s is missing" % op)
            fail = True
            continue
        ours[so] = Elf(op)
        if ours[so].soname != so:
            print("FAIL: %s has SONAME %r" % (op, ours[so].soname))
            fail = True
    # name -> sonames whose real library defines it (for unversioned refs)
    real_names = collections.defaultdict(set)
    for so, e in real.items():
        for n in e.names:
            real_names[n].add(so)

    misses = collections.defaultdict(set)  # message -> files
    checked_refs = collections.Counter()   # soname -> references checked
    distinct = collections.defaultdict(set)
    verneeds = 0
    elfs = {}
    for path in sorted(files):
        e = elfs[path] = Elf(path)
        for idx, (vfile, vname) in e.verneed.items():
            if vfile in SONAMES:
                verneeds += 1
                if vfile in ours and vname not in ours[vfile].verdef:
                    misses["version %s of %s not defined" % (vname, vfile)].add(path)
        for name, ver, vfile, bind in e.undefined:
            if ver:
                if vfile not in SONAMES:
                    continue
                targets = [vfile]
            else:
                targets = sorted(real_names.get(name, ()))
            for so in targets:
                checked_refs[so] += 1
                distinct[so].add((name, ver))
                if so not in ours:
                    continue
                o = ours[so]
                ok = (name, ver) in o.defined if ver else name in o.names
                if not ok:
                    misses["%s%s (%s) not defined%s" % (
                        name, "@" + ver if ver else "", so,
                        "" if bind != "WEAK" else ", weak reference")].add(path)

    for msg in sorted(misses):
        users = sorted(misses[msg])
        print("MISSING %s; needed by %s%s" % (msg, ", ".join(users[:3]),
                                               " (+%d more)" % (len(users) - 3)
                                               if len(users) > 3 else ""))
    if misses:
        fail = True

    # Loader check on everything that NEEDs one of our libraries.
    loaded = [p for p, e in elfs.items() if set(e.needed) & set(SONAMES)]
    ldd_fail = 0
    if not a.skip_ldd:
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"]
                                           if env.get("LD_LIBRARY_PATH") else "")
        for path in loaded:
            code, out, err = run(["ldd", "-r", path], env=env)
            text = out + err
            problems = []
            for so in set(elfs[path].needed) & set(SONAMES):
                m = re.search(r"^\s*%s => (\S+)" % re.escape(so), text, re.M)
                if not m:
                    problems.append("%s not resolved" % so)
                elif os.path.dirname(os.path.realpath(m.group(1))) != os.path.realpath(libdir):
                    problems.append("%s resolved to %s, not into %s" % (so, m.group(1), libdir))
            for line in text.splitlines():
                if "version" in line and "not found" in line and any(s in line for s in SONAMES):
                    problems.append(line.strip())
                u = re.search(r"undefined symbol: ([^\s,]+)", line)
                if u and (any(s in line for s in SONAMES) or u.group(1) in real_names):
                    problems.append(line.strip())
            if code != 0 and not problems:
                problems.append("ldd exit %d: %s" % (code, text.strip()[:200]))
            if problems:
                ldd_fail += 1
                print("LDD %s:\n  %s" % (path, "\n  ".join(problems)))
        if ldd_fail:
            fail = True

    per_lib = ", ".join("%s %d refs/%d distinct" % (so, checked_refs[so], len(distinct[so]))
                        for so in SONAMES)
    summary = ("%d ELF files of %d packages; %d version requirements and %d symbol "
               "references on our sonames (%s); ldd -r on %d files%s"
               % (len(files), len(PACKAGES), verneeds, sum(checked_refs.values()), per_lib,
                  0 if a.skip_ldd else len(loaded), " (skipped)" if a.skip_ldd else ""))
    if fail:
        print("FAIL: %d unresolved import(s)/version(s), %d file(s) fail ldd -r; checked %s"
              % (len(misses), ldd_fail, summary))
        return 1
    print("OK: checked %s" % summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
