#!/usr/bin/python3
"""Imports every extension module of python3-pyverbs (provider modules
included); run with LD_LIBRARY_PATH pointing at softrnic's libraries.
exit 0 when all import, 1 otherwise."""
import importlib
import os
import sys

ROOT = "/usr/lib/python3/dist-packages"


def main():
    mods = []
    for d, _, files in os.walk(os.path.join(ROOT, "pyverbs")):
        for f in files:
            if f.endswith(".so"):
                rel = os.path.relpath(os.path.join(d, f), ROOT)
                mods.append(rel.split(".")[0].replace(os.sep, "."))
    if not mods:
        print("IMPORT FAIL: no pyverbs extension modules under %s" % ROOT)
        return 1
    bad = 0
    for m in sorted(mods):
        try:
            importlib.import_module(m)
        except Exception as e:  # ImportError names the missing version/symbol
            bad += 1
            print("IMPORT FAIL %s: %s" % (m, e))
    print("imported %d of %d pyverbs extension modules" % (len(mods) - bad, len(mods)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
