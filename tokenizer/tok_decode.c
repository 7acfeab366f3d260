/* tokenizer/tok_decode.c — decoders: each maps a list of token strings to
 * a new list (HF's decode_chain); the final text is their concatenation. */
#include <string.h>

#include "tokenizer/tok_internal.h"

int tok_byte_level_decode_cp(uint32_t cp);

bool tok_strs_push(tok_strs *s, const char *p, size_t n)
{
    if (!tok_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) return false;
    s->v[s->n].p = tok_strndup(p, n);
    if (!s->v[s->n].p) return false;
    s->v[s->n].n = n;
    s->n++;
    return true;
}

static void strs_clear(tok_strs *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->v[i].p);
    s->n = 0;
}

void tok_strs_free(tok_strs *s)
{
    strs_clear(s);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Replaces the list by `out` (taking ownership of its strings). */
static void strs_move(tok_strs *dst, tok_strs *src)
{
    tok_strs_free(dst);
    *dst = *src;
    memset(src, 0, sizeof *src);
}

static bool set_str(tok_str *s, const char *p, size_t n)
{
    char *np = tok_strndup(p, n);
    if (!np) return false;
    free(s->p);
    s->p = np;
    s->n = n;
    return true;
}

static bool push_lossy(tok_strs *out, const char *p, size_t n)
{
    tok_buf b = {0};
    bool ok = tok_utf8_sanitize(p, n, &b) && tok_strs_push(out, b.p ? b.p : "", b.len);
    tok_buf_free(&b);
    return ok;
}

static bool dec_byte_level(tok_strs *toks)
{
    tok_buf bytes = {0};
    tok_strs out = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < toks->n; i++) {
        const char *t = toks->v[i].p;
        size_t n = toks->v[i].n, start = bytes.len, j = 0;
        bool all = true;
        while (j < n) {
            uint32_t cp;
            int k = tok_utf8_dec(t + j, n - j, &cp);
            int b = tok_byte_level_decode_cp(cp);
            if (b < 0) {
                all = false;
                break;
            }
            ok = ok && tok_buf_addc(&bytes, (char)b);
            j += (size_t)k;
        }
        if (!all) {
            bytes.len = start;
            ok = ok && tok_buf_add(&bytes, t, n);
        }
    }
    ok = ok && push_lossy(&out, bytes.p ? bytes.p : "", bytes.len);
    tok_buf_free(&bytes);
    if (ok) strs_move(toks, &out);
    tok_strs_free(&out);
    return ok;
}

static bool dec_replace(graft_tokenizer *tok, const tok_dec *d, tok_strs *toks)
{
    tok_buf b = {0};
    for (size_t i = 0; i < toks->n; i++) {
        const char *t = toks->v[i].p;
        size_t n = toks->v[i].n, prev = 0;
        b.len = 0;
        if (!tok_regex_find_all(&d->pat.re, t, n, &tok->spans)) goto fail;
        if (!tok->spans.n) continue;
        for (size_t k = 0; k < tok->spans.n; k++) {
            if (!tok_buf_add(&b, t + prev, tok->spans.v[k].a - prev) ||
                !tok_buf_add(&b, d->str, d->slen))
                goto fail;
            prev = tok->spans.v[k].b;
        }
        if (!tok_buf_add(&b, t + prev, n - prev)) goto fail;
        if (!set_str(&toks->v[i], b.p, b.len)) goto fail;
    }
    tok_buf_free(&b);
    return true;
fail:
    tok_buf_free(&b);
    return false;
}

static int hexv(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool flush_bytes(tok_strs *out, tok_buf *bytes)
{
    bool ok = true;
    if (!bytes->len) return true;
    if (tok_utf8_valid(bytes->p, bytes->len))
        ok = tok_strs_push(out, bytes->p, bytes->len);
    else
        for (size_t i = 0; ok && i < bytes->len; i++) ok = tok_strs_push(out, "\xEF\xBF\xBD", 3);
    bytes->len = 0;
    return ok;
}

static bool dec_byte_fallback(tok_strs *toks)
{
    tok_strs out = {0};
    tok_buf bytes = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < toks->n; i++) {
        const char *t = toks->v[i].p;
        int b = -1;
        if (toks->v[i].n == 6 && memcmp(t, "<0x", 3) == 0 && t[5] == '>') {
            int h = hexv(t[3]), l = hexv(t[4]);
            if (h >= 0 && l >= 0) b = h * 16 + l;
            else if (t[3] == '+' && l >= 0) b = l;
        }
        if (b >= 0)
            ok = tok_buf_addc(&bytes, (char)b);
        else
            ok = flush_bytes(&out, &bytes) && tok_strs_push(&out, t, toks->v[i].n);
    }
    ok = ok && flush_bytes(&out, &bytes);
    tok_buf_free(&bytes);
    if (ok) strs_move(toks, &out);
    tok_strs_free(&out);
    return ok;
}

static bool dec_fuse(tok_strs *toks)
{
    tok_buf b = {0};
    tok_strs out = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < toks->n; i++) ok = tok_buf_add(&b, toks->v[i].p, toks->v[i].n);
    ok = ok && tok_strs_push(&out, b.p ? b.p : "", b.len);
    tok_buf_free(&b);
    if (ok) strs_move(toks, &out);
    tok_strs_free(&out);
    return ok;
}

static bool dec_strip(const tok_dec *d, tok_strs *toks)
{
    char c[4];
    int cl = tok_utf8_enc(d->ch, c);
    for (size_t i = 0; i < toks->n; i++) {
        char *t = toks->v[i].p;
        size_t n = toks->v[i].n, a = 0, b = n;
        for (size_t k = 0; k < d->start && a + (size_t)cl <= b && memcmp(t + a, c, (size_t)cl) == 0; k++)
            a += (size_t)cl;
        for (size_t k = 0; k < d->stop && b >= a + (size_t)cl && memcmp(t + b - cl, c, (size_t)cl) == 0; k++)
            b -= (size_t)cl;
        memmove(t, t + a, b - a);
        t[b - a] = 0;
        toks->v[i].n = b - a;
    }
    return true;
}

static bool dec_metaspace(const tok_dec *d, tok_strs *toks)
{
    char c[4];
    int cl = tok_utf8_enc(d->ch, c);
    tok_buf b = {0};
    for (size_t i = 0; i < toks->n; i++) {
        const char *t = toks->v[i].p;
        size_t n = toks->v[i].n;
        b.len = 0;
        for (size_t j = 0; j < n;) {
            if (j + (size_t)cl <= n && memcmp(t + j, c, (size_t)cl) == 0) {
                if (!(i == 0 && d->scheme != TOK_PREPEND_NEVER) && !tok_buf_addc(&b, ' '))
                    goto fail;
                j += (size_t)cl;
            } else {
                if (!tok_buf_addc(&b, t[j])) goto fail;
                j++;
            }
        }
        if (!set_str(&toks->v[i], b.p ? b.p : "", b.len)) goto fail;
    }
    tok_buf_free(&b);
    return true;
fail:
    tok_buf_free(&b);
    return false;
}

/* Replaces every occurrence of `from` by `to` in b (in place via copy). */
static bool buf_replace_all(tok_buf *b, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to);
    tok_buf o = {0};
    size_t i = 0;
    if (!b->len) return true;
    while (i < b->len) {
        if (i + fl <= b->len && memcmp(b->p + i, from, fl) == 0) {
            if (!tok_buf_add(&o, to, tl)) goto fail;
            i += fl;
        } else {
            if (!tok_buf_addc(&o, b->p[i])) goto fail;
            i++;
        }
    }
    tok_buf_free(b);
    *b = o;
    if (!b->p && !tok_buf_reserve(b, 0)) return false;
    return true;
fail:
    tok_buf_free(&o);
    return false;
}

static bool dec_wordpiece(const tok_dec *d, tok_strs *toks)
{
    static const char *const rules[][2] = {
        {" .", "."},   {" ?", "?"},       {" !", "!"},         {" ,", ","},
        {" ' ", "'"},  {" n't", "n't"},   {" 'm", "'m"},       {" do not", " don't"},
        {" 's", "'s"}, {" 've", "'ve"},   {" 're", "'re"},
    };
    tok_buf b = {0};
    for (size_t i = 0; i < toks->n; i++) {
        const char *t = toks->v[i].p;
        size_t n = toks->v[i].n;
        b.len = 0;
        if (i != 0) {
            if (n >= d->slen && memcmp(t, d->str, d->slen) == 0) {
                if (!tok_buf_add(&b, t + d->slen, n - d->slen)) goto fail;
            } else if (!tok_buf_addc(&b, ' ') || !tok_buf_add(&b, t, n))
                goto fail;
        } else if (!tok_buf_add(&b, t, n))
            goto fail;
        if (d->cleanup)
            for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++)
                if (!buf_replace_all(&b, rules[r][0], rules[r][1])) goto fail;
        if (!set_str(&toks->v[i], b.p ? b.p : "", b.len)) goto fail;
    }
    tok_buf_free(&b);
    return true;
fail:
    tok_buf_free(&b);
    return false;
}

static bool dec_bpe(const tok_dec *d, tok_strs *toks)
{
    tok_buf b = {0};
    for (size_t i = 0; i < toks->n; i++) {
        b.len = 0;
        if (!tok_buf_add(&b, toks->v[i].p, toks->v[i].n)) goto fail;
        if (d->slen && !buf_replace_all(&b, d->str, i + 1 == toks->n ? "" : " ")) goto fail;
        if (!set_str(&toks->v[i], b.p ? b.p : "", b.len)) goto fail;
    }
    tok_buf_free(&b);
    return true;
fail:
    tok_buf_free(&b);
    return false;
}

bool tok_decode_chain(graft_tokenizer *tok, const tok_dec *d, tok_strs *toks)
{
    switch (d->type) {
    case TOK_DEC_SEQUENCE:
        for (size_t i = 0; i < d->nsubs; i++)
            if (!tok_decode_chain(tok, d->subs[i], toks)) return false;
        return true;
    case TOK_DEC_BYTE_LEVEL: return dec_byte_level(toks);
    case TOK_DEC_REPLACE: return dec_replace(tok, d, toks);
    case TOK_DEC_BYTE_FALLBACK: return dec_byte_fallback(toks);
    case TOK_DEC_FUSE: return dec_fuse(toks);
    case TOK_DEC_STRIP: return dec_strip(d, toks);
    case TOK_DEC_METASPACE: return dec_metaspace(d, toks);
    case TOK_DEC_WORDPIECE: return dec_wordpiece(d, toks);
    case TOK_DEC_BPE: return dec_bpe(d, toks);
    }
    return false;
}
