#!/usr/bin/env python3
"""docs/SWITCHES.md against the code: every GRAFT_* variable that the C,
CUDA or header sources name as a whole string literal ("GRAFT_X": what
getenv and the helpers around it are passed) has a row in the doc, and
every variable the doc's tables name is still named somewhere. Exits 1
naming each one that is missing on either side."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parents[2]
dirs = ["cli", "compose", "include", "kernels", "onnx", "runtime", "tokenizer"]
read = {}
pat = re.compile(r'"(GRAFT_[A-Z0-9_]+)"')
for d in dirs:
    for p in sorted((root / d).rglob("*")):
        if p.suffix not in (".c", ".h", ".cu", ".cuh"):
            continue
        for m in pat.finditer(p.read_text(errors="replace")):
            read.setdefault(m.group(1), str(p.relative_to(root)))
doc = root / "docs" / "SWITCHES.md"
documented = set()
for line in doc.read_text().splitlines():
    if line.startswith("| `GRAFT_"):
        documented.update(re.findall(r"`(GRAFT_[A-Z0-9_]+)", line.split("|")[1]))
bad = 0
for name in sorted(set(read) - documented):
    print(f"docs/SWITCHES.md: {name} (read in {read[name]}) has no row")
    bad = 1
for name in sorted(documented - set(read)):
    print(f"docs/SWITCHES.md: {name} has a row but no source reads it")
    bad = 1
if not read:
    print("check_switches: no GRAFT_* variable found in the sources (pattern broken?)")
    bad = 1
print(f"check_switches: {len(read)} variables read, {len(documented)} documented" + (", mismatch" if bad else ", all match"))
sys.exit(bad)
