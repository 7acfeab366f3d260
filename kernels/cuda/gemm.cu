/* Row-major GEMM for the CUDA executor (gcuda_ops.h): cuBLASLt, with the
 * algorithm its heuristic picks for the shape, strides and pointer
 * alignment (cached per such key), on a workspace of our own; cuBLAS's
 * cublasGemmStridedBatchedEx where cuBLASLt offers no algorithm
 * (GRAFT_CUDA_NO_LT=1: always). fp32 stays fp32 (no TF32) either way. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gcuda_common.cuh"
#include "kernels/cuda/gcuda_ops.h"

/* A workspace of our own (set again after each cublasSetStream, which
 * resets it): cuBLAS then allocates nothing while a CUDA graph is being
 * captured. */
#define GOPS_BLAS_WS (32u << 20)

#define GOPS_LT_CACHE 64

/* One cuBLASLt plan: descriptors and algorithm for a key. */
typedef struct lt_plan {
    int64_t key[10]; /* dtype, M, N, K, batch, sa, sb, sc, alignment, B transposed */
    bool used, ok;  /* ok false: cuBLASLt has no algorithm, use cuBLAS */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} lt_plan;

struct gops_blas {
    cublasHandle_t h;
    cublasLtHandle_t lt;
    bool no_lt;
    void *ws;
    lt_plan plans[GOPS_LT_CACHE];
    int next; /* the slot replaced when the cache is full */
};

static void lt_plan_drop(lt_plan *p)
{
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

/* A column-major rows x cols layout, leading dimension ld, batch strided. */
static bool lt_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld,
                      int32_t batch, int64_t stride)
{
    if (cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld) != CUBLAS_STATUS_SUCCESS) return false;
    if (batch > 1 &&
        (cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch) !=
             CUBLAS_STATUS_SUCCESS ||
         cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride) !=
             CUBLAS_STATUS_SUCCESS))
        return false;
    return true;
}

/* The plan for this product (row-major C = A B as column-major
 * C^T = B^T A^T: Lt's A is our B, N x K, or, bt, K x N transposed; Lt's B
 * our A, K x M), built and cached on first use; NULL when cuBLASLt has
 * none. */
static const lt_plan *lt_plan_get(gops_blas *h, cudaDataType_t t, int dtype, int64_t M, int64_t N, int64_t K,
                                  int64_t batch, int64_t sa, int64_t sb, int64_t sc, int64_t align, int bt)
{
    int64_t key[10] = {dtype, M, N, K, batch, sa, sb, sc, align, bt};
    for (int i = 0; i < GOPS_LT_CACHE; i++)
        if (h->plans[i].used && !memcmp(h->plans[i].key, key, sizeof key)) return h->plans[i].ok ? &h->plans[i] : NULL;
    int slot = -1;
    for (int i = 0; i < GOPS_LT_CACHE && slot < 0; i++)
        if (!h->plans[i].used) slot = i;
    if (slot < 0) {
        slot = h->next;
        h->next = (h->next + 1) % GOPS_LT_CACHE;
    }
    lt_plan *p = &h->plans[slot];
    lt_plan_drop(p);
    memcpy(p->key, key, sizeof key);
    p->used = true;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    uint64_t wsb = GOPS_BLAS_WS;
    uint32_t al = (uint32_t)align;
    cublasOperation_t opa = bt ? CUBLAS_OP_T : CUBLAS_OP_N;
    bool ok = cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa) ==
                  CUBLAS_STATUS_SUCCESS &&
              (bt ? lt_layout(&p->la, t, K, N, K, (int32_t)batch, sb) : lt_layout(&p->la, t, N, K, N, (int32_t)batch, sb)) && lt_layout(&p->lb, t, K, M, K, (int32_t)batch, sa) &&
              lt_layout(&p->lc, t, N, M, N, (int32_t)batch, sc) &&
              cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulAlgoGetHeuristic(h->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found) ==
                  CUBLAS_STATUS_SUCCESS &&
              found > 0;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (!ok) {
        lt_plan_drop(p);
        memcpy(p->key, key, sizeof key);
        p->used = true; /* remembered: cuBLAS for this key */
        return NULL;
    }
    p->algo = res.algo;
    p->ok = true;
    return p;
}

/* The largest power of two up to 16 dividing every address the product
 * touches first in a batch entry (pointers and batch strides in bytes). */
static int64_t lt_alignment(const void *A, const void *B, const void *C, int64_t sa, int64_t sb, int64_t sc,
                            size_t es, int64_t batch)
{
    uint64_t bits = (uint64_t)(uintptr_t)A | (uint64_t)(uintptr_t)B | (uint64_t)(uintptr_t)C;
    if (batch > 1) bits |= (uint64_t)sa * es | (uint64_t)sb * es | (uint64_t)sc * es;
    int64_t al = 16;
    while (al > 1 && (bits & (uint64_t)(al - 1))) al >>= 1;
    return al;
}

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
    const char *nolt = getenv("GRAFT_CUDA_NO_LT");
    b->no_lt = nolt && *nolt && strcmp(nolt, "0") != 0;
    if (!b->no_lt && cublasLtCreate(&b->lt) != CUBLAS_STATUS_SUCCESS) {
        b->lt = NULL;
        b->no_lt = true;
    }
    if (cudaMalloc(&b->ws, GOPS_BLAS_WS) != cudaSuccess) {
        (void)cudaGetLastError();
        if (b->lt) cublasLtDestroy(b->lt);
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
    for (int i = 0; i < GOPS_LT_CACHE; i++) lt_plan_drop(&b->plans[i]);
    if (b->lt) cublasLtDestroy(b->lt);
    cublasDestroy(b->h);
    cudaFree(b->ws);
    free(b);
}

static graft_status gemm_run(gops_blas *h, int dtype, int64_t M, int64_t N, int64_t K, const void *A, int64_t sa,
                             const void *B, int64_t sb, int bt, void *C, int64_t sc, int64_t batch, gcuda_stream s,
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
    float one = 1.0f, zero = 0.0f;
    if (!h->no_lt) {
        int64_t al = lt_alignment(A, B, C, sa, sb, sc, gcuda_dtype_size(dtype), batch);
        const lt_plan *p = lt_plan_get(h, t, dtype, M, N, K, batch, sa, sb, sc, al, bt);
        if (p) {
            cublasStatus_t lst = cublasLtMatmul(h->lt, p->op, &one, B, p->la, A, p->lb, &zero, C, p->lc, C, p->lc,
                                                &p->algo, h->ws, GOPS_BLAS_WS, s);
            if (lst != CUBLAS_STATUS_SUCCESS) return blas_fail(err, lst, "cublasLtMatmul");
            return GRAFT_OK;
        }
    }
    cublasStatus_t st = cublasSetStream(h->h, s);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_fail(err, st, "cublasSetStream");
    st = cublasSetWorkspace(h->h, h->ws, GOPS_BLAS_WS);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_fail(err, st, "cublasSetWorkspace");
    /* row-major C = A B is column-major C^T = B^T A^T (bt: B^T is B's
     * column-major K x N, transposed) */
    st = cublasGemmStridedBatchedEx(h->h, bt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B,
                                    t, bt ? (int)K : (int)N, sb, A, t, (int)K, sa, &zero, C, t, (int)N, sc, (int)batch,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_fail(err, st, "cublasGemmStridedBatchedEx");
    return GRAFT_OK;
}

extern "C" graft_status gops_gemm(gops_blas *h, int dtype, int64_t M, int64_t N, int64_t K, const void *A, int64_t sa,
                                  const void *B, int64_t sb, void *C, int64_t sc, int64_t batch, gcuda_stream s,
                                  graft_error *err)
{
    return gemm_run(h, dtype, M, N, K, A, sa, B, sb, 0, C, sc, batch, s, err);
}

extern "C" graft_status gops_gemm_bt(gops_blas *h, int dtype, int64_t M, int64_t N, int64_t K, const void *A,
                                     int64_t sa, const void *B, int64_t sb, void *C, int64_t sc, int64_t batch,
                                     gcuda_stream s, graft_error *err)
{
    return gemm_run(h, dtype, M, N, K, A, sa, B, sb, 1, C, sc, batch, s, err);
}
