# make test-decode: graft's CPU runtime on every composed fixture against its
# ONNX Runtime golden (graft verify, graft generate), and bad input.
TEST_TARGETS += test-decode
.PHONY: test-decode
test-decode: deps $(GRAFT)
	$(PY) tests/runtime/test_decode.py --graft $(GRAFT) --fixtures tests/fixtures
