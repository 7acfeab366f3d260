#!/usr/bin/env python3
"""Write a ~100M-parameter Llama decoder export in the layout of
onnxruntime-genai's model builder (fp32, CPU), with seeded random weights,
using only onnx + numpy (no torch/transformers).

    .venv/bin/python bench/make_llama100m.py OUT_DIR [--template tests/fixtures/llama-builder-fp32] [--dtype f16]

The graph has the builder's shape exactly (see the template fixture, which the
real builder wrote): Gather embedding, SimplifiedLayerNormalization, one packed
QKV MatMul, com.microsoft GroupQueryAttention with do_rotary and cos/sin
caches, o_proj MatMul, SkipSimplifiedLayerNormalization, SiLU MLP
(gate/up/down MatMul, Sigmoid, Mul), final norm, untied lm_head MatMul; the
attention-mask subgraph (ReduceSum - 1, Shape[1]) as the builder writes it.
Dimensions are those of tools/fixtures/make_llama_bench.py: hidden 768,
12 layers, 12 heads / 4 KV heads, head_dim 64, MLP 2048, vocab 16384 (101M
parameters). The template's tokenizer is padded with <unused_N> added tokens
to the vocabulary. make_llama_bench.py (the real builder) is preferred when
the fixtures venv exists; this is the way without torch.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--template", default="tests/fixtures/llama-builder-fp32")
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--dtype", choices=["f32", "f16"], default="f32",
                    help="f16: every float initializer, input and output in fp16 (the builder's -p fp16 kind)")
    a = ap.parse_args()

    H, L, NH, NKV, HD, FF, V, CTX = 768, a.layers, 12, 4, 64, 2048, 16384, 2048
    theta = 500_000.0
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)

    inits: list[onnx.TensorProto] = []

    def w(name: str, shape, std=0.02):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape, dtype=np.float32) * std)
                                             .astype(np.float32), name))
        return name

    def ones(name: str, n: int):
        inits.append(numpy_helper.from_array(np.ones(n, np.float32), name))
        return name

    nodes = []
    const1 = "/model/constants/INT64/[1]"
    const1s = "/model/constants/INT64/1"
    nodes.append(helper.make_node("Constant", [], [const1],
                                  value=numpy_helper.from_array(np.array([1], np.int64), const1)))
    m = "/model/attn_mask_reformat/attn_mask_subgraph"
    nodes.append(helper.make_node("ReduceSum", ["attention_mask", const1], [f"{m}/ReduceSum/output_0"],
                                  keepdims=0))
    nodes.append(helper.make_node("Sub", [f"{m}/ReduceSum/output_0", const1], [f"{m}/Sub/output_0"]))
    nodes.append(helper.make_node("Cast", [f"{m}/Sub/output_0"], [f"{m}/Sub/Cast/output_0"], to=6))
    nodes.append(helper.make_node("Shape", ["attention_mask"], [f"{m}/Shape/output_0"]))
    nodes.append(helper.make_node("Constant", [], [const1s],
                                  value=numpy_helper.from_array(np.array(1, np.int64), const1s)))
    nodes.append(helper.make_node("Gather", [f"{m}/Shape/output_0", const1s], [f"{m}/Gather/output_0"],
                                  axis=0))
    nodes.append(helper.make_node("Cast", [f"{m}/Gather/output_0"], [f"{m}/Gather/Cast/output_0"], to=6))
    seqlens, total = f"{m}/Sub/Cast/output_0", f"{m}/Gather/Cast/output_0"

    emb = w("model.embed_tokens.weight", (V, H))
    nodes.append(helper.make_node("Gather", [emb, "input_ids"], ["/model/embed_tokens/Gather/output_0"]))
    inv = 1.0 / (theta ** (np.arange(0, HD, 2, dtype=np.float64) / HD))
    ang = np.outer(np.arange(CTX, dtype=np.float64), inv)
    inits.append(numpy_helper.from_array(np.cos(ang).astype(np.float32), "cos_cache"))
    inits.append(numpy_helper.from_array(np.sin(ang).astype(np.float32), "sin_cache"))

    eps = 1e-5
    resid = "/model/embed_tokens/Gather/output_0"
    x = "/model/layers.0/input_layernorm/output_0"
    nodes.append(helper.make_node("SimplifiedLayerNormalization",
                                  [resid, ones("model.layers.0.input_layernorm.weight", H)], [x],
                                  epsilon=eps, axis=-1, stash_type=1))
    for i in range(L):
        p = f"/model/layers.{i}"
        qkv = w(f"model.layers.{i}.attn.qkv_proj.MatMul.weight", (H, (NH + 2 * NKV) * HD))
        nodes.append(helper.make_node("MatMul", [x, qkv], [f"{p}/attn/qkv_proj/MatMul/output_0"]))
        nodes.append(helper.make_node(
            "GroupQueryAttention",
            [f"{p}/attn/qkv_proj/MatMul/output_0", "", "", f"past_key_values.{i}.key",
             f"past_key_values.{i}.value", seqlens, total, "cos_cache", "sin_cache", "", "", ""],
            [f"{p}/attn/GroupQueryAttention/output_0", f"present.{i}.key", f"present.{i}.value"],
            domain="com.microsoft", num_heads=NH, kv_num_heads=NKV, scale=float(1 / np.sqrt(HD)),
            local_window_size=-1, softcap=0.0, do_rotary=1, rotary_interleaved=0))
        o = w(f"model.layers.{i}.attn.o_proj.MatMul.weight", (NH * HD, H))
        nodes.append(helper.make_node("MatMul", [f"{p}/attn/GroupQueryAttention/output_0", o],
                                      [f"{p}/attn/o_proj/MatMul/output_0"]))
        post = f"{p}/post_attention_layernorm"
        nodes.append(helper.make_node(
            "SkipSimplifiedLayerNormalization",
            [resid, f"{p}/attn/o_proj/MatMul/output_0",
             ones(f"model.layers.{i}.post_attention_layernorm.weight", H)],
            [f"{post}/output_0", "", "", f"{post}/output_3"], domain="com.microsoft", epsilon=eps))
        g = w(f"model.layers.{i}.mlp.gate_proj.MatMul.weight", (H, FF))
        u = w(f"model.layers.{i}.mlp.up_proj.MatMul.weight", (H, FF))
        d = w(f"model.layers.{i}.mlp.down_proj.MatMul.weight", (FF, H))
        nodes.append(helper.make_node("MatMul", [f"{post}/output_0", g], [f"{p}/mlp/gate_proj/MatMul/output_0"]))
        nodes.append(helper.make_node("MatMul", [f"{post}/output_0", u], [f"{p}/mlp/up_proj/MatMul/output_0"]))
        nodes.append(helper.make_node("Sigmoid", [f"{p}/mlp/gate_proj/MatMul/output_0"],
                                      [f"{p}/mlp/act_fn/Sigmoid/output_0"]))
        nodes.append(helper.make_node("Mul", [f"{p}/mlp/gate_proj/MatMul/output_0",
                                              f"{p}/mlp/act_fn/Sigmoid/output_0"],
                                      [f"{p}/mlp/act_fn/Mul/output_0"]))
        nodes.append(helper.make_node("Mul", [f"{p}/mlp/act_fn/Mul/output_0",
                                              f"{p}/mlp/up_proj/MatMul/output_0"], [f"{p}/mlp/Mul/output_0"]))
        nodes.append(helper.make_node("MatMul", [f"{p}/mlp/Mul/output_0", d],
                                      [f"{p}/mlp/down_proj/MatMul/output_0"]))
        last = i == L - 1
        nxt = f"/model/layers.{i + 1}/" + ("final_norm_layernorm" if last else "input_layernorm")
        nw = ones(f"model.layers.{i + 1}." + ("final_norm_layernorm" if last else "input_layernorm")
                  + ".weight", H)
        outs = [f"{nxt}/output_0"] if last else [f"{nxt}/output_0", "", "", f"{nxt}/output_3"]
        nodes.append(helper.make_node("SkipSimplifiedLayerNormalization",
                                      [f"{post}/output_3", f"{p}/mlp/down_proj/MatMul/output_0", nw],
                                      outs, domain="com.microsoft", epsilon=eps))
        x, resid = f"{nxt}/output_0", f"{nxt}/output_3"
    lm = w("lm_head.MatMul.weight", (H, V))
    nodes.append(helper.make_node("MatMul", [x, lm], ["logits"]))

    def kv(name):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                             ["batch_size", NKV, "past_sequence_length", HD])

    def kvo(name):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                             ["batch_size", NKV, "total_sequence_length", HD])

    ins = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
           helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                         ["batch_size", "total_sequence_length"])]
    ins += [kv(f"past_key_values.{i}.key") for i in range(L)] + [kv(f"past_key_values.{i}.value")
                                                                  for i in range(L)]
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", V])]
    for i in range(L):
        outs += [kvo(f"present.{i}.key"), kvo(f"present.{i}.value")]
    if a.dtype == "f16":  # weights, caches, norms, KV and logits in fp16; the graph is otherwise the same
        for k, t in enumerate(inits):
            if t.data_type == TensorProto.FLOAT:
                inits[k] = numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name)
        for v in ins + outs:
            if v.type.tensor_type.elem_type == TensorProto.FLOAT:
                v.type.tensor_type.elem_type = TensorProto.FLOAT16
    graph = helper.make_graph(nodes, "main_graph", ins, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              ir_version=10, producer_name="graft bench/make_llama100m.py")
    exp = os.path.join(a.out, "export")
    os.makedirs(exp, exist_ok=True)
    if os.path.exists(os.path.join(exp, "model.onnx.data")):
        os.remove(os.path.join(exp, "model.onnx.data"))
    onnx.save_model(model, os.path.join(exp, "model.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=1024)
    nparams = sum(int(np.prod(t.dims)) for t in inits)
    print(f"parameters: {nparams / 1e6:.1f}M")

    cfg = json.load(open(os.path.join(a.template, "genai_config.json")))
    d = cfg["model"]["decoder"]
    d.update(head_size=HD, hidden_size=H, num_attention_heads=NH, num_hidden_layers=L,
             num_key_value_heads=NKV)
    cfg["model"]["vocab_size"] = V
    cfg["model"]["context_length"] = CTX
    cfg["search"]["max_length"] = CTX
    json.dump(cfg, open(os.path.join(exp, "genai_config.json"), "w"), indent=4)
    tj = json.load(open(os.path.join(a.template, "tokenizer.json")))
    have = set()
    for t in tj["added_tokens"]:
        have.add(t["id"])
    vocab_ids = set(tj["model"]["vocab"].values()) | have
    nxt = max(vocab_ids) + 1
    for k in range(V - nxt):
        tj["added_tokens"].append({"id": nxt + k, "content": f"<unused_{k}>", "single_word": False,
                                   "lstrip": False, "rstrip": False, "normalized": False, "special": True})
    json.dump(tj, open(os.path.join(exp, "tokenizer.json"), "w"))
    tc = json.load(open(os.path.join(a.template, "tokenizer_config.json")))
    tc["model_max_length"] = CTX
    json.dump(tc, open(os.path.join(exp, "tokenizer_config.json"), "w"), indent=2)
    print(f"wrote {exp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
