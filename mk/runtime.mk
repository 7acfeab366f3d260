# Runtime tests: the CPU kernels against the ONNX backend node tests of the
# pinned onnx release (written to disk by tools/gen_node_tests.py).
NODE_RUNNER := $(BUILD)/tests/node_runner
NODE_TESTS  := build/node_tests

$(NODE_RUNNER): $(BUILD)/obj/tests/bin/node_runner.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(NODE_TESTS)/.stamp: tools/gen_node_tests.py $(DEPS_STAMP)
	$(PY) tools/gen_node_tests.py $(NODE_TESTS)

TEST_TARGETS += test-kernels
.PHONY: test-kernels
test-kernels: $(NODE_RUNNER) $(NODE_TESTS)/.stamp
	$(PY) tests/runtime/node_tests.py --runner $(NODE_RUNNER) --tests $(NODE_TESTS) \
		--exclusions tests/runtime/node_test_exclusions.txt
