# make test-onnx: graft's ONNX load/save judged by onnx, onnxruntime and numpy
# (tests/onnx/): every backend node-test model round-trips, external data
# round-trips byte for byte, hostile external-data references are refused
# without opening anything outside the model directory (strace), and
# truncated / deeply nested / bit-flipped models never crash. Runs the
# binaries of $(BUILD), so `make test SANITIZE=1` runs them sanitized.
ONNX_NODE_TESTS := build/node_tests

TEST_TARGETS += test-onnx
.PHONY: test-onnx
test-onnx: deps all
	@BUILD=$(BUILD) PY=$(PY) NODE_TESTS=$(ONNX_NODE_TESTS) ./tests/onnx/run.sh
