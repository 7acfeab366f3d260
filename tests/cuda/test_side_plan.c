/* runtime/cuda/side.c without a GPU: the side stream's plan on random
 * steps, checked by simulating where each node's work may run. The
 * executors are the ones cuexec.h states (a chain member runs where its
 * tail runs; a fuse 4 tail at the GEMV before it (mt) or itself; a fuse 5
 * norm at its GEMV (pro) or itself; a fuse 7 chain at the GEMV after it
 * (cpro) or itself; a skip norm where its tail runs or itself; a rotary's
 * norm where the rotary runs; the first of a rotary pair at the second or
 * itself; an attention's prologue node at the attention or itself; a
 * launch group's later member at its first, or itself, which the runtime
 * refuses after the fork). For every choice of executors tried, a value
 * must be written before it is read in one stream's order, and across the
 * streams only through a region's fork (main before it, side after) and
 * its join (side before it, main after); regions are in node order, each
 * joined before the next forks. Side nodes read no graph input, write no
 * graph output, and are device or view nodes; a node and the node running
 * its work share a stream. A step built like Gemma's head (a branch of
 * launches off the main chain, read late) must get a plan with exactly
 * that branch on the side. Node structures are built by hand; nothing is
 * launched. Two such branches read at different points get a region
 * each. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuexec.h"

#define MAXN 48
#define MAXIN 3
#define N_GIN 2 /* graph inputs */

/* side.c's links to the rest of graft, here without it */
const char *rt_node_op(const rt_node *n)
{
    (void)n;
    return "Op";
}
const char *graft_node_name(const graft_node *n)
{
    (void)n;
    return "node";
}

typedef struct step {
    cx_exec x;
    cx_node nodes[MAXN];
    cx_val out[MAXN], gin[N_GIN], init;
    cx_val *vals[MAXN + N_GIN + 1];
    rt_tensor *ins[MAXN][MAXIN], *outs[MAXN][1];
    size_t out_idx[1];
    int chain_of[MAXN];             /* a chain member's tail (-1: none) */
    cx_node *members[MAXN][MAXN];   /* a tail's chain, itself last */
    int n_members[MAXN];
    struct cx_mgroup groups[MAXN];
} step;

static step *cur; /* cx_fuse_members reads the step being planned */

int cx_fuse_members(const cx_node *cn, cx_node *const **m)
{
    int t = (int)(cn - cur->nodes);
    if (!cur->n_members[t]) return 0;
    *m = cur->members[t];
    return cur->n_members[t];
}

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

static int idx(const step *s, const cx_node *cn) { return cn ? (int)(cn - s->nodes) : -1; }

/* a node's first reader after it (-1: none) */
static int first_reader(const step *s, int n, int i)
{
    for (int d = i + 1; d < n; d++)
        for (int j = 0; j < s->nodes[d].n.n_in; j++)
            if (s->nodes[d].n.in[j] == &s->out[i].t) return d;
    return -1;
}

static void step_init(step *s, int n)
{
    memset(s, 0, sizeof *s);
    s->x.nodes = s->nodes;
    s->x.n_nodes = (size_t)n;
    s->x.side = (cudaStream_t)(uintptr_t)1; /* never used: only that there is one */
    size_t nv = 0;
    for (int i = 0; i < n; i++) {
        s->outs[i][0] = &s->out[i].t;
        s->nodes[i].n.out = s->outs[i];
        s->nodes[i].n.n_out = 1;
        s->nodes[i].n.in = s->ins[i];
        s->nodes[i].place = CX_DEVICE;
        s->out[i].d = (void *)(uintptr_t)(0x1000 + 256 * i);
        s->out[i].dcap = 256;
        s->chain_of[i] = -1;
        s->vals[nv++] = &s->out[i];
    }
    for (int g = 0; g < N_GIN; g++) {
        s->gin[g].is_input = true;
        s->vals[nv++] = &s->gin[g];
    }
    s->init.is_init = true;
    s->vals[nv++] = &s->init;
    s->x.vals = s->vals;
    s->x.n_vals = nv;
    s->out_idx[0] = (size_t)(n - 1); /* the last node's output: the graph's */
    s->x.out_idx = s->out_idx;
    s->x.n_out = 1;
}

static void add_in(step *s, int i, rt_tensor *t)
{
    cx_node *cn = &s->nodes[i];
    if (cn->n.n_in < MAXIN) s->ins[i][cn->n.n_in++] = t;
}

/* A random step of n nodes with random fusion links of every kind. */
static void random_step(step *s, int n, unsigned *seed)
{
    step_init(s, n);
    for (int i = 0; i < n; i++) {
        int k = 1 + (int)(rnd(seed) % MAXIN);
        for (int j = 0; j < k; j++) {
            unsigned r = rnd(seed) % 10;
            if (i && r < 7) add_in(s, i, &s->out[i - 1 - (int)(rnd(seed) % (unsigned)(i < 6 ? i : 6))].t);
            else if (i && r < 8 && i > 8) add_in(s, i, &s->out[rnd(seed) % (unsigned)i].t);
            else if (r < 9) add_in(s, i, &s->init.t);
            else add_in(s, i, &s->gin[rnd(seed) % N_GIN].t);
        }
        unsigned p = rnd(seed) % 20;
        s->nodes[i].place = p == 0 ? CX_HOST : p == 1 ? CX_VIEW : CX_DEVICE;
    }
    for (int i = 0; i < n; i++) {
        cx_node *cn = &s->nodes[i];
        if (cn->place != CX_DEVICE || cn->fuse || cn->mm) continue;
        int d = first_reader(s, n, i);
        unsigned kind = rnd(seed) % 12;
        if (d < 0 || s->nodes[d].place != CX_DEVICE) continue;
        cx_node *dn = &s->nodes[d];
        if (kind == 0 && !dn->fuse && !dn->mm && s->chain_of[i] < 0) { /* i a member of d's chain */
            cn->fuse = 1;
            s->chain_of[i] = d;
            dn->fuse = 2;
            s->members[d][s->n_members[d]++] = cn;
        } else if (kind == 2 && !dn->fuse && !dn->mm) { /* i a norm its reader's GEMV computes */
            cn->fuse = 5;
            cn->pro = dn;
            dn->pro = cn;
        } else if (kind == 3 && !dn->attn_by) { /* i an attention's prologue node */
            cn->attn_by = dn;
        } else if (kind == 4) { /* a sibling group: i and a later node reading i's first input */
            for (int k = i + 1; k < n && cn->n.n_in; k++) {
                cx_node *o = &s->nodes[k];
                if (o->place != CX_DEVICE || o->mm || o->fuse || !o->n.n_in || o->n.in[0] != cn->n.in[0]) continue;
                struct cx_mgroup *g = &s->groups[i];
                g->n = 2;
                g->m[0] = cn;
                g->m[1] = o;
                cn->mm = 1;
                cn->mg = g;
                o->mm = 2;
                break;
            }
        } else if (kind == 5 && !dn->rope_pair && !dn->fuse && !dn->attn_by) { /* a rotary pair */
            cn->rope_pair = dn;
            dn->rope_pair = cn;
            dn->rope_second = true;
        } else if (kind == 6 && !dn->fuse) { /* a rotary's norm */
            cn->fuse = 3;
            dn->rope_norm = cn;
        }
    }
    /* tails: a chain run by the GEMV before it (mt), or by the GEMV after (cpro); a skip norm after a tail */
    for (int t = 0; t < n; t++) {
        cx_node *tn = &s->nodes[t];
        if (tn->fuse != 2) continue;
        s->members[t][s->n_members[t]++] = tn;
        unsigned kind = rnd(seed) % 4;
        int h = first_reader(s, n, t);
        if (kind == 0) {
            for (int m = t - 1; m >= 0; m--)
                if (s->nodes[m].place == CX_DEVICE && !s->nodes[m].fuse && !s->nodes[m].mt && !s->nodes[m].mm) {
                    s->nodes[m].mt = tn;
                    tn->fuse = 4;
                    break;
                }
        } else if (kind == 1 && h >= 0 && s->nodes[h].place == CX_DEVICE && !s->nodes[h].fuse) {
            tn->fuse = 7;
            tn->cpro = &s->nodes[h];
            s->nodes[h].cpro = tn;
        } else if (kind == 2 && h >= 0 && s->nodes[h].place == CX_DEVICE && !s->nodes[h].fuse) {
            tn->tail_skip = &s->nodes[h];
            s->nodes[h].fuse = 6;
        }
    }
}

/* The position where node i's work runs in this trial (choice: a random
 * pick among its executors, resolved again for the executor). -1: the
 * runtime would refuse the step (a group member launching itself after
 * the fork). */
static int exec_pos(const step *s, int i, unsigned *seed, int depth)
{
    const cx_node *cn = &s->nodes[i];
    if (depth > 8) return i;
    int opts[8], k = 0;
    opts[k++] = -1; /* itself */
    if (s->chain_of[i] >= 0) k = 0, opts[k++] = s->chain_of[i]; /* a member: only where its tail runs */
    for (int m = 0; m < (int)s->x.n_nodes; m++) {
        const cx_node *o = &s->nodes[m];
        if (o->mt == cn) opts[k++] = m;                                      /* a fuse 4 tail: its GEMV */
        if (o->tail_skip == cn) opts[k++] = m;                               /* a skip norm: its tail */
        if (o->rope_norm == cn) k = 0, opts[k++] = m;                        /* a rotary's norm: the rotary */
        if (o->mg && o->mg->n > 1 && o->mg->m[1] == cn) opts[k++] = m;       /* a group's later member */
    }
    if (cn->fuse == 7) opts[k++] = idx(s, cn->cpro);
    if (cn->fuse == 5) opts[k++] = idx(s, cn->pro);
    if (cn->rope_pair && !cn->rope_second) opts[k++] = idx(s, cn->rope_pair);
    if (cn->attn_by) opts[k++] = idx(s, cn->attn_by);
    int pick = opts[rnd(seed) % (unsigned)k];
    if (pick < 0) {
        for (int r = 0; cn->mm == 2 && s->x.side_of && r < s->x.n_side_reg; r++)
            if ((size_t)i >= s->x.side_f[r] && (size_t)i < s->x.side_j[r])
                return -1; /* cx_mm_follow refuses it while forked */
        return i;
    }
    return exec_pos(s, pick, seed, depth + 1);
}

/* 0: the trial is consistent, 1: a single-stream order the fusion itself breaks (skipped), 2: refused by the
 * runtime (skipped); else cr_assert fails. */
static int check_trial(step *s, unsigned *seed)
{
    int n = (int)s->x.n_nodes, pos[MAXN];
    for (int i = 0; i < n; i++) {
        pos[i] = exec_pos(s, i, seed, 0);
        if (pos[i] < 0) return 2;
    }
    const unsigned char *so = s->x.side_of;
    const size_t *f = s->x.side_f, *jn = s->x.side_j;
    for (int d = 0; d < n; d++)
        for (int j = 0; j < s->nodes[d].n.n_in; j++) {
            const rt_tensor *t = s->nodes[d].n.in[j];
            int q = -1;
            for (int k = 0; k < n && q < 0; k++) q = t == &s->out[k].t ? k : -1;
            if (q < 0) continue;
            if (pos[q] > pos[d]) return 1; /* the fusion drawn here breaks a single stream already */
        }
    if (!so) return 0;
    for (int i = 0; i < n; i++) {
        /* a node's work runs on the stream of the node that runs it, which must be its own */
        cr_assert_eq(so[i], so[pos[i]], "node %d (side %d) runs at node %d (side %d)", i, so[i], pos[i], so[pos[i]]);
        if (!so[i]) continue;
        int r = so[i] - 1;
        cr_assert(r < s->x.n_side_reg, "side node %d in region %d of %d", i, r, s->x.n_side_reg);
        cr_assert(pos[i] >= (int)f[r] && pos[i] < (int)jn[r], "side node %d runs at %d, outside [%zu, %zu)", i, pos[i],
                  f[r], jn[r]);
        cr_assert(s->nodes[i].place == CX_DEVICE || s->nodes[i].place == CX_VIEW, "side node %d is a host node", i);
        cr_assert(!s->nodes[i].mm, "side node %d is in a launch group", i);
        for (int j = 0; j < s->nodes[i].n.n_in; j++)
            cr_assert(!cx_v(s->nodes[i].n.in[j])->is_input, "side node %d reads a graph input", i);
        cr_assert(i != n - 1, "side node %d writes the graph output", i);
    }
    for (int d = 0; d < n; d++)
        for (int j = 0; j < s->nodes[d].n.n_in; j++) {
            const rt_tensor *t = s->nodes[d].n.in[j];
            int q = -1;
            for (int k = 0; k < n && q < 0; k++) q = t == &s->out[k].t ? k : -1;
            if (q < 0 || so[q] == so[d]) continue;
            if (so[d]) /* into a region: made before its fork */
                cr_assert(pos[q] < (int)f[so[d] - 1], "side node %d (at %d) reads node %d made at %d, fork at %zu", d,
                          pos[d], q, pos[q], f[so[d] - 1]);
            if (so[q]) /* out of a region: read after its join */
                cr_assert(pos[d] >= (int)jn[so[q] - 1], "node %d (at %d) reads side node %d, join at %zu", d, pos[d], q,
                          jn[so[q] - 1]);
        }
    return 0;
}

Test(side_plan, random_steps_keep_every_read_after_its_write)
{
    step *s = malloc(sizeof *s);
    cr_assert(s);
    cur = s;
    unsigned seed = 12345u;
    int planned = 0, several = 0, checked = 0, steps = 3000;
    for (int g = 0; g < steps; g++) {
        int n = 8 + (int)(rnd(&seed) % (MAXN - 8));
        random_step(s, n, &seed);
        cx_side_plan(&s->x);
        if (s->x.side_of) {
            planned++;
            several += s->x.n_side_reg > 1;
            cr_assert(s->x.n_side_reg >= 1 && s->x.n_side_reg <= CX_SIDE_REG);
            for (int r = 0; r < s->x.n_side_reg; r++) {
                /* in node order, each joined before the next forks, with launches on both streams */
                cr_assert(s->x.side_f[r] < s->x.side_j[r] && s->x.side_j[r] <= (size_t)n, "region %d: fork %zu, join "
                          "%zu of %d nodes", r, s->x.side_f[r], s->x.side_j[r], n);
                cr_assert(!r || s->x.side_j[r - 1] <= s->x.side_f[r], "region %d forks at %zu, %d joins at %zu", r,
                          s->x.side_f[r], r - 1, s->x.side_j[r - 1]);
                size_t ls = 0, lm = 0;
                for (size_t i = s->x.side_f[r]; i < s->x.side_j[r]; i++)
                    if (s->nodes[i].place == CX_DEVICE) *(s->x.side_of[i] == r + 1 ? &ls : &lm) += 1;
                cr_assert(ls > 0 && lm >= 2, "region %d: %zu nodes beside %zu", r, ls, lm);
            }
            cr_assert(s->x.n_side_launch > 0 && s->x.n_side_main >= 2);
        }
        for (int t = 0; t < 20; t++) checked += check_trial(s, &seed) == 0;
        free(s->x.side_of);
        s->x.side_of = NULL;
    }
    /* the test has teeth: plans were made, and consistent trials checked */
    cr_assert_gt(planned, steps / 20, "only %d of %d random steps got a plan", planned, steps);
    cr_assert_gt(several, steps / 100, "only %d of %d random steps got several regions", several, steps);
    cr_assert_gt(checked, steps * 5, "only %d trials checked", checked);
    free(s);
}

/* Gemma's head in small: e (the embedding) feeds the main chain m1..m6 and
 * a branch b1 -> b2 -> b4, b3 -> b4 (the model projection and its scale,
 * the table's gather, the norm chain) that only the gate g (after m6)
 * reads; the last node reads the gate. The branch is off the longest chain
 * and must be the side, forked before b1 and joined before g. */
Test(side_plan, a_branch_read_late_goes_on_the_side)
{
    enum { E, B1, B2, B3, B4, M1, M2, M3, M4, M5, M6, G, OUT, N };
    step *s = malloc(sizeof *s);
    cr_assert(s);
    cur = s;
    step_init(s, N);
    add_in(s, E, &s->gin[0].t); /* the ids */
    add_in(s, E, &s->init.t);
    add_in(s, B1, &s->out[E].t);
    add_in(s, B1, &s->init.t);
    add_in(s, B2, &s->out[B1].t);
    add_in(s, B3, &s->init.t);
    add_in(s, B3, &s->out[E].t);
    add_in(s, B4, &s->out[B2].t);
    add_in(s, B4, &s->out[B3].t);
    add_in(s, M1, &s->out[E].t);
    for (int m = M2; m <= M6; m++) add_in(s, m, &s->out[m - 1].t);
    add_in(s, G, &s->out[M6].t);
    add_in(s, G, &s->out[B4].t);
    add_in(s, OUT, &s->out[G].t);
    cx_side_plan(&s->x);
    cr_assert(s->x.side_of, "no plan: %s", s->x.side_why ? s->x.side_why : "?");
    for (int i = 0; i < N; i++)
        cr_assert_eq(s->x.side_of[i], i >= B1 && i <= B4, "node %d on the side: %d", i, s->x.side_of[i]);
    cr_assert_eq(s->x.n_side_reg, 1);
    cr_assert_eq(s->x.side_f[0], (size_t)B1);
    cr_assert_eq(s->x.side_j[0], (size_t)G);
    cr_assert_eq(s->x.n_side_launch, 4);
    cr_assert_eq(s->x.n_side_main, 6);
    /* the branch's gather reading a graph input stays on the main stream; b1 and b2 before it on the side
     * would be joined before b4 with one main launch beside them (too few), so the side is b4 alone,
     * forked after b3 and beside m1..m6 */
    s->ins[B3][0] = &s->gin[1].t;
    cx_side_plan(&s->x);
    cr_assert(s->x.side_of, "no plan: %s", s->x.side_why ? s->x.side_why : "?");
    for (int i = 0; i < N; i++) cr_assert_eq(s->x.side_of[i], i == B4, "node %d on the side: %d", i, s->x.side_of[i]);
    cr_assert_eq(s->x.side_f[0], (size_t)B4);
    cr_assert_eq(s->x.side_j[0], (size_t)G);
    /* GRAFT_CUDA_SIDE=0: none (each plan frees the one before) */
    setenv("GRAFT_CUDA_SIDE", "0", 1);
    cx_side_plan(&s->x);
    unsetenv("GRAFT_CUDA_SIDE");
    cr_assert(!s->x.side_of);
    free(s);
}

/* Two branches off the main chain, read at different points: a (one launch
 * on e, read by m3, with m1 and m2 beside it) and b1 -> b2 (on m3, read by
 * the gate g after m4..m6). Each is a region of its own: b's first (the
 * greater overlap), then a's, joined before m3 and so before b's fork;
 * the regions come out in node order. */
Test(side_plan, two_branches_get_two_regions)
{
    enum { E, A, M1, M2, M3, B1, B2, M4, M5, M6, G, OUT, N };
    step *s = malloc(sizeof *s);
    cr_assert(s);
    cur = s;
    step_init(s, N);
    add_in(s, E, &s->gin[0].t);
    add_in(s, A, &s->out[E].t);
    add_in(s, A, &s->init.t);
    add_in(s, M1, &s->out[E].t);
    add_in(s, M2, &s->out[M1].t);
    add_in(s, M3, &s->out[M2].t);
    add_in(s, M3, &s->out[A].t);
    add_in(s, B1, &s->out[M3].t);
    add_in(s, B1, &s->init.t);
    add_in(s, B2, &s->out[B1].t);
    add_in(s, M4, &s->out[M3].t);
    for (int m = M5; m <= M6; m++) add_in(s, m, &s->out[m - 1].t);
    add_in(s, G, &s->out[M6].t);
    add_in(s, G, &s->out[B2].t);
    add_in(s, OUT, &s->out[G].t);
    cx_side_plan(&s->x);
    cr_assert(s->x.side_of, "no plan: %s", s->x.side_why ? s->x.side_why : "?");
    cr_assert_eq(s->x.n_side_reg, 2);
    for (int i = 0; i < N; i++)
        cr_assert_eq(s->x.side_of[i], i == A ? 1 : i == B1 || i == B2 ? 2 : 0, "node %d on the side: %d", i,
                     s->x.side_of[i]);
    cr_assert_eq(s->x.side_f[0], (size_t)A);
    cr_assert_eq(s->x.side_j[0], (size_t)M3);
    cr_assert_eq(s->x.side_f[1], (size_t)B1);
    cr_assert_eq(s->x.side_j[1], (size_t)G);
    cr_assert_eq(s->x.n_side_launch, 3);
    cr_assert_eq(s->x.n_side_main, 5);
    /* a read by m2 too: now on the longest chain (e, a, m2..m6, g, out), it stays on the main stream */
    add_in(s, M2, &s->out[A].t);
    cx_side_plan(&s->x);
    cr_assert(s->x.side_of, "no plan: %s", s->x.side_why ? s->x.side_why : "?");
    cr_assert_eq(s->x.n_side_reg, 1);
    for (int i = 0; i < N; i++)
        cr_assert_eq(s->x.side_of[i], i == B1 || i == B2, "node %d on the side: %d", i, s->x.side_of[i]);
    free(s->x.side_of);
    free(s);
}
