/* test_pipeline: the pipelined greedy decode (runtime/generate.c, a step
 * launched ahead on the device's pick) against the same export decoded
 * one step at a time (GRAFT_PIPELINE=0), both on CUDA with graphs.
 *
 *   test_pipeline EXPORT_DIR
 *
 * The schedule takes the picks, and at some steps (two of them in a row)
 * feeds a different id instead, which undoes the step launched ahead; it
 * reads the logits on some steps only (the others leave the step ahead
 * running), starts a new prompt in the middle of a decode (the step
 * ahead dropped), decodes to the context's end (no step ahead there), and
 * frees the generator with a step ahead running. Both
 * runs must pick the same ids, report the same lengths, and give the same
 * logits within 1e-3 of the row's largest magnitude on the steps read.
 * Exit status: 0 pass (or no CUDA device: a skip line), 1 a difference, 2
 * bad usage or an error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graft.h"

#define STEPS 24
#define PROMPTS 3

typedef struct trace {
    int64_t ids[PROMPTS][STEPS];
    size_t len[PROMPTS][STEPS];
    float *lg[PROMPTS][STEPS]; /* NULL: not read at that step */
    size_t vocab;
    size_t ahead, undone; /* graft_gen_timings' */
} trace;

/* prompt 0 stops halfway (its step ahead dropped by the next prefill),
 * prompt 1 decodes to the context's end (no step ahead at the last),
 * prompt 2 stops halfway (its step ahead still running at the free) */
static const int steps_of[PROMPTS] = {STEPS / 2, STEPS, STEPS / 2};
static int forced(int s) { return s == 4 || s == 9 || s == 10 || s == 17; }
static int reads(int s) { return s % 3 == 0 || s == 10; }

/* One run; 0 ok, 2 an error, 3 no CUDA here. */
static int run(const char *dir, int pipelined, trace *t)
{
    if (pipelined) unsetenv("GRAFT_PIPELINE");
    else setenv("GRAFT_PIPELINE", "0", 1);
    graft_gen_opts o = {0};
    o.device = GRAFT_DEVICE_CUDA;
    o.max_context = 8 + STEPS;
    graft_error err = {0};
    graft_generator *g = NULL;
    graft_status st = graft_generator_open(dir, &o, &g, &err);
    if (st == GRAFT_EUNSUPPORTED) {
        printf("test_pipeline: skipped (%s)\n", err.msg);
        return 3;
    }
    if (st != GRAFT_OK) {
        fprintf(stderr, "test_pipeline: %s: %s\n", dir, err.msg);
        return 2;
    }
    for (int p = 0; p < PROMPTS && st == GRAFT_OK; p++) {
        int64_t prompt[8];
        for (int i = 0; i < 8; i++) prompt[i] = 3 + (int64_t)((p * 131 + i * 7919) % 997);
        st = graft_generator_prefill(g, prompt, 8, &err);
        for (int s = 0; s < steps_of[p] && st == GRAFT_OK; s++) {
            if (reads(s)) {
                const float *lg = graft_generator_logits(g, &t->vocab);
                t->lg[p][s] = lg ? malloc(t->vocab * sizeof(float)) : NULL;
                if (!t->lg[p][s]) {
                    fprintf(stderr, "test_pipeline: no logits at prompt %d step %d\n", p, s);
                    st = GRAFT_EINVAL;
                    break;
                }
                memcpy(t->lg[p][s], lg, t->vocab * sizeof(float));
            }
            int64_t id = graft_generator_pick(g);
            if (forced(s)) id = (id + 1 + s) % (int64_t)(t->vocab > 1 ? t->vocab : 2);
            t->ids[p][s] = id;
            st = graft_generator_step(g, id, &err);
            t->len[p][s] = graft_generator_length(g);
        }
    }
    if (st != GRAFT_OK) fprintf(stderr, "test_pipeline: %s (pipelined %d): %s\n", dir, pipelined, err.msg);
    const char *fb = NULL;
    size_t nfb = 0;
    t->ahead = graft_generator_timings(g)->ahead_launched;
    t->undone = graft_generator_timings(g)->ahead_undone;
    printf("test_pipeline: pipelined %d: %zu steps launched ahead, %zu undone; %s\n", pipelined, t->ahead, t->undone,
           graft_generator_device_info(g, &fb, &nfb));
    graft_generator_free(g);
    return st == GRAFT_OK ? 0 : 2;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_pipeline EXPORT_DIR\n");
        return 2;
    }
    static trace a, b;
    int ra = run(argv[1], 1, &a);
    if (ra == 3) return 0;
    int rb = ra ? ra : run(argv[1], 0, &b);
    if (ra || rb) return 2;
    if (a.vocab != b.vocab || !a.vocab) {
        fprintf(stderr, "test_pipeline: vocabularies of %zu and %zu\n", a.vocab, b.vocab);
        return 1;
    }
    /* the pipelined run did pipeline: every step but the context's last
     * launched one ahead, and each forced id and the prefill after prompt
     * 0 undid one; the other run never did */
    int bad = 0, read = 0, n_forced = 0;
    size_t want_ahead = (size_t)(steps_of[0] + steps_of[1] + steps_of[2] - 1), want_undone = 1;
    for (int p = 0; p < PROMPTS; p++)
        for (int s = 0; s < steps_of[p]; s++) want_undone += (size_t)forced(s);
    if (a.ahead != want_ahead || a.undone != want_undone || b.ahead || b.undone) {
        fprintf(stderr, "test_pipeline: steps ahead %zu (want %zu), undone %zu (want %zu); not pipelined: %zu, %zu\n",
                a.ahead, want_ahead, a.undone, want_undone, b.ahead, b.undone);
        bad++;
    }
    double worst = 0;
    for (int p = 0; p < PROMPTS; p++)
        for (int s = 0; s < steps_of[p]; s++) {
            n_forced += forced(s);
            if (a.ids[p][s] != b.ids[p][s] || a.len[p][s] != b.len[p][s]) {
                fprintf(stderr, "prompt %d step %d: id %lld length %zu pipelined, id %lld length %zu not\n", p, s,
                        (long long)a.ids[p][s], a.len[p][s], (long long)b.ids[p][s], b.len[p][s]);
                bad++;
            }
            if (!a.lg[p][s] || !b.lg[p][s]) continue;
            read++;
            double mx = 0, d = 0;
            for (size_t i = 0; i < a.vocab; i++) {
                mx = fmax(mx, fabs((double)b.lg[p][s][i]));
                d = fmax(d, fabs((double)a.lg[p][s][i] - (double)b.lg[p][s][i]));
            }
            if (!(d <= 1e-3 * fmax(mx, 1e-6))) {
                fprintf(stderr, "prompt %d step %d: logits differ by %g (largest %g)\n", p, s, d, mx);
                bad++;
            }
            worst = fmax(worst, d / fmax(mx, 1e-6));
            free(a.lg[p][s]);
            free(b.lg[p][s]);
        }
    printf("test_pipeline: %s: %d steps over %d prompts, %d ids forced, %d logits rows compared (worst %.3g of "
           "the row's largest): %s\n",
           argv[1], steps_of[0] + steps_of[1] + steps_of[2], PROMPTS, n_forced, read, worst, bad ? "FAIL" : "ok");
    return bad ? 1 : 0;
}
