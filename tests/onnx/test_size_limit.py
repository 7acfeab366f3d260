#!/usr/bin/env python3
"""A single protobuf over 2 GB is refused with a message, before parsing:
a sparse file of 2 GiB + 1 bytes that starts with a valid model (so only
its size is wrong). Both graft inspect and examples/onnx_roundtrip must
exit 2, say so, and not read the file (well under a second).

    test_size_limit.py --build build
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import onnx
from onnx import TensorProto, helper


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    fails = 0
    with tempfile.TemporaryDirectory() as d:
        g = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
        path = os.path.join(d, "big.onnx")
        with open(path, "wb") as f:
            f.write(helper.make_model(g).SerializeToString())
        os.truncate(path, 2**31 + 1)  # sparse: nothing is written
        for cmd in ([os.path.join(a.build, "graft"), "inspect", path],
                    [os.path.join(a.build, "examples", "onnx_roundtrip"), path, os.path.join(d, "o.onnx")]):
            t0 = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True)
            dt = time.perf_counter() - t0
            ok = p.returncode == 2 and "2 GB" in p.stderr and path in p.stderr and dt < 5
            print(("ok   " if ok else "FAIL ") + f"{os.path.basename(cmd[0])}: exit {p.returncode} in {dt:.2f} s: "
                  f"{p.stderr.strip()[-160:]}")
            fails += not ok
    print(f"test_size_limit: {2 - fails} of 2 passed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
