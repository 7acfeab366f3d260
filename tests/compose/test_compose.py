#!/usr/bin/env python3
"""graft compose on every fixture pipeline, checked with references nobody
here wrote: onnxruntime (pipeline vs export), the onnx checker,
onnxruntime-genai, Hugging Face tokenizers. Plus bad input.

    test_compose.py --graft build/graft [--fixtures tests/fixtures] [PIPELINE_DIR...]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(__file__))
from ort_run import Runner  # noqa: E402
from upcast import upcast_file  # noqa: E402

PROMPTS = [[2, 100, 37, 512, 77, 9, 300], [2, 450, 31, 800, 12, 5]]
FAILS: list[str] = []


def check(cond: bool, what: str) -> None:
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def pipelines(root: str) -> list[str]:
    out = []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if os.path.isfile(os.path.join(d, "genai_config.json")):
            out.append(d)
    return out


def graph_names(path: str) -> tuple[set[str], set[str], set[str]]:
    m = onnx.load(path, load_external_data=False)
    return ({n.name for n in m.graph.node if n.name}, {t.name for t in m.graph.initializer},
            {i.name for i in m.graph.input})


def tolerance(export: str) -> tuple[float, bool]:
    m = onnx.load(os.path.join(export, "model.onnx"), load_external_data=False)
    fp16 = any(t.data_type in (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16) for t in m.graph.initializer)
    return (1e-2, True) if fp16 else (1e-5, False)


def close(a: np.ndarray, b: np.ndarray, tol: float, rel: bool) -> float:
    """max |a - b|, relative to max |b| when rel."""
    d = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.size else 0.0
    if rel:
        scale = float(np.abs(b).max()) if b.size else 1.0
        d = d / max(scale, 1e-6)
    return d


def test_pipeline(graft: str, pipe: str, work: str) -> None:
    name = os.path.basename(pipe.rstrip("/"))
    out = os.path.join(work, name + "-export")
    p = run([graft, "compose", pipe, "-o", out])
    check(p.returncode == 0, f"{name}: graft compose exits 0 ({p.stderr.strip()[-300:]})")
    if p.returncode != 0:
        return
    print("\n".join("     " + ln for ln in p.stdout.splitlines()))
    cfg = json.load(open(os.path.join(pipe, "genai_config.json")))
    model = cfg["model"]
    prompts = PROMPTS
    gpath = os.path.join(pipe, "golden.ort.json")
    if os.path.exists(gpath):  # the fixture's own prompts fit its vocabulary
        prompts = [e["prompt_ids"] for e in json.load(open(gpath))["prompts"]][:2]
    else:
        vocab = int(model.get("vocab_size", 512))
        prompts = [[i % vocab for i in p] for p in PROMPTS]

    # 1. onnxruntime: export == pipeline run the way its runtime runs it.
    #    fp16: onnxruntime's CPU provider runs fp16 graphs through casts it
    #    places by looking at neighbouring nodes, so fusing two graphs moves
    #    rounding points. The exact check runs both sides upcast to fp32;
    #    the raw fp16 run must give the same tokens up to the first step
    #    whose pipeline margin is at most tau = 5e-2.
    tol, half = tolerance(out)
    ref, exp = Runner(pipe), Runner(out)
    if half:
        up_p, up_e = os.path.join(work, name + "-up-pipe"), os.path.join(work, name + "-up-export")
        for src, dst in ((pipe, up_p), (out, up_e)):
            os.makedirs(dst, exist_ok=True)
            c = json.load(open(os.path.join(src, "genai_config.json")))
            for sec in ("decoder", "embedding"):
                if sec in c["model"]:
                    f = c["model"][sec]["filename"]
                    upcast_file(os.path.join(src, f), os.path.join(dst, f))
            shutil.copy(os.path.join(src, "genai_config.json"), dst)
        uref, uexp = Runner(up_p), Runner(up_e)
    for prompt in prompts:
        a, b = (uref, uexp) if half else (ref, exp)
        g1, l1, p1 = a.generate(prompt)
        g2, l2, p2 = b.generate(prompt)
        tag = " (both upcast to fp32)" if half else ""
        check(g1 == g2, f"{name}: 16 greedy tokens identical{tag} for prompt {prompt[:4]}... ({g1[:6]} / {g2[:6]})")
        dl = max(close(y, x, 1e-5, False) for x, y in zip(l1, l2))
        dp = max(close(y[k], x[k], 1e-5, False) for x, y in zip(p1, p2) for k in x)
        check(dl <= 1e-5 and dp <= 1e-5, f"{name}: max abs diff{tag} logits {dl:.3g}, present {dp:.3g} <= 1e-5")
        if half:
            g1, l1, _ = ref.generate(prompt)
            g2, l2, _ = exp.generate(prompt)
            upto = 16
            for i, lg in enumerate(l1):
                top = np.sort(lg)[::-1]
                if top[0] - top[1] <= 5e-2:
                    upto = i
                    break
            rel = max([close(y, x, tol, True) for x, y in zip(l1[:upto], l2[:upto])] or [0.0])
            check(g1[:upto] == g2[:upto],
                  f"{name}: fp16 tokens identical up to step {upto} (first pipeline margin <= 5e-2); "
                  f"max rel logit diff before it {rel:.3g} (onnxruntime fp16 CPU casts)")

    # 2. onnx, not graft: every node and initializer comes from the decoder
    #    or the embedding graph (prefixed), none from the vision/audio graphs
    em = onnx.load(os.path.join(out, "model.onnx"), load_external_data=False)
    einits = {t.name for t in em.graph.initializer}
    einputs = [i.name for i in em.graph.input]

    def names(rel: str) -> set[str]:
        g = onnx.load(os.path.join(pipe, rel), load_external_data=False).graph
        return ({n.name for n in g.node} | {o for n in g.node for o in n.output} |
                {t.name for t in g.initializer} | {i.name for i in g.input})

    dec_names = names(model["decoder"]["filename"])
    emb_names = names(model["embedding"]["filename"]) if "embedding" in model else set()
    mm_names: set[str] = set()
    for sec in ("vision", "speech"):
        if sec in model and "filename" in model[sec]:
            mm_names |= names(model[sec]["filename"])
    stray, from_mm = [], []
    for x in [n.name for n in em.graph.node if n.name] + sorted(einits) + einputs:
        pfx, _, rest = x.partition("/")
        if x in dec_names or (pfx.startswith("embedding") and rest in emb_names) or x in emb_names:
            continue
        stray.append(x)
        if x in mm_names or rest in mm_names:
            from_mm.append(x)
    check(not stray, f"{name}: every node, initializer and input comes from the decoder or embedding "
          f"graph ({stray[:3]})")
    if emb_names:  # the embedding's nodes first: a runtime in file order makes its outputs before any layer
        kinds = []
        for n in em.graph.node:
            pfx, _, rest = n.name.partition("/")
            kinds.append("e" if pfx.startswith("embedding") and rest in emb_names else "d")
        last_e = max((i for i, k in enumerate(kinds) if k == "e"), default=-1)
        first_d = min((i for i, k in enumerate(kinds) if k == "d"), default=len(kinds))
        check(last_e < first_d, f"{name}: the embedding graph's {kinds.count('e')} nodes precede the decoder's "
              f"(last at {last_e}, first decoder node at {first_d})")
    check(not from_mm, f"{name}: nothing from the vision or audio graphs ({from_mm[:3]})")
    mm = set()
    if "embedding" in model:
        ids = model["embedding"]["inputs"].get("input_ids", "input_ids")
        mm = set(model["embedding"]["inputs"].values()) - {ids}
    reads = {i for n in em.graph.node for i in n.input}
    bad = {r for r in reads | set(einputs) | einits if any(r == f or r.endswith("/" + f) for f in mm)}
    check(not bad, f"{name}: no input, initializer or node input is a multimodal feature ({sorted(bad)[:3]})")
    want = ["input_ids", "attention_mask"] if "embedding" in model else []
    check(einputs[:len(want)] == want and not any("embeds" in i or "per_layer" in i for i in einputs),
          f"{name}: export inputs {einputs[:4]}...")
    src_ok, src_err = True, ""
    for sec in ("decoder", "embedding"):
        if sec in model:
            try:
                onnx.checker.check_model(os.path.join(pipe, model[sec]["filename"]), full_check=True)
            except Exception as e:  # noqa: BLE001
                src_ok, src_err = False, str(e).splitlines()[0]
    try:
        onnx.checker.check_model(os.path.join(out, "model.onnx"), full_check=True)
        check(True, f"{name}: onnx.checker full_check passes")
    except Exception as e:  # noqa: BLE001
        if src_ok:
            check(False, f"{name}: onnx.checker full_check: {e}")
        else:  # the vendor's own graph fails the same check: nothing compose can answer for
            print(f"skip {name}: onnx.checker full_check fails on the vendor's graph too ({src_err})")
    import onnxruntime as ort
    try:
        ort.InferenceSession(os.path.join(out, "model.onnx"), providers=["CPUExecutionProvider"])
        check(True, f"{name}: onnxruntime {ort.__version__} loads the export")
    except Exception as e:  # noqa: BLE001
        check(False, f"{name}: onnxruntime loads the export: {e}")
    for f in os.listdir(out):
        st = os.lstat(os.path.join(out, f))
        check(not os.path.islink(os.path.join(out, f)) and st.st_nlink == 1, f"{name}: {f} is a real file")

    # 3. onnxruntime-genai generates the pipeline's greedy tokens
    import onnxruntime_genai as og
    cpu = os.path.join(work, name + "-genai-cpu")
    shutil.copytree(out, cpu)
    c = json.load(open(os.path.join(cpu, "genai_config.json")))
    c["model"]["decoder"].setdefault("session_options", {})["provider_options"] = []
    json.dump(c, open(os.path.join(cpu, "genai_config.json"), "w"))
    try:
        gm = og.Model(cpu)
        for prompt in prompts:
            gp = og.GeneratorParams(gm)
            gp.set_search_options(max_length=len(prompt) + 16, do_sample=False)
            gen = og.Generator(gm, gp)
            gen.append_tokens(np.array([prompt], dtype=np.int32))
            toks = []
            while not gen.is_done():
                gen.generate_next_token()
                toks.append(int(gen.get_next_tokens()[0]))
            g1, l1, _ = ref.generate(prompt)
            upto = 16
            if half:
                for i, lg in enumerate(l1):
                    top = np.sort(lg)[::-1]
                    if top[0] - top[1] <= 5e-2:
                        upto = i
                        break
            check(toks[:upto] == g1[:upto], f"{name}: onnxruntime-genai {og.__version__} tokens == pipeline "
                  f"for {upto} steps ({toks[:6]})")
    except Exception as e:  # noqa: BLE001
        check(False, f"{name}: onnxruntime-genai loads and generates: {e}")

    # 4. Hugging Face tokenizers on the patched tokenizer
    tok_path = os.path.join(out, "tokenizer.json")
    if os.path.exists(tok_path):
        from tokenizers import Tokenizer
        tcfg = {}
        if os.path.exists(os.path.join(pipe, "tokenizer_config.json")):
            tcfg = json.load(open(os.path.join(pipe, "tokenizer_config.json")))
        enc = Tokenizer.from_file(tok_path).encode("Hello world").ids
        bos = model.get("bos_token_id")
        # graft's own tokenizer on the patched file gives HF's ids
        p = subprocess.run([graft, "tokenize", out], input="Hello world\n", capture_output=True, text=True)
        check(p.returncode == 0 and json.loads(p.stdout or "null") == enc,
              f"{name}: graft tokenize on the patched tokenizer == HF ({p.stdout.strip()[:40]})")
        if tcfg.get("add_bos_token") is True:
            check(bool(enc) and enc[0] == bos, f"{name}: tokenizer prepends BOS {bos} ({enc[:4]})")
        else:
            same = json.load(open(tok_path)) == json.load(open(os.path.join(pipe, "tokenizer.json")))
            check(same, f"{name}: tokenizer without add_bos_token unchanged")


def expect_refusal(graft: str, pipe: str, out: str, what: str, needle: str, extra: list[str] | None = None) -> None:
    parent = os.path.dirname(out)
    before = set(os.listdir(parent))
    p = run([graft, "compose", pipe, "-o", out, *(extra or [])])
    after = set(os.listdir(parent)) - before
    ok = p.returncode == 2 and needle in p.stderr and not after
    check(ok, f"bad input: {what}: exit {p.returncode}, names '{needle}', nothing left "
              f"({p.stderr.strip()[-200:]}; left {sorted(after)})")


def test_bad_input(graft: str, pipe: str, work: str) -> None:
    cfg = json.load(open(os.path.join(pipe, "genai_config.json")))
    if "embedding" not in cfg["model"]:
        return
    base = os.path.join(work, "bad")

    def fresh() -> str:
        if os.path.exists(base):
            shutil.rmtree(base)
        shutil.copytree(pipe, base)
        return base

    out = os.path.join(work, "badout", "export")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    emb_rel = cfg["model"]["embedding"]["filename"]
    dec_rel = cfg["model"]["decoder"]["filename"]

    d = fresh()
    os.remove(os.path.join(d, emb_rel))
    expect_refusal(graft, d, out, "missing graph file", emb_rel.split("/")[-1])

    d = fresh()
    c = json.load(open(os.path.join(d, "genai_config.json")))
    c["model"]["decoder"]["bogus_key"] = 1
    json.dump(c, open(os.path.join(d, "genai_config.json"), "w"))
    expect_refusal(graft, d, out, "unknown key in genai_config.json", "bogus_key")

    d = fresh()
    open(os.path.join(d, "genai_config.json"), "w").write('{"model": {"type": "x",\n "decoder": }}')
    expect_refusal(graft, d, out, "malformed genai_config.json", "line 2")

    d = fresh()
    m = onnx.load(os.path.join(d, dec_rel), load_external_data=False)
    wired = cfg["model"]["decoder"]["inputs"]["inputs_embeds"]
    for vi in m.graph.input:
        if vi.name == wired:
            vi.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    onnx.save(m, os.path.join(d, dec_rel))
    expect_refusal(graft, d, out, "dtype mismatch embedding output -> decoder input", wired)

    d = fresh()
    m = onnx.load(os.path.join(d, dec_rel), load_external_data=False)
    a, b = m.graph.node[0], m.graph.node[1]
    a.input.append(b.output[0])  # b feeds a, a feeds b (through the chain)
    onnx.save(m, os.path.join(d, dec_rel))
    p = run([graft, "compose", d, "-o", out])
    check(p.returncode == 2 and not os.path.exists(out),
          f"bad input: a cycle or out-of-order graph: exit {p.returncode} ({p.stderr.strip()[-160:]})")

    d = fresh()
    m = onnx.load(os.path.join(d, dec_rel), load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../../../etc/passwd"
                victim = t.name
                break
        else:
            continue
        break
    onnx.save(m, os.path.join(d, dec_rel))
    expect_refusal(graft, d, out, "external data escaping the directory", victim)

    d = fresh()
    m = onnx.load(os.path.join(d, emb_rel), load_external_data=False)
    ids = cfg["model"]["embedding"]["inputs"].get("input_ids", "input_ids")
    dm = onnx.load(os.path.join(d, dec_rel), load_external_data=False)
    dm.graph.input.append(onnx.helper.make_tensor_value_info(ids, onnx.TensorProto.INT64, ["b", "s"]))
    onnx.save(dm, os.path.join(d, dec_rel))
    expect_refusal(graft, d, out, "name clash (decoder already has input_ids)", ids)

    os.makedirs(out, exist_ok=True)
    expect_refusal(graft, pipe, out, "OUT_DIR exists without --force", out)
    p = run([graft, "compose", pipe, "-o", out, "--force"])
    check(p.returncode == 0 and os.path.exists(os.path.join(out, "model.onnx")), "--force replaces OUT_DIR")
    shutil.rmtree(out)

    # SIGKILL mid-copy: no OUT_DIR; the next run removes the stale temporary
    big = fresh()
    # a compose of this pipeline takes a few milliseconds: kill at growing
    # delays until kills have landed while it runs (exit by the signal) after
    # its temporary directory exists. A killed run leaves no OUT_DIR, or, when
    # the kill came after the final rename (the process exiting), the whole
    # export: the same files and sizes as an uninterrupted run.
    ref = os.path.join(work, "badout", "ref")
    t0 = time.perf_counter()
    run([graft, "compose", big, "-o", ref, "--force", "-q"])
    span = time.perf_counter() - t0  # kills spread over one uninterrupted run's time
    def listing(d):
        return sorted((os.path.relpath(os.path.join(r, f), d), os.path.getsize(os.path.join(r, f)))
                      for r, _, fs in os.walk(d) for f in fs)
    want = listing(ref)
    killed, mid, bad, after = 0, 0, 0, 0
    for k in range(60):
        for f in os.listdir(os.path.dirname(out)):  # this run's temporaries only, below
            if ".graft-tmp-" in f:
                shutil.rmtree(os.path.join(os.path.dirname(out), f))
        pr = subprocess.Popen([graft, "compose", big, "-o", out], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        time.sleep(span * (k % 20) / 20)
        pr.send_signal(signal.SIGKILL)
        pr.wait()
        tmp = [f for f in os.listdir(os.path.dirname(out)) if ".graft-tmp-" in f]
        if pr.returncode == -signal.SIGKILL:
            killed += 1
            mid += bool(tmp)
            if os.path.exists(out):
                if listing(out) == want:
                    after += 1
                else:
                    bad += 1
        if os.path.exists(out):
            shutil.rmtree(out)
        if mid and k >= 10:
            break
    shutil.rmtree(ref)
    stale = [f for f in os.listdir(os.path.dirname(out)) if ".graft-tmp-" in f]
    check(killed and mid and not bad, f"SIGKILL mid-run leaves no OUT_DIR ({killed} runs killed, {mid} with a "
          f"temporary directory, {after} after the rename with the whole export, {bad} with a partial "
          f"OUT_DIR; stale temporaries: {len(stale)})")
    p = run([graft, "compose", pipe, "-o", out])
    left = [f for f in os.listdir(os.path.dirname(out)) if ".graft-tmp-" in f]
    check(p.returncode == 0 and not left, f"next run succeeds and removes stale temporaries ({left})")
    shutil.rmtree(out)

    # --sync: every file of the export is fsync'd before the rename (seen by
    # strace, not by graft); the default leaves write-back to the kernel
    if shutil.which("strace"):
        # LeakSanitizer cannot run under ptrace: leak checks are off in the
        # traced runs of a sanitizer build (the untraced runs keep them)
        asan = os.environ.get("ASAN_OPTIONS", "")
        env = dict(os.environ, ASAN_OPTIONS=(asan + ":" if asan else "") + "detect_leaks=0")
        for sync in (True, False):
            p = run(["strace", "-f", "-qq", "-y", "-e", "trace=fsync,fdatasync", graft, "compose", pipe, "-o", out,
                     "--force", "-q"] + (["--sync"] if sync else []), env=env)
            # temporaries are ".NAME.tmp.XXXXXX" until the rename
            synced = {re.sub(r"^\.(.*)\.tmp\.[^.]+$", r"\1", os.path.basename(m.group(1)))
                      for m in re.finditer(r"f(?:data)?sync\(\d+<([^>]*)>", p.stderr)}
            files = sorted(os.listdir(out))
            missed = [f for f in files if f not in synced]
            if sync:
                check(p.returncode == 0 and not missed and os.path.basename(os.path.dirname(os.path.abspath(out)))
                      in synced, f"--sync fsyncs every file and the parent directory (missed {missed})")
            else:
                check(p.returncode == 0 and not synced, f"default compose does not fsync ({sorted(synced)})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graft", required=True)
    ap.add_argument("--fixtures", default="tests/fixtures")
    ap.add_argument("pipelines", nargs="*")
    a = ap.parse_args()
    pipes = a.pipelines or pipelines(a.fixtures)
    if not pipes:
        print("test_compose: no fixture pipelines found: skipped")
        return 0
    with tempfile.TemporaryDirectory() as work:
        for p in pipes:
            test_pipeline(a.graft, p, work)
        test_bad_input(a.graft, pipes[0], work)
    print(f"test_compose: {len(pipes)} pipelines, {len(FAILS)} failures")
    for f in FAILS:
        print("FAILED", f)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
