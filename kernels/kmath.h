/* Shared pieces of the math kernel family (kernels/math*.c): broadcast
 * plans over up to three inputs, span drivers, dtype conversions. */
#ifndef GRAFT_KERNELS_KMATH_H
#define GRAFT_KERNELS_KMATH_H

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

/* Kernels defined in the other math files, listed in rt_kernels_math. */
graft_status km_cast_init(rt_node *n, graft_error *err);  /* math_cast.c */
graft_status km_cast_run(rt_node *n, graft_error *err);
graft_status km_castlike_run(rt_node *n, graft_error *err);

#endif
