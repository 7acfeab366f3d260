/* Tensor data: packed bytes from raw, external or typed fields; standalone
 * TensorProto files; attribute tensors. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/internal.h"

static graft_status count_err(const graft_tensor *t, const char *field, size_t have, uint64_t want,
                              graft_error *err)
{
    return ox_err(err, GRAFT_EINVAL, "tensor '%s': %s holds %zu values, %s of %llu elements needs %llu",
                  graft_tensor_name(t), field, have, graft_dtype_name(t->t.p->data_type),
                  (unsigned long long)t->t.numel, (unsigned long long)want);
}

graft_status graft_tensor_read(const graft_tensor *t, void *dst, size_t dst_bytes, graft_error *err)
{
    const Onnx__TensorProto *p = t->t.p;
    uint64_t n = t->t.numel, nb = t->t.nbytes;
    if (p->data_type == GRAFT_DTYPE_STRING || graft_dtype_bits(p->data_type) == 0)
        return ox_err(err, GRAFT_EUNSUPPORTED, "tensor '%s': no fixed-size data for type %s",
                      graft_tensor_name(t), graft_dtype_name(p->data_type));
    if (dst_bytes < nb)
        return ox_err(err, GRAFT_EINVAL, "tensor '%s': destination holds %zu bytes, %llu needed",
                      graft_tensor_name(t), dst_bytes, (unsigned long long)nb);
    if (t->t.data || nb == 0) {
        if (nb) memcpy(dst, t->t.data, (size_t)nb);
        return GRAFT_OK;
    }
    uint8_t *d = dst;
    int dt = p->data_type, bits = graft_dtype_bits(dt);
    switch (dt) {
    case GRAFT_DTYPE_FLOAT:
    case GRAFT_DTYPE_COMPLEX64: {
        uint64_t want = dt == GRAFT_DTYPE_FLOAT ? n : 2 * n;
        if (p->n_float_data != want) return count_err(t, "float_data", p->n_float_data, want, err);
        memcpy(d, p->float_data, (size_t)want * 4);
        return GRAFT_OK;
    }
    case GRAFT_DTYPE_DOUBLE:
    case GRAFT_DTYPE_COMPLEX128: {
        uint64_t want = dt == GRAFT_DTYPE_DOUBLE ? n : 2 * n;
        if (p->n_double_data != want) return count_err(t, "double_data", p->n_double_data, want, err);
        memcpy(d, p->double_data, (size_t)want * 8);
        return GRAFT_OK;
    }
    case GRAFT_DTYPE_INT64:
        if (p->n_int64_data != n) return count_err(t, "int64_data", p->n_int64_data, n, err);
        memcpy(d, p->int64_data, (size_t)n * 8);
        return GRAFT_OK;
    case GRAFT_DTYPE_UINT32:
    case GRAFT_DTYPE_UINT64:
        if (p->n_uint64_data != n) return count_err(t, "uint64_data", p->n_uint64_data, n, err);
        for (uint64_t i = 0; i < n; i++) {
            if (dt == GRAFT_DTYPE_UINT32) {
                uint32_t v = (uint32_t)p->uint64_data[i];
                memcpy(d + 4 * i, &v, 4);
            } else {
                memcpy(d + 8 * i, &p->uint64_data[i], 8);
            }
        }
        return GRAFT_OK;
    default:
        break;
    }
    /* int32_data family */
    if (bits == 4 || bits == 2) {
        uint64_t per = (uint64_t)(8 / bits), want = (n + per - 1) / per;
        if (p->n_int32_data != want) return count_err(t, "int32_data", p->n_int32_data, want, err);
        for (uint64_t i = 0; i < want; i++) d[i] = (uint8_t)p->int32_data[i];
        return GRAFT_OK;
    }
    if (p->n_int32_data != n) return count_err(t, "int32_data", p->n_int32_data, n, err);
    if (bits == 6) { /* one element per entry, packed into a 24-bit LSB-first stream */
        memset(d, 0, (size_t)nb);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t v = (uint32_t)p->int32_data[i] & 0x3f;
            uint64_t bit = i * 6;
            d[bit / 8] |= (uint8_t)(v << (bit % 8));
            if (bit % 8 > 2) d[bit / 8 + 1] |= (uint8_t)(v >> (8 - bit % 8));
        }
        return GRAFT_OK;
    }
    int bytes = bits / 8;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)p->int32_data[i];
        memcpy(d + (size_t)i * (size_t)bytes, &v, (size_t)bytes); /* little-endian host */
    }
    return GRAFT_OK;
}

graft_status graft_tensor_load_pb(const char *path, graft_tensor **out, graft_error *err)
{
    *out = NULL;
    graft_status rc = GRAFT_OK;
    void *map = MAP_FAILED;
    size_t size = 0;
    Onnx__TensorProto *p = NULL;
    graft_tensor *t = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ox_err(err, errno == ENOENT ? GRAFT_EINVAL : GRAFT_EIO, "%s: cannot open: %s", path,
                      strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > 2147483647u) {
        rc = ox_err(err, GRAFT_EINVAL, "%s: not a regular file under 2 GB", path);
        goto done;
    }
    size = (size_t)st.st_size;
    if (size) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            rc = ox_err(err, GRAFT_EIO, "%s: mmap: %s", path, strerror(errno));
            goto done;
        }
    }
    if ((rc = ox_wire_check(size ? map : (const uint8_t *)"", size, &onnx__tensor_proto__descriptor, 64,
                            path, err)) != GRAFT_OK)
        goto done;
    p = onnx__tensor_proto__unpack(NULL, size, size ? map : (const uint8_t *)"");
    if (!p) {
        rc = ox_err(err, GRAFT_EINVAL, "%s: not a TensorProto", path);
        goto done;
    }
    if (p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        rc = ox_err(err, GRAFT_EUNSUPPORTED, "%s: standalone tensor with external data", path);
        goto done;
    }
    /* validate through a throwaway model-less bind */
    graft_model tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.path = (char *)path;
    tmp.dirfd = -1;
    if ((rc = ox_tensor_bind(&tmp, p, "file", 0, err)) != GRAFT_OK) goto done;
    t = ox_pmap_get(&tmp.tensors, p);
    ox_pmap_free(&tmp.tensors);
    t->owned = p;
    p = NULL;
    *out = t;
done:
    if (p) onnx__tensor_proto__free_unpacked(p, NULL);
    if (map != MAP_FAILED) munmap(map, size);
    close(fd);
    return rc;
}

void graft_tensor_free(graft_tensor *t)
{
    if (!t) return;
    GRAFT_ASSERT(t->owned);
    onnx__tensor_proto__free_unpacked(t->owned, NULL);
    free(t);
}

graft_tensor *graft_node_attr_tensor(graft_graph *g, const graft_node *n, const char *name)
{
    const Onnx__NodeProto *np = (const Onnx__NodeProto *)n;
    for (size_t i = 0; i < np->n_attribute; i++) {
        const Onnx__AttributeProto *a = np->attribute[i];
        if (a->name && strcmp(a->name, name) == 0)
            return a->t ? ox_pmap_get(&g->m->tensors, a->t) : NULL;
    }
    return NULL;
}

int graft_node_attr_at(const graft_node *n, size_t i, const char **name, int *type)
{
    const Onnx__NodeProto *np = (const Onnx__NodeProto *)n;
    if (i >= np->n_attribute) return 0;
    if (name) *name = ox_s(np->attribute[i]->name);
    if (type) *type = (int)np->attribute[i]->type;
    return 1;
}
