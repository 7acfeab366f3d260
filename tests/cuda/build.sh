#!/bin/sh
# Builds tests/cuda/test_kernels with nvcc alone (no make, no protobuf-c):
# for the device machine. Same flags as the Makefile's NVCCFLAGS.
#   tests/cuda/build.sh [OUTDIR]     default build/cuda; prints the binary's path
set -eu
out=${1:-build/cuda}
NVCC=${NVCC:-nvcc}
flags="-O3 -std=c++17 -arch=sm_90 -lineinfo -Xcompiler -Wall,-Werror -Werror all-warnings -Iinclude -I."
mkdir -p "$out/obj"
pids=""
objs="" # only what this run built: an object left from a source since removed stays out
for f in kernels/cuda/*.cu tests/cuda/test_kernels.cu; do
    o="$out/obj/$(echo "$f" | tr / _).o"
    $NVCC $flags -c "$f" -o "$o" &
    pids="$pids $!"
    objs="$objs $o"
done
for p in $pids; do wait "$p"; done
$NVCC -arch=sm_90 -o "$out/test_kernels" $objs -lcublasLt -lcublas
echo "$out/test_kernels"
