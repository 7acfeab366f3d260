#!/usr/bin/env python3
"""Issue 7's GPU benchmark: decode/prefill tokens/s and bandwidth utilisation.

    cuda_bench.py bytes EXPORT [--prompt P --new N | --context C] [--json] [-v]
        bytes that must be read per decoded token, from the export's graph
        (onnx, load_external_data=False: sizes from dims and dtype)
    cuda_bench.py bandwidth [--gib 1] [--iters 20] [--json]
        device copy bandwidth with torch (run on the GPU machine)
    cuda_bench.py run --graft G --export E [--device cuda] [--quick] [--out DIR]
        the whole benchmark: bandwidth, `graft bench --json` with CUDA-graph
        capture on and off, prefill at 512 and 2048 tokens, bytes/token,
        utilisation; prints a markdown table last and writes it to
        DIR/RESULTS.part.md with the exact commands

Bytes per token (issue 7): every initializer a compute op reads is read in full
(MatMul/MatMulNBits/Gemm weights and their scales, norms, the LM head - with
tied embeddings also the table it shares with a Gather); a table that is only
indexed (Gather input 0, rotary cos/sin caches) costs one row per token; the
KV cache costs, per layer that owns one (graph outputs present.N.key/value),
kv_heads x head_dim x dtype size for each key and each value the step
attends to: the mean over the measured decode steps of min(context, window)
for sliding-window layers (window read from the graph: GroupQueryAttention's
local_window_size, or the Less(q - k, W) of the portable mask), the context
otherwise. Shape and index operands (Reshape shapes, Slice bounds, axes) and
unused initializers are not counted. utilisation = bytes / (seconds per
token) / copy bandwidth, where copy bandwidth = (bytes read + bytes written)
of a device-to-device copy / its time (median of --iters copies).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

# Bytes per element by TensorProto data type (0.5 for the 4-bit types).
DTYPE_SIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8,
              14: 8, 15: 16, 16: 2, 17: 1, 18: 1, 19: 1, 20: 1, 21: 0.5, 22: 0.5, 23: 0.5}

MATMUL_OPS = {"MatMul", "MatMulNBits", "Gemm", "MatMulInteger", "MatMulIntegerToFloat",
              "FusedMatMul", "QuantizeLinear", "DequantizeLinear", "Conv"}
# (op, input index) pairs that only carry shapes, bounds, axes or indices.
META_INPUTS = {("Reshape", 1), ("Slice", 1), ("Slice", 2), ("Slice", 3), ("Slice", 4),
               ("Unsqueeze", 1), ("Squeeze", 1), ("Expand", 1), ("Tile", 1), ("Pad", 1),
               ("Pad", 3), ("ConstantOfShape", 0), ("Range", 0), ("Range", 1), ("Range", 2),
               ("Split", 1), ("TopK", 1), ("ReduceSum", 1), ("ReduceMean", 1), ("ReduceMax", 1),
               ("ReduceMin", 1), ("ReduceProd", 1), ("ReduceL2", 1), ("CumSum", 1),
               ("Gather", 1), ("GatherElements", 1), ("GatherND", 1), ("ScatterND", 1),
               ("Resize", 1), ("Resize", 2), ("Resize", 3), ("OneHot", 1), ("Trilu", 1)}


def indexed_input(op: str, domain: str, k: int) -> bool:
    """Inputs from which a node reads rows chosen by an index (one per token)."""
    if op == "Gather" and k == 0:
        return True
    if op == "RotaryEmbedding":  # ONNX: X, cos, sin, ids; com.microsoft: X, ids, cos, sin
        return k in ((2, 3) if domain == "com.microsoft" else (1, 2))
    if op == "GroupQueryAttention":
        return k in (7, 8)
    return False


def tensor_bytes(t) -> float:
    n = 1
    for d in t.dims:
        n *= d
    return n * DTYPE_SIZE.get(t.data_type, 4)


def value_dims(vi):
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
            for d in vi.type.tensor_type.shape.dim]


def subgraphs(graph):
    import onnx
    yield graph
    for n in graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from subgraphs(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from subgraphs(g)


def scalar_const(name, inits, producers):
    """The value of a scalar initializer or Constant node output, else None."""
    from onnx import numpy_helper
    t = None
    if name in inits and inits[name].data_location != 1:
        t = inits[name]
    elif name in producers and producers[name].op_type == "Constant":
        for a in producers[name].attribute:
            if a.name == "value":
                t = a.t
            elif a.name in ("value_int", "value_float"):
                return a.i if a.name == "value_int" else a.f
    if t is None:
        return None
    try:
        v = numpy_helper.to_array(t)
    except Exception:
        return None
    return v.reshape(-1)[0].item() if v.size == 1 else None


def mask_window(name, inits, producers, depth=10):
    """W when the mask `name` comes from Less(q - k, W) within `depth` nodes."""
    seen, frontier = set(), [name]
    for _ in range(depth):
        nxt = []
        for x in frontier:
            n = producers.get(x)
            if n is None or id(n) in seen:
                continue
            seen.add(id(n))
            if n.op_type == "Less" and len(n.input) == 2:
                w = scalar_const(n.input[1], inits, producers)
                if w is not None and w > 0:
                    return int(w)
            nxt.extend(n.input)
        frontier = nxt
    return None


def model_path(export):
    return os.path.join(export, "model.onnx") if os.path.isdir(export) else export


def analyse(export):
    """Static per-token byte accounting of the export's graph (context-free part)."""
    import onnx
    path = model_path(export)
    m = onnx.load(path, load_external_data=False)
    inits, uses, producers = {}, collections.defaultdict(list), {}
    for g in subgraphs(m.graph):
        for t in g.initializer:
            inits[t.name] = t
        for n in g.node:
            for o in n.output:
                producers[o] = n
    # Local functions (com.microsoft SkipSimplifiedLayerNormalization as a
    # function body, ...) are called by op_type; an initializer passed to one
    # is classified by the call's op name.
    for g in subgraphs(m.graph):
        for n in g.node:
            for k, x in enumerate(n.input):
                if x in inits:
                    uses[x].append((n.op_type, n.domain, k))
    cats = collections.OrderedDict((c, [0.0, 0]) for c in
                                   ("matmul weights", "norm weights", "other compute operands",
                                    "gathered rows (indexed-only tables)",
                                    "indexed-only tables (excluded)", "shape/index operands (excluded)",
                                    "unused (excluded)"))
    detail = []
    for name, t in inits.items():
        b = tensor_bytes(t)
        u = uses.get(name, [])
        full = [(op, d, k) for op, d, k in u if not indexed_input(op, d, k) and (op, k) not in META_INPUTS]
        idx = [(op, d, k) for op, d, k in u if indexed_input(op, d, k)]
        if full:
            if any(op in MATMUL_OPS for op, _, _ in full):
                c = "matmul weights"
            elif any("Norm" in op for op, _, _ in full):
                c = "norm weights"
            else:
                c = "other compute operands"
            cats[c][0] += b
            cats[c][1] += 1
            detail.append((c, name, list(t.dims), b))
        elif idx:
            # One row per token along the gathered axis (axis 0 for the
            # caches and for Gather unless its attribute says otherwise).
            rows = t.dims[0] if t.dims else 1
            row = b / rows if rows else 0
            cats["gathered rows (indexed-only tables)"][0] += row
            cats["gathered rows (indexed-only tables)"][1] += 1
            cats["indexed-only tables (excluded)"][0] += b - row
            cats["indexed-only tables (excluded)"][1] += 1
            detail.append(("gathered row", name, list(t.dims), row))
        elif u:
            cats["shape/index operands (excluded)"][0] += b
            cats["shape/index operands (excluded)"][1] += 1
        else:
            cats["unused (excluded)"][0] += b
            cats["unused (excluded)"][1] += 1
    # Independent totals: the external-data length fields plus inline bytes,
    # and the data files' sizes on disk.
    ext_len, inline, files = 0, 0, set()
    for t in inits.values():
        if t.data_location == 1:
            kv = {e.key: e.value for e in t.external_data}
            ext_len += int(kv.get("length", 0))
            files.add(kv.get("location"))
        else:
            inline += len(t.raw_data) if t.raw_data else tensor_bytes(t)
    base = os.path.dirname(os.path.abspath(path))
    file_bytes = sum(os.path.getsize(os.path.join(base, f)) for f in files if f)
    # KV layers: graph outputs present.N.key / present.N.value.
    outs = {o.name: o for o in m.graph.output}
    kv = []
    # Window per cache layer: the attention node that writes present.N.key.
    for o in m.graph.output:
        mt = re.fullmatch(r"present\.(\d+)\.key", o.name)
        if not mt:
            continue
        v = outs.get(f"present.{mt.group(1)}.value")
        dk, dv = value_dims(o), value_dims(v) if v is not None else value_dims(o)
        size = DTYPE_SIZE.get(o.type.tensor_type.elem_type, 4)
        w, op = None, None
        n = producers.get(o.name)
        if n is not None:
            op = n.op_type
            if n.op_type == "GroupQueryAttention":
                for a in n.attribute:
                    if a.name == "local_window_size" and a.i > 0:
                        w = a.i
            elif n.op_type == "Attention" and len(n.input) > 3 and n.input[3]:
                w = mask_window(n.input[3], inits, producers)
        # [batch, kv_heads, seq, head_dim]; a symbolic dim: the past input's
        if not all(isinstance(x, int) for x in (dk[1], dk[3], dv[1], dv[3])):
            ins = {i.name: value_dims(i) for i in m.graph.input}
            dk = ins.get(f"past_key_values.{mt.group(1)}.key", dk)
            dv = ins.get(f"past_key_values.{mt.group(1)}.value", dv)
        per_tok = (dk[1] * dk[3] + dv[1] * dv[3]) * size
        kv.append(dict(layer=int(mt.group(1)), kv_heads=dk[1], head_dim_k=dk[3], head_dim_v=dv[3],
                       dtype_size=size, bytes_per_ctx_token=per_tok, window=w, op=op))
    return dict(path=path, categories=cats, detail=detail, kv=kv, total_dims=sum(tensor_bytes(t) for t in inits.values()),
                external_length=ext_len, inline=inline, file_bytes=file_bytes, n_inits=len(inits))


def mean_keys(prompt, new, window):
    """Keys attended per decode step, averaged over the bench's steps: step s
    (0-based) appends token P + s to a cache of P + s, so reads P + s + 1."""
    ks = [prompt + s + 1 for s in range(new)]
    if window:
        ks = [min(k, window) for k in ks]
    return sum(ks) / len(ks)


def per_token(a, prompt, new):
    weights = sum(a["categories"][c][0] for c in ("matmul weights", "norm weights", "other compute operands"))
    rows = a["categories"]["gathered rows (indexed-only tables)"][0]
    kvb = sum(layer["bytes_per_ctx_token"] * mean_keys(prompt, new, layer["window"]) for layer in a["kv"])
    kv_nowin = sum(layer["bytes_per_ctx_token"] * mean_keys(prompt, new, None) for layer in a["kv"])
    return dict(weights=weights, rows=rows, kv=kvb, kv_no_window=kv_nowin, total=weights + rows + kvb,
                mean_context=mean_keys(prompt, new, None))


def fmt_b(b):
    for unit, s in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= s:
            return f"{b / s:.3f} {unit}"
    return f"{b:.0f} B"


def print_analysis(a, prompt, new, verbose=False):
    print(f"model {a['path']}: {a['n_inits']} initializers")
    for c, (b, n) in a["categories"].items():
        print(f"  {c:40s} {n:5d}  {fmt_b(b):>12s}  ({b:.0f} B)")
    full = sum(a["categories"][c][0] for c in ("matmul weights", "norm weights", "other compute operands"))
    excl = sum(a["categories"][c][0] for c in ("indexed-only tables (excluded)", "shape/index operands (excluded)",
                                               "unused (excluded)"))
    rows = a["categories"]["gathered rows (indexed-only tables)"][0]
    print(f"  check: total by dims {a['total_dims']:.0f} B; external length fields {a['external_length']} B + "
          f"inline {a['inline']} B = {a['external_length'] + a['inline']} B; data files on disk {a['file_bytes']} B")
    files_total = a["external_length"] + a["inline"]
    print(f"  check: (external lengths + inline) - excluded - gathered rows = {files_total - excl - rows:.0f} B; "
          f"full-read sum {full:.0f} B: " + ("ok" if abs(files_total - excl - rows - full) < 1 else "MISMATCH"))
    for layer in a["kv"]:
        print(f"  kv layer {layer['layer']:2d}: {layer['kv_heads']} kv heads, head_dim {layer['head_dim_k']}/"
              f"{layer['head_dim_v']}, {layer['dtype_size']} B, window {layer['window']}, "
              f"{layer['bytes_per_ctx_token']} B per context token ({layer['op']})")
    p = per_token(a, prompt, new)
    print(f"  per decoded token at prompt {prompt} + {new} new (mean context {p['mean_context']:.1f}): "
          f"weights {fmt_b(p['weights'])}, gathered rows {fmt_b(p['rows'])}, KV {fmt_b(p['kv'])} "
          f"(without windows {fmt_b(p['kv_no_window'])}); total {fmt_b(p['total'])}")
    if verbose:
        for c, name, dims, b in sorted(a["detail"], key=lambda d: -d[3])[:40]:
            print(f"    {c:16s} {fmt_b(b):>12s} {dims} {name}")
    return p


# --------------------------------------------------------------------------- bandwidth

def bandwidth(gib=1.0, iters=20):
    import torch
    n = int(gib * (1 << 30))
    x = torch.empty(n, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    y = torch.empty_like(x)
    xf = x.view(torch.float16)
    for _ in range(3):
        y.copy_(x)
        xf.sum(dtype=torch.float32)
    torch.cuda.synchronize()

    def timed(fn):
        ts = []
        for _ in range(iters):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) / 1e3)
        return statistics.median(ts), min(ts)

    tc, tc_min = timed(lambda: y.copy_(x))
    tr, tr_min = timed(lambda: xf.sum(dtype=torch.float32))
    r = dict(gpu=torch.cuda.get_device_name(0), bytes=n, iters=iters,
             copy_rw_gbs=2 * n / tc / 1e9, copy_rw_gbs_best=2 * n / tc_min / 1e9,
             read_gbs=n / tr / 1e9, read_gbs_best=n / tr_min / 1e9, copy_s=tc, read_s=tr)
    del x, y, xf
    torch.cuda.empty_cache()
    return r


# --------------------------------------------------------------------------- run

def graph_flags(graft, env_flag):
    """(on args, off args, note) for CUDA-graph capture, from `graft bench --help`."""
    if env_flag:
        return [], shlex.split(env_flag), f"graph off by {env_flag!r} (given)"
    h = subprocess.run([graft, "bench", "--help"], capture_output=True, text=True).stdout
    for flag, off in (("--no-cuda-graph", ["--no-cuda-graph"]), ("--no-graph", ["--no-graph"])):
        if flag in h:
            return [], off, f"graph off by {flag}"
    m = re.search(r"(--cuda-graph|--graph)[ =]", h)
    if m:
        return [m.group(1), "on"], [m.group(1), "off"], f"graph on/off by {m.group(1)} on|off"
    return [], None, "this graft has no option to turn CUDA-graph capture off (graft bench --help): graph-off row skipped"


def bench_once(graft, export, device, prompt, new, repeat, extra, timeout, log):
    cmd = [graft, "bench", export, "--device", device, "--prompt-tokens", str(prompt), "--new-tokens", str(new),
           "--repeat", str(repeat), "--json"] + extra
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, so, se = 124, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
    wall = time.time() - t0
    line = " ".join(shlex.quote(c) for c in cmd)
    log.write(f"$ {line}\n{so}{se}rc {rc}, {wall:.1f} s\n\n")
    log.flush()
    js = None
    for ln in reversed(so.splitlines()):
        if ln.startswith("{"):
            try:
                js = json.loads(ln)
            except ValueError:
                pass
            break
    print(f"[{time.strftime('%H:%M:%S')}] {line}: rc {rc}, {wall:.1f} s wall"
          + (f"; load {js['load_s']:.2f} s, prefill {js['prefill_tok_s']:.1f} tok/s, decode {js['decode_tok_s']:.2f} tok/s"
             if js else f"\n{(so + se)[-2000:]}"), flush=True)
    return dict(cmd=line, rc=rc, wall=wall, json=js, prompt=prompt, new=new)


def run(args):
    out = args.out or os.environ.get("OUT") or "/tmp/cuda-bench"
    os.makedirs(out, exist_ok=True)
    log = open(os.path.join(out, "bench.log"), "a")
    t_all = time.time()
    repeat = args.repeat or (2 if args.quick else 3)
    dec_new = args.decode_new or (64 if args.quick else 128)

    t0 = time.time()
    a = analyse(args.export)
    print(f"[bytes] graph analysed in {time.time() - t0:.1f} s")

    bw, bw_cmd = [], None
    if args.bandwidth_gbs:
        bw.append(dict(copy_rw_gbs=args.bandwidth_gbs, read_gbs=float("nan"), gpu="given"))
    elif args.device != "cpu":
        bw_cmd = [sys.executable, os.path.abspath(__file__), "bandwidth", "--json", "--gib", str(args.gib)]
        t0 = time.time()
        p = subprocess.run(bw_cmd, capture_output=True, text=True, timeout=120)
        if p.returncode == 0:
            bw.append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(f"[bandwidth] {bw[-1]} ({time.time() - t0:.1f} s)", flush=True)
        else:
            print(f"[bandwidth] failed: {p.stderr[-2000:]}", flush=True)

    on, off, graph_note = graph_flags(args.graft, args.graph_off)
    print(f"[graph] {graph_note}")
    runs = collections.OrderedDict()
    P = args.decode_prompt
    plan = [("decode, graph on" if off is not None else "decode (default)", P, dec_new, on)]
    if off is not None:
        plan.append(("decode, graph off", P, dec_new, off))
    plan += [(f"prefill {n}", n, args.prefill_new, on) for n in args.prefill]
    for label, prompt, new, extra in plan:
        left = args.budget - (time.time() - t_all)
        if left < 20:
            print(f"[skip] {label}: {left:.0f} s left of --budget {args.budget:.0f}", flush=True)
            runs[label] = dict(cmd="(skipped: out of time)", rc=-1, wall=0, json=None, prompt=prompt, new=new)
            continue
        runs[label] = bench_once(args.graft, args.export, args.device, prompt, new, repeat, extra,
                                 int(min(args.timeout, left - 10)), log)

    if bw_cmd and time.time() - t_all < args.budget - 30:
        p = subprocess.run(bw_cmd, capture_output=True, text=True, timeout=120)
        if p.returncode == 0:
            bw.append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(f"[bandwidth, after] {bw[-1]}", flush=True)
    copy_gbs = statistics.mean(b["copy_rw_gbs"] for b in bw) if bw else float("nan")
    read_gbs = statistics.mean(b["read_gbs"] for b in bw) if bw else float("nan")

    print()
    p_dec = print_analysis(a, P, dec_new)
    print()
    rows = []
    for label, r in runs.items():
        js = r["json"]
        if not js:
            rows.append((label, r, None, None))
            continue
        pt = per_token(a, r["prompt"], r["new"])
        rows.append((label, r, js, pt))

    md = []
    if args.command:
        md.append(f"Command (one device call): `{args.command}`")
    if args.commit:
        md.append("graft binary: " + "; ".join(args.commit.strip().splitlines()) + ".")
    md.append(f"Export `{args.export}` on `{args.device}`"
              + (f", {bw[0].get('gpu', '')}" if bw else "") + f"; {graph_note}.")
    if bw:
        each = ", ".join("%.0f" % b["copy_rw_gbs"] for b in bw)
        md.append(f"Copy bandwidth (denominator): {copy_gbs:.0f} GB/s = (bytes read + bytes written) of a "
                  f"{args.gib:g} GiB device-to-device copy / its time, median of 20, mean of {len(bw)} measurements "
                  f"in this run ({each}); pure read (fp16 sum): "
                  f"{read_gbs:.0f} GB/s.")
    md.append(f"Bytes per decoded token from the graph: weights read in full {fmt_b(p_dec['weights'])} + gathered "
              f"rows {fmt_b(p_dec['rows'])} + KV at the decode rows' mean context {p_dec['mean_context']:.1f} "
              f"{fmt_b(p_dec['kv'])} = {fmt_b(p_dec['total'])}.")
    md.append("")
    md.append("| run | prompt | new | context (mean) | prefill tok/s | decode tok/s | ms/token | GB/token | "
              "GB/s | utilisation | load s |")
    md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    summary = {}
    for label, r, js, pt in rows:
        if js is None:
            md.append(f"| {label} | {r['prompt']} | {r['new']} | | failed (rc {r['rc']}) | | | | | | |")
            continue
        ms = 1e3 / js["decode_tok_s"]
        gbs = pt["total"] / 1e9 * js["decode_tok_s"]
        util = gbs / copy_gbs if bw else float("nan")
        summary[label] = dict(prefill_tok_s=js["prefill_tok_s"], decode_tok_s=js["decode_tok_s"], ms_per_token=ms,
                              gb_per_token=pt["total"] / 1e9, achieved_gbs=gbs, utilisation=util, json=js)
        md.append(f"| {label} | {r['prompt']} | {r['new']} | {pt['mean_context']:.1f} | {js['prefill_tok_s']:.1f} | "
                  f"{js['decode_tok_s']:.2f} | {ms:.3f} | {pt['total'] / 1e9:.4f} | {gbs:.0f} | "
                  + (f"{100 * util:.1f}%" if bw else "n/a") + f" | {js['load_s']:.2f} |")
    md.append("")
    md.append("Commands (each run's `graft bench` line; best of --repeat):")
    md.append("")
    for label, r in runs.items():
        md.append(f"- {label}: `{r['cmd']}`")
    if bw_cmd:
        md.append(f"- bandwidth: `{' '.join(shlex.quote(c) for c in bw_cmd)}`")
    md.append("")
    text = "\n".join(md)
    with open(os.path.join(out, "RESULTS.part.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out, "bench.json"), "w") as f:
        json.dump(dict(bandwidth=bw, copy_gbs=copy_gbs, runs=runs, summary=summary,
                       bytes=dict(categories=a["categories"], kv=a["kv"], per_token_decode=p_dec)), f, indent=1)
    print(f"[done] {time.time() - t_all:.1f} s; written {out}/RESULTS.part.md, bench.json, bench.log\n")
    print(text)
    ok = all(r["rc"] == 0 for r in runs.values())
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bytes")
    b.add_argument("export")
    b.add_argument("--prompt", type=int, default=128)
    b.add_argument("--new", type=int, default=128)
    b.add_argument("--json", action="store_true")
    b.add_argument("-v", "--verbose", action="store_true")
    w = sub.add_parser("bandwidth")
    w.add_argument("--gib", type=float, default=1.0)
    w.add_argument("--iters", type=int, default=20)
    w.add_argument("--json", action="store_true")
    r = sub.add_parser("run")
    r.add_argument("--graft", required=True)
    r.add_argument("--export", required=True)
    r.add_argument("--device", default="cuda")
    r.add_argument("--out")
    r.add_argument("--quick", action="store_true", help="repeat 2, 64 decode steps")
    r.add_argument("--repeat", type=int, default=0)
    r.add_argument("--decode-prompt", type=int, default=128)
    r.add_argument("--decode-new", type=int, default=0, help="default 128 (64 with --quick)")
    r.add_argument("--prefill", type=lambda s: [int(x) for x in s.split(",") if x], default=[512, 2048])
    r.add_argument("--prefill-new", type=int, default=16)
    r.add_argument("--gib", type=float, default=1.0)
    r.add_argument("--bandwidth-gbs", type=float, default=0, help="skip torch; use this copy bandwidth")
    r.add_argument("--graph-off", default=os.environ.get("GRAPH_OFF", ""),
                   help="graft bench options that turn CUDA-graph capture off (default: from graft bench --help)")
    r.add_argument("--command", default="", help="the top-level command, for the results text")
    r.add_argument("--commit", default="", help="the graft build's commit, for the results text")
    r.add_argument("--timeout", type=int, default=150, help="per graft bench call, seconds")
    r.add_argument("--budget", type=float, default=540,
                   help="seconds for this whole run: no graft bench starts with < 20 s left")
    a = ap.parse_args()
    if a.cmd == "bytes":
        an = analyse(a.export)
        if a.json:
            print(json.dumps(dict(categories=an["categories"], kv=an["kv"],
                                  per_token=per_token(an, a.prompt, a.new)), indent=1))
        else:
            print_analysis(an, a.prompt, a.new, a.verbose)
        return 0
    if a.cmd == "bandwidth":
        r = bandwidth(a.gib, a.iters)
        print(json.dumps(r) if a.json else
              f"{r['gpu']}: copy {r['copy_rw_gbs']:.0f} GB/s (read+write), read {r['read_gbs']:.0f} GB/s")
        return 0
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
