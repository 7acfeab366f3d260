#!/usr/bin/env python3
"""Writes a model with several GB of external-data weights, for the load
benchmark (bench/load_bench.py).

    tools/make_big_model.py OUTDIR [--gb 4] [--files 4] [--seed 0]

OUTDIR/model.onnx: x [1, 4096] fp16 through a chain of MatMul (+ Add bias)
whose weights are 64 MiB fp16 tensors ([4096, 8192] and [8192, 4096]
alternating), stored in OUTDIR/weights_K.bin (--files data files, tensors at
4096-aligned offsets). Weights are random fp16 values (finite, |w| < 2),
written one tensor at a time: memory use stays around one tensor whatever
--gb is. model.onnx is written last, so its presence means a complete model.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROWS, COLS = 4096, 8192           # one weight: 32 Mi fp16 elements = 64 MiB
ALIGN = 4096


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--gb", type=float, default=4.0, help="weight bytes, in GiB (at least)")
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import onnx
    from onnx import TensorProto, helper
    from onnx.external_data_helper import set_external_data

    tensor_bytes = ROWS * COLS * 2
    n = max(2, -(-int(args.gb * 2**30) // tensor_bytes))
    n += n % 2  # even: the chain ends back at width ROWS
    os.makedirs(args.outdir, exist_ok=True)
    final = os.path.join(args.outdir, "model.onnx")
    if os.path.exists(final):
        os.remove(final)
    rng = np.random.default_rng(args.seed)
    files = [f"weights_{k}.bin" for k in range(args.files)]
    handles = [open(os.path.join(args.outdir, f), "wb") for f in files]
    inits, nodes = [], []
    cur = "x"
    total = 0
    for i in range(n):
        shape = [ROWS, COLS] if i % 2 == 0 else [COLS, ROWS]
        k = i * args.files // n
        f = handles[k]
        off = -(-f.tell() // ALIGN) * ALIGN
        f.seek(off)
        bits = np.frombuffer(rng.bytes(tensor_bytes), dtype=np.uint16) & np.uint16(0xBBFF)
        f.write(bits.tobytes())  # exponent bit 14 clear: finite, |w| < 2
        del bits
        t = TensorProto()
        t.name = f"w{i}"
        t.data_type = TensorProto.FLOAT16
        t.dims.extend(shape)
        t.raw_data = b""
        set_external_data(t, files[k], off, tensor_bytes)
        t.ClearField("raw_data")
        inits.append(t)
        b = helper.make_tensor(f"b{i}", TensorProto.FLOAT16, [shape[1]],
                               np.zeros(shape[1], np.float16).tobytes(), raw=True)
        inits.append(b)
        nodes.append(helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Add", [f"m{i}", f"b{i}"], [f"h{i}"]))
        cur = f"h{i}"
        total += tensor_bytes
        if (i + 1) % 16 == 0 or i + 1 == n:
            print(f"make_big_model: {i + 1}/{n} weights", file=sys.stderr, flush=True)
    for h in handles:
        h.close()
    nodes.append(helper.make_node("Identity", [cur], ["y"]))
    F16 = TensorProto.FLOAT16
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", F16, [1, ROWS])],
                              [helper.make_tensor_value_info("y", F16, [1, ROWS])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                              producer_name="graft make_big_model")
    model.ir_version = 10
    tmp = final + ".tmp"
    with open(tmp, "wb") as f:
        f.write(model.SerializeToString())
    os.rename(tmp, final)
    print(f"make_big_model: {final}: {n} weights, {total / 2**30:.2f} GiB in "
          f"{len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
