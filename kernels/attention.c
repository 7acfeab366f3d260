/* CPU kernels, attention family: ONNX Attention (opset 23+), and
 * com.microsoft GroupQueryAttention and MultiHeadAttention. All three
 * reduce to one fp32 core (att_run_core): per (batch, query head) and query
 * row, scores against every key, an additive bias row (mask, causal,
 * window, padding) built by an op-specific callback, softmax, weighted sum
 * of values. KV caches are concatenated into the present outputs. */
#include <math.h>

#include "kernels/gemm.h"
#include "kernels/kcommon.h"
#include "kernels/kvec.h"
#ifdef KV_X86
#define ATT_X86 1
#endif

/* ------------------------------------------------------------ core */

typedef struct att_core att_core;
/* Fills bias[0, T) for query row i of (batch b, query head h). */
typedef void (*att_bias_fn)(const att_core *c, int64_t b, int64_t h, int64_t i, float *bias);
/* The visible keys of query row i as one interval [*lo, *hi) of the row's
 * T keys, when the bias row is exactly 0 there and masks every other key
 * (so that the softmax gives the others weight 0): returns 1; returns 0
 * when the row needs the general bias row. */
typedef int (*att_range_fn)(const att_core *c, int64_t b, int64_t h, int64_t i, int64_t T, int64_t *lo,
                            int64_t *hi);

struct att_core {
    int64_t B, Hq, Hkv, Sq, T, hd, vd;
    const int64_t *Tb; /* keys per batch (<= T) or NULL: T */
    const float *Q, *K, *V;
    int64_t qs[3], ks[3], vs[3], ys[3]; /* strides of batch, head, sequence (rows contiguous) */
    float *Y;
    float scale, softcap;
    att_bias_fn bias;
    att_range_fn range; /* or NULL: always the bias row */
    const int64_t *rlo, *rhi; /* or range's answers for every head, [B, Sq] (lo -1: not an interval) */
    const void *ctx;
    const float *sink; /* per query head, added to the softmax denominator; NULL: none */
    float *qk;         /* [B, Hq, Sq, T] or NULL */
    int qk_mode;       /* 0/1: scaled (softcapped) QK, 2: + bias, 3: probabilities */
    int zero_masked;   /* a row whose bias is all -inf outputs zeros */
    _Atomic int nomem; /* set by a task whose scratch could not be allocated */
};

static _Thread_local k_buf tl_rows;

static _Thread_local k_buf tl_blk;

#define ATT_QB 32 /* query rows per block of the GEMM form */

#ifdef ATT_X86
/* Lanes [0, r) of eight set, r in [1, 8). */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256i att_tail_mask(int64_t r)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* s[j] = e^(s[j] - m) (kv_exp8f, within 2 ulp of expf) for j in [0, n);
 * returns the sum of the stored values in double. */
__attribute__((target("avx2,fma"))) static double att_exp_row_avx2(float *s, int64_t n, float m)
{
    __m256 vm = _mm256_set1_ps(m);
    __m256d acc = _mm256_setzero_pd(), acc2 = _mm256_setzero_pd();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 e = kv_exp8f(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
        _mm256_storeu_ps(s + j, e);
        acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        acc2 = _mm256_add_pd(acc2, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    if (j < n) { /* the last 1-7 through a lane mask: masked lanes give 0 */
        __m256i mask = att_tail_mask(n - j);
        __m256 e = kv_exp8f(_mm256_sub_ps(_mm256_maskload_ps(s + j, mask), vm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
        _mm256_maskstore_ps(s + j, mask, e);
        acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        acc2 = _mm256_add_pd(acc2, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double q[4];
    _mm256_storeu_pd(q, _mm256_add_pd(acc, acc2));
    return (q[0] + q[1]) + (q[2] + q[3]);
}
#endif

#ifdef ATT_X86
/* s[j] *= scale for j in [0, n); returns the max of the results (-inf when n is 0) */
__attribute__((target("avx2,fma"))) static float att_scale_max_avx2(float *s, int64_t n, float scale)
{
    __m256 vs = _mm256_set1_ps(scale), mx = _mm256_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + j), vs);
        _mm256_storeu_ps(s + j, v);
        mx = _mm256_max_ps(v, mx); /* v > mx ? v : mx, NaN ignored as in the scalar form */
    }
    if (j < n) {
        __m256i mask = att_tail_mask(n - j);
        __m256 v = _mm256_mul_ps(_mm256_maskload_ps(s + j, mask), vs);
        _mm256_maskstore_ps(s + j, mask, v);
        mx = _mm256_max_ps(_mm256_blendv_ps(mx, v, _mm256_castsi256_ps(mask)), mx);
    }
    float t[8], m = -INFINITY;
    _mm256_storeu_ps(t, mx);
    for (int k = 0; k < 8; k++) m = t[k] > m ? t[k] : m;
    return m;
}

__attribute__((target("avx2,fma"))) static void att_mul_avx2(float *s, int64_t n, float a)
{
    __m256 va = _mm256_set1_ps(a);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), va));
    if (j < n) {
        __m256i mask = att_tail_mask(n - j);
        _mm256_maskstore_ps(s + j, mask, _mm256_mul_ps(_mm256_maskload_ps(s + j, mask), va));
    }
}
#endif

#ifdef ATT_X86
/* Y[r][0, vd) = sum_j P[r][j] V[j][0, vd) for r < rows, j < n, straight
 * from the row-major P (row stride ldp) and V (row stride ldv): the
 * arithmetic of k_sgemm (the GEMM micro-kernel's FMA chain over j in
 * slices of 256, each slice added to the sum of the earlier ones), without
 * packing either operand. vd a multiple of 8. */
#define ATT_PV_KC 256
__attribute__((target("avx2,fma"))) static void att_pv_avx2(const float *P, int64_t ldp, int64_t rows, int64_t n,
                                                            const float *V, int64_t ldv, int64_t vd, float *Y,
                                                            int64_t ldy)
{
    for (int64_t r0 = 0; r0 < rows; r0 += 4) {
        int mr = rows - r0 < 4 ? (int)(rows - r0) : 4;
        const float *p0 = P + r0 * ldp, *p1 = p0 + (mr > 1 ? ldp : 0), *p2 = p0 + (mr > 2 ? 2 * ldp : 0),
                    *p3 = p0 + (mr > 3 ? 3 * ldp : 0);
        for (int64_t c0 = 0; c0 < vd; c0 += 16) {
            int two = vd - c0 >= 16;
            for (int64_t k0 = 0; k0 < n; k0 += ATT_PV_KC) {
                int64_t k1 = n - k0 < ATT_PV_KC ? n : k0 + ATT_PV_KC;
                __m256 a00 = _mm256_setzero_ps(), a01 = _mm256_setzero_ps(), a10 = _mm256_setzero_ps(),
                       a11 = _mm256_setzero_ps(), a20 = _mm256_setzero_ps(), a21 = _mm256_setzero_ps(),
                       a30 = _mm256_setzero_ps(), a31 = _mm256_setzero_ps();
                const float *v = V + k0 * ldv + c0;
                if (two) {
                    for (int64_t j = k0; j < k1; j++, v += ldv) {
                        __m256 b0 = _mm256_loadu_ps(v), b1 = _mm256_loadu_ps(v + 8), a;
                        a = _mm256_broadcast_ss(p0 + j);
                        a00 = _mm256_fmadd_ps(a, b0, a00);
                        a01 = _mm256_fmadd_ps(a, b1, a01);
                        a = _mm256_broadcast_ss(p1 + j);
                        a10 = _mm256_fmadd_ps(a, b0, a10);
                        a11 = _mm256_fmadd_ps(a, b1, a11);
                        a = _mm256_broadcast_ss(p2 + j);
                        a20 = _mm256_fmadd_ps(a, b0, a20);
                        a21 = _mm256_fmadd_ps(a, b1, a21);
                        a = _mm256_broadcast_ss(p3 + j);
                        a30 = _mm256_fmadd_ps(a, b0, a30);
                        a31 = _mm256_fmadd_ps(a, b1, a31);
                    }
                } else {
                    for (int64_t j = k0; j < k1; j++, v += ldv) {
                        __m256 b0 = _mm256_loadu_ps(v);
                        a00 = _mm256_fmadd_ps(_mm256_broadcast_ss(p0 + j), b0, a00);
                        a10 = _mm256_fmadd_ps(_mm256_broadcast_ss(p1 + j), b0, a10);
                        a20 = _mm256_fmadd_ps(_mm256_broadcast_ss(p2 + j), b0, a20);
                        a30 = _mm256_fmadd_ps(_mm256_broadcast_ss(p3 + j), b0, a30);
                    }
                }
                __m256 acc[4][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}};
                for (int r = 0; r < mr; r++) {
                    float *y = Y + (r0 + r) * ldy + c0;
                    for (int h = 0; h < 1 + two; h++) {
                        __m256 t = acc[r][h];
                        if (k0) t = _mm256_add_ps(t, _mm256_loadu_ps(y + 8 * h));
                        _mm256_storeu_ps(y + 8 * h, t);
                    }
                }
            }
        }
    }
}
#endif

/* One query row whose visible keys are s[0, n) (scores already in s):
 * scale, softcap, softmax against the optional sink, in place. Same
 * arithmetic per element as the bias-row form (the bias is 0 here). */
static void att_softmax_span(const att_core *c, int64_t h, float *s, int64_t n)
{
    float mx = -INFINITY;
#ifdef ATT_X86
    int simd = k_have_avx2();
#else
    int simd = 0;
#endif
    if (c->softcap > 0 || !simd) {
        for (int64_t j = 0; j < n; j++) s[j] *= c->scale;
        if (c->softcap > 0)
            for (int64_t j = 0; j < n; j++) s[j] = c->softcap * tanhf(s[j] / c->softcap);
        for (int64_t j = 0; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    } else {
#ifdef ATT_X86
        mx = att_scale_max_avx2(s, n, c->scale);
#endif
    }
    float sk = c->sink ? c->sink[h] : -INFINITY;
    float m = mx > sk ? mx : sk;
    if (isinf(m) && m < 0) m = 0;
    double sum = 0;
#ifdef ATT_X86
    if (simd) {
        sum = att_exp_row_avx2(s, n, m);
    } else
#endif
    {
        for (int64_t j = 0; j < n; j++) {
            float e = expf(s[j] - m);
            s[j] = e;
            sum += e;
        }
    }
    if (c->sink) sum += expf(sk - m);
    float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
#ifdef ATT_X86
    if (simd) {
        att_mul_avx2(s, n, inv);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++) s[j] *= inv;
}

/* The blocked form when every row of the block is an interval of keys
 * (c->range): no bias rows, scores only over each row's interval, the
 * rest of the row zero. Returns 0 (nothing written) when some row is not
 * an interval. */
static int att_block_ranged(att_core *c, int64_t b, int64_t h, int64_t T, int64_t i0, int64_t rows, float *S,
                            int64_t ldS, const float *Kb, const float *Vb)
{
    int64_t lo[ATT_QB], hi[ATT_QB], jend = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (c->rlo) {
            if ((lo[r] = c->rlo[b * c->Sq + i0 + r]) < 0) return 0;
            hi[r] = c->rhi[b * c->Sq + i0 + r];
        } else if (!c->range(c, b, h, i0 + r, T, &lo[r], &hi[r])) {
            return 0;
        }
        if (hi[r] > jend) jend = hi[r];
    }
    const float *q = c->Q + b * c->qs[0] + h * c->qs[1] + i0 * c->qs[2];
    float *y = c->Y + b * c->ys[0] + h * c->ys[1] + i0 * c->ys[2];
    for (int64_t r = 0; r < rows; r++) {
        float *s = S + r * ldS;
        int64_t a = lo[r], e = hi[r];
        for (int64_t j = 0; j < a; j++) s[j] = 0.0f;
        if (e > a) {
            /* k_dots: k_dot's sums bit for bit (the fp32 fixtures' logit
             * tolerance is tight) */
            k_dots(q + r * c->qs[2], Kb + a * c->ks[2], c->ks[2], e - a, c->hd, s + a);
            att_softmax_span(c, h, s + a, e - a);
        }
        for (int64_t j = e > a ? e : a; j < jend; j++) s[j] = 0.0f;
    }
    if (jend > 0) {
#ifdef ATT_X86
        if (c->vd % 8 == 0 && k_have_avx2()) {
            att_pv_avx2(S, ldS, rows, jend, Vb, c->vs[2], c->vd, y, c->ys[2]);
            return 1;
        }
#endif
        if (k_sgemm(0, 0, rows, c->vd, jend, 1.0f, S, ldS, Vb, c->vs[2], 0.0f, y, c->ys[2])) c->nomem = 1;
    } else {
        for (int64_t r = 0; r < rows; r++)
            for (int64_t x = 0; x < c->vd; x++) y[r * c->ys[2] + x] = 0.0f;
    }
    return 1;
}

/* The GEMM form of att_task for many query rows and no QK output: per
 * block of ATT_QB rows, S = scale * Q K^T over the keys up to the last one
 * any row of the block sees (causal blocks skip the rest), bias, softmax
 * into P in place, Y = P V. Same arithmetic per element as the row form
 * up to the order of the sums inside the two products. */
static void att_task_blocked(att_core *c, int64_t b, int64_t h)
{
    int64_t kh = h / (c->Hq / c->Hkv);
    int64_t T = c->Tb ? c->Tb[b] : c->T, ldS = c->T + 1;
    float *buf = k_buf_get(&tl_blk, (size_t)(2 * ATT_QB * ldS) * sizeof(float));
    if (!buf) {
        c->nomem = 1;
        return;
    }
    float *S = buf, *bias = buf + ATT_QB * ldS;
    const float *Kb = c->K + b * c->ks[0] + kh * c->ks[1], *Vb = c->V + b * c->vs[0] + kh * c->vs[1];
    float sk = c->sink ? c->sink[h] : -INFINITY;
    for (int64_t i0 = 0; i0 < c->Sq; i0 += ATT_QB) {
        int64_t rows = c->Sq - i0 < ATT_QB ? c->Sq - i0 : ATT_QB, jend = 0;
        if (c->range && att_block_ranged(c, b, h, T, i0, rows, S, ldS, Kb, Vb)) continue;
        for (int64_t r = 0; r < rows; r++) {
            float *bi = bias + r * ldS;
            for (int64_t j = 0; j < T; j++) bi[j] = 0.0f;
            if (c->bias) c->bias(c, b, h, i0 + r, bi);
            for (int64_t j = T; j > jend; j--)
                if (!(isinf(bi[j - 1]) && bi[j - 1] < 0)) {
                    jend = j;
                    break;
                }
        }
        const float *q = c->Q + b * c->qs[0] + h * c->qs[1] + i0 * c->qs[2];
        float *y = c->Y + b * c->ys[0] + h * c->ys[1] + i0 * c->ys[2];
        /* QK^T with k_dots (the row form's k_dot sums, bit for bit: the
         * fp32 fixtures' logit tolerance is tight), only up to each row's
         * last visible key */
        for (int64_t r = 0; r < rows; r++) {
            float *s = S + r * ldS, *bi = bias + r * ldS;
            int64_t je = jend;
            while (je > 0 && isinf(bi[je - 1]) && bi[je - 1] < 0) je--;
            k_dots(q + r * c->qs[2], Kb, c->ks[2], je, c->hd, s);
            for (int64_t j = 0; j < je; j++) s[j] *= c->scale;
        }
        for (int64_t r = 0; r < rows; r++) {
            float *s = S + r * ldS, *bi = bias + r * ldS;
            int all_masked = 1;
            float mx = -INFINITY;
            for (int64_t j = 0; j < jend; j++) {
                if (isinf(bi[j]) && bi[j] < 0) {
                    s[j] = -INFINITY;
                    continue;
                }
                all_masked = 0;
                float d = s[j];
                if (c->softcap > 0) d = c->softcap * tanhf(d / c->softcap);
                d += bi[j];
                s[j] = d;
                if (d > mx) mx = d;
            }
            if (all_masked && (c->zero_masked || jend == 0)) {
                for (int64_t j = 0; j < jend; j++) s[j] = 0.0f;
                continue;
            }
            float m = mx > sk ? mx : sk;
            if (isinf(m) && m < 0) m = 0;
            double sum = 0;
            for (int64_t j = 0; j < jend; j++) {
                float e = expf(s[j] - m);
                s[j] = e;
                sum += e;
            }
            if (c->sink) sum += expf(sk - m);
            float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
            for (int64_t j = 0; j < jend; j++) s[j] *= inv;
        }
        if (jend > 0) {
            if (k_sgemm(0, 0, rows, c->vd, jend, 1.0f, S, ldS, Vb, c->vs[2], 0.0f, y, c->ys[2])) c->nomem = 1;
        } else {
            for (int64_t r = 0; r < rows; r++)
                for (int64_t x = 0; x < c->vd; x++) y[r * c->ys[2] + x] = 0.0f;
        }
    }
}

static void att_task(void *ctx, int64_t t)
{
    att_core *c = ctx;
    int64_t b = t / c->Hq, h = t % c->Hq, kh = h / (c->Hq / c->Hkv);
    if (!c->qk && c->Sq >= 2) {
        att_task_blocked(c, b, h);
        return;
    }
    int64_t T = c->Tb ? c->Tb[b] : c->T;
    float *rows = k_buf_get(&tl_rows, (size_t)(2 * c->T + 2) * sizeof(float));
    if (!rows) {
        c->nomem = 1;
        return;
    }
    float *bias = rows, *s = rows + c->T + 1;
    const float *Kb = c->K + b * c->ks[0] + kh * c->ks[1], *Vb = c->V + b * c->vs[0] + kh * c->vs[1];
    for (int64_t i = 0; i < c->Sq; i++) {
        const float *q = c->Q + b * c->qs[0] + h * c->qs[1] + i * c->qs[2];
        float *y = c->Y + b * c->ys[0] + h * c->ys[1] + i * c->ys[2];
        float *qk = c->qk ? c->qk + ((b * c->Hq + h) * c->Sq + i) * c->T : NULL;
        for (int64_t j = 0; j < T; j++) bias[j] = 0.0f;
        if (c->bias) c->bias(c, b, h, i, bias);
        int all_masked = 1;
        float mx = -INFINITY;
        for (int64_t j = 0; j < T; j++) {
            int masked = isinf(bias[j]) && bias[j] < 0;
            if (!masked) all_masked = 0;
            if (masked && !qk) {
                s[j] = -INFINITY;
                continue;
            }
            float d = k_dot(q, Kb + j * c->ks[2], c->hd) * c->scale;
            if (c->softcap > 0) d = c->softcap * tanhf(d / c->softcap);
            if (qk && c->qk_mode <= 1) qk[j] = d;
            d += bias[j];
            if (qk && c->qk_mode == 2) qk[j] = d;
            s[j] = d;
            if (d > mx) mx = d;
        }
        if (qk)
            for (int64_t j = T; j < c->T; j++) qk[j] = c->qk_mode == 3 ? 0.0f : -INFINITY;
        for (int64_t x = 0; x < c->vd; x++) y[x] = 0.0f;
        if (T == 0 || (all_masked && c->zero_masked)) {
            if (qk && c->qk_mode == 3)
                for (int64_t j = 0; j < T; j++) qk[j] = 0.0f;
            continue;
        }
        float sk = c->sink ? c->sink[h] : -INFINITY;
        float m = mx > sk ? mx : sk;
        if (isinf(m) && m < 0) m = 0; /* every score -inf: all weights 0 below */
        double sum = 0;
        for (int64_t j = 0; j < T; j++) {
            float e = expf(s[j] - m);
            s[j] = e;
            sum += e;
        }
        if (c->sink) sum += expf(sk - m);
        float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
        for (int64_t j = 0; j < T; j++) {
            float p = s[j] * inv;
            if (qk && c->qk_mode == 3) qk[j] = p;
            if (p != 0.0f) k_axpy(c->vd, p, Vb + j * c->vs[2], y);
        }
    }
}

/* Runs the core; GRAFT_ENOMEM (with err set for node n) when a task's
 * scratch could not be allocated. */
static graft_status att_run_core(att_core *c, rt_node *n, graft_error *err)
{
    double work = (double)c->B * c->Hq * c->Sq * c->T * (c->hd + c->vd);
    c->nomem = 0;
    if (work < 32768) {
        for (int64_t t = 0; t < c->B * c->Hq; t++) att_task(c, t);
    } else {
        k_parallel_for(c->B * c->Hq, att_task, c);
    }
    if (c->nomem) return rt_err(n, err, GRAFT_ENOMEM, "out of memory for attention scratch");
    return GRAFT_OK;
}

/* ------------------------------------------------------------ helpers */

/* fp32 view of input i (converted into scratch buffer `buf` if needed). */
static const float *in_f32(rt_node *n, int i, int buf, graft_error *err)
{
    return k_input_f32(n, i, buf, err);
}

/* Copies a [B, S, H*d] (3-D) or [B, H, S, d] (4-D) tensor's rows into the
 * cache layout dst [B, H, L, d] at sequence offset `at`. */
static void to_cache(const float *src, int rank3, int64_t B, int64_t H, int64_t S, int64_t d, float *dst, int64_t L,
                     int64_t at)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++) {
                const float *r = rank3 ? src + ((b * S + s) * H + h) * d : src + ((b * H + h) * S + s) * d;
                memcpy(dst + ((b * H + h) * L + at + s) * d, r, (size_t)d * sizeof(float));
            }
}

/* ------------------------------------------------------------ ONNX Attention */

typedef struct onnx_att_ctx {
    int64_t offset;        /* causal/window offset (past length) when no nonpad */
    const int64_t *nonpad; /* per batch or NULL */
    int causal;
    int64_t left, right;
    /* mask */
    const void *mask;
    int mask_bool;
    int64_t ms[4], mlast; /* strides over (B, Hq, Sq, j), length of the last dim */
} onnx_att_ctx;

static void onnx_att_bias(const att_core *c, int64_t b, int64_t h, int64_t i, float *bias)
{
    const onnx_att_ctx *x = c->ctx;
    int64_t off = x->nonpad ? x->nonpad[b] - c->Sq : x->offset;
    int64_t p = off + i;
    if (x->mask) {
        int64_t base = b * x->ms[0] + h * x->ms[1] + i * x->ms[2];
        for (int64_t j = 0; j < c->T; j++) {
            if (j >= x->mlast) {
                bias[j] = -INFINITY;
            } else if (x->mask_bool) {
                bias[j] = ((const uint8_t *)x->mask)[base + j * x->ms[3]] ? 0.0f : -INFINITY;
            } else {
                bias[j] = ((const float *)x->mask)[base + j * x->ms[3]];
            }
        }
    }
    for (int64_t j = 0; j < c->T; j++) {
        if (x->causal && j > p) bias[j] = -INFINITY;
        if (x->left >= 0 && p - j > x->left) bias[j] = -INFINITY;
        if (x->right >= 0 && j - p > x->right) bias[j] = -INFINITY;
        if (x->nonpad && j >= x->nonpad[b]) bias[j] = -INFINITY;
    }
}

/* The row as one interval (see att_range_fn): causal, window and nonpad
 * limits by index; a mask row must be visible (true, or 0.0) on one run
 * of keys and masked (false, -inf, or a float mask value <= -1e30, whose
 * softmax weight is exactly 0 next to a visible key) elsewhere. */
static int onnx_att_range(const att_core *c, int64_t b, int64_t h, int64_t i, int64_t T, int64_t *plo, int64_t *phi)
{
    const onnx_att_ctx *x = c->ctx;
    int64_t p = (x->nonpad ? x->nonpad[b] - c->Sq : x->offset) + i, lo = 0, hi = T;
    if (x->causal && hi > p + 1) hi = p + 1;
    if (x->left >= 0 && lo < p - x->left) lo = p - x->left;
    if (x->right >= 0 && hi > p + x->right + 1) hi = p + x->right + 1;
    if (x->nonpad && hi > x->nonpad[b]) hi = x->nonpad[b];
    if (x->mask) {
        if (hi > x->mlast) hi = x->mlast;
        int64_t base = b * x->ms[0] + h * x->ms[1] + i * x->ms[2], st = x->ms[3];
        if (x->mask_bool && st == 1 && hi > lo) {
            /* contiguous bytes: the first run of true keys, then nothing
             * true after it (word at a time) */
            const uint8_t *m = (const uint8_t *)x->mask + base;
            while (lo < hi && !m[lo]) lo++;
            const uint8_t *z = lo < hi ? memchr(m + lo, 0, (size_t)(hi - lo)) : NULL;
            if (z) {
                int64_t e = z - m, j = e;
                for (; j + 8 <= hi; j += 8) {
                    uint64_t w;
                    memcpy(&w, m + j, 8);
                    if (w) return 0;
                }
                for (; j < hi; j++)
                    if (m[j]) return 0;
                hi = e;
            }
        } else if (x->mask_bool) {
            const uint8_t *m = (const uint8_t *)x->mask + base;
            while (lo < hi && !m[lo * st]) lo++;
            while (hi > lo && !m[(hi - 1) * st]) hi--;
            for (int64_t j = lo; j < hi; j++)
                if (!m[j * st]) return 0;
        } else {
            const float *m = (const float *)x->mask + base;
            while (lo < hi && m[lo * st] <= -1e30f) lo++;
            while (hi > lo && m[(hi - 1) * st] <= -1e30f) hi--;
            if (hi <= lo) return 0; /* a row of finite mask values is not all-zero weights */
            for (int64_t j = lo; j < hi; j++)
                if (m[j * st] != 0.0f) return 0;
        }
    }
    if (lo < 0) lo = 0;
    if (hi < lo) hi = lo;
    *plo = lo, *phi = hi;
    return 1;
}

static graft_status attention_run(rt_node *n, graft_error *err)
{
    rt_tensor *q = rt_in(n, 0), *k = rt_in(n, 1), *v = rt_in(n, 2), *mask = rt_in(n, 3);
    rt_tensor *pk = rt_in(n, 4), *pv = rt_in(n, 5), *np = n->opset >= 24 ? rt_in(n, 6) : NULL;
    if (!q || !k || !v) return rt_err(n, err, GRAFT_EINVAL, "missing Q, K or V");
    if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
        return rt_err(n, err, GRAFT_EINVAL, "Q, K, V must all be 3-D or all 4-D");
    if (!pk != !pv) return rt_err(n, err, GRAFT_EINVAL, "past_key and past_value go together");
    if (!k_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(q->dtype));
    int r3 = q->rank == 3;
    int64_t B = q->dims[0], Hq, Hkv, Sq, Skv, hd, vd;
    if (r3) {
        Hq = rt_attr_int(n, "q_num_heads", 0);
        Hkv = rt_attr_int(n, "kv_num_heads", 0);
        if (Hq <= 0 || Hkv <= 0 || q->dims[2] % Hq || k->dims[2] % Hkv || v->dims[2] % Hkv)
            return rt_err(n, err, GRAFT_EINVAL, "3-D inputs need q_num_heads and kv_num_heads dividing the hidden sizes");
        Sq = q->dims[1];
        Skv = k->dims[1];
        hd = q->dims[2] / Hq;
        vd = v->dims[2] / Hkv;
        if (k->dims[2] / Hkv != hd) return rt_err(n, err, GRAFT_EINVAL, "Q and K head sizes differ");
    } else {
        Hq = q->dims[1];
        Hkv = k->dims[1];
        Sq = q->dims[2];
        Skv = k->dims[2];
        hd = q->dims[3];
        vd = v->dims[3];
        if (k->dims[3] != hd || v->dims[1] != Hkv) return rt_err(n, err, GRAFT_EINVAL, "Q/K/V shapes disagree");
    }
    if (k->dims[0] != B || v->dims[0] != B || (r3 ? v->dims[1] : v->dims[2]) != Skv)
        return rt_err(n, err, GRAFT_EINVAL, "K and V shapes disagree");
    if (Hkv <= 0 || Hq % Hkv) return rt_err(n, err, GRAFT_EINVAL, "q heads %lld not a multiple of kv heads %lld",
                                            (long long)Hq, (long long)Hkv);
    int64_t P = 0;
    if (pk) {
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != B || pk->dims[1] != Hkv || pk->dims[3] != hd ||
            pv->dims[0] != B || pv->dims[1] != Hkv || pv->dims[3] != vd || pv->dims[2] != pk->dims[2])
            return rt_err(n, err, GRAFT_EINVAL, "past_key/past_value shapes disagree with K/V");
        P = pk->dims[2];
    }
    int64_t T = P + Skv;
    int want_present = n->n_out > 1 && *graft_node_output(n->src, 1);
    /* outputs */
    int64_t yd[4];
    if (r3) {
        yd[0] = B, yd[1] = Sq, yd[2] = Hq * vd;
    } else {
        yd[0] = B, yd[1] = Hq, yd[2] = Sq, yd[3] = vd;
    }
    rt_tensor *yo = rt_out(n, 0, q->dtype, q->rank, yd, err);
    K_OUT_OR_FAIL(yo);
    int64_t kd[4] = {B, Hkv, T, hd}, vdims[4] = {B, Hkv, T, vd};
    rt_tensor *pko = NULL, *pvo = NULL, *qko = NULL;
    if (n->n_out > 1) K_OUT_OR_FAIL(pko = rt_out(n, 1, k->dtype, 4, kd, err));
    if (n->n_out > 2) K_OUT_OR_FAIL(pvo = rt_out(n, 2, v->dtype, 4, vdims, err));
    if (n->n_out > 3 && *graft_node_output(n->src, 3)) {
        int64_t qd[4] = {B, Hq, Sq, T};
        K_OUT_OR_FAIL(qko = rt_out(n, 3, q->dtype, 4, qd, err));
    }
    const float *Q = in_f32(n, 0, 0, err), *K = in_f32(n, 1, 1, err), *V = in_f32(n, 2, 2, err);
    if (!Q || !K || !V) return err->code;
    att_core c = {0};
    c.B = B, c.Hq = Hq, c.Hkv = Hkv, c.Sq = Sq, c.T = T, c.hd = hd, c.vd = vd;
    c.Q = Q;
    if (r3) {
        c.qs[0] = Sq * Hq * hd, c.qs[1] = hd, c.qs[2] = Hq * hd;
    } else {
        c.qs[0] = Hq * Sq * hd, c.qs[1] = Sq * hd, c.qs[2] = hd;
    }
    if (pk || want_present) {
        /* full K/V in cache layout: the present outputs themselves when fp32 */
        float *Kc = q->dtype == GRAFT_DTYPE_FLOAT && pko ? pko->data
                                                         : k_scratch_get(n, 3, (size_t)(B * Hkv * T * hd) * 4 + 4, err);
        float *Vc = q->dtype == GRAFT_DTYPE_FLOAT && pvo ? pvo->data
                                                         : k_scratch_get(n, 4, (size_t)(B * Hkv * T * vd) * 4 + 4, err);
        if (!Kc || !Vc) return err->code;
        if (pk) {
            const float *PK = in_f32(n, 4, 5, err), *PV = in_f32(n, 5, 6, err);
            if (!PK || !PV) return err->code;
            to_cache(PK, 0, B, Hkv, P, hd, Kc, T, 0);
            to_cache(PV, 0, B, Hkv, P, vd, Vc, T, 0);
        }
        to_cache(K, r3, B, Hkv, Skv, hd, Kc, T, P);
        to_cache(V, r3, B, Hkv, Skv, vd, Vc, T, P);
        c.K = Kc, c.V = Vc;
        c.ks[0] = Hkv * T * hd, c.ks[1] = T * hd, c.ks[2] = hd;
        c.vs[0] = Hkv * T * vd, c.vs[1] = T * vd, c.vs[2] = vd;
        if (pko && Kc != pko->data) k_from_f32(pko->dtype, Kc, pko->data, (size_t)pko->numel);
        if (pvo && Vc != pvo->data) k_from_f32(pvo->dtype, Vc, pvo->data, (size_t)pvo->numel);
    } else {
        c.K = K, c.V = V;
        if (r3) {
            c.ks[0] = Skv * Hkv * hd, c.ks[1] = hd, c.ks[2] = Hkv * hd;
            c.vs[0] = Skv * Hkv * vd, c.vs[1] = vd, c.vs[2] = Hkv * vd;
        } else {
            c.ks[0] = Hkv * Skv * hd, c.ks[1] = Skv * hd, c.ks[2] = hd;
            c.vs[0] = Hkv * Skv * vd, c.vs[1] = Skv * vd, c.vs[2] = vd;
        }
    }
    float *Y = yo->dtype == GRAFT_DTYPE_FLOAT ? yo->data : k_scratch_get(n, 7, (size_t)yo->numel * 4 + 4, err);
    if (!Y) return err->code;
    c.Y = Y;
    if (r3) {
        c.ys[0] = Sq * Hq * vd, c.ys[1] = vd, c.ys[2] = Hq * vd;
    } else {
        c.ys[0] = Hq * Sq * vd, c.ys[1] = Sq * vd, c.ys[2] = vd;
    }
    float sc = rt_attr_float(n, "scale", 0.0f);
    int has_scale = 0;
    {
        float tmp;
        has_scale = graft_node_attr_float(n->src, "scale", &tmp);
    }
    c.scale = has_scale ? sc : 1.0f / sqrtf((float)hd);
    c.softcap = rt_attr_float(n, "softcap", 0.0f);
    c.zero_masked = 1;
    onnx_att_ctx x = {0};
    x.offset = P;
    x.causal = (int)rt_attr_int(n, "is_causal", 0);
    x.left = n->opset >= 25 ? rt_attr_int(n, "left_window_size", -1) : -1;
    x.right = n->opset >= 25 ? rt_attr_int(n, "right_window_size", -1) : -1;
    int64_t *nonpad = NULL;
    if (np) {
        if (np->numel != (uint64_t)B) return rt_err(n, err, GRAFT_EINVAL, "nonpad_kv_seqlen must hold batch values");
        nonpad = k_scratch_get(n, 9, (size_t)B * sizeof(int64_t) + 8, err);
        if (!nonpad) return err->code;
        if (rt_read_ints(np, nonpad, (size_t)B) < 0) return rt_err(n, err, GRAFT_EINVAL, "nonpad_kv_seqlen must be int64");
        x.nonpad = nonpad;
    }
    if (mask && mask->numel) {
        if (mask->rank < 1 || mask->rank > 4) return rt_err(n, err, GRAFT_EINVAL, "attn_mask of rank %d", mask->rank);
        int64_t full[4] = {B, Hq, Sq, mask->dims[mask->rank - 1]};
        int ro;
        int64_t bd[RT_MAX_RANK];
        if (!k_broadcast(4, full, mask->rank, mask->dims, &ro, bd) || bd[0] != B || bd[1] != Hq || bd[2] != Sq)
            return rt_err(n, err, GRAFT_EINVAL, "attn_mask does not broadcast to (batch, heads, q, kv)");
        k_bstrides(mask->rank, mask->dims, 4, full, x.ms);
        x.mlast = mask->dims[mask->rank - 1];
        if (mask->dtype == GRAFT_DTYPE_BOOL) {
            x.mask_bool = 1;
            x.mask = mask->data;
        } else {
            if (!(x.mask = in_f32(n, 3, 10, err))) return err->code;
        }
    }
    c.bias = onnx_att_bias;
    c.range = onnx_att_range;
    c.ctx = &x;
    if (!qko && Sq >= 2 && (!x.mask || x.ms[1] == 0)) {
        /* the rows' intervals do not depend on the head: found once here
         * (a mask row is scanned once, not once per head) */
        int64_t *r = k_scratch_get(n, 11, (size_t)(2 * B * Sq) * sizeof(int64_t), err);
        if (!r) return err->code;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < Sq; i++)
                if (!onnx_att_range(&c, b, 0, i, T, &r[b * Sq + i], &r[B * Sq + b * Sq + i])) r[b * Sq + i] = -1;
        c.rlo = r, c.rhi = r + B * Sq;
    }
    float *QK = NULL;
    if (qko) {
        QK = qko->dtype == GRAFT_DTYPE_FLOAT ? qko->data : k_scratch_get(n, 8, (size_t)qko->numel * 4 + 4, err);
        if (!QK) return err->code;
        c.qk = QK;
        c.qk_mode = (int)rt_attr_int(n, "qk_matmul_output_mode", 0);
    }
    if (att_run_core(&c, n, err) != GRAFT_OK) return err->code;
    if (Y != yo->data) k_from_f32(yo->dtype, Y, yo->data, (size_t)yo->numel);
    if (qko && QK != qko->data) k_from_f32(qko->dtype, QK, qko->data, (size_t)qko->numel);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ rotary helper */

#ifdef ATT_X86
/* The non-interleaved rotation of r[0, half) with r[half, 2 half), eight
 * pairs at a time; returns how many pairs it did (a multiple of 8). */
__attribute__((target("avx2"))) static int64_t rope_half_avx2(float *r, int64_t half, const float *cs, const float *sn)
{
    int64_t i = 0;
    for (; i + 8 <= half; i += 8) {
        __m256 a = _mm256_loadu_ps(r + i), c = _mm256_loadu_ps(r + half + i);
        __m256 vc = _mm256_loadu_ps(cs + i), vs = _mm256_loadu_ps(sn + i);
        _mm256_storeu_ps(r + i, _mm256_sub_ps(_mm256_mul_ps(a, vc), _mm256_mul_ps(c, vs)));
        _mm256_storeu_ps(r + half + i, _mm256_add_ps(_mm256_mul_ps(a, vs), _mm256_mul_ps(c, vc)));
    }
    return i;
}
#endif

/* ------------------------------------------------------------ com.microsoft GroupQueryAttention */

typedef struct gqa_ctx {
    const int64_t *past; /* per batch: keys before the new tokens */
    int64_t window;      /* local_window_size (-1: none) */
    const float *abias;  /* attention_bias or NULL */
    int64_t as[4];       /* its strides over (B, Hq, S, T) */
} gqa_ctx;

static void gqa_bias(const att_core *c, int64_t b, int64_t h, int64_t i, float *bias)
{
    const gqa_ctx *x = c->ctx;
    int64_t p = x->past[b] + i, T = c->Tb[b];
    for (int64_t j = 0; j < T; j++) {
        if (j > p || (x->window >= 0 && p - j >= x->window)) {
            bias[j] = -INFINITY;
        } else if (x->abias) {
            bias[j] = x->abias[b * x->as[0] + h * x->as[1] + i * x->as[2] + j * x->as[3]];
        }
    }
}

static int gqa_range(const att_core *c, int64_t b, int64_t h, int64_t i, int64_t T, int64_t *lo, int64_t *hi)
{
    const gqa_ctx *x = c->ctx;
    int64_t p = x->past[b] + i;
    *hi = p + 1 < T ? p + 1 : T;
    *lo = x->window >= 0 && p - x->window + 1 > 0 ? p - x->window + 1 : 0;
    if (*hi < *lo) *hi = *lo;
    return 1;
}

/* Rotates the first rd values of each of H heads (stride hst) of one row
 * x at one position (cs, sn: that position's cos/sin rows, rd/2 each);
 * products and sums exactly as written (no FMA), so any width agrees. */
static void rope_row(float *x, int64_t H, int64_t hst, int64_t rd, const float *cs, const float *sn, int interleaved)
{
    int64_t half = rd / 2;
    for (int64_t h = 0; h < H; h++) {
        float *r = x + h * hst;
        if (interleaved) {
            for (int64_t i = 0; i < half; i++) {
                float a = r[2 * i], c = r[2 * i + 1];
                r[2 * i] = a * cs[i] - c * sn[i];
                r[2 * i + 1] = a * sn[i] + c * cs[i];
            }
            continue;
        }
        int64_t i = 0;
#ifdef ATT_X86
        if (k_have_avx2()) {
            i = rope_half_avx2(r, half, cs, sn);
        }
#endif
        for (; i < half; i++) {
            float a = r[i], c = r[i + half];
            r[i] = a * cs[i] - c * sn[i];
            r[i + half] = a * sn[i] + c * cs[i];
        }
    }
}

typedef struct gqa_prep {
    const float *Qin, *Kin, *Vin;
    float *Qr, *Kr, *Kc, *Vc;
    const float *cosc, *sinc; /* NULL: no rotary */
    const int64_t *pids, *past;
    int64_t B, S, Skv, Hq, Hkv, hd, qrs, krs, Lp, rd, per;
    int interleaved;
} gqa_prep;

/* Rows [r0, r1) of (batch, seq): Q (and K) copied out of the input rows
 * and rotated, K and V written into the caches at the row's place. */
static void gqa_prep_rows(const gqa_prep *p, int64_t r0, int64_t r1)
{
    int64_t hd = p->hd, half = p->rd / 2;
    for (int64_t r = r0; r < r1; r++) {
        int64_t b = r / p->S, s = r % p->S;
        float *q = p->Qr + r * p->Hq * hd;
        memcpy(q, p->Qin + r * p->qrs, (size_t)(p->Hq * hd) * sizeof(float));
        if (p->cosc) rope_row(q, p->Hq, hd, p->rd, p->cosc + p->pids[r] * half, p->sinc + p->pids[r] * half, p->interleaved);
        if (!p->Skv) continue;
        float *k = p->Kr + r * p->Hkv * hd;
        memcpy(k, p->Kin + r * p->krs, (size_t)(p->Hkv * hd) * sizeof(float));
        if (p->cosc) rope_row(k, p->Hkv, hd, p->rd, p->cosc + p->pids[r] * half, p->sinc + p->pids[r] * half, p->interleaved);
        for (int64_t h = 0; h < p->Hkv; h++) {
            int64_t at = ((b * p->Hkv + h) * p->Lp + p->past[b] + s) * hd;
            memcpy(p->Kc + at, k + h * hd, (size_t)hd * sizeof(float));
            memcpy(p->Vc + at, p->Vin + r * p->krs + h * hd, (size_t)hd * sizeof(float));
        }
    }
}

static void gqa_prep_task(void *ctx, int64_t t)
{
    const gqa_prep *p = ctx;
    int64_t r0 = t * p->per, r1 = r0 + p->per < p->B * p->S ? r0 + p->per : p->B * p->S;
    gqa_prep_rows(p, r0, r1);
}

static graft_status gqa_run(rt_node *n, graft_error *err)
{
    rt_tensor *q = rt_in(n, 0), *k = rt_in(n, 1), *v = rt_in(n, 2), *pk = rt_in(n, 3), *pv = rt_in(n, 4);
    rt_tensor *sl = rt_in(n, 5), *tot = rt_in(n, 6), *cc = rt_in(n, 7), *sc = rt_in(n, 8), *pos = rt_in(n, 9);
    rt_tensor *ab = rt_in(n, 10), *hsink = rt_in(n, 11);
    if (!q || !sl || !tot) return rt_err(n, err, GRAFT_EINVAL, "missing query, seqlens_k or total_sequence_length");
    if (!k != !v) return rt_err(n, err, GRAFT_EINVAL, "key and value go together");
    if (!pk != !pv) return rt_err(n, err, GRAFT_EINVAL, "past_key and past_value go together");
    if (!k_is_float(q->dtype) || (k && (k->dtype != q->dtype || v->dtype != q->dtype)))
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(q->dtype));
    if (n->n_out > 3 && *graft_node_output(n->src, 3) && rt_attr_int(n, "qk_output", 0))
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "output_qk is not supported");
    int64_t Hq = rt_attr_int(n, "num_heads", 0), Hkv = rt_attr_int(n, "kv_num_heads", 0);
    if (Hq <= 0 || Hkv <= 0 || Hq % Hkv) return rt_err(n, err, GRAFT_EINVAL, "num_heads %lld, kv_num_heads %lld",
                                                         (long long)Hq, (long long)Hkv);
    if (q->rank != 3) return rt_err(n, err, GRAFT_EINVAL, "query must be 3-D");
    int64_t B = q->dims[0], S = q->dims[1], hd;
    int packed = !k;
    if (packed) {
        if (q->dims[2] % (Hq + 2 * Hkv)) return rt_err(n, err, GRAFT_EINVAL, "packed QKV width");
        hd = q->dims[2] / (Hq + 2 * Hkv);
    } else {
        if (q->dims[2] % Hq) return rt_err(n, err, GRAFT_EINVAL, "query width not a multiple of num_heads");
        hd = q->dims[2] / Hq;
        /* an empty key/value (kv sequence 0): the layer reads a cache another
         * layer already filled (shared-KV layers); nothing is appended */
        if (k->rank != 3 || v->rank != 3 || k->dims[0] != B || (k->dims[1] != S && k->dims[1] != 0) ||
            k->dims[2] != Hkv * hd || v->dims[0] != B || v->dims[1] != k->dims[1] || v->dims[2] != Hkv * hd)
            return rt_err(n, err, GRAFT_EINVAL, "key/value must be (batch, seq or 0, kv_num_heads * head_size)");
    }
    int64_t Skv = packed ? S : k->dims[1];
    int64_t Pbuf = 0;
    if (pk) {
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != B || pk->dims[1] != Hkv || pk->dims[3] != hd ||
            pv->dims[0] != B || pv->dims[1] != Hkv || pv->dims[3] != hd || pv->dims[2] != pk->dims[2])
            return rt_err(n, err, GRAFT_EINVAL, "past_key/past_value must be (batch, kv_num_heads, len, head_size)");
        if (pk->dtype != q->dtype || pv->dtype != q->dtype)
            return rt_err(n, err, GRAFT_EUNSUPPORTED, "past dtype differs from query's");
        Pbuf = pk->dims[2];
    }
    int64_t total;
    if (rt_read_ints(tot, &total, 1) != 1) return rt_err(n, err, GRAFT_EINVAL, "total_sequence_length must be one int32");
    if ((int64_t)sl->numel != B) return rt_err(n, err, GRAFT_EINVAL, "seqlens_k must hold batch values");
    int64_t *tmp = k_scratch_get(n, 9, (size_t)(3 * B + 3 * B * S + 1) * sizeof(int64_t), err);
    if (!tmp) return err->code;
    int64_t *past = tmp, *tb = tmp + B, *seqk = tmp + 2 * B, *pids = tmp + 3 * B;
    if (rt_read_ints(sl, seqk, (size_t)B) < 0) return rt_err(n, err, GRAFT_EINVAL, "seqlens_k must be int32");
    int64_t Lp = Pbuf > total ? Pbuf : total;
    int first = S == total;
    for (int64_t b = 0; b < B; b++) {
        int64_t tb_ = seqk[b] + 1;
        past[b] = first ? 0 : tb_ - S;
        if (past[b] < 0 || past[b] + S > Lp || tb_ > Lp)
            return rt_err(n, err, GRAFT_EINVAL, "seqlens_k[%lld] = %lld inconsistent with sequence %lld, total %lld",
                          (long long)b, (long long)seqk[b], (long long)S, (long long)total);
        tb[b] = past[b] + S;
    }
    /* outputs */
    int64_t yd[3] = {B, S, Hq * hd}, kd[4] = {B, Hkv, Lp, hd};
    rt_tensor *yo = rt_out(n, 0, q->dtype, 3, yd, err), *pko = NULL, *pvo = NULL;
    K_OUT_OR_FAIL(yo);
    if (n->n_out > 1) K_OUT_OR_FAIL(pko = rt_out(n, 1, q->dtype, 4, kd, err));
    if (n->n_out > 2) K_OUT_OR_FAIL(pvo = rt_out(n, 2, q->dtype, 4, kd, err));
    const float *Qin = in_f32(n, 0, 0, err);
    if (!Qin) return err->code;
    const float *Kin = packed ? Qin + Hq * hd : in_f32(n, 1, 1, err);
    const float *Vin = packed ? Qin + (Hq + Hkv) * hd : in_f32(n, 2, 2, err);
    if (!Kin || !Vin) return err->code;
    int64_t qrs = packed ? (Hq + 2 * Hkv) * hd : Hq * hd, krs = packed ? qrs : Hkv * hd;
    /* present caches (fp32) */
    int f32 = q->dtype == GRAFT_DTYPE_FLOAT;
    size_t cbytes = (size_t)(B * Hkv * Lp * hd) * sizeof(float) + 4;
    float *Kc = f32 && pko ? pko->data : k_scratch_get(n, 3, cbytes, err);
    float *Vc = f32 && pvo ? pvo->data : k_scratch_get(n, 4, cbytes, err);
    if (!Kc || !Vc) return err->code;
    /* present = past rows [0, past_b), new rows, zeros after (as ORT) */
    const float *PK = NULL, *PV = NULL;
    if (pk && (!(PK = in_f32(n, 3, 5, err)) || !(PV = in_f32(n, 4, 6, err)))) return err->code;
    for (int64_t b = 0; b < B; b++) {
        int64_t keep = PK ? (past[b] + (Skv ? 0 : S) < Pbuf ? past[b] + (Skv ? 0 : S) : Pbuf) : 0;
        for (int64_t h = 0; h < Hkv; h++) {
            int64_t bh = b * Hkv + h;
            if (PK && PK != Kc) memcpy(Kc + bh * Lp * hd, PK + bh * Pbuf * hd, (size_t)(keep * hd) * sizeof(float));
            if (PV && PV != Vc) memcpy(Vc + bh * Lp * hd, PV + bh * Pbuf * hd, (size_t)(keep * hd) * sizeof(float));
            if (PK != Kc) memset(Kc + (bh * Lp + keep) * hd, 0, (size_t)((Lp - keep) * hd) * sizeof(float));
            if (PV != Vc) memset(Vc + (bh * Lp + keep) * hd, 0, (size_t)((Lp - keep) * hd) * sizeof(float));
        }
    }
    /* Q (and K) copies for rotary, rotated, K and V rows into the caches:
     * row by row, rows spread on the pool */
    float *Qr = k_scratch_get(n, 7, (size_t)(B * S * Hq * hd) * sizeof(float) + 4, err);
    float *Kr = k_scratch_get(n, 8, (size_t)(B * Skv * Hkv * hd) * sizeof(float) + 4, err);
    if (!Qr || !Kr) return err->code;
    gqa_prep prep = {Qin, Kin, Vin, Qr, Kr, Kc, Vc, NULL, NULL, pids, past, B, S, Skv, Hq, Hkv, hd, qrs, krs, Lp, 0, 0, 0};
    if (rt_attr_int(n, "do_rotary", 0)) {
        if (!cc || !sc || cc->rank != 2 || sc->rank != 2 || cc->dims[1] != sc->dims[1] || cc->dims[0] != sc->dims[0])
            return rt_err(n, err, GRAFT_EINVAL, "do_rotary needs 2-D cos_cache and sin_cache of one shape");
        int64_t rd = cc->dims[1] * 2;
        if (rd > hd) return rt_err(n, err, GRAFT_EINVAL, "rotary dimension %lld over head size %lld", (long long)rd,
                                   (long long)hd);
        if (pos) {
            if ((int64_t)pos->numel != B * S) return rt_err(n, err, GRAFT_EINVAL, "position_ids must be (batch, seq)");
            if (rt_read_ints(pos, pids, (size_t)(B * S)) < 0) return rt_err(n, err, GRAFT_EINVAL, "position_ids dtype");
        } else {
            for (int64_t b = 0; b < B; b++)
                for (int64_t s = 0; s < S; s++) pids[b * S + s] = past[b] + s;
        }
        for (int64_t r = 0; r < B * S; r++)
            if (pids[r] < 0 || pids[r] >= cc->dims[0])
                return rt_err(n, err, GRAFT_EINVAL, "a position is outside the cos/sin caches (%lld rows)",
                              (long long)cc->dims[0]);
        const float *C = in_f32(n, 7, 10, err), *Sn = in_f32(n, 8, 11, err);
        if (!C || !Sn) return err->code;
        prep.cosc = C, prep.sinc = Sn, prep.rd = rd;
        prep.interleaved = (int)rt_attr_int(n, "rotary_interleaved", 0);
    }
    prep.per = 4096 / ((Hq + 2 * Hkv) * hd) > 1 ? 4096 / ((Hq + 2 * Hkv) * hd) : 1;
    if (B * S * (Hq + 2 * Hkv) * hd >= 32768 && k_threads() > 1)
        k_parallel_for((B * S + prep.per - 1) / prep.per, gqa_prep_task, &prep);
    else
        gqa_prep_rows(&prep, 0, B * S);
    float *Y = f32 ? yo->data : k_scratch_get(n, 2, (size_t)yo->numel * sizeof(float) + 4, err);
    if (!Y) return err->code;
    att_core c = {0};
    c.B = B, c.Hq = Hq, c.Hkv = Hkv, c.Sq = S, c.T = Lp, c.hd = hd, c.vd = hd, c.Tb = tb;
    c.Q = Qr, c.qs[0] = S * Hq * hd, c.qs[1] = hd, c.qs[2] = Hq * hd;
    c.K = Kc, c.ks[0] = Hkv * Lp * hd, c.ks[1] = Lp * hd, c.ks[2] = hd;
    c.V = Vc, c.vs[0] = Hkv * Lp * hd, c.vs[1] = Lp * hd, c.vs[2] = hd;
    c.Y = Y, c.ys[0] = S * Hq * hd, c.ys[1] = hd, c.ys[2] = Hq * hd;
    float sv;
    c.scale = graft_node_attr_float(n->src, "scale", &sv) && sv != 0.0f ? sv : 1.0f / sqrtf((float)hd);
    c.softcap = rt_attr_float(n, "softcap", 0.0f);
    gqa_ctx x = {past, rt_attr_int(n, "local_window_size", -1), NULL, {0}};
    if (ab) {
        int64_t full[4] = {B, Hq, S, ab->dims[ab->rank - 1]};
        int ro;
        int64_t bd[RT_MAX_RANK];
        if (ab->rank != 4 || !k_broadcast(4, full, 4, ab->dims, &ro, bd) || bd[0] != B || bd[1] != Hq ||
            bd[2] != S || ab->dims[3] < total)
            return rt_err(n, err, GRAFT_EINVAL, "attention_bias must be (batch|1, heads|1, seq, total_seq)");
        k_bstrides(4, ab->dims, 4, full, x.as);
        if (!(x.abias = in_f32(n, 10, 6 + 0 * 1, err))) return err->code;
    }
    float *sinks = NULL;
    if (hsink || rt_attr_int(n, "smooth_softmax", 0)) {
        sinks = k_scratch_get(n, 5 + (pk ? 0 : 0), (size_t)Hq * sizeof(float) + 4, err);
        if (!sinks) return err->code;
        if (hsink) {
            if ((int64_t)hsink->numel != Hq) return rt_err(n, err, GRAFT_EINVAL, "head_sink must hold num_heads values");
            k_to_f32(hsink->dtype, hsink->data, sinks, (size_t)Hq);
        } else {
            for (int64_t h = 0; h < Hq; h++) sinks[h] = 0.0f;
        }
    }
    c.sink = sinks;
    c.bias = gqa_bias;
    c.range = x.abias ? NULL : gqa_range;
    c.ctx = &x;
    if (att_run_core(&c, n, err) != GRAFT_OK) return err->code;
    if (!f32) {
        k_from_f32(yo->dtype, Y, yo->data, (size_t)yo->numel);
        if (pko) k_from_f32(pko->dtype, Kc, pko->data, (size_t)pko->numel);
        if (pvo) k_from_f32(pvo->dtype, Vc, pvo->data, (size_t)pvo->numel);
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ com.microsoft MultiHeadAttention */

typedef struct mha_ctx {
    int64_t past, causal;
    float filter;
    const int32_t *kpm; /* key_padding_mask */
    int kpm_kind;        /* 0 none, 1 lengths (B), 2 (B, T), 3 (B, S, T) */
    int64_t kpm_T;
    const float *abias;
    int64_t as[4];
} mha_ctx;

static void mha_bias(const att_core *c, int64_t b, int64_t h, int64_t i, float *bias)
{
    const mha_ctx *x = c->ctx;
    for (int64_t j = 0; j < c->T; j++) {
        float v = 0.0f;
        int masked = 0;
        if (x->kpm_kind == 1) masked = j >= x->kpm[b];
        else if (x->kpm_kind == 2) masked = x->kpm[b * x->kpm_T + j] == 0;
        else if (x->kpm_kind == 3) masked = x->kpm[(b * c->Sq + i) * x->kpm_T + j] == 0;
        if (x->causal && j > x->past + i) masked = 1;
        if (masked) v = x->filter;
        if (x->abias) v += x->abias[b * x->as[0] + h * x->as[1] + i * x->as[2] + j * x->as[3]];
        bias[j] = v;
    }
}

static graft_status mha_run(rt_node *n, graft_error *err)
{
    rt_tensor *q = rt_in(n, 0), *k = rt_in(n, 1), *v = rt_in(n, 2), *bi = rt_in(n, 3), *kpm = rt_in(n, 4);
    rt_tensor *ab = rt_in(n, 5), *pk = rt_in(n, 6), *pv = rt_in(n, 7);
    if (!q || !k || !v) return rt_err(n, err, GRAFT_EUNSUPPORTED, "packed QKV/KV forms are not supported");
    if (rt_in(n, 8) || rt_in(n, 9)) return rt_err(n, err, GRAFT_EUNSUPPORTED, "buffer sharing and beam search inputs are not supported");
    if (!k_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(q->dtype));
    if (!pk != !pv) return rt_err(n, err, GRAFT_EINVAL, "past_key and past_value go together");
    int64_t H = rt_attr_int(n, "num_heads", 0);
    if (q->rank != 3 || H <= 0 || q->dims[2] % H) return rt_err(n, err, GRAFT_EINVAL, "query must be (batch, seq, num_heads * head_size)");
    int64_t B = q->dims[0], S = q->dims[1], hd = q->dims[2] / H, L, vd;
    int k4 = k->rank == 4;
    if (k4) {
        if (v->rank != 4 || k->dims[0] != B || k->dims[1] != H || k->dims[3] != hd || v->dims[0] != B ||
            v->dims[1] != H || v->dims[2] != k->dims[2] || bi || pk)
            return rt_err(n, err, GRAFT_EINVAL, "4-D key/value must be (batch, num_heads, kv_seq, head_size), without bias or past");
        L = k->dims[2];
        vd = v->dims[3];
    } else {
        if (k->rank != 3 || v->rank != 3 || k->dims[0] != B || v->dims[0] != B || k->dims[2] != H * hd ||
            v->dims[1] != k->dims[1] || v->dims[2] % H)
            return rt_err(n, err, GRAFT_EINVAL, "key/value must be (batch, kv_seq, hidden)");
        L = k->dims[1];
        vd = v->dims[2] / H;
    }
    int64_t P = 0;
    if (pk) {
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != B || pk->dims[1] != H || pk->dims[3] != hd ||
            pv->dims[0] != B || pv->dims[1] != H || pv->dims[3] != vd || pv->dims[2] != pk->dims[2])
            return rt_err(n, err, GRAFT_EINVAL, "past_key/past_value shapes");
        P = pk->dims[2];
    }
    int64_t T = P + L;
    int64_t yd[3] = {B, S, H * vd}, kd[4] = {B, H, T, hd}, vdd[4] = {B, H, T, vd};
    rt_tensor *yo = rt_out(n, 0, q->dtype, 3, yd, err), *pko = NULL, *pvo = NULL, *qko = NULL;
    K_OUT_OR_FAIL(yo);
    if (n->n_out > 1 && *graft_node_output(n->src, 1)) K_OUT_OR_FAIL(pko = rt_out(n, 1, q->dtype, 4, kd, err));
    if (n->n_out > 2 && *graft_node_output(n->src, 2)) K_OUT_OR_FAIL(pvo = rt_out(n, 2, q->dtype, 4, vdd, err));
    if (n->n_out > 3 && *graft_node_output(n->src, 3)) {
        int64_t qd[4] = {B, H, S, T};
        K_OUT_OR_FAIL(qko = rt_out(n, 3, q->dtype, 4, qd, err));
    }
    const float *Qin = in_f32(n, 0, 0, err), *Kin = in_f32(n, 1, 1, err), *Vin = in_f32(n, 2, 2, err);
    if (!Qin || !Kin || !Vin) return err->code;
    const float *Bias = NULL;
    if (bi) {
        if ((int64_t)bi->numel != 2 * H * hd + H * vd) return rt_err(n, err, GRAFT_EINVAL, "bias must hold 2 * hidden + v_hidden values");
        if (!(Bias = in_f32(n, 3, 8, err))) return err->code;
    }
    float *Qb = k_scratch_get(n, 7, (size_t)(B * S * H * hd) * sizeof(float) + 4, err);
    float *Kc = k_scratch_get(n, 3, (size_t)(B * H * T * hd) * sizeof(float) + 4, err);
    float *Vc = k_scratch_get(n, 4, (size_t)(B * H * T * vd) * sizeof(float) + 4, err);
    if (!Qb || !Kc || !Vc) return err->code;
    for (int64_t r = 0; r < B * S; r++)
        for (int64_t x = 0; x < H * hd; x++) Qb[r * H * hd + x] = Qin[r * H * hd + x] + (Bias ? Bias[x] : 0.0f);
    if (pk) {
        const float *PK = in_f32(n, 6, 5, err), *PV = in_f32(n, 7, 6, err);
        if (!PK || !PV) return err->code;
        to_cache(PK, 0, B, H, P, hd, Kc, T, 0);
        to_cache(PV, 0, B, H, P, vd, Vc, T, 0);
    }
    to_cache(Kin, !k4, B, H, L, hd, Kc, T, P);
    to_cache(Vin, !k4, B, H, L, vd, Vc, T, P);
    if (Bias)
        for (int64_t bh = 0; bh < B * H; bh++)
            for (int64_t s = P; s < T; s++) {
                int64_t h = bh % H;
                for (int64_t x = 0; x < hd; x++) Kc[(bh * T + s) * hd + x] += Bias[H * hd + h * hd + x];
                for (int64_t x = 0; x < vd; x++) Vc[(bh * T + s) * vd + x] += Bias[2 * H * hd + h * vd + x];
            }
    mha_ctx x = {P, rt_attr_int(n, "unidirectional", 0), rt_attr_float(n, "mask_filter_value", -10000.0f), NULL, 0, 0, NULL, {0}};
    if (kpm) {
        if (kpm->dtype != GRAFT_DTYPE_INT32) return rt_err(n, err, GRAFT_EUNSUPPORTED, "key_padding_mask must be int32");
        x.kpm = kpm->data;
        if (kpm->rank == 1 && kpm->dims[0] == B) x.kpm_kind = 1;
        else if (kpm->rank == 2 && kpm->dims[0] == B && (kpm->dims[1] == T)) x.kpm_kind = 2, x.kpm_T = T;
        else if (kpm->rank == 3 && kpm->dims[0] == B && kpm->dims[1] == S && kpm->dims[2] == T) x.kpm_kind = 3, x.kpm_T = T;
        else return rt_err(n, err, GRAFT_EUNSUPPORTED, "key_padding_mask shape not supported");
    }
    if (ab) {
        int64_t full[4] = {B, H, S, T};
        int ro;
        int64_t bd[RT_MAX_RANK];
        if (ab->rank != 4 || !k_broadcast(4, full, 4, ab->dims, &ro, bd) || bd[0] != B || bd[1] != H || bd[2] != S ||
            bd[3] != T)
            return rt_err(n, err, GRAFT_EINVAL, "attention_bias must broadcast to (batch, heads, seq, total_seq)");
        k_bstrides(4, ab->dims, 4, full, x.as);
        if (!(x.abias = in_f32(n, 5, 9, err))) return err->code;
    }
    float *Y = q->dtype == GRAFT_DTYPE_FLOAT ? yo->data : k_scratch_get(n, 10, (size_t)yo->numel * 4 + 4, err);
    if (!Y) return err->code;
    float *QK = NULL;
    if (qko && !(QK = q->dtype == GRAFT_DTYPE_FLOAT ? qko->data : k_scratch_get(n, 11, (size_t)qko->numel * 4 + 4, err)))
        return err->code;
    att_core c = {0};
    c.B = B, c.Hq = H, c.Hkv = H, c.Sq = S, c.T = T, c.hd = hd, c.vd = vd;
    c.Q = Qb, c.qs[0] = S * H * hd, c.qs[1] = hd, c.qs[2] = H * hd;
    c.K = Kc, c.ks[0] = H * T * hd, c.ks[1] = T * hd, c.ks[2] = hd;
    c.V = Vc, c.vs[0] = H * T * vd, c.vs[1] = T * vd, c.vs[2] = vd;
    c.Y = Y, c.ys[0] = S * H * vd, c.ys[1] = vd, c.ys[2] = H * vd;
    float sv;
    c.scale = graft_node_attr_float(n->src, "scale", &sv) && sv != 0.0f ? sv : 1.0f / sqrtf((float)hd);
    c.bias = mha_bias;
    c.ctx = &x;
    c.qk = QK;
    c.qk_mode = 3;
    if (att_run_core(&c, n, err) != GRAFT_OK) return err->code;
    if (Y != yo->data) k_from_f32(yo->dtype, Y, yo->data, (size_t)yo->numel);
    if (pko) k_from_f32(pko->dtype, Kc, pko->data, (size_t)pko->numel);
    if (pvo) k_from_f32(pvo->dtype, Vc, pvo->data, (size_t)pvo->numel);
    if (qko && QK != qko->data) k_from_f32(qko->dtype, QK, qko->data, (size_t)qko->numel);
    return GRAFT_OK;
}

const rt_kernel rt_kernels_attn[] = {
    {"", "Attention", 23, 0, k_scratch_init, attention_run, k_scratch_fini},
    {"com.microsoft", "GroupQueryAttention", 1, 0, k_scratch_init, gqa_run, k_scratch_fini},
    {"com.microsoft", "MultiHeadAttention", 1, 0, k_scratch_init, mha_run, k_scratch_fini},
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};
