# make bench-load: graft's model load against onnx.load on >= 4 GiB of
# external-data weights (model made once by tools/make_big_model.py into
# build/bench/big). Appends a dated section to bench/RESULTS.md.
BIG_MODEL_DIR := build/bench/big

BENCH_TARGETS += bench-load
.PHONY: bench-load
bench-load: deps all
	@test -f $(BIG_MODEL_DIR)/model.onnx || $(PY) tools/make_big_model.py $(BIG_MODEL_DIR) --gb 4
	$(PY) bench/load_bench.py --graft $(GRAFT) --model $(BIG_MODEL_DIR)/model.onnx \
		--python $(PY) --results bench/RESULTS.md
