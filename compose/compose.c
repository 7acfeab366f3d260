/* graft_compose: a vendor pipeline becomes one self-contained text-only
 * export. Steps: read genai_config.json; load the decoder and embedding
 * graphs; absorb the embedding graph into the decoder with a collision-free
 * prefix; wire each embedding output to the decoder input it feeds; make
 * input_ids a graph input; bake the other embedding inputs to empty
 * constants; fold what they feed; prune; save the model and weights into a
 * temporary directory beside OUT_DIR with the tokenizer and config; rename. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compose/cp.h"

#define MAX_WIRES 16

static void note(const graft_compose_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const graft_compose_opts *o, const char *fmt, ...)
{
    if (!o || !o->note) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->note(o->ctx, line);
}

/* Removes temporary directories of earlier runs that were killed. */
static void clean_stale(const char *parent, const char *base)
{
    DIR *d = opendir(parent);
    if (!d) return;
    char pfx[512];
    snprintf(pfx, sizeof pfx, ".%s.graft-tmp-", base);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, pfx, strlen(pfx)) != 0) continue;
        long pid = strtol(e->d_name + strlen(pfx), NULL, 10);
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM)) continue; /* still running */
        char *p = cp_join(parent, e->d_name);
        if (p) cp_rmtree(p);
        free(p);
    }
    closedir(d);
}

static bool same_type(const graft_value_info *a, const graft_value_info *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank) return false;
    for (int i = 0; i < a->rank && i < GRAFT_MAX_RANK; i++)
        if (a->dims[i].value >= 0 && b->dims[i].value >= 0 && a->dims[i].value != b->dims[i].value)
            return false;
    return true;
}

static void type_str(const graft_value_info *v, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "%s[", graft_dtype_name(v->dtype));
    for (int i = 0; i < v->rank && i < GRAFT_MAX_RANK && o < cap; i++) {
        if (v->dims[i].value >= 0) o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? "," : "", (long long)v->dims[i].value);
        else o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? "," : "", v->dims[i].param ? v->dims[i].param : "?");
    }
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

static bool graph_input(graft_graph *g, const char *name, graft_value_info *vi)
{
    for (size_t i = 0; i < graft_graph_input_count(g); i++) {
        graft_graph_input(g, i, vi);
        if (strcmp(vi->name, name) == 0) return true;
    }
    return false;
}

static bool graph_output(graft_graph *g, const char *name, graft_value_info *vi)
{
    for (size_t i = 0; i < graft_graph_output_count(g); i++) {
        graft_graph_output(g, i, vi);
        if (strcmp(vi->name, name) == 0) return true;
    }
    return false;
}

/* Does any value or node of g start with prefix? */
static bool prefix_used(graft_graph *g, const char *prefix)
{
    size_t pl = strlen(prefix);
    for (size_t i = 0; i < graft_graph_node_count(g); i++) {
        graft_node *n = graft_graph_node(g, i);
        if (strncmp(graft_node_name(n), prefix, pl) == 0) return true;
        for (size_t j = 0; j < graft_node_output_count(n); j++)
            if (strncmp(graft_node_output(n, j), prefix, pl) == 0) return true;
        for (size_t j = 0; j < graft_node_input_count(n); j++)
            if (strncmp(graft_node_input(n, j), prefix, pl) == 0) return true;
    }
    for (size_t i = 0; i < graft_graph_initializer_count(g); i++)
        if (strncmp(graft_tensor_name(graft_graph_initializer(g, i)), prefix, pl) == 0) return true;
    graft_value_info vi;
    for (size_t i = 0; i < graft_graph_input_count(g); i++)
        if (graft_graph_input(g, i, &vi) && strncmp(vi.name, prefix, pl) == 0) return true;
    for (size_t i = 0; i < graft_graph_output_count(g); i++)
        if (graft_graph_output(g, i, &vi) && strncmp(vi.name, prefix, pl) == 0) return true;
    return false;
}

static graft_status load_graph(const char *dir, const char *rel, const char *what, graft_model **m,
                               graft_error *err)
{
    if (!cp_path_is_safe(rel))
        return cp_err(err, GRAFT_EINVAL, "%s: %s graph '%s' must be a relative path inside the pipeline "
                      "directory (no '..', not absolute)", dir, what, rel);
    char *p = cp_join(dir, rel);
    if (!p) return cp_err(err, GRAFT_ENOMEM, "out of memory");
    struct stat st;
    graft_status rc;
    if (lstat(p, &st) != 0) rc = cp_err(err, GRAFT_EINVAL, "%s: %s graph missing: %s", p, what, strerror(errno));
    else if (S_ISLNK(st.st_mode)) rc = cp_err(err, GRAFT_EINVAL, "%s: %s graph is a symbolic link; refused", p, what);
    else rc = graft_model_load(p, NULL, m, err);
    free(p);
    return rc;
}

typedef struct job {
    const char *dir, *out;
    const graft_compose_opts *o;
    json_t *cfg;
    char *cfg_path;
    graft_model *dec, *emb;
    char prefix[64];
    const char *wired_keys[MAX_WIRES];
    size_t n_wired;
    char *seeds[MAX_WIRES];
    size_t n_seeds;
    char input_ids[256];
    /* notes of the side-files thread, printed after it is joined */
    char deferred[2048];
} job;

/* A note from the side-files thread: kept until the main thread prints it. */
static void jnote(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jnote(job *j, const char *fmt, ...)
{
    size_t used = strlen(j->deferred);
    if (used + 2 >= sizeof j->deferred) return;
    if (used) j->deferred[used++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->deferred + used, sizeof j->deferred - used, fmt, ap);
    va_end(ap);
}

/* Fuses the embedding graph into the decoder (see the file comment). */
static graft_status fuse(job *j, cp_section *es, cp_section *ds, graft_error *err)
{
    graft_graph *dg = graft_model_graph(j->dec), *eg = graft_model_graph(j->emb);
    graft_status rc;
    const char *emb_path = graft_model_path(j->emb), *dec_path = graft_model_path(j->dec);
    /* wires: embedding output key -> decoder input key of the same name */
    const char *wire_e[MAX_WIRES], *wire_d[MAX_WIRES];
    size_t nw = 0;
    const char *k;
    json_t *v;
    json_object_foreach(es->outputs, k, v)
    {
        const char *dname = cp_map_get(ds->inputs, k);
        if (!dname) continue;
        if (nw == MAX_WIRES) return cp_err(err, GRAFT_EUNSUPPORTED, "%s: too many wires", j->cfg_path);
        graft_value_info eo, di;
        const char *ename = json_string_value(v);
        if (!graph_output(eg, ename, &eo))
            return cp_err(err, GRAFT_EINVAL, "%s: graph has no output '%s' (model.embedding.outputs.%s in %s)",
                          emb_path, ename, k, j->cfg_path);
        if (!graph_input(dg, dname, &di))
            return cp_err(err, GRAFT_EINVAL, "%s: graph has no input '%s' (model.decoder.inputs.%s in %s)",
                          dec_path, dname, k, j->cfg_path);
        if (!same_type(&eo, &di)) {
            char a[160], b[160];
            type_str(&eo, a, sizeof a);
            type_str(&di, b, sizeof b);
            return cp_err(err, GRAFT_EINVAL, "%s: output '%s' is %s but %s input '%s' it feeds is %s",
                          emb_path, ename, a, dec_path, dname, b);
        }
        j->wired_keys[nw] = k;
        wire_e[nw] = ename;
        wire_d[nw] = dname;
        nw++;
    }
    j->n_wired = nw;
    if (nw == 0)
        return cp_err(err, GRAFT_EINVAL, "%s: no embedding output feeds a decoder input (model.embedding.outputs "
                      "and model.decoder.inputs share no key)", j->cfg_path);
    const char *ids = cp_map_get(es->inputs, "input_ids");
    if (!ids) ids = "input_ids";
    graft_value_info ids_vi;
    if (!graph_input(eg, ids, &ids_vi))
        return cp_err(err, GRAFT_EINVAL, "%s: graph has no input '%s' (input_ids)", emb_path, ids);
    graft_value_info clash;
    if (graph_input(dg, ids, &clash) || graft_graph_producer(dg, ids) || graft_graph_find_initializer(dg, ids))
        return cp_err(err, GRAFT_EINVAL, "%s: already defines '%s', the embedding graph's input_ids; "
                      "cannot fuse", dec_path, ids);
    snprintf(j->input_ids, sizeof j->input_ids, "%s", ids);
    /* a prefix no decoder name starts with */
    snprintf(j->prefix, sizeof j->prefix, "embedding/");
    for (int n = 1; prefix_used(dg, j->prefix); n++) {
        if (n > 1000) return cp_err(err, GRAFT_EINVAL, "%s: no free name prefix for the embedding graph", dec_path);
        snprintf(j->prefix, sizeof j->prefix, "embedding%d/", n);
    }
    /* remember the embedding inputs to bake before they are renamed */
    size_t n_ein = graft_graph_input_count(eg);
    graft_value_info *bake = calloc(n_ein + 1, sizeof *bake);
    char **bake_names = calloc(n_ein + 1, sizeof *bake_names);
    char **bake_orig = calloc(n_ein + 1, sizeof *bake_orig);
    size_t nb = 0;
    if (!bake || !bake_names || !bake_orig) {
        free(bake);
        free(bake_names);
        free(bake_orig);
        return cp_err(err, GRAFT_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n_ein; i++) {
        graft_value_info vi;
        graft_graph_input(eg, i, &vi);
        if (strcmp(vi.name, ids) == 0) continue;
        bake[nb] = vi;
        bake_names[nb] = cp_concat(j->prefix, vi.name);
        bake_orig[nb] = strdup(vi.name); /* absorb renames (and frees) the original */
        bake[nb].name = bake_orig[nb];
        nb++;
    }
    char ids_vi_name[256];
    snprintf(ids_vi_name, sizeof ids_vi_name, "%s", ids_vi.name);
    ids_vi.name = ids_vi_name;
    /* dims' params borrowed from the embedding model stay valid until it is freed */
    const char *keep[1] = {ids};
    const size_t n_dec = graft_graph_node_count(dg);
    if ((rc = graft_graph_absorb(dg, j->emb, j->prefix, keep, 1, err)) != GRAFT_OK) goto out;
    /* the embedding's nodes first, so that the stable sort below keeps them
     * ahead of the decoder's: a runtime that runs nodes in file order makes
     * every embedding output (Gemma's per-layer inputs too) before the first
     * layer, not where a layer first reads it */
    graft_graph_move_nodes_front(dg, n_dec);
    for (size_t w = 0; w < nw; w++) {
        char *src = cp_concat(j->prefix, wire_e[w]);
        if (!src) {
            rc = cp_err(err, GRAFT_ENOMEM, "out of memory");
            goto out;
        }
        graft_graph_replace_uses(dg, wire_d[w], src);
        graft_graph_remove_input(dg, wire_d[w]);
        free(src);
    }
    if ((rc = graft_graph_add_input(dg, &ids_vi, err)) != GRAFT_OK) goto out;
    graft_graph_move_input(dg, ids, 0);
    /* bake: [0, fixed dims...] empty constants, as ONNX Runtime GenAI feeds
     * for a text-only prompt */
    for (size_t b = 0; b < nb; b++) {
        graft_value_info *vi = &bake[b];
        int64_t dims[GRAFT_MAX_RANK];
        if (!bake_names[b] || !bake_orig[b]) {
            rc = cp_err(err, GRAFT_ENOMEM, "out of memory");
            goto out;
        }
        if (vi->rank < 1 || vi->rank > GRAFT_MAX_RANK || graft_dtype_bits(vi->dtype) == 0) {
            rc = cp_err(err, GRAFT_EUNSUPPORTED, "%s: input '%s' has no fixed-size tensor type to bake",
                        emb_path, vi->name);
            goto out;
        }
        dims[0] = 0;
        for (int d = 1; d < vi->rank; d++) {
            if (vi->dims[d].value < 0) {
                rc = cp_err(err, GRAFT_EINVAL, "%s: input '%s' dimension %d is symbolic ('%s'); an empty "
                            "constant needs every dimension after the first fixed", emb_path, vi->name, d,
                            vi->dims[d].param ? vi->dims[d].param : "?");
                goto out;
            }
            dims[d] = vi->dims[d].value;
        }
        if (!graft_graph_add_initializer(dg, bake_names[b], vi->dtype, dims, vi->rank, "", 0, err)) {
            rc = err ? err->code : GRAFT_EINVAL;
            goto out;
        }
        char ts[160];
        type_str(vi, ts, sizeof ts);
        note(j->o, "baked %s %s to an empty constant [0%s]", vi->name, ts, vi->rank > 1 ? ", ..." : "");
        j->seeds[j->n_seeds++] = bake_names[b];
        bake_names[b] = NULL;
    }
    for (size_t w = 0; w < nw; w++) note(j->o, "wired embedding output '%s' -> decoder input '%s'", wire_e[w], wire_d[w]);
out:
    for (size_t b = 0; b < nb; b++) {
        free(bake_names[b]);
        free(bake_orig[b]);
    }
    free(bake_names);
    free(bake_orig);
    free(bake);
    return rc;
}

static graft_status copy_tokenizer(job *j, const char *tmp, graft_error *err)
{
    static const char *const plain[] = {"tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                                        "chat_template.jinja", "chat_template.json", "generation_config.json",
                                        "tokenizer.model", "vocab.json", "merges.txt", NULL};
    graft_status rc = GRAFT_OK;
    for (const char *const *f = plain; *f && rc == GRAFT_OK; f++) {
        char *s = cp_join(j->dir, *f), *d = cp_join(tmp, *f);
        struct stat st;
        if (!s || !d) rc = cp_err(err, GRAFT_ENOMEM, "out of memory");
        else if (lstat(s, &st) == 0) rc = cp_copy_file(s, d, j->o && j->o->sync, err);
        free(s);
        free(d);
    }
    if (rc != GRAFT_OK) return rc;
    char *tp = cp_join(j->dir, "tokenizer.json"), *cp = cp_join(j->dir, "tokenizer_config.json");
    char *out = cp_join(tmp, "tokenizer.json");
    json_t *tok = NULL, *tcfg = NULL;
    struct stat st;
    if (!tp || !cp || !out) {
        rc = cp_err(err, GRAFT_ENOMEM, "out of memory");
        goto done;
    }
    if (lstat(tp, &st) != 0) {
        jnote(j, "no tokenizer.json in %s: export has none", j->dir);
        goto done;
    }
    if ((rc = cp_json_load(tp, &tok, err)) != GRAFT_OK) goto done;
    if (lstat(cp, &st) == 0 && (rc = cp_json_load(cp, &tcfg, err)) != GRAFT_OK) goto done;
    char decision[512];
    if ((rc = cp_tokenizer_patch(tp, tok, cp, tcfg, j->cfg, j->o ? j->o->bos : GRAFT_BOS_AUTO, decision,
                                 sizeof decision, err)) != GRAFT_OK)
        goto done;
    jnote(j, "%s", decision);
    rc = cp_json_write(out, tok, j->o && j->o->sync, err);
done:
    json_decref(tok);
    json_decref(tcfg);
    free(tp);
    free(cp);
    free(out);
    return rc;
}

/* The files beside the model: tokenizer (patched for BOS) and the
 * rewritten genai_config.json. Runs on its own thread during the copy. */
typedef struct side_job {
    job *j;
    const char *tmp;
    bool emb;
    graft_status rc;
    graft_error err;
} side_job;

static void *side_files(void *arg)
{
    side_job *sj = arg;
    job *j = sj->j;
    bool sync = j->o && j->o->sync;
    sj->rc = copy_tokenizer(j, sj->tmp, &sj->err);
    if (sj->rc != GRAFT_OK || !j->cfg) return NULL;
    char *cfg_out = cp_join(sj->tmp, "genai_config.json");
    if (!cfg_out) {
        sj->rc = cp_err(&sj->err, GRAFT_ENOMEM, "out of memory");
        return NULL;
    }
    sj->rc = cp_config_rewrite(j->cfg_path, j->cfg, "model.onnx", sj->emb ? j->input_ids : NULL, j->wired_keys,
                               j->n_wired, &sj->err);
    if (sj->rc == GRAFT_OK) sj->rc = cp_json_write(cfg_out, j->cfg, sync, &sj->err);
    free(cfg_out);
    return NULL;
}

graft_status graft_compose(const char *pipeline_dir, const char *out_dir, const graft_compose_opts *o,
                           graft_error *err)
{
    graft_status rc = GRAFT_OK;
    job j;
    memset(&j, 0, sizeof j);
    j.dir = pipeline_dir;
    j.out = out_dir;
    j.o = o;
    char *parent = NULL, *base = NULL, *tmp = NULL, *old = NULL, *model_path = NULL;
    bool tmp_made = false;
    struct stat st;

    /* OUT_DIR: parent, base name, refusal to overwrite */
    size_t ol = strlen(out_dir);
    while (ol > 1 && out_dir[ol - 1] == '/') ol--;
    char *trimmed = strndup(out_dir, ol);
    if (!trimmed) return cp_err(err, GRAFT_ENOMEM, "out of memory");
    const char *slash = strrchr(trimmed, '/');
    parent = slash ? strndup(trimmed, (size_t)(slash - trimmed) + (slash == trimmed)) : strdup(".");
    base = strdup(slash ? slash + 1 : trimmed);
    free(trimmed);
    if (!parent || !base) {
        rc = cp_err(err, GRAFT_ENOMEM, "out of memory");
        goto fail;
    }
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        rc = cp_err(err, GRAFT_EINVAL, "%s: not a usable output directory name", out_dir);
        goto fail;
    }
    if (lstat(out_dir, &st) == 0 && !(o && o->force)) {
        rc = cp_err(err, GRAFT_EINVAL, "%s: already exists (use --force to replace it)", out_dir);
        goto fail;
    }
    if (stat(pipeline_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        rc = cp_err(err, GRAFT_EINVAL, "%s: not a pipeline directory", pipeline_dir);
        goto fail;
    }

    /* config and graphs */
    cp_section es = {0}, ds = {0};
    bool have_emb = false;
    j.cfg_path = cp_join(pipeline_dir, "genai_config.json");
    if (!j.cfg_path) {
        rc = cp_err(err, GRAFT_ENOMEM, "out of memory");
        goto fail;
    }
    if (lstat(j.cfg_path, &st) == 0) {
        if ((rc = cp_json_load(j.cfg_path, &j.cfg, err)) != GRAFT_OK) goto fail;
        if ((rc = cp_config_check(j.cfg_path, j.cfg, err)) != GRAFT_OK) goto fail;
        if (!cp_config_section(j.cfg, "decoder", &ds) || (!ds.filename && !(o && o->decoder))) {
            rc = cp_err(err, GRAFT_EINVAL, "%s: no model.decoder.filename", j.cfg_path);
            goto fail;
        }
        if (json_object_get(ds.obj, "pipeline")) {
            rc = cp_err(err, GRAFT_EUNSUPPORTED, "%s: model.decoder.pipeline (a multi-stage decoder) is not "
                        "supported", j.cfg_path);
            goto fail;
        }
        have_emb = cp_config_section(j.cfg, "embedding", &es) && es.filename;
    } else if (!(o && o->decoder)) {
        rc = cp_err(err, GRAFT_EINVAL, "%s: missing (or pass --decoder and --embedding)", j.cfg_path);
        goto fail;
    }
    const char *dec_file = o && o->decoder ? o->decoder : ds.filename;
    const char *emb_file = o && o->embedding ? o->embedding : have_emb ? es.filename : NULL;
    if ((rc = load_graph(pipeline_dir, dec_file, "decoder", &j.dec, err)) != GRAFT_OK) goto fail;
    if (emb_file) {
        if (!j.cfg) { /* name maps: by position of the defaults */
            rc = cp_err(err, GRAFT_EUNSUPPORTED, "%s: fusing without genai_config.json name maps is not "
                        "supported yet", pipeline_dir);
            goto fail;
        }
        if ((rc = load_graph(pipeline_dir, emb_file, "embedding", &j.emb, err)) != GRAFT_OK) goto fail;
        if ((rc = fuse(&j, &es, &ds, err)) != GRAFT_OK) goto fail;
        graft_model_free(j.emb);
        j.emb = NULL;
        size_t folded = 0;
        if ((rc = cp_fold(j.dec, (const char *const *)j.seeds, j.n_seeds, &folded, err)) != GRAFT_OK) goto fail;
        size_t pruned = graft_graph_prune(graft_model_graph(j.dec));
        note(o, "folded %zu node%s fed by the baked inputs; removed %zu dead node%s", folded,
             folded == 1 ? "" : "s", pruned, pruned == 1 ? "" : "s");
        /* nothing may still read a baked input */
        for (size_t s = 0; s < j.n_seeds; s++)
            if (graft_graph_use_count(graft_model_graph(j.dec), j.seeds[s]) > 0) {
                rc = cp_err(err, GRAFT_EUNSUPPORTED, "%s: '%s' still feeds nodes after folding (an op "
                            "without a CPU kernel?)", pipeline_dir, j.seeds[s]);
                goto fail;
            }
    } else {
        note(o, "single decoder graph: nothing to fuse");
    }
    if ((rc = graft_graph_toposort(graft_model_graph(j.dec), err)) != GRAFT_OK) goto fail;

    /* write everything into a temporary directory beside OUT_DIR */
    clean_stale(parent, base);
    size_t tl = strlen(parent) + strlen(base) + 64;
    if (!(tmp = malloc(tl)) || !(old = malloc(tl))) {
        rc = cp_err(err, GRAFT_ENOMEM, "out of memory");
        goto fail;
    }
    snprintf(tmp, tl, "%s/.%s.graft-tmp-%ld", parent, base, (long)getpid());
    snprintf(old, tl, "%s/.%s.graft-old-%ld", parent, base, (long)getpid());
    cp_rmtree(tmp);
    if (mkdir(tmp, 0755) != 0) {
        rc = cp_err(err, errno == ENOENT ? GRAFT_EINVAL : GRAFT_EIO, "%s: cannot create: %s", tmp, strerror(errno));
        goto fail;
    }
    tmp_made = true;
    if (!(model_path = cp_join(tmp, "model.onnx"))) {
        rc = cp_err(err, GRAFT_ENOMEM, "out of memory");
        goto fail;
    }
    graft_save_opts so = {0};
    so.data_name = "model.onnx.data";
    so.shard_size = o ? o->shard_size : 0;
    so.progress = o ? o->progress : NULL;
    so.progress_ctx = o ? o->ctx : NULL;
    so.no_sync = !(o && o->sync);
    /* the tokenizer and the config are written on a second thread while
     * this one copies the weights (a 262k-entry tokenizer.json takes
     * about half a second to parse, patch and write) */
    side_job sj = {.j = &j, .tmp = tmp, .emb = emb_file != NULL};
    pthread_t side;
    bool side_started = pthread_create(&side, NULL, side_files, &sj) == 0;
    if (!side_started) side_files(&sj);
    rc = graft_model_save(j.dec, model_path, &so, err);
    if (side_started) pthread_join(side, NULL);
    if (rc != GRAFT_OK) goto fail;
    if (sj.rc != GRAFT_OK) {
        rc = sj.rc;
        if (err) *err = sj.err;
        goto fail;
    }
    for (char *line = j.deferred, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        note(o, "%s", line);
        if (!nl) break;
    }
    /* publish */
    if (lstat(out_dir, &st) == 0) {
        if (rename(out_dir, old) != 0) {
            rc = cp_err(err, GRAFT_EIO, "%s: cannot move the old export aside: %s", out_dir, strerror(errno));
            goto fail;
        }
    }
    if (rename(tmp, out_dir) != 0) {
        rc = cp_err(err, GRAFT_EIO, "%s: rename to %s: %s", tmp, out_dir, strerror(errno));
        rename(old, out_dir);
        goto fail;
    }
    tmp_made = false;
    cp_rmtree(old);
    int pfd = o && o->sync ? open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (pfd >= 0) {
        fsync(pfd);
        close(pfd);
    }
    goto done;
fail:
    if (tmp_made) cp_rmtree(tmp);
done:
    for (size_t s = 0; s < j.n_seeds; s++) free(j.seeds[s]);
    graft_model_free(j.emb);
    graft_model_free(j.dec);
    json_decref(j.cfg);
    free(j.cfg_path);
    free(parent);
    free(base);
    free(tmp);
    free(old);
    free(model_path);
    return rc;
}
