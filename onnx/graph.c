/* Graph IR over the unpacked GraphProto: value types, node and attribute
 * access, name indexes, and edit helpers (add, replace uses, remove,
 * topological order, dead-code removal). New protobuf messages are
 * malloc'd so that protobuf-c's free_unpacked releases them with the rest. */
#include <string.h>

#include "onnx/internal.h"

#define NODE(n) ((Onnx__NodeProto *)(n))
#define CNODE(n) ((const Onnx__NodeProto *)(n))

/* ------------------------------------------------------------ wrappers */

graft_graph *ox_graph_wrap(graft_model *m, Onnx__GraphProto *g)
{
    graft_graph *w = ox_pmap_get(&m->graphs, g);
    if (w) return w;
    w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->m = m;
    w->p = g;
    if (!ox_pmap_put(&m->graphs, g, w)) {
        free(w);
        return NULL;
    }
    return w;
}

void ox_graph_free(graft_graph *g)
{
    if (!g) return;
    ox_map_free(&g->producer);
    ox_map_free(&g->inits);
    free(g);
}

static bool index_build(graft_graph *g)
{
    if (g->index_valid) return true;
    ox_map_clear(&g->producer);
    ox_map_clear(&g->inits);
    for (size_t i = 0; i < g->p->n_node; i++) {
        Onnx__NodeProto *n = g->p->node[i];
        for (size_t j = 0; j < n->n_output; j++)
            if (n->output[j] && n->output[j][0] && !ox_map_put(&g->producer, n->output[j], n))
                return false;
    }
    for (size_t i = 0; i < g->p->n_initializer; i++) {
        Onnx__TensorProto *t = g->p->initializer[i];
        if (t->name && !ox_map_put(&g->inits, t->name, t)) return false;
    }
    g->index_valid = true;
    return true;
}

static void index_dirty(graft_graph *g) { g->index_valid = false; }

/* ------------------------------------------------------------ value types */

static void fill_type(graft_value_info *vi, const char *name, const Onnx__TypeProto *tp)
{
    memset(vi, 0, sizeof *vi);
    vi->name = ox_s(name);
    vi->rank = -1;
    if (!tp) return;
    const Onnx__TensorShapeProto *shape = NULL;
    if (tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type) {
        vi->dtype = tp->tensor_type->elem_type;
        shape = tp->tensor_type->shape;
    } else if (tp->value_case == ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE && tp->sparse_tensor_type) {
        vi->dtype = tp->sparse_tensor_type->elem_type;
        shape = tp->sparse_tensor_type->shape;
    }
    if (!shape) return;
    vi->rank = (int)(shape->n_dim > (size_t)INT32_MAX ? INT32_MAX : shape->n_dim);
    for (size_t i = 0; i < shape->n_dim; i++) {
        if (i >= GRAFT_MAX_RANK) {
            vi->truncated = 1;
            break;
        }
        const Onnx__TensorShapeProto__Dimension *d = shape->dim[i];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0) {
            vi->dims[i].value = d->dim_value;
        } else {
            vi->dims[i].value = -1;
            vi->dims[i].param =
                d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? d->dim_param : NULL;
        }
    }
}

const char *graft_graph_name(const graft_graph *g) { return ox_s(g->p->name); }
size_t graft_graph_input_count(const graft_graph *g) { return g->p->n_input; }
size_t graft_graph_output_count(const graft_graph *g) { return g->p->n_output; }

int graft_graph_input(const graft_graph *g, size_t i, graft_value_info *vi)
{
    if (i >= g->p->n_input) return 0;
    fill_type(vi, g->p->input[i]->name, g->p->input[i]->type);
    return 1;
}

int graft_graph_output(const graft_graph *g, size_t i, graft_value_info *vi)
{
    if (i >= g->p->n_output) return 0;
    fill_type(vi, g->p->output[i]->name, g->p->output[i]->type);
    return 1;
}

static const Onnx__ValueInfoProto *find_vi(Onnx__ValueInfoProto **arr, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (arr[i]->name && strcmp(arr[i]->name, name) == 0) return arr[i];
    return NULL;
}

int graft_graph_value(graft_graph *g, const char *name, graft_value_info *vi)
{
    const Onnx__ValueInfoProto *v = find_vi(g->p->input, g->p->n_input, name);
    if (!v) v = find_vi(g->p->output, g->p->n_output, name);
    if (!v) v = find_vi(g->p->value_info, g->p->n_value_info, name);
    if (v && v->type) {
        fill_type(vi, v->name, v->type);
        return 1;
    }
    graft_tensor *t = graft_graph_find_initializer(g, name);
    if (!t) return 0;
    memset(vi, 0, sizeof *vi);
    vi->name = graft_tensor_name(t);
    vi->dtype = t->t.p->data_type;
    vi->rank = (int)t->t.p->n_dims;
    for (size_t i = 0; i < t->t.p->n_dims; i++) {
        if (i >= GRAFT_MAX_RANK) {
            vi->truncated = 1;
            break;
        }
        vi->dims[i].value = t->t.p->dims[i];
    }
    return 1;
}

/* ------------------------------------------------------------ nodes */

size_t graft_graph_node_count(const graft_graph *g) { return g->p->n_node; }

graft_node *graft_graph_node(graft_graph *g, size_t i)
{
    return i < g->p->n_node ? (graft_node *)g->p->node[i] : NULL;
}

graft_node *graft_graph_producer(graft_graph *g, const char *value)
{
    if (!index_build(g)) return NULL;
    return ox_map_get(&g->producer, value);
}

const char *graft_node_name(const graft_node *n) { return ox_s(CNODE(n)->name); }
const char *graft_node_op_type(const graft_node *n) { return ox_s(CNODE(n)->op_type); }
const char *graft_node_domain(const graft_node *n)
{
    const char *d = ox_s(CNODE(n)->domain);
    return strcmp(d, "ai.onnx") == 0 ? "" : d;
}
size_t graft_node_input_count(const graft_node *n) { return CNODE(n)->n_input; }
const char *graft_node_input(const graft_node *n, size_t i)
{
    return i < CNODE(n)->n_input ? ox_s(CNODE(n)->input[i]) : NULL;
}
size_t graft_node_output_count(const graft_node *n) { return CNODE(n)->n_output; }
const char *graft_node_output(const graft_node *n, size_t i)
{
    return i < CNODE(n)->n_output ? ox_s(CNODE(n)->output[i]) : NULL;
}

size_t graft_node_subgraph_count(const graft_node *n)
{
    size_t c = 0;
    for (size_t i = 0; i < CNODE(n)->n_attribute; i++) {
        const Onnx__AttributeProto *a = CNODE(n)->attribute[i];
        c += (a->g ? 1 : 0) + a->n_graphs;
    }
    return c;
}

graft_graph *graft_node_subgraph(graft_graph *g, graft_node *n, size_t i)
{
    for (size_t k = 0; k < NODE(n)->n_attribute; k++) {
        Onnx__AttributeProto *a = NODE(n)->attribute[k];
        if (a->g) {
            if (i == 0) return ox_graph_wrap(g->m, a->g);
            i--;
        }
        if (i < a->n_graphs) return ox_graph_wrap(g->m, a->graphs[i]);
        i -= a->n_graphs;
    }
    return NULL;
}

static const Onnx__AttributeProto *find_attr(const graft_node *n, const char *name, int type)
{
    for (size_t i = 0; i < CNODE(n)->n_attribute; i++) {
        const Onnx__AttributeProto *a = CNODE(n)->attribute[i];
        if (a->name && strcmp(a->name, name) == 0) return (int)a->type == type ? a : NULL;
    }
    return NULL;
}

int graft_node_attr_int(const graft_node *n, const char *name, int64_t *v)
{
    const Onnx__AttributeProto *a = find_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (!a) return 0;
    *v = a->i;
    return 1;
}

int graft_node_attr_float(const graft_node *n, const char *name, float *v)
{
    const Onnx__AttributeProto *a = find_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (!a) return 0;
    *v = a->f;
    return 1;
}

int graft_node_attr_string(const graft_node *n, const char *name, const char **v, size_t *len)
{
    const Onnx__AttributeProto *a = find_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!a) return 0;
    *v = (const char *)a->s.data;
    if (len) *len = a->s.len;
    return 1;
}

int graft_node_attr_ints(const graft_node *n, const char *name, const int64_t **v, size_t *count)
{
    const Onnx__AttributeProto *a = find_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    if (!a) return 0;
    *v = a->ints;
    *count = a->n_ints;
    return 1;
}

int graft_node_attr_floats(const graft_node *n, const char *name, const float **v, size_t *count)
{
    const Onnx__AttributeProto *a = find_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    if (!a) return 0;
    *v = a->floats;
    *count = a->n_floats;
    return 1;
}

/* ------------------------------------------------------------ initializers */

size_t graft_graph_initializer_count(const graft_graph *g) { return g->p->n_initializer; }

graft_tensor *graft_graph_initializer(graft_graph *g, size_t i)
{
    if (i >= g->p->n_initializer) return NULL;
    return ox_pmap_get(&g->m->tensors, g->p->initializer[i]);
}

graft_tensor *graft_graph_find_initializer(graft_graph *g, const char *name)
{
    if (!index_build(g)) return NULL;
    Onnx__TensorProto *t = ox_map_get(&g->inits, name);
    return t ? ox_pmap_get(&g->m->tensors, t) : NULL;
}

/* ------------------------------------------------------------ use scans */

/* Does graph g define `name` (input, initializer, node output)? */
static bool defines(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_input; i++)
        if (g->input[i]->name && strcmp(g->input[i]->name, name) == 0) return true;
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0) return true;
    for (size_t i = 0; i < g->n_sparse_initializer; i++) {
        const Onnx__SparseTensorProto *s = g->sparse_initializer[i];
        if (s->values && s->values->name && strcmp(s->values->name, name) == 0) return true;
    }
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t j = 0; j < g->node[i]->n_output; j++)
            if (g->node[i]->output[j] && strcmp(g->node[i]->output[j], name) == 0) return true;
    return false;
}

/* Counts (and when `repl` is non-NULL, renames) reads of `name` in g:
 * node inputs, graph outputs (only when outputs_too), and subgraphs that
 * do not define the name themselves. Returns the count, or SIZE_MAX on
 * allocation failure during renaming. */
static size_t scan_uses(Onnx__GraphProto *g, const char *name, const char *repl, bool outputs_too)
{
    size_t c = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        Onnx__NodeProto *n = g->node[i];
        for (size_t j = 0; j < n->n_input; j++) {
            if (!n->input[j] || strcmp(n->input[j], name) != 0) continue;
            c++;
            if (repl) {
                char *d = ox_strdup(repl);
                if (!d) return SIZE_MAX;
                free(n->input[j]);
                n->input[j] = d;
            }
        }
        for (size_t k = 0; k < n->n_attribute; k++) {
            Onnx__AttributeProto *a = n->attribute[k];
            for (size_t s = 0; s < (a->g ? 1 : 0) + a->n_graphs; s++) {
                Onnx__GraphProto *sg = a->g && s == 0 ? a->g : a->graphs[s - (a->g ? 1 : 0)];
                if (defines(sg, name)) continue;
                size_t r = scan_uses(sg, name, repl, true);
                if (r == SIZE_MAX) return r;
                c += r;
            }
        }
    }
    if (outputs_too)
        for (size_t i = 0; i < g->n_output; i++) {
            Onnx__ValueInfoProto *o = g->output[i];
            if (!o->name || strcmp(o->name, name) != 0) continue;
            c++;
            if (repl) {
                char *d = ox_strdup(repl);
                if (!d) return SIZE_MAX;
                free(o->name);
                o->name = d;
            }
        }
    return c;
}

size_t graft_graph_use_count(graft_graph *g, const char *value)
{
    return scan_uses(g->p, value, NULL, true);
}

size_t graft_graph_replace_uses(graft_graph *g, const char *old_name, const char *new_name)
{
    size_t r = scan_uses(g->p, old_name, new_name, true);
    index_dirty(g);
    for (size_t i = 0; i < g->m->graphs.cap; i++)
        if (g->m->graphs.keys[i]) index_dirty(g->m->graphs.vals[i]);
    return r == SIZE_MAX ? 0 : r;
}

/* ------------------------------------------------------------ edits */

static bool set_str(char **dst, const char *src)
{
    char *d = ox_strdup(src ? src : "");
    if (!d) return false;
    free(*dst);
    *dst = d;
    return true;
}

static char **dup_strv(const char *const *v, size_t n)
{
    char **r = calloc(n ? n : 1, sizeof *r);
    if (!r) return NULL;
    for (size_t i = 0; i < n; i++)
        if (!(r[i] = ox_strdup(v[i] ? v[i] : ""))) {
            for (size_t j = 0; j < i; j++) free(r[j]);
            free(r);
            return NULL;
        }
    return r;
}

graft_node *graft_graph_add_node(graft_graph *g, const char *op_type, const char *domain,
                                 const char *name, const char *const *inputs, size_t n_in,
                                 const char *const *outputs, size_t n_out, graft_error *err)
{
    Onnx__NodeProto *n = malloc(sizeof *n);
    Onnx__NodeProto **arr = NULL;
    if (!n) goto nomem;
    onnx__node_proto__init(n);
    if (!set_str(&n->op_type, op_type)) goto nomem_free;
    if (domain && *domain && !set_str(&n->domain, domain)) goto nomem_free;
    if (name && !set_str(&n->name, name)) goto nomem_free;
    if (n_in && !(n->input = dup_strv(inputs, n_in))) goto nomem_free;
    n->n_input = n_in;
    if (n_out && !(n->output = dup_strv(outputs, n_out))) goto nomem_free;
    n->n_output = n_out;
    arr = realloc(g->p->node, (g->p->n_node + 1) * sizeof *arr);
    if (!arr) goto nomem_free;
    g->p->node = arr;
    g->p->node[g->p->n_node++] = n;
    index_dirty(g);
    return (graft_node *)n;
nomem_free:
    onnx__node_proto__free_unpacked(n, NULL);
nomem:
    ox_err(err, GRAFT_ENOMEM, "graph '%s': out of memory adding node '%s'", ox_s(g->p->name),
           name ? name : "");
    return NULL;
}

/* Finds or appends attribute `name`, reset to an empty one of `type`. */
static Onnx__AttributeProto *attr_slot(Onnx__NodeProto *n, const char *name, int type)
{
    for (size_t i = 0; i < n->n_attribute; i++) {
        Onnx__AttributeProto *a = n->attribute[i];
        if (a->name && strcmp(a->name, name) == 0) {
            Onnx__AttributeProto *fresh = malloc(sizeof *fresh);
            if (!fresh) return NULL;
            onnx__attribute_proto__init(fresh);
            if (!set_str(&fresh->name, name)) {
                free(fresh);
                return NULL;
            }
            onnx__attribute_proto__free_unpacked(a, NULL);
            n->attribute[i] = fresh;
            fresh->has_type = 1;
            fresh->type = (Onnx__AttributeProto__AttributeType)type;
            return fresh;
        }
    }
    Onnx__AttributeProto *a = malloc(sizeof *a);
    if (!a) return NULL;
    onnx__attribute_proto__init(a);
    Onnx__AttributeProto **arr = realloc(n->attribute, (n->n_attribute + 1) * sizeof *arr);
    if (!arr || !set_str(&a->name, name)) {
        if (arr) n->attribute = arr;
        onnx__attribute_proto__free_unpacked(a, NULL);
        return NULL;
    }
    n->attribute = arr;
    n->attribute[n->n_attribute++] = a;
    a->has_type = 1;
    a->type = (Onnx__AttributeProto__AttributeType)type;
    return a;
}

static graft_status attr_nomem(graft_node *n, const char *name, graft_error *err)
{
    return ox_err(err, GRAFT_ENOMEM, "node '%s': out of memory setting attribute '%s'",
                  graft_node_name(n), name);
}

graft_status graft_node_set_attr_int(graft_node *n, const char *name, int64_t v, graft_error *err)
{
    Onnx__AttributeProto *a = attr_slot(NODE(n), name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (!a) return attr_nomem(n, name, err);
    a->has_i = 1;
    a->i = v;
    return GRAFT_OK;
}

graft_status graft_node_set_attr_float(graft_node *n, const char *name, float v, graft_error *err)
{
    Onnx__AttributeProto *a = attr_slot(NODE(n), name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (!a) return attr_nomem(n, name, err);
    a->has_f = 1;
    a->f = v;
    return GRAFT_OK;
}

graft_status graft_node_set_attr_string(graft_node *n, const char *name, const char *v, graft_error *err)
{
    Onnx__AttributeProto *a = attr_slot(NODE(n), name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!a) return attr_nomem(n, name, err);
    size_t len = strlen(v);
    uint8_t *d = malloc(len ? len : 1);
    if (!d) return attr_nomem(n, name, err);
    memcpy(d, v, len);
    a->has_s = 1;
    a->s.data = d;
    a->s.len = len;
    return GRAFT_OK;
}

graft_status graft_node_set_attr_ints(graft_node *n, const char *name, const int64_t *v, size_t count,
                                      graft_error *err)
{
    Onnx__AttributeProto *a = attr_slot(NODE(n), name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    if (!a) return attr_nomem(n, name, err);
    if (count) {
        a->ints = malloc(count * sizeof *v);
        if (!a->ints) return attr_nomem(n, name, err);
        memcpy(a->ints, v, count * sizeof *v);
    }
    a->n_ints = count;
    return GRAFT_OK;
}

graft_tensor *graft_graph_add_initializer(graft_graph *g, const char *name, int dtype,
                                          const int64_t *dims, int rank, const void *data,
                                          size_t nbytes, graft_error *err)
{
    uint64_t n = 1;
    int ovf = 0;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || (dims[i] && n > (uint64_t)INT64_MAX / (uint64_t)dims[i])) ovf = 1;
        else n *= (uint64_t)dims[i];
    }
    uint64_t need = ovf ? 0 : graft_dtype_nbytes(dtype, n, &ovf);
    if (ovf || need != nbytes) {
        ox_err(err, GRAFT_EINVAL, "graph '%s': initializer '%s': %zu bytes given, shape and %s need %llu",
               ox_s(g->p->name), name, nbytes, graft_dtype_name(dtype), (unsigned long long)need);
        return NULL;
    }
    Onnx__TensorProto *t = malloc(sizeof *t);
    if (!t) goto nomem;
    onnx__tensor_proto__init(t);
    if (!set_str(&t->name, name)) goto nomem_free;
    t->has_data_type = 1;
    t->data_type = dtype;
    if (rank) {
        if (!(t->dims = malloc((size_t)rank * sizeof *dims))) goto nomem_free;
        memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
        t->n_dims = (size_t)rank;
    }
    t->has_raw_data = 1;
    t->raw_data.len = nbytes;
    if (!(t->raw_data.data = malloc(nbytes ? nbytes : 1))) goto nomem_free;
    if (nbytes) memcpy(t->raw_data.data, data, nbytes);
    Onnx__TensorProto **arr = realloc(g->p->initializer, (g->p->n_initializer + 1) * sizeof *arr);
    if (!arr) goto nomem_free;
    g->p->initializer = arr;
    char where[160];
    snprintf(where, sizeof where, "graph '%.100s'", ox_s(g->p->name));
    if (ox_tensor_bind(g->m, t, where, 0, err) != GRAFT_OK) {
        onnx__tensor_proto__free_unpacked(t, NULL);
        return NULL;
    }
    g->p->initializer[g->p->n_initializer++] = t;
    index_dirty(g);
    return ox_pmap_get(&g->m->tensors, t);
nomem_free:
    onnx__tensor_proto__free_unpacked(t, NULL);
nomem:
    ox_err(err, GRAFT_ENOMEM, "graph '%s': out of memory adding initializer '%s'", ox_s(g->p->name), name);
    return NULL;
}

static void remove_init_at(graft_graph *g, size_t i)
{
    Onnx__TensorProto *t = g->p->initializer[i];
    graft_tensor *gt = ox_pmap_get(&g->m->tensors, t);
    if (gt) {
        ox_pmap_del(&g->m->tensors, t);
        free(gt);
    }
    onnx__tensor_proto__free_unpacked(t, NULL);
    memmove(&g->p->initializer[i], &g->p->initializer[i + 1],
            (g->p->n_initializer - i - 1) * sizeof *g->p->initializer);
    g->p->n_initializer--;
    index_dirty(g);
}

int graft_graph_remove_initializer(graft_graph *g, const char *name)
{
    for (size_t i = 0; i < g->p->n_initializer; i++)
        if (g->p->initializer[i]->name && strcmp(g->p->initializer[i]->name, name) == 0) {
            remove_init_at(g, i);
            return 1;
        }
    return 0;
}

static void remove_node_at(graft_graph *g, size_t i)
{
    Onnx__NodeProto *n = g->p->node[i];
    ox_model_forget_node(g->m, n);
    onnx__node_proto__free_unpacked(n, NULL);
    memmove(&g->p->node[i], &g->p->node[i + 1], (g->p->n_node - i - 1) * sizeof *g->p->node);
    g->p->n_node--;
    index_dirty(g);
}

void graft_node_remove(graft_graph *g, graft_node *n)
{
    for (size_t i = 0; i < g->p->n_node; i++)
        if (g->p->node[i] == NODE(n)) {
            remove_node_at(g, i);
            return;
        }
    GRAFT_ASSERT(!"graft_node_remove: node not in graph");
}

/* ------------------------------------------------------------ reads of a node */

typedef struct strvec {
    const char **v;
    size_t n, cap;
} strvec;

static bool sv_push(strvec *s, const char *x)
{
    if (!ox_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) return false;
    s->v[s->n++] = x;
    return true;
}

/* Names a node reads: its inputs and every name read inside its subgraphs
 * (outer-scope captures among them; names local to a subgraph may also be
 * listed, which is harmless since scopes do not shadow in ONNX). */
static bool node_reads(const Onnx__NodeProto *n, strvec *out)
{
    for (size_t j = 0; j < n->n_input; j++)
        if (n->input[j] && n->input[j][0] && !sv_push(out, n->input[j])) return false;
    for (size_t k = 0; k < n->n_attribute; k++) {
        const Onnx__AttributeProto *a = n->attribute[k];
        for (size_t s = 0; s < (a->g ? 1 : 0) + a->n_graphs; s++) {
            const Onnx__GraphProto *sg = a->g && s == 0 ? a->g : a->graphs[s - (a->g ? 1 : 0)];
            for (size_t i = 0; i < sg->n_node; i++)
                if (!node_reads(sg->node[i], out)) return false;
            for (size_t i = 0; i < sg->n_output; i++)
                if (sg->output[i]->name && !sv_push(out, sg->output[i]->name)) return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------ toposort */

graft_status graft_graph_toposort(graft_graph *g, graft_error *err)
{
    size_t n = g->p->n_node;
    graft_status rc = GRAFT_OK;
    size_t *indeg = calloc(n + 1, sizeof *indeg), *heap = calloc(n + 1, sizeof *heap);
    size_t *edge_start = calloc(n + 2, sizeof *edge_start), *edges = NULL;
    Onnx__NodeProto **order = calloc(n + 1, sizeof *order);
    strvec reads = {0};
    ox_map idx = {0};
    size_t *src = NULL, *dst = NULL, n_edges = 0, cap_src = 0, cap_dst = 0;
    if (!indeg || !heap || !edge_start || !order) goto nomem;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < g->p->node[i]->n_output; j++) {
            const char *o = g->p->node[i]->output[j];
            if (o && o[0] && !ox_map_put(&idx, o, (void *)(i + 1))) goto nomem;
        }
    for (size_t i = 0; i < n; i++) {
        reads.n = 0;
        if (!node_reads(g->p->node[i], &reads)) goto nomem;
        for (size_t r = 0; r < reads.n; r++) {
            size_t p = (size_t)(uintptr_t)ox_map_get(&idx, reads.v[r]);
            if (!p || p - 1 == i) continue;
            if (!ox_grow((void **)&src, &cap_src, n_edges + 1, sizeof *src) ||
                !ox_grow((void **)&dst, &cap_dst, n_edges + 1, sizeof *dst))
                goto nomem;
            src[n_edges] = p - 1;
            dst[n_edges] = i;
            n_edges++;
            indeg[i]++;
        }
    }
    /* CSR adjacency by source */
    edges = calloc(n_edges + 1, sizeof *edges);
    if (!edges) goto nomem;
    for (size_t e = 0; e < n_edges; e++) edge_start[src[e] + 1]++;
    for (size_t i = 0; i < n; i++) edge_start[i + 1] += edge_start[i];
    {
        size_t *fill = calloc(n + 1, sizeof *fill);
        if (!fill) goto nomem;
        for (size_t e = 0; e < n_edges; e++) edges[edge_start[src[e]] + fill[src[e]]++] = dst[e];
        free(fill);
    }
    /* Kahn with a min-heap on the original index: stable for sorted graphs */
    size_t hn = 0, done = 0;
    for (size_t i = 0; i < n; i++)
        if (!indeg[i]) {
            size_t c = hn++;
            heap[c] = i;
            while (c && heap[(c - 1) / 2] > heap[c]) {
                size_t p = (c - 1) / 2, t = heap[p];
                heap[p] = heap[c];
                heap[c] = t;
                c = p;
            }
        }
    while (hn) {
        size_t top = heap[0];
        heap[0] = heap[--hn];
        for (size_t c = 0;;) {
            size_t l = 2 * c + 1, r = l + 1, s = c;
            if (l < hn && heap[l] < heap[s]) s = l;
            if (r < hn && heap[r] < heap[s]) s = r;
            if (s == c) break;
            size_t t = heap[s];
            heap[s] = heap[c];
            heap[c] = t;
            c = s;
        }
        order[done++] = g->p->node[top];
        for (size_t e = edge_start[top]; e < edge_start[top + 1]; e++)
            if (--indeg[edges[e]] == 0) {
                size_t c = hn++;
                heap[c] = edges[e];
                while (c && heap[(c - 1) / 2] > heap[c]) {
                    size_t p = (c - 1) / 2, t = heap[p];
                    heap[p] = heap[c];
                    heap[c] = t;
                    c = p;
                }
            }
    }
    if (done != n) {
        size_t bad = 0;
        while (bad < n && !indeg[bad]) bad++;
        const Onnx__NodeProto *b = g->p->node[bad < n ? bad : 0];
        rc = ox_err(err, GRAFT_EINVAL, "graph '%s': cycle through node '%s' (%s)", ox_s(g->p->name),
                    ox_s(b->name), ox_s(b->op_type));
        goto done;
    }
    memcpy(g->p->node, order, n * sizeof *order);
    goto done;
nomem:
    rc = ox_err(err, GRAFT_ENOMEM, "graph '%s': out of memory sorting nodes", ox_s(g->p->name));
done:
    free(indeg);
    free(heap);
    free(edge_start);
    free(edges);
    free(order);
    free(reads.v);
    free(src);
    free(dst);
    ox_map_free(&idx);
    return rc;
}

/* ------------------------------------------------------------ prune */

size_t graft_graph_prune(graft_graph *g)
{
    size_t n = g->p->n_node, removed = 0;
    ox_map producer = {0}, live_names = {0};
    strvec work = {0}, reads = {0};
    bool *live = calloc(n + 1, sizeof *live);
    if (!live) goto out;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < g->p->node[i]->n_output; j++) {
            const char *o = g->p->node[i]->output[j];
            if (o && o[0] && !ox_map_put(&producer, o, (void *)(i + 1))) goto out;
        }
    for (size_t i = 0; i < g->p->n_output; i++)
        if (g->p->output[i]->name && !sv_push(&work, g->p->output[i]->name)) goto out;
    while (work.n) {
        const char *name = work.v[--work.n];
        if (ox_map_get(&live_names, name)) continue;
        if (!ox_map_put(&live_names, name, (void *)1)) goto out;
        size_t p = (size_t)(uintptr_t)ox_map_get(&producer, name);
        if (!p || live[p - 1]) continue;
        live[p - 1] = true;
        reads.n = 0;
        if (!node_reads(g->p->node[p - 1], &reads)) goto out;
        for (size_t r = 0; r < reads.n; r++)
            if (!sv_push(&work, reads.v[r])) goto out;
    }
    /* live_names keys point into nodes about to be freed: rebuild after */
    ox_map_free(&live_names);
    for (size_t i = n; i-- > 0;)
        if (!live[i]) {
            remove_node_at(g, i);
            removed++;
        }
    /* names still read or defined */
    strvec used = {0};
    for (size_t i = 0; i < g->p->n_node; i++)
        if (!node_reads(g->p->node[i], &used)) {
            free(used.v);
            goto out;
        }
    for (size_t i = 0; i < g->p->n_output; i++)
        if (g->p->output[i]->name && !sv_push(&used, g->p->output[i]->name)) {
            free(used.v);
            goto out;
        }
    for (size_t i = 0; i < used.n; i++)
        if (!ox_map_put(&live_names, used.v[i], (void *)1)) {
            free(used.v);
            goto out;
        }
    for (size_t i = g->p->n_initializer; i-- > 0;) {
        const char *nm = g->p->initializer[i]->name;
        if (nm && !ox_map_get(&live_names, nm) && !find_vi(g->p->input, g->p->n_input, nm))
            remove_init_at(g, i);
    }
    /* value_info for values nobody defines any more */
    ox_map defined = {0};
    bool ok = true;
    for (size_t i = 0; i < g->p->n_node && ok; i++)
        for (size_t j = 0; j < g->p->node[i]->n_output && ok; j++)
            if (g->p->node[i]->output[j]) ok = ox_map_put(&defined, g->p->node[i]->output[j], (void *)1);
    if (ok) {
        size_t w = 0;
        for (size_t i = 0; i < g->p->n_value_info; i++) {
            Onnx__ValueInfoProto *v = g->p->value_info[i];
            const char *nm = ox_s(v->name);
            if (ox_map_get(&defined, nm) || find_vi(g->p->input, g->p->n_input, nm) ||
                ox_map_get(&live_names, nm))
                g->p->value_info[w++] = v;
            else
                onnx__value_info_proto__free_unpacked(v, NULL);
        }
        g->p->n_value_info = w;
    }
    ox_map_free(&defined);
    free(used.v);
out:
    index_dirty(g);
    free(live);
    free(work.v);
    free(reads.v);
    ox_map_free(&producer);
    ox_map_free(&live_names);
    return removed;
}
