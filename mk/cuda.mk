# CUDA kernel lab (kernels/cuda, issue 7): the kernels build into
# $(CUDA_LIB) when nvcc is on PATH; tests/cuda/test_kernels checks each one
# against a CPU reference and times the bandwidth-bound ones. The test
# program needs only the CUDA toolkit and kernels/cuda (not libgraft.a), so
# tests/cuda/build.sh can build it where protobuf-c is missing.
#
#   make test-cuda        the checks (and the bandwidth table); prints a
#                         skip line and passes when there is no GPU or no nvcc
.PHONY: test-cuda
TEST_TARGETS += test-cuda

ifneq ($(strip $(CU_SRCS)),)
CUDA_TEST := $(BUILD)/tests/cuda/test_kernels

all: $(CUDA_LIB) $(CUDA_TEST)

$(CUDA_TEST): $(CU_OBJ)/tests/cuda/test_kernels.cu.o $(CUDA_LIB)
	@mkdir -p $(@D)
	$(NVCC) -arch=sm_90 -o $@ $< $(CUDA_LIB) -lcublasLt -lcublas

test-cuda: $(CUDA_TEST)
	$(CUDA_TEST)

# The device probes of bench/ (bench/cuda_*_probe.cu: the copy engine's
# rate; a kernel boundary against a grid barrier; the attention's merge kernel
# against the o GEMV merging in its prologue), built here so that every
# build compiles them; run on a GPU machine (their headers say how).
CUDA_PROBES := $(BUILD)/bench/bulk_probe $(BUILD)/bench/chain_probe $(BUILD)/bench/merge_probe
all: $(CUDA_PROBES)
$(BUILD)/bench/%_probe: bench/cuda_%_probe.cu bench/cuda_probe.cuh kernels/cuda/gcuda_common.cuh
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -o $@ $<
else
test-cuda:
	@echo "test-cuda: skipped (no nvcc)"
endif

# The CUDA executor (runtime/cuda/*.c, issue 7): C compiled against the CUDA
# headers, with the kernels, into $(CUDA_SO), linked against cudart and
# cuBLAS. graft does not link it: runtime/backend_load.c dlopens it (beside
# the graft binary, or $GRAFT_CUDA_LIB) the first time `--device cuda|auto`
# is asked for, and looks up rt_backend_cuda there; its references to
# libgraft resolve against graft itself, which is linked whole and exports
# its symbols (--export-dynamic). So `graft inspect`, `compose` and CPU
# decoding never open a CUDA library. Not under SANITIZE=1, where the CPU
# paths are what is checked.
CUDA_SO := $(BUILD)/libgraft_cuda.so
ifneq ($(strip $(CU_SRCS)),)
CUDA_RT_SRCS := $(wildcard runtime/cuda/*.c)
CUDA_RT_OBJS := $(CUDA_RT_SRCS:%.c=$(BUILD)/obj/%.o)
CUDA_OBJS += $(CUDA_RT_OBJS)
$(CUDA_RT_OBJS): CFLAGS += $(CUDA_CFLAGS) -fPIC
$(CUDA_LIB): $(CUDA_RT_OBJS)

# tests/cuda/test_pf_plan: the executor's L2 prefetch plan (pfplan.c), host
# code checked without a GPU (under SANITIZE=1 too).
PF_TEST := $(BUILD)/tests/cuda/test_pf_plan
$(BUILD)/obj/tests/cuda/test_pf_plan.o: CFLAGS += $(CUDA_CFLAGS)
$(PF_TEST): $(BUILD)/obj/tests/cuda/test_pf_plan.o $(BUILD)/obj/runtime/cuda/pfplan.o
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ -lcriterion
TEST_TARGETS += test-pf-plan
.PHONY: test-pf-plan
test-pf-plan: $(PF_TEST)
	$(PF_TEST) --jobs 2

# tests/cuda/test_side_plan: the side stream's plan (side.c) on random steps,
# host code checked without a GPU (under SANITIZE=1 too).
SIDE_TEST := $(BUILD)/tests/cuda/test_side_plan
$(BUILD)/obj/tests/cuda/test_side_plan.o: CFLAGS += $(CUDA_CFLAGS)
$(SIDE_TEST): $(BUILD)/obj/tests/cuda/test_side_plan.o $(BUILD)/obj/runtime/cuda/side.o
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ -lcriterion
TEST_TARGETS += test-side-plan
.PHONY: test-side-plan
test-side-plan: $(SIDE_TEST)
	$(SIDE_TEST) --jobs 2

ifneq ($(SANITIZE),1)
all: $(CUDA_SO)
$(CUDA_SO): $(CUDA_OBJS)
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libgraft_cuda.so -o $@ $(CUDA_OBJS) $(CUDA_LDLIBS)
$(GRAFT): $(CUDA_SO)
$(GRAFT): GRAFT_LIBS = -Wl,--export-dynamic -Wl,--whole-archive $(LIB) -Wl,--no-whole-archive

# tests/cuda/test_pipeline: the pipelined greedy decode against the step-by-
# step one on each fixture with goldens, composed here; a skip line where no
# GPU is visible. Linked as graft is (libgraft_cuda.so resolves against it).
PIPE_TEST := $(BUILD)/tests/cuda/test_pipeline
all: $(PIPE_TEST)
$(PIPE_TEST): $(BUILD)/obj/tests/cuda/test_pipeline.o $(LIB) $(CUDA_SO)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< -Wl,--export-dynamic -Wl,--whole-archive $(LIB) -Wl,--no-whole-archive $(LDLIBS)
TEST_TARGETS += test-cuda-pipeline
.PHONY: test-cuda-pipeline
test-cuda-pipeline: $(PIPE_TEST) $(GRAFT)
	@set -e; mkdir -p $(BUILD)/pipe; for f in tests/fixtures/*/golden.ort.json; do \
		d=$$(dirname $$f); x=$(BUILD)/pipe/$$(basename $$d); \
		$(GRAFT) compose $$d -o $$x --force -q; \
		out=$$(GRAFT_CUDA_LIB=$(CUDA_SO) $(PIPE_TEST) $$x 2>&1) || { echo "$$out"; exit 1; }; \
		echo "$$out" | tail -1; \
		case "$$out" in *skipped*) break ;; esac; \
	done
endif
endif
