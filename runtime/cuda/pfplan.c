/* The L2 prefetch plan of a decode step (GRAFT_CUDA_ATTN_PF,
 * GRAFT_CUDA_GEMV_PF; fuse.c's plan_pf marks who asks): which bytes of the
 * weights ahead each asking kernel gets. Host code only, apart from the
 * executor's other files so that tests/cuda/test_pf_plan.c can check it
 * without a GPU. */
#include <limits.h>
#include <stdint.h>

#include "runtime/cuda/cuexec.h"

size_t cx_group_weight_bytes(const cx_node *cn)
{
    const int n = cn->mm == 1 && cn->mg ? cn->mg->n : 1;
    size_t t = 0;
    for (int j = 0; j < n; j++) t += cx_v((n > 1 ? cn->mg->m[j] : cn)->n.in[1])->t.nbytes;
    return t;
}

/* The weights of the MatMuls after node cn, in node order, for cn's kernel
 * to ask L2 for: from where this run's asks have reached (x->pf_k,
 * x->pf_off), up to budget bytes and GCUDA_PREFETCH_MAX ranges, and no
 * further than x->pf_window bytes past the start of the first weight
 * MatMul after cn, so that what is asked and not yet read stays within
 * what L2 can hold. A group's matrices (q/k/v, the gate/up pair) are read
 * row by row together: each gets its share in proportion to its size, so
 * that the first rows of all of them are asked first. Where a group's
 * weights are not on the device yet (the planning run), nothing past it. */
void cx_pf_plan(cx_exec *x, const cx_node *cn, size_t budget, gcuda_prefetch_set *ps)
{
    ps->n = 0;
    size_t dist = 0; /* bytes of the groups between cn's next weights and this one */
    for (int k = cn->wm_next; k && budget; k = x->nodes[k - 1].wm_next) {
        const cx_node *nx = &x->nodes[k - 1];
        const int n = nx->mm == 1 && nx->mg ? nx->mg->n : 1;
        const size_t T = cx_group_weight_bytes(nx);
        const size_t done = k < x->pf_k ? T : k == x->pf_k ? x->pf_off : 0;
        if (dist + done >= x->pf_window) return;
        size_t take = T - done;
        if (take > budget) take = budget;
        if (take > x->pf_window - (dist + done)) take = x->pf_window - (dist + done);
        if (take) {
            if (ps->n + n > GCUDA_PREFETCH_MAX) return;
            for (int j = 0; j < n; j++) {
                const cx_val *b = cx_v((n > 1 ? nx->mg->m[j] : nx)->n.in[1]);
                if (!b || !b->on_dev || !b->d || (uintptr_t)b->d % 16) return;
            }
            for (int j = 0; j < n; j++) {
                const cx_val *b = cx_v((n > 1 ? nx->mg->m[j] : nx)->n.in[1]);
                const size_t bj = b->t.nbytes;
                /* matrix j's part of group bytes [done, done + take) */
                const size_t lo = (size_t)((double)bj * (double)done / (double)T) & ~(size_t)15;
                const size_t hi = done + take == T ? bj & ~(size_t)15
                                                   : (size_t)((double)bj * (double)(done + take) / (double)T) & ~(size_t)15;
                if (hi <= lo) continue;
                ps->ptr[ps->n] = (const char *)b->d + lo;
                ps->bytes[ps->n++] = hi - lo;
            }
            budget -= take;
            if (done + take < T) {
                x->pf_k = k;
                x->pf_off = done + take;
                return;
            }
            x->pf_k = nx->wm_next ? nx->wm_next : INT_MAX; /* this group all asked */
            x->pf_off = 0;
        }
        dist += T;
    }
}
