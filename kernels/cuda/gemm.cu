/* Row-major GEMM through cuBLAS for the CUDA executor (gcuda_ops.h). */
#include <cublas_v2.h>
#include <limits.h>

#include "kernels/cuda/gcuda_common.cuh"
#include "kernels/cuda/gcuda_ops.h"

/* A workspace of our own (set again after each cublasSetStream, which
 * resets it): cuBLAS then allocates nothing while a CUDA graph is being
 * captured. */
#define GOPS_BLAS_WS (32u << 20)

struct gops_blas {
    cublasHandle_t h;
    void *ws;
};

static graft_status blas_fail(graft_error *err, cublasStatus_t st, const char *what)
{
    return gcuda_errf(err, st == CUBLAS_STATUS_ALLOC_FAILED ? GRAFT_ENOMEM : GRAFT_EIO, "%s: cuBLAS status %d (%s)",
                      what, (int)st, cublasGetStatusString(st));
}

extern "C" graft_status gops_blas_create(gops_blas **out, graft_error *err)
{
    *out = NULL;
    gops_blas *b = (gops_blas *)calloc(1, sizeof *b);
    if (!b) return gcuda_errf(err, GRAFT_ENOMEM, "gops_blas_create: out of memory");
    cublasStatus_t st = cublasCreate(&b->h);
    if (st != CUBLAS_STATUS_SUCCESS) {
        free(b);
        return blas_fail(err, st, "cublasCreate");
    }
    /* fp32 stays fp32: no TF32 tensor-op shortcut */
    cublasSetMathMode(b->h, CUBLAS_PEDANTIC_MATH);
    if (cudaMalloc(&b->ws, GOPS_BLAS_WS) != cudaSuccess) {
        (void)cudaGetLastError();
        cublasDestroy(b->h);
        free(b);
        return gcuda_errf(err, GRAFT_ENOMEM, "gops_blas_create: %u bytes of workspace", GOPS_BLAS_WS);
    }
    *out = b;
    return GRAFT_OK;
}

extern "C" void gops_blas_free(gops_blas *b)
{
    if (!b) return;
    cublasDestroy(b->h);
    cudaFree(b->ws);
    free(b);
}

extern "C" graft_status gops_gemm(gops_blas *h, int dtype, int64_t M, int64_t N, int64_t K, const void *A, int64_t sa,
                                  const void *B, int64_t sb, void *C, int64_t sc, int64_t batch, gcuda_stream s,
                                  graft_error *err)
{
    if (M <= 0 || N <= 0 || batch <= 0) return GRAFT_OK;
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX || batch > INT_MAX)
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gops_gemm: %lld x %lld x %lld (batch %lld) over cuBLAS's int",
                          (long long)M, (long long)N, (long long)K, (long long)batch);
    if (K == 0) {
        size_t es = gcuda_dtype_size(dtype);
        for (int64_t b = 0; b < batch; b++)
            GCUDA_CHECK(cudaMemsetAsync((char *)C + (size_t)(b * sc) * es, 0, (size_t)(M * N) * es, s));
        return GRAFT_OK;
    }
    cudaDataType_t t;
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT: t = CUDA_R_32F; break;
    case GRAFT_DTYPE_FLOAT16: t = CUDA_R_16F; break;
    case GRAFT_DTYPE_BFLOAT16: t = CUDA_R_16BF; break;
    default: return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gops_gemm: dtype %d", dtype);
    }
    cublasStatus_t st = cublasSetStream(h->h, s);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_fail(err, st, "cublasSetStream");
    st = cublasSetWorkspace(h->h, h->ws, GOPS_BLAS_WS);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_fail(err, st, "cublasSetWorkspace");
    float one = 1.0f, zero = 0.0f;
    /* row-major C = A B is column-major C^T = B^T A^T */
    st = cublasGemmStridedBatchedEx(h->h, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B, t, (int)N, sb, A,
                                    t, (int)K, sa, &zero, C, t, (int)N, sc, (int)batch, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_fail(err, st, "cublasGemmStridedBatchedEx");
    return GRAFT_OK;
}
