/* Prefill attention (S query tokens per sequence, causal, against the KV
 * cache) and the KV append that writes the new rows into the cache.
 *
 * gcuda_attn_prefill: grid (query tile, query head, batch). A block of four
 * warps takes PF_BQ = 16 query tokens of one head (4 per warp) and walks the
 * keys any of them can see ([lo of its first token, position of its last
 * token]) in 32-key tiles: K and V rows go to shared memory with 16-byte
 * loads (rows outside that range zero-filled), lane = key scores the warp's
 * 4 queries (fp32, queries pre-scaled in shared memory), masks causally and
 * by window per query, and runs the online softmax per query (max and sum by
 * warp shuffles); the probabilities stay in the warp's own shared rows and
 * lane l accumulates columns l, l + 32, ... of its 4 queries. Template D
 * (64, 128, 256, 512: the smallest >= head_dim, chosen at run time).
 *
 * gcuda_kv_append: one thread per 16 bytes of a new row (or per element
 * when rows are not 16-byte aligned). */
#include <math.h>

#include "kernels/cuda/gcuda_common.cuh"

/* ------------------------------------------------------------ KV append */

/* K's and V's rows in one launch (parts 2: items [total, 2 * total) are
 * V's, src1 into dst1), or one of them (parts 1). */
template <typename E>
__global__ void kv_append_kernel(const E *__restrict__ src0, E *__restrict__ dst0, const E *__restrict__ src1,
                                 E *__restrict__ dst1, const int32_t *__restrict__ past, int S, int H, int W,
                                 int max_seq, long long sb, long long ss, long long sh, long long total, int parts)
{
    gc_pdl_wait(); /* a programmatic dependent (GRAFT_CUDA_PDL=all) reads only after this */
    gc_pdl_trigger();
    /* W: units of E per row; sb, ss, sh: strides in units of E */
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total * parts;
         i += (long long)gridDim.x * blockDim.x) {
        const bool second = i >= total;
        const long long j = second ? i - total : i;
        const E *src = second ? src1 : src0;
        E *dst = second ? dst1 : dst0;
        int w = (int)(j % W);
        long long r = j / W;
        int h = (int)(r % H);
        r /= H;
        int s = (int)(r % S);
        int b = (int)(r / S);
        long long pos = (long long)past[b] + s;
        if (pos < 0 || pos >= max_seq) continue;
        dst[(((long long)b * H + h) * max_seq + pos) * W + w] = src[b * sb + s * ss + h * sh + w];
    }
}

extern "C" graft_status gcuda_kv_append(const gcuda_kv_append_args *a, gcuda_stream s, graft_error *err)
{
    size_t es = gcuda_dtype_size(a->dtype);
    if (!es) return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_kv_append: dtype %d not supported", a->dtype);
    if (a->batch < 1 || a->seq < 0 || a->kv_heads < 1 || a->head_dim < 1 || a->max_seq < 1 ||
        a->max_seq > 0x7fffffff || a->seq > 0x7fffffff || a->kv_heads > 0x7fffffff || a->head_dim > 0x7fffffff)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_kv_append: batch %lld, seq %lld, kv_heads %lld, head_dim %lld, "
                          "max_seq %lld", (long long)a->batch, (long long)a->seq, (long long)a->kv_heads,
                          (long long)a->head_dim, (long long)a->max_seq);
    if (!a->past_lens) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_kv_append: past_lens is NULL");
    if (a->seq == 0) return GRAFT_OK;
    const void *src[2] = {a->k, a->v};
    void *dst[2] = {a->k_cache, a->v_cache};
    int vec[2] = {0, 0};
    size_t row = (size_t)a->head_dim * es;
    for (int i = 0; i < 2; i++) {
        if (!src[i]) continue;
        if (!dst[i]) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_kv_append: %s cache is NULL", i ? "v" : "k");
        vec[i] = row % 16 == 0 && ((uintptr_t)src[i] | (uintptr_t)dst[i]) % 16 == 0 &&
                 ((size_t)a->stride_b * es | (size_t)a->stride_s * es | (size_t)a->stride_h * es) % 16 == 0;
    }
    /* both in one launch when they move in the same units */
    int both = src[0] && src[1] && vec[0] == vec[1];
    for (int i = 0; i < 2; i++) {
        if (!src[i]) continue;
        int parts = both ? 2 : 1;
        const void *s1 = both ? src[1] : src[i];
        void *d1 = both ? dst[1] : dst[i];
        long long div = vec[i] ? (long long)(16 / es) : 1;
        long long W = a->head_dim / div, total = a->batch * a->seq * a->kv_heads * W;
        unsigned blocks = gc_blocks(total * parts, 256);
        if (vec[i]) {
            gc_launch(gcuda_pdl_all(), (kv_append_kernel<uint4>), blocks, 256, 0, s, (const uint4 *)src[i],
                      (uint4 *)dst[i], (const uint4 *)s1, (uint4 *)d1, a->past_lens, (int)a->seq, (int)a->kv_heads,
                      (int)W, (int)a->max_seq, a->stride_b / div, a->stride_s / div, a->stride_h / div, total, parts);
        } else if (es == 4) {
            gc_launch(gcuda_pdl_all(), (kv_append_kernel<uint32_t>), blocks, 256, 0, s, (const uint32_t *)src[i],
                      (uint32_t *)dst[i], (const uint32_t *)s1, (uint32_t *)d1, a->past_lens, (int)a->seq,
                      (int)a->kv_heads, (int)W, (int)a->max_seq, a->stride_b, a->stride_s, a->stride_h, total, parts);
        } else {
            gc_launch(gcuda_pdl_all(), (kv_append_kernel<uint16_t>), blocks, 256, 0, s, (const uint16_t *)src[i],
                      (uint16_t *)dst[i], (const uint16_t *)s1, (uint16_t *)d1, a->past_lens, (int)a->seq,
                      (int)a->kv_heads, (int)W, (int)a->max_seq, a->stride_b, a->stride_s, a->stride_h, total, parts);
        }
        GCUDA_CHECK_LAUNCH("kv_append_kernel");
        if (both) break;
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ prefill attention */

#define PF_THREADS 128
#define PF_BQ 16 /* query tokens per block */
#define PF_RW 4  /* per warp */
#define PF_TK 32 /* keys per tile */

struct pf_params {
    const void *q, *k, *v;
    const int32_t *past;
    void *out;
    long long qsb, qss, qsh, osb, oss, osh;
    int S, Hq, Hkv, G, hd, max_seq;
    float scale, softcap;
    long long window_left;
};

template <typename T, int D> struct pf_layout {
    static constexpr int VEC = gc_vec<T>::n, KST = D + VEC;
    static constexpr size_t q_off = 0;
    static constexpr size_t k_off = q_off + (size_t)PF_BQ * D * sizeof(float);
    static constexpr size_t v_off = k_off + (size_t)PF_TK * KST * sizeof(T);
    static constexpr size_t p_off = v_off + (size_t)PF_TK * D * sizeof(T);
    static constexpr size_t bytes = p_off + (size_t)PF_BQ * PF_TK * sizeof(float);
};

template <typename T, int D> __global__ void __launch_bounds__(PF_THREADS) attn_prefill_kernel(pf_params p)
{
    typedef pf_layout<T, D> LY;
    constexpr int VEC = LY::VEC, KST = LY::KST, CPR = D / VEC, DPL = D / 32;
    constexpr int LOADS = PF_TK * CPR / PF_THREADS;
    static_assert(PF_TK * CPR % PF_THREADS == 0, "tile loads must divide evenly");
    extern __shared__ float4 smem4[];
    char *smem = reinterpret_cast<char *>(smem4);
    float *qs = reinterpret_cast<float *>(smem + LY::q_off);
    T *ks = reinterpret_cast<T *>(smem + LY::k_off);
    T *vs = reinterpret_cast<T *>(smem + LY::v_off);
    float *ps = reinterpret_cast<float *>(smem + LY::p_off);

    const int t0 = blockIdx.x * PF_BQ, qh = blockIdx.y, b = blockIdx.z, kh = qh / p.G;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int hd = p.hd, cpr = hd / VEC;
    const int nq = min(PF_BQ, p.S - t0);
    const long long past = p.past[b];

    /* the block's queries, fp32, pre-scaled; zero rows past S, columns past hd */
    for (int i = tid; i < PF_BQ * D; i += PF_THREADS) {
        int r = i / D, d = i % D;
        float v = 0.0f;
        if (r < nq && d < hd) v = gc_f(((const T *)p.q)[b * p.qsb + (t0 + r) * p.qss + qh * p.qsh + d]) * p.scale;
        qs[i] = v;
    }

    /* keys seen by any of the block's queries: [blo, bhi) */
    auto lo_of = [&](long long pos) -> long long {
        long long lo = p.window_left >= 0 ? pos - p.window_left : 0;
        return lo < 0 ? 0 : lo;
    };
    long long blo = lo_of(past + t0), bhi = past + t0 + nq; /* last position + 1 */
    if (bhi > p.max_seq) bhi = p.max_seq;
    if (blo > bhi) blo = bhi;

    const size_t cache_off = ((size_t)b * p.Hkv + kh) * (size_t)p.max_seq * hd;
    const T *kb = (const T *)p.k + cache_off, *vb = (const T *)p.v + cache_off;

    /* this warp's queries */
    long long pos[PF_RW], qlo[PF_RW];
    float m_run[PF_RW], l_run[PF_RW], acc[PF_RW][DPL];
#pragma unroll
    for (int i = 0; i < PF_RW; i++) {
        int r = warp * PF_RW + i;
        pos[i] = r < nq ? past + t0 + r : -1; /* -1: inactive row, sees nothing */
        qlo[i] = lo_of(pos[i]);
        m_run[i] = -INFINITY;
        l_run[i] = 0.0f;
#pragma unroll
        for (int u = 0; u < DPL; u++) acc[i][u] = 0.0f;
    }
    float *pw = ps + warp * PF_RW * PF_TK;

    for (long long jt = blo; jt < bhi; jt += PF_TK) {
        const int nk = (int)min((long long)PF_TK, bhi - jt);
        __syncthreads(); /* previous tile done (and, the first time, qs written) */
#pragma unroll 4
        for (int it = 0; it < LOADS; it++) {
            int i = it * PF_THREADS + tid, r = i / CPR, c = i % CPR;
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

        /* scores: lane = key */
        float sc[PF_RW];
#pragma unroll
        for (int i = 0; i < PF_RW; i++) sc[i] = 0.0f;
        {
            const T *krow = ks + lane * KST;
            for (int c = 0; c < cpr; c++) {
                float kf[VEC];
                gc_unpack<T>(*reinterpret_cast<const uint4 *>(krow + c * VEC), kf);
#pragma unroll
                for (int i = 0; i < PF_RW; i++) {
                    const float4 *q4 = reinterpret_cast<const float4 *>(qs + (warp * PF_RW + i) * D + c * VEC);
#pragma unroll
                    for (int i4 = 0; i4 < VEC / 4; i4++) {
                        float4 qv = q4[i4];
                        sc[i] = fmaf(qv.x, kf[4 * i4 + 0], sc[i]);
                        sc[i] = fmaf(qv.y, kf[4 * i4 + 1], sc[i]);
                        sc[i] = fmaf(qv.z, kf[4 * i4 + 2], sc[i]);
                        sc[i] = fmaf(qv.w, kf[4 * i4 + 3], sc[i]);
                    }
                }
            }
        }
        const long long j = jt + lane;
#pragma unroll
        for (int i = 0; i < PF_RW; i++) {
            float s = sc[i];
            if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
            bool vis = lane < nk && j <= pos[i] && j >= qlo[i];
            s = vis ? s : -INFINITY;
            float mnew = fmaxf(m_run[i], gc_warp_max(s));
            float pr = 0.0f, al = 1.0f;
            if (mnew != -INFINITY) { /* warp-uniform */
                pr = vis ? gc_exp<T>(s - mnew) : 0.0f;
                al = gc_exp<T>(m_run[i] - mnew);
            }
            l_run[i] = l_run[i] * al + gc_warp_sum(pr);
            m_run[i] = mnew;
            pw[i * PF_TK + lane] = pr;
#pragma unroll
            for (int u = 0; u < DPL; u++) acc[i][u] *= al;
        }
        __syncwarp();

        /* output: lane owns columns lane + 32 u */
        for (int r = 0; r < nk; r++) {
            float vf[DPL];
#pragma unroll
            for (int u = 0; u < DPL; u++) vf[u] = gc_f(vs[r * D + lane + 32 * u]);
#pragma unroll
            for (int i = 0; i < PF_RW; i++) {
                float pv = pw[i * PF_TK + r];
#pragma unroll
                for (int u = 0; u < DPL; u++) acc[i][u] = fmaf(pv, vf[u], acc[i][u]);
            }
        }
        __syncwarp(); /* pw is rewritten by the next tile */
    }

#pragma unroll
    for (int i = 0; i < PF_RW; i++) {
        int r = warp * PF_RW + i;
        if (r >= nq) continue;
        float inv = l_run[i] > 0.0f ? 1.0f / l_run[i] : 0.0f;
        T *o = (T *)p.out + b * p.osb + (t0 + r) * p.oss + qh * p.osh;
#pragma unroll
        for (int u = 0; u < DPL; u++) {
            int c = lane + 32 * u;
            if (c < hd) o[c] = gc_to<T>(acc[i][u] * inv);
        }
    }
}

template <typename T, int D> static graft_status pf_go(const pf_params *p, int B, gcuda_stream s, graft_error *err)
{
    const size_t smem = pf_layout<T, D>::bytes;
    void (*kern)(pf_params) = attn_prefill_kernel<T, D>;
    GCUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid((unsigned)((p->S + PF_BQ - 1) / PF_BQ), (unsigned)p->Hq, (unsigned)B);
    kern<<<grid, PF_THREADS, smem, s>>>(*p);
    GCUDA_CHECK_LAUNCH("attn_prefill_kernel");
    return GRAFT_OK;
}

extern "C" graft_status gcuda_attn_prefill(const gcuda_attn_prefill_args *a, gcuda_stream s, graft_error *err)
{
    if (!gcuda_dtype_size(a->dtype))
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_attn_prefill: dtype %d not supported", a->dtype);
    if (a->batch < 1 || a->batch > 65535 || a->kv_heads < 1 || a->q_heads < a->kv_heads || a->q_heads % a->kv_heads ||
        a->q_heads > 65535 || a->seq < 0 || a->seq > 0x7fffffff / 2)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_prefill: batch %lld, seq %lld, %lld query heads, %lld kv heads",
                          (long long)a->batch, (long long)a->seq, (long long)a->q_heads, (long long)a->kv_heads);
    if (a->head_dim < 8 || a->head_dim > 512 || a->head_dim % 8)
        return gcuda_errf(err, GRAFT_EUNSUPPORTED, "gcuda_attn_prefill: head_dim %lld (a multiple of 8, at most 512)",
                          (long long)a->head_dim);
    if (a->max_seq < 1 || a->max_seq > 0x7fffffff / 2)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_prefill: max_seq %lld", (long long)a->max_seq);
    if (((uintptr_t)a->k_cache | (uintptr_t)a->v_cache) % 16)
        return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_prefill: KV caches must be 16-byte aligned");
    if (!a->past_lens) return gcuda_errf(err, GRAFT_EINVAL, "gcuda_attn_prefill: past_lens is NULL");
    if (a->seq == 0) return GRAFT_OK;
    pf_params p = {};
    p.q = a->q;
    p.k = a->k_cache;
    p.v = a->v_cache;
    p.past = a->past_lens;
    p.out = a->out;
    int64_t H = a->q_heads, D = a->head_dim;
    if (!a->q_stride_b && !a->q_stride_s && !a->q_stride_h)
        p.qsb = a->seq * H * D, p.qss = H * D, p.qsh = D;
    else
        p.qsb = a->q_stride_b, p.qss = a->q_stride_s, p.qsh = a->q_stride_h;
    if (!a->o_stride_b && !a->o_stride_s && !a->o_stride_h)
        p.osb = a->seq * H * D, p.oss = H * D, p.osh = D;
    else
        p.osb = a->o_stride_b, p.oss = a->o_stride_s, p.osh = a->o_stride_h;
    p.S = (int)a->seq;
    p.Hq = (int)a->q_heads;
    p.Hkv = (int)a->kv_heads;
    p.G = (int)(a->q_heads / a->kv_heads);
    p.hd = (int)a->head_dim;
    p.max_seq = (int)a->max_seq;
    p.scale = a->scale;
    p.softcap = a->softcap;
    p.window_left = a->window_left;
    int dt = D <= 64 ? 64 : D <= 128 ? 128 : D <= 256 ? 256 : 512;
    graft_status st = GRAFT_OK;
    GCUDA_DISPATCH(a->dtype, "gcuda_attn_prefill", {
        switch (dt) {
        case 64: st = pf_go<T, 64>(&p, (int)a->batch, s, err); break;
        case 128: st = pf_go<T, 128>(&p, (int)a->batch, s, err); break;
        case 256: st = pf_go<T, 256>(&p, (int)a->batch, s, err); break;
        default: st = pf_go<T, 512>(&p, (int)a->batch, s, err); break;
        }
    });
    return st;
}
