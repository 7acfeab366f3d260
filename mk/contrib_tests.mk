# make test-contrib: graft's com.microsoft kernels (GroupQueryAttention,
# MultiHeadAttention, MatMulNBits, GatherBlockQuantized, the skip/simplified
# layer norms, RotaryEmbedding, the GELUs) against onnxruntime on random
# inputs (tests/runtime/contrib_ops.py; node_runner comes from mk/runtime.mk).
TEST_TARGETS += test-contrib
.PHONY: test-contrib
test-contrib: deps $(BUILD)/tests/node_runner
	$(PY) tests/runtime/contrib_ops.py --runner $(BUILD)/tests/node_runner
