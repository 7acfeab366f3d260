# make test-cli: the graft CLI against the onnx Python package as oracle.
TEST_TARGETS += test-cli
.PHONY: test-cli
test-cli: deps $(GRAFT)
	GRAFT=$(GRAFT) $(PY) tests/cli/test_inspect.py
