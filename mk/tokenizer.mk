# tokenizer/: parity with Hugging Face tokenizers, fuzzing, benchmark.
#
#   make test-tokenizer     parity on trained tokenizers + fixtures, a short fuzz run
#   make fuzz-tokenizer     a longer fuzz run (FUZZ_SECONDS, default 300), best with SANITIZE=1
#   make bench-tokenizer    encode MB/s and load time vs HF tokenizers (200k+ vocab)

TOK_WORK       := $(BUILD)/tokenizer
TOK_FUZZ       := $(BUILD)/tests/fuzz_tokenizer
TOK_BENCH      := $(BUILD)/bench/tokenizer_bench
TOK_FUZZ_SHORT ?= 20
FUZZ_SECONDS   ?= 300
FUZZ_SEED      ?= 1
# Seeds for the fuzzer: tokenizers the parity test trains, one per family.
TOK_SEEDS = $(addprefix $(TOK_WORK)/trained/,$(addsuffix /tokenizer.json,\
	bytelevel_bpe llama3_style sp_llama_style sp_metaspace_first unigram_byte_fallback \
	wordpiece_bert bpe_prefix_suffix split_regex_merged_with_next_1 norm_bert_norm \
	added_normalized norm_norm_sequence))

TEST_TARGETS  += test-tokenizer
BENCH_TARGETS += bench-tokenizer
.PHONY: test-tokenizer fuzz-tokenizer bench-tokenizer tokenizer-seeds

$(TOK_FUZZ): $(BUILD)/obj/tests/tokenizer/fuzz_tokenizer.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(TOK_BENCH): $(BUILD)/obj/bench/tokenizer_bench.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

test-tokenizer: $(GRAFT) $(TOK_FUZZ) $(DEPS_STAMP)
	TOKENIZERS_PARALLELISM=false $(PY) tests/tokenizer/test_parity.py $(GRAFT) $(TOK_WORK)
	$(TOK_FUZZ) $(TOK_FUZZ_SHORT) $(FUZZ_SEED) $(TOK_SEEDS)

tokenizer-seeds: $(DEPS_STAMP)
	@cd tests/tokenizer && ../../$(PY) build_tokenizers.py ../../$(TOK_WORK)/trained >/dev/null

fuzz-tokenizer: $(TOK_FUZZ) tokenizer-seeds
	$(TOK_FUZZ) $(FUZZ_SECONDS) $(FUZZ_SEED) $(TOK_SEEDS)

bench-tokenizer: $(TOK_BENCH) $(DEPS_STAMP)
	TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 \
	    $(PY) bench/tokenizer_bench.py $(TOK_BENCH) $(BUILD)/tokenizer_bench
