#!/usr/bin/env python3
"""Each kernel's code size in a CUDA source file, without a GPU or cuobjdump.

usage: tools/cubin_sizes.py FILE.cu [FILTER] [--top N] [--lines]

Compiles FILE.cu for sm_90 to a cubin (nvcc -cubin, the Makefile's -O3 and
include paths) and lists its kernels' .text section sizes (readelf), largest
first, demangled (c++filt); FILTER keeps the names that contain it. SASS is
16 bytes an instruction on sm_90. A kernel's size includes the device
functions it calls. Code that a launch runs once (a GEMV's last block, an
attention split) is fetched cold: its size is a cost (test_kernels --icache
measures what a kilobyte costs).

--lines: also, for each kernel shown, its SASS instructions counted by the
source line they come from (compiled with -lineinfo, disassembled by
nvdisasm -g), the --top lines with the most. The toolkit here has no
nvdisasm: it is taken from the nvidia-cuda-nvdisasm wheel of nvcc's major
version, downloaded once into build/sass-wheel (session 29 found that
rolling a loop inlined three times in the decode attention, 800 of its
4,880 instructions, made E2B decode 0.7% faster).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile


def main():
    ap = argparse.ArgumentParser(description="each kernel's code size in a CUDA source file (see the module text)")
    ap.add_argument("src", help="a .cu file, compiled from the repository root")
    ap.add_argument("filter", nargs="?", default="", help="keep the kernels whose demangled name contains this")
    ap.add_argument("--top", type=int, default=40, help="the largest N kernels (default 40)")
    ap.add_argument("--lines", action="store_true", help="each kernel's instructions by source line (nvdisasm)")
    a = ap.parse_args()
    src, flt, top = a.src, a.filter, a.top
    sass = ""
    with tempfile.TemporaryDirectory() as d:
        cubin = os.path.join(d, "k.cubin")
        r = subprocess.run(["nvcc", "-O3", "-std=c++17", "-arch=sm_90", "-lineinfo", "-Iinclude", "-I.", "-cubin",
                            src, "-o", cubin], capture_output=True, text=True)
        if r.returncode:
            sys.stderr.write(r.stderr)
            return 1
        out = subprocess.run(["readelf", "-SW", cubin], capture_output=True, text=True).stdout
        if a.lines:
            nvdisasm = find_nvdisasm()
            if not nvdisasm:
                return 1
            sass = subprocess.run([nvdisasm, "-g", cubin], capture_output=True, text=True, check=True).stdout
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
    if sass:
        by_kernel = lines_by_kernel(sass)
        for (s, mangled), n in zip(rows, names):
            if flt not in n or mangled not in by_kernel:
                continue
            counts = by_kernel[mangled]
            print(f"\n{n.split('(')[0]}: {sum(counts.values())} instructions, by source line")
            for loc, c in sorted(counts.items(), key=lambda kv: -kv[1])[:top]:
                print(f"{c:6d}  {loc}")
    return 0


def find_nvdisasm():
    """nvdisasm: on PATH, beside nvcc, or from the nvidia-cuda-nvdisasm wheel of nvcc's major version
    (downloaded once into build/sass-wheel); None, with a message, where none can be had."""
    for cand in (shutil.which("nvdisasm"), os.path.join(os.path.dirname(shutil.which("nvcc") or ""), "nvdisasm")):
        if cand and os.access(cand, os.X_OK):
            return cand
    ver = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+)\.", ver)
    if not m:
        sys.stderr.write("cubin_sizes: no nvcc version, so no nvdisasm wheel to pick\n")
        return None
    major, w = m.group(1), os.path.join("build", "sass-wheel")
    exe = os.path.join(w, "nvidia", "cu" + major, "bin", "nvdisasm")
    if not os.path.exists(exe):
        os.makedirs(w, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", w,
                            f"nvidia-cuda-nvdisasm=={major}.*"], capture_output=True, text=True)
        wheels = [f for f in os.listdir(w) if f.startswith("nvidia_cuda_nvdisasm") and f.endswith(".whl")]
        if r.returncode or not wheels:
            sys.stderr.write(f"cubin_sizes: could not download nvidia-cuda-nvdisasm=={major}.*: {r.stderr}\n")
            return None
        with zipfile.ZipFile(os.path.join(w, wheels[0])) as z:
            z.extractall(w)
    if not os.path.exists(exe):
        sys.stderr.write(f"cubin_sizes: the wheel in {w} has no {exe}\n")
        return None
    os.chmod(exe, 0o755)
    return exe


def lines_by_kernel(sass):
    """{mangled kernel: {"file:line": instructions}} from nvdisasm -g output."""
    out, kern, loc = {}, None, "?"
    for line in sass.splitlines():
        m = re.match(r"\s*\.text\.(\S+):$", line)
        if m:
            kern, loc = m.group(1), "?"
            out.setdefault(kern, {})
            continue
        m = re.search(r'//## File "([^"]*)", line (\d+)', line)
        if m:
            f = m.group(1)
            f = os.path.relpath(f) if f.startswith(os.getcwd()) else os.path.basename(f)
            loc = f"{f}:{m.group(2)}"
            continue
        if kern and re.match(r"\s+/\*[0-9a-f]{4,}\*/", line):
            out[kern][loc] = out[kern].get(loc, 0) + 1
    return out


if __name__ == "__main__":
    sys.exit(main())
