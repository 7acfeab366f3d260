/* Constant folding of what the baked inputs feed: a node whose inputs are
 * all constants (initializers or Constant nodes), at least one derived
 * from a seed, is evaluated on the CPU kernels and replaced by
 * initializers. Weights that no seed reaches are never touched, so nothing
 * large is materialised. */
#include <stdlib.h>
#include <string.h>

#include "compose/cp.h"

typedef struct strset {
    char **v;
    size_t n, cap;
} strset;

static bool ss_has(const strset *s, const char *x)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], x) == 0) return true;
    return false;
}

static bool ss_add(strset *s, const char *x)
{
    if (ss_has(s, x)) return true;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        char **p = realloc(s->v, nc * sizeof *p);
        if (!p) return false;
        s->v = p;
        s->cap = nc;
    }
    return (s->v[s->n] = strdup(x)) ? (s->n++, true) : false;
}

static void ss_free(strset *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
}

static bool is_constant_node(graft_node *p)
{
    return p && strcmp(graft_node_op_type(p), "Constant") == 0 && !*graft_node_domain(p) &&
           graft_node_input_count(p) == 0;
}

/* Value of a constant `name` into *a (owned data). */
static graft_status const_value(graft_model *m, graft_graph *g, const char *name, graft_array *a,
                                graft_error *err)
{
    memset(a, 0, sizeof *a);
    graft_tensor *t = graft_graph_find_initializer(g, name);
    if (t) {
        if (graft_tensor_rank(t) > GRAFT_MAX_RANK)
            return cp_err(err, GRAFT_EUNSUPPORTED, "constant '%s' has rank %d", name, graft_tensor_rank(t));
        a->dtype = graft_tensor_dtype(t);
        a->rank = graft_tensor_rank(t);
        memcpy(a->dims, graft_tensor_dims(t), (size_t)a->rank * sizeof(int64_t));
        a->nbytes = (size_t)graft_tensor_nbytes(t);
        if (!(a->data = malloc(a->nbytes ? a->nbytes : 1))) return cp_err(err, GRAFT_ENOMEM, "out of memory");
        return graft_tensor_read(t, a->data, a->nbytes, err);
    }
    graft_node *p = graft_graph_producer(g, name);
    return graft_node_eval(m, g, p, NULL, 0, a, 1, err);
}

graft_status cp_fold(graft_model *m, const char *const *seeds, size_t n_seeds, size_t *folded,
                     graft_error *err)
{
    graft_graph *g = graft_model_graph(m);
    graft_status rc = graft_graph_toposort(g, err);
    strset tainted = {0};
    *folded = 0;
    if (rc != GRAFT_OK) return rc;
    for (size_t i = 0; i < n_seeds; i++)
        if (!ss_add(&tainted, seeds[i])) return cp_err(err, GRAFT_ENOMEM, "out of memory");
    size_t i = 0;
    while (i < graft_graph_node_count(g)) {
        graft_node *n = graft_graph_node(g, i);
        size_t nin = graft_node_input_count(n), nout = graft_node_output_count(n);
        bool all_const = nin > 0 && graft_node_subgraph_count(n) == 0, any_taint = false;
        for (size_t j = 0; j < nin && all_const; j++) {
            const char *in = graft_node_input(n, j);
            if (!*in) continue;
            if (!graft_graph_find_initializer(g, in) && !is_constant_node(graft_graph_producer(g, in)))
                all_const = false;
            if (ss_has(&tainted, in)) any_taint = true;
        }
        if (!all_const || !any_taint) {
            i++;
            continue;
        }
        graft_array *ins = calloc(nin + 1, sizeof *ins), *outs = calloc(nout + 1, sizeof *outs);
        if (!ins || !outs) {
            free(ins);
            free(outs);
            rc = cp_err(err, GRAFT_ENOMEM, "out of memory");
            goto done;
        }
        for (size_t j = 0; j < nin && rc == GRAFT_OK; j++) {
            const char *in = graft_node_input(n, j);
            if (!*in) {
                ins[j].rank = -1;
                continue;
            }
            rc = const_value(m, g, in, &ins[j], err);
        }
        if (rc == GRAFT_OK) rc = graft_node_eval(m, g, n, ins, nin, outs, nout, err);
        if (rc == GRAFT_OK) {
            char **names = calloc(nout + 1, sizeof *names);
            for (size_t j = 0; names && j < nout; j++) names[j] = strdup(graft_node_output(n, j));
            graft_node_remove(g, n); /* n is gone from here on */
            for (size_t j = 0; j < nout && rc == GRAFT_OK; j++) {
                if (!names || !names[j]) {
                    rc = cp_err(err, GRAFT_ENOMEM, "out of memory");
                    break;
                }
                if (!*names[j] || outs[j].rank < 0) continue;
                if (!graft_graph_add_initializer(g, names[j], outs[j].dtype, outs[j].dims, outs[j].rank,
                                                 outs[j].data, outs[j].nbytes, err))
                    rc = err ? err->code : GRAFT_EINVAL;
                else if (!ss_add(&tainted, names[j]))
                    rc = cp_err(err, GRAFT_ENOMEM, "out of memory");
            }
            for (size_t j = 0; names && j < nout; j++) free(names[j]);
            free(names);
            (*folded)++;
        } else {
            i++; /* cannot evaluate: leave the node */
            if (rc == GRAFT_EUNSUPPORTED) rc = GRAFT_OK;
        }
        for (size_t j = 0; j < nin; j++) free(ins[j].data);
        for (size_t j = 0; j < nout; j++) free(outs[j].data);
        free(ins);
        free(outs);
        if (rc != GRAFT_OK) goto done;
    }
done:
    ss_free(&tainted);
    return rc;
}
