#!/bin/bash
# graft --device cuda against the ORT goldens, as one device call (issue 7).
#
#   here:   make BUILD=build/cudart -j2 build/cudart/graft
#           bench/cuda_verify_device.sh prepare     # binary, its non-CUDA .so files, composed fixtures
#   device: run tool, carry [".devcarry-rt"], command:
#           bash bench/cuda_verify_device.sh run
#
# `run` verifies every composed fixture with --device cuda, with CUDA
# graphs (replayed; captured every step, GRAFT_CUDA_REPLAY=0) and without, re-runs a failing one under GRAFT_CUDA_CHECK=1 (names
# the first device node that differs from its CPU kernel) and without the
# in-place KV / fast attention paths, benches three fixtures on cuda (graphs
# on and off) and cpu, and prints a summary table last. Logs go to $OUT.
set -u
D=.devcarry-rt
FIX="gemma4-mobius gemma4-mobius-f16 gemma4-mobius-cuda-f16 llama-builder-fp32 llama-builder-int4 llama-mobius mixed-heads qwen3-builder-fp32 qwen3-builder-int4 qwen3-mobius"
case "${1:-}" in
prepare)
    B=${BUILD:-build/cudart}
    rm -rf $D && mkdir -p $D/lib $D/x || exit 1
    cp $B/graft $B/libgraft_cuda.so $D/ || exit 1
    for l in $(ldd $B/graft | awk '/protobuf-c|jansson|pcre2-8|utf8proc/ {print $3}'); do cp -L "$l" $D/lib/; done
    for f in $FIX; do $B/graft compose tests/fixtures/$f -o $D/x/$f --force -q || exit 1; done
    du -sh $D
    ;;
run)
    export LD_LIBRARY_PATH=$PWD/$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    G=$D/graft
    OUT=${OUT:-/tmp/out}
    mkdir -p "$OUT"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    ldd $G | grep -i "not found"
    SUM=""
    # each fixture with CUDA graphs (default) and without (--no-cuda-graph);
    # a failure is re-run with GRAFT_CUDA_CHECK=1 (first device node that
    # differs from its CPU kernel) and with the KV ping-pong / general
    # attention kernels to tell the in-place path from the rest
    for f in ${FIXTURES:-$FIX}; do
        gold=tests/fixtures/$f/golden.ort.json
        for mode in graph capture nograph; do
            flag=""; [ $mode = nograph ] && flag=--no-cuda-graph
            rp=1; [ $mode = capture ] && rp=0
            GRAFT_CUDA_REPLAY=$rp timeout 120 $G verify $D/x/$f --golden $gold --device cuda $flag > "$OUT/$f.$mode.log" 2>&1
            rc=$?
            [ $mode = graph ] && head -1 "$OUT/$f.$mode.log"
            line=$(tail -1 "$OUT/$f.$mode.log")
            dev=$(grep "^device: " "$OUT/$f.$mode.log" | sed 's/.*140 GiB; //')
            SUM="$SUM\n$f $mode rc=$rc: ${line##*: device} [$dev]"
            if [ $rc != 0 ] && [ $mode = graph ]; then
                echo "--- $f $mode failed (rc $rc):"
                tail -3 "$OUT/$f.$mode.log"
                echo "    GRAFT_CUDA_CHECK=1:"
                GRAFT_CUDA_CHECK=1 timeout 120 $G verify $D/x/$f --golden $gold --device cuda -q $flag 2>&1 | tail -2
                echo "    GRAFT_KV_PINGPONG=1:"
                GRAFT_KV_PINGPONG=1 timeout 120 $G verify $D/x/$f --golden $gold --device cuda -q --no-cuda-graph 2>&1 | tail -1
                echo "    GRAFT_CUDA_GENERAL_ATTN=1:"
                GRAFT_CUDA_GENERAL_ATTN=1 timeout 120 $G verify $D/x/$f --golden $gold --device cuda -q --no-cuda-graph 2>&1 | tail -1
            fi
        done
    done
    echo "=== gemma4-mobius drift: first device node over 1e-5 / 1e-6 relative (GRAFT_CUDA_CHECK_TOL)"
    for tol in 1e-5 1e-6; do
        GRAFT_CUDA_CHECK=1 GRAFT_CUDA_CHECK_TOL=$tol timeout 60 $G verify $D/x/gemma4-mobius \
            --golden tests/fixtures/gemma4-mobius/golden.ort.json --device cuda -q 2>&1 | tail -1
    done
    echo "(GRAFT_CUDA_NO_GEMV=1: one-row MatMuls on cuBLAS)"
    GRAFT_CUDA_NO_GEMV=1 timeout 60 $G verify $D/x/gemma4-mobius --golden tests/fixtures/gemma4-mobius/golden.ort.json \
        --device cuda -q 2>&1 | tail -1
    echo "=== bench (tiny fixtures: launch-bound, not a bandwidth figure)"
    for f in ${BENCH_FIXTURES:-gemma4-mobius llama-builder-int4 qwen3-builder-fp32}; do
        for dv in "cuda" "cuda --no-cuda-graph" "cpu"; do
            timeout 60 $G bench $D/x/$f --device $dv --prompt-tokens 64 --new-tokens 32 --repeat 2 2>&1 | tail -3
        done
        echo "(GRAFT_CUDA_REPLAY=0: every graph step captured and applied by cudaGraphExecUpdate)"
        GRAFT_CUDA_REPLAY=0 timeout 60 $G bench $D/x/$f --device cuda --prompt-tokens 64 --new-tokens 32 --repeat 2 2>&1 | head -1
    done
    echo "=== summary"
    printf "$SUM\n"
    ;;
*)
    echo "usage: $0 prepare|run" >&2
    exit 2
    ;;
esac
