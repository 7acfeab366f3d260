#!/bin/bash
# One device call whose steps depend on the card that came (the device tool's
# nvidia-h200 kind often gives an H100): bench/cuda_all_device.sh run with
# S_H200 on an H200 (the issue's figure and checks: default "kernels epi verify
# profile nsys bench sanitize", the last in what time is left; PROFILE_AB over
# the defaults chosen on H100s), S_H100 on anything else
# (default "kernels verify": the checks). Prints the lines of all.log that
# carry checks, failures, steps and rates; the whole log is $OUT/all.log.
#   device: run tool, carry [".whl", ".devcarry-all", "build/cupti"] (see bench/cuda_all_device.sh's header):
#           bash bench/cuda_by_card.sh
# DEADLINE_S (H200, default 565), DEADLINE_S_H100 (default 300); PROFILE_AB overrides the list below,
# PROFILE_AB_H100 the list on other cards, NSYS_ENV_H100 the traced settings there.
G=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $G"
export PROFILE_OPS=0 VERIFY_SWITCHES="${VERIFY_SWITCHES-GRAFT_CUDA_REPLAY=0 GRAFT_CUDA_SIDE=0 GRAFT_CUDA_ATTN_EXIT=1 GRAFT_CUDA_ROWS_BAL=1 GRAFT_CUDA_ROWS_HI=1 GRAFT_CUDA_ROWS_HI=0}"
case "$G" in
*H200*)
    S="${S_H200:-kernels epi verify profile nsys bench sanitize}"
    # the defaults chosen on H100s since the last H200 run (session 33), the opt-in ROWS_BAL (session 44), and
    # the 6-block GEMVs the H200 gets by default since session 45 (ROWS_HI=0: the 5-block ones), and the
    # opt-in ATTN_EXIT (session 51)
    N=GRAFT_CUDA_NONE=1 B=GRAFT_CUDA_ROWS_BAL=1 H=GRAFT_CUDA_ROWS_HI=0
    export PROFILE_AB="${PROFILE_AB-$N;GRAFT_CUDA_ATTN_EXIT=1;$H;$B;GRAFT_CUDA_SIDE_PRIO=0;GRAFT_CUDA_IPROG_ONE=0;GRAFT_CUDA_ROWS_GM=0;GRAFT_CUDA_ROWS_GMPRE=0;GRAFT_CUDA_FUSE_TAILNORM=0 GRAFT_CUDA_FUSE_INT=0;$N;$H;GRAFT_CUDA_ATTN_EXIT=1;GRAFT_CUDA_ROWS_GRID=0;$B;GRAFT_CUDA_FUSE_PRO=0;GRAFT_CUDA_PDL=0;$H;$N}"
    export DEADLINE_S=${DEADLINE_S:-565} ;;
*)
    S="${S_H100:-kernels verify}"
    [ -n "$PROFILE_AB_H100" ] && export PROFILE_AB="$PROFILE_AB_H100"
    [ -n "$NSYS_ENV_H100" ] && export NSYS_ENV="$NSYS_ENV_H100"
    export DEADLINE_S=${DEADLINE_S_H100:-300} ;;
esac
echo "steps: $S"
mkdir -p "${OUT:=/tmp/cuda-all}"
bash bench/cuda_all_device.sh run $S >"$OUT/all.log" 2>&1
python3 - "$OUT/all.log" <<'PY'
import re, sys
for l in open(sys.argv[1], errors='replace'):
    l = l.rstrip()
    if 'tok/s' in l and len(l) > 300:
        m = re.findall(r'[0-9.]+ tok/s|[0-9.]+ us of graph[^;,]*|[0-9.]+% [^;,]*floor[^;,]*', l)
        print(l[:80], '|', ' ; '.join(m))
    elif re.search(r'checks|rc=|FAIL|===|^\[|GPU|\| |tok/s|summary|passed|failed|side stream', l) or (' ok' in l and 'REPLAY' in l):
        print(l[:260])
PY
