/* Device arithmetic shared by the generic ops (ops.cu) and the kernels
 * that run a fused elementwise chain as their epilogue (gemv_rows.cu):
 * binary and unary ops by code, loads and stores by dtype, the chain
 * interpreter (gops_fuse, gcuda_ops.h) and its RMSNorm-headed row. */
#ifndef GRAFT_KERNELS_CUDA_GCUDA_CHAIN_CUH
#define GRAFT_KERNELS_CUDA_GCUDA_CHAIN_CUH

#include <math.h>

#include "kernels/cuda/gcuda_common.cuh"
#include "kernels/cuda/gcuda_ops.h"

__device__ __forceinline__ float go_bin_f(int op, float a, float b)
{
    switch (op) {
    case GOPS_ADD: return a + b;
    case GOPS_SUB: return a - b;
    case GOPS_MUL: return a * b;
    case GOPS_DIV: return a / b;
    case GOPS_POW: return powf(a, b);
    case GOPS_MAX: return isnan(a) || isnan(b) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
    default: return isnan(a) || isnan(b) ? __int_as_float(0x7fc00000) : fminf(a, b);
    }
}

__device__ __forceinline__ float go_un_f(int op, float x, float lo, float hi)
{
    switch (op) {
    case GOPS_NEG: return -x;
    case GOPS_SQRT: return sqrtf(x);
    case GOPS_TANH: return tanhf(x);
    case GOPS_SIGMOID: return 1.0f / (1.0f + expf(-x));
    /* both without the 1 + tanh / 1 + erf cancellation for negative x (the
     * CPU kernels' forms): 0.5 x (1 + tanh u) = x / (1 + e^(-2u)), and
     * 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2) */
    case GOPS_GELU_ERF: return 0.5f * x * erfcf(x * -0.70710678118654752f);
    case GOPS_GELU_TANH: {
        float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
        return x / (1.0f + expf(-2.0f * u));
    }
    case GOPS_CLIP: return isnan(x) ? x : fminf(fmaxf(x, lo), hi);
    case GOPS_RELU: return x > 0.0f ? x : 0.0f;
    case GOPS_EXP: return expf(x);
    case GOPS_ABS: return fabsf(x);
    case GOPS_RECIPROCAL: return 1.0f / x;
    default: return x;
    }
}

/* CG: through L2 only (a value other blocks of this grid wrote) */
template <bool CG = false> __device__ __forceinline__ float go_ld(const void *p, int dt, int64_t i)
{
    if (CG) {
        if (dt == GRAFT_DTYPE_FLOAT16)
            return __half2float(__ushort_as_half(__ldcg((const unsigned short *)p + i)));
        if (dt == GRAFT_DTYPE_BFLOAT16)
            return __bfloat162float(__ushort_as_bfloat16(__ldcg((const unsigned short *)p + i)));
        return __ldcg((const float *)p + i);
    }
    if (dt == GRAFT_DTYPE_FLOAT16) return __half2float(((const __half *)p)[i]);
    if (dt == GRAFT_DTYPE_BFLOAT16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}

__device__ __forceinline__ float go_round(int dt, float v)
{
    if (dt == GRAFT_DTYPE_FLOAT16) return __half2float(__float2half_rn(v));
    if (dt == GRAFT_DTYPE_BFLOAT16) return __bfloat162float(__float2bfloat16_rn(v));
    return v;
}

__device__ __forceinline__ void go_st(void *p, int dt, int64_t i, float v)
{
    if (dt == GRAFT_DTYPE_FLOAT16) ((__half *)p)[i] = __float2half_rn(v);
    else if (dt == GRAFT_DTYPE_BFLOAT16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else ((float *)p)[i] = v;
}

/* The chain's instructions on r, the value at one output element, leaf
 * l read at offset off(l), rounded after each to its type as the unfused
 * nodes store it; leaf sl (-1: none) is not read, its value there is sv
 * (one the caller has just stored). */
template <typename Off>
__device__ __forceinline__ float go_chain_at(const gops_fuse &f, float r, Off off, int sl = -1, float sv = 0.0f)
{
    for (int k = 0; k < f.n_ins; k++) {
        const gops_fuse_ins &in = f.ins[k];
        if (in.kind == GOPS_FUSE_BINARY) {
            const float o = in.leaf == sl ? sv : go_ld(f.leaf[in.leaf], f.leaf_dtype[in.leaf], off(in.leaf));
            r = in.chain_b ? go_bin_f(in.op, o, r) : go_bin_f(in.op, r, o);
        } else if (in.kind == GOPS_FUSE_UNARY) {
            r = go_un_f(in.op, r, in.lo, in.hi);
        }
        r = go_round(in.dtype, r);
    }
    return r;
}

/* go_chain_at at output element i, the leaves read through their
 * broadcast strides (i's coordinates computed once). I: the index type
 * (int when the output has fewer than 2^31 elements: 32-bit division). */
template <typename I> __device__ __forceinline__ float go_chain(const gops_fuse &f, float r, I i)
{
    I c[GOPS_MAX_RANK];
    for (int d = f.rank - 1; d >= 0; d--) {
        I n = (I)f.dims[d];
        c[d] = i % n;
        i /= n;
    }
    return go_chain_at(f, r, [&](int l) {
        I off = 0;
        for (int d = 0; d < f.rank; d++) off += c[d] * (I)f.st[l][d];
        return off;
    });
}

/* Leaf l's offset at output element i (its broadcast strides). */
template <typename I> __device__ __forceinline__ I go_leaf_off(const gops_fuse &f, int l, I i)
{
    I off = 0;
    for (int d = f.rank - 1; d >= 0; d--) {
        I n = (I)f.dims[d];
        off += (i % n) * (I)f.st[l][d];
        i /= n;
    }
    return off;
}

/* go_chain_at for a GEMV's epilogue (one output element a thread): each
 * leaf's layout given (modes: 2 bits a leaf, go_leaf_mode's codes, the
 * host's), so a leaf laid out as the output or one value costs no index
 * arithmetic. */
template <typename I>
__device__ __forceinline__ float go_chain_modes(const gops_fuse &f, float r, I i, unsigned modes, int sl, float sv)
{
    return go_chain_at(
        f, r,
        [&](int l) {
            const unsigned m = modes >> (2 * l) & 3u;
            return m == 1 ? i : m == 2 ? (I)0 : go_leaf_off<I>(f, l, i);
        },
        sl, sv);
}

/* Rows of up to GO_ROW_EPT * blockDim.x elements are held in registers:
 * each pass issues all of a thread's loads before using any, one memory
 * latency a pass instead of one an element (the last block of a GEMV runs
 * this alone, with nothing to hide its latency). */
#define GO_ROW_EPT 8

/* Leaf l's layout against the output: 1 the output's own (offset = the
 * element's index), 2 one value (offset 0), 0 anything else (go_leaf_off).
 * Uniform across the block; the host's too (gemv_rows.cu's modes). */
__host__ __device__ __forceinline__ int go_leaf_mode(const gops_fuse &f, int l)
{
    bool cont = true, zero = true;
    int64_t expect = 1;
    for (int d = f.rank - 1; d >= 0; d--) {
        if (f.dims[d] != 1) {
            cont = cont && f.st[l][d] == expect;
            zero = zero && f.st[l][d] == 0;
        }
        expect *= f.dims[d];
    }
    return cont ? 1 : zero ? 2 : 0;
}

/* o[e] = leaf l at the thread's elements (0 past dim): the dtype and the
 * layout decided once, outside the element loop. */
template <typename I, int EPT, typename T>
__device__ __forceinline__ void go_leaf_ept(const gops_fuse &f, int l, int mode, I row, int dim, float *o)
{
    const T *p = (const T *)f.leaf[l];
#pragma unroll
    for (int e = 0; e < EPT; e++) {
        int i = e * (int)blockDim.x + (int)threadIdx.x;
        I off = mode == 1 ? row + i : mode == 2 ? (I)0 : go_leaf_off<I>(f, l, row + i);
        o[e] = i < dim ? gc_f(p[off]) : 0.0f;
    }
}

/* Leaf l at the thread's elements, of any dtype and layout. */
template <typename I, int EPT>
__device__ __forceinline__ void go_leaf_load(const gops_fuse &f, int l, I row, int dim, float *o)
{
    const int mode = go_leaf_mode(f, l), ldt = f.leaf_dtype[l];
    if (ldt == GRAFT_DTYPE_FLOAT16) go_leaf_ept<I, EPT, __half>(f, l, mode, row, dim, o);
    else if (ldt == GRAFT_DTYPE_BFLOAT16) go_leaf_ept<I, EPT, __nv_bfloat16>(f, l, mode, row, dim, o);
    else go_leaf_ept<I, EPT, float>(f, l, mode, row, dim, o);
}

/* Instruction `in` on the thread's elements r[e], its leaf's values o[e]
 * (binary), rounded to its type. */
template <int EPT> __device__ __forceinline__ void go_ins_ept(const gops_fuse_ins &in, float *r, const float *o)
{
    if (in.kind == GOPS_FUSE_BINARY) {
        switch (in.op) {
#define GO_EPT_BIN(OP)                                                                                                 \
    case OP:                                                                                                           \
        _Pragma("unroll") for (int e = 0; e < EPT; e++) r[e] =                                                         \
            in.chain_b ? go_bin_f(OP, o[e], r[e]) : go_bin_f(OP, r[e], o[e]);                                          \
        break;
            GO_EPT_BIN(GOPS_ADD)
            GO_EPT_BIN(GOPS_SUB)
            GO_EPT_BIN(GOPS_MUL)
            GO_EPT_BIN(GOPS_DIV)
#undef GO_EPT_BIN
        default:
#pragma unroll
            for (int e = 0; e < EPT; e++) r[e] = in.chain_b ? go_bin_f(in.op, o[e], r[e]) : go_bin_f(in.op, r[e], o[e]);
        }
    } else if (in.kind == GOPS_FUSE_UNARY) {
#pragma unroll
        for (int e = 0; e < EPT; e++) r[e] = go_un_f(in.op, r[e], in.lo, in.hi);
    }
    if (in.dtype == GRAFT_DTYPE_FLOAT16) {
#pragma unroll
        for (int e = 0; e < EPT; e++) r[e] = __half2float(__float2half_rn(r[e]));
    } else if (in.dtype == GRAFT_DTYPE_BFLOAT16) {
#pragma unroll
        for (int e = 0; e < EPT; e++) r[e] = __bfloat162float(__float2bfloat16_rn(r[e]));
    }
}

/* The leaves of a chain's first GO_PRE instructions, loaded before the
 * norm's block sum so that their latency overlaps it (a norm-headed row
 * has nothing else to hide it: each instruction's load would otherwise
 * wait for the one before). */
#define GO_PRE 2
template <typename I, int EPT>
__device__ __forceinline__ void go_chain_preload(const gops_fuse &f, I row, int dim, float (*pre)[EPT])
{
#pragma unroll
    for (int k = 0; k < GO_PRE; k++)
        if (k < f.n_ins && f.ins[k].kind == GOPS_FUSE_BINARY) go_leaf_load<I, EPT>(f, f.ins[k].leaf, row, dim, pre[k]);
}

/* The chain's instructions on the thread's elements r[e] (element i = e *
 * blockDim.x + threadIdx.x of the row, e < EPT, i < dim), instruction by
 * instruction, each one's switches (op, dtype, layout) outside the element
 * loop: as go_chain per element. pre: the first GO_PRE instructions'
 * leaves (go_chain_preload), or NULL. */
template <typename I, int EPT>
__device__ __forceinline__ void go_chain_ept(const gops_fuse &f, float *r, I row, int dim,
                                             float (*pre)[EPT] = nullptr)
{
    int k = 0;
    if (pre)
#pragma unroll
        for (; k < GO_PRE && k < f.n_ins; k++) go_ins_ept<EPT>(f.ins[k], r, pre[k]);
    for (; k < f.n_ins; k++) {
        const gops_fuse_ins in = f.ins[k];
        float o[EPT];
        if (in.kind == GOPS_FUSE_BINARY) go_leaf_load<I, EPT>(f, in.leaf, row, dim, o);
        go_ins_ept<EPT>(in, r, o);
    }
}

/* A norm-headed row's chain in registers (dim <= EPT * blockDim.x): v[e]
 * is the chain's value at element e * blockDim.x + threadIdx.x (0 past
 * dim), rounded after each instruction as go_norm_chain_row; not stored.
 * PRE: the first instructions' leaves loaded before the norm's block sum
 * (go_chain_preload; the chain prologue of gemv_rows.cu: a GEMV's last
 * block measured slower with it, its registers counting for the whole
 * kernel). */
template <typename I, bool CG, int EPT, bool PRE = false>
__device__ __forceinline__ void go_norm_chain_regs(const gops_fuse &f, I row, float *v, float *scratch)
{
    const int dim = (int)f.norm_dim, dt0 = f.leaf_dtype[0];
    float g[EPT], pre[GO_PRE][EPT], ss = 0.0f;
#pragma unroll
    for (int e = 0; e < EPT; e++) {
        int i = e * (int)blockDim.x + (int)threadIdx.x;
        v[e] = i < dim ? go_ld<CG>(f.leaf[0], dt0, row + i) : 0.0f;
        g[e] = i < dim && f.gamma ? go_ld(f.gamma, dt0, i) : 1.0f;
    }
    if constexpr (PRE) go_chain_preload<I, EPT>(f, row, dim, pre);
#pragma unroll
    for (int e = 0; e < EPT; e++) ss += v[e] * v[e];
    ss = gc_block_sum(ss, scratch);
    float q = ss / (float)dim + f.eps;
    float inv = dt0 == GRAFT_DTYPE_FLOAT ? 1.0f / sqrtf(q) : rsqrtf(q), sq = sqrtf(q);
#pragma unroll
    for (int e = 0; e < EPT; e++) v[e] = go_round(f.norm_dtype, f.norm_div ? v[e] / sq : v[e] * inv * g[e]);
    go_chain_ept<I, EPT>(f, v, row, dim, PRE ? pre : nullptr);
}

/* go_norm_chain_row for a row held in registers (dim <= EPT * blockDim.x),
 * the skip norm after it too (f.sk_y): the same arithmetic in the same
 * order as the element loops below. */
template <typename I, bool CG, int EPT>
__device__ __forceinline__ void go_norm_chain_row_ept(const gops_fuse &f, I row, float *scratch)
{
    const int dim = (int)f.norm_dim;
    float v[EPT], g[EPT], ss, q, inv;
    go_norm_chain_regs<I, CG, EPT>(f, row, v, scratch);
#pragma unroll
    for (int e = 0; e < EPT; e++) {
        int i = e * (int)blockDim.x + (int)threadIdx.x;
        if (i < dim) go_st(f.y, f.y_dtype, row + i, v[e]);
    }
    if (!f.sk_y) return;
    const int dt = f.y_dtype;
    ss = 0.0f;
#pragma unroll
    for (int e = 0; e < EPT; e++) {
        int i = e * (int)blockDim.x + (int)threadIdx.x;
        if (i < dim) {
            v[e] = go_round(dt, v[e]) + go_ld(f.sk_x, dt, row + i);
            if (f.sk_bias) v[e] += go_ld(f.sk_bias, dt, i);
            g[e] = go_ld(f.sk_gamma, dt, i);
        } else {
            v[e] = g[e] = 0.0f;
        }
    }
#pragma unroll
    for (int e = 0; e < EPT; e++) ss += v[e] * v[e];
    ss = gc_block_sum(ss, scratch);
    q = ss / (float)dim + f.sk_eps;
    inv = dt == GRAFT_DTYPE_FLOAT ? 1.0f / sqrtf(q) : rsqrtf(q);
#pragma unroll
    for (int e = 0; e < EPT; e++) {
        int i = e * (int)blockDim.x + (int)threadIdx.x;
        if (i >= dim) continue;
        if (f.sk_sum) go_st(f.sk_sum, dt, row + i, v[e]);
        go_st(f.sk_y, dt, row + i, v[e] * inv * g[e]);
    }
}

/* One row of an RMSNorm-headed chain: leaf 0's elements [row, row +
 * norm_dim) summed in squares by the block, then each normalised, scaled,
 * rounded to norm_dtype and sent through the chain into f.y. CG: leaf 0
 * was written by other blocks of this grid (read past L1). EPT: elements a
 * thread holds (rows of up to EPT * blockDim.x; longer ones loop). */
template <typename I> __device__ __forceinline__ void go_skip_norm_row(const gops_fuse &f, I row, float *scratch);

template <typename I, bool CG, int EPT = GO_ROW_EPT>
__device__ __forceinline__ void go_norm_chain_row(const gops_fuse &f, I row, float *scratch)
{
    const int dim = (int)f.norm_dim;
    if (dim <= EPT * (int)blockDim.x) {
        go_norm_chain_row_ept<I, CG, EPT>(f, row, scratch);
        return;
    }
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = go_ld<CG>(f.leaf[0], f.leaf_dtype[0], row + i);
        ss += v * v;
    }
    ss = gc_block_sum(ss, scratch);
    float q = ss / (float)dim + f.eps;
    float inv = f.leaf_dtype[0] == GRAFT_DTYPE_FLOAT ? 1.0f / sqrtf(q) : rsqrtf(q), sq = sqrtf(q);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = go_ld<CG>(f.leaf[0], f.leaf_dtype[0], row + i);
        float r = f.norm_div ? v / sq : v * inv * (f.gamma ? go_ld(f.gamma, f.leaf_dtype[0], i) : 1.0f);
        r = go_round(f.norm_dtype, r);
        go_st(f.y, f.y_dtype, row + i, go_chain<I>(f, r, row + i));
    }
    if (f.sk_y) go_skip_norm_row<I>(f, row, scratch);
}

/* The skip RMSNorm after a norm-headed chain (f.sk_y set), over the row
 * the chain just wrote to f.y: each thread reads back only the elements it
 * wrote (no barrier needed between them), and writes each output element
 * after reading its inputs there, so outputs may alias inputs. */
template <typename I> __device__ __forceinline__ void go_skip_norm_row(const gops_fuse &f, I row, float *scratch)
{
    const int dim = (int)f.norm_dim, dt = f.y_dtype;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float t = go_ld(f.y, dt, row + i) + go_ld(f.sk_x, dt, row + i);
        if (f.sk_bias) t += go_ld(f.sk_bias, dt, i);
        ss += t * t;
    }
    ss = gc_block_sum(ss, scratch);
    float q = ss / (float)dim + f.sk_eps;
    float inv = dt == GRAFT_DTYPE_FLOAT ? 1.0f / sqrtf(q) : rsqrtf(q);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float t = go_ld(f.y, dt, row + i) + go_ld(f.sk_x, dt, row + i);
        if (f.sk_bias) t += go_ld(f.sk_bias, dt, i);
        if (f.sk_sum) go_st(f.sk_sum, dt, row + i, t);
        go_st(f.sk_y, dt, row + i, t * inv * go_ld(f.sk_gamma, dt, i));
    }
}

#endif
