/* cli/inspect.c — `graft inspect PATH [--json]`.
 *
 * PATH is an .onnx file or a pipeline directory holding genai_config.json
 * (ONNX Runtime GenAI schema). The report is built once as a JSON object
 * (inspect_model_build, inspect_pipeline_build); --json dumps it, and the
 * human output is rendered from the same object (inspect_model_print,
 * inspect_pipeline_print), so both always carry the same information.
 *
 * Nothing here knows a model by name or assumes a size: the KV layout is
 * read from the graph, from inputs and outputs named by the past/present
 * templates (ONNX Runtime GenAI's past_key_names etc., defaulting to
 * past_key_values.%d.key and present.%d.key), with kv_heads and head_dim
 * taken from present.N.key's shape [batch, kv_heads, seq, head_dim] and the
 * past input's shape as fallback.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cli/cli.h"

static const char inspect_usage[] =
    "usage: graft inspect PATH [--json]\n"
    "\n"
    "Shows what a model or a pipeline holds. PATH is an .onnx file or a\n"
    "pipeline directory with a genai_config.json (ONNX Runtime GenAI layout).\n"
    "For each model: graph inputs and outputs with dtypes and shapes, the op\n"
    "histogram by domain, IR version and opsets, producer, initializers and\n"
    "their bytes, external data files, and the KV cache layout read from the\n"
    "graph (per layer: cache or not, kv_heads, head_dim).\n"
    "\n"
    "options:\n"
    "  --json     print the same information as one JSON object\n"
    "  -h, --help print this help\n"
    "\n"
    "Exit status: 0 success, 1 runtime failure, 2 bad input or usage.\n";

#define INSPECT_CONFIG_NAME "genai_config.json"
#define INSPECT_MAX_DEPTH 256 /* subgraph nesting walked; the loader bounds it lower */

/* ONNX Runtime GenAI's defaults for the KV templates. */
static const char *const inspect_kv_defaults[4] = {
    "past_key_values.%d.key", "past_key_values.%d.value", "present.%d.key", "present.%d.value"};
enum { INSPECT_PAST_KEY, INSPECT_PAST_VALUE, INSPECT_PRESENT_KEY, INSPECT_PRESENT_VALUE };

/* ------------------------------------------------------------ JSON helpers */

/* New JSON string for s (null for NULL); bytes that are not valid UTF-8
 * become '?'. Owned; NULL on allocation failure. */
static json_t *inspect_json_str(const char *s)
{
    json_t *j;
    char *copy = NULL;
    size_t n;

    if (!s)
        return json_null();
    j = json_string(s);
    if (j)
        return j;
    n = strlen(s);
    copy = malloc(n + 1);
    if (!copy)
        goto fail;
    for (size_t i = 0; i <= n; i++)
        copy[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
    j = json_string(copy);
fail:
    free(copy);
    return j;
}

static json_t *inspect_json_u64(uint64_t v)
{
    return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* json_object_set_new for a key read from a model (made valid UTF-8).
 * Consumes v, also on failure. Returns 0 or -1. */
static int inspect_json_setk(json_t *o, const char *key, json_t *v)
{
    json_t *k = inspect_json_str(key ? key : "");
    int r;

    if (!k) {
        json_decref(v);
        return -1;
    }
    r = json_object_set_new(o, json_string_value(k), v);
    json_decref(k);
    return r;
}

/* Sets o[key] to *v, consuming it (also on failure) and clearing *v, so
 * that a cleanup path can decref *v unconditionally. Returns 0 or -1. */
static int inspect_json_move(json_t *o, const char *key, json_t **v)
{
    int r = json_object_set_new(o, key, *v);

    *v = NULL;
    return r;
}

/* A dimension: integer, symbolic name, or null when unknown. */
static json_t *inspect_json_dim(const graft_dim *d)
{
    if (d->value >= 0)
        return json_integer(d->value);
    if (d->param && d->param[0])
        return inspect_json_str(d->param);
    return json_null();
}

static int inspect_dim_known(const graft_dim *d)
{
    return d->value >= 0 || (d->param && d->param[0]);
}

/* ------------------------------------------------------------ values */

/* {"name", "dtype", "shape"}: dtype null when unknown, shape null when the
 * rank is unknown, "truncated": true past GRAFT_MAX_RANK dims. Owned. */
static json_t *inspect_value_build(const graft_value_info *vi)
{
    json_t *o = json_object(), *shape = NULL;
    int n;

    if (!o)
        goto fail;
    if (json_object_set_new(o, "name", inspect_json_str(vi->name)))
        goto fail;
    if (json_object_set_new(o, "dtype",
                            vi->dtype ? inspect_json_str(graft_dtype_name(vi->dtype)) : json_null()))
        goto fail;
    if (vi->rank < 0) {
        if (json_object_set_new(o, "shape", json_null()))
            goto fail;
        return o;
    }
    shape = json_array();
    if (!shape)
        goto fail;
    n = vi->rank < GRAFT_MAX_RANK ? vi->rank : GRAFT_MAX_RANK;
    for (int i = 0; i < n; i++)
        if (json_array_append_new(shape, inspect_json_dim(&vi->dims[i])))
            goto fail;
    if (inspect_json_move(o, "shape", &shape))
        goto fail;
    if (vi->truncated && json_object_set_new(o, "truncated", json_true()))
        goto fail;
    return o;
fail:
    json_decref(shape);
    json_decref(o);
    return NULL;
}

/* ------------------------------------------------------------ ops and weights */

typedef struct inspect_op {
    const char *domain; /* "ai.onnx" for the default domain; borrowed */
    const char *op;     /* borrowed from the model */
    size_t count;
} inspect_op;

typedef struct inspect_stats {
    inspect_op *ops;
    size_t n_ops, cap_ops;
    size_t nodes, subgraphs;
    size_t inits;
    uint64_t init_bytes, ext_bytes;
    size_t dtype_count[GRAFT_DTYPE_COUNT_];
    uint64_t dtype_bytes[GRAFT_DTYPE_COUNT_];
} inspect_stats;

static const char *inspect_domain_name(const char *domain)
{
    return (!domain || !domain[0]) ? "ai.onnx" : domain;
}

static graft_status inspect_stats_add_op(inspect_stats *st, const char *domain, const char *op,
                                         graft_error *err)
{
    inspect_op *grown;
    size_t cap;

    for (size_t i = 0; i < st->n_ops; i++)
        if (strcmp(st->ops[i].op, op) == 0 && strcmp(st->ops[i].domain, domain) == 0) {
            st->ops[i].count++;
            return GRAFT_OK;
        }
    if (st->n_ops == st->cap_ops) {
        cap = st->cap_ops ? 2 * st->cap_ops : 32;
        grown = realloc(st->ops, cap * sizeof *grown);
        if (!grown)
            return graft_cli_error_set(err, GRAFT_ENOMEM, "out of memory");
        st->ops = grown;
        st->cap_ops = cap;
    }
    st->ops[st->n_ops].domain = domain;
    st->ops[st->n_ops].op = op;
    st->ops[st->n_ops].count = 1;
    st->n_ops++;
    return GRAFT_OK;
}

/* Counts nodes by (domain, op) and initializers by dtype in g and, at
 * depth + 1, in its subgraphs. */
static graft_status inspect_stats_collect(inspect_stats *st, graft_graph *g, int depth,
                                          graft_error *err)
{
    graft_status s;

    if (depth > INSPECT_MAX_DEPTH)
        return graft_cli_error_set(err, GRAFT_EUNSUPPORTED,
                                   "subgraphs nested deeper than %d levels", INSPECT_MAX_DEPTH);
    for (size_t i = 0; i < graft_graph_node_count(g); i++) {
        graft_node *n = graft_graph_node(g, i);
        const char *op = graft_node_op_type(n);

        st->nodes++;
        s = inspect_stats_add_op(st, inspect_domain_name(graft_node_domain(n)), op ? op : "",
                                 err);
        if (s != GRAFT_OK)
            return s;
        for (size_t k = 0; k < graft_node_subgraph_count(n); k++) {
            st->subgraphs++;
            s = inspect_stats_collect(st, graft_node_subgraph(g, n, k), depth + 1, err);
            if (s != GRAFT_OK)
                return s;
        }
    }
    for (size_t i = 0; i < graft_graph_initializer_count(g); i++) {
        graft_tensor *t = graft_graph_initializer(g, i);
        int dtype = graft_tensor_dtype(t);
        int overflow = 0;
        uint64_t bytes = graft_dtype_nbytes(dtype, graft_tensor_numel(t), &overflow);
        size_t slot = (dtype > 0 && dtype < GRAFT_DTYPE_COUNT_) ? (size_t)dtype : 0;

        if (overflow || graft_dtype_bits(dtype) == 0)
            bytes = graft_tensor_nbytes(t);
        st->inits++;
        st->init_bytes += bytes;
        if (graft_tensor_location(t))
            st->ext_bytes += bytes;
        st->dtype_count[slot]++;
        st->dtype_bytes[slot] += bytes;
    }
    return GRAFT_OK;
}

/* ai.onnx first, other domains by name; within one, most used first. */
static int inspect_op_compare(const void *pa, const void *pb)
{
    const inspect_op *a = pa, *b = pb;
    int da = strcmp(a->domain, "ai.onnx") != 0, db = strcmp(b->domain, "ai.onnx") != 0;
    int c;

    if (da != db)
        return da - db;
    c = strcmp(a->domain, b->domain);
    if (c)
        return c;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return strcmp(a->op, b->op);
}

/* Sets "node_count", "subgraph_count", "ops", "initializers" on o. */
static graft_status inspect_stats_build(json_t *o, graft_graph *g, graft_error *err)
{
    inspect_stats st;
    json_t *ops = NULL, *dom = NULL, *inits = NULL, *by = NULL, *e = NULL;
    const char *cur = NULL;
    graft_status s;

    memset(&st, 0, sizeof st);
    s = inspect_stats_collect(&st, g, 0, err);
    if (s != GRAFT_OK)
        goto done;
    s = GRAFT_ENOMEM;
    if (st.n_ops)
        qsort(st.ops, st.n_ops, sizeof st.ops[0], inspect_op_compare);
    if (json_object_set_new(o, "node_count", inspect_json_u64(st.nodes)) ||
        json_object_set_new(o, "subgraph_count", inspect_json_u64(st.subgraphs)))
        goto fail;
    ops = json_object();
    if (!ops)
        goto fail;
    for (size_t i = 0; i < st.n_ops; i++) {
        if (!cur || strcmp(cur, st.ops[i].domain) != 0) {
            cur = st.ops[i].domain;
            dom = json_object();
            if (!dom || inspect_json_setk(ops, cur, dom))
                goto fail;
        }
        if (inspect_json_setk(dom, st.ops[i].op, inspect_json_u64(st.ops[i].count)))
            goto fail;
    }
    if (inspect_json_move(o, "ops", &ops))
        goto fail;

    inits = json_object();
    by = json_object();
    if (!inits || !by)
        goto fail;
    for (size_t d = 0; d < GRAFT_DTYPE_COUNT_; d++) {
        if (!st.dtype_count[d])
            continue;
        e = json_object();
        if (!e || json_object_set_new(e, "count", inspect_json_u64(st.dtype_count[d])) ||
            json_object_set_new(e, "bytes", inspect_json_u64(st.dtype_bytes[d])))
            goto fail;
        if (inspect_json_setk(by, d ? graft_dtype_name((int)d) : "?", e)) {
            e = NULL;
            goto fail;
        }
        e = NULL;
    }
    if (json_object_set_new(inits, "count", inspect_json_u64(st.inits)) ||
        json_object_set_new(inits, "bytes", inspect_json_u64(st.init_bytes)) ||
        json_object_set_new(inits, "external_bytes", inspect_json_u64(st.ext_bytes)))
        goto fail;
    if (inspect_json_move(inits, "by_dtype", &by) || inspect_json_move(o, "initializers", &inits))
        goto fail;
    s = GRAFT_OK;
    goto done;
fail:
    graft_cli_error_set(err, s, "out of memory");
done:
    json_decref(e);
    json_decref(by);
    json_decref(inits);
    json_decref(ops);
    free(st.ops);
    return s;
}

/* ------------------------------------------------------------ KV layout */

typedef struct inspect_kv_layer {
    long layer;
    graft_value_info vi[4]; /* indexed by INSPECT_PAST_KEY...; name NULL when absent */
} inspect_kv_layer;

/* Layer number of `name` under `tmpl` (one "%d" for decimal digits), or -1. */
static long inspect_template_match(const char *tmpl, const char *name)
{
    const char *pct = strstr(tmpl, "%d");
    size_t pre;
    long n = 0;

    if (!pct || !name)
        return -1;
    pre = (size_t)(pct - tmpl);
    if (strncmp(name, tmpl, pre) != 0)
        return -1;
    name += pre;
    if (!isdigit((unsigned char)*name))
        return -1;
    for (; isdigit((unsigned char)*name); name++) {
        n = n * 10 + (*name - '0');
        if (n > 100000000L)
            return -1;
    }
    return strcmp(name, pct + 2) == 0 ? n : -1;
}

static inspect_kv_layer *inspect_kv_layer_get(inspect_kv_layer **v, size_t *n, size_t *cap,
                                              long layer)
{
    inspect_kv_layer *grown;
    size_t c;

    for (size_t i = 0; i < *n; i++)
        if ((*v)[i].layer == layer)
            return &(*v)[i];
    if (*n == *cap) {
        c = *cap ? 2 * *cap : 16;
        grown = realloc(*v, c * sizeof *grown);
        if (!grown)
            return NULL;
        *v = grown;
        *cap = c;
    }
    memset(&(*v)[*n], 0, sizeof **v);
    (*v)[*n].layer = layer;
    return &(*v)[(*n)++];
}

static int inspect_kv_layer_compare(const void *pa, const void *pb)
{
    const inspect_kv_layer *a = pa, *b = pb;
    return (a->layer > b->layer) - (a->layer < b->layer);
}

/* Dim `axis` of the first of the values in `order` that knows it (a
 * number before a symbolic name). NULL when none does. */
static const graft_dim *inspect_kv_dim(const inspect_kv_layer *l, const int order[2], int axis)
{
    const graft_dim *sym = NULL;

    for (int k = 0; k < 2; k++) {
        const graft_value_info *vi = &l->vi[order[k]];
        if (!vi->name || vi->rank != 4)
            continue;
        if (vi->dims[axis].value >= 0)
            return &vi->dims[axis];
        if (!sym && inspect_dim_known(&vi->dims[axis]))
            sym = &vi->dims[axis];
    }
    return sym;
}

static json_t *inspect_kv_dim_json(const graft_dim *d)
{
    return d ? inspect_json_dim(d) : json_null();
}

/* One layer: {"layer", "cache", "kv_heads", "head_dim", "value_head_dim",
 * "dtype", "past_key", "past_value", "present_key", "present_value"}. */
static json_t *inspect_kv_layer_build(const inspect_kv_layer *l)
{
    static const int key_order[2] = {INSPECT_PRESENT_KEY, INSPECT_PAST_KEY};
    static const int value_order[2] = {INSPECT_PRESENT_VALUE, INSPECT_PAST_VALUE};
    static const char *const names[4] = {"past_key", "past_value", "present_key",
                                         "present_value"};
    json_t *o = json_object();
    int dtype = 0;

    if (!o)
        goto fail;
    for (int k = 0; k < 4 && !dtype; k++) {
        int idx = k < 2 ? key_order[k] : value_order[k - 2];
        if (l->vi[idx].name)
            dtype = l->vi[idx].dtype;
    }
    if (json_object_set_new(o, "layer", json_integer(l->layer)) ||
        json_object_set_new(o, "cache", json_boolean(l->vi[INSPECT_PAST_KEY].name != NULL)) ||
        json_object_set_new(o, "kv_heads", inspect_kv_dim_json(inspect_kv_dim(l, key_order, 1))) ||
        json_object_set_new(o, "head_dim", inspect_kv_dim_json(inspect_kv_dim(l, key_order, 3))) ||
        json_object_set_new(o, "value_head_dim",
                            inspect_kv_dim_json(inspect_kv_dim(l, value_order, 3))) ||
        json_object_set_new(o, "dtype",
                            dtype ? inspect_json_str(graft_dtype_name(dtype)) : json_null()))
        goto fail;
    for (int k = 0; k < 4; k++)
        if (json_object_set_new(o, names[k], inspect_json_str(l->vi[k].name)))
            goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

/* Sets "kv" on o: {"templates": {...}, "layers": [...], "cached_layers": n}.
 * tmpl: past key, past value, present key, present value templates. */
static graft_status inspect_kv_build(json_t *o, graft_graph *g, const char *const tmpl[4],
                                     graft_error *err)
{
    static const char *const keys[4] = {"past_key", "past_value", "present_key",
                                        "present_value"};
    inspect_kv_layer *layers = NULL, *l;
    size_t n = 0, cap = 0, cached = 0;
    json_t *kv = NULL, *t = NULL, *arr = NULL;
    graft_value_info vi;

    for (int side = 0; side < 2; side++) { /* 0: graph inputs (past), 1: outputs (present) */
        size_t count = side ? graft_graph_output_count(g) : graft_graph_input_count(g);
        for (size_t i = 0; i < count; i++) {
            if (!(side ? graft_graph_output(g, i, &vi) : graft_graph_input(g, i, &vi)))
                continue;
            for (int k = 2 * side; k < 2 * side + 2; k++) {
                long layer = inspect_template_match(tmpl[k], vi.name);
                if (layer < 0)
                    continue;
                l = inspect_kv_layer_get(&layers, &n, &cap, layer);
                if (!l)
                    goto fail;
                l->vi[k] = vi;
            }
        }
    }
    if (n)
        qsort(layers, n, sizeof layers[0], inspect_kv_layer_compare);

    kv = json_object();
    t = json_object();
    arr = json_array();
    if (!kv || !t || !arr)
        goto fail;
    for (int k = 0; k < 4; k++)
        if (json_object_set_new(t, keys[k], inspect_json_str(tmpl[k])))
            goto fail;
    for (size_t i = 0; i < n; i++) {
        cached += layers[i].vi[INSPECT_PAST_KEY].name != NULL;
        if (json_array_append_new(arr, inspect_kv_layer_build(&layers[i])))
            goto fail;
    }
    if (inspect_json_move(kv, "templates", &t) ||
        json_object_set_new(kv, "cached_layers", inspect_json_u64(cached)) ||
        inspect_json_move(kv, "layers", &arr) || inspect_json_move(o, "kv", &kv))
        goto fail;
    free(layers);
    return GRAFT_OK;
fail:
    json_decref(arr);
    json_decref(t);
    json_decref(kv);
    free(layers);
    return graft_cli_error_set(err, GRAFT_ENOMEM, "out of memory");
}

/* ------------------------------------------------------------ one model */

/* Loads `path` and returns its report (owned) in *out. tmpl: KV templates. */
static graft_status inspect_model_build(const char *path, const char *const tmpl[4],
                                        json_t **out, graft_error *err)
{
    graft_model *m = NULL;
    graft_graph *g;
    graft_value_info vi;
    json_t *o = NULL, *sub = NULL, *e = NULL;
    graft_status s;

    *out = NULL;
    s = graft_model_load(path, NULL, &m, err);
    if (s != GRAFT_OK)
        goto done;
    g = graft_model_graph(m);
    s = GRAFT_ENOMEM;
    o = json_object();
    if (!o || json_object_set_new(o, "path", inspect_json_str(path)) ||
        json_object_set_new(o, "ir_version", json_integer(graft_model_ir_version(m))) ||
        json_object_set_new(o, "producer", inspect_json_str(graft_model_producer(m))) ||
        json_object_set_new(o, "graph", inspect_json_str(graft_graph_name(g))))
        goto fail;

    sub = json_object();
    if (!sub)
        goto fail;
    for (size_t i = 0; i < graft_model_opset_count(m); i++) {
        const char *domain = NULL;
        int64_t version = 0;
        if (graft_model_opset(m, i, &domain, &version) &&
            inspect_json_setk(sub, inspect_domain_name(domain), json_integer(version)))
            goto fail;
    }
    if (inspect_json_move(o, "opsets", &sub))
        goto fail;

    sub = json_object();
    if (!sub)
        goto fail;
    for (size_t i = 0; i < graft_model_metadata_count(m); i++) {
        const char *key = NULL, *value = NULL;
        if (graft_model_metadata(m, i, &key, &value) && key &&
            inspect_json_setk(sub, key, inspect_json_str(value)))
            goto fail;
    }
    if (inspect_json_move(o, "metadata", &sub))
        goto fail;

    for (int side = 0; side < 2; side++) {
        size_t count = side ? graft_graph_output_count(g) : graft_graph_input_count(g);
        sub = json_array();
        if (!sub)
            goto fail;
        for (size_t i = 0; i < count; i++) {
            if (!(side ? graft_graph_output(g, i, &vi) : graft_graph_input(g, i, &vi)))
                continue;
            if (json_array_append_new(sub, inspect_value_build(&vi)))
                goto fail;
        }
        if (inspect_json_move(o, side ? "outputs" : "inputs", &sub))
            goto fail;
    }

    s = inspect_stats_build(o, g, err);
    if (s != GRAFT_OK)
        goto done;
    s = GRAFT_ENOMEM;

    sub = json_array();
    if (!sub)
        goto fail;
    for (size_t i = 0; i < graft_model_external_file_count(m); i++) {
        uint64_t size = 0;
        const char *name = graft_model_external_file(m, i, &size);
        e = json_object();
        if (!e || json_object_set_new(e, "file", inspect_json_str(name)) ||
            json_object_set_new(e, "size", inspect_json_u64(size)))
            goto fail;
        if (json_array_append_new(sub, e)) {
            e = NULL;
            goto fail;
        }
        e = NULL;
    }
    if (inspect_json_move(o, "external_data", &sub))
        goto fail;

    s = inspect_kv_build(o, g, tmpl, err);
    if (s != GRAFT_OK)
        goto done;
    *out = o;
    o = NULL;
    goto done;
fail:
    graft_cli_error_set(err, s, "out of memory");
done:
    json_decref(e);
    json_decref(sub);
    json_decref(o);
    graft_model_free(m);
    return s;
}

/* ------------------------------------------------------------ pipelines */

/* Joins dir and name into a new string (owned); NULL on allocation failure. */
static char *inspect_path_join(const char *dir, const char *name)
{
    size_t nd = strlen(dir), nn = strlen(name);
    char *p = malloc(nd + nn + 2);

    if (!p)
        return NULL;
    memcpy(p, dir, nd);
    if (nd && dir[nd - 1] != '/')
        p[nd++] = '/';
    memcpy(p + nd, name, nn + 1);
    return p;
}

/* A config's filename must stay inside the pipeline directory. */
static int inspect_filename_ok(const char *name)
{
    const char *p = name;

    if (!name[0] || name[0] == '/')
        return 0;
    while (*p) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return 0;
        p += n;
        if (*p == '/')
            p++;
    }
    return 1;
}

/* A KV template: exactly one "%d" and no other '%'. */
static int inspect_template_ok(const char *t)
{
    const char *pct = strchr(t, '%');
    return pct && pct[1] == 'd' && !strchr(pct + 2, '%');
}

/* Reads the section's KV templates (ONNX Runtime GenAI's past_key_names,
 * past_value_names in "inputs", present_key_names, present_value_names in
 * "outputs") into tmpl, defaults where absent. Borrowed from section. */
static graft_status inspect_templates_read(json_t *section, const char *where, const char *cfg,
                                           const char *tmpl[4], graft_error *err)
{
    static const char *const keys[4] = {"past_key_names", "past_value_names",
                                        "present_key_names", "present_value_names"};

    for (int k = 0; k < 4; k++) {
        const char *side = k < 2 ? "inputs" : "outputs";
        json_t *map = json_object_get(section, side);
        json_t *v = json_is_object(map) ? json_object_get(map, keys[k]) : NULL;

        tmpl[k] = inspect_kv_defaults[k];
        if (!v)
            continue;
        if (!json_is_string(v) || !inspect_template_ok(json_string_value(v)))
            return graft_cli_error_set(err, GRAFT_EINVAL,
                                       "%s: %s.%s.%s must be a string with one %%d", cfg, where,
                                       side, keys[k]);
        tmpl[k] = json_string_value(v);
    }
    return GRAFT_OK;
}

/* Notes where the section's inputs/outputs name maps name values the graph
 * lacks (ONNX Runtime GenAI treats many as optional, so these are notes). */
static graft_status inspect_section_check(json_t *entry, json_t *section, json_t *model,
                                          graft_error *err)
{
    json_t *notes = json_array(), *n;
    const char *key;
    json_t *v;

    if (!notes)
        goto fail;
    for (int side = 0; side < 2; side++) {
        const char *label = side ? "outputs" : "inputs";
        json_t *map = json_object_get(section, label);
        json_t *have = json_object_get(model, label);

        if (!json_is_object(map))
            continue;
        json_object_foreach(map, key, v) {
            size_t i;
            json_t *io;
            int found = 0;

            if (!json_is_string(v) || strchr(json_string_value(v), '%'))
                continue;
            json_array_foreach(have, i, io) {
                const char *name = json_string_value(json_object_get(io, "name"));
                if (name && strcmp(name, json_string_value(v)) == 0)
                    found = 1;
            }
            if (found)
                continue;
            n = json_pack("{s:s, s:s, s:O}", "map", label, "key", key, "name", v);
            if (!n || json_array_append_new(notes, n))
                goto fail;
        }
    }
    if (json_object_set_new(entry, "unmatched_names", notes))
        return graft_cli_error_set(err, GRAFT_ENOMEM, "out of memory");
    return GRAFT_OK;
fail:
    json_decref(notes);
    return graft_cli_error_set(err, GRAFT_ENOMEM, "out of memory");
}

/* One section (role, section object): loads its model and appends
 * {"role", "filename", "model", "unmatched_names"} to `models`. */
static graft_status inspect_section_build(json_t *models, const char *dir, const char *cfg,
                                          const char *role, json_t *section, graft_error *err)
{
    json_t *fn = json_object_get(section, "filename");
    json_t *entry = NULL, *model = NULL;
    const char *tmpl[4];
    char *path = NULL;
    graft_status s;

    if (!json_is_string(fn) || !inspect_filename_ok(json_string_value(fn))) {
        s = graft_cli_error_set(err, GRAFT_EINVAL,
                                "%s: model.%s.filename must be a relative path inside the "
                                "pipeline directory",
                                cfg, role);
        goto done;
    }
    s = inspect_templates_read(section, role, cfg, tmpl, err);
    if (s != GRAFT_OK)
        goto done;
    s = GRAFT_ENOMEM;
    path = inspect_path_join(dir, json_string_value(fn));
    if (!path)
        goto fail;
    s = inspect_model_build(path, tmpl, &model, err);
    if (s != GRAFT_OK)
        goto done;
    s = GRAFT_ENOMEM;
    entry = json_pack("{s:s, s:O}", "role", role, "filename", fn);
    if (!entry)
        goto fail;
    s = inspect_section_check(entry, section, model, err);
    if (s != GRAFT_OK)
        goto done;
    s = GRAFT_ENOMEM;
    if (inspect_json_move(entry, "model", &model))
        goto fail;
    if (json_array_append_new(models, entry)) {
        entry = NULL;
        goto fail;
    }
    entry = NULL;
    s = GRAFT_OK;
    goto done;
fail:
    graft_cli_error_set(err, s, "out of memory");
done:
    json_decref(model);
    json_decref(entry);
    free(path);
    return s;
}

/* Copies the config values worth showing (those present) into summary. */
static int inspect_config_summary(json_t *summary, json_t *model)
{
    static const char *const top[] = {"type", "context_length", "vocab_size", "bos_token_id",
                                      "eos_token_id", "pad_token_id"};
    static const char *const dec[] = {"num_hidden_layers", "num_attention_heads",
                                      "num_key_value_heads", "head_size", "hidden_size"};
    json_t *decoder = json_object_get(model, "decoder");

    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) {
        json_t *v = json_object_get(model, top[i]);
        if (v && json_object_set(summary, top[i], v))
            return -1;
    }
    for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++) {
        json_t *v = json_is_object(decoder) ? json_object_get(decoder, dec[i]) : NULL;
        if (v && json_object_set(summary, dec[i], v))
            return -1;
    }
    return 0;
}

/* Reads dir/genai_config.json and reports every section that names a model
 * file, in the config's order (decoder pipeline stages as
 * "decoder.pipeline.<stage>"). *out owned by the caller. */
static graft_status inspect_pipeline_build(const char *dir, json_t **out, graft_error *err)
{
    json_t *cfg_json = NULL, *o = NULL, *summary = NULL, *models = NULL, *model, *section;
    json_error_t jerr;
    char *cfg = NULL;
    char role[256];
    const char *key;
    struct stat sb;
    graft_status s = GRAFT_ENOMEM;

    *out = NULL;
    cfg = inspect_path_join(dir, INSPECT_CONFIG_NAME);
    if (!cfg)
        goto fail;
    if (stat(cfg, &sb) != 0 && errno == ENOENT) {
        s = graft_cli_error_set(err, GRAFT_EINVAL,
                                "%s: not a pipeline directory (no " INSPECT_CONFIG_NAME ")", dir);
        goto done;
    }
    cfg_json = json_load_file(cfg, JSON_REJECT_DUPLICATES, &jerr);
    if (!cfg_json) {
        switch (json_error_code(&jerr)) {
        case json_error_out_of_memory:
            goto fail;
        case json_error_cannot_open_file:
            s = graft_cli_error_set(err, GRAFT_EIO, "%s: %s", cfg, jerr.text);
            goto done;
        default:
            s = graft_cli_error_set(err, GRAFT_EINVAL,
                                    "%s: invalid JSON at line %d, column %d: %s", cfg,
                                    jerr.line, jerr.column, jerr.text);
            goto done;
        }
    }
    model = json_object_get(cfg_json, "model");
    if (!json_is_object(model)) {
        s = graft_cli_error_set(err, GRAFT_EINVAL, "%s: no \"model\" object", cfg);
        goto done;
    }
    summary = json_pack("{s:s}", "file", cfg);
    models = json_array();
    if (!summary || !models || inspect_config_summary(summary, model))
        goto fail;

    json_object_foreach(model, key, section) {
        json_t *stages;
        size_t i;
        json_t *stage;

        if (!json_is_object(section))
            continue;
        if (json_object_get(section, "filename")) {
            s = inspect_section_build(models, dir, cfg, key, section, err);
            if (s != GRAFT_OK)
                goto done;
        }
        /* ONNX Runtime GenAI decoder pipelines: [{"stage": {"filename": ...}}, ...] */
        stages = json_object_get(section, "pipeline");
        json_array_foreach(stages, i, stage) {
            const char *name;
            json_t *st;

            json_object_foreach(stage, name, st) {
                if (!json_is_object(st) || !json_object_get(st, "filename"))
                    continue;
                snprintf(role, sizeof role, "%s.pipeline.%s", key, name);
                s = inspect_section_build(models, dir, cfg, role, st, err);
                if (s != GRAFT_OK)
                    goto done;
            }
        }
    }
    if (json_array_size(models) == 0) {
        s = graft_cli_error_set(err, GRAFT_EINVAL, "%s: no model section names a filename",
                                cfg);
        goto done;
    }
    s = GRAFT_ENOMEM;
    o = json_pack("{s:s, s:s, s:O, s:O}", "kind", "pipeline", "path", dir, "config", summary,
                  "models", models);
    if (!o)
        goto fail;
    *out = o;
    s = GRAFT_OK;
    goto done;
fail:
    graft_cli_error_set(err, s, "out of memory");
done:
    json_decref(models);
    json_decref(summary);
    json_decref(cfg_json);
    free(cfg);
    return s;
}

/* ------------------------------------------------------------ human output */

static void inspect_bytes_print(uint64_t b)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = -1;

    if (b < 1024) {
        printf("%llu B", (unsigned long long)b);
        return;
    }
    while (v >= 1024 && u < 3) {
        v /= 1024;
        u++;
    }
    printf("%.1f %s", v, units[u]);
}

static const char *inspect_plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

static const char *inspect_jstr(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static uint64_t inspect_jint(json_t *o, const char *key)
{
    json_int_t v = json_integer_value(json_object_get(o, key));
    return v > 0 ? (uint64_t)v : 0;
}

/* A dim or any scalar: number, name, or "?". Returns the width printed. */
static int inspect_scalar_print(json_t *v)
{
    if (json_is_integer(v))
        return printf("%lld", (long long)json_integer_value(v));
    if (json_is_string(v)) {
        graft_cli_print_escaped(stdout, json_string_value(v));
        return (int)strlen(json_string_value(v));
    }
    if (json_is_true(v))
        return printf("true");
    if (json_is_false(v))
        return printf("false");
    return printf("?");
}

static void inspect_pad(int n)
{
    if (n > 0)
        printf("%*s", n, "");
}

/* Widens *wn and *wt to the longest name and dtype in arr. */
static void inspect_values_width(json_t *arr, size_t *wn, size_t *wt)
{
    size_t i;
    json_t *v;

    json_array_foreach(arr, i, v) {
        const char *name = inspect_jstr(v, "name"), *dt = inspect_jstr(v, "dtype");
        size_t ln = name ? strlen(name) : 0, lt = dt ? strlen(dt) : 1;
        *wn = ln > *wn ? ln : *wn;
        *wt = lt > *wt ? lt : *wt;
    }
    if (*wn > 48)
        *wn = 48;
}

static void inspect_values_print(const char *title, json_t *arr, size_t wn, size_t wt)
{
    size_t i;
    json_t *v, *d;

    printf("%s (%zu)\n", title, json_array_size(arr));
    json_array_foreach(arr, i, v) {
        const char *name = inspect_jstr(v, "name"), *dt = inspect_jstr(v, "dtype");
        json_t *shape = json_object_get(v, "shape");
        size_t j;

        printf("  ");
        graft_cli_print_escaped(stdout, name);
        inspect_pad((int)wn - (int)(name ? strlen(name) : 0));
        printf("  %-*s  ", (int)wt, dt ? dt : "?");
        if (!json_is_array(shape)) {
            printf("shape unknown\n");
            continue;
        }
        printf("[");
        json_array_foreach(shape, j, d) {
            if (j)
                printf(", ");
            inspect_scalar_print(d);
        }
        printf("%s]\n", json_is_true(json_object_get(v, "truncated")) ? ", ..." : "");
    }
}

/* "  label   a 1, b 2, ..." wrapped at about 96 columns. */
static void inspect_counts_print(const char *label, json_t *counts)
{
    const char *key;
    json_t *v;
    int col = 16, first = 1;

    printf("  ");
    graft_cli_print_escaped(stdout, label);
    inspect_pad(14 - (int)strlen(label));
    json_object_foreach(counts, key, v) {
        char num[32];
        int w = snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v)) + 1 +
                (int)strlen(key);

        if (!first && col + 2 + w > 96) {
            printf(",\n%16s", "");
            col = 16;
        } else if (!first) {
            printf(", ");
            col += 2;
        }
        graft_cli_print_escaped(stdout, key);
        printf(" %s", num);
        col += w;
        first = 0;
    }
    printf("\n");
}

static void inspect_model_print(json_t *m)
{
    json_t *v, *kv, *layers, *inits;
    const char *key, *producer = inspect_jstr(m, "producer"), *graph = inspect_jstr(m, "graph");
    size_t i, wn = 4, wt = 1;
    int first = 1;

    printf("model         ");
    graft_cli_print_escaped(stdout, inspect_jstr(m, "path"));
    printf("\nproducer      ");
    graft_cli_print_escaped(stdout, producer && producer[0] ? producer : "?");
    printf("\nformat        IR %lld, opsets ",
           (long long)json_integer_value(json_object_get(m, "ir_version")));
    json_object_foreach(json_object_get(m, "opsets"), key, v) {
        printf("%s", first ? "" : ", ");
        graft_cli_print_escaped(stdout, key);
        printf(" %lld", (long long)json_integer_value(v));
        first = 0;
    }
    printf("%s\ngraph         ", first ? "none" : "");
    graft_cli_print_escaped(stdout, graph && graph[0] ? graph : "(unnamed)");
    printf(", %llu node%s", (unsigned long long)inspect_jint(m, "node_count"),
           inspect_plural(inspect_jint(m, "node_count")));
    if (inspect_jint(m, "subgraph_count"))
        printf(" (%llu subgraphs included)", (unsigned long long)inspect_jint(m, "subgraph_count"));
    printf("\n");
    json_object_foreach(json_object_get(m, "metadata"), key, v) {
        printf("metadata      ");
        graft_cli_print_escaped(stdout, key);
        printf(" = ");
        graft_cli_print_escaped(stdout, json_string_value(v));
        printf("\n");
    }

    printf("\n");
    inspect_values_width(json_object_get(m, "inputs"), &wn, &wt);
    inspect_values_width(json_object_get(m, "outputs"), &wn, &wt);
    inspect_values_print("inputs", json_object_get(m, "inputs"), wn, wt);
    inspect_values_print("outputs", json_object_get(m, "outputs"), wn, wt);

    printf("\nops (%llu node%s)\n", (unsigned long long)inspect_jint(m, "node_count"),
           inspect_plural(inspect_jint(m, "node_count")));
    json_object_foreach(json_object_get(m, "ops"), key, v)
        inspect_counts_print(key, v);

    inits = json_object_get(m, "initializers");
    printf("\nweights       %llu initializer%s, ", (unsigned long long)inspect_jint(inits, "count"),
           inspect_plural(inspect_jint(inits, "count")));
    inspect_bytes_print(inspect_jint(inits, "bytes"));
    if (inspect_jint(inits, "external_bytes")) {
        printf(" (");
        inspect_bytes_print(inspect_jint(inits, "external_bytes"));
        printf(" external)");
    }
    printf("\n");
    json_object_foreach(json_object_get(inits, "by_dtype"), key, v) {
        printf("  %-12s%llu tensor%s, ", key, (unsigned long long)inspect_jint(v, "count"),
               inspect_plural(inspect_jint(v, "count")));
        inspect_bytes_print(inspect_jint(v, "bytes"));
        printf("\n");
    }
    json_array_foreach(json_object_get(m, "external_data"), i, v) {
        printf("%s", i ? "              " : "external data ");
        graft_cli_print_escaped(stdout, inspect_jstr(v, "file"));
        printf("  ");
        inspect_bytes_print(inspect_jint(v, "size"));
        printf(" (%llu bytes)\n", (unsigned long long)inspect_jint(v, "size"));
    }

    kv = json_object_get(m, "kv");
    layers = json_object_get(kv, "layers");
    printf("\nkv cache      ");
    if (json_array_size(layers) == 0) {
        printf("none: no input named like ");
        graft_cli_print_escaped(stdout, inspect_jstr(json_object_get(kv, "templates"), "past_key"));
        printf(", no output named like ");
        graft_cli_print_escaped(stdout,
                                inspect_jstr(json_object_get(kv, "templates"), "present_key"));
        printf("\n");
        return;
    }
    printf("%zu layer%s, %llu with a cache (", json_array_size(layers),
           inspect_plural(json_array_size(layers)),
           (unsigned long long)inspect_jint(kv, "cached_layers"));
    graft_cli_print_escaped(stdout, inspect_jstr(json_object_get(kv, "templates"), "past_key"));
    printf(" -> ");
    graft_cli_print_escaped(stdout, inspect_jstr(json_object_get(kv, "templates"), "present_key"));
    printf(")\n  layer  cache  kv_heads  head_dim  v_head_dim  dtype\n");
    json_array_foreach(layers, i, v) {
        printf("  %-5lld  %-5s  ", (long long)json_integer_value(json_object_get(v, "layer")),
               json_is_true(json_object_get(v, "cache")) ? "yes" : "no");
        inspect_pad(8 - inspect_scalar_print(json_object_get(v, "kv_heads")));
        printf("  ");
        inspect_pad(8 - inspect_scalar_print(json_object_get(v, "head_dim")));
        printf("  ");
        inspect_pad(10 - inspect_scalar_print(json_object_get(v, "value_head_dim")));
        printf("  ");
        inspect_scalar_print(json_object_get(v, "dtype"));
        printf("\n");
    }
}

static void inspect_pipeline_print(json_t *p)
{
    json_t *cfg = json_object_get(p, "config"), *v, *models = json_object_get(p, "models");
    const char *key;
    size_t i, wr = 4;
    int first = 1;

    printf("pipeline      ");
    graft_cli_print_escaped(stdout, inspect_jstr(p, "path"));
    printf("\nconfig        ");
    graft_cli_print_escaped(stdout, inspect_jstr(cfg, "file"));
    printf("\n");
    json_object_foreach(cfg, key, v) {
        if (strcmp(key, "file") == 0)
            continue;
        /* one line per group: model-wide values, then the decoder's */
        if (first || strcmp(key, "num_hidden_layers") == 0)
            printf("%s              ", first ? "" : "\n");
        else
            printf(", ");
        printf("%s ", key);
        if (json_is_array(v)) {
            size_t j;
            json_t *e;
            printf("[");
            json_array_foreach(v, j, e) {
                printf("%s", j ? ", " : "");
                inspect_scalar_print(e);
            }
            printf("]");
        } else {
            inspect_scalar_print(v);
        }
        first = 0;
    }
    if (!first)
        printf("\n");
    json_array_foreach(models, i, v) {
        size_t n = strlen(inspect_jstr(v, "role"));
        wr = n > wr ? n : wr;
    }
    json_array_foreach(models, i, v) {
        printf("%s", i ? "              " : "sections      ");
        graft_cli_print_escaped(stdout, inspect_jstr(v, "role"));
        inspect_pad((int)wr - (int)strlen(inspect_jstr(v, "role")));
        printf("  ");
        graft_cli_print_escaped(stdout, inspect_jstr(v, "filename"));
        printf("\n");
    }
    json_array_foreach(models, i, v) {
        size_t j;
        json_t *n;

        printf("\n== ");
        graft_cli_print_escaped(stdout, inspect_jstr(v, "role"));
        printf("\n");
        json_array_foreach(json_object_get(v, "unmatched_names"), j, n) {
            printf("note          config %s.", inspect_jstr(n, "map"));
            graft_cli_print_escaped(stdout, inspect_jstr(n, "key"));
            printf(" names '");
            graft_cli_print_escaped(stdout, inspect_jstr(n, "name"));
            printf("', which is not a graph %s\n",
                   strcmp(inspect_jstr(n, "map"), "inputs") == 0 ? "input" : "output");
        }
        inspect_model_print(json_object_get(v, "model"));
    }
}

/* ------------------------------------------------------------ command */

int graft_cli_inspect(int argc, char **argv)
{
    const char *path = NULL;
    int json = 0, opts_done = 0, rc = 1;
    json_t *report = NULL;
    graft_error err;
    graft_status s;
    struct stat sb;

    memset(&err, 0, sizeof err);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && strcmp(a, "--") == 0) {
            opts_done = 1;
        } else if (!opts_done && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            fputs(inspect_usage, stdout);
            return 0;
        } else if (!opts_done && strcmp(a, "--json") == 0) {
            json = 1;
        } else if (!opts_done && a[0] == '-' && a[1]) {
            return graft_cli_usage_error("inspect", "unknown option '%s'", a);
        } else if (path) {
            return graft_cli_usage_error("inspect", "one PATH at a time");
        } else {
            path = a;
        }
    }
    if (!path)
        return graft_cli_usage_error("inspect", "missing PATH (an .onnx file or a pipeline "
                                                "directory)");

    if (stat(path, &sb) != 0) {
        int e = errno;
        fprintf(stderr, "graft inspect: ");
        graft_cli_print_escaped(stderr, path);
        fprintf(stderr, ": %s\n", strerror(e));
        return (e == ENOENT || e == ENOTDIR) ? 2 : 1;
    }
    if (S_ISDIR(sb.st_mode)) {
        s = inspect_pipeline_build(path, &report, &err);
    } else {
        json_t *model = NULL;

        s = inspect_model_build(path, inspect_kv_defaults, &model, &err);
        if (s == GRAFT_OK) {
            report = json_pack("{s:s}", "kind", "model");
            if (!report || json_object_update(report, model))
                s = graft_cli_error_set(&err, GRAFT_ENOMEM, "out of memory");
        }
        json_decref(model);
    }
    if (s != GRAFT_OK) {
        rc = graft_cli_fail("inspect", s, &err);
        goto done;
    }
    if (json) {
        if (json_dumpf(report, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0 ||
            putchar('\n') == EOF) {
            perror("graft inspect: writing output");
            goto done;
        }
    } else if (strcmp(json_string_value(json_object_get(report, "kind")), "pipeline") == 0) {
        inspect_pipeline_print(report);
    } else {
        inspect_model_print(report);
    }
    rc = 0;
done:
    json_decref(report);
    return rc;
}
