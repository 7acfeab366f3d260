#!/usr/bin/env python3
"""Write a greedy-decoding golden for an ONNX export or pipeline, with onnxruntime.

    tools/golden.py PATH [-o GOLDEN.json] [--prompt TEXT]... [--ids 2,17,9]...
                    [--prompts-from OTHER_GOLDEN.json] [--steps 16] [--logits-steps 2]
                    [--bos auto|always|never] [--threads N]

PATH is a pipeline or export directory with a genai_config.json (ONNX Runtime GenAI
layout), a directory holding model.onnx, or an .onnx file. The pipeline is run the
way ONNX Runtime GenAI runs it on the CPU: an embedding session (when the config has
one; its multimodal inputs such as image_features/audio_features get empty
[0, hidden] tensors, as for a text-only prompt), then the decoder session, with the
present KV fed back as the next step's past KV (no shared buffer), attention_mask all
ones over past+new tokens and position_ids past..past+new-1 where the graph has them.

Decoding is greedy (argmax, lowest id on ties) for exactly --steps new tokens; EOS
does not stop it. The JSON format is documented in tests/fixtures/README.md.

Prompts: --ids gives token ids directly; --prompt tokenizes TEXT with HF `tokenizers`
and PATH's tokenizer.json, prepending the BOS token when --bos always, or with --bos
auto (default) when tokenizer_config.json says add_bos_token true and the
tokenizer's post-processor does not already add it; --prompts-from reuses another
golden's prompt ids. Without any of them, three built-in prompts are used.

Needs numpy, onnx, onnxruntime; `tokenizers` only for --prompt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

FORMAT = "graft-golden/1"
DEFAULT_PROMPTS = [
    "The quick brown fox",
    "Once upon a time, in a small village",
    "graft composes vendor pipelines into",
]
TAU = {"fp32": 1e-3, "fp16": 5e-2, "bf16": 5e-2, "int4": 2e-1, "int8": 2e-1}
FULL_LOGITS_MAX_VOCAB = 4096
TOPK = 64

_ORT_DTYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_,
    "tensor(bfloat16)": None,
}


class GoldenError(Exception):
    pass


def _np_dtype(ort_type: str):
    dt = _ORT_DTYPES.get(ort_type)
    if dt is None:
        raise GoldenError(f"unsupported input type {ort_type}")
    return dt


def _resolve(path: str) -> tuple[str, dict | None]:
    """Return (directory, genai_config or None); for a bare model, a synthetic config."""
    if os.path.isfile(path):
        if not path.endswith(".onnx"):
            raise GoldenError(f"{path}: not an .onnx file or a directory")
        d = os.path.dirname(os.path.abspath(path))
        return d, {"model": {"decoder": {"filename": os.path.basename(path)}}, "_synthetic": True}
    cfg_path = os.path.join(path, "genai_config.json")
    if os.path.isfile(cfg_path):
        with open(cfg_path, encoding="utf-8") as f:
            return os.path.abspath(path), json.load(f)
    if os.path.isfile(os.path.join(path, "model.onnx")):
        return os.path.abspath(path), {"model": {"decoder": {"filename": "model.onnx"}},
                                       "_synthetic": True}
    raise GoldenError(f"{path}: no genai_config.json or model.onnx")


class OrtPipeline:
    """Embedding session (optional) + decoder session, KV fed back between steps."""

    def __init__(self, path: str, threads: int = 0):
        import onnxruntime as ort

        self.dir, self.config = _resolve(path)
        model = self.config.get("model", {})
        dec = model.get("decoder")
        if not dec or "filename" not in dec:
            raise GoldenError(f"{path}: genai_config.json has no model.decoder.filename")
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        prov = ["CPUExecutionProvider"]

        def session(filename: str):
            full = os.path.join(self.dir, filename)
            if not os.path.isfile(full):
                raise GoldenError(f"{full}: missing graph file")
            return ort.InferenceSession(full, sess_options=so, providers=prov)

        self.dec = session(dec["filename"])
        emb = model.get("embedding")
        self.emb = session(emb["filename"]) if emb and "filename" in emb else None
        self.mode = "pipeline" if self.emb is not None else "single"

        imap = dict(dec.get("inputs", {}))
        omap = dict(dec.get("outputs", {}))
        self.past_k = imap.get("past_key_names", "past_key_values.%d.key")
        self.past_v = imap.get("past_value_names", "past_key_values.%d.value")
        self.pres_k = omap.get("present_key_names", "present.%d.key")
        self.pres_v = omap.get("present_value_names", "present.%d.value")
        self.logits_name = omap.get("logits", "logits")
        self.n_ids = imap.get("input_ids", "input_ids")
        self.n_mask = imap.get("attention_mask", "attention_mask")
        self.n_pos = imap.get("position_ids", "position_ids")
        self.n_embeds = imap.get("inputs_embeds", "inputs_embeds")

        self.dec_inputs = {i.name: i for i in self.dec.get_inputs()}
        self.dec_outputs = [o.name for o in self.dec.get_outputs()]
        if self.logits_name not in self.dec_outputs:
            raise GoldenError(f"decoder has no output {self.logits_name!r}")

        # KV pairs: past input name -> present output name, by layer index.
        self.kv: list[tuple[str, str]] = []
        self.kv_layers: list[tuple[int, str]] = []
        for i in range(4096):
            for kind, pin, pout in (("key", self.past_k % i, self.pres_k % i),
                                    ("value", self.past_v % i, self.pres_v % i)):
                if pin in self.dec_inputs:
                    if pout not in self.dec_outputs:
                        raise GoldenError(f"decoder input {pin} has no output {pout}")
                    self.kv.append((pin, pout))
                    self.kv_layers.append((i, kind))

        # Embedding outputs that feed the decoder (name in embedding graph -> decoder name).
        self.emb_feed: dict[str, str] = {}
        self.emb_empty: dict[str, np.ndarray] = {}
        if self.emb is not None:
            eimap = dict(emb.get("inputs", {}))
            eomap = dict(emb.get("outputs", {}))
            self.emb_ids = eimap.get("input_ids", "input_ids")
            emb_out = [o.name for o in self.emb.get_outputs()]
            for o in emb_out:
                role = next((k for k, v in eomap.items() if v == o), o)
                target = imap.get(role, role)
                if target in self.dec_inputs:
                    self.emb_feed[o] = target
            hidden = self._static_last(self.dec_inputs.get(self.n_embeds))
            for i in self.emb.get_inputs():
                if i.name == self.emb_ids:
                    continue
                shape = [0 if (not isinstance(d, int)) else d for d in i.shape]
                if len(shape) >= 1:
                    shape[0] = 0
                if shape and shape[-1] == 0:
                    shape[-1] = hidden
                self.emb_empty[i.name] = np.zeros(shape, dtype=_np_dtype(i.type))

        known = {self.n_ids, self.n_mask, self.n_pos, *[p for p, _ in self.kv],
                 *self.emb_feed.values()}
        unknown = [n for n in self.dec_inputs if n not in known]
        if unknown:
            raise GoldenError(f"decoder inputs with no known feed: {', '.join(unknown)}")
        if self.emb is None and self.n_ids not in self.dec_inputs:
            raise GoldenError("single-graph decoder has no input_ids input")

    @staticmethod
    def _static_last(inp) -> int:
        if inp is None or not isinstance(inp.shape[-1], int):
            return 0
        return inp.shape[-1]

    def _kv_template(self, pin: str) -> list:
        """Shape of a past input with the sequence axis as None and batch 1.

        Symbolic head sizes (the builder's 'kv_cache_dim') and kv-head counts come
        from genai_config.json's decoder.head_size / num_key_value_heads.
        """
        i = self.dec_inputs[pin]
        dec = self.config["model"]["decoder"]
        rank = len(i.shape)
        shape: list = []
        for k, d in enumerate(i.shape):
            if isinstance(d, int):
                shape.append(d)
            elif k == 0:
                shape.append(1)
            elif k == rank - 1 and rank == 4 and "head_size" in dec:
                shape.append(int(dec["head_size"]))
            elif k == 1 and rank == 4 and "num_key_value_heads" in dec:
                shape.append(int(dec["num_key_value_heads"]))
            else:
                shape.append(None)
        if shape.count(None) != 1:
            raise GoldenError(f"{pin}: cannot tell the sequence axis of shape {i.shape}")
        return shape

    def kv_geometry(self) -> list[dict]:
        """Per layer owning a cache: index, kv_heads, head_dim (past key shape, or the
        genai_config where the graph leaves them symbolic)."""
        out = []
        for (layer, kind), (pin, _) in zip(self.kv_layers, self.kv):
            if kind == "key":
                shp = self._kv_template(pin)
                out.append({"layer": layer, "kv_heads": shp[1], "head_dim": shp[-1]})
        return out

    def reset(self) -> None:
        self.past = 0
        self.cache: dict[str, np.ndarray] = {}
        for pin, _ in self.kv:
            shape = [0 if d is None else d for d in self._kv_template(pin)]
            self.cache[pin] = np.zeros(shape, dtype=_np_dtype(self.dec_inputs[pin].type))

    def step(self, ids: list[int]) -> np.ndarray:
        """Run new tokens; return the last position's logits as float32."""
        n = len(ids)
        x = np.asarray([ids], dtype=np.int64)
        feed: dict[str, np.ndarray] = {}
        if self.emb is not None:
            efeed = {self.emb_ids: x, **self.emb_empty}
            names = list(self.emb_feed)
            for name, val in zip(names, self.emb.run(names, efeed)):
                feed[self.emb_feed[name]] = val
        if self.n_ids in self.dec_inputs:
            feed[self.n_ids] = x
        if self.n_mask in self.dec_inputs:
            feed[self.n_mask] = np.ones((1, self.past + n),
                                        dtype=_np_dtype(self.dec_inputs[self.n_mask].type))
        if self.n_pos in self.dec_inputs:
            feed[self.n_pos] = np.arange(self.past, self.past + n, dtype=np.int64)[None, :].astype(
                _np_dtype(self.dec_inputs[self.n_pos].type))
        feed.update(self.cache)
        outs = [self.logits_name] + [p for _, p in self.kv]
        res = self.dec.run(outs, feed)
        for (pin, _), val in zip(self.kv, res[1:]):
            self.cache[pin] = val
        self.past += n
        return np.asarray(res[0][0, -1], dtype=np.float32)

    def precision(self) -> str:
        import onnx

        quant = False
        fp16 = False
        for f in [self.config["model"]["decoder"]["filename"]]:
            m = onnx.load(os.path.join(self.dir, f), load_external_data=False)
            for node in m.graph.node:
                if node.op_type in ("MatMulNBits", "GatherBlockQuantized", "MatMulInteger",
                                    "DynamicQuantizeMatMul", "QMoE"):
                    quant = True
            for t in m.graph.initializer:
                if t.data_type in (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16):
                    fp16 = True
            for o in m.graph.output:
                if o.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16:
                    fp16 = True
        return "int4" if quant else ("fp16" if fp16 else "fp32")


def greedy(step_fn, reset_fn, prompt_ids: list[int], steps: int, logits_steps: int) -> dict:
    """Shared greedy loop: returns one golden prompt entry (without 'text')."""
    reset_fn()
    logits = step_fn(list(prompt_ids))
    gen, margins, saved = [], [], []
    for s in range(steps):
        lg = np.asarray(logits, dtype=np.float64)
        order = np.argsort(-lg, kind="stable")
        top1, top2 = int(order[0]), int(order[1])
        margins.append(float(lg[top1] - lg[top2]))
        if s < logits_steps:
            saved.append(np.asarray(logits, dtype=np.float32))
        gen.append(top1)
        if s + 1 < steps:
            logits = step_fn([top1])
    entry = {"prompt_ids": [int(i) for i in prompt_ids], "generated_ids": gen,
             "margins": [float(f"{m:.7g}") for m in margins]}
    vocab = saved[0].shape[0] if saved else 0
    if vocab <= FULL_LOGITS_MAX_VOCAB:
        entry["logits"] = [[float(f"{v:.8g}") for v in row.tolist()] for row in saved]
    else:
        topk = []
        for row in saved:
            idx = np.argsort(-row.astype(np.float64), kind="stable")[:TOPK]
            topk.append({"ids": [int(i) for i in idx],
                         "values": [float(f"{row[i]:.8g}") for i in idx]})
        entry["logits_topk"] = topk
    return entry


def tokenize_prompts(path_dir: str, texts: list[str], bos: str) -> tuple[list[list[int]], bool]:
    from tokenizers import Tokenizer

    tj = os.path.join(path_dir, "tokenizer.json")
    if not os.path.isfile(tj):
        raise GoldenError(f"{tj}: missing (needed for --prompt)")
    tok = Tokenizer.from_file(tj)
    cfg = {}
    cp = os.path.join(path_dir, "tokenizer_config.json")
    if os.path.isfile(cp):
        with open(cp, encoding="utf-8") as f:
            cfg = json.load(f)
    bos_tok = cfg.get("bos_token")
    if isinstance(bos_tok, dict):
        bos_tok = bos_tok.get("content")
    bos_id = tok.token_to_id(bos_tok) if bos_tok else None
    out, added = [], False
    for t in texts:
        ids = tok.encode(t).ids
        want = bos == "always" or (bos == "auto" and cfg.get("add_bos_token") is True)
        if want and bos_id is None:
            raise GoldenError("BOS requested but tokenizer_config.json names no known bos_token")
        if want and (not ids or ids[0] != bos_id):
            ids = [bos_id] + ids
            added = True
        out.append(ids)
    return out, added


def make_golden(path: str, prompts: list[dict], steps: int = 16, logits_steps: int = 2,
                threads: int = 0) -> dict:
    import onnxruntime as ort

    p = OrtPipeline(path, threads=threads)
    prec = p.precision()
    t0 = time.time()
    entries = []
    for pr in prompts:
        e = greedy(p.step, p.reset, pr["prompt_ids"], steps, logits_steps)
        if pr.get("text") is not None:
            e = {"text": pr["text"], **e}
        entries.append(e)
    return {
        "format": FORMAT,
        "producer": {"name": "onnxruntime", "version": ort.__version__,
                     "provider": "CPUExecutionProvider", "mode": p.mode,
                     "seconds": round(time.time() - t0, 3)},
        "model": {"path": os.path.basename(os.path.normpath(path)), "precision": prec,
                  "kv": p.kv_geometry()},
        "margin_tau": TAU[prec],
        "steps": steps,
        "logits_steps": logits_steps,
        "stop_on_eos": False,
        "prompts": entries,
    }


def write_json(path: str | None, obj: dict) -> None:
    s = json.dumps(obj, indent=1)
    if path in (None, "-"):
        sys.stdout.write(s + "\n")
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(s + "\n")
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Greedy golden for an ONNX export/pipeline "
                                             "(onnxruntime CPU).")
    ap.add_argument("path")
    ap.add_argument("-o", "--output", default=None, help="golden file (default: stdout)")
    ap.add_argument("--prompt", action="append", default=[])
    ap.add_argument("--ids", action="append", default=[], help="comma-separated token ids")
    ap.add_argument("--prompts-from", default=None)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--logits-steps", type=int, default=2)
    ap.add_argument("--bos", choices=["auto", "always", "never"], default="auto")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)
    try:
        prompts: list[dict] = []
        if a.prompts_from:
            with open(a.prompts_from, encoding="utf-8") as f:
                g = json.load(f)
            prompts += [{"text": e.get("text"), "prompt_ids": e["prompt_ids"]} for e in g["prompts"]]
        for s in a.ids:
            prompts.append({"text": None, "prompt_ids": [int(x) for x in s.split(",") if x]})
        texts = a.prompt or ([] if prompts else DEFAULT_PROMPTS)
        if texts:
            d, _ = _resolve(a.path)
            ids, _ = tokenize_prompts(d, texts, a.bos)
            prompts += [{"text": t, "prompt_ids": i} for t, i in zip(texts, ids)]
        g = make_golden(a.path, prompts, a.steps, a.logits_steps, a.threads)
    except GoldenError as e:
        print(f"golden.py: {e}", file=sys.stderr)
        return 2
    write_json(a.output, g)
    return 0


if __name__ == "__main__":
    sys.exit(main())
