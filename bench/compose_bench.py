#!/usr/bin/env python3
"""Compose benchmark: graft compose on a (large) pipeline against
`cp -r --reflink=never` of the same directory and against the same merge
done with Python `onnx.compose.merge_models` + `onnx.save` with external
data, in one run, page cache warm. Wall time and peak RSS of each, measured
from the child's rusage (os.wait4).

    compose_bench.py --graft GRAFT PIPELINE_DIR --work DIR [--python PY] [--results FILE]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

MERGE = r'''
import json, os, sys, onnx, onnx.compose
pipe, out = sys.argv[1], sys.argv[2]
cfg = json.load(open(os.path.join(pipe, "genai_config.json")))["model"]
emb = onnx.load(os.path.join(pipe, cfg["embedding"]["filename"]), load_external_data=True)
dec = onnx.load(os.path.join(pipe, cfg["decoder"]["filename"]), load_external_data=True)
io_map = [(cfg["embedding"]["outputs"][k], cfg["decoder"]["inputs"][k])
          for k in cfg["embedding"]["outputs"] if k in cfg["decoder"]["inputs"]]
m = onnx.compose.merge_models(emb, dec, io_map=io_map, prefix1="embedding/")
os.makedirs(out, exist_ok=True)
onnx.save(m, os.path.join(out, "model.onnx"), save_as_external_data=True, location="model.onnx.data")
'''


def measure(cmd: list[str], timeout: float) -> dict:
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    status, ru = None, None
    deadline = t0 + timeout
    while True:
        pid, st, r = os.wait4(p.pid, os.WNOHANG)
        if pid:
            status, ru = st, r
            break
        if time.perf_counter() > deadline:
            p.kill()
            pid, st, r = os.wait4(p.pid, 0)
            status, ru = None, r
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace").strip().splitlines()
    ok = status is not None and os.waitstatus_to_exitcode(status) == 0
    return {"ok": ok, "wall_s": wall, "rss_mb": ru.ru_maxrss / 1024.0,
            "note": "" if ok else ("timed out" if status is None else (err[-1] if err else f"exit {status}"))}


def du(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.lstat(os.path.join(root, f)).st_size
    return total


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graft", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--results")
    ap.add_argument("--merge-timeout", type=float, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("pipeline")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    size = du(a.pipeline)
    for root, _, files in os.walk(a.pipeline):  # warm the page cache
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                while fh.read(1 << 24):
                    pass
    rows = []
    cp_dst = os.path.join(a.work, "cp")
    out = os.path.join(a.work, "graft")

    def clean() -> None:
        # each timed run starts with no dirty pages left by the one before
        shutil.rmtree(cp_dst, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(["sync"], check=False)

    cp_cmd = ["cp", "-r", "--reflink=never", a.pipeline, cp_dst]
    graft_cmd = [a.graft, "compose", a.pipeline, "-o", out, "-q"]
    # neither cp nor graft (by default) fsyncs; `cp; sync` and `graft --sync`
    # are the durable pair. The pair without sync is timed --repeat times,
    # alternating, and the median is reported.
    runs: dict[str, list[dict]] = {"cp": [], "graft": []}
    for _ in range(a.repeat):
        clean()
        runs["cp"].append(measure(cp_cmd, 3600))
        clean()
        runs["graft"].append(measure(graft_cmd, 3600))

    def median(rs: list[dict]) -> dict:
        ok = [r for r in rs if r["ok"]] or rs
        ok = sorted(ok, key=lambda r: r["wall_s"])
        r = dict(ok[len(ok) // 2])
        r["note"] = (f"median of {len(rs)}: " + ", ".join(f"{x['wall_s']:.2f}" for x in rs) + " s; "
                     + r["note"])
        return r

    rows.append(("cp -r --reflink=never", median(runs["cp"])))
    rows.append(("graft compose", median(runs["graft"])))
    clean()
    rows.append(("cp -r --reflink=never; sync", measure(["sh", "-c", 'cp -r --reflink=never "$0" "$1" && sync',
                                                         a.pipeline, cp_dst], 3600)))
    clean()
    rows.append(("graft compose --sync", measure(graft_cmd + ["--sync"], 3600)))
    gsize = du(out) if os.path.isdir(out) else 0
    shutil.rmtree(cp_dst, ignore_errors=True)
    mout = os.path.join(a.work, "pymerge")
    shutil.rmtree(mout, ignore_errors=True)
    with open(os.path.join(a.pipeline, "genai_config.json"), encoding="utf-8") as f:
        two_graphs = "embedding" in json.load(f).get("model", {})
    if two_graphs:
        rows.append(("onnx.compose.merge_models + onnx.save", measure([a.python, "-c", MERGE, a.pipeline, mout],
                                                                     a.merge_timeout)))
    else:
        print("python merge: not applicable (a single decoder graph, nothing to merge)")
    cp_wall = rows[0][1]["wall_s"]
    lines = [f"pipeline {a.pipeline}: {size / 2**30:.2f} GiB; graft export {gsize / 2**30:.2f} GiB",
             "", "| tool | ok | wall s | x cp | peak RSS MB | note |", "|---|---|---:|---:|---:|---|"]
    for name, r in rows:
        lines.append(f"| {name} | {'yes' if r['ok'] else 'no'} | {r['wall_s']:.2f} | "
                     f"{r['wall_s'] / cp_wall:.2f} | {r['rss_mb']:.0f} | {r['note'][:160]} |")
    table = "\n".join(lines)
    print(table)
    if a.results:
        with open(a.results, "a", encoding="utf-8") as f:
            f.write(f"\n## Compose benchmark ({datetime.date.today()})\n\n`{' '.join(sys.argv)}`\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
