/* CPU kernels: Cast and CastLike between the fixed-size numeric types, bool,
 * fp16/bf16, the float8 family (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0) and
 * the packed sub-byte types (INT4, UINT4, INT2, UINT2, FLOAT4E2M1).
 *
 * Pairs of plain C types have a tight loop each; fp32 <-> fp16/bf16 too.
 * Everything else goes through double, block by block. */
/* The build's -O2 vectorises only loops with known trip counts; these
 * elementwise and reduction loops are the point of this file. Set before
 * the includes so that inline helpers (km_expf) get the same options. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

#include <float.h>
#include <math.h>

#include "kernels/kmath.h"

/* ------------------------------------------------------------ float8 */

typedef struct f8fmt {
    int mbits, bias;
    int fnuz;     /* no negative zero, no inf, NaN is 0x80 */
    int ieee_inf; /* E5M2: exponent all ones is inf/NaN */
    int max_code; /* largest finite magnitude code */
    int nan_code; /* magnitude code of NaN (non-fnuz) */
} f8fmt;

static const f8fmt F8_E4M3FN = {3, 7, 0, 0, 0x7e, 0x7f};
static const f8fmt F8_E4M3FNUZ = {3, 8, 1, 0, 0x7f, 0};
static const f8fmt F8_E5M2 = {2, 15, 0, 1, 0x7b, 0x7e};
static const f8fmt F8_E5M2FNUZ = {2, 16, 1, 0, 0x7f, 0};

static const f8fmt *f8_fmt(int dt)
{
    switch (dt) {
    case GRAFT_DTYPE_FLOAT8E4M3FN: return &F8_E4M3FN;
    case GRAFT_DTYPE_FLOAT8E4M3FNUZ: return &F8_E4M3FNUZ;
    case GRAFT_DTYPE_FLOAT8E5M2: return &F8_E5M2;
    case GRAFT_DTYPE_FLOAT8E5M2FNUZ: return &F8_E5M2FNUZ;
    default: return NULL;
    }
}

/* Value of a magnitude code (no sign bit), finite codes only. */
static double f8_mag(const f8fmt *f, int mag)
{
    int e = mag >> f->mbits, m = mag & ((1 << f->mbits) - 1);
    if (e == 0) return ldexp((double)m, 1 - f->bias - f->mbits);
    return ldexp((double)((1 << f->mbits) + m), e - f->bias - f->mbits);
}

static double f8_decode(const f8fmt *f, uint8_t c)
{
    int s = c & 0x80, mag = c & 0x7f;
    if (f->fnuz) {
        if (c == 0x80) return NAN;
    } else if (f->ieee_inf) {
        if ((mag >> f->mbits) == 0x1f) return (mag & 3) ? NAN : (s ? -INFINITY : INFINITY);
    } else if (mag == 0x7f) {
        return NAN;
    }
    double v = f8_mag(f, mag);
    return s ? -v : v;
}

static uint8_t f8_encode(const f8fmt *f, double x, int saturate)
{
    int s = signbit(x) ? 0x80 : 0;
    uint8_t nan = f->fnuz ? 0x80 : (uint8_t)(f->nan_code | s);
    if (isnan(x)) return nan;
    double a = fabs(x);
    if (isinf(a)) {
        if (saturate) return (uint8_t)(f->max_code | s);
        return f->ieee_inf ? (uint8_t)(0x7c | s) : nan;
    }
    int lo = 0, hi = f->max_code; /* largest code with value <= a */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (f8_mag(f, mid) <= a) lo = mid;
        else hi = mid - 1;
    }
    int r = lo;
    if (lo == f->max_code) {
        double vmax = f8_mag(f, lo), half = (vmax - f8_mag(f, lo - 1)) / 2;
        if (a > vmax + half || (a == vmax + half && (lo & 1))) {
            if (saturate) r = lo;
            else return f->ieee_inf ? (uint8_t)(0x7c | s) : nan;
        }
    } else {
        double d1 = a - f8_mag(f, lo), d2 = f8_mag(f, lo + 1) - a;
        if (d2 < d1 || (d2 == d1 && ((lo + 1) & 1) == 0)) r = lo + 1;
    }
    if (f->fnuz && r == 0) return 0;
    return (uint8_t)(r | s);
}

static double e8m0_decode(uint8_t c) { return c == 0xff ? NAN : ldexp(1.0, (int)c - 127); }

enum { RM_UP, RM_DOWN, RM_NEAREST };

static uint8_t e8m0_encode(double x, int saturate, int rmode)
{
    if (isnan(x)) return 0xff;
    if (isinf(x)) return saturate ? 0xfe : 0xff;
    if (x <= 0) return saturate ? 0 : 0xff;
    int e;
    double f = frexp(x, &e); /* x = f * 2^e, f in [0.5, 1) */
    int E = e - 1;
    double m = 2 * f;
    if (rmode == RM_UP && m > 1) E++;
    else if (rmode == RM_NEAREST && m >= 1.5) E++;
    int code = E + 127;
    if (code > 254) return saturate ? 0xfe : 0xff;
    if (code < 0) return saturate ? 0 : 0xff;
    return (uint8_t)code;
}

/* ------------------------------------------------------------ 4- and 2-bit */

static const double fp4_vals[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

static double fp4_decode(int c)
{
    double v = fp4_vals[c & 7];
    return c & 8 ? -v : v;
}

static int fp4_encode(double x)
{
    if (isnan(x)) return 8;
    int s = signbit(x) ? 8 : 0;
    double a = fabs(x);
    int r = 7;
    for (int i = 0; i < 7; i++) {
        double mid = (fp4_vals[i] + fp4_vals[i + 1]) / 2;
        if (a < mid || (a == mid && (i & 1) == 0)) {
            r = i;
            break;
        }
    }
    return r | s;
}

static int packed_bits(int dt)
{
    switch (dt) {
    case GRAFT_DTYPE_INT4:
    case GRAFT_DTYPE_UINT4:
    case GRAFT_DTYPE_FLOAT4E2M1: return 4;
    case GRAFT_DTYPE_INT2:
    case GRAFT_DTYPE_UINT2: return 2;
    default: return 0;
    }
}

static int packed_get(const uint8_t *p, uint64_t i, int bits)
{
    uint64_t per = 8 / (uint64_t)bits;
    return (p[i / per] >> (bits * (int)(i % per))) & ((1 << bits) - 1);
}

/* ------------------------------------------------------------ generic path */

typedef struct cast_opts {
    int saturate, rmode;
} cast_opts;

static int cast_load(const rt_tensor *t, uint64_t off, uint64_t m, double *dst)
{
    const f8fmt *f = f8_fmt(t->dtype);
    if (f) {
        const uint8_t *p = (const uint8_t *)t->data + off;
        for (uint64_t i = 0; i < m; i++) dst[i] = f8_decode(f, p[i]);
        return 1;
    }
    if (t->dtype == GRAFT_DTYPE_FLOAT8E8M0) {
        const uint8_t *p = (const uint8_t *)t->data + off;
        for (uint64_t i = 0; i < m; i++) dst[i] = e8m0_decode(p[i]);
        return 1;
    }
    int bits = packed_bits(t->dtype);
    if (bits) {
        const uint8_t *p = t->data;
        for (uint64_t i = 0; i < m; i++) {
            int c = packed_get(p, off + i, bits);
            switch (t->dtype) {
            case GRAFT_DTYPE_FLOAT4E2M1: dst[i] = fp4_decode(c); break;
            case GRAFT_DTYPE_INT4: dst[i] = c >= 8 ? c - 16 : c; break;
            case GRAFT_DTYPE_INT2: dst[i] = c >= 2 ? c - 4 : c; break;
            default: dst[i] = c; break;
            }
        }
        return 1;
    }
    return km_load_f64(t, off, m, dst);
}

static int cast_store(rt_tensor *t, uint64_t off, uint64_t m, const double *src, const cast_opts *o)
{
    const f8fmt *f = f8_fmt(t->dtype);
    if (f) {
        uint8_t *p = (uint8_t *)t->data + off;
        for (uint64_t i = 0; i < m; i++) p[i] = f8_encode(f, src[i], o->saturate);
        return 1;
    }
    if (t->dtype == GRAFT_DTYPE_FLOAT8E8M0) {
        uint8_t *p = (uint8_t *)t->data + off;
        for (uint64_t i = 0; i < m; i++) p[i] = e8m0_encode(src[i], o->saturate, o->rmode);
        return 1;
    }
    int bits = packed_bits(t->dtype);
    if (bits) {
        uint8_t *p = t->data;
        uint64_t per = 8 / (uint64_t)bits;
        int lo = 0, hi = 0;
        switch (t->dtype) {
        case GRAFT_DTYPE_INT4: lo = -8, hi = 7; break;
        case GRAFT_DTYPE_UINT4: lo = 0, hi = 15; break;
        case GRAFT_DTYPE_INT2: lo = -2, hi = 1; break;
        case GRAFT_DTYPE_UINT2: lo = 0, hi = 3; break;
        default: break;
        }
        for (uint64_t i = 0; i < m; i++) {
            int c;
            if (t->dtype == GRAFT_DTYPE_FLOAT4E2M1) {
                c = fp4_encode(src[i]);
            } else {
                double v = trunc(src[i]);
                /* out of range (undefined in ONNX): 0, as the reference does */
                c = v >= lo && v <= hi ? (int)v : 0;
            }
            uint64_t k = off + i;
            int sh = bits * (int)(k % per);
            p[k / per] = (uint8_t)((p[k / per] & ~(((1 << bits) - 1) << sh)) | ((c & ((1 << bits) - 1)) << sh));
        }
        return 1;
    }
    return km_store_f64(t, off, m, src);
}

/* ------------------------------------------------------------ plain C types */

static inline int64_t c_f2i64(double v)
{
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

static inline uint64_t c_f2u64(double v)
{
    if (v != v || v <= -1.0) return (uint64_t)c_f2i64(v);
    if (v >= 18446744073709551615.0) return UINT64_MAX;
    return (uint64_t)v;
}

#define CL(TS, TD, EXPR)                                                                   \
    do {                                                                                   \
        const TS *S_ = x->data;                                                            \
        TD *D_ = y->data;                                                                  \
        for (uint64_t i = 0; i < cnt; i++) {                                               \
            TS v = S_[i];                                                                  \
            D_[i] = (TD)(EXPR);                                                            \
        }                                                                                  \
    } while (0)

#define CAST_TO(TS, FSRC)                                                                  \
    switch (y->dtype) {                                                                    \
    case GRAFT_DTYPE_FLOAT: CL(TS, float, v); return 1;                                    \
    case GRAFT_DTYPE_DOUBLE: CL(TS, double, v); return 1;                                  \
    case GRAFT_DTYPE_INT8: CL(TS, int8_t, FSRC ? c_f2i64((double)v) : (int64_t)v); return 1; \
    case GRAFT_DTYPE_INT16: CL(TS, int16_t, FSRC ? c_f2i64((double)v) : (int64_t)v); return 1; \
    case GRAFT_DTYPE_INT32: CL(TS, int32_t, FSRC ? c_f2i64((double)v) : (int64_t)v); return 1; \
    case GRAFT_DTYPE_INT64: CL(TS, int64_t, FSRC ? c_f2i64((double)v) : (int64_t)v); return 1; \
    case GRAFT_DTYPE_UINT8: CL(TS, uint8_t, FSRC ? c_f2i64((double)v) : (int64_t)v); return 1; \
    case GRAFT_DTYPE_UINT16: CL(TS, uint16_t, FSRC ? c_f2i64((double)v) : (int64_t)v); return 1; \
    case GRAFT_DTYPE_UINT32: CL(TS, uint32_t, FSRC ? c_f2i64((double)v) : (int64_t)v); return 1; \
    case GRAFT_DTYPE_UINT64: CL(TS, uint64_t, FSRC ? c_f2u64((double)v) : (uint64_t)v); return 1; \
    case GRAFT_DTYPE_BOOL: CL(TS, uint8_t, v != 0); return 1;                              \
    default: return 0;                                                                     \
    }

/* Tight loops for pairs of plain C types; 0 when the pair is not one. */
static int cast_plain(const rt_tensor *x, rt_tensor *y)
{
    uint64_t cnt = x->numel;
    switch (x->dtype) {
    case GRAFT_DTYPE_FLOAT: CAST_TO(float, 1);
    case GRAFT_DTYPE_DOUBLE: CAST_TO(double, 1);
    case GRAFT_DTYPE_INT8: CAST_TO(int8_t, 0);
    case GRAFT_DTYPE_INT16: CAST_TO(int16_t, 0);
    case GRAFT_DTYPE_INT32: CAST_TO(int32_t, 0);
    case GRAFT_DTYPE_INT64: CAST_TO(int64_t, 0);
    case GRAFT_DTYPE_UINT8: CAST_TO(uint8_t, 0);
    case GRAFT_DTYPE_UINT16: CAST_TO(uint16_t, 0);
    case GRAFT_DTYPE_UINT32: CAST_TO(uint32_t, 0);
    case GRAFT_DTYPE_UINT64: CAST_TO(uint64_t, 0);
    case GRAFT_DTYPE_BOOL: CAST_TO(uint8_t, 0);
    default: return 0;
    }
}

static int is_half(int dt) { return dt == GRAFT_DTYPE_FLOAT16 || dt == GRAFT_DTYPE_BFLOAT16; }

static int castable(int dt)
{
    return (dt > GRAFT_DTYPE_UNDEFINED && dt <= GRAFT_DTYPE_FLOAT8E8M0 && dt != GRAFT_DTYPE_STRING &&
            dt != GRAFT_DTYPE_COMPLEX64 && dt != GRAFT_DTYPE_COMPLEX128) ||
           dt == GRAFT_DTYPE_UINT2 || dt == GRAFT_DTYPE_INT2;
}

static graft_status cast_do(rt_node *n, int to, graft_error *err)
{
    const cast_opts *o = n->state;
    rt_tensor *x = rt_in(n, 0);
    if (!x) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (!castable(x->dtype) || !castable(to))
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "cast from %s to %s", graft_dtype_name(x->dtype),
                      graft_dtype_name(to));
    if (x->dtype == to && packed_bits(to) == 0)
        return rt_out_view(n, 0, to, x->rank, x->dims, x->data, err) ? GRAFT_OK : err->code;
    rt_tensor *y = rt_out(n, 0, to, x->rank, x->dims, err);
    if (!y) return err->code;
    uint64_t cnt = x->numel;
    if (cast_plain(x, y)) return GRAFT_OK;
    if (x->dtype == GRAFT_DTYPE_FLOAT && is_half(to)) {
        km_f32_to_half(x->data, y->data, cnt, to == GRAFT_DTYPE_BFLOAT16);
        return GRAFT_OK;
    }
    if (is_half(x->dtype) && to == GRAFT_DTYPE_FLOAT) {
        km_half_to_f32(x->data, y->data, cnt, x->dtype == GRAFT_DTYPE_BFLOAT16);
        return GRAFT_OK;
    }
    if (packed_bits(to) && y->nbytes) memset(y->data, 0, y->nbytes);
    for (uint64_t base = 0; base < cnt; base += 256) {
        double buf[256];
        uint64_t m = cnt - base < 256 ? cnt - base : 256;
        if (!cast_load(x, base, m, buf) || !cast_store(y, base, m, buf, o))
            return rt_err(n, err, GRAFT_EUNSUPPORTED, "cast from %s to %s", graft_dtype_name(x->dtype),
                          graft_dtype_name(to));
    }
    return GRAFT_OK;
}

graft_status km_cast_init(rt_node *n, graft_error *err)
{
    cast_opts *o = calloc(1, sizeof *o);
    if (!o) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
    n->state = o;
    o->saturate = (int)rt_attr_int(n, "saturate", 1);
    char buf[16];
    const char *rm = rt_attr_string(n, "round_mode", buf, sizeof buf, "up");
    if (strcmp(rm, "up") == 0) o->rmode = RM_UP;
    else if (strcmp(rm, "down") == 0) o->rmode = RM_DOWN;
    else if (strcmp(rm, "nearest") == 0) o->rmode = RM_NEAREST;
    else return rt_err(n, err, GRAFT_EINVAL, "round_mode '%s'", rm);
    return GRAFT_OK;
}

graft_status km_cast_run(rt_node *n, graft_error *err)
{
    int64_t to;
    if (!graft_node_attr_int(n->src, "to", &to)) return rt_err(n, err, GRAFT_EINVAL, "no 'to' attribute");
    return cast_do(n, (int)to, err);
}

graft_status km_castlike_run(rt_node *n, graft_error *err)
{
    rt_tensor *t = rt_in(n, 1);
    if (!t) return rt_err(n, err, GRAFT_EINVAL, "missing target_type input");
    return cast_do(n, t->dtype, err);
}
