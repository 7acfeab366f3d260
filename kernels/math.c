/* CPU kernels: math family, elementwise part. Unary math and activations,
 * binary and variadic ops with numpy broadcasting (arithmetic, comparison,
 * logic, bitwise), Where, Clip, Cast and CastLike. Reductions, softmax and
 * TopK live in kernels/math_reduce.c.
 *
 * fp16/bf16 are computed in fp32, block by block through a stack buffer;
 * fp32 and fp64 have their own tight loops. Dispatch is by a switch per
 * span (a row of the broadcast output), never per element. */
/* The build's -O2 vectorises only loops with known trip counts; these
 * elementwise and reduction loops are the point of this file. Set before
 * the includes so that inline helpers (km_expf) get the same options. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

#include <float.h>
#include <tgmath.h>

#include "kernels/gemm.h"
#include "kernels/kmath.h"
#include "kernels/kvec.h"

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

/* exp: the vectorisable km_expf for float, libm for double */
#define KEXP(v) _Generic((v), float: km_expf, default: exp)(v)

static inline float sigm_f(float v)
{
    float e = km_expf(-fabs(v)), r = 1.0f / (1.0f + e);
    return v >= 0 ? r : e * r;
}

static inline double sigm_d(double v)
{
    double e = exp(-fabs(v)), r = 1.0 / (1.0 + e);
    return v >= 0 ? r : e * r;
}

#define SIGM(v) _Generic((v), float: sigm_f, default: sigm_d)(v)

/* Gelu (tanh form) for float: 0.5 v (1 + tanh(u)) = v sigmoid(2u) =
 * v / (1 + e^(-2u)), vectorisable through km_expf and without the
 * cancellation of 1 + tanh(u) for negative u; double keeps libm's tanh. */
static inline float gelu_tanh_f(float v)
{
    float u = 0.79788456080286535588f * (v + 0.044715f * v * v * v);
    return v / (1.0f + km_expf(-2.0f * u));
}

static inline double gelu_tanh_d(double v)
{
    return 0.5 * v * (1.0 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
}

#define GELU_TANH(v) _Generic((v), float: gelu_tanh_f, default: gelu_tanh_d)(v)

/* Gelu (erf form) for float: 0.5 v (1 + erf(z)), z = v / sqrt(2), with
 * 1 + erf(z) = erfc(-z) for z < 0 and 2 - erfc(z) otherwise, so negative
 * v keeps its relative accuracy; erfc(a) = t e^(-a^2 + P(t)), t =
 * 1 / (1 + a/2), P the Chebyshev fit of Press et al. (Numerical Recipes,
 * "erfcc": relative error below 1.2e-7 for every a >= 0). Vectorisable;
 * double keeps libm's erf. */
static inline float gelu_erf_f(float v)
{
    float z = v * 0.70710678118654752440f, a = fabsf(z), t = 1.0f / (1.0f + 0.5f * a);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    float e = t * km_expf(p - a * a);
    return 0.5f * v * (z < 0 ? e : 2.0f - e);
}

static inline double gelu_erf_d(double v)
{
    return 0.5 * v * (1.0 + erf(v * 0.70710678118654752440));
}

#define GELU_ERF(v) _Generic((v), float: gelu_erf_f, default: gelu_erf_d)(v)

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
    case U_EXP: UN_LOOP(KEXP(v)); break;                                                   \
    case U_LOG: UN_LOOP(log(v)); break;                                                    \
    case U_SQRT: UN_LOOP(sqrt(v)); break;                                                  \
    case U_RECIP: UN_LOOP((T)1 / v); break;                                                \
    case U_SIN: UN_LOOP(sin(v)); break;                                                    \
    case U_COS: UN_LOOP(cos(v)); break;                                                    \
    case U_TAN: UN_LOOP(tan(v)); break;                                                    \
    case U_TANH: UN_LOOP(tanh(v)); break;                                                  \
    case U_SIGMOID:                                                                        \
        UN_LOOP(SIGM(v));                                                                  \
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
            UN_LOOP(GELU_TANH(v));                                                         \
        } else {                                                                           \
            UN_LOOP(GELU_ERF(v));                                                          \
        }                                                                                  \
        break;                                                                             \
    case U_HARDSIGMOID: UN_LOOP(fmax((T)0, fmin((T)1, A * v + B))); break;                 \
    case U_HARDSWISH: UN_LOOP(v * fmax((T)0, fmin((T)1, A * v + B))); break;               \
    case U_LEAKYRELU: UN_LOOP(v < 0 ? A * v : v); break;                                   \
    case U_ELU: UN_LOOP(v < 0 ? A * (KEXP(v) - (T)1) : v); break;                          \
    case U_SELU: UN_LOOP(v > 0 ? G * v : G * (A * KEXP(v) - A)); break;                    \
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

static int un_f32_plain(const un_state *s, const float *x, float *y, uint64_t cnt)
{
    typedef float T;
    UN_FLOAT_BODY
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* The same loops compiled for AVX2 (8 lanes); no FMA contraction under
 * -std=c11, so every element gets the same arithmetic as un_f32_plain. */
__attribute__((target("avx2"))) static int un_f32_avx2(const un_state *s, const float *x, float *y, uint64_t cnt)
{
    typedef float T;
    UN_FLOAT_BODY
}
#endif

static int un_f32(const un_state *s, const float *x, float *y, uint64_t cnt)
{
#ifdef KV_X86
    if (s->op == U_TANH && k_have_avx2()) { /* libm's tanhf is scalar and slow */
        kv_tanh_f32(x, y, (int64_t)cnt);
        return 1;
    }
    if (s->op == U_SIGMOID && k_have_avx2()) {
        kv_sigmoid_f32(x, y, (int64_t)cnt);
        return 1;
    }
    if (s->op == U_GELU && !s->approx_tanh && k_have_avx2()) {
        kv_gelu_erf_f32(x, y, (int64_t)cnt);
        return 1;
    }
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    if (k_have_avx2()) return un_f32_avx2(s, x, y, cnt);
#endif
    return un_f32_plain(s, x, y, cnt);
}

/* Large float tensors: un_f32 over chunks spread on the pool (elementwise,
 * so the result does not depend on the split). */
#define UN_CHUNK 4096
typedef struct un_job {
    const un_state *s;
    const float *x;
    float *y;
    uint64_t n;
    _Atomic int ok;
} un_job;

static void un_task(void *ctx, int64_t t)
{
    un_job *j = ctx;
    uint64_t a = (uint64_t)t * UN_CHUNK, m = j->n - a < UN_CHUNK ? j->n - a : UN_CHUNK;
    if (!un_f32(j->s, j->x + a, j->y + a, m)) j->ok = 0;
}

static int un_f32_par(const un_state *s, const float *x, float *y, uint64_t cnt)
{
    if (cnt < 2 * UN_CHUNK || k_threads() <= 1) return un_f32(s, x, y, cnt);
    un_job j = {s, x, y, cnt, 1};
    k_parallel_for((int64_t)((cnt + UN_CHUNK - 1) / UN_CHUNK), un_task, &j);
    return j.ok;
}

/* fp16/bf16: a block at a time widened, the fp32 op, narrowed; chunks on the pool. */
typedef struct un_half_job {
    const un_state *s;
    const uint16_t *x;
    uint16_t *y;
    uint64_t n;
    int bf;
    _Atomic int ok;
} un_half_job;

static int un_half(const un_state *s, const uint16_t *x, uint16_t *y, uint64_t cnt, int bf)
{
    int ok = 1;
    for (uint64_t base = 0; base < cnt && ok; base += KM_BLOCK) {
        float buf[KM_BLOCK];
        uint64_t m = cnt - base < KM_BLOCK ? cnt - base : KM_BLOCK;
        km_half_to_f32(x + base, buf, m, bf);
        ok = un_f32(s, buf, buf, m);
        km_f32_to_half(buf, y + base, m, bf);
    }
    return ok;
}

static void un_half_task(void *ctx, int64_t t)
{
    un_half_job *j = ctx;
    uint64_t a = (uint64_t)t * UN_CHUNK, m = j->n - a < UN_CHUNK ? j->n - a : UN_CHUNK;
    if (!un_half(j->s, j->x + a, j->y + a, m, j->bf)) j->ok = 0;
}

static int un_half_par(const un_state *s, const uint16_t *x, uint16_t *y, uint64_t cnt, int bf)
{
    if (cnt < 2 * UN_CHUNK || k_threads() <= 1) return un_half(s, x, y, cnt, bf);
    un_half_job j = {s, x, y, cnt, bf, 1};
    k_parallel_for((int64_t)((cnt + UN_CHUNK - 1) / UN_CHUNK), un_half_task, &j);
    return j.ok;
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
        case GRAFT_DTYPE_FLOAT: ok = un_f32_par(s, xt->data, yt->data, cnt); break;
        case GRAFT_DTYPE_DOUBLE: ok = un_f64(s, xt->data, yt->data, cnt); break;
        case GRAFT_DTYPE_FLOAT16:
        case GRAFT_DTYPE_BFLOAT16:
            ok = un_half_par(s, xt->data, yt->data, cnt, xt->dtype == GRAFT_DTYPE_BFLOAT16);
            break;
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

/* Inline conversion, bit-exact with rt_f32_to_bf16 (round to nearest
 * even), simple enough to vectorise. */
static inline uint16_t f2bf(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

void km_half_to_f32(const uint16_t *x, float *y, uint64_t n, int bf)
{
    /* k_to_f32: F16C / AVX2 eight at a time where the CPU has them, the
     * same values as rt_f16_to_f32 / rt_bf16_to_f32 */
    k_to_f32(bf ? GRAFT_DTYPE_BFLOAT16 : GRAFT_DTYPE_FLOAT16, x, y, (size_t)n);
}

void km_f32_to_half(const float *x, uint16_t *y, uint64_t n, int bf)
{
    if (bf) {
        for (uint64_t i = 0; i < n; i++) y[i] = f2bf(x[i]);
    } else {
        k_from_f32(GRAFT_DTYPE_FLOAT16, x, y, (size_t)n); /* F16C: round to nearest even */
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

/* ------------------------------------------------------------ binary and variadic */

enum {
    B_MAX, B_MIN, B_ADD, B_MOD, B_FMOD, B_POW, B_PRELU, B_AND, B_OR, B_XOR, B_SHL, B_SHR,
    B_EQ, B_LT, B_GT, B_LE, B_GE,
};

typedef struct bin_state {
    int op;
    int variadic, mean; /* Max, Min, Sum, Mean */
    int logical;        /* And, Or, Xor: bool only */
    int bitwise;        /* BitwiseAnd/Or/Xor, BitShift: integers only */
    int bf;             /* set per run for the fp16/bf16 span */
} bin_state;

static const struct {
    const char *name;
    int op, variadic, mean, logical, bitwise;
} bin_ops[] = {
    {"Max", B_MAX, 1, 0, 0, 0}, {"Min", B_MIN, 1, 0, 0, 0}, {"Sum", B_ADD, 1, 0, 0, 0},
    {"Mean", B_ADD, 1, 1, 0, 0}, {"Mod", B_MOD, 0, 0, 0, 0}, {"Pow", B_POW, 0, 0, 0, 0},
    {"PRelu", B_PRELU, 0, 0, 0, 0}, {"And", B_AND, 0, 0, 1, 0}, {"Or", B_OR, 0, 0, 1, 0},
    {"Xor", B_XOR, 0, 0, 1, 0}, {"BitwiseAnd", B_AND, 0, 0, 0, 1},
    {"BitwiseOr", B_OR, 0, 0, 0, 1}, {"BitwiseXor", B_XOR, 0, 0, 0, 1},
    {"BitShift", B_SHL, 0, 0, 0, 1}, {"Equal", B_EQ, 0, 0, 0, 0}, {"Less", B_LT, 0, 0, 0, 0},
    {"Greater", B_GT, 0, 0, 0, 0}, {"LessOrEqual", B_LE, 0, 0, 0, 0},
    {"GreaterOrEqual", B_GE, 0, 0, 0, 0},
};

static int bin_is_cmp(int op) { return op >= B_EQ; }

static graft_status bin_init(rt_node *n, graft_error *err)
{
    bin_state *s = calloc(1, sizeof *s);
    if (!s) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
    n->state = s;
    const char *op = rt_node_op(n);
    size_t i;
    for (i = 0; i < sizeof bin_ops / sizeof bin_ops[0]; i++)
        if (strcmp(bin_ops[i].name, op) == 0) break;
    RT_ASSERT(i < sizeof bin_ops / sizeof bin_ops[0]);
    s->op = bin_ops[i].op;
    s->variadic = bin_ops[i].variadic;
    s->mean = bin_ops[i].mean;
    s->logical = bin_ops[i].logical;
    s->bitwise = bin_ops[i].bitwise;
    if (s->op == B_MOD && rt_attr_int(n, "fmod", 0)) s->op = B_FMOD;
    if (s->op == B_SHL) {
        char buf[16];
        const char *d = rt_attr_string(n, "direction", buf, sizeof buf, "");
        if (strcmp(d, "RIGHT") == 0) s->op = B_SHR;
        else if (strcmp(d, "LEFT") != 0) return rt_err(n, err, GRAFT_EINVAL, "direction '%s'", d);
    }
    return GRAFT_OK;
}

/* One span of a binary op: four loops by stride so each vectorises. */
#define SP2(TA, TB, TO, EXPR)                                                              \
    do {                                                                                   \
        const TA *A_ = in[0];                                                              \
        const TB *B_ = in[1];                                                              \
        TO *O_ = out;                                                                      \
        if (st[0] && st[1]) {                                                              \
            for (int64_t i = 0; i < cnt; i++) {                                            \
                TA x = A_[i];                                                              \
                TB y = B_[i];                                                              \
                (void)y;                                                                   \
                O_[i] = (TO)(EXPR);                                                        \
            }                                                                              \
        } else if (st[0]) {                                                                \
            TB y = B_[0];                                                                  \
            (void)y;                                                                       \
            for (int64_t i = 0; i < cnt; i++) {                                            \
                TA x = A_[i];                                                              \
                O_[i] = (TO)(EXPR);                                                        \
            }                                                                              \
        } else if (st[1]) {                                                                \
            TA x = A_[0];                                                                  \
            for (int64_t i = 0; i < cnt; i++) {                                            \
                TB y = B_[i];                                                              \
                (void)y;                                                                   \
                O_[i] = (TO)(EXPR);                                                        \
            }                                                                              \
        } else {                                                                           \
            TA x = A_[0];                                                                  \
            TB y = B_[0];                                                                  \
            (void)y;                                                                       \
            TO r_ = (TO)(EXPR);                                                            \
            for (int64_t i = 0; i < cnt; i++) O_[i] = r_;                                  \
        }                                                                                  \
    } while (0)

/* Python-style modulo (sign of the divisor) for floats. */
static inline double pymod_d(double x, double y)
{
    double r = fmod(x, y);
    if (r != 0) {
        if ((r < 0) != (y < 0)) r += y;
    } else {
        r = copysign(0.0, y);
    }
    return r;
}

static inline float pymod_f(float x, float y)
{
    float r = fmod(x, y);
    if (r != 0) {
        if ((r < 0) != (y < 0)) r += y;
    } else {
        r = copysign(0.0f, y);
    }
    return r;
}

#define PYMOD(x, y) _Generic((x), float: pymod_f, default: pymod_d)((x), (y))

static inline int64_t imod_s(int64_t x, int64_t y, int py)
{
    if (y == 0 || y == -1) return 0;
    int64_t r = x % y;
    if (py && r != 0 && ((r < 0) != (y < 0))) r += y;
    return r;
}

static inline int km_neg64(int64_t v) { return v < 0; }

static inline uint64_t imod_u(uint64_t x, uint64_t y) { return y ? x % y : 0; }

static inline int64_t ipow_s(int64_t x, int64_t y)
{
    if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)x;
    while (y) {
        if (y & 1) r *= b;
        b *= b;
        y >>= 1;
    }
    return (int64_t)r;
}

static inline uint64_t ipow_u(uint64_t x, uint64_t y)
{
    uint64_t r = 1;
    while (y) {
        if (y & 1) r *= x;
        x *= x;
        y >>= 1;
    }
    return r;
}

static inline int64_t shl_s(int64_t x, int64_t y, int bits)
{
    return y < 0 || y >= bits ? 0 : (int64_t)((uint64_t)x << y);
}

static inline int64_t shr_s(int64_t x, int64_t y, int bits)
{
    return y < 0 || y >= bits ? (x < 0 ? -1 : 0) : x >> y;
}

static inline uint64_t shl_u(uint64_t x, uint64_t y, int bits) { return y >= (uint64_t)bits ? 0 : x << y; }
static inline uint64_t shr_u(uint64_t x, uint64_t y, int bits) { return y >= (uint64_t)bits ? 0 : x >> y; }

#define BIN_CMP_CASES(T)                                                                   \
    case B_EQ: SP2(T, T, uint8_t, x == y); break;                                          \
    case B_LT: SP2(T, T, uint8_t, x < y); break;                                           \
    case B_GT: SP2(T, T, uint8_t, x > y); break;                                           \
    case B_LE: SP2(T, T, uint8_t, x <= y); break;                                          \
    case B_GE: SP2(T, T, uint8_t, x >= y); break;

#define BIN_FLOAT_SPAN(NAME, TT)                                                           \
    static void NAME(const void *ctx, void *out, const void *const *in, const int64_t *st,  \
                     int64_t cnt)                                                          \
    {                                                                                      \
        typedef TT T;                                                                      \
        const bin_state *s = ctx;                                                          \
        switch (s->op) {                                                                   \
        case B_MAX: SP2(T, T, T, (x > y || x != x) ? x : y); break;                        \
        case B_MIN: SP2(T, T, T, (x < y || x != x) ? x : y); break;                        \
        case B_ADD: SP2(T, T, T, x + y); break;                                            \
        case B_MOD: SP2(T, T, T, PYMOD(x, y)); break;                                      \
        case B_FMOD: SP2(T, T, T, fmod(x, y)); break;                                      \
        case B_POW:                                                                        \
            if (!st[1] && ((const T *)in[1])[0] == (T)2) SP2(T, T, T, x * x);              \
            else SP2(T, T, T, pow(x, y));                                                  \
            break;                                                                         \
        case B_PRELU: SP2(T, T, T, x < 0 ? y * x : x); break;                              \
            BIN_CMP_CASES(T)                                                               \
        default: RT_ASSERT(0);                                                             \
        }                                                                                  \
    }

BIN_FLOAT_SPAN(bin_span_f32, float)
BIN_FLOAT_SPAN(bin_span_f64, double)

/* W is int64_t or uint64_t, SFX s or u: the helpers work on the wide type. */
#define BIN_INT_SPAN(NAME, TT, W, SIGNED)                                                  \
    static void NAME(const void *ctx, void *out, const void *const *in, const int64_t *st,  \
                     int64_t cnt)                                                          \
    {                                                                                      \
        typedef TT T;                                                                      \
        const bin_state *s = ctx;                                                          \
        const int bits = (int)sizeof(T) * 8;                                               \
        (void)bits;                                                                        \
        switch (s->op) {                                                                   \
        case B_MAX: SP2(T, T, T, x > y ? x : y); break;                                    \
        case B_MIN: SP2(T, T, T, x < y ? x : y); break;                                    \
        case B_ADD: SP2(T, T, T, (uint64_t)x + (uint64_t)y); break;                        \
        case B_MOD:                                                                        \
            SP2(T, T, T, SIGNED ? (W)imod_s((int64_t)x, (int64_t)y, 1) : (W)imod_u((uint64_t)x, (uint64_t)y)); \
            break;                                                                         \
        case B_FMOD:                                                                       \
            SP2(T, T, T, SIGNED ? (W)imod_s((int64_t)x, (int64_t)y, 0) : (W)imod_u((uint64_t)x, (uint64_t)y)); \
            break;                                                                         \
        case B_POW:                                                                        \
            SP2(T, T, T, SIGNED ? (W)ipow_s((int64_t)x, (int64_t)y) : (W)ipow_u((uint64_t)x, (uint64_t)y)); \
            break;                                                                         \
        case B_PRELU:                                                                      \
            SP2(T, T, T, SIGNED && km_neg64((int64_t)x) ? (uint64_t)x * (uint64_t)y : (uint64_t)x); \
            break;                                                                         \
        case B_AND: SP2(T, T, T, x & y); break;                                            \
        case B_OR: SP2(T, T, T, x | y); break;                                             \
        case B_XOR: SP2(T, T, T, x ^ y); break;                                            \
        case B_SHL:                                                                        \
            SP2(T, T, T, SIGNED ? (W)shl_s((int64_t)x, (int64_t)y, bits) : (W)shl_u((uint64_t)x, (uint64_t)y, bits)); \
            break;                                                                         \
        case B_SHR:                                                                        \
            SP2(T, T, T, SIGNED ? (W)shr_s((int64_t)x, (int64_t)y, bits) : (W)shr_u((uint64_t)x, (uint64_t)y, bits)); \
            break;                                                                         \
            BIN_CMP_CASES(T)                                                               \
        default: RT_ASSERT(0);                                                             \
        }                                                                                  \
    }

BIN_INT_SPAN(bin_span_i8, int8_t, int64_t, 1)
BIN_INT_SPAN(bin_span_i16, int16_t, int64_t, 1)
BIN_INT_SPAN(bin_span_i32, int32_t, int64_t, 1)
BIN_INT_SPAN(bin_span_i64, int64_t, int64_t, 1)
BIN_INT_SPAN(bin_span_u8, uint8_t, uint64_t, 0)
BIN_INT_SPAN(bin_span_u16, uint16_t, uint64_t, 0)
BIN_INT_SPAN(bin_span_u32, uint32_t, uint64_t, 0)
BIN_INT_SPAN(bin_span_u64, uint64_t, uint64_t, 0)

/* fp16/bf16: blocks converted to fp32, the fp32 span, converted back. */
static void bin_span_half(const void *ctx, void *out, const void *const *in, const int64_t *st, int64_t cnt)
{
    const bin_state *s = ctx;
    const uint16_t *a = in[0], *b = in[1];
    int cmp = bin_is_cmp(s->op);
    for (int64_t base = 0; base < cnt; base += KM_BLOCK) {
        float fa[KM_BLOCK], fb[KM_BLOCK], fo[KM_BLOCK];
        int64_t m = cnt - base < KM_BLOCK ? cnt - base : KM_BLOCK;
        km_half_to_f32(st[0] ? a + base : a, fa, st[0] ? (uint64_t)m : 1, s->bf);
        km_half_to_f32(st[1] ? b + base : b, fb, st[1] ? (uint64_t)m : 1, s->bf);
        const void *pp[2] = {fa, fb};
        if (cmp) {
            bin_span_f32(ctx, (uint8_t *)out + base, pp, st, m);
        } else {
            bin_span_f32(ctx, fo, pp, st, m);
            km_f32_to_half(fo, (uint16_t *)out + base, (uint64_t)m, s->bf);
        }
    }
}

static km_span bin_span_for(int dt)
{
    switch (dt) {
    case GRAFT_DTYPE_FLOAT: return bin_span_f32;
    case GRAFT_DTYPE_DOUBLE: return bin_span_f64;
    case GRAFT_DTYPE_FLOAT16:
    case GRAFT_DTYPE_BFLOAT16: return bin_span_half;
    case GRAFT_DTYPE_INT8: return bin_span_i8;
    case GRAFT_DTYPE_INT16: return bin_span_i16;
    case GRAFT_DTYPE_INT32: return bin_span_i32;
    case GRAFT_DTYPE_INT64: return bin_span_i64;
    case GRAFT_DTYPE_UINT8:
    case GRAFT_DTYPE_BOOL: return bin_span_u8;
    case GRAFT_DTYPE_UINT16: return bin_span_u16;
    case GRAFT_DTYPE_UINT32: return bin_span_u32;
    case GRAFT_DTYPE_UINT64: return bin_span_u64;
    default: return NULL;
    }
}

static int km_is_int(int dt)
{
    switch (dt) {
    case GRAFT_DTYPE_INT8: case GRAFT_DTYPE_INT16: case GRAFT_DTYPE_INT32: case GRAFT_DTYPE_INT64:
    case GRAFT_DTYPE_UINT8: case GRAFT_DTYPE_UINT16: case GRAFT_DTYPE_UINT32: case GRAFT_DTYPE_UINT64:
        return 1;
    default: return 0;
    }
}

/* Pow with base and exponent of different types: computed in double (or
 * exactly for integers), block by block. */
typedef struct pow_ctx {
    int da, db, dout;
} pow_ctx;

static void load_strided(const void *p, int dt, int64_t st, int64_t m, double *dst)
{
    rt_tensor t;
    t.dtype = dt;
    t.data = (void *)(uintptr_t)p;
    if (st) {
        km_load_f64(&t, 0, (uint64_t)m, dst);
    } else {
        km_load_f64(&t, 0, 1, dst);
        for (int64_t i = 1; i < m; i++) dst[i] = dst[0];
    }
}

static void pow_span_mixed(const void *ctx, void *out, const void *const *in, const int64_t *st, int64_t cnt)
{
    const pow_ctx *c = ctx;
    size_t ea = rt_dtype_size(c->da), eb = rt_dtype_size(c->db);
    int ints = km_is_int(c->da) && km_is_int(c->db);
    rt_tensor o;
    o.dtype = c->dout;
    o.data = out;
    for (int64_t base = 0; base < cnt; base += KM_BLOCK) {
        double x[KM_BLOCK], y[KM_BLOCK];
        int64_t m = cnt - base < KM_BLOCK ? cnt - base : KM_BLOCK;
        load_strided((const char *)in[0] + (st[0] ? (size_t)base * ea : 0), c->da, st[0], m, x);
        load_strided((const char *)in[1] + (st[1] ? (size_t)base * eb : 0), c->db, st[1], m, y);
        for (int64_t i = 0; i < m; i++)
            x[i] = ints ? (double)ipow_s((int64_t)x[i], (int64_t)y[i]) : pow(x[i], y[i]);
        km_store_f64(&o, (uint64_t)base, (uint64_t)m, x);
    }
}

static graft_status mean_scale(rt_tensor *o, double k)
{
    uint64_t n = o->numel;
    switch (o->dtype) {
    case GRAFT_DTYPE_FLOAT: {
        float *p = o->data, f = (float)k;
        for (uint64_t i = 0; i < n; i++) p[i] *= f;
        return GRAFT_OK;
    }
    case GRAFT_DTYPE_DOUBLE: {
        double *p = o->data;
        for (uint64_t i = 0; i < n; i++) p[i] *= k;
        return GRAFT_OK;
    }
    case GRAFT_DTYPE_FLOAT16:
    case GRAFT_DTYPE_BFLOAT16: {
        int bf = o->dtype == GRAFT_DTYPE_BFLOAT16;
        uint16_t *p = o->data;
        for (uint64_t base = 0; base < n; base += KM_BLOCK) {
            float buf[KM_BLOCK];
            uint64_t m = n - base < KM_BLOCK ? n - base : KM_BLOCK;
            km_half_to_f32(p + base, buf, m, bf);
            for (uint64_t i = 0; i < m; i++) buf[i] *= (float)k;
            km_f32_to_half(buf, p + base, m, bf);
        }
        return GRAFT_OK;
    }
    default: return GRAFT_EUNSUPPORTED;
    }
}

static graft_status bin_run(rt_node *n, graft_error *err)
{
    bin_state *s = n->state;
    rt_tensor *ins[KM_MAX_IN];
    int nin = 0;
    for (int i = 0; i < n->n_in; i++) {
        rt_tensor *t = rt_in(n, i);
        if (!t) {
            if (s->variadic) continue;
            return rt_err(n, err, GRAFT_EINVAL, "missing input %d", i);
        }
        if (t->dtype != (nin ? ins[0]->dtype : t->dtype) && s->op != B_POW)
            return rt_err(n, err, GRAFT_EINVAL, "input types differ (%s, %s)",
                          graft_dtype_name(ins[0]->dtype), graft_dtype_name(t->dtype));
        ins[nin < 2 ? nin : 1] = t;
        nin++;
    }
    if (nin == 0 || (!s->variadic && nin != 2))
        return rt_err(n, err, GRAFT_EINVAL, "expected %s inputs", s->variadic ? "one or more" : "two");
    int dt = ins[0]->dtype;
    km_span fn = bin_span_for(dt);
    if (!fn || (s->logical && dt != GRAFT_DTYPE_BOOL) || (s->bitwise && !km_is_int(dt)) ||
        ((s->op == B_AND || s->op == B_OR || s->op == B_XOR) && !km_is_int(dt) && dt != GRAFT_DTYPE_BOOL))
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(dt));
    s->bf = dt == GRAFT_DTYPE_BFLOAT16;
    int ro = 0;
    int64_t dout[RT_MAX_RANK];
    /* output shape: broadcast of every input */
    {
        int r = 0;
        int64_t d[RT_MAX_RANK];
        for (int i = 0; i < n->n_in; i++) {
            rt_tensor *t = rt_in(n, i);
            if (!t) continue;
            if (r == 0 && ro == 0 && i == 0) {
                ro = t->rank;
                memcpy(dout, t->dims, sizeof(int64_t) * (size_t)t->rank);
                r = 1;
                continue;
            }
            if (!k_broadcast(ro, dout, t->rank, t->dims, &ro, d))
                return rt_err(n, err, GRAFT_EINVAL, "shapes do not broadcast");
            memcpy(dout, d, sizeof d);
            r = 1;
        }
        if (!r) {
            rt_tensor *t = ins[0];
            ro = t->rank;
            memcpy(dout, t->dims, sizeof(int64_t) * (size_t)t->rank);
        }
    }
    int odt = bin_is_cmp(s->op) ? GRAFT_DTYPE_BOOL : dt;
    rt_tensor *o = rt_out(n, 0, odt, ro, dout, err);
    if (!o) return err->code;
    if (s->op == B_POW && ins[1]->dtype != dt) {
        pow_ctx c = {dt, ins[1]->dtype, dt};
        if (!bin_span_for(ins[1]->dtype) || dt == GRAFT_DTYPE_BOOL || ins[1]->dtype == GRAFT_DTYPE_BOOL)
            return rt_err(n, err, GRAFT_EUNSUPPORTED, "Pow of %s by %s", graft_dtype_name(dt),
                          graft_dtype_name(ins[1]->dtype));
        km_drive(&c, pow_span_mixed, o, 2, ins);
        return GRAFT_OK;
    }
    if (nin == 1) {
        rt_tensor *in1[1] = {ins[0]};
        /* Max/Min/Sum/Mean of one input: a copy */
        if (o->numel) memcpy(o->data, in1[0]->data, o->nbytes);
        return GRAFT_OK;
    }
    /* first pair, then fold the rest into the output */
    int first = 1;
    rt_tensor *acc = NULL;
    for (int i = 0; i < n->n_in; i++) {
        rt_tensor *t = rt_in(n, i);
        if (!t) continue;
        if (!acc) {
            acc = t;
            continue;
        }
        rt_tensor *pair[2] = {acc, t};
        km_drive(s, fn, o, 2, pair);
        acc = o;
        first = 0;
    }
    (void)first;
    if (s->mean && mean_scale(o, 1.0 / nin) != GRAFT_OK)
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "Mean of %s", graft_dtype_name(dt));
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Where */

static void where_span(const void *ctx, void *out, const void *const *in, const int64_t *st, int64_t cnt)
{
    size_t esz = *(const size_t *)ctx;
    const uint8_t *c = in[0];
    int64_t sc = st[0], sx = st[1], sy = st[2];
#define WLOOP(T)                                                                           \
    do {                                                                                   \
        const T *X = in[1], *Y = in[2];                                                    \
        T *O = out;                                                                        \
        for (int64_t i = 0; i < cnt; i++) O[i] = c[i * sc] ? X[i * sx] : Y[i * sy];        \
    } while (0)
    switch (esz) {
    case 1: WLOOP(uint8_t); break;
    case 2: WLOOP(uint16_t); break;
    case 4: WLOOP(uint32_t); break;
    default: WLOOP(uint64_t); break;
    }
#undef WLOOP
}

static graft_status where_run(rt_node *n, graft_error *err)
{
    rt_tensor *ins[3] = {rt_in(n, 0), rt_in(n, 1), rt_in(n, 2)};
    if (!ins[0] || !ins[1] || !ins[2]) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (ins[0]->dtype != GRAFT_DTYPE_BOOL)
        return rt_err(n, err, GRAFT_EINVAL, "condition of type %s", graft_dtype_name(ins[0]->dtype));
    if (ins[1]->dtype != ins[2]->dtype)
        return rt_err(n, err, GRAFT_EINVAL, "input types differ (%s, %s)",
                      graft_dtype_name(ins[1]->dtype), graft_dtype_name(ins[2]->dtype));
    size_t esz = rt_dtype_size(ins[1]->dtype);
    if (esz != 1 && esz != 2 && esz != 4 && esz != 8)
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(ins[1]->dtype));
    int ro, r2;
    int64_t d1[RT_MAX_RANK], d2[RT_MAX_RANK];
    if (!k_broadcast(ins[0]->rank, ins[0]->dims, ins[1]->rank, ins[1]->dims, &ro, d1) ||
        !k_broadcast(ro, d1, ins[2]->rank, ins[2]->dims, &r2, d2))
        return rt_err(n, err, GRAFT_EINVAL, "shapes do not broadcast");
    rt_tensor *o = rt_out(n, 0, ins[1]->dtype, r2, d2, err);
    if (!o) return err->code;
    km_drive(&esz, where_span, o, 3, ins);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Clip */

#define CLIP_LOOP(T, LO, HI)                                                               \
    do {                                                                                   \
        const T *x = xt->data;                                                             \
        T *y = o->data;                                                                    \
        T lo = (LO), hi = (HI);                                                            \
        if (lt) lo = *(const T *)lt->data;                                                 \
        if (ht) hi = *(const T *)ht->data;                                                 \
        for (uint64_t i = 0; i < cnt; i++) {                                               \
            T v = x[i];                                                                    \
            v = v < lo ? lo : v;                                                           \
            y[i] = v > hi ? hi : v;                                                        \
        }                                                                                  \
    } while (0)

static graft_status clip_run(rt_node *n, graft_error *err)
{
    const un_state *s = n->state;
    rt_tensor *xt = rt_in(n, 0), *lt = NULL, *ht = NULL;
    if (!xt) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (n->opset >= 11) {
        lt = rt_in(n, 1);
        ht = rt_in(n, 2);
        if ((lt && (lt->dtype != xt->dtype || lt->numel != 1)) ||
            (ht && (ht->dtype != xt->dtype || ht->numel != 1)))
            return rt_err(n, err, GRAFT_EINVAL, "min and max must be scalars of the input's type");
    }
    rt_tensor *o = rt_out(n, 0, xt->dtype, xt->rank, xt->dims, err);
    if (!o) return err->code;
    uint64_t cnt = xt->numel;
    float flo = n->opset >= 11 ? -INFINITY : s->fmin, fhi = n->opset >= 11 ? INFINITY : s->fmax;
    switch (xt->dtype) {
    case GRAFT_DTYPE_FLOAT: CLIP_LOOP(float, flo, fhi); break;
    case GRAFT_DTYPE_DOUBLE: CLIP_LOOP(double, flo, fhi); break;
    case GRAFT_DTYPE_INT8: CLIP_LOOP(int8_t, INT8_MIN, INT8_MAX); break;
    case GRAFT_DTYPE_INT16: CLIP_LOOP(int16_t, INT16_MIN, INT16_MAX); break;
    case GRAFT_DTYPE_INT32: CLIP_LOOP(int32_t, INT32_MIN, INT32_MAX); break;
    case GRAFT_DTYPE_INT64: CLIP_LOOP(int64_t, INT64_MIN, INT64_MAX); break;
    case GRAFT_DTYPE_UINT8: CLIP_LOOP(uint8_t, 0, UINT8_MAX); break;
    case GRAFT_DTYPE_UINT16: CLIP_LOOP(uint16_t, 0, UINT16_MAX); break;
    case GRAFT_DTYPE_UINT32: CLIP_LOOP(uint32_t, 0, UINT32_MAX); break;
    case GRAFT_DTYPE_UINT64: CLIP_LOOP(uint64_t, 0, UINT64_MAX); break;
    case GRAFT_DTYPE_FLOAT16:
    case GRAFT_DTYPE_BFLOAT16: {
        int bf = xt->dtype == GRAFT_DTYPE_BFLOAT16;
        float lo = flo, hi = fhi;
        if (lt) km_half_to_f32(lt->data, &lo, 1, bf);
        if (ht) km_half_to_f32(ht->data, &hi, 1, bf);
        const uint16_t *x = xt->data;
        uint16_t *y = o->data;
        for (uint64_t base = 0; base < cnt; base += KM_BLOCK) {
            float buf[KM_BLOCK];
            uint64_t m = cnt - base < KM_BLOCK ? cnt - base : KM_BLOCK;
            km_half_to_f32(x + base, buf, m, bf);
            for (uint64_t i = 0; i < m; i++) {
                float v = buf[i] < lo ? lo : buf[i];
                buf[i] = v > hi ? hi : v;
            }
            km_f32_to_half(buf, y + base, m, bf);
        }
        break;
    }
    default:
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(xt->dtype));
    }
    return GRAFT_OK;
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
    {"", "Clip", 1, 0, un_init, clip_run, NULL},
    {"", "Max", 6, 0, bin_init, bin_run, NULL},
    {"", "Min", 6, 0, bin_init, bin_run, NULL},
    {"", "Sum", 6, 0, bin_init, bin_run, NULL},
    {"", "Mean", 6, 0, bin_init, bin_run, NULL},
    {"", "Mod", 10, 0, bin_init, bin_run, NULL},
    {"", "Pow", 7, 0, bin_init, bin_run, NULL},
    {"", "PRelu", 7, 0, bin_init, bin_run, NULL},
    {"", "And", 7, 0, bin_init, bin_run, NULL},
    {"", "Or", 7, 0, bin_init, bin_run, NULL},
    {"", "Xor", 7, 0, bin_init, bin_run, NULL},
    {"", "BitwiseAnd", 18, 0, bin_init, bin_run, NULL},
    {"", "BitwiseOr", 18, 0, bin_init, bin_run, NULL},
    {"", "BitwiseXor", 18, 0, bin_init, bin_run, NULL},
    {"", "BitShift", 11, 0, bin_init, bin_run, NULL},
    {"", "Equal", 7, 0, bin_init, bin_run, NULL},
    {"", "Less", 7, 0, bin_init, bin_run, NULL},
    {"", "Greater", 7, 0, bin_init, bin_run, NULL},
    {"", "LessOrEqual", 12, 0, bin_init, bin_run, NULL},
    {"", "GreaterOrEqual", 12, 0, bin_init, bin_run, NULL},
    {"", "Where", 9, 0, NULL, where_run, NULL},
    {"", "Cast", 6, 0, km_cast_init, km_cast_run, NULL},
    {"", "CastLike", 15, 0, km_cast_init, km_castlike_run, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};
