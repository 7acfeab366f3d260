#!/usr/bin/env python3
"""Malformed input never crashes graft: truncation, deep nesting, bit flips.

    test_robustness.py --build BUILD --node-dir build/node_tests
                       [--flips 2000] [--seed N] [--jobs 2]

Every run of `onnx_roundtrip IN OUT` must end in exit 0 or exit 2: a signal,
an exit status >= 128, exit 1, a hang or any sanitizer report is a failure
(with BUILD=build/san, ASan/UBSan abort the process on their first report).
Python's protobuf parser (upb) is the oracle for wire-format validity: when
it cannot parse a file, graft must refuse it (exit 2), never accept it.

  truncation  every prefix of a small model, sampled prefixes of bigger ones
              (node-test models with subgraphs and Constant tensors, the
              external-data and kitchen-sink models of test_external_data);
              external data files cut short must be refused (exit 2).
  nesting     10,000-level models from tools/attack_models.py (graph in
              attribute in node in graph ..., the same inside a function,
              sequence/optional TypeProto chains): exit 2 with a message
              about nesting; the same builders at depth 3 load (exit 0).
  bit flips   --flips seeded mutants (1-3 flipped bits or a replaced byte)
              of the same corpus. The seed is printed; a failing mutant is
              kept under the scratch directory for a reproduction.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))
import attack_models  # noqa: E402
import common  # noqa: E402
import test_external_data  # noqa: E402

NODE_CORPUS = [
    "test_if", "test_loop11", "test_scan9_sum", "test_constant",
    "test_sequence_map_identity_1_sequence", "test_optional_get_element_sequence",
    "test_flexattention_causal_mask", "test_affine_grid_2d_expanded",
    "test_range_float_type_positive_delta_expanded", "test_attention_3d_diff_heads_sizes_scaled_expanded",
]
SMALL_MODEL = "test_if"  # every prefix length


def upb_parses(data: bytes) -> bool:
    import onnx

    try:
        onnx.ModelProto().ParseFromString(data)
        return True
    except Exception:  # noqa: BLE001 - DecodeError and friends
        return False


def build_corpus(node_dir: str, work: str) -> dict[str, str]:
    """name -> path of a model.onnx in its own directory (with its data)."""
    corpus = {}
    for name in NODE_CORPUS:
        src = os.path.join(node_dir, name, "model.onnx")
        if os.path.exists(src):
            d = os.path.join(work, "corpus", name)
            os.makedirs(d)
            shutil.copyfile(src, os.path.join(d, "model.onnx"))
            corpus[name] = os.path.join(d, "model.onnx")
    model, _ = test_external_data.build_model()
    corpus["ext_one_file"] = test_external_data.save_one_file(
        model, os.path.join(work, "corpus", "ext_one_file"))
    corpus["ext_many_files"] = test_external_data.save_many_files(
        model, os.path.join(work, "corpus", "ext_many_files"))
    corpus["kitchen_sink"] = test_external_data.save_kitchen_sink(
        os.path.join(work, "corpus", "kitchen_sink"))
    return corpus


def run_one(task):
    """task: (label, binary, model_dir, data, expect) -> (label, problem or None, rc).
    Writes `data` as a model file inside model_dir (beside the data files)."""
    label, binary, model_dir, data, expect = task
    tag = f"{os.getpid()}"
    path = os.path.join(model_dir, f"mut_{tag}.onnx")
    out_dir = os.path.join(model_dir, f"out_{tag}")
    os.makedirs(out_dir, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    r = common.run([binary, path, os.path.join(out_dir, "model.onnx")], timeout=60)
    problem = None
    if r.crashed:
        problem = "crashed: " + r.describe()
    elif r.rc not in (0, 2):
        problem = "exit status other than 0 or 2: " + r.describe()
    elif expect == "refuse" and r.rc != 2:
        problem = "accepted a file it must refuse: " + r.describe()
    elif expect == "auto" and r.rc == 0 and not upb_parses(data):
        problem = "accepted a file protobuf cannot parse: " + r.describe()
    if problem:
        keep = os.path.join(os.path.dirname(model_dir), "..", "failures")
        os.makedirs(keep, exist_ok=True)
        fail_dir = os.path.join(keep, label.replace("/", "_").replace(" ", "_"))
        shutil.copytree(model_dir, fail_dir, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("mut_*", "out_*"))
        with open(os.path.join(fail_dir, "model.onnx"), "wb") as f:
            f.write(data)
        problem += f"\n    reproduce: {binary} {fail_dir}/model.onnx /tmp/out.onnx"
    shutil.rmtree(out_dir, ignore_errors=True)
    return label, problem, r.rc


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    b = bytearray(data)
    if rng.random() < 0.8:
        what = []
        for _ in range(rng.randint(1, 3)):
            bit = rng.randrange(len(b) * 8)
            b[bit // 8] ^= 1 << (bit % 8)
            what.append(f"bit {bit}")
        return bytes(b), "flip " + ",".join(what)
    pos = rng.randrange(len(b))
    val = rng.choice([0x00, 0x7F, 0x80, 0xFF, rng.randrange(256)])
    b[pos] = val
    return bytes(b), f"byte {pos}=0x{val:02x}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build")
    ap.add_argument("--node-dir", required=True)
    ap.add_argument("--flips", type=int, default=2000)
    ap.add_argument("--trunc-samples", type=int, default=60,
                    help="sampled prefix lengths per corpus model")
    ap.add_argument("--seed", type=int,
                    default=int(os.environ.get("GRAFT_FUZZ_SEED", "20251202")))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--work")
    args = ap.parse_args()
    binary = common.roundtrip_bin(common.build_dir(args.build))
    common.require_bins(binary)
    work = args.work or tempfile.mkdtemp(prefix="graft-robust-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    print(f"test_robustness: seed {args.seed} (set GRAFT_FUZZ_SEED or --seed to change)")

    corpus = build_corpus(args.node_dir, work)
    if SMALL_MODEL not in corpus:
        print(f"test_robustness: {SMALL_MODEL} missing from {args.node_dir}", file=sys.stderr)
        return 1
    rng = random.Random(args.seed)
    blobs = {name: open(p, "rb").read() for name, p in corpus.items()}
    groups: dict[str, list] = {"truncation": [], "nesting": [], "bitflip": []}

    # -- truncation
    for name, data in blobs.items():
        d = os.path.dirname(corpus[name])
        if name == SMALL_MODEL:
            lengths = range(len(data))
        else:
            lengths = sorted(set(rng.randrange(len(data)) for _ in range(args.trunc_samples)))
        for n in lengths:
            groups["truncation"].append((f"truncate {name} to {n}", binary, d, data[:n], "auto"))
    # external data file cut short: the tensors it held are missing
    for name in ("ext_one_file",):
        src_dir = os.path.dirname(corpus[name])
        size = os.path.getsize(os.path.join(src_dir, "weights.bin"))
        for cut in (0, 1, size // 2, size - 1):
            d = os.path.join(work, "corpus", f"{name}_data_cut_{cut}")
            shutil.copytree(src_dir, d)
            with open(os.path.join(d, "weights.bin"), "r+b") as f:
                f.truncate(cut)
            groups["truncation"].append(
                (f"{name} with weights.bin cut to {cut}", binary, d, blobs[name], "refuse"))

    # -- nesting
    nest_dir = os.path.join(work, "nesting")
    os.makedirs(nest_dir)
    deep = {name: build(10000) for name, build in attack_models.BUILDERS.items()}
    shallow = {name: build(3) for name, build in attack_models.BUILDERS.items()}
    for name in attack_models.BUILDERS:
        assert upb_parses(shallow[name]), f"attack_models.{name} encodes invalid protobuf"
        groups["nesting"].append((f"{name} depth 3", binary, nest_dir, shallow[name], "accept"))
        groups["nesting"].append((f"{name} depth 10000", binary, nest_dir, deep[name], "refuse"))

    # -- bit flips
    names = sorted(blobs)
    for i in range(args.flips):
        name = names[i % len(names)]
        data, what = mutate(blobs[name], rng)
        groups["bitflip"].append((f"mutant {i} of {name} ({what})", binary,
                                  os.path.dirname(corpus[name]), data, "auto"))

    failures = []
    summary = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for group, tasks in groups.items():
            rcs = {}
            nfail = 0
            for (label, problem, rc), task in zip(pool.map(run_one, tasks, chunksize=4), tasks):
                rcs[rc] = rcs.get(rc, 0) + 1
                if group == "nesting" and problem is None:
                    expect = task[4]
                    if expect == "accept" and rc != 0:
                        problem = f"rc={rc}, a shallow model must load"
                if problem:
                    nfail += 1
                    failures.append((group, label, problem))
            summary.append(f"{group}: {len(tasks)} runs, {len(tasks) - nfail} passed "
                           f"(exit codes {dict(sorted(rcs.items()))})")

    # Nesting: the refusal must say why.
    for name in attack_models.BUILDERS:
        p = os.path.join(nest_dir, f"{name}.onnx")
        with open(p, "wb") as f:
            f.write(deep[name])
        r = common.run([common.graft_bin(common.build_dir(args.build)), "inspect", p])
        if r.rc != 2 or r.crashed or not any(
                w in r.stderr.lower() for w in ("nest", "depth", "deep")):
            failures.append(("nesting", f"graft inspect {name} depth 10000",
                             "expected exit 2 with a message about nesting: " + r.describe()))

    for group, label, problem in failures[:40]:
        print(f"FAIL [{group}] {label}\n    {problem}")
    if len(failures) > 40:
        print(f"... and {len(failures) - 40} more failures")
    for line in summary:
        print(f"  {line}")
    if failures:
        print(f"(seed {args.seed}; scratch and failing inputs kept in {work})")
    elif not args.work:
        shutil.rmtree(work, ignore_errors=True)
    total = sum(len(t) for t in groups.values())
    print(f"test_robustness: {total} runs, {len(failures)} failures, seed {args.seed}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
