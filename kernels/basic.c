/* Basic kernels: Identity, Constant, and binary arithmetic with numpy
 * broadcasting (Add, Sub, Mul, Div) over the common numeric types. */
#include <math.h>

#include "kernels/gemm.h"
#include "kernels/kcommon.h"

int k_broadcast(int ra, const int64_t *da, int rb, const int64_t *db, int *ro, int64_t *dout)
{
    int r = ra > rb ? ra : rb;
    if (r > RT_MAX_RANK) return 0;
    for (int i = 0; i < r; i++) {
        int64_t x = i - (r - ra) >= 0 ? da[i - (r - ra)] : 1;
        int64_t y = i - (r - rb) >= 0 ? db[i - (r - rb)] : 1;
        if (x != y && x != 1 && y != 1) return 0;
        dout[i] = x == 1 ? y : x;
    }
    *ro = r;
    return 1;
}

void k_bstrides(int r, const int64_t *dims, int ro, const int64_t *dout, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ro - 1; i >= 0; i--) {
        int j = i - (ro - r);
        if (j < 0 || dims[j] == 1) {
            strides[i] = 0;
        } else {
            strides[i] = s;
        }
        if (j >= 0) s *= dims[j];
    }
    (void)dout;
}

/* ------------------------------------------------------------ Identity */

static graft_status identity_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    return rt_out_view(n, 0, x->dtype, x->rank, x->dims, x->data, err) ? GRAFT_OK : err->code;
}

/* ------------------------------------------------------------ Constant */

typedef struct const_state {
    int dtype, rank;
    int64_t dims[RT_MAX_RANK];
    void *data;
} const_state;

static graft_status constant_init(rt_node *n, graft_error *err)
{
    const_state *st = calloc(1, sizeof *st);
    if (!st) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
    n->state = st;
    graft_tensor *t = graft_node_attr_tensor(n->g, n->src, "value");
    size_t cnt;
    const float *fs;
    const int64_t *is;
    float f;
    int64_t iv;
    if (t) {
        if (graft_tensor_rank(t) > RT_MAX_RANK || graft_dtype_bits(graft_tensor_dtype(t)) == 0)
            return rt_err(n, err, GRAFT_EUNSUPPORTED, "value of type %s, rank %d",
                          graft_dtype_name(graft_tensor_dtype(t)), graft_tensor_rank(t));
        st->dtype = graft_tensor_dtype(t);
        st->rank = graft_tensor_rank(t);
        memcpy(st->dims, graft_tensor_dims(t), (size_t)st->rank * sizeof(int64_t));
        size_t nb = (size_t)graft_tensor_nbytes(t);
        if (!(st->data = malloc(nb ? nb : 1))) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
        return graft_tensor_read(t, st->data, nb, err);
    }
    if (graft_node_attr_float(n->src, "value_float", &f)) {
        st->dtype = GRAFT_DTYPE_FLOAT;
        if (!(st->data = malloc(4))) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
        memcpy(st->data, &f, 4);
        return GRAFT_OK;
    }
    if (graft_node_attr_int(n->src, "value_int", &iv)) {
        st->dtype = GRAFT_DTYPE_INT64;
        if (!(st->data = malloc(8))) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
        memcpy(st->data, &iv, 8);
        return GRAFT_OK;
    }
    if ((fs = rt_attr_floats(n, "value_floats", &cnt)) || graft_node_attr_floats(n->src, "value_floats", &fs, &cnt)) {
        st->dtype = GRAFT_DTYPE_FLOAT;
        st->rank = 1;
        st->dims[0] = (int64_t)cnt;
        if (!(st->data = malloc(cnt * 4 + 1))) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
        if (cnt) memcpy(st->data, fs, cnt * 4);
        return GRAFT_OK;
    }
    if (graft_node_attr_ints(n->src, "value_ints", &is, &cnt)) {
        st->dtype = GRAFT_DTYPE_INT64;
        st->rank = 1;
        st->dims[0] = (int64_t)cnt;
        if (!(st->data = malloc(cnt * 8 + 1))) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
        if (cnt) memcpy(st->data, is, cnt * 8);
        return GRAFT_OK;
    }
    return rt_err(n, err, GRAFT_EUNSUPPORTED, "no supported value attribute (string or sparse?)");
}

static void constant_fini(rt_node *n)
{
    const_state *st = n->state;
    if (st) free(st->data);
    free(st);
}

static graft_status constant_run(rt_node *n, graft_error *err)
{
    const_state *st = n->state;
    return rt_out_view(n, 0, st->dtype, st->rank, st->dims, st->data, err) ? GRAFT_OK : err->code;
}

/* ------------------------------------------------------------ binary arithmetic */

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV };

#define BIN_LOOP(T, EXPR)                                                                  \
    do {                                                                                   \
        const T *A = a->data, *B = b->data;                                                \
        T *O = o->data;                                                                    \
        if (a->numel == o->numel && b->numel == o->numel) {                                \
            for (uint64_t i = 0; i < o->numel; i++) {                                      \
                T x = A[i], y = B[i];                                                      \
                O[i] = (EXPR);                                                             \
            }                                                                              \
        } else if (b->numel == 1 && a->numel == o->numel) {                                \
            T y = B[0];                                                                    \
            for (uint64_t i = 0; i < o->numel; i++) {                                      \
                T x = A[i];                                                                \
                O[i] = (EXPR);                                                             \
            }                                                                              \
        } else {                                                                           \
            int64_t idx[RT_MAX_RANK] = {0};                                                \
            uint64_t i = 0;                                                                \
            if (o->numel)                                                                  \
                do {                                                                       \
                    int64_t ia = 0, ib = 0;                                                \
                    for (int d = 0; d < o->rank; d++) {                                    \
                        ia += idx[d] * sa[d];                                              \
                        ib += idx[d] * sb[d];                                              \
                    }                                                                      \
                    T x = A[ia], y = B[ib];                                                \
                    O[i++] = (EXPR);                                                       \
                } while (k_next(o->rank, o->dims, idx));                                   \
        }                                                                                  \
    } while (0)

#define BIN_OPS(T)                                                                         \
    switch (op) {                                                                          \
    case OP_ADD: BIN_LOOP(T, x + y); break;                                                \
    case OP_SUB: BIN_LOOP(T, x - y); break;                                                \
    case OP_MUL: BIN_LOOP(T, x * y); break;                                                \
    default: BIN_LOOP(T, x / y); break;                                                    \
    }

/* integer division by zero is undefined in C: define it as 0 */
#define IDIV_OPS(T)                                                                        \
    switch (op) {                                                                          \
    case OP_ADD: BIN_LOOP(T, (T)(x + y)); break;                                           \
    case OP_SUB: BIN_LOOP(T, (T)(x - y)); break;                                           \
    case OP_MUL: BIN_LOOP(T, (T)(x * y)); break;                                           \
    default: BIN_LOOP(T, y ? (T)(x / y) : (T)0); break;                                    \
    }

#define HALF_OPS(TO, FROM)                                                                 \
    switch (op) {                                                                          \
    case OP_ADD: BIN_LOOP(uint16_t, TO(FROM(x) + FROM(y))); break;                         \
    case OP_SUB: BIN_LOOP(uint16_t, TO(FROM(x) - FROM(y))); break;                         \
    case OP_MUL: BIN_LOOP(uint16_t, TO(FROM(x) * FROM(y))); break;                         \
    default: BIN_LOOP(uint16_t, TO(FROM(x) / FROM(y))); break;                             \
    }

/* Float operands that are, over rows of the output's last dimension D,
 * each either the full tensor, one value, one row repeated (shape [D]), or
 * one value per row (shape [..., 1]): element (r, c) of X at
 * X[r * rs + c * cs]. AVX2 loops (elementwise: the same result per element
 * as the scalar form), rows spread on the pool when large. */
#define BIN_CHUNK 4096
typedef struct fbin_job {
    int op;
    const float *a, *b;
    int64_t ars, acs, brs, bcs;
    float *o;
    int64_t R, D, rows_per_task;
} fbin_job;

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FBIN_OP(OPV, OPS)                                                                  \
    for (; c + 8 <= D; c += 8) {                                                           \
        __m256 x = acs ? _mm256_loadu_ps(a + c) : _mm256_set1_ps(a[0]);                    \
        __m256 y = bcs ? _mm256_loadu_ps(b + c) : _mm256_set1_ps(b[0]);                    \
        _mm256_storeu_ps(o + c, OPV(x, y));                                                \
    }                                                                                      \
    for (; c < D; c++) o[c] = a[c * acs] OPS b[c * bcs];
__attribute__((target("avx2"))) static void fbin_row_avx2(int op, const float *a, int64_t acs, const float *b,
                                                          int64_t bcs, float *o, int64_t D)
{
    int64_t c = 0;
    switch (op) {
    case OP_ADD: FBIN_OP(_mm256_add_ps, +); break;
    case OP_SUB: FBIN_OP(_mm256_sub_ps, -); break;
    case OP_MUL: FBIN_OP(_mm256_mul_ps, *); break;
    default: FBIN_OP(_mm256_div_ps, /); break;
    }
}
#define FBIN_X86 1
#endif

static void fbin_rows(const fbin_job *j, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++) {
        const float *a = j->a + r * j->ars, *b = j->b + r * j->brs;
        float *o = j->o + r * j->D;
        int64_t D = j->D, acs = j->acs, bcs = j->bcs;
#ifdef FBIN_X86
        if (k_have_avx2()) {
            fbin_row_avx2(j->op, a, acs, b, bcs, o, D);
            continue;
        }
#endif
        switch (j->op) {
        case OP_ADD: for (int64_t c = 0; c < D; c++) o[c] = a[c * acs] + b[c * bcs]; break;
        case OP_SUB: for (int64_t c = 0; c < D; c++) o[c] = a[c * acs] - b[c * bcs]; break;
        case OP_MUL: for (int64_t c = 0; c < D; c++) o[c] = a[c * acs] * b[c * bcs]; break;
        default: for (int64_t c = 0; c < D; c++) o[c] = a[c * acs] / b[c * bcs]; break;
        }
    }
}

static void fbin_task(void *ctx, int64_t t)
{
    const fbin_job *j = ctx;
    int64_t r0 = t * j->rows_per_task, r1 = r0 + j->rows_per_task < j->R ? r0 + j->rows_per_task : j->R;
    fbin_rows(j, r0, r1);
}

/* The (row, column) strides of operand x over rows of D in output o (see
 * fbin_job); 0 when x is not one of the four forms. */
static int fbin_form(const rt_tensor *x, const int64_t *sx, const rt_tensor *o, int64_t D, int64_t *rs, int64_t *cs)
{
    int ro = o->rank;
    if (x->numel == o->numel) { /* broadcast to the same count: the same shape */
        *rs = D, *cs = 1;
        return 1;
    }
    if (x->numel == 1) {
        *rs = 0, *cs = 0;
        return 1;
    }
    int64_t st = 1;
    int row = sx[ro - 1] == 1 && (int64_t)x->numel == D, col = sx[ro - 1] == 0;
    for (int d = ro - 2; d >= 0; d--) {
        if (sx[d] != 0) row = 0;
        if (o->dims[d] > 1 && sx[d] != st) col = 0;
        st *= o->dims[d];
    }
    if (row) {
        *rs = 0, *cs = 1;
        return 1;
    }
    if (col && (int64_t)x->numel * D == (int64_t)o->numel) {
        *rs = 1, *cs = 0;
        return 1;
    }
    return 0;
}

static _Thread_local k_buf tl_half[3];

/* The vector path of binary_run over float arrays A, B (the operands' data
 * or their fp32 copies) into O: 1 when the operands' forms allow it (then
 * O is written), 0 otherwise (nothing written). */
static int fbin_float(int op, const rt_tensor *a, const int64_t *sa, const float *A, const rt_tensor *b,
                      const int64_t *sb, const float *B, const rt_tensor *o, float *O)
{
    int ro = o->rank;
    fbin_job j = {op, A, B, 0, 0, 0, 0, O, 0, o->dims[ro - 1], 0};
    j.R = (int64_t)o->numel / j.D;
    if (!fbin_form(a, sa, o, j.D, &j.ars, &j.acs) || !fbin_form(b, sb, o, j.D, &j.brs, &j.bcs)) return 0;
    if (j.acs == 1 && j.bcs == 1 && j.ars == j.D && j.brs == j.D) { /* both full: one long row */
        j.D = (int64_t)o->numel, j.R = 1, j.ars = j.brs = 0;
        int64_t ch = (j.D + BIN_CHUNK - 1) / BIN_CHUNK;
        if (ch >= 16 && k_threads() > 1) { /* chunks as rows of BIN_CHUNK (below 64K: a wake-up costs more) */
            j.R = ch;
            j.D = BIN_CHUNK;
            j.ars = j.brs = BIN_CHUNK;
            if ((int64_t)o->numel % BIN_CHUNK) { /* the ragged tail on this thread */
                j.R = ch - 1;
                fbin_job t = j;
                t.a += j.R * BIN_CHUNK, t.b += j.R * BIN_CHUNK, t.o += j.R * BIN_CHUNK;
                t.D = (int64_t)o->numel - j.R * BIN_CHUNK, t.R = 1;
                fbin_rows(&t, 0, 1);
            }
            j.rows_per_task = 1;
            k_parallel_for(j.R, fbin_task, &j);
            return 1;
        }
        fbin_rows(&j, 0, 1);
        return 1;
    }
    j.rows_per_task = BIN_CHUNK / j.D > 1 ? BIN_CHUNK / j.D : 1;
    if ((int64_t)o->numel >= 16 * BIN_CHUNK && k_threads() > 1)
        k_parallel_for((j.R + j.rows_per_task - 1) / j.rows_per_task, fbin_task, &j);
    else fbin_rows(&j, 0, j.R);
    return 1;
}

static graft_status binary_run(rt_node *n, int op, graft_error *err)
{
    rt_tensor *a = rt_in(n, 0), *b = rt_in(n, 1);
    if (!a || !b) return rt_err(n, err, GRAFT_EINVAL, "missing input");
    if (a->dtype != b->dtype)
        return rt_err(n, err, GRAFT_EINVAL, "input types differ (%s, %s)", graft_dtype_name(a->dtype),
                      graft_dtype_name(b->dtype));
    int ro;
    int64_t dout[RT_MAX_RANK], sa[RT_MAX_RANK], sb[RT_MAX_RANK];
    if (!k_broadcast(a->rank, a->dims, b->rank, b->dims, &ro, dout))
        return rt_err(n, err, GRAFT_EINVAL, "shapes do not broadcast");
    k_bstrides(a->rank, a->dims, ro, dout, sa);
    k_bstrides(b->rank, b->dims, ro, dout, sb);
    rt_tensor *o = rt_out(n, 0, a->dtype, ro, dout, err);
    if (!o) return err->code;
    if (a->dtype == GRAFT_DTYPE_FLOAT && o->numel && ro >= 1 &&
        fbin_float(op, a, sa, a->data, b, sb, b->data, o, o->data))
        return GRAFT_OK;
    /* fp16/bf16: widened to fp32 copies (vector conversions), the float
     * path, narrowed back: the per-element arithmetic of HALF_OPS. The
     * copies live in buffers shared by every binary node of the thread
     * (nodes run one at a time), not per node. */
    if ((a->dtype == GRAFT_DTYPE_FLOAT16 || a->dtype == GRAFT_DTYPE_BFLOAT16) && o->numel >= 64 && ro >= 1) {
        int64_t rs, cs;
        int64_t D = o->dims[ro - 1];
        if (fbin_form(a, sa, o, D, &rs, &cs) && fbin_form(b, sb, o, D, &rs, &cs)) {
            float *A = k_buf_get(&tl_half[0], (size_t)a->numel * sizeof(float));
            float *B = k_buf_get(&tl_half[1], (size_t)b->numel * sizeof(float));
            float *O = k_buf_get(&tl_half[2], (size_t)o->numel * sizeof(float));
            if (!A || !B || !O) return rt_err(n, err, GRAFT_ENOMEM, "out of memory for fp32 copies");
            k_to_f32_par(a->dtype, a->data, A, (size_t)a->numel);
            k_to_f32_par(b->dtype, b->data, B, (size_t)b->numel);
            if (fbin_float(op, a, sa, A, b, sb, B, o, O)) {
                k_from_f32_par(o->dtype, O, o->data, (size_t)o->numel);
                return GRAFT_OK;
            }
        }
    }
    switch (a->dtype) {
    case GRAFT_DTYPE_FLOAT: BIN_OPS(float); break;
    case GRAFT_DTYPE_DOUBLE: BIN_OPS(double); break;
    case GRAFT_DTYPE_INT64: IDIV_OPS(int64_t); break;
    case GRAFT_DTYPE_INT32: IDIV_OPS(int32_t); break;
    case GRAFT_DTYPE_INT16: IDIV_OPS(int16_t); break;
    case GRAFT_DTYPE_INT8: IDIV_OPS(int8_t); break;
    case GRAFT_DTYPE_UINT64: IDIV_OPS(uint64_t); break;
    case GRAFT_DTYPE_UINT32: IDIV_OPS(uint32_t); break;
    case GRAFT_DTYPE_UINT16: IDIV_OPS(uint16_t); break;
    case GRAFT_DTYPE_UINT8: IDIV_OPS(uint8_t); break;
    case GRAFT_DTYPE_FLOAT16: HALF_OPS(rt_f32_to_f16, rt_f16_to_f32); break;
    case GRAFT_DTYPE_BFLOAT16: HALF_OPS(rt_f32_to_bf16, rt_bf16_to_f32); break;
    default:
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(a->dtype));
    }
    return GRAFT_OK;
}

static graft_status add_run(rt_node *n, graft_error *err) { return binary_run(n, OP_ADD, err); }
static graft_status sub_run(rt_node *n, graft_error *err) { return binary_run(n, OP_SUB, err); }
static graft_status mul_run(rt_node *n, graft_error *err) { return binary_run(n, OP_MUL, err); }
static graft_status div_run(rt_node *n, graft_error *err) { return binary_run(n, OP_DIV, err); }

const rt_kernel rt_kernels_basic[] = {
    {"", "Identity", 1, 0, NULL, identity_run, NULL},
    {"", "Constant", 1, 0, constant_init, constant_run, constant_fini},
    {"", "Add", 7, 0, NULL, add_run, NULL},
    {"", "Sub", 7, 0, NULL, sub_run, NULL},
    {"", "Mul", 7, 0, NULL, mul_run, NULL},
    {"", "Div", 7, 0, NULL, div_run, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};
