#!/bin/bash
# Issue 7's benchmark on the H200 as one device call: regenerate the Gemma 4
# E2B-sized pipeline (fp16, tools/fixtures/make_gemma4_e2b.py), compose it
# with the carried graft, measure the device copy bandwidth (torch), run
# `graft bench --device cuda --json` (decode with CUDA-graph capture on and
# off, prefill at 512 and 2048 tokens) and print the utilisation table
# (bench/cuda_bench.py) last. Logs, RESULTS.part.md and bench.json go to $OUT.
#
#   here:   make BUILD=build/cudart -j2 build/cudart/graft   # nvcc on PATH: also builds libgraft_cuda.so
#           bash bench/cuda_e2b_device.sh prepare               # -> .devcarry-e2b (graft + its non-CUDA .so)
#   device: run tool, carry [".whl", ".devcarry-e2b"], timeout_s 600, command:
#           bash bench/cuda_e2b_device.sh run
#
#   run [--quick] [--pipeline DIR] [--export DIR] [cuda_bench.py run options]
#       --pipeline DIR  compose DIR instead of generating /tmp/e2b/pipeline
#       --export DIR    bench DIR as is (no generation, no compose)
#       --quick         repeat 2, 64 decode steps
#   e.g. a dry run here on the CPU (no torch: the bandwidth is given):
#       PYTHON=.venv/bin/python DEVCARRY=build/e2bb bash bench/cuda_e2b_device.sh run --pipeline tests/fixtures/gemma4-mobius \
#           --device cpu --bandwidth-gbs 4300 --decode-prompt 16 --prefill 64,128
#
# PYTHON (default python3) runs bench/cuda_bench.py (it needs onnx; the bandwidth step torch).
# GEN_PY: a Python that has torch and the fixture tools' packages (no .whl install then).
# DEVCARRY=build: the graft and libgraft_cuda.so of a local build (make bench-cuda on a GPU machine).
# GRAPH_OFF="--no-cuda-graph" (say) names the graft bench option that turns
# capture off when `graft bench --help` does not show one cuda_bench.py knows.
# The whole run stops starting new steps past DEADLINE_S (default 540) seconds.
set -u
D=${DEVCARRY:-.devcarry-e2b}
case "${1:-}" in
prepare)
    B=${BUILD:-build/cudart}
    [ -f "$B/libgraft_cuda.so" ] ||
        { echo "$B/graft has no CUDA (build it where nvcc is on PATH)" >&2; exit 1; }
    rm -rf "$D" && mkdir -p "$D/lib" || exit 1
    cp "$B/graft" "$B/libgraft_cuda.so" "$D/" || exit 1
    # the pipelined decode's test (bench/cuda_all_device.sh verify), when built
    [ -f "$B/tests/cuda/test_pipeline" ] && cp "$B/tests/cuda/test_pipeline" "$D/"
    for l in $(ldd "$B/graft" | awk '/protobuf-c|jansson|pcre2-8|utf8proc/ {print $3}'); do cp -L "$l" "$D/lib/"; done
    git rev-parse --short HEAD > "$D/COMMIT"
    git status --short --untracked-files=no | sed 's/^/dirty: /' >> "$D/COMMIT"
    du -sh "$D"
    exit 0
    ;;
run) shift ;;
*)
    echo "usage: $0 prepare | run [--quick] [--pipeline DIR] [--export DIR] [cuda_bench.py run options]" >&2
    exit 2
    ;;
esac

T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-540}
OUT=${OUT:-/tmp/cuda-e2b}
mkdir -p "$OUT"
CMDLINE="bash bench/cuda_e2b_device.sh run $*"
PIPE=/tmp/e2b/pipeline EXPORT= REST=()
while [ $# -gt 0 ]; do
    case "$1" in
    --pipeline) PIPE=$2; shift 2 ;;
    --export) EXPORT=$2; shift 2 ;;
    *) REST+=("$1"); shift ;;
    esac
done
step() { echo "=== [$(($(date +%s) - T0)) s] $*"; }
export LD_LIBRARY_PATH=$PWD/$D/lib:$PWD/$D:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
G=$D/graft
[ -x "$G" ] || { echo "no $G: run '$0 prepare' here first and carry $D" >&2; exit 1; }
step "graft $(head -1 "$D/COMMIT" 2>/dev/null); $(nproc) cores; $(free -g | awk '/Mem:/ {print $2 " GiB"}')"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv,noheader 2>/dev/null
ldd "$G" | grep -i "not found"

if [ -z "$EXPORT" ]; then
    EXPORT=/tmp/e2b/export
    [ "$PIPE" = /tmp/e2b/pipeline ] || EXPORT=${TMPDIR:-/tmp}/graft-bench-export   # never under $OUT
    if [ ! -d "$PIPE" ]; then
        if [ -n "${GEN_PY:-}" ]; then   # a Python with torch and the fixture tools (make bench-cuda: the fixtures venv)
            :
        else
            step "install the fixture wheels"
            python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
        fi
        step "generate $PIPE (make_gemma4_e2b.py, fp16; about 2-2.5 min)"
        PYTHONPATH=/tmp/site timeout 330 ${GEN_PY:-python3} tools/fixtures/make_gemma4_e2b.py "${PIPE%/pipeline}" >"$OUT/e2b.log" 2>&1 ||
            { tail -30 "$OUT/e2b.log"; exit 1; }
        tail -3 "$OUT/e2b.log"
    fi
    if [ ! -f "$EXPORT/model.onnx" ] || [ "$PIPE" != /tmp/e2b/pipeline ]; then
        step "compose $PIPE -> $EXPORT"
        /usr/bin/time -f "compose: %e s wall, %M KB peak RSS" timeout 180 "$G" compose "$PIPE" -o "$EXPORT" -q --force || exit 1
    fi
    du -sh "$EXPORT"
fi

step "bench (bench/cuda_bench.py run)"
left=$((DEADLINE_S - ($(date +%s) - T0)))
${PYTHON:-python3} bench/cuda_bench.py run --graft "$G" --export "$EXPORT" --out "$OUT" --budget "$left" \
    --command "$CMDLINE" --commit "$(cat "$D/COMMIT" 2>/dev/null)" "${REST[@]}"
rc=$?
step "done (rc $rc)"
exit $rc
