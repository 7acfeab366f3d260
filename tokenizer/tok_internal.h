/* tokenizer/tok_internal.h — private structures of graft's tokenizer.
 *
 * Pipeline (as Hugging Face tokenizers runs it):
 *   text → added tokens not normalized are split out → normalizer →
 *   normalized added tokens are split out → pre-tokenizer (pieces) →
 *   model (ids per piece, cached) → post-processor (templates).
 * Decoding: ids → token strings → decoder chain → text.
 *
 * Internal names use the prefix tok_. Strings are byte ranges (not
 * NUL-terminated unless said) and always valid UTF-8 after input
 * sanitising, so regexes run with PCRE2_NO_UTF_CHECK.
 */
#ifndef GRAFT_TOK_INTERNAL_H
#define GRAFT_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "graft_tokenizer.h"

#define TOK_ASSERT(c)                                                                  \
    do {                                                                               \
        if (!(c)) {                                                                    \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                                   \
        }                                                                              \
    } while (0)

/* Sets err (when non-NULL) and returns code. */
graft_status tok_err(graft_error *err, graft_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------ buffers */

typedef struct tok_buf {
    char *p;
    size_t len, cap;
} tok_buf;

bool tok_buf_reserve(tok_buf *b, size_t extra); /* keeps room for a NUL too */
bool tok_buf_add(tok_buf *b, const void *s, size_t n);
bool tok_buf_addc(tok_buf *b, char c);
bool tok_buf_add_cp(tok_buf *b, uint32_t cp); /* UTF-8 encode */
void tok_buf_free(tok_buf *b);

/* Growable arrays: grows *arr so that it holds `need` elements. */
bool tok_grow(void **arr, size_t *cap, size_t need, size_t elem);

char *tok_strndup(const char *s, size_t n);

/* ------------------------------------------------------------ UTF-8 / Unicode */

/* Decodes one char of valid UTF-8 at s (n bytes left); returns its length. */
int tok_utf8_dec(const char *s, size_t n, uint32_t *cp);
int tok_utf8_len(unsigned char lead);
int tok_utf8_enc(uint32_t cp, char out[4]);
/* Replaces invalid sequences by U+FFFD (maximal subparts); out is reset. */
bool tok_utf8_sanitize(const char *s, size_t n, tok_buf *out);
bool tok_utf8_valid(const char *s, size_t n);

bool tok_uni_is_whitespace(uint32_t cp); /* Rust char::is_whitespace */
bool tok_uni_is_word(uint32_t cp);       /* Rust regex \\w (Unicode) */
bool tok_uni_is_numeric(uint32_t cp);    /* Nd Nl No */
bool tok_uni_is_punct(uint32_t cp);      /* ASCII punctuation or P* */
bool tok_uni_is_control(uint32_t cp);    /* Cc Cf Cn Co (BERT's notion) */
bool tok_uni_is_mark_nonspacing(uint32_t cp);
bool tok_uni_is_cjk(uint32_t cp);

/* ------------------------------------------------------------ hash maps */

uint64_t tok_hash(const void *s, size_t n);
/* (uint32_t)tok_hash of the concatenation a + b. */
uint32_t tok_hash2(const char *a, size_t an, const char *b, size_t bn);

/* String → int32 map. Keys are borrowed (must outlive the map). */
typedef struct tok_smap_ent {
    const char *key;
    uint32_t klen;
    uint32_t hash;
    int32_t val;
} tok_smap_ent;
typedef struct tok_smap {
    tok_smap_ent *e;
    size_t cap, n; /* cap is 0 or a power of two */
} tok_smap;
bool tok_smap_put(tok_smap *m, const char *key, size_t klen, int32_t val); /* overwrite */
/* Returns the value or -1. */
int32_t tok_smap_get(const tok_smap *m, const char *key, size_t klen);
void tok_smap_free(tok_smap *m);

/* uint64 → uint64 map (key UINT64_MAX reserved): open addressing with
 * linear probing, key and value side by side (one cache line a probe). */
typedef struct tok_ukv {
    uint64_t k, v;
} tok_ukv;
typedef struct tok_umap {
    tok_ukv *e;
    size_t cap, n;
} tok_umap;
bool tok_umap_put(tok_umap *m, uint64_t key, uint64_t val);
bool tok_umap_reserve(tok_umap *m, size_t n); /* room for n entries without rehashing */
void tok_umap_free(tok_umap *m);
static inline uint64_t tok_umix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}
static inline void tok_umap_prefetch(const tok_umap *m, uint64_t key)
{
    if (m->cap) __builtin_prefetch(&m->e[tok_umix(key) & (m->cap - 1)], 1);
}
static inline bool tok_umap_get(const tok_umap *m, uint64_t key, uint64_t *val)
{
    size_t j;
    if (!m->cap) return false;
    j = tok_umix(key) & (m->cap - 1);
    while (m->e[j].k != UINT64_MAX) {
        if (m->e[j].k == key) {
            *val = m->e[j].v;
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return false;
}

/* Byte trie: nodes hold a value (-1: none); children found through a map
 * keyed by (node << 8 | byte). */
typedef struct tok_trie {
    int32_t *val;
    size_t n, cap;
    tok_umap kids;
} tok_trie;
bool tok_trie_init(tok_trie *t);
bool tok_trie_insert(tok_trie *t, const char *s, size_t n, int32_t val);
/* Child of node through byte, or -1. Node 0 is the root. */
static inline int32_t tok_trie_child(const tok_trie *t, int32_t node, unsigned char c)
{
    uint64_t v;
    if (!tok_umap_get(&t->kids, ((uint64_t)node << 8) | c, &v)) return -1;
    return (int32_t)v;
}
void tok_trie_free(tok_trie *t);

/* ------------------------------------------------------------ regex */

typedef struct tok_regex {
    pcre2_code *code;
    pcre2_match_data *md;
    char *src; /* pattern source, for messages */
} tok_regex;

/* Compiles with UTF + UCP (+ JIT when available). err names `where`. */
graft_status tok_regex_init(tok_regex *re, const char *pat, size_t n, const char *where,
                            graft_error *err);
void tok_regex_free(tok_regex *re);

/* A match (start, end) list covering nothing in particular. */
typedef struct tok_span {
    size_t a, b;
} tok_span;
typedef struct tok_spans {
    tok_span *v;
    size_t n, cap;
} tok_spans;
/* Finds non-overlapping matches like Oniguruma's find_iter: an empty
 * match right at the end of the previous match is skipped. */
bool tok_regex_find_all(const tok_regex *re, const char *s, size_t n, tok_spans *out);

/* ------------------------------------------------------------ components */

/* Patterns of Split / Replace: a regex (string patterns are escaped into
 * one, like HF), or a single char for Metaspace. */
typedef struct tok_pattern {
    tok_regex re;
} tok_pattern;

typedef enum tok_norm_type {
    TOK_NORM_SEQUENCE,
    TOK_NORM_NFC,
    TOK_NORM_NFD,
    TOK_NORM_NFKC,
    TOK_NORM_NFKD,
    TOK_NORM_LOWERCASE,
    TOK_NORM_REPLACE,
    TOK_NORM_PREPEND,
    TOK_NORM_APPEND,
    TOK_NORM_STRIP,
    TOK_NORM_STRIP_ACCENTS,
    TOK_NORM_BERT,
    TOK_NORM_BYTE_LEVEL,
    TOK_NORM_NMT,
} tok_norm_type;

typedef struct tok_norm {
    tok_norm_type type;
    struct tok_norm **subs;
    size_t nsubs;
    tok_pattern pat;
    char *str; /* Replace content, Prepend/Append text */
    size_t slen;
    bool left, right; /* Strip */
    /* Bert */
    bool clean_text, chinese_chars, strip_accents, lowercase;
} tok_norm;

typedef enum tok_split_behavior {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS,
} tok_split_behavior;

typedef enum tok_pre_type {
    TOK_PRE_SEQUENCE,
    TOK_PRE_BYTE_LEVEL,
    TOK_PRE_SPLIT,
    TOK_PRE_METASPACE,
    TOK_PRE_WHITESPACE,
    TOK_PRE_WHITESPACE_SPLIT,
    TOK_PRE_DIGITS,
    TOK_PRE_PUNCTUATION,
    TOK_PRE_BERT,
    TOK_PRE_CHAR_DELIMITER,
} tok_pre_type;

typedef enum tok_prepend_scheme {
    TOK_PREPEND_ALWAYS,
    TOK_PREPEND_FIRST,
    TOK_PREPEND_NEVER,
} tok_prepend_scheme;

typedef struct tok_pre {
    tok_pre_type type;
    struct tok_pre **subs;
    size_t nsubs;
    tok_pattern pat;   /* Split, ByteLevel (use_regex), Whitespace */
    bool has_pat;
    tok_split_behavior behavior;
    bool invert;
    bool add_prefix_space, use_regex; /* ByteLevel */
    uint32_t repl;                    /* Metaspace replacement / delimiter char */
    tok_prepend_scheme scheme;
    bool split;
    bool individual_digits;
} tok_pre;

typedef enum tok_model_type {
    TOK_MODEL_BPE,
    TOK_MODEL_WORDPIECE,
    TOK_MODEL_WORDLEVEL,
    TOK_MODEL_UNIGRAM,
} tok_model_type;

typedef struct tok_vent {
    uint32_t hash, id1, off, len; /* id + 1; the token is pool[off .. off+len) */
} tok_vent;

typedef struct tok_model {
    tok_model_type type;
    /* vocabulary: id → string (owned, NUL-terminated) */
    char **tokens;        /* point into pool */
    uint32_t *token_len;
    size_t *token_off;    /* offsets into pool while loading */
    tok_buf pool;
    size_t nvocab; /* ids 0..nvocab-1 (holes are NULL) */
    struct tok_vent *vmap; /* open addressing; id1 == 0: empty */
    size_t vmap_cap;
    int32_t unk_id; /* -1: none */
    char *unk_token;
    /* BPE */
    tok_umap merges; /* (a << 32 | b) → (rank << 32 | new id) */
    char *cont_prefix, *eow_suffix;
    size_t cont_prefix_len, eow_suffix_len;
    bool byte_fallback, fuse_unk, ignore_merges;
    int32_t byte_ids[256]; /* <0xXX> ids, -1 absent */
    /* WordPiece */
    size_t max_input_chars;
    /* Unigram */
    double *scores;
    double min_score;
    tok_trie trie;
} tok_model;

typedef struct tok_tmpl_item {
    bool special;      /* SpecialToken (else Sequence A) */
    int32_t *ids;      /* the special token's ids */
    size_t nids;
} tok_tmpl_item;

typedef enum tok_post_type {
    TOK_POST_SEQUENCE,
    TOK_POST_TEMPLATE,
    TOK_POST_BYTE_LEVEL, /* offsets only: ids unchanged */
    TOK_POST_ROBERTA,    /* and Bert: cls A sep */
} tok_post_type;

typedef struct tok_post {
    tok_post_type type;
    struct tok_post **subs;
    size_t nsubs;
    tok_tmpl_item *items;
    size_t nitems;
    int32_t cls_id, sep_id;
} tok_post;

typedef enum tok_dec_type {
    TOK_DEC_SEQUENCE,
    TOK_DEC_BYTE_LEVEL,
    TOK_DEC_REPLACE,
    TOK_DEC_BYTE_FALLBACK,
    TOK_DEC_FUSE,
    TOK_DEC_STRIP,
    TOK_DEC_METASPACE,
    TOK_DEC_WORDPIECE,
    TOK_DEC_BPE,
} tok_dec_type;

typedef struct tok_dec {
    tok_dec_type type;
    struct tok_dec **subs;
    size_t nsubs;
    tok_pattern pat;
    char *str; /* Replace content, WordPiece prefix, BPE suffix */
    size_t slen;
    uint32_t ch; /* Strip content / Metaspace replacement */
    size_t start, stop;
    tok_prepend_scheme scheme;
    bool cleanup;
} tok_dec;

typedef struct tok_added {
    char *content;
    size_t len;
    char *dec;      /* text it decodes to: content, normalized when `normalized` */
    size_t dec_len;
    int32_t id;
    bool special, normalized, lstrip, rstrip, single_word;
} tok_added;

/* Matching set of added tokens: a trie over contents (normalized ones by
 * their normalized form); trie values index tok->added. */
typedef struct tok_matcher {
    tok_trie trie;
    size_t count;
} tok_matcher;

/* Pre-token pieces: ranges into a text buffer, with a flag saying that
 * the piece begins the input (original offset 0; Metaspace "first"). */
typedef struct tok_piece {
    size_t off, len;
    bool first;
} tok_piece;
typedef struct tok_pieces {
    tok_buf text;
    tok_piece *v;
    size_t n, cap;
} tok_pieces;

/* BPE cache: piece → ids. */
typedef struct tok_cache {
    tok_smap map;      /* key → index into ent */
    tok_buf keys;      /* key bytes (map keys point in here: never realloc'd
                          while entries live: fixed capacity) */
    int32_t *ids;      /* id storage */
    size_t nids, capids;
    uint32_t *ent_off, *ent_n;
    size_t nent, capent;
} tok_cache;

struct graft_tokenizer {
    char *name; /* file name for messages */
    tok_norm *norm;
    tok_pre *pre;
    tok_model model;
    tok_post *post;
    tok_dec *dec;
    tok_added *added;
    size_t nadded;
    tok_smap added_map; /* content → index in added */
    int32_t *added_by_id; /* id → index in added, or -1; size vocab_size */
    unsigned char *special_by_id; /* 1: the id's token text is a special token's */
    size_t vocab_size;
    tok_matcher m_raw, m_norm;
    tok_cache cache;
    /* scratch */
    tok_buf s_in, s_norm, s_tmp;
    tok_pieces pa, pb;
    tok_spans spans;
    struct tok_sym *syms;
    size_t capsyms;
    struct tok_heap_ent *heap;
    size_t capheap;
    double *ug_score;
    int32_t *ug_from, *ug_id;
    size_t cap_ug;
};

/* ------------------------------------------------------------ stages */

bool tok_pattern_regex(tok_pattern *p, const char *pat, size_t n, const char *where,
                       graft_error *err, graft_status *st);

/* Applies the normalizer to s (n bytes) into out (reset first). */
bool tok_normalize(graft_tokenizer *tok, const tok_norm *nm, const char *s, size_t n,
                   tok_buf *out);
/* Pre-tokenizes: in → out (pieces). Swaps buffers as needed; the result
 * is left in *in. */
bool tok_pretokenize(graft_tokenizer *tok, const tok_pre *pre, tok_pieces *in, tok_pieces *tmp);
void tok_pieces_reset(tok_pieces *p);
bool tok_pieces_push(tok_pieces *p, const char *s, size_t n, bool first);
void tok_pieces_free(tok_pieces *p);

/* Model vocabulary lookup: id of the token spelled s (n bytes), or -1. */
int32_t tok_vocab_get(const tok_model *m, const char *s, size_t n);
/* Same for the concatenation s + s2, given its hash (tok_hash2). */
int32_t tok_vocab_get_h(const tok_model *m, const char *s, size_t n, const char *s2, size_t n2,
                        uint32_t h);
/* Builds the vocabulary map from tokens[] (later ids win on duplicates). */
bool tok_vocab_build(tok_model *m);

/* Model: appends ids of one piece to out. */
graft_status tok_model_encode(graft_tokenizer *tok, const char *s, size_t n, graft_ids *out,
                              graft_error *err);
bool tok_ids_push(graft_ids *ids, int32_t id);

/* Decoders: tokens (array of NUL-terminated strings) → text. */
typedef struct tok_str {
    char *p; /* owned, NUL-terminated (may hold NULs: use n) */
    size_t n;
} tok_str;
typedef struct tok_strs {
    tok_str *v;
    size_t n, cap;
} tok_strs;
bool tok_strs_push(tok_strs *s, const char *p, size_t n);
void tok_strs_free(tok_strs *s);
bool tok_decode_chain(graft_tokenizer *tok, const tok_dec *d, tok_strs *toks);

/* Frees component trees. */
void tok_norm_free(tok_norm *n);
void tok_pre_free(tok_pre *p);
void tok_post_free(tok_post *p);
void tok_dec_free(tok_dec *d);
void tok_model_free(tok_model *m);

/* Loader (tok_load.c). */
graft_status tok_load_doc(graft_tokenizer *tok, const char *json, size_t len, graft_error *err);

#endif /* GRAFT_TOK_INTERNAL_H */
