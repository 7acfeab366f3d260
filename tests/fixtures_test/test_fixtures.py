#!/usr/bin/env python3
"""Checks of the committed vendor fixtures (tests/fixtures/*/fixture.json).

    .venv/bin/python tests/fixtures_test/test_fixtures.py [--graft build/graft] [-k NAME]

Needs only the make-test venv (numpy, onnx, onnxruntime, tokenizers; onnxruntime-genai
for the cross-check): no torch, no GPU. For each export fixture:

  reproduce  its ORT golden (golden.ort.json) is produced again by the installed
             onnxruntime running the pipeline (tools/golden.py): same generated ids,
             logits within 1e-4 (fp32 exports), 1e-2 relative (fp16) or 5e-2 relative
             (int4, as `graft verify`: onnxruntime's MatMulNBits takes another path
             on CPUs with AVX512-VNNI, int8 activations, 0.129 apart on qwen3 int4).
  hf         it agrees with the Hugging Face transformers golden of its source
             checkpoint token for token up to the first step whose HF margin is <= tau
             (1e-3 fp32, 5e-2 fp16, 2e-1 int4); fp32 exports also match the HF prefill
             logits within 1e-3.
  genai      single-graph CPU exports: onnxruntime-genai's own greedy Generator gives
             the golden's ids (a check of the way tools/golden.py runs pipelines).
  tokenizer  the golden's prompt ids are what HF `tokenizers` makes of the prompt text
             with the export's tokenizer.json, plus BOS where tokenizer_config.json's
             add_bos_token asks for it; Gemma's tokenizer.json itself adds no BOS.
  kv         per-layer KV geometry of the decoder graph (layers owning a cache,
             kv_heads, head_dim) equals what the HF config.json implies; and the same
             from `graft inspect --json` when --graft is given (mixed-heads: the
             geometry its generator declares: head_dim 8, 32, 16; kv_heads 2, 1, 4).
  consistent (synthetic mixed-heads, whose only reference is onnxruntime) decoding with
             the KV cache gives the same ids and logits as recomputing the sequence.
  shape      what the fixture claims to be: the Gemma 4 Mobius pipelines have the four
             graphs; ops expected of each tool/precision are there.
plus sizes: each fixture <= 5 MB, all of tests/fixtures <= 40 MB.

Prints one line per check and ends with 'N passed, N failed'. Exit status 1 on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import traceback

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures")
sys.path.insert(0, os.path.join(ROOT, "tools"))

import golden  # noqa: E402  (tools/golden.py)

MB = 1_000_000
TAU = {"fp32": 1e-3, "fp16": 5e-2, "int4": 2e-1}


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def du(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def fixtures():
    out = []
    for n in sorted(os.listdir(FIX)):
        p = os.path.join(FIX, n, "fixture.json")
        if os.path.isfile(p):
            out.append((n, load(p)))
    return out


# ----------------------------------------------------------------------------- checks

def t_sizes(all_fx):
    for n, _ in all_fx:
        s = du(os.path.join(FIX, n))
        check(s <= 5 * MB, f"{n}: {s / MB:.2f} MB > 5 MB")
    total = du(FIX)
    check(total <= 40 * MB, f"tests/fixtures: {total / MB:.2f} MB > 40 MB")
    return f"{len(all_fx)} fixtures, {total / MB:.1f} MB in all"


def t_reproduce(name, meta):
    d = os.path.join(FIX, name)
    g = load(os.path.join(d, meta["golden"]["file"]))
    prompts = [{"text": e.get("text"), "prompt_ids": e["prompt_ids"]} for e in g["prompts"]]
    new = golden.make_golden(d, prompts, g["steps"], g["logits_steps"], threads=2)
    check(new["model"]["precision"] == meta["precision"],
          f"precision {new['model']['precision']} != {meta['precision']}")
    worst = 0.0
    for a, b in zip(g["prompts"], new["prompts"]):
        check(a["generated_ids"] == b["generated_ids"],
              f"ids differ for {a.get('text')!r}: golden {a['generated_ids']} now "
              f"{b['generated_ids']}")
        for la, lb in zip(a["logits"], b["logits"]):
            la, lb = np.asarray(la), np.asarray(lb)
            if meta["precision"] in ("fp16", "int4"):
                tol = 1e-2 if meta["precision"] == "fp16" else 5e-2
                err = float(np.abs(la - lb).max() / max(1.0, np.abs(la).max()))
                check(err <= tol, f"logits rel diff {err:.3g} > {tol:g}")
            else:
                err = float(np.abs(la - lb).max())
                check(err <= 1e-4, f"logits abs diff {err:.3g} > 1e-4")
            worst = max(worst, err)
    import onnxruntime as ort
    return (f"onnxruntime {ort.__version__} (golden {g['producer']['version']}): "
            f"ids equal, max logit diff {worst:.2g}")


def t_hf(name, meta):
    d = os.path.join(FIX, name)
    g = load(os.path.join(d, meta["golden"]["file"]))
    h = load(os.path.join(FIX, meta["source"], "golden.hf.json"))
    check(h["producer"]["name"] == "transformers", "source golden is not from transformers")
    tau = TAU[meta["precision"]]
    compared = total = 0
    pre = 0.0
    for a, b in zip(h["prompts"], g["prompts"]):
        check(a["prompt_ids"] == b["prompt_ids"], f"prompt ids differ for {a['text']!r}")
        for s, (ia, ib) in enumerate(zip(a["generated_ids"], b["generated_ids"])):
            total += 1
            if a["margins"][s] <= tau:
                break
            check(ia == ib, f"{a['text']!r} step {s}: HF {ia} (margin {a['margins'][s]:.3g}) "
                            f"ORT {ib}")
            compared += 1
        if meta["precision"] == "fp32":
            diff = float(np.abs(np.asarray(a["logits"][0]) - np.asarray(b["logits"][0])).max())
            check(diff <= 1e-3, f"{a['text']!r}: prefill logits differ from HF by {diff:.3g}")
            pre = max(pre, diff)
    check(compared >= total // 2, f"only {compared} of {total} steps comparable at tau {tau}")
    extra = f", prefill logits within {pre:.2g}" if meta["precision"] == "fp32" else ""
    return f"tau {tau}: {compared}/{total} steps compared, all equal{extra}"


def genai_applicable(d):
    cfg = load(os.path.join(d, "genai_config.json"))["model"]
    if "embedding" in cfg:
        return False, "pipeline with an embedding graph (onnxruntime-genai 0.18 wants its Engine)"
    provs = cfg["decoder"].get("session_options", {}).get("provider_options", [])
    if provs:
        return False, f"genai_config asks for {provs}"
    return True, ""


def t_genai(name, meta):
    d = os.path.join(FIX, name)
    ok, why = genai_applicable(d)
    if not ok:
        return None, why
    import onnxruntime_genai as og

    g = load(os.path.join(d, meta["golden"]["file"]))
    model = og.Model(og.Config(d))
    for p in g["prompts"]:
        params = og.GeneratorParams(model)
        params.set_search_options(do_sample=False, max_length=len(p["prompt_ids"]) + g["steps"])
        gen = og.Generator(model, params)
        gen.append_tokens(p["prompt_ids"])
        out = []
        while not gen.is_done() and len(out) < g["steps"]:
            gen.generate_next_token()
            out.append(int(gen.get_next_tokens()[0]))
        check(out == p["generated_ids"], f"onnxruntime-genai {out} != golden {p['generated_ids']}")
    return True, f"onnxruntime-genai {og.__version__}: same ids"


def t_tokenizer(name, meta):
    from tokenizers import Tokenizer

    d = os.path.join(FIX, name)
    g = load(os.path.join(d, meta["golden"]["file"]))
    texts = [e["text"] for e in g["prompts"]]
    ids, _ = golden.tokenize_prompts(d, texts, "auto")
    for t, want, e in zip(texts, ids, g["prompts"]):
        check(e["prompt_ids"] == want, f"{t!r}: golden {e['prompt_ids']} tokenizers {want}")
    tc = load(os.path.join(d, "tokenizer_config.json"))
    tj = load(os.path.join(d, "tokenizer.json"))
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    plain = tok.encode(texts[0]).ids
    if tc.get("add_bos_token") is True:
        bos = tok.token_to_id(tc["bos_token"])
        check(plain[0] != bos and tj.get("post_processor") is None,
              "tokenizer.json adds BOS itself (expected the broken-export condition)")
        check(e["prompt_ids"][0] == bos, "golden prompt does not start with BOS")
        return f"add_bos_token true, tokenizer.json adds none: goldens prepend BOS {bos}"
    if tc.get("bos_token") is None:
        check(all(e["prompt_ids"] == tok.encode(e["text"]).ids for e in g["prompts"]),
              "prompt ids differ from the plain encoding")
        return "no BOS (tokenizer unchanged)"
    bos = tok.token_to_id(tc["bos_token"])
    check(plain[0] == bos, "post-processor expected to add BOS")
    return f"post-processor adds BOS {bos}"


def expected_kv(hf_cfg):
    """Per layer owning a cache: (layer, kv_heads, head_dim), from an HF config.json."""
    c = hf_cfg.get("text_config", hf_cfg)
    n = c["num_hidden_layers"]
    heads = c["num_attention_heads"]
    kvh = c.get("num_key_value_heads") or heads
    hd = c.get("head_dim") or c["hidden_size"] // heads
    types = c.get("layer_types") or ["full_attention"] * n
    owners = n - (c.get("num_kv_shared_layers") or 0)
    out = []
    for i in range(owners):
        full = types[i] == "full_attention"
        d = c.get("global_head_dim") if (full and c.get("global_head_dim")) else hd
        h = c["num_global_key_value_heads"] if (full and c.get("attention_k_eq_v")) else kvh
        out.append((i, h, d))
    return out


def t_kv(name, meta, graft):
    d = os.path.join(FIX, name)
    if "source" in meta:
        want = expected_kv(load(os.path.join(FIX, meta["source"], "config.json")))
    else:  # synthetic fixture: the geometry its generator declares
        want = [(e["layer"], e["kv_heads"], e["head_dim"]) for e in meta["kv"]]
    p = golden.OrtPipeline(d, threads=1)
    got = [(e["layer"], e["kv_heads"], e["head_dim"]) for e in p.kv_geometry()]
    check(got == want, f"graph KV {got} != expected {want}")
    msg = f"{len(want)} cache layers {sorted({w[2] for w in want})} head_dim"
    if graft:
        out = subprocess.run([graft, "inspect", "--json", d], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, timeout=60)
        check(out.returncode == 0, f"graft inspect failed: {out.stderr.strip()[:300]}")
        j = json.loads(out.stdout)
        models = j.get("models", [j])
        dec = [m for m in models if m.get("role", "decoder") == "decoder"]
        check(len(dec) == 1, "graft inspect: no single decoder")
        kv = dec[0].get("model", dec[0])["kv"]
        layers = [x for x in kv["layers"] if x.get("cache", True)]
        head_size = p.config["model"]["decoder"].get("head_size")
        gg, symbolic = [], False
        for x in layers:
            hdim = x["head_dim"]
            if isinstance(hdim, str):
                # The builder leaves head_dim symbolic ('kv_cache_dim'); genai_config
                # gives it, and the graph check above already used that.
                symbolic = True
                hdim = head_size
            gg.append((x["layer"], x["kv_heads"], hdim))
        check(gg == want, f"graft inspect KV {gg} != HF config {want}")
        check(kv.get("cached_layers", len(layers)) == len(want), "cached_layers differs")
        msg += "; graft inspect agrees" + (" (head_dim symbolic in graph)" if symbolic else "")
    return msg


def t_consistent(name, meta):
    """KV-cached decoding (the golden) equals recomputing the whole sequence each step."""
    d = os.path.join(FIX, name)
    g = load(os.path.join(d, meta["golden"]["file"]))
    p = golden.OrtPipeline(d, threads=2)
    worst = 0.0
    for e in g["prompts"]:
        for s, tok in enumerate(e["generated_ids"]):
            p.reset()
            lg = p.step(e["prompt_ids"] + e["generated_ids"][:s])
            check(int(np.argmax(lg)) == tok, f"{e['text']!r} step {s}: full recompute "
                                              f"gives {int(np.argmax(lg))}, cached {tok}")
            if s < len(e["logits"]):
                diff = float(np.abs(lg - np.asarray(e["logits"][s])).max())
                check(diff <= 1e-4, f"step {s}: full recompute logits differ by {diff:.3g}")
                worst = max(worst, diff)
    return f"no-cache recompute: same ids, logits within {worst:.2g}"


def t_shape(name, meta):
    import onnx

    d = os.path.join(FIX, name)
    cfg = load(os.path.join(d, "genai_config.json"))["model"]
    ops = set()
    for sec in ("decoder", "embedding"):
        if sec in cfg:
            m = onnx.load(os.path.join(d, cfg[sec]["filename"]), load_external_data=False)
            ops |= {(n.domain or "ai.onnx", n.op_type) for n in m.graph.node}
    if name.startswith("gemma4-mobius"):
        for sec in ("decoder", "embedding", "vision", "speech"):
            check(sec in cfg and os.path.isfile(os.path.join(d, cfg[sec]["filename"])),
                  f"genai_config section {sec} or its graph missing")
        check(set(cfg["embedding"]["inputs"]) >= {"input_ids", "image_features", "audio_features"},
              "embedding inputs")
        check(set(cfg["embedding"]["outputs"]) >= {"inputs_embeds", "per_layer_inputs"},
              "embedding outputs")
    cuda_ep = "--ep cuda" in meta.get("command", "")
    if meta["tool"] == "mobius" and not cuda_ep:
        check(("ai.onnx", "Attention") in ops, "portable Mobius export without the Attention op")
    if meta["precision"] == "fp16" and cuda_ep:
        check(("com.microsoft", "GroupQueryAttention") in ops, "no GroupQueryAttention")
    if meta["precision"] == "fp16" and not cuda_ep:  # the E2B benchmark's kind: fp32 mask cast to fp16
        casts = [n for n in onnx.load(os.path.join(d, cfg["decoder"]["filename"]),
                                      load_external_data=False).graph.node if n.op_type == "Cast"]
        check(any(a.name == "to" and a.i == onnx.TensorProto.FLOAT16 for n in casts for a in n.attribute),
              "no Cast to fp16 (the mask's)")
    if meta["precision"] == "int4":
        check(("com.microsoft", "MatMulNBits") in ops, "no MatMulNBits")
    return f"{len(ops)} op types"


# ----------------------------------------------------------------------------- runner

def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graft", default=None, help="graft binary for the inspect check")
    ap.add_argument("-k", default=None, help="only fixtures whose name contains this")
    a = ap.parse_args()
    graft = a.graft if a.graft and os.path.isfile(a.graft) else None
    if a.graft and not graft:
        print(f"FAIL  --graft {a.graft}: no such file")
        print("0 passed, 1 failed")
        return 1
    all_fx = fixtures()
    passed = failed = skipped = 0

    def record(label, fn, *args):
        nonlocal passed, failed, skipped
        try:
            r = fn(*args)
            if isinstance(r, tuple):
                if r[0] is None:
                    skipped += 1
                    print(f"n/a   {label}: {r[1]}")
                    return
                r = r[1]
            passed += 1
            print(f"ok    {label}: {r}")
        except Fail as e:
            failed += 1
            print(f"FAIL  {label}: {e}")
        except Exception as e:  # an error in the check is a failure too
            failed += 1
            print(f"FAIL  {label}: {type(e).__name__}: {e}")
            traceback.print_exc(limit=3)
        sys.stdout.flush()

    check_any = [n for n, m in all_fx if "source" in m]
    if not check_any:
        print("FAIL  no export fixtures found under tests/fixtures")
        print("0 passed, 1 failed")
        return 1
    record("sizes", t_sizes, all_fx)
    for n, m in all_fx:
        if "source" in m or "kv" not in m or (a.k and a.k not in n):
            continue
        record(f"{n} reproduce", t_reproduce, n, m)
        record(f"{n} consistent", t_consistent, n, m)
        record(f"{n} kv", t_kv, n, m, graft)
    for n, m in all_fx:
        if "source" not in m or (a.k and a.k not in n):
            continue
        record(f"{n} reproduce", t_reproduce, n, m)
        record(f"{n} hf", t_hf, n, m)
        record(f"{n} genai", t_genai, n, m)
        record(f"{n} tokenizer", t_tokenizer, n, m)
        record(f"{n} kv", t_kv, n, m, graft)
        record(f"{n} shape", t_shape, n, m)
    tail = f", {skipped} skipped" if skipped else ""
    print(f"{passed} passed, {failed} failed{tail}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
