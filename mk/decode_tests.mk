# make test-decode: graft's CPU runtime on every composed fixture against its
# ONNX Runtime golden (graft verify, graft generate), bad input, and one fp32
# export compared with onnxruntime op by op (node_runner --report).
TEST_TARGETS += test-decode
.PHONY: test-decode
test-decode: deps $(GRAFT) $(BUILD)/tests/node_runner
	$(PY) tests/runtime/test_decode.py --graft $(GRAFT) --fixtures tests/fixtures --runner $(BUILD)/tests/node_runner
