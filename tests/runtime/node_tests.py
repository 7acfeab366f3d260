#!/usr/bin/env python3
"""The CPU kernels against the ONNX backend node tests of the pinned onnx.

A node test is *claimed* when every op in its model (subgraphs included)
has a graft kernel for the model's opset. Every claimed test must pass,
unless tests/runtime/node_test_exclusions.txt lists it with a reason; a
claimed test that cannot run (a dtype or attribute the kernel refuses)
counts as failed. Prints a table per claimed op (tests using it: passed,
failed, excluded) and exits 1 on any failure.

    node_tests.py --runner build/tests/node_runner --tests build/node_tests \\
                  [--exclusions FILE] [--only PATTERN] [-v]
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import fnmatch
import os
import subprocess
import sys

import onnx


def model_ops(model: onnx.ModelProto) -> set[tuple[str, str, int]]:
    opsets = {(o.domain or "ai.onnx"): o.version for o in model.opset_import}
    out: set[tuple[str, str, int]] = set()

    def walk(g: onnx.GraphProto) -> None:
        for n in g.node:
            dom = n.domain or "ai.onnx"
            out.add((dom, n.op_type, opsets.get(dom, 1)))
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)

    walk(model.graph)
    return out


def load_exclusions(path: str | None) -> dict[str, str]:
    ex: dict[str, str] = {}
    if not path or not os.path.exists(path):
        return ex
    with open(path, encoding="utf-8") as f:
        for ln, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(" ")
            if not reason.strip():
                sys.exit(f"{path}:{ln}: exclusion of {name} gives no reason")
            ex[name] = reason.strip()
    return ex


def run_batch(runner: str, dirs: list[str]) -> dict[str, tuple[str, str]]:
    """Runs dirs in one process; on a crash, reruns them one by one."""
    res: dict[str, tuple[str, str]] = {}
    p = subprocess.run([runner, *dirs], capture_output=True, text=True, errors="replace")
    for line in p.stdout.splitlines():
        status, _, rest = line.partition(" ")
        name, _, why = rest.partition(": ")
        res[name.rstrip(":")] = (status, why)
    if p.returncode != 0 or len(res) < len(dirs):
        if len(dirs) == 1:
            name = os.path.basename(dirs[0])
            tail = (p.stderr or "").strip().splitlines()[-3:]
            res[name] = ("FAIL", f"runner exited {p.returncode}: {' | '.join(tail)}")
        else:
            for d in dirs:
                if os.path.basename(d) not in res or p.returncode != 0:
                    res.update(run_batch(runner, [d]))
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", required=True)
    ap.add_argument("--tests", required=True)
    ap.add_argument("--exclusions")
    ap.add_argument("--only", default="*")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    kernels: dict[tuple[str, str], list[tuple[int, int]]] = collections.defaultdict(list)
    out = subprocess.run([args.runner, "--list-kernels"], capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        dom, op, since, until = line.split()
        kernels[(dom, op)].append((int(since), int(until)))

    def has_kernel(dom: str, op: str, ver: int) -> bool:
        return any(s <= ver and (u == 0 or ver <= u) for s, u in kernels.get((dom, op), []))

    exclusions = load_exclusions(args.exclusions)
    names = sorted(d for d in os.listdir(args.tests)
                   if d.startswith("test_") and fnmatch.fnmatch(d, args.only))
    claimed: dict[str, set[tuple[str, str, int]]] = {}
    for name in names:
        m = onnx.load(os.path.join(args.tests, name, "model.onnx"), load_external_data=False)
        ops = model_ops(m)
        if ops and all(has_kernel(*o) for o in ops):
            claimed[name] = ops

    dirs = [os.path.join(args.tests, n) for n in claimed]
    batches = [dirs[i:i + 40] for i in range(0, len(dirs), 40)]
    results: dict[str, tuple[str, str]] = {}
    with cf.ThreadPoolExecutor(max_workers=2) as ex:
        for r in ex.map(lambda b: run_batch(args.runner, b), batches):
            results.update(r)

    table: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    failures, stale = [], []
    for name, ops in claimed.items():
        status, why = results.get(name, ("FAIL", "no result"))
        excluded = name in exclusions
        for dom, op, _ in ops:
            row = table[(dom, op)]
            if status == "PASS":
                row[0] += 1
            elif excluded:
                row[2] += 1
            else:
                row[1] += 1
        if status == "PASS" and excluded:
            stale.append(name)
        elif status != "PASS" and not excluded:
            failures.append(f"{name}: {status} {why}")
        elif args.verbose and status != "PASS":
            print(f"excluded {name}: {why} ({exclusions[name]})")

    print(f"{'op':32} {'passed':>7} {'failed':>7} {'excluded':>9}")
    for (dom, op), (p, f, e) in sorted(table.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        label = op if dom == "ai.onnx" else f"{dom}::{op}"
        print(f"{label:32} {p:7d} {f:7d} {e:9d}")
    print(f"node tests: {len(names)} total, {len(claimed)} claimed by graft's kernels, "
          f"{sum(1 for n in claimed if results.get(n, ('',))[0] == 'PASS')} passed, "
          f"{len(failures)} failed, {sum(1 for n in claimed if n in exclusions)} excluded")
    for s in stale:
        print(f"note: excluded test {s} now passes; drop it from the exclusion list")
    for f in failures:
        print(f"FAILED {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
