#!/usr/bin/env python3
"""Every ONNX backend node-test model loads and saves through graft.

    test_node_roundtrip.py --build BUILD --node-dir build/node_tests [--jobs 2]

For each OUTDIR/test_x/model.onnx (written by tools/gen_node_tests.py):

  1. `BUILD/examples/onnx_roundtrip model.onnx out.onnx` exits 0, with no
     sanitizer report.
  2. onnx.load(out, load_external_data=True) == onnx.load(model,
     load_external_data=True): protobuf equality of the whole ModelProto.
  3. If onnx.checker.check_model(original, full_check=True) passes, it passes
     on the saved model too.
  4. Placement: every externally stored tensor of the saved model sits at a
     4096-aligned offset inside its data file, beside out.onnx; tensors below
     the threshold are inline; initializers with raw data at or above it are
     external.

Node-test models carry almost no initializers, so a second pass exercises
external data: for a deterministic sample of cases, the test-data inputs
(input_K.pb) are moved into the graph as initializers ("init variant") and
the variant is round-tripped with `--threshold 16`. That covers every dtype
the node tests use (fp16, bf16, int4, float8, float4, strings, ...).
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import os
import shutil
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ALIGN = 4096


def first_difference(a, b) -> str:
    sa, sb = str(a).splitlines(), str(b).splitlines()
    diff = list(difflib.unified_diff(sa, sb, "original", "saved", n=2, lineterm=""))
    return "\n        ".join(diff[:30]) or "(messages differ but print identically)"


def check_placement(orig, orig_raw, saved_raw, out_dir: str, threshold: int) -> list[str]:
    """orig: original loaded with external data; orig_raw, saved_raw: the
    original and the saved model loaded without."""
    problems = []
    po = list(common.tensors_of_model(orig))
    pr = list(common.tensors_of_model(orig_raw))
    ps = list(common.tensors_of_model(saved_raw))
    if not len(po) == len(pr) == len(ps):
        return [f"tensor count differs: {len(po)} vs {len(ps)}"]
    for (where, to), (_, tr), (_, ts) in zip(po, pr, ps):
        name = f"{where}:{to.name or '?'}"
        nraw = len(to.raw_data)
        if common.is_external(ts):
            info = common.external_info(ts)
            loc = info.get("location", "")
            try:
                off = int(info.get("offset", "0"))
                length = int(info["length"]) if "length" in info else None
            except ValueError:
                problems.append(f"{name}: non-numeric offset/length {info}")
                continue
            if off % ALIGN:
                problems.append(f"{name}: offset {off} not a multiple of {ALIGN}")
            path = os.path.join(out_dir, loc)
            if not loc or os.path.isabs(loc) or ".." in loc.split("/") or not os.path.isfile(path):
                problems.append(f"{name}: bad location {loc!r}")
                continue
            if length is not None and length != nraw:
                problems.append(f"{name}: length {length} != {nraw} data bytes")
            if off + nraw > os.path.getsize(path):
                problems.append(f"{name}: offset {off} + {nraw} past end of {loc}")
            if nraw < threshold:
                problems.append(f"{name}: {nraw} bytes < threshold {threshold} but stored externally")
        else:
            if not common.is_external(tr) and ts != tr:
                problems.append(f"{name}: inline tensor changed by the round trip")
            if "initializer" in where and not where.endswith("sparse_initializer") \
                    and nraw >= threshold:
                problems.append(f"{name}: {nraw} raw bytes >= threshold {threshold} but inline")
    return problems


def checker_ok(model) -> tuple[bool, str]:
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
        return True, ""
    except Exception as e:  # noqa: BLE001 - any checker failure
        return False, str(e).splitlines()[0] if str(e) else type(e).__name__


def make_init_variant(case_dir: str, out_path: str) -> bool:
    """Moves the tensor inputs of test_data_set_0 into the graph as
    initializers. False when the case has no tensor input to move."""
    import onnx

    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    ds = os.path.join(case_dir, "test_data_set_0")
    moved = []
    for j, vi in enumerate(model.graph.input):
        if not vi.type.HasField("tensor_type"):
            continue
        p = os.path.join(ds, f"input_{j}.pb")
        if not os.path.exists(p):
            continue
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        if t.data_type != vi.type.tensor_type.elem_type:
            continue
        t.name = vi.name
        moved.append((vi.name, t))
    if not moved:
        return False
    names = {n for n, _ in moved}
    keep = [vi for vi in model.graph.input if vi.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    model.graph.initializer.extend(t for _, t in moved)
    if model.ir_version < 4:
        model.ir_version = 4  # initializers need not be graph inputs from IR 4
    with open(out_path, "wb") as f:
        f.write(model.SerializeToString())
    return True


def check_one(task) -> tuple[str, str, list[str], dict]:
    """Returns (case, mode, problems, stats)."""
    import onnx

    binary, case_dir, work, mode = task
    case = os.path.basename(case_dir)
    stats = {"external": 0}
    wdir = os.path.join(work, mode, case)
    shutil.rmtree(wdir, ignore_errors=True)
    os.makedirs(os.path.join(wdir, "in"))
    os.makedirs(os.path.join(wdir, "out"))
    if mode == "default":
        src = os.path.join(wdir, "in", "model.onnx")
        shutil.copyfile(os.path.join(case_dir, "model.onnx"), src)
        threshold, extra = 1024, []
    else:
        src = os.path.join(wdir, "in", "model.onnx")
        if not make_init_variant(case_dir, src):
            shutil.rmtree(wdir, ignore_errors=True)
            return case, mode, [], {"skipped": 1}
        threshold, extra = 16, ["--threshold", "16"]
    out = os.path.join(wdir, "out", "model.onnx")
    r = common.run([binary, src, out] + extra, timeout=120)
    problems = []
    if r.rc != 0 or r.crashed:
        return case, mode, [r.describe()], stats
    try:
        orig = common.normalize_loaded(onnx.load(src, load_external_data=True))
        saved = common.normalize_loaded(onnx.load(out, load_external_data=True))
        orig_raw = onnx.load(src, load_external_data=False)
        saved_raw = onnx.load(out, load_external_data=False)
    except Exception as e:  # noqa: BLE001
        return case, mode, [f"onnx.load failed on the saved model: {e}"], stats
    if orig != saved:
        problems.append("saved model differs from the original:\n        "
                        + first_difference(orig, saved))
    problems += check_placement(orig, orig_raw, saved_raw, os.path.join(wdir, "out"), threshold)
    stats["external"] = sum(1 for _, t in common.tensors_of_model(saved_raw)
                            if common.is_external(t))
    ok, why = checker_ok(orig)
    stats["checker"] = int(ok)
    if ok:
        ok2, why2 = checker_ok(saved)
        if not ok2:
            problems.append(f"checker passes on the original but not on the saved model: {why2}")
    if not problems:
        shutil.rmtree(wdir, ignore_errors=True)
    return case, mode, problems, stats


def sampled(case: str, every: int) -> bool:
    if every <= 1:
        return True
    return int(hashlib.sha1(case.encode()).hexdigest(), 16) % every == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", help="build directory (default $BUILD or build)")
    ap.add_argument("--node-dir", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--variant-every", type=int, default=1,
                    help="init-variant pass on 1 case in N (1: all; 0: none)")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("--work", help="scratch directory (default: a temporary one)")
    args = ap.parse_args()

    build = common.build_dir(args.build)
    binary = common.roundtrip_bin(build)
    common.require_bins(binary)
    cases = sorted(d for d in os.listdir(args.node_dir)
                   if d.startswith("test_") and args.filter in d
                   and os.path.isfile(os.path.join(args.node_dir, d, "model.onnx")))
    if not cases:
        print(f"test_node_roundtrip: no cases under {args.node_dir}", file=sys.stderr)
        return 1
    work = args.work or tempfile.mkdtemp(prefix="graft-node-rt-")
    tasks = [(binary, os.path.join(args.node_dir, c), work, "default") for c in cases]
    if args.variant_every > 0:
        tasks += [(binary, os.path.join(args.node_dir, c), work, "init16")
                  for c in cases if sampled(c, args.variant_every)]

    failures = []
    counts = {"default": [0, 0], "init16": [0, 0]}
    n_ext = {"default": 0, "init16": 0}
    n_checker = 0
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for case, mode, problems, stats in pool.map(check_one, tasks, chunksize=8):
            if stats.get("skipped"):
                continue
            counts[mode][0] += 1
            n_ext[mode] += stats.get("external", 0)
            if mode == "default":
                n_checker += stats.get("checker", 0)
            if problems:
                failures.append((case, mode, problems))
            else:
                counts[mode][1] += 1
    for case, mode, problems in failures:
        print(f"FAIL {case} [{mode}]")
        for p in problems:
            print(f"    {p}")
    if not args.work and not failures:
        shutil.rmtree(work, ignore_errors=True)
    elif failures:
        print(f"(scratch kept in {work})")
    d, v = counts["default"], counts["init16"]
    print(f"test_node_roundtrip: {d[0]} models, {d[1]} passed "
          f"({n_checker} checker-valid); init variants at --threshold 16: "
          f"{v[0]} models, {v[1]} passed, {n_ext['init16']} tensors stored externally")
    if args.variant_every > 0 and v[0] and n_ext["init16"] == 0:
        print("test_node_roundtrip: FAIL: no tensor went to external data at --threshold 16")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
