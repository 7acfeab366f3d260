/* CPU kernels: math family, reductions along axes. Reduce* (axes as
 * attribute or input, keepdims, noop_with_empty_axes), ArgMax/ArgMin,
 * CumSum, Softmax/LogSoftmax/Hardmax (flattened axis before opset 13, one
 * axis from 13) and TopK.
 *
 * Every reduction sees its input as [outer, n, inner] or, for Reduce*
 * over several separated axes, as merged groups of kept and reduced
 * dimensions. fp32 over the last axis has tight loops with several
 * partial accumulators; other cases accumulate in double. Scratch buffers
 * live in the node state and only grow. */
/* The build's -O2 vectorises only loops with known trip counts; these
 * elementwise and reduction loops are the point of this file. Set before
 * the includes so that inline helpers (km_expf) get the same options. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

#include <float.h>
#include <math.h>

#include "kernels/kmath.h"

enum {
    R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_SUMSQ,
    R_ARGMAX, R_ARGMIN, R_CUMSUM, R_SOFTMAX, R_LOGSOFTMAX, R_HARDMAX, R_TOPK,
};

typedef struct red_state {
    int op;
    int keepdims, noop, select_last, exclusive, reverse, largest;
    int64_t axis, k_attr;
    int64_t *axes; /* attribute axes (old opsets), owned */
    size_t n_axes;
    int axes_attr;  /* axes come from the attribute, not input 1 */
    void *scratch;  /* grown, never shrunk */
    size_t scap;
} red_state;

static const struct {
    const char *name;
    int op;
    int axes_input_since; /* opset from which axes is an input (Reduce*) */
} red_ops[] = {
    {"ReduceSum", R_SUM, 13}, {"ReduceMean", R_MEAN, 18}, {"ReduceMax", R_MAX, 18},
    {"ReduceMin", R_MIN, 18}, {"ReduceProd", R_PROD, 18}, {"ReduceL1", R_L1, 18},
    {"ReduceL2", R_L2, 18}, {"ReduceLogSum", R_LOGSUM, 18},
    {"ReduceLogSumExp", R_LOGSUMEXP, 18}, {"ReduceSumSquare", R_SUMSQ, 18},
    {"ArgMax", R_ARGMAX, 0}, {"ArgMin", R_ARGMIN, 0}, {"CumSum", R_CUMSUM, 0},
    {"Softmax", R_SOFTMAX, 0}, {"LogSoftmax", R_LOGSOFTMAX, 0}, {"Hardmax", R_HARDMAX, 0},
    {"TopK", R_TOPK, 0},
};

static void red_fini(rt_node *n)
{
    red_state *s = n->state;
    if (!s) return;
    free(s->axes);
    free(s->scratch);
    free(s);
}

static graft_status red_init(rt_node *n, graft_error *err)
{
    red_state *s = calloc(1, sizeof *s);
    if (!s) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
    n->state = s;
    const char *op = rt_node_op(n);
    size_t i;
    for (i = 0; i < sizeof red_ops / sizeof red_ops[0]; i++)
        if (strcmp(red_ops[i].name, op) == 0) break;
    RT_ASSERT(i < sizeof red_ops / sizeof red_ops[0]);
    s->op = red_ops[i].op;
    s->keepdims = (int)rt_attr_int(n, "keepdims", 1);
    s->noop = (int)rt_attr_int(n, "noop_with_empty_axes", 0);
    s->select_last = (int)rt_attr_int(n, "select_last_index", 0);
    s->exclusive = (int)rt_attr_int(n, "exclusive", 0);
    s->reverse = (int)rt_attr_int(n, "reverse", 0);
    s->largest = (int)rt_attr_int(n, "largest", 1);
    s->k_attr = rt_attr_int(n, "k", -1);
    int64_t def_axis = 0;
    if (s->op == R_SOFTMAX || s->op == R_LOGSOFTMAX || s->op == R_HARDMAX) def_axis = n->opset >= 13 ? -1 : 1;
    if (s->op == R_TOPK) def_axis = -1;
    s->axis = rt_attr_int(n, "axis", def_axis);
    if (s->op <= R_SUMSQ) {
        s->axes_attr = n->opset < red_ops[i].axes_input_since;
        size_t cnt;
        const int64_t *ax = rt_attr_ints(n, "axes", &cnt);
        if (ax && cnt) {
            if (!(s->axes = malloc(cnt * sizeof *ax))) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
            memcpy(s->axes, ax, cnt * sizeof *ax);
            s->n_axes = cnt;
        }
    }
    return GRAFT_OK;
}

static void *scratch(red_state *s, size_t bytes)
{
    if (bytes == 0) bytes = 64;
    if (bytes > s->scap) {
        void *p = realloc(s->scratch, bytes);
        if (!p) return NULL;
        s->scratch = p;
        s->scap = bytes;
    }
    return s->scratch;
}

#define NOMEM(n, err) rt_err(n, err, GRAFT_ENOMEM, "out of memory for scratch")

/* ------------------------------------------------------------ Reduce* */

static double red_identity(int op, int dt)
{
    switch (op) {
    case R_PROD: return 1;
    case R_MAX: return dt == GRAFT_DTYPE_BOOL ? 0 : -INFINITY;
    case R_MIN: return dt == GRAFT_DTYPE_BOOL ? 1 : INFINITY;
    default: return 0;
    }
}

/* Folds m values into acc at stride sa (0 or 1). */
static void red_fold(int op, double *acc, int64_t sa, const double *v, int64_t m, const double *mx)
{
#define FOLD(EXPR)                                                                         \
    do {                                                                                   \
        if (sa) {                                                                          \
            for (int64_t j = 0; j < m; j++) {                                              \
                double a = acc[j], x = v[j];                                               \
                acc[j] = (EXPR);                                                           \
            }                                                                              \
        } else {                                                                           \
            double a = acc[0];                                                             \
            for (int64_t j = 0; j < m; j++) {                                              \
                double x = v[j];                                                           \
                a = (EXPR);                                                                \
            }                                                                              \
            acc[0] = a;                                                                    \
        }                                                                                  \
    } while (0)
    switch (op) {
    case R_SUM:
    case R_MEAN:
    case R_LOGSUM: FOLD(a + x); break;
    case R_PROD: FOLD(a * x); break;
    case R_MAX: FOLD((x > a || x != x) ? x : a); break;
    case R_MIN: FOLD((x < a || x != x) ? x : a); break;
    case R_L1: FOLD(a + fabs(x)); break;
    case R_L2:
    case R_SUMSQ: FOLD(a + x * x); break;
    case R_LOGSUMEXP:
        /* mx: the running max at the same positions (first pass) */
        if (sa) {
            for (int64_t j = 0; j < m; j++)
                if (mx[j] != -INFINITY) acc[j] += exp(v[j] - mx[j]);
        } else {
            for (int64_t j = 0; j < m; j++)
                if (mx[0] != -INFINITY) acc[0] += exp(v[j] - mx[0]);
        }
        break;
    default: RT_ASSERT(0);
    }
#undef FOLD
}

static double red_finish(int op, double a, double count, double mx)
{
    switch (op) {
    case R_MEAN: return a / count;
    case R_L2: return sqrt(a);
    case R_LOGSUM: return log(a);
    case R_LOGSUMEXP: return mx == -INFINITY || isnan(mx) ? mx : mx + log(a);
    default: return a;
    }
}

/* fp32, reduced axes last ([outer, n]): several partial accumulators. */
static int red_f32_rows(int op, const float *x, float *y, int64_t outer, int64_t n)
{
    for (int64_t o = 0; o < outer; o++) {
        const float *r = x + o * n;
        float p[16];
        int64_t j = 0;
        switch (op) {
        case R_SUM:
        case R_MEAN:
        case R_LOGSUM:
        case R_SUMSQ:
        case R_L2:
        case R_L1: {
            for (int k = 0; k < 16; k++) p[k] = 0;
            if (op == R_SUMSQ || op == R_L2) {
                for (; j + 16 <= n; j += 16)
                    for (int k = 0; k < 16; k++) p[k] += r[j + k] * r[j + k];
            } else if (op == R_L1) {
                for (; j + 16 <= n; j += 16)
                    for (int k = 0; k < 16; k++) p[k] += fabsf(r[j + k]);
            } else {
                for (; j + 16 <= n; j += 16)
                    for (int k = 0; k < 16; k++) p[k] += r[j + k];
            }
            double s = 0;
            for (int k = 0; k < 16; k++) s += p[k];
            for (; j < n; j++) s += op == R_SUMSQ || op == R_L2 ? (double)r[j] * r[j] : op == R_L1 ? fabsf(r[j]) : r[j];
            y[o] = (float)red_finish(op, s, (double)n, 0);
            break;
        }
        case R_MAX:
        case R_MIN: {
            float m = op == R_MAX ? -INFINITY : INFINITY;
            int nan = 0;
            for (; j < n; j++) {
                float v = r[j];
                nan |= v != v;
                m = op == R_MAX ? (v > m ? v : m) : (v < m ? v : m);
            }
            y[o] = nan ? NAN : m;
            break;
        }
        default: return 0;
        }
    }
    return 1;
}

static graft_status reduce_run(rt_node *n, graft_error *err)
{
    red_state *s = n->state;
    rt_tensor *x = rt_in(n, 0);
    if (!x) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    int r = x->rank;
    int64_t axes[RT_MAX_RANK * 2];
    int64_t na = 0;
    if (s->axes_attr) {
        if (s->n_axes > RT_MAX_RANK * 2) return rt_err(n, err, GRAFT_EINVAL, "too many axes");
        na = (int64_t)s->n_axes;
        if (na) memcpy(axes, s->axes, (size_t)na * sizeof *axes);
    } else {
        rt_tensor *a = rt_in(n, 1);
        if (a) {
            na = rt_read_ints(a, axes, RT_MAX_RANK * 2);
            if (na < 0) return rt_err(n, err, GRAFT_EINVAL, "axes of type %s", graft_dtype_name(a->dtype));
            if (na > RT_MAX_RANK * 2) return rt_err(n, err, GRAFT_EINVAL, "too many axes");
        }
    }
    int red[RT_MAX_RANK] = {0};
    if (na == 0) {
        if (s->noop) return rt_out_view(n, 0, x->dtype, x->rank, x->dims, x->data, err) ? GRAFT_OK : err->code;
        for (int d = 0; d < r; d++) red[d] = 1;
    }
    for (int64_t i = 0; i < na; i++) {
        int ax = k_axis(axes[i], r);
        if (ax < 0) return rt_err(n, err, GRAFT_EINVAL, "axis %lld out of range", (long long)axes[i]);
        red[ax] = 1;
    }
    int64_t od[RT_MAX_RANK];
    int orank = 0;
    uint64_t count = 1;
    for (int d = 0; d < r; d++) {
        if (red[d]) {
            count *= (uint64_t)x->dims[d];
            if (s->keepdims) od[orank++] = 1;
        } else {
            od[orank++] = x->dims[d];
        }
    }
    int odt = x->dtype;
    rt_tensor *y = rt_out(n, 0, odt, orank, od, err);
    if (!y) return err->code;
    uint64_t on = y->numel;
    if (on == 0) return GRAFT_OK;

    /* merge into groups of kept / reduced dimensions (unit dims dropped) */
    int64_t gd[RT_MAX_RANK];
    int gr[RT_MAX_RANK], ng = 0;
    for (int d = 0; d < r; d++) {
        if (x->dims[d] == 1) continue;
        if (ng && gr[ng - 1] == red[d]) {
            gd[ng - 1] *= x->dims[d];
        } else {
            gd[ng] = x->dims[d];
            gr[ng] = red[d];
            ng++;
        }
    }
    int op = s->op;
    /* fast path: fp32, one reduced group at the end */
    if (x->dtype == GRAFT_DTYPE_FLOAT && count > 0 && ng >= 1 && gr[ng - 1] && (ng == 1 || (ng == 2 && !gr[0])) &&
        red_f32_rows(op, x->data, y->data, (int64_t)on, gd[ng - 1]))
        return GRAFT_OK;

    int lse = op == R_LOGSUMEXP;
    double *acc = scratch(s, (size_t)on * sizeof(double) * (lse ? 2 : 1) + KM_BLOCK_BYTES);
    if (!acc) return NOMEM(n, err);
    double *mx = lse ? acc + on : NULL;
    double *buf = (lse ? acc + 2 * on : acc + on);
    double ident = red_identity(op, x->dtype);
    for (uint64_t i = 0; i < on; i++) acc[i] = ident;
    if (mx)
        for (uint64_t i = 0; i < on; i++) mx[i] = -INFINITY;
    if (count > 0) {
        /* output strides per group: 0 on reduced groups */
        int64_t ost[RT_MAX_RANK];
        int64_t sacc = 1;
        if (ng == 0) {
            gd[0] = 1;
            gr[0] = 1;
            ng = 1;
        }
        for (int g = ng - 1; g >= 0; g--) {
            ost[g] = gr[g] ? 0 : sacc;
            if (!gr[g]) sacc *= gd[g];
        }
        int passes = lse ? 2 : 1;
        for (int pass = 0; pass < passes; pass++) {
            int pop = lse && pass == 0 ? R_MAX : op;
            double *tgt = lse && pass == 0 ? mx : acc;
            int64_t inner = gd[ng - 1], sin = ost[ng - 1] ? 1 : 0, idx[RT_MAX_RANK] = {0};
            uint64_t rows = x->numel / (uint64_t)inner, off = 0;
            for (uint64_t row = 0; row < rows; row++) {
                int64_t ob = 0;
                for (int g = 0; g < ng - 1; g++) ob += idx[g] * ost[g];
                for (int64_t b = 0; b < inner; b += KM_BLOCK) {
                    int64_t m = inner - b < KM_BLOCK ? inner - b : KM_BLOCK;
                    if (!km_load_f64(x, off + (uint64_t)b, (uint64_t)m, buf))
                        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported",
                                      graft_dtype_name(x->dtype));
                    int64_t o0 = ob + (sin ? b : 0);
                    red_fold(pop, tgt + o0, sin, buf, m, pop == R_LOGSUMEXP ? mx + o0 : NULL);
                }
                off += (uint64_t)inner;
                k_next(ng - 1, gd, idx);
            }
        }
    }
    for (uint64_t i = 0; i < on; i++) acc[i] = red_finish(op, acc[i], (double)count, mx ? mx[i] : 0);
    if (!km_store_f64(y, 0, on, acc))
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(x->dtype));
    return GRAFT_OK;
}

/* ------------------------------------------------------------ [outer, n, inner] views */

static void split3(const rt_tensor *x, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= x->dims[d];
    for (int d = axis + 1; d < x->rank; d++) *inner *= x->dims[d];
    *len = x->dims[axis];
}

/* ------------------------------------------------------------ ArgMax / ArgMin */

static graft_status arg_run(rt_node *n, graft_error *err)
{
    red_state *s = n->state;
    rt_tensor *x = rt_in(n, 0);
    if (!x) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    int axis = k_axis(s->axis, x->rank);
    if (axis < 0) return rt_err(n, err, GRAFT_EINVAL, "axis %lld out of range", (long long)s->axis);
    int64_t outer, len, inner, od[RT_MAX_RANK];
    split3(x, axis, &outer, &len, &inner);
    int orank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d != axis) od[orank++] = x->dims[d];
        else if (s->keepdims) od[orank++] = 1;
    }
    rt_tensor *y = rt_out(n, 0, GRAFT_DTYPE_INT64, orank, od, err);
    if (!y) return err->code;
    if (y->numel == 0) return GRAFT_OK;
    if (len == 0) return rt_err(n, err, GRAFT_EINVAL, "reduction over an empty axis");
    int mx = s->op == R_ARGMAX, last = s->select_last;
    int64_t *out = y->data;
    double *best = scratch(s, (size_t)(inner + KM_BLOCK) * sizeof(double));
    if (!best) return NOMEM(n, err);
    double *buf = best + inner;
    for (int64_t o = 0; o < outer; o++) {
        int64_t *oi = out + o * inner;
        for (int64_t r = 0; r < len; r++) {
            for (int64_t b = 0; b < inner; b += KM_BLOCK) {
                int64_t m = inner - b < KM_BLOCK ? inner - b : KM_BLOCK;
                if (!km_load_f64(x, (uint64_t)((o * len + r) * inner + b), (uint64_t)m, buf))
                    return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(x->dtype));
                for (int64_t j = 0; j < m; j++) {
                    double v = buf[j], c = best[b + j];
                    int take = r == 0 || (mx ? (last ? v >= c : v > c) : (last ? v <= c : v < c));
                    if (take) {
                        best[b + j] = v;
                        oi[b + j] = r;
                    }
                }
            }
        }
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ CumSum */

#define CUMSUM(T, ACC)                                                                     \
    do {                                                                                   \
        const T *X = x->data;                                                              \
        T *Y = y->data;                                                                    \
        for (int64_t o = 0; o < outer; o++)                                                \
            for (int64_t i = 0; i < inner; i++) {                                          \
                ACC a = 0;                                                                 \
                for (int64_t k = 0; k < len; k++) {                                        \
                    int64_t r = s->reverse ? len - 1 - k : k;                              \
                    int64_t p = (o * len + r) * inner + i;                                 \
                    ACC v = (ACC)X[p];                                                     \
                    if (s->exclusive) {                                                    \
                        Y[p] = (T)a;                                                       \
                        a = (ACC)(a + v);                                                  \
                    } else {                                                               \
                        a = (ACC)(a + v);                                                  \
                        Y[p] = (T)a;                                                       \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
    } while (0)

static graft_status cumsum_run(rt_node *n, graft_error *err)
{
    red_state *s = n->state;
    rt_tensor *x = rt_in(n, 0), *at = rt_in(n, 1);
    if (!x || !at) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    int64_t ax;
    if (at->numel != 1 || rt_read_ints(at, &ax, 1) != 1)
        return rt_err(n, err, GRAFT_EINVAL, "axis must be one int32 or int64");
    int axis = k_axis(ax, x->rank);
    if (axis < 0) return rt_err(n, err, GRAFT_EINVAL, "axis %lld out of range", (long long)ax);
    rt_tensor *y = rt_out(n, 0, x->dtype, x->rank, x->dims, err);
    if (!y) return err->code;
    int64_t outer, len, inner;
    split3(x, axis, &outer, &len, &inner);
    switch (x->dtype) {
    case GRAFT_DTYPE_FLOAT: CUMSUM(float, float); break;
    case GRAFT_DTYPE_DOUBLE: CUMSUM(double, double); break;
    case GRAFT_DTYPE_INT32: CUMSUM(int32_t, uint32_t); break;
    case GRAFT_DTYPE_INT64: CUMSUM(int64_t, uint64_t); break;
    case GRAFT_DTYPE_UINT32: CUMSUM(uint32_t, uint32_t); break;
    case GRAFT_DTYPE_UINT64: CUMSUM(uint64_t, uint64_t); break;
    case GRAFT_DTYPE_FLOAT16:
    case GRAFT_DTYPE_BFLOAT16: {
        int bf = x->dtype == GRAFT_DTYPE_BFLOAT16;
        const uint16_t *X = x->data;
        uint16_t *Y = y->data;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                float a = 0;
                for (int64_t k = 0; k < len; k++) {
                    int64_t r = s->reverse ? len - 1 - k : k;
                    int64_t p = (o * len + r) * inner + i;
                    float v;
                    km_half_to_f32(X + p, &v, 1, bf);
                    float w = s->exclusive ? a : a + v;
                    a += v;
                    km_f32_to_half(&w, Y + p, 1, bf);
                }
            }
        break;
    }
    default:
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(x->dtype));
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Softmax family */

/* Sum of n floats with 16 partial sums (vectorises). */
static float sum_f32(const float *x, int64_t n)
{
    float p[16] = {0}, s = 0;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int k = 0; k < 16; k++) p[k] += x[j + k];
    for (int k = 0; k < 16; k++) s += p[k];
    for (; j < n; j++) s += x[j];
    return s;
}

/* One row of n contiguous floats, in place allowed. */
static void softmax_row_f32(int op, const float *x, float *y, int64_t n)
{
    float m = -INFINITY;
    int64_t am = 0;
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    if (op == R_HARDMAX) {
        for (int64_t j = 0; j < n; j++)
            if (x[j] == m) {
                am = j;
                break;
            }
        for (int64_t j = 0; j < n; j++) y[j] = 0;
        if (n) y[am] = 1;
        return;
    }
    if (op == R_SOFTMAX) {
        for (int64_t j = 0; j < n; j++) y[j] = km_expf(x[j] - m);
        float inv = 1.0f / sum_f32(y, n);
        for (int64_t j = 0; j < n; j++) y[j] *= inv;
    } else {
        float sum = 0, p[16] = {0};
        int64_t j = 0;
        for (; j + 16 <= n; j += 16)
            for (int k = 0; k < 16; k++) p[k] += km_expf(x[j + k] - m);
        for (int k = 0; k < 16; k++) sum += p[k];
        for (; j < n; j++) sum += km_expf(x[j] - m);
        float ls = m + logf(sum);
        for (j = 0; j < n; j++) y[j] = x[j] - ls;
    }
}

static void softmax_row_f64(int op, const double *x, double *y, int64_t n)
{
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; j++)
        if (x[j] > m) m = x[j];
    if (op == R_HARDMAX) {
        int64_t am = 0;
        for (int64_t j = 0; j < n; j++)
            if (x[j] == m) {
                am = j;
                break;
            }
        for (int64_t j = 0; j < n; j++) y[j] = 0;
        if (n) y[am] = 1;
        return;
    }
    if (op == R_SOFTMAX) {
        for (int64_t j = 0; j < n; j++) sum += (y[j] = exp(x[j] - m));
        for (int64_t j = 0; j < n; j++) y[j] /= sum;
    } else {
        for (int64_t j = 0; j < n; j++) sum += exp(x[j] - m);
        double ls = m + log(sum);
        for (int64_t j = 0; j < n; j++) y[j] = x[j] - ls;
    }
}

/* fp16/bf16 rows: every step rounded to the storage type, as the ONNX
 * reference does (x - max, exp, the sum: bf16 added pairwise in bf16,
 * fp16 summed in fp32; the quotient; the log). */
static float rnd_half(float v, int bf)
{
    uint16_t h;
    km_f32_to_half(&v, &h, 1, bf);
    km_half_to_f32(&h, &v, 1, bf);
    return v;
}

static void softmax_row_half(int op, float *x, int64_t n, int bf)
{
    if (op == R_HARDMAX) {
        softmax_row_f32(op, x, x, n);
        return;
    }
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        if (x[j] > m) m = x[j];
    float sum = 0;
    for (int64_t j = 0; j < n; j++) {
        x[j] = rnd_half(expf(rnd_half(x[j] - m, bf)), bf);
        sum = bf ? rnd_half(sum + x[j], bf) : sum + x[j];
    }
    sum = rnd_half(sum, bf);
    for (int64_t j = 0; j < n; j++) {
        float q = rnd_half(x[j] / sum, bf);
        x[j] = op == R_LOGSOFTMAX ? logf(q) : q;
    }
}

static graft_status softmax_run(rt_node *n, graft_error *err)
{
    red_state *s = n->state;
    rt_tensor *x = rt_in(n, 0);
    if (!x) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    int r = x->rank;
    int axis = k_axis(s->axis, r == 0 ? 1 : r);
    if (axis < 0 || (r == 0 && n->opset >= 13)) return rt_err(n, err, GRAFT_EINVAL, "axis %lld out of range", (long long)s->axis);
    rt_tensor *y = rt_out(n, 0, x->dtype, x->rank, x->dims, err);
    if (!y) return err->code;
    int64_t outer = 1, len = 1, inner = 1;
    if (n->opset < 13) {
        for (int d = 0; d < axis; d++) outer *= x->dims[d];
        for (int d = axis; d < r; d++) len *= x->dims[d];
    } else {
        split3(x, axis, &outer, &len, &inner);
    }
    if (y->numel == 0) return GRAFT_OK;
    int op = s->op, dt = x->dtype;
    if (dt == GRAFT_DTYPE_FLOAT && inner == 1) {
        for (int64_t o = 0; o < outer; o++)
            softmax_row_f32(op, (const float *)x->data + o * len, (float *)y->data + o * len, len);
        return GRAFT_OK;
    }
    if (dt != GRAFT_DTYPE_FLOAT && dt != GRAFT_DTYPE_DOUBLE && dt != GRAFT_DTYPE_FLOAT16 && dt != GRAFT_DTYPE_BFLOAT16)
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(dt));
    /* gather each (outer, inner) row into a buffer of doubles or floats */
    double *row = scratch(s, (size_t)len * sizeof(double) * 2);
    if (!row) return NOMEM(n, err);
    int bf = dt == GRAFT_DTYPE_BFLOAT16;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            if (dt == GRAFT_DTYPE_DOUBLE) {
                const double *X = x->data;
                double *Y = y->data;
                for (int64_t j = 0; j < len; j++) row[j] = X[base + j * inner];
                softmax_row_f64(op, row, row, len);
                for (int64_t j = 0; j < len; j++) Y[base + j * inner] = row[j];
            } else {
                float *fr = (float *)row;
                if (dt == GRAFT_DTYPE_FLOAT) {
                    const float *X = x->data;
                    for (int64_t j = 0; j < len; j++) fr[j] = X[base + j * inner];
                } else {
                    const uint16_t *X = x->data;
                    for (int64_t j = 0; j < len; j++) km_half_to_f32(X + base + j * inner, fr + j, 1, bf);
                }
                if (dt == GRAFT_DTYPE_FLOAT) softmax_row_f32(op, fr, fr, len);
                else softmax_row_half(op, fr, len, bf);
                if (dt == GRAFT_DTYPE_FLOAT) {
                    float *Y = y->data;
                    for (int64_t j = 0; j < len; j++) Y[base + j * inner] = fr[j];
                } else {
                    uint16_t *Y = y->data;
                    for (int64_t j = 0; j < len; j++) km_f32_to_half(fr + j, Y + base + j * inner, 1, bf);
                }
            }
        }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ TopK */

typedef struct tk_item {
    uint64_t key; /* order-preserving image of the value */
    int64_t idx;
} tk_item;

/* a ranks before b: larger key, then smaller index */
static inline int tk_before(const tk_item *a, const tk_item *b)
{
    return a->key > b->key || (a->key == b->key && a->idx < b->idx);
}

/* min-heap on rank: the root is the worst item kept */
static void tk_sift_down(tk_item *h, int64_t n, int64_t i)
{
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && tk_before(&h[w], &h[l])) w = l;
        if (r < n && tk_before(&h[w], &h[r])) w = r;
        if (w == i) return;
        tk_item t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void tk_sift_up(tk_item *h, int64_t i)
{
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!tk_before(&h[p], &h[i])) return;
        tk_item t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

static int tk_key(const rt_tensor *x, uint64_t p, uint64_t *key)
{
    double d;
    uint64_t b;
    switch (x->dtype) {
    case GRAFT_DTYPE_INT8: b = (uint64_t)(int64_t)((const int8_t *)x->data)[p]; goto sgn;
    case GRAFT_DTYPE_INT16: b = (uint64_t)(int64_t)((const int16_t *)x->data)[p]; goto sgn;
    case GRAFT_DTYPE_INT32: b = (uint64_t)(int64_t)((const int32_t *)x->data)[p]; goto sgn;
    case GRAFT_DTYPE_INT64: b = (uint64_t)((const int64_t *)x->data)[p]; goto sgn;
    case GRAFT_DTYPE_UINT8: *key = ((const uint8_t *)x->data)[p]; return 1;
    case GRAFT_DTYPE_UINT16: *key = ((const uint16_t *)x->data)[p]; return 1;
    case GRAFT_DTYPE_UINT32: *key = ((const uint32_t *)x->data)[p]; return 1;
    case GRAFT_DTYPE_UINT64: *key = ((const uint64_t *)x->data)[p]; return 1;
    default: {
        rt_tensor t = *x;
        if (!km_load_f64(&t, p, 1, &d)) return 0;
        memcpy(&b, &d, 8);
        *key = (b >> 63) ? ~b : b | (1ull << 63);
        return 1;
    }
    }
sgn:
    *key = b ^ (1ull << 63);
    return 1;
}

static graft_status topk_run(rt_node *n, graft_error *err)
{
    red_state *s = n->state;
    rt_tensor *x = rt_in(n, 0);
    if (!x) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    int64_t k = s->k_attr;
    if (n->opset >= 10) {
        rt_tensor *kt = rt_in(n, 1);
        if (!kt || kt->numel != 1 || rt_read_ints(kt, &k, 1) != 1)
            return rt_err(n, err, GRAFT_EINVAL, "K must be one int64");
    }
    int axis = k_axis(s->axis, x->rank);
    if (axis < 0) return rt_err(n, err, GRAFT_EINVAL, "axis %lld out of range", (long long)s->axis);
    if (k < 0 || k > x->dims[axis])
        return rt_err(n, err, GRAFT_EINVAL, "K=%lld for an axis of %lld", (long long)k, (long long)x->dims[axis]);
    size_t esz = rt_dtype_size(x->dtype);
    if (!esz || x->dtype == GRAFT_DTYPE_BOOL)
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(x->dtype));
    int64_t od[RT_MAX_RANK];
    memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->rank);
    od[axis] = k;
    rt_tensor *v = rt_out(n, 0, x->dtype, x->rank, od, err);
    if (!v) return err->code;
    rt_tensor *ix = rt_out(n, 1, GRAFT_DTYPE_INT64, x->rank, od, err);
    if (!ix) return err->code;
    if (k == 0 || v->numel == 0) return GRAFT_OK;
    int64_t outer, len, inner;
    split3(x, axis, &outer, &len, &inner);
    tk_item *h = scratch(s, (size_t)k * sizeof *h);
    if (!h) return NOMEM(n, err);
    int64_t *I = ix->data;
    char *V = v->data;
    const char *X = x->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t cnt = 0;
            for (int64_t j = 0; j < len; j++) {
                tk_item it;
                uint64_t p = (uint64_t)((o * len + j) * inner + i);
                if (!tk_key(x, p, &it.key))
                    return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(x->dtype));
                if (!s->largest) it.key = ~it.key;
                it.idx = j;
                if (cnt < k) {
                    h[cnt] = it;
                    tk_sift_up(h, cnt);
                    cnt++;
                } else if (tk_before(&it, &h[0])) {
                    h[0] = it;
                    tk_sift_down(h, k, 0);
                }
            }
            /* pop worst first: fills the output from the back */
            for (int64_t m = k; m > 0; m--) {
                tk_item w = h[0];
                h[0] = h[m - 1];
                tk_sift_down(h, m - 1, 0);
                uint64_t q = (uint64_t)((o * k + (m - 1)) * inner + i);
                I[q] = w.idx;
                memcpy(V + q * esz, X + (size_t)((o * len + w.idx) * inner + i) * esz, esz);
            }
        }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ kernel table */

const rt_kernel rt_kernels_math_reduce[] = {
    {"", "ReduceSum", 1, 0, red_init, reduce_run, red_fini},
    {"", "ReduceMean", 1, 0, red_init, reduce_run, red_fini},
    {"", "ReduceMax", 1, 0, red_init, reduce_run, red_fini},
    {"", "ReduceMin", 1, 0, red_init, reduce_run, red_fini},
    {"", "ReduceProd", 1, 0, red_init, reduce_run, red_fini},
    {"", "ReduceL1", 1, 0, red_init, reduce_run, red_fini},
    {"", "ReduceL2", 1, 0, red_init, reduce_run, red_fini},
    {"", "ReduceLogSum", 1, 0, red_init, reduce_run, red_fini},
    {"", "ReduceLogSumExp", 1, 0, red_init, reduce_run, red_fini},
    {"", "ReduceSumSquare", 1, 0, red_init, reduce_run, red_fini},
    {"", "ArgMax", 1, 0, red_init, arg_run, red_fini},
    {"", "ArgMin", 1, 0, red_init, arg_run, red_fini},
    {"", "CumSum", 11, 0, red_init, cumsum_run, red_fini},
    {"", "Softmax", 1, 0, red_init, softmax_run, red_fini},
    {"", "LogSoftmax", 1, 0, red_init, softmax_run, red_fini},
    {"", "Hardmax", 1, 0, red_init, softmax_run, red_fini},
    {"", "TopK", 1, 0, red_init, topk_run, red_fini},
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};
