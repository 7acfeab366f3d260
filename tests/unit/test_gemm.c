/* kernels/gemm: weights packed in 16 bits (fp16, bf16) give the very
 * products of the same weights widened and packed in fp32 (each element
 * widens to the same float, the FMA chains are the same), for the GEMV
 * (M = 1) and the blocked GEMM, across depth slices and ragged panels; and
 * both agree with a double-precision reference. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "runtime/rt.h"

static uint32_t rng = 12345u;
static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void check(int dtype, int64_t M, int64_t K, int64_t N)
{
    uint16_t *Bh = malloc((size_t)(K * N) * sizeof *Bh);
    float *Bf = malloc((size_t)(K * N) * sizeof *Bf), *A = malloc((size_t)(M * K) * sizeof *A);
    float *C16 = malloc((size_t)(M * N) * sizeof *C16), *C32 = malloc((size_t)(M * N) * sizeof *C32);
    cr_assert(Bh && Bf && A && C16 && C32);
    for (int64_t i = 0; i < K * N; i++) {
        float v = frand();
        Bh[i] = dtype == GRAFT_DTYPE_FLOAT16 ? rt_f32_to_f16(v) : rt_f32_to_bf16(v);
        Bf[i] = dtype == GRAFT_DTYPE_FLOAT16 ? rt_f16_to_f32(Bh[i]) : rt_bf16_to_f32(Bh[i]);
    }
    for (int64_t i = 0; i < M * K; i++) A[i] = frand();
    k_bpack p16 = {0}, p32 = {0};
    cr_assert(k_bpack_init(&p16, dtype, Bh, K, N));
    cr_assert(k_bpack_init(&p32, GRAFT_DTYPE_FLOAT, Bf, K, N));
    cr_assert_eq(k_sgemm_packed(M, A, K, &p16, C16, N), 0);
    cr_assert_eq(k_sgemm_packed(M, A, K, &p32, C32, N), 0);
    cr_assert(memcmp(C16, C32, (size_t)(M * N) * sizeof *C16) == 0, "%s M%lld K%lld N%lld: 16-bit panels differ",
              dtype == GRAFT_DTYPE_FLOAT16 ? "fp16" : "bf16", (long long)M, (long long)K, (long long)N);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double r = 0;
            for (int64_t k = 0; k < K; k++) r += (double)A[i * K + k] * Bf[k * N + j];
            cr_assert(fabs(C16[i * N + j] - r) <= 1e-4 * (1 + fabs(r)), "C[%lld][%lld] %g vs %g", (long long)i,
                      (long long)j, C16[i * N + j], r);
        }
    k_bpack_free(&p16);
    k_bpack_free(&p32);
    free(Bh), free(Bf), free(A), free(C16), free(C32);
}

Test(gemm, packed_16bit_weights_fp16)
{
    check(GRAFT_DTYPE_FLOAT16, 1, 300, 77);
    check(GRAFT_DTYPE_FLOAT16, 1, 1000, 200);
    check(GRAFT_DTYPE_FLOAT16, 13, 600, 50);
    check(GRAFT_DTYPE_FLOAT16, 64, 257, 129);
}

Test(gemm, packed_16bit_weights_bf16)
{
    check(GRAFT_DTYPE_BFLOAT16, 1, 300, 77);
    check(GRAFT_DTYPE_BFLOAT16, 7, 513, 33);
    check(GRAFT_DTYPE_BFLOAT16, 64, 257, 129);
}

/* fp16 and bf16 to fp32 and back in bulk (the vector paths) agree with the
 * element-wise conversions on every 16-bit pattern but NaNs, and round
 * floats to nearest even the same way. */
Test(gemm, bulk_conversions)
{
    static uint16_t h[65536], back[65536];
    static float f[65536];
    for (int dt = 0; dt < 2; dt++) {
        int dtype = dt ? GRAFT_DTYPE_BFLOAT16 : GRAFT_DTYPE_FLOAT16;
        for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
        cr_assert(k_to_f32(dtype, h, f, 65536));
        for (uint32_t i = 0; i < 65536; i++) {
            float e = dt ? rt_bf16_to_f32(h[i]) : rt_f16_to_f32(h[i]);
            if (isnan(e)) cr_assert(isnan(f[i]));
            else cr_assert(memcmp(&e, &f[i], 4) == 0, "%s 0x%04x", dt ? "bf16" : "fp16", i);
        }
    }
    static float x[65536];
    for (int i = 0; i < 65536; i++) {
        uint32_t bits = (uint32_t)i * 65521u + 0x33000000u; /* spread over exponents, subnormal to overflow */
        memcpy(&x[i], &bits, 4);
    }
    cr_assert(k_from_f32(GRAFT_DTYPE_FLOAT16, x, back, 65536));
    for (int i = 0; i < 65536; i++)
        if (!isnan(x[i])) cr_assert_eq(back[i], rt_f32_to_f16(x[i]), "%a -> 0x%04x, expected 0x%04x", x[i], back[i],
                                       rt_f32_to_f16(x[i]));
}
