# make bench: bench/matmul_bench (k_sgemm checked against a naive reference,
# then GFLOP/s for decode- and prefill-shaped products).
MATMUL_BENCH := $(BUILD)/bench/matmul_bench

$(MATMUL_BENCH): $(BUILD)/obj/bench/matmul_bench.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

BENCH_TARGETS += bench-matmul
.PHONY: bench-matmul
bench-matmul: $(MATMUL_BENCH)
	$(MATMUL_BENCH)
