#!/usr/bin/env python3
"""graft's CPU runtime on every composed fixture against its ONNX Runtime
golden (graft verify), graft generate --json against the same golden, and
bad input for generate. With --runner: the op-by-op comparison
(tools/intermediates.py, node_runner --report) on an fp32 fixture.

    test_decode.py --graft build/graft [--fixtures tests/fixtures] [--runner build/tests/node_runner]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

FAILS: list[str] = []


def check(cond: bool, what: str) -> None:
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graft", required=True)
    ap.add_argument("--fixtures", default="tests/fixtures")
    ap.add_argument("--runner")
    a = ap.parse_args()
    g = a.graft
    fixtures = sorted(d for d in os.listdir(a.fixtures)
                      if os.path.isfile(os.path.join(a.fixtures, d, "golden.ort.json"))
                      and os.path.isfile(os.path.join(a.fixtures, d, "genai_config.json")))
    if not fixtures:
        print("test_decode: no fixtures with ORT goldens: skipped")
        return 0
    with tempfile.TemporaryDirectory() as work:
        exports = {}
        for f in fixtures:
            src = os.path.join(a.fixtures, f)
            out = os.path.join(work, f)
            p = run([g, "compose", src, "-o", out, "-q"])
            check(p.returncode == 0, f"{f}: compose ({p.stderr.strip()[-200:]})")
            if p.returncode:
                continue
            exports[f] = out
            golden = os.path.join(src, "golden.ort.json")
            p = run([g, "verify", out, "--golden", golden])
            summary = (p.stdout.strip().splitlines() or [""])[-1]
            check(p.returncode == 0, f"{f}: graft verify: {summary[summary.find(': ') + 2:] if summary else p.stderr.strip()[-300:]}")
            gj = json.load(open(golden))
            if gj["model"]["precision"] == "fp32":
                # fp32: every step compared and logits within 1e-4
                check("0 not compared" in summary and "tolerance 0.0001" in summary,
                      f"{f}: fp32: all {gj['steps'] * len(gj['prompts'])} steps compared at 1e-4")
            e = gj["prompts"][0]
            p = run([g, "generate", out, "--ids", ",".join(map(str, e["prompt_ids"])),
                     "--max-new-tokens", str(len(e["generated_ids"])), "--json"])
            try:
                res = json.loads(p.stdout)
                upto = next((i for i, m in enumerate(e["margins"]) if m <= gj["margin_tau"]), len(e["margins"]))
                same = res["generated_ids"][:upto] == e["generated_ids"][:upto]
                check(p.returncode == 0 and same and res["prompt_ids"] == e["prompt_ids"],
                      f"{f}: graft generate --json ids match the golden for {upto} steps")
            except (json.JSONDecodeError, KeyError) as ex:
                check(False, f"{f}: graft generate --json: {ex}: {p.stderr.strip()[-200:]}")
            if e.get("text") is not None and os.path.exists(os.path.join(out, "tokenizer.json")):
                p = run([g, "generate", out, "--prompt", e["text"], "--max-new-tokens", "4", "--json"])
                try:
                    res = json.loads(p.stdout)
                    check(res["prompt_ids"] == e["prompt_ids"],
                          f"{f}: --prompt encodes to the golden's prompt ids ({res['prompt_ids'][:5]})")
                except (json.JSONDecodeError, KeyError) as ex:
                    check(False, f"{f}: graft generate --prompt: {ex}: {p.stderr.strip()[-200:]}")

        # bad input, on the first export
        if exports:
            f, out = next(iter(exports.items()))
            p = run([g, "generate", out, "--ids", ",".join(["5"] * 40), "--max-context", "16", "--json"])
            check(p.returncode == 2 and "longer than the context" in p.stderr,
                  f"prompt longer than the context: exit {p.returncode} ({p.stderr.strip()[-160:]})")
            nt = os.path.join(work, "no-tokenizer")
            shutil.copytree(out, nt)
            os.remove(os.path.join(nt, "tokenizer.json"))
            p = run([g, "generate", nt, "--prompt", "hello"])
            check(p.returncode == 2 and "tokenizer.json" in p.stderr,
                  f"missing tokenizer: exit {p.returncode} ({p.stderr.strip()[-160:]})")
            tr = os.path.join(work, "truncated")
            shutil.copytree(out, tr)
            data = os.path.join(tr, "model.onnx.data")
            os.truncate(data, os.path.getsize(data) // 2)
            p = run([g, "generate", tr, "--ids", "2,3,4"])
            check(p.returncode == 2 and "past the end" in p.stderr,
                  f"truncated weight file: exit {p.returncode}, names the tensor ({p.stderr.strip()[-160:]})")
            co = os.path.join(work, "corrupt")
            shutil.copytree(out, co)
            with open(os.path.join(co, "model.onnx"), "r+b") as fh:
                fh.seek(os.path.getsize(os.path.join(co, "model.onnx")) // 3)
                fh.write(b"\xff" * 64)
            p = run([g, "generate", co, "--ids", "2,3,4"])
            check(p.returncode in (1, 2) and p.returncode >= 0 and "graft generate:" in p.stderr,
                  f"corrupt model file: clean error, exit {p.returncode} ({p.stderr.strip()[-160:]})")
            import onnx
            wd = os.path.join(work, "wrong-dtype")
            shutil.copytree(out, wd)
            m = onnx.load(os.path.join(wd, "model.onnx"), load_external_data=False)
            for i in m.graph.input:
                if i.name == "input_ids":
                    i.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
            onnx.save(m, os.path.join(wd, "model.onnx"))
            p = run([g, "generate", wd, "--ids", "2,3,4"])
            check(p.returncode == 2 and "input_ids" in p.stderr or "float" in p.stderr,
                  f"wrong input dtype: exit {p.returncode} ({p.stderr.strip()[-160:]})")
        # op by op against onnxruntime: every float intermediate of one prefill
        # of an fp32 export, each within 1e-4 of its scale (normwise)
        fp32 = [f for f in exports if json.load(open(os.path.join(a.fixtures, f, "golden.ort.json")))
                ["model"]["precision"] == "fp32"]
        if a.runner and fp32:
            f = "gemma4-mobius" if "gemma4-mobius" in fp32 else fp32[0]
            nt = os.path.join(work, "intermediates")
            tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "intermediates.py")
            p = run([sys.executable, tool, exports[f], nt])
            check(p.returncode == 0, f"{f}: tools/intermediates.py ({p.stderr.strip()[-160:]})")
            p = run([a.runner, "--report", nt])
            rows = [ln.split() for ln in p.stdout.splitlines() if ln.startswith("  ")]
            worst = max(((float(r[3]), r[0]) for r in rows if len(r) == 4), default=(float("inf"), "none"))
            logits = [float(r[3]) for r in rows if len(r) == 4 and r[0] == "logits"]
            check(p.returncode == 0 and len(rows) > 10 and logits and worst[0] < 1e-4,
                  f"{f}: node_runner --report: {len(rows)} outputs, logits at {logits[0] if logits else '?'} of "
                  f"their scale, the worst {worst[1]} at {worst[0]:.3g}")
        # a huge prompt: an error with a message (out of range, or a buffer
        # larger than the machine's memory), never a signal or the OOM killer
        for f in [x for x in ("mixed-heads", next(iter(exports), None)) if x in exports]:
            p = run([g, "bench", exports[f], "--prompt-tokens", "1000000", "--new-tokens", "1", "--repeat", "1"])
            check(p.returncode > 0 and "graft bench:" in p.stderr,
                  f"{f}: 1M-token prompt: exit {p.returncode} ({p.stderr.strip()[-160:]})")
    print(f"test_decode: {len(fixtures)} fixtures, {len(FAILS)} failures")
    for x in FAILS:
        print("FAILED", x)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
