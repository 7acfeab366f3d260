"""Runs a pipeline or an export with onnxruntime's CPU provider the way
ONNX Runtime GenAI does: embedding session then decoder session (empty
[0, hidden] multimodal features), or one session for a single graph; KV
fed back step by step; greedy. Used as the reference for compose."""
from __future__ import annotations

import json
import os

import numpy as np
import onnx
import onnxruntime as ort

NP = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16,
      onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32,
      onnx.TensorProto.BFLOAT16: np.float32}


def _session(path: str) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def _shape(vi, fill: dict[str, int]) -> list[int]:
    out = []
    for d in vi.type.tensor_type.shape.dim:
        out.append(d.dim_value if d.HasField("dim_value") else fill.get(d.dim_param, 0))
    return out


class Runner:
    """Greedy decode on a pipeline dir (genai_config.json) or export dir."""

    def __init__(self, d: str):
        cfg = json.load(open(os.path.join(d, "genai_config.json")))
        m = cfg["model"]
        self.dec_cfg = m["decoder"]
        self.emb_cfg = m.get("embedding")
        self.dec_path = os.path.join(d, self.dec_cfg["filename"])
        self.dec = _session(self.dec_path)
        self.dec_model = onnx.load(self.dec_path, load_external_data=False)
        self.emb = None
        if self.emb_cfg:
            p = os.path.join(d, self.emb_cfg["filename"])
            self.emb = _session(p)
            self.emb_model = onnx.load(p, load_external_data=False)

    def _embed(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        feeds = {}
        ids_name = self.emb_cfg["inputs"].get("input_ids", "input_ids")
        for vi in self.emb_model.graph.input:
            if vi.name == ids_name:
                feeds[vi.name] = ids
            else:  # what ONNX Runtime GenAI feeds for a text-only prompt
                shp = _shape(vi, {})
                shp[0] = 0
                feeds[vi.name] = np.zeros(shp, NP[vi.type.tensor_type.elem_type])
        names = [o.name for o in self.emb_model.graph.output]
        outs = dict(zip(names, self.emb.run(names, feeds)))
        wired = {}
        for key, ename in self.emb_cfg["outputs"].items():
            dname = self.dec_cfg["inputs"].get(key)
            if dname:
                wired[dname] = outs[ename]
        return wired

    def generate(self, prompt: list[int], steps: int = 16):
        """Returns (generated ids, per-step logits of the last position,
        per-step presents)."""
        ids = np.array([prompt], dtype=np.int64)
        past: dict[str, np.ndarray] = {}
        for vi in self.dec_model.graph.input:
            if "past" in vi.name:
                dims = vi.type.tensor_type.shape.dim
                shp = _shape(vi, {})
                shp[0] = 1
                shp[2] = 0
                # symbolic heads / head_dim (the builder's kv_cache_dim): the config's
                if not dims[1].HasField("dim_value"):
                    shp[1] = int(self.dec_cfg["num_key_value_heads"])
                if not dims[3].HasField("dim_value"):
                    shp[3] = int(self.dec_cfg["head_size"])
                past[vi.name] = np.zeros(shp, NP[vi.type.tensor_type.elem_type])
        total = 0
        gen, logits_steps, presents = [], [], []
        cur = ids
        in_names = {vi.name for vi in self.dec_model.graph.input}
        out_names = [o.name for o in self.dec_model.graph.output]
        for _ in range(steps):
            s = cur.shape[1]
            feeds = dict(past)
            if self.emb is not None:
                feeds.update(self._embed(cur))
            else:
                feeds["input_ids"] = cur
            total += s
            feeds["attention_mask"] = np.ones((1, total), np.int64)
            if "position_ids" in in_names:
                feeds["position_ids"] = np.arange(total - s, total, dtype=np.int64)[None, :]
            feeds = {k: v for k, v in feeds.items() if k in in_names}
            outs = dict(zip(out_names, self.dec.run(out_names, feeds)))
            logits = outs["logits"][0, -1].astype(np.float32)
            nxt = int(np.argmax(logits))
            gen.append(nxt)
            logits_steps.append(logits)
            pres = {k: v for k, v in outs.items() if k.startswith("present")}
            presents.append(pres)
            for k, v in pres.items():
                past[k.replace("present", "past_key_values")] = v
            cur = np.array([[nxt]], dtype=np.int64)
        return gen, logits_steps, presents
