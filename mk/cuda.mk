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

$(CUDA_TEST): $(BUILD)/obj/tests/cuda/test_kernels.cu.o $(CUDA_LIB)
	@mkdir -p $(@D)
	$(NVCC) -arch=sm_90 -o $@ $< $(CUDA_LIB) -lcublasLt -lcublas

test-cuda: $(CUDA_TEST)
	$(CUDA_TEST)
else
test-cuda:
	@echo "test-cuda: skipped (no nvcc)"
endif

# The CUDA executor (runtime/cuda/*.c, issue 7): C compiled against the CUDA
# headers into $(CUDA_LIB) beside the kernels. graft links it (the weak
# rt_backend_cuda in runtime/backend.h becomes real; -u pulls it out of the
# archive), so `--device cuda|auto` can use a GPU; the other programs link
# libgraft.a alone and run on the CPU. Not under SANITIZE=1, where the CPU
# paths are what is checked.
ifneq ($(strip $(CU_SRCS)),)
CUDA_RT_SRCS := $(wildcard runtime/cuda/*.c)
CUDA_RT_OBJS := $(CUDA_RT_SRCS:%.c=$(BUILD)/obj/%.o)
CUDA_OBJS += $(CUDA_RT_OBJS)
$(CUDA_RT_OBJS): CFLAGS += $(CUDA_CFLAGS)
$(CUDA_LIB): $(CUDA_RT_OBJS)
ifneq ($(SANITIZE),1)
$(GRAFT): $(CUDA_LIB)
$(GRAFT): LDLIBS := -Wl,-u,rt_backend_cuda $(CUDA_LIB) $(LIB) $(LDLIBS) $(CUDA_LDLIBS)
endif
endif
