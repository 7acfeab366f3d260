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
#endif

#endif
