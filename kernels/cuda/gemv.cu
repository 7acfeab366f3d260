/* Decode GEMV: y[N] = x[K] . W[K, N], W row-major (ONNX MatMul weights).
 *
 * Bandwidth-bound: W is read once. A block owns TN columns and a chunk of
 * K; its threads form CT column threads (each V adjacent columns, one
 * 16-byte load per row when V = 16 / sizeof(T)) times KG row groups that
 * stride through the chunk, four rows in flight each. Row groups are
 * reduced through shared memory in a fixed order. When the column tiles
 * alone cannot fill the device, K is split over blocks (grid.y); each split
 * writes fp32 partials to the workspace, and the last block of a tile to
 * finish (atomic counter, reset by that block) adds them in split order, so
 * results are deterministic and the launch needs no separate reduction.
 * Launched as a programmatic dependent (sm_90, GRAFT_CUDA_PDL=0: plain):
 * the first rows are prefetched to L2 before waiting for the kernel that
 * writes x, whose tail this overlaps. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gcuda_common.cuh"

#define GEMV_THREADS 256
#define GEMV_MAX_SPLITS 64

/* Up to GCUDA_GEMV_MAX matrices of one K that read the same x, their
 * column tiles side by side in grid.x (tile0[j] the first of matrix j);
 * split-K partials of matrix j at column col0[j] of rows ntot wide. */
typedef struct gemv_set {
    const void *W[GCUDA_GEMV_MAX];
    void *y[GCUDA_GEMV_MAX];
    int N[GCUDA_GEMV_MAX], col0[GCUDA_GEMV_MAX], tile0[GCUDA_GEMV_MAX + 1];
    int n, ntot;
} gemv_set;

template <typename T, int V, int CT, int U>
__global__ void __launch_bounds__(GEMV_THREADS)
    gemv_kernel(const T *__restrict__ x, gemv_set set, float *__restrict__ ws, unsigned *__restrict__ counters, int K,
                int kchunk)
{
    constexpr int KG = GEMV_THREADS / CT, TN = CT * V;
    __shared__ float red[KG][TN + 1];
    int j = 0;
    while (j + 1 < set.n && (int)blockIdx.x >= set.tile0[j + 1]) j++;
    const T *__restrict__ W = (const T *)set.W[j];
    T *__restrict__ y = (T *)set.y[j];
    const int N = set.N[j], tile = (int)blockIdx.x - set.tile0[j];
    int ct = threadIdx.x % CT, kg = threadIdx.x / CT;
    int n0 = tile * TN + ct * V;
    int k0 = blockIdx.y * kchunk, k1 = min(K, k0 + kchunk);
    /* launched as a programmatic dependent (gemv_run): the weights do not
     * depend on the kernel before, so this block's rows go to L2 while that
     * one finishes; x (its output) is read only after the wait */
    if (n0 < N) /* the rows of the first pass (U per thread): 16 KB a block, not the whole chunk (L2 holds 60 MB) */
#pragma unroll
        for (int u = 0; u < U; u++) {
            int k = k0 + kg + u * KG;
            if (k < k1) asm volatile("prefetch.global.L2 [%0];" ::"l"(W + n0 + (size_t)k * N));
        }
    gc_pdl_wait();
    gc_pdl_trigger();
    float acc[V];
#pragma unroll
    for (int i = 0; i < V; i++) acc[i] = 0.0f;
    if (n0 < N) { /* N % V == 0 when V > 1: the whole vector is in range */
        const T *wp = W + n0;
        int k = k0 + kg;
        if constexpr (V * sizeof(T) == 16) {
            for (; k + (U - 1) * KG < k1; k += U * KG) {
                uint4 w[U];
                float xv[U];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    w[u] = __ldg(reinterpret_cast<const uint4 *>(wp + (size_t)(k + u * KG) * N));
                    xv[u] = gc_f(x[k + u * KG]);
                }
#pragma unroll
                for (int u = 0; u < U; u++) {
                    float f[V];
                    gc_unpack<T>(w[u], f);
#pragma unroll
                    for (int i = 0; i < V; i++) acc[i] = fmaf(xv[u], f[i], acc[i]);
                }
            }
            for (; k < k1; k += KG) {
                float f[V], xv = gc_f(x[k]);
                gc_unpack<T>(__ldg(reinterpret_cast<const uint4 *>(wp + (size_t)k * N)), f);
#pragma unroll
                for (int i = 0; i < V; i++) acc[i] = fmaf(xv, f[i], acc[i]);
            }
        } else {
            for (; k < k1; k += KG) {
                float xv = gc_f(x[k]);
#pragma unroll
                for (int i = 0; i < V; i++) acc[i] = fmaf(xv, gc_f(wp[(size_t)k * N + i]), acc[i]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < V; i++) red[kg][ct * V + i] = acc[i];
    __syncthreads();
    for (int c = threadIdx.x; c < TN; c += GEMV_THREADS) {
        float sum = 0.0f;
#pragma unroll 8
        for (int g = 0; g < KG; g++) sum += red[g][c];
        int n = tile * TN + c;
        if (n < N) {
            if (gridDim.y == 1)
                y[n] = gc_to<T>(sum);
            else
                ws[(size_t)blockIdx.y * set.ntot + set.col0[j] + n] = sum;
        }
    }
    if (gridDim.y == 1) return;
    /* split-K: the last block of this column tile adds the partials */
    if (!gc_last_block(&counters[blockIdx.x], gridDim.y)) return;
    for (int c = threadIdx.x; c < TN; c += GEMV_THREADS) {
        int n = tile * TN + c;
        if (n >= N) continue;
        float sum = 0.0f;
        for (unsigned sp = 0; sp < gridDim.y; sp++) sum += __ldcg(ws + (size_t)sp * set.ntot + set.col0[j] + n);
        y[n] = gc_to<T>(sum);
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = 0;
}

typedef struct gemv_geom {
    int vec;          /* 16-byte loads */
    int tn, tiles;    /* columns per block, column tiles (all matrices) */
    int splits, kchunk;
    int64_t ntot;     /* columns of all matrices */
} gemv_geom;

/* The default geometry's knobs (gcuda_gemv_tuned overrides them). */
#define GEMV_UNROLL 4    /* 16-byte rows in flight per thread */
#define GEMV_BPS 4       /* blocks per SM the split-K aims at */
#define GEMV_MIN_ROWS 256 /* rows per split at least */

/* The geometry of `n` matrices [K, N[j]] side by side (tiles summed). */
static graft_status gemv_geometry(int dtype, int64_t K, const int64_t *N, int n, int aligned, int bps, int min_rows,
                                  gemv_geom *g, graft_error *err)
{
    size_t es = gcuda_dtype_size(dtype);
    if (!es) return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_gemv: dtype %d not supported", dtype);
    if (n < 1 || n > GCUDA_GEMV_MAX) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv: %d matrices", n);
    int V = (int)(16 / es);
    g->vec = aligned;
    int64_t ntot = 0;
    for (int j = 0; j < n; j++) {
        if (K <= 0 || N[j] <= 0 || K > 0x7fffffff || N[j] > 0x7fffffff)
            return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv: K %lld, N %lld", (long long)K, (long long)N[j]);
        if (N[j] % V) g->vec = 0;
        ntot += N[j];
    }
    if (ntot > 0x7fffffff) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv: %lld columns", (long long)ntot);
    g->tn = g->vec ? 8 * V : 64; /* CT = 8 (vector) or 64 (scalar) */
    g->tiles = 0;
    for (int j = 0; j < n; j++) g->tiles += (int)((N[j] + g->tn - 1) / g->tn);
    g->ntot = ntot;
    int sms;
    graft_status st = gcuda_sm_count(&sms, err);
    if (st) return st;
    int64_t want = ((int64_t)bps * sms + g->tiles - 1) / g->tiles; /* about bps blocks per SM */
    int64_t maxk = K / min_rows > 0 ? K / min_rows : 1;           /* at least min_rows rows per split */
    if (want > maxk) want = maxk;
    if (want > GEMV_MAX_SPLITS) want = GEMV_MAX_SPLITS;
    if (want < 1) want = 1;
    g->kchunk = (int)((K + want - 1) / want);
    g->splits = (int)((K + g->kchunk - 1) / g->kchunk);
    return GRAFT_OK;
}

static size_t gemv_ws_bytes(const gemv_geom *g)
{
    if (g->splits == 1) return 0;
    return (size_t)g->splits * (size_t)g->ntot * sizeof(float) + (size_t)g->tiles * sizeof(unsigned);
}

static graft_status gemv_plan_with(int dtype, int64_t K, const int64_t *N, int n, int bps, int min_rows,
                                   size_t *ws_bytes, graft_error *err)
{
    /* the larger of the aligned and unaligned plans: valid for any pointers */
    gemv_geom a = {}, b = {};
    graft_status st = gemv_geometry(dtype, K, N, n, 1, bps, min_rows, &a, err);
    if (st) return st;
    st = gemv_geometry(dtype, K, N, n, 0, bps, min_rows, &b, err);
    if (st) return st;
    size_t x = gemv_ws_bytes(&a), z = gemv_ws_bytes(&b);
    *ws_bytes = x > z ? x : z;
    return GRAFT_OK;
}

extern "C" graft_status gcuda_gemv_plan(int dtype, int64_t K, int64_t N, size_t *ws_bytes, graft_error *err)
{
    return gemv_plan_with(dtype, K, &N, 1, GEMV_BPS, GEMV_MIN_ROWS, ws_bytes, err);
}

extern "C" graft_status gcuda_gemv_multi_plan(int dtype, int64_t K, const int64_t *N, int n, size_t *ws_bytes,
                                              graft_error *err)
{
    return gemv_plan_with(dtype, K, N, n, GEMV_BPS, GEMV_MIN_ROWS, ws_bytes, err);
}

extern "C" graft_status gcuda_gemv_tuned_plan(int dtype, int64_t K, int64_t N, const gcuda_gemv_tune *t,
                                              size_t *ws_bytes, graft_error *err)
{
    return gemv_plan_with(dtype, K, &N, 1, t->blocks_per_sm, t->min_rows, ws_bytes, err);
}

static graft_status gemv_run(int dtype, const void *x, const void *const *w, void *const *y, const int64_t *N, int n,
                             int64_t K, void *ws, size_t ws_bytes, const gcuda_gemv_tune *t, gcuda_stream s,
                             graft_error *err)
{
    if (t->unroll != 4 && t->unroll != 8 && t->unroll != 16)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_tuned: unroll %d (4, 8 or 16)", t->unroll);
    if (t->blocks_per_sm < 1 || t->min_rows < 1)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_tuned: blocks_per_sm %d, min_rows %d", t->blocks_per_sm,
                          t->min_rows);
    gemv_geom g = {};
    int aligned = 1;
    for (int j = 0; j < n && j < GCUDA_GEMV_MAX; j++) aligned &= (uintptr_t)w[j] % 16 == 0;
    graft_status st = gemv_geometry(dtype, K, N, n, aligned, t->blocks_per_sm, t->min_rows, &g, err);
    if (st) return st;
    size_t need = gemv_ws_bytes(&g);
    if (need > ws_bytes || (need && !ws))
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv: workspace of %zu bytes, %zu needed (gcuda_gemv_plan)",
                          ws_bytes, need);
    gemv_set set = {};
    set.n = n;
    set.ntot = (int)g.ntot;
    for (int j = 0, col = 0, tile = 0; j < n; j++) {
        set.W[j] = w[j];
        set.y[j] = y[j];
        set.N[j] = (int)N[j];
        set.col0[j] = col;
        set.tile0[j] = tile;
        col += (int)N[j];
        tile += (int)((N[j] + g.tn - 1) / g.tn);
        set.tile0[j + 1] = tile;
    }
    float *part = (float *)ws;
    unsigned *counters = need ? (unsigned *)(part + (size_t)g.splits * g.ntot) : NULL;
    /* a programmatic dependent launch (GRAFT_CUDA_PDL=0: a plain one) */
    const bool pdl = gcuda_pdl_mode() >= 1;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)g.tiles, (unsigned)g.splits);
    cfg.blockDim = dim3(GEMV_THREADS);
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    const int Ki = (int)K, kc = g.kchunk;
    cudaError_t e = cudaSuccess;
    GCUDA_DISPATCH(dtype, "gcuda_gemv", {
        const T *xt = (const T *)x;
        if (g.vec && t->unroll == 16)
            e = cudaLaunchKernelEx(&cfg, gemv_kernel<T, 16 / sizeof(T), 8, 16>, xt, set, part, counters, Ki, kc);
        else if (g.vec && t->unroll == 8)
            e = cudaLaunchKernelEx(&cfg, gemv_kernel<T, 16 / sizeof(T), 8, 8>, xt, set, part, counters, Ki, kc);
        else if (g.vec)
            e = cudaLaunchKernelEx(&cfg, gemv_kernel<T, 16 / sizeof(T), 8, 4>, xt, set, part, counters, Ki, kc);
        else
            e = cudaLaunchKernelEx(&cfg, gemv_kernel<T, 1, 64, 4>, xt, set, part, counters, Ki, kc);
    });
    if (e != cudaSuccess) return gcuda_fail(err, e, "launch gemv_kernel", __FILE__, __LINE__);
    return GRAFT_OK;
}

extern "C" graft_status gcuda_gemv_tuned(int dtype, const void *x, const void *w, void *y, int64_t K, int64_t N,
                                         void *ws, size_t ws_bytes, const gcuda_gemv_tune *t, gcuda_stream s,
                                         graft_error *err)
{
    return gemv_run(dtype, x, &w, &y, &N, 1, K, ws, ws_bytes, t, s, err);
}

static const gcuda_gemv_tune gemv_default = {GEMV_UNROLL, GEMV_BPS, GEMV_MIN_ROWS};

extern "C" graft_status gcuda_gemv(int dtype, const void *x, const void *w, void *y, int64_t K, int64_t N, void *ws,
                                   size_t ws_bytes, gcuda_stream s, graft_error *err)
{
    return gemv_run(dtype, x, &w, &y, &N, 1, K, ws, ws_bytes, &gemv_default, s, err);
}

extern "C" graft_status gcuda_gemv_multi(int dtype, const void *x, const void *const *w, void *const *y,
                                         const int64_t *N, int n, int64_t K, void *ws, size_t ws_bytes,
                                         gcuda_stream s, graft_error *err)
{
    return gemv_run(dtype, x, w, y, N, n, K, ws, ws_bytes, &gemv_default, s, err);
}
