/* Session: binds every node of a graph to a kernel once, holds one tensor
 * per value, runs the nodes in graph order. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/map.h"
#include "runtime/rt.h"

struct graft_session {
    graft_model *m;
    graft_graph *g;
    ox_map idx; /* value name -> index + 1 */
    rt_tensor **vals;
    size_t n_vals, cap_vals;
    rt_node *nodes;
    size_t n_nodes;
    size_t *in_idx, n_in; /* graph inputs */
    graft_value_info *in_info;
    bool *in_has_default; /* input also an initializer */
    size_t *out_idx, n_out;
    const char **out_names;
    void **consts; /* buffers materialised from typed fields */
    size_t n_consts, cap_consts;
    double *prof_s; /* GRAFT_PROFILE=1: seconds in each node over the runs */
    size_t prof_runs;
};

static graft_status nomem(graft_error *err, const char *what)
{
    if (err) {
        err->code = GRAFT_ENOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory (%s)", what);
    }
    return GRAFT_ENOMEM;
}

#define seterr rt_seterr

static bool grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, nc * elem);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

/* Index of the value named `name`, created when absent; SIZE_MAX on OOM. */
static size_t value_slot(graft_session *s, const char *name)
{
    size_t i = (size_t)(uintptr_t)ox_map_get(&s->idx, name);
    if (i) return i - 1;
    if (!grow((void **)&s->vals, &s->cap_vals, s->n_vals + 1, sizeof *s->vals)) return SIZE_MAX;
    rt_tensor *t = calloc(1, sizeof *t);
    if (!t) return SIZE_MAX;
    if (!ox_map_put(&s->idx, name, (void *)(uintptr_t)(s->n_vals + 1))) {
        free(t);
        return SIZE_MAX;
    }
    s->vals[s->n_vals] = t;
    return s->n_vals++;
}

static size_t anon_slot(graft_session *s)
{
    if (!grow((void **)&s->vals, &s->cap_vals, s->n_vals + 1, sizeof *s->vals)) return SIZE_MAX;
    rt_tensor *t = calloc(1, sizeof *t);
    if (!t) return SIZE_MAX;
    s->vals[s->n_vals] = t;
    return s->n_vals++;
}

static graft_status bind_initializer(graft_session *s, graft_tensor *gt, graft_error *err)
{
    size_t vi = value_slot(s, graft_tensor_name(gt));
    if (vi == SIZE_MAX) return nomem(err, "values");
    return rt_bind_initializer(s->vals[vi], gt, &s->consts, &s->n_consts, &s->cap_consts, err);
}

graft_status graft_session_new(graft_model *m, graft_session **out, graft_error *err)
{
    *out = NULL;
    graft_status rc = GRAFT_OK;
    graft_session *s = calloc(1, sizeof *s);
    char *unsupported = NULL;
    size_t n_unsup = 0, unsup_len = 0;
    if (!s) return nomem(err, "session");
    s->m = m;
    s->g = graft_model_graph(m);
    graft_graph *g = s->g;

    /* graph inputs, then initializers (defaults for inputs of the same name) */
    s->n_in = graft_graph_input_count(g);
    s->in_idx = calloc(s->n_in + 1, sizeof *s->in_idx);
    s->in_info = calloc(s->n_in + 1, sizeof *s->in_info);
    s->in_has_default = calloc(s->n_in + 1, sizeof *s->in_has_default);
    if (!s->in_idx || !s->in_info || !s->in_has_default) goto oom;
    for (size_t i = 0; i < s->n_in; i++) {
        graft_graph_input(g, i, &s->in_info[i]);
        if ((s->in_idx[i] = value_slot(s, s->in_info[i].name)) == SIZE_MAX) goto oom;
    }
    for (size_t i = 0; i < graft_graph_initializer_count(g); i++) {
        graft_tensor *gt = graft_graph_initializer(g, i);
        if ((rc = bind_initializer(s, gt, err)) != GRAFT_OK) goto fail;
    }
    for (size_t i = 0; i < s->n_in; i++)
        s->in_has_default[i] = graft_graph_find_initializer(g, s->in_info[i].name) != NULL;

    /* nodes */
    s->n_nodes = graft_graph_node_count(g);
    s->nodes = calloc(s->n_nodes + 1, sizeof *s->nodes);
    const char *prof = getenv("GRAFT_PROFILE");
    if (prof && *prof && strcmp(prof, "0") != 0) s->prof_s = calloc(s->n_nodes + 1, sizeof *s->prof_s);
    if (!s->nodes) goto oom;
    for (size_t i = 0; i < s->n_nodes; i++) {
        rt_node *n = &s->nodes[i];
        graft_node *src = graft_graph_node(g, i);
        n->src = src;
        n->g = g;
        const char *dom = graft_node_domain(src), *op = graft_node_op_type(src);
        int64_t ver = graft_model_opset_version(m, dom);
        if (ver < 0 && *dom) ver = 1;
        n->opset = ver;
        n->k = rt_kernel_find(dom, op, ver);
        if (!n->k || graft_node_subgraph_count(src) > 0) {
            char item[300];
            int len = snprintf(item, sizeof item, "%s'%s' (%s%s%s, opset %lld)", n_unsup ? ", " : "",
                               graft_node_name(src), *dom ? dom : "", *dom ? "::" : "", op,
                               (long long)ver);
            if (len > 0 && grow((void **)&unsupported, &unsup_len, unsup_len + (size_t)len + 1, 1)) {
                size_t cur = n_unsup ? strlen(unsupported) : 0;
                memcpy(unsupported + cur, item, (size_t)len + 1);
            }
            n_unsup++;
            continue;
        }
        n->n_in = (int)graft_node_input_count(src);
        n->n_out = (int)graft_node_output_count(src);
        n->in = calloc((size_t)n->n_in + 1, sizeof *n->in);
        n->out = calloc((size_t)n->n_out + 1, sizeof *n->out);
        if (!n->in || !n->out) goto oom;
        for (int j = 0; j < n->n_in; j++) {
            const char *name = graft_node_input(src, (size_t)j);
            if (!*name) continue;
            size_t vi = (size_t)(uintptr_t)ox_map_get(&s->idx, name);
            if (!vi) {
                rc = seterr(err, GRAFT_EINVAL,
                            "%s: node '%s' (%s) reads '%s', which no graph input, initializer or "
                            "earlier node provides (graph not topologically sorted?)",
                            graft_model_path(m), graft_node_name(src), op, name);
                goto fail;
            }
            n->in[j] = s->vals[vi - 1];
        }
        for (int j = 0; j < n->n_out; j++) {
            const char *name = graft_node_output(src, (size_t)j);
            size_t vi = *name ? value_slot(s, name) : anon_slot(s);
            if (vi == SIZE_MAX) goto oom;
            n->out[j] = s->vals[vi];
        }
    }
    if (n_unsup) {
        rc = seterr(err, GRAFT_EUNSUPPORTED, "%s: %zu node%s without a kernel: %s", graft_model_path(m),
                    n_unsup, n_unsup == 1 ? "" : "s", unsupported ? unsupported : "");
        goto fail;
    }
    for (size_t i = 0; i < s->n_nodes; i++) {
        rt_node *n = &s->nodes[i];
        if (n->k->init && (rc = n->k->init(n, err)) != GRAFT_OK) goto fail;
    }
    s->n_out = graft_graph_output_count(g);
    s->out_idx = calloc(s->n_out + 1, sizeof *s->out_idx);
    s->out_names = calloc(s->n_out + 1, sizeof *s->out_names);
    if (!s->out_idx || !s->out_names) goto oom;
    for (size_t i = 0; i < s->n_out; i++) {
        graft_value_info vi;
        graft_graph_output(g, i, &vi);
        s->out_names[i] = vi.name;
        size_t k = (size_t)(uintptr_t)ox_map_get(&s->idx, vi.name);
        if (!k) {
            rc = seterr(err, GRAFT_EINVAL, "%s: graph output '%s' is produced by no node, input or initializer",
                        graft_model_path(m), vi.name);
            goto fail;
        }
        s->out_idx[i] = k - 1;
    }
    free(unsupported);
    *out = s;
    return GRAFT_OK;
oom:
    rc = nomem(err, "session");
fail:
    free(unsupported);
    graft_session_free(s);
    return rc;
}

/* GRAFT_PROFILE=1: the time of every run by op type, largest first, on
 * stderr when the session is freed. */
static void prof_report(const graft_session *s)
{
    if (!s->prof_s || !s->prof_runs) return;
    double total = 0.0;
    for (size_t i = 0; i < s->n_nodes; i++) total += s->prof_s[i];
    fprintf(stderr, "profile: %zu runs, %.3f ms a run in %zu nodes\n  %-34s %6s %10s %7s\n", s->prof_runs,
            1e3 * total / (double)s->prof_runs, s->n_nodes, "op", "nodes", "ms/run", "share");
    bool *done = calloc(s->n_nodes + 1, 1);
    while (done) {
        double best = -1.0;
        size_t bi = 0;
        for (size_t i = 0; i < s->n_nodes; i++) {
            if (done[i]) continue;
            double t = 0.0;
            for (size_t k = i; k < s->n_nodes; k++)
                if (!strcmp(rt_node_op(&s->nodes[k]), rt_node_op(&s->nodes[i]))) t += s->prof_s[k];
            if (t > best) best = t, bi = i;
        }
        if (best < 0.0) break;
        size_t cnt = 0;
        for (size_t k = bi; k < s->n_nodes; k++)
            if (!strcmp(rt_node_op(&s->nodes[k]), rt_node_op(&s->nodes[bi]))) done[k] = true, cnt++;
        fprintf(stderr, "  %-34s %6zu %10.4f %6.1f%%\n", rt_node_op(&s->nodes[bi]), cnt,
                1e3 * best / (double)s->prof_runs, total > 0 ? 100.0 * best / total : 0.0);
    }
    free(done);
}

void graft_session_free(graft_session *s)
{
    if (!s) return;
    prof_report(s);
    free(s->prof_s);
    for (size_t i = 0; i < s->n_nodes; i++) {
        rt_node *n = &s->nodes[i];
        if (n->k && n->k->fini) n->k->fini(n);
        else free(n->state);
        free(n->in);
        free(n->out);
    }
    free(s->nodes);
    for (size_t i = 0; i < s->n_vals; i++) {
        if (s->vals[i]->cap) free(s->vals[i]->data);
        free(s->vals[i]);
    }
    free(s->vals);
    for (size_t i = 0; i < s->n_consts; i++) free(s->consts[i]);
    free(s->consts);
    ox_map_free(&s->idx);
    free(s->in_idx);
    free(s->in_info);
    free(s->in_has_default);
    free(s->out_idx);
    free(s->out_names);
    free(s);
}

graft_status graft_session_set_input(graft_session *s, const char *name, const graft_array *a,
                                     graft_error *err)
{
    size_t i = 0;
    while (i < s->n_in && strcmp(s->in_info[i].name, name) != 0) i++;
    if (i == s->n_in)
        return seterr(err, GRAFT_EINVAL, "%s: the graph has no input '%s'", graft_model_path(s->m), name);
    const graft_value_info *vi = &s->in_info[i];
    if (vi->dtype && vi->dtype != a->dtype)
        return seterr(err, GRAFT_EINVAL, "input '%s': dtype %s given, the graph expects %s", name,
                      graft_dtype_name(a->dtype), graft_dtype_name(vi->dtype));
    if (a->rank < 0 || a->rank > RT_MAX_RANK)
        return seterr(err, GRAFT_EINVAL, "input '%s': rank %d unsupported", name, a->rank);
    if (vi->rank >= 0 && vi->rank != a->rank)
        return seterr(err, GRAFT_EINVAL, "input '%s': rank %d given, the graph expects %d", name, a->rank,
                      vi->rank);
    uint64_t numel = 1;
    for (int d = 0; d < a->rank; d++) {
        if (a->dims[d] < 0)
            return seterr(err, GRAFT_EINVAL, "input '%s': negative dimension %d", name, d);
        if (vi->rank >= 0 && d < GRAFT_MAX_RANK && vi->dims[d].value >= 0 && vi->dims[d].value != a->dims[d])
            return seterr(err, GRAFT_EINVAL, "input '%s': dimension %d is %lld, the graph fixes it at %lld",
                          name, d, (long long)a->dims[d], (long long)vi->dims[d].value);
        numel *= (uint64_t)a->dims[d];
    }
    int ovf = 0;
    uint64_t nb = graft_dtype_nbytes(a->dtype, numel, &ovf);
    if (ovf || nb != a->nbytes)
        return seterr(err, GRAFT_EINVAL, "input '%s': %zu bytes given, shape and dtype need %llu", name,
                      a->nbytes, (unsigned long long)nb);
    rt_tensor *t = s->vals[s->in_idx[i]];
    if (t->cap) free(t->data);
    t->cap = 0;
    t->dtype = a->dtype;
    t->rank = a->rank;
    memcpy(t->dims, a->dims, (size_t)a->rank * sizeof *a->dims);
    t->numel = numel;
    t->nbytes = (size_t)nb;
    t->data = a->data;
    t->present = true;
    return GRAFT_OK;
}

graft_status graft_session_run(graft_session *s, graft_error *err)
{
    for (size_t i = 0; i < s->n_in; i++)
        if (!s->vals[s->in_idx[i]]->present && !s->in_has_default[i])
            return seterr(err, GRAFT_EINVAL, "input '%s' was not set", s->in_info[i].name);
    for (size_t i = 0; i < s->n_nodes; i++) {
        rt_node *n = &s->nodes[i];
        double t0 = s->prof_s ? rt_now() : 0.0;
        graft_status rc = n->k->run(n, err);
        if (s->prof_s) s->prof_s[i] += rt_now() - t0;
        if (rc != GRAFT_OK) return rc;
    }
    if (s->prof_s) s->prof_runs++;
    return GRAFT_OK;
}

size_t graft_session_output_count(const graft_session *s) { return s->n_out; }

const char *graft_session_output_name(const graft_session *s, size_t i)
{
    return i < s->n_out ? s->out_names[i] : NULL;
}

int graft_session_output(const graft_session *s, const char *name, graft_array *a)
{
    for (size_t i = 0; i < s->n_out; i++) {
        if (strcmp(s->out_names[i], name) != 0) continue;
        const rt_tensor *t = s->vals[s->out_idx[i]];
        if (!t->present) return 0;
        memset(a, 0, sizeof *a);
        a->dtype = t->dtype;
        a->rank = t->rank;
        memcpy(a->dims, t->dims, (size_t)t->rank * sizeof *t->dims);
        a->data = t->data;
        a->nbytes = t->nbytes;
        return 1;
    }
    return 0;
}

static rt_tensor *output_tensor(graft_session *s, const char *name)
{
    for (size_t i = 0; i < s->n_out; i++)
        if (strcmp(s->out_names[i], name) == 0) return s->vals[s->out_idx[i]];
    return NULL;
}

int graft_session_swap_output(graft_session *s, const char *name, void **buf, size_t *cap)
{
    rt_tensor *t = output_tensor(s, name);
    if (!t || !t->cap) return 0;
    void *d = t->data;
    size_t c = t->cap;
    t->data = *buf;
    t->cap = *buf ? *cap : 0;
    *buf = d;
    *cap = c;
    return 1;
}

graft_status graft_session_reserve_output(graft_session *s, const char *name, size_t bytes,
                                          graft_error *err)
{
    rt_tensor *t = output_tensor(s, name);
    if (!t) return seterr(err, GRAFT_EINVAL, "no output '%s'", name);
    if (t->cap >= bytes) return GRAFT_OK;
    size_t alloc = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, alloc);
    if (!p) return seterr(err, GRAFT_ENOMEM, "out of memory reserving %zu bytes for '%s'", bytes, name);
    if (t->cap) free(t->data);
    t->data = p;
    t->cap = alloc;
    return GRAFT_OK;
}
