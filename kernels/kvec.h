/* x86 AVX2 helpers shared by CPU kernels (callers check k_have_avx2()).
 * Prefix kv_. Empty on other architectures (KV_X86 undefined). */
#ifndef GRAFT_KERNELS_KVEC_H
#define GRAFT_KERNELS_KVEC_H

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KV_X86 1

/* e^x for four doubles, |relative error| < 1e-14 for x in [-200, 100]
 * (clamped there): x = k ln2 + r, |r| <= ln2/2, e^r by its Taylor series
 * to r^11, times 2^k through the exponent bits. Rounded to float, this is
 * the correctly rounded expf except when e^x lies within 1e-14 of a
 * rounding boundary, so it agrees with libm's expf (itself within 0.502
 * ulp) on all but a tiny fraction of inputs. NaN stays NaN. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256d kv_exp4d(__m256d x)
{
    x = _mm256_max_pd(_mm256_set1_pd(-200.0), x); /* NaN: the second operand, kept */
    x = _mm256_min_pd(_mm256_set1_pd(100.0), x);
    __m256d k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634074)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* ln 2 in two parts: k * hi is exact for |k| < 2^11 */
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(6.93147180369123816490e-01), x);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(1.90821492927058770002e-10), r);
    __m256d p = _mm256_set1_pd(1.0 / 39916800.0);
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 3628800.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 362880.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 40320.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 5040.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 720.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 120.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 24.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 6.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(0.5));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    __m256i ki = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k));
    __m256i bits = _mm256_slli_epi64(_mm256_add_epi64(ki, _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(bits));
}

/* tanh of four floats (as doubles), computed in double as
 * sign(x) (1 - 2 / (e^(2|x|) + 1)) with kv_exp4d, |x| itself below 2^-12
 * and +-1 above 9.1: rounded to float, correctly rounded but for inputs
 * within ~1e-10 relative of a rounding boundary. NaN stays NaN. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256d kv_tanh4d(__m256d x)
{
    __m256d sign = _mm256_and_pd(x, _mm256_set1_pd(-0.0)), t = _mm256_andnot_pd(_mm256_set1_pd(-0.0), x);
    __m256d tc = _mm256_min_pd(_mm256_set1_pd(9.1), t); /* NaN: 9.1 here, restored below */
    __m256d e = kv_exp4d(_mm256_add_pd(tc, tc));
    __m256d r = _mm256_sub_pd(_mm256_set1_pd(1.0), _mm256_div_pd(_mm256_set1_pd(2.0), _mm256_add_pd(e, _mm256_set1_pd(1.0))));
    r = _mm256_blendv_pd(r, t, _mm256_cmp_pd(t, _mm256_set1_pd(0x1p-12), _CMP_LT_OQ));
    r = _mm256_blendv_pd(r, _mm256_set1_pd(1.0), _mm256_cmp_pd(t, _mm256_set1_pd(9.1), _CMP_GT_OQ));
    r = _mm256_blendv_pd(r, x, _mm256_cmp_pd(x, x, _CMP_UNORD_Q));
    return _mm256_or_pd(r, sign);
}

/* y[i] = tanhf(x[i]) (as kv_tanh4d) for n floats; x == y allowed. */
__attribute__((target("avx2,fma"))) static inline void kv_tanh_f32(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m128 lo = _mm256_cvtpd_ps(kv_tanh4d(_mm256_cvtps_pd(_mm256_castps256_ps128(v))));
        __m128 hi = _mm256_cvtpd_ps(kv_tanh4d(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
        _mm256_storeu_ps(y + i, _mm256_set_m128(hi, lo));
    }
    if (i < n) {
        float t[8] = {0};
        for (int64_t k = i; k < n; k++) t[k - i] = x[k];
        __m256 v = _mm256_loadu_ps(t);
        __m128 lo = _mm256_cvtpd_ps(kv_tanh4d(_mm256_cvtps_pd(_mm256_castps256_ps128(v))));
        __m128 hi = _mm256_cvtpd_ps(kv_tanh4d(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
        _mm256_storeu_ps(t, _mm256_set_m128(hi, lo));
        for (int64_t k = i; k < n; k++) y[k] = t[k - i];
    }
}
/* e^x for eight floats, km_expf's method (kernels/kmath.h: Cephes'
 * degree-6 polynomial after x = n ln2 + r) with FMAs: within 2 ulp. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 kv_exp8f(__m256 x)
{
    __m256 xc = _mm256_min_ps(_mm256_set1_ps(88.7228391116729996f), x);
    xc = _mm256_max_ps(_mm256_set1_ps(-87.3365478515625f), xc);
    __m256 fn = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i n = _mm256_cvtps_epi32(fn), h = _mm256_srai_epi32(n, 1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(n, h), _mm256_set1_epi32(127)), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-87.3365478515625f), _CMP_LT_OQ));
    return y;
}

/* y[i] = 1 / (1 + e^-x[i]) for n floats (x == y allowed): e = e^-|x| by
 * kv_exp8f, r = 1 / (1 + e), x >= 0 ? r : e r (no overflow, no
 * cancellation), as kmath.h's scalar sigmoid but with FMAs in the exp. */
__attribute__((target("avx2,fma"))) static inline void kv_sigmoid_f32(const float *x, float *y, int64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f), absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    int64_t i = 0;
    for (; i < n; i += 8) {
        float t[8];
        __m256 v;
        if (i + 8 <= n) {
            v = _mm256_loadu_ps(x + i);
        } else {
            for (int k = 0; k < 8; k++) t[k] = i + k < n ? x[i + k] : 0.0f;
            v = _mm256_loadu_ps(t);
        }
        __m256 e = kv_exp8f(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_and_ps(v, absmask)));
        __m256 r = _mm256_div_ps(one, _mm256_add_ps(one, e));
        r = _mm256_blendv_ps(_mm256_mul_ps(e, r), r, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GE_OQ));
        r = _mm256_blendv_ps(r, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)); /* NaN stays NaN */
        if (i + 8 <= n) {
            _mm256_storeu_ps(y + i, r);
        } else {
            _mm256_storeu_ps(t, r);
            for (int k = 0; i + k < n; k++) y[i + k] = t[k];
        }
    }
}

/* Gelu, erf form, for n floats (x == y allowed): kmath's gelu_erf_f with
 * FMAs and kv_exp8f: 0.5 x (z < 0 ? E : 2 - E), E = erfc(|z|) = t e^(-z^2 +
 * P(t)), t = 1 / (1 + |z|/2), z = x / sqrt(2) (Press et al.'s Chebyshev
 * fit, relative error below 1.2e-7). NaN stays NaN. */
__attribute__((target("avx2,fma"))) static inline void kv_gelu_erf_f32(const float *x, float *y, int64_t n)
{
    static const float c[10] = {0.17087277f, -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                -0.18628806f, 0.09678418f, 0.37409196f, 1.00002368f, -1.26551223f};
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), one = _mm256_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 8) {
        float t8[8];
        __m256 v;
        if (i + 8 <= n) {
            v = _mm256_loadu_ps(x + i);
        } else {
            for (int k = 0; k < 8; k++) t8[k] = i + k < n ? x[i + k] : 0.0f;
            v = _mm256_loadu_ps(t8);
        }
        __m256 z = _mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752440f)), a = _mm256_and_ps(z, absmask);
        __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.5f), a, one));
        __m256 p = _mm256_set1_ps(c[0]);
        for (int k = 1; k < 10; k++) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(c[k]));
        __m256 e = _mm256_mul_ps(t, kv_exp8f(_mm256_fnmadd_ps(a, a, p)));
        __m256 f = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), e), e,
                                    _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ));
        __m256 r = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), f);
        r = _mm256_blendv_ps(r, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        if (i + 8 <= n) {
            _mm256_storeu_ps(y + i, r);
        } else {
            _mm256_storeu_ps(t8, r);
            for (int k = 0; i + k < n; k++) y[i + k] = t8[k];
        }
    }
}

/* One RMS-normalised row: y = x * inv * s with inv = 1 / sqrt(mean(x^2) +
 * eps), the sum of squares in double over eight lanes (each term as in a
 * scalar double loop; only the order of the double additions differs).
 * Returns inv. */
__attribute__((target("avx2,fma"))) static inline float kv_rms_row(const float *x, const float *s, float *y, int64_t D,
                                                                   float eps)
{
    int64_t i = 0;
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    for (; i + 8 <= D; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        a0 = _mm256_add_pd(a0, _mm256_mul_pd(d0, d0));
        a1 = _mm256_add_pd(a1, _mm256_mul_pd(d1, d1));
    }
    double q[4];
    _mm256_storeu_pd(q, _mm256_add_pd(a0, a1));
    double sum = (q[0] + q[1]) + (q[2] + q[3]);
    for (; i < D; i++) sum += (double)x[i] * x[i];
    float inv = (float)(1.0 / __builtin_sqrt(sum / (double)D + (double)eps));
    __m256 vi = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= D; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vi), _mm256_loadu_ps(s + i)));
    for (; i < D; i++) y[i] = x[i] * inv * s[i];
    return inv;
}
#endif

#endif
