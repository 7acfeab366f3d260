/* Two decode GEMVs in sequence in one launch (gcuda_gemv_rows_seq): y1 =
 * W1 . x with the per-element chain f1 that reads y1 (its output g), then
 * y2 = W2 . g with the chain f2 that reads y2 (per element, or headed by an
 * RMSNorm over all of y2, with or without the skip norm after it). Gemma's
 * per-layer-input gate (gelu(W1 h) * the layer's input) and projection
 * (W2 g, its post-norm, the residual add and the layer scale): 1.6 MB of
 * weights that two launches of gemv_rows_kernel took ~9 us a layer to read
 * on the H200, two kernel hand-offs and a last block's chain.
 *
 * The grid is one thread-block cluster of C blocks (16 where the device
 * allows, else 8, 4, 2). Block b owns a contiguous run of W1's rows and
 * one of W2's; before waiting for the kernel before (a programmatic
 * dependent launch: the weights do not depend on it) it copies both runs
 * into its shared memory (cp.async, 16 bytes a thread at a time, all in
 * flight, a group a matrix). Then x to shared memory; each warp a row
 * of its run at a time (lanes over 16-byte chunks, fp32 sums reduced by
 * shuffles in a fixed order); the run's y1 stored and f1 applied to it a
 * thread an element, as the row kernel's EPI 1 does, and its g written
 * into every block's shared memory (distributed shared memory), published
 * by a cluster barrier (release, acquire). W2's rows the same way from the
 * local g. A norm-headed f2: each block's sum of squares of its rounded y2
 * to every block, a barrier, then each block normalises and runs f2 on its
 * own run (and the same again for the skip norm's sum), with the
 * arithmetic of go_norm_chain_row and go_skip_norm_row. No counters, no
 * atomics, no last block: the cluster's barriers are the hand-offs.
 *
 * Measured slower on the H200, so the executor takes it only with
 * GRAFT_CUDA_FUSE_SEQ=1 (runtime/cuda/fuse.c plan_seq): 11.9 us a launch
 * against 8.1 for the two row-kernel launches it replaces, alone in a graph
 * (test_kernels --epi), 17.7 against 13.2 after a 6144 x 1536 GEMV; E2B
 * decode 393.5 tok/s against 422-424 (bench/RESULTS.md, session 20). Under
 * Nsight Compute, with mbarrier bulk copies, the warps waited on the
 * copies for most of a 15 us launch (~7 GB/s an SM); cp.async (below) did
 * no better: 16 SMs, not the copy's form, seem to be the limit. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gcuda_chain.cuh"

#define SQ_THREADS 256
#define SQ_WARPS (SQ_THREADS / 32)
#define SQ_MAX_C 16
#define SQ_SMEM_MAX (200 * 1024)

typedef struct sq_params {
    const void *x, *w1, *w2;
    void *y1, *y2;
    int K1, N1, N2;
    int r1, r2;              /* rows of W1 and W2 a block (the last blocks fewer, or none) */
    unsigned o2, ox, og, of; /* shared-memory offsets: W2's run, x, g, the runs' fp32 sums (W1's run at 0) */
    unsigned modes1, modes2; /* each leaf's layout against the output (go_chain_modes), f1 and f2 */
} sq_params;

/* rows [r0, r0 + n) of a [*, K] matrix of 2-byte elements into dst, 16
 * bytes a cp.async by every thread (all in flight at once), committed as
 * one group. The copy engine's bulk copies (cp.async.bulk, 16 KB pieces on
 * an mbarrier) measured the same: 11.9 us a launch in the kernel lab. */
__device__ __forceinline__ void sq_fetch(unsigned char *dst, const void *w, int r0, int n, int K)
{
    const int words = n * K / 8;
    const uint4 *src = reinterpret_cast<const uint4 *>(w) + (size_t)r0 * K / 8;
    for (int i = (int)threadIdx.x; i < words; i += SQ_THREADS) gc_cp16(dst + (size_t)i * 16, src + i, true);
    gc_cp_commit();
}

/* The n rows of a run (C 16-byte chunks each) times v into out[]: warp w
 * takes rows w, w + 8, ...; the block's threads see out after the call. */
template <typename T>
__device__ __forceinline__ void sq_gemv(const uint4 *__restrict__ w, const uint4 *__restrict__ v, int n, int C,
                                        float *out)
{
    constexpr int V = 16 / (int)sizeof(T);
    const int lane = (int)threadIdx.x & 31;
    for (int r = (int)threadIdx.x >> 5; r < n; r += SQ_WARPS) {
        float acc = 0.0f;
        for (int c = lane; c < C; c += 32) {
            float wf[V], vf[V];
            gc_unpack<T>(w[(size_t)r * C + c], wf);
            gc_unpack<T>(v[c], vf);
#pragma unroll
            for (int i = 0; i < V; i++) acc = fmaf(wf[i], vf[i], acc);
        }
        acc = gc_warp_sum(acc);
        if (lane == 0) out[r] = acc;
    }
    __syncthreads();
}

/* The cluster's sum of each block's v: v to slot b of every block's
 * part[], a barrier, then the C slots added in order (every block the
 * same value). All threads call it with the block's v. */
__device__ __forceinline__ float sq_cluster_sum(float v, float *part, int C)
{
    if (threadIdx.x < (unsigned)C) gc_cluster_stf(gc_cluster_map(part + blockIdx.x, threadIdx.x), v);
    gc_cluster_arrive(true);
    gc_cluster_wait();
    float t = 0.0f;
    for (int i = 0; i < C; i++) t += part[i];
    return t;
}

template <typename T>
__global__ void __launch_bounds__(SQ_THREADS, 1) gemv_seq_kernel(sq_params p, gops_fuse f1, gops_fuse f2)
{
    extern __shared__ __align__(128) unsigned char sq_smem[];
    __shared__ float scratch[32], part[2][SQ_MAX_C];
    const int b = (int)blockIdx.x, C = (int)gridDim.x, tid = (int)threadIdx.x;
    const int a1 = min(p.N1, b * p.r1), n1 = min(p.N1, a1 + p.r1) - a1;
    const int a2 = min(p.N2, b * p.r2), n2 = min(p.N2, a2 + p.r2) - a2;
    /* the weights do not depend on the kernel before: asked for first */
    sq_fetch(sq_smem, p.w1, a1, n1, p.K1);
    sq_fetch(sq_smem + p.o2, p.w2, a2, n2, p.N1);
    gc_cluster_arrive(false); /* this block runs: the others may write its shared memory after their wait */
    gc_pdl_wait();    /* x is the kernel before's output */
    gc_pdl_trigger();
    constexpr int V = 16 / (int)sizeof(T);
    const int C1 = p.K1 / V, C2 = p.N1 / V;
    uint4 *xs = reinterpret_cast<uint4 *>(sq_smem + p.ox);
    T *gs = reinterpret_cast<T *>(sq_smem + p.og);
    float *sums = reinterpret_cast<float *>(sq_smem + p.of);
    for (int c = tid; c < C1; c += SQ_THREADS) xs[c] = __ldg(reinterpret_cast<const uint4 *>(p.x) + c);
    gc_cp_wait<1>(); /* this thread's W1 words */
    __syncthreads();
    sq_gemv<T>(reinterpret_cast<const uint4 *>(sq_smem), xs, n1, C1, sums);
    /* y1 and g, a thread an element; g to every block's gs */
    if (tid < n1) {
        const int rr = a1 + tid;
        const T yv = gc_to<T>(sums[tid]);
        ((T *)p.y1)[rr] = yv;
        const T gv = gc_to<T>(go_chain_modes<int>(f1, gc_f(yv), rr, p.modes1, -1, 0.0f));
        ((T *)f1.y)[rr] = gv;
        gs[rr] = gv;
    }
    __syncthreads();
    gc_cluster_wait(); /* every block runs: its shared memory may be written */
    for (int i = tid; i < n1 * C; i += SQ_THREADS) {
        const int rr = a1 + i % n1, dst = i / n1;
        if (dst != b) gc_cluster_st16(gc_cluster_map(gs + rr, (unsigned)dst), *reinterpret_cast<const unsigned short *>(gs + rr));
    }
    gc_cp_wait<0>(); /* this thread's W2 words, before its arrival */
    gc_cluster_arrive(true);
    gc_cluster_wait(); /* g complete in every block, and W2's run in this one */
    sq_gemv<T>(reinterpret_cast<const uint4 *>(sq_smem + p.o2), reinterpret_cast<const uint4 *>(gs), n2, C2, sums);
    float yv = 0.0f;
    if (tid < n2) {
        const int rr = a2 + tid;
        const T yt = gc_to<T>(sums[tid]);
        ((T *)p.y2)[rr] = yt;
        yv = gc_f(yt);
        if (!f2.norm_dim) go_st(f2.y, f2.y_dtype, rr, go_chain_modes<int>(f2, yv, rr, p.modes2, -1, 0.0f));
    }
    if (!f2.norm_dim) return;
    /* go_norm_chain_row's arithmetic, over the cluster */
    const float ss = sq_cluster_sum(gc_block_sum(yv * yv, scratch), part[0], C);
    const int dim = (int)f2.norm_dim, ldt = f2.leaf_dtype[0];
    const float q = ss / (float)dim + f2.eps;
    const float inv = ldt == GRAFT_DTYPE_FLOAT ? 1.0f / sqrtf(q) : rsqrtf(q), sq = sqrtf(q);
    float t = 0.0f;
    if (tid < n2) {
        const int rr = a2 + tid;
        float r = f2.norm_div ? yv / sq : yv * inv * (f2.gamma ? go_ld(f2.gamma, ldt, rr) : 1.0f);
        r = go_round(f2.norm_dtype, r);
        const float c = go_chain_modes<int>(f2, r, rr, p.modes2, -1, 0.0f);
        go_st(f2.y, f2.y_dtype, rr, c);
        if (f2.sk_y) {
            t = go_round(f2.y_dtype, c) + go_ld(f2.sk_x, f2.y_dtype, rr);
            if (f2.sk_bias) t += go_ld(f2.sk_bias, f2.y_dtype, rr);
        }
    }
    if (!f2.sk_y) return;
    /* go_skip_norm_row's */
    const float ss2 = sq_cluster_sum(gc_block_sum(t * t, scratch), part[1], C);
    const int dt = f2.y_dtype;
    const float q2 = ss2 / (float)dim + f2.sk_eps;
    const float inv2 = dt == GRAFT_DTYPE_FLOAT ? 1.0f / sqrtf(q2) : rsqrtf(q2);
    if (tid < n2) {
        const int rr = a2 + tid;
        if (f2.sk_sum) go_st(f2.sk_sum, dt, rr, t);
        go_st(f2.sk_y, dt, rr, t * inv2 * go_ld(f2.sk_gamma, dt, rr));
    }
}

static unsigned sq_align(size_t v) { return (unsigned)((v + 127) & ~(size_t)127); }

/* The geometry for C blocks: false when a block's share does not fit
 * (its runs in shared memory, a run's rows no more than its threads). */
static bool sq_geom(int64_t K1, int64_t N1, int64_t N2, int C, sq_params *p, size_t *smem)
{
    p->K1 = (int)K1, p->N1 = (int)N1, p->N2 = (int)N2;
    p->r1 = (int)((N1 + C - 1) / C);
    p->r2 = (int)((N2 + C - 1) / C);
    p->o2 = sq_align((size_t)p->r1 * K1 * 2);
    p->ox = p->o2 + sq_align((size_t)p->r2 * N1 * 2);
    p->og = p->ox + sq_align((size_t)K1 * 2);
    p->of = p->og + sq_align((size_t)N1 * 2);
    *smem = p->of + sq_align((size_t)(p->r1 > p->r2 ? p->r1 : p->r2) * 4);
    return *smem <= SQ_SMEM_MAX && p->r1 <= SQ_THREADS && p->r2 <= SQ_THREADS; /* a thread a row's chain */
}

/* The largest cluster (16, 8, 4, 2 blocks) whose blocks' shares fit in
 * shared memory and that the device can run; 0: none. Asked once a shape
 * (the executor calls this while it plans and at each capture). */
template <typename T> static int sq_blocks(int64_t K1, int64_t N1, int64_t N2, sq_params *p, size_t *smem)
{
    static struct {
        int64_t K1, N1, N2;
        int C;
    } memo[32];
    static int n_memo;
    static size_t smem_set; /* the kernel's shared-memory limit so far (only raised: earlier shapes keep theirs) */
    for (int i = 0; i < n_memo; i++)
        if (memo[i].K1 == K1 && memo[i].N1 == N1 && memo[i].N2 == N2) {
            if (memo[i].C) sq_geom(K1, N1, N2, memo[i].C, p, smem);
            return memo[i].C;
        }
    int best = 0;
    for (int C = SQ_MAX_C; C >= 2 && !best; C /= 2) {
        if (!sq_geom(K1, N1, N2, C, p, smem)) continue;
        if (*smem > smem_set &&
            cudaFuncSetAttribute(gemv_seq_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)*smem) !=
                cudaSuccess) {
            (void)cudaGetLastError();
            continue;
        }
        if (*smem > smem_set) smem_set = *smem;
        if (gc_cluster_fits(gemv_seq_kernel<T>, C, SQ_THREADS, *smem)) best = C;
    }
    if (best) sq_geom(K1, N1, N2, best, p, smem);
    if (n_memo < 32) memo[n_memo].K1 = K1, memo[n_memo].N1 = N1, memo[n_memo].N2 = N2, memo[n_memo++].C = best;
    return best;
}

/* The shapes and chains gcuda_gemv_rows_seq takes (the device aside). */
static bool sq_takes(int dtype, int64_t K1, int64_t N1, int64_t N2)
{
    return gcuda_dtype_size(dtype) == 2 && K1 > 0 && N1 > 0 && N2 > 0 && K1 % 8 == 0 && N1 % 8 == 0 &&
           K1 <= 65536 && N1 <= 65536 && N2 <= 1 << 24;
}

extern "C" int gcuda_gemv_rows_seq_fits(int dtype, int64_t K1, int64_t N1, int64_t N2)
{
    if (!sq_takes(dtype, K1, N1, N2)) return 0;
    sq_params p;
    size_t smem;
    return dtype == GRAFT_DTYPE_FLOAT16 ? sq_blocks<__half>(K1, N1, N2, &p, &smem)
                                        : sq_blocks<__nv_bfloat16>(K1, N1, N2, &p, &smem);
}

/* A chain over the N outputs of a GEMV: per element, or (norm_ok) headed by
 * a norm over all N, with or without the skip norm after it. */
static bool sq_chain_ok(const gops_fuse *f, int64_t N, bool norm_ok)
{
    return go_fuse_ok(*f) && go_fuse_numel(*f) == N && f->y && (f->norm_dim == 0 || (norm_ok && f->norm_dim == N)) &&
           (!f->sk_y || (f->norm_dim && f->sk_x && f->sk_gamma));
}

extern "C" graft_status gcuda_gemv_rows_seq(int dtype, const void *x, const void *w1, void *y1, int64_t K1,
                                            int64_t N1, const gops_fuse *f1, const void *w2, void *y2, int64_t N2,
                                            const gops_fuse *f2, gcuda_stream s, graft_error *err)
{
    if (!sq_takes(dtype, K1, N1, N2))
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_gemv_rows_seq: dtype %d, K %lld, N %lld then %lld", dtype,
                          (long long)K1, (long long)N1, (long long)N2);
    if (!f1 || !f2 || !sq_chain_ok(f1, N1, false) || f1->y_dtype != dtype || !sq_chain_ok(f2, N2, true) ||
        (f2->sk_y && f2->y_dtype != dtype))
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows_seq: the chains do not fit the outputs (%lld, %lld)",
                          (long long)N1, (long long)N2);
    if (((uintptr_t)x | (uintptr_t)w1 | (uintptr_t)w2 | (uintptr_t)f1->y) % 16)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_gemv_rows_seq: x, the weights and g must be 16-byte aligned");
    sq_params p;
    size_t smem = 0;
    int C = dtype == GRAFT_DTYPE_FLOAT16 ? sq_blocks<__half>(K1, N1, N2, &p, &smem)
                                         : sq_blocks<__nv_bfloat16>(K1, N1, N2, &p, &smem);
    if (!C)
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_gemv_rows_seq: %lld x %lld and %lld x %lld do not fit a "
                          "cluster's shared memory", (long long)N1, (long long)K1, (long long)N2, (long long)N1);
    p.x = x, p.w1 = w1, p.w2 = w2, p.y1 = y1, p.y2 = y2;
    p.modes1 = go_leaf_modes(*f1), p.modes2 = go_leaf_modes(*f2);
    const bool pdl = gcuda_pdl_mode() >= 1; /* GRAFT_CUDA_PDL=0: a plain launch */
    const dim3 g((unsigned)C), bk(SQ_THREADS);
    cudaError_t e = dtype == GRAFT_DTYPE_FLOAT16
                        ? gc_launch_cluster(pdl, (unsigned)C, gemv_seq_kernel<__half>, g, bk, smem, s, p, *f1, *f2)
                        : gc_launch_cluster(pdl, (unsigned)C, gemv_seq_kernel<__nv_bfloat16>, g, bk, smem, s, p, *f1, *f2);
    if (e != cudaSuccess) return gcuda_fail(err, e, "launch gemv_seq_kernel", __FILE__, __LINE__);
    return GRAFT_OK;
}
