#!/bin/sh
# The compose benchmark on the H200 device machine, in one call: regenerate
# the Gemma 4 E2B-sized Mobius pipeline (tools/fixtures/make_gemma4_e2b.py),
# then bench/compose_bench.py against cp -r and the Python merge.
# Expects the fixtures' wheels in .whl/ and a graft binary with its shared
# libraries in .devcarry/ (see tools/fixtures/README.md); writes logs to $OUT.
set -eu
out=${OUT:-/tmp/compose-bench}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site LD_LIBRARY_PATH=$PWD/.devcarry PYTHONUNBUFFERED=1
nproc; free -g | head -2; df -h /tmp | tail -1
[ -d /tmp/e2b/pipeline ] || python3 tools/fixtures/make_gemma4_e2b.py /tmp/e2b >"$out/e2b.log" 2>&1 || { tail -30 "$out/e2b.log"; exit 1; }
tail -3 "$out/e2b.log" 2>/dev/null || true
python3 bench/compose_bench.py --graft .devcarry/graft --work /tmp/cbw --merge-timeout 60 --repeat 3 \
    --results "$out/RESULTS.part.md" /tmp/e2b/pipeline
