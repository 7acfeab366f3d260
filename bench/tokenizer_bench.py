"""Tokenizer benchmark: graft vs Hugging Face tokenizers, one thread each,
on a generated 262k-vocab byte-level BPE and ~4 MB of multilingual text.

usage: tokenizer_bench.py TOKENIZER_BENCH_BINARY WORKDIR
Prints a table and the ids checksum comparison; exit 1 if ids differ."""
import json
import os
import subprocess
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

from tokenizers import Tokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    binary, work = os.path.abspath(sys.argv[1]), sys.argv[2]
    tj = os.path.join(work, "tokenizer.json")
    txt = os.path.join(work, "text.txt")
    if not (os.path.exists(tj) and os.path.exists(txt)):
        subprocess.run([sys.executable, os.path.join(HERE, "tokenizer_gen.py"), work], check=True)
    runs = [json.loads(subprocess.run([binary, tj, txt], check=True, capture_output=True,
                                      text=True).stdout) for _ in range(3)]
    g = min(runs, key=lambda r: r["encode_s"])
    g_load = min(r["load_s"] for r in runs)

    with open(txt, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    best_load, best_enc, enc = 1e9, 1e9, None
    for _ in range(3):
        t0 = time.perf_counter()
        hf = Tokenizer.from_file(tj)
        t1 = time.perf_counter()
        enc = hf.encode_batch(lines, add_special_tokens=False)
        t2 = time.perf_counter()
        best_load, best_enc = min(best_load, t1 - t0), min(best_enc, t2 - t1)
    s, pos, ntok = 0, 0, 0
    for e in enc:
        for i in e.ids:
            pos += 1
            s = (s + i * pos) % (1 << 64)
        ntok += len(e.ids)
    mb = g["bytes"] / 1e6
    vocab = hf.get_vocab_size()
    print(f"tokenizer bench: vocab {vocab}, text {mb:.2f} MB, {g['lines']} lines, one thread")
    print(f"  {'':8s} {'load s':>8s} {'encode s':>9s} {'MB/s':>8s} {'tokens':>9s}")
    print(f"  {'graft':8s} {g_load:8.3f} {g['encode_s']:9.3f} {mb / g['encode_s']:8.2f} {g['tokens']:9d}")
    print(f"  {'hf':8s} {best_load:8.3f} {best_enc:9.3f} {mb / best_enc:8.2f} {ntok:9d}")
    print(f"  throughput ratio graft/hf: {best_enc / g['encode_s']:.2f}x; "
          f"load ratio hf/graft: {best_load / g_load:.2f}x")
    same = g["tokens"] == ntok and g["checksum"] == s
    print(f"  ids identical (count + checksum): {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
