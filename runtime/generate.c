/* Decode loop over a session: KV bridge, planning for a maximum context,
 * prefill, one token per step, greedy or sampled picks. */
#include <jansson.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kernels/gemm.h"
#include "runtime/backend.h"
#include "runtime/rt.h"

#define GEN_MAX_LAYERS 512

typedef struct kv_pair {
    char past[2][128];    /* key, value input names */
    char present[2][128]; /* key, value output names */
    int dtype;
    int64_t heads[2], dim[2];
    void *buf[2]; /* holds present -> next past (ping-pong with the session) */
    size_t cap[2];
    int64_t len;  /* positions in buf */
} kv_pair;

struct graft_generator {
    char *dir, *model_path;
    graft_model *m;
    const rt_backend_vt *be; /* what runs the graph (CPU session or CUDA executor) */
    rt_backend *b;
    graft_gen_opts o;
    int max_ctx;
    char ids_name[128], mask_name[128], pos_name[128], logits_name[128];
    int ids_dtype, mask_dtype, pos_dtype;
    int have_pos;
    int kv_in_place; /* the backend keeps present in the past buffers (bind_kv) */
    int planning;    /* the planning step is running */
    kv_pair *kv;
    size_t n_kv;
    int64_t *eos;
    size_t n_eos;
    /* preallocated buffers */
    void *ids_buf, *mask_buf, *pos_buf;
    size_t prompt_cap;
    float *logits;
    void *lrow; /* the last logits row as read back from the backend */
    const void *lg_row; /* ... where it lives there (after the last step) */
    int lg_dtype;
    int lg_ready;       /* logits hold that row */
    int have_next;      /* next_id: the backend's argmax of that row */
    int64_t next_id;
    size_t vocab;
    int *order; /* sampling scratch */
    float *probs;
    uint64_t rng;
    size_t len;
    /* Pipelined greedy decode (CUDA graphs): each step call launches the
     * step after it, its input id the device argmax of this one, before it
     * waits for this one's pick, so that the GPU runs step t + 1 while the
     * host prepares step t + 2 (GRAFT_PIPELINE=0: off). A different id from
     * the caller undoes the step launched ahead. */
    int pipe;               /* may pipeline (greedy, the backend's argmax_start, KV in place, graphs) */
    void *ids_dev;          /* backend memory: a decode step's input id (the last pick, or the caller's) */
    int ahead, ahead_ticket; /* a step launched ahead (its length counted in len and the caches) */
    const void *ahead_kept;  /* ... its logits row, as kept by its pick */
    graft_gen_timings t;
};

#define gerr rt_seterr

static bool find_input(graft_graph *g, const char *name, graft_value_info *vi)
{
    for (size_t i = 0; i < graft_graph_input_count(g); i++) {
        graft_graph_input(g, i, vi);
        if (strcmp(vi->name, name) == 0) return true;
    }
    return false;
}

static bool find_output(graft_graph *g, const char *name, graft_value_info *vi)
{
    for (size_t i = 0; i < graft_graph_output_count(g); i++) {
        graft_graph_output(g, i, vi);
        if (strcmp(vi->name, name) == 0) return true;
    }
    return false;
}

static const char *cfg_name(json_t *map, const char *key, const char *def)
{
    const char *v = json_string_value(json_object_get(map, key));
    return v ? v : def;
}

/* Expands a "%d" template; false when it has no single %d. */
static bool expand(char *out, size_t cap, const char *tmpl, size_t layer)
{
    const char *p = strstr(tmpl, "%d");
    if (!p || strstr(p + 2, "%")) return false;
    snprintf(out, cap, "%.*s%zu%s", (int)(p - tmpl), tmpl, layer, p + 2);
    return true;
}

static graft_status setup_names(graft_generator *g, json_t *cfg, graft_error *err)
{
    json_t *model = json_object_get(cfg, "model");
    json_t *dec = json_object_get(model, "decoder");
    json_t *in = json_object_get(dec, "inputs"), *out = json_object_get(dec, "outputs");
    graft_graph *gr = graft_model_graph(g->m);
    graft_value_info vi;
    snprintf(g->ids_name, sizeof g->ids_name, "%s", cfg_name(in, "input_ids", "input_ids"));
    snprintf(g->mask_name, sizeof g->mask_name, "%s", cfg_name(in, "attention_mask", "attention_mask"));
    snprintf(g->pos_name, sizeof g->pos_name, "%s", cfg_name(in, "position_ids", "position_ids"));
    snprintf(g->logits_name, sizeof g->logits_name, "%s", cfg_name(out, "logits", "logits"));
    const char *path = graft_model_path(g->m);
    if (!find_input(gr, g->ids_name, &vi))
        return gerr(err, GRAFT_EINVAL, "%s: the graph has no input '%s' (input_ids); is it a composed export?",
                    path, g->ids_name);
    g->ids_dtype = vi.dtype;
    if (!find_input(gr, g->mask_name, &vi))
        return gerr(err, GRAFT_EINVAL, "%s: the graph has no input '%s' (attention_mask)", path, g->mask_name);
    g->mask_dtype = vi.dtype;
    g->have_pos = find_input(gr, g->pos_name, &vi);
    g->pos_dtype = g->have_pos ? vi.dtype : 0;
    if (!find_output(gr, g->logits_name, &vi))
        return gerr(err, GRAFT_EINVAL, "%s: the graph has no output '%s' (logits)", path, g->logits_name);
    int dts[3] = {g->ids_dtype, g->mask_dtype, g->have_pos ? g->pos_dtype : GRAFT_DTYPE_INT64};
    for (int i = 0; i < 3; i++)
        if (dts[i] != GRAFT_DTYPE_INT64 && dts[i] != GRAFT_DTYPE_INT32)
            return gerr(err, GRAFT_EUNSUPPORTED, "%s: input ids/mask/positions of type %s", path,
                        graft_dtype_name(dts[i]));
    const char *pk = cfg_name(in, "past_key_names", "past_key_values.%d.key");
    const char *pv = cfg_name(in, "past_value_names", "past_key_values.%d.value");
    const char *qk = cfg_name(out, "present_key_names", "present.%d.key");
    const char *qv = cfg_name(out, "present_value_names", "present.%d.value");
    int64_t cfg_heads = json_integer_value(json_object_get(dec, "num_key_value_heads"));
    int64_t cfg_head_size = json_integer_value(json_object_get(dec, "head_size"));
    g->kv = calloc(GEN_MAX_LAYERS, sizeof *g->kv);
    if (!g->kv) return gerr(err, GRAFT_ENOMEM, "out of memory");
    size_t used_inputs = 2 + (size_t)g->have_pos;
    for (size_t layer = 0; layer < GEN_MAX_LAYERS; layer++) {
        kv_pair *p = &g->kv[g->n_kv];
        if (!expand(p->past[0], sizeof p->past[0], pk, layer) || !expand(p->past[1], sizeof p->past[1], pv, layer) ||
            !expand(p->present[0], sizeof p->present[0], qk, layer) ||
            !expand(p->present[1], sizeof p->present[1], qv, layer))
            return gerr(err, GRAFT_EINVAL, "genai_config.json: KV name templates need one %%d");
        graft_value_info a, b;
        if (!find_input(gr, p->past[0], &a)) continue; /* a shared-KV layer: nothing to bridge */
        for (int k = 0; k < 2; k++) {
            if (!find_input(gr, p->past[k], &a))
                return gerr(err, GRAFT_EINVAL, "%s: '%s' has no '%s' beside it", path, p->past[0], p->past[k]);
            if (!find_output(gr, p->present[k], &b))
                return gerr(err, GRAFT_EINVAL, "%s: past input '%s' has no present output '%s'", path,
                            p->past[k], p->present[k]);
            /* geometry [batch, kv_heads, seq, head_dim] from the graph: the
             * present output, else the past input; a symbolic dimension
             * (the builder's "kv_cache_dim") falls back on the config's
             * num_key_value_heads / head_size */
            if (a.rank != 4 || (b.rank != 4 && b.rank != -1))
                return gerr(err, GRAFT_EUNSUPPORTED, "%s: '%s' is not [batch, kv_heads, seq, head_dim]", path,
                            p->past[k]);
            int64_t h = b.rank == 4 && b.dims[1].value > 0 ? b.dims[1].value : a.dims[1].value;
            int64_t d = b.rank == 4 && b.dims[3].value > 0 ? b.dims[3].value : a.dims[3].value;
            if (h <= 0) h = cfg_heads;
            if (d <= 0) d = cfg_head_size;
            if (h <= 0 || d <= 0)
                return gerr(err, GRAFT_EUNSUPPORTED, "%s: '%s' has symbolic kv_heads or head_dim and "
                            "genai_config.json gives no num_key_value_heads/head_size", path, p->past[k]);
            p->heads[k] = h;
            p->dim[k] = d;
            p->dtype = a.dtype;
        }
        g->n_kv++;
        used_inputs += 2;
    }
    if (graft_graph_input_count(gr) != used_inputs) {
        for (size_t i = 0; i < graft_graph_input_count(gr); i++) {
            graft_graph_input(gr, i, &vi);
            bool known = !strcmp(vi.name, g->ids_name) || !strcmp(vi.name, g->mask_name) ||
                         (g->have_pos && !strcmp(vi.name, g->pos_name));
            for (size_t k = 0; k < g->n_kv && !known; k++)
                known = !strcmp(vi.name, g->kv[k].past[0]) || !strcmp(vi.name, g->kv[k].past[1]);
            if (!known && !graft_graph_find_initializer(gr, vi.name))
                return gerr(err, GRAFT_EUNSUPPORTED, "%s: graph input '%s' is none of input_ids, attention_mask, "
                            "position_ids or past KV; graft cannot feed it", path, vi.name);
        }
    }
    json_t *eos = json_object_get(model, "eos_token_id");
    size_t n = json_is_array(eos) ? json_array_size(eos) : json_is_integer(eos) ? 1 : 0;
    g->eos = calloc(n + 1, sizeof *g->eos);
    if (!g->eos) return gerr(err, GRAFT_ENOMEM, "out of memory");
    if (json_is_integer(eos)) g->eos[g->n_eos++] = json_integer_value(eos);
    for (size_t i = 0; json_is_array(eos) && i < n; i++)
        if (json_is_integer(json_array_get(eos, i))) g->eos[g->n_eos++] = json_integer_value(json_array_get(eos, i));
    return GRAFT_OK;
}

static void put_int(void *buf, int dtype, size_t i, int64_t v)
{
    if (dtype == GRAFT_DTYPE_INT32) ((int32_t *)buf)[i] = (int32_t)v;
    else ((int64_t *)buf)[i] = v;
}

static graft_status set_int_input(graft_generator *g, const char *name, int dtype, void *buf, int64_t s,
                                  int64_t t, graft_error *err)
{
    graft_array a = {0};
    a.dtype = dtype;
    a.rank = 2;
    a.dims[0] = s;
    a.dims[1] = t;
    a.data = buf;
    a.nbytes = (size_t)(s * t) * (dtype == GRAFT_DTYPE_INT32 ? 4 : 8);
    return g->be->set_input(g->b, name, &a, 0, err);
}

static graft_status fetch_logits(graft_generator *g, graft_error *err);

/* Launches the session on `n` new tokens at position g->len, with the
 * cache: ids from the host, or (ids NULL, n 1, a pipelined step) the one
 * in g->ids_dev. The step's logits are located, not read. */
static graft_status launch(graft_generator *g, const int64_t *ids, size_t n, graft_error *err)
{
    graft_status rc;
    int64_t total = (int64_t)(g->len + n);
    if (total > g->max_ctx)
        return gerr(err, GRAFT_EINVAL, "sequence of %lld tokens is longer than the context of %d tokens",
                    (long long)total, g->max_ctx);
    for (size_t i = 0; i < n; i++) {
        if (ids) put_int(g->ids_buf, g->ids_dtype, i, ids[i]);
        if (g->have_pos) put_int(g->pos_buf, g->pos_dtype, i, (int64_t)(g->len + i));
    }
    if (ids) {
        rc = set_int_input(g, g->ids_name, g->ids_dtype, g->ids_buf, 1, (int64_t)n, err);
    } else {
        graft_array a = {0};
        a.dtype = g->ids_dtype;
        a.rank = 2;
        a.dims[0] = a.dims[1] = 1;
        a.data = g->ids_dev;
        a.nbytes = g->ids_dtype == GRAFT_DTYPE_INT32 ? 4 : 8;
        rc = g->be->set_input(g->b, g->ids_name, &a, 1, err);
    }
    if (rc != GRAFT_OK) return rc;
    if ((rc = set_int_input(g, g->mask_name, g->mask_dtype, g->mask_buf, 1, total, err)) != GRAFT_OK) return rc;
    if (g->have_pos && (rc = set_int_input(g, g->pos_name, g->pos_dtype, g->pos_buf, 1, (int64_t)n, err)) != GRAFT_OK)
        return rc;
    static uint8_t empty[64];
    for (size_t l = 0; l < g->n_kv; l++) {
        kv_pair *p = &g->kv[l];
        for (int k = 0; k < 2; k++) {
            graft_array a = {0};
            a.dtype = p->dtype;
            a.rank = 4;
            a.dims[0] = 1;
            a.dims[1] = p->heads[k];
            a.dims[2] = p->len;
            a.dims[3] = p->dim[k];
            a.nbytes = (size_t)(p->heads[k] * p->len * p->dim[k]) * rt_dtype_size(p->dtype);
            a.data = p->buf[k] ? p->buf[k] : empty;
            if ((rc = g->be->set_input(g->b, p->past[k], &a, p->buf[k] != NULL, err)) != GRAFT_OK) return rc;
        }
    }
    /* a decode step (one token on a cache) may run as a CUDA graph */
    if (g->be->set_graphs)
        g->be->set_graphs(g->b, n == 1 && !g->planning ? (g->o.no_cuda_graph ? 2 : ids ? 1 : 3) : 0);
    if ((rc = g->be->run(g->b, err)) != GRAFT_OK) return rc;
    /* present -> next past: in place (bind_kv), else swap buffers, no copies */
    for (size_t l = 0; l < g->n_kv; l++) {
        kv_pair *p = &g->kv[l];
        for (int k = 0; k < 2; k++) {
            graft_array a;
            if (!g->be->output(g->b, p->present[k], &a) || a.rank != 4 || a.dims[2] != total ||
                a.dims[1] != p->heads[k] || a.dims[3] != p->dim[k] || a.dtype != p->dtype)
                return gerr(err, GRAFT_EINVAL, "%s: output '%s' is not [1, %lld, %lld, %lld] %s after the step",
                            graft_model_path(g->m), p->present[k], (long long)p->heads[k], (long long)total,
                            (long long)p->dim[k], graft_dtype_name(p->dtype));
            if (g->kv_in_place) {
                if (a.data != p->buf[k])
                    return gerr(err, GRAFT_EINVAL, "%s: present '%s' is not in its KV cache after the step",
                                graft_model_path(g->m), p->present[k]);
                continue;
            }
            if (!g->be->swap_output(g->b, p->present[k], &p->buf[k], &p->cap[k])) {
                /* a borrowed output: copy into our buffer (sized at planning) */
                if (p->cap[k] < a.nbytes)
                    return gerr(err, GRAFT_EINVAL, "%s: present '%s' outgrew its plan", graft_model_path(g->m),
                                p->present[k]);
                if ((rc = g->be->copy(g->b, p->buf[k], a.data, a.nbytes, err)) != GRAFT_OK) return rc;
            }
        }
        p->len = total;
    }
    g->len = (size_t)total;
    graft_array lg;
    if (!g->be->output(g->b, g->logits_name, &lg) || lg.rank < 2)
        return gerr(err, GRAFT_EINVAL, "%s: no logits after the step", graft_model_path(g->m));
    size_t vocab = (size_t)lg.dims[lg.rank - 1];
    size_t rows = vocab ? (size_t)(rt_numel(lg.rank, lg.dims) / vocab) : 0;
    if (!vocab || !rows || (g->vocab && vocab != g->vocab))
        return gerr(err, GRAFT_EINVAL, "%s: logits of unexpected shape", graft_model_path(g->m));
    size_t es = rt_dtype_size(lg.dtype);
    if (lg.dtype != GRAFT_DTYPE_FLOAT && lg.dtype != GRAFT_DTYPE_FLOAT16 && lg.dtype != GRAFT_DTYPE_BFLOAT16)
        return gerr(err, GRAFT_EUNSUPPORTED, "logits of type %s", graft_dtype_name(lg.dtype));
    g->vocab = vocab;
    g->lg_dtype = lg.dtype;
    g->lg_row = (const char *)lg.data + (rows - 1) * vocab * es;
    g->lg_ready = 0;
    g->have_next = 0;
    return GRAFT_OK;
}

/* The launched step's result: greedy, the backend's argmax, only the id
 * comes back (the logits are read when asked for, graft_generator_logits);
 * else the logits. */
static graft_status finish(graft_generator *g, graft_error *err)
{
    graft_status rc;
    if (g->o.temperature <= 0 && g->be->argmax && !g->planning) {
        graft_error e2 = {0};
        rc = g->be->argmax(g->b, g->logits_name, &g->next_id, &e2);
        if (rc == GRAFT_OK) {
            g->have_next = 1;
            return GRAFT_OK;
        }
        if (rc != GRAFT_EUNSUPPORTED) {
            *err = e2;
            return rc;
        }
    }
    return fetch_logits(g, err);
}

static graft_status run_step(graft_generator *g, const int64_t *ids, size_t n, graft_error *err)
{
    graft_status rc = launch(g, ids, n, err);
    return rc != GRAFT_OK ? rc : finish(g, err);
}

/* A pipelined step launched: its pick enqueued (ticket, kept row). */
static graft_status launch_piped(graft_generator *g, int *ticket, const void **kept, graft_error *err)
{
    graft_status rc = launch(g, NULL, 1, err);
    if (rc != GRAFT_OK) return rc;
    return g->be->argmax_start(g->b, g->logits_name, g->ids_dev, g->ids_dtype, kept, ticket, err);
}

/* The step launched ahead undone: waited for (its staging is reused two
 * runs on), its position dropped (the next step writes its cache rows). */
static graft_status cancel_ahead(graft_generator *g, graft_error *err)
{
    if (!g->ahead) return GRAFT_OK;
    int64_t id;
    g->ahead = 0;
    g->t.ahead_undone++;
    g->len--;
    for (size_t l = 0; l < g->n_kv; l++) g->kv[l].len--;
    return g->be->argmax_wait(g->b, g->ahead_ticket, &id, err);
}

/* A greedy step, pipelined: this one (launched ahead by the last call
 * when its id is this), then the next one launched on this one's device
 * pick, then this one's pick waited for. */
static graft_status step_piped(graft_generator *g, int64_t id, graft_error *err)
{
    graft_status rc;
    int ticket;
    const void *kept;
    if (g->ahead && id == g->next_id) {
        g->ahead = 0;
        ticket = g->ahead_ticket;
        kept = g->ahead_kept;
    } else {
        if ((rc = cancel_ahead(g, err)) != GRAFT_OK) return rc;
        int64_t v = id;
        int32_t v32 = (int32_t)id;
        const void *src = g->ids_dtype == GRAFT_DTYPE_INT32 ? (const void *)&v32 : (const void *)&v;
        if ((rc = g->be->write(g->b, g->ids_dev, src, g->ids_dtype == GRAFT_DTYPE_INT32 ? 4 : 8, err)) != GRAFT_OK)
            return rc;
        if ((rc = launch(g, NULL, 1, err)) != GRAFT_OK) return rc;
        graft_error e2 = {0};
        rc = g->be->argmax_start(g->b, g->logits_name, g->ids_dev, g->ids_dtype, &kept, &ticket, &e2);
        if (rc == GRAFT_EUNSUPPORTED) { /* the backend will not pipeline: this step's pick as usual */
            g->pipe = 0;
            return finish(g, err);
        }
        if (rc != GRAFT_OK) {
            *err = e2;
            return rc;
        }
    }
    if (g->len + 1 <= (size_t)g->max_ctx) {
        if ((rc = launch_piped(g, &g->ahead_ticket, &g->ahead_kept, err)) != GRAFT_OK) return rc;
        g->ahead = 1;
        g->t.ahead_launched++;
    }
    if ((rc = g->be->argmax_wait(g->b, ticket, &g->next_id, err)) != GRAFT_OK) return rc;
    /* what the caller sees: this step's row and pick */
    g->lg_row = kept;
    g->lg_ready = 0;
    g->have_next = 1;
    return GRAFT_OK;
}

/* The last logits row read back from the backend and widened to fp32. */
static graft_status fetch_logits(graft_generator *g, graft_error *err)
{
    size_t vocab = g->vocab, es = rt_dtype_size(g->lg_dtype);
    if (!g->logits) {
        g->logits = malloc(vocab * sizeof *g->logits);
        g->order = malloc(vocab * sizeof *g->order);
        g->probs = malloc(vocab * sizeof *g->probs);
        g->lrow = malloc(vocab * sizeof(float));
        if (!g->logits || !g->order || !g->probs || !g->lrow) return gerr(err, GRAFT_ENOMEM, "out of memory");
    }
    graft_status rc = g->be->read(g->b, g->lrow, g->lg_row, vocab * es, err);
    if (rc != GRAFT_OK) return rc;
    if (!k_to_f32(g->lg_dtype, g->lrow, g->logits, vocab))
        return gerr(err, GRAFT_EUNSUPPORTED, "logits of type %s", graft_dtype_name(g->lg_dtype));
    g->lg_ready = 1;
    return GRAFT_OK;
}

/* Sizes every buffer for the largest decode step: one step with the cache
 * full to max_context - 1 positions. */
static graft_status plan(graft_generator *g, graft_error *err)
{
    size_t cap = (size_t)g->max_ctx;
    g->prompt_cap = cap;
    g->ids_buf = calloc(cap, 8);
    g->mask_buf = malloc(cap * 8);
    g->pos_buf = calloc(cap, 8);
    if (!g->ids_buf || !g->mask_buf || !g->pos_buf) return gerr(err, GRAFT_ENOMEM, "out of memory");
    for (size_t i = 0; i < cap; i++) put_int(g->mask_buf, g->mask_dtype, i, 1);
    /* one cache per layer and K/V at [1, heads, max_context, dim], written
     * in place where the backend can (GRAFT_KV_PINGPONG=1: never) */
    const char *pp = getenv("GRAFT_KV_PINGPONG");
    g->kv_in_place = g->be->bind_kv != NULL && !(pp && *pp && strcmp(pp, "0") != 0);
    for (size_t l = 0; l < g->n_kv; l++) {
        kv_pair *p = &g->kv[l];
        for (int k = 0; k < 2; k++) {
            size_t bytes = (size_t)(p->heads[k] * (int64_t)cap * p->dim[k]) * rt_dtype_size(p->dtype);
            p->cap[k] = (bytes + 63) / 64 * 64;
            graft_status rc = g->be->alloc(g->b, p->cap[k], &p->buf[k], err);
            if (rc != GRAFT_OK) return rc;
            if ((rc = g->be->zero(g->b, p->buf[k], p->cap[k], err)) != GRAFT_OK) return rc;
            if (g->kv_in_place)
                rc = g->be->bind_kv(g->b, p->past[k], p->present[k], p->buf[k], (int64_t)cap, err);
            else
                rc = g->be->reserve_output(g->b, p->present[k], bytes, err);
            if (rc != GRAFT_OK) return rc;
            p->len = g->max_ctx - 1;
        }
    }
    g->len = (size_t)g->max_ctx - 1;
    int64_t tok = 0;
    g->planning = 1;
    graft_status rc = run_step(g, &tok, 1, err);
    g->planning = 0;
    for (size_t l = 0; l < g->n_kv; l++) g->kv[l].len = 0;
    g->len = 0;
    return rc;
}

/* The backend for g->o.device: CUDA when asked (an error where it cannot
 * run), CPU when asked, and for auto CUDA when its library loads and a GPU
 * is visible, else the CPU. The CUDA library is loaded only here. */
static graft_status pick_backend(graft_generator *g, graft_error *err)
{
    char why[512] = "";
    const rt_backend_vt *cuda = NULL;
    switch (g->o.device) {
    case GRAFT_DEVICE_CPU: g->be = &rt_backend_cpu; return GRAFT_OK;
    case GRAFT_DEVICE_CUDA:
        cuda = rt_backend_cuda_load(why, sizeof why);
        if (!cuda) return gerr(err, GRAFT_EUNSUPPORTED, "--device cuda: %s", why);
        if (!cuda->available()) return gerr(err, GRAFT_EUNSUPPORTED, "--device cuda: no CUDA device is visible");
        g->be = cuda;
        return GRAFT_OK;
    case GRAFT_DEVICE_AUTO:
        /* no sign of an NVIDIA driver (its device nodes, its /proc entry,
         * or /dev/dxg under WSL): no GPU, and no reason to map the CUDA
         * libraries */
        if (access("/dev/nvidiactl", F_OK) != 0 && access("/dev/nvidia0", F_OK) != 0 &&
            access("/proc/driver/nvidia", F_OK) != 0 && access("/dev/dxg", F_OK) != 0) {
            g->be = &rt_backend_cpu;
            return GRAFT_OK;
        }
        cuda = rt_backend_cuda_load(why, sizeof why);
        g->be = cuda && cuda->available() ? cuda : &rt_backend_cpu;
        return GRAFT_OK;
    default: return gerr(err, GRAFT_EINVAL, "unknown device %d", g->o.device);
    }
}

graft_status graft_generator_open(const char *path, const graft_gen_opts *opts, graft_generator **out,
                                  graft_error *err)
{
    *out = NULL;
    double t0 = rt_now();
    graft_status rc = GRAFT_OK;
    json_t *cfg = NULL;
    graft_generator *g = calloc(1, sizeof *g);
    if (!g) return gerr(err, GRAFT_ENOMEM, "out of memory");
    if (opts) g->o = *opts;
    g->rng = g->o.seed ? g->o.seed : 0x9e3779b97f4a7c15ULL;
    struct stat st;
    if (stat(path, &st) != 0) {
        rc = gerr(err, GRAFT_EINVAL, "%s: no such export", path);
        goto fail;
    }
    const char *model_file = "model.onnx";
    if (S_ISDIR(st.st_mode)) {
        g->dir = strdup(path);
        char cfgp[4096];
        snprintf(cfgp, sizeof cfgp, "%s/genai_config.json", path);
        if (stat(cfgp, &st) == 0) {
            json_error_t je;
            cfg = json_load_file(cfgp, 0, &je);
            if (!cfg) {
                rc = gerr(err, GRAFT_EINVAL, "%s: invalid JSON at line %d, column %d: %s", cfgp, je.line, je.column,
                          je.text);
                goto fail;
            }
            const char *fn = json_string_value(json_object_get(json_object_get(json_object_get(cfg, "model"),
                                                                               "decoder"), "filename"));
            if (fn) model_file = fn;
            if (json_object_get(json_object_get(cfg, "model"), "embedding")) {
                rc = gerr(err, GRAFT_EINVAL, "%s: a multi-graph pipeline; compose it first (graft compose)", path);
                goto fail;
            }
        }
        size_t n = strlen(path) + strlen(model_file) + 2;
        g->model_path = malloc(n);
        if (g->model_path) snprintf(g->model_path, n, "%s/%s", path, model_file);
    } else {
        g->model_path = strdup(path);
        const char *sl = strrchr(path, '/');
        g->dir = sl ? strndup(path, (size_t)(sl - path)) : strdup(".");
    }
    if (!g->dir || !g->model_path) {
        rc = gerr(err, GRAFT_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = graft_model_load(g->model_path, NULL, &g->m, err)) != GRAFT_OK) goto fail;
    if ((rc = pick_backend(g, err)) != GRAFT_OK) goto fail;
    if ((rc = g->be->open(g->m, &g->b, err)) != GRAFT_OK) goto fail;
    if ((rc = setup_names(g, cfg, err)) != GRAFT_OK) goto fail;
    json_int_t ctx = json_integer_value(json_object_get(json_object_get(cfg, "model"), "context_length"));
    g->max_ctx = g->o.max_context > 0 ? g->o.max_context : ctx > 0 && ctx < 4096 ? (int)ctx : 4096;
    g->t.load_s = rt_now() - t0;
    t0 = rt_now();
    /* a pipelined greedy decode (step_piped): the backend places what
     * computes from the input ids with them, on the device, before the
     * planning step */
    const char *pe = getenv("GRAFT_PIPELINE"), *pp = getenv("GRAFT_KV_PINGPONG");
    int want_pipe = g->o.temperature <= 0 && !g->o.no_cuda_graph && g->be->bind_kv &&
                    !(pp && *pp && strcmp(pp, "0") != 0) && g->be->argmax_start && g->be->argmax_wait &&
                    g->be->write && g->be->device_input && !(pe && !strcmp(pe, "0")) &&
                    (g->ids_dtype == GRAFT_DTYPE_INT64 || g->ids_dtype == GRAFT_DTYPE_INT32);
    if (want_pipe && (rc = g->be->device_input(g->b, g->ids_name, err)) != GRAFT_OK) goto fail;
    /* A config's context_length can exceed what the graph holds (a rotary
     * cache of fewer positions, say): without an explicit max_context,
     * halve until a full-cache step runs. */
    while ((rc = plan(g, err)) != GRAFT_OK) {
        if (rc != GRAFT_EINVAL || g->o.max_context > 0 || g->max_ctx <= 16) goto fail;
        free(g->ids_buf);
        free(g->mask_buf);
        free(g->pos_buf);
        g->ids_buf = g->mask_buf = g->pos_buf = NULL;
        if (g->kv_in_place && (rc = g->be->bind_kv(g->b, NULL, NULL, NULL, 0, err)) != GRAFT_OK) goto fail;
        for (size_t l = 0; l < g->n_kv; l++) {
            g->be->mfree(g->b, g->kv[l].buf[0]);
            g->be->mfree(g->b, g->kv[l].buf[1]);
            g->kv[l].buf[0] = g->kv[l].buf[1] = NULL;
            g->kv[l].cap[0] = g->kv[l].cap[1] = 0;
            g->kv[l].len = 0;
        }
        g->len = 0;
        g->max_ctx /= 2;
    }
    g->t.plan_s = rt_now() - t0;
    if (want_pipe && g->kv_in_place) {
        if ((rc = g->be->alloc(g->b, 8, &g->ids_dev, err)) != GRAFT_OK) goto fail;
        g->pipe = 1;
    }
    json_decref(cfg);
    *out = g;
    return GRAFT_OK;
fail:
    json_decref(cfg);
    graft_generator_free(g);
    return rc;
}

void graft_generator_free(graft_generator *g)
{
    if (!g) return;
    graft_error e;
    if (g->ahead) (void)cancel_ahead(g, &e); /* its kernels done before their buffers go */
    for (size_t l = 0; l < g->n_kv && g->b; l++) {
        g->be->mfree(g->b, g->kv[l].buf[0]);
        g->be->mfree(g->b, g->kv[l].buf[1]);
    }
    if (g->b && g->ids_dev) g->be->mfree(g->b, g->ids_dev);
    free(g->kv);
    free(g->eos);
    free(g->ids_buf);
    free(g->mask_buf);
    free(g->pos_buf);
    free(g->logits);
    free(g->order);
    free(g->probs);
    free(g->lrow);
    if (g->b) g->be->free(g->b);
    graft_model_free(g->m);
    free(g->dir);
    free(g->model_path);
    free(g);
}

graft_status graft_generator_prefill(graft_generator *g, const int64_t *ids, size_t n, graft_error *err)
{
    if (n == 0) return gerr(err, GRAFT_EINVAL, "empty prompt");
    if (n > (size_t)g->max_ctx)
        return gerr(err, GRAFT_EINVAL, "prompt of %zu tokens is longer than the context of %d tokens", n, g->max_ctx);
    graft_status rc = cancel_ahead(g, err);
    if (rc != GRAFT_OK) return rc;
    for (size_t l = 0; l < g->n_kv; l++) g->kv[l].len = 0;
    g->len = 0;
    double t0 = rt_now();
    rc = run_step(g, ids, n, err);
    g->t.prefill_s += rt_now() - t0;
    g->t.prefill_tokens += n;
    return rc;
}

graft_status graft_generator_step(graft_generator *g, int64_t id, graft_error *err)
{
    double t0 = rt_now();
    graft_status rc = g->pipe ? step_piped(g, id, err) : run_step(g, &id, 1, err);
    g->t.decode_s += rt_now() - t0;
    g->t.decode_tokens++;
    return rc;
}

const float *graft_generator_logits(const graft_generator *g, size_t *vocab)
{
    if (vocab) *vocab = g->vocab;
    if (!g->lg_ready && g->lg_row) {
        graft_error e;
        /* read on first use after a greedy step (the pick needed only the id) */
        if (fetch_logits((graft_generator *)g, &e) != GRAFT_OK) return NULL;
    }
    return g->logits;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static int cmp_desc(const void *a, const void *b, void *ctx)
{
    const float *p = ctx;
    float x = p[*(const int *)a], y = p[*(const int *)b];
    if (x != y) return x > y ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

int64_t graft_generator_pick(graft_generator *g)
{
    if (g->have_next && !g->lg_ready) return g->next_id; /* a greedy step's device argmax */
    const float *lg = graft_generator_logits(g, NULL);
    if (!lg) return -1;
    size_t v = g->vocab, best = 0;
    for (size_t i = 1; i < v; i++)
        if (lg[i] > lg[best]) best = i;
    if (g->o.temperature <= 0) return (int64_t)best;
    /* softmax at temperature, then top-k and top-p over the sorted order */
    float mx = lg[best];
    for (size_t i = 0; i < v; i++) {
        g->probs[i] = expf((lg[i] - mx) / g->o.temperature);
        g->order[i] = (int)i;
    }
    qsort_r(g->order, v, sizeof *g->order, cmp_desc, g->probs);
    size_t keep = g->o.top_k > 0 && (size_t)g->o.top_k < v ? (size_t)g->o.top_k : v;
    double total = 0;
    for (size_t i = 0; i < keep; i++) total += g->probs[g->order[i]];
    if (g->o.top_p > 0 && g->o.top_p < 1) {
        double acc = 0;
        for (size_t i = 0; i < keep; i++) {
            acc += g->probs[g->order[i]] / total;
            if (acc >= g->o.top_p) {
                keep = i + 1;
                break;
            }
        }
        total = 0;
        for (size_t i = 0; i < keep; i++) total += g->probs[g->order[i]];
    }
    double r = (double)(rng_next(&g->rng) >> 11) / 9007199254740992.0 * total, acc = 0;
    for (size_t i = 0; i < keep; i++) {
        acc += g->probs[g->order[i]];
        if (r < acc) return g->order[i];
    }
    return g->order[keep - 1];
}

int graft_generator_is_eos(const graft_generator *g, int64_t id)
{
    for (size_t i = 0; i < g->n_eos; i++)
        if (g->eos[i] == id) return 1;
    return 0;
}

size_t graft_generator_length(const graft_generator *g) { return g->len - (size_t)g->ahead; }
int graft_generator_max_context(const graft_generator *g) { return g->max_ctx; }
const graft_gen_timings *graft_generator_timings(const graft_generator *g) { return &g->t; }
const char *graft_generator_dir(const graft_generator *g) { return g->dir; }
const char *graft_generator_device(const graft_generator *g) { return g->be->name; }

const char *graft_generator_device_info(const graft_generator *g, const char **fallbacks, size_t *n_fallback)
{
    size_t n = 0;
    const char *f = g->be->fallbacks(g->b, &n);
    if (fallbacks) *fallbacks = f;
    if (n_fallback) *n_fallback = n;
    return g->be->describe(g->b);
}
