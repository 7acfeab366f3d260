/* tokenizer/tok_json.h — a small, fast JSON reader for tokenizer.json.
 *
 * Jansson takes seconds on a 20 MB, 262k-token tokenizer.json; this
 * reader parses into one arena (strings unescaped and NUL-terminated,
 * children contiguous) in a single pass, validates UTF-8, and reports
 * syntax errors with line and column. Objects keep their keys in order;
 * lookup is linear and returns the last duplicate (as jansson does). */
#ifndef GRAFT_TOK_JSON_H
#define GRAFT_TOK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum tj_type {
    TJ_NULL,
    TJ_FALSE,
    TJ_TRUE,
    TJ_INT,
    TJ_REAL,
    TJ_STRING,
    TJ_ARRAY,
    TJ_OBJECT,
    TJ_STREAMED, /* a container handed to tj_hooks: n elements, u.i = TJ_SV_* */
} tj_type;

/* Streamed containers: the two large members of tokenizer.json,
 * root "model" → "vocab" (an object) and → "merges" (an array), are not
 * kept in the document: each element is parsed and handed to a callback,
 * then its memory is reused. The document holds a TJ_STREAMED value in
 * their place. A later duplicate of either calls begin again. */
enum { TJ_SV_VOCAB, TJ_SV_MERGES };

typedef struct tj_val tj_val;
struct tj_val {
    uint32_t type;
    uint32_t n; /* string length; array/object element count */
    union {
        long long i;
        double d;
        const char *s;
        tj_val *items; /* array: n values; object: n (key, value) pairs */
    } u;
};

typedef struct tj_doc {
    tj_val *root;
    struct tj_chunk *chunks; /* arena */
    int err_line, err_col;
    char err_text[160];
} tj_doc;

typedef struct tj_hooks {
    void *ctx;
    /* A streamed container starts (which: TJ_SV_*). */
    bool (*begin)(void *ctx, int which);
    /* Element i: key (vocab; NULL for merges) and value, valid during the
     * call only. false: out of memory. */
    bool (*elem)(void *ctx, int which, size_t i, const tj_val *key, const tj_val *val);
} tj_hooks;

/* Parses len bytes. Returns true with doc->root set, or false with the
 * error position and text in doc. tj_doc_free releases the arena either
 * way. hooks may be NULL (nothing streamed). */
bool tj_parse(const char *src, size_t len, tj_doc *doc, const tj_hooks *hooks);
void tj_doc_free(tj_doc *doc);

static inline bool tj_is(const tj_val *v, tj_type t)
{
    return v && v->type == (uint32_t)t;
}
#define tj_is_object(v) tj_is((v), TJ_OBJECT)
#define tj_is_array(v) tj_is((v), TJ_ARRAY)
#define tj_is_string(v) tj_is((v), TJ_STRING)
#define tj_is_integer(v) tj_is((v), TJ_INT)
#define tj_is_null(v) tj_is((v), TJ_NULL)
#define tj_is_true(v) tj_is((v), TJ_TRUE)
static inline bool tj_is_boolean(const tj_val *v)
{
    return v && (v->type == TJ_TRUE || v->type == TJ_FALSE);
}
static inline bool tj_is_number(const tj_val *v)
{
    return v && (v->type == TJ_INT || v->type == TJ_REAL);
}

/* Member of an object (last duplicate), or NULL. */
tj_val *tj_get(const tj_val *obj, const char *key);
static inline size_t tj_size(const tj_val *a)
{
    return a && (a->type == TJ_ARRAY || a->type == TJ_OBJECT) ? a->n : 0;
}
static inline tj_val *tj_at(const tj_val *a, size_t i)
{
    return a && a->type == TJ_ARRAY && i < a->n ? &a->u.items[i] : NULL;
}
static inline const char *tj_str(const tj_val *v)
{
    return tj_is_string(v) ? v->u.s : NULL;
}
static inline size_t tj_len(const tj_val *v)
{
    return tj_is_string(v) ? v->n : 0;
}
static inline long long tj_int(const tj_val *v)
{
    return tj_is_integer(v) ? v->u.i : 0;
}
static inline double tj_num(const tj_val *v)
{
    return v && v->type == TJ_INT ? (double)v->u.i : v && v->type == TJ_REAL ? v->u.d : 0.0;
}

#endif /* GRAFT_TOK_JSON_H */
