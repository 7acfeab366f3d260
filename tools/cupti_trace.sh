#!/bin/bash
# Builds tools/cupti_trace.c into DIR/libcupti_trace.so with DIR/libcupti.so.13
# beside it, from the nvidia-cuda-cupti wheel of the toolkit's major version
# (downloaded once into build/cupti-wheel). Prints DIR.
#   tools/cupti_trace.sh [DIR]   (default build/cupti)
set -eu
DIR=${1:-build/cupti}
W=build/cupti-wheel
major=$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
if [ ! -f "$W/nvidia/cu$major/include/cupti.h" ]; then
    mkdir -p "$W"
    python3 -m pip download -q --no-deps "nvidia-cuda-cupti==$major.*" -d "$W" >&2
    (cd "$W" && unzip -qo nvidia_cuda_cupti-*.whl)
fi
C=$W/nvidia/cu$major
CUDA=$(dirname "$(dirname "$(command -v nvcc)")")
mkdir -p "$DIR"
cp "$C/lib/libcupti.so.$major" "$DIR/"
ln -sf "libcupti.so.$major" "$DIR/libcupti.so"
cc -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -o "$DIR/libcupti_trace.so" tools/cupti_trace.c \
    -I"$C/include" -I"$CUDA/include" -L"$DIR" -lcupti -Wl,-rpath,'$ORIGIN'
echo "$DIR"
