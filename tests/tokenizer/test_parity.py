"""Parity of `graft tokenize` with Hugging Face `tokenizers` (pinned in
tools/requirements.txt): tokenizers trained here plus the fixtures'
tokenizers, every corpus line encoded with and without special tokens, and
decoded with and without skipping special tokens.

usage: test_parity.py GRAFT_BINARY [WORKDIR]
Prints per-tokenizer counts and a closing "N passed, N failed" line.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tokenizers import Tokenizer  # noqa: E402

from build_tokenizers import build_all  # noqa: E402
from corpus import corpus  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run_graft(graft, path, args, lines):
    data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")
    p = subprocess.run([graft, "tokenize", path] + args, input=data, capture_output=True,
                       timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"graft tokenize {path} {args}: exit {p.returncode}: "
                           f"{p.stderr.decode(errors='replace')[:500]}")
    return p.stdout.decode("utf-8").split("\n")[:-1]


def check(graft, name, path, texts, stats):
    hf = Tokenizer.from_file(path)
    jl = [json.dumps(t) for t in texts]
    fails = []
    nids = 0
    for special in (True, False):
        args = ["--json-lines"] + ([] if special else ["--no-special"])
        got = [json.loads(x) for x in run_graft(graft, path, args, jl)]
        want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=special)]
        if len(got) != len(want):
            fails.append(f"{name}: encode special={special}: {len(got)} lines, want {len(want)}")
            continue
        for t, g, w in zip(texts, got, want):
            nids += len(w)
            if g != w:
                fails.append(f"{name}: encode special={special} text={t[:80]!r}\n"
                             f"    graft {g[:30]}\n    hf    {w[:30]}")
        # decode HF's ids both ways
        idl = [json.dumps(w) for w in want]
        for skip in (False, True):
            dargs = ["--decode"] + (["--skip-special"] if skip else [])
            gotd = [json.loads(x) for x in run_graft(graft, path, dargs, idl)]
            wantd = hf.decode_batch(want, skip_special_tokens=skip)
            for t, g, w in zip(texts, gotd, wantd):
                stats["decoded"] += 1
                if g != w:
                    fails.append(f"{name}: decode special={special} skip={skip} "
                                 f"text={t[:60]!r}\n    graft {g[:80]!r}\n    hf    {w[:80]!r}")
    stats["ids"] += nids
    stats["lines"] += 2 * len(texts)
    return fails, nids


def main():
    graft = os.path.abspath(sys.argv[1])
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="graft_tok_")
    texts = corpus()
    toks = build_all(os.path.join(work, "trained"))
    fixtures = sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "*", "tokenizer.json")))
    if not fixtures:
        print("tokenizer parity: no tests/fixtures/*/tokenizer.json yet: fixture tokenizers skipped")
    for f in fixtures:
        toks.append(("fixture:" + os.path.basename(os.path.dirname(f)), f))
    stats = {"ids": 0, "lines": 0, "decoded": 0}
    passed = failed = 0
    all_fails = []
    for name, path in toks:
        try:
            fails, nids = check(graft, name, path, texts, stats)
        except Exception as e:  # a crash or a non-zero exit is a failure
            fails, nids = [f"{name}: {e}"], 0
        status = "ok" if not fails else f"FAIL ({len(fails)} mismatches)"
        print(f"  {name:36s} {nids:8d} ids  {status}")
        if fails:
            failed += 1
            all_fails += fails[:5]
        else:
            passed += 1
    for f in all_fails[:40]:
        print(f)
    print(f"tokenizer parity: {len(toks)} tokenizers x {len(texts)} texts: "
          f"{stats['lines']} encodings, {stats['ids']} ids compared, "
          f"{stats['decoded']} decodes compared")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
