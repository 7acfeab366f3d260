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
