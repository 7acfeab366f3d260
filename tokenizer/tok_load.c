/* tokenizer/tok_load.c — tokenizer.json → component trees (tok_json.c).
 *
 * Messages name the file and, for syntax errors, line and column; for
 * semantic errors the JSON path of the component ("pre_tokenizer.
 * pretokenizers[1]"). Unknown component types are GRAFT_EUNSUPPORTED. */
#include <stdarg.h>
#include <string.h>


#include "tokenizer/tok_internal.h"
#include "tokenizer/tok_json.h"

extern const char tok_gpt2_regex[];

#define TOK_MAX_VOCAB (1 << 26)
#define TOK_MAX_DEPTH 32

typedef struct ld_stream ld_stream;
typedef struct ld {
    graft_tokenizer *tok;
    graft_error *err;
    graft_status st;
    ld_stream *stream; /* streamed "vocab" and "merges" */
} ld;

static bool fail(ld *L, graft_status code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool fail(ld *L, graft_status code, const char *path, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    L->st = tok_err(L->err, code, "%s: %s: %s", L->tok->name, path, msg);
    return false;
}

static bool oom(ld *L)
{
    L->st = tok_err(L->err, GRAFT_ENOMEM, "%s: out of memory", L->tok->name);
    return false;
}

static const char *json_kind(const tj_val *j)
{
    switch ((tj_type)j->type) {
    case TJ_OBJECT: return "an object";
    case TJ_STREAMED: return j->u.i == TJ_SV_VOCAB ? "an object" : "an array";
    case TJ_ARRAY: return "an array";
    case TJ_STRING: return "a string";
    case TJ_INT:
    case TJ_REAL: return "a number";
    case TJ_TRUE:
    case TJ_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Optional boolean: absent or null → def. */
static bool get_bool(ld *L, const tj_val *o, const char *key, const char *path, bool def, bool *out)
{
    tj_val *v = tj_get(o, key);
    if (!v || tj_is_null(v)) {
        *out = def;
        return true;
    }
    if (!tj_is_boolean(v))
        return fail(L, GRAFT_EINVAL, path, "\"%s\" must be a boolean, not %s", key, json_kind(v));
    *out = tj_is_true(v);
    return true;
}

/* Optional string: absent or null → *s = NULL unless required. */
static bool get_str(ld *L, const tj_val *o, const char *key, const char *path, bool required,
                    const char **s, size_t *n)
{
    tj_val *v = tj_get(o, key);
    *s = NULL;
    *n = 0;
    if (!v || tj_is_null(v)) {
        if (required) return fail(L, GRAFT_EINVAL, path, "missing string \"%s\"", key);
        return true;
    }
    if (!tj_is_string(v))
        return fail(L, GRAFT_EINVAL, path, "\"%s\" must be a string, not %s", key, json_kind(v));
    *s = tj_str(v);
    *n = tj_len(v);
    return true;
}

static bool get_int(ld *L, const tj_val *o, const char *key, const char *path, long long def,
                    long long lo, long long hi, long long *out)
{
    tj_val *v = tj_get(o, key);
    if (!v || tj_is_null(v)) {
        *out = def;
        return true;
    }
    if (!tj_is_integer(v))
        return fail(L, GRAFT_EINVAL, path, "\"%s\" must be an integer, not %s", key, json_kind(v));
    *out = tj_int(v);
    if (*out < lo || *out > hi)
        return fail(L, GRAFT_EINVAL, path, "\"%s\" = %lld is out of range [%lld, %lld]", key, *out,
                    lo, hi);
    return true;
}

/* A string holding exactly one char. */
static bool get_char(ld *L, const tj_val *o, const char *key, const char *path, uint32_t def,
                     uint32_t *out)
{
    const char *s;
    size_t n;
    if (!get_str(L, o, key, path, false, &s, &n)) return false;
    if (!s) {
        *out = def;
        return true;
    }
    if (n == 0 || (size_t)tok_utf8_len((unsigned char)s[0]) != n)
        return fail(L, GRAFT_EINVAL, path, "\"%s\" must be a single character", key);
    tok_utf8_dec(s, n, out);
    return true;
}

static const char *get_type(ld *L, const tj_val *o, const char *path, const char *what)
{
    tj_val *t;
    if (!tj_is_object(o)) {
        fail(L, GRAFT_EINVAL, path, "%s must be an object or null, not %s", what, json_kind(o));
        return NULL;
    }
    t = tj_get(o, "type");
    if (!t || !tj_is_string(t)) {
        fail(L, GRAFT_EINVAL, path, "%s has no string \"type\"", what);
        return NULL;
    }
    return tj_str(t);
}

/* Pattern {"String": s} or {"Regex": r}. Strings are escaped into a regex,
 * as HF does. */
static bool get_pattern(ld *L, const tj_val *o, const char *path, tok_pattern *p)
{
    tj_val *pat = tj_get(o, "pattern"), *v;
    char where[300];
    graft_status st;
    snprintf(where, sizeof where, "%s: %s.pattern", L->tok->name, path);
    if (!pat || !tj_is_object(pat))
        return fail(L, GRAFT_EINVAL, path, "missing \"pattern\" object ({\"String\": ...} or {\"Regex\": ...})");
    if ((v = tj_get(pat, "Regex")) && tj_is_string(v)) {
        st = tok_regex_init(&p->re, tj_str(v), tj_len(v), where, L->err);
    } else if ((v = tj_get(pat, "String")) && tj_is_string(v)) {
        const char *s = tj_str(v);
        size_t n = tj_len(v);
        tok_buf b = {0};
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
            if (c < 0x80 && !alnum && c != 0 && c != ' ' && !tok_buf_addc(&b, '\\')) {
                tok_buf_free(&b);
                return oom(L);
            }
            if (c == 0) {
                if (!tok_buf_add(&b, "\\x{0}", 5)) {
                    tok_buf_free(&b);
                    return oom(L);
                }
                continue;
            }
            if (!tok_buf_addc(&b, (char)c)) {
                tok_buf_free(&b);
                return oom(L);
            }
        }
        st = tok_regex_init(&p->re, b.p ? b.p : "", b.len, where, L->err);
        tok_buf_free(&b);
    } else
        return fail(L, GRAFT_EINVAL, path, "\"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
    if (st != GRAFT_OK) {
        L->st = st;
        return false;
    }
    return true;
}

static bool get_scheme(ld *L, const tj_val *o, const char *path, tok_prepend_scheme *out)
{
    const char *s;
    size_t n;
    bool aps;
    if (!get_str(L, o, "prepend_scheme", path, false, &s, &n)) return false;
    if (s) {
        if (strcmp(s, "always") == 0) *out = TOK_PREPEND_ALWAYS;
        else if (strcmp(s, "first") == 0) *out = TOK_PREPEND_FIRST;
        else if (strcmp(s, "never") == 0) *out = TOK_PREPEND_NEVER;
        else
            return fail(L, GRAFT_EUNSUPPORTED, path, "unknown prepend_scheme \"%s\" (always, first, never)", s);
        return true;
    }
    if (!get_bool(L, o, "add_prefix_space", path, true, &aps)) return false;
    *out = aps ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
    return true;
}

static bool get_behavior(ld *L, const tj_val *o, const char *path, tok_split_behavior def,
                         tok_split_behavior *out)
{
    const char *s;
    size_t n;
    if (!get_str(L, o, "behavior", path, false, &s, &n)) return false;
    if (!s) {
        *out = def;
        return true;
    }
    if (strcmp(s, "Removed") == 0) *out = TOK_SPLIT_REMOVED;
    else if (strcmp(s, "Isolated") == 0) *out = TOK_SPLIT_ISOLATED;
    else if (strcmp(s, "MergedWithPrevious") == 0) *out = TOK_SPLIT_MERGED_PREV;
    else if (strcmp(s, "MergedWithNext") == 0) *out = TOK_SPLIT_MERGED_NEXT;
    else if (strcmp(s, "Contiguous") == 0) *out = TOK_SPLIT_CONTIGUOUS;
    else
        return fail(L, GRAFT_EUNSUPPORTED, path,
                    "unknown split behavior \"%s\" (Removed, Isolated, MergedWithPrevious, "
                    "MergedWithNext, Contiguous)", s);
    return true;
}

/* Children array of a Sequence. */
static tj_val *get_array(ld *L, const tj_val *o, const char *key, const char *path)
{
    tj_val *a = tj_get(o, key);
    if (!a || !tj_is_array(a)) {
        fail(L, GRAFT_EINVAL, path, "missing array \"%s\"", key);
        return NULL;
    }
    return a;
}

/* ------------------------------------------------------------ normalizers */

/* What every component loader starts with: its "type" (NULL: the error
 * is set), the nesting bound, and a zeroed struct of `size` bytes. */
static void *comp_new(ld *L, const tj_val *o, const char *path, const char *what, int depth, size_t size,
                      const char **type)
{
    *type = get_type(L, o, path, what);
    if (!*type) return NULL;
    if (depth > TOK_MAX_DEPTH) {
        fail(L, GRAFT_EINVAL, path, "components nested too deeply");
        return NULL;
    }
    void *c = calloc(1, size);
    if (!c) oom(L);
    return c;
}

/* A "Sequence" component: the array at KEY loaded element by element with
 * LOAD one level deeper into C->subs / C->nsubs; jumps to fail (the error
 * set) or nomem. */
#define COMP_SEQUENCE(L, o, path, key, depth, LOAD, C)                                \
    do {                                                                              \
        tj_val *a_ = get_array(L, o, key, path);                                      \
        if (!a_) goto fail;                                                           \
        (C)->subs = calloc(tj_size(a_) + 1, sizeof *(C)->subs);                       \
        if (!(C)->subs) goto nomem;                                                   \
        for (size_t i_ = 0; i_ < tj_size(a_); i_++) {                                 \
            char sub_[256];                                                           \
            snprintf(sub_, sizeof sub_, "%s." key "[%zu]", path, i_);                 \
            (C)->subs[i_] = LOAD(L, tj_at(a_, i_), sub_, (depth) + 1);                \
            if (!(C)->subs[i_]) goto fail;                                            \
            (C)->nsubs++;                                                             \
        }                                                                             \
    } while (0)

static tok_norm *load_norm(ld *L, const tj_val *o, const char *path, int depth)
{
    const char *t;
    tok_norm *nm = comp_new(L, o, path, "normalizer", depth, sizeof *nm, &t);
    const char *s;
    size_t n;
    if (!nm) return NULL;
    if (strcmp(t, "Sequence") == 0) {
        nm->type = TOK_NORM_SEQUENCE;
        COMP_SEQUENCE(L, o, path, "normalizers", depth, load_norm, nm);
    } else if (strcmp(t, "NFC") == 0) nm->type = TOK_NORM_NFC;
    else if (strcmp(t, "NFD") == 0) nm->type = TOK_NORM_NFD;
    else if (strcmp(t, "NFKC") == 0) nm->type = TOK_NORM_NFKC;
    else if (strcmp(t, "NFKD") == 0) nm->type = TOK_NORM_NFKD;
    else if (strcmp(t, "Lowercase") == 0) nm->type = TOK_NORM_LOWERCASE;
    else if (strcmp(t, "StripAccents") == 0) nm->type = TOK_NORM_STRIP_ACCENTS;
    else if (strcmp(t, "Nmt") == 0) nm->type = TOK_NORM_NMT;
    else if (strcmp(t, "ByteLevel") == 0) nm->type = TOK_NORM_BYTE_LEVEL;
    else if (strcmp(t, "Replace") == 0) {
        nm->type = TOK_NORM_REPLACE;
        if (!get_pattern(L, o, path, &nm->pat)) goto fail;
        if (!get_str(L, o, "content", path, true, &s, &n)) goto fail;
        if (!(nm->str = tok_strndup(s, n))) goto nomem;
        nm->slen = n;
    } else if (strcmp(t, "Prepend") == 0 || strcmp(t, "Append") == 0) {
        bool pre = t[0] == 'P';
        nm->type = pre ? TOK_NORM_PREPEND : TOK_NORM_APPEND;
        if (!get_str(L, o, pre ? "prepend" : "append", path, true, &s, &n)) goto fail;
        if (!(nm->str = tok_strndup(s, n))) goto nomem;
        nm->slen = n;
    } else if (strcmp(t, "Strip") == 0) {
        nm->type = TOK_NORM_STRIP;
        if (!get_bool(L, o, "strip_left", path, true, &nm->left) ||
            !get_bool(L, o, "strip_right", path, true, &nm->right))
            goto fail;
    } else if (strcmp(t, "BertNormalizer") == 0) {
        tj_val *sa = tj_get(o, "strip_accents");
        nm->type = TOK_NORM_BERT;
        if (!get_bool(L, o, "clean_text", path, true, &nm->clean_text) ||
            !get_bool(L, o, "handle_chinese_chars", path, true, &nm->chinese_chars) ||
            !get_bool(L, o, "lowercase", path, true, &nm->lowercase))
            goto fail;
        if (!sa || tj_is_null(sa)) nm->strip_accents = nm->lowercase;
        else if (!get_bool(L, o, "strip_accents", path, false, &nm->strip_accents)) goto fail;
    } else if (strcmp(t, "Precompiled") == 0) {
        tj_val *cm = tj_get(o, "precompiled_charsmap");
        if (cm && !tj_is_null(cm) && !(tj_is_string(cm) && tj_len(cm) == 0)) {
            fail(L, GRAFT_EUNSUPPORTED, path,
                 "normalizer type \"Precompiled\" with a SentencePiece charsmap is not supported");
            goto fail;
        }
        nm->type = TOK_NORM_SEQUENCE; /* empty map: identity */
    } else {
        fail(L, GRAFT_EUNSUPPORTED, path,
             "unknown normalizer type \"%s\" (supported: Sequence, NFC, NFD, NFKC, NFKD, "
             "Lowercase, Replace, Prepend, Append, Strip, StripAccents, BertNormalizer, Nmt, "
             "ByteLevel)", t);
        goto fail;
    }
    return nm;
nomem:
    oom(L);
fail:
    tok_norm_free(nm);
    return NULL;
}

/* ------------------------------------------------------------ pre-tokenizers */

static tok_pre *load_pre(ld *L, const tj_val *o, const char *path, int depth)
{
    const char *t;
    tok_pre *p = comp_new(L, o, path, "pre-tokenizer", depth, sizeof *p, &t);
    char where[300];
    if (!p) return NULL;
    snprintf(where, sizeof where, "%s: %s", L->tok->name, path);
    if (strcmp(t, "Sequence") == 0) {
        p->type = TOK_PRE_SEQUENCE;
        COMP_SEQUENCE(L, o, path, "pretokenizers", depth, load_pre, p);
    } else if (strcmp(t, "ByteLevel") == 0) {
        p->type = TOK_PRE_BYTE_LEVEL;
        if (!get_bool(L, o, "add_prefix_space", path, true, &p->add_prefix_space) ||
            !get_bool(L, o, "use_regex", path, true, &p->use_regex))
            goto fail;
        if (p->use_regex) {
            if ((L->st = tok_regex_init(&p->pat.re, tok_gpt2_regex, strlen(tok_gpt2_regex), where,
                                        L->err)) != GRAFT_OK)
                goto fail;
            p->has_pat = true;
        }
    } else if (strcmp(t, "Split") == 0) {
        p->type = TOK_PRE_SPLIT;
        if (!get_pattern(L, o, path, &p->pat)) goto fail;
        p->has_pat = true;
        if (!get_behavior(L, o, path, TOK_SPLIT_REMOVED, &p->behavior) ||
            !get_bool(L, o, "invert", path, false, &p->invert))
            goto fail;
    } else if (strcmp(t, "Metaspace") == 0) {
        p->type = TOK_PRE_METASPACE;
        if (!get_char(L, o, "replacement", path, 0x2581, &p->repl) ||
            !get_scheme(L, o, path, &p->scheme) || !get_bool(L, o, "split", path, true, &p->split))
            goto fail;
    } else if (strcmp(t, "Whitespace") == 0) {
        static const char re[] = "\\w+|[^\\w\\s]+";
        p->type = TOK_PRE_WHITESPACE;
        if ((L->st = tok_regex_init(&p->pat.re, re, strlen(re), where, L->err)) != GRAFT_OK) goto fail;
        p->has_pat = true;
    } else if (strcmp(t, "WhitespaceSplit") == 0) p->type = TOK_PRE_WHITESPACE_SPLIT;
    else if (strcmp(t, "BertPreTokenizer") == 0) p->type = TOK_PRE_BERT;
    else if (strcmp(t, "Digits") == 0) {
        p->type = TOK_PRE_DIGITS;
        if (!get_bool(L, o, "individual_digits", path, false, &p->individual_digits)) goto fail;
    } else if (strcmp(t, "Punctuation") == 0) {
        p->type = TOK_PRE_PUNCTUATION;
        if (!get_behavior(L, o, path, TOK_SPLIT_ISOLATED, &p->behavior)) goto fail;
    } else if (strcmp(t, "CharDelimiterSplit") == 0) {
        p->type = TOK_PRE_CHAR_DELIMITER;
        if (!get_char(L, o, "delimiter", path, ' ', &p->repl)) goto fail;
    } else {
        fail(L, GRAFT_EUNSUPPORTED, path,
             "unknown pre-tokenizer type \"%s\" (supported: Sequence, ByteLevel, Split, "
             "Metaspace, Whitespace, WhitespaceSplit, BertPreTokenizer, Digits, Punctuation, "
             "CharDelimiterSplit)", t);
        goto fail;
    }
    return p;
nomem:
    oom(L);
fail:
    tok_pre_free(p);
    return NULL;
}

/* ------------------------------------------------------------ decoders */

static tok_dec *load_dec(ld *L, const tj_val *o, const char *path, int depth)
{
    const char *t;
    tok_dec *d = comp_new(L, o, path, "decoder", depth, sizeof *d, &t);
    const char *s;
    size_t n;
    long long v;
    if (!d) return NULL;
    if (strcmp(t, "Sequence") == 0) {
        d->type = TOK_DEC_SEQUENCE;
        COMP_SEQUENCE(L, o, path, "decoders", depth, load_dec, d);
    } else if (strcmp(t, "ByteLevel") == 0) d->type = TOK_DEC_BYTE_LEVEL;
    else if (strcmp(t, "ByteFallback") == 0) d->type = TOK_DEC_BYTE_FALLBACK;
    else if (strcmp(t, "Fuse") == 0) d->type = TOK_DEC_FUSE;
    else if (strcmp(t, "Replace") == 0) {
        d->type = TOK_DEC_REPLACE;
        if (!get_pattern(L, o, path, &d->pat)) goto fail;
        if (!get_str(L, o, "content", path, true, &s, &n)) goto fail;
        if (!(d->str = tok_strndup(s, n))) goto nomem;
        d->slen = n;
    } else if (strcmp(t, "Strip") == 0) {
        d->type = TOK_DEC_STRIP;
        if (!get_char(L, o, "content", path, ' ', &d->ch)) goto fail;
        if (!get_int(L, o, "start", path, 0, 0, 1 << 30, &v)) goto fail;
        d->start = (size_t)v;
        if (!get_int(L, o, "stop", path, 0, 0, 1 << 30, &v)) goto fail;
        d->stop = (size_t)v;
    } else if (strcmp(t, "Metaspace") == 0) {
        d->type = TOK_DEC_METASPACE;
        if (!get_char(L, o, "replacement", path, 0x2581, &d->ch) || !get_scheme(L, o, path, &d->scheme))
            goto fail;
    } else if (strcmp(t, "WordPiece") == 0) {
        d->type = TOK_DEC_WORDPIECE;
        if (!get_str(L, o, "prefix", path, false, &s, &n)) goto fail;
        if (!s) {
            s = "##";
            n = 2;
        }
        if (!(d->str = tok_strndup(s, n))) goto nomem;
        d->slen = n;
        if (!get_bool(L, o, "cleanup", path, true, &d->cleanup)) goto fail;
    } else if (strcmp(t, "BPEDecoder") == 0) {
        d->type = TOK_DEC_BPE;
        if (!get_str(L, o, "suffix", path, false, &s, &n)) goto fail;
        if (!s) {
            s = "</w>";
            n = 4;
        }
        if (!(d->str = tok_strndup(s, n))) goto nomem;
        d->slen = n;
    } else {
        fail(L, GRAFT_EUNSUPPORTED, path,
             "unknown decoder type \"%s\" (supported: Sequence, ByteLevel, Replace, "
             "ByteFallback, Fuse, Strip, Metaspace, WordPiece, BPEDecoder)", t);
        goto fail;
    }
    return d;
nomem:
    oom(L);
fail:
    tok_dec_free(d);
    return NULL;
}

/* ------------------------------------------------------------ model */

static int32_t model_id(const tok_model *m, const char *s, size_t n)
{
    return tok_vocab_get(m, s, n);
}

/* Records token `id` = s (n bytes) in the pool; pointers are fixed up by
 * vocab_finish (the pool moves while growing). */
static bool vocab_set(ld *L, tok_model *m, const char *s, size_t n, long long id, const char *path)
{
    if (id < 0 || id >= TOK_MAX_VOCAB)
        return fail(L, GRAFT_EINVAL, path, "token id %lld out of range", id);
    if (n > UINT32_MAX / 2 || m->pool.len > UINT32_MAX / 2)
        return fail(L, GRAFT_EINVAL, path, "vocabulary too large");
    if ((size_t)id >= m->nvocab) {
        size_t c1 = m->nvocab, c2 = m->nvocab, c3 = m->nvocab, need = (size_t)id + 1;
        if (!tok_grow((void **)&m->tokens, &c1, need, sizeof *m->tokens) ||
            !tok_grow((void **)&m->token_len, &c2, c1, sizeof *m->token_len) ||
            !tok_grow((void **)&m->token_off, &c3, c1, sizeof *m->token_off))
            return oom(L);
        for (size_t i = m->nvocab; i < c1; i++) {
            m->tokens[i] = NULL;
            m->token_len[i] = 0;
            m->token_off[i] = SIZE_MAX;
        }
        m->nvocab = c1; /* trimmed at the end */
    }
    m->token_off[id] = m->pool.len;
    m->token_len[id] = (uint32_t)n;
    if (!tok_buf_add(&m->pool, s, n)) return oom(L);
    m->pool.len++; /* keep the NUL tok_buf_add wrote */
    return true;
}

static bool vocab_finish(ld *L, tok_model *m)
{
    size_t top = 0;
    if (!m->pool.p && !tok_buf_reserve(&m->pool, 0)) return oom(L);
    for (size_t i = 0; i < m->nvocab; i++) {
        m->tokens[i] = m->token_off[i] == SIZE_MAX ? NULL : m->pool.p + m->token_off[i];
        if (m->tokens[i]) top = i + 1;
    }
    m->nvocab = top;
    free(m->token_off);
    m->token_off = NULL;
    if (!tok_vocab_build(m)) return oom(L);
    for (int b = 0; b < 256; b++) {
        char nm[8];
        snprintf(nm, sizeof nm, "<0x%02X>", b);
        m->byte_ids[b] = model_id(m, nm, 6);
    }
    return true;
}

/* ------------------------------------------------------------ streamed members
 *
 * "model" → "vocab" (object) and → "merges" (array) are streamed by the
 * JSON reader (tok_json.h): their elements land here, keys straight in
 * the pool the model will own, merges in one flat buffer; no document is
 * built for them. Checks that need the rest of the model are made later,
 * in file order, so that messages are those of a document walk: the
 * first bad element is remembered and reported when its turn comes. */

typedef struct vent {
    uint32_t off, len; /* key in the pool */
    long long id;
} vent;

typedef struct mg {
    uint32_t off, al, bl; /* a = mbuf[off .. +al), b follows it */
    uint32_t skip, ha, hb, hn, nid;
    uint64_t key;
} mg;

typedef struct ld_stream {
    tok_buf vpool;
    vent *ve;
    size_t nve, capve, vbad; /* first element that fails (SIZE_MAX: none) */
    bool vbad_int;           /* ... because its id is not an integer */
    char vbad_key[65];
    bool have_vocab;
    tok_buf mbuf;
    mg *mv;
    size_t nmv, capmv, mbad;
    char mbad_msg[200];
} ld_stream;

static void stream_reset(ld_stream *S, int which)
{
    if (which == TJ_SV_VOCAB) {
        tok_buf_free(&S->vpool);
        free(S->ve);
        S->ve = NULL;
        S->nve = S->capve = 0;
        S->vbad = SIZE_MAX;
        S->vbad_int = false;
        S->have_vocab = true;
    } else {
        tok_buf_free(&S->mbuf);
        free(S->mv);
        S->mv = NULL;
        S->nmv = S->capmv = 0;
        S->mbad = SIZE_MAX;
    }
}

static bool stream_begin(void *ctx, int which)
{
    stream_reset(ctx, which);
    return true;
}

static bool stream_elem(void *ctx, int which, size_t i, const tj_val *k, const tj_val *v)
{
    ld_stream *S = ctx;
    if (which == TJ_SV_VOCAB) {
        if (S->vbad != SIZE_MAX) return true; /* the load fails there: ignore the rest */
        if (!tj_is_integer(v) || k->n > UINT32_MAX / 2 || S->vpool.len > UINT32_MAX / 2) {
            size_t n = k->n < 64 ? k->n : 64;
            S->vbad = i;
            S->vbad_int = !tj_is_integer(v);
            memcpy(S->vbad_key, k->u.s, n);
            S->vbad_key[n] = 0;
            if (S->vbad_int) return true;
        }
        if (!tok_grow((void **)&S->ve, &S->capve, S->nve + 1, sizeof *S->ve)) return false;
        S->ve[S->nve++] = (vent){(uint32_t)S->vpool.len, (uint32_t)k->n, v->u.i};
        if (S->vbad != SIZE_MAX) return true;
        if (!tok_buf_add(&S->vpool, k->u.s, k->n)) return false;
        S->vpool.len++; /* keep the NUL tok_buf_add wrote */
        return true;
    }
    const char *a, *b;
    size_t al, bl;
    if (S->mbad != SIZE_MAX) return true;
    if (tj_is_string(v)) {
        const char *str = tj_str(v), *sp = memchr(str, ' ', tj_len(v));
        size_t sl = tj_len(v);
        if (!sp || memchr(sp + 1, ' ', sl - (size_t)(sp + 1 - str))) {
            S->mbad = i;
            snprintf(S->mbad_msg, sizeof S->mbad_msg,
                     "merges[%zu] \"%.*s\" is not two tokens separated by one space", i,
                     (int)(sl < 64 ? sl : 64), str);
            return true;
        }
        a = str;
        al = (size_t)(sp - str);
        b = sp + 1;
        bl = sl - al - 1;
    } else if (tj_is_array(v) && tj_size(v) == 2 && tj_is_string(tj_at(v, 0)) &&
               tj_is_string(tj_at(v, 1))) {
        a = tj_str(tj_at(v, 0));
        al = tj_len(tj_at(v, 0));
        b = tj_str(tj_at(v, 1));
        bl = tj_len(tj_at(v, 1));
    } else {
        S->mbad = i;
        snprintf(S->mbad_msg, sizeof S->mbad_msg, "merges[%zu] must be \"a b\" or [\"a\", \"b\"]", i);
        return true;
    }
    if (S->mbuf.len + al + bl >= UINT32_MAX) {
        S->mbad = i;
        snprintf(S->mbad_msg, sizeof S->mbad_msg, "merges too large");
        return true;
    }
    if (!tok_grow((void **)&S->mv, &S->capmv, S->nmv + 1, sizeof *S->mv)) return false;
    S->mv[S->nmv++] = (mg){.off = (uint32_t)S->mbuf.len, .al = (uint32_t)al, .bl = (uint32_t)bl};
    return tok_buf_add(&S->mbuf, a, al) && tok_buf_add(&S->mbuf, b, bl);
}

static void stream_free(ld_stream *S)
{
    stream_reset(S, TJ_SV_VOCAB);
    stream_reset(S, TJ_SV_MERGES);
}

static bool load_vocab_obj(ld *L, tok_model *m, const tj_val *v, const char *path)
{
    ld_stream *S = L->stream;
    if (v && tj_is_object(v)) { /* not streamed (no hooks): same path */
        stream_reset(S, TJ_SV_VOCAB);
        for (size_t i = 0; i < v->n; i++)
            if (!stream_elem(S, TJ_SV_VOCAB, i, &v->u.items[2 * i], &v->u.items[2 * i + 1]))
                return oom(L);
    } else if (!v || v->type != TJ_STREAMED || v->u.i != TJ_SV_VOCAB || !S->have_vocab)
        return fail(L, GRAFT_EINVAL, path, "\"vocab\" must be an object");
    /* size the arrays once, then take the pool over */
    long long top = -1;
    for (size_t i = 0; i < S->nve; i++)
        if (S->ve[i].id > top && S->ve[i].id < TOK_MAX_VOCAB) top = S->ve[i].id;
    if (top >= 0) {
        size_t need = (size_t)top + 1;
        m->tokens = malloc(need * sizeof *m->tokens);
        m->token_len = calloc(need, sizeof *m->token_len);
        m->token_off = malloc(need * sizeof *m->token_off);
        if (!m->tokens || !m->token_len || !m->token_off) return oom(L);
        for (size_t i = 0; i < need; i++) m->token_off[i] = SIZE_MAX;
        m->nvocab = need; /* trimmed at the end */
    }
    for (size_t i = 0; i < S->nve || i == S->vbad; i++) {
        if (i == S->vbad && S->vbad_int)
            return fail(L, GRAFT_EINVAL, path, "vocab entry \"%.64s\" must map to an integer id",
                        S->vbad_key);
        long long id = S->ve[i].id;
        if (id < 0 || id >= TOK_MAX_VOCAB)
            return fail(L, GRAFT_EINVAL, path, "token id %lld out of range", id);
        if (i == S->vbad) return fail(L, GRAFT_EINVAL, path, "vocabulary too large");
        m->token_off[id] = S->ve[i].off;
        m->token_len[id] = S->ve[i].len;
    }
    tok_buf_free(&m->pool);
    m->pool = S->vpool;
    S->vpool = (tok_buf){0};
    return vocab_finish(L, m);
}

static bool load_bpe(ld *L, tok_model *m, const tj_val *o, const char *path)
{
    const char *s;
    size_t n;
    tj_val *merges;
    bool b;
    m->type = TOK_MODEL_BPE;
    if (!load_vocab_obj(L, m, tj_get(o, "vocab"), path)) return false;
    if (!get_str(L, o, "unk_token", path, false, &s, &n)) return false;
    if (s) {
        if (!(m->unk_token = tok_strndup(s, n))) return oom(L);
        m->unk_id = model_id(m, s, n);
    }
    if (!get_str(L, o, "continuing_subword_prefix", path, false, &s, &n)) return false;
    if (s) {
        if (!(m->cont_prefix = tok_strndup(s, n))) return oom(L);
        m->cont_prefix_len = n;
    }
    if (!get_str(L, o, "end_of_word_suffix", path, false, &s, &n)) return false;
    if (s) {
        if (!(m->eow_suffix = tok_strndup(s, n))) return oom(L);
        m->eow_suffix_len = n;
    }
    if (!get_bool(L, o, "fuse_unk", path, false, &m->fuse_unk) ||
        !get_bool(L, o, "byte_fallback", path, false, &m->byte_fallback) ||
        !get_bool(L, o, "ignore_merges", path, false, &m->ignore_merges))
        return false;
    tj_val *drop = tj_get(o, "dropout");
    if (drop && !tj_is_null(drop) && !tj_is_number(drop))
        return fail(L, GRAFT_EINVAL, path, "\"dropout\" must be a number or null");
    (void)b;
    merges = tj_get(o, "merges");
    if (!merges || tj_is_null(merges)) return true;
    ld_stream *S = L->stream;
    if (tj_is_array(merges)) { /* not streamed (no hooks): same path */
        stream_reset(S, TJ_SV_MERGES);
        for (size_t i = 0; i < merges->n; i++)
            if (!stream_elem(S, TJ_SV_MERGES, i, NULL, &merges->u.items[i])) return oom(L);
    } else if (merges->type != TJ_STREAMED || merges->u.i != TJ_SV_MERGES)
        return fail(L, GRAFT_EINVAL, path, "\"merges\" must be an array");
    if (S->mbad != SIZE_MAX) return fail(L, GRAFT_EINVAL, path, "%s", S->mbad_msg);
    /* Hash every merge (sequential), then look the three tokens up with
     * the slots prefetched a few merges ahead (the lookups are random
     * accesses into a table of megabytes). */
    size_t nm = S->nmv;
    mg *v = S->mv;
    const char *mb = S->mbuf.p;
    for (size_t i = 0; i < nm; i++) {
        mg *g = &v[i];
        const char *ga = mb + g->off, *gb = ga + g->al;
        if (m->cont_prefix && g->bl >= m->cont_prefix_len &&
            memcmp(gb, m->cont_prefix, m->cont_prefix_len) == 0)
            g->skip = (uint32_t)m->cont_prefix_len;
        g->ha = (uint32_t)tok_hash(ga, g->al);
        g->hb = (uint32_t)tok_hash(gb, g->bl);
        g->hn = g->skip ? tok_hash2(ga, g->al, gb + g->skip, g->bl - g->skip)
                        : (uint32_t)tok_hash(ga, g->al + g->bl);
    }
    size_t mask = m->vmap_cap - 1;
    if (!tok_umap_reserve(&m->merges, nm)) {
        return oom(L);
    }
    for (size_t i = 0; i < nm; i++) {
        if (i + 16 < nm) {
            __builtin_prefetch(&m->vmap[v[i + 16].ha & mask]);
            __builtin_prefetch(&m->vmap[v[i + 16].hb & mask]);
            __builtin_prefetch(&m->vmap[v[i + 16].hn & mask]);
        }
        if (i + 8 < nm) { /* the slots are in cache by now: fetch the strings they name */
            const tok_vent *ea = &m->vmap[v[i + 8].ha & mask], *eb = &m->vmap[v[i + 8].hb & mask],
                           *en = &m->vmap[v[i + 8].hn & mask];
            __builtin_prefetch(m->pool.p + ea->off);
            __builtin_prefetch(m->pool.p + eb->off);
            __builtin_prefetch(m->pool.p + en->off);
        }
        mg *g = &v[i];
        const char *ga = mb + g->off, *gb = ga + g->al;
        int32_t ia = tok_vocab_get_h(m, ga, g->al, NULL, 0, g->ha);
        int32_t ib = tok_vocab_get_h(m, gb, g->bl, NULL, 0, g->hb);
        if (ia < 0 || ib < 0) {
            bool bad_a = ia < 0;
            fail(L, GRAFT_EINVAL, path, "merges[%zu]: token \"%.*s\" is not in the vocabulary", i,
                 (int)((bad_a ? g->al : g->bl) > 64 ? 64 : (bad_a ? g->al : g->bl)),
                 bad_a ? ga : gb);
            return false;
        }
        int32_t nid = tok_vocab_get_h(m, ga, g->al, gb + g->skip, g->bl - g->skip, g->hn);
        if (nid < 0) {
            fail(L, GRAFT_EINVAL, path, "merges[%zu]: merged token \"%.*s%.*s\" is not in the vocabulary",
                 i, (int)(g->al > 32 ? 32 : g->al), ga, (int)(g->bl - g->skip > 32 ? 32 : g->bl - g->skip),
                 gb + g->skip);
            return false;
        }
        g->key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
        g->nid = (uint32_t)nid;
    }
    /* in rank order (a repeated pair keeps its last rank, as HF's map) */
    for (size_t i = 0; i < nm; i++) {
        if (i + 16 < nm) tok_umap_prefetch(&m->merges, v[i + 16].key);
        if (!tok_umap_put(&m->merges, v[i].key, ((uint64_t)i << 32) | v[i].nid)) {
            return oom(L);
        }
    }
    return true;
}

static bool load_unigram(ld *L, tok_model *m, const tj_val *o, const char *path)
{
    tj_val *voc = tj_get(o, "vocab");
    long long unk;
    size_t nv;
    m->type = TOK_MODEL_UNIGRAM;
    m->fuse_unk = true;
    if (!voc || !tj_is_array(voc)) return fail(L, GRAFT_EINVAL, path, "\"vocab\" must be an array of [piece, score]");
    nv = tj_size(voc);
    if (nv >= TOK_MAX_VOCAB) return fail(L, GRAFT_EINVAL, path, "vocabulary too large");
    if (!get_int(L, o, "unk_id", path, -1, -1, (long long)nv - 1, &unk)) return false;
    if (!get_bool(L, o, "byte_fallback", path, false, &m->byte_fallback)) return false;
    m->scores = calloc(nv + 1, sizeof *m->scores);
    if (!m->scores) return oom(L);
    if (!tok_trie_init(&m->trie)) return oom(L);
    m->min_score = nv ? 1e300 : 0;
    for (size_t i = 0; i < nv; i++) {
        tj_val *e = tj_at(voc, i);
        if (!tj_is_array(e) || tj_size(e) != 2 || !tj_is_string(tj_at(e, 0)) ||
            !tj_is_number(tj_at(e, 1)))
            return fail(L, GRAFT_EINVAL, path, "vocab[%zu] must be [piece, score]", i);
        const char *s = tj_str(tj_at(e, 0));
        size_t n = tj_len(tj_at(e, 0));
        if (!vocab_set(L, m, s, n, (long long)i, path)) return false;
        m->scores[i] = tj_num(tj_at(e, 1));
        if (m->scores[i] < m->min_score) m->min_score = m->scores[i];
    }
    if (!vocab_finish(L, m)) return false;
    /* trie values are the id the vocabulary map resolves (last duplicate) */
    for (size_t i = 0; i < m->nvocab; i++) {
        if (!m->tokens[i] || !m->token_len[i]) continue;
        int32_t id = model_id(m, m->tokens[i], m->token_len[i]);
        if (!tok_trie_insert(&m->trie, m->tokens[i], m->token_len[i], id)) return oom(L);
    }
    m->unk_id = (int32_t)unk;
    if (unk >= 0 && !(m->unk_token = tok_strndup(m->tokens[unk], m->token_len[unk]))) return oom(L);
    return true;
}

static bool load_model(ld *L, const tj_val *o)
{
    tok_model *m = &L->tok->model;
    const char *path = "model", *t, *s;
    size_t n;
    tj_val *tt;
    m->unk_id = -1;
    if (!o || !tj_is_object(o)) return fail(L, GRAFT_EINVAL, path, "missing \"model\" object");
    tt = tj_get(o, "type");
    if (tt && !tj_is_string(tt)) return fail(L, GRAFT_EINVAL, path, "\"type\" must be a string");
    if (tt) t = tj_str(tt);
    else if (tj_get(o, "merges")) t = "BPE";
    else if (tj_is_array(tj_get(o, "vocab"))) t = "Unigram";
    else if (tj_get(o, "max_input_chars_per_word")) t = "WordPiece";
    else t = "WordLevel";
    if (strcmp(t, "BPE") == 0) return load_bpe(L, m, o, path);
    if (strcmp(t, "Unigram") == 0) return load_unigram(L, m, o, path);
    if (strcmp(t, "WordPiece") == 0 || strcmp(t, "WordLevel") == 0) {
        bool wp = t[4] == 'P';
        long long mx;
        m->type = wp ? TOK_MODEL_WORDPIECE : TOK_MODEL_WORDLEVEL;
        if (!load_vocab_obj(L, m, tj_get(o, "vocab"), path)) return false;
        if (!get_str(L, o, "unk_token", path, false, &s, &n)) return false;
        if (!s) {
            s = "[UNK]";
            n = 5;
        }
        if (!(m->unk_token = tok_strndup(s, n))) return oom(L);
        m->unk_id = model_id(m, s, n);
        if (wp) {
            if (!get_str(L, o, "continuing_subword_prefix", path, false, &s, &n)) return false;
            if (!s) {
                s = "##";
                n = 2;
            }
            if (!(m->cont_prefix = tok_strndup(s, n))) return oom(L);
            m->cont_prefix_len = n;
            if (!get_int(L, o, "max_input_chars_per_word", path, 100, 0, 1LL << 40, &mx)) return false;
            m->max_input_chars = (size_t)mx;
        }
        return true;
    }
    return fail(L, GRAFT_EUNSUPPORTED, path,
                "unknown model type \"%s\" (supported: BPE, WordPiece, WordLevel, Unigram)", t);
}

/* ------------------------------------------------------------ post-processors */

static bool tmpl_special_ids(ld *L, const tj_val *specials, const char *name, const char *path,
                             tok_tmpl_item *it)
{
    tj_val *sp = specials ? tj_get(specials, name) : NULL, *ids;
    if (!sp || !tj_is_object(sp) || !(ids = tj_get(sp, "ids")) || !tj_is_array(ids))
        return fail(L, GRAFT_EINVAL, path, "template special token \"%.64s\" has no entry with \"ids\" in special_tokens", name);
    it->nids = tj_size(ids);
    it->ids = calloc(it->nids + 1, sizeof *it->ids);
    if (!it->ids) return oom(L);
    for (size_t i = 0; i < it->nids; i++) {
        tj_val *v = tj_at(ids, i);
        if (!tj_is_integer(v) || tj_int(v) < 0 || tj_int(v) >= TOK_MAX_VOCAB)
            return fail(L, GRAFT_EINVAL, path, "special token \"%.64s\": bad id", name);
        it->ids[i] = (int32_t)tj_int(v);
    }
    return true;
}

static bool get_tok_pair(ld *L, const tj_val *o, const char *key, const char *path, int32_t *id)
{
    tj_val *v = tj_get(o, key);
    if (!v || !tj_is_array(v) || tj_size(v) != 2 || !tj_is_integer(tj_at(v, 1)))
        return fail(L, GRAFT_EINVAL, path, "\"%s\" must be [token, id]", key);
    long long x = tj_int(tj_at(v, 1));
    if (x < 0 || x >= TOK_MAX_VOCAB) return fail(L, GRAFT_EINVAL, path, "\"%s\": bad id", key);
    *id = (int32_t)x;
    return true;
}

static tok_post *load_post(ld *L, const tj_val *o, const char *path, int depth)
{
    const char *t;
    tok_post *p = comp_new(L, o, path, "post-processor", depth, sizeof *p, &t);
    if (!p) return NULL;
    if (strcmp(t, "Sequence") == 0) {
        p->type = TOK_POST_SEQUENCE;
        COMP_SEQUENCE(L, o, path, "processors", depth, load_post, p);
    } else if (strcmp(t, "ByteLevel") == 0) p->type = TOK_POST_BYTE_LEVEL;
    else if (strcmp(t, "RobertaProcessing") == 0 || strcmp(t, "BertProcessing") == 0) {
        p->type = TOK_POST_ROBERTA;
        if (!get_tok_pair(L, o, "cls", path, &p->cls_id) || !get_tok_pair(L, o, "sep", path, &p->sep_id))
            goto fail;
    } else if (strcmp(t, "TemplateProcessing") == 0) {
        tj_val *single = tj_get(o, "single"), *specials = tj_get(o, "special_tokens");
        p->type = TOK_POST_TEMPLATE;
        if (!single || !tj_is_array(single)) {
            fail(L, GRAFT_EINVAL, path, "missing array \"single\"");
            goto fail;
        }
        p->items = calloc(tj_size(single) + 1, sizeof *p->items);
        if (!p->items) goto nomem;
        for (size_t i = 0; i < tj_size(single); i++) {
            tj_val *e = tj_at(single, i), *x;
            char sub[256];
            snprintf(sub, sizeof sub, "%s.single[%zu]", path, i);
            p->nitems++;
            if (tj_is_object(e) && (x = tj_get(e, "SpecialToken")) && tj_is_object(x)) {
                tj_val *idv = tj_get(x, "id");
                if (!idv || !tj_is_string(idv)) {
                    fail(L, GRAFT_EINVAL, sub, "SpecialToken needs a string \"id\"");
                    goto fail;
                }
                p->items[i].special = true;
                if (!tmpl_special_ids(L, specials, tj_str(idv), sub, &p->items[i])) goto fail;
            } else if (tj_is_object(e) && (x = tj_get(e, "Sequence")) && tj_is_object(x)) {
                p->items[i].special = false;
            } else {
                fail(L, GRAFT_EINVAL, sub, "template items are {\"SpecialToken\": ...} or {\"Sequence\": ...}");
                goto fail;
            }
        }
    } else {
        fail(L, GRAFT_EUNSUPPORTED, path,
             "unknown post-processor type \"%s\" (supported: Sequence, TemplateProcessing, "
             "ByteLevel, RobertaProcessing, BertProcessing)", t);
        goto fail;
    }
    return p;
nomem:
    oom(L);
fail:
    tok_post_free(p);
    return NULL;
}

/* ------------------------------------------------------------ added tokens */

static bool load_added(ld *L, const tj_val *a)
{
    graft_tokenizer *tok = L->tok;
    if (!a || tj_is_null(a)) return true;
    if (!tj_is_array(a)) return fail(L, GRAFT_EINVAL, "added_tokens", "must be an array");
    tok->added = calloc(tj_size(a) + 1, sizeof *tok->added);
    if (!tok->added) return oom(L);
    for (size_t i = 0; i < tj_size(a); i++) {
        tj_val *e = tj_at(a, i);
        char path[64];
        const char *s;
        size_t n;
        long long id;
        tok_added *t = &tok->added[tok->nadded];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        if (!tj_is_object(e)) return fail(L, GRAFT_EINVAL, path, "must be an object");
        if (!get_str(L, e, "content", path, true, &s, &n)) return false;
        if (!get_int(L, e, "id", path, -1, 0, TOK_MAX_VOCAB - 1, &id)) return false;
        if (id < 0) return fail(L, GRAFT_EINVAL, path, "missing integer \"id\"");
        if (!get_bool(L, e, "special", path, false, &t->special) ||
            !get_bool(L, e, "normalized", path, !t->special, &t->normalized) ||
            !get_bool(L, e, "lstrip", path, false, &t->lstrip) ||
            !get_bool(L, e, "rstrip", path, false, &t->rstrip) ||
            !get_bool(L, e, "single_word", path, false, &t->single_word))
            return false;
        if (n == 0) continue; /* HF ignores empty added tokens */
        if (!(t->content = tok_strndup(s, n))) return oom(L);
        t->len = n;
        int32_t mid = tok_vocab_get(&tok->model, s, n);
        t->id = mid >= 0 ? mid : (int32_t)id;
        tok->nadded++;
    }
    return true;
}

/* ------------------------------------------------------------ document */

graft_status tok_load_doc(graft_tokenizer *tok, const char *json, size_t len, graft_error *err)
{
    tj_doc doc;
    tj_val *root, *v;
    ld_stream S = {.vbad = SIZE_MAX, .mbad = SIZE_MAX};
    ld L = {tok, err, GRAFT_OK, &S};
    tj_hooks hooks = {&S, stream_begin, stream_elem};
    if (!tj_parse(json, len, &doc, &hooks)) {
        graft_status st = tok_err(err, GRAFT_EINVAL, "%s: line %d, column %d: malformed JSON: %s",
                                  tok->name, doc.err_line, doc.err_col, doc.err_text);
        tj_doc_free(&doc);
        stream_free(&S);
        return st;
    }
    root = doc.root;
    if (!tj_is_object(root)) {
        tj_doc_free(&doc);
        stream_free(&S);
        return tok_err(err, GRAFT_EINVAL, "%s: line 1, column 1: the document is not a JSON object",
                       tok->name);
    }
    if (!load_model(&L, tj_get(root, "model"))) goto fail;
    v = tj_get(root, "normalizer");
    if (v && !tj_is_null(v) && !(tok->norm = load_norm(&L, v, "normalizer", 0))) goto fail;
    v = tj_get(root, "pre_tokenizer");
    if (v && !tj_is_null(v) && !(tok->pre = load_pre(&L, v, "pre_tokenizer", 0))) goto fail;
    v = tj_get(root, "post_processor");
    if (v && !tj_is_null(v) && !(tok->post = load_post(&L, v, "post_processor", 0))) goto fail;
    v = tj_get(root, "decoder");
    if (v && !tj_is_null(v) && !(tok->dec = load_dec(&L, v, "decoder", 0))) goto fail;
    if (!load_added(&L, tj_get(root, "added_tokens"))) goto fail;
    tj_doc_free(&doc);
    stream_free(&S);
    return GRAFT_OK;
fail:
    tj_doc_free(&doc);
    stream_free(&S);
    return L.st != GRAFT_OK ? L.st : tok_err(err, GRAFT_EINVAL, "%s: invalid tokenizer", tok->name);
}

/* ------------------------------------------------------------ frees */

void tok_norm_free(tok_norm *n)
{
    if (!n) return;
    for (size_t i = 0; i < n->nsubs; i++) tok_norm_free(n->subs[i]);
    free(n->subs);
    tok_regex_free(&n->pat.re);
    free(n->str);
    free(n);
}

void tok_pre_free(tok_pre *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->nsubs; i++) tok_pre_free(p->subs[i]);
    free(p->subs);
    tok_regex_free(&p->pat.re);
    free(p);
}

void tok_post_free(tok_post *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->nsubs; i++) tok_post_free(p->subs[i]);
    free(p->subs);
    if (p->items)
        for (size_t i = 0; i < p->nitems; i++) free(p->items[i].ids);
    free(p->items);
    free(p);
}

void tok_dec_free(tok_dec *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->nsubs; i++) tok_dec_free(d->subs[i]);
    free(d->subs);
    tok_regex_free(&d->pat.re);
    free(d->str);
    free(d);
}
