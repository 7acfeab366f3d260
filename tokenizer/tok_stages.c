/* tokenizer/tok_stages.c — normalizers and pre-tokenizers.
 *
 * Semantics follow Hugging Face tokenizers: normalizers rewrite a string;
 * pre-tokenizers split pieces with a pattern (regex or char predicate) and
 * a delimiter behaviour, dropping empty pieces. */
#include <string.h>

#include <utf8proc.h>

#include "tokenizer/tok_internal.h"

/* ------------------------------------------------------------ byte-level map */

static char bl_enc[256][2];
static unsigned char bl_enc_len[256];
static int bl_ready;

static void bl_init(void)
{
    int n = 0;
    if (bl_ready) return;
    for (int b = 0; b < 256; b++) {
        uint32_t cp;
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
            cp = (uint32_t)b;
        else
            cp = 256 + (uint32_t)n++;
        char u[4];
        int k = tok_utf8_enc(cp, u);
        memcpy(bl_enc[b], u, (size_t)k);
        bl_enc_len[b] = (unsigned char)k;
    }
    bl_ready = 1;
}

/* Byte-level char → byte, or -1. */
int tok_byte_level_decode_cp(uint32_t cp);
int tok_byte_level_decode_cp(uint32_t cp)
{
    static int16_t rev[512];
    static int rev_ready;
    if (!rev_ready) {
        for (int i = 0; i < 512; i++) rev[i] = -1;
        int n = 0;
        for (int b = 0; b < 256; b++) {
            if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
                rev[b] = (int16_t)b;
            else
                rev[256 + n++] = (int16_t)b;
        }
        rev_ready = 1;
    }
    return cp < 512 ? rev[cp] : -1;
}

static bool byte_level_map(const char *s, size_t n, tok_buf *out)
{
    bl_init();
    if (!tok_buf_reserve(out, n * 2)) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        memcpy(out->p + out->len, bl_enc[b], bl_enc_len[b]);
        out->len += bl_enc_len[b];
    }
    out->p[out->len] = 0;
    return true;
}

/* ------------------------------------------------------------ normalizers */

static bool norm_unicode(const char *s, size_t n, utf8proc_option_t opt, tok_buf *out)
{
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t k;
    if (n == 0) return true;
    k = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst, opt | UTF8PROC_STABLE);
    if (k < 0) {
        /* utf8proc refuses (should not happen on valid UTF-8): keep text. */
        free(dst);
        return tok_buf_add(out, s, n);
    }
    bool ok = tok_buf_add(out, dst, (size_t)k);
    free(dst);
    return ok;
}

static bool norm_replace(graft_tokenizer *tok, const tok_norm *nm, const char *s, size_t n,
                         tok_buf *out)
{
    size_t prev = 0;
    if (!tok_regex_find_all(&nm->pat.re, s, n, &tok->spans)) return false;
    for (size_t i = 0; i < tok->spans.n; i++) {
        tok_span sp = tok->spans.v[i];
        if (!tok_buf_add(out, s + prev, sp.a - prev) || !tok_buf_add(out, nm->str, nm->slen))
            return false;
        prev = sp.b;
    }
    return tok_buf_add(out, s + prev, n - prev);
}

static bool norm_one(graft_tokenizer *tok, const tok_norm *nm, const char *s, size_t n,
                     tok_buf *out)
{
    size_t i;
    uint32_t cp;
    switch (nm->type) {
    case TOK_NORM_SEQUENCE: {
        /* alternate between out and a local buffer */
        tok_buf a = {0}, b = {0};
        bool ok = tok_buf_add(&a, s, n);
        for (size_t k = 0; ok && k < nm->nsubs; k++) {
            b.len = 0;
            ok = tok_buf_reserve(&b, 0) && norm_one(tok, nm->subs[k], a.p, a.len, &b);
            tok_buf t = a;
            a = b;
            b = t;
        }
        ok = ok && tok_buf_add(out, a.p, a.len);
        tok_buf_free(&a);
        tok_buf_free(&b);
        return ok;
    }
    case TOK_NORM_NFC: return norm_unicode(s, n, UTF8PROC_COMPOSE, out);
    case TOK_NORM_NFD: return norm_unicode(s, n, UTF8PROC_DECOMPOSE, out);
    case TOK_NORM_NFKC: return norm_unicode(s, n, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, out);
    case TOK_NORM_NFKD: return norm_unicode(s, n, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, out);
    case TOK_NORM_LOWERCASE:
        if (!tok_buf_reserve(out, n)) return false;
        for (i = 0; i < n;) {
            unsigned char c = (unsigned char)s[i];
            if (c < 0x80) {
                if (c >= 'A' && c <= 'Z') c = (unsigned char)(c + 32);
                if (!tok_buf_addc(out, (char)c)) return false;
                i++;
                continue;
            }
            i += (size_t)tok_utf8_dec(s + i, n - i, &cp);
            if (cp == 0x130) {
                if (!tok_buf_add(out, "i\xCC\x87", 3)) return false;
            } else if (!tok_buf_add_cp(out, (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp)))
                return false;
        }
        return true;
    case TOK_NORM_REPLACE: return norm_replace(tok, nm, s, n, out);
    case TOK_NORM_PREPEND:
        if (n && !tok_buf_add(out, nm->str, nm->slen)) return false;
        return tok_buf_add(out, s, n);
    case TOK_NORM_APPEND:
        if (!tok_buf_add(out, s, n)) return false;
        return !n || tok_buf_add(out, nm->str, nm->slen);
    case TOK_NORM_STRIP: {
        size_t a = 0, b = n;
        if (nm->left)
            while (a < b) {
                int k = tok_utf8_dec(s + a, b - a, &cp);
                if (!tok_uni_is_whitespace(cp)) break;
                a += (size_t)k;
            }
        if (nm->right)
            while (b > a) {
                size_t j = b - 1;
                while (j > a && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
                tok_utf8_dec(s + j, b - j, &cp);
                if (!tok_uni_is_whitespace(cp)) break;
                b = j;
            }
        return tok_buf_add(out, s + a, b - a);
    }
    case TOK_NORM_STRIP_ACCENTS:
        for (i = 0; i < n;) {
            int k = tok_utf8_dec(s + i, n - i, &cp);
            utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
            if (cat != UTF8PROC_CATEGORY_MN && cat != UTF8PROC_CATEGORY_MC &&
                cat != UTF8PROC_CATEGORY_ME && !tok_buf_add(out, s + i, (size_t)k))
                return false;
            i += (size_t)k;
        }
        return true;
    case TOK_NORM_NMT:
        for (i = 0; i < n;) {
            int k = tok_utf8_dec(s + i, n - i, &cp);
            i += (size_t)k;
            if ((cp >= 1 && cp <= 8) || cp == 0x0B || (cp >= 0x0E && cp <= 0x1F) || cp == 0x7F ||
                cp == 0x8F || cp == 0x9F)
                continue;
            if (cp == 9 || cp == 10 || cp == 12 || cp == 13 || cp == 0x1680 ||
                (cp >= 0x200B && cp <= 0x200F) || cp == 0x2028 || cp == 0x2029 ||
                cp == 0x2581 || cp == 0xFEFF || cp == 0xFFFD)
                cp = ' ';
            if (!tok_buf_add_cp(out, cp)) return false;
        }
        return true;
    case TOK_NORM_BYTE_LEVEL: return byte_level_map(s, n, out);
    case TOK_NORM_BERT: {
        tok_buf a = {0}, b = {0};
        bool ok = true;
        /* clean text + chinese chars */
        for (i = 0; ok && i < n;) {
            int k = tok_utf8_dec(s + i, n - i, &cp);
            i += (size_t)k;
            if (nm->clean_text) {
                if (cp == 0 || cp == 0xFFFD ||
                    (cp != '\t' && cp != '\n' && cp != '\r' && tok_uni_is_control(cp)))
                    continue;
                if (cp == '\t' || cp == '\n' || cp == '\r' || tok_uni_is_whitespace(cp)) cp = ' ';
            }
            if (nm->chinese_chars && tok_uni_is_cjk(cp)) {
                ok = tok_buf_addc(&a, ' ') && tok_buf_add_cp(&a, cp) && tok_buf_addc(&a, ' ');
            } else
                ok = tok_buf_add_cp(&a, cp);
        }
        if (ok && nm->strip_accents) {
            ok = norm_unicode(a.p ? a.p : "", a.len, UTF8PROC_DECOMPOSE, &b);
            a.len = 0;
            for (i = 0; ok && i < b.len;) {
                int k = tok_utf8_dec(b.p + i, b.len - i, &cp);
                if (!tok_uni_is_mark_nonspacing(cp)) ok = tok_buf_add(&a, b.p + i, (size_t)k);
                i += (size_t)k;
            }
        }
        if (ok && nm->lowercase) {
            tok_norm lc = {.type = TOK_NORM_LOWERCASE};
            ok = norm_one(tok, &lc, a.p ? a.p : "", a.len, out);
        } else if (ok)
            ok = tok_buf_add(out, a.p ? a.p : "", a.len);
        tok_buf_free(&a);
        tok_buf_free(&b);
        return ok;
    }
    }
    return false;
}

bool tok_normalize(graft_tokenizer *tok, const tok_norm *nm, const char *s, size_t n,
                   tok_buf *out)
{
    out->len = 0;
    if (!tok_buf_reserve(out, n)) return false;
    out->p[0] = 0;
    return norm_one(tok, nm, s, n, out);
}

/* ------------------------------------------------------------ pieces */

void tok_pieces_reset(tok_pieces *p)
{
    p->n = 0;
    p->text.len = 0;
}

bool tok_pieces_push(tok_pieces *p, const char *s, size_t n, bool first)
{
    if (n == 0) return true; /* empty pieces are dropped, as HF does */
    if (!tok_grow((void **)&p->v, &p->cap, p->n + 1, sizeof *p->v)) return false;
    p->v[p->n].off = p->text.len;
    p->v[p->n].len = n;
    p->v[p->n].first = first;
    p->n++;
    return tok_buf_add(&p->text, s, n);
}

void tok_pieces_free(tok_pieces *p)
{
    tok_buf_free(&p->text);
    free(p->v);
    memset(p, 0, sizeof *p);
}

/* Match spans of a char predicate: one span per matching char. */
typedef bool (*tok_char_pred)(uint32_t cp, uint32_t arg);

static bool pred_ws(uint32_t cp, uint32_t arg)
{
    (void)arg;
    return tok_uni_is_whitespace(cp);
}
static bool pred_num(uint32_t cp, uint32_t arg)
{
    (void)arg;
    return tok_uni_is_numeric(cp);
}
static bool pred_punct(uint32_t cp, uint32_t arg)
{
    (void)arg;
    return tok_uni_is_punct(cp);
}
static bool pred_eq(uint32_t cp, uint32_t arg)
{
    return cp == arg;
}

static bool char_spans(const char *s, size_t n, tok_char_pred pred, uint32_t arg, tok_spans *out)
{
    out->n = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = tok_utf8_dec(s + i, n - i, &cp);
        if (pred(cp, arg)) {
            if (!tok_grow((void **)&out->v, &out->cap, out->n + 1, sizeof *out->v)) return false;
            out->v[out->n].a = i;
            out->v[out->n].b = i + (size_t)k;
            out->n++;
        }
        i += (size_t)k;
    }
    return true;
}

/* Splits one piece (s, n) by the match spans in `sp`, following HF's
 * NormalizedString::split, and appends the resulting pieces to out. */
typedef struct seg {
    size_t a, b;
    bool m; /* is match (before behaviour) / remove (after) */
} seg;

static bool split_piece(const char *s, size_t n, bool first, const tok_spans *sp,
                        tok_split_behavior beh, bool invert, tok_pieces *out, seg **segs,
                        size_t *capsegs)
{
    size_t ns = 0, prev = 0;
    /* 1. covering list of (range, is_match) */
    if (!tok_grow((void **)segs, capsegs, sp->n * 2 + 2, sizeof **segs)) return false;
    seg *v = *segs;
    if (n == 0) return true; /* an empty piece yields nothing */
    for (size_t i = 0; i < sp->n; i++) {
        if (sp->v[i].a > prev) v[ns++] = (seg){prev, sp->v[i].a, false};
        v[ns++] = (seg){sp->v[i].a, sp->v[i].b, true};
        prev = sp->v[i].b;
    }
    if (prev < n) v[ns++] = (seg){prev, n, false};
    if (invert)
        for (size_t i = 0; i < ns; i++) v[i].m = !v[i].m;
    /* 2. behaviour */
    size_t k = 0;
    bool pm = false;
    switch (beh) {
    case TOK_SPLIT_REMOVED: k = ns; break;
    case TOK_SPLIT_ISOLATED:
        for (size_t i = 0; i < ns; i++) v[i].m = false;
        k = ns;
        break;
    case TOK_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < ns; i++) {
            bool m = v[i].m;
            if (m == pm && k > 0)
                v[k - 1].b = v[i].b;
            else
                v[k++] = (seg){v[i].a, v[i].b, false};
            pm = m;
        }
        break;
    case TOK_SPLIT_MERGED_PREV:
        for (size_t i = 0; i < ns; i++) {
            bool m = v[i].m;
            if (m && !pm && k > 0)
                v[k - 1].b = v[i].b;
            else
                v[k++] = (seg){v[i].a, v[i].b, false};
            pm = m;
        }
        break;
    case TOK_SPLIT_MERGED_NEXT: {
        /* fold from the right */
        size_t w = ns; /* write position from the end */
        for (size_t ii = ns; ii-- > 0;) {
            bool m = v[ii].m;
            if (m && !pm && w < ns)
                v[w].a = v[ii].a;
            else {
                seg t = {v[ii].a, v[ii].b, false};
                v[--w] = t;
            }
            pm = m;
        }
        memmove(v, v + w, (ns - w) * sizeof *v);
        k = ns - w;
        break;
    }
    }
    for (size_t i = 0; i < k; i++) {
        if (v[i].m || v[i].b == v[i].a) continue;
        if (!tok_pieces_push(out, s + v[i].a, v[i].b - v[i].a, first && v[i].a == 0)) return false;
    }
    return true;
}

static void pieces_swap(tok_pieces *a, tok_pieces *b)
{
    tok_pieces t = *a;
    *a = *b;
    *b = t;
}

/* HF's ByteLevel pre-tokenizer regex (GPT-2). */
const char tok_gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef struct split_scratch {
    seg *segs;
    size_t cap;
} split_scratch;

static bool pre_split_all(graft_tokenizer *tok, tok_pieces *in, tok_pieces *out, const tok_regex *re,
                          tok_char_pred pred, uint32_t arg, tok_split_behavior beh, bool invert,
                          split_scratch *sc)
{
    tok_pieces_reset(out);
    for (size_t i = 0; i < in->n; i++) {
        const char *s = in->text.p + in->v[i].off;
        size_t n = in->v[i].len;
        bool ok = re ? tok_regex_find_all(re, s, n, &tok->spans)
                     : char_spans(s, n, pred, arg, &tok->spans);
        if (!ok) return false;
        if (!split_piece(s, n, in->v[i].first, &tok->spans, beh, invert, out, &sc->segs, &sc->cap))
            return false;
    }
    pieces_swap(in, out);
    return true;
}

static bool pre_one(graft_tokenizer *tok, const tok_pre *pre, tok_pieces *in, tok_pieces *tmp,
                    split_scratch *sc)
{
    switch (pre->type) {
    case TOK_PRE_SEQUENCE:
        for (size_t i = 0; i < pre->nsubs; i++)
            if (!pre_one(tok, pre->subs[i], in, tmp, sc)) return false;
        return true;
    case TOK_PRE_SPLIT:
        return pre_split_all(tok, in, tmp, &pre->pat.re, NULL, 0, pre->behavior,
                             pre->invert, sc);
    case TOK_PRE_BYTE_LEVEL: {
        if (pre->add_prefix_space) {
            tok_pieces_reset(tmp);
            for (size_t i = 0; i < in->n; i++) {
                const char *s = in->text.p + in->v[i].off;
                size_t n = in->v[i].len;
                if (n && s[0] != ' ') {
                    if (!tok_grow((void **)&tmp->v, &tmp->cap, tmp->n + 1, sizeof *tmp->v))
                        return false;
                    tmp->v[tmp->n] = (tok_piece){tmp->text.len, n + 1, in->v[i].first};
                    tmp->n++;
                    if (!tok_buf_addc(&tmp->text, ' ') || !tok_buf_add(&tmp->text, s, n))
                        return false;
                } else if (!tok_pieces_push(tmp, s, n, in->v[i].first))
                    return false;
            }
            pieces_swap(in, tmp);
        }
        if (pre->use_regex &&
            !pre_split_all(tok, in, tmp, &pre->pat.re, NULL, 0, TOK_SPLIT_ISOLATED,
                           false, sc))
            return false;
        /* map bytes to the byte-level alphabet */
        tok_pieces_reset(tmp);
        bl_init();
        for (size_t i = 0; i < in->n; i++) {
            const char *s = in->text.p + in->v[i].off;
            size_t n = in->v[i].len, off = tmp->text.len;
            if (!tok_grow((void **)&tmp->v, &tmp->cap, tmp->n + 1, sizeof *tmp->v)) return false;
            if (!byte_level_map(s, n, &tmp->text)) return false;
            tmp->v[tmp->n] = (tok_piece){off, tmp->text.len - off, in->v[i].first};
            tmp->n++;
        }
        pieces_swap(in, tmp);
        return true;
    }
    case TOK_PRE_METASPACE: {
        char rep[4];
        int rl = tok_utf8_enc(pre->repl, rep);
        tok_pieces_reset(tmp);
        for (size_t i = 0; i < in->n; i++) {
            const char *s = in->text.p + in->v[i].off;
            size_t n = in->v[i].len, off = tmp->text.len;
            bool starts = n >= (size_t)rl && memcmp(s, rep, (size_t)rl) == 0;
            bool first = in->v[i].first;
            if (!tok_grow((void **)&tmp->v, &tmp->cap, tmp->n + 1, sizeof *tmp->v)) return false;
            /* replace spaces first; the prepend check sees the replaced text */
            if (!starts && n && s[0] == ' ') starts = true;
            if (n && !starts &&
                (pre->scheme == TOK_PREPEND_ALWAYS || (pre->scheme == TOK_PREPEND_FIRST && first)))
                if (!tok_buf_add(&tmp->text, rep, (size_t)rl)) return false;
            for (size_t j = 0; j < n; j++) {
                bool ok = s[j] == ' ' ? tok_buf_add(&tmp->text, rep, (size_t)rl)
                                      : tok_buf_addc(&tmp->text, s[j]);
                if (!ok) return false;
            }
            if (tmp->text.len > off) {
                tmp->v[tmp->n] = (tok_piece){off, tmp->text.len - off, first};
                tmp->n++;
            }
        }
        pieces_swap(in, tmp);
        if (pre->split)
            return pre_split_all(tok, in, tmp, NULL, pred_eq, pre->repl, TOK_SPLIT_MERGED_NEXT,
                                 false, sc);
        return true;
    }
    case TOK_PRE_WHITESPACE:
        return pre_split_all(tok, in, tmp, &pre->pat.re, NULL, 0, TOK_SPLIT_REMOVED,
                             true, sc);
    case TOK_PRE_WHITESPACE_SPLIT:
        return pre_split_all(tok, in, tmp, NULL, pred_ws, 0, TOK_SPLIT_REMOVED, false, sc);
    case TOK_PRE_DIGITS:
        return pre_split_all(tok, in, tmp, NULL, pred_num, 0,
                             pre->individual_digits ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS,
                             false, sc);
    case TOK_PRE_PUNCTUATION:
        return pre_split_all(tok, in, tmp, NULL, pred_punct, 0, pre->behavior, false, sc);
    case TOK_PRE_BERT:
        return pre_split_all(tok, in, tmp, NULL, pred_ws, 0, TOK_SPLIT_REMOVED, false, sc) &&
               pre_split_all(tok, in, tmp, NULL, pred_punct, 0, TOK_SPLIT_ISOLATED, false, sc);
    case TOK_PRE_CHAR_DELIMITER:
        return pre_split_all(tok, in, tmp, NULL, pred_eq, pre->repl, TOK_SPLIT_REMOVED, false, sc);
    }
    return false;
}

bool tok_pretokenize(graft_tokenizer *tok, const tok_pre *pre, tok_pieces *in, tok_pieces *tmp)
{
    split_scratch sc = {0};
    bool ok = pre_one(tok, pre, in, tmp, &sc);
    free(sc.segs);
    return ok;
}
