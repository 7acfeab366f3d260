/* Graph interface edits and model merging (the IR side of compose). */
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>

#include "onnx/internal.h"

/* ------------------------------------------------------------ interface edits */

static Onnx__ValueInfoProto *vi_new(const graft_value_info *vi)
{
    Onnx__ValueInfoProto *v = malloc(sizeof *v);
    Onnx__TypeProto *tp = malloc(sizeof *tp);
    Onnx__TypeProto__Tensor *tt = malloc(sizeof *tt);
    Onnx__TensorShapeProto *sh = vi->rank >= 0 ? malloc(sizeof *sh) : NULL;
    if (!v || !tp || !tt || (vi->rank >= 0 && !sh)) goto fail;
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    v->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = vi->dtype;
    tp = NULL;
    tt = NULL;
    if (!(v->name = ox_strdup(vi->name))) goto fail;
    if (sh) {
        onnx__tensor_shape_proto__init(sh);
        v->type->tensor_type->shape = sh;
        int r = vi->rank > GRAFT_MAX_RANK ? GRAFT_MAX_RANK : vi->rank;
        sh->dim = calloc((size_t)r + 1, sizeof *sh->dim);
        if (!sh->dim) goto fail;
        for (int i = 0; i < r; i++) {
            Onnx__TensorShapeProto__Dimension *d = malloc(sizeof *d);
            if (!d) goto fail;
            onnx__tensor_shape_proto__dimension__init(d);
            sh->dim[sh->n_dim++] = d;
            if (vi->dims[i].value >= 0) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = vi->dims[i].value;
            } else if (vi->dims[i].param) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                if (!(d->dim_param = ox_strdup(vi->dims[i].param))) goto fail;
            }
        }
    }
    return v;
fail:
    free(tt);
    free(tp);
    if (v) onnx__value_info_proto__free_unpacked(v, NULL);
    else free(sh);
    return NULL;
}

static graft_status vi_append(Onnx__ValueInfoProto ***arr, size_t *n, const graft_value_info *vi,
                              graft_error *err)
{
    Onnx__ValueInfoProto *v = vi_new(vi);
    Onnx__ValueInfoProto **a = v ? realloc(*arr, (*n + 1) * sizeof **arr) : NULL;
    if (!a) {
        if (v) onnx__value_info_proto__free_unpacked(v, NULL);
        return ox_err(err, GRAFT_ENOMEM, "out of memory adding '%s'", vi->name);
    }
    a[(*n)++] = v;
    *arr = a;
    return GRAFT_OK;
}

static int vi_remove(Onnx__ValueInfoProto **arr, size_t *n, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (arr[i]->name && strcmp(arr[i]->name, name) == 0) {
            onnx__value_info_proto__free_unpacked(arr[i], NULL);
            memmove(&arr[i], &arr[i + 1], (*n - i - 1) * sizeof *arr);
            (*n)--;
            return 1;
        }
    return 0;
}

graft_status graft_graph_add_input(graft_graph *g, const graft_value_info *vi, graft_error *err)
{
    return vi_append(&g->p->input, &g->p->n_input, vi, err);
}

graft_status graft_graph_add_output(graft_graph *g, const graft_value_info *vi, graft_error *err)
{
    return vi_append(&g->p->output, &g->p->n_output, vi, err);
}

int graft_graph_remove_input(graft_graph *g, const char *name)
{
    return vi_remove(g->p->input, &g->p->n_input, name);
}

int graft_graph_move_input(graft_graph *g, const char *name, size_t index)
{
    size_t n = g->p->n_input;
    for (size_t i = 0; i < n; i++)
        if (g->p->input[i]->name && strcmp(g->p->input[i]->name, name) == 0) {
            Onnx__ValueInfoProto *v = g->p->input[i];
            memmove(&g->p->input[i], &g->p->input[i + 1], (n - i - 1) * sizeof *g->p->input);
            if (index > n - 1) index = n - 1;
            memmove(&g->p->input[index + 1], &g->p->input[index], (n - 1 - index) * sizeof *g->p->input);
            g->p->input[index] = v;
            return 1;
        }
    return 0;
}

void graft_graph_move_nodes_front(graft_graph *g, size_t from)
{
    size_t n = g->p->n_node;
    if (from == 0 || from >= n) return;
    /* three reversals rotate [0, from) [from, n) to [from, n) [0, from) in place */
    Onnx__NodeProto **a = g->p->node;
    size_t spans[3][2] = {{0, from}, {from, n}, {0, n}};
    for (int s = 0; s < 3; s++)
        for (size_t i = spans[s][0], j = spans[s][1]; i + 1 < j; i++, j--) {
            Onnx__NodeProto *t = a[i];
            a[i] = a[j - 1];
            a[j - 1] = t;
        }
}

int graft_graph_remove_output(graft_graph *g, const char *name)
{
    return vi_remove(g->p->output, &g->p->n_output, name);
}

graft_status graft_graph_rename_output(graft_graph *g, const char *old_name, const char *new_name,
                                       graft_error *err)
{
    for (size_t i = 0; i < g->p->n_output; i++)
        if (g->p->output[i]->name && strcmp(g->p->output[i]->name, old_name) == 0) {
            char *d = ox_strdup(new_name);
            if (!d) return ox_err(err, GRAFT_ENOMEM, "out of memory");
            free(g->p->output[i]->name);
            g->p->output[i]->name = d;
            return GRAFT_OK;
        }
    return ox_err(err, GRAFT_EINVAL, "graph '%s' has no output '%s'", ox_s(g->p->name), old_name);
}

/* ------------------------------------------------------------ renaming */

typedef struct renamer {
    const char *prefix;
    ox_map keep;
    bool oom;
} renamer;

static void rn(renamer *r, char **s)
{
    if (!*s || !**s || ox_map_get(&r->keep, *s)) return;
    size_t a = strlen(r->prefix), b = strlen(*s);
    char *d = malloc(a + b + 1);
    if (!d) {
        r->oom = true;
        return;
    }
    memcpy(d, r->prefix, a);
    memcpy(d + a, *s, b + 1);
    free(*s);
    *s = d;
}

static void rn_graph(renamer *r, Onnx__GraphProto *g);

static void rn_vis(renamer *r, Onnx__ValueInfoProto **v, size_t n)
{
    for (size_t i = 0; i < n; i++) rn(r, &v[i]->name);
}

static void rn_nodes(renamer *r, Onnx__NodeProto **nodes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        Onnx__NodeProto *nd = nodes[i];
        rn(r, &nd->name);
        for (size_t j = 0; j < nd->n_input; j++) rn(r, &nd->input[j]);
        for (size_t j = 0; j < nd->n_output; j++) rn(r, &nd->output[j]);
        for (size_t k = 0; k < nd->n_attribute; k++) {
            Onnx__AttributeProto *a = nd->attribute[k];
            if (a->g) rn_graph(r, a->g);
            for (size_t s = 0; s < a->n_graphs; s++) rn_graph(r, a->graphs[s]);
        }
    }
}

static void rn_graph(renamer *r, Onnx__GraphProto *g)
{
    rn_vis(r, g->input, g->n_input);
    rn_vis(r, g->output, g->n_output);
    rn_vis(r, g->value_info, g->n_value_info);
    for (size_t i = 0; i < g->n_initializer; i++) rn(r, &g->initializer[i]->name);
    for (size_t i = 0; i < g->n_sparse_initializer; i++) {
        Onnx__SparseTensorProto *s = g->sparse_initializer[i];
        if (s->values) rn(r, &s->values->name);
        if (s->indices) rn(r, &s->indices->name);
    }
    rn_nodes(r, g->node, g->n_node);
}

/* ------------------------------------------------------------ absorb */

static bool append_ptrs(void ***dst, size_t *nd, void **src, size_t ns)
{
    if (!ns) return true;
    void **a = realloc(*dst, (*nd + ns) * sizeof *a);
    if (!a) return false;
    memcpy(a + *nd, src, ns * sizeof *a);
    *dst = a;
    *nd += ns;
    return true;
}

static const char *dom_norm(const char *d)
{
    d = ox_s(d);
    return strcmp(d, "ai.onnx") == 0 ? "" : d;
}

graft_status graft_graph_absorb(graft_graph *g, graft_model *src, const char *prefix,
                                const char *const *keep, size_t n_keep, graft_error *err)
{
    graft_model *dm = g->m;
    Onnx__GraphProto *sg = src->p->graph, *dg = g->p;
    graft_status rc = GRAFT_OK;
    renamer r = {prefix, {0}, false};
    int *remap = NULL;

    /* opsets first: nothing moves if they conflict */
    for (size_t i = 0; i < src->p->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *so = src->p->opset_import[i];
        int64_t dv = graft_model_opset_version(dm, dom_norm(so->domain));
        if (dv >= 0 && so->has_version && dv != so->version)
            return ox_err(err, GRAFT_EINVAL,
                          "%s imports domain '%s' at version %lld but %s at %lld; ops of that domain "
                          "could change meaning, refusing to merge", src->path,
                          *dom_norm(so->domain) ? dom_norm(so->domain) : "ai.onnx",
                          (long long)so->version, dm->path, (long long)dv);
    }
    for (size_t i = 0; i < src->p->n_functions; i++)
        for (size_t j = 0; j < dm->p->n_functions; j++)
            if (strcmp(ox_s(src->p->functions[i]->name), ox_s(dm->p->functions[j]->name)) == 0 &&
                strcmp(ox_s(src->p->functions[i]->domain), ox_s(dm->p->functions[j]->domain)) == 0)
                return ox_err(err, GRAFT_EINVAL, "%s and %s both define function '%s'", src->path,
                              dm->path, ox_s(src->p->functions[i]->name));
    for (size_t i = 0; i < src->p->n_opset_import; i++) {
        Onnx__OperatorSetIdProto *so = src->p->opset_import[i];
        if (graft_model_opset_version(dm, dom_norm(so->domain)) >= 0) continue;
        Onnx__OperatorSetIdProto **a =
            realloc(dm->p->opset_import, (dm->p->n_opset_import + 1) * sizeof *a);
        if (!a) return ox_err(err, GRAFT_ENOMEM, "out of memory");
        dm->p->opset_import = a;
        a[dm->p->n_opset_import++] = so;
        src->p->opset_import[i] = NULL;
    }
    {
        size_t w = 0;
        for (size_t i = 0; i < src->p->n_opset_import; i++)
            if (src->p->opset_import[i]) src->p->opset_import[w++] = src->p->opset_import[i];
        src->p->n_opset_import = w;
    }
    if (src->p->has_ir_version && (!dm->p->has_ir_version || src->p->ir_version > dm->p->ir_version)) {
        dm->p->has_ir_version = 1;
        dm->p->ir_version = src->p->ir_version;
    }

    /* rename everything in src that is not kept */
    for (size_t i = 0; i < n_keep; i++)
        if (!ox_map_put(&r.keep, keep[i], (void *)1)) goto nomem;
    rn_graph(&r, sg);
    if (r.oom) goto nomem;

    /* external data files: reuse dst's mapping of the same file */
    remap = calloc(src->n_ext + 1, sizeof *remap);
    if (!remap) goto nomem;
    for (size_t i = 0; i < src->n_ext; i++) {
        ox_extfile *e = &src->ext[i];
        struct stat a, b;
        int found = -1;
        if (fstat(e->fd, &a) == 0)
            for (size_t j = 0; j < dm->n_ext && found < 0; j++)
                if (fstat(dm->ext[j].fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
                    found = (int)j;
        if (found >= 0) {
            remap[i] = found;
            continue;
        }
        if (!ox_grow((void **)&dm->ext, &dm->cap_ext, dm->n_ext + 1, sizeof *dm->ext)) goto nomem;
        dm->ext[dm->n_ext] = *e;
        e->fd = -1;
        e->map = NULL;
        e->location = NULL;
        remap[i] = (int)dm->n_ext++;
    }
    /* tensor records follow their protos */
    for (size_t i = 0; i < src->tensors.cap; i++) {
        if (!src->tensors.keys || !src->tensors.keys[i]) continue;
        graft_tensor *t = src->tensors.vals[i];
        if (t->t.ext >= 0) {
            t->t.ext = remap[t->t.ext];
            t->t.location = dm->ext[t->t.ext].location;
        }
        if (!ox_pmap_put(&dm->tensors, t->t.p, t)) goto nomem;
        src->tensors.vals[i] = NULL; /* now dst's */
        src->tensors.keys[i] = NULL;
    }
    src->tensors.len = 0;
    /* src files mapped twice: drop src's mapping */
    for (size_t i = 0; i < src->n_ext; i++) {
        ox_extfile *e = &src->ext[i];
        if (e->map) munmap((void *)e->map, (size_t)e->size);
        if (e->fd >= 0) close(e->fd);
        free(e->location);
        e->map = NULL;
        e->fd = -1;
        e->location = NULL;
    }
    src->n_ext = 0;

    /* move the contents */
    if (!append_ptrs((void ***)&dg->node, &dg->n_node, (void **)sg->node, sg->n_node) ||
        !append_ptrs((void ***)&dg->initializer, &dg->n_initializer, (void **)sg->initializer,
                     sg->n_initializer) ||
        !append_ptrs((void ***)&dg->sparse_initializer, &dg->n_sparse_initializer,
                     (void **)sg->sparse_initializer, sg->n_sparse_initializer) ||
        !append_ptrs((void ***)&dg->value_info, &dg->n_value_info, (void **)sg->value_info,
                     sg->n_value_info) ||
        !append_ptrs((void ***)&dm->p->functions, &dm->p->n_functions, (void **)src->p->functions,
                     src->p->n_functions))
        goto nomem; /* cannot happen halfway in practice: each append is all or nothing */
    sg->n_node = sg->n_initializer = sg->n_sparse_initializer = sg->n_value_info = 0;
    src->p->n_functions = 0;
    /* subgraph wrappers of src now describe dst's protos: drop them */
    for (size_t i = 0; i < src->graphs.cap; i++) {
        if (!src->graphs.keys || !src->graphs.keys[i] || src->graphs.keys[i] == sg) continue;
        ox_graph_free(src->graphs.vals[i]);
        src->graphs.keys[i] = NULL;
        src->graphs.vals[i] = NULL;
        src->graphs.len--;
    }
    {
        graft_graph *w = ox_pmap_get(&src->graphs, sg);
        if (w) w->index_valid = false;
    }
    /* rebuild pmap of src graphs (deleted slots break probing) */
    {
        ox_pmap fresh = {0};
        for (size_t i = 0; i < src->graphs.cap; i++)
            if (src->graphs.keys && src->graphs.keys[i]) ox_pmap_put(&fresh, src->graphs.keys[i], src->graphs.vals[i]);
        ox_pmap_free(&src->graphs);
        src->graphs = fresh;
        ox_pmap fresh_t = {0};
        ox_pmap_free(&src->tensors);
        src->tensors = fresh_t;
    }
    g->index_valid = false;
    goto done;
nomem:
    rc = ox_err(err, GRAFT_ENOMEM, "out of memory merging %s into %s", src->path, dm->path);
done:
    free(remap);
    ox_map_free(&r.keep);
    return rc;
}
