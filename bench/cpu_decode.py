#!/usr/bin/env python3
"""CPU prefill and decode throughput: graft against onnxruntime's CPU
provider, on the same export, prompt and thread count, in one run.

    cpu_decode.py --graft build/graft EXPORT_DIR... [--threads 2]
                  [--prompt-tokens 128] [--new-tokens 64] [--results bench/RESULTS.md]

graft: `graft bench --json --warmup 1 --repeat R` (best of R). onnxruntime:
one InferenceSession (intra_op_num_threads = threads, all optimizations),
prefill then greedy steps feeding present KV back, timed around
session.run only (one untimed round, then best of R). R is the same for
both: enough rounds for about --min-seconds of timed work per tool (3 to
100; a 2-vCPU machine shared with others has phases 30-50% slower that
last longer than a tiny model's 3 rounds).
With --rounds N (default 1) the two alternate N times per export and the
table gives the median of the rounds' figures (for a shared, noisy machine).
Prints a table with the ratio graft / onnxruntime; appends it to RESULTS.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

NP = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
      "tensor(int32)": np.int32}


def ort_bench(export: str, threads: int, n_prompt: int, n_new: int, repeat: int = 3, warmup: int = 1) -> dict:
    cfg = json.load(open(os.path.join(export, "genai_config.json")))
    dec = cfg["model"]["decoder"]
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    s = ort.InferenceSession(os.path.join(export, dec["filename"]), so, providers=["CPUExecutionProvider"])
    ins = {i.name: i for i in s.get_inputs()}
    outs = [o.name for o in s.get_outputs()]
    vocab = int(cfg["model"].get("vocab_size", 0)) or 512
    best_pre, best_dec = 1e30, 1e30
    for rnd in range(warmup + repeat):
        past = {}
        for n, i in ins.items():
            if n.startswith("past"):
                shp = [1, i.shape[1] if isinstance(i.shape[1], int) else dec["num_key_value_heads"], 0,
                       i.shape[3] if isinstance(i.shape[3], int) else dec["head_size"]]
                past[n] = np.zeros(shp, NP[i.type])
        ids = np.array([[(k * 7919 + 13) % vocab for k in range(n_prompt)]], np.int64)
        total, t_pre, t_dec = 0, 0.0, 0.0
        cur = ids
        for step in range(n_new + 1):
            n = cur.shape[1]
            total += n
            feed = dict(past)
            feed["input_ids"] = cur.astype(NP[ins["input_ids"].type])
            feed["attention_mask"] = np.ones((1, total), NP[ins["attention_mask"].type])
            if "position_ids" in ins:
                feed["position_ids"] = np.arange(total - n, total, dtype=NP[ins["position_ids"].type])[None]
            t0 = time.perf_counter()
            res = s.run(outs, feed)
            dt = time.perf_counter() - t0
            if step == 0:
                t_pre = dt
            else:
                t_dec += dt
            out = dict(zip(outs, res))
            for k, v in out.items():
                if k.startswith("present"):
                    past[k.replace("present", "past_key_values")] = v
            cur = np.array([[int(np.argmax(out["logits"][0, -1]))]], np.int64)
        if rnd >= warmup:
            best_pre, best_dec = min(best_pre, t_pre), min(best_dec, t_dec)
    return {"prefill_tok_s": n_prompt / best_pre, "decode_tok_s": n_new / best_dec}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graft", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--min-seconds", type=float, default=1.5)
    ap.add_argument("--results")
    ap.add_argument("exports", nargs="+")
    a = ap.parse_args()
    env = dict(os.environ, GRAFT_THREADS=str(a.threads))
    rows = []
    def med(xs: list[dict], k: str) -> float:
        v = sorted(x[k] for x in xs)
        return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2

    for e in a.exports:
        gs, os_ = [], []
        base = [a.graft, "bench", e, "--json", "--prompt-tokens", str(a.prompt_tokens), "--new-tokens",
                str(a.new_tokens)]
        p = subprocess.run(base + ["--repeat", "1", "--warmup", "0"], capture_output=True, text=True, env=env)
        if p.returncode:
            print(f"{e}: graft bench failed: {p.stderr.strip()}")
            continue
        j = json.loads(p.stdout)
        rep = int(min(100, max(3, -(-a.min_seconds // max(1e-6, j["prefill_s"] + j["decode_s"])))))
        for _ in range(max(1, a.rounds)):
            p = subprocess.run(base + ["--repeat", str(rep), "--warmup", "1"], capture_output=True, text=True,
                               env=env)
            if p.returncode:
                print(f"{e}: graft bench failed: {p.stderr.strip()}")
                break
            gs.append(json.loads(p.stdout))
            os_.append(ort_bench(e, a.threads, a.prompt_tokens, a.new_tokens, rep))
        if not gs:
            continue
        g = {k: med(gs, k) for k in ("prefill_tok_s", "decode_tok_s", "peak_rss_mb")}
        o = {k: med(os_, k) for k in ("prefill_tok_s", "decode_tok_s")}
        rows.append((os.path.basename(e.rstrip("/")), g, o, rep))
    hdr = (f"| export | graft prefill tok/s | ORT prefill tok/s | ratio | graft decode tok/s | "
           f"ORT decode tok/s | ratio | graft peak RSS MB | best of |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines = [hdr]
    for name, g, o, rep in rows:
        lines.append(f"| {name} | {g['prefill_tok_s']:.1f} | {o['prefill_tok_s']:.1f} | "
                     f"{g['prefill_tok_s'] / o['prefill_tok_s']:.2f}x | {g['decode_tok_s']:.1f} | "
                     f"{o['decode_tok_s']:.1f} | {g['decode_tok_s'] / o['decode_tok_s']:.2f}x | {g['peak_rss_mb']:.0f} | {rep} |")
    table = "\n".join(lines)
    print(table)
    if a.results:
        cmd = " ".join(sys.argv)
        with open(a.results, "a", encoding="utf-8") as f:
            f.write(f"\n## CPU decode vs onnxruntime {ort.__version__} ({datetime.date.today()}, "
                    f"{a.threads} threads, prompt {a.prompt_tokens}, {a.new_tokens} new tokens"
                    f"{f', median of {a.rounds} alternating rounds' if a.rounds > 1 else ''})\n\n"
                    f"`{cmd}`\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
