/* CPU kernels, contrib family (com.microsoft ops as ONNX Runtime defines
 * them, plus SimplifiedLayerNormalization, which ORT registers in the ONNX
 * domain): the skip/simplified layer norms, RotaryEmbedding and the GELU
 * variants. fp32 compute; fp16/bf16 converted on the way in and out. */
#include <math.h>

#include "kernels/gemm.h"
#include "kernels/kcommon.h"
#include "kernels/kvec.h"

#define MS "com.microsoft"

/* ------------------------------------------------------------ SimplifiedLayerNormalization */

static graft_status simplified_ln_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *sc = rt_in(n, 1);
    if (!x || !sc) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    int ax = k_axis(rt_attr_int(n, "axis", -1), x->rank);
    if (ax < 0) return rt_err(n, err, GRAFT_EINVAL, "axis out of range");
    float eps = rt_attr_float(n, "epsilon", 1e-5f);
    int64_t R = (int64_t)rt_numel(ax, x->dims), D = (int64_t)rt_numel(x->rank - ax, x->dims + ax);
    if ((int64_t)sc->numel != D) return rt_err(n, err, GRAFT_EINVAL, "scale must hold %lld values", (long long)D);
    rt_tensor *y = rt_out(n, 0, x->dtype, x->rank, x->dims, err), *io = NULL;
    K_OUT_OR_FAIL(y);
    if (n->n_out > 1) {
        int64_t sd[RT_MAX_RANK];
        for (int i = 0; i < x->rank; i++) sd[i] = i < ax ? x->dims[i] : 1;
        K_OUT_OR_FAIL(io = rt_out(n, 1, GRAFT_DTYPE_FLOAT, x->rank, sd, err));
    }
    if (x->numel == 0) return GRAFT_OK;
    const float *X = k_input_f32(n, 0, 0, err), *S = k_input_f32(n, 1, 1, err);
    if (!X || !S) return err->code;
    float *Y = k_out_f32(n, y, 2, err);
    if (!Y) return err->code;
    for (int64_t r = 0; r < R; r++) {
        const float *xr = X + r * D;
        float *yr = Y + r * D;
#ifdef KV_X86
        if (k_have_avx2()) {
            float inv = kv_rms_row(xr, S, yr, D, eps);
            if (io) ((float *)io->data)[r] = inv;
            continue;
        }
#endif
        double s = 0;
        for (int64_t i = 0; i < D; i++) s += (double)xr[i] * xr[i];
        float inv = (float)(1.0 / sqrt(s / (double)D + (double)eps));
        for (int64_t i = 0; i < D; i++) yr[i] = xr[i] * inv * S[i];
        if (io) ((float *)io->data)[r] = inv;
    }
    k_out_f32_done(y, Y);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Skip(Simplified)LayerNormalization */

typedef struct skip_ln_job {
    const float *X, *SK, *G, *BE, *BI;
    float *Y, *Ssum, *mean, *inv;
    int64_t D, skrows, rows;
    float eps;
    int simplified;
} skip_ln_job;

/* One row (independent of the others, so rows spread over the pool give
 * the serial result bit for bit). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
/* The row's two sums (of v = x + skip (+ bias), stored into t, and of
 * (v - mean)^2) in double over eight lanes: each term is the same as in the
 * scalar loop, only the order of the double additions differs. */
__attribute__((target("avx2,fma"))) static double skip_sum_avx2(const float *x, const float *sk, const float *bi,
                                                                 float *t, int64_t D)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= D; i += 8) {
        __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(sk + i));
        if (bi) v = _mm256_add_ps(v, _mm256_loadu_ps(bi + i));
        _mm256_storeu_ps(t + i, v);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    double q[4];
    _mm256_storeu_pd(q, _mm256_add_pd(a0, a1));
    double s = (q[0] + q[1]) + (q[2] + q[3]);
    for (; i < D; i++) {
        float v = x[i] + sk[i];
        if (bi) v += bi[i];
        t[i] = v;
        s += v;
    }
    return s;
}

__attribute__((target("avx2,fma"))) static double skip_sq_avx2(const float *t, float mean, int64_t D)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), m = _mm256_set1_pd((double)mean);
    int64_t i = 0;
    for (; i + 8 <= D; i += 8) {
        __m256 v = _mm256_loadu_ps(t + i);
        __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), m);
        __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), m);
        a0 = _mm256_add_pd(a0, _mm256_mul_pd(d0, d0));
        a1 = _mm256_add_pd(a1, _mm256_mul_pd(d1, d1));
    }
    double q[4];
    _mm256_storeu_pd(q, _mm256_add_pd(a0, a1));
    double s = (q[0] + q[1]) + (q[2] + q[3]);
    for (; i < D; i++) {
        double d = t[i] - mean;
        s += d * d;
    }
    return s;
}
/* y = (t - mean) * inv * g (+ be), as the scalar loop */
__attribute__((target("avx2,fma"))) static void skip_out_avx2(const float *t, float mean, float inv, const float *g,
                                                              const float *be, float *y, int64_t D)
{
    __m256 vm = _mm256_set1_ps(mean), vi = _mm256_set1_ps(inv);
    int64_t i = 0;
    for (; i + 8 <= D; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(t + i), vm), vi), _mm256_loadu_ps(g + i));
        if (be) v = _mm256_add_ps(v, _mm256_loadu_ps(be + i));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < D; i++) {
        float v = (t[i] - mean) * inv * g[i];
        y[i] = be ? v + be[i] : v;
    }
}
#define SKIP_X86 1
#endif

static void skip_ln_row(const skip_ln_job *j, int64_t r)
{
    int64_t D = j->D;
#ifdef SKIP_X86
    if (k_have_avx2()) {
        const float *xr = j->X + r * D, *sr = j->SK + (r % j->skrows) * D;
        float *t = j->Ssum + r * D, *yr = j->Y + r * D;
        double s = skip_sum_avx2(xr, sr, j->BI, t, D);
        float mean = j->simplified ? 0.0f : (float)(s / (double)D);
        double q = skip_sq_avx2(t, mean, D);
        float inv = (float)(1.0 / sqrt(q / (double)D + (double)j->eps));
        skip_out_avx2(t, mean, inv, j->G, j->BE, yr, D);
        if (j->mean) j->mean[r] = mean;
        if (j->inv) j->inv[r] = inv;
        return;
    }
#endif
    const float *xr = j->X + r * D, *sr = j->SK + (r % j->skrows) * D;
    float *t = j->Ssum + r * D, *yr = j->Y + r * D;
    double s = 0, q = 0;
    for (int64_t i = 0; i < D; i++) {
        float v = xr[i] + sr[i];
        if (j->BI) v += j->BI[i];
        t[i] = v;
        s += v;
    }
    float mean = j->simplified ? 0.0f : (float)(s / (double)D);
    for (int64_t i = 0; i < D; i++) {
        double d = t[i] - mean;
        q += d * d;
    }
    float inv = (float)(1.0 / sqrt(q / (double)D + (double)j->eps));
    for (int64_t i = 0; i < D; i++) {
        float v = (t[i] - mean) * inv * j->G[i];
        yr[i] = j->BE ? v + j->BE[i] : v;
    }
    if (j->mean) j->mean[r] = mean;
    if (j->inv) j->inv[r] = inv;
}

static void skip_ln_task(void *ctx, int64_t t)
{
    const skip_ln_job *j = ctx;
    for (int64_t r = t * 8; r < t * 8 + 8 && r < j->rows; r++) skip_ln_row(j, r);
}

static graft_status skip_ln(rt_node *n, int simplified, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *sk = rt_in(n, 1), *g = rt_in(n, 2);
    rt_tensor *be = simplified ? NULL : rt_in(n, 3), *bi = rt_in(n, simplified ? 3 : 4);
    if (!x || !sk || !g) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (x->rank < 2) return rt_err(n, err, GRAFT_EINVAL, "input of rank %d", x->rank);
    int64_t D = x->dims[x->rank - 1], R = (int64_t)(x->numel / (uint64_t)(D ? D : 1));
    if ((int64_t)g->numel != D || (be && (int64_t)be->numel != D) || (bi && (int64_t)bi->numel != D))
        return rt_err(n, err, GRAFT_EINVAL, "gamma/beta/bias must hold hidden_size = %lld values", (long long)D);
    /* skip: same shape, or (1, S, H) / (S, H) broadcast over the batch */
    int64_t skrows = (int64_t)(sk->numel / (uint64_t)(D ? D : 1));
    if (sk->dims[sk->rank - 1] != D || skrows == 0 || R % skrows)
        return rt_err(n, err, GRAFT_EINVAL, "skip shape does not match input");
    float eps = rt_attr_float(n, "epsilon", 1e-12f);
    rt_tensor *y = rt_out(n, 0, x->dtype, x->rank, x->dims, err), *mo = NULL, *io = NULL, *so = NULL;
    K_OUT_OR_FAIL(y);
    int64_t sd[RT_MAX_RANK];
    for (int i = 0; i < x->rank; i++) sd[i] = i < x->rank - 1 ? x->dims[i] : 1;
    if (n->n_out > 1 && *graft_node_output(n->src, 1)) K_OUT_OR_FAIL(mo = rt_out(n, 1, GRAFT_DTYPE_FLOAT, x->rank, sd, err));
    if (n->n_out > 2 && *graft_node_output(n->src, 2)) K_OUT_OR_FAIL(io = rt_out(n, 2, GRAFT_DTYPE_FLOAT, x->rank, sd, err));
    if (n->n_out > 3 && *graft_node_output(n->src, 3)) K_OUT_OR_FAIL(so = rt_out(n, 3, x->dtype, x->rank, x->dims, err));
    if (x->numel == 0) return GRAFT_OK;
    const float *X = k_input_f32(n, 0, 0, err), *SK = k_input_f32(n, 1, 1, err), *G = k_input_f32(n, 2, 2, err);
    const float *BE = NULL, *BI = NULL;
    if (!X || !SK || !G) return err->code;
    if (be && !(BE = k_input_f32(n, 3, 3, err))) return err->code;
    if (bi && !(BI = k_input_f32(n, simplified ? 3 : 4, 4, err))) return err->code;
    float *Y = k_out_f32(n, y, 5, err);
    float *Ssum = so && so->dtype == GRAFT_DTYPE_FLOAT ? so->data
                                                        : k_scratch_get(n, 6, (size_t)x->numel * sizeof(float) + 4, err);
    if (!Y || !Ssum) return err->code;
    skip_ln_job j = {X, SK, G, BE, BI, Y, Ssum, mo ? mo->data : NULL, io ? io->data : NULL, D, skrows, R, eps, simplified};
    if (R >= 16 && R * D >= 4096) {
        k_parallel_for((R + 7) / 8, skip_ln_task, &j);
    } else {
        for (int64_t r = 0; r < R; r++) skip_ln_row(&j, r);
    }
    k_out_f32_done(y, Y);
    if (so && Ssum != so->data) k_from_f32(so->dtype, Ssum, so->data, (size_t)so->numel);
    return GRAFT_OK;
}

static graft_status skip_ln_run(rt_node *n, graft_error *err) { return skip_ln(n, 0, err); }
static graft_status skip_sln_run(rt_node *n, graft_error *err) { return skip_ln(n, 1, err); }

/* ------------------------------------------------------------ RotaryEmbedding (com.microsoft) */

static graft_status ms_rotary_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *pos = rt_in(n, 1), *cc = rt_in(n, 2), *sc = rt_in(n, 3);
    if (!x || !pos || !cc || !sc) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (rt_attr_int(n, "is_packed_batching", 0))
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "is_packed_batching is not supported");
    if (cc->rank != 2 || sc->rank != 2 || cc->dims[0] != sc->dims[0] || cc->dims[1] != sc->dims[1])
        return rt_err(n, err, GRAFT_EINVAL, "cos_cache and sin_cache must be 2-D, of one shape");
    if (x->rank != 3 && x->rank != 4) return rt_err(n, err, GRAFT_EINVAL, "input of rank %d", x->rank);
    int64_t nh = rt_attr_int(n, "num_heads", 0), rd = rt_attr_int(n, "rotary_embedding_dim", 0);
    int64_t B = x->dims[0], S, H, hs;
    if (x->rank == 4) {
        H = x->dims[1];
        S = x->dims[2];
        hs = x->dims[3];
    } else {
        S = x->dims[1];
        if (nh > 0) {
            hs = x->dims[2] / nh;
        } else {
            hs = rd > 0 ? rd : cc->dims[1] * 2;
        }
        if (hs <= 0 || x->dims[2] % hs) return rt_err(n, err, GRAFT_EINVAL, "hidden size not a multiple of the head size");
        H = x->dims[2] / hs;
    }
    if (rd == 0) rd = cc->dims[1] * 2;
    if (rd > hs || cc->dims[1] * 2 != rd)
        return rt_err(n, err, GRAFT_EINVAL, "rotary dimension %lld vs head size %lld and caches", (long long)rd,
                      (long long)hs);
    int64_t *pids = k_scratch_get(n, 3, (size_t)(B * S) * sizeof(int64_t) + 8, err);
    if (!pids) return err->code;
    if (pos->numel == 1) {
        int64_t p0;
        if (rt_read_ints(pos, &p0, 1) < 0) return rt_err(n, err, GRAFT_EINVAL, "position_ids dtype");
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < S; s++) pids[b * S + s] = p0 + s;
    } else if ((int64_t)pos->numel == B * S) {
        if (rt_read_ints(pos, pids, (size_t)(B * S)) < 0) return rt_err(n, err, GRAFT_EINVAL, "position_ids dtype");
    } else {
        return rt_err(n, err, GRAFT_EINVAL, "position_ids must be (1) or (batch, seq)");
    }
    rt_tensor *y = rt_out(n, 0, x->dtype, x->rank, x->dims, err);
    K_OUT_OR_FAIL(y);
    const float *X = k_input_f32(n, 0, 0, err), *C = k_input_f32(n, 2, 1, err), *Sn = k_input_f32(n, 3, 2, err);
    if (!X || !C || !Sn) return err->code;
    float *Y = k_out_f32(n, y, 5, err);
    if (!Y) return err->code;
    int il = (int)rt_attr_int(n, "interleaved", 0);
    int64_t half = rd / 2;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            int64_t p = pids[b * S + s];
            if (p < 0 || p >= cc->dims[0])
                return rt_err(n, err, GRAFT_EINVAL, "position %lld outside the caches (%lld rows)", (long long)p,
                              (long long)cc->dims[0]);
            const float *cs = C + p * half, *sn = Sn + p * half;
            for (int64_t h = 0; h < H; h++) {
                int64_t off = x->rank == 4 ? ((b * H + h) * S + s) * hs : ((b * S + s) * H + h) * hs;
                const float *xr = X + off;
                float *yr = Y + off;
                for (int64_t i = 0; i < half; i++) {
                    int64_t i0 = il ? 2 * i : i, i1 = il ? 2 * i + 1 : i + half;
                    float a = xr[i0], c = xr[i1];
                    yr[i0] = a * cs[i] - c * sn[i];
                    yr[i1] = a * sn[i] + c * cs[i];
                }
                for (int64_t i = rd; i < hs; i++) yr[i] = xr[i];
            }
        }
    k_out_f32_done(y, Y);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ GELU variants */

enum { G_EXACT, G_FAST, G_QUICK };

static graft_status gelu_common(rt_node *n, int kind, int bias_in, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *b = bias_in ? rt_in(n, 1) : NULL;
    if (!x) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (!k_is_float(x->dtype)) return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s", graft_dtype_name(x->dtype));
    int64_t D = x->rank ? x->dims[x->rank - 1] : 1;
    if (b && (b->numel == 0 || (int64_t)b->numel != D))
        return rt_err(n, err, GRAFT_EINVAL, "bias must hold the last dimension's %lld values", (long long)D);
    rt_tensor *y = rt_out(n, 0, x->dtype, x->rank, x->dims, err);
    K_OUT_OR_FAIL(y);
    if (x->numel == 0) return GRAFT_OK;
    const float *X = k_input_f32(n, 0, 0, err), *Bv = NULL;
    if (!X) return err->code;
    if (b && !(Bv = k_input_f32(n, 1, 1, err))) return err->code;
    float *Y = k_out_f32(n, y, 5, err);
    if (!Y) return err->code;
    float alpha = rt_attr_float(n, "alpha", 1.702f);
    for (uint64_t i = 0; i < x->numel; i++) {
        float v = X[i] + (Bv ? Bv[i % (uint64_t)D] : 0.0f), r;
        switch (kind) {
        case G_EXACT: r = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); break;
        case G_FAST: r = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))); break;
        default: r = v / (1.0f + expf(-alpha * v)); break;
        }
        Y[i] = r;
    }
    k_out_f32_done(y, Y);
    return GRAFT_OK;
}

static graft_status gelu_run(rt_node *n, graft_error *err) { return gelu_common(n, G_EXACT, 0, err); }
static graft_status bias_gelu_run(rt_node *n, graft_error *err) { return gelu_common(n, G_EXACT, 1, err); }
static graft_status fast_gelu_run(rt_node *n, graft_error *err) { return gelu_common(n, G_FAST, 1, err); }
static graft_status quick_gelu_run(rt_node *n, graft_error *err) { return gelu_common(n, G_QUICK, 0, err); }

const rt_kernel rt_kernels_contrib[] = {
    {"", "SimplifiedLayerNormalization", 1, 0, k_scratch_init, simplified_ln_run, k_scratch_fini},
    {MS, "SimplifiedLayerNormalization", 1, 0, k_scratch_init, simplified_ln_run, k_scratch_fini},
    {MS, "SkipSimplifiedLayerNormalization", 1, 0, k_scratch_init, skip_sln_run, k_scratch_fini},
    {MS, "SkipLayerNormalization", 1, 0, k_scratch_init, skip_ln_run, k_scratch_fini},
    {MS, "RotaryEmbedding", 1, 0, k_scratch_init, ms_rotary_run, k_scratch_fini},
    {MS, "Gelu", 1, 0, k_scratch_init, gelu_run, k_scratch_fini},
    {MS, "BiasGelu", 1, 0, k_scratch_init, bias_gelu_run, k_scratch_fini},
    {MS, "FastGelu", 1, 0, k_scratch_init, fast_gelu_run, k_scratch_fini},
    {MS, "QuickGelu", 1, 0, k_scratch_init, quick_gelu_run, k_scratch_fini},
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};
