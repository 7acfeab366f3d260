# make test-compose: graft compose on every fixture pipeline, checked with
# onnxruntime, the onnx checker, onnxruntime-genai and HF tokenizers.
TEST_TARGETS += test-compose
.PHONY: test-compose
test-compose: deps $(GRAFT)
	$(PY) tests/compose/test_compose.py --graft $(GRAFT) --fixtures tests/fixtures
