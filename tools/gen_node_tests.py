#!/usr/bin/env python3
"""Write the ONNX backend node test cases of the installed onnx to disk.

    tools/gen_node_tests.py OUTDIR

onnx wheels ship no node test data; the cases live in Python
(`onnx.backend.test.case.node.collect_testcases()`). This writes them in the
usual layout, the one onnx's own `backend-test-tools generate-data`
(onnx/backend/test/cmd_tools.py) produces:

    OUTDIR/test_x/model.onnx
    OUTDIR/test_x/test_data_set_N/input_K.pb, output_K.pb

Inputs and outputs are serialised the way cmd_tools does: TensorProto for
tensors, SequenceProto / MapProto / OptionalProto (numpy_helper.from_list /
from_dict / from_optional) for the other value types.

Idempotent: OUTDIR/.stamp records the onnx version and this script's hash;
when it matches, nothing is written. Output is built in a temporary sibling
directory and renamed into place, so an interrupted run leaves no half set
and two concurrent runs (make -j) both end with one complete set.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import warnings


def stamp_text() -> str:
    import onnx

    with open(__file__, "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()[:16]
    return f"onnx {onnx.__version__} script {h}\n"


def serialize_value(value, vtype, name: str) -> bytes:
    from onnx import TensorProto, numpy_helper

    if vtype.HasField("map_type"):
        return numpy_helper.from_dict(value, name).SerializeToString()
    if vtype.HasField("sequence_type"):
        return numpy_helper.from_list(value, name).SerializeToString()
    if vtype.HasField("optional_type"):
        return numpy_helper.from_optional(value, name).SerializeToString()
    if isinstance(value, TensorProto):
        return value.SerializeToString()
    return numpy_helper.from_array(value, name).SerializeToString()


def write_case(case, out_dir: str) -> None:
    os.makedirs(out_dir)
    model = case.model
    with open(os.path.join(out_dir, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for i, (inputs, outputs) in enumerate(case.data_sets or []):
        ds = os.path.join(out_dir, f"test_data_set_{i}")
        os.makedirs(ds)
        for j, value in enumerate(inputs):
            vi = model.graph.input[j]
            with open(os.path.join(ds, f"input_{j}.pb"), "wb") as f:
                f.write(serialize_value(value, vi.type, vi.name))
        for j, value in enumerate(outputs):
            vo = model.graph.output[j]
            with open(os.path.join(ds, f"output_{j}.pb"), "wb") as f:
                f.write(serialize_value(value, vo.type, vo.name))


def up_to_date(out: str, want: str) -> bool:
    try:
        with open(os.path.join(out, ".stamp")) as f:
            return f.read() == want
    except OSError:
        return False


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1].startswith("-"):
        print("usage: gen_node_tests.py OUTDIR", file=sys.stderr)
        return 2
    out = argv[1].rstrip("/")
    want = stamp_text()
    if up_to_date(out, want):
        n = sum(1 for d in os.listdir(out) if d.startswith("test_"))
        print(f"gen_node_tests: {out} up to date ({n} cases)")
        return 0

    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases()
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=os.path.basename(out) + ".tmp.")
    seen = set()
    for case in cases:
        if case.kind != "node" or case.model is None:
            continue
        if case.name in seen:
            raise SystemExit(f"gen_node_tests: duplicate case name {case.name}")
        seen.add(case.name)
        write_case(case, os.path.join(tmp, case.name))
    with open(os.path.join(tmp, ".stamp"), "w") as f:
        f.write(want)
    if up_to_date(out, want):  # a concurrent run finished first
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        shutil.rmtree(out, ignore_errors=True)
        try:
            os.rename(tmp, out)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not up_to_date(out, want):
                raise
    print(f"gen_node_tests: wrote {len(seen)} cases to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
