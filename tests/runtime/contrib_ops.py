#!/usr/bin/env python3
"""graft's com.microsoft kernels against ONNX Runtime on random inputs.

Each case is one node in a model built with onnx.helper. ONNX Runtime
(CPU provider) runs it; its outputs become the expected data of a test
directory in the ONNX node-test layout (model.onnx, test_data_set_0/
input_K.pb, output_K.pb), which graft's node_runner then checks at the
case's tolerance. The report gives, per case, the smallest absolute error
bound (of 1e-7, 1e-6, ..., 1e-2; rtol 0) that graft's outputs meet.
Exits 1 on any mismatch.

    contrib_ops.py --runner build/tests/node_runner [--dir DIR] [--only PATTERN] [-v]
"""
from __future__ import annotations

import argparse
import fnmatch
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
NP2ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
           np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64,
           np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.bool_): TensorProto.BOOL}


class Case:
    def __init__(self, name, op, inputs, n_out=1, attrs=None, inits=None, domain=MS, out_names=None,
                 rtol=1e-3, atol=1e-5):
        """inputs: list of (name, array or None for omitted); inits: dict name -> array
        (constants, may also appear in inputs by name); out_names: node outputs ("" to omit)."""
        self.name, self.op, self.inputs, self.attrs = name, op, inputs, attrs or {}
        self.inits = inits or {}
        self.domain = domain
        self.out_names = out_names or [f"out{i}" for i in range(n_out)]
        self.rtol, self.atol = rtol, atol

    def model(self) -> onnx.ModelProto:
        node_in = [nm if arr is not None or nm in self.inits else "" for nm, arr in self.inputs]
        while node_in and node_in[-1] == "":
            node_in.pop()
        node = helper.make_node(self.op, node_in, self.out_names, domain=self.domain, **self.attrs)
        g_in = [helper.make_tensor_value_info(nm, NP2ONNX[arr.dtype], arr.shape)
                for nm, arr in self.inputs if arr is not None and nm not in self.inits]
        g_out = [helper.make_empty_tensor_value_info(o) for o in self.out_names if o]
        inits = [numpy_helper.from_array(a, nm) for nm, a in self.inits.items()]
        g = helper.make_graph([node], self.name, g_in, g_out, initializer=inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)],
                                 ir_version=10)

    def feeds(self):
        return {nm: arr for nm, arr in self.inputs if arr is not None and nm not in self.inits}


def rnd(rng, *shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def rope_caches(max_pos, rd, dtype=np.float32):
    inv = 1.0 / (10000 ** (np.arange(0, rd, 2, dtype=np.float64) / rd))
    f = np.outer(np.arange(max_pos, dtype=np.float64), inv)
    return np.cos(f).astype(dtype), np.sin(f).astype(dtype)


def gqa_case(rng, name, B, S, past, Hq, Hkv, hd, *, window=-1, softcap=0.0, rotary=False, interleaved=False,
             packed=False, seqlens=None, dtype=np.float32, scale=None, smooth=False, sink=False, tol=None,
             buf=0, shared_kv=False):
    """buf: past/present buffer length (shared-buffer layout: past_key is
    max-length, only `past` positions valid)."""
    total = past + S
    q = rnd(rng, B, S, Hq * hd, dtype=dtype)
    k = rnd(rng, B, 0 if shared_kv else S, Hkv * hd, dtype=dtype)
    v = rnd(rng, B, 0 if shared_kv else S, Hkv * hd, dtype=dtype)
    # shared_kv: empty key/value; past is a cache another layer already filled (new tokens included)
    plen = buf or (past + S if shared_kv else past)
    pk = rnd(rng, B, Hkv, plen, hd, dtype=dtype)
    pv = rnd(rng, B, Hkv, plen, hd, dtype=dtype)
    if seqlens is None:
        seqlens = [total - 1] * B
    attrs = {"num_heads": Hq, "kv_num_heads": Hkv}
    if window >= 0:
        attrs["local_window_size"] = window
    if softcap:
        attrs["softcap"] = softcap
    if scale is not None:
        attrs["scale"] = scale
    if smooth:
        attrs["smooth_softmax"] = 1
    inputs = [("query", np.concatenate([q, k, v], axis=2) if packed else q), ("key", None if packed else k),
              ("value", None if packed else v), ("past_key", pk), ("past_value", pv),
              ("seqlens_k", np.array(seqlens, np.int32)), ("total_sequence_length", np.array(total, np.int32))]
    if rotary:
        attrs["do_rotary"] = 1
        attrs["rotary_interleaved"] = int(interleaved)
        c, s = rope_caches(past + S + 8, hd if rotary is True else rotary, dtype)
        inputs += [("cos_cache", c), ("sin_cache", s)]
    if sink:
        inputs += [("cos_cache", None), ("sin_cache", None), ("position_ids", None), ("attention_bias", None),
                   ("head_sink", rnd(rng, Hq, dtype=dtype))] if not rotary else [
            ("position_ids", None), ("attention_bias", None), ("head_sink", rnd(rng, Hq, dtype=dtype))]
    rtol, atol = tol or ((1e-3, 1e-4) if dtype == np.float32 else (5e-3, 5e-3))
    return Case(name, "GroupQueryAttention", inputs, n_out=3, attrs=attrs, rtol=rtol, atol=atol)


def mhnbits_case(rng, name, M_shape, K, N, block, *, zp="none", dtype=np.float32, bias=False, bits=4):
    kb = (K + block - 1) // block
    blob = block * bits // 8
    q = rng.integers(0, 2 ** bits, size=(N, kb, block), dtype=np.uint8)
    if bits == 4:
        packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
    else:
        packed = q
    packed = packed.reshape(N, kb, blob)
    scales = (rng.random((N, kb)) * 0.1 + 0.01).astype(dtype)
    a = rnd(rng, *M_shape, K, dtype=dtype)
    inits = {"B": packed, "scales": scales.reshape(-1) if False else scales}
    inputs = [("A", a), ("B", packed), ("scales", scales)]
    if zp == "packed":
        zq = rng.integers(0, 2 ** bits, size=(N, kb), dtype=np.uint8)
        if bits == 4:
            if kb % 2:
                zq = np.concatenate([zq, np.zeros((N, 1), np.uint8)], axis=1)
            zpk = (zq[:, 0::2] | (zq[:, 1::2] << 4)).astype(np.uint8)
        else:
            zpk = zq
        inits["zero_points"] = zpk
        inputs.append(("zero_points", zpk))
    elif zp == "float":
        zf = rng.integers(0, 2 ** bits, size=(N, kb)).astype(dtype)
        inits["zero_points"] = zf
        inputs.append(("zero_points", zf))
    else:
        inputs.append(("zero_points", None))
    if bias:
        bv = rnd(rng, N, dtype=dtype)
        inputs += [("g_idx", None), ("bias", bv)]
        inits["bias"] = bv
    attrs = {"K": K, "N": N, "block_size": block, "bits": bits}
    rtol, atol = (1e-3, 1e-4) if dtype == np.float32 else (1e-2, 2e-2)
    return Case(name, "MatMulNBits", inputs, attrs=attrs, inits=inits, rtol=rtol, atol=atol)


def cases() -> list[Case]:
    rng = np.random.default_rng(1234)
    cs: list[Case] = []
    # ---- norms
    for shape in [(2, 3, 64), (1, 7, 96), (4, 257)]:
        tag = "x".join(map(str, shape))
        x, g = rnd(rng, *shape), rnd(rng, shape[-1])
        cs.append(Case(f"simplified_ln_{tag}", "SimplifiedLayerNormalization", [("X", x), ("scale", g)],
                       attrs={"epsilon": 1e-6, "axis": -1}, domain=""))
        sk, bias = rnd(rng, *shape), rnd(rng, shape[-1])
        cs.append(Case(f"skip_simplified_ln_{tag}", "SkipSimplifiedLayerNormalization",
                       [("input", x), ("skip", sk), ("gamma", g), ("bias", bias)],
                       out_names=["y", "", "", "sum"], attrs={"epsilon": 1e-6}))
        cs.append(Case(f"skip_simplified_ln_nobias_{tag}", "SkipSimplifiedLayerNormalization",
                       [("input", x), ("skip", sk), ("gamma", g)], out_names=["y", "", "", "sum"]))
        if len(shape) == 3:
            be = rnd(rng, shape[-1])
            cs.append(Case(f"skip_ln_{tag}", "SkipLayerNormalization",
                           [("input", x), ("skip", sk), ("gamma", g), ("beta", be), ("bias", bias)],
                           out_names=["y", "", "", "sum"], attrs={"epsilon": 1e-5}))
            cs.append(Case(f"skip_ln_bcast_skip_{tag}", "SkipLayerNormalization",
                           [("input", x), ("skip", rnd(rng, *shape[1:])), ("gamma", g), ("beta", be)],
                           out_names=["y"], attrs={"epsilon": 1e-5}))
    x16 = rnd(rng, 2, 5, 128, dtype=np.float16)
    cs.append(Case("skip_simplified_ln_fp16", "SkipSimplifiedLayerNormalization",
                   [("input", x16), ("skip", rnd(rng, 2, 5, 128, dtype=np.float16)),
                    ("gamma", rnd(rng, 128, dtype=np.float16))], out_names=["y", "", "", "sum"],
                   rtol=5e-3, atol=5e-3))
    # ---- rotary (com.microsoft)
    for (B, S, H, hd, rd, il, four) in [(2, 5, 4, 64, 0, 0, False), (1, 3, 2, 128, 0, 1, False),
                                        (2, 4, 3, 80, 0, 0, True), (1, 6, 2, 96, 32, 0, False),
                                        (2, 2, 2, 64, 48, 1, False)]:
        x = rnd(rng, B, H, S, hd) if four else rnd(rng, B, S, H * hd)
        c, s = rope_caches(32, rd or hd)
        pos = rng.integers(0, 30, size=(B, S)).astype(np.int64)
        attrs = {"interleaved": il}
        if rd:
            attrs.update(rotary_embedding_dim=rd, num_heads=H)
        cs.append(Case(f"rotary_b{B}s{S}h{H}d{hd}r{rd}i{il}{'_4d' if four else ''}", "RotaryEmbedding",
                       [("input", x), ("position_ids", pos), ("cos_cache", c), ("sin_cache", s)], attrs=attrs))
    x = rnd(rng, 1, 4, 2 * 64)
    c, s = rope_caches(32, 64)
    cs.append(Case("rotary_offset_pos", "RotaryEmbedding",
                   [("input", x), ("position_ids", np.array([7], np.int64)), ("cos_cache", c), ("sin_cache", s)]))
    # ---- GroupQueryAttention
    for hd in (64, 128, 256, 80):
        cs.append(gqa_case(rng, f"gqa_prompt_hd{hd}", 1, 7, 0, 8, 2, hd))
        cs.append(gqa_case(rng, f"gqa_decode_hd{hd}", 2, 1, 9, 4, 4, hd))
    cs.append(gqa_case(rng, "gqa_chunk_past5_mqa", 1, 3, 5, 6, 1, 64))
    cs.append(gqa_case(rng, "gqa_decode_ragged", 3, 1, 12, 4, 2, 64, seqlens=[12, 7, 3]))
    cs.append(gqa_case(rng, "gqa_window_prompt", 1, 12, 0, 4, 2, 64, window=4))
    cs.append(gqa_case(rng, "gqa_window_decode", 2, 1, 15, 4, 2, 128, window=6))
    cs.append(gqa_case(rng, "gqa_softcap", 1, 6, 3, 4, 2, 64, softcap=2.0))
    cs.append(gqa_case(rng, "gqa_scale", 1, 4, 2, 4, 1, 64, scale=0.05))
    cs.append(gqa_case(rng, "gqa_rotary_prompt", 1, 5, 0, 4, 2, 64, rotary=True))
    cs.append(gqa_case(rng, "gqa_rotary_decode_interleaved", 2, 1, 6, 4, 2, 128, rotary=True, interleaved=True))
    cs.append(gqa_case(rng, "gqa_rotary_partial", 1, 3, 4, 4, 2, 80, rotary=32))
    cs.append(gqa_case(rng, "gqa_packed", 1, 4, 3, 4, 2, 64, packed=True))
    cs.append(gqa_case(rng, "gqa_smooth_softmax", 1, 4, 2, 4, 2, 64, smooth=True))
    cs.append(gqa_case(rng, "gqa_head_sink", 1, 4, 2, 4, 2, 64, sink=True))
    cs.append(gqa_case(rng, "gqa_fp16_decode", 1, 1, 8, 8, 2, 64, dtype=np.float16))
    cs.append(gqa_case(rng, "gqa_fp16_prompt", 1, 6, 0, 4, 2, 128, dtype=np.float16))
    cs.append(gqa_case(rng, "gqa_shared_kv_prompt", 1, 5, 0, 4, 2, 64, shared_kv=True, rotary=True, window=3))
    cs.append(gqa_case(rng, "gqa_shared_kv_decode", 2, 1, 7, 4, 2, 64, shared_kv=True, rotary=True))
    cs.append(gqa_case(rng, "gqa_shared_buffer_decode", 2, 1, 5, 4, 2, 64, buf=16))
    cs.append(gqa_case(rng, "gqa_shared_buffer_window", 1, 1, 9, 4, 1, 256, buf=16, window=4))
    # ---- MultiHeadAttention
    for (B, S, L, P, H, hd, opts) in [(2, 5, 5, 0, 4, 64, {}), (1, 1, 1, 7, 4, 64, {"past": 1}),
                                      (2, 3, 6, 0, 2, 80, {"bias": 1}), (1, 4, 4, 3, 2, 128, {"past": 1, "kpm": 1}),
                                      (2, 3, 7, 0, 2, 64, {"cross4d": 1}), (1, 4, 4, 0, 2, 64, {"ab": 1}),
                                      (1, 5, 5, 2, 2, 64, {"past": 1, "uni": 1})]:
        q = rnd(rng, B, S, H * hd)
        if opts.get("cross4d"):
            k, v = rnd(rng, B, H, L, hd), rnd(rng, B, H, L, hd)
        else:
            k, v = rnd(rng, B, L, H * hd), rnd(rng, B, L, H * hd)
        T = L + P
        inputs = [("query", q), ("key", k), ("value", v),
                  ("bias", rnd(rng, 3 * H * hd) if opts.get("bias") else None),
                  ("key_padding_mask", (rng.random((B, T)) > 0.3).astype(np.int32) if opts.get("kpm") else None),
                  ("attention_bias", rnd(rng, 1, H, S, T) if opts.get("ab") else None)]
        outs = ["y"]
        if P:
            inputs += [("past_key", rnd(rng, B, H, P, hd)), ("past_value", rnd(rng, B, H, P, hd))]
            outs = ["y", "present_key", "present_value"]
        attrs = {"num_heads": H}
        if opts.get("uni"):
            attrs["unidirectional"] = 1
        cs.append(Case(f"mha_b{B}s{S}l{L}p{P}h{H}d{hd}_{'_'.join(opts) or 'plain'}", "MultiHeadAttention", inputs,
                       attrs=attrs, out_names=outs, rtol=1e-3, atol=1e-4))
    # ---- MatMulNBits
    cs.append(mhnbits_case(rng, "nbits_m1_k256_n96_b32", (1,), 256, 96, 32))
    cs.append(mhnbits_case(rng, "nbits_m5_k128_n64_b16_zp", (5,), 128, 64, 16, zp="packed"))
    cs.append(mhnbits_case(rng, "nbits_3d_k512_n40_b128_zp", (2, 3), 512, 40, 128, zp="packed", bias=True))
    cs.append(mhnbits_case(rng, "nbits_k80_n33_b32_oddblocks_zp", (3,), 80, 33, 32, zp="packed"))
    cs.append(mhnbits_case(rng, "nbits_k192_n48_b64_zpfloat", (4,), 192, 48, 64, zp="float"))
    cs.append(mhnbits_case(rng, "nbits_fp16_k256_n64_b32", (2,), 256, 64, 32, dtype=np.float16, zp="packed"))
    cs.append(mhnbits_case(rng, "nbits_8bit_k128_n32_b32", (2,), 128, 32, 32, bits=8, zp="packed"))
    # ---- GatherBlockQuantized
    for (R, C, block, zp, sdt, idx_shape) in [(10, 64, 32, False, np.float32, (3,)), (16, 128, 64, True, np.float32, (2, 3)),
                                              (7, 48, 16, True, np.float16, (4,))]:
        qv = rng.integers(0, 16, size=(R, C), dtype=np.uint8)
        data = (qv[:, 0::2] | (qv[:, 1::2] << 4)).astype(np.uint8)
        scales = (rng.random((R, C // block)) * 0.1 + 0.01).astype(sdt)
        inits = {"data": data, "scales": scales}
        inputs = [("data", data), ("indices", rng.integers(0, R, size=idx_shape).astype(np.int64)), ("scales", scales)]
        if zp:
            zq = rng.integers(0, 16, size=(R, C // block), dtype=np.uint8)
            if zq.shape[1] % 2:
                zq = np.concatenate([zq, np.zeros((R, 1), np.uint8)], axis=1)
            zpk = (zq[:, 0::2] | (zq[:, 1::2] << 4)).astype(np.uint8)
            inits["zero_points"] = zpk
            inputs.append(("zero_points", zpk))
        cs.append(Case(f"gbq_r{R}c{C}b{block}{'_zp' if zp else ''}_{np.dtype(sdt).name}", "GatherBlockQuantized",
                       inputs, inits=inits, attrs={"block_size": block, "gather_axis": 0, "quantize_axis": 1, "bits": 4},
                       rtol=1e-3, atol=1e-3 if sdt == np.float16 else 1e-6))
    # ---- GELUs
    x = rnd(rng, 3, 5, 64, scale=2.0)
    b = rnd(rng, 64)
    cs.append(Case("gelu", "Gelu", [("X", x)]))
    cs.append(Case("bias_gelu", "BiasGelu", [("A", x), ("B", b)]))
    cs.append(Case("fast_gelu", "FastGelu", [("X", x)]))
    cs.append(Case("fast_gelu_bias", "FastGelu", [("X", x), ("bias", b)]))
    cs.append(Case("quick_gelu", "QuickGelu", [("X", x)], attrs={"alpha": 1.5}))
    cs.append(Case("gelu_fp16", "Gelu", [("X", x.astype(np.float16))], rtol=5e-3, atol=5e-3))
    return cs


def run_runner(runner: str, dirs: list[str], rtol: float, atol: float) -> dict[str, tuple[str, str]]:
    p = subprocess.run([runner, "--rtol", str(rtol), "--atol", str(atol), *dirs], capture_output=True, text=True,
                       errors="replace")
    res = {}
    for line in p.stdout.splitlines():
        status, _, rest = line.partition(" ")
        name, _, why = rest.partition(": ")
        res[name.rstrip(":")] = (status, why)
    if p.returncode != 0:
        for d in dirs:
            res.setdefault(os.path.basename(d), ("FAIL", f"runner exited {p.returncode}: {p.stderr.strip()[-300:]}"))
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", required=True)
    ap.add_argument("--dir", help="where to write the test directories (default: a temporary one)")
    ap.add_argument("--only", default="*")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    tmp = None
    root = args.dir
    if not root:
        tmp = tempfile.TemporaryDirectory(prefix="graft_contrib_")
        root = tmp.name
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    failures = 0
    written: list[tuple[Case, str, list]] = []
    for c in cases():
        if not fnmatch.fnmatch(c.name, args.only):
            continue
        m = c.model()
        d = os.path.join(root, c.name)
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        try:
            sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
            outs = sess.run(None, c.feeds())
        except Exception as e:  # noqa: BLE001 - report ORT refusals as failures of the case
            print(f"FAIL {c.name}: onnxruntime refused the case: {str(e).splitlines()[0][:300]}")
            failures += 1
            continue
        onnx.save(m, os.path.join(d, "model.onnx"))
        for i, (nm, arr) in enumerate(c.feeds().items()):
            onnx.save_tensor(numpy_helper.from_array(arr, nm), os.path.join(d, "test_data_set_0", f"input_{i}.pb"))
        for i, arr in enumerate(outs):
            onnx.save_tensor(numpy_helper.from_array(np.asarray(arr)),
                             os.path.join(d, "test_data_set_0", f"output_{i}.pb"))
        written.append((c, d, outs))
    # pass/fail at each case's tolerance
    by_tol: dict[tuple[float, float], list[str]] = {}
    for c, d, _ in written:
        by_tol.setdefault((c.rtol, c.atol), []).append(d)
    results: dict[str, tuple[str, str]] = {}
    for (rtol, atol), dirs in by_tol.items():
        results.update(run_runner(args.runner, dirs, rtol, atol))
    # error bounds: smallest atol (rtol 0) met
    levels = [1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2]
    bound: dict[str, float] = {}
    remaining = [d for _, d, _ in written]
    for lv in levels:
        if not remaining:
            break
        r = run_runner(args.runner, remaining, 0.0, lv)
        for d in list(remaining):
            nm = os.path.basename(d)
            if r.get(nm, ("FAIL",))[0] == "PASS":
                bound[nm] = lv
                remaining.remove(d)
    print(f"{'case':46} {'result':6} {'max abs err':>12}  shapes")
    for c, d, outs in written:
        st, why = results.get(c.name, ("FAIL", "no result"))
        shapes = " ".join("x".join(map(str, a.shape)) for _, a in c.inputs if a is not None)
        b = bound.get(c.name)
        print(f"{c.name:46} {st:6} {('<= %.0e' % b) if b else '> 1e-2':>12}  {shapes}")
        if st != "PASS":
            failures += 1
            print(f"    {why}")
    print(f"contrib ops vs onnxruntime {ort.__version__}: {len(written)} cases, {failures} failed")
    if tmp:
        tmp.cleanup()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
