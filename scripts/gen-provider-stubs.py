#!/usr/bin/python3
"""Generate softrnic's stand-in provider libraries from Debian's real ones.

For each public provider library of Debian's `ibverbs-providers`
(libmlx5.so.1, libmlx4.so.1, libefa.so.1, libmana.so.1) this reads the
exported symbols with their version nodes (`readelf --dyn-syms -W`,
`readelf -V -W`) and writes

  <out>/lib<x>.map    a linker version script: every node of the real
                      library, in the same order, with the same parent,
                      every symbol at its node (default version), the last
                      node holding `local: *`;
  <out>/<x>_stub.c    one stub per exported function, its signature copied
                      from the prototype in <infiniband/<x>dv.h> (the stub
                      includes that header, so a mismatch between our copy
                      and the header is a compile error); symbols the real
                      library exports only at a non-default version (e.g.
                      mlx5dv_init_obj@MLX5_1.0) get a stub bound with
                      .symver; data symbols get a definition of the same
                      size.

What a stub returns: what the real library returns for a device it does
not drive (softrnic's device is never an mlx5/mlx4/EFA/MANA device):
  * `*_is_supported()`                  -> false;
  * functions returning a pointer       -> NULL with errno = EOPNOTSUPP;
  * void functions                      -> nothing;
  * int functions                       -> the convention of the family,
    from the headers and man pages: the *dv_* providers return an errno
    value (EOPNOTSUPP) directly ("0 on success or the value of errno on
    failure" in mlx5dv_*.3, efadv_*.3, mlx4dv_*.3, manadv_*.3), except the
    functions in INT_EXCEPTIONS, whose man page says otherwise (a file
    descriptor: -1 with errno; a count: -EOPNOTSUPP);
  * ssize_t functions                   -> -1 with errno = EOPNOTSUPP;
  * other scalar returns (unsigned, enum) -> listed in SCALAR_RETURNS with
    the value and the reason; an unlisted one stops the generator, so a new
    function is looked at rather than guessed.

Why generation runs at build time (CMake custom command in
src/verbs/CMakeLists.txt) rather than committing its output: the stubs are
compiled against <infiniband/*dv.h> from libibverbs-dev anyway, and
libibverbs-dev depends on ibverbs-providers of exactly the same version, so
the libraries read here are always the ones those headers describe and the
ones Debian's binaries were linked against. Generating at build time adds
no dependency and cannot drift: a Debian update that adds a symbol or a
node is picked up by the next build, where a committed copy would silently
fall behind until someone regenerated it. A header/library disagreement
(a symbol with no prototype, a prototype that does not match) stops the
build with a message naming the symbol.

usage: gen-provider-stubs.py --out-dir DIR [--lib-dir DIR] [--include-dir DIR]
                             [--cc CC] [LIB ...]
Python standard library only; needs readelf (binutils) and a C
preprocessor ($CC -E).
"""

import argparse
import os
import re
import subprocess
import sys

# library -> (header under infiniband/, stub file stem)
LIBRARIES = {
    "libmlx5.so.1": ("mlx5dv.h", "mlx5"),
    "libmlx4.so.1": ("mlx4dv.h", "mlx4"),
    "libefa.so.1": ("efadv.h", "efa"),
    "libmana.so.1": ("manadv.h", "mana"),
}

# int functions whose man page does not say "0 on success or the value of
# errno on failure": name -> (C statements, the rule quoted from the page).
INT_EXCEPTIONS = {
    # mlx5dv_vfio_get_events_fd.3: "Returns the internal matching file
    # descriptor." No descriptor exists: -1 (never a valid fd), errno set.
    "mlx5dv_vfio_get_events_fd":
        (["errno = EOPNOTSUPP;", "return -1;"], "a file descriptor: -1, errno"),
    # mlx5dv_qp_cancel_posted_send_wrs.3 (rdma-core's man page source; not
    # in Debian 12's libibverbs-dev): "Number of work
    # requests that were canceled, or -errno on error."
    "mlx5dv_qp_cancel_posted_send_wrs":
        (["return -EOPNOTSUPP;"], "count of cancelled WRs or -errno"),
}

# Other scalar return types (unsigned, enums, ...): name -> (C statements,
# why). None exist in rdma-core 44; a new one stops the generator so its man
# page is read instead of a value being guessed.
SCALAR_RETURNS = {}

STUB_ERRNO = "EOPNOTSUPP"


def die(msg):
    sys.stderr.write("gen-provider-stubs: error: %s\n" % msg)
    sys.exit(1)


def run(cmd):
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        die("%s not found" % cmd[0])
    except subprocess.CalledProcessError as e:
        die("%s failed:\n%s" % (" ".join(cmd), e.stderr))


# ---------------------------------------------------------------- ELF side

def read_version_nodes(path, soname):
    """[(node, [parents])] in definition order, the BASE entry left out."""
    out = run(["readelf", "-V", "-W", path])
    m = re.search(r"Version definition section.*?\n(.*?)(?:\n\s*\n|\Z)", out, re.S)
    if not m:
        die("%s has no version definitions" % path)
    nodes = []
    for line in m.group(1).splitlines():
        d = re.search(r"Flags: (\S+)\s+Index: \d+\s+Cnt: \d+\s+Name: (\S+)", line)
        if d:
            flags, name = d.groups()
            nodes.append([name, [], flags == "BASE"])
            continue
        p = re.search(r"Parent \d+: (\S+)", line)
        if p and nodes:
            nodes[-1][1].append(p.group(1))
    base = [n for n in nodes if n[2]]
    if not base or base[0][0] != soname:
        die("%s: BASE version is not %s" % (path, soname))
    return [(n, parents) for n, parents, is_base in nodes if not is_base]


def read_symbols(path, nodes):
    """Defined global dynamic symbols: list of dicts name/version/default/type/size."""
    out = run(["readelf", "--dyn-syms", "-W", path])
    node_names = {n for n, _ in nodes}
    syms = []
    for line in out.splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].endswith(":") or f[6] == "UND":
            continue
        typ, bind, ndx, full = f[3], f[4], f[6], f[7]
        if bind not in ("GLOBAL", "WEAK"):
            continue
        if ndx == "ABS" and full in node_names:
            continue  # the linker's marker symbol for a version node
        if "@@" in full:
            name, ver = full.split("@@", 1)
            default = True
        elif "@" in full:
            name, ver = full.split("@", 1)
            default = False
        else:
            die("%s: unversioned export %s" % (path, full))
        if ver not in node_names:
            die("%s: %s is at unknown version %s" % (path, name, ver))
        size = int(f[2], 16) if f[2].startswith("0x") else int(f[2])
        syms.append({"name": name, "version": ver, "default": default,
                     "type": typ, "size": size, "bind": bind})
    syms.sort(key=lambda s: (s["name"], not s["default"], s["version"]))
    return syms


# ------------------------------------------------------------- header side

def preprocess(header, include_dir, cc):
    src = "#include <infiniband/%s>\n" % header
    cmd = [cc, "-E", "-P", "-x", "c", "-"]
    if include_dir:
        cmd[1:1] = ["-isystem", include_dir]
    try:
        r = subprocess.run(cmd, input=src, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as e:
        die("preprocessing <infiniband/%s> failed:\n%s" % (header, e.stderr))
    return r.stdout


def strip_balanced(text, keyword):
    """Removes `keyword ( ... )` with balanced parentheses."""
    out = []
    i = 0
    while True:
        j = text.find(keyword, i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        k = j + len(keyword)
        while k < len(text) and text[k].isspace():
            k += 1
        if k >= len(text) or text[k] != "(":
            out.append(keyword)
            i = j + len(keyword)
            continue
        depth = 0
        while k < len(text):
            if text[k] == "(":
                depth += 1
            elif text[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1


def normalise(text):
    for kw in ("__attribute__", "__asm__", "__asm", "__declspec"):
        text = strip_balanced(text, kw)
    text = re.sub(r"\b__extension__\b|\b__restrict\b|\b__inline\b", " ", text)
    text = re.sub(r"\b_Bool\b", "bool", text)  # <stdbool.h> is included
    return re.sub(r"\s+", " ", text)


def brace_depths(text):
    depth = [0] * (len(text) + 1)
    d = 0
    for i, c in enumerate(text):
        depth[i] = d
        if c == "{":
            d += 1
        elif c == "}":
            d -= 1
    depth[len(text)] = d
    return depth


def matching_paren(text, i):
    depth = 0
    for k in range(i, len(text)):
        if text[k] == "(":
            depth += 1
        elif text[k] == ")":
            depth -= 1
            if depth == 0:
                return k
    return -1


class Header:
    def __init__(self, text):
        self.text = normalise(text)
        self.depth = brace_depths(self.text)

    def prototype(self, name):
        """(return type, parameter text) of the file-scope prototype of name."""
        for m in re.finditer(r"\b%s\s*\(" % re.escape(name), self.text):
            start = m.start()
            if self.depth[start] != 0:
                continue
            # The declaration starts after the previous ; { } at file scope.
            b = max(self.text.rfind(";", 0, start), self.text.rfind("}", 0, start),
                    self.text.rfind("{", 0, start))
            ret = self.text[b + 1:start].strip()
            if ret.startswith("typedef") or "(" in ret or ")" in ret:
                continue
            open_ = m.end() - 1
            close = matching_paren(self.text, open_)
            rest = self.text[close + 1:].lstrip()
            if not rest.startswith(";"):
                continue  # a definition (static inline) or not a declaration
            ret = re.sub(r"\bextern\b", "", ret).strip()
            if re.search(r"\b(static|inline|return)\b", ret):
                continue
            return ret, self.text[open_ + 1:close].strip()
        return None

    def object_type(self, name):
        """Declared type of a data symbol `extern T name;` (or None)."""
        m = re.search(r"(?:^|[;}])\s*extern ([^;{}()]*?)\b%s\s*(\[[^\]]*\])?\s*;" % re.escape(name),
                      self.text)
        if m and self.depth[m.start(1)] == 0:
            return m.group(1).strip(), m.group(2) or ""
        return None


# --------------------------------------------------------------- emitting

TYPE_WORDS = {"const", "volatile", "unsigned", "signed", "long", "short", "int",
              "char", "void", "float", "double", "_Bool", "bool", "struct", "union",
              "enum", "restrict"}


def split_params(params):
    parts, depth, cur = [], 0, []
    for c in params:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def param_name(p):
    """The parameter's name, or None when the declaration has none."""
    if p == "...":
        return None
    fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", p)  # function pointer: (*name)(...)
    if fp:
        return fp.group(1)
    core = re.sub(r"\[[^\]]*\]", "", p).strip()
    if core.endswith("*"):
        return None
    words = re.findall(r"\w+|\*", core)
    if not words:
        return None
    last = words[-1]
    if last in TYPE_WORDS or last == "*":
        return None
    if len(words) >= 2 and words[-2] in ("struct", "union", "enum"):
        return None
    if len([w for w in words if w not in ("const", "volatile", "restrict", "*")]) < 2:
        return None  # a lone type name, e.g. `uint32_t`
    return last


def name_params(params):
    """Parameter list with every parameter named, and the names."""
    if params in ("", "void"):
        return "void", []
    out, names = [], []
    for i, p in enumerate(split_params(params)):
        n = param_name(p)
        if p == "...":
            out.append(p)
            continue
        if n is None:
            n = "unused%d" % i
            fp = re.search(r"\(\s*\*\s*\)", p)
            if fp:
                p = p[:fp.start()] + "(*%s)" % n + p[fp.end():]
            else:
                br = p.find("[")
                p = (p + " " + n) if br < 0 else (p[:br] + " " + n + p[br:])
        out.append(p)
        names.append(n)
    return ", ".join(out), names


def body_for(name, ret):
    """C statements the stub executes, and a comment saying which rule."""
    r = re.sub(r"\s+", " ", ret).strip()
    if name.endswith("_is_supported"):
        return ["return false;"], "not a device of this provider"
    if r.endswith("*"):
        return ["errno = %s;" % STUB_ERRNO, "return NULL;"], "NULL, errno"
    if r == "void":
        return [], "nothing to do"
    if r == "int":
        if name in INT_EXCEPTIONS:
            return INT_EXCEPTIONS[name]
        return ["return %s;" % STUB_ERRNO], "errno value"
    if r == "ssize_t":
        return ["errno = %s;" % STUB_ERRNO, "return -1;"], "-1, errno"
    if name in SCALAR_RETURNS:
        return SCALAR_RETURNS[name]
    die("%s returns %r: add it to SCALAR_RETURNS with the value the man page "
        "gives for failure" % (name, ret))


def c_ident(s):
    return re.sub(r"\W", "_", s)


def generate(lib, lib_dir, include_dir, out_dir, cc):
    header_name, stem = LIBRARIES[lib]
    path = os.path.join(lib_dir, lib)
    if not os.path.exists(path):
        die("%s not found (install ibverbs-providers)" % path)
    nodes = read_version_nodes(path, lib)
    syms = read_symbols(path, nodes)
    header = Header(preprocess(header_name, include_dir, cc))

    by_node = {n: [] for n, _ in nodes}
    for s in syms:
        if s["default"]:
            by_node[s["version"]].append(s["name"])

    gen_by = "generated by scripts/gen-provider-stubs.py from %s" % path
    m = ["/* Version script of softrnic's stand-in %s: %s." % (lib, gen_by),
         " * Every node of the real library in its order and inheritance. */"]
    # `local: *` goes in the last node: ld matches a symbol given an explicit
    # version with .symver (mlx5dv_init_obj@MLX5_1.0) against the patterns
    # of that node only, so a `local: *` in MLX5_1.0 would hide it.
    for i, (node, parents) in enumerate(nodes):
        m.append("%s {" % node)
        names = sorted(by_node[node])
        if names:
            m.append("  global:")
            m.extend("    %s;" % n for n in names)
        if i == len(nodes) - 1:
            m.append("  local: *;")
        m.append("}%s;" % ("".join(" " + p for p in parents)))
    map_text = "\n".join(m) + "\n"

    c = ["/* softrnic's stand-in %s: %s." % (lib, gen_by),
         " *",
         " * Lets binaries linked against the real library load next to softrnic's",
         " * libibverbs (the real one registers a provider through private libibverbs",
         " * symbols and cannot). softrnic's device is never one this provider",
         " * drives, so every function answers as the real library does for such a",
         " * device: see the rules in scripts/gen-provider-stubs.py. */",
         "#include <errno.h>",
         "#include <stdbool.h>",
         "#include <stddef.h>",
         "#include <stdint.h>",
         "#include <sys/types.h>",
         "",
         "#include <infiniband/%s>" % header_name,
         "",
         "#define SOFTRNIC_EXPORT __attribute__((visibility(\"default\")))",
         ""]
    counts = {"functions": 0, "objects": 0, "aliases": 0}
    for s in syms:
        name = s["name"]
        cname = name if s["default"] else "softrnic_%s_%s" % (name, c_ident(s["version"]))
        if s["type"] == "FUNC":
            proto = header.prototype(name)
            if proto is None:
                die("%s exports %s but <infiniband/%s> has no prototype for it"
                    % (lib, name, header_name))
            ret, params = proto
            plist, pnames = name_params(params)
            body, why = body_for(name, ret)
            c.append("/* %s@%s%s: %s */" % (name, "@" if s["default"] else "", s["version"], why))
            if not s["default"]:
                # Same signature as the default version: declare it so that
                # -Wmissing-prototypes is satisfied and types are checked.
                c.append("%s %s(%s);" % (ret, cname, plist))
                c.append('__asm__(".symver %s, %s@%s");' % (cname, name, s["version"]))
            c.append("SOFTRNIC_EXPORT %s %s(%s) {" % (ret, cname, plist))
            c.extend("  (void)%s;" % n for n in pnames)
            c.extend("  " + b for b in body)
            c.append("}")
            c.append("")
            counts["functions"] += 1
        elif s["type"] in ("OBJECT", "TLS", "COMMON"):
            decl = header.object_type(name)
            c.append("/* %s@%s%s: data, %d bytes */" % (name, "@" if s["default"] else "",
                                                        s["version"], s["size"]))
            if not s["default"]:
                c.append('__asm__(".symver %s, %s@%s");' % (cname, name, s["version"]))
            if decl:
                typ, arr = decl
                c.append("SOFTRNIC_EXPORT %s %s%s;" % (typ, cname, arr))
                c.append("_Static_assert(sizeof(%s) == %d, \"size of %s differs from %s\");"
                         % (cname, s["size"], name, lib))
            else:
                c.append("SOFTRNIC_EXPORT unsigned char %s[%d] __attribute__((aligned(16)));"
                         % (cname, max(s["size"], 1)))
            c.append("")
            counts["objects"] += 1
        else:
            die("%s: %s has symbol type %s" % (lib, name, s["type"]))
        if not s["default"]:
            counts["aliases"] += 1
    c_text = "\n".join(c)

    os.makedirs(out_dir, exist_ok=True)
    write_file(os.path.join(out_dir, "lib%s.map" % stem), map_text)
    write_file(os.path.join(out_dir, "%s_stub.c" % stem), c_text)
    print("gen-provider-stubs: %s: %d nodes, %d functions (%d at a non-default version), "
          "%d data symbols" % (lib, len(nodes), counts["functions"], counts["aliases"],
                               counts["objects"]))


def write_file(path, text):
    """Always rewrites (the build system compares timestamps), atomically."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--lib-dir", default="/usr/lib/x86_64-linux-gnu")
    ap.add_argument("--include-dir", default=None,
                    help="directory holding infiniband/*.h (default: the compiler's)")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("libs", nargs="*", default=sorted(LIBRARIES))
    a = ap.parse_args()
    for lib in a.libs:
        if lib not in LIBRARIES:
            die("unknown library %s (known: %s)" % (lib, ", ".join(sorted(LIBRARIES))))
        generate(lib, a.lib_dir, a.include_dir, a.out_dir, a.cc)


if __name__ == "__main__":
    main()
