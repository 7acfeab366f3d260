# make bench-cuda (issue 7): on a machine with an NVIDIA GPU, the E2B-sized
# Gemma 4 decode/prefill benchmark (bench/cuda_e2b_device.sh: regenerate the
# pipeline with the fixtures venv of tools/fixtures/README.md, compose, graft
# bench with CUDA graphs on and off, prefill 512/2048, utilisation against
# the device copy bandwidth). Elsewhere a skip line. The device machine runs
# the same script through the device tool (see the script's header).
BENCH_TARGETS += bench-cuda
.PHONY: bench-cuda
bench-cuda: deps all
	@if ! nvidia-smi -L >/dev/null 2>&1; then echo "bench-cuda: skipped (no NVIDIA GPU visible)"; exit 0; fi; \
	if [ ! -f $(BUILD)/libgraft_cuda.so ]; then echo "bench-cuda: skipped (built without nvcc)"; exit 0; fi; \
	if [ ! -x tools/.venv-fixtures/bin/python ]; then echo "bench-cuda: needs tools/.venv-fixtures (tools/fixtures/README.md)"; exit 1; fi; \
	DEVCARRY=$(BUILD) GEN_PY=tools/.venv-fixtures/bin/python PYTHON=tools/.venv-fixtures/bin/python \
		OUT=$(BUILD)/bench/cuda bash bench/cuda_e2b_device.sh run
