# graft — top-level build.
#
#   make                 build/graft (CLI) and build/libgraft.a
#   make test            unit tests, examples, ONNX oracle tests (installs deps)
#   make test SANITIZE=1 the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   make demo            the main job on the committed default model
#   make bench           benchmarks (bench/)
#   make install         PREFIX=/usr/local (DESTDIR for staging): bin/graft,
#                        lib/libgraft.a, include/graft*.h, lib/graft/libgraft_cuda.so
#   make clean
#
# Modules add their own sources by living in their folder; extra test and
# bench targets come from mk/*.mk fragments (TEST_TARGETS, BENCH_TARGETS).

SANITIZE ?= 0
CC       ?= cc
NVCC     ?= nvcc
VENV     := .venv
PY       := $(VENV)/bin/python

ifeq ($(SANITIZE),1)
BUILD    := build/san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
OPT      := -O1
else
BUILD    := build
SANFLAGS :=
OPT      := -O2
endif

GEN      := $(BUILD)/gen
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wformat=2 -Wvla -Wno-unused-parameter
CFLAGS   := -std=c11 -D_GNU_SOURCE -g $(OPT) $(WARN) $(SANFLAGS) -Iinclude -I. -I$(GEN) \
            $(EXTRA_CFLAGS)
LDFLAGS  := $(SANFLAGS)
LDLIBS   := -lprotobuf-c -lz -ljansson -lpcre2-8 -lutf8proc -lm -lpthread

# CUDA: compiled when nvcc is on PATH, left out cleanly otherwise. CUDA
# objects (position-independent) go to their own archive,
# $(BUILD)/libgraft_cuda.a, for the kernel tests, and to a shared object,
# $(BUILD)/libgraft_cuda.so, that graft loads with dlopen only when a
# command asks for a device (mk/cuda.mk): no program loads the CUDA
# libraries at start-up, and a CPU run never maps them.
HAVE_NVCC := $(shell command -v $(NVCC) >/dev/null 2>&1 && echo 1)
ifeq ($(HAVE_NVCC),1)
CU_SRCS   := $(wildcard kernels/cuda/*.cu runtime/cuda/*.cu)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC)))
NVCCFLAGS := -O3 -std=c++17 -arch=sm_90 -lineinfo -Xcompiler -Wall,-Werror,-fPIC -Werror all-warnings \
             -Iinclude -I.
CUDA_CFLAGS := -DGRAFT_HAVE_CUDA=1 -I$(CUDA_HOME)/include
CUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -lcudart -lcublasLt -lcublas -lstdc++
else
CU_SRCS   :=
CUDA_CFLAGS :=
CUDA_LDLIBS :=
endif
# nvcc's objects do not depend on SANITIZE (device code and its host stubs
# are compiled without the sanitizers either way) and live in one folder
# for every build, so `make test SANITIZE=1` after `make test` (.ci/run)
# compiles no CUDA again
CU_OBJ    := build/cuda-obj
CUDA_OBJS := $(CU_SRCS:%.cu=$(CU_OBJ)/%.cu.o)
CUDA_LIB  := $(BUILD)/libgraft_cuda.a

LIB_SRCS  := $(wildcard onnx/*.c compose/*.c runtime/*.c kernels/*.c tokenizer/*.c)
CLI_SRCS  := $(wildcard cli/*.c)
EX_SRCS   := $(wildcard examples/*.c)
UT_SRCS   := $(wildcard tests/unit/test_*.c)

PB_C      := $(GEN)/onnx/onnx.pb-c.c
PB_H      := $(GEN)/onnx/onnx.pb-c.h
PB_O      := $(GEN)/onnx/onnx.pb-c.o
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(PB_O)
CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
LIB       := $(BUILD)/libgraft.a
GRAFT     := $(BUILD)/graft
EXAMPLES  := $(EX_SRCS:examples/%.c=$(BUILD)/examples/%)
UNITS     := $(UT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
DEPS_STAMP := $(VENV)/.requirements

TEST_TARGETS  := test-unit test-examples
BENCH_TARGETS :=

.PHONY: all deps test demo bench clean test-unit test-examples
all: $(GRAFT) $(LIB) $(EXAMPLES)

deps: $(DEPS_STAMP)
$(DEPS_STAMP): tools/requirements.txt tools/deps.sh
	./tools/deps.sh
	@touch $@

# protobuf-c sources from the official onnx.proto shipped in the pinned onnx wheel.
$(GEN)/onnx/onnx.proto: $(DEPS_STAMP)
	@mkdir -p $(@D)
	cp "$$($(PY) -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "onnx.proto"))')" $@

$(PB_C) $(PB_H) &: $(GEN)/onnx/onnx.proto
	protoc-c --c_out=$(GEN) -I$(GEN) $<

$(PB_O): $(PB_C) $(PB_H)
	$(CC) -std=c11 -g $(OPT) $(SANFLAGS) -Wall -Werror -I$(GEN) -c $< -o $@

$(BUILD)/obj/%.o: %.c $(PB_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(CU_OBJ)/%.cu.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

# The archive also depends on the list of its members, so that adding or
# removing a source file rebuilds it even when no object is newer.
$(BUILD)/libgraft.members: FORCE
	@mkdir -p $(@D)
	@echo '$(sort $(LIB_OBJS))' | cmp -s - $@ || echo '$(sort $(LIB_OBJS))' > $@

$(LIB): $(LIB_OBJS) $(BUILD)/libgraft.members
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $(LIB_OBJS)

$(CUDA_LIB): $(CUDA_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $(CUDA_OBJS)

.PHONY: FORCE
.SECONDARY:
FORCE:

GRAFT_LIBS = $(LIB)
$(GRAFT): $(CLI_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJS) $(GRAFT_LIBS) $(LDLIBS)

$(BUILD)/examples/%: $(BUILD)/obj/examples/%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# counts allocations during decode steps
$(BUILD)/tests/test_decode_alloc: LDFLAGS += -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS) -lcriterion

# Sanitizer runs: abort on the first report, leaks included.
export ASAN_OPTIONS := detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS := print_stacktrace=1:halt_on_error=1

test-unit: $(UNITS)
	@set -e; for t in $(UNITS); do echo "== $$t"; $$t --jobs 2; done

test-examples: $(EXAMPLES) $(GRAFT)
	@BUILD=$(BUILD) PY=$(PY) ./tests/run_examples.sh

-include mk/*.mk

test: deps all $(TEST_TARGETS)
	@echo "make test: all passed"

bench: deps all $(BENCH_TARGETS)

PREFIX  ?= /usr/local
DESTDIR ?=
.PHONY: install
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include
	install -m 755 $(GRAFT) $(DESTDIR)$(PREFIX)/bin/graft
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libgraft.a
	install -m 644 include/graft.h include/graft_tokenizer.h $(DESTDIR)$(PREFIX)/include/
	if [ -f $(BUILD)/libgraft_cuda.so ]; then install -d $(DESTDIR)$(PREFIX)/lib/graft && \
		install -m 755 $(BUILD)/libgraft_cuda.so $(DESTDIR)$(PREFIX)/lib/graft/libgraft_cuda.so; fi

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj $(CU_OBJ) -name '*.d' 2>/dev/null)
