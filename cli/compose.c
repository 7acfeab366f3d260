/* graft compose PIPELINE_DIR -o OUT_DIR: one self-contained text-only export. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

static const char usage[] =
    "usage: graft compose PIPELINE_DIR -o OUT_DIR [options]\n"
    "\n"
    "Fuses the embedding graph of an ONNX Runtime GenAI pipeline into its decoder\n"
    "(inputs input_ids, attention_mask, position_ids if needed, past KV; outputs\n"
    "logits and present KV), bakes multimodal inputs to empty constants and folds\n"
    "away what they fed, drops the vision and audio graphs, copies the weights\n"
    "into OUT_DIR, patches the tokenizer to prepend BOS, rewrites genai_config.json.\n"
    "\n"
    "options:\n"
    "  -o, --output DIR       where the export goes (written beside it, renamed at the end)\n"
    "  --embedding FILE       embedding graph, relative to PIPELINE_DIR (default: config)\n"
    "  --decoder FILE         decoder graph, relative to PIPELINE_DIR (default: config)\n"
    "  --bos auto|always|never  prepend BOS: auto follows tokenizer_config.json's\n"
    "                         add_bos_token (default auto)\n"
    "  --shard-size SIZE      split weights into files of at most SIZE (e.g. 2G, 512M)\n"
    "  --force                replace OUT_DIR if it exists\n"
    "  --sync                 make the export durable before the rename (fsync every\n"
    "                         file, then the directory); default: like cp, the kernel\n"
    "                         writes the pages back in its own time\n"
    "  -q, --quiet            print no decisions and no progress\n";

typedef struct ui {
    int quiet, tty;
    double last;
} ui;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    ui *u = ctx;
    if (u->quiet || !u->tty || !total) return;
    double t = now();
    if (done < total && t - u->last < 0.1) return;
    u->last = t;
    int width = 40, fill = (int)((double)done / (double)total * width);
    fprintf(stderr, "\rweights [%.*s%*s] %5.1f%% %8.1f MiB", fill,
            "########################################", width - fill, "",
            100.0 * (double)done / (double)total, (double)done / 1048576.0);
    if (done >= total) fputc('\n', stderr);
    fflush(stderr);
}

static void on_note(void *ctx, const char *line)
{
    ui *u = ctx;
    if (u->quiet) return;
    fputs("graft compose: ", stdout);
    graft_cli_print_escaped(stdout, line);
    fputc('\n', stdout);
    fflush(stdout);
}

static int parse_size(const char *s, long long *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0) return -1;
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mul = 1048576.0, end++;
    else if (*end == 'G' || *end == 'g') mul = 1073741824.0, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    *out = (long long)(v * mul);
    return *out > 0 ? 0 : -1;
}

int graft_cli_compose(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    graft_compose_opts o;
    memset(&o, 0, sizeof o);
    ui u = {0, isatty(2), 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(a, "--embedding") == 0 && i + 1 < argc) {
            o.embedding = argv[++i];
        } else if (strcmp(a, "--decoder") == 0 && i + 1 < argc) {
            o.decoder = argv[++i];
        } else if (strcmp(a, "--bos") == 0 && i + 1 < argc) {
            const char *m = argv[++i];
            if (strcmp(m, "auto") == 0) o.bos = GRAFT_BOS_AUTO;
            else if (strcmp(m, "always") == 0) o.bos = GRAFT_BOS_ALWAYS;
            else if (strcmp(m, "never") == 0) o.bos = GRAFT_BOS_NEVER;
            else return graft_cli_usage_error("compose", "--bos takes auto, always or never, not '%s'", m);
        } else if (strcmp(a, "--shard-size") == 0 && i + 1 < argc) {
            if (parse_size(argv[++i], &o.shard_size) != 0)
                return graft_cli_usage_error("compose", "bad --shard-size '%s'", argv[i]);
        } else if (strcmp(a, "--force") == 0) {
            o.force = 1;
        } else if (strcmp(a, "--sync") == 0) {
            o.sync = 1;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            u.quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            return graft_cli_usage_error("compose", "unknown option '%s'", a);
        } else if (!in) {
            in = a;
        } else {
            return graft_cli_usage_error("compose", "unexpected argument '%s'", a);
        }
    }
    if (!in || !out) return graft_cli_usage_error("compose", "need PIPELINE_DIR and -o OUT_DIR");
    if ((o.embedding && !o.decoder) || (o.decoder && !o.embedding && 0))
        return graft_cli_usage_error("compose", "--embedding needs --decoder");
    o.progress = on_progress;
    o.note = on_note;
    o.ctx = &u;
    graft_error err = {0};
    graft_status st = graft_compose(in, out, &o, &err);
    if (st != GRAFT_OK) return graft_cli_fail("compose", st, &err);
    if (!u.quiet) printf("graft compose: wrote %s\n", out);
    return 0;
}
