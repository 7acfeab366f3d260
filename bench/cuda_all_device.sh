#!/bin/bash
# All of issue 7's GPU work as one device call (machines go back 30 s after a
# call, so each call pays a start): the E2B-sized pipeline is generated on the
# CPU in the background while the GPU runs the kernel tests and the fixtures'
# `verify --device cuda`; then the E2B profile and benchmark; compute-sanitizer
# last, in what time is left. Every step has its own log under $OUT.
#
#   here:   make BUILD=build/cudart -j2 build/cudart/graft && bash bench/cuda_all_device.sh prepare
#           (graft, libgraft_cuda.so, their non-CUDA .so files and test_kernels, xz'd
#           into .devcarry-all: 5 MB instead of 45, the call's tree stays under 64 MiB)
#           .whl: the fixture tools' pure-Python wheels the device lacks, and the tokenizers that
#           transformers 5.14.1 accepts (the device's 0.23.2 is refused on import):
#           pip download --no-deps -d .whl mobius-onnx==0.1.0 onnx-shape-inference==0.4.0 onnx-ir==1.1.0 \
#             onnxscript==0.7.2 transformers==5.14.1 && pip download --no-deps --only-binary=:all: \
#             --platform manylinux2014_x86_64 --python-version 3.12 -d .whl tokenizers==0.22.2
#   device: run tool, carry [".whl", ".devcarry-all"] (and "build/cupti" from tools/cupti_trace.sh for the
#           kernel trace where the machine has no nsys), timeout_s 600:
#           bash bench/cuda_all_device.sh run [STEPS]
#   STEPS (default "kernels skeleton verify profile nsys bench sanitize"): any of them, in that order;
#   also "epi" (after kernels): the kernel lab's fused-GEMV tables under each of EPI_SWITCHES; also "attn"
#   (after epi): the attention lab (test_kernels --attn: a layer's attention after its q/k/v GEMV at 160
#   keys, its norms in launches of their own against made by the kernel, and what asking L2 for 32 MB costs
#   it) under each of ATTN_SWITCHES; also "icache" (after attn):
#   test_kernels --icache, what a launch pays for code the SM has not run lately; also "labncu" (after
#   icache): Nsight Compute on the kernel lab (test_kernels ${LABNCU_ARGS:---epi}), the kernels LABNCU_KERNELS
#   names (a regex on mangled names; LABNCU_SKIP, LABNCU_COUNT; LABNCU_ENV, default GRAFT_CUDA_ROWS_V8=2: the
#   lab's settings), with no E2B pipeline to wait for;
#   also "probes" (before skeleton): bench/cuda_chain_probe.cu and cuda_merge_probe.cu, packed by prepare;
#   also "ncu" (after profile): Nsight Compute's launch, warp-state and instruction sections for the
#   kernels NCU_KERNELS names (a regex on mangled names) in E2B decode, and every kernel's SASS size
#   (NCU_EXTRA: more ncu arguments for both, e.g. "--metrics regex:..." for each stall reason's share);
#   and "abpack": with AB_PACK=DIR (another prepare's .devcarry-all, moved aside and carried too), or
#   with the ab/ that `AB_FROM=DIR ... prepare` put in this pack (graft and libgraft_cuda.so only: two
#   packs and .whl overflow the carry), E2B decode and the kernel lab's fused-GEMV table (test_kernels
#   --epi, where that build has one) of that build against this one, alternately (only runs within one
#   call compare: machines differ by 10-20%); that build's E2B decode on the export its own graft
#   composes (AB_SAME_EXPORT=1: on this build's export).
# DEADLINE_S (default 570): no step starts that cannot finish before it. NSYS_ENV="A=1 B=2": the
# settings of the nsys step's traced runs.
# E2B_DIMS=small: the E2B pipeline at the tiny fixture's size (seconds to generate: the kernel
# sequence of a step, not its timings).
set -u
if [ "${1:-}" = prepare ]; then
    # graft, libgraft_cuda.so, their non-CUDA .so files and COMMIT as the E2B script packs them, plus test_kernels
    make BUILD=${BUILD:-build/cudart} -j2 ${BUILD:-build/cudart}/tests/cuda/test_pipeline >/dev/null || exit 1
    DEVCARRY=build/pack bash bench/cuda_e2b_device.sh prepare >/dev/null || exit 1
    ck=$(tests/cuda/build.sh build/ck) || exit 1
    cp "$ck" build/pack/ || exit 1
    # the device probes of bench/ (cuda_*_probe.cu), for the "probes" step
    make BUILD=${BUILD:-build/cudart} ${BUILD:-build/cudart}/bench/chain_probe ${BUILD:-build/cudart}/bench/merge_probe \
        >/dev/null && cp ${BUILD:-build/cudart}/bench/chain_probe ${BUILD:-build/cudart}/bench/merge_probe build/pack/ || exit 1
    # AB_FROM=DIR (a `cuda_e2b_device.sh prepare` of the build to compare against): its graft and
    # libgraft_cuda.so as ab/ in this pack, where xz's large dictionary stores only what differs
    if [ -n "${AB_FROM:-}" ]; then
        mkdir -p build/pack/ab && cp "$AB_FROM/graft" "$AB_FROM/libgraft_cuda.so" "$AB_FROM/COMMIT" build/pack/ab/ &&
            ln -sfn ../lib build/pack/ab/lib || exit 1
    fi
    rm -rf .devcarry-all && mkdir -p .devcarry-all || exit 1
    # -9e: the large dictionary finds the kernels that test_kernels and libgraft_cuda.so both hold
    XZ_OPT=-9e tar cJf .devcarry-all/pack.tar.xz -C build/pack . && du -sh .devcarry-all
    exit
fi
[ "${1:-}" = run ] || { echo "usage: $0 prepare | run [STEPS]" >&2; exit 2; }
shift
# unpack where the other device scripts look: .devcarry-rt (verify) and
# .devcarry-e2b (profile, bench); the fixtures are composed here
rm -rf .devcarry-rt .devcarry-e2b && mkdir -p .devcarry-rt/x && tar xJf .devcarry-all/pack.tar.xz -C .devcarry-rt || exit 1
ln -s .devcarry-rt .devcarry-e2b
for f in tests/fixtures/*/; do
    f=$(basename "$f")
    [ -f tests/fixtures/$f/golden.ort.json ] || continue
    LD_LIBRARY_PATH=.devcarry-rt/lib .devcarry-rt/graft compose tests/fixtures/$f -o .devcarry-rt/x/$f --force -q || echo "compose $f failed"
done
TK=.devcarry-rt/test_kernels
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-570}
RES=${OUT:-/tmp/cuda-all}   # what comes back: logs.tgz, profile.log, RESULTS.part.md
OUT=/tmp/cuda-all-logs
mkdir -p "$OUT" "$RES"
STEPS=" ${*:-kernels skeleton verify profile nsys bench sanitize} "
left() { echo $((DEADLINE_S - ($(date +%s) - T0))); }
# the logs so far into what comes back, at each step: a call cut off by the
# device tool's limit still returns them
step() {
    tar czf "$RES/logs.tgz" -C "$OUT" . 2>/dev/null
    echo "=== [$(($(date +%s) - T0)) s] $*"
}
has() { case "$STEPS" in *" $1 "*) return 0 ;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
cat .devcarry-rt/COMMIT

GEN=
if has profile || has nsys || has bench || has abpack; then
    step "E2B pipeline generation in the background"
    (python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
        PYTHONPATH=/tmp/site timeout 330 python3 tools/fixtures/make_gemma4_e2b.py /tmp/e2b --dims ${E2B_DIMS:-e2b} >"$OUT/e2b.log" 2>&1) &
    GEN=$!
fi
if has kernels; then
    # KERNELS_FULL=0: only the --quick runs under KERNELS_SWITCHES (a call short of device time)
    if [ "${KERNELS_FULL:-1}" != 0 ]; then
        step "test_kernels"
        timeout 120 $TK >"$OUT/test_kernels.log" 2>&1
        echo "test_kernels rc=$?"
        grep -E "FAIL|NaN" "$OUT/test_kernels.log" | head -20
        grep -E "checks,|^\| gemv.*\| fp16 \|.*%" "$OUT/test_kernels.log" | head -40
    fi
    # KERNELS_SWITCHES="A B ...": the suite again (--quick) under each setting (A=1,B=2: two variables);
    # by default without programmatic dependent launch
    for v in ${KERNELS_SWITCHES:-GRAFT_CUDA_PDL=0}; do
        env ${v//,/ } timeout 90 $TK --quick >"$OUT/test_kernels.$v.log" 2>&1
        echo "test_kernels --quick $v rc=$?: $(grep -E "checks," "$OUT/test_kernels.$v.log" | tail -1)"
        grep -E "FAIL|NaN" "$OUT/test_kernels.$v.log" | head -10
    done
fi
if has epi; then
    # EPI_SWITCHES="A B ...": the kernel lab's fused-GEMV tables under each setting, alternately
    for v in ${EPI_SWITCHES:-GRAFT_CUDA_NONE=1}; do
        step "test_kernels --epi with $v"
        env ${v//,/ } timeout 60 $TK --epi 2>&1 | tee "$OUT/epi.$v.log" | grep -E "^\|"
    done
fi
if has attn; then
    for v in ${ATTN_SWITCHES:-GRAFT_CUDA_NONE=1 GRAFT_CUDA_PDL=0}; do
        step "test_kernels --attn with $v"
        env ${v//,/ } timeout 60 $TK --attn 2>&1 | tee "$OUT/attn.$v.log" | grep -E "^\|"
    done
fi
if has icache; then
    step "test_kernels --icache: what cold code costs a launch"
    timeout 60 $TK --icache 2>&1 | tee "$OUT/icache.log" | grep -E "^\|"
fi
if has labncu && [ "$(left)" -gt 60 ]; then
    # a lab kernel's stalls without the E2B pipeline. The default: the compact chain prologue's plain GEMV
    # (PRO 4, EPI 0: E2B's q/k/v), which the --epi rows "+ the chain before the norm" and "plain, then the chain
    # prologue" run in that form only under GRAFT_CUDA_ROWS_V8=2 (gcuda_gemv_rows_chain_pro; else the general
    # chain, PRO 3: session 29's first labncu matched no kernel)
    step "ncu on test_kernels ${LABNCU_ARGS:---epi}: ${LABNCU_KERNELS:=gemv_rows_kernelI6__halfLi[0-9]+ELi4ELb1ELi0ELi4ELb0E}"
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
    if [ -n "$NCU" ]; then
        env ${LABNCU_ENV-GRAFT_CUDA_ROWS_V8=2} timeout $(($(left) - 30)) "$NCU" --clock-control none \
            --kernel-name-base mangled --kernel-name "regex:$LABNCU_KERNELS" --launch-skip ${LABNCU_SKIP:-2} \
            --launch-count ${LABNCU_COUNT:-6} --section LaunchStats --section WarpStateStats --section SpeedOfLight --section Occupancy \
            --section InstructionStats ${NCU_EXTRA:-} $TK ${LABNCU_ARGS:---epi} >"$OUT/labncu.log" 2>&1
        echo "labncu rc=$?"
        cp "$OUT/labncu.log" "$RES/"
        grep -E "^  [a-z_]+.*\(|Duration|Stall|Executed Instructions|Registers Per|Grid Size|Block Size|Achieved Occupancy" \
            "$OUT/labncu.log" | head -80
    else
        echo "no ncu on this machine"
    fi
fi
if has probes; then
    # bench/cuda_chain_probe.cu and cuda_merge_probe.cu: a launch boundary against a grid barrier, and the
    # attention's merge kernel against the o GEMV merging in its prologue (tables; each checked against fp64)
    for pr in chain_probe merge_probe; do
        [ -x .devcarry-rt/$pr ] || { echo "$pr: not in this pack"; continue; }
        step "$pr"
        timeout 90 .devcarry-rt/$pr 2>&1 | grep -v "outputs unlike" | tee "$OUT/$pr.log" | grep -E "^\||probe:|SMs"
    done
fi
if has skeleton; then
    step "the E2B step's GEMVs chained in a CUDA graph (test_kernels --skeleton)"
    timeout 150 $TK --skeleton 2>&1 | tee "$OUT/skeleton.log" | grep -E "^\||skeleton|copy"
fi
if has verify; then
    step "verify --device cuda, every fixture"
    OUT=/tmp/cuda-verify timeout 240 bash bench/cuda_verify_device.sh run >"$OUT/verify.log" 2>&1
    echo "verify rc=$?"
    sed -n '/=== summary/,$p' "$OUT/verify.log" | cut -c1-190
    if [ -x .devcarry-rt/test_pipeline ]; then
        echo "--- the pipelined decode against the step-by-step one (tests/cuda/test_pipeline.c):"
        for x in .devcarry-rt/x/*/; do
            env LD_LIBRARY_PATH=$PWD/.devcarry-rt/lib timeout 60 .devcarry-rt/test_pipeline "$x" >>"$OUT/pipeline.log" 2>&1
            echo "rc=$? $(tail -1 "$OUT/pipeline.log" | cut -c1-220)"
        done
    fi
    echo "--- the side stream's plan (runtime/cuda/side.c) on the Gemma fixtures:"
    for f in gemma4-mobius gemma4-mobius-f16 gemma4-mobius-cuda-f16; do
        echo "$f: $(env LD_LIBRARY_PATH=$PWD/.devcarry-rt/lib timeout 60 .devcarry-rt/graft bench .devcarry-rt/x/$f --device cuda \
            --prompt-tokens 8 --new-tokens 8 2>&1 | grep -oE '(a|no) side stream[^;]*|CUDA graphs: [^;]*, [0-9]+ captures abandoned' |
            tr '\n' ' ')"
    done
    echo "--- each default turned off (and each opt-in on), against the goldens:"
    # VERIFY_SWITCHES="A B ...": these settings instead (A=1,B=2: two variables)
    for v in ${VERIFY_SWITCHES:-GRAFT_CUDA_ROWS=0 GRAFT_CUDA_FUSE_TAIL=0 GRAFT_CUDA_FUSE_PRO=0 GRAFT_CUDA_PDL=gemv \
        GRAFT_CUDA_FUSE_NORM=0 GRAFT_CUDA_FUSE_ROPE=0 GRAFT_CUDA_FUSE_SKIP=0 GRAFT_CUDA_FUSE_APPEND=0 GRAFT_CUDA_FUSE_ROPE2=0 \
        GRAFT_CUDA_SLICE_VIEW=0 GRAFT_CUDA_FUSE_CPRO=0 GRAFT_CUDA_FUSE_CPRO=1 GRAFT_CUDA_ROWS_GRID=0 GRAFT_CUDA_L2EF=0 GRAFT_CUDA_SIDE=0}; do
        for f in gemma4-mobius gemma4-mobius-f16 qwen3-mobius llama-builder-int4; do
            echo "$v $f: $(env LD_LIBRARY_PATH=$PWD/.devcarry-rt/lib ${v//,/ } timeout 60 .devcarry-rt/graft verify \
                .devcarry-rt/x/$f --golden tests/fixtures/$f/golden.ort.json --device cuda -q 2>&1 | tail -1 | cut -c1-200)" |
                tee -a "$OUT/experiments.log"
        done
    done
    grep -A3 "failed (rc" "$OUT/verify.log" | head -30
fi
if [ -n "$GEN" ]; then
    step "wait for the E2B pipeline"
    wait $GEN || { echo "generation failed"; tail -20 "$OUT/e2b.log"; }
    tail -2 "$OUT/e2b.log"
    # the profile step composes it too; the others need it without that step
    [ -f /tmp/e2b/export/model.onnx ] || LD_LIBRARY_PATH=$PWD/.devcarry-rt/lib .devcarry-rt/graft compose \
        /tmp/e2b/pipeline -o /tmp/e2b/export -q --force || echo "compose of the E2B pipeline failed"
fi
# PROFILE_OPS=0: without the op table (bench/cuda_profile_device.sh), only the A/B below
if has profile && [ "${PROFILE_OPS:-1}" != 0 ] && [ "$(left)" -gt 120 ]; then
    step "profile (bench/cuda_profile_device.sh ${PROFILE_PROMPTS:-128 2048})"
    timeout $(($(left) - 60)) bash bench/cuda_profile_device.sh ${PROFILE_PROMPTS:-128 2048} >"$OUT/profile.log" 2>&1
    echo "profile rc=$?"
    grep -E "^=== |tok/s|^device:" "$OUT/profile.log" | cut -c1-400 | head -30
    echo "--- the step inside the CUDA graph (GRAFT_CUDA_PROFILE=graph), by op:"
    sed -n '/as CUDA graphs (events captured/,/slowest nodes/p' "$OUT/profile.log" | head -24
fi
if has profile && [ -f /tmp/e2b/export/model.onnx ] && [ "$(left)" -gt 100 ]; then
    step "E2B decode: weights as they are ([K, N]), without fusion, without PDL, PDL on every decode kernel, L2 prefetch of the next weights, without graphs"
    AB=("GRAFT_CUDA_ROWS=0" "GRAFT_CUDA_FUSE_TAIL=0" "GRAFT_CUDA_FUSE_PRO=0" "GRAFT_CUDA_FUSE=0" "GRAFT_CUDA_PDL=0" "GRAFT_CUDA_PDL=gemv"
        "GRAFT_CUDA_FUSE_NORM=0" "GRAFT_CUDA_FUSE_ROPE=0" "GRAFT_CUDA_FUSE_SKIP=0" "GRAFT_CUDA_FUSE_APPEND=0" "GRAFT_CUDA_FUSE_ROPE2=0"
        "GRAFT_CUDA_SLICE_VIEW=0" "GRAFT_CUDA_FUSE_CPRO=0" "GRAFT_CUDA_FUSE_CPRO=1" "GRAFT_CUDA_ROWS_GRID=0" "GRAFT_CUDA_L2EF=0"
        "GRAFT_CUDA_SIDE=0"
        "GRAFT_CUDA_FUSE=1 --no-cuda-graph")
    # PROFILE_AB="A;B;...": these settings instead (each "VAR=value [bench options]")
    [ -n "${PROFILE_AB:-}" ] && IFS=';' read -r -a AB <<<"$PROFILE_AB"
    for v in "${AB[@]}"; do
        # the words VAR=value are the environment, the others bench options
        envs=$(tr ' ' '\n' <<<"$v" | grep -E '^[A-Z_0-9]+=' | tr '\n' ' ')
        opts=$(tr ' ' '\n' <<<"$v" | grep -vE '^[A-Z_0-9]+=' | tr '\n' ' ')
        echo "[$v]"
        env LD_LIBRARY_PATH=$PWD/.devcarry-rt/lib $envs .devcarry-rt/graft bench /tmp/e2b/export --device cuda \
            --prompt-tokens 128 --new-tokens 64 $opts 2>&1 | grep -E "tok/s|^device:" |
            sed 's/ elementwise nodes fused into / into /; s/MatMul weights .* stored \[N, K\]/weights [N, K]/' | cut -c1-1400
    done
fi
if has profile && [ -f /tmp/e2b/export/model.onnx ] && [ "$(left)" -gt 100 ]; then
    step "E2B prefill 2048: weights stored [N, K] (cuBLASLt reading B transposed) against [K, N]"
    for v in "GRAFT_CUDA_ROWS=1" "GRAFT_CUDA_ROWS=0"; do
        echo "$v: $(env LD_LIBRARY_PATH=$PWD/.devcarry-rt/lib $v .devcarry-rt/graft bench /tmp/e2b/export --device cuda \
            --prompt-tokens 2048 --new-tokens 4 --repeat 2 2>&1 | grep -E "tok/s" | cut -c1-200)"
    done
fi
if has ncu && [ -f /tmp/e2b/export/model.onnx ] && [ "$(left)" -gt 90 ]; then
    # why a small kernel takes microseconds: its warps' stall reasons (an
    # instruction-fetch stall says its code is cold) and the SASS it runs
    step "ncu: ${NCU_KERNELS:=go_fuse_norm_kernel|gemv_rows_kernelI6__halfLi[0-9]+ELi[0-9]+ELb1ELi2ELi0E}"
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
    if [ -n "$NCU" ]; then
        env LD_LIBRARY_PATH=$PWD/.devcarry-rt/lib timeout $(($(left) - 60)) "$NCU" --clock-control none \
            --kernel-name-base mangled --kernel-name "regex:$NCU_KERNELS" --launch-skip ${NCU_SKIP:-137} \
            --launch-count ${NCU_COUNT:-10} --section LaunchStats --section WarpStateStats --section SpeedOfLight \
            --section InstructionStats --section MemoryWorkloadAnalysis ${NCU_EXTRA:-} \
            .devcarry-rt/graft bench /tmp/e2b/export --device cuda --prompt-tokens 128 --new-tokens 8 --no-cuda-graph \
            >"$OUT/ncu.log" 2>&1
        echo "ncu rc=$?"
        cp "$OUT/ncu.log" "$RES/"
        grep -E "^  [a-z_]+.*\(|Duration|Stall|Executed Instructions|Registers Per|Grid Size|Block Size|No Instruction" \
            "$OUT/ncu.log" | head -80
    else
        echo "no ncu on this machine"
    fi
    CUOBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
    [ -n "$CUOBJDUMP" ] && "$CUOBJDUMP" -sass .devcarry-rt/lib/libgraft_cuda.so 2>/dev/null |
        awk '/Function :/{f=$3} /^ +\/\*[0-9a-f]+\*\//{n[f]++} END{for(k in n) print n[k], k}' | sort -rn |
        c++filt >"$RES/sass_sizes.txt" && head -5 "$RES/sass_sizes.txt" | cut -c1-200
fi
if has abpack && { [ -n "${AB_PACK:-}" ] || [ -d .devcarry-rt/ab ]; } && [ -f /tmp/e2b/export/model.onnx ] && [ "$(left)" -gt 60 ]; then
    B=/tmp/abpack
    if [ -d .devcarry-rt/ab ]; then B=$PWD/.devcarry-rt/ab
    else rm -rf $B && mkdir -p $B && tar xJf "$AB_PACK/pack.tar.xz" -C $B; fi
    step "A/B: $(head -1 $B/COMMIT) (before) against $(head -1 .devcarry-rt/COMMIT) (after)"
    # the before build runs the export its own graft composes (AB_SAME_EXPORT=1: the after build's)
    EXB=/tmp/e2b/export
    if [ -z "${AB_SAME_EXPORT:-}" ] && [ -d /tmp/e2b/pipeline ] && LD_LIBRARY_PATH=$B/lib timeout 180 $B/graft compose \
        /tmp/e2b/pipeline -o /tmp/e2b/export-ab -q --force; then EXB=/tmp/e2b/export-ab; fi
    echo "before: $EXB; after: /tmp/e2b/export"
    for i in 1 2 3; do
        for p in $B $PWD/.devcarry-rt; do
            [ "$(left)" -gt 30 ] || break 2
            echo "$([ $p = $B ] && echo before || echo after): $(env LD_LIBRARY_PATH=$p/lib $p/graft bench $([ $p = $B ] && echo $EXB || echo /tmp/e2b/export) \
                --device cuda --prompt-tokens 128 --new-tokens 64 2>&1 | grep -oE 'decode 64 tokens: [0-9.]+ tok/s|a replayed step: .*' |
                tr '\n' ' ')"
        done
    done | tee "$RES/abpack.txt"
    for p in $B $PWD/.devcarry-rt; do
        [ "$(left)" -gt 40 ] && [ -x $B/test_kernels ] || break
        echo "--- $([ $p = $B ] && echo before || echo after): test_kernels --epi"
        timeout 60 $p/test_kernels --epi 2>&1 | grep -E "^\|" | tee -a "$RES/abpack.txt"
    done
fi
if has nsys && [ -f /tmp/e2b/export/model.onnx ] && [ "$(left)" -gt 90 ]; then
    # where a replayed step's GPU time goes, kernel by kernel, without the
    # event nodes GRAFT_CUDA_PROFILE=graph adds: Nsight Systems when the
    # machine has it, else the CUPTI tracer of tools/cupti_trace.sh (carry build/cupti)
    NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
    BENCH=(.devcarry-rt/graft bench /tmp/e2b/export --device cuda --prompt-tokens 128 --new-tokens 64)
    # NSYS_ENV="A=1 B=2": the traced runs' settings (default: the defaults)
    read -r -a NENV <<<"${NSYS_ENV:-GRAFT_CUDA_NONE=1}"
    if [ -n "$NSYS" ]; then
        step "nsys: kernels of 64 decode steps"
        env LD_LIBRARY_PATH=$PWD/.devcarry-rt/lib "${NENV[@]}" timeout 120 "$NSYS" profile -o /tmp/e2b-nsys --force-overwrite true \
            --trace cuda --cuda-graph-trace node "${BENCH[@]}" >"$OUT/nsys.log" 2>&1
        timeout 120 "$NSYS" stats --report cuda_gpu_trace --format csv /tmp/e2b-nsys.nsys-rep >"$OUT/trace.csv" 2>/dev/null
    elif [ -f build/cupti/libcupti_trace.so ]; then
        step "CUPTI trace: kernels of 64 decode steps"
        # env after timeout: only graft gets the tracer (timeout's own exit would write an empty trace)
        timeout 120 env LD_LIBRARY_PATH=$PWD/.devcarry-rt/lib "${NENV[@]}" CUPTI_TRACE_OUT=/tmp/trace-raw.csv \
            LD_PRELOAD=$PWD/build/cupti/libcupti_trace.so "${BENCH[@]}" >"$OUT/cupti.log" 2>&1
        tail -3 "$OUT/cupti.log"
        if command -v c++filt >/dev/null; then c++filt </tmp/trace-raw.csv >"$OUT/trace.csv"; else cp /tmp/trace-raw.csv "$OUT/trace.csv"; fi
        # without programmatic launches a kernel's duration is its own (not its wait for the one before)
        if [ "$(left)" -gt 100 ]; then
            timeout 120 env LD_LIBRARY_PATH=$PWD/.devcarry-rt/lib "${NENV[@]}" CUPTI_TRACE_OUT=/tmp/trace-raw0.csv GRAFT_CUDA_PDL=0 \
                LD_PRELOAD=$PWD/build/cupti/libcupti_trace.so "${BENCH[@]}" >"$OUT/cupti0.log" 2>&1
            if command -v c++filt >/dev/null; then c++filt </tmp/trace-raw0.csv >"$OUT/trace0.csv"; else cp /tmp/trace-raw0.csv "$OUT/trace0.csv"; fi
            echo "--- the same with GRAFT_CUDA_PDL=0 (each kernel's own duration):"
            python3 bench/nsys_step.py "$OUT/trace0.csv" "$RES/step_seq0.txt" 2>&1 | tee "$RES/nsys_step0.txt" | head -40
        fi
    else
        step "no kernel trace: no nsys on this machine and no build/cupti carried"
    fi
    if [ -s "$OUT/trace.csv" ]; then
        echo "--- a replayed decode step, kernel by kernel (bench/nsys_step.py):"
        python3 bench/nsys_step.py "$OUT/trace.csv" "$RES/step_seq.txt" 2>&1 | tee "$RES/nsys_step.txt"
        gzip -c "$OUT/trace.csv" >"$RES/trace.csv.gz"
    fi
fi
if has bench && [ "$(left)" -gt 90 ]; then
    step "E2B benchmark"
    OUT=$OUT/b DEADLINE_S=$(($(left) - 20)) bash bench/cuda_e2b_device.sh run --export /tmp/e2b/export ${BENCH_ARGS:---quick} >"$OUT/bench.log" 2>&1
    echo "bench rc=$?"
    grep -E "^\| |^\[" "$OUT/bench.log" | tail -20
fi
if has sanitize && [ "$(left)" -gt 40 ]; then
    t=$(($(left) - 15))
    step "compute-sanitizer memcheck + racecheck (${t} s)"
    timeout $t compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 $TK --quick >"$OUT/memcheck.log" 2>&1 &
    m=$!
    TK_PROGRESS=1 timeout $t compute-sanitizer --tool racecheck --racecheck-report all --print-limit 0 $TK --quick \
        >"$OUT/racecheck.log" 2>&1 &
    r=$!
    wait $m; echo "memcheck rc=$?: $(grep -E 'ERROR SUMMARY|checks,' "$OUT/memcheck.log" | tr '\n' ' ')"
    wait $r; rrc=$?
    # every kernel instrumented; the hazards it reports inside cuBLASLt's own
    # nvjet GEMM kernels (NVIDIA's code) are listed, not counted against ours
    echo "racecheck rc=$rrc: $(grep -E 'RACECHECK SUMMARY|checks,' "$OUT/racecheck.log" | tr '\n' ' ')"
    echo "  hazards by kernel: $(grep -oE '(Read|Write) Thread .* at [A-Za-z_0-9]+' "$OUT/racecheck.log" | sed 's/.* at //' |
        sort | uniq -c | tr '\n' ' ')"
    ours=$(grep -oE '(Read|Write) Thread .* at [A-Za-z_0-9]+' "$OUT/racecheck.log" | sed 's/.* at //' | grep -vc '^nvjet')
    echo "  racecheck: $ours hazard reports in graft's kernels; last check: $(grep '^checked' "$OUT/racecheck.log" | tail -1)"
fi
cp "$OUT/profile.log" "$OUT/b/RESULTS.part.md" "$RES/" 2>/dev/null
tar czf "$RES/logs.tgz" -C "$OUT" . /tmp/cuda-verify 2>/dev/null
step "done"
