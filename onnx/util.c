/* Status strings, error formatting, dtype sizes, small containers. */
#include <errno.h>
#include <string.h>

#include "onnx/internal.h"

const char *graft_status_str(graft_status s)
{
    switch (s) {
    case GRAFT_OK: return "ok";
    case GRAFT_EINVAL: return "bad input";
    case GRAFT_EUNSUPPORTED: return "unsupported";
    case GRAFT_EIO: return "I/O error";
    case GRAFT_ENOMEM: return "out of memory";
    }
    return "unknown status";
}

int graft_status_exit_code(graft_status s)
{
    switch (s) {
    case GRAFT_OK: return 0;
    case GRAFT_EINVAL:
    case GRAFT_EUNSUPPORTED: return 2;
    default: return 1;
    }
}

graft_status ox_err(graft_error *err, graft_status code, const char *fmt, ...)
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

char *ox_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

bool ox_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 8;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / elem) return false;
        nc *= 2;
    }
    void *p = realloc(*arr, nc * elem);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

/* ------------------------------------------------------------ dtypes */

static const struct { const char *name; int bits; } dtypes[GRAFT_DTYPE_COUNT_] = {
    [GRAFT_DTYPE_UNDEFINED] = {"undefined", 0},
    [GRAFT_DTYPE_FLOAT] = {"float", 32},
    [GRAFT_DTYPE_UINT8] = {"uint8", 8},
    [GRAFT_DTYPE_INT8] = {"int8", 8},
    [GRAFT_DTYPE_UINT16] = {"uint16", 16},
    [GRAFT_DTYPE_INT16] = {"int16", 16},
    [GRAFT_DTYPE_INT32] = {"int32", 32},
    [GRAFT_DTYPE_INT64] = {"int64", 64},
    [GRAFT_DTYPE_STRING] = {"string", 0},
    [GRAFT_DTYPE_BOOL] = {"bool", 8},
    [GRAFT_DTYPE_FLOAT16] = {"float16", 16},
    [GRAFT_DTYPE_DOUBLE] = {"double", 64},
    [GRAFT_DTYPE_UINT32] = {"uint32", 32},
    [GRAFT_DTYPE_UINT64] = {"uint64", 64},
    [GRAFT_DTYPE_COMPLEX64] = {"complex64", 64},
    [GRAFT_DTYPE_COMPLEX128] = {"complex128", 128},
    [GRAFT_DTYPE_BFLOAT16] = {"bfloat16", 16},
    [GRAFT_DTYPE_FLOAT8E4M3FN] = {"float8e4m3fn", 8},
    [GRAFT_DTYPE_FLOAT8E4M3FNUZ] = {"float8e4m3fnuz", 8},
    [GRAFT_DTYPE_FLOAT8E5M2] = {"float8e5m2", 8},
    [GRAFT_DTYPE_FLOAT8E5M2FNUZ] = {"float8e5m2fnuz", 8},
    [GRAFT_DTYPE_UINT4] = {"uint4", 4},
    [GRAFT_DTYPE_INT4] = {"int4", 4},
    [GRAFT_DTYPE_FLOAT4E2M1] = {"float4e2m1", 4},
    [GRAFT_DTYPE_FLOAT8E8M0] = {"float8e8m0", 8},
    [GRAFT_DTYPE_UINT2] = {"uint2", 2},
    [GRAFT_DTYPE_INT2] = {"int2", 2},
    [GRAFT_DTYPE_FLOAT6E2M3] = {"float6e2m3", 6},
    [GRAFT_DTYPE_FLOAT6E3M2] = {"float6e3m2", 6},
};

const char *graft_dtype_name(int dtype)
{
    if (dtype < 0 || dtype >= GRAFT_DTYPE_COUNT_) return "?";
    return dtypes[dtype].name;
}

int graft_dtype_bits(int dtype)
{
    if (dtype < 0 || dtype >= GRAFT_DTYPE_COUNT_) return 0;
    return dtypes[dtype].bits;
}

uint64_t graft_dtype_nbytes(int dtype, uint64_t n, int *overflow)
{
    int bits = graft_dtype_bits(dtype);
    if (overflow) *overflow = 0;
    if (bits == 0) {
        if (overflow) *overflow = 1;
        return 0;
    }
    /* ceil(n * bits / 8) without overflowing the product */
    uint64_t whole = n / 8, rem = n % 8;
    if (whole > UINT64_MAX / (uint64_t)bits) {
        if (overflow) *overflow = 1;
        return 0;
    }
    uint64_t bytes = whole * (uint64_t)bits + (rem * (uint64_t)bits + 7) / 8;
    if (bytes > (uint64_t)INT64_MAX) {
        if (overflow) *overflow = 1;
        return 0;
    }
    return bytes;
}

/* ------------------------------------------------------------ maps */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static uint64_t hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

void ox_map_free(ox_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

void ox_map_clear(ox_map *m)
{
    if (m->keys) memset(m->keys, 0, m->cap * sizeof *m->keys);
    m->len = 0;
}

/* Slot holding `key`, or the empty slot where it would go (cap > 0). */
static size_t table_slot(const ox_table *t, const void *key, bool by_str)
{
    size_t mask = t->cap - 1, i = (by_str ? hash_str(key) : hash_ptr(key)) & mask;
    while (t->keys[i] && (by_str ? strcmp(t->keys[i], key) != 0 : t->keys[i] != key)) i = (i + 1) & mask;
    return i;
}

static bool table_put(ox_table *t, const void *key, void *val, bool by_str);

static bool table_rehash(ox_table *t, size_t ncap, bool by_str)
{
    ox_table old = *t;
    t->keys = calloc(ncap, sizeof *t->keys);
    t->vals = calloc(ncap, sizeof *t->vals);
    if (!t->keys || !t->vals) {
        free(t->keys);
        free(t->vals);
        *t = old;
        return false;
    }
    t->cap = ncap;
    t->len = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.keys[i]) table_put(t, old.keys[i], old.vals[i], by_str); /* cannot grow */
    free(old.keys);
    free(old.vals);
    return true;
}

static bool table_put(ox_table *t, const void *key, void *val, bool by_str)
{
    if ((t->len + 1) * 2 > t->cap && !table_rehash(t, t->cap ? t->cap * 2 : 16, by_str)) return false;
    size_t i = table_slot(t, key, by_str);
    if (!t->keys[i]) t->len++;
    t->keys[i] = key;
    t->vals[i] = val;
    return true;
}

static void *table_get(const ox_table *t, const void *key, bool by_str)
{
    if (!t->cap) return NULL;
    size_t i = table_slot(t, key, by_str);
    return t->keys[i] ? t->vals[i] : NULL;
}

bool ox_map_put(ox_map *m, const char *key, void *val) { return table_put(m, key, val, true); }
void *ox_map_get(const ox_map *m, const char *key) { return table_get(m, key, true); }
bool ox_pmap_put(ox_pmap *m, const void *key, void *val) { return table_put(m, key, val, false); }
void *ox_pmap_get(const ox_pmap *m, const void *key) { return table_get(m, key, false); }

void ox_pmap_del(ox_pmap *m, const void *key)
{
    if (!m->cap) return;
    size_t mask = m->cap - 1, i = table_slot(m, key, false);
    if (!m->keys[i]) return;
    m->keys[i] = NULL;
    m->vals[i] = NULL;
    m->len--;
    /* re-insert the rest of the cluster (backward-shift by reinsertion) */
    for (size_t j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
        const void *k = m->keys[j];
        void *v = m->vals[j];
        m->keys[j] = NULL;
        m->vals[j] = NULL;
        m->len--;
        table_put(m, k, v, false); /* cannot grow: len decreased */
    }
}
