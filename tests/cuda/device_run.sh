#!/bin/sh
# One device-machine call for the kernel lab: build with nvcc alone, run the
# checks and the bandwidth table, then compute-sanitizer memcheck and
# racecheck on the quick set (racecheck reports WAR hazards inside
# cuBLASLt's own nvjet GEMM kernels, NVIDIA's code: the count that matters is
# of reports in other kernels; --kernel-name-exclude on them crashed the
# sanitizer). Logs go to $OUT (or build/cuda/logs).
#   tests/cuda/device_run.sh
out=${OUT:-build/cuda/logs}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
t0=$(date +%s)
bin=$(tests/cuda/build.sh ${BUILD_DIR:-build/cuda} 2>"$out/build.log") || { cat "$out/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
"$bin" >"$out/test_kernels.log" 2>&1
rc=$?
echo "test_kernels rc=$rc ($(( $(date +%s) - t0 )) s)"
if command -v compute-sanitizer >/dev/null; then
    # both tools at once (separate processes on the one GPU), after the timed run
    timeout ${SAN_TIMEOUT:-150} compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 "$bin" --quick >"$out/memcheck.log" 2>&1 &
    mpid=$!
    timeout ${SAN_TIMEOUT:-150} compute-sanitizer --tool racecheck --racecheck-report all --print-limit 0 "$bin" --quick >"$out/racecheck.log" 2>&1 &
    rpid=$!
    wait $mpid; mrc=$?
    wait $rpid; rrc=$?
    echo "memcheck rc=$mrc: $(grep -E 'ERROR SUMMARY|checks,' "$out/memcheck.log" | tr '\n' ' ')"
    echo "racecheck rc=$rrc ($(( $(date +%s) - t0 )) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|checks,' "$out/racecheck.log" | tr '\n' ' ')"
    echo "  hazard reports outside cuBLASLt's nvjet kernels: $(grep -oE '(Read|Write) Thread .* at [A-Za-z_0-9]+' \
        "$out/racecheck.log" | sed 's/.* at //' | grep -vc '^nvjet')"
else
    echo "compute-sanitizer: not found"
fi
grep -E "FAIL|NaN" "$out/test_kernels.log" | head -20
sed -n "/checks,/,\$p" "$out/test_kernels.log"
