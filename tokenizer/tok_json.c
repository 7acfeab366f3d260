/* tokenizer/tok_json.c — single-pass JSON reader into an arena. */
#include <errno.h>
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
} tj_p;

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

static bool parse_string(tj_p *p, tj_val *out)
{
    const char *q = p->s + 1, *open = p->s;
    /* fast scan: length of the raw run, and whether it has escapes */
    const char *r = q;
    bool esc = false;
    while (r < p->end && *r != '"') {
        if (*r == '\\') {
            esc = true;
            r++;
        } else if ((unsigned char)*r < 0x20)
            return fail_at(p, r, "control character in string");
        r++;
    }
    if (r >= p->end) return fail_at(p, open, "unterminated string");
    size_t raw = (size_t)(r - q);
    char *dst = arena_alloc(p->doc, raw + 1);
    if (!dst) return fail_at(p, q, "out of memory");
    size_t n = 0;
    if (!esc) {
        if (!tok_utf8_valid(q, raw)) return fail_at(p, q, "invalid UTF-8 in string");
        memcpy(dst, q, raw);
        n = raw;
    } else {
        const char *seg = q;
        while (q < r) {
            if (*q != '\\') {
                q++;
                continue;
            }
            if (!tok_utf8_valid(seg, (size_t)(q - seg))) return fail_at(p, seg, "invalid UTF-8 in string");
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
        if (!tok_utf8_valid(seg, (size_t)(r - seg))) return fail_at(p, seg, "invalid UTF-8 in string");
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
    if (k >= sizeof tmp) {
        if (!real) return fail_at(p, b, "integer out of range");
        k = sizeof tmp - 1; /* very long reals: precision beyond doubles is moot */
    }
    memcpy(tmp, b, k);
    tmp[k] = 0;
    errno = 0;
    if (real) {
        out->type = TJ_REAL;
        out->u.d = strtod(tmp, NULL);
    } else {
        out->type = TJ_INT;
        out->u.i = strtoll(tmp, NULL, 10);
        if (errno == ERANGE) return fail_at(p, b, "integer out of range");
    }
    p->s = q;
    return true;
}

static bool push(tj_p *p, const tj_val *v)
{
    if (!tok_grow((void **)&p->stack, &p->scap, p->sn + 1, sizeof *p->stack)) return false;
    p->stack[p->sn++] = *v;
    return true;
}

static bool parse_value(tj_p *p, tj_val *out, int depth);

static bool close_container(tj_p *p, size_t base, tj_val *out, tj_type t, size_t count)
{
    size_t nv = p->sn - base;
    tj_val *items = arena_alloc(p->doc, (nv ? nv : 1) * sizeof *items);
    if (!items) return fail_at(p, p->s, "out of memory");
    memcpy(items, p->stack + base, nv * sizeof *items);
    p->sn = base;
    out->type = t;
    out->n = (uint32_t)count;
    out->u.items = items;
    return true;
}

static bool parse_value(tj_p *p, tj_val *out, int depth)
{
    skip_ws(p);
    if (p->s >= p->end) return fail_at(p, p->s, "unexpected end of input");
    if (depth > TJ_MAX_DEPTH) return fail_at(p, p->s, "nesting too deep");
    char c = *p->s;
    if (c == '"') return parse_string(p, out);
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
            skip_ws(p);
            if (obj) {
                if (p->s >= p->end || *p->s != '"') return fail_at(p, p->s, "expected a string key");
                if (!parse_string(p, &v) || !push(p, &v)) return fail_at(p, p->s, "out of memory");
                skip_ws(p);
                if (p->s >= p->end || *p->s != ':') return fail_at(p, p->s, "expected ':'");
                p->s++;
            }
            if (!parse_value(p, &v, depth + 1)) return false;
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

bool tj_parse(const char *src, size_t len, tj_doc *doc)
{
    tj_p p = {src, src + len, src, doc, NULL, 0, 0, false};
    tj_val *root;
    memset(doc, 0, sizeof *doc);
    root = arena_alloc(doc, sizeof *root);
    if (!root) {
        doc->err_line = doc->err_col = 1;
        snprintf(doc->err_text, sizeof doc->err_text, "out of memory");
        return false;
    }
    if (!parse_value(&p, root, 0)) {
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
