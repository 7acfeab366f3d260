/* tokenizer/tokenizer.c — public API: load, encode, decode, streaming. */
#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokenizer/tok_internal.h"

void graft_ids_free(graft_ids *ids)
{
    if (!ids) return;
    free(ids->ids);
    ids->ids = NULL;
    ids->len = ids->cap = 0;
}

/* ------------------------------------------------------------ load */

/* The file's bytes: mapped (no copy; the page cache is shared) when it is
 * a regular non-empty file, else read into a buffer. */
typedef struct tok_file {
    char *p;
    size_t len;
    bool mapped;
} tok_file;

static void file_release(tok_file *f)
{
    if (f->mapped) munmap(f->p, f->len);
    else free(f->p);
    f->p = NULL;
}

static graft_status read_file(const char *path, tok_file *out, graft_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    out->p = NULL;
    out->len = 0;
    out->mapped = false;
    if (fd < 0) return tok_err(err, GRAFT_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
        (unsigned long long)sb.st_size < (unsigned long long)SIZE_MAX) {
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (p != MAP_FAILED) {
            close(fd);
            out->p = p;
            out->len = (size_t)sb.st_size;
            out->mapped = true;
            return GRAFT_OK;
        }
        cap = (size_t)sb.st_size + 1; /* read it in one go */
    }
    for (;;) {
        if (n + 1 >= cap || !buf) {
            size_t nc = !buf && cap ? cap : cap ? cap * 2 : 1 << 20;
            char *p = realloc(buf, nc);
            if (!p) {
                free(buf);
                close(fd);
                return tok_err(err, GRAFT_ENOMEM, "%s: out of memory", path);
            }
            buf = p;
            cap = nc;
        }
        ssize_t k = read(fd, buf + n, cap - n - 1);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return tok_err(err, GRAFT_EIO, "%s: read error: %s", path, strerror(e));
        }
        if (k == 0) break;
        n += (size_t)k;
    }
    close(fd);
    buf[n] = 0;
    out->p = buf;
    out->len = n;
    return GRAFT_OK;
}

static bool matcher_add(tok_matcher *m, const char *s, size_t n, int32_t idx)
{
    if (!m->trie.val && !tok_trie_init(&m->trie)) return false;
    if (n == 0) return true;
    if (!tok_trie_insert(&m->trie, s, n, idx)) return false;
    m->count++;
    return true;
}

static graft_status finish_load(graft_tokenizer *tok, graft_error *err)
{
    size_t vs = tok->model.nvocab;
    for (size_t i = 0; i < tok->nadded; i++)
        if ((size_t)tok->added[i].id + 1 > vs) vs = (size_t)tok->added[i].id + 1;
    tok->vocab_size = vs;
    tok->added_by_id = malloc((vs + 1) * sizeof *tok->added_by_id);
    if (!tok->added_by_id) return tok_err(err, GRAFT_ENOMEM, "out of memory");
    tok->special_by_id = calloc(vs + 1, 1);
    if (!tok->special_by_id) goto oom;
    for (size_t i = 0; i < vs; i++) tok->added_by_id[i] = -1;
    for (size_t i = 0; i < tok->nadded; i++) {
        tok_added *a = &tok->added[i];
        tok->added_by_id[a->id] = (int32_t)i;
        if (!tok_smap_put(&tok->added_map, a->content, a->len, (int32_t)i)) goto oom;
        if (!(a->dec = tok_strndup(a->content, a->len))) goto oom;
        a->dec_len = a->len;
    }
    /* skip_special works on token text, as HF's is_special_token does: a
     * model token spelled like a special token is skipped too */
    for (size_t i = 0; i < tok->nadded; i++)
        if (tok->added[i].special) tok->special_by_id[tok->added[i].id] = 1;
    if (tok->added_map.n)
        for (size_t i = 0; i < tok->model.nvocab; i++) {
            if (!tok->model.tokens[i]) continue;
            int32_t k = tok_smap_get(&tok->added_map, tok->model.tokens[i], tok->model.token_len[i]);
            if (k >= 0 && tok->added[k].special) tok->special_by_id[i] = 1;
        }
    /* matchers: special tokens first, then the others (as HF orders them);
     * order only matters for identical patterns */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < tok->nadded; i++) {
            tok_added *a = &tok->added[i];
            if (a->special != (pass == 0)) continue;
            if (!a->normalized) {
                if (!matcher_add(&tok->m_raw, a->content, a->len, (int32_t)i)) goto oom;
            } else if (tok->norm) {
                if (!tok_normalize(tok, tok->norm, a->content, a->len, &tok->s_tmp)) goto oom;
                if (!matcher_add(&tok->m_norm, tok->s_tmp.p, tok->s_tmp.len, (int32_t)i)) goto oom;
                /* HF decodes a normalized added token as its normalized form */
                free(a->dec);
                if (!(a->dec = tok_strndup(tok->s_tmp.p, tok->s_tmp.len))) goto oom;
                a->dec_len = tok->s_tmp.len;
            } else if (!matcher_add(&tok->m_norm, a->content, a->len, (int32_t)i))
                goto oom;
        }
    return GRAFT_OK;
oom:
    return tok_err(err, GRAFT_ENOMEM, "out of memory");
}

graft_status graft_tokenizer_load_json(const char *json, size_t len, const char *name,
                                       graft_tokenizer **out, graft_error *err)
{
    graft_tokenizer *tok;
    graft_status st;
    *out = NULL;
    tok = calloc(1, sizeof *tok);
    if (!tok) return tok_err(err, GRAFT_ENOMEM, "out of memory");
    tok->name = tok_strndup(name ? name : "<memory>", strlen(name ? name : "<memory>"));
    if (!tok->name) {
        free(tok);
        return tok_err(err, GRAFT_ENOMEM, "out of memory");
    }
    tok->model.unk_id = -1;
    st = tok_load_doc(tok, json, len, err);
    if (st == GRAFT_OK) st = finish_load(tok, err);
    if (st != GRAFT_OK) {
        graft_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return GRAFT_OK;
}

graft_status graft_tokenizer_load(const char *path, graft_tokenizer **out, graft_error *err)
{
    struct stat sb;
    char *file = NULL;
    tok_file fb;
    graft_status st;
    *out = NULL;
    if (!path) return tok_err(err, GRAFT_EINVAL, "no tokenizer path given");
    if (stat(path, &sb) != 0) return tok_err(err, GRAFT_EIO, "%s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        file = malloc(n + 32);
        if (!file) return tok_err(err, GRAFT_ENOMEM, "out of memory");
        snprintf(file, n + 32, "%s%stokenizer.json", path, n && path[n - 1] == '/' ? "" : "/");
        if (stat(file, &sb) != 0) {
            st = tok_err(err, GRAFT_EIO, "%s: directory holds no tokenizer.json", path);
            free(file);
            return st;
        }
    }
    st = read_file(file ? file : path, &fb, err);
    if (st == GRAFT_OK) {
        st = graft_tokenizer_load_json(fb.p, fb.len, file ? file : path, out, err);
        file_release(&fb);
    }
    free(file);
    return st;
}

void graft_tokenizer_free(graft_tokenizer *tok)
{
    if (!tok) return;
    free(tok->name);
    tok_norm_free(tok->norm);
    tok_pre_free(tok->pre);
    tok_model_free(&tok->model);
    tok_post_free(tok->post);
    tok_dec_free(tok->dec);
    for (size_t i = 0; i < tok->nadded; i++) {
        free(tok->added[i].content);
        free(tok->added[i].dec);
    }
    free(tok->special_by_id);
    free(tok->added);
    tok_smap_free(&tok->added_map);
    free(tok->added_by_id);
    tok_trie_free(&tok->m_raw.trie);
    tok_trie_free(&tok->m_norm.trie);
    tok_smap_free(&tok->cache.map);
    free(tok->cache.keys.p);
    free(tok->cache.ids);
    free(tok->cache.ent_off);
    free(tok->cache.ent_n);
    tok_buf_free(&tok->s_in);
    tok_buf_free(&tok->s_norm);
    tok_buf_free(&tok->s_tmp);
    tok_pieces_free(&tok->pa);
    tok_pieces_free(&tok->pb);
    free(tok->spans.v);
    free(tok->syms);
    free(tok->heap);
    free(tok->ug_score);
    free(tok->ug_from);
    free(tok->ug_id);
    free(tok);
}

/* ------------------------------------------------------------ added tokens */

typedef struct tok_seg {
    size_t a, b;
    int32_t added; /* index in tok->added, or -1 for text */
} tok_seg;

typedef struct tok_segs {
    tok_seg *v;
    size_t n, cap;
} tok_segs;

static bool segs_push(tok_segs *s, size_t a, size_t b, int32_t added)
{
    if (!tok_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) return false;
    s->v[s->n++] = (tok_seg){a, b, added};
    return true;
}

static bool is_word_char(uint32_t cp)
{
    return tok_uni_is_word(cp);
}

/* Last char of s[0..end) (end > 0). */
static uint32_t last_cp(const char *s, size_t end)
{
    size_t j = end - 1;
    uint32_t cp;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
    tok_utf8_dec(s + j, end - j, &cp);
    return cp;
}

/* Leftmost-longest search for an added token at or after `from`. */
static bool next_match(const tok_matcher *m, const char *s, size_t n, size_t from, size_t *ms,
                       size_t *me, int32_t *idx)
{
    for (size_t p = from; p < n; p++) {
        int32_t node = 0, best = -1;
        size_t bend = 0;
        for (size_t j = p; j < n; j++) {
            node = tok_trie_child(&m->trie, node, (unsigned char)s[j]);
            if (node < 0) break;
            if (m->trie.val[node] >= 0) {
                best = m->trie.val[node];
                bend = j + 1;
            }
        }
        if (best >= 0) {
            *ms = p;
            *me = bend;
            *idx = best;
            return true;
        }
    }
    return false;
}

/* HF AddedVocabulary::find_matches. */
static bool find_added(const graft_tokenizer *tok, const tok_matcher *m, const char *s, size_t n,
                       tok_segs *out)
{
    size_t start_off = 0, pos = 0, ms, me;
    int32_t idx;
    out->n = 0;
    if (m->count == 0 || n == 0) return n == 0 ? true : segs_push(out, 0, n, -1);
    while (pos < n && next_match(m, s, n, pos, &ms, &me, &idx)) {
        const tok_added *a = &tok->added[idx];
        size_t start = ms, stop = me;
        uint32_t cp;
        pos = me;
        if (a->single_word) {
            bool start_space = start == 0 || !is_word_char(last_cp(s, start));
            bool stop_space = stop == n || (tok_utf8_dec(s + stop, n - stop, &cp), !is_word_char(cp));
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t j = ns - 1;
                while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
                tok_utf8_dec(s + j, ns - j, &cp);
                if (!tok_uni_is_whitespace(cp)) break;
                ns = j;
            }
            start = ns > start_off ? ns : start_off;
        }
        if (a->rstrip)
            while (stop < n) {
                int k = tok_utf8_dec(s + stop, n - stop, &cp);
                if (!tok_uni_is_whitespace(cp)) break;
                stop += (size_t)k;
            }
        if (start_off < start && !segs_push(out, start_off, start, -1)) return false;
        if (!segs_push(out, start, stop, idx)) return false;
        start_off = stop;
    }
    if (start_off != n && start_off < n && !segs_push(out, start_off, n, -1)) return false;
    return true;
}

/* ------------------------------------------------------------ encode */

static graft_status encode_text(graft_tokenizer *tok, const char *s, size_t n, bool first,
                                graft_ids *out, graft_error *err)
{
    tok_pieces *pa = &tok->pa;
    graft_status st;
    tok_pieces_reset(pa);
    if (!tok_pieces_push(pa, s, n, first)) return tok_err(err, GRAFT_ENOMEM, "out of memory");
    if (tok->pre && !tok_pretokenize(tok, tok->pre, pa, &tok->pb))
        return tok_err(err, GRAFT_ENOMEM, "out of memory");
    /* pa may have been swapped with pb: use tok->pa again */
    pa = &tok->pa;
    for (size_t i = 0; i < pa->n; i++) {
        st = tok_model_encode(tok, pa->text.p + pa->v[i].off, pa->v[i].len, out, err);
        if (st != GRAFT_OK) return st;
    }
    return GRAFT_OK;
}

static bool post_apply(const tok_post *p, graft_ids *ids)
{
    switch (p->type) {
    case TOK_POST_SEQUENCE:
        for (size_t i = 0; i < p->nsubs; i++)
            if (!post_apply(p->subs[i], ids)) return false;
        return true;
    case TOK_POST_BYTE_LEVEL: return true;
    case TOK_POST_ROBERTA:
    case TOK_POST_TEMPLATE: {
        graft_ids o = {0};
        bool ok = true;
        if (p->type == TOK_POST_ROBERTA) {
            ok = tok_ids_push(&o, p->cls_id);
            for (size_t k = 0; ok && k < ids->len; k++) ok = tok_ids_push(&o, ids->ids[k]);
            ok = ok && tok_ids_push(&o, p->sep_id);
        } else
            for (size_t i = 0; ok && i < p->nitems; i++) {
                const tok_tmpl_item *it = &p->items[i];
                if (it->special)
                    for (size_t k = 0; ok && k < it->nids; k++) ok = tok_ids_push(&o, it->ids[k]);
                else
                    for (size_t k = 0; ok && k < ids->len; k++) ok = tok_ids_push(&o, ids->ids[k]);
            }
        if (!ok) {
            graft_ids_free(&o);
            return false;
        }
        graft_ids_free(ids);
        *ids = o;
        return true;
    }
    }
    return false;
}

graft_status graft_tokenizer_encode(graft_tokenizer *tok, const char *text, size_t len,
                                    int add_special, graft_ids *out, graft_error *err)
{
    tok_segs s1 = {0}, s2 = {0};
    graft_status st = GRAFT_OK;
    const char *in;
    tok_buf norm = {0};
    out->len = 0;
    if (!text && len) return tok_err(err, GRAFT_EINVAL, "encode: NULL text");
    if (!tok_utf8_sanitize(text ? text : "", len, &tok->s_in)) goto oom;
    in = tok->s_in.p;
    if (!find_added(tok, &tok->m_raw, in, tok->s_in.len, &s1)) goto oom;
    for (size_t i = 0; i < s1.n && st == GRAFT_OK; i++) {
        tok_seg g = s1.v[i];
        if (g.added >= 0) {
            if (!tok_ids_push(out, tok->added[g.added].id)) goto oom;
            continue;
        }
        const char *t = in + g.a;
        size_t tn = g.b - g.a;
        if (tok->norm) {
            if (!tok_normalize(tok, tok->norm, t, tn, &norm)) goto oom;
            t = norm.p;
            tn = norm.len;
        }
        if (!find_added(tok, &tok->m_norm, t, tn, &s2)) goto oom;
        for (size_t j = 0; j < s2.n && st == GRAFT_OK; j++) {
            tok_seg h = s2.v[j];
            if (h.added >= 0) {
                if (!tok_ids_push(out, tok->added[h.added].id)) goto oom;
                continue;
            }
            st = encode_text(tok, t + h.a, h.b - h.a, g.a == 0 && h.a == 0, out, err);
        }
    }
    if (st == GRAFT_OK && add_special && tok->post && !post_apply(tok->post, out)) goto oom;
    free(s1.v);
    free(s2.v);
    tok_buf_free(&norm);
    return st;
oom:
    free(s1.v);
    free(s2.v);
    tok_buf_free(&norm);
    return tok_err(err, GRAFT_ENOMEM, "out of memory");
}

/* ------------------------------------------------------------ vocabulary */

size_t graft_tokenizer_vocab_size(const graft_tokenizer *tok)
{
    return tok->vocab_size;
}

int32_t graft_tokenizer_token_to_id(const graft_tokenizer *tok, const char *token)
{
    size_t n = strlen(token);
    int32_t i = tok_smap_get(&tok->added_map, token, n);
    if (i >= 0) return tok->added[i].id;
    return tok_vocab_get(&tok->model, token, n);
}

const char *graft_tokenizer_id_to_token(const graft_tokenizer *tok, int32_t id)
{
    if (id < 0 || (size_t)id >= tok->vocab_size) return NULL;
    if (tok->added_by_id[id] >= 0) return tok->added[tok->added_by_id[id]].dec;
    if ((size_t)id < tok->model.nvocab) return tok->model.tokens[id];
    return NULL;
}

int graft_tokenizer_is_special(const graft_tokenizer *tok, int32_t id)
{
    if (id < 0 || (size_t)id >= tok->vocab_size) return 0;
    return tok->special_by_id[id];
}

/* ------------------------------------------------------------ decode */

graft_status graft_tokenizer_decode(graft_tokenizer *tok, const int32_t *ids, size_t n,
                                    int skip_special, char **out, size_t *out_len,
                                    graft_error *err)
{
    tok_strs toks = {0};
    tok_buf b = {0};
    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        const char *t;
        size_t tl;
        if (id < 0 || (size_t)id >= tok->vocab_size) continue;
        if (skip_special && tok->special_by_id[id]) continue;
        if (tok->added_by_id[id] >= 0) {
            const tok_added *a = &tok->added[tok->added_by_id[id]];
            t = a->dec;
            tl = a->dec_len;
        } else if ((size_t)id < tok->model.nvocab && tok->model.tokens[id]) {
            t = tok->model.tokens[id];
            tl = tok->model.token_len[id];
        } else
            continue;
        if (!tok_strs_push(&toks, t, tl)) goto oom;
    }
    if (tok->dec) {
        if (!tok_decode_chain(tok, tok->dec, &toks)) goto oom;
        for (size_t i = 0; i < toks.n; i++)
            if (!tok_buf_add(&b, toks.v[i].p, toks.v[i].n)) goto oom;
    } else
        for (size_t i = 0; i < toks.n; i++)
            if ((i && !tok_buf_addc(&b, ' ')) || !tok_buf_add(&b, toks.v[i].p, toks.v[i].n))
                goto oom;
    if (!b.p && !tok_buf_reserve(&b, 0)) goto oom;
    b.p[b.len] = 0;
    tok_strs_free(&toks);
    *out = b.p;
    if (out_len) *out_len = b.len;
    return GRAFT_OK;
oom:
    tok_strs_free(&toks);
    tok_buf_free(&b);
    return tok_err(err, GRAFT_ENOMEM, "out of memory");
}

/* ------------------------------------------------------------ streaming */

struct graft_tokenizer_stream {
    graft_tokenizer *tok;
    int skip_special;
    graft_ids ids;     /* ids since prefix_index's base */
    char *prefix;      /* decode of ids[0..prefix_index) ... as HF's DecodeStream */
    size_t prefix_len;
    size_t prefix_index;
    tok_buf piece;
};

graft_tokenizer_stream *graft_tokenizer_stream_new(graft_tokenizer *tok, int skip_special)
{
    graft_tokenizer_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->tok = tok;
    s->skip_special = skip_special;
    s->prefix = calloc(1, 1);
    if (!s->prefix || !tok_buf_reserve(&s->piece, 0)) {
        graft_tokenizer_stream_free(s);
        return NULL;
    }
    s->piece.p[0] = 0;
    return s;
}

static bool ends_with_fffd(const char *s, size_t n)
{
    return n >= 3 && memcmp(s + n - 3, "\xEF\xBF\xBD", 3) == 0;
}

graft_status graft_tokenizer_stream_step(graft_tokenizer_stream *s, int32_t id,
                                         const char **piece, size_t *piece_len, graft_error *err)
{
    char *str = NULL;
    size_t n = 0;
    graft_status st;
    s->piece.len = 0;
    s->piece.p[0] = 0;
    *piece = s->piece.p;
    if (piece_len) *piece_len = 0;
    if (!tok_ids_push(&s->ids, id)) return tok_err(err, GRAFT_ENOMEM, "out of memory");
    st = graft_tokenizer_decode(s->tok, s->ids.ids, s->ids.len, s->skip_special, &str, &n, err);
    if (st != GRAFT_OK) return st;
    if (n > s->prefix_len && !ends_with_fffd(str, n)) {
        size_t common = s->prefix_len;
        /* A decoder may rewrite earlier text (HF reports an error here);
         * what was emitted stays emitted: continue on a char boundary. */
        if (memcmp(str, s->prefix, s->prefix_len) != 0)
            while (common < n && ((unsigned char)str[common] & 0xC0) == 0x80) common++;
        if (!tok_buf_add(&s->piece, str + common, n - common)) {
            free(str);
            return tok_err(err, GRAFT_ENOMEM, "out of memory");
        }
        /* drop ids before prefix_index; the new prefix is the decode of
         * the ids kept */
        size_t new_prefix_index = s->ids.len - s->prefix_index;
        memmove(s->ids.ids, s->ids.ids + s->prefix_index,
                (s->ids.len - s->prefix_index) * sizeof *s->ids.ids);
        s->ids.len -= s->prefix_index;
        free(s->prefix);
        s->prefix = NULL;
        st = graft_tokenizer_decode(s->tok, s->ids.ids, s->ids.len, s->skip_special, &s->prefix,
                                    &s->prefix_len, err);
        s->prefix_index = new_prefix_index;
        free(str);
        if (st != GRAFT_OK) return st;
        *piece = s->piece.p;
        if (piece_len) *piece_len = s->piece.len;
        return GRAFT_OK;
    }
    free(str);
    return GRAFT_OK;
}

void graft_tokenizer_stream_free(graft_tokenizer_stream *s)
{
    if (!s) return;
    graft_ids_free(&s->ids);
    free(s->prefix);
    tok_buf_free(&s->piece);
    free(s);
}
