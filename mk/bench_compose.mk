# make bench-compose: graft compose against cp -r (with and without sync) and
# Python onnx.compose.merge_models on the largest pipeline at hand: the
# E2B-sized Gemma 4 in build/bench/e2b/pipeline when present (made by
# tools/fixtures/make_gemma4_e2b.py, ~11 GB; see bench/RESULTS.md for the run
# on the device machine), else the ~100M Llama export of bench-cpu.
BENCH_TARGETS += bench-compose
.PHONY: bench-compose
bench-compose: deps all
	@p=build/bench/e2b/pipeline; [ -f $$p/genai_config.json ] || p=build/bench/llama100m/export; \
	if [ ! -f $$p/genai_config.json ]; then echo "bench-compose: no pipeline (run make bench-cpu first)"; exit 0; fi; \
	$(PY) bench/compose_bench.py --graft $(GRAFT) --work build/bench/compose --results bench/RESULTS.md $$p
