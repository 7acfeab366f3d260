/* Generic ONNX ops on the device for the CUDA executor (gcuda_ops.h):
 * broadcasting elementwise, casts, strided copies, last-axis reductions
 * and masked attention. fp32 arithmetic whatever the storage type. */
#include <math.h>
#include <string.h>

#include "kernels/cuda/gcuda_chain.cuh"

/* ------------------------------------------------------------ indexing */

/* Offsets of linear index i (over sh.dims, row-major) in NOPS operands. */
template <int NOPS>
__device__ __forceinline__ void go_offsets(const gops_shape &sh, int64_t i, int64_t *off)
{
#pragma unroll
    for (int k = 0; k < NOPS; k++) off[k] = 0;
    for (int d = sh.rank - 1; d >= 0; d--) {
        int64_t n = sh.dims[d], c = i % n;
        i /= n;
#pragma unroll
        for (int k = 0; k < NOPS; k++) off[k] += c * sh.st[k][d];
    }
}

static int64_t go_numel(const gops_shape *sh)
{
    int64_t n = 1;
    for (int d = 0; d < sh->rank; d++) n *= sh->dims[d];
    return n;
}

static graft_status go_check_shape(const gops_shape *sh, const char *fn, graft_error *err)
{
    if (sh->rank < 0 || sh->rank > GOPS_MAX_RANK)
        return gcuda_errf(err, GRAFT_EINVAL, "%s: rank %d (at most %d)", fn, sh->rank, GOPS_MAX_RANK);
    for (int d = 0; d < sh->rank; d++)
        if (sh->dims[d] < 0) return gcuda_errf(err, GRAFT_EINVAL, "%s: negative dimension", fn);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ binary, where */

template <int OP> __device__ __forceinline__ float go_bin(float a, float b) { return go_bin_f(OP, a, b); }

template <typename T, int OP>
__global__ void go_binary_kernel(gops_shape sh, const T *a, const T *b, T *y, int64_t n)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[2];
        go_offsets<2>(sh, i, off);
        y[i] = gc_to<T>(go_bin<OP>(gc_f(a[off[0]]), gc_f(b[off[1]])));
    }
}

template <typename T>
static graft_status go_binary_t(gops_binary_op op, const gops_shape *sh, const T *a, const T *b, T *y, int64_t n,
                                gcuda_stream s, graft_error *err)
{
    unsigned g = gc_blocks(n, 256);
    switch (op) {
    case GOPS_ADD: gc_launch(gcuda_pdl_all(), (go_binary_kernel<T, GOPS_ADD>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_SUB: gc_launch(gcuda_pdl_all(), (go_binary_kernel<T, GOPS_SUB>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_MUL: gc_launch(gcuda_pdl_all(), (go_binary_kernel<T, GOPS_MUL>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_DIV: gc_launch(gcuda_pdl_all(), (go_binary_kernel<T, GOPS_DIV>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_POW: gc_launch(gcuda_pdl_all(), (go_binary_kernel<T, GOPS_POW>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_MAX: gc_launch(gcuda_pdl_all(), (go_binary_kernel<T, GOPS_MAX>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_MIN: gc_launch(gcuda_pdl_all(), (go_binary_kernel<T, GOPS_MIN>), g, 256, 0, s, *sh, a, b, y, n); break;
    default: return gcuda_errf(err, GRAFT_EINVAL, "gops_binary: op %d", (int)op);
    }
    GCUDA_CHECK_LAUNCH("go_binary_kernel");
    return GRAFT_OK;
}

extern "C" graft_status gops_binary(gops_binary_op op, int dtype, const gops_shape *sh, const void *a, const void *b,
                                    void *y, gcuda_stream s, graft_error *err)
{
    graft_status rc = go_check_shape(sh, "gops_binary", err);
    if (rc) return rc;
    int64_t n = go_numel(sh);
    if (!n) return GRAFT_OK;
    GCUDA_DISPATCH(dtype, "gops_binary",
                   return go_binary_t<T>(op, sh, (const T *)a, (const T *)b, (T *)y, n, s, err));
    return GRAFT_OK;
}

template <typename T>
__global__ void go_where_kernel(gops_shape sh, const uint8_t *c, const T *x, const T *z, T *y, int64_t n)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        go_offsets<3>(sh, i, off);
        y[i] = c[off[0]] ? x[off[1]] : z[off[2]];
    }
}

template <typename U>
static graft_status go_where_bits(const gops_shape *sh, const uint8_t *cond, const void *x, const void *z, void *y,
                                  int64_t n, gcuda_stream s, graft_error *err)
{
    gc_launch(gcuda_pdl_all(), (go_where_kernel<U>), gc_blocks(n, 256), 256, 0, s, *sh, cond, (const U *)x,
              (const U *)z, (U *)y, n);
    GCUDA_CHECK_LAUNCH("go_where_kernel");
    return GRAFT_OK;
}

extern "C" graft_status gops_where(int dtype, const gops_shape *sh, const uint8_t *cond, const void *x, const void *z,
                                   void *y, gcuda_stream s, graft_error *err)
{
    graft_status rc = go_check_shape(sh, "gops_where", err);
    if (rc) return rc;
    int64_t n = go_numel(sh);
    if (!n) return GRAFT_OK;
    switch (dtype) { /* integers and bool: their bits */
    case GRAFT_DTYPE_INT64: return go_where_bits<uint64_t>(sh, cond, x, z, y, n, s, err);
    case GRAFT_DTYPE_INT32: return go_where_bits<uint32_t>(sh, cond, x, z, y, n, s, err);
    case GRAFT_DTYPE_BOOL: return go_where_bits<uint8_t>(sh, cond, x, z, y, n, s, err);
    default: break;
    }
    GCUDA_DISPATCH(dtype, "gops_where", {
        gc_launch(gcuda_pdl_all(), (go_where_kernel<T>), gc_blocks(n, 256), 256, 0, s, *sh, cond, (const T *)x,
                  (const T *)z, (T *)y, n);
        GCUDA_CHECK_LAUNCH("go_where_kernel");
    });
    return GRAFT_OK;
}

/* ------------------------------------------------------------ integers */

template <typename T, int OP>
__global__ void go_int_binary_kernel(gops_shape sh, const T *a, const T *b, void *y, int64_t n)
{
    gc_pdl_wait();
    gc_pdl_trigger();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[2];
        go_offsets<2>(sh, i, off);
        const T u = a[off[0]], v = b[off[1]];
        if (OP == GOPS_I_EQUAL) ((uint8_t *)y)[i] = u == v;
        else if (OP == GOPS_I_LESS) ((uint8_t *)y)[i] = u < v;
        else if (OP == GOPS_I_GREATER) ((uint8_t *)y)[i] = u > v;
        else /* wrapping arithmetic, as the host's (two's complement) */
            ((T *)y)[i] = OP == GOPS_I_ADD   ? (T)((uint64_t)u + (uint64_t)v)
                          : OP == GOPS_I_SUB ? (T)((uint64_t)u - (uint64_t)v)
                          : OP == GOPS_I_MUL ? (T)((uint64_t)u * (uint64_t)v)
                          : OP == GOPS_I_MAX ? (u > v ? u : v)
                                             : (u < v ? u : v);
    }
}

template <typename T>
static graft_status go_int_binary_t(gops_int_op op, const gops_shape *sh, const T *a, const T *b, void *y, int64_t n,
                                    gcuda_stream s, graft_error *err)
{
    unsigned g = gc_blocks(n, 256);
    bool p = gcuda_pdl_all();
    switch (op) {
    case GOPS_I_ADD: gc_launch(p, (go_int_binary_kernel<T, GOPS_I_ADD>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_I_SUB: gc_launch(p, (go_int_binary_kernel<T, GOPS_I_SUB>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_I_MUL: gc_launch(p, (go_int_binary_kernel<T, GOPS_I_MUL>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_I_MAX: gc_launch(p, (go_int_binary_kernel<T, GOPS_I_MAX>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_I_MIN: gc_launch(p, (go_int_binary_kernel<T, GOPS_I_MIN>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_I_EQUAL: gc_launch(p, (go_int_binary_kernel<T, GOPS_I_EQUAL>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_I_LESS: gc_launch(p, (go_int_binary_kernel<T, GOPS_I_LESS>), g, 256, 0, s, *sh, a, b, y, n); break;
    case GOPS_I_GREATER: gc_launch(p, (go_int_binary_kernel<T, GOPS_I_GREATER>), g, 256, 0, s, *sh, a, b, y, n); break;
    default: return gcuda_errf(err, GRAFT_EINVAL, "gops_int_binary: op %d", (int)op);
    }
    GCUDA_CHECK_LAUNCH("go_int_binary_kernel");
    return GRAFT_OK;
}

extern "C" graft_status gops_int_binary(gops_int_op op, int dtype, const gops_shape *sh, const void *a, const void *b,
                                        void *y, gcuda_stream s, graft_error *err)
{
    graft_status rc = go_check_shape(sh, "gops_int_binary", err);
    if (rc) return rc;
    int64_t n = go_numel(sh);
    if (!n) return GRAFT_OK;
    if (dtype == GRAFT_DTYPE_INT64) return go_int_binary_t<int64_t>(op, sh, (const int64_t *)a, (const int64_t *)b, y, n, s, err);
    if (dtype == GRAFT_DTYPE_INT32) return go_int_binary_t<int32_t>(op, sh, (const int32_t *)a, (const int32_t *)b, y, n, s, err);
    return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gops_int_binary: dtype %d", dtype);
}

template <typename T> __global__ void go_int_clip_kernel(const T *x, T *y, int64_t n, int64_t lo, int64_t hi)
{
    gc_pdl_wait();
    gc_pdl_trigger();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t v = x[i];
        y[i] = (T)(v < lo ? lo : v > hi ? hi : v);
    }
}

extern "C" graft_status gops_int_clip(int dtype, const void *x, void *y, int64_t n, int64_t lo, int64_t hi,
                                      gcuda_stream s, graft_error *err)
{
    if (n <= 0) return GRAFT_OK;
    unsigned g = gc_blocks(n, 256);
    if (dtype == GRAFT_DTYPE_INT64)
        gc_launch(gcuda_pdl_all(), go_int_clip_kernel<int64_t>, g, 256, 0, s, (const int64_t *)x, (int64_t *)y, n, lo, hi);
    else if (dtype == GRAFT_DTYPE_INT32)
        gc_launch(gcuda_pdl_all(), go_int_clip_kernel<int32_t>, g, 256, 0, s, (const int32_t *)x, (int32_t *)y, n, lo, hi);
    else return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gops_int_clip: dtype %d", dtype);
    GCUDA_CHECK_LAUNCH("go_int_clip_kernel");
    return GRAFT_OK;
}

template <typename S, typename D> __global__ void go_int_cast_kernel(const S *x, D *y, int64_t n, bool to_bool)
{
    gc_pdl_wait();
    gc_pdl_trigger();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = to_bool ? (D)(x[i] != 0) : (D)x[i];
}

template <typename S>
static graft_status go_int_cast_from(int dst, const S *x, void *y, int64_t n, gcuda_stream s, graft_error *err)
{
    unsigned g = gc_blocks(n, 256);
    bool p = gcuda_pdl_all();
    switch (dst) {
    case GRAFT_DTYPE_INT64: gc_launch(p, go_int_cast_kernel<S, int64_t>, g, 256, 0, s, x, (int64_t *)y, n, false); break;
    case GRAFT_DTYPE_INT32: gc_launch(p, go_int_cast_kernel<S, int32_t>, g, 256, 0, s, x, (int32_t *)y, n, false); break;
    case GRAFT_DTYPE_BOOL: gc_launch(p, go_int_cast_kernel<S, uint8_t>, g, 256, 0, s, x, (uint8_t *)y, n, true); break;
    default: return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gops_int_cast: to dtype %d", dst);
    }
    GCUDA_CHECK_LAUNCH("go_int_cast_kernel");
    return GRAFT_OK;
}

extern "C" graft_status gops_int_cast(int src_dtype, int dst_dtype, const void *x, void *y, int64_t n, gcuda_stream s,
                                      graft_error *err)
{
    if (n <= 0) return GRAFT_OK;
    switch (src_dtype) {
    case GRAFT_DTYPE_INT64: return go_int_cast_from<int64_t>(dst_dtype, (const int64_t *)x, y, n, s, err);
    case GRAFT_DTYPE_INT32: return go_int_cast_from<int32_t>(dst_dtype, (const int32_t *)x, y, n, s, err);
    case GRAFT_DTYPE_BOOL: return go_int_cast_from<uint8_t>(dst_dtype, (const uint8_t *)x, y, n, s, err);
    default: return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gops_int_cast: from dtype %d", src_dtype);
    }
}

/* A block a line (outer, inner) of the axis: each thread sums a run of
 * consecutive elements, a scan over the threads' sums in shared memory
 * gives each run's offset, the runs are written in a second pass. */
#define GO_CUMSUM_THREADS 256
template <typename T>
__global__ void __launch_bounds__(GO_CUMSUM_THREADS)
    go_int_cumsum_kernel(const T *x, T *y, int64_t outer, int64_t len, int64_t inner, bool excl, bool rev)
{
    __shared__ uint64_t part[GO_CUMSUM_THREADS];
    gc_pdl_wait();
    gc_pdl_trigger();
    const int64_t per = (len + GO_CUMSUM_THREADS - 1) / GO_CUMSUM_THREADS;
    for (int64_t l = blockIdx.x; l < outer * inner; l += gridDim.x) {
        const int64_t o = l / inner, in = l % inner, k0 = threadIdx.x * per;
        /* k: the position in scan order; at(k): its element */
#define GO_AT(k) ((o * len + (rev ? len - 1 - (k) : (k))) * inner + in)
        uint64_t sum = 0;
        for (int64_t k = k0; k < k0 + per && k < len; k++) sum += (uint64_t)x[GO_AT(k)];
        part[threadIdx.x] = sum;
        __syncthreads();
        for (int off = 1; off < GO_CUMSUM_THREADS; off <<= 1) { /* inclusive scan of the runs' sums */
            uint64_t v = threadIdx.x >= off ? part[threadIdx.x - off] : 0;
            __syncthreads();
            part[threadIdx.x] += v;
            __syncthreads();
        }
        uint64_t acc = threadIdx.x ? part[threadIdx.x - 1] : 0;
        for (int64_t k = k0; k < k0 + per && k < len; k++) {
            const int64_t at = GO_AT(k);
            const T v = x[at];
            if (excl) {
                y[at] = (T)acc;
                acc += (uint64_t)v;
            } else {
                acc += (uint64_t)v;
                y[at] = (T)acc;
            }
        }
#undef GO_AT
        __syncthreads(); /* part is reused by the block's next line */
    }
}

extern "C" graft_status gops_int_cumsum(int dtype, const void *x, void *y, int64_t outer, int64_t len, int64_t inner,
                                        int exclusive, int reverse, gcuda_stream s, graft_error *err)
{
    if (outer < 0 || len < 0 || inner < 0) return gcuda_errf(err, GRAFT_EINVAL, "gops_int_cumsum: negative extent");
    int64_t lines = outer * inner;
    if (!lines || !len) return GRAFT_OK;
    unsigned g = (unsigned)(lines < 4096 ? lines : 4096), b = GO_CUMSUM_THREADS;
    if (dtype == GRAFT_DTYPE_INT64)
        gc_launch(gcuda_pdl_all(), go_int_cumsum_kernel<int64_t>, g, b, 0, s, (const int64_t *)x, (int64_t *)y, outer,
                  len, inner, exclusive != 0, reverse != 0);
    else if (dtype == GRAFT_DTYPE_INT32)
        gc_launch(gcuda_pdl_all(), go_int_cumsum_kernel<int32_t>, g, b, 0, s, (const int32_t *)x, (int32_t *)y, outer,
                  len, inner, exclusive != 0, reverse != 0);
    else return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gops_int_cumsum: dtype %d", dtype);
    GCUDA_CHECK_LAUNCH("go_int_cumsum_kernel");
    return GRAFT_OK;
}

/* gops_int_prog: one block, a thread an element. Plain loads (no .nc):
 * an operand may be what an earlier instruction of this launch wrote. */
__device__ __forceinline__ long long go_ip_ld(const void *p, int dt, int64_t i)
{
    return dt == GRAFT_DTYPE_INT64   ? ((const long long *)p)[i]
           : dt == GRAFT_DTYPE_INT32 ? (long long)((const int *)p)[i]
                                     : (long long)((const uint8_t *)p)[i];
}

/* A program kept in device memory (gops_int_prog_keep) with where its
 * operands come from: src[k][j], the shared slot holding operand j of
 * instruction k (-1: read at its address); slot[k], the slot instruction
 * k's output is copied to (-1: none); a slot is pitch values, as go_ip_ld
 * reads them back. Padded to 16 bytes (copied in 16-byte words). */
#define GO_IP_SMEM 32768 /* bytes of slots at most: with the scan (8 KB) and the program (2.4 KB), under 48 KB (no opt-in) */
struct __align__(16) go_iprog_k {
    gops_iprog p;
    signed char src[GOPS_IPROG_MAX][3], slot[GOPS_IPROG_MAX];
    signed char pre[GOPS_IPROG_MAX][3]; /* 1: read before the first instruction (go_ip_plan) */
    int pitch, slots;
    int one; /* every instruction of one element (a decode step's): one thread runs them (go_ip_run's ONE) */
};

/* The program p (in the kernel's parameters, or copied to shared memory:
 * q, with its slots in vals). ONE (a kept program of one-element
 * instructions): thread 0 alone runs them, without the block barriers
 * between instructions (its own stores are in program order for its later
 * loads) and without the scan (a CumSum of one element is the element, or
 * 0 exclusive). */
template <bool SLOTS, bool ONE = false>
__device__ __forceinline__ void go_ip_run(const gops_iprog &p, const go_iprog_k *q, long long *vals,
                                          const long long *pv, unsigned long long *scan)
{
    const int t = threadIdx.x;
    if (ONE && t) return;
    for (int k = 0; k < p.n; k++) {
        const gops_iprog_ins &I = p.ins[k];
        const bool act = ONE || t < I.n;
        long long v[3] = {0, 0, 0}, r = 0;
        if (act) {
            int off[3] = {0, 0, 0}, i = t;
            /* one element (a decode step's): offset 0, without the divisions, which one warp runs as a long
             * dependent chain (some 0.8 us an instruction over 13 instructions, H100, session 46) */
            if (!ONE && I.n > 1)
                for (int d = I.rank - 1; d >= 0; d--) {
                    const int c = i % I.dims[d];
                    i /= I.dims[d];
                    for (int j = 0; j < 3; j++) off[j] += c * I.st[j][d];
                }
            for (int j = 0; j < 3; j++)
                v[j] = !I.a[j]                     ? I.imm[j]
                       : SLOTS && q->src[k][j] >= 0 ? vals[q->src[k][j] * q->pitch + off[j]]
                       : SLOTS && q->pre[k][j]      ? pv[k * 3 + j]
                                                    : go_ip_ld(I.a[j], I.adt[j], off[j]);
            const unsigned long long ua = (unsigned long long)v[0], ub = (unsigned long long)v[1];
            switch (I.kind) {
            case GOPS_IP_BIN: /* wrapping arithmetic, as the host's (two's complement) */
                r = I.op == GOPS_I_ADD       ? (long long)(ua + ub)
                    : I.op == GOPS_I_SUB     ? (long long)(ua - ub)
                    : I.op == GOPS_I_MUL     ? (long long)(ua * ub)
                    : I.op == GOPS_I_MAX     ? (v[0] > v[1] ? v[0] : v[1])
                    : I.op == GOPS_I_MIN     ? (v[0] < v[1] ? v[0] : v[1])
                    : I.op == GOPS_I_EQUAL   ? (long long)(v[0] == v[1])
                    : I.op == GOPS_I_LESS    ? (long long)(v[0] < v[1])
                                             : (long long)(v[0] > v[1]);
                break;
            case GOPS_IP_CLIP: r = v[0] < I.imm[1] ? I.imm[1] : v[0] > I.imm[2] ? I.imm[2] : v[0]; break;
            case GOPS_IP_WHERE: r = v[0] ? v[1] : v[2]; break;
            default: r = v[0]; break; /* CAST, CUMSUM's element */
            }
        }
        if (ONE && I.kind == GOPS_IP_CUMSUM) {
            r = I.excl ? 0 : r;
        } else if (I.kind == GOPS_IP_CUMSUM) { /* a Hillis-Steele scan along the axis, every thread at every barrier */
            const int pos = act ? (t / I.inner) % I.len : 0;
            scan[t] = (unsigned long long)r;
            for (int o = 1; o < I.len; o <<= 1) {
                __syncthreads();
                unsigned long long u = 0;
                if (act && (I.rev ? pos + o < I.len : pos >= o)) u = scan[I.rev ? t + o * I.inner : t - o * I.inner];
                __syncthreads();
                scan[t] += u;
            }
            __syncthreads();
            r = (long long)(I.excl ? scan[t] - (unsigned long long)v[0] : scan[t]);
        }
        if (act) {
            long long back; /* what go_ip_ld reads back from the store */
            if (I.ydt == GRAFT_DTYPE_INT64) ((long long *)I.y)[t] = back = r;
            else if (I.ydt == GRAFT_DTYPE_INT32) ((int *)I.y)[t] = (int)r, back = (int)r;
            else {
                const uint8_t b = (uint8_t)(I.kind == GOPS_IP_CAST ? r != 0 : r);
                ((uint8_t *)I.y)[t] = b;
                back = b;
            }
            if (SLOTS && q->slot[k] >= 0) vals[q->slot[k] * q->pitch + t] = back;
        }
        if (!ONE) __syncthreads(); /* instruction k's writes, seen by k + 1's reads */
    }
}

__global__ void __launch_bounds__(GOPS_IPROG_N) go_int_prog_kernel(const __grid_constant__ gops_iprog p)
{
    __shared__ unsigned long long scan[GOPS_IPROG_N];
    gc_pdl_wait();
    gc_pdl_trigger();
    go_ip_run<false>(p, NULL, NULL, NULL, scan);
}

/* The kept program: copied to shared memory with 16-byte loads issued at
 * once (a block's one memory latency) rather than read field by field from
 * the kernel's parameters, cold at each launch; its outputs' copies in
 * shared memory read back by the instructions that take them whole
 * (go_ip_plan) rather than from L2. Gemma's 13-instruction token routing:
 * 11.2-11.7 us a decode step against 12.6 from the parameters (H100,
 * session 46); the rest is each instruction's dependent chain in one warp.
 * The one-element operands that no earlier instruction writes (pre: the
 * ids, other kernels' outputs) are loaded together right after the wait,
 * their addresses read before it, rather than one L2 latency in the chain
 * of each instruction that takes one. */
__global__ void __launch_bounds__(GOPS_IPROG_N) go_int_prog_dev_kernel(const go_iprog_k *dq)
{
    __shared__ unsigned long long scan[GOPS_IPROG_N];
    __shared__ go_iprog_k sq;
    __shared__ long long pv[GOPS_IPROG_MAX * 3];
    extern __shared__ long long ip_vals[]; /* [sq.slots][sq.pitch] */
    const uint4 *w = reinterpret_cast<const uint4 *>(dq);
    uint4 *sw = reinterpret_cast<uint4 *>(&sq);
    for (int i = (int)threadIdx.x; i < (int)(sizeof sq / 16); i += (int)blockDim.x) sw[i] = w[i]; /* written before */
    /* operands t and t + blockDim.x (blockDim.x >= 32: two cover the 48): address and type */
    const void *pa[2] = {NULL, NULL};
    int pd[2] = {0, 0};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int i = (int)threadIdx.x + h * (int)blockDim.x;
        if (i < GOPS_IPROG_MAX * 3 && dq->pre[i / 3][i % 3]) pa[h] = dq->p.ins[i / 3].a[i % 3], pd[h] = dq->p.ins[i / 3].adt[i % 3];
    }
    gc_pdl_wait();
    gc_pdl_trigger();
#pragma unroll
    for (int h = 0; h < 2; h++)
        if (pa[h]) pv[(int)threadIdx.x + h * (int)blockDim.x] = go_ip_ld(pa[h], pd[h], 0);
    __syncthreads();
    if (sq.one) go_ip_run<true, true>(sq.p, &sq, ip_vals, pv, scan);
    else go_ip_run<true>(sq.p, &sq, ip_vals, pv, scan);
}

static size_t go_ip_size(int dt) { return dt == GRAFT_DTYPE_INT64 ? 8 : dt == GRAFT_DTYPE_INT32 ? 4 : 1; }

/* Whether instruction W writes any byte of [a0, a1). */
static bool go_ip_writes(const gops_iprog_ins *W, uintptr_t a0, uintptr_t a1)
{
    const uintptr_t b0 = (uintptr_t)W->y, b1 = b0 + (size_t)W->n * go_ip_size(W->ydt);
    return !(b1 <= a0 || a1 <= b0);
}

/* Whether operand j of instruction k reads an earlier instruction's output
 * from its shared copy: where a[j] is the output y of the last instruction
 * m < k that wrote there, read as m's type, at offsets inside m's n
 * elements (no negative stride), and no instruction between m and k wrote
 * bytes of it. Slots go to outputs in order until GO_IP_SMEM. */
static void go_ip_slot(go_iprog_k *q, int k, int j, int most)
{
    const gops_iprog *p = &q->p;
    const gops_iprog_ins *I = &p->ins[k];
    int m = k - 1;
    while (m >= 0 && p->ins[m].y != I->a[j]) m--;
    if (m < 0 || p->ins[m].ydt != I->adt[j]) return;
    const gops_iprog_ins *M = &p->ins[m];
    long long hi = 0;
    for (int d = 0; d < I->rank; d++) {
        if (I->st[j][d] < 0) return;
        hi += (long long)(I->dims[d] - 1) * I->st[j][d];
    }
    if (hi >= M->n) return;
    const uintptr_t a0 = (uintptr_t)M->y, a1 = a0 + (size_t)M->n * go_ip_size(M->ydt);
    for (int w = m + 1; w < k; w++)
        if (go_ip_writes(&p->ins[w], a0, a1)) return;
    if (q->slot[m] < 0) {
        if ((size_t)(q->slots + 1) * (size_t)most * sizeof(long long) > GO_IP_SMEM) return;
        q->slot[m] = (signed char)q->slots++;
    }
    q->src[k][j] = q->slot[m];
}

/* Where each operand comes from: an earlier output's shared copy
 * (go_ip_slot); else, for a one-element instruction (offset 0), read
 * before the first instruction (pre) where no instruction before k writes
 * any of its bytes; else at its address when the instruction runs. */
static void go_ip_plan(go_iprog_k *q, int most)
{
    const gops_iprog *p = &q->p;
    q->pitch = most;
    q->slots = 0;
    memset(q->src, -1, sizeof q->src);
    memset(q->slot, -1, sizeof q->slot);
    memset(q->pre, 0, sizeof q->pre);
    for (int k = 0; k < p->n; k++) {
        const gops_iprog_ins *I = &p->ins[k];
        for (int j = 0; j < 3; j++) {
            if (!I->a[j]) continue;
            go_ip_slot(q, k, j, most);
            if (q->src[k][j] >= 0 || I->n != 1) continue;
            const uintptr_t a0 = (uintptr_t)I->a[j], a1 = a0 + go_ip_size(I->adt[j]);
            bool ok = true;
            for (int m = 0; m < k && ok; m++) ok = !go_ip_writes(&p->ins[m], a0, a1);
            q->pre[k][j] = ok;
        }
    }
}

/* GRAFT_CUDA_IPROG_ONE=0: a kept program of one-element instructions runs
 * as any other (a thread an element, a barrier between instructions), not
 * by one thread alone (read at each keep). */
static bool ip_one_off(void) { return gc_env_is("GRAFT_CUDA_IPROG_ONE", "0"); }

/* The program's checks; *most: its widest instruction's elements. */
static graft_status go_ip_check(const gops_iprog *p, int *most, graft_error *err)
{
    if (p->n < 1 || p->n > GOPS_IPROG_MAX) return gcuda_errf(err, GRAFT_EINVAL, "gops_int_prog: %d instructions", p->n);
    *most = 1;
    for (int k = 0; k < p->n; k++) {
        const gops_iprog_ins *I = &p->ins[k];
        if (I->n < 1 || I->n > GOPS_IPROG_N || I->rank > GOPS_IPROG_RANK || I->kind > GOPS_IP_WHERE ||
            (I->kind == GOPS_IP_CUMSUM && (I->len < 1 || I->inner < 1 || (int64_t)I->len * I->inner > I->n)))
            return gcuda_errf(err, GRAFT_EINVAL, "gops_int_prog: instruction %d", k);
        if (I->n > *most) *most = I->n;
    }
    return GRAFT_OK;
}

extern "C" graft_status gops_int_prog(const gops_iprog *p, gcuda_stream s, graft_error *err)
{
    int most;
    graft_status st = go_ip_check(p, &most, err);
    if (st) return st;
    gc_launch(gcuda_pdl_all(), go_int_prog_kernel, 1, (unsigned)((most + 31) / 32 * 32), 0, s, *p);
    GCUDA_CHECK_LAUNCH("go_int_prog_kernel");
    return GRAFT_OK;
}

extern "C" graft_status gops_int_prog_keep(const gops_iprog *p, gops_iprog_dev *kd, gcuda_stream s, graft_error *err)
{
    int most;
    graft_status st = go_ip_check(p, &most, err);
    if (st) return st;
    go_iprog_k *q = (go_iprog_k *)calloc(1, sizeof *q); /* zeroed padding: the bytes uploaded are all set */
    if (!q) return gcuda_errf(err, GRAFT_ENOMEM, "gops_int_prog_keep: out of memory");
    q->p = *p;
    go_ip_plan(q, most);
    q->one = most == 1 && !ip_one_off();
    if (!kd->d) {
        cudaError_t e = cudaMalloc(&kd->d, sizeof *q);
        if (e != cudaSuccess) {
            free(q);
            (void)cudaGetLastError();
            kd->d = NULL;
            return gcuda_errf(err, GRAFT_ENOMEM, "gops_int_prog_keep: %zu bytes: %s", sizeof *q, cudaGetErrorString(e));
        }
    }
    /* pageable: staged by the driver before this returns, ordered behind the stream's work */
    cudaError_t e = cudaMemcpyAsync(kd->d, q, sizeof *q, cudaMemcpyHostToDevice, (cudaStream_t)s);
    kd->threads = (most + 31) / 32 * 32;
    kd->smem = (size_t)q->slots * (size_t)most * sizeof(long long);
    free(q);
    if (e != cudaSuccess) return gcuda_fail(err, e, "gops_int_prog_keep: upload", __FILE__, __LINE__);
    return GRAFT_OK;
}

extern "C" graft_status gops_int_prog_run(const gops_iprog_dev *kd, gcuda_stream s, graft_error *err)
{
    if (!kd->d || kd->threads < 32 || kd->threads > GOPS_IPROG_N || kd->smem > GO_IP_SMEM)
        return gcuda_errf(err, GRAFT_EINVAL, "gops_int_prog_run: no kept program");
    gc_launch(gcuda_pdl_all(), go_int_prog_dev_kernel, 1, (unsigned)kd->threads, kd->smem, s,
              (const go_iprog_k *)kd->d);
    GCUDA_CHECK_LAUNCH("go_int_prog_dev_kernel");
    return GRAFT_OK;
}

extern "C" void gops_int_prog_free(gops_iprog_dev *kd)
{
    if (kd->d) cudaFree(kd->d);
    kd->d = NULL;
}

/* ------------------------------------------------------------ unary, cast */

template <int OP> __device__ __forceinline__ float go_un(float x, float lo, float hi) { return go_un_f(OP, x, lo, hi); }

template <typename T, int OP>
__global__ void go_unary_kernel(const T *x, T *y, int64_t n, float lo, float hi)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = gc_to<T>(go_un<OP>(gc_f(x[i]), lo, hi));
}

#define GO_UN_CASE(OPC)                                                                     \
    case OPC: gc_launch(gcuda_pdl_all(), (go_unary_kernel<T, OPC>), g, 256, 0, s, x, y, n, lo, hi); break;

template <typename T>
static graft_status go_unary_t(gops_unary_op op, const T *x, T *y, int64_t n, float lo, float hi, gcuda_stream s,
                               graft_error *err)
{
    unsigned g = gc_blocks(n, 256);
    switch (op) {
        GO_UN_CASE(GOPS_NEG)
        GO_UN_CASE(GOPS_SQRT)
        GO_UN_CASE(GOPS_TANH)
        GO_UN_CASE(GOPS_SIGMOID)
        GO_UN_CASE(GOPS_GELU_ERF)
        GO_UN_CASE(GOPS_GELU_TANH)
        GO_UN_CASE(GOPS_CLIP)
        GO_UN_CASE(GOPS_RELU)
        GO_UN_CASE(GOPS_EXP)
        GO_UN_CASE(GOPS_ABS)
        GO_UN_CASE(GOPS_RECIPROCAL)
        GO_UN_CASE(GOPS_IDENTITY)
    default: return gcuda_errf(err, GRAFT_EINVAL, "gops_unary: op %d", (int)op);
    }
    GCUDA_CHECK_LAUNCH("go_unary_kernel");
    return GRAFT_OK;
}

extern "C" graft_status gops_unary(gops_unary_op op, int dtype, const void *x, void *y, int64_t n, float lo, float hi,
                                   gcuda_stream s, graft_error *err)
{
    if (n <= 0) return GRAFT_OK;
    GCUDA_DISPATCH(dtype, "gops_unary", return go_unary_t<T>(op, (const T *)x, (T *)y, n, lo, hi, s, err));
    return GRAFT_OK;
}

template <typename S, typename D> __global__ void go_cast_kernel(const S *x, D *y, int64_t n)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = gc_to<D>(gc_f(x[i]));
}

template <typename S>
static graft_status go_cast_from(int dst, const S *x, void *y, int64_t n, gcuda_stream s, graft_error *err)
{
    unsigned g = gc_blocks(n, 256);
    GCUDA_DISPATCH(dst, "gops_cast", {
        gc_launch(gcuda_pdl_all(), (go_cast_kernel<S, T>), g, 256, 0, s, x, (T *)y, n);
        GCUDA_CHECK_LAUNCH("go_cast_kernel");
    });
    return GRAFT_OK;
}

extern "C" graft_status gops_cast(int src_dtype, int dst_dtype, const void *x, void *y, int64_t n, gcuda_stream s,
                                  graft_error *err)
{
    if (n <= 0) return GRAFT_OK;
    GCUDA_DISPATCH(src_dtype, "gops_cast", return go_cast_from<T>(dst_dtype, (const T *)x, y, n, s, err));
    return GRAFT_OK;
}

/* ------------------------------------------------------------ strided copy */

template <typename E> __global__ void go_copy_kernel(gops_shape sh, const E *src, E *dst, int64_t n)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[2];
        go_offsets<2>(sh, i, off);
        dst[off[1]] = src[off[0]];
    }
}

extern "C" graft_status gops_copy(size_t esize, const gops_shape *sh, const void *src, void *dst, gcuda_stream s,
                                  graft_error *err)
{
    graft_status rc = go_check_shape(sh, "gops_copy", err);
    if (rc) return rc;
    int64_t n = go_numel(sh);
    if (!n) return GRAFT_OK;
    unsigned g = gc_blocks(n, 256);
    switch (esize) {
    case 1:
        gc_launch(gcuda_pdl_all(), (go_copy_kernel<uint8_t>), g, 256, 0, s, *sh, (const uint8_t *)src, (uint8_t *)dst,
                  n);
        break;
    case 2:
        gc_launch(gcuda_pdl_all(), (go_copy_kernel<uint16_t>), g, 256, 0, s, *sh, (const uint16_t *)src,
                  (uint16_t *)dst, n);
        break;
    case 4:
        gc_launch(gcuda_pdl_all(), (go_copy_kernel<uint32_t>), g, 256, 0, s, *sh, (const uint32_t *)src,
                  (uint32_t *)dst, n);
        break;
    case 8:
        gc_launch(gcuda_pdl_all(), (go_copy_kernel<uint64_t>), g, 256, 0, s, *sh, (const uint64_t *)src,
                  (uint64_t *)dst, n);
        break;
    default: return gcuda_errf(err, GRAFT_EINVAL, "gops_copy: element size %zu", esize);
    }
    GCUDA_CHECK_LAUNCH("go_copy_kernel");
    return GRAFT_OK;
}

/* ------------------------------------------------------------ reductions */

template <typename T> __global__ void go_reduce_kernel(const T *x, T *y, int64_t dim, int mean)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    __shared__ float scratch[32];
    const T *r = x + blockIdx.x * dim;
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) acc += gc_f(r[i]);
    acc = gc_block_sum(acc, scratch);
    if (threadIdx.x == 0) y[blockIdx.x] = gc_to<T>(mean ? acc / (float)dim : acc);
}

extern "C" graft_status gops_reduce_last(int dtype, const void *x, void *y, int64_t rows, int64_t dim, int mean,
                                         gcuda_stream s, graft_error *err)
{
    if (rows <= 0) return GRAFT_OK;
    if (rows > 0x7fffffffLL) return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gops_reduce_last: %lld rows", (long long)rows);
    GCUDA_DISPATCH(dtype, "gops_reduce_last", {
        gc_launch(gcuda_pdl_all(), (go_reduce_kernel<T>), (unsigned)rows, 256, 0, s, (const T *)x, (T *)y, dim, mean);
        GCUDA_CHECK_LAUNCH("go_reduce_kernel");
    });
    return GRAFT_OK;
}

/* ------------------------------------------------------------ fused elementwise chains */

template <typename I> __global__ void go_fuse_kernel(gops_fuse f, I n)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        I off = 0, j = i;
        for (int d = f.rank - 1; d >= 0; d--) {
            I dn = (I)f.dims[d];
            off += (j % dn) * (I)f.st[0][d];
            j /= dn;
        }
        go_st(f.y, f.y_dtype, i, go_chain<I>(f, go_ld(f.leaf[0], f.leaf_dtype[0], off), i));
    }
}

/* RMSNorm head: one block per row of leaf 0 (contiguous, the output's
 * shape), EPT elements a thread (the fewest that hold the row: a thread's
 * instructions are the row's latency, one block running alone; ncu: a
 * 256-element row at EPT 8 ran 7.3 us, 47% of its stalls waiting for
 * instructions, 7 of every 8 of them predicated off). */
#define GO_FUSE_NORM_THREADS 256
template <typename I, int EPT> __global__ void __launch_bounds__(GO_FUSE_NORM_THREADS) go_fuse_norm_kernel(gops_fuse f)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    __shared__ float scratch[32];
    go_norm_chain_row<I, false, EPT>(f, (I)blockIdx.x * (I)f.norm_dim, scratch);
}

template <typename I> static void go_fuse_norm_go(const gops_fuse *f, unsigned rows, gcuda_stream s)
{
    const int64_t per = (f->norm_dim + GO_FUSE_NORM_THREADS - 1) / GO_FUSE_NORM_THREADS;
    if (per <= 1) gc_launch(gcuda_pdl_all(), (go_fuse_norm_kernel<I, 1>), rows, GO_FUSE_NORM_THREADS, 0, s, *f);
    else if (per <= 2) gc_launch(gcuda_pdl_all(), (go_fuse_norm_kernel<I, 2>), rows, GO_FUSE_NORM_THREADS, 0, s, *f);
    else if (per <= 4) gc_launch(gcuda_pdl_all(), (go_fuse_norm_kernel<I, 4>), rows, GO_FUSE_NORM_THREADS, 0, s, *f);
    else gc_launch(gcuda_pdl_all(), (go_fuse_norm_kernel<I, GO_ROW_EPT>), rows, GO_FUSE_NORM_THREADS, 0, s, *f);
}

extern "C" graft_status gops_fused(const gops_fuse *f, gcuda_stream s, graft_error *err)
{
    if (!go_fuse_ok(*f))
        return gcuda_errf(err, GRAFT_EINVAL, "gops_fused: rank %d, %d instructions, %d leaves (or an instruction "
                          "reading a leaf past them)", f->rank, f->n_ins, f->n_leaf);
    const int64_t n = go_fuse_numel(*f);
    if (n <= 0) return GRAFT_OK;
    bool small = n < (1LL << 30); /* 32-bit index arithmetic, no overflow of i + stride */
    if (f->norm_dim > 0) {
        if (f->norm_dim > 0x7fffffffLL || n % f->norm_dim)
            return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gops_fused: norm over %lld of %lld", (long long)f->norm_dim,
                              (long long)n);
        unsigned rows = (unsigned)(n / f->norm_dim);
        if (small) go_fuse_norm_go<int>(f, rows, s);
        else go_fuse_norm_go<int64_t>(f, rows, s);
        GCUDA_CHECK_LAUNCH("go_fuse_norm_kernel");
        return GRAFT_OK;
    }
    if (small) gc_launch(gcuda_pdl_all(), (go_fuse_kernel<int>), gc_blocks(n, 256), 256, 0, s, *f, (int)n);
    else gc_launch(gcuda_pdl_all(), (go_fuse_kernel<int64_t>), gc_blocks(n, 256), 256, 0, s, *f, n);
    GCUDA_CHECK_LAUNCH("go_fuse_kernel");
    return GRAFT_OK;
}

/* ------------------------------------------------------------ argmax */

/* Blocks over 16-byte vectors of x (grid-stride, so each thread's indices
 * ascend and it keeps its first maximum), each block's best to ws, the last
 * block to finish (a counter in ws, reset by it) picks among them: the larger
 * value, the lower index on a tie. As the host's loop (best = 0; i > 0 wins
 * on x[i] > x[best]): NaN never wins, and a NaN at 0 or nothing above -inf
 * gives 0. bi == n: nothing seen. */
#define GO_AMAX_THREADS 256
__device__ __forceinline__ void go_amax_take(float v, int64_t i, int64_t n, float &bv, int64_t &bi)
{
    if (i < n && (bi == n || v > bv || (v == bv && i < bi))) {
        bv = v;
        bi = i;
    }
}

__device__ __forceinline__ void go_amax_block(float &bv, int64_t &bi, int64_t n)
{
    __shared__ float sv[GO_AMAX_THREADS / 32];
    __shared__ int64_t si[GO_AMAX_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) {
        float v = __shfl_down_sync(0xffffffffu, bv, o);
        int64_t i = __shfl_down_sync(0xffffffffu, bi, o);
        go_amax_take(v, i, n, bv, bi);
    }
    if ((threadIdx.x & 31) == 0) sv[threadIdx.x >> 5] = bv, si[threadIdx.x >> 5] = bi;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < GO_AMAX_THREADS / 32; w++) go_amax_take(sv[w], si[w], n, bv, bi);
}

template <typename T>
__global__ void __launch_bounds__(GO_AMAX_THREADS)
    go_argmax_kernel(const T *x, int64_t n, bool vec, int64_t *out, int32_t *out32, int64_t *out_h, T *keep, void *ws)
{
    constexpr int V = 16 / (int)sizeof(T);
    unsigned *counter = (unsigned *)ws;
    float *pv = (float *)((char *)ws + 16);
    int64_t *pi = (int64_t *)(pv + GOPS_ARGMAX_BLOCKS);
    float bv = -INFINITY;
    int64_t bi = n;
    const int64_t t0 = (int64_t)blockIdx.x * GO_AMAX_THREADS + threadIdx.x, stride = (int64_t)gridDim.x * GO_AMAX_THREADS;
    gc_pdl_wait(); /* x is the kernel before's output (a programmatic dependent: GRAFT_CUDA_PDL=all) */
    const int64_t nv = vec ? n / V : 0;
#pragma unroll 4
    for (int64_t c = t0; c < nv; c += stride) {
        float f[V];
        const uint4 u = __ldg(reinterpret_cast<const uint4 *>(x) + c);
        if (keep) reinterpret_cast<uint4 *>(keep)[c] = u;
        gc_unpack<T>(u, f);
#pragma unroll
        for (int k = 0; k < V; k++)
            if (f[k] > bv || (bi == n && !isnan(f[k]))) bv = f[k], bi = c * V + k;
    }
    for (int64_t i = nv * V + t0; i < n; i += stride) {
        if (keep) keep[i] = x[i];
        float v = gc_f(x[i]);
        if (v > bv || (bi == n && !isnan(v))) bv = v, bi = i;
    }
    go_amax_block(bv, bi, n);
    if (threadIdx.x == 0) {
        pv[blockIdx.x] = bv;
        pi[blockIdx.x] = bi;
    }
    if (!gc_last_block(counter, gridDim.x)) return;
    bv = -INFINITY;
    bi = n;
    for (int b = threadIdx.x; b < (int)gridDim.x; b += GO_AMAX_THREADS) go_amax_take(__ldcg(pv + b), __ldcg(pi + b), n, bv, bi);
    go_amax_block(bv, bi, n);
    if (threadIdx.x == 0) {
        const int64_t id = bi == n || isnan(gc_f(x[0])) ? 0 : bi;
        if (out) *out = id;
        if (out32) *out32 = (int32_t)id;
        if (out_h) *out_h = id;
        *counter = 0;
    }
}

extern "C" graft_status gops_argmax_to(int dtype, const void *x, int64_t n, int64_t *out, int32_t *out32,
                                       int64_t *out_h, void *keep, void *ws, gcuda_stream s, graft_error *err)
{
    if (n <= 0) return gcuda_errf(err, GRAFT_EINVAL, "gops_argmax: %lld elements", (long long)n);
    if (!ws || (uintptr_t)ws % 16) return gcuda_errf(err, GRAFT_EINVAL, "gops_argmax: no 16-byte aligned workspace");
    size_t es = gcuda_dtype_size(dtype);
    /* the vector path copies whole vectors: x and keep alike aligned */
    bool vec = es && (uintptr_t)x % 16 == 0 && (uintptr_t)keep % 16 == 0;
    int64_t per = (int64_t)GO_AMAX_THREADS * (int64_t)(es ? 16 / es : 1); /* a vector a thread, up to the cap */
    int64_t blocks = (n + per - 1) / per;
    if (blocks > GOPS_ARGMAX_BLOCKS) blocks = GOPS_ARGMAX_BLOCKS;
    GCUDA_DISPATCH(dtype, "gops_argmax", {
        gc_launch(gcuda_pdl_all(), go_argmax_kernel<T>, (unsigned)blocks, GO_AMAX_THREADS, 0, s, (const T *)x, n, vec,
                  out, out32, out_h, (T *)keep, ws);
        GCUDA_CHECK_LAUNCH("go_argmax_kernel");
    });
    return GRAFT_OK;
}

extern "C" graft_status gops_argmax(int dtype, const void *x, int64_t n, int64_t *out, void *ws, gcuda_stream s,
                                    graft_error *err)
{
    return gops_argmax_to(dtype, x, n, out, NULL, NULL, NULL, ws, s, err);
}

template <bool AHEAD> __global__ void go_words_kernel(uint32_t *dst, const uint32_t *src, int n)
{
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += (int)(gridDim.x * blockDim.x)) dst[i] = src[i];
    if (AHEAD) gc_pdl_wait(); /* the kernel before ended: so has this one, for the kernel after (no trigger) */
}

/* ahead: gops_copy_words_ahead's form (a programmatic dependent) */
static graft_status go_copy_words(bool ahead, uint32_t *dst, const uint32_t *src, int n, gcuda_stream s,
                                  graft_error *err)
{
    if (n < 0 || (n && (!dst || !src)))
        return gcuda_errf(err, GRAFT_EINVAL, "%s: %d words", ahead ? "gops_copy_words_ahead" : "gops_copy_words", n);
    if (!n) return GRAFT_OK;
    if (ahead) gc_launch(gcuda_pdl_all(), go_words_kernel<true>, gc_blocks(n, 128), 128, 0, s, dst, src, n);
    else go_words_kernel<false><<<gc_blocks(n, 128), 128, 0, s>>>(dst, src, n);
    GCUDA_CHECK_LAUNCH("go_words_kernel");
    return GRAFT_OK;
}

extern "C" graft_status gops_copy_words(uint32_t *dst, const uint32_t *src, int n, gcuda_stream s, graft_error *err)
{
    return go_copy_words(false, dst, src, n, s, err);
}

extern "C" graft_status gops_copy_words_ahead(uint32_t *dst, const uint32_t *src, int n, gcuda_stream s, graft_error *err)
{
    return go_copy_words(true, dst, src, n, s, err);
}

/* ------------------------------------------------------------ attention */

#define GO_ATT_WARPS 4
#define GO_ATT_MAXV 16 /* values per lane: vd <= 512 */

template <typename T> __global__ void go_attn_kernel(gops_attn_args a)
{
    extern __shared__ float sm[];
    float *qs = sm;                    /* [hd] */
    float *part = sm + a.hd;           /* per warp: m, l, acc[vd] */
    int64_t row = blockIdx.x;
    int64_t i = row % a.Sq, bh = row / a.Sq, h = bh % a.Hq, b = bh / a.Hq;
    int64_t kh = h / (a.Hq / a.Hkv);
    int64_t Tb = a.T;
    int64_t past = a.past;
    if (a.kv_len) {
        Tb = a.kv_len[b];
        if (Tb > a.T) Tb = a.T;
        past = Tb - a.Sq;
    }
    int64_t p = past + i;
    const T *q = (const T *)a.q + b * a.qs[0] + h * a.qs[1] + i * a.qs[2];
    for (int64_t d = threadIdx.x; d < a.hd; d += blockDim.x) qs[d] = gc_f(q[d]);
    __syncthreads();
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const T *Kb = (const T *)a.k + b * a.ks[0] + kh * a.ks[1];
    const T *Vb = (const T *)a.v + b * a.vs[0] + kh * a.vs[1];
    float m = -INFINITY, l = 0.0f, acc[GO_ATT_MAXV];
#pragma unroll
    for (int k = 0; k < GO_ATT_MAXV; k++) acc[k] = 0.0f;
    for (int64_t j = w; j < Tb; j += GO_ATT_WARPS) {
        if (a.causal && j > p) continue;
        if (a.window_left >= 0 && p - j > a.window_left) continue;
        float bias = 0.0f;
        if (a.mask_kind) {
            if (j >= a.mlast) continue;
            int64_t mo = b * a.ms[0] + h * a.ms[1] + i * a.ms[2] + j * a.ms[3];
            if (a.mask_kind == 1) {
                if (!((const uint8_t *)a.mask)[mo]) continue;
            } else if (a.mask_kind == 2) {
                bias = gc_f(((const T *)a.mask)[mo]);
            } else {
                bias = ((const float *)a.mask)[mo];
            }
        }
        const T *kr = Kb + j * a.ks[2];
        float dot = 0.0f;
        for (int64_t d = lane; d < a.hd; d += 32) dot += qs[d] * gc_f(kr[d]);
        dot = gc_warp_sum(dot);
        float sc = dot * a.scale;
        if (a.softcap > 0.0f) sc = a.softcap * tanhf(sc / a.softcap);
        sc += bias;
        if (isinf(sc) && sc < 0) continue;
        float mn = fmaxf(m, sc);
        float corr = m == -INFINITY ? 0.0f : expf(m - mn);
        float pj = expf(sc - mn);
        l = l * corr + pj;
        const T *vr = Vb + j * a.vs[2];
#pragma unroll
        for (int k = 0; k < GO_ATT_MAXV; k++) {
            int64_t d = lane + 32 * k;
            if (d < a.vd) acc[k] = acc[k] * corr + pj * gc_f(vr[d]);
        }
        m = mn;
    }
    float *mine = part + w * (a.vd + 2);
    if (lane == 0) {
        mine[0] = m;
        mine[1] = l;
    }
#pragma unroll
    for (int k = 0; k < GO_ATT_MAXV; k++) {
        int64_t d = lane + 32 * k;
        if (d < a.vd) mine[2 + d] = acc[k];
    }
    __syncthreads();
    float M = -INFINITY;
    for (int x = 0; x < GO_ATT_WARPS; x++) M = fmaxf(M, part[x * (a.vd + 2)]);
    float L = 0.0f;
    for (int x = 0; x < GO_ATT_WARPS; x++) {
        float mx = part[x * (a.vd + 2)];
        if (mx != -INFINITY) L += part[x * (a.vd + 2) + 1] * expf(mx - M);
    }
    T *y = (T *)a.y + b * a.ys[0] + h * a.ys[1] + i * a.ys[2];
    for (int64_t d = threadIdx.x; d < a.vd; d += blockDim.x) {
        float o = 0.0f;
        if (L > 0.0f) {
            for (int x = 0; x < GO_ATT_WARPS; x++) {
                float mx = part[x * (a.vd + 2)];
                if (mx != -INFINITY) o += part[x * (a.vd + 2) + 2 + d] * expf(mx - M);
            }
            o /= L;
        }
        y[d] = gc_to<T>(o);
    }
}

extern "C" graft_status gops_attention(const gops_attn_args *a, gcuda_stream s, graft_error *err)
{
    if (a->Hkv <= 0 || a->Hq % a->Hkv || a->hd <= 0 || a->vd <= 0 || a->vd > 32 * GO_ATT_MAXV || a->hd > 4096)
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gops_attention: heads %lld/%lld, head sizes %lld/%lld",
                          (long long)a->Hq, (long long)a->Hkv, (long long)a->hd, (long long)a->vd);
    int64_t rows = a->B * a->Hq * a->Sq;
    if (rows <= 0) return GRAFT_OK;
    if (rows > 0x7fffffffLL) return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gops_attention: %lld rows", (long long)rows);
    size_t smem = (size_t)(a->hd + GO_ATT_WARPS * (a->vd + 2)) * sizeof(float);
    GCUDA_DISPATCH(a->dtype, "gops_attention", {
        go_attn_kernel<T><<<(unsigned)rows, 32 * GO_ATT_WARPS, smem, s>>>(*a);
        GCUDA_CHECK_LAUNCH("go_attn_kernel");
    });
    return GRAFT_OK;
}
