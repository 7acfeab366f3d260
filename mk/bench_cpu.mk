# make bench-cpu: CPU prefill/decode tokens/s of graft against onnxruntime's
# CPU provider on the composed fixtures and, when the fixtures venv exists
# (tools/fixtures/README.md), the ~100M-parameter Llama built by
# tools/fixtures/make_llama_bench.py. Same export, prompt and thread count.
BENCH_CPU_DIR := build/bench/cpu
LLAMA100M     := build/bench/llama100m
FIXTURES_PY   := tools/.venv-fixtures/bin/python

BENCH_TARGETS += bench-cpu
.PHONY: bench-cpu
bench-cpu: deps all
	@mkdir -p $(BENCH_CPU_DIR)
	@for f in gemma4-mobius llama-mobius qwen3-mobius llama-builder-fp32 llama-builder-int4; do \
		$(GRAFT) compose tests/fixtures/$$f -o $(BENCH_CPU_DIR)/$$f --force -q || exit 1; done
	@if [ -x $(FIXTURES_PY) ] && [ ! -f $(LLAMA100M)/export/model.onnx ]; then \
		$(FIXTURES_PY) tools/fixtures/make_llama_bench.py $(LLAMA100M) || exit 1; fi
	@if [ -f $(LLAMA100M)/export/model.onnx ]; then \
		$(GRAFT) compose $(LLAMA100M)/export -o $(BENCH_CPU_DIR)/llama100m --force -q || exit 1; \
	else echo "bench-cpu: no fixtures venv ($(FIXTURES_PY)): the ~100M Llama is skipped"; fi
	$(PY) bench/cpu_decode.py --graft $(GRAFT) --threads 2 --results bench/RESULTS.md \
		$$(ls -d $(BENCH_CPU_DIR)/*/)
