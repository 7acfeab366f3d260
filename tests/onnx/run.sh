#!/bin/sh
# Runs graft's ONNX oracle tests (make test-onnx). Every test runs even when
# an earlier one fails; the exit status is non-zero if any failed.
#   BUILD  build directory with the binaries (build or build/san)
#   PY     python of the venv with onnx, onnxruntime, numpy
#   NODE_TESTS  where tools/gen_node_tests.py writes the node tests
set -u
BUILD=${BUILD:-build}
PY=${PY:-.venv/bin/python}
NODE_TESTS=${NODE_TESTS:-build/node_tests}
JOBS=${JOBS:-2}

"$PY" tools/gen_node_tests.py "$NODE_TESTS" || exit 1

failed=""
run() {
    name=$1; shift
    echo "== tests/onnx/$name"
    "$PY" "tests/onnx/$name" "$@" || failed="$failed $name"
}
run test_node_roundtrip.py --build "$BUILD" --node-dir "$NODE_TESTS" --jobs "$JOBS"
run test_external_data.py --build "$BUILD"
run test_attacks.py --build "$BUILD"
run test_robustness.py --build "$BUILD" --node-dir "$NODE_TESTS" --jobs "$JOBS"
run test_size_limit.py --build "$BUILD"

if [ -n "$failed" ]; then
    echo "test-onnx: FAILED:$failed"
    exit 1
fi
echo "test-onnx: all passed"
