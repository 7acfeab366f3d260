#!/usr/bin/env python3
"""Load benchmark: graft against onnx.load on a model with GBs of external data.

    bench/load_bench.py --graft build/graft --model build/bench/big/model.onnx
                        [--runs 3] [--results bench/RESULTS.md]

graft: `graft inspect MODEL` (a full load: mmap, every external-data safety
check for every tensor, the graph IR), timed as a whole child process
(process start and exit included, against onnx's in-process time). Its
peak RSS is the kernel's ru_maxrss for it, taken by /usr/bin/time -f %M
(Debian package `time`) when present, else by a minimal `python -S -I`
launcher with os.wait4. Not from this process: a child's ru_maxrss counts
the RSS it inherited at fork until exec, which here would be this
interpreter's (onnx imported). With the launcher, the figure is an upper
bound: max(graft's peak, the launcher's ~10 MB).
onnx: `onnx.load(MODEL, load_external_data=True)` in a child Python process,
timed around the call only (the interpreter start and `import onnx` are not
counted); peak RSS is that child's ru_maxrss.

The page cache is warmed first (every file read once, then each tool run
once untimed); each tool then runs --runs times and the best time and the
largest peak RSS are reported. Targets (issue 2): graft >= 20x faster and
graft peak RSS < 5% of the weight bytes.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

ONNX_CHILD = r"""
import json, resource, sys, time
import onnx
t = time.perf_counter()
m = onnx.load(sys.argv[1], load_external_data=True)
dt = time.perf_counter() - t
n = sum(len(t.raw_data) for t in m.graph.initializer)
print(json.dumps({"seconds": dt, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "bytes": n}))
"""


def weight_bytes(model: str) -> tuple[int, list[str]]:
    import onnx

    m = onnx.load(model, load_external_data=False)
    total, files = 0, []
    for t in m.graph.initializer:
        info = {e.key: e.value for e in t.external_data}
        if "location" in info:
            total += int(info["length"])
            if info["location"] not in files:
                files.append(info["location"])
        else:
            total += len(t.raw_data)
    return total, files


def warm(model: str, files: list[str]) -> None:
    d = os.path.dirname(os.path.abspath(model))
    for f in [model] + [os.path.join(d, x) for x in files]:
        with open(f, "rb") as fh:
            while fh.read(64 << 20):
                pass


LAUNCHER = r"""
import os, sys, time
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
dt = time.perf_counter() - t
print(os.waitstatus_to_exitcode(status), dt, ru.ru_maxrss)
"""
GNU_TIME = "/usr/bin/time"


def run_graft(graft: str, model: str) -> tuple[float, int]:
    """(seconds, peak RSS in KiB) of `graft inspect model`: the time of a
    plain run, the RSS of a second run under the RSS probe."""
    argv = [graft, "inspect", model]
    t = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt_plain = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"graft inspect failed ({p.returncode}): {p.stderr.decode()}")
    return dt_plain, graft_rss(argv)


def graft_rss(argv) -> int:
    if os.access(GNU_TIME, os.X_OK):
        p = subprocess.run([GNU_TIME, "-f", "maxrss_kb=%M"] + argv,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = p.stderr.decode()
        if p.returncode != 0:
            sys.exit(f"graft inspect failed ({p.returncode}): {err}")
        return int(err.rsplit("maxrss_kb=", 1)[1].split()[0])
    p = subprocess.run([sys.executable, "-S", "-I", "-c", LAUNCHER] + argv,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        rc, dt, rss = p.stdout.decode().split()
    except ValueError:
        sys.exit(f"graft launcher failed: {p.stderr.decode()}")
    if int(rc) != 0:
        sys.exit(f"graft inspect failed ({rc}): {p.stderr.decode()}")
    return int(rss)


def run_onnx(py: str, model: str) -> tuple[float, int, int]:
    out = subprocess.run([py, "-c", ONNX_CHILD, model], check=True,
                         stdout=subprocess.PIPE).stdout
    r = json.loads(out)
    return r["seconds"], r["maxrss_kb"], r["bytes"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graft", default="build/graft")
    ap.add_argument("--model", default="build/bench/big/model.onnx")
    ap.add_argument("--python", default=sys.executable, help="python with onnx for the child")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--results", help="append a dated section to this Markdown file")
    args = ap.parse_args()

    wbytes, files = weight_bytes(args.model)
    warm(args.model, files)
    run_graft(args.graft, args.model)           # warm-up, untimed
    _, _, onnx_bytes = run_onnx(args.python, args.model)
    if onnx_bytes != wbytes:
        sys.exit(f"onnx loaded {onnx_bytes} weight bytes, expected {wbytes}")

    g = [run_graft(args.graft, args.model) for _ in range(args.runs)]
    o = [run_onnx(args.python, args.model)[:2] for _ in range(args.runs)]
    g_t, g_rss = min(x[0] for x in g), max(x[1] for x in g) * 1024
    o_t, o_rss = min(x[0] for x in o), max(x[1] for x in o) * 1024
    speedup = o_t / g_t
    rows = [
        ("graft inspect", g_t, g_rss, 100.0 * g_rss / wbytes, speedup),
        ("onnx.load(load_external_data=True)", o_t, o_rss, 100.0 * o_rss / wbytes, 1.0),
    ]
    ok_speed, ok_rss = speedup >= 20, g_rss < 0.05 * wbytes
    head = f"| tool | seconds (best of {args.runs}) | peak RSS MB | RSS % of weights | speedup |"
    lines = [head, "|---|---:|---:|---:|---:|"]
    for name, t, rss, pct, sp in rows:
        lines.append(f"| {name} | {t:.4f} | {rss / 2**20:.1f} | {pct:.2f}% | {sp:.1f}x |")
    verdict = (f"targets: speedup >= 20x: {'PASS' if ok_speed else 'FAIL'} ({speedup:.0f}x); "
               f"graft RSS < 5% of weights: {'PASS' if ok_rss else 'FAIL'} "
               f"({100.0 * g_rss / wbytes:.2f}%)")
    print(f"model: {args.model}: {wbytes / 2**30:.2f} GiB of weights in {len(files)} files")
    print("\n".join(lines))
    print(verdict)

    if args.results:
        cmd = " ".join([os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd())
                        else sys.executable, "bench/load_bench.py"] + sys.argv[1:])
        now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
        cpu = platform.processor() or platform.machine()
        sec = [
            f"\n## Load benchmark, {now}\n",
            f"Command: `{cmd}` (via `make bench-load`)  ",
            f"Model: `{args.model}`, {wbytes / 2**30:.2f} GiB of fp16 weights in {len(files)} "
            f"external files (tools/make_big_model.py), page cache warm.  ",
            f"Machine: {os.cpu_count()} CPUs ({cpu}), "
            f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM, "
            f"Linux {platform.release()}. graft RSS measured with "
            f"{'/usr/bin/time' if os.access(GNU_TIME, os.X_OK) else 'a python -S launcher (upper bound)'}.\n",
        ] + lines + ["", verdict, ""]
        new = not os.path.exists(args.results)
        with open(args.results, "a") as f:
            if new:
                f.write("# Benchmark results\n\nNewest sections last. Each one names the exact "
                        "command that produced it.\n")
            f.write("\n".join(sec))
        print(f"appended to {args.results}")
    return 0 if ok_speed and ok_rss else 1


if __name__ == "__main__":
    sys.exit(main())
