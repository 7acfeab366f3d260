/* CPU kernels: shape family (shape arithmetic and data movement).
 *
 * Every kernel here moves bytes: it works for any dtype with a whole number
 * of bytes per element (bool, float8 and the 16/32/64-bit types included),
 * sub-byte types only where the output is a view (Reshape, Flatten,
 * Squeeze, Unsqueeze). Pure reshapes, and slices or transposes that leave
 * the bytes in place, are views of their input: its buffer outlives the
 * run. Everything else writes rt_out buffers, which are allocated once for
 * the largest shape seen.
 *
 * The strided copy below is the workhorse: it merges contiguous dimensions
 * and copies inner runs with memcpy, so Transpose, Slice, Expand, Tile,
 * Split and Depth/SpaceToDepth only do index math per run, not per element,
 * whenever the innermost axis stays contiguous. */
#include <math.h>

#include "kernels/kcommon.h"

/* ------------------------------------------------------------ common helpers */

#define SC_MAX (2 * RT_MAX_RANK + 2)

/* Element size of t, or 0 with err set (sub-byte or non-numeric types). */
static size_t need_es(const rt_node *n, const rt_tensor *t, graft_error *err)
{
    size_t es = t->dtype == GRAFT_DTYPE_STRING ? 0 : rt_dtype_size(t->dtype);
    if (!es) rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s not supported", graft_dtype_name(t->dtype));
    return es;
}

static graft_status missing(const rt_node *n, graft_error *err, int i)
{
    return rt_err(n, err, GRAFT_EINVAL, "missing input %d", i);
}

/* Row-major element strides of dims. */
static void k_strides(int r, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        st[i] = s;
        s *= dims[i];
    }
}

/* Tiled copy for a source whose two innermost (merged) dimensions are
 * swapped: dim r-2 is contiguous in the source (stride es), dim r-1 is not.
 * Tiles keep both the strided reads and the writes within cache. */
#define TILE 8
#define SWAP_TILE(T)                                                                       \
    for (int64_t a0 = 0; a0 < A; a0 += TILE) {                                             \
        int64_t a1 = a0 + TILE < A ? a0 + TILE : A;                                         \
        for (int64_t b0 = 0; b0 < B; b0 += TILE) {                                         \
            int64_t b1 = b0 + TILE < B ? b0 + TILE : B;                                     \
            for (int64_t a = a0; a < a1; a++) {                                            \
                T *o_ = (T *)(void *)(dst + (size_t)(a * B) * sizeof(T));                   \
                const char *q_ = p + a * (int64_t)sizeof(T) + b0 * sb;                     \
                for (int64_t b = b0; b < b1; b++, q_ += sb) memcpy(&o_[b], q_, sizeof(T)); \
            }                                                                              \
        }                                                                                  \
    }

static void copy_swapped(char *dst, const char *src, int r, const int64_t *d, const int64_t *s, size_t es)
{
    int64_t idx[SC_MAX];
    int outer = r - 2;
    int64_t A = d[r - 2], B = d[r - 1], sb = s[r - 1];
    size_t blk = (size_t)(A * B) * es;
    for (int i = 0; i < outer; i++) idx[i] = 0;
    const char *p = src;
    for (;;) {
        switch (es) {
        case 1: SWAP_TILE(uint8_t); break;
        case 2: SWAP_TILE(uint16_t); break;
        case 4: SWAP_TILE(uint32_t); break;
        case 8: SWAP_TILE(uint64_t); break;
        default:
            for (int64_t a = 0; a < A; a++)
                for (int64_t b = 0; b < B; b++)
                    memcpy(dst + (size_t)(a * B + b) * es, p + a * (int64_t)es + b * sb, es);
            break;
        }
        dst += blk;
        int k = outer - 1;
        for (; k >= 0; k--) {
            p += s[k];
            if (++idx[k] < d[k]) break;
            p -= s[k] * d[k];
            idx[k] = 0;
        }
        if (k < 0) break;
    }
}
#undef SWAP_TILE

/* Copies the elements of a strided source region to a contiguous
 * destination in row-major order. dims: region shape (rank <= SC_MAX);
 * sstr: source strides in BYTES (any sign, 0 for broadcast); es: element
 * size. Size-1 dimensions are dropped and dimensions contiguous with the
 * next are merged; a contiguous innermost run is copied with memcpy. */
static void copy_strided(char *dst, const char *src, int rank, const int64_t *dims, const int64_t *sstr,
                         size_t es)
{
    int64_t d[SC_MAX], s[SC_MAX], idx[SC_MAX];
    int r = 0;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 0) return;
        if (dims[i] == 1) continue;
        if (r > 0 && s[r - 1] == sstr[i] * dims[i]) {
            d[r - 1] *= dims[i];
            s[r - 1] = sstr[i];
            continue;
        }
        d[r] = dims[i];
        s[r] = sstr[i];
        r++;
    }
    if (r == 0) {
        memcpy(dst, src, es);
        return;
    }
    if (r >= 2 && s[r - 1] != (int64_t)es && s[r - 2] == (int64_t)es) {
        copy_swapped(dst, src, r, d, s, es);
        return;
    }
    /* inner loop: one contiguous run, or d[r-1] elements at stride s[r-1] */
    int contiguous = s[r - 1] == (int64_t)es;
    int64_t in_n = d[r - 1], in_s = s[r - 1];
    size_t run = (size_t)in_n * es;
    int outer = r - 1;
    for (int i = 0; i < outer; i++) idx[i] = 0;
    const char *p = src;
    for (;;) {
        if (contiguous) {
            memcpy(dst, p, run);
        } else {
            const char *q = p;
            switch (es) {
            case 1:
                for (int64_t j = 0; j < in_n; j++, q += in_s) dst[j] = *q;
                break;
            case 2:
                for (int64_t j = 0; j < in_n; j++, q += in_s) memcpy(dst + 2 * j, q, 2);
                break;
            case 4:
                for (int64_t j = 0; j < in_n; j++, q += in_s) memcpy(dst + 4 * j, q, 4);
                break;
            case 8:
                for (int64_t j = 0; j < in_n; j++, q += in_s) memcpy(dst + 8 * j, q, 8);
                break;
            default:
                for (int64_t j = 0; j < in_n; j++, q += in_s) memcpy(dst + (size_t)j * es, q, es);
                break;
            }
        }
        dst += run;
        int k = outer - 1;
        for (; k >= 0; k--) {
            p += s[k];
            if (++idx[k] < d[k]) break;
            p -= s[k] * d[k];
            idx[k] = 0;
        }
        if (k < 0) break;
    }
}

/* Writes count copies of the es-byte pattern val at dst. */
static void fill_pattern(char *dst, const void *val, size_t es, uint64_t count)
{
    if (!count) return;
    const unsigned char *v = val;
    int same = 1;
    for (size_t i = 1; i < es; i++) same &= v[i] == v[0];
    if (same) {
        memset(dst, v[0], (size_t)count * es);
        return;
    }
    memcpy(dst, val, es);
    size_t done = es, total = (size_t)count * es;
    while (done < total) {
        size_t c = done < total - done ? done : total - done;
        memcpy(dst + done, dst, c);
        done += c;
    }
}

/* Element i of a numeric tensor as double (0 for unknown types). */
static double get_f64(const void *data, int dtype, uint64_t i)
{
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT: return ((const float *)data)[i];
    case GRAFT_DTYPE_DOUBLE: return ((const double *)data)[i];
    case GRAFT_DTYPE_FLOAT16: return rt_f16_to_f32(((const uint16_t *)data)[i]);
    case GRAFT_DTYPE_BFLOAT16: return rt_bf16_to_f32(((const uint16_t *)data)[i]);
    case GRAFT_DTYPE_INT8: return ((const int8_t *)data)[i];
    case GRAFT_DTYPE_INT16: return ((const int16_t *)data)[i];
    case GRAFT_DTYPE_INT32: return ((const int32_t *)data)[i];
    case GRAFT_DTYPE_INT64: return (double)((const int64_t *)data)[i];
    case GRAFT_DTYPE_UINT8: return ((const uint8_t *)data)[i];
    case GRAFT_DTYPE_BOOL: return ((const uint8_t *)data)[i] != 0;
    case GRAFT_DTYPE_UINT16: return ((const uint16_t *)data)[i];
    case GRAFT_DTYPE_UINT32: return ((const uint32_t *)data)[i];
    case GRAFT_DTYPE_UINT64: return (double)((const uint64_t *)data)[i];
    default: return 0;
    }
}

static int is_numeric(int dtype)
{
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT: case GRAFT_DTYPE_DOUBLE: case GRAFT_DTYPE_FLOAT16: case GRAFT_DTYPE_BFLOAT16:
    case GRAFT_DTYPE_INT8: case GRAFT_DTYPE_INT16: case GRAFT_DTYPE_INT32: case GRAFT_DTYPE_INT64:
    case GRAFT_DTYPE_UINT8: case GRAFT_DTYPE_UINT16: case GRAFT_DTYPE_UINT32: case GRAFT_DTYPE_UINT64:
    case GRAFT_DTYPE_BOOL:
        return 1;
    default:
        return 0;
    }
}

/* Stores v into element i, converted to dtype (saturating integers). */
static void set_f64(void *data, int dtype, uint64_t i, double v)
{
#define SAT(T, LO, HI) (isnan(v) ? (T)0 : v <= (double)(LO) ? (T)(LO) : v >= (double)(HI) ? (T)(HI) : (T)v)
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT: ((float *)data)[i] = (float)v; break;
    case GRAFT_DTYPE_DOUBLE: ((double *)data)[i] = v; break;
    case GRAFT_DTYPE_FLOAT16: ((uint16_t *)data)[i] = rt_f32_to_f16((float)v); break;
    case GRAFT_DTYPE_BFLOAT16: ((uint16_t *)data)[i] = rt_f32_to_bf16((float)v); break;
    case GRAFT_DTYPE_INT8: ((int8_t *)data)[i] = SAT(int8_t, INT8_MIN, INT8_MAX); break;
    case GRAFT_DTYPE_INT16: ((int16_t *)data)[i] = SAT(int16_t, INT16_MIN, INT16_MAX); break;
    case GRAFT_DTYPE_INT32: ((int32_t *)data)[i] = SAT(int32_t, INT32_MIN, INT32_MAX); break;
    case GRAFT_DTYPE_INT64:
        ((int64_t *)data)[i] = isnan(v) ? 0 : v <= -9223372036854775808.0 ? INT64_MIN
                               : v >= 9223372036854775807.0             ? INT64_MAX
                                                                        : (int64_t)v;
        break;
    case GRAFT_DTYPE_UINT8: ((uint8_t *)data)[i] = SAT(uint8_t, 0, UINT8_MAX); break;
    case GRAFT_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0; break;
    case GRAFT_DTYPE_UINT16: ((uint16_t *)data)[i] = SAT(uint16_t, 0, UINT16_MAX); break;
    case GRAFT_DTYPE_UINT32: ((uint32_t *)data)[i] = SAT(uint32_t, 0, UINT32_MAX); break;
    case GRAFT_DTYPE_UINT64:
        ((uint64_t *)data)[i] = isnan(v) || v <= 0 ? 0 : v >= 18446744073709551615.0 ? UINT64_MAX
                                                                                     : (uint64_t)v;
        break;
    default: break;
    }
#undef SAT
}

/* Reads a 1-D (or scalar) int32/int64 tensor of at most cap values. */
static graft_status read_ints(const rt_node *n, const rt_tensor *t, const char *what, int64_t *dst,
                              size_t cap, size_t *count, graft_error *err)
{
    if (t->numel > cap)
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "%s has %llu values (at most %zu supported)", what,
                      (unsigned long long)t->numel, cap);
    if (rt_read_ints(t, dst, cap) < 0)
        return rt_err(n, err, GRAFT_EINVAL, "%s must be int32 or int64, not %s", what,
                      graft_dtype_name(t->dtype));
    *count = (size_t)t->numel;
    return GRAFT_OK;
}

/* Index element i of an int32/int64 tensor. */
static inline int64_t idx_at(const rt_tensor *t, uint64_t i)
{
    return t->dtype == GRAFT_DTYPE_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

static graft_status check_index_type(const rt_node *n, const rt_tensor *t, graft_error *err)
{
    if (t->dtype != GRAFT_DTYPE_INT64 && t->dtype != GRAFT_DTYPE_INT32)
        return rt_err(n, err, GRAFT_EINVAL, "indices must be int32 or int64, not %s", graft_dtype_name(t->dtype));
    return GRAFT_OK;
}

/* Per-node scratch memory, grown, never shrunk (kernel state). */
typedef struct k_scratch {
    void *p;
    size_t cap;
} k_scratch;

static void *scratch(rt_node *n, size_t bytes, graft_error *err)
{
    k_scratch *s = n->state;
    if (!s) {
        if (!(s = calloc(1, sizeof *s))) goto oom;
        n->state = s;
    }
    if (bytes > s->cap || !s->p) {
        size_t want = bytes ? bytes : 1;
        void *p = realloc(s->p, want);
        if (!p) goto oom;
        s->p = p;
        s->cap = want;
    }
    return s->p;
oom:
    rt_err(n, err, GRAFT_ENOMEM, "out of memory (%zu bytes of scratch)", bytes);
    return NULL;
}

static void scratch_fini(rt_node *n)
{
    k_scratch *s = n->state;
    if (s) free(s->p);
    free(s);
    n->state = NULL;
}

/* Output i as a view of x's bytes with a new shape. */
static graft_status view_out(rt_node *n, int i, const rt_tensor *x, int rank, const int64_t *dims, void *data,
                             graft_error *err)
{
    return rt_out_view(n, i, x->dtype, rank, dims, data, err) ? GRAFT_OK : err->code;
}

/* ------------------------------------------------------------ Shape, Size */

static graft_status shape_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    int64_t r = x->rank;
    int64_t start = n->opset >= 15 ? rt_attr_int(n, "start", 0) : 0;
    int64_t end = n->opset >= 15 ? rt_attr_int(n, "end", r) : r;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t len = end > start ? end - start : 0;
    rt_tensor *o = rt_out(n, 0, GRAFT_DTYPE_INT64, 1, &len, err);
    if (!o) return err->code;
    if (len) memcpy(o->data, x->dims + start, (size_t)len * sizeof(int64_t));
    return GRAFT_OK;
}

static graft_status size_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    rt_tensor *o = rt_out(n, 0, GRAFT_DTYPE_INT64, 0, NULL, err);
    if (!o) return err->code;
    *(int64_t *)o->data = (int64_t)x->numel;
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Reshape, Flatten, Squeeze, Unsqueeze */

static graft_status reshape_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *s = rt_in(n, 1);
    if (!x) return missing(n, err, 0);
    if (!s) return missing(n, err, 1);
    int64_t dims[RT_MAX_RANK];
    size_t k;
    graft_status rc = read_ints(n, s, "shape", dims, RT_MAX_RANK, &k, err);
    if (rc) return rc;
    int allowzero = n->opset >= 14 && rt_attr_int(n, "allowzero", 0) != 0;
    int neg = -1;
    uint64_t prod = 1;
    for (size_t i = 0; i < k; i++) {
        if (dims[i] == 0 && !allowzero) {
            if ((int)i >= x->rank)
                return rt_err(n, err, GRAFT_EINVAL, "shape[%zu] is 0 but the input has rank %d", i, x->rank);
            dims[i] = x->dims[i];
        }
        if (dims[i] == -1) {
            if (neg >= 0) return rt_err(n, err, GRAFT_EINVAL, "more than one -1 in the shape");
            neg = (int)i;
        } else if (dims[i] < 0) {
            return rt_err(n, err, GRAFT_EINVAL, "shape[%zu] is %lld", i, (long long)dims[i]);
        } else {
            prod *= (uint64_t)dims[i];
        }
    }
    if (neg >= 0) {
        if (prod == 0) {
            if (x->numel) return rt_err(n, err, GRAFT_EINVAL, "cannot infer -1 next to a zero dimension");
            dims[neg] = 0;
        } else {
            if (x->numel % prod) goto mismatch;
            dims[neg] = (int64_t)(x->numel / prod);
        }
        prod *= (uint64_t)dims[neg];
    }
    if (prod != x->numel) goto mismatch;
    return view_out(n, 0, x, (int)k, dims, x->data, err);
mismatch:
    return rt_err(n, err, GRAFT_EINVAL, "cannot reshape %llu elements to the requested shape",
                  (unsigned long long)x->numel);
}

static graft_status flatten_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    int64_t axis = rt_attr_int(n, "axis", 1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return rt_err(n, err, GRAFT_EINVAL, "axis %lld out of range for rank %d",
                      (long long)rt_attr_int(n, "axis", 1), x->rank);
    int64_t dims[2] = {1, 1};
    for (int i = 0; i < x->rank; i++) dims[i < axis ? 0 : 1] *= x->dims[i];
    return view_out(n, 0, x, 2, dims, x->data, err);
}

/* Axes from input 1 (opset >= 13) or the "axes" attribute; *count -1 when
 * absent. */
static graft_status axes_arg(rt_node *n, int64_t *axes, int *count, graft_error *err)
{
    *count = -1;
    if (n->opset >= 13) {
        rt_tensor *a = rt_in(n, 1);
        if (!a) return GRAFT_OK;
        size_t k;
        graft_status rc = read_ints(n, a, "axes", axes, RT_MAX_RANK, &k, err);
        if (rc) return rc;
        *count = (int)k;
    } else {
        size_t k;
        const int64_t *v = rt_attr_ints(n, "axes", &k);
        if (!v) return GRAFT_OK;
        if (k > RT_MAX_RANK) return rt_err(n, err, GRAFT_EUNSUPPORTED, "%zu axes", k);
        memcpy(axes, v, k * sizeof *v);
        *count = (int)k;
    }
    return GRAFT_OK;
}

static graft_status squeeze_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    int64_t axes[RT_MAX_RANK], dims[RT_MAX_RANK];
    int na;
    graft_status rc = axes_arg(n, axes, &na, err);
    if (rc) return rc;
    bool drop[RT_MAX_RANK] = {0};
    if (na <= 0) { /* absent or empty axes: every axis of size 1 (as onnxruntime) */
        for (int i = 0; i < x->rank; i++) drop[i] = x->dims[i] == 1;
    } else {
        for (int i = 0; i < na; i++) {
            int a = k_axis(axes[i], x->rank);
            if (a < 0) return rt_err(n, err, GRAFT_EINVAL, "axis %lld out of range", (long long)axes[i]);
            if (x->dims[a] != 1)
                return rt_err(n, err, GRAFT_EINVAL, "cannot squeeze axis %d of size %lld", a,
                              (long long)x->dims[a]);
            drop[a] = true;
        }
    }
    int r = 0;
    for (int i = 0; i < x->rank; i++)
        if (!drop[i]) dims[r++] = x->dims[i];
    return view_out(n, 0, x, r, dims, x->data, err);
}

static graft_status unsqueeze_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    int64_t axes[RT_MAX_RANK], dims[RT_MAX_RANK];
    int na;
    graft_status rc = axes_arg(n, axes, &na, err);
    if (rc) return rc;
    if (na < 0) return rt_err(n, err, GRAFT_EINVAL, "no axes");
    int r = x->rank + na;
    if (r > RT_MAX_RANK) return rt_err(n, err, GRAFT_EUNSUPPORTED, "output rank %d", r);
    bool ins[RT_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int a = k_axis(axes[i], r);
        if (a < 0 || ins[a]) return rt_err(n, err, GRAFT_EINVAL, "bad axis %lld", (long long)axes[i]);
        ins[a] = true;
    }
    for (int i = 0, j = 0; i < r; i++) dims[i] = ins[i] ? 1 : x->dims[j++];
    return view_out(n, 0, x, r, dims, x->data, err);
}

/* ------------------------------------------------------------ Transpose */

/* True when permuting dims by perm leaves the bytes in place (the axes of
 * size > 1 keep their order). */
static int perm_is_view(int r, const int64_t *dims, const int64_t *perm)
{
    int64_t last = -1;
    for (int i = 0; i < r; i++) {
        if (dims[perm[i]] == 1) continue;
        if (perm[i] < last) return 0;
        last = perm[i];
    }
    return 1;
}

/* dst (contiguous, shape dims permuted by perm) = src (contiguous, shape
 * dims) transposed. */
static void transpose_bytes(char *dst, const char *src, int r, const int64_t *dims, const int64_t *perm,
                            size_t es)
{
    int64_t st[SC_MAX], od[SC_MAX], os[SC_MAX];
    k_strides(r, dims, st);
    for (int i = 0; i < r; i++) {
        od[i] = dims[perm[i]];
        os[i] = st[perm[i]] * (int64_t)es;
    }
    copy_strided(dst, src, r, od, os, es);
}

static graft_status transpose_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    int r = x->rank;
    int64_t perm[RT_MAX_RANK], dims[RT_MAX_RANK];
    size_t k;
    const int64_t *p = rt_attr_ints(n, "perm", &k);
    if (p) {
        if ((int)k != r) return rt_err(n, err, GRAFT_EINVAL, "perm has %zu entries for rank %d", k, r);
        bool seen[RT_MAX_RANK] = {0};
        for (int i = 0; i < r; i++) {
            int a = k_axis(p[i], r);
            if (a < 0 || seen[a]) return rt_err(n, err, GRAFT_EINVAL, "perm is not a permutation");
            seen[a] = true;
            perm[i] = a;
        }
    } else {
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
    }
    for (int i = 0; i < r; i++) dims[i] = x->dims[perm[i]];
    if (perm_is_view(r, x->dims, perm)) return view_out(n, 0, x, r, dims, x->data, err);
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    rt_tensor *o = rt_out(n, 0, x->dtype, r, dims, err);
    if (!o) return err->code;
    transpose_bytes(o->data, x->data, r, x->dims, perm, es);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Concat, Split */

static graft_status concat_run(rt_node *n, graft_error *err)
{
    rt_tensor *x0 = rt_in(n, 0);
    if (!x0) return missing(n, err, 0);
    int r = x0->rank;
    int64_t axis_attr = rt_attr_int(n, "axis", n->opset < 4 ? 1 : INT64_MIN);
    if (axis_attr == INT64_MIN) return rt_err(n, err, GRAFT_EINVAL, "no axis attribute");
    int axis = k_axis(axis_attr, r);
    if (axis < 0) return rt_err(n, err, GRAFT_EINVAL, "axis %lld out of range for rank %d", (long long)axis_attr, r);
    size_t es = need_es(n, x0, err);
    if (!es) return err->code;
    int64_t dims[RT_MAX_RANK];
    memcpy(dims, x0->dims, (size_t)r * sizeof *dims);
    dims[axis] = 0;
    for (int i = 0; i < n->n_in; i++) {
        rt_tensor *x = rt_in(n, i);
        if (!x) return missing(n, err, i);
        if (x->dtype != x0->dtype || x->rank != r)
            return rt_err(n, err, GRAFT_EINVAL, "input %d: type or rank differs from input 0", i);
        for (int d = 0; d < r; d++)
            if (d != axis && x->dims[d] != x0->dims[d])
                return rt_err(n, err, GRAFT_EINVAL, "input %d: dimension %d is %lld, input 0 has %lld", i, d,
                              (long long)x->dims[d], (long long)x0->dims[d]);
        dims[axis] += x->dims[axis];
    }
    if (n->n_in == 1) return view_out(n, 0, x0, r, dims, x0->data, err);
    rt_tensor *o = rt_out(n, 0, x0->dtype, r, dims, err);
    if (!o) return err->code;
    uint64_t outer = 1, inner = es;
    for (int d = 0; d < axis; d++) outer *= (uint64_t)dims[d];
    for (int d = axis + 1; d < r; d++) inner *= (uint64_t)dims[d];
    if (!o->numel) return GRAFT_OK;
    size_t row = (size_t)(inner * (uint64_t)dims[axis]), off = 0;
    for (int i = 0; i < n->n_in; i++) {
        rt_tensor *x = n->in[i];
        size_t blk = (size_t)(inner * (uint64_t)x->dims[axis]);
        if (!blk) continue;
        char *dst = (char *)o->data + off;
        const char *src = x->data;
        if (outer == 1) {
            memcpy(dst, src, blk);
        } else {
            for (uint64_t k = 0; k < outer; k++, dst += row, src += blk) memcpy(dst, src, blk);
        }
        off += blk;
    }
    return GRAFT_OK;
}

static graft_status split_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    int r = x->rank;
    int64_t axis_attr = rt_attr_int(n, "axis", 0);
    int axis = k_axis(axis_attr, r);
    if (axis < 0) return rt_err(n, err, GRAFT_EINVAL, "axis %lld out of range for rank %d", (long long)axis_attr, r);
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    int no = n->n_out;
    int64_t *sizes = scratch(n, (size_t)no * sizeof *sizes, err);
    if (!sizes) return err->code;
    int64_t dim = x->dims[axis];
    rt_tensor *sp = n->opset >= 13 || n->opset < 2 ? rt_in(n, 1) : NULL;
    size_t cnt = 0;
    const int64_t *sa = n->opset < 13 ? rt_attr_ints(n, "split", &cnt) : NULL;
    if (sp) {
        if ((int64_t)sp->numel != no) return rt_err(n, err, GRAFT_EINVAL, "split has %llu values for %d outputs",
                                                   (unsigned long long)sp->numel, no);
        size_t k;
        graft_status rc = read_ints(n, sp, "split", sizes, (size_t)no, &k, err);
        if (rc) return rc;
    } else if (sa) {
        if ((int)cnt != no) return rt_err(n, err, GRAFT_EINVAL, "split has %zu values for %d outputs", cnt, no);
        memcpy(sizes, sa, cnt * sizeof *sa);
    } else {
        int64_t parts = no;
        if (n->opset >= 18) {
            int64_t nout = rt_attr_int(n, "num_outputs", no);
            if (nout != no)
                return rt_err(n, err, GRAFT_EINVAL, "num_outputs %lld but %d outputs", (long long)nout, no);
        }
        int64_t chunk = (dim + parts - 1) / parts, left = dim;
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
    if (sum != dim)
        return rt_err(n, err, GRAFT_EINVAL, "split sizes sum to %lld, the axis has %lld",
                      (long long)sum, (long long)dim);
    uint64_t outer = 1, inner = es;
    for (int d = 0; d < axis; d++) outer *= (uint64_t)x->dims[d];
    for (int d = axis + 1; d < r; d++) inner *= (uint64_t)x->dims[d];
    size_t row = (size_t)(inner * (uint64_t)dim), off = 0;
    int64_t dims[RT_MAX_RANK];
    memcpy(dims, x->dims, (size_t)r * sizeof *dims);
    for (int i = 0; i < no; i++) {
        int64_t len = sizes[i];
        dims[axis] = len;
        size_t blk = (size_t)(inner * (uint64_t)len);
        if (outer == 1) { /* contiguous part: a view */
            if (view_out(n, i, x, r, dims, (char *)x->data + off, err)) return err->code;
        } else {
            rt_tensor *o = rt_out(n, i, x->dtype, r, dims, err);
            if (!o) return err->code;
            char *dst = o->data;
            const char *src = (const char *)x->data + off;
            if (blk)
                for (uint64_t k = 0; k < outer; k++, dst += blk, src += row) memcpy(dst, src, blk);
        }
        off += blk;
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Slice */

static graft_status slice_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    int r = x->rank;
    int64_t starts[RT_MAX_RANK], ends[RT_MAX_RANK], axes[RT_MAX_RANK], steps[RT_MAX_RANK];
    size_t ns, ne, na, nst;
    graft_status rc;
    if (n->opset >= 10) {
        rt_tensor *ts = rt_in(n, 1), *te = rt_in(n, 2), *ta = rt_in(n, 3), *tp = rt_in(n, 4);
        if (!ts || !te) return missing(n, err, ts ? 2 : 1);
        if ((rc = read_ints(n, ts, "starts", starts, RT_MAX_RANK, &ns, err))) return rc;
        if ((rc = read_ints(n, te, "ends", ends, RT_MAX_RANK, &ne, err))) return rc;
        na = ns;
        if (ta && (rc = read_ints(n, ta, "axes", axes, RT_MAX_RANK, &na, err))) return rc;
        if (!ta)
            for (size_t i = 0; i < ns; i++) axes[i] = (int64_t)i;
        nst = ns;
        if (tp && (rc = read_ints(n, tp, "steps", steps, RT_MAX_RANK, &nst, err))) return rc;
        if (!tp)
            for (size_t i = 0; i < ns; i++) steps[i] = 1;
    } else {
        const int64_t *s = rt_attr_ints(n, "starts", &ns), *e = rt_attr_ints(n, "ends", &ne);
        const int64_t *a = rt_attr_ints(n, "axes", &na);
        if (!s || !e || ns > RT_MAX_RANK || ne != ns) return rt_err(n, err, GRAFT_EINVAL, "bad starts/ends");
        memcpy(starts, s, ns * sizeof *s);
        memcpy(ends, e, ns * sizeof *e);
        if (a) {
            if (na != ns) return rt_err(n, err, GRAFT_EINVAL, "axes and starts differ in length");
            memcpy(axes, a, na * sizeof *a);
        } else {
            na = ns;
            for (size_t i = 0; i < ns; i++) axes[i] = (int64_t)i;
        }
        nst = ns;
        for (size_t i = 0; i < ns; i++) steps[i] = 1;
    }
    if (ne != ns || na != ns || nst != ns)
        return rt_err(n, err, GRAFT_EINVAL, "starts, ends, axes and steps differ in length");
    int64_t st[RT_MAX_RANK], dims[RT_MAX_RANK], step[RT_MAX_RANK], first[RT_MAX_RANK];
    bool seen[RT_MAX_RANK] = {0};
    for (int d = 0; d < r; d++) {
        dims[d] = x->dims[d];
        step[d] = 1;
        first[d] = 0;
    }
    for (size_t i = 0; i < ns; i++) {
        int a = k_axis(axes[i], r);
        if (a < 0 || seen[a]) return rt_err(n, err, GRAFT_EINVAL, "bad axis %lld", (long long)axes[i]);
        seen[a] = true;
        int64_t dim = x->dims[a], s = starts[i], e = ends[i], p = steps[i];
        if (p == 0) return rt_err(n, err, GRAFT_EINVAL, "step 0 on axis %d", a);
        if (s < 0) s += dim;
        if (e < 0) e += dim;
        int64_t len;
        if (p > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            len = e > s ? (e - s - 1) / p + 1 : 0;
        } else {
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            len = s > e ? (s - e - 1) / -p + 1 : 0;
        }
        dims[a] = len;
        first[a] = len ? s : 0;
        step[a] = p;
    }
    k_strides(r, x->dims, st);
    int64_t off = 0;
    for (int d = 0; d < r; d++) off += first[d] * st[d];
    /* in place when only the outermost axis of size > 1 is cut with step 1 */
    int view = 1, outer_seen = 0;
    for (int d = 0; d < r && view; d++) {
        if (dims[d] == 1 && x->dims[d] == 1) continue;
        if (!outer_seen) {
            outer_seen = 1;
            if (dims[d] > 1 && step[d] != 1) view = 0;
        } else if (dims[d] != x->dims[d] || step[d] != 1) {
            view = 0;
        }
    }
    uint64_t numel = rt_numel(r, dims);
    size_t es = rt_dtype_size(x->dtype);
    if (view && (es || off == 0) && x->dtype != GRAFT_DTYPE_STRING)
        return view_out(n, 0, x, r, dims, numel ? (char *)x->data + (size_t)off * es : x->data, err);
    if (!(es = need_es(n, x, err))) return err->code;
    rt_tensor *o = rt_out(n, 0, x->dtype, r, dims, err);
    if (!o) return err->code;
    if (!numel) return GRAFT_OK;
    int64_t bs[RT_MAX_RANK];
    for (int d = 0; d < r; d++) bs[d] = st[d] * step[d] * (int64_t)es;
    copy_strided(o->data, (const char *)x->data + off * (int64_t)es, r, dims, bs, es);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Gather family */

static graft_status gather_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *ix = rt_in(n, 1);
    if (!x || !ix) return missing(n, err, x ? 1 : 0);
    graft_status rc = check_index_type(n, ix, err);
    if (rc) return rc;
    int64_t axis_attr = rt_attr_int(n, "axis", 0);
    int axis = k_axis(axis_attr, x->rank);
    if (axis < 0)
        return rt_err(n, err, GRAFT_EINVAL, "axis %lld out of range for rank %d", (long long)axis_attr, x->rank);
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    int ro = x->rank - 1 + ix->rank;
    if (ro > RT_MAX_RANK) return rt_err(n, err, GRAFT_EUNSUPPORTED, "output rank %d", ro);
    int64_t dims[RT_MAX_RANK];
    int k = 0;
    for (int d = 0; d < axis; d++) dims[k++] = x->dims[d];
    for (int d = 0; d < ix->rank; d++) dims[k++] = ix->dims[d];
    for (int d = axis + 1; d < x->rank; d++) dims[k++] = x->dims[d];
    uint64_t outer = 1, inner = es, ni = ix->numel;
    int64_t D = x->dims[axis];
    for (int d = 0; d < axis; d++) outer *= (uint64_t)x->dims[d];
    for (int d = axis + 1; d < x->rank; d++) inner *= (uint64_t)x->dims[d];
    for (uint64_t j = 0; j < ni; j++) {
        int64_t v = idx_at(ix, j);
        if (v < -D || v >= D)
            return rt_err(n, err, GRAFT_EINVAL, "index %lld out of range [-%lld, %lld)", (long long)v, (long long)D,
                          (long long)D);
    }
    if (outer == 1 && ni == 1) { /* one contiguous block (e.g. one embedding row): a view */
        int64_t v = idx_at(ix, 0);
        v = v < 0 ? v + D : v;
        return view_out(n, 0, x, ro, dims, (char *)x->data + (size_t)v * (size_t)inner, err);
    }
    rt_tensor *o = rt_out(n, 0, x->dtype, ro, dims, err);
    if (!o) return err->code;
    if (!o->numel) return GRAFT_OK;
    char *dst = o->data;
    const char *src = x->data;
    size_t blk = (size_t)inner;
    for (uint64_t i = 0; i < outer; i++) {
        const char *base = src + (size_t)(i * (uint64_t)D) * blk;
        if (ix->dtype == GRAFT_DTYPE_INT64) {
            const int64_t *I = ix->data;
            for (uint64_t j = 0; j < ni; j++, dst += blk) {
                int64_t v = I[j] < 0 ? I[j] + D : I[j];
                memcpy(dst, base + (size_t)v * blk, blk);
            }
        } else {
            const int32_t *I = ix->data;
            for (uint64_t j = 0; j < ni; j++, dst += blk) {
                int64_t v = I[j] < 0 ? (int64_t)I[j] + D : I[j];
                memcpy(dst, base + (size_t)v * blk, blk);
            }
        }
    }
    return GRAFT_OK;
}

static graft_status gather_elements_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *ix = rt_in(n, 1);
    if (!x || !ix) return missing(n, err, x ? 1 : 0);
    graft_status rc = check_index_type(n, ix, err);
    if (rc) return rc;
    int r = x->rank;
    int64_t axis_attr = rt_attr_int(n, "axis", 0);
    int axis = k_axis(axis_attr, r);
    if (axis < 0 || ix->rank != r) return rt_err(n, err, GRAFT_EINVAL, "bad axis or indices rank");
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    rt_tensor *o = rt_out(n, 0, x->dtype, r, ix->dims, err);
    if (!o || !o->numel) return o ? GRAFT_OK : err->code;
    int64_t st[RT_MAX_RANK], idx[RT_MAX_RANK] = {0};
    k_strides(r, x->dims, st);
    int64_t D = x->dims[axis];
    char *dst = o->data;
    const char *src = x->data;
    uint64_t i = 0;
    do {
        int64_t v = idx_at(ix, i);
        if (v < -D || v >= D) return rt_err(n, err, GRAFT_EINVAL, "index %lld out of range", (long long)v);
        if (v < 0) v += D;
        int64_t off = 0;
        for (int d = 0; d < r; d++) off += (d == axis ? v : idx[d]) * st[d];
        memcpy(dst + i * es, src + (size_t)off * es, es);
        i++;
    } while (k_next(r, ix->dims, idx));
    return GRAFT_OK;
}

static graft_status gather_nd_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *ix = rt_in(n, 1);
    if (!x || !ix) return missing(n, err, x ? 1 : 0);
    if (ix->dtype != GRAFT_DTYPE_INT64) return rt_err(n, err, GRAFT_EINVAL, "indices must be int64");
    int64_t b = n->opset >= 12 ? rt_attr_int(n, "batch_dims", 0) : 0;
    if (ix->rank < 1 || b < 0 || b >= ix->rank || b >= x->rank)
        return rt_err(n, err, GRAFT_EINVAL, "bad batch_dims %lld", (long long)b);
    int64_t k = ix->dims[ix->rank - 1];
    if (k < 1 || b + k > x->rank)
        return rt_err(n, err, GRAFT_EINVAL, "index tuples of %lld for rank %d", (long long)k, x->rank);
    for (int d = 0; d < b; d++)
        if (x->dims[d] != ix->dims[d]) return rt_err(n, err, GRAFT_EINVAL, "batch dimensions differ");
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    int64_t dims[RT_MAX_RANK];
    int ro = 0;
    for (int d = 0; d < ix->rank - 1; d++) dims[ro++] = ix->dims[d];
    for (int d = (int)(b + k); d < x->rank; d++) {
        if (ro >= RT_MAX_RANK) return rt_err(n, err, GRAFT_EUNSUPPORTED, "output rank too large");
        dims[ro++] = x->dims[d];
    }
    rt_tensor *o = rt_out(n, 0, x->dtype, ro, dims, err);
    if (!o || !o->numel) return o ? GRAFT_OK : err->code;
    int64_t st[RT_MAX_RANK];
    k_strides(x->rank, x->dims, st);
    uint64_t nb = 1, nper = 1;
    for (int d = 0; d < b; d++) nb *= (uint64_t)x->dims[d];
    for (int d = (int)b; d < ix->rank - 1; d++) nper *= (uint64_t)ix->dims[d];
    size_t slice = (size_t)st[b + k - 1] * es;
    size_t bstride = b ? (size_t)st[b - 1] * es : 0;
    const int64_t *I = ix->data;
    char *dst = o->data;
    for (uint64_t bi = 0; bi < nb; bi++) {
        const char *base = (const char *)x->data + bi * bstride;
        for (uint64_t j = 0; j < nper; j++, I += k, dst += slice) {
            int64_t off = 0;
            for (int64_t q = 0; q < k; q++) {
                int64_t D = x->dims[b + q], v = I[q];
                if (v < -D || v >= D) return rt_err(n, err, GRAFT_EINVAL, "index %lld out of range", (long long)v);
                off += (v < 0 ? v + D : v) * st[b + q];
            }
            memcpy(dst, base + (size_t)off * es, slice);
        }
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Scatter family */

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static int parse_reduction(const rt_node *n, int *red, graft_error *err)
{
    char buf[16];
    const char *s = rt_attr_string(n, "reduction", buf, sizeof buf, "none");
    if (!strcmp(s, "none")) *red = RED_NONE;
    else if (!strcmp(s, "add")) *red = RED_ADD;
    else if (!strcmp(s, "mul")) *red = RED_MUL;
    else if (!strcmp(s, "max")) *red = RED_MAX;
    else if (!strcmp(s, "min")) *red = RED_MIN;
    else return rt_err(n, err, GRAFT_EINVAL, "unknown reduction '%s'", s);
    return GRAFT_OK;
}

#define RED_LOOP(T, LOAD, STORE)                                                           \
    do {                                                                                   \
        T *D_ = dst;                                                                       \
        const T *S_ = src;                                                                 \
        for (size_t i_ = 0; i_ < count; i_++) {                                            \
            float a = LOAD(D_[i_]), b = LOAD(S_[i_]);                                      \
            float v = red == RED_ADD ? a + b : red == RED_MUL ? a * b : red == RED_MAX ? (a > b ? a : b) \
                                                                                : (a < b ? a : b);  \
            D_[i_] = STORE(v);                                                             \
        }                                                                                  \
    } while (0)

#define RED_NATIVE(T, ADDT)                                                                \
    do {                                                                                   \
        T *D_ = dst;                                                                       \
        const T *S_ = src;                                                                 \
        for (size_t i_ = 0; i_ < count; i_++) {                                            \
            T a = D_[i_], b = S_[i_];                                                      \
            D_[i_] = red == RED_ADD ? (T)((ADDT)a + (ADDT)b) : red == RED_MUL ? (T)((ADDT)a * (ADDT)b) \
                   : red == RED_MAX ? (a > b ? a : b) : (a < b ? a : b);                   \
        }                                                                                  \
    } while (0)

/* dst[i] = dst[i] (red) src[i] for count elements; 0 when the dtype has no
 * arithmetic here. */
static int reduce_into(int dtype, int red, void *dst, const void *src, size_t count, size_t es)
{
    if (red == RED_NONE) {
        memcpy(dst, src, count * es);
        return 1;
    }
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT: RED_NATIVE(float, float); break;
    case GRAFT_DTYPE_DOUBLE: RED_NATIVE(double, double); break;
    case GRAFT_DTYPE_INT8: RED_NATIVE(int8_t, uint32_t); break;
    case GRAFT_DTYPE_INT16: RED_NATIVE(int16_t, uint32_t); break;
    case GRAFT_DTYPE_INT32: RED_NATIVE(int32_t, uint32_t); break;
    case GRAFT_DTYPE_INT64: RED_NATIVE(int64_t, uint64_t); break;
    case GRAFT_DTYPE_UINT8: RED_NATIVE(uint8_t, uint32_t); break;
    case GRAFT_DTYPE_UINT16: RED_NATIVE(uint16_t, uint32_t); break;
    case GRAFT_DTYPE_UINT32: RED_NATIVE(uint32_t, uint32_t); break;
    case GRAFT_DTYPE_UINT64: RED_NATIVE(uint64_t, uint64_t); break;
    case GRAFT_DTYPE_FLOAT16: RED_LOOP(uint16_t, rt_f16_to_f32, rt_f32_to_f16); break;
    case GRAFT_DTYPE_BFLOAT16: RED_LOOP(uint16_t, rt_bf16_to_f32, rt_f32_to_bf16); break;
    default: return 0;
    }
    return 1;
}

static graft_status scatter_nd_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *ix = rt_in(n, 1), *u = rt_in(n, 2);
    if (!x || !ix || !u) return missing(n, err, !x ? 0 : !ix ? 1 : 2);
    if (ix->dtype != GRAFT_DTYPE_INT64) return rt_err(n, err, GRAFT_EINVAL, "indices must be int64");
    if (u->dtype != x->dtype) return rt_err(n, err, GRAFT_EINVAL, "updates type differs from data");
    int red = RED_NONE;
    graft_status rc = n->opset >= 16 ? parse_reduction(n, &red, err) : GRAFT_OK;
    if (rc) return rc;
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    if (ix->rank < 1) return rt_err(n, err, GRAFT_EINVAL, "indices of rank 0");
    int64_t k = ix->dims[ix->rank - 1];
    if (k < 1 || k > x->rank)
        return rt_err(n, err, GRAFT_EINVAL, "index tuples of %lld for rank %d", (long long)k, x->rank);
    /* updates shape: indices.shape[:-1] + data.shape[k:] */
    int ur = ix->rank - 1 + x->rank - (int)k;
    int ok = u->rank == ur;
    for (int d = 0; ok && d < ix->rank - 1; d++) ok = u->dims[d] == ix->dims[d];
    for (int d = (int)k; ok && d < x->rank; d++) ok = u->dims[ix->rank - 1 + d - (int)k] == x->dims[d];
    if (!ok) return rt_err(n, err, GRAFT_EINVAL, "updates shape does not match indices and data");
    rt_tensor *o = rt_out(n, 0, x->dtype, x->rank, x->dims, err);
    if (!o) return err->code;
    if (x->nbytes) memcpy(o->data, x->data, x->nbytes);
    int64_t st[RT_MAX_RANK];
    k_strides(x->rank, x->dims, st);
    size_t slice = (size_t)st[k - 1];
    uint64_t cnt = ix->numel / (uint64_t)k;
    const int64_t *I = ix->data;
    const char *U = u->data;
    for (uint64_t j = 0; j < cnt; j++, I += k, U += slice * es) {
        int64_t off = 0;
        for (int64_t q = 0; q < k; q++) {
            int64_t D = x->dims[q], v = I[q];
            if (v < -D || v >= D) return rt_err(n, err, GRAFT_EINVAL, "index %lld out of range", (long long)v);
            off += (v < 0 ? v + D : v) * st[q];
        }
        if (!reduce_into(x->dtype, red, (char *)o->data + (size_t)off * es, U, slice, es))
            return rt_err(n, err, GRAFT_EUNSUPPORTED, "reduction on %s", graft_dtype_name(x->dtype));
    }
    return GRAFT_OK;
}

static graft_status scatter_elements_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *ix = rt_in(n, 1), *u = rt_in(n, 2);
    if (!x || !ix || !u) return missing(n, err, !x ? 0 : !ix ? 1 : 2);
    graft_status rc = check_index_type(n, ix, err);
    if (rc) return rc;
    if (u->dtype != x->dtype) return rt_err(n, err, GRAFT_EINVAL, "updates type differs from data");
    int red = RED_NONE;
    if (n->opset >= 16 && (rc = parse_reduction(n, &red, err))) return rc;
    int r = x->rank;
    int64_t axis_attr = rt_attr_int(n, "axis", 0);
    int axis = k_axis(axis_attr, r);
    if (axis < 0 || ix->rank != r || u->rank != r) return rt_err(n, err, GRAFT_EINVAL, "bad axis or ranks");
    for (int d = 0; d < r; d++)
        if (u->dims[d] != ix->dims[d]) return rt_err(n, err, GRAFT_EINVAL, "updates and indices shapes differ");
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    rt_tensor *o = rt_out(n, 0, x->dtype, r, x->dims, err);
    if (!o) return err->code;
    if (x->nbytes) memcpy(o->data, x->data, x->nbytes);
    if (!ix->numel) return GRAFT_OK;
    int64_t st[RT_MAX_RANK], idx[RT_MAX_RANK] = {0};
    k_strides(r, x->dims, st);
    int64_t D = x->dims[axis];
    uint64_t i = 0;
    do {
        int64_t v = idx_at(ix, i);
        if (v < -D || v >= D) return rt_err(n, err, GRAFT_EINVAL, "index %lld out of range", (long long)v);
        if (v < 0) v += D;
        int64_t off = 0;
        for (int d = 0; d < r; d++) off += (d == axis ? v : idx[d]) * st[d];
        if (!reduce_into(x->dtype, red, (char *)o->data + (size_t)off * es, (const char *)u->data + i * es, 1, es))
            return rt_err(n, err, GRAFT_EUNSUPPORTED, "reduction on %s", graft_dtype_name(x->dtype));
        i++;
    } while (k_next(r, ix->dims, idx));
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Expand, Tile */

static graft_status expand_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *s = rt_in(n, 1);
    if (!x || !s) return missing(n, err, x ? 1 : 0);
    int64_t shp[RT_MAX_RANK], dims[RT_MAX_RANK], bst[RT_MAX_RANK];
    size_t k;
    graft_status rc = read_ints(n, s, "shape", shp, RT_MAX_RANK, &k, err);
    if (rc) return rc;
    int ro;
    if (!k_broadcast(x->rank, x->dims, (int)k, shp, &ro, dims))
        return rt_err(n, err, GRAFT_EINVAL, "shape does not broadcast with the input");
    if (rt_numel(ro, dims) == x->numel) return view_out(n, 0, x, ro, dims, x->data, err);
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    rt_tensor *o = rt_out(n, 0, x->dtype, ro, dims, err);
    if (!o) return err->code;
    if (!o->numel) return GRAFT_OK;
    k_bstrides(x->rank, x->dims, ro, dims, bst);
    for (int d = 0; d < ro; d++) bst[d] *= (int64_t)es;
    copy_strided(o->data, x->data, ro, dims, bst, es);
    return GRAFT_OK;
}

static graft_status tile_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *t = rt_in(n, 1);
    if (!x || !t) return missing(n, err, x ? 1 : 0);
    int r = x->rank;
    int64_t rep[RT_MAX_RANK], dims[RT_MAX_RANK], st[RT_MAX_RANK], vd[SC_MAX], vs[SC_MAX];
    size_t k;
    graft_status rc = read_ints(n, t, "repeats", rep, RT_MAX_RANK, &k, err);
    if (rc) return rc;
    if ((int)k != r) return rt_err(n, err, GRAFT_EINVAL, "%zu repeats for rank %d", k, r);
    for (int d = 0; d < r; d++) {
        if (rep[d] < 0) return rt_err(n, err, GRAFT_EINVAL, "negative repeat");
        dims[d] = x->dims[d] * rep[d];
    }
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    rt_tensor *o = rt_out(n, 0, x->dtype, r, dims, err);
    if (!o) return err->code;
    if (!o->numel) return GRAFT_OK;
    k_strides(r, x->dims, st);
    for (int d = 0; d < r; d++) {
        vd[2 * d] = rep[d];
        vs[2 * d] = 0;
        vd[2 * d + 1] = x->dims[d];
        vs[2 * d + 1] = st[d] * (int64_t)es;
    }
    copy_strided(o->data, x->data, 2 * r, vd, vs, es);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Pad */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* Source index for output position o along an axis of size dim with pad
 * begin pb; -1 for the constant region. */
static int64_t pad_src(int64_t o, int64_t pb, int64_t dim, int mode)
{
    int64_t i = o - pb;
    if (i >= 0 && i < dim) return i;
    switch (mode) {
    case PAD_EDGE: return i < 0 ? 0 : dim - 1;
    case PAD_WRAP: return ((i % dim) + dim) % dim;
    case PAD_REFLECT: {
        if (dim == 1) return 0;
        int64_t period = 2 * (dim - 1), m = ((i % period) + period) % period;
        return m >= dim ? period - m : m;
    }
    default: return -1;
    }
}

static graft_status pad_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    int r = x->rank;
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    char mbuf[16];
    const char *ms = rt_attr_string(n, "mode", mbuf, sizeof mbuf, "constant");
    int mode = !strcmp(ms, "constant") ? PAD_CONSTANT : !strcmp(ms, "reflect") ? PAD_REFLECT
             : !strcmp(ms, "edge")     ? PAD_EDGE     : !strcmp(ms, "wrap")    ? PAD_WRAP : -1;
    if (mode < 0) return rt_err(n, err, GRAFT_EINVAL, "unknown mode '%s'", ms);
    int64_t raw[2 * RT_MAX_RANK], axes[RT_MAX_RANK];
    size_t np, na;
    unsigned char cval[16] = {0};
    graft_status rc;
    if (n->opset >= 11) {
        rt_tensor *tp = rt_in(n, 1), *tc = rt_in(n, 2), *ta = n->opset >= 18 ? rt_in(n, 3) : NULL;
        if (!tp) return missing(n, err, 1);
        if ((rc = read_ints(n, tp, "pads", raw, 2 * RT_MAX_RANK, &np, err))) return rc;
        if (tc && tc->numel) {
            if (tc->dtype != x->dtype) return rt_err(n, err, GRAFT_EINVAL, "constant_value type differs from data");
            memcpy(cval, tc->data, es);
        }
        if (ta) {
            if ((rc = read_ints(n, ta, "axes", axes, RT_MAX_RANK, &na, err))) return rc;
        } else {
            na = (size_t)r;
            for (int d = 0; d < r; d++) axes[d] = d;
        }
    } else {
        const int64_t *p = rt_attr_ints(n, n->opset < 2 ? "paddings" : "pads", &np);
        if (!p || np > 2 * RT_MAX_RANK) return rt_err(n, err, GRAFT_EINVAL, "bad pads attribute");
        memcpy(raw, p, np * sizeof *p);
        if (!is_numeric(x->dtype)) return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s", graft_dtype_name(x->dtype));
        set_f64(cval, x->dtype, 0, rt_attr_float(n, "value", 0.0f));
        na = (size_t)r;
        for (int d = 0; d < r; d++) axes[d] = d;
    }
    if (np != 2 * na) return rt_err(n, err, GRAFT_EINVAL, "%zu pads for %zu axes", np, na);
    int64_t pb[RT_MAX_RANK] = {0}, pe[RT_MAX_RANK] = {0}, dims[RT_MAX_RANK];
    for (size_t i = 0; i < na; i++) {
        int a = k_axis(axes[i], r);
        if (a < 0) return rt_err(n, err, GRAFT_EINVAL, "axis %lld out of range", (long long)axes[i]);
        pb[a] = raw[i];
        pe[a] = raw[na + i];
    }
    int64_t total = 0;
    for (int d = 0; d < r; d++) {
        dims[d] = x->dims[d] + pb[d] + pe[d];
        if (dims[d] < 0) return rt_err(n, err, GRAFT_EINVAL, "negative output dimension on axis %d", d);
        if (mode != PAD_CONSTANT && x->dims[d] == 0 && dims[d] > 0)
            return rt_err(n, err, GRAFT_EINVAL, "cannot pad an empty axis in mode %s", ms);
        total += dims[d];
    }
    rt_tensor *o = rt_out(n, 0, x->dtype, r, dims, err);
    if (!o) return err->code;
    if (!o->numel) return GRAFT_OK;
    if (r == 0) {
        memcpy(o->data, x->data, es);
        return GRAFT_OK;
    }
    int64_t *map = scratch(n, (size_t)total * sizeof *map, err), *mp[RT_MAX_RANK];
    if (!map) return err->code;
    int64_t *m = map;
    for (int d = 0; d < r; d++) {
        mp[d] = m;
        for (int64_t j = 0; j < dims[d]; j++) m[j] = pad_src(j, pb[d], x->dims[d], mode);
        m += dims[d];
    }
    int64_t st[RT_MAX_RANK], idx[RT_MAX_RANK] = {0};
    k_strides(r, x->dims, st);
    int last = r - 1;
    int64_t W = dims[last], n_in = x->dims[last];
    /* the run of the last axis copied with memcpy: output [lo, hi) */
    int64_t lo = pb[last] > 0 ? pb[last] : 0, hi = pb[last] + n_in < W ? pb[last] + n_in : W;
    char *dst = o->data;
    const char *src = x->data;
    do {
        int64_t off = 0;
        int inside = 1;
        for (int d = 0; d < last; d++) {
            int64_t s = mp[d][idx[d]];
            if (s < 0) inside = 0;
            off += s * st[d];
        }
        if (!inside) {
            fill_pattern(dst, cval, es, (uint64_t)W);
        } else {
            const char *row = src + (size_t)off * es;
            for (int64_t j = 0; j < W; j++) {
                if (j == lo && hi > lo) {
                    memcpy(dst + (size_t)j * es, row + (size_t)(j - pb[last]) * es, (size_t)(hi - lo) * es);
                    j = hi - 1;
                    continue;
                }
                int64_t s = mp[last][j];
                if (s < 0) memcpy(dst + (size_t)j * es, cval, es);
                else memcpy(dst + (size_t)j * es, row + (size_t)s * es, es);
            }
        }
        dst += (size_t)W * es;
    } while (k_next(last, dims, idx));
    return GRAFT_OK;
}

/* ------------------------------------------------------------ ConstantOfShape */

typedef struct cos_state {
    int dtype;
    size_t es;
    unsigned char val[16];
} cos_state;

static graft_status cos_init(rt_node *n, graft_error *err)
{
    cos_state *st = calloc(1, sizeof *st);
    if (!st) return rt_err(n, err, GRAFT_ENOMEM, "out of memory");
    n->state = st;
    st->dtype = GRAFT_DTYPE_FLOAT;
    st->es = 4;
    graft_tensor *t = graft_node_attr_tensor(n->g, n->src, "value");
    if (!t) return GRAFT_OK;
    int dt = graft_tensor_dtype(t);
    size_t es = rt_dtype_size(dt);
    if (!es || es > sizeof st->val || dt == GRAFT_DTYPE_STRING)
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "value of type %s", graft_dtype_name(dt));
    if (graft_tensor_numel(t) != 1) return rt_err(n, err, GRAFT_EINVAL, "value must hold one element");
    st->dtype = dt;
    st->es = es;
    return graft_tensor_read(t, st->val, es, err);
}

static graft_status cos_run(rt_node *n, graft_error *err)
{
    cos_state *st = n->state;
    rt_tensor *s = rt_in(n, 0);
    if (!s) return missing(n, err, 0);
    int64_t dims[RT_MAX_RANK];
    size_t k;
    graft_status rc = read_ints(n, s, "shape", dims, RT_MAX_RANK, &k, err);
    if (rc) return rc;
    rt_tensor *o = rt_out(n, 0, st->dtype, (int)k, dims, err);
    if (!o) return err->code;
    fill_pattern(o->data, st->val, st->es, o->numel);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Range */

static graft_status range_run(rt_node *n, graft_error *err)
{
    rt_tensor *a = rt_in(n, 0), *b = rt_in(n, 1), *c = rt_in(n, 2);
    if (!a || !b || !c) return missing(n, err, !a ? 0 : !b ? 1 : 2);
    int dt = a->dtype;
    if (b->dtype != dt || c->dtype != dt || a->numel != 1 || b->numel != 1 || c->numel != 1)
        return rt_err(n, err, GRAFT_EINVAL, "start, limit and delta must be scalars of one type");
    int64_t len;
    if (dt == GRAFT_DTYPE_FLOAT || dt == GRAFT_DTYPE_DOUBLE || dt == GRAFT_DTYPE_FLOAT16 ||
        dt == GRAFT_DTYPE_BFLOAT16) {
        double s = get_f64(a->data, dt, 0), l = get_f64(b->data, dt, 0), d = get_f64(c->data, dt, 0);
        if (d == 0 || !isfinite(s) || !isfinite(l) || !isfinite(d)) return rt_err(n, err, GRAFT_EINVAL, "bad range");
        double cnt = ceil((l - s) / d);
        if (cnt > 1e12) return rt_err(n, err, GRAFT_EINVAL, "range too long");
        len = cnt > 0 ? (int64_t)cnt : 0;
        rt_tensor *o = rt_out(n, 0, dt, 1, &len, err);
        if (!o) return err->code;
        /* float and double: in double, as numpy's arange; fp16/bf16 in the
         * stash type (float unless stash_type says double) */
        int wide = dt == GRAFT_DTYPE_DOUBLE || dt == GRAFT_DTYPE_FLOAT ||
                   rt_attr_int(n, "stash_type", GRAFT_DTYPE_FLOAT) == GRAFT_DTYPE_DOUBLE;
        for (int64_t i = 0; i < len; i++) {
            double v = wide ? s + (double)i * d : (double)((float)s + (float)i * (float)d);
            set_f64(o->data, dt, (uint64_t)i, v);
        }
        return GRAFT_OK;
    }
    int64_t s, l, d;
    switch (dt) {
    case GRAFT_DTYPE_INT16: case GRAFT_DTYPE_INT32: case GRAFT_DTYPE_INT64: case GRAFT_DTYPE_INT8:
    case GRAFT_DTYPE_UINT8: case GRAFT_DTYPE_UINT16: case GRAFT_DTYPE_UINT32:
        s = (int64_t)get_f64(a->data, dt, 0);
        l = (int64_t)get_f64(b->data, dt, 0);
        d = (int64_t)get_f64(c->data, dt, 0);
        if (dt == GRAFT_DTYPE_INT64) {
            s = *(const int64_t *)a->data;
            l = *(const int64_t *)b->data;
            d = *(const int64_t *)c->data;
        }
        break;
    default:
        return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s", graft_dtype_name(dt));
    }
    if (d == 0) return rt_err(n, err, GRAFT_EINVAL, "delta is 0");
    /* ceil((l - s) / d) without overflow for the ranges that fit */
    __int128 diff = (__int128)l - s;
    __int128 q = d > 0 ? (diff + d - 1) / d : (diff + d + 1) / d;
    if (diff <= 0 && d > 0) q = 0;
    if (diff >= 0 && d < 0) q = 0;
    if (q > ((__int128)1 << 40)) return rt_err(n, err, GRAFT_EINVAL, "range too long");
    len = (int64_t)q;
    rt_tensor *o = rt_out(n, 0, dt, 1, &len, err);
    if (!o) return err->code;
    for (int64_t i = 0; i < len; i++) {
        int64_t v = (int64_t)((uint64_t)s + (uint64_t)i * (uint64_t)d);
        switch (dt) {
        case GRAFT_DTYPE_INT64: ((int64_t *)o->data)[i] = v; break;
        case GRAFT_DTYPE_INT32: ((int32_t *)o->data)[i] = (int32_t)v; break;
        case GRAFT_DTYPE_INT16: ((int16_t *)o->data)[i] = (int16_t)v; break;
        case GRAFT_DTYPE_INT8: ((int8_t *)o->data)[i] = (int8_t)v; break;
        case GRAFT_DTYPE_UINT8: ((uint8_t *)o->data)[i] = (uint8_t)v; break;
        case GRAFT_DTYPE_UINT16: ((uint16_t *)o->data)[i] = (uint16_t)v; break;
        default: ((uint32_t *)o->data)[i] = (uint32_t)v; break;
        }
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Trilu */

static graft_status trilu_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *tk = rt_in(n, 1);
    if (!x) return missing(n, err, 0);
    if (x->rank < 2) return rt_err(n, err, GRAFT_EINVAL, "input rank %d < 2", x->rank);
    int64_t k = 0;
    if (tk) {
        if (tk->numel != 1 || tk->dtype != GRAFT_DTYPE_INT64)
            return rt_err(n, err, GRAFT_EINVAL, "k must be an int64 scalar");
        k = *(const int64_t *)tk->data;
    }
    int upper = rt_attr_int(n, "upper", 1) != 0;
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    rt_tensor *o = rt_out(n, 0, x->dtype, x->rank, x->dims, err);
    if (!o || !o->numel) return o ? GRAFT_OK : err->code;
    int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1];
    uint64_t mats = x->numel / (uint64_t)(R * C);
    const char *src = x->data;
    char *dst = o->data;
    size_t rowb = (size_t)C * es;
    for (uint64_t mi = 0; mi < mats; mi++) {
        for (int64_t i = 0; i < R; i++, src += rowb, dst += rowb) {
            /* kept columns: upper j >= i + k; lower j <= i + k */
            int64_t lo, hi; /* kept [lo, hi) */
            if (upper) {
                lo = i + k;
                hi = C;
            } else {
                lo = 0;
                hi = i + k + 1;
            }
            lo = lo < 0 ? 0 : lo > C ? C : lo;
            hi = hi < 0 ? 0 : hi > C ? C : hi;
            if (hi < lo) hi = lo;
            memset(dst, 0, (size_t)lo * es);
            memcpy(dst + (size_t)lo * es, src + (size_t)lo * es, (size_t)(hi - lo) * es);
            memset(dst + (size_t)hi * es, 0, (size_t)(C - hi) * es);
        }
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ NonZero */

static int elem_nonzero(const char *p, int dtype, size_t es)
{
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT: { float f; memcpy(&f, p, 4); return f != 0; }
    case GRAFT_DTYPE_DOUBLE: { double f; memcpy(&f, p, 8); return f != 0; }
    case GRAFT_DTYPE_FLOAT16: case GRAFT_DTYPE_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return (h & 0x7fff) != 0;
    }
    case GRAFT_DTYPE_FLOAT8E4M3FN: case GRAFT_DTYPE_FLOAT8E5M2:
        return (*(const unsigned char *)p & 0x7f) != 0;
    default:
        for (size_t i = 0; i < es; i++)
            if (p[i]) return 1;
        return 0;
    }
}

static graft_status nonzero_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    const char *p = x->data;
    int64_t cnt = 0;
    for (uint64_t i = 0; i < x->numel; i++) cnt += elem_nonzero(p + i * es, x->dtype, es);
    int r = x->rank;
    int64_t dims[2] = {r, cnt};
    rt_tensor *o = rt_out(n, 0, GRAFT_DTYPE_INT64, 2, dims, err);
    if (!o) return err->code;
    if (!cnt) return GRAFT_OK;
    int64_t *O = o->data, idx[RT_MAX_RANK] = {0}, j = 0;
    if (r == 0) return GRAFT_OK;
    uint64_t i = 0;
    do {
        if (elem_nonzero(p + i * es, x->dtype, es)) {
            for (int d = 0; d < r; d++) O[d * cnt + j] = idx[d];
            j++;
        }
        i++;
    } while (k_next(r, x->dims, idx));
    return GRAFT_OK;
}

/* ------------------------------------------------------------ OneHot, EyeLike */

static graft_status onehot_run(rt_node *n, graft_error *err)
{
    rt_tensor *ix = rt_in(n, 0), *td = rt_in(n, 1), *tv = rt_in(n, 2);
    if (!ix || !td || !tv) return missing(n, err, !ix ? 0 : !td ? 1 : 2);
    if (!is_numeric(ix->dtype) || !is_numeric(td->dtype) || td->numel != 1)
        return rt_err(n, err, GRAFT_EINVAL, "indices and depth must be numeric, depth one value");
    if (tv->numel != 2) return rt_err(n, err, GRAFT_EINVAL, "values must hold 2 elements");
    size_t es = need_es(n, tv, err);
    if (!es) return err->code;
    double dd = get_f64(td->data, td->dtype, 0);
    if (!(dd >= 1) || dd > 1e12) return rt_err(n, err, GRAFT_EINVAL, "depth %g", dd);
    int64_t depth = (int64_t)dd;
    int ro = ix->rank + 1;
    if (ro > RT_MAX_RANK) return rt_err(n, err, GRAFT_EUNSUPPORTED, "output rank %d", ro);
    int64_t axis_attr = rt_attr_int(n, "axis", -1);
    int axis = k_axis(axis_attr, ro);
    if (axis < 0) return rt_err(n, err, GRAFT_EINVAL, "axis %lld out of range", (long long)axis_attr);
    int64_t dims[RT_MAX_RANK];
    for (int d = 0, j = 0; d < ro; d++) dims[d] = d == axis ? depth : ix->dims[j++];
    rt_tensor *o = rt_out(n, 0, tv->dtype, ro, dims, err);
    if (!o) return err->code;
    const char *off = tv->data, *on = (const char *)tv->data + es;
    fill_pattern(o->data, off, es, o->numel);
    uint64_t inner = 1; /* index element i = (a, b): a before the axis, b after */
    for (int d = axis + 1; d < ro; d++) inner *= (uint64_t)dims[d];
    char *O = o->data;
    for (uint64_t i = 0; i < ix->numel; i++) {
        double v = get_f64(ix->data, ix->dtype, i);
        int64_t c = (int64_t)v;
        if (c < 0) c += depth;
        if (c < 0 || c >= depth) continue;
        uint64_t a = i / inner, b = i % inner;
        memcpy(O + ((a * (uint64_t)depth + (uint64_t)c) * inner + b) * es, on, es);
    }
    return GRAFT_OK;
}

static graft_status eyelike_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    if (x->rank != 2) return rt_err(n, err, GRAFT_EINVAL, "input must be 2-D");
    int dt = (int)rt_attr_int(n, "dtype", x->dtype);
    if (!is_numeric(dt)) return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s", graft_dtype_name(dt));
    int64_t k = rt_attr_int(n, "k", 0);
    rt_tensor *o = rt_out(n, 0, dt, 2, x->dims, err);
    if (!o) return err->code;
    memset(o->data, 0, o->nbytes);
    int64_t R = x->dims[0], C = x->dims[1];
    for (int64_t i = 0; i < R; i++) {
        int64_t j = i + k;
        if (j >= 0 && j < C) set_f64(o->data, dt, (uint64_t)(i * C + j), 1.0);
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ DepthToSpace, SpaceToDepth */

static graft_status d2s_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    if (x->rank != 4) return rt_err(n, err, GRAFT_EINVAL, "input must be 4-D");
    int64_t b = rt_attr_int(n, "blocksize", 0);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    if (b < 1 || C % (b * b))
        return rt_err(n, err, GRAFT_EINVAL, "blocksize %lld does not divide %lld channels", (long long)b, (long long)C);
    char mbuf[8];
    const char *mode = n->opset >= 11 ? rt_attr_string(n, "mode", mbuf, sizeof mbuf, "DCR") : "DCR";
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    int64_t c = C / (b * b), od[4] = {N, c, H * b, W * b};
    rt_tensor *o = rt_out(n, 0, x->dtype, 4, od, err);
    if (!o || !o->numel) return o ? GRAFT_OK : err->code;
    if (!strcmp(mode, "CRD")) {
        int64_t d6[6] = {N, c, b, b, H, W}, p[6] = {0, 1, 4, 2, 5, 3};
        transpose_bytes(o->data, x->data, 6, d6, p, es);
    } else {
        int64_t d6[6] = {N, b, b, c, H, W}, p[6] = {0, 3, 4, 1, 5, 2};
        transpose_bytes(o->data, x->data, 6, d6, p, es);
    }
    return GRAFT_OK;
}

static graft_status s2d_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    if (x->rank != 4) return rt_err(n, err, GRAFT_EINVAL, "input must be 4-D");
    int64_t b = rt_attr_int(n, "blocksize", 0);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    if (b < 1 || H % b || W % b)
        return rt_err(n, err, GRAFT_EINVAL, "blocksize %lld does not divide the image", (long long)b);
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    int64_t od[4] = {N, C * b * b, H / b, W / b};
    rt_tensor *o = rt_out(n, 0, x->dtype, 4, od, err);
    if (!o || !o->numel) return o ? GRAFT_OK : err->code;
    char mbuf[8];
    const char *mode = rt_attr_string(n, "mode", mbuf, sizeof mbuf, "DCR");
    int64_t d6[6] = {N, C, H / b, b, W / b, b}, dcr[6] = {0, 3, 5, 1, 2, 4}, crd[6] = {0, 1, 3, 5, 2, 4};
    transpose_bytes(o->data, x->data, 6, d6, strcmp(mode, "CRD") ? dcr : crd, es);
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Compress */

static graft_status compress_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *c = rt_in(n, 1);
    if (!x || !c) return missing(n, err, x ? 1 : 0);
    if (c->dtype != GRAFT_DTYPE_BOOL || c->rank != 1) return rt_err(n, err, GRAFT_EINVAL, "condition must be 1-D bool");
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    int64_t axis_attr;
    int has_axis = graft_node_attr_int(n->src, "axis", &axis_attr);
    int r = has_axis ? x->rank : 1, axis = 0;
    int64_t dims[RT_MAX_RANK];
    if (has_axis) {
        if ((axis = k_axis(axis_attr, x->rank)) < 0) return rt_err(n, err, GRAFT_EINVAL, "axis out of range");
        memcpy(dims, x->dims, (size_t)r * sizeof *dims);
    } else {
        dims[0] = (int64_t)x->numel;
    }
    int64_t D = dims[axis], m = (int64_t)c->numel < D ? (int64_t)c->numel : D, kept = 0;
    const uint8_t *C = c->data;
    for (int64_t i = 0; i < (int64_t)c->numel; i++) {
        if (!C[i]) continue;
        if (i >= D) return rt_err(n, err, GRAFT_EINVAL, "condition selects index %lld past the axis", (long long)i);
        kept++;
    }
    dims[axis] = kept;
    rt_tensor *o = rt_out(n, 0, x->dtype, r, dims, err);
    if (!o || !o->numel) return o ? GRAFT_OK : err->code;
    uint64_t outer = 1, inner = es;
    for (int d = 0; d < axis; d++) outer *= (uint64_t)dims[d];
    for (int d = axis + 1; d < r; d++) inner *= (uint64_t)dims[d];
    char *dst = o->data;
    const char *src = x->data;
    for (uint64_t a = 0; a < outer; a++, src += (size_t)inner * (size_t)D)
        for (int64_t i = 0; i < m; i++)
            if (C[i]) {
                memcpy(dst, src + (size_t)i * inner, (size_t)inner);
                dst += inner;
            }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ ReverseSequence */

static graft_status revseq_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0), *sl = rt_in(n, 1);
    if (!x || !sl) return missing(n, err, x ? 1 : 0);
    int r = x->rank;
    int ba = k_axis(rt_attr_int(n, "batch_axis", 1), r), ta = k_axis(rt_attr_int(n, "time_axis", 0), r);
    if (r < 2 || ba < 0 || ta < 0 || ba == ta) return rt_err(n, err, GRAFT_EINVAL, "bad axes or rank");
    if (sl->numel != (uint64_t)x->dims[ba])
        return rt_err(n, err, GRAFT_EINVAL, "sequence_lens length differs from the batch");
    graft_status rc = check_index_type(n, sl, err);
    if (rc) return rc;
    size_t es = need_es(n, x, err);
    if (!es) return err->code;
    rt_tensor *o = rt_out(n, 0, x->dtype, r, x->dims, err);
    if (!o || !o->numel) return o ? GRAFT_OK : err->code;
    int64_t T = x->dims[ta];
    for (int64_t b = 0; b < x->dims[ba]; b++) {
        int64_t L = idx_at(sl, (uint64_t)b);
        if (L < 0 || L > T) return rt_err(n, err, GRAFT_EINVAL, "sequence length %lld out of range", (long long)L);
    }
    int64_t st[RT_MAX_RANK], idx[RT_MAX_RANK] = {0};
    k_strides(r, x->dims, st);
    const char *src = x->data;
    char *dst = o->data;
    uint64_t i = 0;
    do {
        int64_t L = idx_at(sl, (uint64_t)idx[ba]), t = idx[ta];
        int64_t srct = t < L ? L - 1 - t : t;
        int64_t off = (int64_t)i + (srct - t) * st[ta];
        memcpy(dst + i * es, src + (size_t)off * es, es);
        i++;
    } while (k_next(r, x->dims, idx));
    return GRAFT_OK;
}

/* ------------------------------------------------------------ Unique */

/* Three-way compare of elements a and b of a numeric dtype. */
static int cmp_elem(int dtype, const char *a, const char *b)
{
#define CMP3(T)                          \
    do {                                 \
        T x, y;                          \
        memcpy(&x, a, sizeof x);         \
        memcpy(&y, b, sizeof y);         \
        return x < y ? -1 : x > y ? 1 : 0; \
    } while (0)
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT: CMP3(float);
    case GRAFT_DTYPE_DOUBLE: CMP3(double);
    case GRAFT_DTYPE_INT8: CMP3(int8_t);
    case GRAFT_DTYPE_INT16: CMP3(int16_t);
    case GRAFT_DTYPE_INT32: CMP3(int32_t);
    case GRAFT_DTYPE_INT64: CMP3(int64_t);
    case GRAFT_DTYPE_UINT8: case GRAFT_DTYPE_BOOL: CMP3(uint8_t);
    case GRAFT_DTYPE_UINT16: CMP3(uint16_t);
    case GRAFT_DTYPE_UINT32: CMP3(uint32_t);
    case GRAFT_DTYPE_UINT64: CMP3(uint64_t);
    case GRAFT_DTYPE_FLOAT16: case GRAFT_DTYPE_BFLOAT16: {
        uint16_t x, y;
        memcpy(&x, a, 2);
        memcpy(&y, b, 2);
        float fx = dtype == GRAFT_DTYPE_FLOAT16 ? rt_f16_to_f32(x) : rt_bf16_to_f32(x);
        float fy = dtype == GRAFT_DTYPE_FLOAT16 ? rt_f16_to_f32(y) : rt_bf16_to_f32(y);
        return fx < fy ? -1 : fx > fy ? 1 : 0;
    }
    default: return memcmp(a, b, 1);
    }
#undef CMP3
}

typedef struct uq_ctx {
    int dtype;
    size_t es;
    const char *data;
    uint64_t outer, L, inner; /* item i: elements at (o * L + i) * inner + q */
} uq_ctx;

static int uq_cmp(const uq_ctx *c, int64_t a, int64_t b)
{
    for (uint64_t o = 0; o < c->outer; o++)
        for (uint64_t q = 0; q < c->inner; q++) {
            const char *pa = c->data + ((o * c->L + (uint64_t)a) * c->inner + q) * c->es;
            const char *pb = c->data + ((o * c->L + (uint64_t)b) * c->inner + q) * c->es;
            int v = cmp_elem(c->dtype, pa, pb);
            if (v) return v;
        }
    return 0;
}

/* Stable merge sort of idx[0..m) by item (tmp: m slots). */
static void uq_sort(const uq_ctx *c, int64_t *idx, int64_t *tmp, int64_t m)
{
    for (int64_t w = 1; w < m; w *= 2) {
        for (int64_t lo = 0; lo < m; lo += 2 * w) {
            int64_t mid = lo + w < m ? lo + w : m, hi = lo + 2 * w < m ? lo + 2 * w : m;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = uq_cmp(c, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)m * sizeof *idx);
    }
}

static graft_status unique_run(rt_node *n, graft_error *err)
{
    rt_tensor *x = rt_in(n, 0);
    if (!x) return missing(n, err, 0);
    if (!is_numeric(x->dtype)) return rt_err(n, err, GRAFT_EUNSUPPORTED, "dtype %s", graft_dtype_name(x->dtype));
    size_t es = rt_dtype_size(x->dtype);
    int sorted = rt_attr_int(n, "sorted", 1) != 0;
    int64_t axis_attr;
    int has_axis = graft_node_attr_int(n->src, "axis", &axis_attr), axis = 0;
    uq_ctx c = {x->dtype, es, x->data, 1, x->numel, 1};
    if (has_axis) {
        if ((axis = k_axis(axis_attr, x->rank)) < 0) return rt_err(n, err, GRAFT_EINVAL, "axis out of range");
        c.L = (uint64_t)x->dims[axis];
        for (int d = 0; d < axis; d++) c.outer *= (uint64_t)x->dims[d];
        for (int d = axis + 1; d < x->rank; d++) c.inner *= (uint64_t)x->dims[d];
    }
    int64_t m = (int64_t)c.L;
    /* scratch: order[m], tmp[m], group_of_sorted[m] -> reused, first[m], cnt[m], rank_of_group[m] */
    int64_t *buf = scratch(n, (size_t)(6 * m + 1) * sizeof *buf, err);
    if (!buf) return err->code;
    int64_t *order = buf, *tmp = buf + m, *grp = buf + 2 * m, *first = buf + 3 * m, *cnt = buf + 4 * m,
            *pos = buf + 5 * m;
    for (int64_t i = 0; i < m; i++) order[i] = i;
    uq_sort(&c, order, tmp, m);
    int64_t ng = 0;
    for (int64_t i = 0; i < m; i++) {
        if (i == 0 || uq_cmp(&c, order[i - 1], order[i]) != 0) {
            first[ng] = order[i]; /* stable: the smallest index of the group */
            cnt[ng] = 0;
            ng++;
        }
        grp[order[i]] = ng - 1;
        cnt[ng - 1]++;
    }
    /* output order of the groups: sorted, or by first occurrence */
    for (int64_t g = 0; g < ng; g++) tmp[g] = g;
    if (!sorted) {
        /* groups by first index: counting over item positions */
        int64_t k = 0;
        for (int64_t i = 0; i < m; i++)
            if (first[grp[i]] == i) tmp[k++] = grp[i];
    }
    for (int64_t g = 0; g < ng; g++) pos[tmp[g]] = g;
    int64_t dims[RT_MAX_RANK];
    int yr = has_axis ? x->rank : 1;
    if (has_axis) memcpy(dims, x->dims, (size_t)yr * sizeof *dims);
    dims[axis] = ng;
    rt_tensor *y = rt_out(n, 0, x->dtype, yr, dims, err);
    if (!y) return err->code;
    size_t blk = (size_t)c.inner * es;
    for (uint64_t o = 0; o < c.outer; o++)
        for (int64_t g = 0; g < ng; g++)
            memcpy((char *)y->data + (o * (uint64_t)ng + (uint64_t)g) * blk,
                   (const char *)x->data + (o * c.L + (uint64_t)first[tmp[g]]) * blk, blk);
    if (n->n_out > 1) {
        rt_tensor *t = rt_out(n, 1, GRAFT_DTYPE_INT64, 1, &ng, err);
        if (!t) return err->code;
        for (int64_t g = 0; g < ng; g++) ((int64_t *)t->data)[g] = first[tmp[g]];
    }
    if (n->n_out > 2) {
        rt_tensor *t = rt_out(n, 2, GRAFT_DTYPE_INT64, 1, &m, err);
        if (!t) return err->code;
        for (int64_t i = 0; i < m; i++) ((int64_t *)t->data)[i] = pos[grp[i]];
    }
    if (n->n_out > 3) {
        rt_tensor *t = rt_out(n, 3, GRAFT_DTYPE_INT64, 1, &ng, err);
        if (!t) return err->code;
        for (int64_t g = 0; g < ng; g++) ((int64_t *)t->data)[g] = cnt[tmp[g]];
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ table */

const rt_kernel rt_kernels_shape[] = {
    {"", "Shape", 1, 0, NULL, shape_run, NULL},
    {"", "Size", 1, 0, NULL, size_run, NULL},
    {"", "Reshape", 5, 0, NULL, reshape_run, NULL},
    {"", "Flatten", 1, 0, NULL, flatten_run, NULL},
    {"", "Squeeze", 1, 0, NULL, squeeze_run, NULL},
    {"", "Unsqueeze", 1, 0, NULL, unsqueeze_run, NULL},
    {"", "Transpose", 1, 0, NULL, transpose_run, NULL},
    {"", "Concat", 1, 0, NULL, concat_run, NULL},
    {"", "Split", 1, 0, NULL, split_run, scratch_fini},
    {"", "Slice", 1, 0, NULL, slice_run, NULL},
    {"", "Gather", 1, 0, NULL, gather_run, NULL},
    {"", "GatherElements", 11, 0, NULL, gather_elements_run, NULL},
    {"", "GatherND", 11, 0, NULL, gather_nd_run, NULL},
    {"", "ScatterND", 11, 0, NULL, scatter_nd_run, NULL},
    {"", "ScatterElements", 11, 0, NULL, scatter_elements_run, NULL},
    {"", "Scatter", 9, 10, NULL, scatter_elements_run, NULL},
    {"", "Expand", 8, 0, NULL, expand_run, NULL},
    {"", "Tile", 6, 0, NULL, tile_run, NULL},
    {"", "Pad", 1, 0, NULL, pad_run, scratch_fini},
    {"", "ConstantOfShape", 9, 0, cos_init, cos_run, NULL},
    {"", "Range", 11, 0, NULL, range_run, NULL},
    {"", "Trilu", 14, 0, NULL, trilu_run, NULL},
    {"", "NonZero", 9, 0, NULL, nonzero_run, NULL},
    {"", "OneHot", 9, 0, NULL, onehot_run, NULL},
    {"", "EyeLike", 9, 0, NULL, eyelike_run, NULL},
    {"", "DepthToSpace", 1, 0, NULL, d2s_run, NULL},
    {"", "SpaceToDepth", 1, 0, NULL, s2d_run, NULL},
    {"", "Compress", 9, 0, NULL, compress_run, NULL},
    {"", "ReverseSequence", 10, 0, NULL, revseq_run, NULL},
    {"", "Unique", 11, 0, NULL, unique_run, scratch_fini},
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};
