/* tokenizer/tok_json.c — single-pass JSON reader into an arena. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tok_json.h"

#define TJ_MAX_DEPTH 256

typedef struct tj_chunk {
    struct tj_chunk *next;
    size_t used, cap;
    max_align_t data[];
} tj_chunk;

typedef struct tj_p {
    const char *s, *end, *start;
    tj_doc *doc;
    tj_val *stack; /* children being collected */
    size_t sn, scap;
    bool failed;
    const tj_hooks *hooks;
    tj_val pair[2]; /* a streamed ["a", "b"] */
} tj_p;

/* Where a value sits, for the streamed containers. */
enum { H_NONE, H_ROOT, H_MODEL, H_VOCAB, H_MERGES };

static void *arena_alloc(tj_doc *d, size_t n)
{
    tj_chunk *c = d->chunks;
    n = (n + 15) & ~(size_t)15;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > (1u << 20) ? n : (1u << 20);
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = d->chunks;
        c->used = 0;
        c->cap = cap;
        d->chunks = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

typedef struct tj_mark {
    tj_chunk *c;
    size_t used;
} tj_mark;

static tj_mark arena_mark(tj_doc *d)
{
    return (tj_mark){d->chunks, d->chunks ? d->chunks->used : 0};
}

static void arena_reset(tj_doc *d, tj_mark m)
{
    while (d->chunks != m.c) {
        tj_chunk *n = d->chunks->next;
        free(d->chunks);
        d->chunks = n;
    }
    if (m.c) m.c->used = m.used;
}

void tj_doc_free(tj_doc *d)
{
    tj_chunk *c = d->chunks;
    while (c) {
        tj_chunk *n = c->next;
        free(c);
        c = n;
    }
    d->chunks = NULL;
    d->root = NULL;
}

static bool fail_at(tj_p *p, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool fail_at(tj_p *p, const char *at, const char *fmt, ...)
{
    va_list ap;
    int line = 1, col = 1;
    if (p->failed) return false;
    p->failed = true;
    if (at > p->end) at = p->end;
    for (const char *q = p->start; q < at; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)*q & 0xC0) != 0x80)
            col++;
    }
    p->doc->err_line = line;
    p->doc->err_col = col;
    va_start(ap, fmt);
    vsnprintf(p->doc->err_text, sizeof p->doc->err_text, fmt, ap);
    va_end(ap);
    return false;
}

static void skip_ws(tj_p *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t'))
        p->s++;
}

/* Nonzero when some byte of w is zero / below n (n <= 128). */
static inline uint64_t swar_zero(uint64_t w)
{
    return (w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull;
}
static inline uint64_t swar_less(uint64_t w, uint64_t n)
{
    return (w - 0x0101010101010101ull * n) & ~w & 0x8080808080808080ull;
}

static int hex4(const char *s)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    return v;
}

/* borrow: a string without escapes is left in the source (out->u.s points
 * there, not NUL-terminated): for streamed elements, which are copied by
 * their consumer anyway. */
static bool parse_string(tj_p *p, tj_val *out, bool borrow)
{
    const char *q = p->s + 1, *open = p->s;
    /* fast scan, eight bytes at a time while none is '"', '\\' or a
     * control char: length of the raw run, whether it has escapes, and
     * whether any byte is non-ASCII (only then is UTF-8 checked) */
    const char *r = q;
    bool esc = false;
    uint64_t hi = 0;
    for (;;) {
        while (p->end - r >= 8) {
            uint64_t w;
            memcpy(&w, r, 8);
            if (swar_zero(w ^ 0x2222222222222222ull) | swar_zero(w ^ 0x5C5C5C5C5C5C5C5Cull) |
                swar_less(w, 0x20))
                break;
            hi |= w;
            r += 8;
        }
        if (r >= p->end) break;
        unsigned char c = (unsigned char)*r;
        if (c == '"') break;
        if (c == '\\') {
            esc = true;
            r += 2;
            continue;
        }
        if (c < 0x20) return fail_at(p, r, "control character in string");
        hi |= c;
        r++;
    }
    if (r >= p->end) return fail_at(p, open, "unterminated string");
    bool ascii = !(hi & 0x8080808080808080ull);
    size_t raw = (size_t)(r - q);
    if (borrow && !esc) {
        if (!ascii && !tok_utf8_valid(q, raw)) return fail_at(p, q, "invalid UTF-8 in string");
        out->type = TJ_STRING;
        out->n = (uint32_t)raw;
        out->u.s = q;
        p->s = r + 1;
        if (raw > UINT32_MAX) return fail_at(p, open, "string too long");
        return true;
    }
    char *dst = arena_alloc(p->doc, raw + 1);
    if (!dst) return fail_at(p, q, "out of memory");
    size_t n = 0;
    if (!esc) {
        if (!ascii && !tok_utf8_valid(q, raw)) return fail_at(p, q, "invalid UTF-8 in string");
        memcpy(dst, q, raw);
        n = raw;
    } else {
        const char *seg = q;
        while (q < r) {
            if (*q != '\\') {
                q++;
                continue;
            }
            if (!ascii && !tok_utf8_valid(seg, (size_t)(q - seg)))
                return fail_at(p, seg, "invalid UTF-8 in string");
            memcpy(dst + n, seg, (size_t)(q - seg));
            n += (size_t)(q - seg);
            char c = q[1];
            q += 2;
            switch (c) {
            case '"': dst[n++] = '"'; break;
            case '\\': dst[n++] = '\\'; break;
            case '/': dst[n++] = '/'; break;
            case 'b': dst[n++] = '\b'; break;
            case 'f': dst[n++] = '\f'; break;
            case 'n': dst[n++] = '\n'; break;
            case 'r': dst[n++] = '\r'; break;
            case 't': dst[n++] = '\t'; break;
            case 'u': {
                int v = q + 4 <= r ? hex4(q) : -1;
                uint32_t cp;
                if (v < 0) return fail_at(p, q - 2, "invalid \\u escape");
                q += 4;
                cp = (uint32_t)v;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    int lo = (q + 6 <= r && q[0] == '\\' && q[1] == 'u') ? hex4(q + 2) : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return fail_at(p, q - 6, "invalid \\u escape: lone surrogate");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                    q += 6;
                } else if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return fail_at(p, q - 6, "invalid \\u escape: lone surrogate");
                n += (size_t)tok_utf8_enc(cp, dst + n); /* never longer than the escape */
                break;
            }
            default: return fail_at(p, q - 2, "invalid escape '\\%c'", c);
            }
            seg = q;
        }
        if (!ascii && !tok_utf8_valid(seg, (size_t)(r - seg)))
            return fail_at(p, seg, "invalid UTF-8 in string");
        memcpy(dst + n, seg, (size_t)(r - seg));
        n += (size_t)(r - seg);
    }
    dst[n] = 0;
    out->type = TJ_STRING;
    out->n = (uint32_t)n;
    out->u.s = dst;
    p->s = r + 1;
    if (raw > UINT32_MAX) return fail_at(p, open, "string too long");
    return true;
}

/* 10^n as a double: exact up to 1e22, strtod's correctly rounded value above (the constants a compiler
 * would give for 1eN literals). */
static double tj_pow10(int n)
{
    static const double exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (n <= 22) return exact[n];
    char b[16];
    snprintf(b, sizeof b, "1e%d", n);
    return strtod(b, NULL);
}

/* A JSON real [b, q) read the way serde_json reads it without its
 * float_roundtrip feature, which is what Hugging Face tokenizers' Rust core
 * sees: the decimal digits as a u64 significand (digits past its capacity
 * dropped), rounded to a double, then one multiplication or division by a
 * power of ten (repeated divisions by 1e308 below that). Up to an ulp away
 * from strtod's correctly rounded value, and those last bits decide
 * Unigram's Viterbi between equal-scored segmentations. 0: out of range. */
/* One more significand digit, unless the u64 would overflow (then *over). */
static void sig_push(uint64_t *sig, unsigned c, bool *over)
{
    if (!*over && *sig >= UINT64_MAX / 10 && (*sig > UINT64_MAX / 10 || c > UINT64_MAX % 10)) *over = true;
    if (!*over) *sig = *sig * 10 + c;
}

static bool tj_serde_real(const char *b, const char *q, double *out)
{
    bool neg = *b == '-', over = false;
    const char *d = b + neg;
    uint64_t sig = 0;
    int64_t exp = 0;
    for (; d < q && *d >= '0' && *d <= '9'; d++) { /* integer digits past the u64 scale the value */
        sig_push(&sig, (unsigned)(*d - '0'), &over);
        if (over) exp++;
    }
    if (d < q && *d == '.')
        for (d++; d < q && *d >= '0' && *d <= '9'; d++) { /* fraction digits past it are dropped */
            sig_push(&sig, (unsigned)(*d - '0'), &over);
            if (!over) exp--;
        }
    if (d < q && (*d == 'e' || *d == 'E')) {
        d++;
        bool eneg = d < q && *d == '-';
        if (d < q && (*d == '+' || *d == '-')) d++;
        int64_t e = 0;
        for (; d < q && *d >= '0' && *d <= '9'; d++)
            if (e < 1000000) e = e * 10 + (*d - '0');
        exp += eneg ? -e : e;
    }
    double f = (double)sig;
    for (;;) {
        if (exp >= -308 && exp <= 308) {
            if (exp >= 0) {
                f *= tj_pow10((int)exp);
                if (isinf(f)) return false;
            } else {
                f /= tj_pow10((int)-exp);
            }
            break;
        }
        if (f == 0.0) break;
        if (exp > 0) return false;
        f /= 1e308;
        exp += 308;
    }
    *out = neg ? -f : f;
    return true;
}

static bool parse_number(tj_p *p, tj_val *out)
{
    const char *q = p->s, *b = q;
    bool real = false;
    if (q < p->end && *q == '-') q++;
    if (q >= p->end || *q < '0' || *q > '9') return fail_at(p, b, "invalid number");
    if (*q == '0') q++;
    else
        while (q < p->end && *q >= '0' && *q <= '9') q++;
    if (q < p->end && *q == '.') {
        real = true;
        q++;
        if (q >= p->end || *q < '0' || *q > '9') return fail_at(p, b, "invalid number");
        while (q < p->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < p->end && (*q == 'e' || *q == 'E')) {
        real = true;
        q++;
        if (q < p->end && (*q == '+' || *q == '-')) q++;
        if (q >= p->end || *q < '0' || *q > '9') return fail_at(p, b, "invalid number");
        while (q < p->end && *q >= '0' && *q <= '9') q++;
    }
    char tmp[64];
    size_t k = (size_t)(q - b);
    if (!real && k < 19) { /* fast path: fits in long long */
        long long v = 0;
        const char *d = b + (*b == '-');
        for (; d < q; d++) v = v * 10 + (*d - '0');
        out->type = TJ_INT;
        out->u.i = *b == '-' ? -v : v;
        p->s = q;
        return true;
    }
    if (real) {
        out->type = TJ_REAL;
        if (!tj_serde_real(b, q, &out->u.d)) return fail_at(p, b, "number out of range");
        p->s = q;
        return true;
    }
    if (k >= sizeof tmp) return fail_at(p, b, "integer out of range");
    memcpy(tmp, b, k);
    tmp[k] = 0;
    errno = 0;
    out->type = TJ_INT;
    out->u.i = strtoll(tmp, NULL, 10);
    if (errno == ERANGE) return fail_at(p, b, "integer out of range");
    p->s = q;
    return true;
}

static bool push(tj_p *p, const tj_val *v)
{
    if (!tok_grow((void **)&p->stack, &p->scap, p->sn + 1, sizeof *p->stack)) return false;
    p->stack[p->sn++] = *v;
    return true;
}

static bool parse_value(tj_p *p, tj_val *out, int depth, int where);

static bool close_container(tj_p *p, size_t base, tj_val *out, tj_type t, size_t count)
{
    size_t nv = p->sn - base;
    tj_val *items = arena_alloc(p->doc, (nv ? nv : 1) * sizeof *items);
    if (!items) return fail_at(p, p->s, "out of memory");
    if (nv) memcpy(items, p->stack + base, nv * sizeof *items); /* an empty container: the stack may be NULL */
    p->sn = base;
    out->type = t;
    out->n = (uint32_t)count;
    out->u.items = items;
    return true;
}

static bool key_is(const tj_val *k, const char *s, size_t n)
{
    return k->n == n && memcmp(k->u.s, s, n) == 0;
}

/* A streamed element. The usual shapes, "key": integer, "a b" and
 * ["a", "b"], are read directly (strings borrowed from the source); any
 * other is read from the same place by parse_value, so that errors are
 * the same. */
static bool parse_element(tj_p *p, tj_val *out, int depth, bool obj)
{
    skip_ws(p);
    if (p->s >= p->end) return parse_value(p, out, depth, H_NONE);
    char c = *p->s;
    if (obj && (c == '-' || (c >= '0' && c <= '9'))) return parse_number(p, out);
    if (!obj && c == '"') return parse_string(p, out, true);
    if (!obj && c == '[') {
        const char *at = p->s;
        tj_val *items = p->pair;
        p->s++;
        skip_ws(p);
        if (p->s < p->end && *p->s == '"') {
            if (!parse_string(p, &items[0], true)) return false;
            skip_ws(p);
            if (p->s < p->end && *p->s == ',') {
                p->s++;
                skip_ws(p);
                if (p->s < p->end && *p->s == '"') {
                    if (!parse_string(p, &items[1], true)) return false;
                    skip_ws(p);
                    if (p->s < p->end && *p->s == ']') {
                        p->s++;
                        out->type = TJ_ARRAY;
                        out->n = 2;
                        out->u.items = items;
                        return true;
                    }
                }
            }
        }
        p->s = at; /* another shape: the general path */
    }
    return parse_value(p, out, depth, H_NONE);
}

/* Elements of a streamed container: each parsed into the arena, handed to
 * the hook, and its memory taken back. */
static bool parse_streamed(tj_p *p, tj_val *out, int depth, int which)
{
    bool obj = which == TJ_SV_VOCAB;
    size_t count = 0, base = p->sn;
    const tj_hooks *h = p->hooks;
    if (h->begin && !h->begin(h->ctx, which)) return fail_at(p, p->s, "out of memory");
    p->s++;
    /* room so that small elements never need a chunk of their own */
    if (!p->doc->chunks || p->doc->chunks->cap - p->doc->chunks->used < (64u << 10)) {
        if (!arena_alloc(p->doc, 1u << 20)) return fail_at(p, p->s, "out of memory");
        p->doc->chunks->used = 0;
    }
    tj_mark mark = arena_mark(p->doc);
    skip_ws(p);
    if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
        p->s++;
        goto done;
    }
    for (;;) {
        tj_val k, v;
        skip_ws(p);
        if (obj) {
            if (p->s >= p->end || *p->s != '"') return fail_at(p, p->s, "expected a string key");
            if (!parse_string(p, &k, true)) return false;
            skip_ws(p);
            if (p->s >= p->end || *p->s != ':') return fail_at(p, p->s, "expected ':'");
            p->s++;
        }
        if (!parse_element(p, &v, depth + 1, obj)) return false;
        if (!h->elem(h->ctx, which, count, obj ? &k : NULL, &v)) return fail_at(p, p->s, "out of memory");
        arena_reset(p->doc, mark);
        p->sn = base;
        count++;
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
            p->s++;
            break;
        }
        return fail_at(p, p->s, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
done:
    out->type = TJ_STREAMED;
    out->n = (uint32_t)count;
    out->u.i = which;
    return true;
}

static bool parse_value(tj_p *p, tj_val *out, int depth, int where)
{
    skip_ws(p);
    if (p->s >= p->end) return fail_at(p, p->s, "unexpected end of input");
    if (depth > TJ_MAX_DEPTH) return fail_at(p, p->s, "nesting too deep");
    char c = *p->s;
    if (c == '"') return parse_string(p, out, false);
    if (where == H_VOCAB && c == '{') return parse_streamed(p, out, depth, TJ_SV_VOCAB);
    if (where == H_MERGES && c == '[') return parse_streamed(p, out, depth, TJ_SV_MERGES);
    if (c == '{' || c == '[') {
        bool obj = c == '{';
        size_t base = p->sn, count = 0;
        p->s++;
        skip_ws(p);
        if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
            p->s++;
            return close_container(p, base, out, obj ? TJ_OBJECT : TJ_ARRAY, 0);
        }
        for (;;) {
            tj_val v;
            int sub = H_NONE;
            skip_ws(p);
            if (obj) {
                if (p->s >= p->end || *p->s != '"') return fail_at(p, p->s, "expected a string key");
                if (!parse_string(p, &v, false)) return false;
                if (!push(p, &v)) return fail_at(p, p->s, "out of memory");
                if (where == H_ROOT && key_is(&v, "model", 5)) sub = H_MODEL;
                else if (where == H_MODEL && key_is(&v, "vocab", 5)) sub = H_VOCAB;
                else if (where == H_MODEL && key_is(&v, "merges", 6)) sub = H_MERGES;
                skip_ws(p);
                if (p->s >= p->end || *p->s != ':') return fail_at(p, p->s, "expected ':'");
                p->s++;
            }
            if (!parse_value(p, &v, depth + 1, p->hooks ? sub : H_NONE)) return false;
            if (!push(p, &v)) return fail_at(p, p->s, "out of memory");
            count++;
            skip_ws(p);
            if (p->s < p->end && *p->s == ',') {
                p->s++;
                continue;
            }
            if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
                p->s++;
                return close_container(p, base, out, obj ? TJ_OBJECT : TJ_ARRAY, count);
            }
            return fail_at(p, p->s, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, out);
    if (p->end - p->s >= 4 && memcmp(p->s, "true", 4) == 0) {
        out->type = TJ_TRUE;
        p->s += 4;
        return true;
    }
    if (p->end - p->s >= 5 && memcmp(p->s, "false", 5) == 0) {
        out->type = TJ_FALSE;
        p->s += 5;
        return true;
    }
    if (p->end - p->s >= 4 && memcmp(p->s, "null", 4) == 0) {
        out->type = TJ_NULL;
        p->s += 4;
        return true;
    }
    return fail_at(p, p->s, "invalid token");
}

bool tj_parse(const char *src, size_t len, tj_doc *doc, const tj_hooks *hooks)
{
    tj_p p = {src, src + len, src, doc, NULL, 0, 0, false, hooks, {{0}}};
    tj_val *root;
    memset(doc, 0, sizeof *doc);
    root = arena_alloc(doc, sizeof *root);
    if (!root) {
        doc->err_line = doc->err_col = 1;
        snprintf(doc->err_text, sizeof doc->err_text, "out of memory");
        return false;
    }
    if (!parse_value(&p, root, 0, H_ROOT)) {
        free(p.stack);
        return false;
    }
    skip_ws(&p);
    free(p.stack);
    if (p.s != p.end) return fail_at(&p, p.s, "end of file expected");
    doc->root = root;
    return true;
}

tj_val *tj_get(const tj_val *obj, const char *key)
{
    if (!tj_is_object(obj)) return NULL;
    size_t kl = strlen(key);
    for (size_t i = obj->n; i-- > 0;) {
        const tj_val *k = &obj->u.items[2 * i];
        if (k->n == kl && memcmp(k->u.s, key, kl) == 0) return &obj->u.items[2 * i + 1];
    }
    return NULL;
}
