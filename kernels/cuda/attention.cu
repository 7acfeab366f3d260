/* Split-K flash-decoding attention for one query token per sequence.
 *
 * Grid (split, kv head, batch). The keys visible to the query ([lo, len),
 * len read from device memory, lo from the sliding window) are cut into
 * num_splits chunks of whole 32-key tiles; a block takes one chunk for all
 * the query heads of its kv head (GQA: K and V are read once per group).
 * Per tile: K and V rows go to shared memory with 16-byte loads (rows past
 * the chunk zero-filled); warp w scores the 32 keys (lane = key) against
 * its GT query heads, runs the online softmax for them (max and sum by warp
 * shuffles) and leaves the probabilities and rescale factors in shared
 * memory; then each thread accumulates D / 128 output columns for every
 * head of the group. Each split writes its unnormalised output, max and
 * sum (fp32) to the workspace; a second kernel merges the splits that
 * hold keys, its blocks spread over (query head, batch, 64-column slice),
 * a warp over the splits for 8 columns.
 *
 * Templates: D (64, 128, 256, 512: the smallest >= head_dim, chosen at run
 * time) and GT (query heads per warp: 1, 2, 4, so up to 16 per kv head). */
#include <math.h>

#include "kernels/cuda/gcuda_common.cuh"

#define AT_THREADS 128
#define AT_TK 32
#define AT_MAX_SPLITS 1024

struct attn_params {
    const void *q, *k, *v;
    const int32_t *lens;
    float *opart; /* [B, Hq, nsplit, hd] */
    float *ml;    /* [B, Hq, nsplit, 2]: max, sum */
    void *out;
    int B, Hq, Hkv, G, hd, max_seq, nsplit;
    float scale, softcap;
    long long window_left;
    const void *knew, *vnew; /* the newest key's rows, not yet in the caches (tensor-core kernel only) */
    long long nsb, nsh;
    /* tensor-core kernel only (gcuda_attn_decode_takes_prep): qg set, q holds the query rows before their
     * RMSNorm (gamma qg, qeps) and rotary; kg set, knew the key row before its own; vnorm, vnew the value
     * row before v / sqrt(mean(v^2) + veps). The rotary: caches rcos/rsin [rmax, rdim / 2], the token's
     * cache row rpos[b], pairs interleaved (rinter) or halves. */
    const void *qg, *kg;
    float qeps, keps, veps;
    int vnorm, rdim, rinter;
    const void *rcos, *rsin;
    const int64_t *rpos;
    long long rmax;
    gcuda_prefetch_set pf; /* tensor-core kernel only: asked of L2 after the wait (gcuda_attn_decode_args.pf) */
    int pf_late;           /* ... by the blocks with keys after their partials (gcuda_attn_decode_args.pf_late) */
    int tile;              /* the split kernel's keys a tile: attn_range's unit, for the merge */
    int exit_empty;        /* tensor-core kernel: a block whose split holds no key leaves before the wait,
                            * writing nothing (am_exit_empty) */
    int early;             /* tensor-core kernel: the first tile's cache rows asked for before the wait
                            * (gcuda_attn_decode_args.cache_ready) */
};

/* The tensor-core kernel's L2 prefetch (p.pf), called by every thread once
 * it has waited for the kernel before: gc_l2_prefetch over the whole grid,
 * threads numbered from the last block, so that at a short context the
 * splits without keys (the last) issue, not the few with keys. */
__device__ __forceinline__ void am_l2_prefetch(const attn_params &p)
{
    if (!p.pf.n) return;
    const unsigned nb = gridDim.x * gridDim.y * gridDim.z;
    const unsigned blk = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    gc_l2_prefetch(p.pf, nb - 1 - blk, nb, p.pf.mode ? threadIdx.x : blockDim.x - 1 - threadIdx.x, blockDim.x);
}

template <typename T, int D, int GT> struct attn_layout {
    static constexpr int GM = 4 * GT, VEC = gc_vec<T>::n, KST = D + VEC;
    static constexpr size_t q_off = 0;
    static constexpr size_t k_off = q_off + (size_t)GM * D * sizeof(float);
    static constexpr size_t v_off = k_off + (size_t)AT_TK * KST * sizeof(T);
    static constexpr size_t p_off = v_off + (size_t)AT_TK * D * sizeof(T);
    static constexpr size_t a_off = p_off + (size_t)AT_TK * GM * sizeof(float);
    static constexpr size_t bytes = a_off + (size_t)GM * sizeof(float);
};

/* The keys a query sees for a sequence of `len` keys: [*lo, *lo + n), n returned. */
__device__ __forceinline__ int attn_keys(const attn_params &p, int &len, long long *lo)
{
    if (len > p.max_seq) len = p.max_seq;
    if (len < 0) len = 0;
    *lo = p.window_left >= 0 ? (long long)len - 1 - p.window_left : 0;
    if (*lo < 0) *lo = 0;
    return len - (int)*lo;
}
/* Keys a split: n keys over p.nsplit splits in whole tiles (the splits past ceil(n / chunk) hold none). */
__device__ __forceinline__ int attn_chunk(const attn_params &p, int n, int tile)
{
    int chunk = (n + p.nsplit - 1) / p.nsplit;
    return (chunk + tile - 1) / tile * tile;
}

/* Key range [j0, j1) of split `split` for a sequence of `len` keys. */
__device__ __forceinline__ void attn_range(const attn_params &p, int len, int split, int *j0, int *j1, int tile = AT_TK)
{
    long long lo;
    const int n = attn_keys(p, len, &lo), chunk = attn_chunk(p, n, tile);
    long long a = lo + (long long)split * chunk, b = a + chunk;
    if (b > len) b = len;
    *j0 = (int)(a < len ? a : len);
    *j1 = (int)b;
}

template <typename T, int D, int GT>
__global__ void __launch_bounds__(AT_THREADS) attn_split_kernel(attn_params p)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    typedef attn_layout<T, D, GT> LY;
    constexpr int GM = LY::GM, VEC = LY::VEC, KST = LY::KST;
    constexpr int CPR = D / VEC;                              /* 16-byte words per row */
    constexpr int LOADS = AT_TK * CPR / AT_THREADS;           /* per thread per tile, K and V each */
    constexpr int DPT = D >= AT_THREADS ? D / AT_THREADS : 1; /* output columns per thread */
    static_assert(AT_TK * CPR % AT_THREADS == 0, "tile loads must divide evenly");
    extern __shared__ float4 smem4[];
    char *smem = reinterpret_cast<char *>(smem4);
    float *qs = reinterpret_cast<float *>(smem + LY::q_off);
    T *ks = reinterpret_cast<T *>(smem + LY::k_off);
    T *vs = reinterpret_cast<T *>(smem + LY::v_off);
    float *ps = reinterpret_cast<float *>(smem + LY::p_off);
    float *alpha = reinterpret_cast<float *>(smem + LY::a_off);

    const int split = blockIdx.x, kh = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int hd = p.hd, G = p.G, nsplit = p.nsplit;
    int j0, j1;
    attn_range(p, p.lens[b], split, &j0, &j1);
    const size_t row0 = ((size_t)b * p.Hq + (size_t)kh * G) * nsplit + split; /* + g * nsplit for head g */
    if (j0 >= j1) { /* no key: max -inf, sum 0; the merge skips its partials */
        if (tid < G) {
            p.ml[(row0 + (size_t)tid * nsplit) * 2] = -INFINITY;
            p.ml[(row0 + (size_t)tid * nsplit) * 2 + 1] = 0.0f;
        }
        return;
    }

    /* the group's queries, fp32, pre-scaled; zero past head_dim and G */
    const T *qg = (const T *)p.q + ((size_t)b * p.Hq + (size_t)kh * G) * hd;
    for (int i = tid; i < GM * D; i += AT_THREADS) {
        int g = i / D, d = i % D;
        qs[i] = g < G && d < hd ? gc_f(qg[(size_t)g * hd + d]) * p.scale : 0.0f;
    }

    const size_t cache_off = ((size_t)b * p.Hkv + kh) * (size_t)p.max_seq * hd;
    const T *kb = (const T *)p.k + cache_off, *vb = (const T *)p.v + cache_off;
    const int cpr = hd / VEC;

    float m_run[GT], l_run[GT];
#pragma unroll
    for (int gi = 0; gi < GT; gi++) {
        m_run[gi] = -INFINITY;
        l_run[gi] = 0.0f;
    }
    float acc[GM][DPT];
#pragma unroll
    for (int g = 0; g < GM; g++)
#pragma unroll
        for (int i = 0; i < DPT; i++) acc[g][i] = 0.0f;
    const int d0 = tid * DPT;

    for (int jt = j0; jt < j1; jt += AT_TK) {
        const int nk = min(AT_TK, j1 - jt);
        /* K and V tile to shared memory */
#pragma unroll 8
        for (int it = 0; it < LOADS; it++) {
            int i = it * AT_THREADS + tid, r = i / CPR, c = i % CPR;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
            if (r < nk && c < cpr) {
                size_t off = (size_t)(jt + r) * hd + (size_t)c * VEC;
                kv = __ldg(reinterpret_cast<const uint4 *>(kb + off));
                vv = __ldg(reinterpret_cast<const uint4 *>(vb + off));
            }
            *reinterpret_cast<uint4 *>(ks + r * KST + c * VEC) = kv;
            *reinterpret_cast<uint4 *>(vs + r * D + c * VEC) = vv;
        }
        __syncthreads();

        /* scores and online softmax: warp w, heads w*GT .. w*GT+GT-1, lane = key */
        {
            float sc[GT];
#pragma unroll
            for (int gi = 0; gi < GT; gi++) sc[gi] = 0.0f;
            const T *krow = ks + lane * KST;
            for (int c = 0; c < cpr; c++) {
                float kf[VEC];
                gc_unpack<T>(*reinterpret_cast<const uint4 *>(krow + c * VEC), kf);
#pragma unroll
                for (int gi = 0; gi < GT; gi++) {
                    const float4 *q4 = reinterpret_cast<const float4 *>(qs + (warp * GT + gi) * D + c * VEC);
#pragma unroll
                    for (int i4 = 0; i4 < VEC / 4; i4++) {
                        float4 qv = q4[i4];
                        sc[gi] = fmaf(qv.x, kf[4 * i4 + 0], sc[gi]);
                        sc[gi] = fmaf(qv.y, kf[4 * i4 + 1], sc[gi]);
                        sc[gi] = fmaf(qv.z, kf[4 * i4 + 2], sc[gi]);
                        sc[gi] = fmaf(qv.w, kf[4 * i4 + 3], sc[gi]);
                    }
                }
            }
#pragma unroll
            for (int gi = 0; gi < GT; gi++) {
                const int g = warp * GT + gi;
                if (g >= G) { /* warp-uniform */
                    ps[lane * GM + g] = 0.0f;
                    if (lane == 0) alpha[g] = 1.0f;
                    continue;
                }
                float s = sc[gi];
                if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
                if (lane >= nk) s = -INFINITY;
                float mnew = fmaxf(m_run[gi], gc_warp_max(s)); /* finite: nk >= 1 */
                float pr = gc_exp<T>(s - mnew), al = gc_exp<T>(m_run[gi] - mnew);
                l_run[gi] = l_run[gi] * al + gc_warp_sum(pr);
                m_run[gi] = mnew;
                ps[lane * GM + g] = pr;
                if (lane == 0) alpha[g] = al;
            }
        }
        __syncthreads();

        /* output: thread owns columns d0 .. d0+DPT-1 of every head */
        if (d0 < D) {
#pragma unroll
            for (int g = 0; g < GM; g++) {
                if (g < G) {
                    float al = alpha[g];
#pragma unroll
                    for (int i = 0; i < DPT; i++) acc[g][i] *= al;
                }
            }
            for (int r = 0; r < nk; r++) {
                float vf[DPT];
#pragma unroll
                for (int i = 0; i < DPT; i++) vf[i] = gc_f(vs[r * D + d0 + i]);
                const float *pr = ps + r * GM;
#pragma unroll
                for (int g = 0; g < GM; g++) {
                    if (g < G) {
                        float pv = pr[g];
#pragma unroll
                        for (int i = 0; i < DPT; i++) acc[g][i] = fmaf(pv, vf[i], acc[g][i]);
                    }
                }
            }
        }
        __syncthreads(); /* the next tile overwrites ks, vs, ps */
    }

#pragma unroll
    for (int gi = 0; gi < GT; gi++) {
        int g = warp * GT + gi;
        if (g < G && lane == 0) {
            p.ml[(row0 + (size_t)g * nsplit) * 2] = m_run[gi];
            p.ml[(row0 + (size_t)g * nsplit) * 2 + 1] = l_run[gi];
        }
    }
    if (d0 < D) {
#pragma unroll
        for (int g = 0; g < GM; g++) {
            if (g < G) {
                float *o = p.opart + (row0 + (size_t)g * nsplit) * hd;
#pragma unroll
                for (int i = 0; i < DPT; i++)
                    if (d0 + i < hd) o[d0 + i] = acc[g][i];
            }
        }
    }
}

/* ------------------------------------------------------------ tensor-core split kernel (fp16, bf16) */

/* The same split and workspace contract as attn_split_kernel, with the
 * products on tensor cores (mma.sync m16n8k16, fp32 accumulation): the G
 * query heads of the kv head, padded to 16, are the M dimension. Per tile of
 * TK keys (32; 64 at D <= 256 under GRAFT_CUDA_ATTN_TK=64), double-buffered through cp.async (16
 * bytes a thread; rows past the chunk and columns past head_dim zero-filled):
 * warp w scores keys [w TK/4, (w+1) TK/4) over all of D (Q from shared
 * memory by ldmatrix, K by ldmatrix), the scaled, capped, masked scores go
 * to shared memory; eight threads a row run the online softmax over the tile
 * and leave P in the storage type; then warp w multiplies P by the V columns
 * [w D/4, (w+1) D/4) (V by ldmatrix.trans), its accumulators rescaled by the
 * row's factor first. */
#define AM_THREADS 128

__device__ __forceinline__ void am_ldsm_x4(unsigned *r, const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(gc_smem_addr(p)));
}
__device__ __forceinline__ void am_ldsm_x2(unsigned *r, const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(gc_smem_addr(p)));
}
__device__ __forceinline__ void am_ldsm_x4_t(unsigned *r, const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(gc_smem_addr(p)));
}

template <typename T, int D, bool TK32 = false> struct am_layout {
    static constexpr int TK = D >= 512 || TK32 ? 32 : 64; /* keys per tile (TK32: am_tk32) */
    static constexpr int ST = D + 8;              /* row stride of Q, K, V in elements (16-byte pad) */
    static constexpr int SST = TK + 4, PST = TK + 8;
    static constexpr size_t q_off = 0;
    static constexpr size_t k_off = q_off + (size_t)16 * ST * sizeof(T);
    static constexpr size_t v_off = k_off + (size_t)2 * TK * ST * sizeof(T);
    static constexpr size_t s_off = v_off + (size_t)2 * TK * ST * sizeof(T);
    static constexpr size_t p_off = s_off + (size_t)16 * SST * sizeof(float);
    static constexpr size_t r_off = p_off + (size_t)16 * PST * sizeof(T);
    /* the prologue's rows (attn_params.qg/kg/vnorm): the new key, the new value, the q and k gammas,
     * ST elements each */
    static constexpr size_t n_off = r_off + (size_t)3 * 16 * sizeof(float);
    static constexpr size_t bytes = n_off + (size_t)4 * ST * sizeof(T);
};

/* The prologue's rows (attn_params.qg/kg/vnorm) in shared memory, eight
 * threads a row (sub: the thread's place among them), 16-byte words.
 * am_prep_norm: row x (hd values) RMS-normalised with gamma g and rounded
 * to T as an RMSNorm node stores it (g NULL: x / sqrt(mean(x^2) + eps),
 * rounded once), as rotary_norm_row and the fused chain's norm do; act 0:
 * nothing, but its shuffles still run (every lane of the warp calls it). */
template <typename T, int D>
__device__ __forceinline__ void am_prep_norm(T *x, const T *g, float eps, int hd, int sub, bool act)
{
    constexpr int MW = D / 64; /* words a thread holds: hd / 8 over 8 threads */
    const int W = act ? hd / 8 : 0;
    uint4 v[MW];
    float ss = 0.0f, s2 = 0.0f; /* two sums: half the dependent chain */
#pragma unroll
    for (int i = 0; i < MW; i++) {
        const int w = sub + 8 * i;
        if (w >= W) break;
        v[i] = *reinterpret_cast<const uint4 *>(x + w * 8);
        const T *e = reinterpret_cast<const T *>(&v[i]);
#pragma unroll
        for (int k = 0; k < 8; k += 2) {
            ss += gc_f(e[k]) * gc_f(e[k]);
            s2 += gc_f(e[k + 1]) * gc_f(e[k + 1]);
        }
    }
    ss += s2;
    ss += __shfl_xor_sync(0xffffffffu, ss, 1);
    ss += __shfl_xor_sync(0xffffffffu, ss, 2);
    ss += __shfl_xor_sync(0xffffffffu, ss, 4);
    const float q = ss / (float)hd + eps, inv = gc_rsqrt<T>(q), sq = sqrtf(q), rs = 1.0f / sq;
#pragma unroll
    for (int i = 0; i < MW; i++) {
        const int w = sub + 8 * i;
        if (w >= W) break;
        T *e = reinterpret_cast<T *>(&v[i]);
        if (g) {
            const uint4 gw = *reinterpret_cast<const uint4 *>(g + w * 8);
            const T *ge = reinterpret_cast<const T *>(&gw);
#pragma unroll
            for (int k = 0; k < 8; k++) e[k] = gc_to<T>(gc_f(e[k]) * inv * gc_f(ge[k]));
        } else {
#pragma unroll
            for (int k = 0; k < 8; k++) /* e / sq without a division (session 30: E2B +1.4%, H100) */
                e[k] = gc_to<T>(gc_div_r(gc_f(e[k]), sq, rs));
        }
        *reinterpret_cast<uint4 *>(x + w * 8) = v[i];
    }
}

/* The rotary of row x in place (pairs of the first rdim values), rounded
 * to T as rotate_pair, by the eight threads that normalised it. Halves: a
 * thread takes the words w and w + rdim / 16 together, w = sub + 8 i, with
 * their cos and sin words in cw[i], sw[i]; interleaved: word w, the cos and
 * sin (of the token's position, NULL: outside the caches) read here. */
template <typename T, int MC>
__device__ __forceinline__ void am_prep_rope(T *x, const uint4 (&cw)[MC], const uint4 (&sw)[MC], const T *cs,
                                             const T *sn, int rdim, int inter, int sub)
{
    const int half = rdim / 2;
    if (!inter) {
#pragma unroll
        for (int i = 0; i < MC; i++) {
            const int w = sub + 8 * i;
            if (w >= half / 8) break;
            uint4 a = *reinterpret_cast<const uint4 *>(x + w * 8), b = *reinterpret_cast<const uint4 *>(x + half + w * 8);
            T *ae = reinterpret_cast<T *>(&a), *be = reinterpret_cast<T *>(&b);
            const T *ce = reinterpret_cast<const T *>(&cw[i]), *se = reinterpret_cast<const T *>(&sw[i]);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const float x0 = gc_f(ae[k]), x1 = gc_f(be[k]), cc = gc_f(ce[k]), sv = gc_f(se[k]);
                ae[k] = gc_to<T>(cc * x0 - sv * x1);
                be[k] = gc_to<T>(sv * x0 + cc * x1);
            }
            *reinterpret_cast<uint4 *>(x + w * 8) = a;
            *reinterpret_cast<uint4 *>(x + half + w * 8) = b;
        }
    } else {
        for (int w = sub; w < rdim / 8; w += 8) {
            uint4 a = *reinterpret_cast<const uint4 *>(x + w * 8);
            T *ae = reinterpret_cast<T *>(&a);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float x0 = gc_f(ae[2 * k]), x1 = gc_f(ae[2 * k + 1]);
                const float cc = cs ? gc_f(cs[4 * w + k]) : __int_as_float(0x7fc00000);
                const float sv = sn ? gc_f(sn[4 * w + k]) : __int_as_float(0x7fc00000);
                ae[2 * k] = gc_to<T>(cc * x0 - sv * x1);
                ae[2 * k + 1] = gc_to<T>(sv * x0 + cc * x1);
            }
            *reinterpret_cast<uint4 *>(x + w * 8) = a;
        }
    }
}

template <typename T, int D, bool TK32 = false>
__global__ void __launch_bounds__(AM_THREADS) attn_mma_kernel(attn_params p)
{
    typedef am_layout<T, D, TK32> LY;
    constexpr int TK = LY::TK, ST = LY::ST, SST = LY::SST, PST = LY::PST;
    constexpr int CPR = D / 8;                   /* 16-byte words per row */
    constexpr int LOADS = TK * CPR / AM_THREADS; /* per thread per tile, K and V each */
    constexpr int NTS = TK / 32;                 /* score n-tiles (8 keys) per warp */
    constexpr int DW = D / 4, NTO = DW / 8;      /* output columns and n-tiles per warp */
    static_assert(TK * CPR % AM_THREADS == 0 && NTS >= 1 && NTO % 2 == 0, "tile shape");
    extern __shared__ float4 smem4[];
    char *smem = reinterpret_cast<char *>(smem4);
    T *qs = reinterpret_cast<T *>(smem + LY::q_off);
    T *ks = reinterpret_cast<T *>(smem + LY::k_off);
    T *vs = reinterpret_cast<T *>(smem + LY::v_off);
    float *ss = reinterpret_cast<float *>(smem + LY::s_off);
    T *ps = reinterpret_cast<T *>(smem + LY::p_off);
    float *m_s = reinterpret_cast<float *>(smem + LY::r_off), *l_s = m_s + 16, *a_s = m_s + 32;

    const int split = blockIdx.x, kh = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tig = lane & 3;
    const int hd = p.hd, G = p.G, nsplit = p.nsplit, cpr = hd / 8;
    /* before the wait: the lengths (uploaded before the step's first attention) and, with p.early, the
     * first tile's cache rows (written two or more launches before) */
    int j0, j1;
    attn_range(p, p.lens[b], split, &j0, &j1, TK);
    const size_t row0 = ((size_t)b * p.Hq + (size_t)kh * G) * nsplit + split;
    const size_t cache_off = ((size_t)b * p.Hkv + kh) * (size_t)p.max_seq * hd;
    const T *kb = (const T *)p.k + cache_off, *vb = (const T *)p.v + cache_off;
    /* the newest key (knew): read from its rows, and copied into the caches by this block, the only one
     * whose keys include it */
    const int jnew = p.knew && p.lens[b] <= p.max_seq ? p.lens[b] - 1 : -1;
    const T *kn = p.knew ? (const T *)p.knew + (size_t)b * p.nsb + (size_t)kh * p.nsh : NULL;
    const T *vn = p.knew ? (const T *)p.vnew + (size_t)b * p.nsb + (size_t)kh * p.nsh : NULL;

    /* the prologue (attn_params.qg/kg/vnorm): the new key and value rows are made in shared memory
     * (nrow rows 0, 1) and read from there */
    T *nrow = reinterpret_cast<T *>(smem + LY::n_off);
    const bool own = jnew >= j0 && jnew < j1, pk = own && p.kg, pv = own && p.vnorm;
    /* the new rows of a tile from nrow (plain copies: the tile's cp.async group does not cover them) */
    auto stage_new = [&](T *kd, T *vd, int jt) {
        T *kr = kd + (jnew - jt) * ST, *vr = vd + (jnew - jt) * ST;
        for (int c = tid; c < CPR; c += AM_THREADS) {
            if (pk) *reinterpret_cast<uint4 *>(kr + c * 8) = *reinterpret_cast<const uint4 *>(nrow + c * 8);
            if (pv) *reinterpret_cast<uint4 *>(vr + c * 8) = *reinterpret_cast<const uint4 *>(nrow + ST + c * 8);
        }
    };
    /* the cache's rows but the newest key's, then the newest key's (from knew or nrow); staged: the rows
     * nrow holds may be copied (false in the prologue, before they are made) */
    auto load_cache = [&](int jt, int buf) {
        const int nk = min(TK, j1 - jt);
        T *kd = ks + (size_t)buf * TK * ST, *vd = vs + (size_t)buf * TK * ST;
        /* not unrolled: load_cache is inlined three times, and a launch fetches its code cold (session 29:
         * 800 of head_dim 256's 4,880 instructions fewer; E2B 390.8 -> 393.6 tok/s, H100) */
#pragma unroll 1
        for (int it = 0; it < LOADS; it++) {
            int i = it * AM_THREADS + tid, r = i / CPR, c = i % CPR;
            bool ok = r < nk && c < cpr;
            size_t off = ok ? (size_t)(jt + r) * hd + (size_t)c * 8 : 0;
            if (jt + r == jnew) continue; /* the newest key: load_new */
            gc_cp16(kd + r * ST + c * 8, kb + off, ok);
            gc_cp16(vd + r * ST + c * 8, vb + off, ok);
        }
    };
    auto load_new = [&](int jt, int buf, bool staged) {
        const int nk = min(TK, j1 - jt);
        T *kd = ks + (size_t)buf * TK * ST, *vd = vs + (size_t)buf * TK * ST;
        if (jnew >= jt && jnew < jt + nk) {
            T *kr = kd + (jnew - jt) * ST, *vr = vd + (jnew - jt) * ST;
            for (int c = tid; c < CPR; c += AM_THREADS) {
                if (!pk) gc_cp16(kr + c * 8, kn + (c < cpr ? (size_t)c * 8 : 0), c < cpr);
                if (!pv) gc_cp16(vr + c * 8, vn + (c < cpr ? (size_t)c * 8 : 0), c < cpr);
            }
            if (staged && (pk || pv)) stage_new(kd, vd, jt);
        }
    };
    if (p.exit_empty && j0 >= j1 && !p.pf.n) return; /* no key: its SM free at once (the merge reads the
                                                       * splits with keys only) */
    const bool early = p.early && j0 < j1;
    if (early) {
        load_cache(j0, 0);
        gc_cp_commit();
    }
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    if (!p.pf_late) am_l2_prefetch(p);
    if (j0 >= j1) {
        if (p.pf_late) am_l2_prefetch(p); /* a block without keys: at once */
        if (tid < G) {
            p.ml[(row0 + (size_t)tid * nsplit) * 2] = -INFINITY;
            p.ml[(row0 + (size_t)tid * nsplit) * 2 + 1] = 0.0f;
        }
        return;
    }
    /* the new rows into the caches (from nrow where the prologue made them) */
    auto store_new = [&]() {
#pragma unroll 1
        for (int c = tid; c < cpr; c += AM_THREADS) {
            const size_t off = (size_t)jnew * hd + (size_t)c * 8;
            const T *ksrc = pk ? nrow + c * 8 : kn + (size_t)c * 8, *vsrc = pv ? nrow + ST + c * 8 : vn + (size_t)c * 8;
            *reinterpret_cast<uint4 *>(const_cast<T *>(kb) + off) = *reinterpret_cast<const uint4 *>(ksrc);
            *reinterpret_cast<uint4 *>(const_cast<T *>(vb) + off) = *reinterpret_cast<const uint4 *>(vsrc);
        }
    };
    const bool prep = p.qg || p.kg || p.vnorm, rope = p.qg || pk;
    if (own && !prep) store_new();
    /* the group's queries (storage type; rows past G and columns past hd zero): 16 bytes a copy, in
     * the first tile's group (one memory round trip for both), or element by element when q is not
     * 16-byte aligned (never with the prologue: gcuda_attn_decode_takes_prep) */
    const T *qg = (const T *)p.q + ((size_t)b * p.Hq + (size_t)kh * G) * hd;
    const bool q16 = ((uintptr_t)qg & 15) == 0;
    if (q16) {
#pragma unroll
        for (int it = 0; it < (16 * CPR + AM_THREADS - 1) / AM_THREADS; it++) {
            int i = it * AM_THREADS + tid, r = i / CPR, c = i % CPR;
            bool ok = r < G && c < cpr;
            if (r < 16) gc_cp16(qs + r * ST + c * 8, qg + (ok ? (size_t)r * hd + (size_t)c * 8 : 0), ok);
        }
    } else { /* cold: never with the prologue */
#pragma unroll 1
        for (int i = tid; i < 16 * D; i += AM_THREADS) {
            int r = i / D, d = i % D;
            qs[r * ST + d] = r < G && d < hd ? qg[(size_t)r * hd + d] : gc_to<T>(0.0f);
        }
    }
    if (prep) {
        /* a first group of copies: the raw new rows (zero past hd), the gammas (and the queries above); a
         * second: the first tile. The cos/sin of the token's position go to registers meanwhile. Then the
         * norms, the rotaries, the new rows out, while the tile lands. */
        for (int c = tid; c < CPR; c += AM_THREADS) {
            const size_t o = c < cpr ? (size_t)c * 8 : 0;
            if (pk) gc_cp16(nrow + c * 8, kn + o, c < cpr);
            if (pv) gc_cp16(nrow + ST + c * 8, vn + o, c < cpr);
            if (p.qg && c < cpr) gc_cp16(nrow + 2 * ST + c * 8, (const T *)p.qg + o, true);
            if (pk && c < cpr) gc_cp16(nrow + 3 * ST + c * 8, (const T *)p.kg + o, true);
        }
        gc_cp_commit();
    }
    /* the first tile (its cache rows already asked for when early), in a group of its own after the
     * prologue's copies, or with the queries */
    if (!early) load_cache(j0, 0);
    load_new(j0, 0, false);
    gc_cp_commit();
    if (prep) {
        /* the cos/sin of the token's position (halves: the words this thread rotates, into registers
         * while the copies land) */
        constexpr int MC = D >= 256 ? D / 128 : 1;
        const int grp = tid >> 3, sub = tid & 7, half = p.rdim / 2;
        const T *cs = nullptr, *sn = nullptr;
        uint4 cw[MC], sw[MC];
        if (rope) {
            const long long pos = p.rpos[b];
            if (pos >= 0 && pos < p.rmax) cs = (const T *)p.rcos + pos * half, sn = (const T *)p.rsin + pos * half;
#pragma unroll
            for (int i = 0; i < MC; i++) {
                const int w = sub + 8 * i;
                if (p.rinter || w >= half / 8) break;
                if (cs) {
                    cw[i] = *reinterpret_cast<const uint4 *>(cs + w * 8);
                    sw[i] = *reinterpret_cast<const uint4 *>(sn + w * 8);
                } else { /* no error channel on the device: NaN rows show it */
                    T *ce = reinterpret_cast<T *>(&cw[i]), *se = reinterpret_cast<T *>(&sw[i]);
                    for (int k = 0; k < 8; k++) ce[k] = se[k] = gc_to<T>(__int_as_float(0x7fc00000));
                }
            }
        }
        gc_cp_wait<1>();
        __syncthreads();
        /* job j: query row j (when qg), then the key, then the value; 16 rows at a time, each normalised
         * and then rotated by its eight threads */
        const int nq = p.qg ? G : 0, jobs = nq + pk + pv;
        for (int jb = 0; jb < jobs; jb += AM_THREADS / 8) { /* every lane alike: am_prep_norm's shuffles */
            const int j = jb + grp;
            T *row = j < nq ? qs + j * ST : j == nq && pk ? nrow : nrow + ST;
            const T *gm = j < nq ? nrow + 2 * ST : j == nq && pk ? nrow + 3 * ST : nullptr;
            am_prep_norm<T, D>(row, gm, j < nq ? p.qeps : j == nq && pk ? p.keps : p.veps, hd, sub, j < jobs);
            __syncwarp();
            if (j < nq + pk) am_prep_rope<T, MC>(row, cw, sw, cs, sn, p.rdim, p.rinter, sub);
        }
        __syncthreads();
        if (own) {
            store_new();
            if (jnew < j0 + TK) stage_new(ks, vs, j0);
        }
    }
    /* row stats */
    if (tid < 16) {
        m_s[tid] = -INFINITY;
        l_s[tid] = 0.0f;
    }

    float o[NTO][4];
#pragma unroll
    for (int i = 0; i < NTO; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;

    int buf = 0;
    for (int jt = j0; jt < j1; jt += TK, buf ^= 1) {
        if (jt + TK < j1) {
            load_cache(jt + TK, buf ^ 1);
            load_new(jt + TK, buf ^ 1, true);
        }
        gc_cp_commit();
        gc_cp_wait<1>();
        __syncthreads(); /* tile jt in shared memory (and, the first time, qs and the stats) */
        const T *kt = ks + (size_t)buf * TK * ST, *vt = vs + (size_t)buf * TK * ST;

        /* S = Q K^T for this warp's keys */
        {
            float c[NTS][4];
#pragma unroll
            for (int n = 0; n < NTS; n++) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.0f;
            const int arow = (lane & 7) + 8 * ((lane >> 3) & 1), acol = 8 * (lane >> 4);
            const int brow = lane & 7, bcol = 8 * ((lane >> 3) & 1);
#pragma unroll 4
            for (int k0 = 0; k0 < D; k0 += 16) {
                unsigned a[4];
                am_ldsm_x4(a, qs + arow * ST + k0 + acol);
#pragma unroll
                for (int n = 0; n < NTS; n++) {
                    unsigned bf[2];
                    am_ldsm_x2(bf, kt + ((warp * NTS + n) * 8 + brow) * ST + k0 + bcol);
                    gc_mma<T>::run(c[n], a, bf);
                }
            }
#pragma unroll
            for (int n = 0; n < NTS; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int row = g + 8 * (e >> 1), col = (warp * NTS + n) * 8 + tig * 2 + (e & 1);
                    float sv = c[n][e] * p.scale;
                    if (p.softcap > 0.0f) sv = p.softcap * tanhf(sv / p.softcap);
                    ss[row * SST + col] = jt + col < j1 ? sv : -INFINITY;
                }
        }
        __syncthreads();

        /* online softmax: 8 threads a row, TK / 8 keys each */
        {
            const int row = tid >> 3, seg = tid & 7;
            constexpr int PER = TK / 8;
            float v[PER], mx = -INFINITY;
#pragma unroll
            for (int i = 0; i < PER; i++) {
                v[i] = ss[row * SST + seg * PER + i];
                mx = fmaxf(mx, v[i]);
            }
#pragma unroll
            for (int o2 = 4; o2 > 0; o2 >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o2));
            const float mold = m_s[row], mnew = fmaxf(mold, mx); /* finite: the tile has a key */
            float sum = 0.0f;
#pragma unroll
            for (int i = 0; i < PER; i++) {
                float e = __expf(v[i] - mnew);
                T et = gc_to<T>(e);
                ps[row * PST + seg * PER + i] = et;
                sum += gc_f(et); /* the sum of what is multiplied into V */
            }
#pragma unroll
            for (int o2 = 4; o2 > 0; o2 >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o2);
            __syncwarp();
            if (seg == 0) {
                float al = __expf(mold - mnew);
                a_s[row] = al;
                l_s[row] = l_s[row] * al + sum;
                m_s[row] = mnew;
            }
        }
        __syncthreads();

        /* O = O * alpha + P V for this warp's columns */
        {
            const float al0 = a_s[g], al1 = a_s[g + 8];
#pragma unroll
            for (int n = 0; n < NTO; n++) {
                o[n][0] *= al0, o[n][1] *= al0;
                o[n][2] *= al1, o[n][3] *= al1;
            }
            const int arow = (lane & 7) + 8 * ((lane >> 3) & 1), acol = 8 * (lane >> 4);
            const int vrow = (lane & 7) + 8 * ((lane >> 3) & 1), vcol = 8 * (lane >> 4);
#pragma unroll
            for (int kk = 0; kk < TK; kk += 16) {
                unsigned a[4];
                am_ldsm_x4(a, ps + arow * PST + kk + acol);
#pragma unroll
                for (int n = 0; n < NTO; n += 2) {
                    unsigned bf[4];
                    am_ldsm_x4_t(bf, vt + (kk + vrow) * ST + warp * DW + n * 8 + vcol);
                    gc_mma<T>::run(o[n], a, bf);
                    gc_mma<T>::run(o[n + 1], a, bf + 2);
                }
            }
        }
        __syncthreads(); /* buffers, ss, ps and the stats are rewritten next tile */
    }

    if (tid < G) {
        p.ml[(row0 + (size_t)tid * nsplit) * 2] = m_s[tid];
        p.ml[(row0 + (size_t)tid * nsplit) * 2 + 1] = l_s[tid];
    }
    /* two adjacent columns a store (col even, hd a multiple of 8: 8-byte aligned), from two row pointers
     * (rows g, g + 8) made once: with each store's address made from the indexes, head_dim 512 spent 628
     * instructions here */
    {
        const int cb = warp * DW + tig * 2;
        float *op0 = p.opart + (row0 + (size_t)g * nsplit) * hd + cb, *op1 = op0 + (size_t)8 * nsplit * hd;
        const bool on0 = g < G, on1 = g + 8 < G;
#pragma unroll
        for (int n = 0; n < NTO; n++)
            if (cb + n * 8 < hd) {
                if (on0) *reinterpret_cast<float2 *>(op0 + n * 8) = make_float2(o[n][0], o[n][1]);
                if (on1) *reinterpret_cast<float2 *>(op1 + n * 8) = make_float2(o[n][2], o[n][3]);
            }
    }
    if (p.pf_late) am_l2_prefetch(p); /* after the partials: the prefetch's DRAM traffic cannot delay the tiles */
}

/* Merges the splits of one (query head, batch) for 64 output columns
 * (grid.z): out = sum_s w_s o_s / sum_s w_s l_s, w_s = exp(m_s - max m).
 * Only the splits that hold keys are read: the first S of them, S from the
 * sequence's length as attn_range cuts it (p.tile: the split kernel's
 * tile), counted before the wait (the lengths are written before the
 * step's first attention); the others saw no key and wrote no partials.
 * Warp w takes 8 columns, lane j the splits j, j + 32, ...: each lane's
 * loads (stats and 8 partial columns) are issued at once after the wait,
 * merged online in the lane, then across the warp by shuffles (no block
 * barrier, one memory latency). */
#define AT_CB_THREADS 256
#define AT_CB_COLS 64
template <typename T> __global__ void __launch_bounds__(AT_CB_THREADS) attn_combine_kernel(attn_params p)
{
    const int qh = blockIdx.x, b = blockIdx.y, hd = p.hd, lane = threadIdx.x & 31;
    const int col = blockIdx.z * AT_CB_COLS + 8 * (int)(threadIdx.x >> 5);
    int len = p.lens[b];
    long long lo;
    const int n = attn_keys(p, len, &lo), chunk = attn_chunk(p, n, p.tile);
    const int S = n > 0 ? min((n + chunk - 1) / chunk, p.nsplit) : 0; /* the splits with keys */
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    if (col >= hd) return;
    const size_t row0 = ((size_t)b * p.Hq + qh) * p.nsplit;
    const float r = gc_attn_merge8<T>(p.ml, p.opart, row0, S, hd, col, lane);
    if (lane < 8) ((T *)p.out)[((size_t)b * p.Hq + qh) * hd + col + lane] = gc_to<T>(r);
}

static graft_status attn_combine_go(int dtype, const attn_params *p, gcuda_stream s, graft_error *err)
{
    dim3 cgrid((unsigned)p->Hq, (unsigned)p->B, (unsigned)((p->hd + AT_CB_COLS - 1) / AT_CB_COLS));
    GCUDA_DISPATCH(dtype, "gcuda_attn_decode", {
        gc_launch(gcuda_pdl_all(), (attn_combine_kernel<T>), cgrid, AT_CB_THREADS, 0, s, *p);
        GCUDA_CHECK_LAUNCH("attn_combine_kernel");
    });
    return GRAFT_OK;
}

/* The tensor-core kernel's tiles: 32 keys at every head_dim, so that a short context spreads over more
 * blocks with keys (160 keys: 5 at head_dim 256, not 3; E2B decode 435.6 against 429.2 tok/s, H200, session
 * 29); GRAFT_CUDA_ATTN_TK=64: 64 keys at head_dim <= 256, as before */
static int am_tk32(void)
{
    static const int on = !gc_env_is("GRAFT_CUDA_ATTN_TK", "64");
    return on;
}
/* GRAFT_CUDA_ATTN_EXIT=1: the tensor-core kernel's blocks whose split holds no key (at a short context, most
 * of the planned splits) return before the wait, not after it with their empty stats, which no merge reads:
 * they no longer hold an SM's registers and shared memory until the kernel before ends. Not while they ask
 * L2 for later weights (gcuda_attn_decode_args.pf), which they do after the wait. */
static int am_exit_empty(void)
{
    static const int on = gc_env_is("GRAFT_CUDA_ATTN_EXIT", "1");
    return on;
}
/* The tensor-core kernel's keys a tile at template head_dim dt (am_layout::TK as attn_go picks the kernel) */
static int am_tile(int dt) { return dt >= 512 || am_tk32() ? 32 : 64; }

/* plan: sets *occ (blocks per SM) only; run: launches the split kernel. */
template <typename T, int D, int GT>
static graft_status attn_go(const attn_params *p, int plan, int *occ, gcuda_stream s, graft_error *err)
{
    size_t smem;
    void (*kern)(attn_params);
    if constexpr (GT == 0) { /* tensor cores */
        smem = am_layout<T, D>::bytes;
        kern = attn_mma_kernel<T, D>;
        if constexpr (D < 512) /* 32-key tiles already at 512 */
            if (am_tk32()) {
                smem = am_layout<T, D, true>::bytes;
                kern = attn_mma_kernel<T, D, true>;
            }
    } else {
        smem = attn_layout<T, D, GT>::bytes;
        kern = attn_split_kernel<T, D, GT>;
    }
    GCUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    if (plan) {
        GCUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(occ, kern, AT_THREADS, smem));
        return GRAFT_OK;
    }
    dim3 grid((unsigned)p->nsplit, (unsigned)p->Hkv, (unsigned)p->B);
    gc_launch(gcuda_pdl_all(), kern, grid, AT_THREADS, smem, s, *p);
    GCUDA_CHECK_LAUNCH("attn_split_kernel");
    return GRAFT_OK;
}

/* gt 0: the tensor-core kernel (fp16, bf16) */
template <typename T, int D>
static graft_status attn_gt(int gt, const attn_params *p, int plan, int *occ, gcuda_stream s, graft_error *err)
{
    switch (gt) {
    case 0:
        if constexpr (sizeof(T) == 2) return attn_go<T, D, 0>(p, plan, occ, s, err);
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_attn_decode: no tensor-core kernel for fp32");
    case 1: return attn_go<T, D, 1>(p, plan, occ, s, err);
    case 2: return attn_go<T, D, 2>(p, plan, occ, s, err);
    default: return attn_go<T, D, 4>(p, plan, occ, s, err);
    }
}

template <typename T>
static graft_status attn_d(int dt, int gt, const attn_params *p, int plan, int *occ, gcuda_stream s, graft_error *err)
{
    switch (dt) {
    case 64: return attn_gt<T, 64>(gt, p, plan, occ, s, err);
    case 128: return attn_gt<T, 128>(gt, p, plan, occ, s, err);
    case 256: return attn_gt<T, 256>(gt, p, plan, occ, s, err);
    default: return attn_gt<T, 512>(gt, p, plan, occ, s, err);
    }
}

extern "C" int gcuda_attn_decode_takes_new(const gcuda_attn_decode_args *a)
{
    /* the tensor-core kernel (attn_prepare's gt 0) reads them, 16 bytes a copy */
    return a->k_new && a->v_new && a->impl == 2 && gcuda_dtype_size(a->dtype) == 2 &&
           ((uintptr_t)a->k_new | (uintptr_t)a->v_new) % 16 == 0 && a->new_stride_b % 8 == 0 &&
           a->new_stride_h % 8 == 0 && a->new_stride_b >= 0 && a->new_stride_h >= 0;
}

extern "C" int gcuda_attn_decode_takes_prep(const gcuda_attn_decode_args *a)
{
    if (!a->q_gamma && !a->k_gamma && !a->v_norm) return 0;
    if (a->impl != 2 || gcuda_dtype_size(a->dtype) != 2 || a->head_dim % 8 || (uintptr_t)a->q % 16 ||
        (uintptr_t)a->q_gamma % 16 || (uintptr_t)a->k_gamma % 16)
        return 0;
    if ((a->k_gamma || a->v_norm) && !gcuda_attn_decode_takes_new(a)) return 0;
    if (a->q_gamma || a->k_gamma)
        return a->rope_cos && a->rope_sin && a->rope_pos && a->rope_max_pos > 0 && a->rope_dim > 0 &&
               a->rope_dim % 16 == 0 && a->rope_dim <= a->head_dim &&
               ((uintptr_t)a->rope_cos | (uintptr_t)a->rope_sin) % 16 == 0;
    return 1;
}

/* Validates a and fills p; *dt, *gt: template choices. */
static graft_status attn_prepare(const gcuda_attn_decode_args *a, attn_params *p, int *dt, int *gt, graft_error *err)
{
    if (!gcuda_dtype_size(a->dtype))
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_attn_decode: dtype %d not supported", a->dtype);
    if (a->batch < 1 || a->batch > 65535 || a->kv_heads < 1 || a->kv_heads > 65535 || a->q_heads < a->kv_heads ||
        a->q_heads % a->kv_heads || a->q_heads > 65535)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_decode: batch %lld, %lld query heads, %lld kv heads",
                          (long long)a->batch, (long long)a->q_heads, (long long)a->kv_heads);
    int64_t G = a->q_heads / a->kv_heads;
    if (G > 16)
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_attn_decode: %lld query heads per kv head (at most 16)",
                          (long long)G);
    if (a->head_dim < 8 || a->head_dim > 512 || a->head_dim % 8)
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_attn_decode: head_dim %lld (a multiple of 8, at most 512)",
                          (long long)a->head_dim);
    if (a->max_seq < 1 || a->max_seq > 0x7fffffff / 2)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_decode: max_seq %lld", (long long)a->max_seq);
    if (((uintptr_t)a->k_cache | (uintptr_t)a->v_cache) % 16)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_decode: KV caches must be 16-byte aligned");
    *dt = a->head_dim <= 64 ? 64 : a->head_dim <= 128 ? 128 : a->head_dim <= 256 ? 256 : 512;
    if (a->impl < 0 || a->impl > 2)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_decode: impl %d (0, 1, 2)", a->impl);
    *gt = a->impl == 2 && gcuda_dtype_size(a->dtype) == 2 ? 0 : G <= 4 ? 1 : G <= 8 ? 2 : 4;
    p->q = a->q;
    p->k = a->k_cache;
    p->v = a->v_cache;
    p->lens = a->seq_lens;
    p->out = a->out;
    p->B = (int)a->batch;
    p->Hq = (int)a->q_heads;
    p->Hkv = (int)a->kv_heads;
    p->G = (int)G;
    p->hd = (int)a->head_dim;
    p->max_seq = (int)a->max_seq;
    p->nsplit = a->num_splits;
    p->tile = *gt ? AT_TK : am_tile(*dt);
    p->scale = a->scale;
    p->softcap = a->softcap;
    p->window_left = a->window_left;
    p->opart = NULL;
    p->ml = NULL;
    p->knew = p->vnew = NULL;
    p->nsb = p->nsh = 0;
    if (a->k_new || a->v_new) {
        if (!gcuda_attn_decode_takes_new(a))
            return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_decode: new key/value rows need the tensor-core kernel "
                              "(impl 2, fp16/bf16) and 16-byte aligned rows");
        p->knew = a->k_new;
        p->vnew = a->v_new;
        p->nsb = a->new_stride_b;
        p->nsh = a->new_stride_h;
    }
    graft_status pst = gc_prefetch_check(&a->pf, "gcuda_attn_decode", err);
    if (pst) return pst;
    p->pf = a->pf; /* the tensor-core kernel's; the others ignore it */
    p->pf.mode = gc_pf_mode();
    p->pf_late = a->pf_late;
    p->early = a->cache_ready && *gt == 0;
    p->exit_empty = am_exit_empty();
    p->qg = p->kg = NULL;
    p->vnorm = 0;
    if (a->q_gamma || a->k_gamma || a->v_norm) {
        if (!gcuda_attn_decode_takes_prep(a))
            return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_decode: rows before their norms and rotary need the "
                              "tensor-core kernel, 16-byte aligned rows, gammas and caches, a rotary dimension "
                              "that is a multiple of 16 (%lld), and the new rows with k_gamma/v_norm",
                              (long long)a->rope_dim);
        p->qg = a->q_gamma, p->kg = a->k_gamma, p->vnorm = a->v_norm;
        p->qeps = a->q_eps, p->keps = a->k_eps, p->veps = a->v_eps;
        p->rcos = a->rope_cos, p->rsin = a->rope_sin, p->rpos = a->rope_pos, p->rmax = a->rope_max_pos;
        p->rdim = (int)a->rope_dim, p->rinter = a->rope_interleaved;
    }
    return GRAFT_OK;
}

static size_t attn_ws_bytes(const attn_params *p)
{
    return (size_t)p->B * p->Hq * p->nsplit * ((size_t)p->hd + 2) * sizeof(float);
}

extern "C" graft_status gcuda_attn_decode_plan(gcuda_attn_decode_args *a, graft_error *err)
{
    attn_params p = {};
    int dt = 64, gt = 1, occ = 0, sms = 0;
    graft_status st = attn_prepare(a, &p, &dt, &gt, err);
    if (st) return st;
    if (a->num_splits == 0) {
        GCUDA_DISPATCH(a->dtype, "gcuda_attn_decode_plan", {
            st = attn_d<T>(dt, gt, &p, 1, &occ, NULL, err);
            if (st) return st;
        });
        if ((st = gcuda_sm_count(&sms, err))) return st;
        if (occ < 1) occ = 1;
        int64_t units = a->batch * a->kv_heads, want = ((int64_t)sms * occ + units - 1) / units;
        /* SIMT kernel: at least two 32-key tiles per split at full length
         * (fewer partials to merge); tensor cores: at least one tile
         * (am_tk32) */
        int64_t tile = gt ? 2 * AT_TK : am_tile(dt);
        int64_t cap = (a->max_seq + tile - 1) / tile;
        if (want > cap) want = cap;
        if (want > AT_MAX_SPLITS) want = AT_MAX_SPLITS;
        if (want < 1) want = 1;
        a->num_splits = (int)want;
    } else if (a->num_splits < 1 || a->num_splits > AT_MAX_SPLITS) {
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_decode_plan: num_splits %d (1..%d)", a->num_splits,
                          AT_MAX_SPLITS);
    }
    p.nsplit = a->num_splits;
    a->ws_bytes = attn_ws_bytes(&p);
    return GRAFT_OK;
}

extern "C" graft_status gcuda_attn_decode(const gcuda_attn_decode_args *a, gcuda_stream s, graft_error *err)
{
    attn_params p = {};
    int dt = 64, gt = 1;
    graft_status st = attn_prepare(a, &p, &dt, &gt, err);
    if (st) return st;
    if (p.nsplit < 1 || p.nsplit > AT_MAX_SPLITS)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_decode: num_splits %d (call gcuda_attn_decode_plan)",
                          p.nsplit);
    size_t need = attn_ws_bytes(&p);
    if (!a->ws || a->ws_bytes < need)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_decode: workspace of %zu bytes, %zu needed", a->ws_bytes,
                          need);
    p.opart = (float *)a->ws;
    p.ml = p.opart + (size_t)p.B * p.Hq * p.nsplit * p.hd;
    GCUDA_DISPATCH(a->dtype, "gcuda_attn_decode", {
        st = attn_d<T>(dt, gt, &p, 0, NULL, s, err);
        if (st) return st;
    });
    return attn_combine_go(a->dtype, &p, s, err);
}
