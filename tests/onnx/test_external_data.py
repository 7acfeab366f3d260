#!/usr/bin/env python3
"""External-data round trip through graft, judged by onnx, numpy and onnxruntime.

    test_external_data.py --build BUILD [--work DIR]

Builds a model whose initializers cover fp32, fp16, bf16, float8e4m3fn, int8,
int4 with an odd element count (above and below 1 KiB), a tensor under 1 KiB
and a tensor held in typed `float_data`, and stores it two ways:

  one-file   onnx.save_model(..., save_as_external_data=True): one data file,
             offsets packed with no alignment;
  many-files tensors spread by hand over `a.bin`, `sub/b.bin` and `c.bin`, at
             odd offsets, one entry without `length`, the small tensor
             external too.

Each is round-tripped with `onnx_roundtrip` (default threshold, and
`--threshold 16`), and the result must satisfy:
  - protobuf equality with the original (both loaded with external data);
  - every tensor's bytes identical (numpy arrays and raw bytes, and the bytes
    read straight out of the saved data file at the recorded offset);
  - external offsets multiples of 4096, regions inside the file and disjoint;
    tensors below the threshold inline; the typed tensor inline in float_data;
  - onnx.checker.check_model(path, full_check=True) passes;
  - onnxruntime loads the saved model and gives bit-identical outputs;
  - a second round trip of the saved model gives the same model again.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ALIGN = 4096


def build_model(seed: int = 1234):
    """Returns (model with all data inline, feeds)."""
    import ml_dtypes
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w_f32"),
        numpy_helper.from_array(rng.standard_normal((64, 48)).astype(np.float16), "w_f16"),
        numpy_helper.from_array(
            rng.standard_normal((48, 40)).astype(np.float32).astype(ml_dtypes.bfloat16), "w_bf16"),
        # 41 x 61 = 2501 int4 values: 1251 bytes, the last one half used.
        numpy_helper.from_array(rng.integers(-8, 8, (41, 61)).astype(ml_dtypes.int4), "w_int4"),
        numpy_helper.from_array(np.array([0.05], np.float32), "s_int4"),
        # 7 int4 values: 4 bytes, inline
        numpy_helper.from_array(rng.integers(-8, 8, (7,)).astype(ml_dtypes.int4), "small_int4"),
        numpy_helper.from_array(rng.integers(-128, 128, (40, 30)).astype(np.int8), "w_int8"),
        numpy_helper.from_array(np.array(0.02, np.float32), "s_int8"),
        numpy_helper.from_array(
            rng.standard_normal((30, 50)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn), "w_f8"),
        numpy_helper.from_array(rng.standard_normal((30,)).astype(np.float32), "bias_small"),
        helper.make_tensor("typed_f32", TensorProto.FLOAT, [400],
                           rng.standard_normal(400).astype(np.float32).tolist(), raw=False),
    ]
    assert not inits[-1].raw_data and len(inits[-1].float_data) == 400
    F = TensorProto.FLOAT
    nodes = [
        helper.make_node("MatMul", ["x", "w_f32"], ["h0"]),
        helper.make_node("Cast", ["w_f16"], ["w_f16_f"], to=F),
        helper.make_node("MatMul", ["h0", "w_f16_f"], ["h1"]),
        helper.make_node("Cast", ["w_bf16"], ["w_bf16_f"], to=F),
        helper.make_node("MatMul", ["h1", "w_bf16_f"], ["h2"]),
        helper.make_node("DequantizeLinear", ["w_int8", "s_int8"], ["w_int8_f"]),
        helper.make_node("MatMul", ["h2", "w_int8_f"], ["h3"]),
        helper.make_node("Add", ["h3", "bias_small"], ["h4"]),
        helper.make_node("Cast", ["w_f8"], ["w_f8_f"], to=F),
        helper.make_node("MatMul", ["h4", "w_f8_f"], ["y"]),
        helper.make_node("DequantizeLinear", ["w_int4", "s_int4"], ["y_int4"], axis=0),
        helper.make_node("Cast", ["small_int4"], ["y_small_int4"], to=F),
        helper.make_node("Mul", ["typed_f32", "typed_f32"], ["y_typed"]),
    ]
    graph = helper.make_graph(
        nodes, "ext_data_roundtrip",
        [helper.make_tensor_value_info("x", F, [1, 64])],
        [helper.make_tensor_value_info("y", F, [1, 50]),
         helper.make_tensor_value_info("y_int4", F, [41, 61]),
         helper.make_tensor_value_info("y_small_int4", F, [7]),
         helper.make_tensor_value_info("y_typed", F, [400])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                              producer_name="graft-tests")
    model.ir_version = 10
    model.doc_string = "external data round trip"
    model.metadata_props.add(key="purpose", value="graft test")
    onnx.checker.check_model(model, full_check=True)
    feeds = {"x": rng.standard_normal((1, 64)).astype(np.float32)}
    return model, feeds


UNKNOWN_MODEL = b"graft-unknown-field-in-model"
UNKNOWN_NODE = b"graft-unknown-field-in-node"


def with_unknown_field(msg, field: int, payload: bytes):
    """Returns a copy of msg carrying an unknown length-delimited field."""
    tag = bytes([(field << 3 | 2) & 0x7F | 0x80, (field << 3 | 2) >> 7])
    assert (field << 3 | 2) >> 7 < 0x80
    out = type(msg)()
    out.ParseFromString(msg.SerializeToString() + tag + bytes([len(payload)]) + payload)
    return out


def build_kitchen_sink():
    """What the IR does not model must survive: functions, sparse
    initializers, doc strings and metadata on many messages, value_info with
    symbolic dims, string tensors, unknown fields. Returns (model, feeds)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    F = TensorProto.FLOAT
    fn = helper.make_function(
        "graft.test", "AddMul", ["a", "b"], ["c"],
        [helper.make_node("Add", ["a", "b"], ["t"]), helper.make_node("Mul", ["t", "b"], ["u"]),
         # a tensor attribute >= 1 KiB inside a function body
         helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(
             rng.standard_normal(300).astype(np.float32), "fn_const")),
         helper.make_node("Add", ["u", "k"], ["c"])],
        [helper.make_opsetid("", 21)], doc_string="function doc")
    fn.metadata_props.add(key="fn-meta", value="1")
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(rng.standard_normal(300).astype(np.float32), "sp_values"),
        numpy_helper.from_array(np.arange(0, 3000, 10, dtype=np.int64), "sp_indices"),
        [3000])
    w = numpy_helper.from_array(rng.standard_normal((8, 300)).astype(np.float32), "w_big")
    w.doc_string = "tensor doc"
    w.metadata_props.add(key="tensor-meta", value="x")
    names = helper.make_tensor("names", TensorProto.STRING, [3], [b"a", b"", "\u00e9\u4e2d".encode()])
    node = helper.make_node("AddMul", ["x", "x"], ["y0"], domain="graft.test",
                            name="fused", doc_string="node doc")
    node = with_unknown_field(node, 1001, UNKNOWN_NODE)
    then_g = helper.make_graph([helper.make_node("Identity", ["y0"], ["t_out"])], "then",
                               [], [helper.make_tensor_value_info("t_out", F, ["N", 300])])
    else_g = helper.make_graph([helper.make_node("Neg", ["y0"], ["e_out"])], "else",
                               [], [helper.make_tensor_value_info("e_out", F, ["N", 300])])
    graph = helper.make_graph(
        [node,
         helper.make_node("Constant", [], ["cond"], value=numpy_helper.from_array(np.array(True))),
         helper.make_node("If", ["cond"], ["y1"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Transpose", ["w_big"], ["w_big_t"]),
         # a tensor attribute >= 1 KiB in the main graph
         helper.make_node("Constant", [], ["kc"], value=numpy_helper.from_array(
             rng.standard_normal(300).astype(np.float32), "main_const")),
         helper.make_node("Add", ["y1", "kc"], ["y1k"]),
         helper.make_node("MatMul", ["y1k", "w_big_t"], ["y2"]),
         helper.make_node("Identity", ["names"], ["names_out"])],
        "kitchen_sink",
        [helper.make_tensor_value_info("x", F, ["N", 300])],
        [helper.make_tensor_value_info("y2", F, ["N", 8]),
         helper.make_tensor_value_info("names_out", TensorProto.STRING, [3])],
        initializer=[w, names], doc_string="graph doc",
        value_info=[helper.make_tensor_value_info("y0", F, ["N", 300])],
        sparse_initializer=[sparse])
    graph.metadata_props.add(key="graph-meta", value="g")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("graft.test", 1)],
                              functions=[fn], producer_name="graft-tests",
                              producer_version="1.0", doc_string="model doc")
    model.ir_version = 10
    model.domain = "ai.graft.test"
    model.model_version = 3
    model.metadata_props.add(key="k", value="v")
    model = with_unknown_field(model, 1000, UNKNOWN_MODEL)
    onnx.checker.check_model(model, full_check=True)
    feeds = {"x": rng.standard_normal((2, 300)).astype(np.float32)}
    return model, feeds


def save_kitchen_sink(d: str) -> str:
    import onnx

    model, _ = build_kitchen_sink()
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save_model(model, path, save_as_external_data=True, location="ks.bin",
                    size_threshold=1024)
    return path


def save_one_file(model, d: str) -> str:
    import onnx

    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    m = onnx.ModelProto()
    m.CopyFrom(model)  # save_model converts its argument in place
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=1024)
    raw = onnx.load(path, load_external_data=False)
    n = sum(1 for t in raw.graph.initializer if common.is_external(t))
    assert n >= 6, f"onnx stored only {n} tensors externally"
    return path


def save_many_files(model, d: str) -> str:
    """Spreads tensors over several files at unaligned offsets by hand."""
    import onnx
    from onnx.external_data_helper import set_external_data

    m = onnx.ModelProto()
    m.CopyFrom(model)
    os.makedirs(os.path.join(d, "sub"), exist_ok=True)
    plan = {  # tensor -> (file, gap before it, write length key)
        "w_f32": ("a.bin", 0, True),
        "w_f16": ("sub/b.bin", 5, True),
        "w_bf16": ("a.bin", 3, True),
        "w_int4": ("sub/b.bin", 1, True),
        # No length: onnx reads to the end of the file, graft uses the size
        # shape x dtype implies; both agree when the tensor ends the file.
        "w_int8": ("c.bin", 17, False),
        "w_f8": ("a.bin", 0, True),
        "bias_small": ("a.bin", 2, True),  # < 1 KiB, external in the source
    }
    files: dict[str, bytearray] = {}
    for t in m.graph.initializer:
        if t.name not in plan:
            continue
        fname, gap, with_len = plan[t.name]
        buf = files.setdefault(fname, bytearray())
        buf += b"\xa5" * gap
        off = len(buf)
        buf += t.raw_data
        set_external_data(t, fname, off, len(t.raw_data) if with_len else None)
        t.ClearField("raw_data")
    for fname, buf in files.items():
        if fname != "c.bin":
            buf += b"\x5a" * 11  # trailing bytes no tensor uses
        with open(os.path.join(d, fname), "wb") as f:
            f.write(buf)
    path = os.path.join(d, "model.onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def tensor_bytes(t) -> bytes:
    from onnx import numpy_helper

    return numpy_helper.to_array(t).tobytes()


def check_saved(src: str, out: str, threshold: int, feeds) -> list[str]:
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    problems = []
    # what the source stores inline in typed fields (float_data, string_data)
    src_raw = {t.name: t for t in onnx.load(src, load_external_data=False).graph.initializer}
    out_dir = os.path.dirname(out)
    orig = common.normalize_loaded(onnx.load(src, load_external_data=True))
    saved = common.normalize_loaded(onnx.load(out, load_external_data=True))
    saved_raw = onnx.load(out, load_external_data=False)
    if orig != saved:
        problems.append("saved model != original (protobuf equality)")

    oi = {t.name: t for t in orig.graph.initializer}
    si = {t.name: t for t in saved.graph.initializer}
    ri = {t.name: t for t in saved_raw.graph.initializer}
    if set(oi) != set(si):
        problems.append(f"initializer names differ: {sorted(oi)} vs {sorted(si)}")
        return problems
    regions: dict[str, list[tuple[int, int, str]]] = {}
    for name, to in oi.items():
        a, b = numpy_helper.to_array(to), numpy_helper.to_array(si[name])
        same = (a.tolist() == b.tolist()) if a.dtype == object else (a.tobytes() == b.tobytes())
        if a.dtype != b.dtype or a.shape != b.shape or not same:
            problems.append(f"{name}: tensor values differ after the round trip")
        tr = ri[name]
        nbytes = len(to.raw_data)
        if (not src_raw[name].raw_data and not common.is_external(src_raw[name])):
            if common.is_external(tr) or tr != src_raw[name]:
                problems.append(f"{name}: typed-field tensor not kept inline as it was")
            continue
        if common.is_external(tr):
            info = common.external_info(tr)
            loc, off = info.get("location", ""), int(info.get("offset", "0"))
            length = int(info.get("length", nbytes))
            if nbytes < threshold:
                problems.append(f"{name}: {nbytes} bytes < {threshold} stored externally")
            if off % ALIGN:
                problems.append(f"{name}: offset {off} is not a multiple of {ALIGN}")
            if length != nbytes:
                problems.append(f"{name}: length {length} != {nbytes}")
            path = os.path.join(out_dir, loc)
            if os.path.dirname(os.path.realpath(path)) != os.path.realpath(out_dir):
                problems.append(f"{name}: data file {loc!r} not beside the saved model")
                continue
            with open(path, "rb") as f:
                f.seek(off)
                if f.read(nbytes) != to.raw_data:
                    problems.append(f"{name}: bytes at {loc}:{off} differ from the original")
            regions.setdefault(loc, []).append((off, off + nbytes, name))
        elif nbytes >= threshold:
            problems.append(f"{name}: {nbytes} bytes >= {threshold} but stored inline")
    for loc, rs in regions.items():
        rs.sort()
        for (s0, e0, n0), (s1, _, n1) in zip(rs, rs[1:]):
            if s1 < e0:
                problems.append(f"{loc}: {n0} and {n1} overlap")
    if threshold <= 1024 and not regions:
        problems.append("no tensor stored externally")

    with open(src, "rb") as f:
        src_bytes = f.read()
    with open(out, "rb") as f:
        out_bytes = f.read()
    for marker in (UNKNOWN_MODEL, UNKNOWN_NODE):
        if marker in src_bytes and marker not in out_bytes:
            problems.append(f"unknown field {marker.decode()!r} lost")
    for what in ("functions", "sparse_initializer", "metadata_props", "doc_string"):
        if what in str(orig) and what not in str(saved):
            problems.append(f"{what} lost")

    try:
        onnx.checker.check_model(out, full_check=True)
    except Exception as e:  # noqa: BLE001
        problems.append(f"checker fails on the saved model: {e}")

    try:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        want = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"]).run(None, feeds)
        got = ort.InferenceSession(out, so, providers=["CPUExecutionProvider"]).run(None, feeds)
        for i, (w, g) in enumerate(zip(want, got)):
            same = (w.tolist() == g.tolist()) if w.dtype == object else (w.tobytes() == g.tobytes())
            if w.shape != g.shape or not same:
                problems.append(f"onnxruntime output {i} differs after the round trip")
    except Exception as e:  # noqa: BLE001
        problems.append(f"onnxruntime failed: {e}")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build")
    ap.add_argument("--work")
    args = ap.parse_args()
    binary = common.roundtrip_bin(common.build_dir(args.build))
    common.require_bins(binary)
    work = args.work or tempfile.mkdtemp(prefix="graft-extdata-")
    shutil.rmtree(work, ignore_errors=True)

    model, feeds = build_model()
    sources = {
        "one-file": (save_one_file(model, os.path.join(work, "one-file", "src")), feeds),
        "many-files": (save_many_files(model, os.path.join(work, "many-files", "src")), feeds),
        "kitchen-sink": (save_kitchen_sink(os.path.join(work, "kitchen-sink", "src")),
                         build_kitchen_sink()[1]),
    }
    failures = []
    n = 0
    for label, (src, feeds) in sources.items():
        for threshold in (1024, 16):
            n += 1
            tag = f"{label} threshold={threshold}"
            out_dir = os.path.join(work, label, f"out{threshold}")
            os.makedirs(out_dir)
            out = os.path.join(out_dir, "model.onnx")
            argv = [binary, src, out] + ([] if threshold == 1024 else ["--threshold", str(threshold)])
            r = common.run(argv)
            if r.rc != 0 or r.crashed:
                failures.append((tag, [r.describe()]))
                continue
            problems = check_saved(src, out, threshold, feeds)
            # A second round trip of graft's own output gives the same model.
            out2_dir = os.path.join(work, label, f"again{threshold}")
            os.makedirs(out2_dir)
            out2 = os.path.join(out2_dir, "model.onnx")
            r2 = common.run(argv[:1] + [out, out2] + argv[3:])
            if r2.rc != 0 or r2.crashed:
                problems.append("second round trip: " + r2.describe())
            else:
                problems += [f"second round trip: {p}"
                             for p in check_saved(out, out2, threshold, feeds)]
            failures += [(tag, problems)] if problems else []
    for tag, problems in failures:
        print(f"FAIL {tag}")
        for p in problems:
            print(f"    {p}")
    if failures:
        print(f"(scratch kept in {work})")
    elif not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print(f"test_external_data: {n} round trips, {n - len(failures)} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
