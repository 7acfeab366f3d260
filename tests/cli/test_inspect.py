#!/usr/bin/env python3
"""Tests of `graft inspect` and the CLI's conventions, with the onnx Python
package as the oracle: what graft reports about a model must be what onnx
reads from the same file.

    GRAFT=build/graft .venv/bin/python tests/cli/test_inspect.py [-v]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GRAFT = os.path.abspath(os.environ.get("GRAFT", os.path.join(ROOT, "build", "graft")))
DEMO = os.path.join(ROOT, "tests", "fixtures", "demo", "model.onnx")

# Bits per element of each tensor type (sub-byte types packed).
BITS = {
    TensorProto.FLOAT: 32, TensorProto.UINT8: 8, TensorProto.INT8: 8, TensorProto.UINT16: 16,
    TensorProto.INT16: 16, TensorProto.INT32: 32, TensorProto.INT64: 64, TensorProto.STRING: 0,
    TensorProto.BOOL: 8, TensorProto.FLOAT16: 16, TensorProto.DOUBLE: 64, TensorProto.UINT32: 32,
    TensorProto.UINT64: 64, TensorProto.COMPLEX64: 64, TensorProto.COMPLEX128: 128,
    TensorProto.BFLOAT16: 16, TensorProto.FLOAT8E4M3FN: 8, TensorProto.FLOAT8E4M3FNUZ: 8,
    TensorProto.FLOAT8E5M2: 8, TensorProto.FLOAT8E5M2FNUZ: 8, TensorProto.UINT4: 4,
    TensorProto.INT4: 4, TensorProto.FLOAT4E2M1: 4, TensorProto.FLOAT8E8M0: 8,
    TensorProto.UINT2: 2, TensorProto.INT2: 2, TensorProto.FLOAT6E2M3: 6, TensorProto.FLOAT6E3M2: 6,
}


def graft(*args, cwd=None):
    return subprocess.run([GRAFT, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def graft_json(path):
    r = graft("inspect", "--json", path)
    if r.returncode != 0:
        raise AssertionError(f"graft inspect --json {path}: exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


# ---------------------------------------------------------------- the oracle

def dtype_name(t):
    return TensorProto.DataType.Name(t).lower() if t else None


def value_expect(vi):
    tt = vi.type.tensor_type
    shape = None
    if tt.HasField("shape"):
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
            elif d.dim_param:
                shape.append(d.dim_param)
            else:
                shape.append(None)
    return {"name": vi.name, "dtype": dtype_name(tt.elem_type), "shape": shape}


def subgraphs(node):
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def walk(graph):
    """(nodes, initializers) of graph and its subgraphs."""
    nodes, inits = [], list(graph.initializer)
    for n in graph.node:
        nodes.append(n)
        for g in subgraphs(n):
            sn, si = walk(g)
            nodes += sn
            inits += si
    return nodes, inits


def tensor_bytes(t):
    numel = int(np.prod(t.dims, dtype=np.int64)) if t.dims else 1
    return (numel * BITS[t.data_type] + 7) // 8


def kv_expect(graph, templates):
    """Layers from names matching the templates, geometry from present.N.key
    (falling back to the past input per dim), as graft documents it."""
    def rx(t):
        a, b = t.split("%d")
        return re.compile(re.escape(a) + r"(\d+)" + re.escape(b) + r"\Z")

    vis = {}
    for side, values in ((0, graph.input), (1, graph.output)):
        for vi in values:
            for k in (2 * side, 2 * side + 1):
                m = rx(templates[k]).match(vi.name)
                if m:
                    vis.setdefault(int(m.group(1)), [None] * 4)[k] = value_expect(vi)
    layers = []
    for n in sorted(vis):
        v = vis[n]

        def dim(order, axis):
            sym = None
            for k in order:
                if v[k] and v[k]["shape"] is not None and len(v[k]["shape"]) == 4:
                    d = v[k]["shape"][axis]
                    if isinstance(d, int):
                        return d
                    if sym is None and d is not None:
                        sym = d
            return sym

        layers.append({"layer": n, "cache": v[0] is not None,
                       "kv_heads": dim((2, 0), 1), "head_dim": dim((2, 0), 3),
                       "value_head_dim": dim((3, 1), 3),
                       "past_key": v[0] and v[0]["name"], "present_key": v[2] and v[2]["name"]})
    return layers


DEFAULT_TEMPLATES = ["past_key_values.%d.key", "past_key_values.%d.value", "present.%d.key",
                     "present.%d.value"]


class Oracle:
    def assert_model(self, rep, path, templates=DEFAULT_TEMPLATES):
        m = onnx.load(path, load_external_data=False)
        g = m.graph
        self.assertEqual(rep["ir_version"], m.ir_version)
        self.assertEqual(rep["producer"], m.producer_name)
        self.assertEqual(rep["graph"], g.name)
        self.assertEqual(rep["opsets"], {(o.domain or "ai.onnx"): o.version for o in m.opset_import})
        self.assertEqual(rep["metadata"], {p.key: p.value for p in m.metadata_props})
        self.assertEqual(rep["inputs"], [value_expect(v) for v in g.input])
        self.assertEqual(rep["outputs"], [value_expect(v) for v in g.output])

        nodes, inits = walk(g)
        ops = {}
        for n in nodes:
            d = ops.setdefault(n.domain or "ai.onnx", {})
            d[n.op_type] = d.get(n.op_type, 0) + 1
        self.assertEqual(rep["ops"], ops)
        self.assertEqual(rep["node_count"], len(nodes))

        ini = rep["initializers"]
        self.assertEqual(ini["count"], len(inits))
        self.assertEqual(ini["bytes"], sum(tensor_bytes(t) for t in inits))
        ext = [t for t in inits if t.data_location == TensorProto.EXTERNAL]
        self.assertEqual(ini["external_bytes"], sum(tensor_bytes(t) for t in ext))
        by = {}
        for t in inits:
            e = by.setdefault(dtype_name(t.data_type), {"count": 0, "bytes": 0})
            e["count"] += 1
            e["bytes"] += tensor_bytes(t)
        self.assertEqual(ini["by_dtype"], by)

        files = []
        for t in ext:
            loc = {e.key: e.value for e in t.external_data}["location"]
            if loc not in files:
                files.append(loc)
        base = os.path.dirname(path)
        self.assertEqual(rep["external_data"],
                         [{"file": f, "size": os.path.getsize(os.path.join(base, f))}
                          for f in files])

        got = [{k: layer[k] for k in ("layer", "cache", "kv_heads", "head_dim", "value_head_dim",
                                      "past_key", "present_key")}
               for layer in rep["kv"]["layers"]]
        self.assertEqual(got, kv_expect(g, templates))
        self.assertEqual(rep["kv"]["cached_layers"], sum(1 for x in got if x["cache"]))


# ---------------------------------------------------------------- models built here

def make_zoo_model(path):
    """Odd corners: a custom domain, an If with subgraphs (and an initializer
    inside one), unknown dims and ranks, sub-byte and typed-field tensors,
    non-contiguous KV layers, a layer with no cache, symbolic present dims."""
    V = helper.make_tensor_value_info
    inputs = [
        V("x", TensorProto.FLOAT16, ["n", None, 8]),
        helper.make_value_info("y", helper.make_tensor_type_proto(TensorProto.FLOAT, None)),
        V("cond", TensorProto.BOOL, []),
        V("past_key_values.0.key", TensorProto.FLOAT16, [1, 4, "past", 64]),
        V("past_key_values.0.value", TensorProto.FLOAT16, [1, 4, "past", 64]),
        V("past_key_values.5.key", TensorProto.BFLOAT16, [1, 2, "past", 128]),
        V("past_key_values.5.value", TensorProto.BFLOAT16, [1, 2, "past", 96]),
    ]
    outputs = [
        V("out", TensorProto.FLOAT, None),
        V("present.0.key", TensorProto.FLOAT16, [1, 4, "total", 64]),
        V("present.0.value", TensorProto.FLOAT16, [1, 4, "total", 64]),
        V("present.2.key", TensorProto.FLOAT16, [1, 8, "total", 256]),
        V("present.5.key", TensorProto.BFLOAT16, [1, "kvh", "total", "hd"]),
        V("present.5.value", TensorProto.BFLOAT16, [1, "kvh", "total", "vhd"]),
    ]
    then_g = helper.make_graph(
        [helper.make_node("Add", ["y", "one"], ["t_out"]), helper.make_node("Relu", ["t_out"], ["t2"])],
        "then", [], [V("t2", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones([1], np.float32), "one")])
    else_g = helper.make_graph([helper.make_node("Neg", ["y"], ["e_out"])], "else", [],
                               [V("e_out", TensorProto.FLOAT, None)])
    nodes = [
        helper.make_node("If", ["cond"], ["out"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Identity", ["past_key_values.0.key"], ["present.0.key"]),
        helper.make_node("Identity", ["past_key_values.0.value"], ["present.0.value"]),
        helper.make_node("FusedMatMul", ["x", "w16"], ["present.2.key"], domain="com.microsoft"),
        helper.make_node("Identity", ["past_key_values.5.key"], ["present.5.key"]),
        helper.make_node("Identity", ["past_key_values.5.value"], ["present.5.value"]),
    ]
    inits = [
        numpy_helper.from_array(np.zeros([3, 5], np.float16), "w16"),
        helper.make_tensor("wbf", TensorProto.BFLOAT16, [7], np.zeros(7, np.uint16).tobytes(),
                           raw=True),
        helper.make_tensor("w4", TensorProto.INT4, [5], [1, 2, 3, -4, 5]),
        helper.make_tensor("wtyped", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0]),
        helper.make_tensor("wu2", TensorProto.UINT2, [9], bytes(3), raw=True),
    ]
    graph = helper.make_graph(nodes, "zoo", inputs, outputs, inits)
    model = helper.make_model(graph, producer_name="zoo-maker",
                              opset_imports=[helper.make_opsetid("", 24),
                                             helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 11
    onnx.save(model, path)


def make_pipeline(d, decoder_name="decoder.onnx", config=None):
    """An ONNX Runtime GenAI style pipeline: embedding + decoder whose KV
    names follow custom templates given in genai_config.json."""
    V = helper.make_tensor_value_info
    rng = np.random.default_rng(1)
    emb = helper.make_graph(
        [helper.make_node("Gather", ["embed", "input_ids"], ["inputs_embeds"])], "embedding",
        [V("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [V("inputs_embeds", TensorProto.FLOAT, ["batch", "seq", 32])],
        [numpy_helper.from_array(rng.standard_normal([50, 32]).astype(np.float32), "embed")])
    m = helper.make_model(emb, opset_imports=[helper.make_opsetid("", 24)])
    m.ir_version = 11
    onnx.save(m, os.path.join(d, "embedding.onnx"))

    inputs = [V("inputs_embeds", TensorProto.FLOAT, ["batch", "seq", 32]),
              V("attention_mask", TensorProto.INT64, ["batch", "total"])]
    outputs = [V("logits", TensorProto.FLOAT, ["batch", "seq", 50])]
    nodes = [helper.make_node("MatMul", ["inputs_embeds", "lm"], ["logits"])]
    for i, (h, hd) in enumerate([(2, 8), (1, 24)]):
        for kind in ("k", "v"):
            inputs.append(V(f"past.{i}.{kind}", TensorProto.FLOAT, ["batch", h, "past", hd]))
            outputs.append(V(f"cache.{i}.{kind}", TensorProto.FLOAT, ["batch", h, "total", hd]))
            nodes.append(helper.make_node("Identity", [f"past.{i}.{kind}"], [f"cache.{i}.{kind}"]))
    dec = helper.make_graph(nodes, "decoder", inputs, outputs,
                            [numpy_helper.from_array(np.zeros([32, 50], np.float32), "lm")])
    m = helper.make_model(dec, opset_imports=[helper.make_opsetid("", 24)])
    m.ir_version = 11
    onnx.save(m, os.path.join(d, decoder_name), save_as_external_data=True,
              location=decoder_name + ".data", size_threshold=0)

    cfg = config or {
        "model": {
            "bos_token_id": 2, "context_length": 256, "eos_token_id": [1, 7], "type": "toy",
            "vocab_size": 50,
            "embedding": {"filename": "embedding.onnx",
                          "inputs": {"input_ids": "input_ids"},
                          "outputs": {"inputs_embeds": "inputs_embeds"}},
            "decoder": {
                "filename": decoder_name, "head_size": 8, "hidden_size": 32,
                "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
                "inputs": {"inputs_embeds": "inputs_embeds", "attention_mask": "attention_mask",
                           "position_ids": "position_ids",
                           "past_key_names": "past.%d.k", "past_value_names": "past.%d.v"},
                "outputs": {"logits": "logits", "present_key_names": "cache.%d.k",
                            "present_value_names": "cache.%d.v"},
            },
        },
        "search": {"max_length": 256},
    }
    with open(os.path.join(d, "genai_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return cfg


# ---------------------------------------------------------------- tests

class TestCli(unittest.TestCase):
    def test_help_and_version(self):
        for args in (["--help"], ["-h"], ["help"], ["help", "inspect"], ["inspect", "--help"]):
            r = graft(*args)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
            self.assertIn("usage: graft", r.stdout)
        self.assertIn("inspect", graft("--help").stdout)
        r = graft("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^graft \d+\.\d+\.\d+\n$")

    def test_bad_usage_exits_2(self):
        for args in ([], ["bogus"], ["--bogus"], ["help", "bogus"], ["inspect"],
                     ["inspect", "--bogus", DEMO], ["inspect", DEMO, DEMO]):
            r = graft(*args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertTrue(r.stderr.strip(), args)
            self.assertEqual(r.stdout, "", args)

    def test_missing_file(self):
        r = graft("inspect", "/nonexistent/dir/model.onnx")
        self.assertIn(r.returncode, (1, 2))
        self.assertIn("graft inspect: ", r.stderr)
        self.assertIn("/nonexistent/dir/model.onnx", r.stderr)

    def test_not_a_model(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "junk.onnx")
            with open(bad, "wb") as f:
                f.write(b"\xff" * 100)
            r = graft("inspect", bad)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertTrue(r.stderr.startswith("graft inspect: "), r.stderr)
            r = graft("inspect", d)  # directory without genai_config.json
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("genai_config.json", r.stderr)

    def test_truncated_model(self):
        with tempfile.TemporaryDirectory() as d:
            with open(DEMO, "rb") as f:
                data = f.read()
            shutil.copy(DEMO + ".data", d)
            for cut in (1, 7, len(data) // 3, len(data) // 2, len(data) - 5):
                p = os.path.join(d, "model.onnx")
                with open(p, "wb") as f:
                    f.write(data[:cut])
                r = graft("inspect", p)
                self.assertIn(r.returncode, (1, 2), (cut, r.stderr))
                self.assertTrue(r.stderr.startswith("graft inspect: "), (cut, r.stderr))


class TestInspectModel(unittest.TestCase, Oracle):
    def test_demo_json_matches_onnx(self):
        rep = graft_json(DEMO)
        self.assertEqual(rep["kind"], "model")
        self.assertEqual(rep["path"], DEMO)
        self.assert_model(rep, DEMO)
        # The demo's geometry, read from present.N.key, differs per layer.
        geo = [(x["kv_heads"], x["head_dim"]) for x in rep["kv"]["layers"]]
        self.assertEqual(geo, [(2, 16), (1, 32), (2, 16)])
        self.assertGreater(rep["initializers"]["external_bytes"], 0)

    def test_demo_human(self):
        r = graft("inspect", DEMO)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        for needle in ("IR 11", "ai.onnx 24", "past_key_values.0.key", "present.2.value",
                       "MatMul 7", "model.onnx.data", "3 layers, 3 with a cache"):
            self.assertIn(needle, out)
        self.assertRegex(out, r"\n  1\s+yes\s+1\s+32\s+32\s+float\n")
        self.assertRegex(out, r"past_key_values\.1\.key\s+float\s+\[batch, 1, past_sequence, 32\]")

    def test_zoo_json_matches_onnx(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "zoo.onnx")
            make_zoo_model(p)
            rep = graft_json(p)
            self.assert_model(rep, p)
            layers = {x["layer"]: x for x in rep["kv"]["layers"]}
            self.assertEqual(sorted(layers), [0, 2, 5])
            self.assertFalse(layers[2]["cache"])
            self.assertEqual((layers[2]["kv_heads"], layers[2]["head_dim"]), (8, 256))
            # symbolic present dims fall back to the past input's numbers
            self.assertEqual((layers[5]["kv_heads"], layers[5]["head_dim"],
                              layers[5]["value_head_dim"]), (2, 128, 96))
            self.assertEqual(layers[5]["dtype"], "bfloat16")
            self.assertEqual(rep["ops"]["com.microsoft"], {"FusedMatMul": 1})
            self.assertEqual(rep["subgraph_count"], 2)
            self.assertIsNone(rep["inputs"][1]["shape"])   # unknown rank
            self.assertIsNone(rep["inputs"][0]["shape"][1])  # unknown dim
            r = graft("inspect", p)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("[n, ?, 8]", r.stdout)
            self.assertRegex(r.stdout, r"\n  2\s+no\s+8\s+256\s+\?\s+float16\n")

    def test_hostile_names(self):
        """Names with terminal escapes are escaped in human output; bytes that
        are not UTF-8 still give valid JSON."""
        V = helper.make_tensor_value_info
        g = helper.make_graph([helper.make_node("Identity", ["in\x1b[31m"], ["ZZZZZZZZ"])], "g",
                              [V("in\x1b[31m", TensorProto.FLOAT, [1])],
                              [V("ZZZZZZZZ", TensorProto.FLOAT, [1])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)])
        data = m.SerializeToString().replace(b"ZZZZZZZZ", b"\xff\xfeZZZZZZ")
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "m.onnx")
            with open(p, "wb") as f:
                f.write(data)
            r = subprocess.run([GRAFT, "inspect", p], capture_output=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn(b"\x1b", r.stdout)
            self.assertIn(b"in\\x1b[31m", r.stdout)
            rep = graft_json(p)
            self.assertEqual(rep["inputs"][0]["name"], "in\x1b[31m")
            self.assertEqual(rep["outputs"][0]["name"], "??ZZZZZZ")

    def test_model_without_kv(self):
        with tempfile.TemporaryDirectory() as d:
            make_pipeline(d)
            p = os.path.join(d, "embedding.onnx")
            rep = graft_json(p)
            self.assert_model(rep, p)
            self.assertEqual(rep["kv"]["layers"], [])
            r = graft("inspect", p)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("kv cache      none", r.stdout)


class TestInspectPipeline(unittest.TestCase, Oracle):
    def test_pipeline(self):
        with tempfile.TemporaryDirectory() as d:
            cfg = make_pipeline(d)
            rep = graft_json(d)
            self.assertEqual(rep["kind"], "pipeline")
            self.assertEqual([m["role"] for m in rep["models"]], ["embedding", "decoder"])
            self.assertEqual([m["filename"] for m in rep["models"]],
                             ["embedding.onnx", "decoder.onnx"])
            c = rep["config"]
            for k in ("type", "context_length", "vocab_size", "eos_token_id"):
                self.assertEqual(c[k], cfg["model"][k])
            for k in ("num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                      "head_size", "hidden_size"):
                self.assertEqual(c[k], cfg["model"]["decoder"][k])
            self.assert_model(rep["models"][0]["model"], os.path.join(d, "embedding.onnx"))
            templates = ["past.%d.k", "past.%d.v", "cache.%d.k", "cache.%d.v"]
            dec = rep["models"][1]
            self.assert_model(dec["model"], os.path.join(d, "decoder.onnx"), templates)
            self.assertEqual([(x["kv_heads"], x["head_dim"]) for x in dec["model"]["kv"]["layers"]],
                             [(2, 8), (1, 24)])
            self.assertEqual(dec["unmatched_names"],
                             [{"map": "inputs", "key": "position_ids", "name": "position_ids"}])
            r = graft("inspect", d)
            self.assertEqual(r.returncode, 0, r.stderr)
            for needle in ("pipeline", "embedding  embedding.onnx", "decoder    decoder.onnx",
                           "num_hidden_layers 2", "== decoder", "position_ids",
                           "2 layers, 2 with a cache (past.%d.k -> cache.%d.k)"):
                self.assertIn(needle, r.stdout)

    def test_malformed_config_names_line_and_column(self):
        with tempfile.TemporaryDirectory() as d:
            make_pipeline(d)
            text = '{\n  "model": {\n    "decoder": {"filename": "decoder.onnx",}\n  }\n}\n'
            cfg = os.path.join(d, "genai_config.json")
            with open(cfg, "w") as f:
                f.write(text)
            try:
                json.loads(text)
                self.fail("python accepted the malformed config")
            except json.JSONDecodeError as e:
                line = e.lineno
            r = graft("inspect", d)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(cfg, r.stderr)
            m = re.search(r"line (\d+), column (\d+)", r.stderr)
            self.assertTrue(m, r.stderr)
            self.assertEqual(int(m.group(1)), line)

    def test_config_errors(self):
        cases = [
            ({"model": {"decoder": {"filename": "../outside.onnx"}}}, "filename"),
            ({"model": {"decoder": {"filename": "/etc/passwd"}}}, "filename"),
            ({"model": {"decoder": {"filename": 7}}}, "filename"),
            ({"model": {"decoder": {"filename": "decoder.onnx",
                                    "inputs": {"past_key_names": "past.k"}}}}, "past_key_names"),
            ({"model": []}, "model"),
            ({"search": {}}, "model"),
            ({"model": {"type": "x"}}, "filename"),
        ]
        for cfg, needle in cases:
            with tempfile.TemporaryDirectory() as d:
                make_pipeline(d, config=cfg)
                r = graft("inspect", d)
                self.assertEqual(r.returncode, 2, (cfg, r.stderr))
                self.assertIn("genai_config.json", r.stderr)
                self.assertIn(needle, r.stderr)

    def test_decoder_pipeline_stages(self):
        with tempfile.TemporaryDirectory() as d:
            make_pipeline(d, config={"model": {"decoder": {
                "num_hidden_layers": 2,
                "pipeline": [{"context": {"filename": "embedding.onnx",
                                          "inputs": ["input_ids"], "outputs": ["inputs_embeds"]}},
                             {"iterator": {"filename": "decoder.onnx",
                                           "inputs": ["inputs_embeds"], "outputs": ["logits"]}}]}}})
            rep = graft_json(d)
            self.assertEqual([m["role"] for m in rep["models"]],
                             ["decoder.pipeline.context", "decoder.pipeline.iterator"])
            self.assertEqual(rep["config"]["num_hidden_layers"], 2)
            self.assert_model(rep["models"][0]["model"], os.path.join(d, "embedding.onnx"))

    def test_missing_model_file(self):
        with tempfile.TemporaryDirectory() as d:
            make_pipeline(d)
            os.remove(os.path.join(d, "decoder.onnx"))
            r = graft("inspect", d)
            self.assertIn(r.returncode, (1, 2), r.stderr)
            self.assertIn("decoder.onnx", r.stderr)


if __name__ == "__main__":
    if not os.access(GRAFT, os.X_OK):
        sys.exit(f"test_inspect: {GRAFT} is not built (set GRAFT=path/to/graft)")
    unittest.main()
