/* graft bench EXPORT: prefill and decode throughput, peak RSS. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli/cli.h"

static const char usage[] =
    "usage: graft bench EXPORT [options]\n"
    "\n"
    "Times a prefill of --prompt-tokens tokens and --new-tokens greedy decode\n"
    "steps on graft's runtime; prints tokens/s and peak RSS.\n"
    "\n"
    "options:\n"
    "  --prompt-tokens N      prompt length (default 128)\n"
    "  --new-tokens N         decode steps (default 64)\n"
    "  --repeat N             runs; the best is reported (default 3)\n"
    "  --warmup N             untimed runs before them (default 1)\n"
    "  --max-context N        plan the KV cache for N tokens (default: prompt + new)\n"
    "  --device cpu|cuda|auto where to run (default auto: CUDA when this build has\n"
    "                         it and a GPU is visible, else the CPU)\n"
    "  --no-cuda-graph        CUDA: launch each decode step's kernels one by one\n"
    "                         (default: the step runs as a captured CUDA graph)\n"
    "  --json                 one JSON object\n";

/* Peak RSS of this process image: VmHWM (ru_maxrss would include the
 * parent's RSS at fork when a big process such as Python launched us). */
static double peak_rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb < 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        kb = ru.ru_maxrss;
    }
    return (double)kb / 1024.0;
}

int graft_cli_bench(int argc, char **argv)
{
    const char *path = NULL, *device = "auto";
    int n_prompt = 128, n_new = 64, repeat = 3, warmup = 1, json = 0;
    graft_gen_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--prompt-tokens") && more) n_prompt = atoi(argv[++i]);
        else if (!strcmp(a, "--new-tokens") && more) n_new = atoi(argv[++i]);
        else if (!strcmp(a, "--repeat") && more) repeat = atoi(argv[++i]);
        else if (!strcmp(a, "--warmup") && more) warmup = atoi(argv[++i]);
        else if (!strcmp(a, "--max-context") && more) o.max_context = atoi(argv[++i]);
        else if (!strcmp(a, "--device") && more) device = argv[++i];
        else if (!strcmp(a, "--no-cuda-graph")) o.no_cuda_graph = 1;
        else if (!strcmp(a, "--json")) json = 1;
        else if (a[0] == '-' && a[1]) return graft_cli_usage_error("bench", "unknown option '%s'", a);
        else if (!path) path = a;
        else return graft_cli_usage_error("bench", "unexpected argument '%s'", a);
    }
    if (!path) return graft_cli_usage_error("bench", "need an EXPORT");
    if (n_prompt < 1 || n_new < 1 || repeat < 1 || warmup < 0)
        return graft_cli_usage_error("bench", "--prompt-tokens, --new-tokens and --repeat must be >= 1, --warmup >= 0");
    if (graft_cli_device("bench", device, &o.device)) return 2;
    if (!o.max_context) o.max_context = n_prompt + n_new;
    graft_error err = {0};
    graft_generator *g = NULL;
    graft_status st = graft_generator_open(path, &o, &g, &err);
    if (st != GRAFT_OK) return graft_cli_fail("bench", st, &err);
    size_t vocab = 0;
    graft_generator_logits(g, &vocab);
    int64_t *ids = malloc((size_t)n_prompt * sizeof *ids);
    if (!ids) {
        graft_generator_free(g);
        return 1;
    }
    for (int i = 0; i < n_prompt; i++) ids[i] = vocab ? (int64_t)(((uint64_t)i * 7919u + 13u) % vocab) : 0;
    double best_pre = 1e30, best_dec = 1e30;
    int rc = 0;
    for (int r = 0; r < warmup + repeat; r++) {
        const graft_gen_timings *t = graft_generator_timings(g);
        double p0 = t->prefill_s, d0 = t->decode_s;
        if ((st = graft_generator_prefill(g, ids, (size_t)n_prompt, &err)) != GRAFT_OK) {
            rc = graft_cli_fail("bench", st, &err);
            goto done;
        }
        for (int s = 0; s < n_new; s++) {
            int64_t next = graft_generator_pick(g);
            if ((st = graft_generator_step(g, next, &err)) != GRAFT_OK) {
                rc = graft_cli_fail("bench", st, &err);
                goto done;
            }
        }
        t = graft_generator_timings(g);
        if (r < warmup) continue; /* untimed: caches, page tables, the pool's threads and clocks warm up */
        if (t->prefill_s - p0 < best_pre) best_pre = t->prefill_s - p0;
        if (t->decode_s - d0 < best_dec) best_dec = t->decode_s - d0;
    }
    const graft_gen_timings *t = graft_generator_timings(g);
    double pre_tps = n_prompt / best_pre, dec_tps = n_new / best_dec;
    double rss_mb = peak_rss_mb();
    if (json)
        printf("{\"device\": \"%s\", \"prompt_tokens\": %d, \"new_tokens\": %d, \"prefill_tok_s\": %.3f, "
               "\"decode_tok_s\": %.3f, \"prefill_s\": %.6f, \"decode_s\": %.6f, \"load_s\": %.6f, \"plan_s\": %.6f, "
               "\"peak_rss_mb\": %.1f, \"max_context\": %d}\n",
               graft_generator_device(g), n_prompt, n_new, pre_tps, dec_tps, best_pre, best_dec, t->load_s, t->plan_s, rss_mb,
               graft_generator_max_context(g));
    else
        printf("device %s | load %.3f s, plan %.3f s | prefill %d tokens: %.1f tok/s | decode %d tokens: "
               "%.1f tok/s | peak RSS %.1f MiB\n",
               graft_generator_device(g), t->load_s, t->plan_s, n_prompt, pre_tps, n_new, dec_tps, rss_mb);
    if (!json) {
        size_t n_fb = 0;
        const char *fb = NULL, *info = graft_generator_device_info(g, &fb, &n_fb);
        printf("device: %s\n", info);
        if (n_fb) printf("%zu nodes run on host kernels: %s\n", n_fb, fb);
        if (t->ahead_launched)
            printf("pipelined decode: %zu of %zu steps launched the next before their pick came back (%zu undone)\n",
                   t->ahead_launched, t->decode_tokens, t->ahead_undone);
    }
done:
    free(ids);
    graft_generator_free(g);
    return rc;
}
