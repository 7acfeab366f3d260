/* graft generate EXPORT --prompt TEXT | --ids 1,2,3: streaming decode. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "graft_tokenizer.h"

static const char usage[] =
    "usage: graft generate EXPORT (--prompt TEXT | --ids ID,ID,...) [options]\n"
    "\n"
    "Decodes on graft's own runtime and streams the text (or ids) as they come.\n"
    "EXPORT is a composed export directory (model.onnx, genai_config.json,\n"
    "tokenizer.json) or an .onnx file (then --ids).\n"
    "\n"
    "options:\n"
    "  --prompt TEXT          text, encoded with the export's tokenizer.json\n"
    "  --ids LIST             prompt token ids instead of text\n"
    "  --max-new-tokens N     stop after N new tokens (default 64)\n"
    "  --max-context N        plan the KV cache for N tokens (default: config, <= 4096)\n"
    "  --temperature T        sample at temperature T (default 0: greedy)\n"
    "  --top-k K, --top-p P   restrict sampling (default off)\n"
    "  --seed S               sampling seed (default 1)\n"
    "  --device cpu|cuda|auto where to run (default auto: CUDA when this build has\n"
    "                         it and a GPU is visible, else the CPU)\n"
    "  --no-cuda-graph        CUDA: launch each decode step's kernels one by one\n"
    "                         (default: the step runs as a captured CUDA graph)\n"
    "  --json                 print one JSON object {prompt_ids, generated_ids, timings}\n";

static int parse_ids(const char *s, int64_t **out, size_t *n)
{
    size_t cap = 16;
    int64_t *v = malloc(cap * sizeof *v);
    *n = 0;
    if (!v) return -1;
    while (*s) {
        char *end;
        errno = 0;
        long long x = strtoll(s, &end, 10);
        if (end == s || errno || x < 0) {
            free(v);
            return -1;
        }
        if (*n == cap) {
            int64_t *w = realloc(v, (cap *= 2) * sizeof *v);
            if (!w) {
                free(v);
                return -1;
            }
            v = w;
        }
        v[(*n)++] = x;
        s = end;
        if (*s == ',') s++;
        else if (*s) {
            free(v);
            return -1;
        }
    }
    *out = v;
    return *n ? 0 : -1;
}

static void print_json_ids(const int64_t *v, size_t n)
{
    putchar('[');
    for (size_t i = 0; i < n; i++) printf("%s%lld", i ? ", " : "", (long long)v[i]);
    putchar(']');
}

int graft_cli_generate(int argc, char **argv)
{
    const char *path = NULL, *prompt = NULL, *ids_arg = NULL, *device = "auto";
    int max_new = 64, json = 0;
    graft_gen_opts o = {0};
    o.seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--prompt") && more) prompt = argv[++i];
        else if (!strcmp(a, "--ids") && more) ids_arg = argv[++i];
        else if (!strcmp(a, "--max-new-tokens") && more) max_new = atoi(argv[++i]);
        else if (!strcmp(a, "--max-context") && more) o.max_context = atoi(argv[++i]);
        else if (!strcmp(a, "--temperature") && more) o.temperature = strtof(argv[++i], NULL);
        else if (!strcmp(a, "--top-k") && more) o.top_k = atoi(argv[++i]);
        else if (!strcmp(a, "--top-p") && more) o.top_p = strtof(argv[++i], NULL);
        else if (!strcmp(a, "--seed") && more) o.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--device") && more) device = argv[++i];
        else if (!strcmp(a, "--no-cuda-graph")) o.no_cuda_graph = 1;
        else if (!strcmp(a, "--json")) json = 1;
        else if (a[0] == '-' && a[1]) return graft_cli_usage_error("generate", "unknown option '%s'", a);
        else if (!path) path = a;
        else return graft_cli_usage_error("generate", "unexpected argument '%s'", a);
    }
    if (!path) return graft_cli_usage_error("generate", "need an EXPORT");
    if (!prompt == !ids_arg) return graft_cli_usage_error("generate", "need exactly one of --prompt and --ids");
    if (max_new < 0) return graft_cli_usage_error("generate", "--max-new-tokens must be >= 0");
    if (graft_cli_device("generate", device, &o.device)) return 2;
    int rc = 0;
    graft_error err = {0};
    graft_status st;
    graft_generator *g = NULL;
    graft_tokenizer *tok = NULL;
    graft_tokenizer_stream *stream = NULL;
    int64_t *ids = NULL, *gen = NULL;
    size_t n_ids = 0, n_gen = 0;
    if (ids_arg && parse_ids(ids_arg, &ids, &n_ids) != 0)
        return graft_cli_usage_error("generate", "--ids takes comma-separated non-negative integers");
    if ((st = graft_generator_open(path, &o, &g, &err)) != GRAFT_OK) {
        rc = graft_cli_fail("generate", st, &err);
        goto done;
    }
    char tpath[4096];
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", graft_generator_dir(g));
    if (prompt && access(tpath, F_OK) != 0) {
        fprintf(stderr, "graft generate: %s: missing; --prompt needs the export's tokenizer (or use --ids)\n", tpath);
        rc = 2;
        goto done;
    }
    if (prompt || !json) {
        st = graft_tokenizer_load(tpath, &tok, &err);
        if (st != GRAFT_OK && prompt) {
            rc = graft_cli_fail("generate", st, &err);
            goto done;
        }
        if (st != GRAFT_OK) tok = NULL; /* --ids without a tokenizer: print ids */
    }
    if (prompt) {
        graft_ids enc = {0};
        if ((st = graft_tokenizer_encode(tok, prompt, strlen(prompt), 1, &enc, &err)) != GRAFT_OK) {
            rc = graft_cli_fail("generate", st, &err);
            goto done;
        }
        ids = malloc((enc.len + 1) * sizeof *ids);
        if (!ids) {
            graft_ids_free(&enc);
            rc = 1;
            goto done;
        }
        for (size_t i = 0; i < enc.len; i++) ids[i] = enc.ids[i];
        n_ids = enc.len;
        graft_ids_free(&enc);
    }
    gen = malloc(((size_t)max_new + 1) * sizeof *gen);
    if (!gen) {
        rc = 1;
        goto done;
    }
    if (tok && !json) stream = graft_tokenizer_stream_new(tok, 1);
    if ((st = graft_generator_prefill(g, ids, n_ids, &err)) != GRAFT_OK) {
        rc = graft_cli_fail("generate", st, &err);
        goto done;
    }
    for (int i = 0; i < max_new; i++) {
        int64_t next = graft_generator_pick(g);
        gen[n_gen++] = next;
        if (stream) {
            const char *piece;
            size_t len;
            if (graft_tokenizer_stream_step(stream, (int32_t)next, &piece, &len, &err) == GRAFT_OK && len) {
                graft_cli_print_escaped(stdout, piece);
                fflush(stdout);
            }
        } else if (!json) {
            printf("%s%lld", i ? "," : "", (long long)next);
            fflush(stdout);
        }
        if (graft_generator_is_eos(g, next) || i + 1 == max_new) break;
        if (graft_generator_length(g) + 1 > (size_t)graft_generator_max_context(g)) break;
        if ((st = graft_generator_step(g, next, &err)) != GRAFT_OK) {
            if (!json) putchar('\n');
            rc = graft_cli_fail("generate", st, &err);
            goto done;
        }
    }
    if (json) {
        const graft_gen_timings *t = graft_generator_timings(g);
        printf("{\"prompt_ids\": ");
        print_json_ids(ids, n_ids);
        printf(", \"generated_ids\": ");
        print_json_ids(gen, n_gen);
        printf(", \"timings\": {\"load_s\": %.6f, \"plan_s\": %.6f, \"prefill_s\": %.6f, \"decode_s\": %.6f, "
               "\"prefill_tokens\": %zu, \"decode_tokens\": %zu}}\n",
               t->load_s, t->plan_s, t->prefill_s, t->decode_s, t->prefill_tokens, t->decode_tokens);
    } else {
        putchar('\n');
    }
done:
    graft_tokenizer_stream_free(stream);
    graft_tokenizer_free(tok);
    graft_generator_free(g);
    free(ids);
    free(gen);
    return rc;
}
