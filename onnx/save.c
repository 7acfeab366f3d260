/* Atomic save: the model protobuf plus external-data file(s), written to
 * temporary files in the target directory, fsync'd and renamed, then the
 * directory fsync'd. Tensors of `external_threshold` bytes and more that
 * hold raw or external data go to the data file(s) at aligned offsets
 * (copy_file_range from mapped sources: no pages of ours); smaller
 * external tensors come back inline. The in-memory model is restored. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/internal.h"

#define OX_DEFAULT_THRESHOLD 1024
#define OX_DEFAULT_ALIGN 4096
#define OX_COPY_CHUNK (64u << 20)

typedef struct shard {
    char *name;  /* file name, relative to the model's directory */
    char *tmp;   /* temporary path while writing */
    char *final; /* final path */
    int fd;
    uint64_t end;
} shard;

typedef struct saved {
    Onnx__TensorProto *p;
    const ox_tensor *rec;
    int shard; /* -1: inlined */
    uint64_t offset;
    protobuf_c_boolean has_raw_data;
    ProtobufCBinaryData raw_data;
    protobuf_c_boolean has_data_location;
    Onnx__TensorProto__DataLocation data_location;
    size_t n_external_data;
    Onnx__StringStringEntryProto **external_data;
    Onnx__StringStringEntryProto *entries[3]; /* ours while swapped in */
    Onnx__StringStringEntryProto **arr;
    char offs[24], lens[24];
} saved;

typedef struct save_ctx {
    graft_model *m;
    const graft_save_opts *opts;
    bool sync; /* fsync and write-behind (not opts->no_sync) */
    long long threshold;
    uint64_t align, shard_size;
    const char *dir, *data_name, *out_path;
    shard *shards;
    size_t n_shards, cap_shards;
    saved *sv;
    size_t n_sv, cap_sv;
    uint64_t total, done;
} save_ctx;

static graft_status new_shard(save_ctx *c, graft_error *err)
{
    if (!ox_grow((void **)&c->shards, &c->cap_shards, c->n_shards + 1, sizeof *c->shards))
        return ox_err(err, GRAFT_ENOMEM, "%s: out of memory", c->out_path);
    shard *s = &c->shards[c->n_shards];
    memset(s, 0, sizeof *s);
    s->fd = -1;
    size_t n = strlen(c->data_name) + 16;
    if (!(s->name = malloc(n))) return ox_err(err, GRAFT_ENOMEM, "%s: out of memory", c->out_path);
    if (c->shard_size) snprintf(s->name, n, "%s.%05zu", c->data_name, c->n_shards + 1);
    else snprintf(s->name, n, "%s", c->data_name);
    c->n_shards++;
    return GRAFT_OK;
}

static graft_status plan_cb(void *ctx, Onnx__TensorProto *t, const char *where, int flags, graft_error *err)
{
    save_ctx *c = ctx;
    const graft_tensor *gt = ox_pmap_get(&c->m->tensors, t);
    GRAFT_ASSERT(gt);
    const ox_tensor *rec = &gt->t;
    bool is_ext = t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (t->data_type == GRAFT_DTYPE_STRING) return GRAFT_OK;
    bool has_bytes = t->has_raw_data || is_ext;
    /* sparse parts stay inline: onnx and onnxruntime read no external data for them */
    bool to_ext = has_bytes && !rec->sparse && c->threshold >= 0 && rec->nbytes >= (uint64_t)c->threshold;
    if (!to_ext && !is_ext) return GRAFT_OK; /* untouched */
    if (!ox_grow((void **)&c->sv, &c->cap_sv, c->n_sv + 1, sizeof *c->sv))
        return ox_err(err, GRAFT_ENOMEM, "%s: out of memory", c->out_path);
    saved *s = &c->sv[c->n_sv++];
    memset(s, 0, sizeof *s);
    s->p = t;
    s->rec = rec;
    s->shard = -1;
    s->has_raw_data = t->has_raw_data;
    s->raw_data = t->raw_data;
    s->has_data_location = t->has_data_location;
    s->data_location = t->data_location;
    s->n_external_data = t->n_external_data;
    s->external_data = t->external_data;
    if (!to_ext) return GRAFT_OK;
    if (c->n_shards == 0 && new_shard(c, err) != GRAFT_OK) return err->code;
    shard *sh = &c->shards[c->n_shards - 1];
    uint64_t off = (sh->end + c->align - 1) / c->align * c->align;
    if (c->shard_size && sh->end && off + rec->nbytes > c->shard_size) {
        if (new_shard(c, err) != GRAFT_OK) return err->code;
        sh = &c->shards[c->n_shards - 1];
        off = 0;
    }
    s->shard = (int)(c->n_shards - 1);
    s->offset = off;
    sh->end = off + rec->nbytes;
    c->total += rec->nbytes;
    return GRAFT_OK;
}

static graft_status copy_bytes(save_ctx *c, const saved *s, graft_error *err)
{
    const ox_tensor *rec = s->rec;
    shard *sh = &c->shards[s->shard];
    uint64_t len = rec->nbytes, done = 0;
    if (rec->ext >= 0) { /* kernel-side copy: no pages of ours */
        const ox_extfile *e = &c->m->ext[rec->ext];
        loff_t in = (loff_t)rec->offset, out = (loff_t)s->offset;
        while (done < len) {
            size_t want = len - done > OX_COPY_CHUNK ? OX_COPY_CHUNK : (size_t)(len - done);
            ssize_t r = copy_file_range(e->fd, &in, sh->fd, &out, want, 0);
            if (r <= 0) break; /* fall back to write() below */
            /* write-behind: start writing this range to disk now, so the
             * final fsync overlaps the copy instead of following it */
            if (c->sync)
                sync_file_range(sh->fd, (off_t)(s->offset + done), (off_t)r, SYNC_FILE_RANGE_WRITE);
            done += (uint64_t)r;
            if (c->opts && c->opts->progress) c->opts->progress(c->opts->progress_ctx, c->done + done, c->total);
        }
    }
    while (done < len) {
        size_t n = len - done > OX_COPY_CHUNK ? OX_COPY_CHUNK : (size_t)(len - done);
        ssize_t w = pwrite(sh->fd, rec->data + done, n, (off_t)(s->offset + done));
        if (w < 0) {
            if (errno == EINTR) continue;
            return ox_err(err, GRAFT_EIO, "%s: writing tensor '%s' to '%s': %s", c->out_path,
                          ox_s(rec->p->name), sh->tmp, strerror(errno));
        }
        if (c->sync) sync_file_range(sh->fd, (off_t)(s->offset + done), (off_t)w, SYNC_FILE_RANGE_WRITE);
        if (rec->ext >= 0) { /* drop the source pages we touched */
            uintptr_t a = (uintptr_t)(rec->data + done) & ~(uintptr_t)4095;
            madvise((void *)a, (size_t)((uintptr_t)(rec->data + done + (size_t)w) - a), MADV_DONTNEED);
        }
        done += (uint64_t)w;
        if (c->opts && c->opts->progress) c->opts->progress(c->opts->progress_ctx, c->done + done, c->total);
    }
    c->done += len;
    return GRAFT_OK;
}

static Onnx__StringStringEntryProto *entry_new(const char *k, const char *v)
{
    Onnx__StringStringEntryProto *e = malloc(sizeof *e);
    if (!e) return NULL;
    onnx__string_string_entry_proto__init(e);
    e->key = (char *)k; /* borrowed; restored before anything frees them */
    e->value = (char *)v;
    return e;
}

/* Swaps the planned representation into the tensor protos. */
static graft_status swap_in(save_ctx *c, graft_error *err)
{
    for (size_t i = 0; i < c->n_sv; i++) {
        saved *s = &c->sv[i];
        Onnx__TensorProto *t = s->p;
        if (s->shard < 0) { /* small external tensor: inline a borrowed view */
            t->has_raw_data = 1;
            t->raw_data.data = (uint8_t *)s->rec->data;
            t->raw_data.len = s->rec->nbytes;
            t->has_data_location = 0;
            t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
            t->n_external_data = 0;
            t->external_data = NULL;
            continue;
        }
        snprintf(s->offs, sizeof s->offs, "%llu", (unsigned long long)s->offset);
        snprintf(s->lens, sizeof s->lens, "%llu", (unsigned long long)s->rec->nbytes);
        s->entries[0] = entry_new("location", c->shards[s->shard].name);
        s->entries[1] = entry_new("offset", s->offs);
        s->entries[2] = entry_new("length", s->lens);
        s->arr = malloc(3 * sizeof *s->arr);
        if (!s->entries[0] || !s->entries[1] || !s->entries[2] || !s->arr)
            return ox_err(err, GRAFT_ENOMEM, "%s: out of memory", c->out_path);
        memcpy(s->arr, s->entries, 3 * sizeof *s->arr);
        t->external_data = s->arr;
        t->n_external_data = 3;
        t->has_data_location = 1;
        t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        t->has_raw_data = 0;
        t->raw_data.data = NULL;
        t->raw_data.len = 0;
    }
    return GRAFT_OK;
}

static void restore(save_ctx *c)
{
    for (size_t i = 0; i < c->n_sv; i++) {
        saved *s = &c->sv[i];
        Onnx__TensorProto *t = s->p;
        free(s->arr);
        for (int k = 0; k < 3; k++) free(s->entries[k]);
        s->arr = NULL;
        memset(s->entries, 0, sizeof s->entries);
        t->has_raw_data = s->has_raw_data;
        t->raw_data = s->raw_data;
        t->has_data_location = s->has_data_location;
        t->data_location = s->data_location;
        t->n_external_data = s->n_external_data;
        t->external_data = s->external_data;
    }
}

/* Buffered ProtobufCBuffer writing to an fd. */
typedef struct fd_buffer {
    ProtobufCBuffer base;
    int fd;
    int failed;
    int errnum;
    size_t n;
    uint8_t buf[1 << 16];
} fd_buffer;

static void fdb_flush(fd_buffer *b)
{
    size_t off = 0;
    while (!b->failed && off < b->n) {
        ssize_t w = write(b->fd, b->buf + off, b->n - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            b->failed = 1;
            b->errnum = errno;
            break;
        }
        off += (size_t)w;
    }
    b->n = 0;
}

static void fdb_append(ProtobufCBuffer *pb, size_t len, const uint8_t *data)
{
    fd_buffer *b = (fd_buffer *)pb;
    while (len && !b->failed) {
        if (b->n == sizeof b->buf) fdb_flush(b);
        size_t k = sizeof b->buf - b->n < len ? sizeof b->buf - b->n : len;
        memcpy(b->buf + b->n, data, k);
        b->n += k;
        data += k;
        len -= k;
    }
}

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int make_temp(const char *dir, const char *base, char **path_out)
{
    size_t n = strlen(dir) + strlen(base) + 32;
    char *p = malloc(n);
    if (!p) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(p, n, "%s/.%s.tmp.XXXXXX", dir, base);
    int fd = mkostemp(p, O_CLOEXEC);
    if (fd < 0) {
        free(p);
        return -1;
    }
    mode_t um = umask(0);
    umask(um);
    (void)!fchmod(fd, 0666 & ~um); /* best effort: mkostemp made it 0600 */
    *path_out = p;
    return fd;
}

static graft_status pack_model(graft_model *m, int fd, const char *tmp, graft_error *err)
{
    fd_buffer *b = malloc(sizeof *b);
    if (!b) return ox_err(err, GRAFT_ENOMEM, "%s: out of memory", tmp);
    b->base.append = fdb_append;
    b->fd = fd;
    b->failed = 0;
    b->errnum = 0;
    b->n = 0;
    protobuf_c_message_pack_to_buffer(&m->p->base, &b->base);
    fdb_flush(b);
    int failed = b->failed, e = b->errnum;
    free(b);
    if (failed) return ox_err(err, GRAFT_EIO, "%s: write: %s", tmp, strerror(e));
    return GRAFT_OK;
}

graft_status graft_model_save(graft_model *m, const char *path, const graft_save_opts *opts,
                              graft_error *err)
{
    graft_status rc = GRAFT_OK;
    save_ctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.opts = opts;
    c.sync = !(opts && opts->no_sync);
    c.out_path = path;
    c.threshold = opts && opts->external_threshold ? opts->external_threshold : OX_DEFAULT_THRESHOLD;
    c.align = opts && opts->alignment > 0 ? (uint64_t)opts->alignment : OX_DEFAULT_ALIGN;
    c.shard_size = opts && opts->shard_size > 0 ? (uint64_t)opts->shard_size : 0;
    int model_fd = -1, dfd = -1;
    bool swapped = false;
    char *model_tmp = NULL, *dir = NULL, *base = NULL, *data_name = NULL;

    const char *slash = strrchr(path, '/');
    dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : ox_strdup(".");
    base = ox_strdup(slash ? slash + 1 : path);
    if (!dir || !base) goto nomem;
    c.dir = dir;
    if (!*base) {
        rc = ox_err(err, GRAFT_EINVAL, "%s: output path names a directory, not a file", path);
        goto fail;
    }
    if (opts && opts->data_name) {
        data_name = ox_strdup(opts->data_name);
    } else {
        size_t n = strlen(base) + 6;
        if ((data_name = malloc(n))) snprintf(data_name, n, "%s.data", base);
    }
    if (!data_name) goto nomem;
    if (!*data_name || strchr(data_name, '/') || strcmp(data_name, ".") == 0 ||
        strcmp(data_name, "..") == 0 || strcmp(data_name, base) == 0) {
        rc = ox_err(err, GRAFT_EINVAL, "%s: external data name '%s' must be a plain file name "
                    "other than the model's", path, data_name);
        goto fail;
    }
    c.data_name = data_name;
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        rc = ox_err(err, errno == ENOENT ? GRAFT_EINVAL : GRAFT_EIO, "%s: cannot open directory '%s': %s",
                    path, dir, strerror(errno));
        goto fail;
    }

    /* plan, then write the data files */
    if ((rc = ox_model_foreach_tensor(m->p, plan_cb, &c, err)) != GRAFT_OK) goto fail;
    for (size_t i = 0; i < c.n_shards; i++) {
        shard *sh = &c.shards[i];
        if (!(sh->final = path_join(dir, sh->name))) goto nomem;
        if ((sh->fd = make_temp(dir, sh->name, &sh->tmp)) < 0) {
            rc = ox_err(err, GRAFT_EIO, "%s: cannot create a temporary file in '%s': %s", path, dir,
                        strerror(errno));
            goto fail;
        }
    }
    for (size_t i = 0; i < c.n_sv; i++)
        if (c.sv[i].shard >= 0 && (rc = copy_bytes(&c, &c.sv[i], err)) != GRAFT_OK) goto fail;
    for (size_t i = 0; i < c.n_shards; i++) {
        shard *sh = &c.shards[i];
        if (ftruncate(sh->fd, (off_t)sh->end) != 0 || (c.sync && fsync(sh->fd) != 0)) {
            rc = ox_err(err, GRAFT_EIO, "%s: finishing '%s': %s", path, sh->tmp, strerror(errno));
            goto fail;
        }
    }

    /* the model, with the new locations swapped in */
    swapped = true;
    if ((rc = swap_in(&c, err)) != GRAFT_OK) goto fail;
    size_t packed = protobuf_c_message_get_packed_size(&m->p->base);
    if (packed > 2147483647u) {
        rc = ox_err(err, GRAFT_EINVAL,
                    "%s: the model protobuf would be %zu bytes, over protobuf's 2 GB limit "
                    "(lower the external-data threshold)", path, packed);
        goto fail;
    }
    if ((model_fd = make_temp(dir, base, &model_tmp)) < 0) {
        rc = ox_err(err, GRAFT_EIO, "%s: cannot create a temporary file in '%s': %s", path, dir,
                    strerror(errno));
        goto fail;
    }
    if ((rc = pack_model(m, model_fd, model_tmp, err)) != GRAFT_OK) goto fail;
    restore(&c);
    swapped = false;
    if (c.sync && fsync(model_fd) != 0) {
        rc = ox_err(err, GRAFT_EIO, "%s: fsync: %s", model_tmp, strerror(errno));
        goto fail;
    }
    /* data files first, so the model never names a missing file */
    for (size_t i = 0; i < c.n_shards; i++) {
        shard *sh = &c.shards[i];
        if (rename(sh->tmp, sh->final) != 0) {
            rc = ox_err(err, GRAFT_EIO, "%s: rename to '%s': %s", sh->tmp, sh->final, strerror(errno));
            goto fail;
        }
        free(sh->tmp);
        sh->tmp = NULL;
    }
    if (rename(model_tmp, path) != 0) {
        rc = ox_err(err, GRAFT_EIO, "%s: rename to '%s': %s", model_tmp, path, strerror(errno));
        goto fail;
    }
    free(model_tmp);
    model_tmp = NULL;
    if (c.sync && fsync(dfd) != 0 && errno != EINVAL) {
        rc = ox_err(err, GRAFT_EIO, "%s: fsync of directory '%s': %s", path, dir, strerror(errno));
        goto fail;
    }
    goto done;
nomem:
    rc = ox_err(err, GRAFT_ENOMEM, "%s: out of memory", path);
fail:
done:
    if (swapped) restore(&c);
    for (size_t i = 0; i < c.n_shards; i++) {
        shard *sh = &c.shards[i];
        if (sh->fd >= 0) close(sh->fd);
        if (sh->tmp) unlink(sh->tmp);
        free(sh->tmp);
        free(sh->final);
        free(sh->name);
    }
    free(c.shards);
    free(c.sv);
    if (model_fd >= 0) close(model_fd);
    if (model_tmp) unlink(model_tmp);
    free(model_tmp);
    if (dfd >= 0) close(dfd);
    free(dir);
    free(base);
    free(data_name);
    return rc;
}
