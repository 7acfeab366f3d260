/* Model load (mmap, wire check, unpack, tensor validation), free, and
 * model-level accessors. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/internal.h"

#define OX_MAX_PROTO_BYTES 2147483647ULL /* protobuf's 2 GB limit */
#define OX_DEFAULT_DEPTH 64

/* ------------------------------------------------------------ traversal */

static graft_status foreach_graph(Onnx__GraphProto *g, ox_tensor_fn fn, void *ctx, graft_error *err);

static graft_status foreach_sparse(Onnx__SparseTensorProto *s, const char *where, ox_tensor_fn fn,
                                   void *ctx, graft_error *err)
{
    graft_status rc = GRAFT_OK;
    if (s->values && (rc = fn(ctx, s->values, where, OX_T_SPARSE, err)) != GRAFT_OK) return rc;
    if (s->indices && (rc = fn(ctx, s->indices, where, OX_T_SPARSE, err)) != GRAFT_OK) return rc;
    return rc;
}

static graft_status foreach_attr(Onnx__AttributeProto *a, const char *where, ox_tensor_fn fn,
                                 void *ctx, graft_error *err)
{
    graft_status rc;
    if (a->t && (rc = fn(ctx, a->t, where, 0, err)) != GRAFT_OK) return rc;
    for (size_t i = 0; i < a->n_tensors; i++)
        if ((rc = fn(ctx, a->tensors[i], where, 0, err)) != GRAFT_OK) return rc;
    if (a->sparse_tensor && (rc = foreach_sparse(a->sparse_tensor, where, fn, ctx, err)) != GRAFT_OK)
        return rc;
    for (size_t i = 0; i < a->n_sparse_tensors; i++)
        if ((rc = foreach_sparse(a->sparse_tensors[i], where, fn, ctx, err)) != GRAFT_OK) return rc;
    if (a->g && (rc = foreach_graph(a->g, fn, ctx, err)) != GRAFT_OK) return rc;
    for (size_t i = 0; i < a->n_graphs; i++)
        if ((rc = foreach_graph(a->graphs[i], fn, ctx, err)) != GRAFT_OK) return rc;
    return GRAFT_OK;
}

static graft_status foreach_nodes(Onnx__NodeProto **nodes, size_t n, ox_tensor_fn fn, void *ctx,
                                  graft_error *err)
{
    for (size_t i = 0; i < n; i++) {
        graft_status rc = ox_node_foreach_tensor(nodes[i], fn, ctx, err);
        if (rc != GRAFT_OK) return rc;
    }
    return GRAFT_OK;
}

graft_status ox_node_foreach_tensor(Onnx__NodeProto *n, ox_tensor_fn fn, void *ctx, graft_error *err)
{
    char where[256];
    snprintf(where, sizeof where, "node '%.100s' (%.100s)", ox_s(n->name), ox_s(n->op_type));
    for (size_t j = 0; j < n->n_attribute; j++) {
        graft_status rc = foreach_attr(n->attribute[j], where, fn, ctx, err);
        if (rc != GRAFT_OK) return rc;
    }
    return GRAFT_OK;
}

static graft_status foreach_graph(Onnx__GraphProto *g, ox_tensor_fn fn, void *ctx, graft_error *err)
{
    char where[160];
    snprintf(where, sizeof where, "graph '%.100s'", ox_s(g->name));
    graft_status rc;
    for (size_t i = 0; i < g->n_initializer; i++)
        if ((rc = fn(ctx, g->initializer[i], where, 0, err)) != GRAFT_OK) return rc;
    for (size_t i = 0; i < g->n_sparse_initializer; i++)
        if ((rc = foreach_sparse(g->sparse_initializer[i], where, fn, ctx, err)) != GRAFT_OK) return rc;
    return foreach_nodes(g->node, g->n_node, fn, ctx, err);
}

graft_status ox_model_foreach_tensor(Onnx__ModelProto *m, ox_tensor_fn fn, void *ctx, graft_error *err)
{
    graft_status rc;
    if (m->graph && (rc = foreach_graph(m->graph, fn, ctx, err)) != GRAFT_OK) return rc;
    for (size_t i = 0; i < m->n_functions; i++) {
        Onnx__FunctionProto *f = m->functions[i];
        char where[160];
        snprintf(where, sizeof where, "function '%.100s'", ox_s(f->name));
        for (size_t j = 0; j < f->n_attribute_proto; j++)
            if ((rc = foreach_attr(f->attribute_proto[j], where, fn, ctx, err)) != GRAFT_OK) return rc;
        if ((rc = foreach_nodes(f->node, f->n_node, fn, ctx, err)) != GRAFT_OK) return rc;
    }
    for (size_t i = 0; i < m->n_training_info; i++) {
        Onnx__TrainingInfoProto *t = m->training_info[i];
        if (t->initialization && (rc = foreach_graph(t->initialization, fn, ctx, err)) != GRAFT_OK)
            return rc;
        if (t->algorithm && (rc = foreach_graph(t->algorithm, fn, ctx, err)) != GRAFT_OK) return rc;
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------ tensor checks */

/* Parses a non-negative decimal integer with no sign, spaces or overflow. */
static int parse_u64(const char *s, uint64_t *v)
{
    if (!s || !*s) return -1;
    uint64_t r = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        unsigned d = (unsigned)(*s - '0');
        if (r > ((uint64_t)INT64_MAX - d) / 10) return -1;
        r = r * 10 + d;
    }
    *v = r;
    return 0;
}

static void shape_str(const Onnx__TensorProto *t, char *buf, size_t n)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, n - o, "[");
    for (size_t i = 0; i < t->n_dims && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

static graft_status ext_find_or_open(graft_model *m, const char *loc, const char *tensor, int *idx,
                                     graft_error *err)
{
    for (size_t i = 0; i < m->n_ext; i++)
        if (strcmp(m->ext[i].location, loc) == 0) {
            *idx = (int)i;
            return GRAFT_OK;
        }
    if (!ox_grow((void **)&m->ext, &m->cap_ext, m->n_ext + 1, sizeof *m->ext))
        return ox_err(err, GRAFT_ENOMEM, "%s: out of memory", m->path);
    int fd = ox_open_beneath(m->dirfd, loc, tensor, m->path, err);
    if (fd < 0) return err ? err->code : GRAFT_EINVAL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return ox_err(err, GRAFT_EIO, "%s: stat '%s': %s", m->path, loc, strerror(errno));
    }
    const uint8_t *map = NULL;
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return ox_err(err, GRAFT_EIO, "%s: tensor '%s': cannot map external data file '%s': %s",
                          m->path, tensor, loc, strerror(e));
        }
        map = p;
    }
    char *l = ox_strdup(loc);
    if (!l) {
        if (map) munmap((void *)map, (size_t)st.st_size);
        close(fd);
        return ox_err(err, GRAFT_ENOMEM, "%s: out of memory", m->path);
    }
    ox_extfile *e = &m->ext[m->n_ext];
    e->location = l;
    e->fd = fd;
    e->size = (uint64_t)st.st_size;
    e->map = map;
    *idx = (int)m->n_ext++;
    return GRAFT_OK;
}

static graft_status bind_external(graft_model *m, Onnx__TensorProto *t, ox_tensor *rec,
                                  const char *where, graft_error *err)
{
    const char *name = ox_s(t->name);
    const char *loc = NULL, *off_s = NULL, *len_s = NULL;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const char *k = ox_s(t->external_data[i]->key), *v = t->external_data[i]->value;
        if (strcmp(k, "location") == 0) loc = v;
        else if (strcmp(k, "offset") == 0) off_s = v;
        else if (strcmp(k, "length") == 0) len_s = v;
    }
    if (t->data_type == GRAFT_DTYPE_STRING)
        return ox_err(err, GRAFT_EINVAL, "%s: %s: tensor '%s': string tensors cannot use external data",
                      m->path, where, name);
    char *norm = NULL;
    graft_status rc = ox_location_normalise(loc, &norm, name, m->path, err);
    if (rc != GRAFT_OK) return rc;
    uint64_t off = 0, len = rec->nbytes;
    if (off_s && parse_u64(off_s, &off) != 0) {
        rc = ox_err(err, GRAFT_EINVAL,
                    "%s: tensor '%s': external data offset '%s' (location '%s') is not a "
                    "non-negative integer", m->path, name, off_s, norm);
        goto done;
    }
    if (len_s) {
        if (parse_u64(len_s, &len) != 0) {
            rc = ox_err(err, GRAFT_EINVAL,
                        "%s: tensor '%s': external data length '%s' (location '%s') is not a "
                        "non-negative integer", m->path, name, len_s, norm);
            goto done;
        }
        if (len != rec->nbytes) {
            char sh[128];
            shape_str(t, sh, sizeof sh);
            rc = ox_err(err, GRAFT_EINVAL,
                        "%s: tensor '%s': external data length %llu (location '%s') does not match "
                        "shape %s of %s, which needs %llu bytes", m->path, name,
                        (unsigned long long)len, norm, sh, graft_dtype_name(t->data_type),
                        (unsigned long long)rec->nbytes);
            goto done;
        }
    }
    int idx = -1;
    if ((rc = ext_find_or_open(m, norm, name, &idx, err)) != GRAFT_OK) goto done;
    const ox_extfile *e = &m->ext[idx];
    if (off > e->size || len > e->size - off) {
        rc = ox_err(err, GRAFT_EINVAL,
                    "%s: tensor '%s': external data at offset %llu length %llu runs past the end "
                    "of '%s' (%llu bytes)", m->path, name, (unsigned long long)off,
                    (unsigned long long)len, norm, (unsigned long long)e->size);
        goto done;
    }
    rec->ext = idx;
    rec->offset = off;
    rec->location = e->location;
    rec->data = e->map ? e->map + off : NULL;
done:
    free(norm);
    return rc;
}

graft_status ox_tensor_bind(graft_model *m, Onnx__TensorProto *t, const char *where, int flags, graft_error *err)
{
    const char *name = ox_s(t->name);
    graft_tensor *gt = calloc(1, sizeof *gt);
    if (!gt) return ox_err(err, GRAFT_ENOMEM, "%s: out of memory", m->path);
    ox_tensor *rec = &gt->t;
    graft_status rc = GRAFT_OK;
    rec->p = t;
    rec->ext = -1;
    rec->sparse = (flags & OX_T_SPARSE) != 0;
    uint64_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        int64_t d = t->dims[i];
        if (d < 0) {
            rc = ox_err(err, GRAFT_EINVAL, "%s: %s: tensor '%s': dimension %zu is negative (%lld)",
                        m->path, where, name, i, (long long)d);
            goto fail;
        }
        if (d != 0 && n > (uint64_t)INT64_MAX / (uint64_t)d) {
            char sh[128];
            shape_str(t, sh, sizeof sh);
            rc = ox_err(err, GRAFT_EINVAL, "%s: %s: tensor '%s': element count of shape %s overflows",
                        m->path, where, name, sh);
            goto fail;
        }
        n *= (uint64_t)d;
    }
    rec->numel = n;
    int dt = t->data_type;
    bool has_data = t->has_raw_data || t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (dt == GRAFT_DTYPE_STRING) {
        if (t->has_raw_data && t->raw_data.len) {
            rc = ox_err(err, GRAFT_EINVAL, "%s: %s: tensor '%s': string tensor with raw_data", m->path,
                        where, name);
            goto fail;
        }
    } else if (graft_dtype_bits(dt) == 0) {
        if (has_data) {
            rc = ox_err(err, GRAFT_EINVAL, "%s: %s: tensor '%s': unknown data type %d", m->path, where,
                        name, dt);
            goto fail;
        }
    } else {
        int ovf;
        rec->nbytes = graft_dtype_nbytes(dt, n, &ovf);
        if (ovf) {
            rc = ox_err(err, GRAFT_EINVAL, "%s: %s: tensor '%s': byte size of %llu %s elements overflows",
                        m->path, where, name, (unsigned long long)n, graft_dtype_name(dt));
            goto fail;
        }
    }
    if (t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        if ((rc = bind_external(m, t, rec, where, err)) != GRAFT_OK) goto fail;
    } else if (t->has_raw_data) {
        if (t->raw_data.len != rec->nbytes) {
            char sh[128];
            shape_str(t, sh, sizeof sh);
            rc = ox_err(err, GRAFT_EINVAL,
                        "%s: %s: tensor '%s': raw_data holds %zu bytes but shape %s of %s needs %llu",
                        m->path, where, name, t->raw_data.len, sh, graft_dtype_name(dt),
                        (unsigned long long)rec->nbytes);
            goto fail;
        }
        rec->data = t->raw_data.data;
    }
    if (!ox_pmap_put(&m->tensors, t, gt)) {
        rc = ox_err(err, GRAFT_ENOMEM, "%s: out of memory", m->path);
        goto fail;
    }
    return GRAFT_OK;
fail:
    free(gt);
    return rc;
}

static graft_status bind_cb(void *ctx, Onnx__TensorProto *t, const char *where, int flags, graft_error *err)
{
    return ox_tensor_bind(ctx, t, where, flags, err);
}

/* ------------------------------------------------------------ load / free */

graft_status graft_model_load(const char *path, const graft_load_opts *opts, graft_model **out,
                              graft_error *err)
{
    *out = NULL;
    graft_status rc = GRAFT_OK;
    int fd = -1;
    void *map = MAP_FAILED;
    size_t size = 0;
    graft_model *m = calloc(1, sizeof *m);
    if (!m) return ox_err(err, GRAFT_ENOMEM, "%s: out of memory", path);
    m->dirfd = -1;
    if (!(m->path = ox_strdup(path))) goto nomem;
    {
        const char *slash = strrchr(path, '/');
        m->dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : ox_strdup(".");
        if (!m->dir) goto nomem;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        rc = ox_err(err, e == ENOENT || e == ENOTDIR || e == EISDIR ? GRAFT_EINVAL : GRAFT_EIO,
                    "%s: cannot open model: %s", path, strerror(e));
        goto fail;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = ox_err(err, GRAFT_EIO, "%s: stat: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = ox_err(err, GRAFT_EINVAL, "%s: not a regular file", path);
        goto fail;
    }
    if ((uint64_t)st.st_size > OX_MAX_PROTO_BYTES) {
        rc = ox_err(err, GRAFT_EINVAL,
                    "%s: the model protobuf is %lld bytes, over protobuf's 2 GB limit; "
                    "store the weights as external data", path, (long long)st.st_size);
        goto fail;
    }
    size = (size_t)st.st_size;
    if (size == 0) {
        rc = ox_err(err, GRAFT_EINVAL, "%s: empty file, not an ONNX model", path);
        goto fail;
    }
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        rc = ox_err(err, GRAFT_EIO, "%s: mmap: %s", path, strerror(errno));
        goto fail;
    }
    int depth = opts && opts->max_depth > 0 ? opts->max_depth : OX_DEFAULT_DEPTH;
    if ((rc = ox_wire_check(map, size, &onnx__model_proto__descriptor, depth, path, err)) != GRAFT_OK)
        goto fail;
    m->p = onnx__model_proto__unpack(NULL, size, map);
    if (!m->p) {
        rc = ox_err(err, GRAFT_EINVAL, "%s: not a valid ONNX ModelProto (protobuf parse failed)", path);
        goto fail;
    }
    munmap(map, size); /* protobuf-c copied what it kept */
    map = MAP_FAILED;
    close(fd);
    fd = -1;
    if (!m->p->graph) {
        rc = ox_err(err, GRAFT_EINVAL, "%s: the model has no graph", path);
        goto fail;
    }
    m->dirfd = open(m->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (m->dirfd < 0) {
        rc = ox_err(err, GRAFT_EIO, "%s: cannot open the model's directory '%s': %s", path, m->dir,
                    strerror(errno));
        goto fail;
    }
    if ((rc = ox_model_foreach_tensor(m->p, bind_cb, m, err)) != GRAFT_OK) goto fail;
    *out = m;
    return GRAFT_OK;
nomem:
    rc = ox_err(err, GRAFT_ENOMEM, "%s: out of memory", path);
fail:
    if (map != MAP_FAILED) munmap(map, size);
    if (fd >= 0) close(fd);
    graft_model_free(m);
    return rc;
}

void graft_model_free(graft_model *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->tensors.cap; i++)
        if (m->tensors.keys && m->tensors.keys[i]) free(m->tensors.vals[i]);
    ox_pmap_free(&m->tensors);
    for (size_t i = 0; i < m->graphs.cap; i++)
        if (m->graphs.keys && m->graphs.keys[i]) ox_graph_free(m->graphs.vals[i]);
    ox_pmap_free(&m->graphs);
    for (size_t i = 0; i < m->n_ext; i++) {
        if (m->ext[i].map) munmap((void *)m->ext[i].map, (size_t)m->ext[i].size);
        if (m->ext[i].fd >= 0) close(m->ext[i].fd);
        free(m->ext[i].location);
    }
    free(m->ext);
    if (m->p) onnx__model_proto__free_unpacked(m->p, NULL);
    if (m->dirfd >= 0) close(m->dirfd);
    free(m->path);
    free(m->dir);
    free(m);
}

/* ------------------------------------------------------------ accessors */

const char *graft_model_path(const graft_model *m) { return m->path; }

int64_t graft_model_ir_version(const graft_model *m)
{
    return m->p->has_ir_version ? m->p->ir_version : 0;
}

const char *graft_model_producer(const graft_model *m) { return ox_s(m->p->producer_name); }
const char *graft_model_producer_version(const graft_model *m) { return ox_s(m->p->producer_version); }
const char *graft_model_domain(const graft_model *m) { return ox_s(m->p->domain); }
int64_t graft_model_version(const graft_model *m) { return m->p->has_model_version ? m->p->model_version : 0; }

size_t graft_model_opset_count(const graft_model *m) { return m->p->n_opset_import; }

int graft_model_opset(const graft_model *m, size_t i, const char **domain, int64_t *version)
{
    if (i >= m->p->n_opset_import) return 0;
    const Onnx__OperatorSetIdProto *o = m->p->opset_import[i];
    if (domain) *domain = ox_s(o->domain);
    if (version) *version = o->has_version ? o->version : 0;
    return 1;
}

int64_t graft_model_opset_version(const graft_model *m, const char *domain)
{
    const char *d = domain ? domain : "";
    if (strcmp(d, "ai.onnx") == 0) d = "";
    for (size_t i = 0; i < m->p->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->p->opset_import[i];
        const char *od = ox_s(o->domain);
        if (strcmp(od, "ai.onnx") == 0) od = "";
        if (strcmp(od, d) == 0) return o->has_version ? o->version : 0;
    }
    return -1;
}

size_t graft_model_metadata_count(const graft_model *m) { return m->p->n_metadata_props; }

int graft_model_metadata(const graft_model *m, size_t i, const char **key, const char **value)
{
    if (i >= m->p->n_metadata_props) return 0;
    if (key) *key = ox_s(m->p->metadata_props[i]->key);
    if (value) *value = ox_s(m->p->metadata_props[i]->value);
    return 1;
}

graft_graph *graft_model_graph(graft_model *m) { return ox_graph_wrap(m, m->p->graph); }

size_t graft_model_external_file_count(const graft_model *m) { return m->n_ext; }

const char *graft_model_external_file(const graft_model *m, size_t i, uint64_t *file_size)
{
    if (i >= m->n_ext) return NULL;
    if (file_size) *file_size = m->ext[i].size;
    return m->ext[i].location;
}

/* ------------------------------------------------------------ tensors */

const char *graft_tensor_name(const graft_tensor *t) { return ox_s(t->t.p->name); }
int graft_tensor_dtype(const graft_tensor *t) { return t->t.p->data_type; }
int graft_tensor_rank(const graft_tensor *t) { return (int)t->t.p->n_dims; }
const int64_t *graft_tensor_dims(const graft_tensor *t)
{
    static const int64_t none[1] = {0};
    return t->t.p->dims ? t->t.p->dims : none; /* never NULL: rank-0 callers memcpy 0 bytes from it */
}
uint64_t graft_tensor_numel(const graft_tensor *t) { return t->t.numel; }
uint64_t graft_tensor_nbytes(const graft_tensor *t) { return t->t.nbytes; }
const void *graft_tensor_data(const graft_tensor *t) { return t->t.data; }
uint64_t graft_tensor_offset(const graft_tensor *t) { return t->t.offset; }
const char *graft_tensor_location(const graft_tensor *t) { return t->t.location; }

static void forget_tensor(graft_model *m, Onnx__TensorProto *t)
{
    graft_tensor *gt = ox_pmap_get(&m->tensors, t);
    if (gt) {
        ox_pmap_del(&m->tensors, t);
        free(gt);
    }
}

static graft_status forget_cb(void *ctx, Onnx__TensorProto *t, const char *where, int flags, graft_error *err)
{
    forget_tensor(ctx, t);
    return GRAFT_OK;
}

static void forget_graphs_in(graft_model *m, Onnx__NodeProto *n)
{
    for (size_t i = 0; i < n->n_attribute; i++) {
        Onnx__AttributeProto *a = n->attribute[i];
        for (size_t j = 0; j < (a->g ? 1 : 0) + a->n_graphs; j++) {
            Onnx__GraphProto *g = a->g && j == 0 ? a->g : a->graphs[j - (a->g ? 1 : 0)];
            graft_graph *w = ox_pmap_get(&m->graphs, g);
            if (w) {
                ox_pmap_del(&m->graphs, g);
                ox_graph_free(w);
            }
            for (size_t k = 0; k < g->n_node; k++) forget_graphs_in(m, g->node[k]);
        }
    }
}

void ox_model_forget_node(graft_model *m, Onnx__NodeProto *n)
{
    ox_node_foreach_tensor(n, forget_cb, m, NULL);
    forget_graphs_in(m, n);
}
