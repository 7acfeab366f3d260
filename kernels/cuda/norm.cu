/* RMSNorm and skip-RMSNorm, fused: one block per row, the row held in
 * registers between the sum of squares and the scaling (so every output
 * may alias every input), fp32 arithmetic. */
#include "kernels/cuda/gcuda_common.cuh"

#define NORM_EPT 16 /* elements per thread: dim <= 1024 * 16 */

/* SKIP: t = x + skip (+ bias), written to sum when non-NULL. */
template <typename T, bool SKIP>
__global__ void __launch_bounds__(1024) rmsnorm_kernel(const T *x, const T *skip, const T *bias, const T *gamma, T *y,
                                                      T *sum, int dim, float eps)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    __shared__ float scratch[32];
    size_t row = (size_t)blockIdx.x * dim;
    float v[NORM_EPT];
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < NORM_EPT; e++) {
        int i = e * blockDim.x + threadIdx.x;
        v[e] = 0.0f;
        if (i < dim) {
            float t = gc_f(x[row + i]);
            if (SKIP) {
                t += gc_f(skip[row + i]);
                if (bias) t += gc_f(bias[i]);
            }
            v[e] = t;
            ss += t * t;
        }
    }
    ss = gc_block_sum(ss, scratch);
    float inv = gc_rsqrt<T>(ss / (float)dim + eps);
#pragma unroll
    for (int e = 0; e < NORM_EPT; e++) {
        int i = e * blockDim.x + threadIdx.x;
        if (i < dim) {
            if (SKIP && sum) sum[row + i] = gc_to<T>(v[e]);
            y[row + i] = gc_to<T>(v[e] * inv * gc_f(gamma[i]));
        }
    }
}

static graft_status norm_launch(const char *fn, int dtype, const void *x, const void *skip, const void *bias,
                                const void *gamma, void *y, void *sum, int64_t rows, int64_t dim, float eps,
                                gcuda_stream s, graft_error *err)
{
    if (rows < 0 || dim <= 0 || dim > 1024 * NORM_EPT || rows > 0x7fffffff)
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "%s: %lld rows of %lld (dim must be in 1..%d)", fn,
                          (long long)rows, (long long)dim, 1024 * NORM_EPT);
    if (rows == 0) return GRAFT_OK;
    int threads = (int)((dim + NORM_EPT - 1) / NORM_EPT);
    threads = (threads + 31) / 32 * 32;
    if (threads < 32) threads = 32;
    if (threads > 1024) threads = 1024;
    GCUDA_DISPATCH(dtype, fn, {
        if (skip)
            gc_launch(gcuda_pdl_all(), (rmsnorm_kernel<T, true>), (unsigned)rows, threads, 0, s, (const T *)x,
                      (const T *)skip, (const T *)bias, (const T *)gamma, (T *)y, (T *)sum, (int)dim, eps);
        else
            gc_launch(gcuda_pdl_all(), (rmsnorm_kernel<T, false>), (unsigned)rows, threads, 0, s, (const T *)x, NULL,
                      NULL, (const T *)gamma, (T *)y, NULL, (int)dim, eps);
        GCUDA_CHECK_LAUNCH("rmsnorm_kernel");
    });
    return GRAFT_OK;
}

extern "C" graft_status gcuda_rmsnorm(int dtype, const void *x, const void *gamma, void *y, int64_t rows, int64_t dim,
                                      float eps, gcuda_stream s, graft_error *err)
{
    return norm_launch("gcuda_rmsnorm", dtype, x, NULL, NULL, gamma, y, NULL, rows, dim, eps, s, err);
}

extern "C" graft_status gcuda_skip_rmsnorm(int dtype, const void *x, const void *skip, const void *bias,
                                           const void *gamma, void *y, void *sum, int64_t rows, int64_t dim, float eps,
                                           gcuda_stream s, graft_error *err)
{
    if (!skip) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_skip_rmsnorm: skip is NULL");
    return norm_launch("gcuda_skip_rmsnorm", dtype, x, skip, bias, gamma, y, sum, rows, dim, eps, s, err);
}
