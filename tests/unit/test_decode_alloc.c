/* Nothing is allocated per token: after graft_generator_open (which plans
 * memory for the maximum context) and the prefill, decode steps make no
 * malloc/calloc/realloc/aligned_alloc calls. Counted by linking with
 * -Wl,--wrap (see the Makefile rule for this test). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graft.h"

static volatile int counting;
static volatile long n_allocs;

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n);

void *__wrap_malloc(size_t n)
{
    if (counting) n_allocs++;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b)
{
    if (counting) n_allocs++;
    return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n)
{
    if (counting) n_allocs++;
    return __real_realloc(p, n);
}
void *__wrap_aligned_alloc(size_t a, size_t n)
{
    if (counting) n_allocs++;
    return __real_aligned_alloc(a, n);
}

static void decode_without_alloc(const char *pipeline)
{
    char out[] = "/tmp/graft_alloc_XXXXXX";
    cr_assert_not_null(mkdtemp(out));
    char exp[300];
    snprintf(exp, sizeof exp, "%s/export", out);
    graft_error err = {0};
    graft_compose_opts co = {0};
    cr_assert_eq(graft_compose(pipeline, exp, &co, &err), GRAFT_OK, "%s", err.msg);
    graft_gen_opts o = {0};
    o.max_context = 64;
    graft_generator *g = NULL;
    cr_assert_eq(graft_generator_open(exp, &o, &g, &err), GRAFT_OK, "%s", err.msg);
    int64_t prompt[5] = {2, 7, 11, 13, 17};
    cr_assert_eq(graft_generator_prefill(g, prompt, 5, &err), GRAFT_OK, "%s", err.msg);
    n_allocs = 0;
    counting = 1;
    graft_status st = GRAFT_OK;
    for (int i = 0; i < 40 && st == GRAFT_OK; i++) st = graft_generator_step(g, graft_generator_pick(g), &err);
    counting = 0;
    cr_assert_eq(st, GRAFT_OK, "%s", err.msg);
    cr_assert_eq(n_allocs, 0, "%ld allocations in 40 decode steps of %s", (long)n_allocs, pipeline);
    graft_generator_free(g);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", out);
    cr_assert_eq(system(cmd), 0);
}

Test(decode_alloc, builder_gqa_export) { decode_without_alloc("tests/fixtures/llama-builder-fp32"); }
Test(decode_alloc, gemma4_pipeline) { decode_without_alloc("tests/fixtures/gemma4-mobius"); }
Test(decode_alloc, int4_export) { decode_without_alloc("tests/fixtures/qwen3-builder-int4"); }
