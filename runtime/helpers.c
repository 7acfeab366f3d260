/* Helpers for kernels: output allocation, attributes, conversions. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/rt.h"

const char *rt_node_name(const rt_node *n) { return graft_node_name(n->src); }
const char *rt_node_op(const rt_node *n) { return graft_node_op_type(n->src); }

graft_status rt_seterr(graft_error *err, graft_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

graft_status rt_err(const rt_node *n, graft_error *err, graft_status code, const char *fmt, ...)
{
    if (err) {
        char msg[768];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        err->code = code;
        snprintf(err->msg, sizeof err->msg, "node '%s' (%s): %s", rt_node_name(n), rt_node_op(n), msg);
    }
    return code;
}

uint64_t rt_numel(int rank, const int64_t *dims)
{
    uint64_t n = 1;
    for (int i = 0; i < rank; i++) n *= (uint64_t)dims[i];
    return n;
}

double rt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t rt_dtype_size(int dtype)
{
    int b = graft_dtype_bits(dtype);
    return b % 8 == 0 ? (size_t)(b / 8) : 0;
}

static rt_tensor *shape_out(rt_node *n, int i, int dtype, int rank, const int64_t *dims, uint64_t *nb,
                            graft_error *err)
{
    RT_ASSERT(i < n->n_out);
    if (rank < 0 || rank > RT_MAX_RANK) {
        rt_err(n, err, GRAFT_EUNSUPPORTED, "output %d has rank %d (at most %d supported)", i, rank,
               RT_MAX_RANK);
        return NULL;
    }
    uint64_t numel = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0 || (dims[d] && numel > (uint64_t)INT64_MAX / (uint64_t)dims[d])) {
            rt_err(n, err, GRAFT_EINVAL, "output %d: invalid dimension %lld", i, (long long)dims[d]);
            return NULL;
        }
        numel *= (uint64_t)dims[d];
    }
    int ovf = 0;
    *nb = graft_dtype_nbytes(dtype, numel, &ovf);
    if (ovf) {
        rt_err(n, err, GRAFT_EINVAL, "output %d: size of %llu %s elements overflows", i,
               (unsigned long long)numel, graft_dtype_name(dtype));
        return NULL;
    }
    rt_tensor *t = n->out[i];
    t->dtype = dtype;
    t->rank = rank;
    for (int d = 0; d < rank; d++) t->dims[d] = dims[d];
    t->numel = numel;
    t->nbytes = (size_t)*nb;
    t->present = true;
    return t;
}

/* The machine's physical memory in bytes (0: unknown). A single buffer
 * larger than this cannot be used: with overcommit its allocation may still
 * succeed and touching it would bring the OOM killer instead of an error. */
static uint64_t phys_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

/* MemAvailable from /proc/meminfo in bytes (0: unknown). Outputs are
 * written right after they are allocated, so a run that would exhaust
 * memory shows here, buffer after buffer, before the OOM killer acts. */
static uint64_t avail_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[128];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

rt_tensor *rt_out(rt_node *n, int i, int dtype, int rank, const int64_t *dims, graft_error *err)
{
    uint64_t nb;
    rt_tensor *t = shape_out(n, i, dtype, rank, dims, &nb, err);
    if (!t) return NULL;
    if (t->cap == 0) t->data = NULL; /* was a view */
    if (nb > t->cap || !t->data) {
        uint64_t phys = phys_bytes(), avail = 0;
        if (phys && nb > phys) {
            rt_err(n, err, GRAFT_ENOMEM, "output %d needs %llu bytes, more than this machine's %llu bytes of memory",
                   i, (unsigned long long)nb, (unsigned long long)phys);
            return NULL;
        }
        if (nb >= ((uint64_t)64 << 20) && (avail = avail_bytes()) && nb > avail) {
            rt_err(n, err, GRAFT_ENOMEM, "output %d needs %llu bytes, %llu available", i, (unsigned long long)nb,
                   (unsigned long long)avail);
            return NULL;
        }
        size_t want = nb > t->cap ? (size_t)nb : t->cap;
        size_t alloc = (want + 63) / 64 * 64;
        if (alloc == 0) alloc = 64;
        void *p = aligned_alloc(64, alloc);
        if (!p) {
            rt_err(n, err, GRAFT_ENOMEM, "out of memory for output %d (%llu bytes)", i,
                   (unsigned long long)nb);
            return NULL;
        }
        if (t->cap) free(t->data);
        t->data = p;
        t->cap = alloc;
    }
    return t;
}

rt_tensor *rt_out_view(rt_node *n, int i, int dtype, int rank, const int64_t *dims, void *data,
                       graft_error *err)
{
    uint64_t nb;
    rt_tensor *t = shape_out(n, i, dtype, rank, dims, &nb, err);
    if (!t) return NULL;
    if (t->cap) free(t->data);
    t->cap = 0;
    t->data = data;
    return t;
}

int64_t rt_attr_int(const rt_node *n, const char *name, int64_t def)
{
    int64_t v;
    return graft_node_attr_int(n->src, name, &v) ? v : def;
}

float rt_attr_float(const rt_node *n, const char *name, float def)
{
    float v;
    return graft_node_attr_float(n->src, name, &v) ? v : def;
}

const int64_t *rt_attr_ints(const rt_node *n, const char *name, size_t *count)
{
    const int64_t *v = NULL;
    *count = 0;
    if (!graft_node_attr_ints(n->src, name, &v, count)) return NULL;
    return v;
}

const float *rt_attr_floats(const rt_node *n, const char *name, size_t *count)
{
    const float *v = NULL;
    *count = 0;
    if (!graft_node_attr_floats(n->src, name, &v, count)) return NULL;
    return v;
}

const char *rt_attr_string(const rt_node *n, const char *name, char *buf, size_t cap, const char *def)
{
    const char *v;
    size_t len;
    if (!graft_node_attr_string(n->src, name, &v, &len)) return def;
    if (len >= cap) len = cap - 1;
    memcpy(buf, v, len);
    buf[len] = '\0';
    return buf;
}

int64_t rt_read_ints(const rt_tensor *t, int64_t *dst, size_t cap)
{
    uint64_t n = t->numel < cap ? t->numel : cap;
    if (t->dtype == GRAFT_DTYPE_INT64) {
        memcpy(dst, t->data, (size_t)n * 8);
    } else if (t->dtype == GRAFT_DTYPE_INT32) {
        const int32_t *s = t->data;
        for (uint64_t i = 0; i < n; i++) dst[i] = s[i];
    } else {
        return -1;
    }
    return (int64_t)t->numel;
}

float rt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal */
            float f = ldexpf((float)man, -24);
            return sign ? -f : f;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t rt_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return (uint16_t)(sign | 0x7e00); /* NaN */
    if (absx >= 0x477ff000u) {                                /* overflow to inf (after rounding) */
        if (absx == 0x7f800000u) return (uint16_t)(sign | 0x7c00);
        /* values that round to >= 65520 become inf */
        return (uint16_t)(sign | 0x7c00);
    }
    if (absx < 0x38800000u) { /* subnormal or zero in fp16 */
        float a;
        memcpy(&a, &absx, 4);
        /* round to nearest even multiple of 2^-24 */
        float q = a * 16777216.0f;
        uint32_t m = (uint32_t)nearbyintf(q);
        return (uint16_t)(sign | m);
    }
    uint32_t exp = (absx >> 23) - 112, man = absx & 0x7fffff;
    uint32_t h = (exp << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

float rt_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t rt_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    uint32_t r = 0x7fff + ((x >> 16) & 1);
    return (uint16_t)((x + r) >> 16);
}

graft_status rt_bind_initializer(rt_tensor *t, graft_tensor *gt, void ***consts, size_t *n, size_t *cap,
                                 graft_error *err)
{
    int rank = graft_tensor_rank(gt);
    if (rank > RT_MAX_RANK)
        return rt_seterr(err, GRAFT_EUNSUPPORTED, "initializer '%s': rank %d over %d", graft_tensor_name(gt), rank,
                         RT_MAX_RANK);
    t->dtype = graft_tensor_dtype(gt);
    t->rank = rank;
    memcpy(t->dims, graft_tensor_dims(gt), (size_t)rank * sizeof(int64_t));
    t->numel = graft_tensor_numel(gt);
    t->nbytes = (size_t)graft_tensor_nbytes(gt);
    t->cap = 0;
    if (t->dtype == GRAFT_DTYPE_STRING || graft_dtype_bits(t->dtype) == 0) {
        t->present = false;
        return GRAFT_OK;
    }
    const void *d = graft_tensor_data(gt);
    if (!d && t->nbytes) {
        if (*n == *cap) {
            size_t nc = *cap ? 2 * *cap : 16;
            void **p = realloc(*consts, nc * sizeof *p);
            if (!p) return rt_seterr(err, GRAFT_ENOMEM, "out of memory (initializer '%s')", graft_tensor_name(gt));
            *consts = p;
            *cap = nc;
        }
        void *buf = malloc(t->nbytes);
        if (!buf) return rt_seterr(err, GRAFT_ENOMEM, "out of memory (initializer '%s')", graft_tensor_name(gt));
        (*consts)[(*n)++] = buf;
        graft_status rc = graft_tensor_read(gt, buf, t->nbytes, err);
        if (rc != GRAFT_OK) return rc;
        d = buf;
    }
    t->data = (void *)d;
    t->present = true;
    return GRAFT_OK;
}
