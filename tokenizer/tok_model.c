/* tokenizer/tok_model.c — models: BPE (rank-ordered merges through a binary
 * heap, per-piece cache), WordPiece, WordLevel, Unigram (Viterbi). */
#include <string.h>

#include "tokenizer/tok_internal.h"

bool tok_ids_push(graft_ids *ids, int32_t id)
{
    if (!tok_grow((void **)&ids->ids, &ids->cap, ids->len + 1, sizeof *ids->ids)) return false;
    ids->ids[ids->len++] = id;
    return true;
}

/* ------------------------------------------------------------ cache */

#define TOK_CACHE_MAX_ENT 65536
#define TOK_CACHE_KEY_BYTES (4u << 20)
#define TOK_CACHE_MAX_KEY 256

static void cache_clear(tok_cache *c)
{
    tok_smap_free(&c->map);
    c->keys.len = 0;
    c->nids = 0;
    c->nent = 0;
}

static bool cache_get(const tok_cache *c, const char *s, size_t n, graft_ids *out)
{
    int32_t e = tok_smap_get(&c->map, s, n);
    if (e < 0) return false;
    uint32_t off = c->ent_off[e], k = c->ent_n[e];
    if (!tok_grow((void **)&out->ids, &out->cap, out->len + k, sizeof *out->ids)) return false;
    if (k) memcpy(out->ids + out->len, c->ids + off, k * sizeof *c->ids);
    out->len += k;
    return true;
}

static void cache_put(tok_cache *c, const char *s, size_t n, const int32_t *ids, size_t k)
{
    if (n > TOK_CACHE_MAX_KEY || k > TOK_CACHE_MAX_KEY) return;
    if (!c->keys.p) {
        c->keys.p = malloc(TOK_CACHE_KEY_BYTES);
        if (!c->keys.p) return;
        c->keys.cap = TOK_CACHE_KEY_BYTES;
    }
    if (c->nent >= TOK_CACHE_MAX_ENT || c->keys.len + n > c->keys.cap) cache_clear(c);
    if (!tok_grow((void **)&c->ids, &c->capids, c->nids + k, sizeof *c->ids)) return;
    if (!tok_grow((void **)&c->ent_off, &c->capent, c->nent + 1, sizeof *c->ent_off)) return;
    {
        size_t cap2 = c->capent; /* ent_n follows ent_off's capacity */
        uint32_t *p = realloc(c->ent_n, cap2 * sizeof *p);
        if (!p) return;
        c->ent_n = p;
    }
    char *key = c->keys.p + c->keys.len;
    memcpy(key, s, n);
    if (!tok_smap_put(&c->map, key, n, (int32_t)c->nent)) {
        cache_clear(c);
        return;
    }
    c->keys.len += n;
    if (k) memcpy(c->ids + c->nids, ids, k * sizeof *ids); /* ids is NULL when a piece has none */
    c->ent_off[c->nent] = (uint32_t)c->nids;
    c->ent_n[c->nent] = (uint32_t)k;
    c->nids += k;
    c->nent++;
}

/* ------------------------------------------------------------ BPE */

typedef struct tok_sym {
    int32_t id;
    int32_t prev, next;
    uint32_t len; /* 0: merged away */
} tok_sym;

typedef struct tok_heap_ent {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
} tok_heap_ent;

static inline bool heap_less(const tok_heap_ent *a, const tok_heap_ent *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(tok_heap_ent *h, size_t *n, tok_heap_ent e)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static tok_heap_ent heap_pop(tok_heap_ent *h, size_t *n)
{
    tok_heap_ent top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const tok_heap_ent *best = &last;
        if (l < *n && heap_less(&h[l], best)) {
            m = l;
            best = &h[l];
        }
        if (r < *n && heap_less(&h[r], best)) m = r;
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n) h[i] = last;
    return top;
}

static bool merge_lookup(const tok_model *m, int32_t a, int32_t b, uint32_t *rank, int32_t *nid)
{
    uint64_t v;
    if (!tok_umap_get(&m->merges, ((uint64_t)(uint32_t)a << 32) | (uint32_t)b, &v)) return false;
    *rank = (uint32_t)(v >> 32);
    *nid = (int32_t)(uint32_t)v;
    return true;
}

static bool sym_add(graft_tokenizer *tok, size_t *ns, int32_t id, uint32_t len)
{
    if (!tok_grow((void **)&tok->syms, &tok->capsyms, *ns + 1, sizeof *tok->syms)) return false;
    tok_sym *s = &tok->syms[*ns];
    s->id = id;
    s->len = len;
    s->prev = (int32_t)*ns - 1;
    s->next = (int32_t)*ns + 1;
    (*ns)++;
    return true;
}

static graft_status bpe_encode(graft_tokenizer *tok, const char *w, size_t n, graft_ids *out,
                               graft_error *err)
{
    const tok_model *m = &tok->model;
    size_t ns = 0;
    int32_t unk_pending = -1;
    uint32_t unk_len = 0;
    tok_buf *sb = &tok->s_tmp;

    if (m->ignore_merges) {
        int32_t id = tok_vocab_get(m, w, n);
        if (id >= 0) return tok_ids_push(out, id) ? GRAFT_OK : tok_err(err, GRAFT_ENOMEM, "out of memory");
    }
    /* 1. chars → symbols (merge_word) */
    for (size_t i = 0; i < n;) {
        size_t k = (size_t)tok_utf8_len((unsigned char)w[i]);
        bool is_first = i == 0, is_last = i + k >= n;
        const char *s = w + i;
        size_t sl = k;
        if ((!is_first && m->cont_prefix) || (is_last && m->eow_suffix)) {
            sb->len = 0;
            if (!is_first && m->cont_prefix && !tok_buf_add(sb, m->cont_prefix, m->cont_prefix_len))
                goto oom;
            if (!tok_buf_add(sb, s, k)) goto oom;
            if (is_last && m->eow_suffix && !tok_buf_add(sb, m->eow_suffix, m->eow_suffix_len))
                goto oom;
            s = sb->p;
            sl = sb->len;
        }
        int32_t id = tok_vocab_get(m, s, sl);
        if (id >= 0) {
            if (unk_pending >= 0) {
                if (!sym_add(tok, &ns, unk_pending, unk_len)) goto oom;
                unk_pending = -1;
            }
            if (!sym_add(tok, &ns, id, (uint32_t)k)) goto oom;
        } else {
            bool done = false;
            if (m->byte_fallback) {
                size_t j;
                for (j = 0; j < sl; j++)
                    if (m->byte_ids[(unsigned char)s[j]] < 0) break;
                if (j == sl) {
                    for (j = 0; j < sl; j++)
                        if (!sym_add(tok, &ns, m->byte_ids[(unsigned char)s[j]], 1)) goto oom;
                    done = true;
                }
            }
            if (!done && m->unk_token) {
                if (m->unk_id < 0)
                    return tok_err(err, GRAFT_EINVAL, "%s: unk token '%s' is not in the vocabulary",
                                   tok->name, m->unk_token);
                if (unk_pending >= 0 && m->fuse_unk)
                    unk_len += (uint32_t)k;
                else {
                    if (unk_pending >= 0 && !sym_add(tok, &ns, unk_pending, unk_len)) goto oom;
                    unk_pending = m->unk_id;
                    unk_len = (uint32_t)k;
                }
            }
        }
        i += k;
    }
    if (unk_pending >= 0 && !sym_add(tok, &ns, unk_pending, unk_len)) goto oom;
    if (ns == 0) return GRAFT_OK;
    tok->syms[ns - 1].next = -1;

    /* 2. merges, lowest rank first, leftmost among equals */
    if (ns > 1) {
        size_t nh = 0;
        if (!tok_grow((void **)&tok->heap, &tok->capheap, ns * 2 + 2, sizeof *tok->heap)) goto oom;
        for (size_t i = 0; i + 1 < ns; i++) {
            uint32_t r;
            int32_t nid;
            if (merge_lookup(m, tok->syms[i].id, tok->syms[i + 1].id, &r, &nid))
                heap_push(tok->heap, &nh, (tok_heap_ent){r, (uint32_t)i, nid});
        }
        while (nh) {
            tok_heap_ent top = heap_pop(tok->heap, &nh);
            tok_sym *cur = &tok->syms[top.pos];
            uint32_t r;
            int32_t nid;
            if (cur->len == 0 || cur->next < 0) continue;
            tok_sym right = tok->syms[cur->next];
            if (!merge_lookup(m, cur->id, right.id, &r, &nid) || nid != top.new_id) continue;
            int32_t next_pos = cur->next;
            cur->id = top.new_id;
            cur->len += right.len;
            cur->next = right.next;
            tok->syms[next_pos].len = 0;
            if (right.next >= 0) tok->syms[right.next].prev = (int32_t)top.pos;
            if (nh + 2 > tok->capheap) {
                if (!tok_grow((void **)&tok->heap, &tok->capheap, nh + 2, sizeof *tok->heap)) goto oom;
                cur = &tok->syms[top.pos];
            }
            if (cur->prev >= 0) {
                tok_sym *p = &tok->syms[cur->prev];
                if (merge_lookup(m, p->id, cur->id, &r, &nid))
                    heap_push(tok->heap, &nh, (tok_heap_ent){r, (uint32_t)cur->prev, nid});
            }
            if (cur->next >= 0) {
                tok_sym *q = &tok->syms[cur->next];
                if (merge_lookup(m, cur->id, q->id, &r, &nid))
                    heap_push(tok->heap, &nh, (tok_heap_ent){r, top.pos, nid});
            }
        }
    }
    for (size_t i = 0; i < ns; i++)
        if (tok->syms[i].len && !tok_ids_push(out, tok->syms[i].id)) goto oom;
    return GRAFT_OK;
oom:
    return tok_err(err, GRAFT_ENOMEM, "out of memory");
}

/* ------------------------------------------------------------ WordPiece / WordLevel */

static graft_status wordpiece_encode(graft_tokenizer *tok, const char *w, size_t n,
                                     graft_ids *out, graft_error *err)
{
    const tok_model *m = &tok->model;
    size_t nchars = 0, start = 0, base = out->len;
    tok_buf *sb = &tok->s_tmp;
    for (size_t i = 0; i < n; i += (size_t)tok_utf8_len((unsigned char)w[i])) nchars++;
    if (nchars > m->max_input_chars) goto unk;
    while (start < n) {
        size_t end = n;
        int32_t found = -1;
        while (start < end) {
            sb->len = 0;
            if (start > 0 && !tok_buf_add(sb, m->cont_prefix, m->cont_prefix_len)) goto oom;
            if (!tok_buf_add(sb, w + start, end - start)) goto oom;
            found = tok_vocab_get(m, sb->p, sb->len);
            if (found >= 0) break;
            end--;
            while (end > start && ((unsigned char)w[end] & 0xC0) == 0x80) end--;
        }
        if (found < 0) {
            out->len = base;
            goto unk;
        }
        if (!tok_ids_push(out, found)) goto oom;
        start = end;
    }
    return GRAFT_OK;
unk:
    if (m->unk_id < 0)
        return tok_err(err, GRAFT_EINVAL, "%s: WordPiece: unk token missing from the vocabulary",
                       tok->name);
    return tok_ids_push(out, m->unk_id) ? GRAFT_OK : tok_err(err, GRAFT_ENOMEM, "out of memory");
oom:
    return tok_err(err, GRAFT_ENOMEM, "out of memory");
}

static graft_status wordlevel_encode(graft_tokenizer *tok, const char *w, size_t n,
                                     graft_ids *out, graft_error *err)
{
    int32_t id = tok_vocab_get(&tok->model, w, n);
    if (id < 0) id = tok->model.unk_id;
    if (id < 0)
        return tok_err(err, GRAFT_EINVAL, "%s: WordLevel: unk token missing from the vocabulary",
                       tok->name);
    return tok_ids_push(out, id) ? GRAFT_OK : tok_err(err, GRAFT_ENOMEM, "out of memory");
}

/* ------------------------------------------------------------ Unigram */

#define TOK_UNK_PENALTY 10.0

static graft_status unigram_emit(graft_tokenizer *tok, const char *s, size_t n, graft_ids *out,
                                 graft_error *err)
{
    const tok_model *m = &tok->model;
    int32_t id = tok_vocab_get(m, s, n);
    if (id >= 0) return tok_ids_push(out, id) ? GRAFT_OK : tok_err(err, GRAFT_ENOMEM, "out of memory");
    if (m->byte_fallback) {
        size_t j;
        for (j = 0; j < n; j++)
            if (m->byte_ids[(unsigned char)s[j]] < 0) break;
        if (j == n) {
            for (j = 0; j < n; j++)
                if (!tok_ids_push(out, m->byte_ids[(unsigned char)s[j]]))
                    return tok_err(err, GRAFT_ENOMEM, "out of memory");
            return GRAFT_OK;
        }
    }
    if (m->unk_id < 0)
        return tok_err(err, GRAFT_EINVAL, "%s: Unigram: text needs an unk token the model lacks",
                       tok->name);
    return tok_ids_push(out, m->unk_id) ? GRAFT_OK : tok_err(err, GRAFT_ENOMEM, "out of memory");
}

static graft_status unigram_encode(graft_tokenizer *tok, const char *s, size_t n, graft_ids *out,
                                   graft_error *err)
{
    const tok_model *m = &tok->model;
    double unk_score = m->min_score - TOK_UNK_PENALTY;
    graft_status st;
    if (n + 1 > tok->cap_ug) {
        size_t c = n + 1;
        double *a = realloc(tok->ug_score, c * sizeof *a);
        if (a) tok->ug_score = a;
        int32_t *b = realloc(tok->ug_from, c * sizeof *b);
        if (b) tok->ug_from = b;
        int32_t *d = realloc(tok->ug_id, c * sizeof *d);
        if (d) tok->ug_id = d;
        if (!a || !b || !d) return tok_err(err, GRAFT_ENOMEM, "out of memory");
        tok->cap_ug = c;
    }
    double *score = tok->ug_score;
    int32_t *from = tok->ug_from, *idv = tok->ug_id;
    for (size_t i = 0; i <= n; i++) from[i] = -1;
    score[0] = 0;
    for (size_t at = 0; at < n;) {
        double base = score[at];
        size_t mblen = (size_t)tok_utf8_len((unsigned char)s[at]);
        bool single = false;
        int32_t node = 0;
        for (size_t j = at; j < n; j++) {
            node = tok_trie_child(&m->trie, node, (unsigned char)s[j]);
            if (node < 0) break;
            int32_t id = m->trie.val[node];
            if (id < 0) continue;
            size_t end = j + 1;
            double cand = m->scores[id] + base;
            if (from[end] < 0 || cand > score[end]) {
                score[end] = cand;
                from[end] = (int32_t)at;
                idv[end] = id;
            }
            if (end - at == mblen) single = true;
        }
        if (!single) {
            size_t end = at + mblen;
            double cand = unk_score + base;
            if (m->unk_id < 0)
                return tok_err(err, GRAFT_EINVAL,
                               "%s: Unigram: text needs an unk token the model lacks", tok->name);
            if (from[end] < 0 || cand > score[end]) {
                score[end] = cand;
                from[end] = (int32_t)at;
                idv[end] = m->unk_id;
            }
        }
        at += mblen;
    }
    /* backtrack: collect (start, end, id) in reverse into the tail of out */
    size_t base_len = out->len, cnt = 0;
    for (size_t e = n; e > 0; e = (size_t)from[e]) {
        TOK_ASSERT(from[e] >= 0);
        cnt++;
    }
    /* store boundaries temporarily as pairs (start, id) reversed */
    int32_t *tmp = malloc((cnt ? cnt : 1) * 2 * sizeof *tmp);
    if (!tmp) return tok_err(err, GRAFT_ENOMEM, "out of memory");
    size_t k = cnt;
    for (size_t e = n; e > 0; e = (size_t)from[e]) {
        k--;
        tmp[2 * k] = from[e];
        tmp[2 * k + 1] = idv[e];
    }
    st = GRAFT_OK;
    for (size_t i = 0; i < cnt && st == GRAFT_OK;) {
        size_t a = (size_t)tmp[2 * i];
        size_t b = i + 1 < cnt ? (size_t)tmp[2 * (i + 1)] : n;
        if (m->fuse_unk && tmp[2 * i + 1] == m->unk_id) {
            size_t j = i + 1;
            while (j < cnt && tmp[2 * j + 1] == m->unk_id) j++;
            b = j < cnt ? (size_t)tmp[2 * j] : n;
            st = unigram_emit(tok, s + a, b - a, out, err);
            i = j;
        } else {
            st = unigram_emit(tok, s + a, b - a, out, err);
            i++;
        }
    }
    free(tmp);
    (void)base_len;
    return st;
}

/* ------------------------------------------------------------ vocabulary map */

int32_t tok_vocab_get_h(const tok_model *m, const char *s, size_t n, const char *s2, size_t n2,
                        uint32_t h)
{
    size_t j;
    if (!m->vmap_cap) return -1;
    j = h & (m->vmap_cap - 1);
    for (;;) {
        const tok_vent *e = &m->vmap[j];
        if (!e->id1) return -1;
        if (e->hash == h && e->len == n + n2 && memcmp(m->pool.p + e->off, s, n) == 0 &&
            (!n2 || memcmp(m->pool.p + e->off + n, s2, n2) == 0))
            return (int32_t)e->id1 - 1;
        j = (j + 1) & (m->vmap_cap - 1);
    }
}

int32_t tok_vocab_get(const tok_model *m, const char *s, size_t n)
{
    return tok_vocab_get_h(m, s, n, NULL, 0, (uint32_t)tok_hash(s, n));
}

bool tok_vocab_build(tok_model *m)
{
    size_t cap = 64;
    while (cap < m->nvocab * 2) cap *= 2; /* load factor <= 0.5 */
    free(m->vmap);
    m->vmap = calloc(cap, sizeof *m->vmap);
    if (!m->vmap) return false;
    m->vmap_cap = cap;
    /* hash every token first (sequential), then insert with the slots
     * prefetched a few tokens ahead: the inserts are random accesses
     * into a table of megabytes */
    uint32_t *hs = malloc((m->nvocab + 1) * sizeof *hs);
    if (!hs) return false;
    for (size_t i = 0; i < m->nvocab; i++)
        hs[i] = m->tokens[i] ? (uint32_t)tok_hash(m->tokens[i], m->token_len[i]) : 0;
    for (size_t i = 0; i < m->nvocab; i++) {
        if (i + 16 < m->nvocab) __builtin_prefetch(&m->vmap[hs[i + 16] & (cap - 1)], 1);
        if (!m->tokens[i]) continue;
        uint32_t n = m->token_len[i], off = (uint32_t)(m->tokens[i] - m->pool.p), h = hs[i];
        size_t j = h & (cap - 1);
        for (;;) {
            tok_vent *e = &m->vmap[j];
            if (!e->id1 || (e->hash == h && e->len == n &&
                            memcmp(m->pool.p + e->off, m->tokens[i], n) == 0)) {
                /* empty slot, or a duplicate spelling: the later id wins */
                *e = (tok_vent){h, (uint32_t)i + 1, off, n};
                break;
            }
            j = (j + 1) & (cap - 1);
        }
    }
    free(hs);
    return true;
}

/* ------------------------------------------------------------ dispatch */

graft_status tok_model_encode(graft_tokenizer *tok, const char *s, size_t n, graft_ids *out,
                              graft_error *err)
{
    graft_status st;
    size_t base = out->len;
    if (n == 0) return GRAFT_OK;
    if (tok->model.type == TOK_MODEL_WORDLEVEL) return wordlevel_encode(tok, s, n, out, err);
    if (cache_get(&tok->cache, s, n, out)) return GRAFT_OK;
    switch (tok->model.type) {
    case TOK_MODEL_BPE: st = bpe_encode(tok, s, n, out, err); break;
    case TOK_MODEL_WORDPIECE: st = wordpiece_encode(tok, s, n, out, err); break;
    default: st = unigram_encode(tok, s, n, out, err); break;
    }
    if (st == GRAFT_OK) cache_put(&tok->cache, s, n, out->ids + base, out->len - base);
    return st;
}

void tok_model_free(tok_model *m)
{
    free(m->tokens);
    free(m->token_len);
    free(m->token_off);
    tok_buf_free(&m->pool);
    free(m->vmap);
    free(m->unk_token);
    tok_umap_free(&m->merges);
    free(m->cont_prefix);
    free(m->eow_suffix);
    free(m->scores);
    tok_trie_free(&m->trie);
    memset(m, 0, sizeof *m);
}
