/* Decode GEMV over weights stored one output per row: y[N] = W[N, K] . x[K]
 * (the executor keeps a MatMul's constant [K, N] weight transposed so:
 * cx_rows_plan, runtime/cuda/fuse.c).
 *
 * Each output row is read from start to end by TPR threads, 16 bytes a
 * load, U loads in flight per thread: a warp streams 512 contiguous bytes a
 * load and the whole matrix is a sequential read, with no split-K partials
 * and no second pass. The first U loads are issued before waiting for the
 * kernel that writes x (a programmatic dependent launch, sm_90; weights do
 * not depend on it), so the weights are in flight while that kernel ends.
 * Sums are fp32, reduced across the row's threads by shuffles (and shared
 * memory past a warp) in a fixed order: deterministic. Up to
 * GCUDA_GEMV_MAX matrices that read one x go in one launch, their rows
 * side by side. A single matrix may carry the elementwise chain that reads
 * its output (gcuda_gemv_rows_tail): per output element (EPI 1: the
 * block's rows gathered to its first warp, a lane a row), or, for
 * a chain headed by an RMSNorm over the whole output, run by the last
 * block to finish (EPI 2: an atomic counter, reset by that block; then
 * also the skip RMSNorm that reads the chain's output, gops_fuse.sk_y);
 * two (gate, up) may run as a pair, row r of both read by the same
 * threads, with the chain over both outputs (EPI 3). x may be the output
 * of an RMSNorm or skip RMSNorm that every block computes first (PRO 1, 2:
 * gcuda_gemv_rows_fused), or, before such a norm or as x itself, the
 * norm-headed chain over the previous GEMV's output (PRO 3, the general
 * chain; PRO 4, the compact one: gcuda_gemv_rows_chain_pro(_tail)). */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gcuda_chain.cuh"

#define ROWS_THREADS 256
static_assert(GOPS_FUSE_LEAVES <= 16, "rows_set.modes holds 2 bits a leaf");
static_assert(GCUDA_CHAIN_PRO_MAX_K == GO_ROW_EPT * 256, "a chain prologue's row is held in registers");
#define ROWS_UNROLL 4 /* 16-byte loads in flight per thread (the H200 kernel lab: 4 beat 8 and 16 on E2B's shapes) */

/* A norm-headed chain over a 2-byte row as rows_norm_compact runs it
 * (rows_compact_plan decides on the host that it applies): up to 3
 * instructions, each add, subtract or multiply by a leaf of the row's type
 * laid out as the output or holding one value, or a cast, each rounded to
 * the row's type or not at all (fp32). */
#define RC_MAX 3
typedef struct rows_compact {
    unsigned char n;            /* instructions */
    unsigned char op[RC_MAX];   /* RC_ADD r + leaf, RC_SUB r - leaf, RC_RSUB leaf - r, RC_MUL r * leaf, RC_NOP */
    unsigned char leaf[RC_MAX]; /* the instruction's leaf */
    unsigned char fl[RC_MAX];   /* RC_ONE: the leaf holds one value (else laid out as the row); RC_RT: rounded */
    unsigned char norm_rt;      /* the norm's output rounded to the row's type (else fp32) */
} rows_compact;
#define RC_ADD 0
#define RC_SUB 1
#define RC_RSUB 2
#define RC_MUL 3
#define RC_NOP 4 /* a cast: the rounding alone */
#define RC_ONE 1
#define RC_RT 2

/* A norm-headed chain over the K elements of the GEMV's x, in the compact
 * form (rows_compact_plan), computed by every block of the GEMV that reads
 * its output (PRO 4: rows_chain_pro_compact), and the x it makes: */
#define RCP_C 1    /* x = c, the chain's output */
#define RCP_NORM 2 /* x = the RMSNorm of c (rows_set.pro: gamma, eps) */
#define RCP_SKIP 3 /* x = the skip RMSNorm of t = c + pro.skip (+ pro.bias); t stored to pro.sum by block 0 */
typedef struct rows_cpro {
    int x;                    /* RCP_*; 0: none (PRO 3, the general chain: the kernel's tail) */
    const void *src;          /* the chain's leaf 0: the row it normalises (the GEMV before's output) */
    const void *gamma;        /* its norm's gamma (NULL: none) */
    const void *leaf[RC_MAX]; /* instruction j's leaf */
    void *c;                  /* c, stored by block 0 (NULL: not stored) */
    float eps;
    int norm_div;
    rows_compact cc;
} rows_cpro;

typedef struct rows_set {
    const void *W[GCUDA_GEMV_MAX];
    void *y[GCUDA_GEMV_MAX];
    int row0[GCUDA_GEMV_MAX]; /* first row of matrix j in the launch */
    int n, rows;
    gops_rows_norm pro; /* PRO: x is the RMSNorm of pro.x (+ pro.skip + pro.bias), computed here */
    unsigned modes; /* EPI 1, 3: each leaf's layout against the output (go_chain_modes) */
    int y1_leaf;    /* EPI 3: the chain's leaf that is y[1] as the output lays it out, or -1 */
    int gm;         /* EPI 1, 3: 1 + the leaf L where the chain is gelu_tanh(y) * L in the GEMV's dtype (L as the
                     * output lays it out; a pair's y[1] or another), written out by the kernel instead of
                     * interpreted (rows_run decides; GRAFT_CUDA_ROWS_GM=0: never); 0: interpreted */
    int sc;         /* EPI 1, 3: a softcap (y / c1 or y * c1, tanh, * c2; c1, c2 leaves sc_l of one value each, all in
                     * the GEMV's dtype), written out likewise: 1 with / c1, 2 with * c1; 0: not this form */
    int sc_l[2];
    int gm_pre;     /* gm: L is no output of this launch, so the thread that runs a row's chain may read L[r] as soon as
                     * the kernel before has ended (rows_gm_pre), its latency under the prologue and the sums; 0: read
                     * after the sums (as under GRAFT_CUDA_ROWS_GMPRE=0) */
    int l2ef;       /* the weights evict first from L2 (rows_policy; GRAFT_CUDA_L2EF=0: not) */
    int v8;         /* EPI 2: a 2-byte row by go_norm_chain_row_v8 where it applies (GRAFT_CUDA_ROWS_V8=0: not);
                     * 2: by rows_norm_compact (rows_compact_plan; GRAFT_CUDA_ROWS_V8=2) */
    rows_compact cc; /* v8 2: the chain as rows_norm_compact runs it */
    rows_cpro cp;    /* a chain prologue in the compact form (cp.x: PRO 4), else the general one (PRO 3: the tail) */
    int epid;        /* EPI 1, 3 at TPR > 32: the first warp sums its rows' warp partials itself, one block barrier
                      * fewer (GRAFT_CUDA_ROWS_EPID=0: not; E2B 418 -> 425 tok/s, session 25) */
    int loop;        /* bit EPI (0, 1, 3; no prologue): the vector kernel loops on the blocks that fit at once, the
                      * next group's loads issued before this one's sums and chain (GRAFT_CUDA_ROWS_LOOP=013: the
                      * EPIs named; measured slower, H100 session 26: E2B 360 tok/s against 383; so were two
                      * groups in flight a block, session 33: H100 385 against 408, H200 430 against 460) */
    gcuda_prefetch_set pf; /* asked of L2 by the whole grid before the wait (gcuda_gemv_rows_prefetch_next) */
} rows_set;

/* A 16-byte load that skips L1 (each weight byte is read once); ef: with
 * the L2 policy pol (rows_policy: evict first), else as loads default. */
__device__ __forceinline__ uint4 rows_ld(const uint4 *p, bool ef, uint64_t pol)
{
    uint4 v;
    if (ef)
        asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p), "l"(pol));
    else
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p));
    return v;
}

/* The weights' L2 policy with set.l2ef: evict first, so that the
 * activations, norms' gammas and chain leaves that the step reads again
 * may stay in L2 while gigabytes of weights stream through it (measured
 * neutral on E2B's step, kept as the measured configuration). */
__device__ __forceinline__ uint64_t rows_policy()
{
    uint64_t pol;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}

/* A compact chain's leaves for the 8 elements from c (on: c < the row's
 * length), loaded at once: lv a row-shaped leaf's word, ls a one-value
 * leaf's value (zero where unused). */
template <typename T, typename L>
__device__ __forceinline__ void rows_compact_load(const rows_compact &cc, L leaf, int c, bool on, uint4 *lv, float *ls)
{
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int j = 0; j < RC_MAX; j++) {
        lv[j] = z, ls[j] = 0.0f;
        if (!on || j >= cc.n || cc.op[j] == RC_NOP) continue;
        const void *lp = leaf(j); /* instruction j's leaf */
        if (cc.fl[j] & RC_ONE) ls[j] = gc_f(((const T *)lp)[0]);
        else lv[j] = go_ld8<T>(lp, c);
    }
}

/* A compact chain on the norm's 8 values v (not yet rounded): the norm's
 * rounding, then each instruction with its leaf (rows_compact_load) and
 * its rounding. Adds, subtracts and multiplies round to nearest without
 * contraction, as the unfused nodes compute them. */
template <typename T>
__device__ __forceinline__ void rows_compact_apply(const rows_compact &cc, const uint4 *lv, const float *ls, float *v)
{
    if (cc.norm_rt)
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = gc_f(gc_to<T>(v[e]));
#pragma unroll
    for (int j = 0; j < RC_MAX; j++) { /* each branch uniform over the block: one case runs */
        if (j >= cc.n) break;
        float o[8];
        gc_unpack<T>(lv[j], o);
        if (cc.fl[j] & RC_ONE)
#pragma unroll
            for (int e = 0; e < 8; e++) o[e] = ls[j];
        switch (cc.op[j]) {
        case RC_MUL:
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = __fmul_rn(v[e], o[e]);
            break;
        case RC_SUB:
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = __fsub_rn(v[e], o[e]);
            break;
        case RC_RSUB:
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = __fsub_rn(o[e], v[e]);
            break;
        case RC_NOP: break;
        default:
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = __fadd_rn(v[e], o[e]);
        }
        if (cc.fl[j] & RC_RT)
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = gc_f(gc_to<T>(v[e]));
    }
}

/* Element k of the norm's input t = x (+ skip) (+ bias), fp32 (PRO 2: a
 * skip norm's sum). */
template <typename T, int PRO> __device__ __forceinline__ float rows_t(const T *__restrict__ x, const rows_set &set,
                                                                       int k)
{
    float t = gc_f(x[k]);
    if constexpr (PRO == 2) {
        t += gc_f(((const T *)set.pro.skip)[k]);
        if (set.pro.bias) t += gc_f(((const T *)set.pro.bias)[k]);
    }
    return t;
}

/* PRO: the block's 1 / rms of t over K (block 0 also stores t to pro.sum,
 * rounded, as the skip norm's fourth output); 1 without a prologue. All
 * threads call it. */
template <typename T, int PRO> __device__ __forceinline__ float rows_norm(const T *__restrict__ x, const rows_set &set,
                                                                          int K)
{
    if constexpr (PRO == 0 || PRO >= 3) {
        return 1.0f;
    } else {
        __shared__ float scratch[32];
        float ss = 0.0f;
        /* eight loads in flight, then their squares (the order of one by one: the zeros past K add nothing) */
        for (int k = threadIdx.x; k < K; k += 8 * ROWS_THREADS) {
            float t[8];
#pragma unroll
            for (int e = 0; e < 8; e++) t[e] = k + e * ROWS_THREADS < K ? rows_t<T, PRO>(x, set, k + e * ROWS_THREADS) : 0.0f;
#pragma unroll
            for (int e = 0; e < 8; e++) {
                if (PRO == 2 && blockIdx.x == 0 && set.pro.sum && k + e * ROWS_THREADS < K)
                    ((T *)set.pro.sum)[k + e * ROWS_THREADS] = gc_to<T>(t[e]);
                ss += t[e] * t[e];
            }
        }
        ss = gc_block_sum(ss, scratch);
        return gc_rsqrt<T>(ss / (float)K + set.pro.eps);
    }
}

/* x[c]'s V elements as the GEMV reads them: as stored, or (PRO) the
 * RMSNorm's output rounded to T, as gcuda_rmsnorm / gcuda_skip_rmsnorm
 * would have stored it: t = x (+ skip) (+ bias), (t * inv) * gamma. */
template <typename T, int PRO>
__device__ __forceinline__ void rows_x(const T *__restrict__ x, const rows_set &set, float inv, int c, float *xf)
{
    constexpr int V = 16 / (int)sizeof(T);
    if constexpr (PRO >= 3) { /* x: the block's own, in shared memory */
        gc_unpack<T>(reinterpret_cast<const uint4 *>(x)[c], xf);
        return;
    }
    gc_unpack<T>(__ldg(reinterpret_cast<const uint4 *>(x) + c), xf);
    if constexpr (PRO > 0) {
        float g[V];
        if constexpr (PRO == 2) {
            float sk[V];
            gc_unpack<T>(__ldg(reinterpret_cast<const uint4 *>(set.pro.skip) + c), sk);
#pragma unroll
            for (int i = 0; i < V; i++) xf[i] += sk[i];
            if (set.pro.bias) {
                gc_unpack<T>(__ldg(reinterpret_cast<const uint4 *>(set.pro.bias) + c), sk);
#pragma unroll
                for (int i = 0; i < V; i++) xf[i] += sk[i];
            }
        }
        gc_unpack<T>(__ldg(reinterpret_cast<const uint4 *>(set.pro.gamma) + c), g);
#pragma unroll
        for (int i = 0; i < V; i++) xf[i] = gc_f(gc_to<T>(xf[i] * inv * g[i]));
    }
}

template <typename T, int PRO> __device__ __forceinline__ float rows_x1(const T *__restrict__ x, const rows_set &set,
                                                                         float inv, int k)
{
    if constexpr (PRO >= 3) return gc_f(x[k]);
    float t = rows_t<T, PRO>(x, set, k);
    if constexpr (PRO > 0) t = gc_f(gc_to<T>(t * inv * gc_f(((const T *)set.pro.gamma)[k])));
    return t;
}

/* PRO 4, the compact chain prologue (set.cp, rows_compact_plan; 2-byte rows of K
 * <= 8 ROWS_THREADS): every block computes c, the chain over cp.src, 8
 * contiguous elements a thread, its operands (the row, the chain's gamma
 * and leaves, the GEMV norm's gamma, the skip norm's skip and bias) loaded
 * at once after the wait, with rows_norm_compact's arithmetic; c rounded
 * as stored (block 0 stores it to cp.c), then x into xs: c itself
 * (RCP_C), its RMSNorm (RCP_NORM: rows_chain_pro's arithmetic), or the
 * skip RMSNorm of c + skip (+ bias) (RCP_SKIP: the sum in fp32 as PRO 2's
 * rows_t, stored rounded to pro.sum by block 0). The block sums add in
 * another order than the separate kernels'. A prologue of a few kilobytes
 * of code (the general chain's interpreter makes the kernel 546 KB), and
 * one memory latency for its operands. */
template <typename T>
__device__ __forceinline__ void rows_chain_pro_compact(const rows_set &set, int K, T *xs, float *scratch)
{
    const rows_cpro &cp = set.cp;
    const int c = 8 * (int)threadIdx.x;
    const bool on = c < K;
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    uint4 lv[RC_MAX], xv = z, cg = z, gv = z, kv = z, bv = z;
    float ls[RC_MAX];
    rows_compact_load<T>(cp.cc, [&](int j) { return cp.leaf[j]; }, c, on, lv, ls);
    if (on) {
        xv = go_ld8<T>(cp.src, c);
        if (cp.gamma) cg = go_ld8<T>(cp.gamma, c);
        if (cp.x >= RCP_NORM) gv = go_ld8<T>(set.pro.gamma, c);
        if (cp.x == RCP_SKIP) {
            kv = go_ld8<T>(set.pro.skip, c);
            if (set.pro.bias) bv = go_ld8<T>(set.pro.bias, c);
        }
    }
    float v[8];
    gc_unpack<T>(xv, v);
    go_row8_scale<T, ROWS_THREADS / 32>(v, cg, cp.gamma != NULL, K, cp.eps, cp.norm_div, scratch);
    rows_compact_apply<T>(cp.cc, lv, ls, v);
#pragma unroll
    for (int e = 0; e < 8; e++) v[e] = on ? gc_f(gc_to<T>(v[e])) : 0.0f; /* c as stored */
    if (blockIdx.x == 0 && on && cp.c) go_st8<T>(cp.c, c, v);
    if (cp.x == RCP_SKIP) {
        float k8[8], b8[8];
        gc_unpack<T>(kv, k8);
        gc_unpack<T>(bv, b8);
#pragma unroll
        for (int e = 0; e < 8; e++) {
            v[e] += k8[e];
            if (set.pro.bias) v[e] += b8[e];
        }
        if (blockIdx.x == 0 && on && set.pro.sum) go_st8<T>(set.pro.sum, c, v);
    }
    if (cp.x != RCP_C) {
        float ss = 0.0f, g[8];
#pragma unroll
        for (int e = 0; e < 8; e++) ss += v[e] * v[e];
        ss = go_bsum<ROWS_THREADS / 32>(ss, scratch, 1);
        const float inv = gc_rsqrt<T>(ss / (float)K + set.pro.eps);
        gc_unpack<T>(gv, g);
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = v[e] * inv * g[e];
    }
    if (on) go_st8<T>(xs, c, v);
    __syncthreads();
}

/* PRO 3: the GEMV's x is the RMSNorm (set.pro: gamma, eps) of c, the
 * norm-headed chain `f` over the K elements of its leaf 0 (the output of
 * the GEMV before: the per-layer-input projection's post-norm, residual add
 * and scale, then the next layer's input norm), computed by every block
 * into xs (shared memory) with the arithmetic of the separate kernels
 * (go_norm_chain_row, then rows_norm's PRO 1 over c as stored); block 0
 * also stores c to f.y (the residual the later layers read). */
template <typename T> __device__ __forceinline__ void rows_chain_pro(const gops_fuse &f, const rows_set &set, int K,
                                                                    T *xs)
{
    __shared__ float scratch[32];
    float v[GO_ROW_EPT], g[GO_ROW_EPT], ss = 0.0f;
#pragma unroll
    for (int e = 0; e < GO_ROW_EPT; e++) { /* the norm's gamma, loaded with the chain's operands */
        const int i = e * ROWS_THREADS + (int)threadIdx.x;
        g[e] = i < K ? gc_f(((const T *)set.pro.gamma)[i]) : 0.0f;
    }
    go_norm_chain_regs<int, false, GO_ROW_EPT, true>(f, 0, v, scratch);
#pragma unroll
    for (int e = 0; e < GO_ROW_EPT; e++) {
        const int i = e * ROWS_THREADS + (int)threadIdx.x;
        v[e] = i < K ? gc_f(gc_to<T>(v[e])) : 0.0f; /* c as stored */
        if (blockIdx.x == 0 && i < K) ((T *)f.y)[i] = gc_to<T>(v[e]);
        ss += v[e] * v[e];
    }
    ss = gc_block_sum(ss, scratch);
    const float inv = gc_rsqrt<T>(ss / (float)K + set.pro.eps);
#pragma unroll
    for (int e = 0; e < GO_ROW_EPT; e++) {
        const int i = e * ROWS_THREADS + (int)threadIdx.x;
        if (i < K) xs[i] = gc_to<T>(v[e] * inv * g[e]);
    }
    __syncthreads();
}

/* The x the GEMV reads: as given, or the block's own in shared memory,
 * computed here: by the general chain, the kernel's `tail` (PRO 3:
 * rows_chain_pro; no tail of the GEMV's own), or by the compact one
 * (PRO 4: set.cp, rows_chain_pro_compact; 2-byte types). After the wait
 * for the kernel before. */
template <typename T, int PRO>
__device__ __forceinline__ const T *rows_pro_x(const T *x, const rows_set &set, int K, const gops_fuse &tail)
{
    if constexpr (PRO >= 3) {
        extern __shared__ uint4 rows_xs[];
        T *xs = reinterpret_cast<T *>(rows_xs);
        if constexpr (PRO == 4 && sizeof(T) == 2) {
            __shared__ float scratch[64]; /* two slots (go_bsum) */
            rows_chain_pro_compact<T>(set, K, xs, scratch);
        } else if constexpr (PRO == 3) {
            rows_chain_pro<T>(tail, set, K, xs);
        }
        return xs;
    } else {
        return x;
    }
}

/* A thread's row in group b (RPB rows a group): its matrix's row of
 * weights (and, EPI 3, the second matrix's), the output and the matrix's
 * first row in the launch (rows_matrix: by constant indexes, so the
 * parameters stay in constant memory, with no local copy). */
struct rows_at {
    const void *w, *w2;
    void *y;
    int r, r0;
    bool live;
};
/* The matrix that row r of the launch belongs to: its weights w, output y
 * and first row r0, by constant indexes (a pair's, EPI 3: the first). */
template <int EPI>
__device__ __forceinline__ void rows_matrix(const rows_set &set, int r, const void *&w, void *&y, int &r0)
{
    w = set.W[0];
    y = set.y[0];
    r0 = 0;
    if constexpr (EPI != 3)
#pragma unroll
        for (int q = 1; q < GCUDA_GEMV_MAX; q++)
            if (q < set.n && r >= set.row0[q]) w = set.W[q], y = set.y[q], r0 = set.row0[q];
}
template <typename T, int TPR, int EPI>
__device__ __forceinline__ rows_at rows_locate(const rows_set &set, int b, int K)
{
    constexpr int RPB = ROWS_THREADS / TPR;
    rows_at a;
    a.r = b * RPB + (int)threadIdx.x / TPR;
    a.live = a.r < set.rows;
    const void *wb;
    rows_matrix<EPI>(set, a.r, wb, a.y, a.r0);
    a.w = (const T *)wb + (size_t)(a.live ? a.r - a.r0 : 0) * K;
    /* EPI 3 (a pair): row r of the second matrix too, its chunks after the first's */
    a.w2 = EPI == 3 ? (const T *)set.W[1] + (size_t)(a.live ? a.r : 0) * K : a.w;
    return a;
}

/* 16-byte chunk c of a thread's row of C chunks (EPI 3: the pair's two
 * rows as one of 2 C, the second's after the first's). */
template <int EPI> __device__ __forceinline__ uint4 rows_chunk(const rows_at &a, int C, int c, bool ef, uint64_t pol)
{
    return rows_ld(EPI == 3 && c >= C ? reinterpret_cast<const uint4 *>(a.w2) + (c - C)
                                      : reinterpret_cast<const uint4 *>(a.w) + c,
                   ef, pol);
}

/* The first U chunks a thread reads of its row. */
template <typename T, int TPR, int U, int EPI>
__device__ __forceinline__ void rows_first(const rows_at &a, int K, int lane, bool ef, uint64_t pol, uint4 *wv)
{
    constexpr int V = 16 / (int)sizeof(T);
    const int C = K / V, CT = EPI == 3 ? 2 * C : C;
#pragma unroll
    for (int u = 0; u < U; u++) {
        int c = lane + u * TPR;
        if (a.live && c < CT) wv[u] = rows_chunk<EPI>(a, C, c, ef, pol);
    }
}

/* EPI 1 with set.gm_pre: L[r] for the row whose chain this thread runs
 * in group b (threads below RPB: row b RPB + threadIdx.x), read once the
 * kernel before has ended, so that its latency runs under the prologue and
 * the sums rather than after them; 0 for the other threads. */
template <typename T, int EPI, int RPB>
__device__ __forceinline__ float rows_gm_pre(const rows_set &set, const gops_fuse &tail, int b)
{
    if constexpr (EPI == 1) {
        const int rr = b * RPB + (int)threadIdx.x;
        if (set.gm_pre && threadIdx.x < RPB && rr < set.rows) return gc_f(((const T *)tail.leaf[set.gm - 1])[rr]);
    }
    return 0.0f;
}

/* EPI 1, 3: row r's chain, its product y0 stored by the caller; a pair's
 * second product a1 (EPI 3) stored first, since the chain may read it (in a
 * layout other than the output's). Both GEMV kernels' epilogue. */
template <typename T, int EPI, bool PRE = false>
__device__ __forceinline__ void rows_chain_row(const rows_set &set, const gops_fuse &tail, int r, T y0, float a1,
                                               float lpre = 0.0f)
{
    float y1 = 0.0f;
    if constexpr (EPI == 3) {
        const T y1t = gc_to<T>(a1);
        ((T *)set.y[1])[r] = y1t;
        y1 = gc_f(y1t);
    }
    if (set.gm) { /* go_chain_at's arithmetic for this chain, op by op: the same code, constant ops */
        const int l = set.gm - 1;
        const float g = gc_f(gc_to<T>(go_un_f(GOPS_GELU_TANH, gc_f(y0), 0.0f, 0.0f)));
        const float o = EPI == 3 && l == set.y1_leaf ? y1
                        : PRE && set.gm_pre             ? lpre
                                                        : gc_f(((const T *)tail.leaf[l])[r]);
        ((T *)tail.y)[r] = gc_to<T>(go_bin_f(GOPS_MUL, g, o)); /* either operand order: the same product */
        return;
    }
    if (set.sc) { /* likewise: c2 tanh(y / c1), or y * c1 */
        const float c1 = gc_f(((const T *)tail.leaf[set.sc_l[0]])[0]), c2 = gc_f(((const T *)tail.leaf[set.sc_l[1]])[0]);
        float v = gc_f(gc_to<T>(set.sc == 1 ? go_bin_f(GOPS_DIV, gc_f(y0), c1) : go_bin_f(GOPS_MUL, gc_f(y0), c1)));
        v = gc_f(gc_to<T>(go_un_f(GOPS_TANH, v, 0.0f, 0.0f)));
        ((T *)tail.y)[r] = gc_to<T>(go_bin_f(GOPS_MUL, v, c2));
        return;
    }
    go_st(tail.y, tail.y_dtype, r, go_chain_modes<int>(tail, gc_f(y0), r, set.modes, EPI == 3 ? set.y1_leaf : -1, y1));
}

/* The last block's row when rows_compact_plan found it fits set.cc (v8 2):
 * go_norm_chain_row_v8's arithmetic in the same order (8 contiguous
 * elements a thread, every operand loaded before the norm's block sum),
 * with the chain's shape decided on the host: no instruction loop, op
 * switch or layout and dtype checks on the device, about 13 KB of code
 * where go_norm_chain_row_v8 compiles to about 43 KB and the general row
 * to about 150 KB (tools/cubin_sizes.py; the last block's code runs once a
 * launch, from a cold instruction cache). */
template <typename T>
__device__ __forceinline__ void rows_norm_compact(const rows_set &set, const gops_fuse &f, float *scratch)
{
    const int c = 8 * (int)threadIdx.x;
    const bool on = c < (int)f.norm_dim;
    uint4 lv[RC_MAX];
    float ls[RC_MAX];
    rows_compact_load<T>(set.cc, [&](int j) { return f.leaf[set.cc.leaf[j]]; }, c, on, lv, ls);
    float v[8];
    uint4 sx, sb, sg;
    go_row8_norm<T, int, true, ROWS_THREADS / 32>(f, c, c, on, v, sx, sb, sg, scratch);
    rows_compact_apply<T>(set.cc, lv, ls, v);
    go_row8_end<T, int, ROWS_THREADS / 32>(f, c, on, v, sx, sb, sg, scratch);
}

/* EPI 2: the last block of the grid to end runs the norm-headed chain over
 * the whole output (and the skip norm after it, sk_y), then resets the
 * counter. All threads call it. */
template <typename T>
__device__ __forceinline__ void rows_last_block(const rows_set &set, const gops_fuse &tail, unsigned *counter)
{
    __shared__ float scratch[64]; /* two slots (go_bsum) */
    if (!gc_last_block(counter, gridDim.x)) return;
    if constexpr (sizeof(T) == 2) {
        if (set.v8 == 2) rows_norm_compact<T>(set, tail, scratch);
        else if (set.v8) /* go_norm_v8_ok: the host's */
            go_norm_chain_row_v8<T, int, true, ROWS_THREADS / 32>(tail, 0, scratch);
        else go_norm_chain_row<int, true>(tail, 0, scratch);
    } else {
        go_norm_chain_row<int, true>(tail, 0, scratch);
    }
    if (threadIdx.x == 0) *counter = 0;
}

/* The kernels that rows_launch may give fewer blocks than groups: those
 * with a prologue (computed once a block) or a last-block chain (fewer
 * blocks counting in), and LOOP's (GRAFT_CUDA_ROWS_LOOP: the plain, the
 * per-element and the pair kernels, so that the next group's weights are
 * in flight during a group's sums and chain). The others take one group a
 * block and hold no loop state: the per-element kernels need 39 registers
 * without it, 40 with 16 bytes spilled at 6 blocks an SM (so LOOP's are
 * held to 5); the pair 46 and 48. */
template <int EPI, int PRO, bool LOOP = false> __host__ __device__ constexpr bool rows_loops()
{
    return PRO != 0 || EPI == 2 || LOOP;
}

/* Each block takes every gridDim.x-th group of RPB rows (one group when
 * launched with a block a group; fewer blocks: rows_launch), computing its
 * prologue once; a vector kernel issues the next group's first loads
 * before the current group's sums and epilogue, so that its weights
 * stream without a gap. Blocks an SM the compiler must allow: 6 for the
 * per-element kernels (39 registers), 4 for a last block's
 * (go_norm_chain_row_v8 would take 75-80 registers, 3 blocks: E2B 31 us
 * a step slower; held to 64, it spills a few bytes in the last block), 3
 * for the compact chain prologue's (PRO 4: 80 registers; the plain ones,
 * EPI 0, spill 16 bytes, ptxas -v at 93a9d0d; 85-92 unbound; the general
 * chain's, PRO 3, takes 124 and spills 150 bytes held to 80, so it is
 * not), 5 for the others (45-46 registers). OCC, where nonzero, is the
 * number instead: 6 for the plain and pair kernels where each SM must
 * pull more (rows_hi; 40 registers, 8-16 bytes spilled). */
template <typename T, int TPR, int U, bool VEC, int EPI, int PRO, bool LOOP = false, int OCC = 0>
__global__ void __launch_bounds__(ROWS_THREADS,
                                  OCC ? OCC : PRO == 4 ? 3 : PRO != 0 ? 1 : EPI == 2 ? 4 : EPI == 1 && !LOOP ? 6 : 5)
    gemv_rows_kernel(const T *__restrict__ x, rows_set set, int K, gops_fuse tail, unsigned *counter)
{
    constexpr int RPB = ROWS_THREADS / TPR, V = 16 / (int)sizeof(T);
    const int groups = (set.rows + RPB - 1) / RPB, lane = (int)threadIdx.x % TPR;
    if (set.pf.n) /* later weights asked of L2 first, while few registers are live */
        gc_l2_prefetch(set.pf, blockIdx.x, gridDim.x, threadIdx.x, ROWS_THREADS);
    const uint64_t pol = rows_policy();
    const bool ef = set.l2ef;
    float inv = 1.0f;
    rows_at at = rows_locate<T, TPR, EPI>(set, (int)blockIdx.x, K), nx = at;
    uint4 wv[VEC ? U : 1];
    if constexpr (VEC) rows_first<T, TPR, U, EPI>(at, K, lane, ef, pol, wv);
    for (int b = (int)blockIdx.x;;) {
        const bool first = b == (int)blockIdx.x;
        /* the block's next group (none: a block a group) */
        const int nb = rows_loops<EPI, PRO, LOOP>() ? b + (int)gridDim.x : groups;
        const int r = at.r, r0 = at.r0;
        const bool live = at.live;
        void *yb = at.y;
        float acc = 0.0f, acc2 = 0.0f, lpre = 0.0f;
        if (first) { /* after the first group's loads (rows_first) */
            gc_pdl_wait(); /* x is the kernel before's output */
            gc_pdl_trigger();
            if constexpr (PRO != 0) lpre = rows_gm_pre<T, EPI, RPB>(set, tail, b);
            x = rows_pro_x<T, PRO>(x, set, K, tail);
            inv = rows_norm<T, PRO>(x, set, K);
        } else if constexpr (PRO != 0) {
            lpre = rows_gm_pre<T, EPI, RPB>(set, tail, b);
        }
        if constexpr (VEC) {
            const int C = K / V, CT = EPI == 3 ? 2 * C : C; /* 16-byte chunks in a row (rows) */
            for (int c0 = 0;;) {
#pragma unroll
                for (int u = 0; u < U; u++) {
                    int c = c0 + lane + u * TPR;
                    if (live && c < CT) {
                        const bool second = EPI == 3 && c >= C;
                        float wf[V], xf[V], a = second ? acc2 : acc;
                        gc_unpack<T>(wv[u], wf);
                        rows_x<T, PRO>(x, set, inv, second ? c - C : c, xf);
#pragma unroll
                        for (int i = 0; i < V; i++) a = fmaf(wf[i], xf[i], a);
                        if (second) acc2 = a;
                        else acc = a;
                    }
                }
                c0 += U * TPR;
                if (c0 >= CT) break;
#pragma unroll
                for (int u = 0; u < U; u++) {
                    int c = c0 + lane + u * TPR;
                    if (live && c < CT) wv[u] = rows_chunk<EPI>(at, C, c, ef, pol);
                }
            }
            if (nb < groups) { /* the next group's weights in flight during this one's sums */
                nx = rows_locate<T, TPR, EPI>(set, nb, K);
                rows_first<T, TPR, U, EPI>(nx, K, lane, ef, pol, wv);
            }
        } else {
            const T *__restrict__ w = (const T *)at.w;
            const T *__restrict__ w2 = (const T *)at.w2;
            if (live)
                for (int k = lane; k < K; k += TPR) {
                    float xk = rows_x1<T, PRO>(x, set, inv, k);
                    acc = fmaf(gc_f(w[k]), xk, acc);
                    if constexpr (EPI == 3) acc2 = fmaf(gc_f(w2[k]), xk, acc2);
                }
            if (nb < groups) nx = rows_locate<T, TPR, EPI>(set, nb, K);
        }
        /* the row's TPR partial sums, in a fixed order */
        if constexpr (TPR <= 32) {
#pragma unroll
            for (int o = TPR / 2; o > 0; o >>= 1) {
                acc += __shfl_xor_sync(0xffffffffu, acc, o);
                if constexpr (EPI == 3) acc2 += __shfl_xor_sync(0xffffffffu, acc2, o);
            }
        } else {
            __shared__ float red[2][ROWS_THREADS / 32];
            acc = gc_warp_sum(acc);
            if constexpr (EPI == 3) acc2 = gc_warp_sum(acc2);
            if ((threadIdx.x & 31) == 0) red[0][threadIdx.x >> 5] = acc, red[1][threadIdx.x >> 5] = acc2;
            __syncthreads();
            /* the row's sum: by its lane 0, or (epid) by the first warp's thread for the row, which reads the
             * warp partials lane 0 would (row j's lane 0 is thread j TPR: partials j TPR / 32 on), in its order */
            const bool direct = (EPI == 1 || EPI == 3) && set.epid;
            if (direct ? threadIdx.x < RPB : lane == 0) {
                const int p0 = direct ? (int)threadIdx.x * (TPR / 32) : (int)threadIdx.x >> 5;
                acc = acc2 = 0.0f;
#pragma unroll
                for (int i = 0; i < TPR / 32; i++) acc += red[0][p0 + i], acc2 += red[1][p0 + i];
            }
        }
        if constexpr (EPI == 1 || EPI == 3) {
            /* the block's rows to the first warp, a lane a row: one warp runs
             * the chain for them all (one lane a warp would issue each chain
             * instruction once per row: the LM head's 262144 rows); with
             * set.epid (TPR > 32) the sums are there already */
            float s0 = acc, s1 = acc2;
            if (TPR <= 32 || !set.epid) {
                __shared__ float ys[2][RPB];
                if (lane == 0) ys[0][threadIdx.x / TPR] = acc, ys[1][threadIdx.x / TPR] = acc2;
                __syncthreads();
                if (threadIdx.x < RPB) s0 = ys[0][threadIdx.x], s1 = ys[1][threadIdx.x];
            }
            const int rr = b * RPB + (int)threadIdx.x;
            if (threadIdx.x < RPB && rr < set.rows) { /* one matrix (EPI 1) or a pair: y[0] (and y[1]) at row rr */
                const T yv = gc_to<T>(s0);
                ((T *)set.y[0])[rr] = yv;
                rows_chain_row<T, EPI, EPI == 1 && PRO != 0>(set, tail, rr, yv, s1, lpre);
            }
        } else {
            if (lane == 0 && live) ((T *)yb)[r - r0] = gc_to<T>(acc);
        }
        if (nb >= groups) break;
        b = nb;
        at = nx;
        __syncthreads(); /* the shared sums (red, ys) are the next group's */
    }
    if constexpr (EPI == 2) rows_last_block<T>(set, tail, counter);
}

/* The tensor-core GEMV (GRAFT_CUDA_ROWS_MMA; 2-byte types): mma.sync
 * m16n8k16 with the weights as B (k16 x n8) and x as A. B's 8 columns are
 * 8 / P rows of the matrix (the warp's tile) cut into P segments each
 * (p_log: 0-3): lane g / 4 of the warp is column n = g, row g / P of the
 * tile, segment h = g % P, and at each step loads 16 bytes of that row at
 * chunk 4 P s + 4 h + lane % 4, so that one load instruction reads 64 P
 * contiguous bytes of each of the tile's rows (P 1: 64 bytes of 8 rows, 8:
 * 512 of one; session 28 measured P 1 at half the row kernel's rate at
 * K 12288). Row m of A is x's chunks of segment m % P (the lane's own x
 * chunk: the index of its w chunk), so C[m][n] is the dot product of the
 * segment where m % P == n % P: column n's is at lane (n % P, n / 2), c0
 * or c1 (n odd), and a row's sum is its P columns'. The k order within a
 * chunk is a permutation of the row's (the same for x and w), so the
 * product is the GEMV's, summed in another order. K is split over ks warps
 * (ks_log: 0-3), 8 / ks tiles a block; a row's ks x P partials are added in
 * a fixed order by the block's thread for that row, which then runs the
 * epilogue as the row kernel's first warp does (EPI 1, 3: the chain; 0, 2:
 * the store; 2: the last block). A prologue's x (PRO 1, 2, 4) is made once
 * a block in shared memory. Needs K a multiple of 32 P ks and rows of
 * every matrix a multiple of 8 / P (rows_run). */
#define MMA_U 8 /* 16-byte loads a lane has in flight (a pair: 4 steps of both matrices) */
template <typename T, int EPI, int PRO>
__global__ void __launch_bounds__(ROWS_THREADS, PRO != 0 ? 2 : 3)
    gemv_mma_kernel(const T *__restrict__ x, rows_set set, int K, gops_fuse tail, unsigned *counter, int ks_log,
                    int p_log)
{
    constexpr int NM = EPI == 3 ? 2 : 1, W8 = ROWS_THREADS / 32, U = MMA_U / NM;
    const int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int P = 1 << p_log, RT = 8 >> p_log; /* segments a row, rows a tile */
    const int ks = 1 << ks_log, rpb = RT * (W8 >> ks_log); /* warps a tile, rows a block */
    const int kw = warp & (ks - 1), S = (K >> (5 + p_log)) >> ks_log; /* the warp's share of K, in steps */
    const int rt = (int)blockIdx.x * rpb + RT * (warp >> ks_log); /* the tile's first row */
    const bool live = rt < set.rows; /* the whole warp's: rows are a multiple of RT */
    if (set.pf.n) gc_l2_prefetch(set.pf, blockIdx.x, gridDim.x, threadIdx.x, ROWS_THREADS);
    const void *wb;
    void *yt;
    int rb;
    rows_matrix<EPI>(set, rt, wb, yt, rb);
    const int st = 4 * P;                                  /* chunks a step */
    const int c0 = st * S * kw + 4 * (g & (P - 1)) + q;   /* the lane's first chunk of its row, and of x */
    const int gr = g >> p_log;                            /* the lane's row in the tile */
    const uint4 *wp[NM];
    wp[0] = reinterpret_cast<const uint4 *>((const T *)wb + (size_t)(live ? rt - rb + gr : 0) * K) + c0;
    if constexpr (NM == 2) wp[1] = reinterpret_cast<const uint4 *>((const T *)set.W[1] + (size_t)(live ? rt + gr : 0) * K) + c0;
    const uint64_t pol = rows_policy();
    const bool ef = set.l2ef;
    uint4 wv[NM][U];
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
        for (int m = 0; m < NM; m++)
            if (live && u < S) wv[m][u] = rows_ld(wp[m] + st * u, ef, pol);
    gc_pdl_wait(); /* x is the kernel before's output */
    gc_pdl_trigger();
    const uint4 *xv = reinterpret_cast<const uint4 *>(x);
    if constexpr (PRO >= 3) { /* the prologue's x, once a block, in shared memory */
        xv = reinterpret_cast<const uint4 *>(rows_pro_x<T, PRO>(x, set, K, tail));
    } else if constexpr (PRO != 0) {
        extern __shared__ uint4 rows_xs[];
        constexpr int V = 16 / (int)sizeof(T);
        const float inv = rows_norm<T, PRO>(x, set, K);
        for (int c = (int)threadIdx.x; c < K / V; c += ROWS_THREADS) {
            float xf[V];
            rows_x<T, PRO>(x, set, inv, c, xf); /* the values the row kernel reads */
            T o[V];
#pragma unroll
            for (int i = 0; i < V; i++) o[i] = gc_to<T>(xf[i]);
            rows_xs[c] = *reinterpret_cast<const uint4 *>(o);
        }
        __syncthreads();
        xv = rows_xs;
    }
    float acc[NM][4] = {};
    if (live)
        for (int s0 = 0; s0 < S; s0 += U) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int s = s0 + u;
                if (s < S) {
                    const uint4 xc = PRO != 0 ? xv[c0 + st * s] : __ldg(xv + c0 + st * s);
                    const unsigned a0[4] = {xc.x, xc.x, xc.y, xc.y}, a1[4] = {xc.z, xc.z, xc.w, xc.w};
#pragma unroll
                    for (int m = 0; m < NM; m++) {
                        const unsigned b0[2] = {wv[m][u].x, wv[m][u].y}, b1[2] = {wv[m][u].z, wv[m][u].w};
                        gc_mma<T>::run(acc[m], a0, b0);
                        gc_mma<T>::run(acc[m], a1, b1);
                        if (s + U < S) wv[m][u] = rows_ld(wp[m] + st * (s + U), ef, pol);
                    }
                }
            }
        }
    /* column n (row n / P of the tile, segment n % P) is lane (n % P, n / 2)'s c0 (n even) or c1 (n odd) */
    __shared__ float red[NM][W8][8];
    if (g < P)
#pragma unroll
        for (int m = 0; m < NM; m++) {
            if (((2 * q) & (P - 1)) == g) red[m][warp][2 * q] = acc[m][0];
            if (((2 * q + 1) & (P - 1)) == g) red[m][warp][2 * q + 1] = acc[m][1];
        }
    __syncthreads();
    const int j = (int)threadIdx.x, rr = (int)blockIdx.x * rpb + j;
    if (j < rpb && rr < set.rows) {
        const int t0 = (j >> (3 - p_log)) << ks_log, n0 = (j & (RT - 1)) << p_log; /* the tile's first warp, column */
        float s0 = 0.0f, s1 = 0.0f;
        for (int w = 0; w < ks; w++)
            for (int h = 0; h < P; h++) {
                s0 += red[0][t0 + w][n0 + h];
                if constexpr (NM == 2) s1 += red[1][t0 + w][n0 + h];
            }
        const T yv = gc_to<T>(s0);
        if constexpr (EPI == 1 || EPI == 3) {
            ((T *)set.y[0])[rr] = yv;
            rows_chain_row<T, EPI>(set, tail, rr, yv, s1);
        } else {
            const void *wr;
            void *yb;
            int r0;
            rows_matrix<EPI>(set, rr, wr, yb, r0);
            ((T *)yb)[rr - r0] = yv;
        }
    }
    if constexpr (EPI == 2) rows_last_block<T>(set, tail, counter);
}

/* Launches the tensor-core kernel (2-byte types; rows_run decides that it
 * applies) on a block for every 8 / ks tiles of 8 / P rows. */
template <typename T, int EPI, int PRO>
static cudaError_t mma_launch(const cudaLaunchConfig_t *cfg, const T *x, const rows_set &set, int K,
                             const gops_fuse &tail, unsigned *counter, int ks_log, int p_log)
{
    if constexpr (sizeof(T) != 2 || PRO == 3) {
        return cudaErrorInvalidValue;
    } else {
        return cudaLaunchKernelEx(cfg, gemv_mma_kernel<T, EPI, PRO>, x, set, K, tail, counter, ks_log, p_log);
    }
}

/* The tensor-core kernel's switches GRAFT_CUDA_ROWS_MMA_P and _KS: 1, 2, 4
 * or 8 as its log2 (0-3), anything else (unset included) dflt. */
static int rows_env_log2(const char *name, int dflt)
{
    const char *s = getenv(name);
    const int v = s ? atoi(s) : 0;
    return v == 1 ? 0 : v == 2 ? 1 : v == 4 ? 2 : v == 8 ? 3 : dflt;
}

/* Threads per row: the fewest (32 up to 256) that hold a row in U loads
 * each, then more while the launch has under two blocks per SM. */
static int rows_tpr(int64_t chunks, int64_t rows, int U, int sms)
{
    int tpr = 32;
    while (tpr < ROWS_THREADS && chunks > (int64_t)tpr * U) tpr *= 2;
    while (tpr < ROWS_THREADS && (rows * tpr * 2 + ROWS_THREADS - 1) / ROWS_THREADS < 2 * sms) tpr *= 2;
    return tpr;
}

/* Launches one instantiation: a kernel that loops (rows_loops) on at most
 * the blocks that fit on the device at once (its occupancy is asked once),
 * the others on a block a group of rows. Fewer blocks compute a prologue
 * or count in for a last block: E2B decode 2658 -> 2598 us a step (H200,
 * session 17); fitting the others too measured slower (the LM head 183 ->
 * 221 us), so they loop only under GRAFT_CUDA_ROWS_LOOP (rows_loops), which
 * keeps the next group's loads in flight. GRAFT_CUDA_ROWS_GRID=0: a block
 * a group always. */
template <typename T, int TPR, int U, bool VEC, int EPI, int PRO, bool LOOP = false, int OCC = 0>
static cudaError_t rows_launch(const cudaLaunchConfig_t *cfg0, int sms, const T *x, const rows_set &set, int K,
                               const gops_fuse &tail, unsigned *counter)
{
    cudaLaunchConfig_t cfg = *cfg0;
    static const int fit = gc_env_on("GRAFT_CUDA_ROWS_GRID");
    static const int bal = gc_env_is("GRAFT_CUDA_ROWS_BAL", "1");
    static int occ = 0;
    if (rows_loops<EPI, PRO, LOOP>() && fit) {
        if (!occ) {
            cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &occ, gemv_rows_kernel<T, TPR, U, VEC, EPI, PRO, LOOP, OCC>, ROWS_THREADS, cfg.dynamicSmemBytes);
            if (e != cudaSuccess) return e;
            if (occ < 1) occ = 1;
        }
        const unsigned groups = cfg.gridDim.x, most = (unsigned)(occ * sms);
        if (groups > most) {
            /* GRAFT_CUDA_ROWS_BAL=1: the fewest blocks that still give no block more groups than the fitting
             * grid would, so that every block has the same number of groups (but the last few one fewer) and
             * the launch does not end in a round that only some blocks run (1536 groups on 660 blocks: 2.33
             * each, the third round on a third of them; balanced, 512 blocks of 3) */
            const unsigned per = (groups + most - 1) / most;
            cfg.gridDim.x = bal ? (groups + per - 1) / per : most;
        }
    }
    return cudaLaunchKernelEx(&cfg, gemv_rows_kernel<T, TPR, U, VEC, EPI, PRO, LOOP, OCC>, x, set, K, tail, counter);
}

template <typename T, int U, int EPI, int PRO, bool LOOP = false, int OCC = 0>
static cudaError_t rows_launch_vec(int tpr, const cudaLaunchConfig_t *cfg, int sms, const T *x, const rows_set &set,
                                   int K, const gops_fuse &tail, unsigned *counter)
{
    switch (tpr) {
    case 32: return rows_launch<T, 32, U, true, EPI, PRO, LOOP, OCC>(cfg, sms, x, set, K, tail, counter);
    case 64: return rows_launch<T, 64, U, true, EPI, PRO, LOOP, OCC>(cfg, sms, x, set, K, tail, counter);
    case 128: return rows_launch<T, 128, U, true, EPI, PRO, LOOP, OCC>(cfg, sms, x, set, K, tail, counter);
    default: return rows_launch<T, 256, U, true, EPI, PRO, LOOP, OCC>(cfg, sms, x, set, K, tail, counter);
    }
}

/* Whether a last block (ROWS_THREADS threads, both GEMV kernels) runs
 * norm-headed chain f over a row of dtype in go_norm_chain_row_v8 (2-byte
 * types; go_norm_v8_ok). */
static bool rows_v8_ok(const gops_fuse &f, int dtype)
{
    return dtype == GRAFT_DTYPE_FLOAT16    ? go_norm_v8_ok<__half>(f, ROWS_THREADS)
           : dtype == GRAFT_DTYPE_BFLOAT16 ? go_norm_v8_ok<__nv_bfloat16>(f, ROWS_THREADS)
                                           : false;
}

/* Whether rows_norm_compact runs norm-headed chain f over a row of dtype
 * (2 bytes) by ROWS_THREADS threads, 8 elements each; cc: its shape. The
 * row as go_norm_v8_ok takes it, then the compact row's own limits: the
 * norm's type, the instructions' kinds, ops and types, and the leaves'. */
static bool rows_compact_plan(const gops_fuse &f, int dtype, rows_compact *cc)
{
    if (!rows_v8_ok(f, dtype) || f.norm_dim <= 0 || (f.norm_dtype != dtype && f.norm_dtype != GRAFT_DTYPE_FLOAT) ||
        f.n_ins > RC_MAX)
        return false;
    memset(cc, 0, sizeof *cc);
    cc->n = (unsigned char)f.n_ins;
    cc->norm_rt = f.norm_dtype == dtype;
    for (int k = 0; k < f.n_ins; k++) {
        const gops_fuse_ins &in = f.ins[k];
        if (in.kind == GOPS_FUSE_CAST) { /* as go_chain_at: the rounding to its type */
            if (in.dtype != dtype && in.dtype != GRAFT_DTYPE_FLOAT) return false;
            cc->op[k] = RC_NOP;
            cc->fl[k] = (unsigned char)(in.dtype == dtype ? RC_RT : 0);
            continue;
        }
        if (in.kind != GOPS_FUSE_BINARY || (in.op != GOPS_ADD && in.op != GOPS_SUB && in.op != GOPS_MUL) ||
            (in.dtype != dtype && in.dtype != GRAFT_DTYPE_FLOAT) || in.leaf < 0 || in.leaf >= f.n_leaf ||
            f.leaf_dtype[in.leaf] != dtype)
            return false;
        const int m = go_leaf_mode(f, in.leaf); /* 1 or 2, aligned (go_norm_v8_ok) */
        /* chain_b: the leaf is the left operand (add and multiply commute exactly) */
        cc->op[k] = (unsigned char)(in.op == GOPS_MUL ? RC_MUL : in.op == GOPS_ADD ? RC_ADD : in.chain_b ? RC_RSUB : RC_SUB);
        cc->leaf[k] = (unsigned char)in.leaf;
        cc->fl[k] = (unsigned char)((m == 2 ? RC_ONE : 0) | (in.dtype == dtype ? RC_RT : 0));
    }
    return true;
}

/* Whether chain f (over the GEMV's x, K elements) runs in the compact
 * prologue (rows_chain_pro_compact) before a GEMV whose x is then c (pro
 * NULL), its RMSNorm or its skip RMSNorm (pro->skip); cp: the description. */
static bool rows_cpro_plan(const gops_fuse &f, const gops_rows_norm *pro, int dtype, rows_cpro *cp)
{
    memset(cp, 0, sizeof *cp);
    auto al = [](const void *p) { return ((uintptr_t)p & 15u) == 0; };
    if (!rows_compact_plan(f, dtype, &cp->cc)) return false;
    if (pro && (!pro->gamma || !al(pro->gamma) || !al(pro->skip) || !al(pro->bias) || !al(pro->sum))) return false;
    cp->x = !pro ? RCP_C : pro->skip ? RCP_SKIP : RCP_NORM;
    cp->src = f.leaf[0];
    cp->gamma = f.gamma;
    cp->c = f.y;
    cp->eps = f.eps;
    cp->norm_div = f.norm_div;
    for (int j = 0; j < cp->cc.n; j++) cp->leaf[j] = f.leaf[cp->cc.leaf[j]];
    return true;
}

/* Whether the block-a-group GEMVs without a chain or with a per-element
 * pair chain (EPI 0, 3; no prologue: E2B's down and gate/up pair) run at
 * 6 blocks an SM (40 registers, a few bytes spilled) rather than 5: where
 * each SM must pull more than 30 GB/s at the memory's peak (the H200's
 * 4.8 TB/s over 132 SMs; an H100's 3.35 over 132 is 25), the bytes in
 * flight an SM are what hold the rate. An H100 at 96 SMs
 * (GRAFT_CUDA_SMS=96, session 45): E2B 2401-2407 us of graph a step
 * against 2444-2451; at 132 SMs 2345-2352 against 2337-2340.
 * GRAFT_CUDA_ROWS_HI=0|1: never, always. */
static bool rows_hi(int sms)
{
    static int hi = -1;
    if (hi < 0) {
        const char *e = getenv("GRAFT_CUDA_ROWS_HI");
        int dev = 0, khz = 0, bits = 0;
        if (e && *e) hi = strcmp(e, "0") != 0;
        else if (cudaGetDevice(&dev) == cudaSuccess &&
                 cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev) == cudaSuccess &&
                 cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev) == cudaSuccess && sms > 0)
            hi = 2.0 * khz * 1e3 * (bits / 8.0) / sms > 30e9;
        else
            hi = 0;
        (void)cudaGetLastError();
    }
    return hi != 0;
}

/* The (EPI, PRO) kernel: the vector one at tpr threads a row, or the
 * scalar one. The compact chain prologue's (PRO 4) exist for 2-byte types
 * only (rows_cpro_plan); rows_run asks for no other. */
template <typename T, int EPI, int PRO>
static cudaError_t rows_launch_epi(bool vec, int tpr, const cudaLaunchConfig_t *cfg, int sms, const T *x,
                                   const rows_set &set, int K, const gops_fuse &tail, unsigned *counter)
{
    if constexpr (PRO == 4 && sizeof(T) != 2) {
        return cudaErrorInvalidValue;
    } else {
        if (!vec) return rows_launch<T, ROWS_THREADS, 1, false, EPI, PRO>(cfg, sms, x, set, K, tail, counter);
        if constexpr (PRO == 0 && EPI != 2)
            if (set.loop >> EPI & 1)
                return rows_launch_vec<T, ROWS_UNROLL, EPI, PRO, true>(tpr, cfg, sms, x, set, K, tail, counter);
        if constexpr (PRO == 0 && (EPI == 0 || EPI == 3))
            if (rows_hi(sms)) return rows_launch_vec<T, ROWS_UNROLL, EPI, PRO, false, 6>(tpr, cfg, sms, x, set, K, tail, counter);
        return rows_launch_vec<T, ROWS_UNROLL, EPI, PRO>(tpr, cfg, sms, x, set, K, tail, counter);
    }
}

/* pair: two matrices of N rows, row r of both by one thread group, their
 * outputs then tail (which reads the first's y as leaf 0 and may read the
 * second's) per element. pro: x is the RMSNorm of pro->x (+ skip + bias),
 * computed by each block (the norm node only shapes its output). pchain:
 * the norm-headed chain whose output the norm reads instead of pro->x
 * (or, pro NULL, that is x), computed by each block; compact: in the
 * compact form wherever it fits (else only the forms that need it, and
 * under GRAFT_CUDA_ROWS_V8=2). */
/* gcuda_gemv_rows_prefetch_next's set, taken by the next rows_run on this thread */
static thread_local gcuda_prefetch_set rows_next_pf;

extern "C" graft_status gcuda_gemv_rows_prefetch_next(const gcuda_prefetch_set *ps, graft_error *err)
{
    if (!ps || !ps->n) {
        rows_next_pf.n = 0;
        return GRAFT_OK;
    }
    graft_status st = gc_prefetch_check(ps, "gcuda_gemv_rows_prefetch_next", err);
    if (st) return st;
    rows_next_pf = *ps;
    return GRAFT_OK;
}

static graft_status rows_run(int dtype, const void *x, const void *const *w, void *const *y, const int64_t *N, int n,
                             int64_t K, int unroll, const gops_fuse *tail, unsigned *counter, bool pair,
                             const gops_rows_norm *pro, const gops_fuse *pchain, bool compact_pro, gcuda_stream s,
                             graft_error *err)
{
    const gcuda_prefetch_set pf = rows_next_pf; /* taken, launched or not */
    rows_next_pf.n = 0;
    size_t es = gcuda_dtype_size(dtype);
    if (!es) return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_gemv_rows: dtype %d not supported", dtype);
    if (n < 1 || n > GCUDA_GEMV_MAX) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows: %d matrices", n);
    if (unroll != 2 && unroll != 4 && unroll != 8 && unroll != 16)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows: unroll %d (2, 4, 8 or 16)", unroll);
    if (K <= 0 || K > 0x7fffffff) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows: K %lld", (long long)K);
    rows_set set = {};
    set.n = n;
    set.pf = pf;
    set.pf.mode = gc_pf_mode();
    static const int l2ef = gc_env_on("GRAFT_CUDA_L2EF"); /* the weights evict first from L2 (=0: loads as they default) */
    /* GRAFT_CUDA_ROWS_V8: unset 1, 0 the general row, 2 rows_norm_compact where it fits */
    static const int v8 = gc_env_is("GRAFT_CUDA_ROWS_V8", "0") ? 0 : gc_env_is("GRAFT_CUDA_ROWS_V8", "2") ? 2 : 1;
    set.l2ef = l2ef;
    static const int epid = !gc_env_is("GRAFT_CUDA_ROWS_EPID", "0");
    set.epid = epid;
    static int loop = -1;
    if (loop < 0) {
        const char *lp = getenv("GRAFT_CUDA_ROWS_LOOP");
        int m = 0;
        for (; lp && *lp; lp++)
            if (*lp == '0' || *lp == '1' || *lp == '3') m |= 1 << (*lp - '0');
        loop = m;
    }
    set.loop = loop;
    set.v8 = v8 == 2 ? 1 : v8; /* 2 where the tail fits it, below */
    int64_t rows = 0;
    int pk = 0; /* the prologue: 0 none, 1 RMSNorm, 2 skip RMSNorm, 3 a norm-headed chain (set.cp.x: compact) */
    if (pchain) {
        const int64_t numel = go_fuse_ok(*pchain) ? go_fuse_numel(*pchain) : -1; /* -1: not well formed */
        /* the forms only the compact chain takes: x = c, a skip norm, a tail of the GEMV's own */
        const bool ext = !pro || pro->skip || tail;
        if ((pro && !pro->gamma) || pchain->norm_dim != K || numel != K || K > GCUDA_CHAIN_PRO_MAX_K ||
            pchain->sk_y || (!ext && !pchain->y) || pchain->y_dtype != dtype)
            return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows_chain_pro: a chain over %lld elements (norm %lld) "
                              "before a GEMV of K %lld", (long long)numel, (long long)pchain->norm_dim, (long long)K);
        const bool compact = rows_cpro_plan(*pchain, pro, dtype, &set.cp);
        if (ext && !compact)
            return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_gemv_rows_chain_pro_tail: the chain (%d instructions, "
                              "dtype %d) does not fit the compact prologue", pchain->n_ins, dtype);
        if (!ext && v8 != 2 && !compact_pro) set.cp.x = 0; /* the general chain */
        if (pro) set.pro = *pro;
        set.pro.x = NULL;
        x = NULL; /* each block's own, in shared memory */
        pk = 3;
    } else if (pro) {
        if (!pro->x || !pro->gamma || (!pro->skip && (pro->bias || pro->sum)))
            return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows: a norm prologue without its x or gamma");
        set.pro = *pro;
        x = pro->x;
        pk = pro->skip ? 2 : 1;
    }
    bool vec = (K * (int64_t)es) % 16 == 0 && (uintptr_t)x % 16 == 0;
    if (pro)
        vec = vec && (uintptr_t)pro->gamma % 16 == 0 && (uintptr_t)pro->skip % 16 == 0 &&
              (uintptr_t)pro->bias % 16 == 0;
    for (int j = 0; j < n; j++) {
        if (N[j] <= 0) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows: N %lld", (long long)N[j]);
        set.W[j] = w[j];
        set.y[j] = y[j];
        set.row0[j] = (int)rows;
        rows += N[j];
        if (rows > 0x7fffffff) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows: %lld rows", (long long)rows);
        vec = vec && (uintptr_t)w[j] % 16 == 0;
    }
    set.rows = (int)rows;
    if (pair) {
        if (n != 2 || N[0] != N[1] || !tail || tail->norm_dim)
            return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows_pair_tail: %d matrices, a norm %lld", n,
                              tail ? (long long)tail->norm_dim : 0LL);
        set.rows = (int)N[0];
        set.row0[1] = 0;
    }
    int epi = 0;
    gops_fuse none;
    if (tail) {
        const int64_t numel = go_fuse_ok(*tail) ? go_fuse_numel(*tail) : -1; /* -1: not well formed */
        bool ok = (n == 1 || pair) && numel == set.rows &&
                  (tail->norm_dim == 0 || (tail->norm_dim == rows && counter));
        /* a skip norm after the chain: only by the last block of one matrix's norm-headed chain */
        ok = ok && (!tail->sk_y || (!pair && tail->norm_dim && tail->sk_x && tail->sk_gamma && tail->y_dtype == dtype));
        if (!ok)
            return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows_tail: a chain over %lld elements (norm %lld) "
                              "after %d matrices of %lld rows", (long long)numel, (long long)tail->norm_dim, n,
                              (long long)rows);
        epi = pair ? 3 : tail->norm_dim ? 2 : 1;
        /* the last block's 2-byte row: v8 where go_norm_v8_ok takes the chain, decided here once (not by the
         * last block at each launch, from its parameters), compact where rows_compact_plan also fits it (=2) */
        if (epi == 2 && set.v8 && !rows_v8_ok(*tail, dtype)) set.v8 = 0;
        if (epi == 2 && v8 == 2 && rows_compact_plan(*tail, dtype, &set.cc)) set.v8 = 2;
        /* each leaf's layout (go_chain_modes); the pair's second output as a leaf: y[1] itself as the output
         * lays it out, of its dtype (its value is the one the thread stored) */
        set.modes = go_leaf_modes(*tail);
        set.y1_leaf = -1;
        for (int l = 0; pair && l < tail->n_leaf && set.y1_leaf < 0; l++)
            if ((set.modes >> (2 * l) & 3u) == 1 && tail->leaf[l] == y[1] && tail->leaf_dtype[l] == dtype)
                set.y1_leaf = l;
        /* gelu_tanh(y) * L (E2B: the MLP's gelu(gate) * up in every layer's pair, the per-layer-input gate's
         * gelu(gate) * its input): written out in the kernel (session 34, H100 lab: the pair at N 6144 12.48 us a
         * launch interpreted, 11.22 written out, 10.98 with no instructions; E2B 2423 -> 2371 us of graph a step;
         * GRAFT_CUDA_ROWS_GM=0: interpreted) */
        static const int gm_on = !gc_env_is("GRAFT_CUDA_ROWS_GM", "0");
        /* both written-out forms: a per-element chain whose every step, leaf and output are of the GEMV's dtype */
        const bool own = gm_on && (epi == 1 || epi == 3) && !tail->sk_y && tail->y_dtype == dtype;
        /* instruction g reads a leaf of the GEMV's dtype in layout mode (go_leaf_mode: 1 the output's, 2 one value) */
        auto leaf_as = [&](const gops_fuse_ins *g, unsigned mode) {
            return g->leaf >= 0 && g->leaf < tail->n_leaf && (set.modes >> (2 * g->leaf) & 3u) == mode &&
                   tail->leaf_dtype[g->leaf] == dtype;
        };
        const gops_fuse_ins *g0 = tail->ins, *g1 = tail->ins + 1, *g2 = tail->ins + 2;
        if (own && tail->n_ins == 2 && g0->kind == GOPS_FUSE_UNARY && g0->op == GOPS_GELU_TANH && g0->dtype == dtype &&
            g1->kind == GOPS_FUSE_BINARY && g1->op == GOPS_MUL && g1->dtype == dtype && leaf_as(g1, 1))
            set.gm = 1 + g1->leaf;
        /* L read before the sums (rows_gm_pre; a prologue kernel's: the per-layer-input gate's input in E2B; H100,
         * session 39: E2B 7 us a step less; GRAFT_CUDA_ROWS_GMPRE=0: not) where it overlaps no output of this
         * launch, whose new values it would otherwise read: y[j], the chain's y (L spans the output's rows, as its
         * layout is the output's) */
        static const int gmpre_on = !gc_env_is("GRAFT_CUDA_ROWS_GMPRE", "0");
        if (set.gm && gmpre_on && !pair) {
            const uintptr_t l0 = (uintptr_t)tail->leaf[set.gm - 1], l1 = l0 + (uintptr_t)set.rows * es;
            auto apart = [&](const void *p, int64_t cnt) {
                return (uintptr_t)p + (uintptr_t)cnt * es <= l0 || (uintptr_t)p >= l1;
            };
            bool ok = apart(tail->y, set.rows);
            for (int j = 0; j < n; j++) ok = ok && apart(y[j], N[j]);
            set.gm_pre = ok;
        }
        /* a softcap c2 tanh(y / c1) (E2B's LM head: 262144 rows; H200 lab, session 33: its shape 194.3 us a
         * launch with the chain interpreted, 175.7 with none) */
        if (own && tail->n_ins == 3 && g0->kind == GOPS_FUSE_BINARY && g0->dtype == dtype && leaf_as(g0, 2) &&
            ((g0->op == GOPS_DIV && !g0->chain_b) || g0->op == GOPS_MUL) && g1->kind == GOPS_FUSE_UNARY &&
            g1->op == GOPS_TANH && g1->dtype == dtype && g2->kind == GOPS_FUSE_BINARY && g2->op == GOPS_MUL &&
            g2->dtype == dtype && leaf_as(g2, 2)) {
            set.sc = g0->op == GOPS_DIV ? 1 : 2;
            set.sc_l[0] = g0->leaf, set.sc_l[1] = g2->leaf;
        }
    } else {
        memset(&none, 0, sizeof none);
    }
    const gops_fuse &tf = tail ? *tail : pchain ? *pchain : none; /* PRO 3 with a tail: its chain is set.cp */
    int sms;
    graft_status st = gcuda_sm_count(&sms, err);
    if (st) return st;
    int tpr = vec ? rows_tpr((pair ? 2 : 1) * K * (int64_t)es / 16, set.rows, unroll, sms) : ROWS_THREADS;
    static int force_tpr = -1; /* GRAFT_CUDA_ROWS_TPR=32|64|128|256: the kernel lab's override */
    if (force_tpr < 0) {
        const char *ft = getenv("GRAFT_CUDA_ROWS_TPR");
        int v = ft ? atoi(ft) : 0;
        force_tpr = v == 32 || v == 64 || v == 128 || v == 256 ? v : 0;
    }
    if (vec && force_tpr) tpr = force_tpr;
    /* the tensor-core kernel (GRAFT_CUDA_ROWS_MMA=1) where it tiles the rows: 2 bytes an element, K a multiple of
     * 32 P, every matrix's rows a multiple of 8 / P, and a prologue's x within 48 KB of shared memory */
    static const int mma_on = gc_env_is("GRAFT_CUDA_ROWS_MMA", "1");
    static const int mma_p = rows_env_log2("GRAFT_CUDA_ROWS_MMA_P", 3); /* segments a row (p_log 0-3; default 8) */
    int p_log = mma_p; /* fewer segments where K or the rows do not divide */
    while (p_log > 0 && K % (32 << p_log) != 0) p_log--;
    bool mma = mma_on && es == 2 && vec && unroll == ROWS_UNROLL && K % 32 == 0 &&
               !(pk == 3 && !set.cp.x) && (pk == 0 || K * (int64_t)es <= 48 * 1024);
    for (int j = 0; mma && j < n; j++)
        while (N[j] % (8 >> p_log) != 0) p_log++; /* a smaller tile */
    mma = mma && p_log <= 3 && K % (32 << p_log) == 0;
    int ks_log = 0; /* warps a tile: 1 << ks_log */
    if (mma) {
        const int steps = (int)(K >> (5 + p_log));
        static const int force_ks = rows_env_log2("GRAFT_CUDA_ROWS_MMA_KS", 4); /* the kernel lab's override */
        if (force_ks < 4 && steps % (1 << force_ks) == 0) {
            ks_log = force_ks;
        } else { /* split K while the launch has under 4 blocks an SM and each warp keeps 4 steps or more */
            const int64_t tiles = set.rows >> (3 - p_log);
            while (ks_log < 3 && steps % (2 << ks_log) == 0 && steps / (2 << ks_log) >= 4 &&
                   (tiles << ks_log) / 8 < 4 * (int64_t)sms)
                ks_log++;
        }
    }
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(((int64_t)set.rows * tpr + ROWS_THREADS - 1) / ROWS_THREADS));
    cfg.blockDim = dim3(ROWS_THREADS);
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = gcuda_pdl_mode() >= 1 ? 1 : 0; /* GRAFT_CUDA_PDL=0: a plain launch */
    if (pk == 3) cfg.dynamicSmemBytes = (size_t)K * es; /* x */
    if (mma) {
        const int rpb = (8 >> p_log) * ((ROWS_THREADS / 32) >> ks_log);
        cfg.gridDim = dim3((unsigned)((set.rows + rpb - 1) / rpb));
        cfg.dynamicSmemBytes = pk ? (size_t)K * es : 0;
    }
    const int Ki = (int)K;
    cudaError_t e = cudaSuccess;
#define ROWS_EPI(EPI, PRO)                                                                                          \
    e = mma ? mma_launch<T, EPI, PRO>(&cfg, xt, set, Ki, tf, counter, ks_log, p_log)                                \
            : rows_launch_epi<T, EPI, PRO>(vec, tpr, &cfg, sms, xt, set, Ki, tf, counter)
    if (unroll != ROWS_UNROLL && (epi || pk))
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows: unroll %d with a tail or a prologue", unroll);
    if (pk && (epi == 2 || (epi == 1 && pk != 3)))
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_gemv_rows: a norm prologue with a single-matrix tail");
    GCUDA_DISPATCH(dtype, "gcuda_gemv_rows", {
        const T *xt = (const T *)x;
        if (unroll != ROWS_UNROLL && vec) { /* the bench's other geometries (unaligned rows: the scalar kernel) */
            if (unroll == 2) e = rows_launch_vec<T, 2, 0, 0>(tpr, &cfg, sms, xt, set, Ki, tf, counter);
            else if (unroll == 8) e = rows_launch_vec<T, 8, 0, 0>(tpr, &cfg, sms, xt, set, Ki, tf, counter);
            else e = rows_launch_vec<T, 16, 0, 0>(tpr, &cfg, sms, xt, set, Ki, tf, counter);
        } else if (epi == 0) {
            if (pk == 0) ROWS_EPI(0, 0);
            else if (pk == 1) ROWS_EPI(0, 1);
            else if (pk == 2) ROWS_EPI(0, 2);
            else if (set.cp.x) ROWS_EPI(0, 4);
            else ROWS_EPI(0, 3);
        } else if (epi == 1) {
            if (pk == 3) ROWS_EPI(1, 4);
            else ROWS_EPI(1, 0);
        } else if (epi == 2) {
            ROWS_EPI(2, 0);
        } else {
            if (pk == 0) ROWS_EPI(3, 0);
            else if (pk == 1) ROWS_EPI(3, 1);
            else if (pk == 2) ROWS_EPI(3, 2);
            else ROWS_EPI(3, 4);
        }
    });
#undef ROWS_EPI
    if (e != cudaSuccess)
        return gcuda_fail(err, e, mma ? "launch gemv_mma_kernel" : "launch gemv_rows_kernel", __FILE__, __LINE__);
    return GRAFT_OK;
}

extern "C" graft_status gcuda_gemv_rows(int dtype, const void *x, const void *w, void *y, int64_t K, int64_t N,
                                        gcuda_stream s, graft_error *err)
{
    return rows_run(dtype, x, &w, &y, &N, 1, K, ROWS_UNROLL, NULL, NULL, false, NULL, NULL, false, s, err);
}

extern "C" graft_status gcuda_gemv_rows_multi(int dtype, const void *x, const void *const *w, void *const *y,
                                              const int64_t *N, int n, int64_t K, gcuda_stream s, graft_error *err)
{
    return rows_run(dtype, x, w, y, N, n, K, ROWS_UNROLL, NULL, NULL, false, NULL, NULL, false, s, err);
}

extern "C" graft_status gcuda_gemv_rows_tuned(int dtype, const void *x, const void *w, void *y, int64_t K, int64_t N,
                                              int unroll, gcuda_stream s, graft_error *err)
{
    return rows_run(dtype, x, &w, &y, &N, 1, K, unroll, NULL, NULL, false, NULL, NULL, false, s, err);
}

extern "C" graft_status gcuda_gemv_rows_tail(int dtype, const void *x, const void *w, void *y, int64_t K, int64_t N,
                                             const gops_fuse *tail, unsigned *counter, gcuda_stream s,
                                             graft_error *err)
{
    if (!tail) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows_tail: no chain");
    return rows_run(dtype, x, &w, &y, &N, 1, K, ROWS_UNROLL, tail, counter, false, NULL, NULL, false, s, err);
}

extern "C" graft_status gcuda_gemv_rows_pair_tail(int dtype, const void *x, const void *w0, const void *w1, void *y0,
                                                  void *y1, int64_t K, int64_t N, const gops_fuse *tail,
                                                  gcuda_stream s, graft_error *err)
{
    const void *w[2] = {w0, w1};
    void *y[2] = {y0, y1};
    int64_t Ns[2] = {N, N};
    return rows_run(dtype, x, w, y, Ns, 2, K, ROWS_UNROLL, tail, NULL, true, NULL, NULL, false, s, err);
}

extern "C" graft_status gcuda_gemv_rows_fused(int dtype, const gops_rows_norm *pro, const void *const *w,
                                              void *const *y, const int64_t *N, int n, int64_t K,
                                              const gops_fuse *tail, unsigned *counter, int pair, gcuda_stream s,
                                              graft_error *err)
{
    if (!pro) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows_fused: no norm");
    return rows_run(dtype, NULL, w, y, N, n, K, ROWS_UNROLL, tail, counter, pair != 0, pro, NULL, false, s, err);
}

extern "C" graft_status gcuda_gemv_rows_chain_pro(int dtype, const gops_fuse *chain, const gops_rows_norm *pro,
                                                  const void *const *w, void *const *y, const int64_t *N, int n,
                                                  int64_t K, gcuda_stream s, graft_error *err)
{
    if (!chain || !pro || pro->skip) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows_chain_pro: no chain or norm");
    return rows_run(dtype, NULL, w, y, N, n, K, ROWS_UNROLL, NULL, NULL, false, pro, chain, false, s, err);
}

extern "C" int gcuda_gemv_rows_chain_pro_fits(int dtype, const gops_fuse *chain)
{
    rows_compact cc;
    return chain && go_fuse_ok(*chain) && chain->norm_dim > 0 && chain->norm_dim <= GCUDA_CHAIN_PRO_MAX_K &&
           go_fuse_numel(*chain) == chain->norm_dim && !chain->sk_y && rows_compact_plan(*chain, dtype, &cc);
}

extern "C" graft_status gcuda_gemv_rows_chain_pro_tail(int dtype, const gops_fuse *chain, const gops_rows_norm *pro,
                                                       const void *const *w, void *const *y, const int64_t *N, int n,
                                                       int64_t K, const gops_fuse *tail, int pair, gcuda_stream s,
                                                       graft_error *err)
{
    if (!chain || (pair && !tail)) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows_chain_pro_tail: no chain");
    return rows_run(dtype, NULL, w, y, N, n, K, ROWS_UNROLL, tail, NULL, pair != 0, pro, chain, true, s, err);
}
