/* A second stream for the nodes a captured step needs late (cx_side_plan,
 * GRAFT_CUDA_SIDE=0: off). Gemma's per-layer inputs are the case: the
 * embedding graph makes them from the token's embedding (a GEMV of 8960
 * rows, its scale, the per-layer table's gather, a norm chain: five
 * dependent launches) at the step's head, and the first layer reads them
 * only at its per-layer-input gate, after its attention. On one stream they
 * sit on the step's critical path; on a second one, forked after what they
 * read is made and joined before their first reader, a captured graph runs
 * them beside the first layer's kernels.
 *
 * The plan (once, after the fusion plan). Each node's work runs at its own
 * position or at one of its executors' (fuse.c: a chain's tail runs its
 * members, the GEMV before it runs the tail, the GEMV after a norm runs
 * the norm, an attention its rotaries, a launch group's first the group):
 * its window, the positions it may read its inputs and write its outputs
 * at. A node and its executors are one component, which one stream must
 * run. A component may go on the side when every member is a device or
 * view node that reads no graph input, writes no graph output, is in no
 * launch group, and lies off the longest chain of launches through the
 * step's dataflow. For a fork before position f, the side takes (in node
 * order) each such component whose windows start at f or later and whose
 * inputs are constants, made on the side, or made by main nodes whose
 * windows end before f; the join comes before the first window of a main
 * node that reads a side value, and side components that would end after
 * it stay on the main stream (then again). The fork kept is the one with
 * the most of min(side launches, main launches between fork and join);
 * then again, while one pays, for more regions (up to CX_SIDE_REG): forks
 * outside the regions taken, joined by the next region's fork at the
 * latest, the components taken counting as main nodes (E2B's second: the
 * image-token gather beside the ids' integer program). A launch group's
 * later member counts at its first's position only: a captured step in
 * which one launches itself inside a region, or in which
 * the lengths go up on the side, is abandoned and the side stream turned
 * off (cx_side_fail); so is a capture with it that fails unexplained. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuexec.h"

/* main launches between the fork and the join below which no side stream pays */
#define SIDE_MIN_MAIN 2
#define SIDE_MAX_EX 8 /* executors a node may have (a chain member: its tail; a tail: its GEMV; ...) */
#define SIDE_ANY ((size_t)-1) /* in a node's executors: more than SIDE_MAX_EX */

typedef struct side_plan {
    size_t n;
    size_t *ex;      /* per node: up to SIDE_MAX_EX direct executors (1 + node; 0: none) */
    size_t *lo, *hi; /* per node: the positions its work may run at (its own, its executors', theirs) */
    int *up;         /* union-find over node and executor: the nodes one stream must run */
    int *w;          /* per node: launches (an estimate) */
    long *asap, *tail; /* per node: launches before it on the longest chain to it, and from it to the end */
    long len;        /* the longest chain */
    bool *elig;      /* per component root: may go on the side stream */
    bool *side;      /* per component root: on it (this try) */
    bool *ban;       /* per component root: kept off it (ends after the join) */
    size_t *clo, *chi; /* per component root: its members' lo and hi */
    size_t *next;    /* per node: the next member of its component (n: none; the root is the first) */
    size_t *prod;    /* per node input slot: 1 + producing node (0: none); slots from in_off */
    size_t *in_off;
} side_plan;

static int find(int *up, int i)
{
    while (up[i] != i) {
        up[i] = up[up[i]];
        i = up[i];
    }
    return i;
}

/* node e may run node i's work */
static void add_ex(cx_exec *x, side_plan *p, size_t i, const cx_node *e)
{
    if (!e) return;
    size_t k = (size_t)(e - x->nodes), *ex = p->ex + i * SIDE_MAX_EX;
    if (k == i) return;
    int r;
    for (r = 0; r < SIDE_MAX_EX && ex[r]; r++)
        if (ex[r] == k + 1 || ex[r] == SIDE_ANY) return;
    if (r == SIDE_MAX_EX) { /* more than planned for: anywhere in the step, on the main stream */
        p->elig[find(p->up, (int)i)] = false;
        ex[SIDE_MAX_EX - 1] = SIDE_ANY;
    } else {
        ex[r] = k + 1;
    }
    int a = find(p->up, (int)i), b = find(p->up, (int)k);
    if (a != b) {
        bool el = p->elig[a] && p->elig[b];
        if (a < b) p->up[b] = a;
        else p->up[a] = b;
        p->elig[find(p->up, a)] = el;
    }
}

/* lo and hi of node i: its position and its executors' windows (depth-first, memoised; 1 while visiting).
 * A launch group's later member counts at its first's only: one that launches itself after the fork turns
 * the side stream off (cx_mm_follow, cx_side_fail). */
static void window(const cx_exec *x, side_plan *p, size_t i, unsigned char *state)
{
    if (state[i] == 2) return;
    state[i] = 1;
    const cx_node *cn = &x->nodes[i];
    bool follower = (cn->mm == 2 || cn->gth == 2 || cn->ig == 2) && p->ex[i * SIDE_MAX_EX];
    p->lo[i] = follower ? p->n : i;
    p->hi[i] = follower ? 0 : i;
    for (int r = 0; r < SIDE_MAX_EX && p->ex[i * SIDE_MAX_EX + r]; r++) {
        size_t k = p->ex[i * SIDE_MAX_EX + r] - 1;
        if (p->ex[i * SIDE_MAX_EX + r] == SIDE_ANY || state[k] == 1) { /* too many executors, or a cycle: the step */
            p->lo[i] = 0;
            p->hi[i] = p->n;
            continue;
        }
        window(x, p, k, state);
        if (p->lo[k] < p->lo[i]) p->lo[i] = p->lo[k];
        if (p->hi[k] > p->hi[i]) p->hi[i] = p->hi[k];
    }
    state[i] = 2;
}

/* A node's launches as planned (0: fused into another's, a view, a host node). */
static int launches(const cx_node *cn)
{
    if (cn->place != CX_DEVICE || cn->const_done) return 0;
    if (cn->fuse == 1 || cn->fuse == 3 || cn->fuse == 4 || cn->fuse == 5 || cn->fuse == 6 || cn->fuse == 7) return 0;
    if (cn->mm == 2 || cn->gth == 2 || cn->ig == 2 || cn->attn_by) return 0;
    const cx_val *o = cn->n.n_out ? cx_v(cn->n.out[0]) : NULL;
    if (!strcmp(rt_node_op(&cn->n), "Slice") && o && o->d && !o->dcap) return 0; /* a window of its input */
    return 1;
}

static bool is_graph_output(const cx_exec *x, const cx_val *v)
{
    for (size_t i = 0; i < x->n_out; i++)
        if (x->vals[x->out_idx[i]] == v) return true;
    return false;
}

/* node i may run on the side stream (its component's other members aside) */
static bool node_elig(const cx_exec *x, const cx_node *cn)
{
    if (cn->const_done) return true; /* made once: nothing launched */
    if (cn->place != CX_DEVICE && cn->place != CX_VIEW) return false;
    if (cn->mm || cn->gth || cn->ig) return false;
    for (int j = 0; j < cn->n.n_in; j++) {
        const cx_val *v = cn->n.in[j] ? cx_v(cn->n.in[j]) : NULL;
        if (v && (v->is_input || v->pitch)) return false;
    }
    for (int j = 0; j < cn->n.n_out; j++) {
        const cx_val *v = cn->n.out[j] ? cx_v(cn->n.out[j]) : NULL;
        if (v && (v->pitch || is_graph_output(x, v))) return false;
    }
    return true;
}

/* The producer of every input slot, through each value's scratch tag. */
static bool producers(cx_exec *x, side_plan *p)
{
    size_t slots = 0;
    for (size_t i = 0; i < p->n; i++) slots += (size_t)x->nodes[i].n.n_in;
    p->in_off = calloc(p->n + 1, sizeof *p->in_off);
    p->prod = calloc(slots ? slots : 1, sizeof *p->prod);
    if (!p->in_off || !p->prod) return false;
    for (size_t v = 0; v < x->n_vals; v++) x->vals[v]->prod = 0;
    for (size_t i = 0; i < p->n; i++)
        for (int j = 0; j < x->nodes[i].n.n_out; j++)
            if (x->nodes[i].n.out[j]) cx_v(x->nodes[i].n.out[j])->prod = i + 1;
    size_t s = 0;
    for (size_t i = 0; i < p->n; i++) {
        p->in_off[i] = s;
        for (int j = 0; j < x->nodes[i].n.n_in; j++, s++) {
            size_t q = x->nodes[i].n.in[j] ? cx_v(x->nodes[i].n.in[j])->prod : 0;
            p->prod[s] = q && !x->nodes[q - 1].const_done ? q : 0; /* a Constant's output: made once, before */
        }
    }
    p->in_off[p->n] = s;
    return true;
}

/* One try with the fork at position f: the side components and the join
 * (at most lim, the next region's fork or n, the end); false when none is
 * left. */
static bool try_fork(side_plan *p, size_t f, size_t lim, size_t *jout)
{
    size_t n = p->n;
    memset(p->ban, 0, n * sizeof *p->ban);
    for (;;) {
        /* every candidate first, then off while one reads what neither the side makes nor the main stream
         * before the fork (the greatest such set: a member may read a node after its component's first) */
        bool any = false;
        for (size_t c = 0; c < n; c++)
            p->side[c] = (size_t)find(p->up, (int)c) == c && p->elig[c] && !p->ban[c] && p->clo[c] >= f;
        for (bool changed = true; changed;) {
            changed = any = false;
            for (size_t c = 0; c < n; c++) {
                if (!p->side[c]) continue;
                bool ok = true;
                for (size_t k = c; k < n && ok; k = p->next[k])
                    for (size_t s = p->in_off[k]; s < p->in_off[k + 1] && ok; s++) {
                        if (!p->prod[s]) continue;
                        size_t q = p->prod[s] - 1;
                        ok = p->side[find(p->up, (int)q)] || p->hi[q] < f;
                    }
                if (!ok) p->side[c] = false, changed = true;
                else any = true;
            }
        }
        if (!any) return false;
        size_t jn = lim;
        for (size_t d = 0; d < n; d++) {
            if (p->side[find(p->up, (int)d)]) continue;
            for (size_t s = p->in_off[d]; s < p->in_off[d + 1]; s++)
                if (p->prod[s] && p->side[find(p->up, (int)(p->prod[s] - 1))] && p->lo[d] < jn) jn = p->lo[d];
        }
        bool banned = false;
        for (size_t c = 0; c < n; c++)
            if (p->side[c] && p->chi[c] >= jn) p->ban[c] = banned = true;
        if (!banned) {
            *jout = jn;
            return true;
        }
    }
}

/* The side's launches and nodes, and the main launches between the fork f and the join j (try_fork's side). */
static void count(const cx_exec *x, side_plan *p, size_t f, size_t j, size_t *ls, size_t *lm, size_t *ns)
{
    *ls = *lm = *ns = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (p->side[find(p->up, (int)i)]) {
            if (!x->nodes[i].const_done) ++*ns;
            *ls += (size_t)p->w[i];
        } else if (i >= f && i < j) {
            *lm += (size_t)p->w[i];
        }
    }
}

static void plan_free(side_plan *p)
{
    free(p->ex);
    free(p->lo);
    free(p->hi);
    free(p->up);
    free(p->w);
    free(p->asap);
    free(p->tail);
    free(p->elig);
    free(p->side);
    free(p->ban);
    free(p->clo);
    free(p->next);
    free(p->chi);
    free(p->prod);
    free(p->in_off);
}

void cx_side_plan(cx_exec *x)
{
    const char *e = getenv("GRAFT_CUDA_SIDE");
    free(x->side_of);
    x->side_of = NULL;
    x->n_side = x->n_side_launch = x->n_side_main = 0;
    x->n_side_reg = 0;
    if (e && !strcmp(e, "0")) {
        x->side_why = "GRAFT_CUDA_SIDE=0";
        return;
    }
    if (!x->side || x->n_nodes < 2) {
        x->side_why = x->side ? "nothing to plan" : "no second stream";
        return;
    }
    side_plan p = {0};
    size_t n = p.n = x->n_nodes;
    unsigned char *state = calloc(n, 1);
    p.ex = calloc(n * SIDE_MAX_EX, sizeof *p.ex);
    p.lo = malloc(n * sizeof *p.lo);
    p.hi = malloc(n * sizeof *p.hi);
    p.up = malloc(n * sizeof *p.up);
    p.w = malloc(n * sizeof *p.w);
    p.asap = calloc(n, sizeof *p.asap);
    p.tail = calloc(n, sizeof *p.tail);
    p.elig = malloc(n * sizeof *p.elig);
    p.side = malloc(n * sizeof *p.side);
    p.ban = malloc(n * sizeof *p.ban);
    p.clo = malloc(n * sizeof *p.clo);
    p.chi = calloc(n, sizeof *p.chi);
    p.next = malloc(n * sizeof *p.next);
    x->side_why = "no memory for the plan";
    if (!state || !p.ex || !p.lo || !p.hi || !p.up || !p.w || !p.asap || !p.tail || !p.elig || !p.side || !p.ban ||
        !p.clo || !p.chi || !p.next || !producers(x, &p)) {
        free(state);
        plan_free(&p);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        p.up[i] = (int)i;
        p.w[i] = launches(&x->nodes[i]);
        p.elig[i] = node_elig(x, &x->nodes[i]);
    }
    /* who may run each node's work (fuse.c's plans) */
    for (size_t i = 0; i < n; i++) {
        cx_node *cn = &x->nodes[i];
        cx_node *const *m;
        int nm = cx_fuse_members(cn, &m);
        for (int k = 0; k < nm; k++) /* a chain's members: run by its tail */
            if (m[k] != cn) add_ex(x, &p, (size_t)(m[k] - x->nodes), cn);
        if (cn->mt) add_ex(x, &p, (size_t)(cn->mt - x->nodes), cn); /* a tail: by the GEMV before it */
        if (cn->fuse == 7) add_ex(x, &p, i, cn->cpro);               /* a chain: by the GEMV after it */
        if (cn->fuse == 5) add_ex(x, &p, i, cn->pro);                /* a norm: by the GEMV after it */
        if (cn->tail_skip) add_ex(x, &p, (size_t)(cn->tail_skip - x->nodes), cn); /* a skip norm: by a tail */
        if (cn->rope_norm) add_ex(x, &p, (size_t)(cn->rope_norm - x->nodes), cn); /* a norm: by its rotary */
        if (cn->rope_pair && !cn->rope_second) add_ex(x, &p, i, cn->rope_pair);    /* a rotary: by the next */
        if (cn->attn_by) add_ex(x, &p, i, cn->attn_by);              /* a rotary, a chain: by the attention */
        for (int k = 0; k < 3; k++)
            if (cn->aprep[k]) add_ex(x, &p, (size_t)(cn->aprep[k] - x->nodes), cn);
        if (cn->mg) /* a launch group's members: by its first */
            for (int k = 1; k < cn->mg->n; k++) add_ex(x, &p, (size_t)(cn->mg->m[k] - x->nodes), cn);
        if (cn->gg)
            for (int k = 1; k < cn->gg->n; k++) add_ex(x, &p, (size_t)(cn->gg->m[k] - x->nodes), cn);
        if (cn->igg)
            for (int k = 1; k < cn->igg->n; k++) add_ex(x, &p, (size_t)(cn->igg->m[k] - x->nodes), cn);
    }
    for (size_t i = 0; i < n; i++) window(x, &p, i, state);
    free(state);
    /* the longest chain of launches through the dataflow (node order is topological) */
    for (size_t d = 0; d < n; d++)
        for (size_t s = p.in_off[d]; s < p.in_off[d + 1]; s++)
            if (p.prod[s] && p.asap[p.prod[s] - 1] + p.w[p.prod[s] - 1] > p.asap[d])
                p.asap[d] = p.asap[p.prod[s] - 1] + p.w[p.prod[s] - 1];
    for (size_t d = n; d-- > 0;) {
        p.tail[d] += p.w[d]; /* tail held the most of its readers' until here */
        for (size_t s = p.in_off[d]; s < p.in_off[d + 1]; s++)
            if (p.prod[s] && p.tail[d] > p.tail[p.prod[s] - 1]) p.tail[p.prod[s] - 1] = p.tail[d];
        if (p.asap[d] + p.tail[d] > p.len) p.len = p.asap[d] + p.tail[d];
    }
    /* a component goes on the side only as a whole, every member off the longest chain */
    /* member lists: the root (the first) and on in node order; clo holds each root's last member meanwhile */
    for (size_t i = 0; i < n; i++) p.next[i] = p.clo[i] = n;
    for (size_t i = 0; i < n; i++) {
        size_t c = (size_t)find(p.up, (int)i);
        if (c != i) p.next[p.clo[c]] = i;
        p.clo[c] = i;
    }
    for (size_t c = 0; c < n; c++) p.clo[c] = n;
    for (size_t i = 0; i < n; i++) {
        size_t c = (size_t)find(p.up, (int)i);
        if (p.asap[i] + p.tail[i] >= p.len) p.elig[c] = false; /* node_elig: ANDed into the root by add_ex */
        if (p.lo[i] < p.clo[c]) p.clo[c] = p.lo[i];
        if (p.hi[i] > p.chi[c]) p.chi[c] = p.hi[i];
    }
    /* regions one by one, greedily: the fork that overlaps the most (the most of min(side launches, main
     * launches between)) among those outside the regions taken, joined before the next one's fork; a region's
     * components leave the candidates (for later tries they are main nodes, joined before any later fork) */
    x->side_why = "no node off the longest chain";
    size_t rf[CX_SIDE_REG], rj[CX_SIDE_REG], rn[CX_SIDE_REG], rls[CX_SIDE_REG], rlm[CX_SIDE_REG], j;
    int nr = 0;
    unsigned char *reg = calloc(n, 1); /* per component root: 1 + its region */
    if (!reg) x->side_why = "no memory for the plan";
    while (reg && nr < CX_SIDE_REG) {
        size_t best_f = n, best_score = 0, best_lim = n;
        for (size_t c = 0; c < n; c++) {
            if ((size_t)find(p.up, (int)c) != c || !p.elig[c]) continue;
            size_t f = p.clo[c], lim = n;
            bool inside = false;
            for (int r = 0; r < nr; r++) {
                if (f >= rf[r] && f < rj[r]) inside = true;
                if (rf[r] > f && rf[r] < lim) lim = rf[r];
            }
            if (inside || !try_fork(&p, f, lim, &j)) continue;
            size_t ls, lm, ns;
            count(x, &p, f, j, &ls, &lm, &ns);
            if (!ls || lm < SIDE_MIN_MAIN) {
                if (!nr) x->side_why = "too few launches beside it";
                continue;
            }
            size_t score = ls < lm ? ls : lm;
            if (score > best_score || (score == best_score && f < best_f)) best_score = score, best_f = f, best_lim = lim;
        }
        if (best_f == n || !try_fork(&p, best_f, best_lim, &j)) break;
        for (size_t c = 0; c < n; c++)
            if (p.side[c]) reg[c] = (unsigned char)(nr + 1), p.elig[c] = false;
        rf[nr] = best_f;
        rj[nr] = j;
        count(x, &p, best_f, j, &rls[nr], &rlm[nr], &rn[nr]);
        nr++;
    }
    /* the regions in node order: region r is the one taken ord[r]-th */
    int ord[CX_SIDE_REG], at[CX_SIDE_REG];
    for (int r = 0; r < nr; r++) ord[r] = r;
    for (int r = 1; r < nr; r++)
        for (int k = r; k > 0 && rf[ord[k]] < rf[ord[k - 1]]; k--) {
            int t = ord[k];
            ord[k] = ord[k - 1];
            ord[k - 1] = t;
        }
    if (nr && (x->side_of = calloc(n, 1))) {
        for (int r = 0; r < nr; r++) {
            at[ord[r]] = r;
            x->side_f[r] = rf[ord[r]];
            x->side_j[r] = rj[ord[r]];
            x->n_side += rn[ord[r]];
            x->n_side_launch += rls[ord[r]];
            x->n_side_main += rlm[ord[r]];
        }
        x->n_side_reg = nr;
        for (size_t i = 0; i < n; i++) {
            unsigned char g = reg[find(p.up, (int)i)];
            x->side_of[i] = g ? (unsigned char)(at[g - 1] + 1) : 0;
        }
        x->side_why = NULL;
    }
    free(reg);
    if (e && !strcmp(e, "show")) {
        fprintf(stderr, "graft: side stream: %zu nodes, the longest chain %ld launches\n", n, p.len);
        for (size_t i = 0; i < n; i++)
            if (p.asap[i] + p.tail[i] < p.len && !x->nodes[i].const_done)
                fprintf(stderr, "graft: side stream: off the longest chain by %ld: node %zu %s %s (runs at %zu-%zu, "
                        "%d launch%s, component %d%s)\n", p.len - p.asap[i] - p.tail[i], i,
                        rt_node_op(&x->nodes[i].n), graft_node_name(x->nodes[i].n.src), p.lo[i], p.hi[i], p.w[i],
                        p.w[i] == 1 ? "" : "es", find(p.up, (int)i),
                        x->side_of && x->side_of[i] ? ", on the side" : p.elig[find(p.up, (int)i)] ? "" : ", ineligible");
        for (int r = 0; x->side_of && r < nr; r++) {
            const int t = ord[r];
            fprintf(stderr, "graft: side stream: region %d: fork before node %zu (%s), join before node %zu (%s); %zu "
                    "launches beside %zu\n", r, rf[t], graft_node_name(x->nodes[rf[t]].n.src), rj[t],
                    rj[t] < n ? graft_node_name(x->nodes[rj[t]].n.src) : "the end", rls[t], rlm[t]);
        }
        if (!x->side_of)
            fprintf(stderr, "graft: side stream: none (%s)\n", x->side_why);
    }
    plan_free(&p);
}

void cx_side_fail(cx_exec *x, const char *why)
{
    if (!x->capturing || x->side_state != 1) return;
    x->side_off = true;
    x->side_why = why;
    x->cap_abort = x->cap_abort ? x->cap_abort : 2;
}
