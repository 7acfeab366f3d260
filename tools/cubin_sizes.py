#!/usr/bin/env python3
"""Each kernel's code size in a CUDA source file, without a GPU or cuobjdump.

usage: tools/cubin_sizes.py FILE.cu [FILTER] [--top N]

Compiles FILE.cu for sm_90 to a cubin (nvcc -cubin, the Makefile's -O3 and
include paths) and lists its kernels' .text section sizes (readelf), largest
first, demangled (c++filt); FILTER keeps the names that contain it. SASS is
16 bytes an instruction on sm_90. A kernel's size includes the device
functions it calls. Code that a launch runs once (a GEMV's last block, an
attention split) is fetched cold: its size is a cost (test_kernels --icache
measures what a kilobyte costs).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description="each kernel's code size in a CUDA source file (see the module text)")
    ap.add_argument("src", help="a .cu file, compiled from the repository root")
    ap.add_argument("filter", nargs="?", default="", help="keep the kernels whose demangled name contains this")
    ap.add_argument("--top", type=int, default=40, help="the largest N kernels (default 40)")
    a = ap.parse_args()
    src, flt, top = a.src, a.filter, a.top
    with tempfile.TemporaryDirectory() as d:
        cubin = os.path.join(d, "k.cubin")
        r = subprocess.run(["nvcc", "-O3", "-std=c++17", "-arch=sm_90", "-Iinclude", "-I.", "-cubin", src, "-o",
                            cubin], capture_output=True, text=True)
        if r.returncode:
            sys.stderr.write(r.stderr)
            return 1
        out = subprocess.run(["readelf", "-SW", cubin], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.search(r"\]\s+\.text\.(\S+)\s+\S+\s+\S+\s+\S+\s+([0-9a-f]+)", line)
        if m:
            rows.append((int(m.group(2), 16), m.group(1)))
    names = subprocess.run(["c++filt"], input="\n".join(n for _, n in rows), capture_output=True,
                           text=True).stdout.splitlines()
    total = sum(s for s, _ in rows)
    shown = sorted(((s, n.split("(")[0]) for (s, _), n in zip(rows, names) if flt in n), reverse=True)
    for s, n in shown[:top]:
        print(f"{s:8d}  {n}")
    print(f"{total:8d}  all {len(rows)} kernels of {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
