#!/bin/bash
# Where a CUDA decode step's time goes, on the E2B-sized Gemma 4 export, as
# one device call: regenerate the pipeline (tools/fixtures/make_gemma4_e2b.py),
# compose it, then `graft bench --device cuda` with GRAFT_CUDA_PROFILE=1
# (decode steps eager, GPU time of each device node between CUDA events and
# host time of every node; the table by op type and placement and the
# slowest nodes go to stderr) at two contexts, and once with
# GRAFT_CUDA_PROFILE=sync (the stream drained around every node), and with
# GRAFT_CUDA_PROFILE=graph (steps replayed as CUDA graphs, events captured
# around each node: the kernels' own time without the eager launch gaps).
#
#   here:   make BUILD=build/cudart -j2 build/cudart/graft && bash bench/cuda_e2b_device.sh prepare
#   device: run tool, carry [".whl", ".devcarry-e2b"], command: bash bench/cuda_profile_device.sh [PROMPTS]
#           PROMPTS: prompt lengths to profile (default "128 2048")
#   DIMS=small: the same code path at the tiny fixture's size (seconds to
#   generate, not minutes); then also the attention masks' producer chain
#   and greedy ids on cuda against cpu.
set -u
D=${DEVCARRY:-.devcarry-e2b}
export LD_LIBRARY_PATH=$PWD/$D/lib:$PWD/$D:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
G=$D/graft
[ -x "$G" ] || { echo "no $G: run 'bash bench/cuda_e2b_device.sh prepare' here first and carry $D" >&2; exit 1; }
T0=$(date +%s)
DIMS=${DIMS:-e2b}
E=/tmp/e2b; [ "$DIMS" = e2b ] || E=/tmp/e2b-$DIMS
step() { echo "=== [$(($(date +%s) - T0)) s] $*"; }
if [ ! -f $E/export/model.onnx ]; then
    if [ ! -d $E/pipeline ]; then
        step "generate $E/pipeline"
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
        PYTHONPATH=/tmp/site timeout 330 python3 tools/fixtures/make_gemma4_e2b.py "$E" --dims "$DIMS" >/tmp/e2b.log 2>&1 ||
            { tail -30 /tmp/e2b.log; exit 1; }
    fi
    step "compose"
    "$G" compose $E/pipeline -o $E/export -q --force || exit 1
fi
if [ "$DIMS" != e2b ]; then
    step "attention masks"
    python3 - "$E/export/model.onnx" <<'PY'
import sys, onnx
g = onnx.load(sys.argv[1], load_external_data=False).graph
prod = {o: n for n in g.node for o in n.output}
seen = set()
for a in (n for n in g.node if n.op_type == "Attention"):
    name, chain = a.input[3] if len(a.input) > 3 else "", []
    while name in prod and len(chain) < 6:
        n = prod[name]; chain.append(n.op_type); name = n.input[0] if n.op_type != "Where" else ""
    if tuple(chain) not in seen:
        seen.add(tuple(chain)); print(a.name, "mask <-", " <- ".join(chain))
PY
    step "greedy ids: cuda, then cpu"
    for dev in cuda cpu; do "$G" generate "$E/export" --device $dev --ids 2,651,1234,99,7 --max-new-tokens 24 --json; done
fi
step "bench (graphs on, then off), device line"
"$G" bench $E/export --device cuda --prompt-tokens 128 --new-tokens 32 2>&1 | tail -12
"$G" bench $E/export --device cuda --prompt-tokens 128 --new-tokens 32 --no-cuda-graph 2>&1 | tail -4
for p in ${1:-128 2048}; do
    step "profile at prompt $p"
    GRAFT_CUDA_PROFILE=1 "$G" bench $E/export --device cuda --prompt-tokens "$p" --new-tokens 8 --repeat 1 2>&1 | tail -60
done
step "profile at prompt 128, as CUDA graphs (events captured around each node)"
GRAFT_CUDA_PROFILE=graph "$G" bench "$E/export" --device cuda --prompt-tokens 128 --new-tokens 32 --repeat 1 2>&1 | tail -60
step "profile at prompt 128, synchronised"
GRAFT_CUDA_PROFILE=sync "$G" bench "$E/export" --device cuda --prompt-tokens 128 --new-tokens 8 --repeat 1 2>&1 | tail -30
step done
