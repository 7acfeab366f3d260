# make bench-cpu: CPU prefill/decode tokens/s of graft against onnxruntime's
# CPU provider on the composed fixtures and the ~100M-parameter Llama built
# by tools/fixtures/make_llama_bench.py when the fixtures venv exists
# (tools/fixtures/README.md), else by bench/make_llama100m.py (same
# builder-style graph, onnx + numpy), and its fp16 twin (make_llama100m.py
# --dtype f16: fp16 weights, activations and KV). Same export, prompt and
# thread count.
BENCH_CPU_DIR := build/bench/cpu
LLAMA100M     := build/bench/llama100m
LLAMA100M_F16 := build/bench/llama100m-f16
FIXTURES_PY   := tools/.venv-fixtures/bin/python

BENCH_TARGETS += bench-cpu
.PHONY: bench-cpu
bench-cpu: deps all
	@mkdir -p $(BENCH_CPU_DIR)
	@for f in gemma4-mobius llama-mobius qwen3-mobius llama-builder-fp32 llama-builder-int4 mixed-heads; do \
		$(GRAFT) compose tests/fixtures/$$f -o $(BENCH_CPU_DIR)/$$f --force -q || exit 1; done
	@if [ ! -f $(LLAMA100M)/export/model.onnx ]; then \
		if [ -x $(FIXTURES_PY) ]; then $(FIXTURES_PY) tools/fixtures/make_llama_bench.py $(LLAMA100M) || exit 1; \
		else echo "bench-cpu: no fixtures venv: the ~100M Llama from bench/make_llama100m.py (onnx + numpy)"; \
			$(PY) bench/make_llama100m.py $(LLAMA100M) || exit 1; fi; fi
	$(GRAFT) compose $(LLAMA100M)/export -o $(BENCH_CPU_DIR)/llama100m --force -q
	@[ -f $(LLAMA100M_F16)/export/model.onnx ] || $(PY) bench/make_llama100m.py $(LLAMA100M_F16) --dtype f16
	$(GRAFT) compose $(LLAMA100M_F16)/export -o $(BENCH_CPU_DIR)/llama100m-f16 --force -q
	$(PY) bench/cpu_decode.py --graft $(GRAFT) --threads 2 --rounds 3 --results bench/RESULTS.md \
		$$(ls -d $(BENCH_CPU_DIR)/*/)
