/* CPU kernels: math family, elementwise part. Unary math and activations,
 * binary and variadic ops with numpy broadcasting (arithmetic, comparison,
 * logic, bitwise), Where, Clip, Cast and CastLike. Reductions, softmax and
 * TopK live in kernels/math_reduce.c.
 *
 * fp16/bf16 are computed in fp32, block by block through a stack buffer;
 * fp32 and fp64 have their own tight loops. Dispatch is by a switch per
 * span (a row of the broadcast output), never per element. */
#include <float.h>
#include <tgmath.h>

#include "kernels/kmath.h"

/* ------------------------------------------------------------ broadcasting */

void km_plan_make(km_plan *p, int nin, rt_tensor *const *ins, int ro, const int64_t *dout)
{
    int64_t s[KM_MAX_IN][RT_MAX_RANK];
    RT_ASSERT(nin <= KM_MAX_IN);
    for (int k = 0; k < nin; k++) k_bstrides(ins[k]->rank, ins[k]->dims, ro, dout, s[k]);
    int r = 0;
    for (int i = 0; i < ro; i++) {
        if (dout[i] == 1) continue;
        if (r > 0) {
            int merge = 1;
            for (int k = 0; k < nin; k++)
                if (p->st[k][r - 1] != s[k][i] * dout[i]) merge = 0;
            if (merge) {
                p->dims[r - 1] *= dout[i];
                for (int k = 0; k < nin; k++) p->st[k][r - 1] = s[k][i];
                continue;
            }
        }
        p->dims[r] = dout[i];
        for (int k = 0; k < nin; k++) p->st[k][r] = s[k][i];
        r++;
    }
    if (r == 0) {
        p->dims[0] = 1;
        for (int k = 0; k < nin; k++) p->st[k][0] = 0;
        r = 1;
    }
    p->rank = r;
    p->nin = nin;
}

void km_drive(const void *ctx, km_span fn, rt_tensor *o, int nin, rt_tensor *const *ins)
{
    if (o->numel == 0) return;
    km_plan p;
    km_plan_make(&p, nin, ins, o->rank, o->dims);
    int r = p.rank;
    int64_t inner = p.dims[r - 1], st[KM_MAX_IN], idx[RT_MAX_RANK] = {0};
    size_t esz[KM_MAX_IN], osz = rt_dtype_size(o->dtype);
    for (int k = 0; k < nin; k++) {
        st[k] = p.st[k][r - 1];
        esz[k] = rt_dtype_size(ins[k]->dtype);
    }
    uint64_t rows = o->numel / (uint64_t)inner;
    char *out = o->data;
    for (uint64_t row = 0; row < rows; row++) {
        const void *ptr[KM_MAX_IN];
        for (int k = 0; k < nin; k++) {
            int64_t off = 0;
            for (int d = 0; d < r - 1; d++) off += idx[d] * p.st[k][d];
            ptr[k] = (const char *)ins[k]->data + (size_t)off * esz[k];
        }
        fn(ctx, out + (size_t)row * (size_t)inner * osz, ptr, st, inner);
        k_next(r - 1, p.dims, idx);
    }
}

int km_is_float(int dt)
{
    return dt == GRAFT_DTYPE_FLOAT || dt == GRAFT_DTYPE_DOUBLE || dt == GRAFT_DTYPE_FLOAT16 ||
           dt == GRAFT_DTYPE_BFLOAT16;
}

/* ------------------------------------------------------------ unary */

enum {
    U_ABS, U_NEG, U_EXP, U_LOG, U_SQRT, U_RECIP, U_SIN, U_COS, U_TAN, U_TANH, U_SIGMOID, U_RELU,
    U_ERF, U_FLOOR, U_CEIL, U_ROUND, U_SIGN, U_SOFTPLUS, U_SOFTSIGN, U_GELU, U_HARDSIGMOID,
    U_HARDSWISH, U_LEAKYRELU, U_ELU, U_SELU, U_CELU, U_THRELU, U_MISH, U_ASIN, U_ACOS, U_ATAN,
    U_SINH, U_COSH, U_ASINH, U_ACOSH, U_ATANH, U_NOT, U_BITNOT, U_ISNAN, U_ISINF, U_CLIP,
};

typedef struct un_state {
    int op;
    float alpha, beta, gamma;
    int approx_tanh;         /* Gelu */
    int det_pos, det_neg;    /* IsInf */
    float fmin, fmax;        /* Clip attributes (opset < 11) */
} un_state;

static const struct {
    const char *name;
    int op;
    float alpha, beta, gamma;
} un_ops[] = {
    {"Abs", U_ABS, 0, 0, 0}, {"Neg", U_NEG, 0, 0, 0}, {"Exp", U_EXP, 0, 0, 0},
    {"Log", U_LOG, 0, 0, 0}, {"Sqrt", U_SQRT, 0, 0, 0}, {"Reciprocal", U_RECIP, 0, 0, 0},
    {"Sin", U_SIN, 0, 0, 0}, {"Cos", U_COS, 0, 0, 0}, {"Tan", U_TAN, 0, 0, 0},
    {"Tanh", U_TANH, 0, 0, 0}, {"Sigmoid", U_SIGMOID, 0, 0, 0}, {"Relu", U_RELU, 0, 0, 0},
    {"Erf", U_ERF, 0, 0, 0}, {"Floor", U_FLOOR, 0, 0, 0}, {"Ceil", U_CEIL, 0, 0, 0},
    {"Round", U_ROUND, 0, 0, 0}, {"Sign", U_SIGN, 0, 0, 0}, {"Softplus", U_SOFTPLUS, 0, 0, 0},
    {"Softsign", U_SOFTSIGN, 0, 0, 0}, {"Gelu", U_GELU, 0, 0, 0},
    {"HardSigmoid", U_HARDSIGMOID, 0.2f, 0.5f, 0}, {"HardSwish", U_HARDSWISH, 1.0f / 6, 0.5f, 0},
    {"LeakyRelu", U_LEAKYRELU, 0.01f, 0, 0}, {"Elu", U_ELU, 1.0f, 0, 0},
    {"Selu", U_SELU, 1.67326319217681884765625f, 0, 1.05070102214813232421875f},
    {"Celu", U_CELU, 1.0f, 0, 0}, {"ThresholdedRelu", U_THRELU, 1.0f, 0, 0},
    {"Mish", U_MISH, 0, 0, 0}, {"Asin", U_ASIN, 0, 0, 0}, {"Acos", U_ACOS, 0, 0, 0},
    {"Atan", U_ATAN, 0, 0, 0}, {"Sinh", U_SINH, 0, 0, 0}, {"Cosh", U_COSH, 0, 0, 0},
    {"Asinh", U_ASINH, 0, 0, 0}, {"Acosh", U_ACOSH, 0, 0, 0}, {"Atanh", U_ATANH, 0, 0, 0},
    {"Not", U_NOT, 0, 0, 0}, {"BitwiseNot", U_BITNOT, 0, 0, 0}, {"IsNaN", U_ISNAN, 0, 0, 0},
    {"IsInf", U_ISINF, 0, 0, 0}, {"Clip", U_CLIP, 0, 0, 0},
};

static graft_status un_init(rt_node *n, graft_error *err)
{
    un_state *s = calloc(1, sizeof *s);
    if (!s) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
    n->state = s;
    const char *op = rt_node_op(n);
    size_t i;
    for (i = 0; i < sizeof un_ops / sizeof un_ops[0]; i++)
        if (strcmp(un_ops[i].name, op) == 0) break;
    RT_ASSERT(i < sizeof un_ops / sizeof un_ops[0]);
    s->op = un_ops[i].op;
    s->alpha = rt_attr_float(n, "alpha", un_ops[i].alpha);
    s->beta = rt_attr_float(n, "beta", un_ops[i].beta);
    s->gamma = rt_attr_float(n, "gamma", un_ops[i].gamma);
    if (s->op == U_HARDSWISH) { /* no attributes */
        s->alpha = 1.0f / 6;
        s->beta = 0.5f;
    }
    char buf[16];
    const char *ap = rt_attr_string(n, "approximate", buf, sizeof buf, "none");
    if (strcmp(ap, "tanh") == 0) s->approx_tanh = 1;
    else if (strcmp(ap, "none") != 0) return rt_err(n, err, GRAFT_EUNSUPPORTED, "approximate='%s'", ap);
    s->det_pos = (int)rt_attr_int(n, "detect_positive", 1);
    s->det_neg = (int)rt_attr_int(n, "detect_negative", 1);
    s->fmin = rt_attr_float(n, "min", -FLT_MAX);
    s->fmax = rt_attr_float(n, "max", FLT_MAX);
    return GRAFT_OK;
}

#define UN_LOOP(EXPR)                                                                      \
    for (uint64_t i = 0; i < cnt; i++) {                                                   \
        T v = x[i];                                                                        \
        y[i] = (EXPR);                                                                     \
    }

/* Float unary ops for T float or double (tgmath picks the function). */
#define UN_FLOAT_BODY                                                                      \
    const T A = (T)s->alpha, B = (T)s->beta, G = (T)s->gamma;                              \
    (void)A, (void)B, (void)G;                                                             \
    switch (s->op) {                                                                       \
    case U_ABS: UN_LOOP(fabs(v)); break;                                                   \
    case U_NEG: UN_LOOP(-v); break;                                                        \
    case U_EXP: UN_LOOP(exp(v)); break;                                                    \
    case U_LOG: UN_LOOP(log(v)); break;                                                    \
    case U_SQRT: UN_LOOP(sqrt(v)); break;                                                  \
    case U_RECIP: UN_LOOP((T)1 / v); break;                                                \
    case U_SIN: UN_LOOP(sin(v)); break;                                                    \
    case U_COS: UN_LOOP(cos(v)); break;                                                    \
    case U_TAN: UN_LOOP(tan(v)); break;                                                    \
    case U_TANH: UN_LOOP(tanh(v)); break;                                                  \
    case U_SIGMOID:                                                                        \
        UN_LOOP(v >= 0 ? (T)1 / ((T)1 + exp(-v)) : exp(v) / ((T)1 + exp(v)));              \
        break;                                                                             \
    case U_RELU: UN_LOOP(v < 0 ? (T)0 : v); break;                                         \
    case U_ERF: UN_LOOP(erf(v)); break;                                                    \
    case U_FLOOR: UN_LOOP(floor(v)); break;                                                \
    case U_CEIL: UN_LOOP(ceil(v)); break;                                                  \
    case U_ROUND: UN_LOOP(nearbyint(v)); break;                                            \
    case U_SIGN: UN_LOOP(v > 0 ? (T)1 : v < 0 ? (T)-1 : v); break;                         \
    case U_SOFTPLUS: UN_LOOP(v > 0 ? v + log1p(exp(-v)) : log1p(exp(v))); break;           \
    case U_SOFTSIGN: UN_LOOP(v / ((T)1 + fabs(v))); break;                                 \
    case U_GELU:                                                                           \
        if (s->approx_tanh) {                                                              \
            UN_LOOP((T)0.5 * v *                                                           \
                    ((T)1 + tanh((T)0.79788456080286535588 * (v + (T)0.044715 * v * v * v)))); \
        } else {                                                                           \
            UN_LOOP((T)0.5 * v * ((T)1 + erf(v * (T)0.70710678118654752440)));             \
        }                                                                                  \
        break;                                                                             \
    case U_HARDSIGMOID: UN_LOOP(fmax((T)0, fmin((T)1, A * v + B))); break;                 \
    case U_HARDSWISH: UN_LOOP(v * fmax((T)0, fmin((T)1, A * v + B))); break;               \
    case U_LEAKYRELU: UN_LOOP(v < 0 ? A * v : v); break;                                   \
    case U_ELU: UN_LOOP(v < 0 ? A * (exp(v) - (T)1) : v); break;                           \
    case U_SELU: UN_LOOP(v > 0 ? G * v : G * (A * exp(v) - A)); break;                     \
    case U_CELU: UN_LOOP(v > 0 ? v : A * (exp(v / A) - (T)1)); break;                      \
    case U_THRELU: UN_LOOP(v > A ? v : (T)0); break;                                       \
    case U_MISH:                                                                           \
        UN_LOOP(v * tanh(v > 0 ? v + log1p(exp(-v)) : log1p(exp(v))));                     \
        break;                                                                             \
    case U_ASIN: UN_LOOP(asin(v)); break;                                                  \
    case U_ACOS: UN_LOOP(acos(v)); break;                                                  \
    case U_ATAN: UN_LOOP(atan(v)); break;                                                  \
    case U_SINH: UN_LOOP(sinh(v)); break;                                                  \
    case U_COSH: UN_LOOP(cosh(v)); break;                                                  \
    case U_ASINH: UN_LOOP(asinh(v)); break;                                                \
    case U_ACOSH: UN_LOOP(acosh(v)); break;                                                \
    case U_ATANH: UN_LOOP(atanh(v)); break;                                                \
    default: return 0;                                                                     \
    }                                                                                      \
    return 1;

static int un_f32(const un_state *s, const float *x, float *y, uint64_t cnt)
{
    typedef float T;
    UN_FLOAT_BODY
}

static int un_f64(const un_state *s, const double *x, double *y, uint64_t cnt)
{
    typedef double T;
    UN_FLOAT_BODY
}

/* Integer unary ops; UT is the unsigned type of the same width. */
#define UN_INT(TT, UT)                                                                     \
    do {                                                                                   \
        typedef TT T;                                                                      \
        const T *x = xt->data;                                                             \
        T *y = yt->data;                                                                   \
        switch (s->op) {                                                                   \
        case U_ABS: UN_LOOP(v < 0 ? (T)((UT)0 - (UT)v) : v); break;                        \
        case U_NEG: UN_LOOP((T)((UT)0 - (UT)v)); break;                                    \
        case U_SIGN: UN_LOOP(v > 0 ? (T)1 : v < 0 ? (T)-1 : (T)0); break;                  \
        case U_RELU: UN_LOOP(v < 0 ? (T)0 : v); break;                                     \
        case U_BITNOT: UN_LOOP((T)~(UT)v); break;                                          \
        default: ok = 0; break;                                                            \
        }                                                                                  \
    } while (0)

#define UN_UINT(TT)                                                                        \
    do {                                                                                   \
        typedef TT T;                                                                      \
        const T *x = xt->data;                                                             \
        T *y = yt->data;                                                                   \
        switch (s->op) {                                                                   \
        case U_ABS:                                                                        \
        case U_RELU: UN_LOOP(v); break;                                                    \
        case U_NEG: UN_LOOP((T)(0u - v)); break;                                           \
        case U_SIGN: UN_LOOP(v ? (T)1 : (T)0); break;                                      \
        case U_BITNOT: UN_LOOP((T)~v); break;                                              \
        default: ok = 0; break;                                                            \
        }                                                                                  \
    } while (0)

#define KM_BLOCK 256

static graft_status un_run(rt_node *n, graft_error *err)
{
    const un_state *s = n->state;
    rt_tensor *xt = rt_in(n, 0);
    if (!xt) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    int odt = xt->dtype;
    if (s->op == U_ISNAN || s->op == U_ISINF) odt = GRAFT_DTYPE_BOOL;
    rt_tensor *yt = rt_out(n, 0, odt, xt->rank, xt->dims, err);
    if (!yt) return err->code;
    uint64_t n_el = xt->numel;
    int ok = 1;
    if (s->op == U_ISNAN || s->op == U_ISINF) {
        uint8_t *y = yt->data;
        int isinf_op = s->op == U_ISINF, dp = s->det_pos, dn = s->det_neg;
        for (uint64_t base = 0; base < n_el; base += KM_BLOCK) {
            double buf[KM_BLOCK];
            uint64_t m = n_el - base < KM_BLOCK ? n_el - base : KM_BLOCK;
            if (!km_load_f64(xt, base, m, buf)) {
                ok = 0;
                break;
            }
            for (uint64_t i = 0; i < m; i++) {
                double v = buf[i];
                y[base + i] = isinf_op ? (uint8_t)(isinf(v) && ((v > 0 && dp) || (v < 0 && dn)))
                                       : (uint8_t)(isnan(v) != 0);
            }
        }
        if (!ok) goto unsupported;
        return GRAFT_OK;
    }
    if (s->op == U_NOT) {
        if (xt->dtype != GRAFT_DTYPE_BOOL) goto unsupported;
        const uint8_t *x = xt->data;
        uint8_t *y = yt->data;
        for (uint64_t i = 0; i < n_el; i++) y[i] = !x[i];
        return GRAFT_OK;
    }
    {
        uint64_t cnt = n_el;
        switch (xt->dtype) {
        case GRAFT_DTYPE_FLOAT: ok = un_f32(s, xt->data, yt->data, cnt); break;
        case GRAFT_DTYPE_DOUBLE: ok = un_f64(s, xt->data, yt->data, cnt); break;
        case GRAFT_DTYPE_FLOAT16:
        case GRAFT_DTYPE_BFLOAT16: {
            const uint16_t *x = xt->data;
            uint16_t *y = yt->data;
            int bf = xt->dtype == GRAFT_DTYPE_BFLOAT16;
            for (uint64_t base = 0; base < cnt && ok; base += KM_BLOCK) {
                float buf[KM_BLOCK];
                uint64_t m = cnt - base < KM_BLOCK ? cnt - base : KM_BLOCK;
                km_half_to_f32(x + base, buf, m, bf);
                ok = un_f32(s, buf, buf, m);
                km_f32_to_half(buf, y + base, m, bf);
            }
            break;
        }
        case GRAFT_DTYPE_INT8: UN_INT(int8_t, uint8_t); break;
        case GRAFT_DTYPE_INT16: UN_INT(int16_t, uint16_t); break;
        case GRAFT_DTYPE_INT32: UN_INT(int32_t, uint32_t); break;
        case GRAFT_DTYPE_INT64: UN_INT(int64_t, uint64_t); break;
        case GRAFT_DTYPE_UINT8: UN_UINT(uint8_t); break;
        case GRAFT_DTYPE_UINT16: UN_UINT(uint16_t); break;
        case GRAFT_DTYPE_UINT32: UN_UINT(uint32_t); break;
        case GRAFT_DTYPE_UINT64: UN_UINT(uint64_t); break;
        default: ok = 0; break;
        }
    }
    if (ok) return GRAFT_OK;
unsupported:
    return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(xt->dtype));
}

/* ------------------------------------------------------------ conversions */

void km_half_to_f32(const uint16_t *x, float *y, uint64_t n, int bf)
{
    if (bf) {
        for (uint64_t i = 0; i < n; i++) {
            uint32_t b = (uint32_t)x[i] << 16;
            memcpy(&y[i], &b, 4);
        }
    } else {
        for (uint64_t i = 0; i < n; i++) y[i] = rt_f16_to_f32(x[i]);
    }
}

void km_f32_to_half(const float *x, uint16_t *y, uint64_t n, int bf)
{
    if (bf) {
        for (uint64_t i = 0; i < n; i++) y[i] = rt_f32_to_bf16(x[i]);
    } else {
        for (uint64_t i = 0; i < n; i++) y[i] = rt_f32_to_f16(x[i]);
    }
}

/* Saturating float to int64 (NaN to 0): the C conversion is undefined out of range. */
static inline int64_t f2i64(double v)
{
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

static inline uint64_t f2u64(double v)
{
    if (v != v || v <= -1.0) return (uint64_t)f2i64(v);
    if (v >= 18446744073709551615.0) return UINT64_MAX;
    return (uint64_t)v;
}

int km_load_f64(const rt_tensor *t, uint64_t off, uint64_t m, double *dst)
{
#define LD(T)                                                                              \
    do {                                                                                   \
        const T *p = (const T *)t->data + off;                                             \
        for (uint64_t i = 0; i < m; i++) dst[i] = (double)p[i];                            \
    } while (0)
    switch (t->dtype) {
    case GRAFT_DTYPE_FLOAT: LD(float); break;
    case GRAFT_DTYPE_DOUBLE: LD(double); break;
    case GRAFT_DTYPE_INT8: LD(int8_t); break;
    case GRAFT_DTYPE_INT16: LD(int16_t); break;
    case GRAFT_DTYPE_INT32: LD(int32_t); break;
    case GRAFT_DTYPE_INT64: LD(int64_t); break;
    case GRAFT_DTYPE_UINT8: LD(uint8_t); break;
    case GRAFT_DTYPE_BOOL: LD(uint8_t); break;
    case GRAFT_DTYPE_UINT16: LD(uint16_t); break;
    case GRAFT_DTYPE_UINT32: LD(uint32_t); break;
    case GRAFT_DTYPE_UINT64: LD(uint64_t); break;
    case GRAFT_DTYPE_FLOAT16: {
        const uint16_t *p = (const uint16_t *)t->data + off;
        for (uint64_t i = 0; i < m; i++) dst[i] = rt_f16_to_f32(p[i]);
        break;
    }
    case GRAFT_DTYPE_BFLOAT16: {
        const uint16_t *p = (const uint16_t *)t->data + off;
        for (uint64_t i = 0; i < m; i++) dst[i] = rt_bf16_to_f32(p[i]);
        break;
    }
    default: return 0;
    }
    return 1;
#undef LD
}

int km_store_f64(rt_tensor *t, uint64_t off, uint64_t m, const double *src)
{
#define STF(T)                                                                             \
    do {                                                                                   \
        T *p = (T *)t->data + off;                                                         \
        for (uint64_t i = 0; i < m; i++) p[i] = (T)src[i];                                 \
    } while (0)
#define STI(T)                                                                             \
    do {                                                                                   \
        T *p = (T *)t->data + off;                                                         \
        for (uint64_t i = 0; i < m; i++) p[i] = (T)f2i64(src[i]);                          \
    } while (0)
    switch (t->dtype) {
    case GRAFT_DTYPE_FLOAT: STF(float); break;
    case GRAFT_DTYPE_DOUBLE: STF(double); break;
    case GRAFT_DTYPE_INT8: STI(int8_t); break;
    case GRAFT_DTYPE_INT16: STI(int16_t); break;
    case GRAFT_DTYPE_INT32: STI(int32_t); break;
    case GRAFT_DTYPE_INT64: STI(int64_t); break;
    case GRAFT_DTYPE_UINT8: STI(uint8_t); break;
    case GRAFT_DTYPE_UINT16: STI(uint16_t); break;
    case GRAFT_DTYPE_UINT32: STI(uint32_t); break;
    case GRAFT_DTYPE_UINT64: {
        uint64_t *p = (uint64_t *)t->data + off;
        for (uint64_t i = 0; i < m; i++) p[i] = f2u64(src[i]);
        break;
    }
    case GRAFT_DTYPE_BOOL: {
        uint8_t *p = (uint8_t *)t->data + off;
        for (uint64_t i = 0; i < m; i++) p[i] = src[i] != 0;
        break;
    }
    case GRAFT_DTYPE_FLOAT16: {
        uint16_t *p = (uint16_t *)t->data + off;
        for (uint64_t i = 0; i < m; i++) p[i] = rt_f32_to_f16((float)src[i]);
        break;
    }
    case GRAFT_DTYPE_BFLOAT16: {
        uint16_t *p = (uint16_t *)t->data + off;
        for (uint64_t i = 0; i < m; i++) p[i] = rt_f32_to_bf16((float)src[i]);
        break;
    }
    default: return 0;
    }
    return 1;
#undef STF
#undef STI
}

/* ------------------------------------------------------------ kernel table */

const rt_kernel rt_kernels_math[] = {
    {"", "Abs", 1, 0, un_init, un_run, NULL},
    {"", "Neg", 1, 0, un_init, un_run, NULL},
    {"", "Exp", 1, 0, un_init, un_run, NULL},
    {"", "Log", 1, 0, un_init, un_run, NULL},
    {"", "Sqrt", 1, 0, un_init, un_run, NULL},
    {"", "Reciprocal", 1, 0, un_init, un_run, NULL},
    {"", "Sin", 7, 0, un_init, un_run, NULL},
    {"", "Cos", 7, 0, un_init, un_run, NULL},
    {"", "Tan", 7, 0, un_init, un_run, NULL},
    {"", "Tanh", 1, 0, un_init, un_run, NULL},
    {"", "Sigmoid", 1, 0, un_init, un_run, NULL},
    {"", "Relu", 1, 0, un_init, un_run, NULL},
    {"", "Erf", 9, 0, un_init, un_run, NULL},
    {"", "Floor", 1, 0, un_init, un_run, NULL},
    {"", "Ceil", 1, 0, un_init, un_run, NULL},
    {"", "Round", 11, 0, un_init, un_run, NULL},
    {"", "Sign", 9, 0, un_init, un_run, NULL},
    {"", "Not", 1, 0, un_init, un_run, NULL},
    {"", "IsNaN", 9, 0, un_init, un_run, NULL},
    {"", "IsInf", 10, 0, un_init, un_run, NULL},
    {"", "Softplus", 1, 0, un_init, un_run, NULL},
    {"", "Softsign", 1, 0, un_init, un_run, NULL},
    {"", "Gelu", 20, 0, un_init, un_run, NULL},
    {"", "HardSigmoid", 6, 0, un_init, un_run, NULL},
    {"", "HardSwish", 14, 0, un_init, un_run, NULL},
    {"", "LeakyRelu", 6, 0, un_init, un_run, NULL},
    {"", "Elu", 6, 0, un_init, un_run, NULL},
    {"", "Selu", 6, 0, un_init, un_run, NULL},
    {"", "Celu", 12, 0, un_init, un_run, NULL},
    {"", "ThresholdedRelu", 10, 0, un_init, un_run, NULL},
    {"", "Mish", 18, 0, un_init, un_run, NULL},
    {"", "Asin", 7, 0, un_init, un_run, NULL},
    {"", "Acos", 7, 0, un_init, un_run, NULL},
    {"", "Atan", 7, 0, un_init, un_run, NULL},
    {"", "Sinh", 9, 0, un_init, un_run, NULL},
    {"", "Cosh", 9, 0, un_init, un_run, NULL},
    {"", "Asinh", 9, 0, un_init, un_run, NULL},
    {"", "Acosh", 9, 0, un_init, un_run, NULL},
    {"", "Atanh", 9, 0, un_init, un_run, NULL},
    {"", "BitwiseNot", 18, 0, un_init, un_run, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};
