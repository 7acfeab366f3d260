/* Rotary embedding, softmax over the last axis, elementwise add/mul and
 * embedding-row gather. fp32 arithmetic whatever the storage type. */
#include <math.h>

#include "kernels/cuda/gcuda_common.cuh"

/* ------------------------------------------------------------ rotary */

/* The two elements of pair k of a row: halves (k, k + rotary_dim / 2) or
 * interleaved (2k, 2k + 1). */
__device__ __forceinline__ int64_t pair_i0(const gcuda_rotary_args &a, int64_t k) { return a.interleaved ? 2 * k : k; }
__device__ __forceinline__ int64_t pair_i1(const gcuda_rotary_args &a, int64_t k)
{
    return a.interleaved ? 2 * k + 1 : k + a.rotary_dim / 2;
}

/* Pair k (values x0, x1) of a row at cache position pos, rotated into y. */
template <typename T>
__device__ __forceinline__ void rotate_pair(const gcuda_rotary_args &a, int64_t pos, int64_t k, float x0, float x1,
                                            T *y)
{
    int64_t half = a.rotary_dim / 2;
    float c, sn;
    if (pos < 0 || pos >= a.max_pos) {
        c = sn = __int_as_float(0x7fc00000); /* no error channel on the device: a NaN row shows it */
    } else {
        c = gc_f(((const T *)a.cos_cache)[pos * half + k]);
        sn = gc_f(((const T *)a.sin_cache)[pos * half + k]);
    }
    y[pair_i0(a, k)] = gc_to<T>(c * x0 - sn * x1);
    y[pair_i1(a, k)] = gc_to<T>(sn * x0 + c * x1);
}

/* One thread per work item of a row: items [0, half) rotate a pair, items
 * [half, half + head_size - rotary_dim) copy the tail (only when y != x). */
template <typename T>
__global__ void rotary_kernel(gcuda_rotary_args a, int64_t items, int64_t per_row)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    int64_t half = a.rotary_dim / 2;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < items; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = t / per_row, k = t % per_row;
        int64_t h = row % a.heads, bs = row / a.heads, si = bs % a.seq, b = bs / a.seq;
        int64_t off = b * a.stride_b + si * a.stride_s + h * a.stride_h;
        const T *x = (const T *)a.x + off;
        T *y = (T *)a.y + off;
        if (k >= half) {
            int64_t i = a.rotary_dim + (k - half);
            y[i] = x[i];
            continue;
        }
        rotate_pair<T>(a, a.positions[b * a.seq + si], k, gc_f(x[pair_i0(a, k)]), gc_f(x[pair_i1(a, k)]), y);
    }
}

/* With the norm first: one block per row, the row normalised into shared
 * memory (head_size floats), then rotated from there. */
#define RN_THREADS 128
template <typename T> __device__ __forceinline__ void rotary_norm_row(const gcuda_rotary_args &a, int64_t row)
{
    extern __shared__ float rv[];
    __shared__ float scratch[32];
    int64_t h = row % a.heads, bs = row / a.heads, si = bs % a.seq, b = bs / a.seq;
    int64_t off = b * a.stride_b + si * a.stride_s + h * a.stride_h;
    const T *xn = (const T *)a.norm_x + off;
    const T *g = (const T *)a.norm_gamma;
    T *y = (T *)a.y + off;
    const int D = (int)a.head_size, half = (int)(a.rotary_dim / 2);
    float ss = 0.0f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float f = gc_f(xn[i]);
        rv[i] = f;
        ss += f * f;
    }
    ss = gc_block_sum(ss, scratch);
    float inv = gc_rsqrt<T>(ss / (float)D + a.norm_eps);
    for (int i = threadIdx.x; i < D; i += blockDim.x) rv[i] = gc_f(gc_to<T>(rv[i] * inv * gc_f(g[i])));
    __syncthreads();
    int64_t pos = a.positions[b * a.seq + si];
    for (int k = threadIdx.x; k < half; k += blockDim.x)
        rotate_pair<T>(a, pos, k, rv[pair_i0(a, k)], rv[pair_i1(a, k)], y);
    for (int i = (int)a.rotary_dim + threadIdx.x; i < D; i += blockDim.x) y[i] = gc_to<T>(rv[i]);
}

template <typename T> __global__ void __launch_bounds__(RN_THREADS) rotary_norm_kernel(gcuda_rotary_args a)
{
    gc_pdl_wait();
    gc_pdl_trigger();
    rotary_norm_row<T>(a, blockIdx.x);
}

/* Two of them in one launch (a layer's q and k): blocks [0, rows_a) take
 * a's rows, the others b's. Each branch reads its own parameter. */
template <typename T>
__global__ void __launch_bounds__(RN_THREADS) rotary_norm2_kernel(gcuda_rotary_args a, gcuda_rotary_args b,
                                                                  int64_t rows_a)
{
    gc_pdl_wait();
    gc_pdl_trigger();
    if ((int64_t)blockIdx.x < rows_a) rotary_norm_row<T>(a, blockIdx.x);
    else rotary_norm_row<T>(b, blockIdx.x - rows_a);
}

/* The rows of a rotary with its norm, after checking its arguments. */
static graft_status rotary_norm_rows(const gcuda_rotary_args *a, int64_t *rows, graft_error *err)
{
    if (a->rotary_dim <= 0 || a->rotary_dim % 2 || a->rotary_dim > a->head_size || a->head_size > 16384 ||
        !a->norm_gamma || a->batch < 0 || a->seq < 0 || a->heads < 0)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_rotary (with norm): rotary_dim %lld for head_size %lld",
                          (long long)a->rotary_dim, (long long)a->head_size);
    *rows = a->batch * a->seq * a->heads;
    if (*rows > 0x7fffffffLL) return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_rotary: %lld rows", (long long)*rows);
    return GRAFT_OK;
}

extern "C" graft_status gcuda_rotary_pair(const gcuda_rotary_args *a, const gcuda_rotary_args *b, gcuda_stream s,
                                          graft_error *err)
{
    int64_t ra = 0, rb = 0;
    graft_status st;
    if (!a->norm_x || !b->norm_x || a->dtype != b->dtype)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_rotary_pair: two rotaries with their norms, of one dtype");
    if ((st = rotary_norm_rows(a, &ra, err)) != GRAFT_OK || (st = rotary_norm_rows(b, &rb, err)) != GRAFT_OK)
        return st;
    if (ra + rb > 0x7fffffffLL)
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_rotary_pair: %lld rows", (long long)(ra + rb));
    if (ra + rb == 0) return GRAFT_OK;
    size_t smem = (size_t)(a->head_size > b->head_size ? a->head_size : b->head_size) * sizeof(float);
    GCUDA_DISPATCH(a->dtype, "gcuda_rotary_pair", {
        gc_launch(gcuda_pdl_all(), (rotary_norm2_kernel<T>), (unsigned)(ra + rb), RN_THREADS, smem, s, *a, *b, ra);
        GCUDA_CHECK_LAUNCH("rotary_norm2_kernel");
    });
    return GRAFT_OK;
}

extern "C" graft_status gcuda_rotary(const gcuda_rotary_args *a, gcuda_stream s, graft_error *err)
{
    if (a->norm_x) {
        int64_t rows = 0;
        graft_status st = rotary_norm_rows(a, &rows, err);
        if (st != GRAFT_OK) return st;
        if (rows == 0) return GRAFT_OK;
        size_t smem = (size_t)a->head_size * sizeof(float);
        GCUDA_DISPATCH(a->dtype, "gcuda_rotary", {
            gc_launch(gcuda_pdl_all(), (rotary_norm_kernel<T>), (unsigned)rows, RN_THREADS, smem, s, *a);
            GCUDA_CHECK_LAUNCH("rotary_norm_kernel");
        });
        return GRAFT_OK;
    }
    if (a->rotary_dim <= 0 || a->rotary_dim % 2 || a->rotary_dim > a->head_size || a->batch < 0 || a->seq < 0 ||
        a->heads < 0)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_rotary: rotary_dim %lld for head_size %lld",
                          (long long)a->rotary_dim, (long long)a->head_size);
    int64_t per_row = a->rotary_dim / 2 + (a->x == a->y ? 0 : a->head_size - a->rotary_dim);
    int64_t items = a->batch * a->seq * a->heads * per_row;
    if (items == 0) return GRAFT_OK;
    GCUDA_DISPATCH(a->dtype, "gcuda_rotary", {
        gc_launch(gcuda_pdl_all(), (rotary_kernel<T>), gc_blocks(items, 256), 256, 0, s, *a, items, per_row);
        GCUDA_CHECK_LAUNCH("rotary_kernel");
    });
    return GRAFT_OK;
}

/* ------------------------------------------------------------ softmax */

/* One block per row: an online (max, sum) pass, a block-wide merge, then
 * the scaled exponentials. Each thread rereads only what it read, so y may
 * alias x. */
template <typename T>
__global__ void __launch_bounds__(256) softmax_kernel(const T *x, T *y, int dim)
{
    __shared__ float sm[32], sl[32];
    size_t row = (size_t)blockIdx.x * dim;
    float m = -INFINITY, l = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = gc_f(x[row + i]);
        if (v > m) {
            l = l * gc_exp<T>(m - v) + 1.0f;
            m = v;
        } else if (v != -INFINITY) {
            l += gc_exp<T>(v - m);
        }
    }
    /* merge (m, l) across the warp, then across warps */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
        float mn = fmaxf(m, m2);
        l = (mn == -INFINITY) ? 0.0f : l * gc_exp<T>(m - mn) + l2 * gc_exp<T>(m2 - mn);
        m = mn;
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) {
        sm[w] = m;
        sl[w] = l;
    }
    __syncthreads();
    m = lane < nw ? sm[lane] : -INFINITY;
    l = lane < nw ? sl[lane] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
        float mn = fmaxf(m, m2);
        l = (mn == -INFINITY) ? 0.0f : l * gc_exp<T>(m - mn) + l2 * gc_exp<T>(m2 - mn);
        m = mn;
    }
    float inv = 1.0f / l;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) y[row + i] = gc_to<T>(gc_exp<T>(gc_f(x[row + i]) - m) * inv);
}

extern "C" graft_status gcuda_softmax(int dtype, const void *x, void *y, int64_t rows, int64_t dim, gcuda_stream s,
                                      graft_error *err)
{
    if (rows < 0 || dim <= 0 || rows > 0x7fffffff || dim > 0x7fffffff)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_softmax: %lld rows of %lld", (long long)rows, (long long)dim);
    if (rows == 0) return GRAFT_OK;
    int threads = dim >= 256 ? 256 : (int)((dim + 31) / 32 * 32);
    GCUDA_DISPATCH(dtype, "gcuda_softmax", {
        softmax_kernel<T><<<(unsigned)rows, threads, 0, s>>>((const T *)x, (T *)y, (int)dim);
        GCUDA_CHECK_LAUNCH("softmax_kernel");
    });
    return GRAFT_OK;
}

/* ------------------------------------------------------------ add, mul */

template <typename T, int OP>
__global__ void binary_kernel(const T *a, const T *b, T *y, int64_t n, int64_t bn)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float u = gc_f(a[i]), v = gc_f(b[bn == n ? i : i % bn]);
        y[i] = gc_to<T>(OP == GCUDA_BINARY_ADD ? u + v : u * v);
    }
}

/* Same shapes, 16-byte words. */
template <typename T, int OP>
__global__ void binary_vec_kernel(const uint4 *a, const uint4 *b, uint4 *y, int64_t nv)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    constexpr int V = gc_vec<T>::n;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv; i += (int64_t)gridDim.x * blockDim.x) {
        uint4 ua = a[i], ub = b[i], uy;
        float fa[V], fb[V];
        gc_unpack<T>(ua, fa);
        gc_unpack<T>(ub, fb);
        T *ey = reinterpret_cast<T *>(&uy);
#pragma unroll
        for (int k = 0; k < V; k++) ey[k] = gc_to<T>(OP == GCUDA_BINARY_ADD ? fa[k] + fb[k] : fa[k] * fb[k]);
        y[i] = uy;
    }
}

extern "C" graft_status gcuda_binary(gcuda_binary_op op, int dtype, const void *a, const void *b, void *y, int64_t n,
                                     int64_t b_n, gcuda_stream s, graft_error *err)
{
    if (n < 0 || b_n <= 0 || (n > 0 && n % b_n) || (op != GCUDA_BINARY_ADD && op != GCUDA_BINARY_MUL))
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_binary: op %d, %lld elements, b of %lld", (int)op, (long long)n,
                          (long long)b_n);
    if (n == 0) return GRAFT_OK;
    size_t es = gcuda_dtype_size(dtype);
    int vec = es && b_n == n && (n * (int64_t)es) % 16 == 0 && ((uintptr_t)a | (uintptr_t)b | (uintptr_t)y) % 16 == 0;
    GCUDA_DISPATCH(dtype, "gcuda_binary", {
        if (vec) {
            int64_t nv = n * (int64_t)sizeof(T) / 16;
            if (op == GCUDA_BINARY_ADD)
                gc_launch(gcuda_pdl_all(), (binary_vec_kernel<T, GCUDA_BINARY_ADD>), gc_blocks(nv, 256), 256, 0, s,
                    (const uint4 *)a, (const uint4 *)b, (uint4 *)y, nv);
            else
                gc_launch(gcuda_pdl_all(), (binary_vec_kernel<T, GCUDA_BINARY_MUL>), gc_blocks(nv, 256), 256, 0, s,
                          (const uint4 *)a, (const uint4 *)b, (uint4 *)y, nv);
        } else if (op == GCUDA_BINARY_ADD) {
            gc_launch(gcuda_pdl_all(), (binary_kernel<T, GCUDA_BINARY_ADD>), gc_blocks(n, 256), 256, 0, s, (const T *)a,
                      (const T *)b, (T *)y, n, b_n);
        } else {
            gc_launch(gcuda_pdl_all(), (binary_kernel<T, GCUDA_BINARY_MUL>), gc_blocks(n, 256), 256, 0, s, (const T *)a,
                      (const T *)b, (T *)y, n, b_n);
        }
        GCUDA_CHECK_LAUNCH("binary_kernel");
    });
    return GRAFT_OK;
}

/* ------------------------------------------------------------ gather */

template <typename T>
__global__ void gather_kernel(const T *table, int64_t rows, int64_t dim, const int64_t *ids, int64_t total, T *out)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = t / dim, d = t % dim, id = ids[i];
        if (id < 0) id += rows;
        out[t] = id >= 0 && id < rows ? table[id * dim + d] : T();
    }
}

/* gcuda_gather_rows_multi's tables: element t of the launch is table j's
 * for at[j] <= t < at[j + 1] (in units of U) */
struct gather_set {
    const void *table[GCUDA_GATHER_MAX];
    void *out[GCUDA_GATHER_MAX];
    int64_t rows[GCUDA_GATHER_MAX], dim[GCUDA_GATHER_MAX], at[GCUDA_GATHER_MAX + 1];
    int n;
};

template <typename U> __global__ void gather_multi_kernel(gather_set g, const int64_t *ids)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    const int64_t total = g.at[g.n];
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        int j = 0;
        while (j + 1 < g.n && t >= g.at[j + 1]) j++;
        const int64_t u = t - g.at[j], dim = g.dim[j], rows = g.rows[j], i = u / dim, d = u % dim;
        int64_t id = ids[i];
        if (id < 0) id += rows;
        ((U *)g.out[j])[u] = id >= 0 && id < rows ? ((const U *)g.table[j])[id * dim + d] : U();
    }
}

extern "C" graft_status gcuda_gather_rows_multi(int dtype, int n, const void *const *table, const int64_t *rows,
                                                const int64_t *dim, const int64_t *ids, int64_t nids,
                                                void *const *out, gcuda_stream s, graft_error *err)
{
    if (n < 1 || n > GCUDA_GATHER_MAX || nids < 0)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gather_rows_multi: %d tables, %lld ids", n, (long long)nids);
    const size_t es = gcuda_dtype_size(dtype);
    if (!es) return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_gather_rows_multi: dtype %d", dtype);
    gather_set g = {};
    g.n = n;
    bool v16 = true; /* every row a whole number of 16-byte words, every table and output aligned */
    for (int j = 0; j < n; j++) {
        if (rows[j] < 0 || dim[j] < 0)
            return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gather_rows_multi: table %d of %lld x %lld", j,
                              (long long)rows[j], (long long)dim[j]);
        v16 = v16 && (dim[j] * (int64_t)es) % 16 == 0 && ((uintptr_t)table[j] | (uintptr_t)out[j]) % 16 == 0;
        g.table[j] = table[j];
        g.out[j] = out[j];
        g.rows[j] = rows[j];
    }
    const int64_t unit = v16 ? 16 : (int64_t)es; /* bytes an element of the launch */
    for (int j = 0; j < n; j++) {
        g.dim[j] = dim[j] * (int64_t)es / unit;
        g.at[j + 1] = g.at[j] + nids * g.dim[j];
    }
    for (int j = 0; j < n; j++) /* a table of empty rows: nothing to gather, and no division by its dim */
        if (!g.dim[j]) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gather_rows_multi: table %d has empty rows", j);
    const int64_t total = g.at[n];
    if (!total) return GRAFT_OK;
    const unsigned blocks = gc_blocks(total, 256);
    if (v16) gc_launch(gcuda_pdl_all(), gather_multi_kernel<uint4>, blocks, 256, 0, s, g, ids);
    else if (es == 8) gc_launch(gcuda_pdl_all(), gather_multi_kernel<uint64_t>, blocks, 256, 0, s, g, ids);
    else if (es == 4) gc_launch(gcuda_pdl_all(), gather_multi_kernel<uint32_t>, blocks, 256, 0, s, g, ids);
    else if (es == 2) gc_launch(gcuda_pdl_all(), gather_multi_kernel<uint16_t>, blocks, 256, 0, s, g, ids);
    else gc_launch(gcuda_pdl_all(), gather_multi_kernel<uint8_t>, blocks, 256, 0, s, g, ids);
    GCUDA_CHECK_LAUNCH("gather_multi_kernel");
    return GRAFT_OK;
}

extern "C" graft_status gcuda_gather_rows(int dtype, const void *table, int64_t rows, int64_t dim, const int64_t *ids,
                                          int64_t n, void *out, gcuda_stream s, graft_error *err)
{
    if (rows < 0 || dim < 0 || n < 0)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gather_rows: %lld ids into %lld x %lld", (long long)n,
                          (long long)rows, (long long)dim);
    if (n == 0 || dim == 0) return GRAFT_OK;
    size_t es = gcuda_dtype_size(dtype);
    /* rows of 16-byte words when they line up: gather them as uint4 */
    if (es && (dim * (int64_t)es) % 16 == 0 && ((uintptr_t)table | (uintptr_t)out) % 16 == 0) {
        int64_t dv = dim * (int64_t)es / 16;
        gc_launch(gcuda_pdl_all(), (gather_kernel<uint4>), gc_blocks(n * dv, 256), 256, 0, s, (const uint4 *)table,
                  rows, dv, ids, n * dv, (uint4 *)out);
        GCUDA_CHECK_LAUNCH("gather_kernel<uint4>");
        return GRAFT_OK;
    }
    GCUDA_DISPATCH(dtype, "gcuda_gather_rows", {
        gc_launch(gcuda_pdl_all(), (gather_kernel<T>), gc_blocks(n * dim, 256), 256, 0, s, (const T *)table, rows, dim,
                  ids, n * dim, (T *)out);
        GCUDA_CHECK_LAUNCH("gather_kernel");
    });
    return GRAFT_OK;
}
