/* The CUDA executor: the backend behind --device cuda. Binds every node to
 * its CPU kernel (as the session does) and, where runtime/cuda/ops.c has a
 * device implementation that accepts it, places it on the device; the
 * placement is fixed by the first run (the planning step). Small integer
 * and boolean shape and mask computations stay on host kernels; values
 * cross between host and device only where a placement boundary is
 * crossed, and weights are uploaded once, on first use. Views (Reshape,
 * Squeeze, Unsqueeze, Flatten, Identity) share their input's buffers. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/cuda/cuexec.h"

#define xerr rt_seterr

graft_status cx_cuda_err(const cx_node *cn, graft_error *err, cudaError_t e, const char *what)
{
    graft_status code = e == cudaErrorMemoryAllocation ? GRAFT_ENOMEM : GRAFT_EIO;
    if (cn) return rt_err(&cn->n, err, code, "%s: %s", what, cudaGetErrorString(e));
    return xerr(err, code, "CUDA: %s: %s", what, cudaGetErrorString(e));
}

#define CX_CUDA(call, what)                                                  \
    do {                                                                     \
        cudaError_t cx_e_ = (call);                                          \
        if (cx_e_ != cudaSuccess) return cx_cuda_err(NULL, err, cx_e_, what); \
    } while (0)

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

static graft_status nomem(graft_error *err, const char *what)
{
    return xerr(err, GRAFT_ENOMEM, "out of memory (%s)", what);
}

/* ------------------------------------------------------------ values */

static cx_val *root(const cx_val *v)
{
    while (v->base) v = v->base;
    return (cx_val *)v;
}

static graft_status dev_reserve(cx_exec *x, cx_val *v, size_t bytes, graft_error *err)
{
    if (v->dcap >= bytes && v->d) return GRAFT_OK;
    if (x->capturing) { /* no allocation inside a capture: this step runs eagerly */
        x->cap_abort = x->cap_abort ? x->cap_abort : 2;
        return xerr(err, GRAFT_EUNSUPPORTED, "CUDA graph capture: a buffer grows");
    }
    if (!v->dcap) v->d = NULL;
    size_t alloc = (bytes + 255) / 256 * 256;
    if (!alloc) alloc = 256;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, alloc);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return xerr(err, e == cudaErrorMemoryAllocation ? GRAFT_ENOMEM : GRAFT_EIO,
                    "CUDA: %zu bytes of device memory: %s", alloc, cudaGetErrorString(e));
    }
    if (v->dcap) cudaFree(v->d);
    v->d = p;
    v->dcap = alloc;
    return GRAFT_OK;
}

/* ------------------------------------------------------------ replay records */

static void rp_up(cx_exec *x, cx_val *v)
{
    cx_node *cn = x->cur;
    if (!cn) return;
    if (cn->rp_nup == CX_RP_MAX) {
        cn->rp_bad = true;
        return;
    }
    cn->rp_upn[cn->rp_nup] = v->t.nbytes;
    cn->rp_up[cn->rp_nup++] = v;
}

static void rp_hostread(cx_exec *x, cx_val *v)
{
    cx_node *cn = x->cur;
    if (!cn) return;
    for (int i = 0; i < cn->rp_nhr; i++)
        if (cn->rp_hr[i] == v) return;
    if (cn->rp_nhr == CX_RP_MAX || v->t.nbytes > 4096) {
        cn->rp_bad = true;
        return;
    }
    void *b = malloc(v->t.nbytes + 1);
    if (!b) {
        cn->rp_bad = true;
        return;
    }
    if (v->t.nbytes) memcpy(b, v->t.data, v->t.nbytes);
    cn->rp_hr[cn->rp_nhr] = v;
    cn->rp_hrb[cn->rp_nhr] = b;
    cn->rp_hrn[cn->rp_nhr++] = v->t.nbytes;
}

static void rp_clear(cx_node *cn)
{
    for (int i = 0; i < cn->rp_nhr; i++) free(cn->rp_hrb[i]);
    cn->rp_nhr = cn->rp_nup = 0;
    cn->rp_ok = cn->rp_bad = false;
    cn->rp_exempt = 0;
    cn->rp_len = cn->rp_hscr = cn->rp_fast = cn->rp_elide = 0;
    cn->rp_mask_in = -1;
}

static void rp_meta(const cx_val *v, cx_meta *m)
{
    m->present = v->t.present;
    m->dtype = v->t.dtype;
    m->rank = v->t.rank;
    memcpy(m->dims, v->t.dims, sizeof m->dims);
    m->numel = v->t.numel;
    m->nbytes = v->t.nbytes;
    m->d = v->d;
    m->pitch = v->pitch;
}

/* Records what a device node saw and made in the step being captured. */
static void rp_record(cx_node *cn)
{
    rt_node *n = &cn->n;
    if (cn->rp_bad || n->n_in > 32) return;
    if (!cn->rp_in) cn->rp_in = calloc((size_t)n->n_in + 1, sizeof *cn->rp_in);
    if (!cn->rp_out) cn->rp_out = calloc((size_t)n->n_out + 1, sizeof *cn->rp_out);
    if (!cn->rp_in || !cn->rp_out) return;
    for (int j = 0; j < n->n_in; j++) {
        memset(&cn->rp_in[j], 0, sizeof cn->rp_in[j]);
        if (n->in[j]) rp_meta(cx_v(n->in[j]), &cn->rp_in[j]);
    }
    for (int j = 0; j < n->n_out; j++) {
        cx_val *v = cx_v(n->out[j]);
        if (v->base) return; /* device ops make no views */
        rp_meta(v, &cn->rp_out[j]);
        cn->rp_out[j].present = v->t.present && v->on_dev;
    }
    cn->rp_ok = true;
}

/* The weights' first upload (at the planning run) as a progress bar on a
 * terminal, for exports of 64 MB or more. */
static void upload_progress(cx_exec *x, size_t bytes)
{
    x->up_done += bytes;
    if (!x->tty || x->up_total < (64u << 20)) return;
    int pct = (int)(100 * (x->up_done < x->up_total ? x->up_done : x->up_total) / x->up_total);
    if (pct == x->up_shown) return;
    x->up_shown = pct;
    char bar[41];
    for (int i = 0; i < 40; i++) bar[i] = i < pct * 40 / 100 ? '#' : '.';
    bar[40] = 0;
    fprintf(stderr, "\rgraft: weights to the GPU [%s] %3d%% (%.2f of %.2f GB)", bar, pct, (double)x->up_done / 1e9,
            (double)x->up_total / 1e9);
    fflush(stderr);
}

/* Pinned host memory h as the device maps it: NULL under GRAFT_CUDA_MAPPED=0
 * or where the device does not map it (the caller copies instead). */
static void *mapped(cx_exec *x, void *h)
{
    void *d = NULL;
    if (!x->mapped) return NULL;
    if (cudaHostGetDevicePointer(&d, h, 0) == cudaSuccess) return d;
    (void)cudaGetLastError();
    return NULL;
}

/* Host to device through the value's pinned staging (per-step data), so
 * that the copy can sit in a captured graph and never stages pageable
 * memory. Weights and constants (sticky: uploaded once) go directly. */
static graft_status upload(cx_exec *x, cx_val *v, graft_error *err)
{
    if (!v->t.nbytes) return GRAFT_OK;
    if (v->sticky) {
        if (x->capturing) { /* a first upload inside a capture: this step runs eagerly */
            x->cap_abort = x->cap_abort ? x->cap_abort : 2;
            return xerr(err, GRAFT_EUNSUPPORTED, "CUDA graph capture: a weight's first upload");
        }
        CX_CUDA(cudaMemcpyAsync(v->d, v->t.data, v->t.nbytes, cudaMemcpyHostToDevice, x->stream), "upload");
        if (v->is_init) upload_progress(x, v->t.nbytes);
        return GRAFT_OK;
    }
    if (v->pcap < v->t.nbytes) {
        if (x->capturing) {
            x->cap_abort = x->cap_abort ? x->cap_abort : 2;
            return xerr(err, GRAFT_EUNSUPPORTED, "CUDA graph capture: staging grows");
        }
        size_t alloc = (v->t.nbytes + 255) / 256 * 256;
        void *p[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            cudaError_t e = cudaMallocHost(&p[k], alloc);
            if (e != cudaSuccess) {
                (void)cudaGetLastError();
                if (k) cudaFreeHost(p[0]);
                return xerr(err, GRAFT_ENOMEM, "CUDA: %zu bytes of pinned memory: %s", alloc, cudaGetErrorString(e));
            }
        }
        if (v->pin[0]) {
            CX_CUDA(cudaStreamSynchronize(x->stream), "synchronise");
            for (int k = 0; k < 2; k++) cudaFreeHost(v->pin[k]);
        }
        v->pin[0] = p[0];
        v->pin[1] = p[1];
        v->pcap = alloc;
        for (int k = 0; k < 2; k++) v->pin_d[k] = mapped(x, p[k]);
    }
    /* the last copy out of this slot's staging has completed: each step ends
     * in a synchronising read, or (pipelined) the run two before this one
     * has, and a value is uploaded once a step */
    memcpy(v->pin[x->slot], v->t.data, v->t.nbytes);
    if (x->capturing) rp_up(x, v);
    /* a small upload by a kernel reading the mapped staging (a kernel node when captured): between two
     * kernels a copy costs some 7 us of the step (E2B's per-step upload, H100, session 45's trace: the
     * copy ran 1.1 us, the graph's first kernel started 5.5 us after it) */
    if (v->pin_d[x->slot] && v->t.nbytes % 4 == 0 && v->t.nbytes <= CX_UP_WORDS_MAX && ((uintptr_t)v->d & 3) == 0)
        return gops_copy_words((uint32_t *)v->d, (const uint32_t *)v->pin_d[x->slot], (int)(v->t.nbytes / 4),
                               (gcuda_stream)x->stream, err);
    CX_CUDA(cudaMemcpyAsync(v->d, v->pin[x->slot], v->t.nbytes, cudaMemcpyHostToDevice, x->stream), "upload");
    return GRAFT_OK;
}

graft_status cx_to_dev_pitched(cx_exec *x, cx_val *v, graft_error *err)
{
    if (v->on_dev) return GRAFT_OK;
    if (v->base) {
        cx_val *r = root(v);
        graft_status rc = cx_to_dev(x, r, err);
        if (rc) return rc;
        v->d = r->d;
        v->dcap = 0;
        v->on_dev = true;
        return GRAFT_OK;
    }
    if (!v->t.present) return xerr(err, GRAFT_EINVAL, "CUDA executor: a value without data was read");
    if (!v->on_host) return xerr(err, GRAFT_EINVAL, "CUDA executor: a value was read before it was computed");
    graft_status rc = dev_reserve(x, v, v->t.nbytes, err);
    if (rc) return rc;
    if ((rc = upload(x, v, err)) != GRAFT_OK) return rc;
    v->pitch = 0;
    v->on_dev = true;
    return GRAFT_OK;
}

graft_status cx_to_dev(cx_exec *x, cx_val *v, graft_error *err)
{
    if (root(v)->pitch && root(v)->on_dev)
        return xerr(err, GRAFT_EUNSUPPORTED, "CUDA executor: a KV cache view read by a device op that takes only "
                    "contiguous data");
    return cx_to_dev_pitched(x, v, err);
}

void cx_strides4(const cx_val *v, int64_t st[4])
{
    const cx_val *r = root(v);
    int64_t H = v->t.dims[1], L = v->t.dims[2], D = v->t.dims[3];
    int64_t P = r->pitch && r->on_dev ? r->pitch : L;
    st[3] = 1, st[2] = D, st[1] = P * D, st[0] = H * P * D;
}

/* D2H of the value's device data into dst (contiguous), through the pitch
 * of a KV cache view. Does not synchronise. */
static graft_status download(cx_exec *x, const cx_val *v, void *dst, graft_error *err)
{
    const cx_val *r = root(v);
    if (!v->t.nbytes) return GRAFT_OK;
    if (r->pitch && v->t.rank == 4 && r->pitch != v->t.dims[2]) {
        size_t es = rt_dtype_size(v->t.dtype), w = (size_t)(v->t.dims[2] * v->t.dims[3]) * es;
        size_t sp = (size_t)(r->pitch * v->t.dims[3]) * es;
        CX_CUDA(cudaMemcpy2DAsync(dst, w, r->d, sp, w, (size_t)(v->t.dims[0] * v->t.dims[1]), cudaMemcpyDeviceToHost,
                                  x->stream), "download of a KV cache view");
        return GRAFT_OK;
    }
    CX_CUDA(cudaMemcpyAsync(dst, r->d, v->t.nbytes, cudaMemcpyDeviceToHost, x->stream), "download");
    return GRAFT_OK;
}

static graft_status host_reserve(cx_val *v, size_t bytes, graft_error *err)
{
    if (!v->t.cap) v->t.data = NULL;
    if (v->t.cap >= bytes && v->t.data) return GRAFT_OK;
    size_t alloc = (bytes + 63) / 64 * 64;
    if (!alloc) alloc = 64;
    void *p = aligned_alloc(64, alloc);
    if (!p) return nomem(err, "host copy of a device value");
    if (v->t.cap) free(v->t.data);
    v->t.data = p;
    v->t.cap = alloc;
    return GRAFT_OK;
}

static graft_status to_host(cx_exec *x, cx_val *v, graft_error *err)
{
    if (v->on_host) return GRAFT_OK;
    if (v->base) {
        cx_val *r = root(v);
        graft_status rc = to_host(x, r, err);
        if (rc) return rc;
        if (v->t.cap) free(v->t.data);
        v->t.cap = 0;
        v->t.data = r->t.data;
        v->on_host = true;
        return GRAFT_OK;
    }
    if (!v->t.present) return xerr(err, GRAFT_EINVAL, "CUDA executor: a value without data was read");
    if (!v->on_dev) return xerr(err, GRAFT_EINVAL, "CUDA executor: a value was read before it was computed");
    graft_status rc = host_reserve(v, v->t.nbytes, err);
    if (rc) return rc;
    if (v->t.nbytes) {
        if (x->replaying) { /* the graph has not run yet */
            x->rp_fail = true;
            return xerr(err, GRAFT_EUNSUPPORTED, "CUDA graph replay: a host node reads device data");
        }
        if (x->capturing) { /* a host node reads device data: no graphs for this model */
            x->cap_abort = 1;
            return xerr(err, GRAFT_EUNSUPPORTED, "CUDA graph capture: a host node reads device data");
        }
        if ((rc = download(x, v, v->t.data, err)) != GRAFT_OK) return rc;
        CX_CUDA(cudaStreamSynchronize(x->stream), "synchronise for a host node");
        x->run_syncs++;
        if (x->now && x->graph_step)
            snprintf(x->sync_why, sizeof x->sync_why, "%s '%s' (%s) reads a device value of %zu bytes",
                     rt_node_op(&x->now->n), graft_node_name(x->now->n.src),
                     x->now->place == CX_DEVICE ? "device" : "host", v->t.nbytes);
    }
    v->on_host = true;
    return GRAFT_OK;
}

graft_status cx_to_host(cx_exec *x, cx_val *v, graft_error *err)
{
    graft_status rc = to_host(x, v, err);
    if (rc == GRAFT_OK && x->capturing && x->cur) rp_hostread(x, v); /* a device op reads it on the host */
    return rc;
}

/* v shaped (dims checked by the caller), present, not a view. */
static void out_shape(cx_val *v, int dtype, int rank, const int64_t *dims, uint64_t numel)
{
    v->t.dtype = dtype;
    v->t.rank = rank;
    memcpy(v->t.dims, dims, (size_t)rank * sizeof *dims);
    v->t.numel = numel;
    v->t.nbytes = (size_t)numel * rt_dtype_size(dtype);
    v->t.present = true;
    v->base = NULL;
}

cx_val *cx_out(cx_exec *x, cx_node *cn, int i, int dtype, int rank, const int64_t *dims, graft_error *err)
{
    RT_ASSERT(i < cn->n.n_out);
    cx_val *v = cx_v(cn->n.out[i]);
    if (rank < 0 || rank > RT_MAX_RANK) {
        rt_err(&cn->n, err, GRAFT_EUNSUPPORTED, "output %d of rank %d", i, rank);
        return NULL;
    }
    uint64_t numel = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0) {
            rt_err(&cn->n, err, GRAFT_EINVAL, "output %d: negative dimension", i);
            return NULL;
        }
        numel *= (uint64_t)dims[d];
    }
    out_shape(v, dtype, rank, dims, numel);
    if (v->pitch) { /* was a cache view: the buffer is the generator's */
        v->pitch = 0;
        v->d = NULL;
        v->dcap = 0;
    }
    if (dev_reserve(x, v, v->t.nbytes, err) != GRAFT_OK) return NULL;
    v->on_dev = true;
    v->on_host = false;
    return v;
}

cx_val *cx_out_at(cx_exec *x, cx_node *cn, int i, int dtype, int rank, const int64_t *dims, void *d)
{
    RT_ASSERT(i < cn->n.n_out);
    cx_val *v = cx_v(cn->n.out[i]);
    if (rank < 0 || rank > RT_MAX_RANK || (v->dcap && x->capturing)) return NULL;
    uint64_t numel = 1;
    for (int k = 0; k < rank; k++) {
        if (dims[k] < 0) return NULL;
        numel *= (uint64_t)dims[k];
    }
    out_shape(v, dtype, rank, dims, numel);
    v->pitch = 0;
    if (v->dcap) cudaFree(v->d);
    v->dcap = 0;
    v->d = d;
    v->on_dev = true;
    v->on_host = false;
    return v;
}

cx_val *cx_out_cache(cx_exec *x, cx_node *cn, int i, int dtype, const int64_t dims[4], const cx_kvbind *kb,
                     graft_error *err)
{
    (void)x;
    RT_ASSERT(i < cn->n.n_out);
    cx_val *v = cx_v(cn->n.out[i]);
    out_shape(v, dtype, 4, dims, (uint64_t)(dims[0] * dims[1] * dims[2] * dims[3]));
    if (v->dcap) cudaFree(v->d);
    v->dcap = 0;
    v->d = kb->buf;
    v->pitch = kb->max_seq;
    v->on_dev = true;
    v->on_host = false;
    return v;
}

const cx_kvbind *cx_kv_of_past(cx_exec *x, const cx_val *v)
{
    for (size_t i = 0; i < x->n_kv; i++)
        if (x->vals[x->kv[i].past] == v) return v->d == x->kv[i].buf && v->pitch ? &x->kv[i] : NULL;
    return NULL;
}

graft_status cx_lens(cx_exec *x, int64_t B, int64_t past, int64_t total, graft_error *err)
{
    if (B > CX_MAX_B) return xerr(err, GRAFT_EUNSUPPORTED, "batch %lld over %d", (long long)B, CX_MAX_B);
    if (x->len_run == x->run_no) {
        if (past != x->len_past || total != x->len_total)
            return xerr(err, GRAFT_EUNSUPPORTED, "KV caches of different lengths in one step");
        return GRAFT_OK;
    }
    if (!x->dlen) {
        if (x->capturing) {
            x->cap_abort = x->cap_abort ? x->cap_abort : 2;
            return xerr(err, GRAFT_EUNSUPPORTED, "CUDA graph capture: first lengths");
        }
        CX_CUDA(cudaMalloc((void **)&x->dlen, 2 * CX_MAX_B * sizeof(int32_t)), "lengths");
        CX_CUDA(cudaMallocHost((void **)&x->hlen, 2 * 2 * CX_MAX_B * sizeof(int32_t)), "pinned lengths");
        x->hlen_d = (int32_t *)mapped(x, x->hlen);
    }
    if (x->stream != x->side_main) cx_side_fail(x, "the lengths went up on the side stream");
    /* the last copy out of this slot has completed (as upload's staging) */
    int32_t *hl = x->hlen + 2 * CX_MAX_B * x->slot;
    for (int64_t b = 0; b < CX_MAX_B; b++) {
        hl[b] = (int32_t)past;
        hl[CX_MAX_B + b] = (int32_t)total;
    }
    if (x->hlen_d) { /* a kernel reads the slot's mapped staging (a kernel node when captured) */
        /* not gops_copy: that is a programmatic dependent that lets its dependents start before it has
         * written, and the attention reads the lengths before its griddepcontrol.wait. Ahead: the copy runs
         * under the kernel before (q/k/v's), which reads no lengths; the run's first attention is after it */
        graft_status rc = gops_copy_words_ahead((uint32_t *)x->dlen,
                                                (const uint32_t *)(x->hlen_d + 2 * CX_MAX_B * x->slot), 2 * CX_MAX_B,
                                                (gcuda_stream)x->stream, err);
        if (rc != GRAFT_OK) return rc;
    } else {
        CX_CUDA(cudaMemcpyAsync(x->dlen, hl, 2 * CX_MAX_B * sizeof(int32_t), cudaMemcpyHostToDevice, x->stream),
                "upload lengths");
    }
    x->len_run = x->run_no;
    x->len_past = past;
    x->len_total = total;
    return GRAFT_OK;
}

int cx_lens_replay(cx_exec *x, int64_t past, int64_t total)
{
    if (x->len_run == x->run_no) return past == x->len_past && total == x->len_total;
    if (!x->hlen) return 0;
    int32_t *hl = x->hlen + 2 * CX_MAX_B * x->slot;
    for (int64_t b = 0; b < CX_MAX_B; b++) {
        hl[b] = (int32_t)past;
        hl[CX_MAX_B + b] = (int32_t)total;
    }
    x->len_run = x->run_no;
    x->len_past = past;
    x->len_total = total;
    return 1;
}

void *cx_workspace(cx_exec *x, cx_node *cn, size_t bytes, graft_error *err)
{
    if (cn->wcap >= bytes && cn->ws) return cn->ws;
    if (x->capturing) {
        x->cap_abort = x->cap_abort ? x->cap_abort : 2;
        rt_err(&cn->n, err, GRAFT_EUNSUPPORTED, "CUDA graph capture: a workspace grows");
        return NULL;
    }
    size_t alloc = (bytes + 255) / 256 * 256;
    if (!alloc) alloc = 256;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, alloc);
    if (e == cudaSuccess) e = cudaMemsetAsync(p, 0, alloc, x->stream);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (p) cudaFree(p);
        cx_cuda_err(cn, err, e, "workspace");
        return NULL;
    }
    if (cn->ws) cudaFree(cn->ws);
    cn->ws = p;
    cn->wcap = alloc;
    return p;
}

void *cx_scratch(cx_node *cn, size_t bytes, graft_error *err)
{
    if (cn->scap >= bytes && cn->scr) return cn->scr;
    size_t alloc = (bytes + 255) / 256 * 256;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, alloc ? alloc : 256);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cx_cuda_err(cn, err, e, "scratch");
        return NULL;
    }
    if (cn->scr) cudaFree(cn->scr);
    cn->scr = p;
    cn->scap = alloc ? alloc : 256;
    return p;
}

/* ------------------------------------------------------------ binding */

static size_t value_slot(cx_exec *x, const char *name)
{
    size_t i = name ? (size_t)(uintptr_t)ox_map_get(&x->idx, name) : 0;
    if (i) return i - 1;
    if (!grow((void **)&x->vals, &x->cap_vals, x->n_vals + 1, sizeof *x->vals)) return SIZE_MAX;
    cx_val *v = calloc(1, sizeof *v);
    if (!v) return SIZE_MAX;
    if (name && !ox_map_put(&x->idx, name, (void *)(uintptr_t)(x->n_vals + 1))) {
        free(v);
        return SIZE_MAX;
    }
    x->vals[x->n_vals] = v;
    return x->n_vals++;
}

static graft_status bind_initializer(cx_exec *x, graft_tensor *gt, graft_error *err)
{
    size_t vi = value_slot(x, graft_tensor_name(gt));
    if (vi == SIZE_MAX) return nomem(err, "values");
    cx_val *v = x->vals[vi];
    v->sticky = true;
    graft_status rc = rt_bind_initializer(&v->t, gt, &x->consts, &x->n_consts, &x->cap_consts, err);
    if (rc != GRAFT_OK || !v->t.present) return rc;
    v->on_host = true;
    v->is_init = true;
    x->up_total += v->t.nbytes;
    return GRAFT_OK;
}

static void cx_free(rt_backend *b);
static void prof_report(cx_exec *x);
static void prof_graph_collect(cx_exec *x);

static int cx_available(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

static graft_status cx_open(graft_model *m, rt_backend **out, graft_error *err)
{
    *out = NULL;
    graft_status rc = GRAFT_OK;
    cx_exec *x = calloc(1, sizeof *x);
    if (!x) return nomem(err, "CUDA executor");
    x->m = m;
    x->g = graft_model_graph(m);
    graft_graph *g = x->g;
    const char *chk = getenv("GRAFT_CUDA_CHECK");
    x->check = chk && *chk && strcmp(chk, "0") != 0;
    const char *rpl = getenv("GRAFT_CUDA_REPLAY");
    x->no_replay = rpl && !strcmp(rpl, "0");
    x->tty = isatty(2);
    x->up_shown = -1;
    x->no_gemv = getenv("GRAFT_CUDA_NO_GEMV") != NULL;
    const char *mp = getenv("GRAFT_CUDA_MAPPED");
    x->mapped = !mp || strcmp(mp, "0"); /* GRAFT_CUDA_MAPPED=0: the id copied back, the lengths copied up */
    const char *gt = getenv("GRAFT_CUDA_GRAPH_TIME");
    x->rp_every = gt && *gt ? (unsigned)strtoul(gt, NULL, 10) : 8;
    const char *sv = getenv("GRAFT_CUDA_SLICE_VIEW");
    x->slice_view = !sv || strcmp(sv, "0"); /* GRAFT_CUDA_SLICE_VIEW=0: Slices copied */
    const char *prof = getenv("GRAFT_CUDA_PROFILE");
    x->prof = !prof || !*prof || !strcmp(prof, "0") ? 0 : !strcmp(prof, "sync") ? 2 : !strcmp(prof, "graph") ? 3 : 1;
    int lim_sms = 0; /* GRAFT_CUDA_SMS: a green context of that many SMs, before the stream (gcuda_sm_limit) */
    if ((rc = gcuda_sm_limit(&lim_sms, err)) != GRAFT_OK) goto fail;
    /* The side stream's kernels must not hold SMs that the step's own next kernel waits for: where blocks of
     * both wait for an SM, the main stream's go first (its stream at the device's greatest priority, the side
     * stream at its least; captured kernel nodes keep their stream's, which the graphs use: instantiated with
     * cudaGraphInstantiateFlagUseNodePriority). GRAFT_CUDA_SIDE_PRIO=0: both at the default. */
    const char *sp = getenv("GRAFT_CUDA_SIDE_PRIO");
    int pr_least = 0, pr_greatest = 0;
    x->side_prio = !(sp && !strcmp(sp, "0")) &&
                   cudaDeviceGetStreamPriorityRange(&pr_least, &pr_greatest) == cudaSuccess && pr_greatest < pr_least;
    (void)cudaGetLastError();
    cudaError_t e = x->side_prio ? cudaStreamCreateWithPriority(&x->stream, cudaStreamNonBlocking, pr_greatest)
                                 : cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        rc = cx_cuda_err(NULL, err, e, "stream");
        goto fail;
    }
    /* the side stream (side.c): none when it cannot be had, the step then on one stream */
    x->side_main = x->stream;
    bool side_ok = (x->side_prio ? cudaStreamCreateWithPriority(&x->side, cudaStreamNonBlocking, pr_least)
                                 : cudaStreamCreateWithFlags(&x->side, cudaStreamNonBlocking)) == cudaSuccess;
    for (int r = 0; r < CX_SIDE_REG && side_ok; r++)
        for (int k = 0; k < 2 && side_ok; k++)
            side_ok = cudaEventCreateWithFlags(&x->side_ev[r][k], cudaEventDisableTiming) == cudaSuccess;
    if (!side_ok) {
        (void)cudaGetLastError();
        if (x->side) cudaStreamDestroy(x->side);
        x->side = NULL;
    }
    if ((rc = gops_blas_create(&x->blas, err)) != GRAFT_OK) goto fail;
    {
        gcuda_device_info di; /* sm_count: the green context's under GRAFT_CUDA_SMS */
        if (gcuda_device_info_get(&di, NULL) == GRAFT_OK)
            snprintf(x->desc, sizeof x->desc, "%s, sm_%d%d, %d SMs%s, %.0f GiB", di.name, di.cc_major, di.cc_minor,
                     di.sm_count, lim_sms ? " (GRAFT_CUDA_SMS)" : "", (double)di.global_bytes / (1024.0 * 1024 * 1024));
        else
            snprintf(x->desc, sizeof x->desc, "CUDA device");
    }
    x->n_in = graft_graph_input_count(g);
    x->in_idx = calloc(x->n_in + 1, sizeof *x->in_idx);
    x->in_info = calloc(x->n_in + 1, sizeof *x->in_info);
    x->in_has_default = calloc(x->n_in + 1, sizeof *x->in_has_default);
    if (!x->in_idx || !x->in_info || !x->in_has_default) goto oom;
    for (size_t i = 0; i < x->n_in; i++) {
        graft_graph_input(g, i, &x->in_info[i]);
        if ((x->in_idx[i] = value_slot(x, x->in_info[i].name)) == SIZE_MAX) goto oom;
    }
    for (size_t i = 0; i < graft_graph_initializer_count(g); i++)
        if ((rc = bind_initializer(x, graft_graph_initializer(g, i), err)) != GRAFT_OK) goto fail;
    for (size_t i = 0; i < x->n_in; i++) {
        x->in_has_default[i] = graft_graph_find_initializer(g, x->in_info[i].name) != NULL;
        if (!x->in_has_default[i]) x->vals[x->in_idx[i]]->is_input = true;
    }
    x->n_nodes = graft_graph_node_count(g);
    x->nodes = calloc(x->n_nodes + 1, sizeof *x->nodes);
    if (!x->nodes) goto oom;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *cn = &x->nodes[i];
        rt_node *n = &cn->n;
        graft_node *src = graft_graph_node(g, i);
        n->src = src;
        n->g = g;
        const char *dom = graft_node_domain(src), *op = graft_node_op_type(src);
        int64_t ver = graft_model_opset_version(m, dom);
        if (ver < 0 && *dom) ver = 1;
        n->opset = ver;
        n->k = rt_kernel_find(dom, op, ver);
        if (!n->k || graft_node_subgraph_count(src) > 0) {
            rc = xerr(err, GRAFT_EUNSUPPORTED, "%s: node '%s' (%s%s%s, opset %lld) has no kernel", graft_model_path(m),
                      graft_node_name(src), dom, *dom ? "::" : "", op, (long long)ver);
            goto fail;
        }
        for (const cx_op *o = cx_ops; o->op; o++)
            if (!strcmp(o->domain, dom) && !strcmp(o->op, op)) cn->dop = o;
        n->n_in = (int)graft_node_input_count(src);
        n->n_out = (int)graft_node_output_count(src);
        n->in = calloc((size_t)n->n_in + 1, sizeof *n->in);
        n->out = calloc((size_t)n->n_out + 1, sizeof *n->out);
        if (!n->in || !n->out) goto oom;
        for (int j = 0; j < n->n_in; j++) {
            const char *name = graft_node_input(src, (size_t)j);
            if (!*name) continue;
            size_t vi = (size_t)(uintptr_t)ox_map_get(&x->idx, name);
            if (!vi) {
                rc = xerr(err, GRAFT_EINVAL, "%s: node '%s' (%s) reads '%s', which nothing before it provides",
                          graft_model_path(m), graft_node_name(src), op, name);
                goto fail;
            }
            n->in[j] = &x->vals[vi - 1]->t;
        }
        for (int j = 0; j < n->n_out; j++) {
            const char *name = graft_node_output(src, (size_t)j);
            size_t vi = value_slot(x, *name ? name : NULL);
            if (vi == SIZE_MAX) goto oom;
            n->out[j] = &x->vals[vi]->t;
        }
        if (n->k->init && (rc = n->k->init(n, err)) != GRAFT_OK) goto fail;
    }
    x->n_out = graft_graph_output_count(g);
    x->out_idx = calloc(x->n_out + 1, sizeof *x->out_idx);
    x->out_names = calloc(x->n_out + 1, sizeof *x->out_names);
    if (!x->out_idx || !x->out_names) goto oom;
    for (size_t i = 0; i < x->n_out; i++) {
        graft_value_info vi;
        graft_graph_output(g, i, &vi);
        x->out_names[i] = vi.name;
        size_t k = (size_t)(uintptr_t)ox_map_get(&x->idx, vi.name);
        if (!k) {
            rc = xerr(err, GRAFT_EINVAL, "%s: graph output '%s' is produced by nothing", graft_model_path(m), vi.name);
            goto fail;
        }
        x->out_idx[i] = k - 1;
    }
    *out = (rt_backend *)x;
    return GRAFT_OK;
oom:
    rc = nomem(err, "CUDA executor");
fail:
    cx_free((rt_backend *)x);
    return rc;
}

static void cx_free(rt_backend *b)
{
    cx_exec *x = (cx_exec *)b;
    if (!x) return;
    if (x->stream) cudaStreamSynchronize(x->stream);
    prof_report(x);
    for (int e = 0; e < 2; e++)
        if (x->pstep[e]) cudaEventDestroy(x->pstep[e]);
    for (size_t i = 0; i < x->n_nodes; i++) {
        rt_node *n = &x->nodes[i].n;
        if (x->nodes[i].scr) cudaFree(x->nodes[i].scr);
        if (x->nodes[i].ws) cudaFree(x->nodes[i].ws);
        rp_clear(&x->nodes[i]);
        cx_fuse_free(&x->nodes[i]);
        free(x->nodes[i].rp_in);
        free(x->nodes[i].rp_out);
        if (x->nodes[i].hscr) cudaFreeHost(x->nodes[i].hscr);
        for (int e = 0; e < 2; e++)
            if (x->nodes[i].pev[e]) cudaEventDestroy(x->nodes[i].pev[e]);
        if (n->k && n->k->fini) n->k->fini(n);
        else free(n->state);
        free(n->in);
        free(n->out);
    }
    free(x->nodes);
    for (size_t i = 0; i < x->n_vals; i++) {
        cx_val *v = x->vals[i];
        if (v->t.cap) free(v->t.data);
        if (v->dcap) cudaFree(v->d);
        for (int k = 0; k < 2; k++)
            if (v->pin[k]) cudaFreeHost(v->pin[k]);
        free(v);
    }
    free(x->vals);
    for (size_t i = 0; i < x->n_consts; i++) free(x->consts[i]);
    free(x->consts);
    ox_map_free(&x->idx);
    free(x->in_idx);
    free(x->in_info);
    free(x->in_has_default);
    free(x->out_idx);
    free(x->out_names);
    free(x->fb);
    free(x->kv);
    for (int k = 0; k < 2; k++) {
        if (x->gexec[k]) cudaGraphExecDestroy(x->gexec[k]);
        for (int e = 0; e < 2; e++)
            if (x->rpev[k][e]) cudaEventDestroy(x->rpev[k][e]);
        if (x->amax_ev[k]) cudaEventDestroy(x->amax_ev[k]);
    }
    if (x->keep) cudaFree(x->keep);
    if (x->dlen) cudaFree(x->dlen);
    if (x->iota) cudaFree(x->iota);
    if (x->hlen) cudaFreeHost(x->hlen);
    if (x->amax_d) cudaFree(x->amax_d);
    if (x->amax_h) cudaFreeHost(x->amax_h);
    gops_blas_free(x->blas);
    for (int r = 0; r < CX_SIDE_REG; r++)
        for (int k = 0; k < 2; k++)
            if (x->side_ev[r][k]) cudaEventDestroy(x->side_ev[r][k]);
    if (x->side) cudaStreamDestroy(x->side);
    free(x->side_of);
    if (x->stream) cudaStreamDestroy(x->stream);
    free(x);
}

/* ------------------------------------------------------------ running */

static bool is_view_op(const rt_node *n)
{
    const char *op = rt_node_op(n);
    return !*graft_node_domain(n->src) && (!strcmp(op, "Reshape") || !strcmp(op, "Squeeze") ||
                                           !strcmp(op, "Unsqueeze") || !strcmp(op, "Flatten") ||
                                           !strcmp(op, "Identity"));
}

static bool is_meta_op(const rt_node *n)
{
    const char *op = rt_node_op(n);
    return !*graft_node_domain(n->src) && (!strcmp(op, "Shape") || !strcmp(op, "Size"));
}

static void place(cx_exec *x, cx_node *cn)
{
    rt_node *n = &cn->n;
    /* computed from a device input: so are its outputs (not a Shape's) */
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] && cx_v(n->in[j])->dtaint) cn->dtaint = true;
    if (cn->dtaint && !is_meta_op(n))
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j]) cx_v(n->out[j])->dtaint = true;
    if (is_meta_op(n)) cn->place = CX_META;
    else if (is_view_op(n)) cn->place = CX_VIEW;
    else if (cn->dop && cn->dop->accept(x, cn)) cn->place = CX_DEVICE;
    else cn->place = CX_HOST;
}

static graft_status run_host(cx_exec *x, cx_node *cn, graft_error *err)
{
    rt_node *n = &cn->n;
    graft_status rc;
    if (cn->place != CX_META)
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] && n->in[j]->present && (rc = cx_to_host(x, cx_v(n->in[j]), err)) != GRAFT_OK) return rc;
    for (int j = 0; j < n->n_out; j++) {
        cx_val *v = cx_v(n->out[j]);
        if (v->base) { /* was a view: its host pointer is not its own */
            if (!v->t.cap) v->t.data = NULL;
            v->base = NULL;
        }
        if (v->pitch) { /* was a cache view: the device buffer is the generator's */
            v->pitch = 0;
            v->d = NULL;
            v->dcap = 0;
        }
    }
    if ((rc = n->k->run(n, err)) != GRAFT_OK) return rc;
    for (int j = 0; j < n->n_out; j++) {
        cx_val *v = cx_v(n->out[j]);
        v->on_host = v->t.present;
        v->on_dev = false;
    }
    return GRAFT_OK;
}

static graft_status run_view(cx_exec *x, cx_node *cn, graft_error *err)
{
    rt_node *n = &cn->n;
    graft_status rc;
    /* shape-giving inputs (Reshape's shape, Squeeze's axes) are read on the host */
    for (int j = 1; j < n->n_in; j++)
        if (n->in[j] && n->in[j]->present && (rc = cx_to_host(x, cx_v(n->in[j]), err)) != GRAFT_OK) return rc;
    cx_val *in = cx_in(cn, 0);
    if (!in) return n->k->run(n, err); /* the kernel reports it */
    if (root(in)->pitch && root(in)->on_dev) { /* a view of a KV cache view: made on the host, for good */
        cn->place = CX_HOST;
        return run_host(x, cn, err);
    }
    if ((rc = n->k->run(n, err)) != GRAFT_OK) return rc;
    cx_val *o = cx_v(n->out[0]);
    cx_val *r = root(in);
    if (o->t.cap) { /* the kernel made a view, so nothing is owned here */
        free(o->t.data);
        o->t.cap = 0;
    }
    if (o->dcap) {
        cudaFree(o->d);
        o->dcap = 0;
    }
    o->base = r;
    o->on_host = r->on_host;
    o->t.data = r->on_host ? r->t.data : NULL;
    o->on_dev = r->on_dev;
    o->d = r->on_dev ? r->d : NULL;
    return GRAFT_OK;
}

static float as_float(int dtype, const void *p, uint64_t i)
{
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT: return ((const float *)p)[i];
    case GRAFT_DTYPE_FLOAT16: return rt_f16_to_f32(((const uint16_t *)p)[i]);
    case GRAFT_DTYPE_BFLOAT16: return rt_bf16_to_f32(((const uint16_t *)p)[i]);
    case GRAFT_DTYPE_INT64: return (float)((const int64_t *)p)[i];
    case GRAFT_DTYPE_INT32: return (float)((const int32_t *)p)[i];
    case GRAFT_DTYPE_BOOL: return (float)((const uint8_t *)p)[i];
    default: return 0.0f;
    }
}

/* GRAFT_CUDA_CHECK: runs the node's CPU kernel on host copies of its inputs
 * and compares every output with the device's. */
static graft_status check_node(cx_exec *x, cx_node *cn, graft_error *err)
{
    rt_node *n = &cn->n;
    graft_status rc = GRAFT_OK;
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] && n->in[j]->present && (rc = cx_to_host(x, cx_v(n->in[j]), err)) != GRAFT_OK) return rc;
    rt_tensor *tmp = calloc((size_t)n->n_out + 1, sizeof *tmp);
    rt_tensor **saved = calloc((size_t)n->n_out + 1, sizeof *saved);
    void *dev = NULL;
    if (!tmp || !saved) {
        rc = nomem(err, "check");
        goto done;
    }
    for (int j = 0; j < n->n_out; j++) {
        saved[j] = n->out[j];
        n->out[j] = &tmp[j];
    }
    rc = n->k->run(n, err);
    for (int j = 0; j < n->n_out; j++) n->out[j] = saved[j];
    if (rc) goto done;
    for (int j = 0; j < n->n_out; j++) {
        cx_val *v = cx_v(saved[j]);
        if (!tmp[j].present || !v->t.present || !*graft_node_output(n->src, (size_t)j)) continue;
        if (tmp[j].numel != v->t.numel || tmp[j].dtype != v->t.dtype) {
            rc = rt_err(n, err, GRAFT_EIO, "GRAFT_CUDA_CHECK: output %d: device gives %llu x %s, CPU %llu x %s", j,
                        (unsigned long long)v->t.numel, graft_dtype_name(v->t.dtype),
                        (unsigned long long)tmp[j].numel, graft_dtype_name(tmp[j].dtype));
            goto done;
        }
        free(dev);
        dev = malloc(v->t.nbytes + 8);
        if (!dev) {
            rc = nomem(err, "check");
            goto done;
        }
        if (v->t.nbytes) {
            if ((rc = download(x, v, dev, err)) != GRAFT_OK) goto done;
            cudaError_t e = cudaStreamSynchronize(x->stream);
            if (e != cudaSuccess) {
                rc = cx_cuda_err(cn, err, e, "check download");
                goto done;
            }
        }
        double worst = 0;
        uint64_t at = 0;
        double tol = v->t.dtype == GRAFT_DTYPE_FLOAT ? 1e-3 : 2e-2;
        const char *ts = getenv("GRAFT_CUDA_CHECK_TOL"); /* a tighter (or looser) bound, to find drift */
        if (ts && *ts && strtod(ts, NULL) > 0) tol = strtod(ts, NULL);
        for (uint64_t i = 0; i < v->t.numel; i++) {
            float a = as_float(v->t.dtype, dev, i), c = as_float(v->t.dtype, tmp[j].data, i);
            double d = (a == c) ? 0 : fabs((double)a - c) / (1.0 + fabs((double)c));
            if (a != a || c != c) d = (a != a) == (c != c) ? 0 : 1e30;
            if (d > worst) worst = d, at = i;
        }
        if (worst > tol) {
            rc = rt_err(n, err, GRAFT_EIO, "GRAFT_CUDA_CHECK: output %d differs from the CPU kernel by %.3g "
                        "(relative) at element %llu: device %g, CPU %g", j, worst, (unsigned long long)at,
                        (double)as_float(v->t.dtype, dev, at), (double)as_float(v->t.dtype, tmp[j].data, at));
            goto done;
        }
    }
done:
    for (int j = 0; tmp && j < n->n_out; j++)
        if (tmp[j].cap) free(tmp[j].data);
    free(tmp);
    free(saved);
    free(dev);
    return rc;
}

/* A node whose float outputs a host kernel makes on a GPU run. */
static bool is_fallback(const cx_node *cn)
{
    if (cn->place != CX_HOST || !strcmp(rt_node_op(&cn->n), "Constant")) return false;
    for (int j = 0; j < cn->n.n_out; j++)
        if (cn->n.out[j]->present && cx_is_float(cn->n.out[j]->dtype)) return true;
    return false;
}

static void fallback_report(cx_exec *x)
{
    size_t len = 0, cap = 0;
    char *s = NULL;
    x->n_fb = 0;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *cn = &x->nodes[i];
        if (!is_fallback(cn)) continue;
        x->n_fb++;
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = is_fallback(&x->nodes[k]) && !strcmp(rt_node_op(&x->nodes[k].n), rt_node_op(&cn->n));
        if (seen) continue;
        size_t cnt = 0;
        for (size_t k = i; k < x->n_nodes; k++)
            cnt += is_fallback(&x->nodes[k]) && !strcmp(rt_node_op(&x->nodes[k].n), rt_node_op(&cn->n));
        char item[160];
        int w = snprintf(item, sizeof item, "%s%s (%zu)", len ? ", " : "", rt_node_op(&cn->n), cnt);
        if (w > 0 && grow((void **)&s, &cap, len + (size_t)w + 1, 1)) {
            memcpy(s + len, item, (size_t)w + 1);
            len += (size_t)w;
        }
    }
    free(x->fb);
    x->fb = s;
}

/* GRAFT_CUDA_PROFILE (decode steps run eagerly): the wall clock; with
 * "sync" the stream drained first, so that a node's time is its launches
 * and its wait. The default, events mode, leaves the stream alone and
 * times each device node's GPU work between two events (prof_gpu_s).
 * "graph": decode steps run as CUDA graphs as usual, the events around
 * each device node captured into the graph and read after each launch
 * (the event nodes add a little to each node's time). */
static double prof_now(cx_exec *x)
{
    if (x->prof == 2) cudaStreamSynchronize(x->stream);
    return rt_now();
}

static const char *place_name(int place)
{
    switch (place) {
    case CX_DEVICE: return "device";
    case CX_VIEW: return "view";
    case CX_META: return "meta";
    default: return "host";
    }
}

/* A node's time in the profile: GPU time in events mode (host time for
 * nodes that launch nothing), host time in sync mode. */
static double prof_t(const cx_exec *x, const cx_node *cn)
{
    return x->prof != 2 && cn->place == CX_DEVICE ? cn->prof_gpu_s : cn->prof_s;
}

/* The profile on stderr: time per decode step by op type and placement,
 * then the slowest nodes. */
static void prof_report(cx_exec *x)
{
    if (x->prof == 3) prof_graph_collect(x);
    if (!x->prof || !x->prof_steps) return;
    double steps = (double)x->prof_steps, sum = 0.0, hsum = 0.0;
    if (x->prof == 3)
        fprintf(stderr, "CUDA profile: %zu decode steps as CUDA graphs, %.3f ms a step on the GPU; 'ms/step' is GPU "
                "time between event nodes captured around each device node (they add to it), 'host ms' is 0\n",
                x->prof_steps, 1e3 * x->prof_step_gpu_s / steps);
    else if (x->prof == 2)
        fprintf(stderr, "CUDA profile: %zu decode steps, %.3f ms a step (synchronised after every node)\n",
                x->prof_steps, 1e3 * x->prof_step_s / steps);
    else
        fprintf(stderr, "CUDA profile: %zu decode steps (eager), %.3f ms a step on the host, %.3f ms on the GPU "
                "from its first launch to its last; 'ms/step' is GPU time between events around each device "
                "node, host time for the others\n", x->prof_steps, 1e3 * x->prof_step_s / steps,
                1e3 * x->prof_step_gpu_s / steps);
    fprintf(stderr, "  %-34s %-6s %6s %10s %10s %7s\n", "op", "place", "nodes", "ms/step", "host ms", "share");
    double denom = x->prof != 2 ? x->prof_step_gpu_s : x->prof_step_s;
    bool *done = calloc(x->n_nodes, 1);
    for (;;) { /* groups by (op, place), largest first */
        double best = -1.0, hbest = 0.0;
        size_t bi = 0;
        for (size_t i = 0; i < x->n_nodes; i++) {
            cx_node *cn = &x->nodes[i];
            if ((done && done[i]) || !cn->prof_n) continue;
            double t = 0.0, h = 0.0;
            for (size_t k = i; k < x->n_nodes; k++)
                if (x->nodes[k].place == cn->place && !strcmp(rt_node_op(&x->nodes[k].n), rt_node_op(&cn->n))) {
                    t += prof_t(x, &x->nodes[k]);
                    h += x->nodes[k].prof_s;
                }
            if (t > best) {
                best = t;
                hbest = h;
                bi = i;
            }
        }
        if (best < 0.0 || !done) break;
        cx_node *g = &x->nodes[bi];
        size_t cnt = 0;
        for (size_t k = bi; k < x->n_nodes; k++)
            if (x->nodes[k].place == g->place && !strcmp(rt_node_op(&x->nodes[k].n), rt_node_op(&g->n))) {
                done[k] = true;
                cnt++;
            }
        sum += best;
        hsum += hbest;
        fprintf(stderr, "  %-34s %-6s %6zu %10.3f %10.3f %6.1f%%\n", rt_node_op(&g->n), place_name(g->place), cnt,
                1e3 * best / steps, 1e3 * hbest / steps, denom > 0 ? 100.0 * best / denom : 0.0);
    }
    fprintf(stderr, "  (nodes: %.3f ms a step, %.3f ms of it on the host)\n  slowest nodes:\n", 1e3 * sum / steps,
            1e3 * hsum / steps);
    for (int r = 0; r < 12 && done; r++) {
        double best = 0.0;
        size_t bi = SIZE_MAX;
        for (size_t i = 0; i < x->n_nodes; i++)
            if (done[i] && prof_t(x, &x->nodes[i]) > best) {
                best = prof_t(x, &x->nodes[i]);
                bi = i;
            }
        if (bi == SIZE_MAX) break;
        done[bi] = false;
        const rt_node *n = &x->nodes[bi].n;
        fprintf(stderr, "  %8.3f ms  %-6s %s '%s'", 1e3 * best / steps, place_name(x->nodes[bi].place), rt_node_op(n),
                graft_node_name(n->src));
        for (int j = 0; j < n->n_in && j < 4; j++) { /* input shapes */
            const rt_tensor *t = n->in[j];
            fputs(j ? " " : "  [", stderr);
            for (int d = 0; t && t->present && d < t->rank; d++) fprintf(stderr, "%s%lld", d ? "x" : "", (long long)t->dims[d]);
        }
        fputs(n->n_in ? "]\n" : "\n", stderr);
    }
    free(done);
}

/* An event recorded on the stream; while capturing, as an event record
 * node of the graph (a plain record in a capture only orders the capture,
 * it is never timed). */
static void prof_record(cx_exec *x, cudaEvent_t e)
{
    if (x->capturing) cudaEventRecordWithFlags(e, x->stream, cudaEventRecordExternal);
    else cudaEventRecord(e, x->stream);
}

/* Events mode: the events of a node (created on first use); false when
 * they cannot be made (the node is then timed on the host only). */
static bool prof_events(cx_exec *x, cx_node *cn)
{
    if (cn->pev[0]) return true;
    if (cudaEventCreate(&cn->pev[0]) != cudaSuccess || cudaEventCreate(&cn->pev[1]) != cudaSuccess) {
        (void)cudaGetLastError();
        if (cn->pev[0]) cudaEventDestroy(cn->pev[0]);
        cn->pev[0] = cn->pev[1] = NULL;
        return false;
    }
    return true;
}

/* Events mode, end of a step: the stream drained, each node's event pair read. */
static void prof_collect(cx_exec *x)
{
    if (cudaEventSynchronize(x->pstep[1]) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, x->pstep[0], x->pstep[1]) == cudaSuccess) x->prof_step_gpu_s += 1e-3 * ms;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *cn = &x->nodes[i];
        if (!cn->prof_rec) continue;
        cn->prof_rec = false;
        if (cudaEventElapsedTime(&ms, cn->pev[0], cn->pev[1]) == cudaSuccess) cn->prof_gpu_s += 1e-3 * ms;
    }
    (void)cudaGetLastError();
}

/* Graph mode: the events of the last launched graph, once it has run. */
static void prof_graph_collect(cx_exec *x)
{
    if (!x->prof_pending) return;
    x->prof_pending = false;
    if (cudaEventSynchronize(x->pstep[1]) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, x->pstep[0], x->pstep[1]) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    x->prof_step_gpu_s += 1e-3 * ms;
    x->prof_steps++;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *cn = &x->nodes[i];
        if (!cn->prof_graph) continue;
        if (cudaEventElapsedTime(&ms, cn->pev[0], cn->pev[1]) == cudaSuccess) {
            cn->prof_gpu_s += 1e-3 * ms;
            cn->prof_n++;
        }
    }
    (void)cudaGetLastError();
}

static graft_status run_nodes_body(cx_exec *x, graft_error *err)
{
    graft_status rc;
    for (size_t i = 0; i < x->n_vals; i++) {
        cx_val *v = x->vals[i];
        if (!v->sticky && !v->is_input) v->on_host = v->on_dev = false;
        if (v->is_input && v->on_host && !v->pitch) v->on_dev = false; /* host inputs: uploaded in this run */
    }
    x->run_no++;
    x->n_fast_attn = 0;
    x->n_fused_append = 0;
    x->n_attn_pf = x->attn_pf_bytes = 0;
    x->n_gemv_pf = x->gemv_pf_bytes = 0;
    x->pf_k = 0, x->pf_off = 0; /* cx_pf_plan: nothing asked yet this run */
    x->n_cpro_ran = 0;
    memset(x->n_attn_took, 0, sizeof x->n_attn_took);
    x->run_syncs = 0;
    bool prof = x->prof && x->prof != 3 && x->placed && x->graph_step && !x->capturing;
    bool gprof = x->prof == 3 && x->capturing; /* events into the graph being captured */
    if ((gprof || (prof && x->prof == 1)) && !x->pstep[0]) {
        if (cudaEventCreate(&x->pstep[0]) != cudaSuccess || cudaEventCreate(&x->pstep[1]) != cudaSuccess) {
            (void)cudaGetLastError();
            x->prof = 2; /* no events: the synchronised mode */
        }
    }
    double step_t0 = prof ? prof_now(x) : 0.0;
    if ((prof && x->prof == 1) || (gprof && x->pstep[0])) prof_record(x, x->pstep[0]);
    bool side = x->capturing && x->side_of && !x->side_off;
    x->side_state = x->side_r = 0;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *cn = &x->nodes[i];
        if (side && (rc = cx_side_at(x, i, err)) != GRAFT_OK) return rc;
        if (cn->const_done) continue;
        if (!cn->place) place(x, cn);
        bool on_side = side && x->side_state == 1 && x->side_of[i] == x->side_r + 1;
        if (on_side) x->stream = x->side;
        x->now = cn;
        double t0 = prof ? prof_now(x) : 0.0;
        bool ev = (prof && x->prof == 1 && cn->place == CX_DEVICE && prof_events(x, cn)) ||
                  (gprof && x->pstep[0] && cn->place == CX_DEVICE && prof_events(x, cn));
        if (ev) prof_record(x, cn->pev[0]);
        switch (cn->place) {
        case CX_VIEW: rc = run_view(x, cn, err); break;
        case CX_DEVICE:
            for (int j = 0; j < cn->n.n_out; j++) cx_v(cn->n.out[j])->base = NULL;
            if (x->capturing) {
                rp_clear(cn);
                x->cur = cn;
            }
            bool gpf = false; /* GRAFT_CUDA_GEMV_PF: this node's GEMV asks L2 for later weights */
            if (cn->gpf && x->graph_step) {
                gcuda_prefetch_set ps;
                graft_error pe;
                cx_pf_plan(x, cn, x->gpf_bytes, &ps);
                if (ps.n && gcuda_gemv_rows_prefetch_next(&ps, &pe) == GRAFT_OK) {
                    gpf = true;
                    x->n_gemv_pf++;
                    for (int r = 0; r < ps.n; r++) x->gemv_pf_bytes += ps.bytes[r];
                }
            }
            rc = cn->fuse == 1   ? cx_fuse_skip(x, cn, err)
                 : cn->fuse == 2 ? cx_fuse_run(x, cn, err)
                 : cn->fuse == 3 ? cx_fuse_shape(x, cn, err)
                 : cn->fuse == 4 ? cx_tail_follow(x, cn, err)
                 : cn->fuse == 5 ? cx_pro_norm(x, cn, err)
                 : cn->fuse == 6 ? cx_skip_follow(x, cn, err)
                 : cn->fuse == 7 ? cx_cpro_follow(x, cn, err)
                 : cn->mm == 1   ? cx_mm_run(x, cn, err)
                 : cn->mm == 2   ? cx_mm_follow(x, cn, err)
                 : cn->gth == 1  ? cx_gather_run(x, cn, err)
                 : cn->gth == 2  ? cx_mm_follow(x, cn, err)
                 : cn->ig == 1   ? cx_int_run(x, cn, err)
                 : cn->ig == 2   ? cx_mm_follow(x, cn, err)
                                 : cn->dop->run(x, cn, err);
            if (gpf) { /* not taken where the node launched no row GEMV */
                graft_error pe;
                (void)gcuda_gemv_rows_prefetch_next(NULL, &pe);
            }
            if (x->capturing) {
                x->cur = NULL;
                if (rc == GRAFT_OK) rp_record(cn);
            }
            if (rc == GRAFT_EUNSUPPORTED && !x->placed) { /* a shape the device op does not take */
                cn->place = CX_HOST;
                rc = run_host(x, cn, err);
            } else if (rc == GRAFT_OK && x->check) {
                rc = check_node(x, cn, err);
            }
            break;
        default: rc = run_host(x, cn, err); break;
        }
        if (ev) {
            prof_record(x, cn->pev[1]);
            if (gprof) cn->prof_graph = true;
            else cn->prof_rec = true;
        }
        if (on_side) x->stream = x->side_main;
        if (prof) {
            cn->prof_s += prof_now(x) - t0;
            cn->prof_n++;
        }
        x->now = NULL;
        if (rc != GRAFT_OK) return rc;
        if (!strcmp(rt_node_op(&cn->n), "Constant") && !*graft_node_domain(cn->n.src)) {
            cn->const_done = true;
            for (int j = 0; j < cn->n.n_out; j++) cx_v(cn->n.out[j])->sticky = true;
        }
    }
    cx_side_end(x); /* the join, where no main node read what the side made */
    /* a present that did not come out in place (its node ran on the host,
     * or took the copying path) is written into its cache now */
    for (size_t i = 0; i < x->n_kv; i++) {
        cx_kvbind *kb = &x->kv[i];
        cx_val *v = x->vals[kb->present];
        if (!v->t.present || (v->d == kb->buf && v->pitch == kb->max_seq && v->on_dev && !v->base)) continue;
        if (v->t.rank != 4 || v->t.dims[2] > kb->max_seq)
            return xerr(err, GRAFT_EINVAL, "present '%s' does not fit its KV cache", kb->name);
        size_t es = rt_dtype_size(v->t.dtype), w = (size_t)(v->t.dims[2] * v->t.dims[3]) * es;
        size_t dp = (size_t)(kb->max_seq * v->t.dims[3]) * es, rows = (size_t)(v->t.dims[0] * v->t.dims[1]);
        if (w) {
            if (v->on_dev) {
                cx_val *r = root(v);
                CX_CUDA(cudaMemcpy2DAsync(kb->buf, dp, r->d, w, w, rows, cudaMemcpyDeviceToDevice, x->stream),
                        "present into its KV cache");
            } else if (v->on_host) {
                CX_CUDA(cudaMemcpy2DAsync(kb->buf, dp, v->t.data, w, w, rows, cudaMemcpyHostToDevice, x->stream),
                        "present into its KV cache");
                CX_CUDA(cudaStreamSynchronize(x->stream), "synchronise");
            } else {
                return xerr(err, GRAFT_EINVAL, "present of a KV cache was not computed");
            }
        }
        if (v->base) {
            if (!v->t.cap) v->t.data = NULL;
            v->base = NULL;
        }
        if (v->dcap) cudaFree(v->d);
        v->dcap = 0;
        v->d = kb->buf;
        v->pitch = kb->max_seq;
        v->on_dev = true;
        v->on_host = false;
    }
    if (!x->placed) {
        x->placed = true;
        fallback_report(x);
        cx_fuse_plan(x);
        graft_status prc = cx_rows_plan(x, err);
        if (prc != GRAFT_OK) return prc;
        cx_side_plan(x);
        if (x->up_shown >= 0) fputc('\n', stderr); /* the progress bar's line */
    }
    if (gprof && x->pstep[0]) prof_record(x, x->pstep[1]);
    if (prof) {
        if (x->prof == 1) {
            cudaEventRecord(x->pstep[1], x->stream);
            x->prof_step_s += prof_now(x) - step_t0; /* host time: before waiting for the GPU */
            prof_collect(x);
        } else {
            x->prof_step_s += prof_now(x) - step_t0;
        }
        x->prof_steps++;
    }
    return GRAFT_OK;
}

/* The side stream's fork and join (the plan: side.c): a region's join before the next region's fork. */
graft_status cx_side_at(cx_exec *x, size_t i, graft_error *err)
{
    if (x->side_state == 1 && i == x->side_j[x->side_r]) cx_side_end(x);
    if (x->side_state != 1 && x->side_r < x->n_side_reg && i == x->side_f[x->side_r]) {
        if (cudaEventRecord(x->side_ev[x->side_r][0], x->side_main) != cudaSuccess ||
            cudaStreamWaitEvent(x->side, x->side_ev[x->side_r][0], 0) != cudaSuccess)
            return cx_cuda_err(&x->nodes[i], err, cudaGetLastError(), "side stream fork");
        x->side_state = 1;
    }
    return GRAFT_OK;
}

void cx_side_end(cx_exec *x)
{
    if (x->side_state != 1) return;
    x->stream = x->side_main;
    if (cudaEventRecord(x->side_ev[x->side_r][1], x->side) != cudaSuccess ||
        cudaStreamWaitEvent(x->side_main, x->side_ev[x->side_r][1], 0) != cudaSuccess) {
        (void)cudaGetLastError();
        cx_side_fail(x, "the join failed");
    }
    x->side_state = 2;
    x->side_r++;
}

/* The step's nodes; a capture that forked the side stream joins it on every way out. */
static graft_status run_nodes(cx_exec *x, graft_error *err)
{
    graft_status rc = run_nodes_body(x, err);
    cx_side_end(x);
    x->stream = x->side_main;
    return rc;
}

/* A decode step as a replay of the last captured graph: host nodes run,
 * device nodes are checked against their records and restored, the
 * staging and lengths refilled, the graph launched (launch; else only the
 * check). 0: not replayable (nothing launched; the caller captures the
 * step). */
static int replay(cx_exec *x, bool launch)
{
    graft_error e;
    for (size_t i = 0; i < x->n_vals; i++) {
        cx_val *v = x->vals[i];
        if (!v->sticky && !v->is_input) v->on_host = v->on_dev = false;
        if (v->is_input && v->on_host && !v->pitch) v->on_dev = false;
    }
    x->run_no++;
    x->run_syncs = 0;
    x->replaying = true;
    x->rp_fail = false;
    x->rp_why[0] = 0;
    int ok = 1;
    for (size_t i = 0; i < x->n_nodes && ok; i++) {
        cx_node *cn = &x->nodes[i];
        if (cn->const_done) continue;
        switch (cn->place) {
        case CX_VIEW: ok = run_view(x, cn, &e) == GRAFT_OK && cn->place == CX_VIEW; break;
        case CX_DEVICE: ok = cx_replay_node(x, cn); break;
        case CX_HOST:
        case CX_META: ok = run_host(x, cn, &e) == GRAFT_OK; break;
        default: ok = 0; break;
        }
        if (x->rp_fail) ok = 0;
        if (!ok && !x->rp_why[0])
            snprintf(x->rp_why, sizeof x->rp_why, "%s '%s' (%s node)", rt_node_op(&cn->n), graft_node_name(cn->n.src),
                     place_name(cn->place));
    }
    for (size_t i = 0; i < x->n_kv && ok; i++) {
        cx_kvbind *kb = &x->kv[i];
        cx_val *v = x->vals[kb->present];
        ok = v->t.present && v->d == kb->buf && v->pitch == kb->max_seq && v->on_dev && !v->base;
        if (!ok) snprintf(x->rp_why, sizeof x->rp_why, "present '%s' not in its KV cache", kb->name);
    }
    x->replaying = false;
    if (!ok || !launch) return ok;
    cudaEvent_t *ev2 = x->rpev[x->slot];
    bool timed = x->rp_every && x->rp_launches++ % x->rp_every == 0;
    if (timed && !ev2[0] && (cudaEventCreate(&ev2[0]) != cudaSuccess || cudaEventCreate(&ev2[1]) != cudaSuccess))
        (void)cudaGetLastError();
    bool ev = timed && ev2[0] && ev2[1] && cudaEventRecord(ev2[0], x->stream) == cudaSuccess;
    if (cudaGraphLaunch(x->gexec[x->slot], x->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    x->rpev_pending[x->slot] = ev && cudaEventRecord(ev2[1], x->stream) == cudaSuccess;
    return 1;
}

/* The GPU time of the last graph replayed in this slot, once it has run
 * (the caller has read its result since). */
static void replay_time(cx_exec *x)
{
    float ms = 0;
    cudaEvent_t *ev = x->rpev[x->slot];
    if (!x->rpev_pending[x->slot] || cudaEventQuery(ev[1]) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    if (cudaEventElapsedTime(&ms, ev[0], ev[1]) == cudaSuccess) {
        x->rp_gpu_s += ms * 1e-3;
        x->rp_gpu_n++;
    }
    (void)cudaGetLastError();
    x->rpev_pending[x->slot] = false;
}

static graft_status cx_run(rt_backend *b, graft_error *err)
{
    cx_exec *x = (cx_exec *)b;
    graft_status rc;
    for (size_t i = 0; i < x->n_in; i++)
        if (!x->vals[x->in_idx[i]]->t.present && !x->in_has_default[i])
            return xerr(err, GRAFT_EINVAL, "input '%s' was not set", x->in_info[i].name);
    /* capture a decode step (set_graphs) when the last run was one too and
     * needed no copy back to the host: the decode steps after the first */
    bool prev = x->graph_prev;
    x->graph_prev = x->graph_step;
    x->slot = x->pipelined && x->graph_step ? x->slot ^ 1 : 0;
    if (x->prof == 3) prof_graph_collect(x);
    if (!x->graph_step || !prev || x->check || (x->prof && x->prof != 3) || !x->placed || x->no_graph ||
        x->last_syncs) {
        rc = run_nodes(x, err);
        x->last_syncs = x->run_syncs;
        if (x->graph_step) x->n_eager++;
        x->rp_valid = false; /* an eager step may move buffers the graph points at */
        return rc;
    }
    cudaGraphExec_t *gx = &x->gexec[x->slot];
    if (*gx && x->rp_valid && x->gexec_gen[x->slot] == x->rp_gen && !x->no_replay) {
        replay_time(x);
        double t0 = rt_now();
        if (replay(x, true)) {
            x->rp_host_s += rt_now() - t0;
            x->prof_pending = x->prof == 3 && x->pstep[0];
            x->n_replay++;
            x->n_graph++;
            return GRAFT_OK;
        }
        x->rp_valid = false; /* capture this step, and replay from the next */
    } else if (x->rp_valid && !x->no_replay && !replay(x, false)) {
        x->rp_valid = false; /* this slot's graph missing or stale, and the step unlike the records */
    }
    /* a capture rewrites the records: the other slot's graph, captured with
     * the old ones, is captured again at its next step, unless this step
     * matched them (replayed or checked above: these are then the records
     * it was captured with) */
    if (!x->rp_valid) x->rp_gen++;
    cudaError_t e = cudaStreamBeginCapture(x->stream, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        x->no_graph = "stream capture refused";
        return run_nodes(x, err);
    }
    x->capturing = true;
    x->cap_abort = 0;
    graft_error cerr = {0};
    rc = run_nodes(x, &cerr);
    x->capturing = false;
    cudaGraph_t gr = NULL;
    e = cudaStreamEndCapture(x->stream, &gr);
    if (!x->cap_abort && (rc != GRAFT_OK || e != cudaSuccess) && x->side_state && !x->side_off) {
        x->side_off = true; /* a capture that forked failed unexplained: again without the side stream */
        x->side_why = "a capture with it failed";
        x->cap_abort = 2;
    }
    if (rc != GRAFT_OK || e != cudaSuccess || x->cap_abort) {
        (void)cudaGetLastError();
        if (gr) cudaGraphDestroy(gr);
        x->n_abort++;
        x->rp_valid = false;
        if (x->cap_abort == 1) x->no_graph = "a host node reads device data";
        else if (!x->cap_abort && rc == GRAFT_OK) x->no_graph = "stream capture failed";
        else if (x->n_abort >= 4 && x->n_graph == 0) x->no_graph = "captures keep failing";
        rc = run_nodes(x, err); /* the step again, eagerly */
        x->last_syncs = x->run_syncs;
        x->n_eager++;
        return rc;
    }
    if (*gx) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(*gx, gr, &info) == cudaSuccess) {
            x->n_update++;
        } else {
            (void)cudaGetLastError();
            cudaGraphExecDestroy(*gx);
            *gx = NULL;
        }
    }
    if (!*gx) {
        e = cudaGraphInstantiate(gx, gr, x->side_prio ? cudaGraphInstantiateFlagUseNodePriority : 0);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            *gx = NULL;
            cudaGraphDestroy(gr);
            x->no_graph = "graph instantiation failed";
            rc = run_nodes(x, err);
            x->n_eager++;
            return rc;
        }
        x->n_inst++;
    }
    cudaGraphDestroy(gr);
    CX_CUDA(cudaGraphLaunch(*gx, x->stream), "graph launch");
    x->prof_pending = x->prof == 3 && x->pstep[0];
    x->n_graph++;
    x->rp_valid = true;
    x->gexec_gen[x->slot] = x->rp_gen;
    return GRAFT_OK;
}

/* ------------------------------------------------------------ the backend interface */

static cx_val *output_val(cx_exec *x, const char *name)
{
    for (size_t i = 0; i < x->n_out; i++)
        if (!strcmp(x->out_names[i], name)) return x->vals[x->out_idx[i]];
    return NULL;
}

static graft_status cx_alloc(rt_backend *b, size_t bytes, void **out, graft_error *err)
{
    *out = NULL;
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 256);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *out = NULL;
        return xerr(err, e == cudaErrorMemoryAllocation ? GRAFT_ENOMEM : GRAFT_EIO,
                    "CUDA: %zu bytes of device memory: %s", bytes, cudaGetErrorString(e));
    }
    return GRAFT_OK;
}

static void cx_mfree(rt_backend *b, void *p)
{
    if (p) cudaFree(p);
}

static graft_status cx_zero(rt_backend *b, void *p, size_t bytes, graft_error *err)
{
    cx_exec *x = (cx_exec *)b;
    if (bytes) CX_CUDA(cudaMemsetAsync(p, 0, bytes, x->stream), "memset");
    return GRAFT_OK;
}

static graft_status cx_set_input(rt_backend *b, const char *name, const graft_array *a, int on_backend,
                                 graft_error *err)
{
    cx_exec *x = (cx_exec *)b;
    size_t i = 0;
    while (i < x->n_in && strcmp(x->in_info[i].name, name) != 0) i++;
    if (i == x->n_in) return xerr(err, GRAFT_EINVAL, "%s: the graph has no input '%s'", graft_model_path(x->m), name);
    const graft_value_info *vi = &x->in_info[i];
    if (vi->dtype && vi->dtype != a->dtype)
        return xerr(err, GRAFT_EINVAL, "input '%s': dtype %s given, the graph expects %s", name,
                    graft_dtype_name(a->dtype), graft_dtype_name(vi->dtype));
    if (a->rank < 0 || a->rank > RT_MAX_RANK || (vi->rank >= 0 && vi->rank != a->rank))
        return xerr(err, GRAFT_EINVAL, "input '%s': rank %d given", name, a->rank);
    uint64_t numel = 1;
    for (int d = 0; d < a->rank; d++) {
        if (a->dims[d] < 0) return xerr(err, GRAFT_EINVAL, "input '%s': negative dimension %d", name, d);
        if (vi->rank >= 0 && d < GRAFT_MAX_RANK && vi->dims[d].value >= 0 && vi->dims[d].value != a->dims[d])
            return xerr(err, GRAFT_EINVAL, "input '%s': dimension %d is %lld, the graph fixes it at %lld", name, d,
                        (long long)a->dims[d], (long long)vi->dims[d].value);
        numel *= (uint64_t)a->dims[d];
    }
    int ovf = 0;
    uint64_t nb = graft_dtype_nbytes(a->dtype, numel, &ovf);
    if (ovf || nb != a->nbytes)
        return xerr(err, GRAFT_EINVAL, "input '%s': %zu bytes given, shape and dtype need %llu", name, a->nbytes,
                    (unsigned long long)nb);
    cx_val *v = x->vals[x->in_idx[i]];
    rt_tensor *t = &v->t;
    /* a captured graph reads a device input where it was, and uploads a host
     * one: moved, or from one to the other, it is captured again */
    bool was_dev = t->present && v->d && !v->dcap; /* bound in backend memory last time */
    if (on_backend ? !was_dev || v->d != a->data : was_dev) x->rp_valid = false;
    t->dtype = a->dtype;
    t->rank = a->rank;
    memcpy(t->dims, a->dims, (size_t)a->rank * sizeof *a->dims);
    t->numel = numel;
    t->nbytes = (size_t)nb;
    t->present = true;
    v->base = NULL;
    v->pitch = 0;
    if (on_backend) {
        if (!t->cap) t->data = NULL;
        if (v->dcap) cudaFree(v->d);
        v->dcap = 0;
        v->d = a->data;
        v->on_dev = true;
        v->on_host = false;
        for (size_t k = 0; k < x->n_kv; k++)
            if (x->kv[k].past == x->in_idx[i] && x->kv[k].buf == a->data) {
                if (a->rank != 4 || a->dims[2] > x->kv[k].max_seq)
                    return xerr(err, GRAFT_EINVAL, "input '%s': longer than its KV cache", name);
                v->pitch = x->kv[k].max_seq;
            }
    } else {
        if (t->cap) free(t->data);
        t->cap = 0;
        t->data = a->data;
        v->on_host = true;
        v->on_dev = false;
    }
    return GRAFT_OK;
}

static int cx_output(rt_backend *b, const char *name, graft_array *a)
{
    cx_exec *x = (cx_exec *)b;
    cx_val *v = output_val(x, name);
    if (!v || !v->t.present) return 0;
    graft_error e;
    if (cx_to_dev_pitched(x, v, &e) != GRAFT_OK) return 0;
    memset(a, 0, sizeof *a);
    a->dtype = v->t.dtype;
    a->rank = v->t.rank;
    memcpy(a->dims, v->t.dims, (size_t)v->t.rank * sizeof *v->t.dims);
    a->data = v->d;
    a->nbytes = v->t.nbytes;
    return 1;
}

static int cx_swap(rt_backend *b, const char *name, void **buf, size_t *cap)
{
    cx_exec *x = (cx_exec *)b;
    cx_val *v = output_val(x, name);
    graft_error e;
    if (!v || !v->t.present || v->pitch || cx_to_dev(x, v, &e) != GRAFT_OK || !v->dcap || v->base) return 0;
    void *d = v->d;
    size_t c = v->dcap;
    v->d = *buf;
    v->dcap = *buf ? *cap : 0;
    *buf = d;
    *cap = c;
    v->on_dev = v->on_host = false;
    return 1;
}

static graft_status cx_reserve(rt_backend *b, const char *name, size_t bytes, graft_error *err)
{
    cx_exec *x = (cx_exec *)b;
    cx_val *v = output_val(x, name);
    if (!v) return xerr(err, GRAFT_EINVAL, "no output '%s'", name);
    if (v->base) return GRAFT_OK;
    return dev_reserve(x, v, bytes, err);
}

static graft_status cx_copy(rt_backend *b, void *dst, const void *src, size_t bytes, graft_error *err)
{
    cx_exec *x = (cx_exec *)b;
    if (bytes) CX_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, x->stream), "copy");
    return GRAFT_OK;
}

static graft_status cx_read(rt_backend *b, void *dst, const void *src, size_t bytes, graft_error *err)
{
    cx_exec *x = (cx_exec *)b;
    if (bytes) CX_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, x->stream), "read back");
    CX_CUDA(cudaStreamSynchronize(x->stream), "synchronise");
    return GRAFT_OK;
}

static graft_status cx_bind_kv(rt_backend *b, const char *past, const char *present, void *buf, int64_t max_seq,
                               graft_error *err)
{
    cx_exec *x = (cx_exec *)b;
    if (!past) { /* unbind all */
        x->n_kv = 0;
        return GRAFT_OK;
    }
    size_t pi = 0, oi = 0;
    while (pi < x->n_in && strcmp(x->in_info[pi].name, past) != 0) pi++;
    while (oi < x->n_out && strcmp(x->out_names[oi], present) != 0) oi++;
    if (pi == x->n_in || oi == x->n_out)
        return xerr(err, GRAFT_EINVAL, "bind_kv: no input '%s' or output '%s'", past, present);
    cx_kvbind *nk = realloc(x->kv, (x->n_kv + 1) * sizeof *nk);
    if (!nk) return nomem(err, "KV bindings");
    x->kv = nk;
    cx_kvbind *kb = &x->kv[x->n_kv++];
    kb->name = x->out_names[oi];
    kb->past = x->in_idx[pi];
    kb->present = x->out_idx[oi];
    kb->buf = buf;
    kb->max_seq = max_seq;
    return GRAFT_OK;
}

/* The last row of float output `name` (*vp) on the device, for an argmax. */
static graft_status amax_row(cx_exec *x, const char *name, cx_val **vp, const char **row, int64_t *n, graft_error *err)
{
    cx_val *v = *vp = output_val(x, name);
    if (!v || !v->t.present || !v->on_dev || v->pitch || v->t.rank < 1 || !cx_is_float(v->t.dtype))
        return xerr(err, GRAFT_EUNSUPPORTED, "output '%s' is not a float tensor on the device", name);
    *n = v->t.dims[v->t.rank - 1];
    if (*n <= 0 || v->t.numel % (uint64_t)*n) return xerr(err, GRAFT_EUNSUPPORTED, "output '%s' is empty", name);
    *row = (const char *)v->d + (v->t.numel / (uint64_t)*n - 1) * (uint64_t)*n * rt_dtype_size(v->t.dtype);
    if (!x->amax_d) {
        CX_CUDA(cudaMalloc((void **)&x->amax_d, GOPS_ARGMAX_WS + 16), "argmax result");
        CX_CUDA(cudaMemset(x->amax_d, 0, GOPS_ARGMAX_WS + 16), "argmax workspace");
        CX_CUDA(cudaMallocHost((void **)&x->amax_h, 2 * sizeof *x->amax_h), "argmax result (pinned)");
        x->amax_hd = (int64_t *)mapped(x, x->amax_h);
    }
    return GRAFT_OK;
}

static graft_status cx_argmax(rt_backend *b, const char *name, int64_t *id, graft_error *err)
{
    cx_exec *x = (cx_exec *)b;
    const char *row;
    int64_t n;
    cx_val *v;
    graft_status rc = amax_row(x, name, &v, &row, &n, err);
    if (rc != GRAFT_OK) return rc;
    int dt = v->t.dtype;
    rc = gops_argmax(dt, row, n, x->amax_d, (char *)x->amax_d + 16, (gcuda_stream)x->stream, err);
    if (rc != GRAFT_OK) return rc;
    int64_t *h = x->amax_h + x->slot;
    CX_CUDA(cudaMemcpyAsync(h, x->amax_d, sizeof *h, cudaMemcpyDeviceToHost, x->stream), "argmax");
    CX_CUDA(cudaStreamSynchronize(x->stream), "synchronise");
    *id = *h;
    return GRAFT_OK;
}

/* The pipelined greedy pick: the argmax of the last run's row enqueued
 * behind it, the id to ids (the next run's input ids: int64 or int32) and
 * to the slot's pinned copy, the row to the slot's keep buffer (*kept);
 * *ticket: the slot, for argmax_wait. Not while profiling or checking
 * (their steps read the device in between). */
static graft_status cx_argmax_start(rt_backend *b, const char *name, void *ids, int ids_dtype, const void **kept,
                                    int *ticket, graft_error *err)
{
    cx_exec *x = (cx_exec *)b;
    if (x->prof || x->check) return xerr(err, GRAFT_EUNSUPPORTED, "pipelined decode: not while profiling");
    /* a step that waited for a device value on the host (a host node reading
     * the input ids, say) is no CUDA graph: pipelining would cost the graphs */
    if (x->run_syncs) return xerr(err, GRAFT_EUNSUPPORTED, "pipelined decode: the step reads device values on the host");
    if (ids_dtype != GRAFT_DTYPE_INT64 && ids_dtype != GRAFT_DTYPE_INT32)
        return xerr(err, GRAFT_EUNSUPPORTED, "input ids of type %s", graft_dtype_name(ids_dtype));
    const char *row;
    int64_t n;
    cx_val *v;
    graft_status rc = amax_row(x, name, &v, &row, &n, err);
    if (rc != GRAFT_OK) return rc;
    int dt = v->t.dtype, s = x->slot;
    size_t rb = ((size_t)n * rt_dtype_size(dt) + 255) / 256 * 256;
    if (x->keep_cap < rb) {
        if (x->keep) {
            CX_CUDA(cudaStreamSynchronize(x->stream), "synchronise");
            cudaFree(x->keep);
            x->keep = NULL;
            x->keep_cap = 0;
        }
        CX_CUDA(cudaMalloc(&x->keep, 2 * rb), "kept logits");
        x->keep_cap = rb;
    }
    for (int k = 0; k < 2 && !x->amax_ev[1]; k++)
        CX_CUDA(cudaEventCreateWithFlags(&x->amax_ev[k], cudaEventDisableTiming), "argmax event");
    char *keep = (char *)x->keep + (size_t)s * x->keep_cap;
    /* int64 ids: the id straight into them, read back from there */
    bool i64 = ids_dtype == GRAFT_DTYPE_INT64;
    int64_t *res = i64 ? (int64_t *)ids : x->amax_d;
    /* the id into the slot's pinned copy: written there by the kernel where the device maps it, else copied */
    rc = gops_argmax_to(dt, row, n, res, i64 ? NULL : (int32_t *)ids, x->amax_hd ? x->amax_hd + s : NULL, keep,
                        (char *)x->amax_d + 16, (gcuda_stream)x->stream, err);
    if (rc != GRAFT_OK) return rc;
    if (!x->amax_hd)
        CX_CUDA(cudaMemcpyAsync(x->amax_h + s, res, sizeof *x->amax_h, cudaMemcpyDeviceToHost, x->stream), "argmax");
    CX_CUDA(cudaEventRecord(x->amax_ev[s], x->stream), "argmax event");
    *kept = keep;
    *ticket = s;
    return GRAFT_OK;
}

static graft_status cx_argmax_wait(rt_backend *b, int ticket, int64_t *id, graft_error *err)
{
    cx_exec *x = (cx_exec *)b;
    if (ticket < 0 || ticket > 1 || !x->amax_ev[ticket]) return xerr(err, GRAFT_EINVAL, "argmax_wait: no such pick");
    CX_CUDA(cudaEventSynchronize(x->amax_ev[ticket]), "synchronise");
    *id = x->amax_h[ticket];
    return GRAFT_OK;
}

/* Host bytes to backend memory behind the runs enqueued (the source is
 * staged by the driver before this returns). */
static graft_status cx_write(rt_backend *b, void *dst, const void *src, size_t bytes, graft_error *err)
{
    cx_exec *x = (cx_exec *)b;
    if (bytes) CX_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, x->stream), "write");
    return GRAFT_OK;
}

static const char *cx_describe(rt_backend *b)
{
    cx_exec *x = (cx_exec *)b;
    char fz[1024] = "";
    if (x->n_chains || x->n_mm_groups)
        snprintf(fz, sizeof fz, "; %zu elementwise nodes fused into %zu kernels, %zu MatMuls into %zu", x->n_fused,
                 x->n_chains, x->n_mm_nodes, x->n_mm_groups);
    if (x->n_tails || x->n_pros) {
        size_t l = strlen(fz);
        snprintf(fz + l, sizeof fz - l, "; %zu chains run by the GEMV before them, %zu norms by the GEMV after",
                 x->n_tails, x->n_pros);
    }
    if (x->n_cpros) {
        size_t l = strlen(fz);
        snprintf(fz + l, sizeof fz - l, "; %zu chains by the GEMV after them, in its prologue (%zu did last run)",
                 x->n_cpros, x->n_cpro_ran);
    }
    if (x->n_tail_skips) {
        size_t l = strlen(fz);
        snprintf(fz + l, sizeof fz - l, "; %zu skip norms after a GEMV's chain", x->n_tail_skips);
    }
    if (x->n_fused_append) {
        size_t l = strlen(fz);
        snprintf(fz + l, sizeof fz - l, "; %zu KV appends by the decode attention kernel", x->n_fused_append);
    }
    if (x->n_attn_pf) {
        size_t l = strlen(fz);
        snprintf(fz + l, sizeof fz - l, "; %zu decode attentions asked L2 for the next weights (%.0f MB, last run)",
                 x->n_attn_pf, (double)x->attn_pf_bytes / (1 << 20));
    }
    if (x->n_gemv_pf) {
        size_t l = strlen(fz);
        snprintf(fz + l, sizeof fz - l, "; %zu GEMVs asked L2 for later weights (%.0f MB, last run)", x->n_gemv_pf,
                 (double)x->gemv_pf_bytes / (1 << 20));
    }
    if (x->n_attn_preps) {
        size_t l = strlen(fz);
        snprintf(fz + l, sizeof fz - l, "; %zu attentions may make their q/k/v rows (%zu/%zu/%zu did last run)",
                 x->n_attn_preps, x->n_attn_took[0], x->n_attn_took[1], x->n_attn_took[2]);
    }
    if (x->n_gth_groups) {
        size_t l = strlen(fz);
        snprintf(fz + l, sizeof fz - l, "; %zu Gathers of shared indices in %zu launch%s", x->n_gth_nodes,
                 x->n_gth_groups, x->n_gth_groups == 1 ? "" : "es");
    }
    if (x->n_int_groups) {
        size_t l = strlen(fz);
        snprintf(fz + l, sizeof fz - l, "; %zu integer ops of the ids in %zu launch%s", x->n_int_nodes,
                 x->n_int_groups, x->n_int_groups == 1 ? "" : "es");
    }
    if (x->n_rope_pairs) {
        size_t l = strlen(fz);
        snprintf(fz + l, sizeof fz - l, "; %zu rotary pairs in one launch", x->n_rope_pairs);
    }
    if (x->n_rows) {
        size_t l = strlen(fz);
        snprintf(fz + l, sizeof fz - l, "; %zu MatMul weights (%.2f GB) stored [N, K]", x->n_rows,
                 (double)x->rows_bytes / 1e9);
    }
    if (x->side_of || (x->side_why && x->placed)) {
        size_t l = strlen(fz);
        if (x->side_of && !x->side_off) {
            snprintf(fz + l, sizeof fz - l, "; a side stream in captured steps%s: %zu nodes (%zu launches) beside %zu "
                     "launches, nodes", x->side_prio ? " (at a lower priority)" : "", x->n_side, x->n_side_launch,
                     x->n_side_main);
            for (int r = 0; r < x->n_side_reg; r++) {
                l = strlen(fz);
                snprintf(fz + l, sizeof fz - l, "%s %zu to %zu", r ? "," : "", x->side_f[r], x->side_j[r]);
            }
        } else
            snprintf(fz + l, sizeof fz - l, "; no side stream: %s", x->side_why);
    }
    if (!x->graphs) {
        snprintf(x->desc2, sizeof x->desc2, "%s%s; CUDA graphs %s", x->desc, fz,
                 x->graphs_off ? "off" : "unused so far");
        return x->desc2;
    }
    snprintf(x->desc2, sizeof x->desc2, "%s%s; CUDA graphs: %zu steps as graphs (%zu replayed as captured, %zu "
             "captures: %zu instantiations, %zu updates), %zu eager, %zu captures abandoned%s%s%s%s%s%s", x->desc, fz,
             x->n_graph, x->n_replay, x->n_graph - x->n_replay, x->n_inst, x->n_update, x->n_eager, x->n_abort,
             x->no_graph ? "; off: " : "", x->no_graph ? x->no_graph : "",
             x->rp_why[0] ? "; last replay refused at " : "", x->rp_why,
             x->n_graph < x->n_eager && x->sync_why[0] ? "; eager steps wait for the host: " : "", x->sync_why);
    if (x->n_replay && x->rp_gpu_n) {
        size_t l = strlen(x->desc2);
        snprintf(x->desc2 + l, sizeof x->desc2 - l, "; a replayed step: %.0f us on the host, %.0f us of graph on the GPU",
                 1e6 * x->rp_host_s / (double)x->n_replay, 1e6 * x->rp_gpu_s / (double)x->rp_gpu_n);
    }
    return x->desc2;
}

/* Input `name` will live on the device in decode steps (a pipelined
 * decode's input ids): the integer nodes computing from it are placed on
 * the device with it. Before the first run. */
static graft_status cx_device_input(rt_backend *b, const char *name, graft_error *err)
{
    cx_exec *x = (cx_exec *)b;
    for (size_t i = 0; i < x->n_in; i++)
        if (!strcmp(x->in_info[i].name, name)) {
            if (x->placed) return xerr(err, GRAFT_EINVAL, "device_input '%s': the nodes are placed", name);
            x->vals[x->in_idx[i]]->dtaint = true;
            return GRAFT_OK;
        }
    return xerr(err, GRAFT_EINVAL, "%s: the graph has no input '%s'", graft_model_path(x->m), name);
}

static void cx_set_graphs(rt_backend *b, int mode)
{
    cx_exec *x = (cx_exec *)b;
    x->graph_step = mode == 1 || mode == 3;
    x->pipelined = mode == 3;
    if (x->graph_step) x->graphs = true;
    if (mode == 2) x->graphs_off = true;
}

static const char *cx_fallbacks(rt_backend *b, size_t *count)
{
    cx_exec *x = (cx_exec *)b;
    *count = x->n_fb;
    return x->fb ? x->fb : "";
}

const rt_backend_vt rt_backend_cuda = {
    "cuda",  cx_available, cx_open, cx_free,    cx_alloc, cx_mfree,    cx_zero,     cx_set_input,
    cx_run,  cx_output,    cx_swap, cx_reserve, cx_copy,  cx_read,     cx_describe, cx_fallbacks,
    cx_bind_kv, cx_set_graphs, cx_argmax, cx_argmax_start, cx_argmax_wait, cx_write, cx_device_input,
};
