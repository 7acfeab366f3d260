/* runtime/cuda/pfplan.c without a GPU: the byte ranges each asking kernel
 * of a decode step gets from cx_pf_plan, against the rule its comment and
 * docs/SWITCHES.md state (worked out by hand here): in node order from
 * where the step's asks stopped, up to the budget, no further than the
 * window past the asking node's next weights, a group's matrices in
 * proportion to their sizes, 16-byte aligned; nothing past weights not yet
 * on the device. Node and weight structures are built by hand; the
 * "device" addresses are never dereferenced. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuexec.h"

#define MB ((size_t)1 << 20)
#define MAXN 8

/* A step of nodes: node i's weight (input 1) is w[i], its activation a. */
typedef struct step {
    cx_exec x;
    cx_node nodes[MAXN];
    cx_val w[MAXN], a;
    rt_tensor *ins[MAXN][2];
    struct cx_mgroup groups[MAXN];
} step;

static step *step_new(int n)
{
    step *s = calloc(1, sizeof *s);
    cr_assert(s);
    s->x.nodes = s->nodes;
    s->x.n_nodes = (size_t)n;
    for (int i = 0; i < n; i++) {
        s->ins[i][0] = &s->a.t;
        s->ins[i][1] = &s->w[i].t;
        s->nodes[i].n.in = s->ins[i];
        s->nodes[i].n.n_in = 2;
    }
    return s;
}

/* Node i a weight MatMul of `bytes` at fake device address addr. */
static void weight(step *s, int i, size_t bytes, uintptr_t addr)
{
    s->w[i].t.nbytes = bytes;
    s->w[i].d = (void *)addr;
    s->w[i].on_dev = true;
}

/* Nodes first..first+n-1 one sibling group headed by first. */
static void group(step *s, int first, int n)
{
    struct cx_mgroup *g = &s->groups[first];
    g->n = n;
    for (int j = 0; j < n; j++) {
        g->m[j] = &s->nodes[first + j];
        s->nodes[first + j].mm = j ? 2 : 1;
    }
    s->nodes[first].mg = g;
}

static void expect(const gcuda_prefetch_set *ps, int n, const uintptr_t *ptr, const size_t *bytes, const char *what)
{
    cr_assert_eq(ps->n, n, "%s: %d ranges, %d expected", what, ps->n, n);
    for (int r = 0; r < n; r++) {
        cr_expect_eq((uintptr_t)ps->ptr[r], ptr[r], "%s: range %d at %#lx, %#lx expected", what, r,
                     (unsigned long)(uintptr_t)ps->ptr[r], (unsigned long)ptr[r]);
        cr_expect_eq(ps->bytes[r], bytes[r], "%s: range %d of %zu bytes, %zu expected", what, r, ps->bytes[r],
                     bytes[r]);
    }
}

/* 0 attention; 1 o (6 MB); 2, 3 gate and up (10 MB each, one group); 4 down
 * (8 MB). wm_next as plan_pf sets it: 1 + the first weight MatMul after the
 * node, a group's first standing for the group. */
static step *layer(void)
{
    step *s = step_new(5);
    weight(s, 1, 6 * MB, 0x10000000);
    weight(s, 2, 10 * MB, 0x20000000);
    weight(s, 3, 10 * MB, 0x30000000);
    weight(s, 4, 8 * MB, 0x40000000);
    group(s, 2, 2);
    s->nodes[0].wm_next = 2;
    s->nodes[1].wm_next = 3;
    s->nodes[2].wm_next = s->nodes[3].wm_next = 5;
    s->nodes[4].wm_next = 0;
    s->x.pf_window = 16 * MB;
    return s;
}

Test(pf_plan, one_cursor_for_the_step)
{
    step *s = layer();
    gcuda_prefetch_set ps;
    /* the attention, 12 MB: all of o, then 6 MB of the pair, 3 MB of each */
    cx_pf_plan(&s->x, &s->nodes[0], 12 * MB, &ps);
    expect(&ps, 3, (uintptr_t[]){0x10000000, 0x20000000, 0x30000000}, (size_t[]){6 * MB, 3 * MB, 3 * MB},
           "attention");
    /* o's GEMV, 12 MB: the pair from 6 MB on, but the window (16 MB past the pair's start) leaves 10 */
    cx_pf_plan(&s->x, &s->nodes[1], 12 * MB, &ps);
    expect(&ps, 2, (uintptr_t[]){0x20000000 + 3 * MB, 0x30000000 + 3 * MB}, (size_t[]){5 * MB, 5 * MB}, "o");
    /* the attention again: o asked, the pair asked up to 16 MB, 6 + 16 past the window: nothing */
    cx_pf_plan(&s->x, &s->nodes[0], 12 * MB, &ps);
    cr_expect_eq(ps.n, 0, "attention again: %d ranges", ps.n);
    /* the pair's own GEMV (not small, but the plan does not know): down, from its start, 8 MB */
    cx_pf_plan(&s->x, &s->nodes[2], 12 * MB, &ps);
    expect(&ps, 1, (uintptr_t[]){0x40000000}, (size_t[]){8 * MB}, "pair");
    /* everything asked: nothing more */
    cx_pf_plan(&s->x, &s->nodes[3], 12 * MB, &ps);
    cr_expect_eq(ps.n, 0, "after down: %d ranges", ps.n);
    free(s);
}

Test(pf_plan, window_and_budget)
{
    step *s = layer();
    gcuda_prefetch_set ps;
    /* a window of 4 MB: o's first 4 MB only, whatever the budget */
    s->x.pf_window = 4 * MB;
    cx_pf_plan(&s->x, &s->nodes[0], 100 * MB, &ps);
    expect(&ps, 1, (uintptr_t[]){0x10000000}, (size_t[]){4 * MB}, "window 4 MB");
    cr_expect_eq(s->x.pf_k, 2);
    cr_expect_eq(s->x.pf_off, 4 * MB);
    /* a new step: the cursor reset as run_nodes does; a budget of 1 MB */
    s->x.pf_k = 0, s->x.pf_off = 0;
    s->x.pf_window = 64 * MB;
    cx_pf_plan(&s->x, &s->nodes[0], 1 * MB, &ps);
    expect(&ps, 1, (uintptr_t[]){0x10000000}, (size_t[]){1 * MB}, "budget 1 MB");
    free(s);
}

Test(pf_plan, proportional_shares_and_alignment)
{
    /* 0 asks; 1, 2, 3 q/k/v (8 MB, 1 MB, 1 MB + 40 bytes: not a multiple of 16) */
    step *s = step_new(4);
    weight(s, 1, 8 * MB, 0x10000000);
    weight(s, 2, 1 * MB, 0x20000000);
    weight(s, 3, 1 * MB + 40, 0x30000000);
    group(s, 1, 3);
    s->nodes[0].wm_next = 2;
    s->x.pf_window = 64 * MB;
    gcuda_prefetch_set ps;
    /* half the group: each matrix's first half (rounded down to 16 bytes) */
    const size_t T = 10 * MB + 40;
    cx_pf_plan(&s->x, &s->nodes[0], T / 2, &ps);
    const size_t v_half = (size_t)((double)(1 * MB + 40) * (double)(T / 2) / (double)T) & ~(size_t)15;
    expect(&ps, 3, (uintptr_t[]){0x10000000, 0x20000000, 0x30000000},
           (size_t[]){((size_t)((double)(8 * MB) * (double)(T / 2) / (double)T)) & ~(size_t)15,
                      ((size_t)((double)(1 * MB) * (double)(T / 2) / (double)T)) & ~(size_t)15, v_half},
           "first half");
    /* the rest: each matrix from where its share stopped to its end, v's last 8 bytes (past 16) left out */
    cx_pf_plan(&s->x, &s->nodes[0], 64 * MB, &ps);
    cr_assert_eq(ps.n, 3);
    cr_expect_eq((uintptr_t)ps.ptr[2], 0x30000000 + v_half);
    cr_expect_eq(ps.bytes[2], ((1 * MB + 40) & ~(size_t)15) - v_half);
    for (int r = 0; r < 3; r++) {
        cr_expect_eq((uintptr_t)ps.ptr[r] % 16, 0, "range %d misaligned", r);
        cr_expect_eq(ps.bytes[r] % 16, 0, "range %d not a multiple of 16", r);
    }
    cr_expect_eq((uintptr_t)ps.ptr[0] + ps.bytes[0], 0x10000000 + 8 * MB, "q's end");
    free(s);
}

Test(pf_plan, not_on_the_device_yet)
{
    step *s = layer();
    s->w[3].on_dev = false; /* up not uploaded (the planning run) */
    gcuda_prefetch_set ps;
    cx_pf_plan(&s->x, &s->nodes[0], 100 * MB, &ps);
    /* o, then nothing past the pair: the cursor at the pair's start */
    expect(&ps, 1, (uintptr_t[]){0x10000000}, (size_t[]){6 * MB}, "o only");
    cr_expect_eq(s->x.pf_k, 3);
    cr_expect_eq(s->x.pf_off, 0);
    free(s);
}

Test(pf_plan, at_most_GCUDA_PREFETCH_MAX_ranges)
{
    /* GCUDA_PREFETCH_MAX + 1 single-matrix weights of 1 MB after node 0: GCUDA_PREFETCH_MAX ranges, then the
     * cursor at the one left */
    const int n = GCUDA_PREFETCH_MAX + 2;
    cx_exec *x = calloc(1, sizeof *x);
    cx_node *nodes = calloc((size_t)n, sizeof *nodes);
    cx_val *w = calloc((size_t)n, sizeof *w), a;
    rt_tensor *(*ins)[2] = calloc((size_t)n, sizeof *ins);
    cr_assert(x && nodes && w && ins);
    memset(&a, 0, sizeof a);
    x->nodes = nodes;
    x->n_nodes = (size_t)n;
    x->pf_window = 64 * MB;
    for (int i = 0; i < n; i++) {
        ins[i][0] = &a.t, ins[i][1] = &w[i].t;
        nodes[i].n.in = ins[i];
        nodes[i].n.n_in = 2;
        nodes[i].wm_next = i + 1 < n ? i + 2 : 0;
        if (i) {
            w[i].t.nbytes = 1 * MB;
            w[i].d = (void *)(uintptr_t)(0x1000000 * (size_t)i);
            w[i].on_dev = true;
        }
    }
    gcuda_prefetch_set ps;
    cx_pf_plan(x, &nodes[0], 64 * MB, &ps);
    cr_expect_eq(ps.n, GCUDA_PREFETCH_MAX);
    cr_expect_eq(x->pf_k, GCUDA_PREFETCH_MAX + 2, "the cursor at the node after the last asked");
    cr_expect_eq(x->pf_off, 0);
    free(ins);
    free(w);
    free(nodes);
    free(x);
}
