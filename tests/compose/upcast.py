"""fp16/bf16 -> fp32 copy of a model (types, initializers, Cast targets,
Constant values), so that onnxruntime's CPU provider runs it without the
precision casts it inserts around fp16 nodes. Applied the same way to a
pipeline's graphs and to the export, it lets compose be checked for exact
equivalence on fp16 pipelines."""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import numpy_helper

HALF = (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)


def _tensor(t: onnx.TensorProto) -> None:
    if t.data_type in HALF:
        a = numpy_helper.to_array(t).astype(np.float32)
        name = t.name
        t.CopyFrom(numpy_helper.from_array(a, name))


def _type(tp: onnx.TypeProto) -> None:
    if tp.HasField("tensor_type") and tp.tensor_type.elem_type in HALF:
        tp.tensor_type.elem_type = onnx.TensorProto.FLOAT


def _graph(g: onnx.GraphProto) -> None:
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        _type(vi.type)
    for t in g.initializer:
        _tensor(t)
    for n in g.node:
        for a in n.attribute:
            if a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i in HALF:
                a.i = onnx.TensorProto.FLOAT
            if a.type == onnx.AttributeProto.TENSOR:
                _tensor(a.t)
            if a.type == onnx.AttributeProto.GRAPH:
                _graph(a.g)


def upcast_file(src: str, dst: str) -> None:
    m = onnx.load(src, load_external_data=True)
    _graph(m.graph)
    for f in m.functions:
        for n in f.node:
            for a in n.attribute:
                if a.name == "to" and a.i in HALF:
                    a.i = onnx.TensorProto.FLOAT
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    onnx.save(m, dst, save_as_external_data=True, location=os.path.basename(dst) + ".data")
