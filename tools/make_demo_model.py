#!/usr/bin/env python3
"""Writes graft's small demo model: a decoder-shaped ONNX graph.

    .venv/bin/python tools/make_demo_model.py [OUT_DIR]   (default tests/fixtures/demo)

The model has what `graft inspect` reads in a real LLM decoder, at toy size:
input_ids and attention_mask, a KV cache of three layers whose geometry
differs per layer (kv_heads 2/1/2, head_dim 16/32/16), present.* outputs,
logits, real ops (Gather, MatMul, Reshape, Transpose, Concat,
RMSNormalization, ...) and its two largest weights in an external data file.
IR 11, opset 24, as Mobius writes. It computes nothing meaningful; it is a
stand-in until the real fixtures of issue 3 land. Deterministic: running it
again writes the same bytes.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data

VOCAB = 128
HIDDEN = 64
# (kv_heads, head_dim) per cached layer: read from the graph, never assumed.
LAYERS = [(2, 16), (1, 32), (2, 16)]


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = []
    nodes = []

    def weight(name, shape, scale=0.02):
        arr = (rng.standard_normal(shape) * scale).astype(np.float32)
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def const_i64(name, values):
        inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    def node(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=f"{op}_{len(nodes)}", **attrs))
        return outs[0]

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                      ["batch", "total_sequence"]),
    ]
    outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", VOCAB]),
    ]

    emb = weight("model.embed_tokens.weight", [VOCAB, HIDDEN])
    h = node("Gather", [emb, "input_ids"], ["embeds"], axis=0)
    # Scale by the number of attended positions so attention_mask is used.
    mask_f = node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT)
    n_pos = node("ReduceSum", [mask_f, const_i64("axes_1", [1])], ["n_pos"], keepdims=1)
    n_pos3 = node("Unsqueeze", [n_pos, const_i64("axes_2", [2])], ["n_pos3"])
    h = node("Div", [h, n_pos3], ["embeds_scaled"])
    norm_w = weight("model.norm.weight", [HIDDEN], scale=1.0)
    h = node("RMSNormalization", [h, norm_w], ["hidden"], axis=-1, epsilon=1e-6)

    for i, (kv_heads, head_dim) in enumerate(LAYERS):
        shape = const_i64(f"layers.{i}.kv_shape", [0, 0, kv_heads, head_dim])
        for kind in ("key", "value"):
            proj = "k_proj" if kind == "key" else "v_proj"
            w = weight(f"model.layers.{i}.self_attn.{proj}.weight", [HIDDEN, kv_heads * head_dim])
            x = node("MatMul", [h, w], [f"layers.{i}.{kind}.proj"])
            x = node("Reshape", [x, shape], [f"layers.{i}.{kind}.heads"])
            x = node("Transpose", [x], [f"layers.{i}.{kind}.bhsd"], perm=[0, 2, 1, 3])
            past = f"past_key_values.{i}.{kind}"
            present = f"present.{i}.{kind}"
            node("Concat", [past, x], [present], axis=2)
            inputs.append(helper.make_tensor_value_info(
                past, TensorProto.FLOAT, ["batch", kv_heads, "past_sequence", head_dim]))
            outputs.append(helper.make_tensor_value_info(
                present, TensorProto.FLOAT, ["batch", kv_heads, "total_sequence", head_dim]))

    lm = weight("lm_head.weight", [HIDDEN, VOCAB])
    node("MatMul", [h, lm], ["logits"])

    graph = helper.make_graph(nodes, "graft_demo_decoder", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)],
                              producer_name="graft-make-demo-model", producer_version="1")
    model.ir_version = 11
    helper.set_model_props(model, {"graft.demo": "stand-in decoder, 3 cached layers"})
    return model


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.relpath(
        os.path.join(here, "..", "tests", "fixtures", "demo"))
    os.makedirs(out, exist_ok=True)
    model = build()
    onnx.checker.check_model(model, full_check=True)
    # The embedding and lm_head (32 KiB each) go to external data; the rest inline.
    convert_model_to_external_data(model, all_tensors_to_one_file=True,
                                   location="model.onnx.data", size_threshold=16384)
    data = os.path.join(out, "model.onnx.data")
    if os.path.exists(data):
        os.remove(data)  # onnx appends to an existing data file
    path = os.path.join(out, "model.onnx")
    onnx.save_model(model, path)
    onnx.checker.check_model(path, full_check=True)
    print(f"wrote {path} ({os.path.getsize(path)} B) and {data} ({os.path.getsize(data)} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
