# make test-cli: the graft CLI against the onnx Python package as oracle.
TEST_TARGETS += test-cli
.PHONY: test-cli
test-cli: deps $(GRAFT)
	GRAFT=$(GRAFT) $(PY) tests/cli/test_inspect.py

# make install into a staging directory: the installed graft runs, and
# finds its CUDA backend in ../lib/graft/ where one was built (the error
# for --device cuda then says no device is visible, not that graft has no
# CUDA runtime).
.PHONY: test-install
TEST_TARGETS += test-install
test-install: all
	@rm -rf $(BUILD)/install-test && $(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/$(BUILD)/install-test PREFIX=/usr >/dev/null
	@d=$(BUILD)/install-test/usr; for f in bin/graft lib/libgraft.a include/graft.h include/graft_tokenizer.h; do \
		[ -f $$d/$$f ] || { echo "test-install: $$f not installed"; exit 1; }; done; \
	$$d/bin/graft inspect tests/fixtures/llama-mobius/model.onnx >/dev/null || { echo "test-install: installed graft fails"; exit 1; }; \
	$$d/bin/graft compose tests/fixtures/llama-mobius -o $(BUILD)/install-test/export -q --force || exit 1; \
	msg=$$($$d/bin/graft generate $(BUILD)/install-test/export --ids 1,2 --device cuda 2>&1); \
	if [ -f $(BUILD)/libgraft_cuda.so ]; then \
		[ -f $$d/lib/graft/libgraft_cuda.so ] || { echo "test-install: libgraft_cuda.so not installed"; exit 1; }; \
		case "$$msg" in *"no CUDA runtime"*) echo "test-install: installed graft does not find its CUDA backend: $$msg"; exit 1;; esac; \
	fi; \
	echo "test-install: ok (--device cuda: $$msg)"
