/* Shared pieces of the math kernel family (kernels/math*.c): broadcast
 * plans over up to three inputs, span drivers, dtype conversions. */
#ifndef GRAFT_KERNELS_KMATH_H
#define GRAFT_KERNELS_KMATH_H

#include <math.h>

#include "kernels/kcommon.h"

#define KM_MAX_IN 3

/* Elements per stack block when converting through fp32 or double. */
#define KM_BLOCK 256
#define KM_BLOCK_BYTES (KM_BLOCK * sizeof(double))

/* Broadcast of nin inputs to an output shape, with unit dimensions dropped
 * and adjacent dimensions merged where every input allows it. The last
 * dimension's strides are 0 or 1. */
typedef struct km_plan {
    int rank, nin;
    int64_t dims[RT_MAX_RANK];
    int64_t st[KM_MAX_IN][RT_MAX_RANK];
} km_plan;

void km_plan_make(km_plan *p, int nin, rt_tensor *const *ins, int ro, const int64_t *dout);

/* A span: n output elements at out; input k starts at in[k] and steps by
 * st[k] elements (0 or 1). */
typedef void (*km_span)(const void *ctx, void *out, const void *const *in, const int64_t *st, int64_t n);

/* Runs fn over every row of the broadcast of ins to o's shape. */
void km_drive(const void *ctx, km_span fn, rt_tensor *o, int nin, rt_tensor *const *ins);

int km_is_float(int dtype); /* float, double, float16, bfloat16 */

/* fp16 (bf = 0) or bf16 (bf = 1) to and from fp32. */
void km_half_to_f32(const uint16_t *x, float *y, uint64_t n, int bf);
void km_f32_to_half(const float *x, uint16_t *y, uint64_t n, int bf);

/* m elements from element off of t as double, or stored from double
 * (float to integer saturates, NaN to 0). Return 0 on an unsupported dtype. */
int km_load_f64(const rt_tensor *t, uint64_t off, uint64_t m, double *dst);
int km_store_f64(rt_tensor *t, uint64_t off, uint64_t m, const double *src);

/* expf in a form the compiler can vectorise: exp(x) = 2^n * e^r with
 * |r| <= ln2/2, e^r by a degree-6 polynomial (Cephes' minimax
 * coefficients); within 2 ulp of expf. Overflow gives inf, underflow
 * below -87.3 gives 0, NaN stays NaN. */
static inline float km_expf(float x)
{
    float xc = x > 88.7228391116729996f ? 88.7228391116729996f : x;
    xc = xc < -87.3365478515625f ? -87.3365478515625f : xc;
    xc = xc == xc ? xc : 0.0f;
    float fn = xc * 1.44269504088896341f + 12582912.0f; /* round to nearest integer */
    fn -= 12582912.0f;
    float r = xc - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t n = (int32_t)fn, h = n / 2; /* 2^n as 2^h * 2^(n-h): both normal */
    int32_t e1 = (h + 127) << 23, e2 = (n - h + 127) << 23;
    float s1, s2;
    memcpy(&s1, &e1, 4);
    memcpy(&s2, &e2, 4);
    float y = p * s1 * s2;
    y = x > 88.7228391116729996f ? INFINITY : y;
    y = x < -87.3365478515625f ? 0.0f : y;
    return x == x ? y : x;
}

/* Kernels defined in the other math files, listed in rt_kernels_math. */
graft_status km_cast_init(rt_node *n, graft_error *err);  /* math_cast.c */
graft_status km_cast_run(rt_node *n, graft_error *err);
graft_status km_castlike_run(rt_node *n, graft_error *err);

#endif
