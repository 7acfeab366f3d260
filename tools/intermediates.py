#!/usr/bin/env python3
"""Make a node-test directory whose outputs are every float intermediate of an export, with
onnxruntime's values, for `node_runner --report` (where graft's CPU runtime and onnxruntime part).

    tools/intermediates.py EXPORT_DIR OUT_DIR [--ids 2,17,9]

EXPORT_DIR holds a composed export's model.onnx (input_ids, attention_mask, optional
position_ids, past_key_values.*). One prefill of --ids (default: 2,17,9,4,33) with an empty
past is run. OUT_DIR/model.onnx gets every node output whose inferred type is float as a graph
output, intermediates first in node order, then the original outputs;
OUT_DIR/test_data_set_0 holds the inputs and onnxruntime's outputs as .pb files. Then:

    build/tests/node_runner --report OUT_DIR

prints max |graft - ort|, max |ort| and their ratio for each output, in that order.

Needs numpy, onnx, onnxruntime.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("export")
    ap.add_argument("out")
    ap.add_argument("--ids", default="2,17,9,4,33")
    a = ap.parse_args(argv)
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.load(os.path.join(a.export, "model.onnx"))
    inferred = onnx.shape_inference.infer_shapes(m)
    types = {vi.name: vi.type for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    original = list(m.graph.output)
    names = {o.name for o in original}
    inter = []
    for n in m.graph.node:
        for o in n.output:
            if o and o not in names and o in types and types[o].tensor_type.elem_type == TensorProto.FLOAT:
                inter.append(helper.make_value_info(o, types[o]))
                names.add(o)
    del m.graph.output[:]
    m.graph.output.extend(inter + original)
    os.makedirs(os.path.join(a.out, "test_data_set_0"), exist_ok=True)
    model = os.path.join(a.out, "model.onnx")
    onnx.save(m, model, save_as_external_data=True, location="model.onnx.data", all_tensors_to_one_file=True)

    ids = [int(t) for t in a.ids.split(",")]
    S = len(ids)
    feeds = {}
    for i in m.graph.input:
        if i.name == "input_ids":
            feeds[i.name] = np.array([ids], np.int64)
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones((1, S), np.int64)
        elif i.name == "position_ids":
            feeds[i.name] = np.arange(S, dtype=np.int64)[None]
        elif i.name.startswith("past_key_values"):
            dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
            dt = np.float16 if i.type.tensor_type.elem_type == TensorProto.FLOAT16 else np.float32
            feeds[i.name] = np.zeros((1, dims[1], 0, dims[3]), dt)
        else:
            print(f"intermediates.py: input '{i.name}' is not one of an export's", file=sys.stderr)
            return 2
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    res = sess.run(None, feeds)
    for k, i in enumerate(m.graph.input):
        with open(os.path.join(a.out, "test_data_set_0", f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[i.name], i.name).SerializeToString())
    for j, (o, r) in enumerate(zip(sess.get_outputs(), res)):
        with open(os.path.join(a.out, "test_data_set_0", f"output_{j}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(r), o.name).SerializeToString())
    print(f"{a.out}: {len(inter)} intermediates + {len(original)} outputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
