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

/* Every leaf's layout, 2 bits a leaf (go_chain_modes's modes). */
__host__ __device__ __forceinline__ unsigned go_leaf_modes(const gops_fuse &f)
{
    unsigned m = 0;
    for (int l = 0; l < f.n_leaf; l++) m |= (unsigned)go_leaf_mode(f, l) << (2 * l);
    return m;
}

/* Host checks of a launch description: its rank, instruction and leaf
 * counts within bounds and every binary instruction reading a leaf it has
 * (go_fuse_ok); the output's elements (go_fuse_numel). */
static inline bool go_fuse_ok(const gops_fuse &f)
{
    if (f.rank < 0 || f.rank > GOPS_MAX_RANK || f.n_ins < 0 || f.n_ins > GOPS_FUSE_MAX || f.n_leaf < 1 ||
        f.n_leaf > GOPS_FUSE_LEAVES)
        return false;
    for (int k = 0; k < f.n_ins; k++)
        if (f.ins[k].kind == GOPS_FUSE_BINARY && (f.ins[k].leaf < 0 || f.ins[k].leaf >= f.n_leaf)) return false;
    return true;
}
static inline int64_t go_fuse_numel(const gops_fuse &f)
{
    int64_t n = 1;
    for (int d = 0; d < f.rank; d++) n *= f.dims[d];
    return n;
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
    if (f.norm_div) { /* one branch around the quotients, not one around each; v / sq without divisions */
        const float sq = sqrtf(q), rs = 1.0f / sq;
#pragma unroll
        for (int e = 0; e < EPT; e++) v[e] = go_round(f.norm_dtype, gc_div_r(v[e], sq, rs));
    } else {
        const float inv = dt0 == GRAFT_DTYPE_FLOAT ? 1.0f / sqrtf(q) : rsqrtf(q);
#pragma unroll
        for (int e = 0; e < EPT; e++) v[e] = go_round(f.norm_dtype, v[e] * inv * g[e]);
    }
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

/* go_norm_chain_row_ept for a row of 2-byte elements (T: leaf 0, y and
 * the skip norm's tensors), 8 contiguous a thread: every operand row
 * (gamma, the leaves of the chain's binary instructions, at most
 * GO_V8_LEAVES, and the skip norm's x, bias and gamma) loaded at once with
 * 16-byte loads before the norm's block sum, one memory latency for the
 * row where go_norm_chain_row_ept waits once an instruction, and an eighth
 * of its loads. The same arithmetic; the block sums add in another order.
 * A GEMV's last block runs it (gemv_rows.cu), alone on the device. Leaves
 * are row-shaped (go_leaf_mode 1) or one value (2); go_norm_v8_ok: when it
 * applies to a row held by `threads` threads, 8 elements each (uniform
 * over the block; the host may ask too). */
#define GO_V8_LEAVES 3
template <typename T> struct go_dt;
template <> struct go_dt<__half> {
    static constexpr int v = GRAFT_DTYPE_FLOAT16;
};
template <> struct go_dt<__nv_bfloat16> {
    static constexpr int v = GRAFT_DTYPE_BFLOAT16;
};

template <typename T> __host__ __device__ __forceinline__ bool go_norm_v8_ok(const gops_fuse &f, int threads)
{
    constexpr int dt = go_dt<T>::v;
    const int dim = (int)f.norm_dim;
    auto al = [](const void *p) { return ((uintptr_t)p & 15u) == 0; };
    if (f.leaf_dtype[0] != dt || f.y_dtype != dt || dim % 8 || dim > 8 * threads || !al(f.leaf[0]) ||
        !al(f.y) || (f.gamma && !al(f.gamma)))
        return false;
    int nb = 0;
    for (int k = 0; k < f.n_ins; k++) {
        const gops_fuse_ins &in = f.ins[k];
        if (in.kind != GOPS_FUSE_BINARY) continue;
        if (++nb > GO_V8_LEAVES) return false;
        const int m = go_leaf_mode(f, in.leaf);
        if (m == 0 || (m == 1 && (f.leaf_dtype[in.leaf] != dt || !al(f.leaf[in.leaf])))) return false;
    }
    return !f.sk_y || (al(f.sk_x) && al(f.sk_y) && al(f.sk_gamma) && (!f.sk_bias || al(f.sk_bias)) &&
                       (!f.sk_sum || al(f.sk_sum)));
}

template <typename T, bool CG = false> __device__ __forceinline__ uint4 go_ld8(const void *p, int64_t i)
{
    const uint4 *q = reinterpret_cast<const uint4 *>((const T *)p + i);
    if constexpr (CG) return __ldcg(q);
    return *q;
}

template <typename T> __device__ __forceinline__ void go_st8(void *p, int64_t i, const float *v)
{
    union {
        uint4 u;
        T e[8];
    } o;
#pragma unroll
    for (int e = 0; e < 8; e++) o.e[e] = gc_to<T>(v[e]);
    *reinterpret_cast<uint4 *>((T *)p + i) = o.u;
}

/* A block sum of a 2-byte row's kernels: gc_block_sum, or with NW1 (the
 * block's warps, known when compiled) gc_block_sum1 over scratch slot
 * `slot` (32 floats each; a row's second sum takes slot 1): the same bits
 * with one barrier fewer. */
template <int NW1> __device__ __forceinline__ float go_bsum(float v, float *scratch, int slot)
{
    if constexpr (NW1 > 0) return gc_block_sum1<NW1>(v, scratch + 32 * slot);
    return gc_block_sum(v, scratch);
}

/* A 2-byte row's RMSNorm, 8 elements a thread (v, fp32; zero past the
 * row): the block's sum of squares (go_bsum's first slot), then v *
 * rsqrt(mean + eps) * gamma (the word gv; has_gamma false: 1), or v /
 * sqrt(mean + eps) (norm_div), not rounded. All threads call it (a block
 * sum). */
template <typename T, int NW1 = 0>
__device__ __forceinline__ void go_row8_scale(float *v, uint4 gv, bool has_gamma, int dim, float eps, int norm_div,
                                              float *scratch)
{
    float g[8], ss = 0.0f;
    gc_unpack<T>(gv, g);
#pragma unroll
    for (int e = 0; e < 8; e++) ss += v[e] * v[e];
    ss = go_bsum<NW1>(ss, scratch, 0);
    const float q = ss / (float)dim + eps;
    if (norm_div) { /* one branch around the eight quotients, not one around each; v / sq without divisions */
        const float sq = sqrtf(q), rs = 1.0f / sq; /* the square root only here: off rsqrt's path */
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = gc_div_r(v[e], sq, rs);
    } else {
        const float inv = rsqrtf(q);
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = v[e] * inv * (has_gamma ? g[e] : 1.0f);
    }
}

/* The start of a 2-byte norm-headed row held 8 elements a thread from
 * element at (c: the thread's first element, on: c < norm_dim): leaf 0
 * (CG: written by other blocks of this grid), gamma and the skip norm's x,
 * bias and gamma words (sx, sb, sg; zero where not used) loaded at once,
 * after whatever the caller has put in flight, then v = the row's RMSNorm
 * (times gamma, or over sqrt(mean + eps) with norm_div), not yet rounded.
 * All threads call it (a block sum). */
template <typename T, typename I, bool CG, int NW1 = 0>
__device__ __forceinline__ void go_row8_norm(const gops_fuse &f, I at, int c, bool on, float *v, uint4 &sx, uint4 &sb,
                                             uint4 &sg, float *scratch)
{
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    uint4 xv = z, gv = z;
    sx = sb = sg = z;
    if (on) {
        xv = go_ld8<T, CG>(f.leaf[0], at);
        if (f.gamma) gv = go_ld8<T>(f.gamma, c);
        if (f.sk_y) {
            sx = go_ld8<T>(f.sk_x, at);
            sg = go_ld8<T>(f.sk_gamma, c);
            if (f.sk_bias) sb = go_ld8<T>(f.sk_bias, c);
        }
    }
    gc_unpack<T>(xv, v);
    go_row8_scale<T, NW1>(v, gv, f.gamma != NULL, (int)f.norm_dim, f.eps, f.norm_div, scratch);
}

/* The end of a 2-byte norm-headed row held 8 elements a thread from
 * element at (on: the thread holds elements of the row): the chain's
 * values v stored, then the skip norm after them (f.sk_y) from its x, bias
 * and gamma words sx, sb, sg, loaded before the norm's block sum: t =
 * round(c) + x (+ bias), as go_norm_chain_row_ept. All threads call it. */
template <typename T, typename I, int NW1 = 0>
__device__ __forceinline__ void go_row8_end(const gops_fuse &f, I at, bool on, const float *v, uint4 sx, uint4 sb,
                                            uint4 sg, float *scratch)
{
    if (on) go_st8<T>(f.y, at, v);
    if (!f.sk_y) return;
    float t[8], b[8], g[8], ss = 0.0f;
    gc_unpack<T>(sx, t);
    gc_unpack<T>(sb, b);
    gc_unpack<T>(sg, g);
#pragma unroll
    for (int e = 0; e < 8; e++) {
        t[e] = on ? go_round(go_dt<T>::v, v[e]) + t[e] : 0.0f;
        if (f.sk_bias) t[e] += b[e];
        ss += t[e] * t[e];
    }
    ss = go_bsum<NW1>(ss, scratch, 1);
    const float inv2 = rsqrtf(ss / (float)(int)f.norm_dim + f.sk_eps);
    if (!on) return;
    if (f.sk_sum) go_st8<T>(f.sk_sum, at, t);
#pragma unroll
    for (int e = 0; e < 8; e++) t[e] = t[e] * inv2 * g[e];
    go_st8<T>(f.sk_y, at, t);
}

template <typename T, typename I, bool CG, int NW1 = 0>
__device__ __forceinline__ void go_norm_chain_row_v8(const gops_fuse &f, I row, float *scratch)
{
    static_assert(GO_V8_LEAVES == 3, "the selects below name three leaves");
    const int dim = (int)f.norm_dim, c = 8 * (int)threadIdx.x; /* the thread's first element */
    const bool on = c < dim;
    const I at = row + c;
    /* kb[j]: the chain's j-th binary instruction (-1: none); its leaf preloaded */
    int kb[GO_V8_LEAVES];
#pragma unroll
    for (int j = 0; j < GO_V8_LEAVES; j++) kb[j] = -1;
    for (int k = 0, j = 0; k < f.n_ins; k++)
        if (f.ins[k].kind == GOPS_FUSE_BINARY) {
#pragma unroll
            for (int q = 0; q < GO_V8_LEAVES; q++)
                if (q == j) kb[q] = k;
            j++;
        }
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    uint4 lv[GO_V8_LEAVES];
    float ls[GO_V8_LEAVES];
    bool lrow[GO_V8_LEAVES];
#pragma unroll
    for (int j = 0; j < GO_V8_LEAVES; j++) {
        lv[j] = z, ls[j] = 0.0f;
        const int l = kb[j] < 0 ? 0 : f.ins[kb[j]].leaf;
        lrow[j] = kb[j] >= 0 && go_leaf_mode(f, l) == 1;
        if (!on || kb[j] < 0) continue;
        if (lrow[j]) lv[j] = go_ld8<T>(f.leaf[l], at);
        else ls[j] = go_ld(f.leaf[l], f.leaf_dtype[l], 0);
    }
    float v[8];
    uint4 sx, sb, sg;
    go_row8_norm<T, I, CG, NW1>(f, at, c, on, v, sx, sb, sg, scratch);
#pragma unroll
    for (int e = 0; e < 8; e++) v[e] = go_round(f.norm_dtype, v[e]);
    for (int k = 0, j = 0; k < f.n_ins; k++) {
        const gops_fuse_ins in = f.ins[k];
        float o[8];
        if (in.kind == GOPS_FUSE_BINARY) { /* the j-th preloaded leaf, by selects (no local array) */
            const uint4 u = j == 0 ? lv[0] : j == 1 ? lv[1] : lv[2];
            const float sv = j == 0 ? ls[0] : j == 1 ? ls[1] : ls[2];
            const bool rw = j == 0 ? lrow[0] : j == 1 ? lrow[1] : lrow[2];
            gc_unpack<T>(u, o);
#pragma unroll
            for (int e = 0; e < 8; e++) o[e] = rw ? o[e] : sv;
            j++;
        }
        go_ins_ept<8>(in, v, o);
    }
    go_row8_end<T, I, NW1>(f, at, on, v, sx, sb, sg, scratch);
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
