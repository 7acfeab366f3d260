/* Device implementations of the ops the CUDA executor places on the GPU:
 * shape logic here on the host, arithmetic in kernels/cuda (gcuda.h,
 * gcuda_ops.h). Each accept() looks at dtypes and attributes only; sizes a
 * kernel cannot take make run() return GRAFT_EUNSUPPORTED at the planning
 * step, which sends the node to its CPU kernel for good. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kcommon.h"
#include "runtime/cuda/cuexec.h"

#define UNSUP(cn, ...) rt_err(&(cn)->n, err, GRAFT_EUNSUPPORTED, __VA_ARGS__)
#define OUT_OR_FAIL(v)                                   \
    do {                                                 \
        if (!(v)) return err->code ? err->code : GRAFT_EIO; \
    } while (0)
#define TRY(call)                                  \
    do {                                           \
        graft_status try_rc_ = (call);             \
        if (try_rc_ != GRAFT_OK) return try_rc_;   \
    } while (0)

static gcuda_stream STRM(cx_exec *x) { return (gcuda_stream)x->stream; }

static void contig(int rank, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= dims[d];
    }
}

/* Inputs [0, n) present, float and of one dtype. */
static int floats(cx_node *cn, int n)
{
    rt_tensor *a = rt_in(&cn->n, 0);
    if (!a || !cx_is_float(a->dtype)) return 0;
    for (int i = 1; i < n; i++) {
        rt_tensor *t = rt_in(&cn->n, i);
        if (!t || t->dtype != a->dtype) return 0;
    }
    return 1;
}

/* Integer nodes run on the device only where they compute from an input
 * that lives there (cx_node.dtaint: the input ids of a pipelined decode);
 * the others (an attention mask's arithmetic) stay on the host, where the
 * attention op reads the mask's shape. */
static int is_int(int dt) { return dt == GRAFT_DTYPE_INT64 || dt == GRAFT_DTYPE_INT32; }

/* Inputs [0, n) present, integers of one dtype, the node computing from a
 * device input. */
static int ints(cx_node *cn, int n)
{
    rt_tensor *a = rt_in(&cn->n, 0);
    if (!cn->dtaint || !a || !is_int(a->dtype)) return 0;
    for (int i = 1; i < n; i++) {
        rt_tensor *t = rt_in(&cn->n, i);
        if (!t || t->dtype != a->dtype) return 0;
    }
    return 1;
}

/* A host constant scalar integer (a Clip bound, a CumSum axis): *v. */
static int const_int(cx_node *cn, int i, int64_t *v)
{
    cx_val *t = cx_in(cn, i);
    if (!t || !t->sticky || !t->on_host || t->t.numel != 1 || !t->t.data) return 0;
    if (t->t.dtype == GRAFT_DTYPE_INT64) *v = *(const int64_t *)t->t.data;
    else if (t->t.dtype == GRAFT_DTYPE_INT32) *v = *(const int32_t *)t->t.data;
    else return 0;
    return 1;
}

/* An integer Clip's constant bounds (absent: unbounded); 0 when one is not
 * a host constant scalar. */
static int int_clip_bounds(cx_node *cn, int64_t *lo, int64_t *hi)
{
    *lo = INT64_MIN, *hi = INT64_MAX;
    return (!rt_in(&cn->n, 1) || const_int(cn, 1, lo)) && (!rt_in(&cn->n, 2) || const_int(cn, 2, hi));
}

/* CumSum's constant axis over a rank-r input, made non-negative: 1; 0: not
 * a host constant; -1: outside the rank. */
static int cumsum_axis(cx_node *cn, int r, int64_t *ax)
{
    if (!const_int(cn, 1, ax)) return 0;
    if (r < 1 || *ax < -r || *ax >= r) return -1;
    if (*ax < 0) *ax += r;
    return 1;
}

static int int_code(const char *op)
{
    return !strcmp(op, "Add")       ? GOPS_I_ADD
           : !strcmp(op, "Sub")     ? GOPS_I_SUB
           : !strcmp(op, "Mul")     ? GOPS_I_MUL
           : !strcmp(op, "Max")     ? GOPS_I_MAX
           : !strcmp(op, "Min")     ? GOPS_I_MIN
           : !strcmp(op, "Equal")   ? GOPS_I_EQUAL
           : !strcmp(op, "Less")    ? GOPS_I_LESS
           : !strcmp(op, "Greater") ? GOPS_I_GREATER
                                    : -1;
}

/* ------------------------------------------------------------ elementwise */

static int acc_binary(cx_exec *x, cx_node *cn)
{
    return cn->n.n_out == 1 && (floats(cn, 2) || (ints(cn, 2) && int_code(rt_node_op(&cn->n)) >= 0));
}

/* Equal, Less, Greater: integers only (see ints) */
static int acc_compare(cx_exec *x, cx_node *cn) { return cn->n.n_out == 1 && ints(cn, 2); }

int cx_binary_code(const char *op)
{
    return !strcmp(op, "Add")   ? GOPS_ADD
           : !strcmp(op, "Sub") ? GOPS_SUB
           : !strcmp(op, "Mul") ? GOPS_MUL
           : !strcmp(op, "Div") ? GOPS_DIV
           : !strcmp(op, "Pow") ? GOPS_POW
           : !strcmp(op, "Max") ? GOPS_MAX
           : !strcmp(op, "Min") ? GOPS_MIN
                                : -1;
}

static graft_status run_binary(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a = cx_in(cn, 0), *b = cx_in(cn, 1);
    int integer = is_int(a->t.dtype);
    int bo = integer ? int_code(rt_node_op(&cn->n)) : cx_binary_code(rt_node_op(&cn->n));
    if (bo < 0) return UNSUP(cn, "no device kernel");
    gops_shape sh = {0};
    int64_t od[RT_MAX_RANK];
    if (!k_broadcast(a->t.rank, a->t.dims, b->t.rank, b->t.dims, &sh.rank, od))
        return rt_err(&cn->n, err, GRAFT_EINVAL, "shapes do not broadcast");
    if (sh.rank > GOPS_MAX_RANK) return UNSUP(cn, "rank %d", sh.rank);
    memcpy(sh.dims, od, (size_t)sh.rank * sizeof *od);
    k_bstrides(a->t.rank, a->t.dims, sh.rank, od, sh.st[0]);
    k_bstrides(b->t.rank, b->t.dims, sh.rank, od, sh.st[1]);
    TRY(cx_to_dev(x, a, err));
    TRY(cx_to_dev(x, b, err));
    int cmp = integer && bo >= GOPS_I_EQUAL;
    cx_val *y = cx_out(x, cn, 0, cmp ? GRAFT_DTYPE_BOOL : a->t.dtype, sh.rank, od, err);
    OUT_OR_FAIL(y);
    if (integer) return gops_int_binary((gops_int_op)bo, a->t.dtype, &sh, a->d, b->d, y->d, STRM(x), err);
    return gops_binary((gops_binary_op)bo, a->t.dtype, &sh, a->d, b->d, y->d, STRM(x), err);
}

static bool is_view_node(const rt_node *n)
{
    const char *op = rt_node_op(n);
    return !*graft_node_domain(n->src) && (!strcmp(op, "Reshape") || !strcmp(op, "Squeeze") ||
                                           !strcmp(op, "Unsqueeze") || !strcmp(op, "Flatten") ||
                                           !strcmp(op, "Identity"));
}

/* A Cast between float types (or from bool to a float): an fp32 mask cast
 * to the attention's fp16 keeps 0 as 0 and its minimum as -inf. The input's
 * type may not be known yet (placement runs before the producer has run,
 * as for the Where that makes Gemma's fp32 mask): then only `to` counts. */
static bool is_float_cast(const rt_node *n)
{
    return !*graft_node_domain(n->src) && !strcmp(rt_node_op(n), "Cast") && n->n_in >= 1 && n->in[0] &&
           (cx_is_float(n->in[0]->dtype) || n->in[0]->dtype == GRAFT_DTYPE_BOOL || !n->in[0]->present) &&
           cx_is_float((int)rt_attr_int(n, "to", 0));
}

/* Nonzero when t is read, directly or through views and float Casts, only
 * as the mask of ONNX Attention nodes (and is no graph output). */
static int feeds_only_masks(cx_exec *x, const rt_tensor *t, int depth)
{
    int used = 0;
    for (size_t i = 0; i < x->n_out; i++)
        if (&x->vals[x->out_idx[i]]->t == t) return 0;
    for (size_t i = 0; i < x->n_nodes; i++) {
        rt_node *n = &x->nodes[i].n;
        for (int j = 0; j < n->n_in; j++) {
            if (n->in[j] != t) continue;
            used = 1;
            if (j == 3 && !*graft_node_domain(n->src) && !strcmp(rt_node_op(n), "Attention")) continue;
            if (j == 0 && depth < 4 && (is_view_node(n) || is_float_cast(n)) &&
                feeds_only_masks(x, n->out[0], depth + 1))
                continue;
            return 0;
        }
    }
    return used;
}

/* Nonzero when output j of the node is named and read (by a node, or as a
 * graph output). */
static int out_read(cx_exec *x, cx_node *cn, int j)
{
    if (j >= cn->n.n_out || !*graft_node_output(cn->n.src, (size_t)j)) return 0;
    const rt_tensor *t = cn->n.out[j];
    for (size_t i = 0; i < x->n_out; i++)
        if (&x->vals[x->out_idx[i]]->t == t) return 1;
    for (size_t i = 0; i < x->n_nodes; i++)
        for (int k = 0; k < x->nodes[i].n.n_in; k++)
            if (x->nodes[i].n.in[k] == t) return 1;
    return 0;
}

static int acc_where(cx_exec *x, cx_node *cn)
{
    rt_tensor *c = rt_in(&cn->n, 0), *a = rt_in(&cn->n, 1), *b = rt_in(&cn->n, 2);
    if (!(c && a && b && c->dtype == GRAFT_DTYPE_BOOL && b->dtype == a->dtype)) return 0;
    if (!cx_is_float(a->dtype)) return cn->dtaint && (is_int(a->dtype) || a->dtype == GRAFT_DTYPE_BOOL);
    /* an attention mask made from host conditions stays on the host, where
     * the attention op reads its shape (causal, window) without a copy back */
    if (cn->n.n_out == 1 && feeds_only_masks(x, cn->n.out[0], 0)) return 0;
    return 1;
}

static graft_status run_where(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *c = cx_in(cn, 0), *a = cx_in(cn, 1), *b = cx_in(cn, 2);
    int r1, r;
    int64_t d1[RT_MAX_RANK], od[RT_MAX_RANK];
    if (!k_broadcast(c->t.rank, c->t.dims, a->t.rank, a->t.dims, &r1, d1) ||
        !k_broadcast(r1, d1, b->t.rank, b->t.dims, &r, od))
        return rt_err(&cn->n, err, GRAFT_EINVAL, "shapes do not broadcast");
    if (r > GOPS_MAX_RANK) return UNSUP(cn, "rank %d", r);
    gops_shape sh = {0};
    sh.rank = r;
    memcpy(sh.dims, od, (size_t)r * sizeof *od);
    k_bstrides(c->t.rank, c->t.dims, r, od, sh.st[0]);
    k_bstrides(a->t.rank, a->t.dims, r, od, sh.st[1]);
    k_bstrides(b->t.rank, b->t.dims, r, od, sh.st[2]);
    TRY(cx_to_dev(x, c, err));
    TRY(cx_to_dev(x, a, err));
    TRY(cx_to_dev(x, b, err));
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, r, od, err);
    OUT_OR_FAIL(y);
    return gops_where(a->t.dtype, &sh, c->d, a->d, b->d, y->d, STRM(x), err);
}

static int acc_unary(cx_exec *x, cx_node *cn)
{
    int64_t lo, hi;
    if (ints(cn, 1)) /* an integer Clip with constant bounds */
        return !strcmp(rt_node_op(&cn->n), "Clip") && cn->n.opset >= 11 && int_clip_bounds(cn, &lo, &hi);
    if (!floats(cn, 1)) return 0;
    if (!strcmp(rt_node_op(&cn->n), "Clip")) {
        if (cn->n.opset < 11) return 1;
        for (int i = 1; i < 3; i++) {
            rt_tensor *t = rt_in(&cn->n, i);
            if (t && (t->numel != 1 || !cx_is_float(t->dtype))) return 0;
        }
    }
    return 1;
}

static float scalar_f(cx_exec *x, cx_val *v, float def, graft_error *err, int *ok)
{
    *ok = 1;
    if (!v) return def;
    if (cx_to_host(x, v, err) != GRAFT_OK) {
        *ok = 0;
        return def;
    }
    switch (v->t.dtype) {
    case GRAFT_DTYPE_FLOAT: return *(const float *)v->t.data;
    case GRAFT_DTYPE_FLOAT16: return rt_f16_to_f32(*(const uint16_t *)v->t.data);
    case GRAFT_DTYPE_BFLOAT16: return rt_bf16_to_f32(*(const uint16_t *)v->t.data);
    default: *ok = 0; return def;
    }
}

int cx_unary_code(const rt_node *n, float *lo, float *hi)
{
    const char *op = rt_node_op(n);
    if (!strcmp(op, "Neg")) return GOPS_NEG;
    if (!strcmp(op, "Sqrt")) return GOPS_SQRT;
    if (!strcmp(op, "Tanh")) return GOPS_TANH;
    if (!strcmp(op, "Sigmoid")) return GOPS_SIGMOID;
    if (!strcmp(op, "Relu")) return GOPS_RELU;
    if (!strcmp(op, "Exp")) return GOPS_EXP;
    if (!strcmp(op, "Abs")) return GOPS_ABS;
    if (!strcmp(op, "Reciprocal")) return GOPS_RECIPROCAL;
    if (!strcmp(op, "Gelu")) {
        char buf[16];
        const char *ap = rt_attr_string(n, "approximate", buf, sizeof buf, "none");
        return !strcmp(ap, "tanh") ? GOPS_GELU_TANH : !strcmp(ap, "none") ? GOPS_GELU_ERF : -1;
    }
    if (!strcmp(op, "Clip")) {
        if (n->opset < 11) {
            *lo = rt_attr_float(n, "min", -INFINITY);
            *hi = rt_attr_float(n, "max", INFINITY);
        }
        return GOPS_CLIP;
    }
    return -1;
}

static graft_status run_unary(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a0 = cx_in(cn, 0);
    if (is_int(a0->t.dtype)) { /* Clip (acc_unary) */
        int64_t lo, hi;
        if (!int_clip_bounds(cn, &lo, &hi)) return UNSUP(cn, "min/max");
        TRY(cx_to_dev(x, a0, err));
        cx_val *y = cx_out(x, cn, 0, a0->t.dtype, a0->t.rank, a0->t.dims, err);
        OUT_OR_FAIL(y);
        return gops_int_clip(a0->t.dtype, a0->d, y->d, (int64_t)a0->t.numel, lo, hi, STRM(x), err);
    }
    float lo = -INFINITY, hi = INFINITY;
    int u = cx_unary_code(&cn->n, &lo, &hi);
    if (u < 0) return UNSUP(cn, "no device kernel (or Gelu's approximate)");
    if (u == GOPS_CLIP && cn->n.opset >= 11) {
        int ok1, ok2;
        lo = scalar_f(x, cx_in(cn, 1), -INFINITY, err, &ok1);
        hi = scalar_f(x, cx_in(cn, 2), INFINITY, err, &ok2);
        if (!ok1 || !ok2) return UNSUP(cn, "min/max");
    }
    cx_val *a = cx_in(cn, 0);
    TRY(cx_to_dev(x, a, err));
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, a->t.rank, a->t.dims, err);
    OUT_OR_FAIL(y);
    return gops_unary((gops_unary_op)u, a->t.dtype, a->d, y->d, (int64_t)a->t.numel, lo, hi, STRM(x), err);
}

/* CumSum of integers along a constant axis (see ints) */
static int acc_cumsum(cx_exec *x, cx_node *cn)
{
    int64_t ax;
    return cn->n.n_out == 1 && ints(cn, 1) && const_int(cn, 1, &ax);
}

static graft_status run_cumsum(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a = cx_in(cn, 0);
    int64_t ax;
    int ok = cumsum_axis(cn, a->t.rank, &ax);
    if (!ok) return UNSUP(cn, "axis");
    if (ok < 0) return rt_err(&cn->n, err, GRAFT_EINVAL, "axis %lld of a rank-%d input", (long long)ax, a->t.rank);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++) outer *= a->t.dims[d];
    for (int d = (int)ax + 1; d < a->t.rank; d++) inner *= a->t.dims[d];
    TRY(cx_to_dev(x, a, err));
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, a->t.rank, a->t.dims, err);
    OUT_OR_FAIL(y);
    return gops_int_cumsum(a->t.dtype, a->d, y->d, outer, a->t.dims[ax], inner, (int)rt_attr_int(&cn->n, "exclusive", 0),
                           (int)rt_attr_int(&cn->n, "reverse", 0), STRM(x), err);
}

static int acc_cast(cx_exec *x, cx_node *cn)
{
    rt_tensor *a = rt_in(&cn->n, 0);
    int to = (int)rt_attr_int(&cn->n, "to", 0);
    if (cn->dtaint && a && (is_int(a->dtype) || a->dtype == GRAFT_DTYPE_BOOL))
        return is_int(to) || to == GRAFT_DTYPE_BOOL;
    if (!floats(cn, 1) || !cx_is_float((int)rt_attr_int(&cn->n, "to", 0))) return 0;
    /* the cast of a host-made attention mask (fp32 Where -> fp16, Gemma's
     * fp16 exports) stays on the host with it, so that the attention op
     * reads its causal window there and takes the fast kernels */
    return !feeds_only_masks(x, cn->n.out[0], 0);
}

static graft_status run_cast(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a = cx_in(cn, 0);
    int to = (int)rt_attr_int(&cn->n, "to", 0);
    TRY(cx_to_dev(x, a, err));
    cx_val *y = cx_out(x, cn, 0, to, a->t.rank, a->t.dims, err);
    OUT_OR_FAIL(y);
    if (to == a->t.dtype) {
        cudaError_t e = cudaMemcpyAsync(y->d, a->d, a->t.nbytes, cudaMemcpyDeviceToDevice, x->stream);
        return e == cudaSuccess ? GRAFT_OK : cx_cuda_err(cn, err, e, "copy");
    }
    if (!cx_is_float(to) || !cx_is_float(a->t.dtype))
        return gops_int_cast(a->t.dtype, to, a->d, y->d, (int64_t)a->t.numel, STRM(x), err);
    return gops_cast(a->t.dtype, to, a->d, y->d, (int64_t)a->t.numel, STRM(x), err);
}

/* ------------------------------------------------------------ integer programs */

static int int_or_bool(int dt) { return is_int(dt) || dt == GRAFT_DTYPE_BOOL; }

/* The integer ops of the ids that gops_int_prog runs: the binary ops,
 * Clip, Cast, CumSum and Where, placed on the device with an integer or
 * bool output (their accept functions took the operand types, the
 * constant bounds and axis; see plan_ints). */
int cx_int_member(const cx_node *cn)
{
    const rt_node *n = &cn->n;
    const char *op = rt_node_op(n);
    if (cn->place != CX_DEVICE || !cn->dtaint || *graft_node_domain(n->src) || n->n_out != 1 || !n->out[0] ||
        !int_or_bool(n->out[0]->dtype))
        return 0;
    if (int_code(op) >= 0) return n->n_in == 2;
    return !strcmp(op, "Clip") || !strcmp(op, "Cast") || !strcmp(op, "CumSum") || !strcmp(op, "Where");
}

/* Operand j of an instruction: the host constant scalar as an immediate,
 * else the value on the device through its strides st (rank r). */
static graft_status ip_operand(cx_exec *x, cx_val *v, gops_iprog_ins *I, int j, int r, const int64_t *od,
                               graft_error *err)
{
    int64_t st[RT_MAX_RANK], imm;
    I->adt[j] = (unsigned char)v->t.dtype;
    if (v->sticky && v->on_host && v->t.numel == 1 && v->t.data) {
        if (v->t.dtype == GRAFT_DTYPE_INT64) imm = *(const int64_t *)v->t.data;
        else if (v->t.dtype == GRAFT_DTYPE_INT32) imm = *(const int32_t *)v->t.data;
        else imm = *(const uint8_t *)v->t.data;
        I->a[j] = NULL;
        I->imm[j] = imm;
        return GRAFT_OK;
    }
    TRY(cx_to_dev(x, v, err));
    k_bstrides(v->t.rank, v->t.dims, r, od, st);
    for (int d = 0; d < r; d++) I->st[j][d] = (int)st[d];
    I->a[j] = v->d;
    return GRAFT_OK;
}

/* Member m's instruction, its output made; 1 in *fits when gops_int_prog
 * takes its shapes (else nothing is made). */
static graft_status ip_build(cx_exec *x, cx_node *m, gops_iprog_ins *I, int *fits, graft_error *err)
{
    const char *op = rt_node_op(&m->n);
    cx_val *in[3] = {cx_in(m, 0), NULL, NULL};
    int nin = 1, r = in[0]->t.rank, ydt = in[0]->t.dtype;
    int64_t od[RT_MAX_RANK], lo = 0, hi = 0, ax = 0;
    memcpy(od, in[0]->t.dims, (size_t)r * sizeof *od);
    memset(I, 0, sizeof *I);
    *fits = 0;
    int bo = int_code(op);
    if (bo >= 0 || !strcmp(op, "Where")) {
        nin = bo >= 0 ? 2 : 3;
        int rr = in[0]->t.rank;
        int64_t d1[RT_MAX_RANK];
        memcpy(d1, in[0]->t.dims, (size_t)rr * sizeof *d1);
        for (int j = 1; j < nin; j++) {
            in[j] = cx_in(m, j);
            if (!k_broadcast(rr, d1, in[j]->t.rank, in[j]->t.dims, &r, od))
                return rt_err(&m->n, err, GRAFT_EINVAL, "shapes do not broadcast");
            rr = r;
            memcpy(d1, od, (size_t)r * sizeof *od);
        }
        I->kind = bo >= 0 ? GOPS_IP_BIN : GOPS_IP_WHERE;
        I->op = (unsigned char)(bo >= 0 ? bo : 0);
        ydt = bo >= GOPS_I_EQUAL ? GRAFT_DTYPE_BOOL : in[nin - 1]->t.dtype;
    } else if (!strcmp(op, "Clip")) {
        if (!int_clip_bounds(m, &lo, &hi)) return GRAFT_OK;
        I->kind = GOPS_IP_CLIP;
    } else if (!strcmp(op, "Cast")) {
        I->kind = GOPS_IP_CAST;
        ydt = (int)rt_attr_int(&m->n, "to", 0);
        if (!int_or_bool(ydt)) return GRAFT_OK;
    } else if (!strcmp(op, "CumSum")) {
        if (cumsum_axis(m, r, &ax) != 1) return GRAFT_OK;
        I->kind = GOPS_IP_CUMSUM;
        I->excl = (unsigned char)(rt_attr_int(&m->n, "exclusive", 0) != 0);
        I->rev = (unsigned char)(rt_attr_int(&m->n, "reverse", 0) != 0);
    } else {
        return GRAFT_OK;
    }
    int64_t numel = 1;
    for (int d = 0; d < r; d++) numel *= od[d];
    if (r > GOPS_IPROG_RANK || numel < 1 || numel > GOPS_IPROG_N) return GRAFT_OK;
    I->rank = (unsigned char)r;
    I->n = (int)numel;
    I->ydt = (unsigned char)ydt;
    for (int d = 0; d < r; d++) I->dims[d] = (int)od[d];
    if (I->kind == GOPS_IP_CUMSUM) {
        int64_t inner = 1;
        for (int d = (int)ax + 1; d < r; d++) inner *= od[d];
        I->len = (int)od[ax];
        I->inner = (int)inner;
    }
    for (int j = 0; j < nin; j++) TRY(ip_operand(x, in[j], I, j, r, od, err));
    if (I->kind == GOPS_IP_CLIP) I->imm[1] = lo, I->imm[2] = hi;
    cx_val *y = cx_out(x, m, 0, ydt, r, od, err);
    OUT_OR_FAIL(y);
    I->y = y->d;
    *fits = 1;
    return GRAFT_OK;
}

/* The group's first (ig 1): every member as an instruction of one
 * program, the later ones' outputs made here and marked for this run; as
 * kernels of their own where a member's shapes do not fit (more than
 * GOPS_IPROG_N elements: a long prompt's ids). */
graft_status cx_int_run(cx_exec *x, cx_node *cn, graft_error *err)
{
    struct cx_igroup *g = cn->igg;
    gops_iprog p;
    memset(&p, 0, sizeof p); /* compared whole below: no stray bytes (ip_build clears each instruction) */
    for (int k = 0; k < g->n; k++) {
        int fits;
        TRY(ip_build(x, g->m[k], &p.ins[p.n], &fits, err));
        if (!fits) { /* the members made so far: their own kernels after all */
            for (int j = 1; j < k; j++) g->m[j]->mm_run = 0;
            return cn->dop->run(x, cn, err);
        }
        p.n++;
        if (k) g->m[k]->mm_run = x->run_no;
    }
    /* the program from device memory, uploaded the first time it is run (not inside a capture: that step runs
     * eagerly); GRAFT_CUDA_IPROG_KEEP=0: from the kernel's parameters */
    static int keep = -1;
    if (keep < 0) {
        const char *e = getenv("GRAFT_CUDA_IPROG_KEEP");
        keep = !e || strcmp(e, "0") != 0;
    }
    if (keep) {
        for (int k = 0; k < g->nk; k++)
            if (!memcmp(g->kp[k], &p, sizeof p)) return gops_int_prog_run(&g->kd[k], STRM(x), err);
        if (g->nk < CX_IP_KEEP) {
            if (x->capturing) {
                x->cap_abort = x->cap_abort ? x->cap_abort : 2;
                return rt_err(&cn->n, err, GRAFT_EUNSUPPORTED, "CUDA graph capture: an integer program's first upload");
            }
            gops_iprog *c = malloc(sizeof *c);
            if (!c) return rt_err(&cn->n, err, GRAFT_ENOMEM, "out of memory");
            memcpy(c, &p, sizeof p);
            gops_iprog_dev kd = {0};
            graft_status rc = gops_int_prog_keep(&p, &kd, STRM(x), err);
            if (rc != GRAFT_OK) {
                gops_int_prog_free(&kd);
                free(c);
                return rc;
            }
            g->kp[g->nk] = c;
            g->kd[g->nk++] = kd;
            return gops_int_prog_run(&kd, STRM(x), err);
        }
    }
    return gops_int_prog(&p, STRM(x), err);
}

/* ------------------------------------------------------------ MatMul */

static int acc_matmul(cx_exec *x, cx_node *cn)
{
    rt_tensor *a = rt_in(&cn->n, 0), *b = rt_in(&cn->n, 1);
    return floats(cn, 2) && a->rank >= 2 && b->rank >= 2;
}

static graft_status run_matmul(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a = cx_in(cn, 0), *b = cx_in(cn, 1);
    int ra = a->t.rank, rb = b->t.rank;
    if (ra < 2 || rb < 2) return UNSUP(cn, "1-D operand");
    int64_t M = a->t.dims[ra - 2], K = a->t.dims[ra - 1], N = b->t.dims[rb - 1];
    if (b->t.dims[rb - 2] != K) return rt_err(&cn->n, err, GRAFT_EINVAL, "inner dimensions %lld and %lld differ",
                                             (long long)K, (long long)b->t.dims[rb - 2]);
    int64_t od[RT_MAX_RANK];
    int ro;
    if (!k_broadcast(ra - 2, a->t.dims, rb - 2, b->t.dims, &ro, od))
        return rt_err(&cn->n, err, GRAFT_EINVAL, "batch dimensions do not broadcast");
    int64_t nA = 1, nB = 1, nO = 1;
    for (int i = 0; i < ra - 2; i++) nA *= a->t.dims[i];
    for (int i = 0; i < rb - 2; i++) nB *= b->t.dims[i];
    for (int i = 0; i < ro; i++) nO *= od[i];
    if ((nA != nO && nA != 1) || (nB != nO && nB != 1) || ro + 2 > RT_MAX_RANK)
        return UNSUP(cn, "mixed batch broadcast");
    od[ro] = M;
    od[ro + 1] = N;
    TRY(cx_to_dev(x, a, err));
    TRY(cx_to_dev(x, b, err));
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, ro + 2, od, err);
    OUT_OR_FAIL(y);
    const bool gemv = nA * M == 1 && !x->no_gemv; /* one row: the bandwidth-bound GEMV */
    if (!(b->rows && gemv)) /* no prologue here: a must hold the norm */
        TRY(cx_pro_materialize(x, cn, err));
    if (b->rows) { /* a constant weight stored [N, K] (cx_rows_plan) */
        if (gemv) {
            gops_rows_norm pn;
            if (cn->pro && cx_pro_args(x, cn, &pn)) { /* a computes here: the norm only shaped it */
                const void *w = b->d;
                void *yp = y->d;
                return cx_pro_gemv(x, cn, a->t.dtype, &pn, &w, &yp, &N, 1, K, err);
            }
            if (cn->mt) { /* with the chain that reads y */
                int done = 0;
                graft_status rc = cx_tail_gemv(x, cn, a, b, y, &done, err);
                if (rc != GRAFT_OK || done) return rc;
            }
            TRY(cx_pro_materialize(x, cn, err)); /* a chain that deferred to this GEMV (cpro) and did not run */
            return gcuda_gemv_rows(a->t.dtype, a->d, b->d, y->d, K, N, STRM(x), err);
        }
        return gops_gemm_bt(x->blas, a->t.dtype, nA * M, N, K, a->d, 0, b->d, 0, y->d, 0, 1, STRM(x), err);
    }
    if (nB == 1 && gemv) {
        size_t wsb = 0;
        graft_status rc = gcuda_gemv_plan(a->t.dtype, K, N, &wsb, err);
        if (rc == GRAFT_OK) {
            void *ws = wsb ? cx_workspace(x, cn, wsb, err) : NULL;
            if (wsb && !ws) return err->code;
            return gcuda_gemv(a->t.dtype, a->d, b->d, y->d, K, N, ws, wsb, STRM(x), err);
        }
        if (rc != GRAFT_EUNSUPPORTED && rc != GRAFT_EINVAL) return rc;
    }
    if (nB == 1) /* one weight: all rows of A in one GEMM */
        return gops_gemm(x->blas, a->t.dtype, nA * M, N, K, a->d, 0, b->d, 0, y->d, 0, 1, STRM(x), err);
    return gops_gemm(x->blas, a->t.dtype, M, N, K, a->d, nA == 1 ? 0 : M * K, b->d, K * N, y->d, M * N, nO, STRM(x), err);
}

/* ------------------------------------------------------------ norms */

static int acc_rms(cx_exec *x, cx_node *cn)
{
    if (!floats(cn, 2)) return 0;
    for (int j = 1; j < cn->n.n_out; j++) /* mean / inv_std_var: named is fine, read is not */
        if (out_read(x, cn, j)) return 0;
    return 1;
}

static graft_status run_rms(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a = cx_in(cn, 0), *g = cx_in(cn, 1);
    int ax = k_axis(rt_attr_int(&cn->n, "axis", -1), a->t.rank);
    if (ax < 0) return rt_err(&cn->n, err, GRAFT_EINVAL, "axis out of range");
    int64_t dim = 1;
    for (int i = ax; i < a->t.rank; i++) dim *= a->t.dims[i];
    if ((int64_t)g->t.numel != dim || dim > 16384 || dim <= 0) return UNSUP(cn, "scale of %llu for %lld",
                                                                             (unsigned long long)g->t.numel, (long long)dim);
    float eps = rt_attr_float(&cn->n, "epsilon", 1e-5f);
    TRY(cx_to_dev(x, a, err));
    TRY(cx_to_dev(x, g, err));
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, a->t.rank, a->t.dims, err);
    OUT_OR_FAIL(y);
    return gcuda_rmsnorm(a->t.dtype, a->d, g->d, y->d, (int64_t)a->t.numel / dim, dim, eps, STRM(x), err);
}

static int acc_skip_rms(cx_exec *x, cx_node *cn)
{
    if (!floats(cn, 3)) return 0;
    rt_tensor *bias = rt_in(&cn->n, 3);
    if (bias && bias->dtype != cn->n.in[0]->dtype) return 0;
    for (int j = 1; j < 3 && j < cn->n.n_out; j++)
        if (out_read(x, cn, j)) return 0;
    return 1;
}

static graft_status run_skip_rms(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a = cx_in(cn, 0), *sk = cx_in(cn, 1), *g = cx_in(cn, 2), *bias = cx_in(cn, 3);
    int64_t dim = a->t.rank ? a->t.dims[a->t.rank - 1] : 1;
    if (sk->t.numel != a->t.numel || (int64_t)g->t.numel != dim || (bias && (int64_t)bias->t.numel != dim) ||
        dim > 16384 || dim <= 0)
        return UNSUP(cn, "skip/gamma/bias shapes");
    float eps = rt_attr_float(&cn->n, "epsilon", 1e-5f);
    TRY(cx_to_dev(x, a, err));
    TRY(cx_to_dev(x, sk, err));
    TRY(cx_to_dev(x, g, err));
    if (bias) TRY(cx_to_dev(x, bias, err));
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, a->t.rank, a->t.dims, err), *sum = NULL;
    OUT_OR_FAIL(y);
    if (cn->n.n_out > 3 && *graft_node_output(cn->n.src, 3)) {
        sum = cx_out(x, cn, 3, a->t.dtype, a->t.rank, a->t.dims, err);
        OUT_OR_FAIL(sum);
    }
    return gcuda_skip_rmsnorm(a->t.dtype, a->d, sk->d, bias ? bias->d : NULL, g->d, y->d, sum ? sum->d : NULL,
                              (int64_t)a->t.numel / dim, dim, eps, STRM(x), err);
}

/* ------------------------------------------------------------ data movement */

static int acc_float_data(cx_exec *x, cx_node *cn) { return floats(cn, 1) && cn->n.n_out == 1; }

const char *cx_gather_shape(const cx_node *cn, const cx_val *a, const cx_val *ix, int *rank, int64_t *od,
                            int64_t *dim)
{
    if (!ix || ix->t.dtype != GRAFT_DTYPE_INT64) return "indices not int64";
    if (a->t.rank < 1 || k_axis(rt_attr_int(&cn->n, "axis", 0), a->t.rank) != 0) return "axis";
    *rank = ix->t.rank + a->t.rank - 1;
    if (*rank > RT_MAX_RANK) return "rank";
    memcpy(od, ix->t.dims, (size_t)ix->t.rank * sizeof *od);
    *dim = 1;
    for (int i = 1; i < a->t.rank; i++) {
        od[ix->t.rank + i - 1] = a->t.dims[i];
        *dim *= a->t.dims[i];
    }
    return NULL;
}

static graft_status run_gather(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a = cx_in(cn, 0), *ix = cx_in(cn, 1);
    int r;
    int64_t od[RT_MAX_RANK], dim;
    const char *why = cx_gather_shape(cn, a, ix, &r, od, &dim);
    if (why) return UNSUP(cn, "%s", why);
    TRY(cx_to_dev(x, a, err));
    TRY(cx_to_dev(x, ix, err));
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, r, od, err);
    OUT_OR_FAIL(y);
    return gcuda_gather_rows(a->t.dtype, a->d, a->t.dims[0], dim, ix->d, (int64_t)ix->t.numel, y->d, STRM(x), err);
}

/* Nonzero when t is read, directly or through views, only as K or V of
 * Attention nodes that read the cache behind it (cx_node.shared == 1). */
static int feeds_only_shared(cx_exec *x, const rt_tensor *t, int depth)
{
    int used = 0;
    for (size_t i = 0; i < x->n_out; i++)
        if (&x->vals[x->out_idx[i]]->t == t) return 0;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *c = &x->nodes[i];
        rt_node *n = &c->n;
        for (int j = 0; j < n->n_in; j++) {
            if (n->in[j] != t) continue;
            used = 1;
            if ((j == 1 || j == 2) && c->shared == 1 && c->place == CX_DEVICE && !*graft_node_domain(n->src) &&
                !strcmp(rt_node_op(n), "Attention"))
                continue;
            if (j == 0 && depth < 4 && is_view_node(n) && feeds_only_shared(x, n->out[0], depth + 1)) continue;
            return 0;
        }
    }
    return used;
}

static graft_status run_transpose(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a = cx_in(cn, 0);
    int r = a->t.rank;
    if (r > GOPS_MAX_RANK) return UNSUP(cn, "rank %d", r);
    size_t np;
    const int64_t *perm = rt_attr_ints(&cn->n, "perm", &np);
    int64_t p[RT_MAX_RANK], ist[RT_MAX_RANK], od[RT_MAX_RANK];
    for (int i = 0; i < r; i++) p[i] = perm ? perm[i] : r - 1 - i;
    if (perm && (int)np != r) return rt_err(&cn->n, err, GRAFT_EINVAL, "perm of %zu for rank %d", np, r);
    TRY(cx_to_dev_pitched(x, a, err));
    if (r == 4) cx_strides4(a, ist); /* a KV cache view reads through its pitch */
    else contig(r, a->t.dims, ist);
    gops_shape sh = {0};
    sh.rank = r;
    for (int i = 0; i < r; i++) {
        if (p[i] < 0 || p[i] >= r) return rt_err(&cn->n, err, GRAFT_EINVAL, "bad perm");
        od[i] = a->t.dims[p[i]];
        sh.dims[i] = od[i];
        sh.st[0][i] = ist[p[i]];
    }
    contig(r, od, sh.st[1]);
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, r, od, err);
    OUT_OR_FAIL(y);
    /* a KV cache transposed only for Attention nodes that read the cache
     * itself (shared-KV layers): shaped, not computed (decided after the
     * planning step, when every such Attention has chosen its path) */
    if (x->placed && !x->check && !cn->elide) {
        cn->elide = a->pitch && a->on_dev && feeds_only_shared(x, cn->n.out[0], 0) ? 1 : 2;
        x->n_elided += cn->elide == 1;
    }
    if (cn->elide == 1) {
        if (x->cur == cn) cn->rp_elide = 1;
        return GRAFT_OK;
    }
    return gops_copy(rt_dtype_size(a->t.dtype), &sh, a->d, y->d, STRM(x), err);
}

static int acc_slice(cx_exec *x, cx_node *cn) { return cn->n.opset >= 10 && acc_float_data(x, cn); }

static graft_status ints_of(cx_exec *x, cx_val *v, int64_t *dst, size_t cap, size_t *n, graft_error *err)
{
    *n = 0;
    if (!v) return GRAFT_OK;
    TRY(cx_to_host(x, v, err));
    if (v->t.numel > cap) return rt_seterr(err, GRAFT_EUNSUPPORTED, "too many values");
    if (rt_read_ints(&v->t, dst, cap) < 0) return rt_seterr(err, GRAFT_EINVAL, "integer tensor expected");
    *n = (size_t)v->t.numel;
    return GRAFT_OK;
}

/* A slice (od of dims, steps step) that is one contiguous block of its
 * input, not empty: every axis before the first cut one is 1 wide, every
 * axis after it whole, steps 1 where more than one element is taken. */
static int slice_block(int r, const int64_t *dims, const int64_t *od, const int64_t *step)
{
    for (int d = 0; d < r; d++)
        if (od[d] == 0 || (od[d] > 1 && step[d] != 1)) return 0;
    int p = 0;
    while (p < r && od[p] == dims[p]) p++;
    if (p == r) return 1; /* all of it */
    for (int d = 0; d < r; d++)
        if ((d < p && od[d] != 1) || (d > p && od[d] != dims[d])) return 0;
    return 1;
}

static graft_status run_slice(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a = cx_in(cn, 0);
    int r = a->t.rank;
    if (r > GOPS_MAX_RANK) return UNSUP(cn, "rank %d", r);
    int64_t st[RT_MAX_RANK], en[RT_MAX_RANK], ax[RT_MAX_RANK], sp[RT_MAX_RANK];
    size_t ns, ne, na, nst;
    TRY(ints_of(x, cx_in(cn, 1), st, RT_MAX_RANK, &ns, err));
    TRY(ints_of(x, cx_in(cn, 2), en, RT_MAX_RANK, &ne, err));
    TRY(ints_of(x, cx_in(cn, 3), ax, RT_MAX_RANK, &na, err));
    TRY(ints_of(x, cx_in(cn, 4), sp, RT_MAX_RANK, &nst, err));
    if (ns != ne || (cx_in(cn, 3) && na != ns) || (cx_in(cn, 4) && nst != ns))
        return rt_err(&cn->n, err, GRAFT_EINVAL, "starts/ends/axes/steps lengths differ");
    int64_t start[RT_MAX_RANK], step[RT_MAX_RANK], od[RT_MAX_RANK], ist[RT_MAX_RANK];
    for (int d = 0; d < r; d++) {
        start[d] = 0;
        step[d] = 1;
        od[d] = a->t.dims[d];
    }
    for (size_t i = 0; i < ns; i++) {
        int d = k_axis(cx_in(cn, 3) ? ax[i] : (int64_t)i, r);
        int64_t s = cx_in(cn, 4) ? sp[i] : 1, dim = a->t.dims[d > 0 ? d : 0];
        if (d < 0 || s == 0) return rt_err(&cn->n, err, GRAFT_EINVAL, "bad axis or zero step");
        int64_t b = st[i], e = en[i];
        if (b < 0) b += dim;
        if (e < 0) e += dim;
        int64_t cnt;
        if (s > 0) {
            b = b < 0 ? 0 : b > dim ? dim : b;
            e = e < 0 ? 0 : e > dim ? dim : e;
            cnt = e > b ? (e - b + s - 1) / s : 0;
        } else {
            b = b < 0 ? -1 : b > dim - 1 ? dim - 1 : b;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            cnt = b > e ? (b - e + (-s) - 1) / (-s) : 0;
        }
        start[d] = b;
        step[d] = s;
        od[d] = cnt;
    }
    contig(r, a->t.dims, ist);
    gops_shape sh = {0};
    sh.rank = r;
    int64_t off = 0;
    for (int d = 0; d < r; d++) {
        sh.dims[d] = od[d];
        sh.st[0][d] = ist[d] * step[d];
        if (od[d]) off += start[d] * ist[d];
    }
    contig(r, od, sh.st[1]);
    TRY(cx_to_dev(x, a, err));
    size_t es = rt_dtype_size(a->t.dtype);
    if (slice_block(r, a->t.dims, od, step) && !a->pitch && x->slice_view) {
        /* one contiguous block of the input (a decode step's per-layer
         * input): the output is that block, no copy */
        if (cx_out_at(x, cn, 0, a->t.dtype, r, od, (char *)a->d + off * (int64_t)es)) return GRAFT_OK;
    }
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, r, od, err);
    OUT_OR_FAIL(y);
    return gops_copy(es, &sh, (const char *)a->d + off * (int64_t)es, y->d, STRM(x), err);
}

static int acc_concat(cx_exec *x, cx_node *cn)
{
    rt_tensor *a = rt_in(&cn->n, 0);
    if (!a || !cx_is_float(a->dtype)) return 0;
    for (int i = 0; i < cn->n.n_in; i++)
        if (!rt_in(&cn->n, i) || cn->n.in[i]->dtype != a->dtype) return 0;
    return 1;
}

static graft_status run_concat(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a = cx_in(cn, 0);
    int r = a->t.rank;
    if (r > GOPS_MAX_RANK || r < 1) return UNSUP(cn, "rank %d", r);
    int ax = k_axis(rt_attr_int(&cn->n, "axis", 0), r);
    if (ax < 0) return rt_err(&cn->n, err, GRAFT_EINVAL, "axis out of range");
    int64_t od[RT_MAX_RANK], ost[RT_MAX_RANK];
    memcpy(od, a->t.dims, (size_t)r * sizeof *od);
    od[ax] = 0;
    for (int i = 0; i < cn->n.n_in; i++) {
        cx_val *v = cx_in(cn, i);
        if (v->t.rank != r) return rt_err(&cn->n, err, GRAFT_EINVAL, "ranks differ");
        for (int d = 0; d < r; d++)
            if (d != ax && v->t.dims[d] != a->t.dims[d]) return rt_err(&cn->n, err, GRAFT_EINVAL, "shapes differ");
        od[ax] += v->t.dims[ax];
        TRY(cx_to_dev(x, v, err));
    }
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, r, od, err);
    OUT_OR_FAIL(y);
    contig(r, od, ost);
    size_t es = rt_dtype_size(a->t.dtype);
    int64_t at = 0;
    for (int i = 0; i < cn->n.n_in; i++) {
        cx_val *v = cx_in(cn, i);
        gops_shape sh = {0};
        sh.rank = r;
        memcpy(sh.dims, v->t.dims, (size_t)r * sizeof *od);
        contig(r, v->t.dims, sh.st[0]);
        memcpy(sh.st[1], ost, (size_t)r * sizeof *ost);
        TRY(gops_copy(es, &sh, v->d, (char *)y->d + at * ost[ax] * (int64_t)es, STRM(x), err));
        at += v->t.dims[ax];
    }
    return GRAFT_OK;
}

static graft_status run_split(cx_exec *x, cx_node *cn, graft_error *err)
{
    rt_node *n = &cn->n;
    cx_val *a = cx_in(cn, 0);
    int r = a->t.rank, no = n->n_out;
    if (r < 1 || r > GOPS_MAX_RANK || no < 1 || no > 64) return UNSUP(cn, "rank %d, %d outputs", r, no);
    int ax = k_axis(rt_attr_int(n, "axis", 0), r);
    if (ax < 0) return rt_err(n, err, GRAFT_EINVAL, "axis out of range");
    int64_t sizes[64], dim = a->t.dims[ax];
    size_t k = 0, cnt = 0;
    cx_val *sp = n->opset >= 13 ? cx_in(cn, 1) : NULL;
    const int64_t *sa = n->opset < 13 ? rt_attr_ints(n, "split", &cnt) : NULL;
    if (sp) {
        TRY(ints_of(x, sp, sizes, 64, &k, err));
        if ((int)k != no) return rt_err(n, err, GRAFT_EINVAL, "split has %zu values for %d outputs", k, no);
    } else if (sa) {
        if ((int)cnt != no) return rt_err(n, err, GRAFT_EINVAL, "split has %zu values for %d outputs", cnt, no);
        memcpy(sizes, sa, cnt * sizeof *sa);
    } else {
        int64_t chunk = (dim + no - 1) / no, left = dim;
        for (int i = 0; i < no; i++) {
            sizes[i] = left < chunk ? left : chunk;
            left -= sizes[i];
        }
    }
    int64_t sum = 0;
    for (int i = 0; i < no; i++) {
        if (sizes[i] < 0) return rt_err(n, err, GRAFT_EINVAL, "negative split size");
        sum += sizes[i];
    }
    if (sum != dim) return rt_err(n, err, GRAFT_EINVAL, "split sizes sum to %lld, the axis has %lld",
                                  (long long)sum, (long long)dim);
    TRY(cx_to_dev(x, a, err));
    int64_t ist[RT_MAX_RANK];
    contig(r, a->t.dims, ist);
    size_t es = rt_dtype_size(a->t.dtype);
    int64_t at = 0;
    for (int i = 0; i < no; i++) {
        int64_t od[RT_MAX_RANK];
        memcpy(od, a->t.dims, (size_t)r * sizeof *od);
        od[ax] = sizes[i];
        if (!*graft_node_output(n->src, (size_t)i)) {
            at += sizes[i];
            continue;
        }
        cx_val *y = cx_out(x, cn, i, a->t.dtype, r, od, err);
        OUT_OR_FAIL(y);
        gops_shape sh = {0};
        sh.rank = r;
        memcpy(sh.dims, od, (size_t)r * sizeof *od);
        memcpy(sh.st[0], ist, (size_t)r * sizeof *ist);
        contig(r, od, sh.st[1]);
        TRY(gops_copy(es, &sh, (const char *)a->d + (size_t)(at * ist[ax]) * es, y->d, STRM(x), err));
        at += sizes[i];
    }
    return GRAFT_OK;
}

static int acc_split(cx_exec *x, cx_node *cn) { return floats(cn, 1); }

static graft_status run_expand(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a = cx_in(cn, 0);
    int64_t shp[RT_MAX_RANK], od[RT_MAX_RANK];
    size_t k;
    TRY(ints_of(x, cx_in(cn, 1), shp, RT_MAX_RANK, &k, err));
    int r;
    if (!k_broadcast(a->t.rank, a->t.dims, (int)k, shp, &r, od))
        return rt_err(&cn->n, err, GRAFT_EINVAL, "shape does not broadcast");
    if (r > GOPS_MAX_RANK) return UNSUP(cn, "rank %d", r);
    gops_shape sh = {0};
    sh.rank = r;
    memcpy(sh.dims, od, (size_t)r * sizeof *od);
    k_bstrides(a->t.rank, a->t.dims, r, od, sh.st[0]);
    contig(r, od, sh.st[1]);
    TRY(cx_to_dev(x, a, err));
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, r, od, err);
    OUT_OR_FAIL(y);
    return gops_copy(rt_dtype_size(a->t.dtype), &sh, a->d, y->d, STRM(x), err);
}

static graft_status run_reduce(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a = cx_in(cn, 0);
    const char *op = rt_node_op(&cn->n);
    int mean = !strcmp(op, "ReduceMean");
    int axes_input = mean ? cn->n.opset >= 18 : cn->n.opset >= 13;
    int64_t axes[RT_MAX_RANK];
    size_t na = 0;
    if (axes_input) {
        TRY(ints_of(x, cx_in(cn, 1), axes, RT_MAX_RANK, &na, err));
    } else {
        const int64_t *v = rt_attr_ints(&cn->n, "axes", &na);
        if (na > RT_MAX_RANK) return UNSUP(cn, "axes");
        if (v) memcpy(axes, v, na * sizeof *v);
    }
    int r = a->t.rank;
    if (na != 1 || r < 1 || k_axis(axes[0], r) != r - 1) return UNSUP(cn, "axes other than the last");
    int keep = (int)rt_attr_int(&cn->n, "keepdims", 1);
    int64_t od[RT_MAX_RANK];
    memcpy(od, a->t.dims, (size_t)r * sizeof *od);
    od[r - 1] = 1;
    int64_t dim = a->t.dims[r - 1];
    TRY(cx_to_dev(x, a, err));
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, keep ? r : r - 1, od, err);
    OUT_OR_FAIL(y);
    if (dim == 0) return UNSUP(cn, "empty axis");
    return gops_reduce_last(a->t.dtype, a->d, y->d, (int64_t)a->t.numel / dim, dim, mean, STRM(x), err);
}

/* ------------------------------------------------------------ rotary, attention */

static int acc_rotary(cx_exec *x, cx_node *cn)
{
    rt_tensor *p = rt_in(&cn->n, 3);
    return floats(cn, 3) && (!p || p->dtype == GRAFT_DTYPE_INT64);
}

/* Device int64 0, 1, ..., n - 1 (grown, never shrunk; kept). */
static const int64_t *iota(cx_exec *x, int64_t n, graft_error *err)
{
    if (x->iota_n >= n) return x->iota;
    if (x->capturing) {
        x->cap_abort = x->cap_abort ? x->cap_abort : 2;
        rt_seterr(err, GRAFT_EUNSUPPORTED, "CUDA graph capture: positions grow");
        return NULL;
    }
    int64_t cap = n < 256 ? 256 : n;
    int64_t *h = malloc((size_t)cap * sizeof *h);
    if (!h) {
        rt_seterr(err, GRAFT_ENOMEM, "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < cap; i++) h[i] = i;
    int64_t *d = NULL;
    cudaError_t e = cudaMalloc((void **)&d, (size_t)cap * sizeof *d);
    if (e == cudaSuccess) e = cudaMemcpy(d, h, (size_t)cap * sizeof *d, cudaMemcpyHostToDevice);
    free(h);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (d) cudaFree(d);
        cx_cuda_err(NULL, err, e, "positions");
        return NULL;
    }
    if (x->iota) {
        cudaStreamSynchronize(x->stream);
        cudaFree(x->iota);
    }
    x->iota = d;
    x->iota_n = cap;
    return d;
}

static graft_status rotary_args(cx_exec *x, cx_node *cn, gcuda_rotary_args *rp, graft_error *err);

/* A rotary of a pair (plan_rope_pair): the first leaves its arguments for
 * the second when both normalise their rows here; the second launches both,
 * or the first's alone when it cannot join it (then its own as usual). */
static graft_status run_rotary(cx_exec *x, cx_node *cn, graft_error *err)
{
    gcuda_rotary_args r = {0};
    graft_status rc = rotary_args(x, cn, &r, err);
    cx_node *first = cn->rope_second ? cn->rope_pair : NULL;
    if (first && first->rope_run == x->run_no) {
        first->rope_run = 0;
        if (rc == GRAFT_OK && r.norm_x && r.dtype == first->rope_args.dtype)
            return gcuda_rotary_pair(&first->rope_args, &r, STRM(x), err);
        graft_error e2 = {0};
        graft_status rq = gcuda_rotary(&first->rope_args, STRM(x), &e2);
        if (rq != GRAFT_OK) {
            *err = e2;
            return rq;
        }
    }
    if (rc != GRAFT_OK) return rc;
    if (cn->attn_by && r.norm_x && r.seq == 1 && cn->attn_by->place == CX_DEVICE) { /* plan_attn_prep */
        cn->rope_args = r;
        cn->attn_run = x->run_no;
        return GRAFT_OK;
    }
    if (cn->rope_pair && !cn->rope_second && r.norm_x && cn->rope_pair->place == CX_DEVICE) {
        cn->rope_args = r;
        cn->rope_run = x->run_no;
        return GRAFT_OK;
    }
    return gcuda_rotary(&r, STRM(x), err);
}

static graft_status rotary_args(cx_exec *x, cx_node *cn, gcuda_rotary_args *rp, graft_error *err)
{
    cx_val *a = cx_in(cn, 0), *c = cx_in(cn, 1), *s = cx_in(cn, 2), *p = cx_in(cn, 3);
    /* without position_ids the caches are [batch, seq, rotary_dim / 2], token by token */
    int64_t cr = p ? 2 : 3;
    if (c->t.rank != cr || s->t.rank != cr || c->t.numel != s->t.numel ||
        c->t.dims[cr - 1] != s->t.dims[cr - 1])
        return UNSUP(cn, "cos/sin caches not [max_pos, rotary_dim / 2] (or [batch, seq, rotary_dim / 2])");
    gcuda_rotary_args r = {0};
    r.dtype = a->t.dtype;
    if (a->t.rank == 4) {
        r.batch = a->t.dims[0], r.heads = a->t.dims[1], r.seq = a->t.dims[2], r.head_size = a->t.dims[3];
        r.stride_b = r.heads * r.seq * r.head_size, r.stride_s = r.head_size, r.stride_h = r.seq * r.head_size;
    } else if (a->t.rank == 3) {
        int64_t h = rt_attr_int(&cn->n, "num_heads", 0);
        if (h <= 0 || a->t.dims[2] % h) return UNSUP(cn, "3-D input without num_heads");
        r.batch = a->t.dims[0], r.seq = a->t.dims[1], r.heads = h, r.head_size = a->t.dims[2] / h;
        r.stride_b = r.seq * a->t.dims[2], r.stride_s = a->t.dims[2], r.stride_h = r.head_size;
    } else {
        return UNSUP(cn, "rank %d", a->t.rank);
    }
    if (p && (int64_t)p->t.numel != r.batch * r.seq) return UNSUP(cn, "position_ids shape");
    if (!p && (c->t.dims[0] != r.batch || c->t.dims[1] != r.seq)) return UNSUP(cn, "cos/sin caches of another shape");
    r.rotary_dim = c->t.dims[cr - 1] * 2;
    int64_t want = rt_attr_int(&cn->n, "rotary_embedding_dim", 0);
    if (want > 0 && want != r.rotary_dim) return UNSUP(cn, "rotary_embedding_dim %lld vs cache", (long long)want);
    if (r.rotary_dim > r.head_size) return UNSUP(cn, "rotary_dim %lld over head size", (long long)r.rotary_dim);
    r.max_pos = p ? c->t.dims[0] : r.batch * r.seq;
    r.interleaved = (int)rt_attr_int(&cn->n, "interleaved", 0);
    TRY(cx_to_dev(x, a, err));
    TRY(cx_to_dev(x, c, err));
    TRY(cx_to_dev(x, s, err));
    const int64_t *pos;
    if (p) {
        TRY(cx_to_dev(x, p, err));
        pos = p->d;
    } else if (!(pos = iota(x, r.batch * r.seq, err))) {
        return err->code;
    }
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, a->t.rank, a->t.dims, err);
    OUT_OR_FAIL(y);
    r.x = a->d, r.y = y->d, r.cos_cache = c->d, r.sin_cache = s->d, r.positions = pos;
    if (cn->rope_norm) { /* the RMSNorm before it only shaped its output (fuse.c): normalise here */
        cx_node *nn = cn->rope_norm;
        cx_val *nx = cx_in(nn, 0), *g = cx_in(nn, 1);
        if (nx->t.numel == a->t.numel && nx->t.dtype == a->t.dtype && g->t.dtype == a->t.dtype && nx->t.rank &&
            nx->t.dims[nx->t.rank - 1] == r.head_size && (int64_t)g->t.numel == r.head_size &&
            cx_to_dev(x, nx, err) == GRAFT_OK && cx_to_dev(x, g, err) == GRAFT_OK) {
            r.norm_x = nx->d, r.norm_gamma = g->d;
            r.norm_eps = rt_attr_float(&nn->n, "epsilon", 1e-5f);
        } else { /* not this shape: the norm runs now, into the buffer its views point at */
            TRY(nn->dop->run(x, nn, err));
        }
    }
    *rp = r;
    return GRAFT_OK;
}

/* ------------------------------------------------------------ attention over a bound KV cache */

/* One attention step whose past K/V are caches bound in place: the new
 * rows are appended at `past` (gcuda_kv_append, length from device
 * memory), then the query rows attend over the cache. Strides in
 * elements over (batch, seq, head). */
typedef struct cache_attn {
    int dt;
    int64_t B, Hq, Hkv, Sq, hd, past;
    const void *q;
    int64_t qb, qs, qh;
    void *y;
    int64_t yb, ys, yh;
    const void *k, *v; /* new rows, V with K's strides */
    int64_t kb, ks, kh;
    const cx_kvbind *ck, *cv;
    int causal;
    int64_t window_left;
    float scale, softcap;
    const gops_attn_args *mask; /* mask fields (mask_kind, ms, mlast) or NULL */
    cx_val *mval;
    /* for the replay record: inputs that follow the KV length, where the
     * past length is read (1: dims[2] of input lin; 2: that minus Sq), the
     * mask's input */
    uint32_t exempt;
    int lenkind, lin, mask_in;
} cache_attn;

static float mask_at(const cache_attn *c, const void *m, int64_t off)
{
    switch (c->mask->mask_kind) {
    case 2:
        if (c->dt == GRAFT_DTYPE_FLOAT16) return rt_f16_to_f32(((const uint16_t *)m)[off]);
        if (c->dt == GRAFT_DTYPE_BFLOAT16) return rt_bf16_to_f32(((const uint16_t *)m)[off]);
        return ((const float *)m)[off];
    case 3: return ((const float *)m)[off];
    default: return ((const uint8_t *)m)[off] ? 0.0f : -INFINITY;
    }
}

/* Nonzero when the keys each query row sees under the mask (its host
 * copy), the node's causal flag and its window are exactly those of a
 * causal window: row i, at p = past + i, sees [max(0, p - w), p]; *win is
 * w (-1: no window). Additive values must be 0 (seen) or <= -6e4 (hidden:
 * -inf, the fp32 or fp16 minimum, whose weight e^(s - 6e4) is 0 in fp32). */
static int mask_as_window(const cache_attn *c, int64_t T, int64_t *win)
{
    const gops_attn_args *m = c->mask;
    const void *md = c->mval->t.data;
    int64_t w = -2, maxp0 = -1;
    int64_t nb = m->ms[0] ? c->B : 1, nh = m->ms[1] ? c->Hq : 1;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t h = 0; h < nh; h++)
            for (int64_t i = 0; i < c->Sq; i++) {
                int64_t p = c->past + i, lo = -1, last = -2;
                if (p >= T) return 0;
                for (int64_t j = 0; j < T; j++) {
                    int vis = (!c->causal || j <= p) && (c->window_left < 0 || p - j <= c->window_left);
                    if (!vis) continue;
                    if (j >= m->mlast) continue;
                    float f = mask_at(c, md, b * m->ms[0] + h * m->ms[1] + i * m->ms[2] + j * m->ms[3]);
                    if (f != 0.0f) { /* hidden: -inf, the float or fp16 minimum (e^(s - 6e4) is 0) */
                        if (f <= -6.0e4f) continue;
                        return 0;
                    }
                    if (lo < 0) lo = j;
                    else if (last != j - 1) return 0;
                    last = j;
                }
                if (lo < 0 || last != p) return 0;
                if (lo > 0) {
                    if (w == -2) w = p - lo;
                    else if (w != p - lo) return 0;
                } else if (p > maxp0) {
                    maxp0 = p;
                }
            }
    if (w == -2) w = -1;
    else if (maxp0 > w) return 0;
    *win = w;
    return 1;
}

/* gcuda_attn_decode_args.impl: 2, the tensor-core kernel for fp16/bf16
 * (passed on the H200, 2-5x the CUDA-core one; fp32 takes the CUDA-core
 * kernel whatever this says); GRAFT_ATTN_IMPL=1 for the CUDA-core kernel. */
static int attn_impl(void)
{
    const char *e = getenv("GRAFT_ATTN_IMPL");
    return e && *e ? atoi(e) : 2;
}

/* mask_as_window once per run for each (causal, window) a mask is read with. */
static int mask_window_cached(cx_exec *x, const cache_attn *c, int64_t T, int64_t *win)
{
    cx_val *mv = c->mval;
    if (!mv->on_host || !mv->t.data) return 0;
    int64_t key = c->causal * 0x100000000LL + c->window_left + 1;
    int slot = -1;
    for (int s2 = 0; s2 < 2; s2++)
        if (mv->an_run[s2] == x->run_no && mv->an_key[s2] == key) slot = s2;
    if (slot < 0) {
        slot = mv->an_run[0] == x->run_no ? 1 : 0;
        mv->an_run[slot] = x->run_no;
        mv->an_key[slot] = key;
        mv->an_ok[slot] = mask_as_window(c, T, &mv->an_win[slot]);
    }
    *win = mv->an_win[slot];
    return mv->an_ok[slot];
}

/* The mask's broadcast fields over (B, Hq, Sq, keys); 0 when unusable. */
static int mask_fields(const cx_val *mask, int64_t B, int64_t Hq, int64_t Sq, int dt, gops_attn_args *ma)
{
    int mr = mask->t.rank;
    if (mr < 1 || mr > 4) return 0;
    int64_t full[4] = {B, Hq, Sq, mask->t.dims[mr - 1]}, bd[RT_MAX_RANK];
    int ro;
    if (!k_broadcast(4, full, mr, mask->t.dims, &ro, bd) || bd[0] != B || bd[1] != Hq || bd[2] != Sq) return 0;
    k_bstrides(mr, mask->t.dims, 4, full, ma->ms);
    ma->mlast = mask->t.dims[mr - 1];
    ma->mask_kind = mask->t.dtype == GRAFT_DTYPE_BOOL ? 1 : mask->t.dtype == dt ? 2
                    : mask->t.dtype == GRAFT_DTYPE_FLOAT ? 3 : 0;
    return ma->mask_kind != 0;
}

/* Notes what a replay of this attention needs (the node is being captured). */
static void rp_attn(cx_exec *x, cx_node *cn, const cache_attn *c, int fast, int64_t win)
{
    if (x->cur != cn) return;
    if (!fast || c->Sq != 1 || !c->lenkind) { /* its launch depends on the length: capture every step */
        cn->rp_bad = true;
        return;
    }
    cn->rp_exempt |= c->exempt;
    cn->rp_len = c->lenkind, cn->rp_lin = c->lin, cn->rp_S = c->Sq, cn->rp_B = c->B, cn->rp_Hq = c->Hq;
    cn->rp_dt = c->dt, cn->rp_causal = c->causal, cn->rp_wleft = c->window_left, cn->rp_win = win;
    cn->rp_fast = 1;
    if (c->mask) {
        cn->rp_mask_in = c->mask_in;
        if (c->mask_in >= 0 && c->mask_in < 32) cn->rp_exempt |= 1u << c->mask_in;
        else cn->rp_bad = true;
    }
}

/* The prologue node k of Attention cn when it left its work to it this run. */
static cx_node *left_to(const cx_exec *x, const cx_node *cn, int k)
{
    cx_node *p = cn->aprep[k];
    return p && p->attn_run == x->run_no ? p : NULL;
}

static int same_rope(const gcuda_rotary_args *a, const gcuda_rotary_args *b)
{
    return a->cos_cache == b->cos_cache && a->sin_cache == b->sin_cache && a->positions == b->positions &&
           a->rotary_dim == b->rotary_dim && a->max_pos == b->max_pos && a->interleaved == b->interleaved;
}

/* The decode kernel takes what the q rotary, and then the k rotary and
 * the v norm, left to it (plan_attn_prep) when d's rows are their outputs
 * and it can (gcuda_attn_decode_takes_prep); what it does not take runs
 * after, in cx_attn_flush, before the kernel. */
static void attn_take(cx_exec *x, cx_node *cn, gcuda_attn_decode_args *d)
{
    cx_node *rq = left_to(x, cn, 0), *rk = left_to(x, cn, 1), *vt = left_to(x, cn, 2);
    if (!rq) return;
    const gcuda_rotary_args *r = &rq->rope_args;
    if (r->y != d->q || r->batch != d->batch || r->seq != 1 || r->heads != d->q_heads ||
        r->head_size != d->head_dim || r->dtype != d->dtype)
        return;
    gcuda_attn_decode_args t = *d;
    t.q = r->norm_x, t.q_gamma = r->norm_gamma, t.q_eps = r->norm_eps;
    t.rope_cos = r->cos_cache, t.rope_sin = r->sin_cache, t.rope_pos = r->positions;
    t.rope_max_pos = r->max_pos, t.rope_dim = r->rotary_dim, t.rope_interleaved = r->interleaved;
    const gcuda_rotary_args *rr = rk ? &rk->rope_args : NULL;
    int tk = rr && d->k_new && rr->y == d->k_new && rr->batch == d->batch && rr->seq == 1 &&
             rr->heads == d->kv_heads && rr->head_size == d->head_dim && rr->dtype == d->dtype && same_rope(r, rr);
    if (tk) t.k_new = rr->norm_x, t.k_gamma = rr->norm_gamma, t.k_eps = rr->norm_eps;
    int tv = tk && vt && d->v_new && vt->attn_g->y == d->v_new && vt->attn_g->y_dtype == d->dtype;
    if (tv) t.v_new = vt->attn_g->leaf[0], t.v_norm = 1, t.v_eps = vt->attn_g->eps;
    if (!gcuda_attn_decode_takes_prep(&t)) return;
    *d = t;
    rq->attn_run = 0;
    if (tk) rk->attn_run = 0;
    if (tv) vt->attn_run = 0;
    x->n_attn_took[0]++;
    x->n_attn_took[1] += tk;
    x->n_attn_took[2] += tv;
}

static graft_status attend_cache(cx_exec *x, cx_node *cn, const cache_attn *c, graft_error *err)
{
    int64_t T = c->past + c->Sq, max = c->ck->max_seq;
    if (T > max || c->cv->max_seq != max)
        return rt_err(&cn->n, err, GRAFT_EINVAL, "%lld positions past a KV cache of %lld", (long long)T,
                      (long long)max);
    TRY(cx_lens(x, c->B, c->past, T, err));
    const int32_t *dpast = x->dlen, *dtot = x->dlen + CX_MAX_B;
    gcuda_kv_append_args ka = {0}; /* the new rows, when c->k (NULL: a layer that reads another layer's cache) */
    ka.dtype = c->dt, ka.batch = c->B, ka.seq = c->Sq, ka.kv_heads = c->Hkv, ka.head_dim = c->hd;
    ka.max_seq = max, ka.k = c->k, ka.v = c->v, ka.stride_b = c->kb, ka.stride_s = c->ks, ka.stride_h = c->kh;
    ka.k_cache = c->ck->buf, ka.v_cache = c->cv->buf, ka.past_lens = dpast;
    int64_t win = c->window_left;
    const char *gen = getenv("GRAFT_CUDA_GENERAL_ATTN");
    int fast = c->hd % 8 == 0 && c->hd <= 512 && c->Hq % c->Hkv == 0 && !(gen && *gen && strcmp(gen, "0"));
    if (fast && c->mask) {
        fast = mask_window_cached(x, c, T, &win);
    } else if (fast && !c->causal && c->Sq > 1) {
        fast = 0; /* later keys seen: not the causal kernels */
    }
    if (fast && c->Sq == 1 && c->qh == c->hd && c->yh == c->hd &&
        (c->B == 1 || (c->qb == c->Hq * c->hd && c->yb == c->Hq * c->hd))) {
        gcuda_attn_decode_args d = {0};
        d.dtype = c->dt, d.batch = c->B, d.q_heads = c->Hq, d.kv_heads = c->Hkv, d.head_dim = c->hd;
        d.max_seq = max, d.q = c->q, d.k_cache = c->ck->buf, d.v_cache = c->cv->buf, d.seq_lens = dtot;
        d.out = c->y, d.scale = c->scale, d.softcap = c->softcap, d.window_left = win, d.impl = attn_impl();
        if (x->apf_bytes && d.impl == 2 && gcuda_dtype_size(d.dtype) == 2) { /* the tensor-core kernel's */
            cx_pf_plan(x, cn, x->apf_bytes, &d.pf);
            d.pf_late = x->apf_late;
            for (int r = 0; r < d.pf.n; r++) x->attn_pf_bytes += d.pf.bytes[r];
            x->n_attn_pf += d.pf.n > 0;
        }
        graft_error perr;
        d.num_splits = cn->dsplits; /* planned once (the plan queries the device) */
        if (gcuda_attn_decode_plan(&d, &perr) == GRAFT_OK) {
            cn->dsplits = d.num_splits;
            if (!(d.ws = cx_workspace(x, cn, d.ws_bytes, err))) return err->code;
            x->n_fast_attn++;
            rp_attn(x, cn, c, 1, win);
            /* the new rows read and stored by the tensor-core kernel itself (GRAFT_CUDA_FUSE_APPEND=0: not) */
            const char *fa = getenv("GRAFT_CUDA_FUSE_APPEND");
            if (c->k && !(fa && !strcmp(fa, "0")))
                d.k_new = c->k, d.v_new = c->v, d.new_stride_b = c->kb, d.new_stride_h = c->kh;
            if (d.k_new && gcuda_attn_decode_takes_new(&d)) {
                x->n_fused_append++;
                attn_take(x, cn, &d);
                TRY(cx_attn_flush(x, cn, err));
            } else {
                d.k_new = d.v_new = NULL;
                if (!c->k) attn_take(x, cn, &d);
                TRY(cx_attn_flush(x, cn, err));
                if (c->k) TRY(gcuda_kv_append(&ka, STRM(x), err));
            }
            /* the caches' rows but the new one's were written two or more launches before: by this
             * kernel in earlier steps, or by the layer that owns the cache, not by an append just before */
            const char *ea = getenv("GRAFT_CUDA_ATTN_EARLY"); /* =0: not (an A/B switch) */
            d.cache_ready = (d.k_new != NULL || !c->k) && !(ea && !strcmp(ea, "0"));
            return gcuda_attn_decode(&d, STRM(x), err);
        }
    }
    TRY(cx_attn_flush(x, cn, err));
    if (c->k) TRY(gcuda_kv_append(&ka, STRM(x), err));
    if (fast && c->Sq > 1) {
        gcuda_attn_prefill_args pa = {0};
        pa.dtype = c->dt, pa.batch = c->B, pa.seq = c->Sq, pa.q_heads = c->Hq, pa.kv_heads = c->Hkv;
        pa.head_dim = c->hd, pa.max_seq = max;
        pa.q = c->q, pa.q_stride_b = c->qb, pa.q_stride_s = c->qs, pa.q_stride_h = c->qh;
        pa.k_cache = c->ck->buf, pa.v_cache = c->cv->buf, pa.past_lens = dpast;
        pa.out = c->y, pa.o_stride_b = c->yb, pa.o_stride_s = c->ys, pa.o_stride_h = c->yh;
        pa.scale = c->scale, pa.softcap = c->softcap, pa.window_left = win;
        x->n_fast_attn++;
        rp_attn(x, cn, c, 0, win);
        return gcuda_attn_prefill(&pa, STRM(x), err);
    }
    /* the general masked kernel over the cache */
    rp_attn(x, cn, c, 0, win);
    gops_attn_args a = {0};
    if (c->mask) {
        a = *c->mask;
        TRY(cx_to_dev(x, c->mval, err));
        a.mask = c->mval->d;
    }
    a.dtype = c->dt, a.B = c->B, a.Hq = c->Hq, a.Hkv = c->Hkv, a.Sq = c->Sq, a.T = T, a.hd = a.vd = c->hd;
    a.q = c->q, a.qs[0] = c->qb, a.qs[1] = c->qh, a.qs[2] = c->qs;
    a.y = c->y, a.ys[0] = c->yb, a.ys[1] = c->yh, a.ys[2] = c->ys;
    a.k = c->ck->buf, a.v = c->cv->buf;
    a.ks[0] = a.vs[0] = c->Hkv * max * c->hd, a.ks[1] = a.vs[1] = max * c->hd, a.ks[2] = a.vs[2] = c->hd;
    a.past = c->past, a.kv_len = NULL, a.causal = c->causal, a.window_left = c->window_left;
    a.scale = c->scale, a.softcap = c->softcap;
    return gops_attention(&a, STRM(x), err);
}

/* The bound caches of a node's past K/V (inputs ik, iv) whose presents are
 * its outputs 1 and 2; 0 when they are not both bound that way. */
static int cache_pair(cx_exec *x, cx_node *cn, int ik, int iv, const cx_kvbind **ck, const cx_kvbind **cv)
{
    cx_val *pk = cx_in(cn, ik), *pv = cx_in(cn, iv);
    if (!pk || !pv || cn->n.n_out < 3) return 0;
    *ck = cx_kv_of_past(x, pk);
    *cv = cx_kv_of_past(x, pv);
    return *ck && *cv && x->vals[(*ck)->present] == cx_v(cn->n.out[1]) && x->vals[(*cv)->present] == cx_v(cn->n.out[2]);
}

/* The bound cache a K or V input reads, when it is that cache's present
 * transposed to [B, S, H, D] (perm 0, 2, 1, 3) and viewed (Reshape...):
 * the shared-KV layers of Gemma 3n/4 exports. -1: none. */
static int shared_cache(cx_exec *x, const cx_val *kv)
{
    const cx_val *r = kv;
    while (r->base) r = r->base;
    for (size_t i = 0; i < x->n_nodes; i++) {
        rt_node *n = &x->nodes[i].n;
        if (n->n_out < 1 || n->out[0] != &r->t) continue;
        if (*graft_node_domain(n->src) || strcmp(rt_node_op(n), "Transpose") || n->n_in < 1) return -1;
        size_t np;
        const int64_t *perm = rt_attr_ints(n, "perm", &np);
        if (!perm || np != 4 || perm[0] != 0 || perm[1] != 2 || perm[2] != 1 || perm[3] != 3) return -1;
        for (size_t k = 0; k < x->n_kv; k++)
            if (&x->vals[x->kv[k].present]->t == n->in[0]) return (int)k;
        return -1;
    }
    return -1;
}

static int acc_attention(cx_exec *x, cx_node *cn)
{
    rt_node *n = &cn->n;
    if (!floats(cn, 3)) return 0;
    if (n->opset >= 24 && rt_in(n, 6)) return 0; /* nonpad_kv_seqlen */
    if (n->n_out > 3 && *graft_node_output(n->src, 3)) return 0;
    if (rt_attr_int(n, "right_window_size", -1) >= 0) return 0;
    rt_tensor *m = rt_in(n, 3), *pk = rt_in(n, 4), *pv = rt_in(n, 5);
    if (m && m->dtype != GRAFT_DTYPE_BOOL && !cx_is_float(m->dtype)) return 0;
    if (!pk != !pv) return 0;
    if (pk && (pk->dtype != n->in[0]->dtype || pv->dtype != pk->dtype)) return 0;
    return 1;
}

static graft_status attention_run(cx_exec *x, cx_node *cn, graft_error *err);

/* What the nodes before it left to it (plan_attn_prep) runs before any
 * other kernel reads it, and on failure too (a host retry reads it). */
static graft_status run_attention(cx_exec *x, cx_node *cn, graft_error *err)
{
    graft_status rc = attention_run(x, cn, err);
    if (rc != GRAFT_OK) {
        graft_error e2 = {0};
        (void)cx_attn_flush(x, cn, &e2);
    }
    return rc;
}

static graft_status attention_run(cx_exec *x, cx_node *cn, graft_error *err)
{
    rt_node *n = &cn->n;
    cx_val *q = cx_in(cn, 0), *k = cx_in(cn, 1), *v = cx_in(cn, 2), *mask = cx_in(cn, 3);
    cx_val *pk = cx_in(cn, 4), *pv = cx_in(cn, 5);
    if (q->t.rank != k->t.rank || q->t.rank != v->t.rank || (q->t.rank != 3 && q->t.rank != 4))
        return rt_err(n, err, GRAFT_EINVAL, "Q, K, V must all be 3-D or all 4-D");
    int r3 = q->t.rank == 3;
    int64_t B = q->t.dims[0], Hq, Hkv, Sq, Skv, hd, vd;
    if (r3) {
        Hq = rt_attr_int(n, "q_num_heads", 0);
        Hkv = rt_attr_int(n, "kv_num_heads", 0);
        if (Hq <= 0 || Hkv <= 0 || q->t.dims[2] % Hq || k->t.dims[2] % Hkv || v->t.dims[2] % Hkv)
            return rt_err(n, err, GRAFT_EINVAL, "3-D inputs need q_num_heads and kv_num_heads");
        Sq = q->t.dims[1], Skv = k->t.dims[1], hd = q->t.dims[2] / Hq, vd = v->t.dims[2] / Hkv;
    } else {
        Hq = q->t.dims[1], Hkv = k->t.dims[1], Sq = q->t.dims[2], Skv = k->t.dims[2], hd = q->t.dims[3];
        vd = v->t.dims[3];
    }
    if (Hkv <= 0 || Hq % Hkv) return rt_err(n, err, GRAFT_EINVAL, "heads %lld / %lld", (long long)Hq, (long long)Hkv);
    int64_t P = pk ? pk->t.dims[2] : 0, T = P + Skv;
    if (pk && (pk->t.rank != 4 || pk->t.dims[1] != Hkv || pk->t.dims[3] != hd || pv->t.dims[3] != vd ||
               pv->t.dims[2] != P))
        return rt_err(n, err, GRAFT_EINVAL, "past_key/past_value shapes disagree with K/V");
    int want_pk = n->n_out > 1 && *graft_node_output(n->src, 1), want_pv = n->n_out > 2 && *graft_node_output(n->src, 2);
    if (pk && (!want_pk || !want_pv)) return UNSUP(cn, "past without present outputs");
    int dt = q->t.dtype;
    size_t es = rt_dtype_size(dt);
    TRY(cx_to_dev(x, q, err));
    TRY(cx_to_dev(x, k, err));
    TRY(cx_to_dev(x, v, err));
    if (pk) {
        TRY(cx_to_dev_pitched(x, pk, err));
        TRY(cx_to_dev_pitched(x, pv, err));
    }
    int64_t yd[4];
    if (r3) yd[0] = B, yd[1] = Sq, yd[2] = Hq * vd;
    else yd[0] = B, yd[1] = Hq, yd[2] = Sq, yd[3] = vd;
    cx_val *y = cx_out(x, cn, 0, dt, q->t.rank, yd, err);
    OUT_OR_FAIL(y);
    gops_attn_args a = {0};
    a.dtype = dt, a.B = B, a.Hq = Hq, a.Hkv = Hkv, a.Sq = Sq, a.T = T, a.hd = hd, a.vd = vd;
    a.q = q->d, a.y = y->d;
    if (r3) {
        a.qs[0] = Sq * Hq * hd, a.qs[1] = hd, a.qs[2] = Hq * hd;
        a.ys[0] = Sq * Hq * vd, a.ys[1] = vd, a.ys[2] = Hq * vd;
    } else {
        a.qs[0] = Hq * Sq * hd, a.qs[1] = Sq * hd, a.qs[2] = hd;
        a.ys[0] = Hq * Sq * vd, a.ys[1] = Sq * vd, a.ys[2] = vd;
    }
    /* new keys/values as (batch, head, seq, d) strides */
    int64_t kst[3], vst[3];
    if (r3) {
        kst[0] = Skv * Hkv * hd, kst[1] = hd, kst[2] = Hkv * hd;
        vst[0] = Skv * Hkv * vd, vst[1] = vd, vst[2] = Hkv * vd;
    } else {
        kst[0] = Hkv * Skv * hd, kst[1] = Skv * hd, kst[2] = hd;
        vst[0] = Hkv * Skv * vd, vst[1] = Skv * vd, vst[2] = vd;
    }
    gops_attn_args ma = {0}; /* the mask's fields */
    if (mask && mask->t.numel && !mask_fields(mask, B, Hq, Sq, dt, &ma)) {
        if (mask->t.rank < 1 || mask->t.rank > 4)
            return rt_err(n, err, GRAFT_EINVAL, "attn_mask of rank %d", mask->t.rank);
        if (ma.mlast) return UNSUP(cn, "mask of type %s", graft_dtype_name(mask->t.dtype));
        return rt_err(n, err, GRAFT_EINVAL, "attn_mask does not broadcast to (batch, heads, q, kv)");
    }
    float sc;
    float scale = graft_node_attr_float(n->src, "scale", &sc) ? sc : 1.0f / sqrtf((float)hd);
    int causal = (int)rt_attr_int(n, "is_causal", 0);
    int64_t wleft = n->opset >= 25 ? rt_attr_int(n, "left_window_size", -1) : -1;
    const cx_kvbind *ck, *cv;
    if (pk && Skv > 0 && Skv == Sq && hd == vd && !memcmp(kst, vst, sizeof kst) &&
        cache_pair(x, cn, 4, 5, &ck, &cv)) { /* KV in place */
        cache_attn c = {0};
        c.dt = dt, c.B = B, c.Hq = Hq, c.Hkv = Hkv, c.Sq = Sq, c.hd = hd, c.past = P;
        c.q = q->d, c.y = y->d, c.k = k->d, c.v = v->d;
        if (r3) {
            c.qb = Sq * Hq * hd, c.qs = Hq * hd, c.qh = hd;
            c.yb = Sq * Hq * vd, c.ys = Hq * vd, c.yh = vd;
        } else {
            c.qb = Hq * Sq * hd, c.qs = hd, c.qh = Sq * hd;
            c.yb = Hq * Sq * vd, c.ys = vd, c.yh = Sq * vd;
        }
        c.kb = kst[0], c.kh = kst[1], c.ks = kst[2];
        c.ck = ck, c.cv = cv, c.causal = causal, c.window_left = wleft, c.scale = scale;
        c.softcap = rt_attr_float(n, "softcap", 0.0f);
        if (ma.mask_kind) c.mask = &ma, c.mval = mask;
        c.exempt = 1u << 4 | 1u << 5, c.lenkind = 1, c.lin = 4, c.mask_in = 3;
        TRY(attend_cache(x, cn, &c, err));
        int64_t kd[4] = {B, Hkv, T, hd};
        OUT_OR_FAIL(cx_out_cache(x, cn, 1, dt, kd, ck, err));
        OUT_OR_FAIL(cx_out_cache(x, cn, 2, dt, kd, cv, err));
        return GRAFT_OK;
    }
    if (!pk && !want_pk && !want_pv && hd == vd) { /* K/V another layer's cache, transposed: read the cache */
        if (!cn->shared) {
            int sk = shared_cache(x, k), sv = shared_cache(x, v);
            cn->shared = sk >= 0 && sv >= 0 ? 1 : 2;
            cn->shared_k = sk, cn->shared_v = sv;
        }
        const cx_kvbind *sk = cn->shared == 1 && cn->shared_k < (int)x->n_kv ? &x->kv[cn->shared_k] : NULL;
        const cx_kvbind *sv = cn->shared == 1 && cn->shared_v < (int)x->n_kv ? &x->kv[cn->shared_v] : NULL;
        cx_val *pks = sk ? x->vals[sk->present] : NULL, *pvs = sv ? x->vals[sv->present] : NULL;
        if (pks && pvs && pks->d == sk->buf && pks->pitch && pvs->d == sv->buf && pvs->pitch && pks->on_dev &&
            pvs->on_dev && pks->t.dims[2] == Skv && pvs->t.dims[2] == Skv && pks->t.dims[1] == Hkv &&
            pks->t.dims[3] == hd && Skv >= Sq) {
            cache_attn c = {0};
            c.dt = dt, c.B = B, c.Hq = Hq, c.Hkv = Hkv, c.Sq = Sq, c.hd = hd, c.past = Skv - Sq;
            c.q = q->d, c.y = y->d;
            if (r3) {
                c.qb = Sq * Hq * hd, c.qs = Hq * hd, c.qh = hd;
                c.yb = Sq * Hq * vd, c.ys = Hq * vd, c.yh = vd;
            } else {
                c.qb = Hq * Sq * hd, c.qs = hd, c.qh = Sq * hd;
                c.yb = Hq * Sq * vd, c.ys = vd, c.yh = Sq * vd;
            }
            c.ck = sk, c.cv = sv, c.causal = causal, c.window_left = wleft, c.scale = scale;
            c.softcap = rt_attr_float(n, "softcap", 0.0f);
            if (ma.mask_kind) c.mask = &ma, c.mval = mask;
            c.exempt = 1u << 1 | 1u << 2, c.lenkind = 3, c.lin = 1, c.mask_in = 3;
            return attend_cache(x, cn, &c, err);
        }
        if (cn->shared == 1 && x->n_elided) /* its K/V transposes may have been elided (run_transpose) */
            return rt_err(n, err, GRAFT_EIO, "a shared-KV Attention can no longer read its cache");
    }
    TRY(cx_attn_flush(x, cn, err));
    if (mask) TRY(cx_to_dev(x, mask, err));
    if (want_pk || want_pv) {
        int64_t kd[4] = {B, Hkv, T, hd}, vdd[4] = {B, Hkv, T, vd};
        cx_val *ok = cx_out(x, cn, 1, dt, 4, kd, err);
        OUT_OR_FAIL(ok);
        cx_val *ov = cx_out(x, cn, 2, dt, 4, vdd, err);
        OUT_OR_FAIL(ov);
        for (int w = 0; w < 2; w++) {
            int64_t d = w ? vd : hd;
            cx_val *dst = w ? ov : ok, *past = w ? pv : pk, *src = w ? v : k;
            const int64_t *sst = w ? vst : kst;
            gops_shape sh = {0};
            sh.rank = 4;
            int64_t dstr[4] = {Hkv * T * d, T * d, d, 1};
            if (past && P) {
                int64_t pd[4] = {B, Hkv, P, d};
                memcpy(sh.dims, pd, sizeof pd);
                cx_strides4(past, sh.st[0]);
                memcpy(sh.st[1], dstr, sizeof dstr);
                TRY(gops_copy(es, &sh, past->d, dst->d, STRM(x), err));
            }
            int64_t nd[4] = {B, Hkv, Skv, d};
            memcpy(sh.dims, nd, sizeof nd);
            sh.st[0][0] = sst[0], sh.st[0][1] = sst[1], sh.st[0][2] = sst[2], sh.st[0][3] = 1;
            memcpy(sh.st[1], dstr, sizeof dstr);
            TRY(gops_copy(es, &sh, src->d, (char *)dst->d + (size_t)(P * d) * es, STRM(x), err));
        }
        a.k = ok->d, a.v = ov->d;
        a.ks[0] = Hkv * T * hd, a.ks[1] = T * hd, a.ks[2] = hd;
        a.vs[0] = Hkv * T * vd, a.vs[1] = T * vd, a.vs[2] = vd;
    } else {
        a.k = k->d, a.v = v->d;
        memcpy(a.ks, kst, sizeof kst);
        memcpy(a.vs, vst, sizeof vst);
    }
    if (ma.mask_kind) {
        memcpy(a.ms, ma.ms, sizeof a.ms);
        a.mlast = ma.mlast;
        a.mask = mask->d;
        a.mask_kind = ma.mask_kind;
    }
    a.past = P;
    a.causal = causal;
    a.window_left = wleft;
    a.scale = scale;
    a.softcap = rt_attr_float(n, "softcap", 0.0f);
    return gops_attention(&a, STRM(x), err);
}

/* com.microsoft GroupQueryAttention, batch rows of one past length (what
 * the decode loop feeds): rotary into scratch copies of Q and K, the new
 * rows appended after the past ones in present, then masked attention. */
static int acc_gqa(cx_exec *x, cx_node *cn)
{
    rt_node *n = &cn->n;
    rt_tensor *q = rt_in(n, 0), *k = rt_in(n, 1), *v = rt_in(n, 2), *pk = rt_in(n, 3), *pv = rt_in(n, 4);
    rt_tensor *cc = rt_in(n, 7), *sc = rt_in(n, 8), *pos = rt_in(n, 9);
    if (!q || !cx_is_float(q->dtype) || !k != !v || !pk || !pv) return 0;
    if ((k && (k->dtype != q->dtype || v->dtype != q->dtype)) || pk->dtype != q->dtype || pv->dtype != q->dtype)
        return 0;
    if (rt_in(n, 10) || rt_in(n, 11) || rt_attr_int(n, "smooth_softmax", 0)) return 0;
    if (n->n_out > 3 && *graft_node_output(n->src, 3)) return 0;
    if (n->n_out < 3 || !*graft_node_output(n->src, 1) || !*graft_node_output(n->src, 2)) return 0;
    if (rt_attr_int(n, "do_rotary", 0) && (!cc || !sc || cc->dtype != q->dtype || sc->dtype != q->dtype)) return 0;
    if (pos && pos->dtype != GRAFT_DTYPE_INT64) return 0;
    return 1;
}

static graft_status run_gqa(cx_exec *x, cx_node *cn, graft_error *err)
{
    rt_node *n = &cn->n;
    cx_val *q = cx_in(cn, 0), *k = cx_in(cn, 1), *v = cx_in(cn, 2), *pk = cx_in(cn, 3), *pv = cx_in(cn, 4);
    cx_val *sl = cx_in(cn, 5), *tot = cx_in(cn, 6), *cc = cx_in(cn, 7), *sc = cx_in(cn, 8), *pos = cx_in(cn, 9);
    int64_t Hq = rt_attr_int(n, "num_heads", 0), Hkv = rt_attr_int(n, "kv_num_heads", 0);
    if (Hq <= 0 || Hkv <= 0 || Hq % Hkv || q->t.rank != 3) return UNSUP(cn, "heads or query rank");
    int64_t B = q->t.dims[0], S = q->t.dims[1], hd;
    int packed = !k;
    if (packed) {
        if (q->t.dims[2] % (Hq + 2 * Hkv)) return UNSUP(cn, "packed width");
        hd = q->t.dims[2] / (Hq + 2 * Hkv);
    } else {
        if (q->t.dims[2] % Hq) return UNSUP(cn, "query width");
        hd = q->t.dims[2] / Hq;
        if (k->t.rank != 3 || (k->t.dims[1] != S && k->t.dims[1] != 0) || k->t.dims[2] != Hkv * hd ||
            v->t.rank != 3 || v->t.dims[1] != k->t.dims[1] || v->t.dims[2] != Hkv * hd)
            return UNSUP(cn, "key/value shapes");
    }
    int64_t Skv = packed ? S : k->t.dims[1];
    if (pk->t.rank != 4 || pk->t.dims[1] != Hkv || pk->t.dims[3] != hd || pv->t.dims[2] != pk->t.dims[2])
        return UNSUP(cn, "past shapes");
    int64_t Pbuf = pk->t.dims[2], seqk[64], total;
    size_t nsl, ntot;
    if (B > 64) return UNSUP(cn, "batch %lld", (long long)B);
    TRY(ints_of(x, sl, seqk, 64, &nsl, err));
    TRY(ints_of(x, tot, &total, 1, &ntot, err));
    if ((int64_t)nsl != B || ntot != 1) return rt_err(n, err, GRAFT_EINVAL, "seqlens_k / total_sequence_length");
    int first = S == total;
    int64_t past = first ? 0 : seqk[0] + 1 - S;
    for (int64_t b = 1; b < B; b++)
        if ((first ? 0 : seqk[b] + 1 - S) != past) return UNSUP(cn, "batch rows of different lengths");
    int64_t Lp = Pbuf > total ? Pbuf : total;
    if (past < 0 || past + S > Lp) return rt_err(n, err, GRAFT_EINVAL, "seqlens_k inconsistent with the sequence");
    if (past + S != Lp) return UNSUP(cn, "present longer than the sequence");
    int dt = q->t.dtype;
    size_t es = rt_dtype_size(dt);
    TRY(cx_to_dev(x, q, err));
    if (!packed) {
        TRY(cx_to_dev(x, k, err));
        TRY(cx_to_dev(x, v, err));
    }
    TRY(cx_to_dev_pitched(x, pk, err));
    TRY(cx_to_dev_pitched(x, pv, err));
    int64_t yd[3] = {B, S, Hq * hd}, kd[4] = {B, Hkv, Lp, hd};
    cx_val *y = cx_out(x, cn, 0, dt, 3, yd, err);
    OUT_OR_FAIL(y);
    const cx_kvbind *ck = NULL, *cv = NULL;
    int in_place = Skv == S && cache_pair(x, cn, 3, 4, &ck, &cv), shared = 0;
    if (!in_place && Skv == 0) { /* past is another layer's present, its cache: read it there */
        for (size_t i = 0; i < x->n_kv; i++) {
            if (x->vals[x->kv[i].present] == pk && pk->d == x->kv[i].buf && pk->pitch) ck = &x->kv[i];
            if (x->vals[x->kv[i].present] == pv && pv->d == x->kv[i].buf && pv->pitch) cv = &x->kv[i];
        }
        shared = ck && cv && ck != cv;
    }
    cx_val *ok = NULL, *ov = NULL;
    if (!in_place && !shared) {
        ok = cx_out(x, cn, 1, dt, 4, kd, err);
        OUT_OR_FAIL(ok);
        ov = cx_out(x, cn, 2, dt, 4, kd, err);
        OUT_OR_FAIL(ov);
    }
    int64_t qrow = packed ? (Hq + 2 * Hkv) * hd : Hq * hd, krow = packed ? qrow : Hkv * hd;
    const char *kin = packed ? (const char *)q->d + (size_t)(Hq * hd) * es : (const char *)(k ? k->d : NULL);
    const char *vin = packed ? (const char *)q->d + (size_t)((Hq + Hkv) * hd) * es : (const char *)(v ? v->d : NULL);
    const void *qsrc = q->d;
    /* scratch: rotated Q [B, S, qrow], rotated K [B, S, krow], positions */
    size_t qbytes = (size_t)(B * S * qrow) * es, kbytes = (size_t)(B * S * krow) * es;
    size_t pbytes = (size_t)(B * S) * sizeof(int64_t);
    char *scr = cx_scratch(cn, qbytes + kbytes + pbytes + 512, err);
    if (!scr) return err->code;
    char *qr = scr, *kr = scr + (qbytes + 255) / 256 * 256;
    int64_t *dpos = (int64_t *)(kr + (kbytes + 255) / 256 * 256);
    if (rt_attr_int(n, "do_rotary", 0)) {
        if (cc->t.rank != 2 || sc->t.rank != 2 || cc->t.dims[0] != sc->t.dims[0] || cc->t.dims[1] != sc->t.dims[1])
            return rt_err(n, err, GRAFT_EINVAL, "cos/sin caches of different shapes");
        const int64_t *pp;
        if (pos) {
            if ((int64_t)pos->t.numel != B * S) return rt_err(n, err, GRAFT_EINVAL, "position_ids shape");
            TRY(cx_to_dev(x, pos, err));
            pp = pos->d;
        } else {
            if (cn->hcap < (size_t)(B * S)) { /* pinned: the copy may sit in a CUDA graph */
                if (x->capturing) {
                    x->cap_abort = x->cap_abort ? x->cap_abort : 2;
                    return UNSUP(cn, "CUDA graph capture: positions grow");
                }
                if (cn->hscr) {
                    cudaStreamSynchronize(x->stream);
                    cudaFreeHost(cn->hscr);
                }
                cn->hscr = NULL;
                cn->hcap = 0;
                if (cudaMallocHost((void **)&cn->hscr, 2 * pbytes + 8) != cudaSuccess) { /* two slots */
                    (void)cudaGetLastError();
                    cn->hscr = NULL;
                    return rt_err(n, err, GRAFT_ENOMEM, "out of pinned memory");
                }
                cn->hcap = (size_t)(B * S);
            }
            int64_t *hs = cn->hscr + (size_t)x->slot * cn->hcap;
            for (int64_t b = 0; b < B; b++)
                for (int64_t s = 0; s < S; s++) hs[b * S + s] = past + s;
            cudaError_t e = cudaMemcpyAsync(dpos, hs, pbytes, cudaMemcpyHostToDevice, x->stream);
            if (e != cudaSuccess) return cx_cuda_err(cn, err, e, "positions");
            pp = dpos;
        }
        TRY(cx_to_dev(x, cc, err));
        TRY(cx_to_dev(x, sc, err));
        gcuda_rotary_args r = {0};
        r.dtype = dt, r.batch = B, r.seq = S, r.head_size = hd;
        r.rotary_dim = cc->t.dims[1] * 2, r.max_pos = cc->t.dims[0];
        r.cos_cache = cc->d, r.sin_cache = sc->d, r.positions = pp;
        r.interleaved = (int)rt_attr_int(n, "rotary_interleaved", 0);
        r.heads = Hq, r.x = q->d, r.y = qr;
        r.stride_b = S * qrow, r.stride_s = qrow, r.stride_h = hd;
        TRY(gcuda_rotary(&r, STRM(x), err));
        qsrc = qr;
        if (Skv) {
            r.heads = Hkv, r.x = kin, r.y = kr;
            r.stride_b = S * krow, r.stride_s = krow;
            TRY(gcuda_rotary(&r, STRM(x), err));
            kin = kr;
        }
    }
    int64_t win = rt_attr_int(n, "local_window_size", -1);
    float scv;
    float scale = graft_node_attr_float(n->src, "scale", &scv) && scv != 0.0f ? scv : 1.0f / sqrtf((float)hd);
    if (in_place || shared) { /* KV in place: append (unless shared), attend over the cache */
        cache_attn c = {0};
        c.dt = dt, c.B = B, c.Hq = Hq, c.Hkv = Hkv, c.Sq = S, c.hd = hd, c.past = past;
        c.q = qsrc, c.qb = S * qrow, c.qs = qrow, c.qh = hd;
        c.y = y->d, c.yb = S * Hq * hd, c.ys = Hq * hd, c.yh = hd;
        if (in_place) c.k = kin, c.v = vin, c.kb = S * krow, c.ks = krow, c.kh = hd;
        c.ck = ck, c.cv = cv, c.causal = 1, c.window_left = win >= 0 ? win - 1 : -1;
        c.scale = scale, c.softcap = rt_attr_float(n, "softcap", 0.0f);
        c.exempt = 1u << 3 | 1u << 4 | 1u << 5 | 1u << 6, c.lenkind = in_place ? 1 : 2, c.lin = 3, c.mask_in = -1;
        cn->rp_hscr = rt_attr_int(n, "do_rotary", 0) && !pos;
        TRY(attend_cache(x, cn, &c, err));
        int64_t td[4] = {B, Hkv, past + S, hd};
        OUT_OR_FAIL(cx_out_cache(x, cn, 1, dt, td, ck, err));
        OUT_OR_FAIL(cx_out_cache(x, cn, 2, dt, td, cv, err));
        return GRAFT_OK;
    }
    /* present = past rows kept, then the new rows */
    int64_t keep = past + (Skv ? 0 : S) < Pbuf ? past + (Skv ? 0 : S) : Pbuf;
    for (int w = 0; w < 2; w++) {
        cx_val *dst = w ? ov : ok, *pst = w ? pv : pk;
        const char *src = w ? vin : kin;
        gops_shape sh = {0};
        sh.rank = 4;
        int64_t dstr[4] = {Hkv * Lp * hd, Lp * hd, hd, 1};
        if (keep && pst->d != dst->d) {
            int64_t pd[4] = {B, Hkv, keep, hd};
            memcpy(sh.dims, pd, sizeof pd);
            cx_strides4(pst, sh.st[0]);
            memcpy(sh.st[1], dstr, sizeof dstr);
            TRY(gops_copy(es, &sh, pst->d, dst->d, STRM(x), err));
        }
        if (Skv) {
            int64_t nd[4] = {B, Hkv, Skv, hd}, sst[4] = {S * krow, hd, krow, 1};
            memcpy(sh.dims, nd, sizeof nd);
            memcpy(sh.st[0], sst, sizeof sst);
            memcpy(sh.st[1], dstr, sizeof dstr);
            TRY(gops_copy(es, &sh, src, (char *)dst->d + (size_t)(past * hd) * es, STRM(x), err));
        }
    }
    gops_attn_args a = {0};
    a.dtype = dt, a.B = B, a.Hq = Hq, a.Hkv = Hkv, a.Sq = S, a.T = past + S, a.hd = hd, a.vd = hd;
    a.q = qsrc, a.qs[0] = S * qrow, a.qs[1] = hd, a.qs[2] = qrow;
    a.k = ok->d, a.v = ov->d;
    a.ks[0] = a.vs[0] = Hkv * Lp * hd, a.ks[1] = a.vs[1] = Lp * hd, a.ks[2] = a.vs[2] = hd;
    a.y = y->d, a.ys[0] = S * Hq * hd, a.ys[1] = hd, a.ys[2] = Hq * hd;
    a.past = past, a.causal = 1;
    a.window_left = win >= 0 ? win - 1 : -1;
    a.scale = scale;
    a.softcap = rt_attr_float(n, "softcap", 0.0f);
    return gops_attention(&a, STRM(x), err);
}

/* com.microsoft MatMulNBits, 4 bits, on gcuda_matmul_nbits. */
static int acc_nbits(cx_exec *x, cx_node *cn)
{
    rt_node *n = &cn->n;
    rt_tensor *a = rt_in(n, 0), *b = rt_in(n, 1), *s = rt_in(n, 2), *z = rt_in(n, 3), *bias = rt_in(n, 5);
    if (!a || !b || !s || !cx_is_float(a->dtype) || s->dtype != a->dtype || b->dtype != GRAFT_DTYPE_UINT8) return 0;
    if (rt_attr_int(n, "bits", 4) != 4 || (rt_in(n, 4) && rt_in(n, 4)->numel)) return 0;
    int64_t blk = rt_attr_int(n, "block_size", 0);
    if (blk < 16 || blk > 256 || (blk & (blk - 1))) return 0;
    if (z && z->numel && z->dtype != GRAFT_DTYPE_UINT8 && z->dtype != a->dtype) return 0;
    if (bias && bias->dtype != a->dtype) return 0;
    return 1;
}

static graft_status run_nbits(cx_exec *x, cx_node *cn, graft_error *err)
{
    rt_node *n = &cn->n;
    cx_val *a = cx_in(cn, 0), *b = cx_in(cn, 1), *s = cx_in(cn, 2), *z = cx_in(cn, 3), *bias = cx_in(cn, 5);
    int64_t K = rt_attr_int(n, "K", 0), N = rt_attr_int(n, "N", 0), blk = rt_attr_int(n, "block_size", 0);
    if (K <= 0 || N <= 0 || a->t.rank < 1 || a->t.dims[a->t.rank - 1] != K)
        return rt_err(n, err, GRAFT_EINVAL, "A's last dimension is not K = %lld", (long long)K);
    int64_t kb = (K + blk - 1) / blk;
    if ((int64_t)b->t.numel != N * kb * (blk / 2) || (int64_t)s->t.numel != N * kb)
        return rt_err(n, err, GRAFT_EINVAL, "B or scales of the wrong size");
    if (z && !z->t.numel) z = NULL;
    if (z && (int64_t)z->t.numel != (z->t.dtype == GRAFT_DTYPE_UINT8 ? N * ((kb + 1) / 2) : N * kb))
        return rt_err(n, err, GRAFT_EINVAL, "zero_points of the wrong size");
    if (bias && (int64_t)bias->t.numel != N) return rt_err(n, err, GRAFT_EINVAL, "bias must hold N values");
    TRY(cx_to_dev(x, a, err));
    TRY(cx_to_dev(x, b, err));
    TRY(cx_to_dev(x, s, err));
    if (z) TRY(cx_to_dev(x, z, err));
    if (bias) TRY(cx_to_dev(x, bias, err));
    int64_t od[RT_MAX_RANK];
    memcpy(od, a->t.dims, (size_t)a->t.rank * sizeof *od);
    od[a->t.rank - 1] = N;
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, a->t.rank, od, err);
    OUT_OR_FAIL(y);
    gcuda_matmul_nbits_args m = {0};
    m.dtype = a->t.dtype, m.M = (int64_t)a->t.numel / K, m.N = N, m.K = K, m.block_size = blk;
    m.a = a->d, m.b = b->d, m.scales = s->d, m.zero_points = z ? z->d : NULL;
    m.zp_dtype = z ? z->t.dtype : GRAFT_DTYPE_UINT8, m.bias = bias ? bias->d : NULL, m.y = y->d;
    if (!m.M) return GRAFT_OK;
    return gcuda_matmul_nbits(&m, STRM(x), err);
}

/* ------------------------------------------------------------ the table */

const cx_op cx_ops[] = {
    {"", "Add", acc_binary, run_binary},
    {"", "Sub", acc_binary, run_binary},
    {"", "Mul", acc_binary, run_binary},
    {"", "Div", acc_binary, run_binary},
    {"", "Pow", acc_binary, run_binary},
    {"", "Max", acc_binary, run_binary},
    {"", "Min", acc_binary, run_binary},
    {"", "Where", acc_where, run_where},
    {"", "Equal", acc_compare, run_binary},
    {"", "Less", acc_compare, run_binary},
    {"", "Greater", acc_compare, run_binary},
    {"", "CumSum", acc_cumsum, run_cumsum},
    {"", "Neg", acc_unary, run_unary},
    {"", "Sqrt", acc_unary, run_unary},
    {"", "Tanh", acc_unary, run_unary},
    {"", "Sigmoid", acc_unary, run_unary},
    {"", "Relu", acc_unary, run_unary},
    {"", "Exp", acc_unary, run_unary},
    {"", "Abs", acc_unary, run_unary},
    {"", "Reciprocal", acc_unary, run_unary},
    {"", "Gelu", acc_unary, run_unary},
    {"", "Clip", acc_unary, run_unary},
    {"", "Cast", acc_cast, run_cast},
    {"", "MatMul", acc_matmul, run_matmul},
    {"", "RMSNormalization", acc_rms, run_rms},
    {"", "SimplifiedLayerNormalization", acc_rms, run_rms},
    {"com.microsoft", "SkipSimplifiedLayerNormalization", acc_skip_rms, run_skip_rms},
    {"", "Gather", acc_float_data, run_gather},
    {"", "Transpose", acc_float_data, run_transpose},
    {"", "Slice", acc_slice, run_slice},
    {"", "Concat", acc_concat, run_concat},
    {"", "Split", acc_split, run_split},
    {"", "Expand", acc_float_data, run_expand},
    {"", "ReduceMean", acc_float_data, run_reduce},
    {"", "ReduceSum", acc_float_data, run_reduce},
    {"", "RotaryEmbedding", acc_rotary, run_rotary},
    {"", "Attention", acc_attention, run_attention},
    {"com.microsoft", "GroupQueryAttention", acc_gqa, run_gqa},
    {"com.microsoft", "MatMulNBits", acc_nbits, run_nbits},
    {NULL, NULL, NULL, NULL},
};

/* ------------------------------------------------------------ CUDA graph replay */

/* Notes why a device node cannot be replayed (the first refusal of a step;
 * the backend's description names it). */
static int rp_no(cx_exec *x, cx_node *cn, const char *why)
{
    if (!x->rp_why[0])
        snprintf(x->rp_why, sizeof x->rp_why, "%s '%s' (%s)", rt_node_op(&cn->n), graft_node_name(cn->n.src), why);
    return 0;
}

int cx_replay_node(cx_exec *x, cx_node *cn)
{
    rt_node *n = &cn->n;
    if (!cn->rp_ok || cn->rp_bad || n->n_in > 32) return rp_no(x, cn, "record");
    if (cn->rp_elide) { /* an elided transpose: only its shape */
        cx_val *a = cx_in(cn, 0), *y = cx_v(n->out[0]);
        size_t np;
        const int64_t *perm = rt_attr_ints(n, "perm", &np);
        if (!a || !perm || (int)np != a->t.rank || a->t.rank != cn->rp_out[0].rank || y->d != cn->rp_out[0].d ||
            a->t.dtype != cn->rp_out[0].dtype)
            return rp_no(x, cn, "elided transpose");
        uint64_t numel = 1;
        for (int i = 0; i < a->t.rank; i++) {
            if (perm[i] < 0 || perm[i] >= a->t.rank) return rp_no(x, cn, "elided transpose");
            y->t.dims[i] = a->t.dims[perm[i]];
            numel *= (uint64_t)y->t.dims[i];
        }
        if (numel * rt_dtype_size(a->t.dtype) > cn->rp_out[0].nbytes && numel > cn->rp_out[0].numel) {
            /* larger than at capture: still within the buffer planned at the maximum context? */
            cx_val *yv = y;
            if (!yv->dcap || numel * rt_dtype_size(a->t.dtype) > yv->dcap) return rp_no(x, cn, "elided transpose");
        }
        y->base = NULL;
        y->t.dtype = a->t.dtype;
        y->t.rank = a->t.rank;
        y->t.numel = numel;
        y->t.nbytes = (size_t)numel * rt_dtype_size(a->t.dtype);
        y->t.present = true;
        y->pitch = 0;
        y->on_dev = true;
        y->on_host = false;
        return 1;
    }
    /* inputs shaped as when the step was captured (the KV length aside) */
    for (int j = 0; j < n->n_in; j++) {
        const cx_meta *m = &cn->rp_in[j];
        rt_tensor *t = n->in[j];
        if (!t) continue;
        if (t->present != (m->present != 0) || t->dtype != m->dtype || t->rank != m->rank)
            return rp_no(x, cn, "input presence, type or rank");
        if (cn->rp_exempt >> j & 1) continue;
        for (int d = 0; d < t->rank; d++)
            if (t->dims[d] != m->dims[d]) {
                char why[64];
                snprintf(why, sizeof why, "input %d dim %d: %lld, captured %lld", j, d, (long long)t->dims[d],
                         (long long)m->dims[d]);
                return rp_no(x, cn, why);
            }
    }
    /* what it read on the host: the same bytes */
    for (int i = 0; i < cn->rp_nhr; i++) {
        cx_val *v = cn->rp_hr[i];
        int ex = 0;
        for (int j = 0; j < n->n_in; j++) ex |= (cn->rp_exempt >> j & 1) && n->in[j] == &v->t;
        if (ex) continue;
        if (!v->on_host || v->t.nbytes != cn->rp_hrn[i] ||
            (v->t.nbytes && memcmp(v->t.data, cn->rp_hrb[i], v->t.nbytes)))
            return rp_no(x, cn, "host-read bytes");
    }
    /* the lengths, read from device memory by the captured kernels */
    int64_t past = 0;
    if (cn->rp_len) {
        rt_tensor *t = cn->rp_lin < n->n_in ? n->in[cn->rp_lin] : NULL;
        if (!t || (t->rank != 4 && (cn->rp_len != 3 || t->rank != 3))) return rp_no(x, cn, "KV length");
        /* 1: a past [B, H, past, D]; 2: a present [B, H, past + S, D]; 3: K read
         * from another layer's cache, [B, T, H * D] or [B, H, T, D] */
        past = cn->rp_len == 3 ? (t->rank == 3 ? t->dims[1] : t->dims[2]) - cn->rp_S
                               : t->dims[2] - (cn->rp_len == 2 ? cn->rp_S : 0);
        if (past < 0 || !cx_lens_replay(x, past, past + cn->rp_S)) return rp_no(x, cn, "KV length");
        if (cn->rp_hscr) {
            if (!cn->hscr || cn->hcap < (size_t)(cn->rp_B * cn->rp_S)) return rp_no(x, cn, "KV length");
            int64_t *hs = cn->hscr + (size_t)x->slot * cn->hcap;
            for (int64_t b = 0; b < cn->rp_B; b++)
                for (int64_t s2 = 0; s2 < cn->rp_S; s2++) hs[b * cn->rp_S + s2] = past + s2;
        }
        if (cn->rp_mask_in >= 0) { /* the mask must still be the same causal window */
            cx_val *mv = cx_in(cn, cn->rp_mask_in);
            gops_attn_args ma = {0};
            if (!mv || !mask_fields(mv, cn->rp_B, cn->rp_Hq, cn->rp_S, cn->rp_dt, &ma)) return rp_no(x, cn, "mask window");
            cache_attn c = {0};
            c.dt = cn->rp_dt, c.B = cn->rp_B, c.Hq = cn->rp_Hq, c.Sq = cn->rp_S, c.past = past;
            c.causal = cn->rp_causal, c.window_left = cn->rp_wleft, c.mask = &ma, c.mval = mv;
            int64_t w = -1;
            if (!mask_window_cached(x, &c, past + cn->rp_S, &w) || w != cn->rp_win) return rp_no(x, cn, "mask window");
        }
    }
    /* per-step uploads: their pinned staging refilled (the copies are in the graph) */
    for (int i = 0; i < cn->rp_nup; i++) {
        cx_val *v = cn->rp_up[i];
        if (v->on_dev) continue;
        if (!v->on_host || !v->t.present || v->t.nbytes != cn->rp_upn[i] || v->t.nbytes > v->pcap || v->base)
            return rp_no(x, cn, "upload");
        if (v->t.nbytes) memcpy(v->pin[x->slot], v->t.data, v->t.nbytes);
        v->on_dev = true;
    }
    /* outputs as the graph will leave them */
    for (int j = 0; j < n->n_out; j++) {
        const cx_meta *m = &cn->rp_out[j];
        cx_val *v = cx_v(n->out[j]);
        if (!m->present) continue;
        if (v->d != m->d) return rp_no(x, cn, "output buffer");
        v->base = NULL;
        v->t.dtype = m->dtype;
        v->t.rank = m->rank;
        memcpy(v->t.dims, m->dims, sizeof m->dims);
        v->t.numel = m->numel;
        v->t.nbytes = m->nbytes;
        v->pitch = m->pitch;
        if (m->pitch && cn->rp_len) { /* a present: a view of the cache, past + S rows */
            v->t.dims[2] = past + cn->rp_S;
            v->t.numel = (uint64_t)(v->t.dims[0] * v->t.dims[1] * v->t.dims[2] * v->t.dims[3]);
            v->t.nbytes = (size_t)v->t.numel * rt_dtype_size(v->t.dtype);
        }
        v->t.present = true;
        v->on_dev = true;
        v->on_host = false;
    }
    return 1;
}
