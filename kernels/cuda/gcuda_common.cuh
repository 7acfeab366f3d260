/* Internals shared by the kernels/cuda/ translation units: the GCUDA_CHECK
 * family, dtype traits, conversions and reductions. Not a public header. */
#ifndef GRAFT_KERNELS_CUDA_GCUDA_COMMON_CUH
#define GRAFT_KERNELS_CUDA_GCUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gcuda.h"

/* Fills err from a CUDA error (file, line, the failing expression); returns
 * GRAFT_ENOMEM for allocation failures, GRAFT_EIO otherwise. */
graft_status gcuda_fail(graft_error *err, cudaError_t e, const char *what, const char *file, int line);
/* Fills err with a formatted message; returns code. */
graft_status gcuda_errf(graft_error *err, graft_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Multiprocessors of the current device (cached after the first call). */
graft_status gcuda_sm_count(int *out, graft_error *err);

/* Every CUDA call goes through GCUDA_CHECK; every launch is followed by
 * GCUDA_CHECK_LAUNCH. Both return from the enclosing function (which has a
 * graft_error *err in scope) with the error filled in. */
#define GCUDA_CHECK(call)                                                              \
    do {                                                                               \
        cudaError_t gcuda_e_ = (call);                                                 \
        if (gcuda_e_ != cudaSuccess) return gcuda_fail(err, gcuda_e_, #call, __FILE__, __LINE__); \
    } while (0)
#define GCUDA_CHECK_LAUNCH(name)                                                       \
    do {                                                                               \
        cudaError_t gcuda_e_ = cudaGetLastError();                                     \
        if (gcuda_e_ != cudaSuccess) return gcuda_fail(err, gcuda_e_, "launch " name, __FILE__, __LINE__); \
    } while (0)

/* Calls BODY with T bound to the storage type of `dtype`; unsupported dtypes
 * return GRAFT_EUNSUPPORTED naming `fn`. */
#define GCUDA_DISPATCH(dtype, fn, ...)                                                 \
    switch (dtype) {                                                                   \
    case GRAFT_DTYPE_FLOAT: {                                                          \
        typedef float T;                                                               \
        __VA_ARGS__;                                                                   \
        break;                                                                         \
    }                                                                                  \
    case GRAFT_DTYPE_FLOAT16: {                                                        \
        typedef __half T;                                                              \
        __VA_ARGS__;                                                                   \
        break;                                                                         \
    }                                                                                  \
    case GRAFT_DTYPE_BFLOAT16: {                                                       \
        typedef __nv_bfloat16 T;                                                       \
        __VA_ARGS__;                                                                   \
        break;                                                                         \
    }                                                                                  \
    default:                                                                           \
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "%s: dtype %d not supported", fn, dtype); \
    }

/* e^x and 1/sqrt(x) at the storage type's need: fp32 data gets expf and
 * 1/sqrtf (within 2 ulp over the whole range, as the CPU kernels: the
 * fp32 fixtures' logits are compared at 1e-4), fp16/bf16 the fast
 * intrinsics (__expf's error grows with |x|, far below their rounding). */
template <typename T> __device__ __forceinline__ float gc_exp(float x)
{
    if constexpr (sizeof(T) == 4) return expf(x);
    else return __expf(x);
}
/* The decode attention's merge of S splits for the 8 columns from col (a
 * warp's; attn_combine_kernel, and bench/cuda_merge_probe.cu's copy of its
 * launch): split s has its max and sum at ml[2 (row0 + s)] and its partial
 * output at opart[(row0 + s) hd]; lane j takes the splits j, j + 32, ...
 * (each one's loads issued at once), merges them online, then across the
 * warp by shuffles. Returns column col + lane's value in lanes 0-7 (the
 * others: unused), sum_s w_s o_s / sum_s w_s l_s with w_s = exp(m_s - max
 * m), 0 where no split held a key. T: the storage type (gc_exp). */
template <typename T>
__device__ __forceinline__ float gc_attn_merge8(const float *ml, const float *opart, size_t row0, int S, int hd,
                                                int col, int lane)
{
    float M = -INFINITY, den = 0.0f, o[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 2
    for (int s = lane; s < S; s += 32) {
        const float2 st = *reinterpret_cast<const float2 *>(ml + (row0 + s) * 2);
        const float4 *src = reinterpret_cast<const float4 *>(opart + (row0 + s) * hd + col);
        const float4 v0 = src[0], v1 = src[1];
        if (!(st.y > 0.0f)) continue;
        const float Mn = fmaxf(M, st.x), a = M == -INFINITY ? 0.0f : gc_exp<T>(M - Mn), w = gc_exp<T>(st.x - Mn);
        const float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        den = den * a + st.y * w;
#pragma unroll
        for (int e = 0; e < 8; e++) o[e] = o[e] * a + v[e] * w;
        M = Mn;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float M2 = __shfl_xor_sync(0xffffffffu, M, off), d2 = __shfl_xor_sync(0xffffffffu, den, off);
        const float Mn = fmaxf(M, M2);
        const float a = M == -INFINITY ? 0.0f : gc_exp<T>(M - Mn), c = M2 == -INFINITY ? 0.0f : gc_exp<T>(M2 - Mn);
        den = den * a + d2 * c;
#pragma unroll
        for (int e = 0; e < 8; e++) o[e] = o[e] * a + __shfl_xor_sync(0xffffffffu, o[e], off) * c;
        M = Mn;
    }
    float r = o[0];
#pragma unroll
    for (int e = 1; e < 8; e++) r = lane == e ? o[e] : r;
    return den > 0.0f ? r * (1.0f / den) : 0.0f;
}

/* a / b rounded as a / b is, from r = 1 / b (the caller's, once for many a) and one residual step
 * (Markstein's theorem): three instructions where each division inlines a dozen and a slow path. Equal to
 * a / b bit for bit wherever |a| and |a / b| are at least 2^-100 and a / b is finite (test_kernels'
 * test_div_r against the device's division); below, the residual may be subnormal and the last bit differ;
 * b = inf: a * 0, as a / inf. A norm's x / sqrt(mean(x^2) + eps) is never past sqrt(n). */
__device__ __forceinline__ float gc_div_r(float a, float b, float r)
{
    const float q = a * r;
    return b == INFINITY ? q : fmaf(fmaf(-q, b, a), r, q);
}
template <typename T> __device__ __forceinline__ float gc_rsqrt(float x)
{
    if constexpr (sizeof(T) == 4) return 1.0f / sqrtf(x);
    else return rsqrtf(x);
}

/* Programmatic dependent launch (sm_90): gc_pdl_trigger lets a kernel
 * launched after this one with the programmatic-serialization attribute
 * start now (it still waits in gc_pdl_wait for this grid to finish and its
 * writes to be visible); gc_pdl_wait is that wait, a no-op for a kernel
 * launched without the attribute. A decode GEMV launched so prefetches its
 * weights while the kernel before it (a norm, a fused chain) runs. */
__device__ __forceinline__ void gc_pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void gc_pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Every decode kernel calls gc_pdl_wait before gc_pdl_trigger, so when a
 * kernel starts, the kernels two or more launches before it have ended:
 * what only they wrote may be read before the wait (the weights; the
 * sequence lengths, uploaded before the step's first attention; the KV
 * caches where gcuda_attn_decode_args.cache_ready says so). Data read
 * after the wait is safe (a wait is for the kernel before, which waited
 * in turn). */

/* GRAFT_CUDA_PDL (read once, gcuda_core.cu): 0 plain launches; "gemv"
 * the decode GEMVs as programmatic dependents; "all" (the default) the
 * other decode-path kernels too (each waits in gc_pdl_wait before reading). */
int gcuda_pdl_mode(void);
static inline bool gcuda_pdl_all(void) { return gcuda_pdl_mode() >= 2; }

/* k<<<g, b, smem, s>>>(args...), as a programmatic dependent when pdl (k
 * must call gc_pdl_wait before reading what an earlier kernel wrote); the
 * launch's error is left for GCUDA_CHECK_LAUNCH (cudaGetLastError). */
template <typename X> struct gc_id {
    typedef X type;
};
template <typename... KA>
static inline void gc_launch(bool pdl, void (*k)(KA...), dim3 g, dim3 b, size_t smem, gcuda_stream s,
                             typename gc_id<KA>::type... args) /* converted to the kernel's parameters here */
{
    cudaLaunchAttribute at[1];
    unsigned n = 0;
    if (pdl) {
        at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[n].val.programmaticStreamSerializationAllowed = 1;
        n++;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = g;
    cfg.blockDim = b;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = n;
    (void)cudaLaunchKernelEx(&cfg, k, args...);
}

/* Asks L2 for ps's ranges, block blk of nblk (threads tid of nthr each
 * call this once), by ps.mode (gc_pf_mode, GRAFT_CUDA_PF_MODE):
 *   0: cp.async.bulk.prefetch.L2 (sm_90) in GC_PF_PIECE-byte pieces, piece i
 *      of each range by thread i mod nt in the grid's order (the low blocks
 *      take the few pieces of a short range: session 26 measured 370 GB/s
 *      with 32 MB asks, all issued by 2-4 SMs);
 *   1: the same pieces dealt a block at a time (piece i by block i mod nblk),
 *      so that every SM's copy engine issues;
 *   2: prefetch.global.L2 a 128-byte line at a time, lines dealt a block at a
 *      time (every thread of the grid issues);
 *   3: as 2 with the evict_last priority (prefetch.global.L2::evict_last).
 * Returns once issued: the memory system fetches on. Reads nothing another
 * kernel writes, so it may come before gc_pdl_wait. 32-bit indices and no
 * division: it runs at a kernel's start, and must not take registers the
 * kernel needs later (ranges up to 2^32 pieces or lines). */
#define GC_PF_PIECE 65536u
/* ps as gc_l2_prefetch takes it: at most GCUDA_PREFETCH_MAX ranges, each
 * non-NULL, 16-byte aligned and a multiple of 16 bytes; else GRAFT_EINVAL
 * naming `who`. Host side, before a launch. */
static inline graft_status gc_prefetch_check(const gcuda_prefetch_set *ps, const char *who, graft_error *err)
{
    if (ps->n < 0 || ps->n > GCUDA_PREFETCH_MAX) return gcuda_errf(err, GRAFT_EINVAL, "%s: %d prefetch ranges", who, ps->n);
    for (int r = 0; r < ps->n; r++)
        if (!ps->ptr[r] || (uintptr_t)ps->ptr[r] % 16 || ps->bytes[r] % 16)
            return gcuda_errf(err, GRAFT_EINVAL, "%s: prefetch range %d not 16-byte aligned", who, r);
    return GRAFT_OK;
}
__device__ __forceinline__ void gc_l2_prefetch(const gcuda_prefetch_set &ps, unsigned blk, unsigned nblk, unsigned tid,
                                               unsigned nthr)
{
    const unsigned nt = nblk * nthr, t = ps.mode ? tid * nblk + blk : blk * nthr + tid;
    for (int r = 0; r < ps.n && r < GCUDA_PREFETCH_MAX; r++) {
        const size_t bytes = ps.bytes[r];
        const char *base = (const char *)ps.ptr[r];
        if (ps.mode >= 2) {
            const unsigned lines = (unsigned)((bytes + 127) / 128);
            for (unsigned i = t; i < lines; i += nt) {
                if (ps.mode == 3) asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(base + (size_t)i * 128));
                else asm volatile("prefetch.global.L2 [%0];" ::"l"(base + (size_t)i * 128));
            }
            continue;
        }
        const unsigned pieces = (unsigned)((bytes + GC_PF_PIECE - 1) / GC_PF_PIECE);
        for (unsigned i = t; i < pieces; i += nt) {
            const size_t off = (size_t)i * GC_PF_PIECE;
            const unsigned sz = bytes - off < GC_PF_PIECE ? (unsigned)(bytes - off) : GC_PF_PIECE;
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + off), "r"(sz) : "memory");
        }
    }
}
/* GRAFT_CUDA_PF_MODE=0-3 (gc_l2_prefetch; default 0), read once, for the
 * launching wrappers to put in the set. Host side. */
static inline int gc_pf_mode(void)
{
    static int m = -1;
    if (m < 0) {
        const char *e = getenv("GRAFT_CUDA_PF_MODE");
        m = e && e[0] >= '0' && e[0] <= '3' && !e[1] ? e[0] - '0' : 0;
    }
    return m;
}

/* The copy engine (sm_90): 1-D cp.async.bulk copies from global into shared
 * memory, each completing on an mbarrier (arrival count 1: the thread that
 * sets the bytes to expect). Addresses are shared-window offsets
 * (gc_smem_addr). ef: with the L2 policy pol. */
__device__ __forceinline__ uint32_t gc_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
/* Initialises n mbarriers (one thread), visible to the copy engine after. */
__device__ __forceinline__ void gc_mbar_init(const uint64_t *bar, int n)
{
    for (int i = 0; i < n; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(gc_smem_addr(bar + i)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void gc_mbar_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void gc_bulk_copy(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar, bool ef = false,
                                             uint64_t pol = 0)
{
    if (ef)
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                     " [%0], [%1], %2, [%3], %4;" ::"r"(dst),
                     "l"(src), "r"(bytes), "r"(bar), "l"(pol)
                     : "memory");
    else
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                     "l"(src), "r"(bytes), "r"(bar)
                     : "memory");
}
/* 16 bytes global to shared by cp.async (zero-filled when !ok), in the
 * thread's current group; gc_cp_commit closes the group, gc_cp_wait<N>
 * waits until at most N of the thread's groups are in flight. */
__device__ __forceinline__ void gc_cp16(void *dst, const void *src, bool ok)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(gc_smem_addr(dst)), "l"(src),
                 "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void gc_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void gc_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* Waits until the mbarrier's phase of this parity has completed. */
__device__ __forceinline__ void gc_mbar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t ok = 0;
    while (!ok)
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(ok)
                     : "r"(bar), "r"(parity)
                     : "memory");
}

__device__ __forceinline__ float gc_f(float v) { return v; }
__device__ __forceinline__ float gc_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float gc_f(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T gc_to(float v);
template <> __device__ __forceinline__ float gc_to<float>(float v) { return v; }
template <> __device__ __forceinline__ __half gc_to<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 gc_to<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

/* Elements of T in 16 bytes. */
template <typename T> struct gc_vec {
    static constexpr int n = 16 / (int)sizeof(T);
};

/* D = A B + D on the tensor cores, one m16n8k16 step of a warp (fp32
 * accumulators c, A's fragment in a[4], B's in b[2], as PTX lays them out
 * for mma.sync): the decode attention's products and the tensor-core GEMV's
 * (gemv_rows.cu, GRAFT_CUDA_ROWS_MMA). */
template <typename T> struct gc_mma;
template <> struct gc_mma<__half> {
    static __device__ __forceinline__ void run(float *c, const unsigned *a, const unsigned *b)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};
template <> struct gc_mma<__nv_bfloat16> {
    static __device__ __forceinline__ void run(float *c, const unsigned *a, const unsigned *b)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

/* 16-byte word to n floats. */
template <typename T> __device__ __forceinline__ void gc_unpack(const uint4 &u, float *f)
{
    const T *e = reinterpret_cast<const T *>(&u);
#pragma unroll
    for (int i = 0; i < gc_vec<T>::n; i++) f[i] = gc_f(e[i]);
}

__device__ __forceinline__ float gc_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float gc_warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread
 * gets the result. `scratch` holds 32 floats; the function ends with a
 * barrier so it can be reused right away. */
__device__ __forceinline__ float gc_block_sum(float v, float *scratch)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = gc_warp_sum(v);
    if (lane == 0) scratch[w] = v;
    __syncthreads();
    float t = lane < nw ? scratch[lane] : 0.0f;
    t = gc_warp_sum(t);
    __syncthreads();
    return t;
}

/* A grid's blocks each count themselves on *counter (zero before the first
 * of `blocks` arrives; the caller resets it): true in the last block to
 * arrive, which then sees every other block's writes (read them past L1).
 * All threads call it. The barrier, then thread 0's count as one
 * acquire-release atomic at GPU scope: its release is cumulative over the
 * block's writes the barrier ordered before it, its acquire makes the other
 * blocks' writes visible to the last block after the second barrier (the
 * pattern of CUTLASS's split-K semaphore), without the sequentially
 * consistent fences (__threadfence) on each side. */
__device__ __forceinline__ bool gc_last_block(unsigned *counter, unsigned blocks)
{
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned old;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
        last = old == blocks - 1;
    }
    __syncthreads();
    return last;
}

/* s[j] += s[j + O] for j < O, then the half below (gc_block_sum1's fold;
 * a template, so that every loop is unrolled and s stays in registers). */
template <int O> struct gc_fold {
    static __device__ __forceinline__ void run(float *s)
    {
#pragma unroll
        for (int j = 0; j < O; j++) s[j] += s[j + O];
        gc_fold<O / 2>::run(s);
    }
};
template <> struct gc_fold<0> {
    static __device__ __forceinline__ void run(float *) {}
};

/* gc_block_sum's result, the same bits, with one barrier instead of two:
 * each warp's sum to scratch, then every thread adds the NW warp sums
 * (NW = blockDim.x / 32) itself, in the order gc_warp_sum's butterfly adds
 * them over lanes holding them and zeros (each add is commutative, so
 * every lane's butterfly ends on this value). The warp sums' second
 * butterfly and the barrier after it leave the critical path of a
 * prologue's norm. scratch: 32 floats, not written again before the
 * block's next barrier (a second sum takes other scratch). */
template <int NW> __device__ __forceinline__ float gc_block_sum1(float v, float *scratch)
{
    static_assert(NW >= 1 && NW <= 32 && (NW & (NW - 1)) == 0, "gc_block_sum1: warps a block, a power of 2");
    v = gc_warp_sum(v);
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
    __syncthreads();
    float s[NW];
#pragma unroll
    for (int j = 0; j < NW; j++) s[j] = scratch[j];
    /* the butterfly's steps 16 .. NW: lanes below NW add a lane of zeros (+0, which makes a -0 +0) */
#pragma unroll
    for (int o = NW; o < 32; o *= 2)
#pragma unroll
        for (int j = 0; j < NW; j++) s[j] += 0.0f;
    gc_fold<NW / 2>::run(s); /* steps NW / 2 .. 1 */
    return s[0];
}

/* Maximum over the block, same contract as gc_block_sum. */
__device__ __forceinline__ float gc_block_max(float v, float *scratch)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = gc_warp_max(v);
    if (lane == 0) scratch[w] = v;
    __syncthreads();
    float t = lane < nw ? scratch[lane] : -INFINITY;
    t = gc_warp_max(t);
    __syncthreads();
    return t;
}

/* A lab switch that is on unless the variable is "0" (read once by each
 * caller's static). */
static inline int gc_env_on(const char *name)
{
    const char *e = getenv(name);
    return !(e && !strcmp(e, "0"));
}

/* A lab switch that is off unless the variable is `val` (read once by
 * each caller's static). */
static inline int gc_env_is(const char *name, const char *val)
{
    const char *e = getenv(name);
    return e && !strcmp(e, val);
}

static inline unsigned gc_blocks(int64_t n, int threads, int64_t cap = 65535LL * 16)
{
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > cap) b = cap;
    return (unsigned)b;
}

#endif
