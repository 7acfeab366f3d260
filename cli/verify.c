/* graft verify EXPORT --golden FILE: greedy decode on graft's runtime
 * compared token for token with a golden (tests/fixtures/README.md). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char usage[] =
    "usage: graft verify EXPORT --golden FILE [options]\n"
    "\n"
    "Decodes every prompt of the golden greedily on graft's runtime and compares\n"
    "the generated ids with the golden's, up to the first step whose golden\n"
    "margin (top1 - top2 logit) is at most the margin threshold: there the\n"
    "reference itself is too close to call, so that step and the ones after it\n"
    "are not compared. Logits are compared on the steps the golden carries.\n"
    "Exit 0 only when every compared id matches and the logits are within\n"
    "tolerance.\n"
    "\n"
    "options:\n"
    "  --golden FILE          golden JSON (format graft-golden/1)\n"
    "  --margin M             margin threshold (default: the golden's margin_tau)\n"
    "  --logits-tol T         max logit difference: absolute for fp32 goldens\n"
    "                         (default 1e-4), relative to max |logit| otherwise\n"
    "                         (default 1e-2 for fp16/bf16, 5e-2 for int4/int8)\n"
    "  --max-context N        plan the KV cache for N tokens\n"
    "  --device cpu|cuda|auto where to run (default auto: CUDA when this build has\n"
    "                         it and a GPU is visible, else the CPU)\n"
    "  --no-cuda-graph        CUDA: launch each decode step's kernels one by one\n"
    "                         (default: the step runs as a captured CUDA graph)\n"
    "  -q, --quiet            print only the summary\n";

typedef struct verdict {
    int failed;
    double max_diff; /* over logit-carrying steps */
} verdict;

static double logit_diff(json_t *entry, size_t step, const float *lg, size_t vocab, int rel)
{
    json_t *full = json_array_get(json_object_get(entry, "logits"), step);
    double d = 0, scale = 0;
    if (full) {
        size_t n = json_array_size(full);
        for (size_t i = 0; i < n && i < vocab; i++) {
            double w = json_number_value(json_array_get(full, i));
            d = fmax(d, fabs((double)lg[i] - w));
            scale = fmax(scale, fabs(w));
        }
        if (n != vocab) return INFINITY;
    } else {
        json_t *tk = json_array_get(json_object_get(entry, "logits_topk"), step);
        json_t *ids = json_object_get(tk, "ids"), *vals = json_object_get(tk, "values");
        if (!tk) return -1;
        for (size_t i = 0; i < json_array_size(ids); i++) {
            json_int_t id = json_integer_value(json_array_get(ids, i));
            double w = json_number_value(json_array_get(vals, i));
            if (id < 0 || (size_t)id >= vocab) return INFINITY;
            d = fmax(d, fabs((double)lg[id] - w));
            scale = fmax(scale, fabs(w));
        }
    }
    return rel ? d / fmax(scale, 1e-6) : d;
}

int graft_cli_verify(int argc, char **argv)
{
    const char *path = NULL, *golden = NULL, *device = "auto";
    double margin = -1, tol = -1;
    int quiet = 0;
    graft_gen_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--golden") && more) golden = argv[++i];
        else if (!strcmp(a, "--margin") && more) margin = strtod(argv[++i], NULL);
        else if (!strcmp(a, "--logits-tol") && more) tol = strtod(argv[++i], NULL);
        else if (!strcmp(a, "--max-context") && more) o.max_context = atoi(argv[++i]);
        else if (!strcmp(a, "--device") && more) device = argv[++i];
        else if (!strcmp(a, "--no-cuda-graph")) o.no_cuda_graph = 1;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = 1;
        else if (a[0] == '-' && a[1]) return graft_cli_usage_error("verify", "unknown option '%s'", a);
        else if (!path) path = a;
        else return graft_cli_usage_error("verify", "unexpected argument '%s'", a);
    }
    if (!path || !golden) return graft_cli_usage_error("verify", "need EXPORT and --golden FILE");
    if (graft_cli_device("verify", device, &o.device)) return 2;
    json_error_t je;
    json_t *g = json_load_file(golden, 0, &je);
    if (!g) {
        fprintf(stderr, "graft verify: %s: invalid JSON at line %d, column %d: %s\n", golden, je.line, je.column,
                je.text);
        return 2;
    }
    int rc = 0;
    graft_generator *gen = NULL;
    graft_error err = {0};
    const char *fmt = json_string_value(json_object_get(g, "format"));
    json_t *prompts = json_object_get(g, "prompts");
    if (!fmt || strcmp(fmt, "graft-golden/1") != 0 || !json_is_array(prompts)) {
        fprintf(stderr, "graft verify: %s: not a graft-golden/1 file (format, prompts)\n", golden);
        rc = 2;
        goto done;
    }
    const char *prec = json_string_value(json_object_get(json_object_get(g, "model"), "precision"));
    int rel = prec && strcmp(prec, "fp32") != 0;
    if (margin < 0) margin = json_is_number(json_object_get(g, "margin_tau"))
                                 ? json_number_value(json_object_get(g, "margin_tau")) : (rel ? 5e-2 : 1e-3);
    int quant = prec && (!strcmp(prec, "int4") || !strcmp(prec, "int8"));
    /* fp32: 1e-4 absolute; fp16/bf16: 1e-2 relative; int4/int8: 5e-2
     * relative (onnxruntime's MatMulNBits may quantize activations) */
    if (tol < 0) tol = quant ? 5e-2 : rel ? 1e-2 : 1e-4;
    graft_status st = graft_generator_open(path, &o, &gen, &err);
    if (st != GRAFT_OK) {
        rc = graft_cli_fail("verify", st, &err);
        goto done;
    }
    if (!quiet) {
        size_t n_fb = 0;
        const char *fb = NULL, *info = graft_generator_device_info(gen, &fb, &n_fb);
        printf("device %s (%s)", graft_generator_device(gen), info);
        if (n_fb) printf("; %zu nodes on host kernels: %s", n_fb, fb);
        printf("\n");
    }
    size_t vocab = 0, np = json_array_size(prompts), compared_all = 0, skipped_all = 0;
    double max_diff = 0;
    int failed = 0;
    for (size_t p = 0; p < np; p++) {
        json_t *e = json_array_get(prompts, p);
        json_t *pids = json_object_get(e, "prompt_ids"), *gids = json_object_get(e, "generated_ids");
        json_t *margins = json_object_get(e, "margins");
        size_t n = json_array_size(pids), steps = json_array_size(gids);
        if (!n || !steps || json_array_size(margins) != steps) {
            fprintf(stderr, "graft verify: %s: prompt %zu lacks prompt_ids, generated_ids or margins\n", golden, p);
            rc = 2;
            goto done;
        }
        int64_t *ids = malloc(n * sizeof *ids);
        if (!ids) {
            rc = 1;
            goto done;
        }
        for (size_t i = 0; i < n; i++) ids[i] = json_integer_value(json_array_get(pids, i));
        st = graft_generator_prefill(gen, ids, n, &err);
        free(ids);
        if (st != GRAFT_OK) {
            rc = graft_cli_fail("verify", st, &err);
            goto done;
        }
        if (!quiet) printf("prompt %zu (%zu tokens):\n  step  golden   graft   margin\n", p, n);
        size_t last = steps;
        for (size_t s = 0; s < steps; s++) {
            const float *lg = graft_generator_logits(gen, &vocab);
            double m = json_number_value(json_array_get(margins, s));
            json_int_t want = json_integer_value(json_array_get(gids, s));
            int64_t got = graft_generator_pick(gen);
            double d = logit_diff(e, s, lg, vocab, rel);
            if (d >= 0) max_diff = fmax(max_diff, d);
            int too_close = m <= margin;
            if (!quiet)
                printf("  %4zu %7lld %7lld %8.4g%s%s\n", s, (long long)want, (long long)got, m,
                       too_close ? "  (margin <= threshold: not compared from here)" : "",
                       !too_close && got != want ? "  MISMATCH" : "");
            if (too_close) {
                last = s;
                break;
            }
            compared_all++;
            if (got != want) {
                failed = 1;
                last = s;
                break;
            }
            if (s + 1 < steps && (st = graft_generator_step(gen, want, &err)) != GRAFT_OK) {
                rc = graft_cli_fail("verify", st, &err);
                goto done;
            }
        }
        skipped_all += steps - (last < steps ? last : steps);
        if (!quiet) printf("  compared steps 0..%zu\n", (last < steps ? last : steps) - (last < steps ? 0 : 1));
    }
    if (max_diff > tol) failed = 1;
    if (!quiet && strcmp(graft_generator_device(gen), "cpu") != 0) /* with the CUDA graph counts */
        printf("device: %s\n", graft_generator_device_info(gen, NULL, NULL));
    printf("graft verify: %s: device %s: %zu prompts, %zu steps compared, %zu not compared (margin <= %g); "
           "max %s logit difference %.3g (tolerance %g): %s\n",
           golden, graft_generator_device(gen), np, compared_all, skipped_all, margin, rel ? "relative" : "absolute", max_diff, tol,
           failed ? "FAIL" : "ok");
    rc = failed ? 1 : 0;
done:
    graft_generator_free(gen);
    json_decref(g);
    return rc;
}
