/* tokenizer/tok_util.c — buffers, UTF-8, Unicode classes, hash maps, trie,
 * PCRE2 regexes with Oniguruma-like iteration. */
#include <stdarg.h>
#include <string.h>

#include <utf8proc.h>

#include "tokenizer/tok_internal.h"

graft_status tok_err(graft_error *err, graft_status code, const char *fmt, ...)
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

/* ------------------------------------------------------------ buffers */

bool tok_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    size_t ncap;
    void *p;
    if (need <= *cap) return true;
    ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / elem) return false;
        ncap *= 2;
    }
    p = realloc(*arr, ncap * elem);
    if (!p) return false;
    *arr = p;
    *cap = ncap;
    return true;
}

bool tok_buf_reserve(tok_buf *b, size_t extra)
{
    if (extra > SIZE_MAX - b->len - 1) return false;
    return tok_grow((void **)&b->p, &b->cap, b->len + extra + 1, 1);
}

bool tok_buf_add(tok_buf *b, const void *s, size_t n)
{
    if (!tok_buf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return true;
}

bool tok_buf_addc(tok_buf *b, char c)
{
    return tok_buf_add(b, &c, 1);
}

bool tok_buf_add_cp(tok_buf *b, uint32_t cp)
{
    char u[4];
    int k = tok_utf8_enc(cp, u);
    return tok_buf_add(b, u, (size_t)k);
}

void tok_buf_free(tok_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

char *tok_strndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* ------------------------------------------------------------ UTF-8 */

int tok_utf8_len(unsigned char c)
{
    if (c < 0x80) return 1;
    if (c < 0xE0) return 2;
    if (c < 0xF0) return 3;
    return 4;
}

int tok_utf8_dec(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    int k = tok_utf8_len(u[0]);
    if ((size_t)k > n) k = (int)n; /* never on valid input */
    switch (k) {
    case 1: *cp = u[0]; break;
    case 2: *cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F); break;
    case 3: *cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F); break;
    default:
        *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
              ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
        break;
    }
    return k;
}

int tok_utf8_enc(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 char at s, or -(length of the maximal invalid
 * subpart) (Unicode "substitution of maximal subparts"). */
static int utf8_check(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF;
    int need, i;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return -1;
    for (i = 1; i <= need; i++) {
        if ((size_t)i >= n) return -i;
        if (s[i] < lo || s[i] > hi) return -i;
        lo = 0x80;
        hi = 0xBF;
    }
    return need + 1;
}

bool tok_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *e = p + n;
    while (p < e) {
        if (e - p >= 8) { /* eight bytes at a time: all ASCII, or four 2-byte chars */
            uint64_t w;
            memcpy(&w, p, 8);
            if (!(w & 0x8080808080808080ull)) {
                p += 8;
                continue;
            }
            /* little-endian lanes of 16 bits: lead 110xxxxx above 0xC1
             * (some of bits 1..4 set), then 10xxxxxx */
            if ((w & 0xC0E0C0E0C0E0C0E0ull) == 0x80C080C080C080C0ull &&
                (((w & 0x001E001E001E001Eull) + 0x7FFF7FFF7FFF7FFFull) & 0x8000800080008000ull) ==
                    0x8000800080008000ull) {
                p += 8;
                continue;
            }
        }
        unsigned c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) { /* two bytes: the common case past ASCII */
            if (e - p < 2 || (p[1] & 0xC0) != 0x80) return false;
            p += 2;
            continue;
        }
        int k = utf8_check(p, (size_t)(e - p));
        if (k < 0) return false;
        p += k;
    }
    return true;
}

bool tok_utf8_sanitize(const char *s, size_t n, tok_buf *out)
{
    size_t i = 0, run = 0;
    out->len = 0;
    if (!tok_buf_reserve(out, n)) return false;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        int k = utf8_check((const unsigned char *)s + i, n - i);
        if (k > 0) {
            i += (size_t)k;
            continue;
        }
        if (!tok_buf_add(out, s + run, i - run) || !tok_buf_add(out, "\xEF\xBF\xBD", 3))
            return false;
        i += (size_t)(-k);
        run = i;
    }
    if (!tok_buf_add(out, s + run, n - run)) return false;
    return true;
}

/* ------------------------------------------------------------ Unicode classes */

bool tok_uni_is_whitespace(uint32_t c)
{
    if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
    if (c < 0x85) return false;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool tok_uni_is_word(uint32_t c)
{
    /* Rust regex's Unicode \w: Alphabetic, marks, Nd, Pc, join controls. */
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               c == '_';
    if (c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9)) return true;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

bool tok_uni_is_numeric(uint32_t c)
{
    if (c < 0x80) return c >= '0' && c <= '9';
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return true;
    default:
        return false;
    }
}

bool tok_uni_is_punct(uint32_t c)
{
    if (c < 0x80)
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
               (c >= 123 && c <= 126);
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return true;
    default:
        return false;
    }
}

bool tok_uni_is_control(uint32_t c)
{
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CO:
        return true;
    default:
        return false;
    }
}

bool tok_uni_is_mark_nonspacing(uint32_t c)
{
    return utf8proc_category((utf8proc_int32_t)c) == UTF8PROC_CATEGORY_MN;
}

bool tok_uni_is_cjk(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* ------------------------------------------------------------ hashing */

uint64_t tok_hash(const void *p, size_t n)
{
    /* FNV-1a over 8-byte words, then a final mix. */
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    if (n) { /* the last 1..7 bytes as one word (overlapping reads; n is in h) */
        uint64_t w;
        if (n >= 4) {
            uint32_t lo, hi;
            memcpy(&lo, s, 4);
            memcpy(&hi, s + n - 4, 4);
            w = (uint64_t)lo | (uint64_t)hi << 32;
        } else
            w = (uint64_t)s[0] | (uint64_t)s[n / 2] << 8 | (uint64_t)s[n - 1] << 16;
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    return h;
}

uint32_t tok_hash2(const char *a, size_t an, const char *b, size_t bn)
{
    char buf[256];
    if (an + bn <= sizeof buf) {
        memcpy(buf, a, an);
        memcpy(buf + an, b, bn);
        return (uint32_t)tok_hash(buf, an + bn);
    }
    char *p = malloc(an + bn);
    if (!p) return 0; /* a wrong hash only makes the lookup miss */
    memcpy(p, a, an);
    memcpy(p + an, b, bn);
    uint32_t h = (uint32_t)tok_hash(p, an + bn);
    free(p);
    return h;
}

static bool smap_rehash(tok_smap *m, size_t ncap)
{
    tok_smap_ent *e = calloc(ncap, sizeof *e);
    if (!e) return false;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->e[i].key) continue;
        size_t j = m->e[i].hash & (ncap - 1);
        while (e[j].key) j = (j + 1) & (ncap - 1);
        e[j] = m->e[i];
    }
    free(m->e);
    m->e = e;
    m->cap = ncap;
    return true;
}

bool tok_smap_put(tok_smap *m, const char *key, size_t klen, int32_t val)
{
    uint32_t h;
    size_t j;
    if ((m->n + 1) * 4 >= m->cap * 3 && !smap_rehash(m, m->cap ? m->cap * 2 : 64)) return false;
    h = (uint32_t)tok_hash(key, klen);
    j = h & (m->cap - 1);
    while (m->e[j].key) {
        if (m->e[j].hash == h && m->e[j].klen == klen && memcmp(m->e[j].key, key, klen) == 0) {
            m->e[j].val = val;
            m->e[j].key = key;
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->e[j].key = key ? key : "";
    m->e[j].klen = (uint32_t)klen;
    m->e[j].hash = h;
    m->e[j].val = val;
    m->n++;
    return true;
}

int32_t tok_smap_get(const tok_smap *m, const char *key, size_t klen)
{
    uint32_t h;
    size_t j;
    if (!m->cap) return -1;
    h = (uint32_t)tok_hash(key, klen);
    j = h & (m->cap - 1);
    while (m->e[j].key) {
        if (m->e[j].hash == h && m->e[j].klen == klen && memcmp(m->e[j].key, key, klen) == 0)
            return m->e[j].val;
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

void tok_smap_free(tok_smap *m)
{
    free(m->e);
    m->e = NULL;
    m->cap = m->n = 0;
}

static bool umap_rehash(tok_umap *m, size_t ncap)
{
    tok_ukv *e = malloc(ncap * sizeof *e);
    if (!e) return false;
    memset(e, 0xFF, ncap * sizeof *e);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->e[i].k == UINT64_MAX) continue;
        size_t j = tok_umix(m->e[i].k) & (ncap - 1);
        while (e[j].k != UINT64_MAX) j = (j + 1) & (ncap - 1);
        e[j] = m->e[i];
    }
    free(m->e);
    m->e = e;
    m->cap = ncap;
    return true;
}

bool tok_umap_put(tok_umap *m, uint64_t key, uint64_t val)
{
    size_t j;
    if ((m->n + 1) * 2 >= m->cap && !umap_rehash(m, m->cap ? m->cap * 2 : 64)) return false;
    j = tok_umix(key) & (m->cap - 1);
    while (m->e[j].k != UINT64_MAX) {
        if (m->e[j].k == key) {
            m->e[j].v = val;
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->e[j].k = key;
    m->e[j].v = val;
    m->n++;
    return true;
}

bool tok_umap_reserve(tok_umap *m, size_t n)
{
    size_t cap = m->cap ? m->cap : 64;
    while (cap <= 2 * (n + 1)) cap *= 2;
    return cap == m->cap || umap_rehash(m, cap);
}

void tok_umap_free(tok_umap *m)
{
    free(m->e);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ trie */

bool tok_trie_init(tok_trie *t)
{
    memset(t, 0, sizeof *t);
    if (!tok_grow((void **)&t->val, &t->cap, 1, sizeof *t->val)) return false;
    t->val[0] = -1;
    t->n = 1;
    return true;
}

bool tok_trie_insert(tok_trie *t, const char *s, size_t n, int32_t val)
{
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t c = tok_trie_child(t, node, (unsigned char)s[i]);
        if (c < 0) {
            if (!tok_grow((void **)&t->val, &t->cap, t->n + 1, sizeof *t->val)) return false;
            c = (int32_t)t->n++;
            t->val[c] = -1;
            if (!tok_umap_put(&t->kids, ((uint64_t)node << 8) | (unsigned char)s[i], (uint64_t)c))
                return false;
        }
        node = c;
    }
    t->val[node] = val;
    return true;
}

void tok_trie_free(tok_trie *t)
{
    free(t->val);
    tok_umap_free(&t->kids);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------ regex */

/* Oniguruma (HF's regex engine) gives \w Unicode's word class
 * (Alphabetic, marks, Nd, Pc, joiners); PCRE2 with UCP has only L, N, '_'. Rewrites \w and \W so that
 * patterns written for HF match the same text. */
static bool regex_translate(const char *p, size_t n, tok_buf *out)
{
    static const char W[] = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}";
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[i + 1];
            bool ok;
            if (d == 'w' && in_class) ok = tok_buf_add(out, W, sizeof W - 1);
            else if (d == 'w') ok = tok_buf_addc(out, '[') && tok_buf_add(out, W, sizeof W - 1) &&
                                    tok_buf_addc(out, ']');
            else if (d == 'W' && !in_class)
                ok = tok_buf_add(out, "[^", 2) && tok_buf_add(out, W, sizeof W - 1) &&
                     tok_buf_addc(out, ']');
            else ok = tok_buf_add(out, p + i, 2);
            if (!ok) return false;
            i++;
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && p[i + 1] == ':') {
            /* POSIX class [:name:] */
            const char *e = NULL;
            for (size_t j = i + 2; j + 1 < n; j++)
                if (p[j] == ':' && p[j + 1] == ']') {
                    e = p + j + 2;
                    break;
                }
            if (e) {
                if (!tok_buf_add(out, p + i, (size_t)(e - (p + i)))) return false;
                i = (size_t)(e - p) - 1;
                continue;
            }
        }
        if (!in_class && c == '[') {
            in_class = 1;
            if (!tok_buf_addc(out, c)) return false;
            if (i + 1 < n && p[i + 1] == '^') {
                if (!tok_buf_addc(out, '^')) return false;
                i++;
            }
            if (i + 1 < n && p[i + 1] == ']') { /* leading ] is literal */
                if (!tok_buf_addc(out, ']')) return false;
                i++;
            }
            continue;
        }
        if (in_class && c == ']') in_class = 0;
        if (!tok_buf_addc(out, c)) return false;
    }
    return true;
}

graft_status tok_regex_init(tok_regex *re, const char *pat, size_t n, const char *where,
                            graft_error *err)
{
    int ec;
    PCRE2_SIZE eo;
    tok_buf tr = {0};
    memset(re, 0, sizeof *re);
    re->src = tok_strndup(pat, n);
    if (!re->src || !regex_translate(pat, n, &tr)) {
        tok_buf_free(&tr);
        return tok_err(err, GRAFT_ENOMEM, "out of memory");
    }
    re->code = pcre2_compile((PCRE2_SPTR)(tr.p ? tr.p : ""), tr.len, PCRE2_UTF | PCRE2_UCP, &ec, &eo,
                             NULL);
    tok_buf_free(&tr);
    if (!re->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return tok_err(err, GRAFT_EINVAL, "%s: bad regex /%s/ at offset %zu: %s", where, re->src,
                       (size_t)eo, (const char *)msg);
    }
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
    re->md = pcre2_match_data_create_from_pattern(re->code, NULL);
    if (!re->md) return tok_err(err, GRAFT_ENOMEM, "out of memory");
    return GRAFT_OK;
}

void tok_regex_free(tok_regex *re)
{
    if (re->md) pcre2_match_data_free(re->md);
    if (re->code) pcre2_code_free(re->code);
    free(re->src);
    memset(re, 0, sizeof *re);
}

bool tok_regex_find_all(const tok_regex *re, const char *s, size_t n, tok_spans *out)
{
    size_t pos = 0;
    size_t last_end = (size_t)-1;
    out->n = 0;
    while (pos <= n) {
        int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, re->md, NULL);
        if (rc < 0) break; /* no match, or a resource limit: treat as no more matches */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(re->md);
        size_t a = ov[0], b = ov[1];
        if (a == b && a == last_end) {
            /* empty match adjacent to the previous one: retry one char on */
            if (a >= n) break;
            pos = a + (size_t)tok_utf8_len((unsigned char)s[a]);
            int rc2;
            /* search again from pos */
            rc2 = pcre2_match(re->code, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, re->md, NULL);
            if (rc2 < 0) break;
            ov = pcre2_get_ovector_pointer(re->md);
            a = ov[0];
            b = ov[1];
        }
        if (b < a) b = a; /* \K tricks: keep sane */
        if (!tok_grow((void **)&out->v, &out->cap, out->n + 1, sizeof *out->v)) return false;
        out->v[out->n].a = a;
        out->v[out->n].b = b;
        out->n++;
        last_end = b;
        if (b > a)
            pos = b;
        else {
            pos = b; /* next iteration finds the empty match again and steps */
        }
        if (a == b && b >= n) break;
    }
    return true;
}
