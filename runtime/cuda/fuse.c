/* Fusion of elementwise chains (issue 7: a decode step of E2B is ~1000
 * small launches). After the planning run, when placement is final, a
 * chain of device nodes A -> B -> ... where each output is read only by
 * the next node (once, and is no graph output) runs as one kernel
 * (gops_fused) at its last node: the earlier members compute nothing, their
 * outputs stay absent. Members: Add/Sub/Mul/Div/Pow/Max/Min, the unary ops
 * of run_unary (Clip with constant bounds), float Casts; the head may also
 * be an RMSNormalization whose output feeds the chain (Gemma's post-norm
 * residual Add and layer scale). Every intermediate is rounded to its
 * stored type, so the results are those of the unfused nodes.
 * Sibling MatMuls (the same activation times constant [K, N] weights: q/k/v,
 * gate/up) form a group whose first node, on a one-row step, runs all their
 * GEMVs in one launch (gcuda_gemv_rows_multi on weights stored [N, K],
 * gcuda_gemv_multi otherwise); the others then find their output made. GRAFT_CUDA_FUSE=0 turns both off; GRAFT_CUDA_CHECK=1 (node by node
 * against the CPU kernels) runs unfused. Also here: the RMSNorm without
 * scale that exporters spell out (Mul, ReduceMean, Add, Sqrt, Div) as a
 * chain head (GRAFT_CUDA_FUSE_NORM=0: not); an RMSNorm feeding a
 * RotaryEmbedding applied by the rotary launch (GRAFT_CUDA_FUSE_ROPE=0:
 * not), and (GRAFT_CUDA_FUSE_ROPE2=0: not) a layer's q and k rotaries
 * so made in one launch (plan_rope_pair), unless (GRAFT_CUDA_FUSE_ATTN=0:
 * not) the Attention reading them makes them in its decode kernel, with
 * its v's spelled-out norm (plan_attn_prep); the chain after a weight MatMul run by its GEMV (plan_tails,
 * GRAFT_CUDA_FUSE_TAIL=0: not), and a skip RMSNorm reading such a norm-headed chain run after it in the
 * same launch (plan_tail_skip, GRAFT_CUDA_FUSE_SKIP=0: not); the norm before one computed by it
 * (plan_prologue, GRAFT_CUDA_FUSE_PRO=0: not). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kcommon.h"
#include "runtime/cuda/cuexec.h"

typedef struct cx_fuse {
    int n;                        /* members, head first; the tail owns this */
    cx_node *m[GOPS_FUSE_MAX + 1];
    int norm;                     /* the head is a norm, not an instruction: 1 an RMSNormalization, 2 the
                                   * graph's own x / sqrt(mean(x * x) + eps) ending in the Div m[0] */
    float eps;                    /* norm 2: the Add's constant */
    gops_fuse_ins ins[GOPS_FUSE_MAX];
    rt_tensor *leaf[GOPS_FUSE_LEAVES];
    int n_leaf;
    gops_fuse *built; /* fuse 7: the launch description cx_cpro_follow built this run, for the GEMV after it */
} cx_fuse;

/* The chain value's slot in member cn (reading the previous member's
 * output t), or -1 when it is read twice or not at all. */
static int chain_slot(const cx_node *cn, const rt_tensor *t)
{
    int slot = -1;
    for (int j = 0; j < cn->n.n_in; j++) {
        if (cn->n.in[j] != t) continue;
        if (slot >= 0) return -1;
        slot = j;
    }
    return slot;
}

/* An instruction for node cn (without its leaf), or 0 when it is not a member. */
static int member_ins(const cx_node *cn, gops_fuse_ins *in)
{
    const rt_node *n = &cn->n;
    if (cn->place != CX_DEVICE || *graft_node_domain(n->src) || n->n_out != 1 || !n->out[0]) return 0;
    memset(in, 0, sizeof *in);
    in->lo = -INFINITY;
    in->hi = INFINITY;
    in->dtype = n->out[0]->dtype;
    if (!cx_is_float(in->dtype)) return 0;
    const char *op = rt_node_op(n);
    int b = cx_binary_code(op);
    if (b >= 0) {
        if (n->n_in != 2 || !n->in[0] || !n->in[1]) return 0;
        in->kind = GOPS_FUSE_BINARY;
        in->op = b;
        return 1;
    }
    if (!strcmp(op, "Cast")) {
        in->kind = GOPS_FUSE_CAST;
        return n->n_in == 1 && n->in[0] && cx_is_float(n->in[0]->dtype);
    }
    if (!strcmp(op, "Clip") && n->opset >= 11) return 0; /* bounds read per run */
    int u = cx_unary_code(n, &in->lo, &in->hi);
    if (u < 0 || n->n_in != 1) return 0;
    in->kind = GOPS_FUSE_UNARY;
    in->op = u;
    return 1;
}

static int is_norm_head(const cx_node *cn)
{
    const rt_node *n = &cn->n;
    if (cn->place != CX_DEVICE || *graft_node_domain(n->src) || strcmp(rt_node_op(n), "RMSNormalization")) return 0;
    if (n->n_in < 2 || !n->in[0] || !n->in[1] || !n->out[0] || n->in[0]->rank < 1) return 0;
    /* over the last axis only, one output read */
    int ax = (int)rt_attr_int(n, "axis", -1);
    if (ax != -1 && ax != n->in[0]->rank - 1) return 0;
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j] && *graft_node_output(n->src, (size_t)j)) return 0;
    return n->in[0]->dtype == n->in[1]->dtype;
}

/* The producer node of value t (NULL: an input or initializer). */
static cx_node *producer(cx_exec *x, const rt_tensor *t)
{
    for (size_t i = 0; i < x->n_nodes; i++)
        for (int j = 0; j < x->nodes[i].n.n_out; j++)
            if (x->nodes[i].n.out[j] == t) return &x->nodes[i];
    return NULL;
}

/* A device node of this ONNX op whose one output is read once (and by no graph output). */
static int single(const cx_node *cn, const char *op)
{
    return cn && cn->place == CX_DEVICE && !cn->fuse && !cn->mm && !*graft_node_domain(cn->n.src) &&
           !strcmp(rt_node_op(&cn->n), op) && cn->n.n_out == 1 && cn->n.out[0] && cx_v(cn->n.out[0])->n_readers == 1;
}

/* A one-element float constant on the host, as a float. */
static int const_scalar(const rt_tensor *t, float *out)
{
    if (!t) return 0;
    const cx_val *v = cx_v((rt_tensor *)t);
    if (!v->sticky || !v->on_host || !t->data || t->numel != 1) return 0;
    switch (t->dtype) {
    case GRAFT_DTYPE_FLOAT: *out = *(const float *)t->data; return 1;
    case GRAFT_DTYPE_FLOAT16: *out = rt_f16_to_f32(*(const uint16_t *)t->data); return 1;
    case GRAFT_DTYPE_BFLOAT16: *out = rt_bf16_to_f32(*(const uint16_t *)t->data); return 1;
    default: return 0;
    }
}

/* A device Cast from fp16 or bf16 to fp32 (exact). */
static int widening_cast(const cx_node *cn)
{
    if (!cn || cn->place != CX_DEVICE || cn->fuse || cn->mm || *graft_node_domain(cn->n.src) ||
        strcmp(rt_node_op(&cn->n), "Cast") || cn->n.n_in != 1 || !cn->n.in[0] || cn->n.n_out != 1 || !cn->n.out[0])
        return 0;
    int from = cn->n.in[0]->dtype;
    return (from == GRAFT_DTYPE_FLOAT16 || from == GRAFT_DTYPE_BFLOAT16) && cn->n.out[0]->dtype == GRAFT_DTYPE_FLOAT;
}

/* GRAFT_CUDA_FUSE_NORM (on unless 0): D = Div(c, Sqrt(Add(ReduceMean(Mul(c, c), last axis,
 * keepdims), eps))), the RMSNorm without scale that exporters spell out (Gemma's v_norm in fp32), as one
 * norm head; *skip gets Mul, ReduceMean, Add, Sqrt. When c is a widening Cast read only there, the head
 * reads the Cast's input and the Cast skips too (cx_fuse_plan). */
static int spelled_norm(cx_exec *x, cx_node *d, cx_node *skip[4], float *eps)
{
    const rt_node *n = &d->n;
    if (d->place != CX_DEVICE || d->fuse || *graft_node_domain(n->src) || strcmp(rt_node_op(n), "Div") ||
        n->n_in != 2 || !n->in[0] || !n->in[1] || !n->out[0] || n->in[0]->rank < 1)
        return 0;
    const rt_tensor *c = n->in[0];
    cx_node *sq = producer(x, n->in[1]);
    if (!single(sq, "Sqrt")) return 0;
    cx_node *ad = producer(x, sq->n.in[0]);
    if (!single(ad, "Add") || ad->n.n_in != 2 || !ad->n.in[0] || !ad->n.in[1]) return 0;
    int ri = const_scalar(ad->n.in[1], eps) ? 0 : const_scalar(ad->n.in[0], eps) ? 1 : -1;
    if (ri < 0) return 0;
    cx_node *rm = producer(x, ad->n.in[ri]);
    if (!single(rm, "ReduceMean") || !rt_attr_int(&rm->n, "keepdims", 1)) return 0;
    int64_t ax = 0;
    size_t na = 0;
    const int64_t *axes = rt_attr_ints(&rm->n, "axes", &na);
    if (rm->n.n_in >= 2 && rm->n.in[1]) { /* opset 18: axes an input */
        const rt_tensor *at = rm->n.in[1];
        const cx_val *av = cx_v((rt_tensor *)at);
        if (!av->sticky || !av->on_host || at->dtype != GRAFT_DTYPE_INT64 || at->numel != 1) return 0;
        ax = *(const int64_t *)at->data;
    } else if (axes && na == 1) {
        ax = axes[0];
    } else {
        return 0;
    }
    if (ax != -1 && ax != c->rank - 1) return 0;
    cx_node *mu = producer(x, rm->n.in[0]);
    if (!single(mu, "Mul") || mu->n.n_in != 2 || mu->n.in[0] != c || mu->n.in[1] != c) return 0;
    skip[0] = mu, skip[1] = rm, skip[2] = ad, skip[3] = sq;
    return 1;
}

/* The node making what input t of a node reads, through views each read
 * only once: NULL when another node reads along the way. */
static cx_node *through_views(cx_exec *x, const rt_tensor *t)
{
    cx_node *p = t ? producer(x, t) : NULL;
    for (int depth = 0; p && p->place == CX_VIEW && depth < 4; depth++) {
        if (cx_v(p->n.out[0])->n_readers != 1 || !p->n.in[0]) return NULL;
        p = producer(x, p->n.in[0]);
    }
    return p && p->place != CX_VIEW ? p : NULL;
}

/* GRAFT_CUDA_FUSE_ROPE (on unless 0): an RMSNormalization read
 * only, through views, by a RotaryEmbedding (Gemma's and Qwen3's q/k norms)
 * only shapes its output; the rotary launch normalises its rows first. */
static void plan_rope_norm(cx_exec *x)
{
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *r = &x->nodes[i];
        if (r->place != CX_DEVICE || r->fuse || *graft_node_domain(r->n.src) ||
            strcmp(rt_node_op(&r->n), "RotaryEmbedding") || !r->n.in[0])
            continue;
        cx_node *p = through_views(x, r->n.in[0]);
        if (!p || p->fuse || !is_norm_head(p) || cx_v(p->n.out[0])->n_readers != 1) continue;
        p->fuse = 3;
        r->rope_norm = p;
        x->n_fused += 2;
        x->n_chains++;
    }
}

/* fuse 3: the output shaped (and its buffer kept), nothing computed. */
graft_status cx_fuse_shape(cx_exec *x, cx_node *cn, graft_error *err)
{
    const rt_tensor *a = cn->n.in[0];
    cx_val *y = cx_out(x, cn, 0, a->dtype, a->rank, a->dims, err);
    return y ? GRAFT_OK : err->code ? err->code : GRAFT_EIO;
}

static int add_leaf(cx_fuse *f, rt_tensor *t)
{
    for (int i = 0; i < f->n_leaf; i++)
        if (f->leaf[i] == t) return i;
    if (f->n_leaf == GOPS_FUSE_LEAVES) return -1;
    f->leaf[f->n_leaf] = t;
    return f->n_leaf++;
}

static int weight_matmul(const cx_node *cn)
{
    const rt_node *n = &cn->n;
    if (cn->place != CX_DEVICE || *graft_node_domain(n->src) || strcmp(rt_node_op(n), "MatMul") || n->n_in != 2 ||
        !n->in[0] || !n->in[1] || !n->out[0])
        return 0;
    const cx_val *b = cx_v(n->in[1]);
    return b->is_init && b->t.rank == 2 && b->t.dtype == n->in[0]->dtype && cx_is_float(b->t.dtype);
}

/* A rotary that normalises its rows first (rope_norm) and the next such
 * rotary of the same cos/sin caches and positions, with only views, later
 * members of a MatMul group (their outputs made by the group's first, before
 * the first rotary) and the second's norm (fuse 3) between them, none of
 * them reading the first's output: one launch runs both (a layer's q and k,
 * run by the second; the first leaves its arguments). Verified against the
 * goldens on the H200 (session 14); GRAFT_CUDA_FUSE_ROPE2=0: off. */
static void plan_rope_pair(cx_exec *x)
{
    const char *e = getenv("GRAFT_CUDA_FUSE_ROPE2");
    if (e && !strcmp(e, "0")) return;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *a = &x->nodes[i];
        if (!a->rope_norm || a->rope_pair || a->attn_by || a->n.n_in < 3) continue;
        const rt_tensor *ya = a->n.out[0];
        for (size_t k = i + 1; k < x->n_nodes; k++) {
            cx_node *b = &x->nodes[k];
            int reads = 0;
            for (int j = 0; j < b->n.n_in; j++) reads |= b->n.in[j] == ya;
            if (reads) break;
            if (b->rope_norm) {
                int same = b->n.n_in == a->n.n_in && !b->rope_pair && !b->attn_by;
                for (int j = 1; j < a->n.n_in && same; j++) same = a->n.in[j] == b->n.in[j];
                if (same && b->place == CX_DEVICE && a->place == CX_DEVICE) {
                    a->rope_pair = b;
                    b->rope_pair = a;
                    b->rope_second = true;
                    x->n_rope_pairs++;
                }
                break;
            }
            if (b->place == CX_VIEW || b->mm == 2 || b->fuse == 3) continue;
            break;
        }
    }
}

/* A RotaryEmbedding that normalises its rows first (rope_norm) whose
 * output only one node reads (through views). */
static int prep_rotary(const cx_node *r)
{
    return r && r->place == CX_DEVICE && r->rope_norm && !r->rope_pair && !r->attn_by && r->n.n_out == 1 &&
           r->n.out[0] && cx_v(r->n.out[0])->n_readers == 1;
}

/* Attention prologues (GRAFT_CUDA_FUSE_ATTN=0: off): an ONNX Attention of
 * fp16/bf16 whose query is a RotaryEmbedding with its norm (rope_norm),
 * read only there (through views), has the decode kernel do that rotary
 * (gcuda_attn_decode's q_gamma); likewise its key (k_gamma, with the same
 * caches and positions) and then its value when that is the spelled-out
 * norm (a fused chain: the norm without scale, a Cast back; v_norm).
 * Verified against the goldens on the H200 (session 21). Before
 * plan_rope_pair: a rotary so taken is in no pair. */
static void plan_attn_prep(cx_exec *x)
{
    const char *e = getenv("GRAFT_CUDA_FUSE_ATTN");
    if (e && !strcmp(e, "0")) return;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *a = &x->nodes[i];
        const rt_node *n = &a->n;
        if (a->place != CX_DEVICE || *graft_node_domain(n->src) || strcmp(rt_node_op(n), "Attention") ||
            n->n_in < 3 || !n->in[0] || !n->in[1] || !n->in[2])
            continue;
        int dt = n->in[0]->dtype;
        if (dt != GRAFT_DTYPE_FLOAT16 && dt != GRAFT_DTYPE_BFLOAT16) continue;
        cx_node *rq = through_views(x, n->in[0]);
        if (!prep_rotary(rq) || rq->n.out[0]->dtype != dt) continue;
        cx_node *rk = through_views(x, n->in[1]);
        int same = prep_rotary(rk) && rk != rq && rk->n.n_in == rq->n.n_in && rk->n.out[0]->dtype == dt;
        for (int j = 1; j < rq->n.n_in && same; j++) same = rq->n.in[j] == rk->n.in[j];
        cx_node *vt = same ? through_views(x, n->in[2]) : NULL;
        const cx_fuse *f = vt ? vt->fz : NULL;
        if (!(vt && vt->place == CX_DEVICE && vt->fuse == 2 && !vt->attn_by && f && f->norm == 2 && f->n == 2 &&
              f->ins[0].kind == GOPS_FUSE_CAST && f->leaf[0] && f->leaf[0]->dtype == dt && vt->n.out[0] &&
              vt->n.out[0]->dtype == dt && cx_v(vt->n.out[0])->n_readers == 1))
            vt = NULL;
        a->aprep[0] = rq;
        rq->attn_by = a;
        if (same) {
            a->aprep[1] = rk;
            rk->attn_by = a;
        }
        if (vt) {
            a->aprep[2] = vt;
            vt->attn_by = a;
        }
        x->n_attn_preps++;
    }
}

static void plan_siblings(cx_exec *x)
{
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *h = &x->nodes[i];
        if (h->mm || !weight_matmul(h)) continue;
        struct cx_mgroup g = {0};
        g.m[g.n++] = h;
        for (size_t k = i + 1; k < x->n_nodes && g.n < GCUDA_GEMV_MAX; k++) {
            cx_node *o = &x->nodes[k];
            if (!o->mm && weight_matmul(o) && o->n.in[0] == h->n.in[0] &&
                o->n.in[1]->dims[0] == h->n.in[1]->dims[0])
                g.m[g.n++] = o;
        }
        if (g.n < 2) continue;
        struct cx_mgroup *gp = malloc(sizeof *gp);
        if (!gp) return;
        *gp = g;
        h->mm = 1;
        h->mg = gp;
        for (int k = 1; k < g.n; k++) g.m[k]->mm = 2;
        x->n_mm_groups++;
        x->n_mm_nodes += (size_t)g.n;
    }
}

/* A Gather a group may take: on the device, of a constant table along
 * axis 0 (its rank known at a run; checked there). */
static int group_gather(const cx_node *cn)
{
    const rt_node *n = &cn->n;
    return cn->place == CX_DEVICE && !cn->fuse && !cn->gth && !*graft_node_domain(n->src) &&
           !strcmp(rt_node_op(n), "Gather") && n->n_in == 2 && n->n_out == 1 && n->in[0] && n->in[1] && n->out[0] &&
           cx_v(n->in[0])->is_init && cx_is_float(n->in[0]->dtype);
}

/* Gathers of one index tensor from constant tables (Gemma: the rotary
 * caches' cos and sin rows, local and global, at the positions; Llama,
 * Qwen: cos and sin) as one launch by the first
 * (gcuda_gather_rows_multi), each a kernel of its own before (E2B decode,
 * H100, session 40: 2354-2356 against 2357-2358 us of graph a step). The
 * later ones' outputs are made early, when the first runs: their tables are
 * constants and their indices the first's. GRAFT_CUDA_FUSE_GATHER=0: off. */
static void plan_gathers(cx_exec *x)
{
    const char *e = getenv("GRAFT_CUDA_FUSE_GATHER");
    if (e && !strcmp(e, "0")) return;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *h = &x->nodes[i];
        if (!group_gather(h)) continue;
        struct cx_ggroup g = {0};
        g.m[g.n++] = h;
        for (size_t k = i + 1; k < x->n_nodes && g.n < GCUDA_GATHER_MAX; k++) {
            cx_node *o = &x->nodes[k];
            if (group_gather(o) && o->n.in[1] == h->n.in[1] && o->n.in[0]->dtype == h->n.in[0]->dtype)
                g.m[g.n++] = o;
        }
        if (g.n < 2) continue;
        struct cx_ggroup *gp = malloc(sizeof *gp);
        if (!gp) return;
        *gp = g;
        h->gth = 1;
        h->gg = gp;
        for (int k = 1; k < g.n; k++) g.m[k]->gth = 2;
        x->n_gth_groups++;
        x->n_gth_nodes += (size_t)g.n;
    }
}

/* The group's first Gather: all of them in one launch, the others' outputs
 * made here and marked for this run; each its own where a table is not
 * gathered along axis 0 this run, or its rows are empty. */
graft_status cx_gather_run(cx_exec *x, cx_node *cn, graft_error *err)
{
    struct cx_ggroup *g = cn->gg;
    cx_val *ix = cx_in(cn, 1);
    int rank[GCUDA_GATHER_MAX];
    int64_t od[GCUDA_GATHER_MAX][RT_MAX_RANK], dim[GCUDA_GATHER_MAX], rows[GCUDA_GATHER_MAX];
    for (int j = 0; j < g->n; j++) {
        cx_val *a = cx_in(g->m[j], 0);
        if (cx_gather_shape(g->m[j], a, ix, &rank[j], od[j], &dim[j]) || !a->t.numel) return cn->dop->run(x, cn, err);
    }
    graft_status rc = cx_to_dev(x, ix, err);
    if (rc != GRAFT_OK) return rc;
    const void *tab[GCUDA_GATHER_MAX];
    void *out[GCUDA_GATHER_MAX];
    for (int j = 0; j < g->n; j++) {
        cx_node *m = g->m[j];
        cx_val *a = cx_in(m, 0);
        if ((rc = cx_to_dev(x, a, err)) != GRAFT_OK) return rc;
        cx_val *y = cx_out(x, m, 0, a->t.dtype, rank[j], od[j], err);
        if (!y) return err->code ? err->code : GRAFT_EIO;
        tab[j] = a->d;
        out[j] = y->d;
        rows[j] = a->t.dims[0];
        if (j) m->mm_run = x->run_no;
    }
    return gcuda_gather_rows_multi(cx_in(cn, 0)->t.dtype, g->n, tab, rows, dim, ix->d, (int64_t)ix->t.numel, out,
                                   (gcuda_stream)x->stream, err);
}

/* Node o may join the program of the group g headed by node index hi:
 * each input is a member's output, a weight, a Constant's output, or a
 * value computed from the device-resident ids (the ids themselves) by a
 * node before the head, so none is a host value the step uploads. */
static int int_joins(cx_exec *x, const struct cx_igroup *g, size_t hi, const cx_node *o)
{
    for (int j = 0; j < o->n.n_in; j++) {
        rt_tensor *t = o->n.in[j];
        if (!t) continue;
        int in_g = 0;
        for (int k = 0; k < g->n && !in_g; k++) in_g = g->m[k]->n.out[0] == t;
        if (in_g || cx_v(t)->is_init) continue;
        cx_node *p = producer(x, t);
        if (p && p->const_done) continue;
        if (!cx_v(t)->dtaint || (p && (size_t)(p - x->nodes) >= hi)) return 0;
    }
    return 1;
}

/* The integer nodes computing from the device-resident ids (Gemma: the
 * image and audio token masks' Equal, Cast, CumSum, Sub, Clip, and the
 * per-layer-input ids' compares and Wheres), each a launch of a few
 * elements, as one program run by the first (gops_int_prog: one block, a
 * barrier between ops). The later members' outputs are made early, when
 * the first runs (E2B decode, H100, session 41: 13 nodes in 1 launch,
 * 2349-2350 against 2356 us of graph a step). GRAFT_CUDA_FUSE_INT=0: off. */
static void plan_ints(cx_exec *x)
{
    const char *e = getenv("GRAFT_CUDA_FUSE_INT");
    if (e && !strcmp(e, "0")) return;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *h = &x->nodes[i];
        if (h->ig || h->fuse || h->mm || h->gth || !cx_int_member(h)) continue;
        struct cx_igroup g = {0};
        if (!int_joins(x, &g, i + 1, h)) continue;
        g.m[g.n++] = h;
        for (size_t k = i + 1; k < x->n_nodes && g.n < GOPS_IPROG_MAX; k++) {
            cx_node *o = &x->nodes[k];
            if (!o->ig && !o->fuse && !o->mm && !o->gth && cx_int_member(o) && int_joins(x, &g, i, o))
                g.m[g.n++] = o;
        }
        if (g.n < 2) continue;
        struct cx_igroup *gp = malloc(sizeof *gp);
        if (!gp) return;
        *gp = g;
        h->ig = 1;
        h->igg = gp;
        for (int k = 1; k < g.n; k++) g.m[k]->ig = 2;
        x->n_int_groups++;
        x->n_int_nodes += (size_t)g.n;
    }
}

static graft_status fuse_build(cx_exec *x, cx_node *cn, gops_fuse *gp, graft_error *err);
static graft_status cx_cpro_gemv(cx_exec *x, cx_node *h, int dtype, const gops_rows_norm *pn, const void *const *w,
                                 void *const *y, const int64_t *N, int n, int64_t K, const gops_fuse *tail, int pair,
                                 int *done, graft_error *err);

/* Elements of a chain's output. */
static int64_t fuse_numel(const gops_fuse *f)
{
    int64_t n = 1;
    for (int d = 0; d < f->rank; d++) n *= f->dims[d];
    return n;
}

/* A pair group's GEMVs with the chain after them (gelu(gate) * up): 1 in
 * *done when it ran; the outputs w/y/N are made, in group order. */
static graft_status pair_tail(cx_exec *x, cx_node *cn, cx_val *a, const void *const *w, void *const *y,
                              const int64_t *N, int64_t K, int *done, graft_error *err)
{
    *done = 0;
    struct cx_mgroup *g = cn->mg;
    cx_node *t = cn->mt;
    if (g->n != 2 || N[0] != N[1]) return GRAFT_OK;
    gops_fuse f;
    graft_status rc = fuse_build(x, t, &f, err);
    if (rc != GRAFT_OK) return rc;
    if (fuse_numel(&f) != N[0] || f.norm_dim) return GRAFT_OK;
    int first = t->fz->leaf[0] == g->m[0]->n.out[0] ? 0 : 1; /* the chain's leaf 0 */
    gops_rows_norm pn;
    const void *wp[2] = {w[first], w[1 - first]};
    void *yp[2] = {y[first], y[1 - first]};
    int cdone = 0, pro = cn->pro && cx_pro_args(x, cn, &pn);
    /* the chain before the norm, when it deferred too (form B); where the launch refuses it, the chain and the
     * norm run themselves and the pair reads the norm's output */
    if (pro && (rc = cx_cpro_gemv(x, cn, a->t.dtype, &pn, wp, yp, N, 2, K, &f, 1, &cdone, err)) != GRAFT_OK) return rc;
    if (!cdone && pro && cx_pro_args(x, cn, &pn))
        rc = gcuda_gemv_rows_fused(a->t.dtype, &pn, wp, yp, N, 2, K, &f, NULL, 1, (gcuda_stream)x->stream, err);
    else if (!cdone)
        rc = gcuda_gemv_rows_pair_tail(a->t.dtype, a->d, w[first], w[1 - first], y[first], y[1 - first], K, N[0],
                                       &f, (gcuda_stream)x->stream, err);
    if (rc != GRAFT_OK) return rc;
    t->mm_run = x->run_no;
    *done = 1;
    return GRAFT_OK;
}

/* The group's first node: all the GEMVs in one launch on a one-row step
 * (the others' outputs made here, marked for this run), else its own. */
graft_status cx_mm_run(cx_exec *x, cx_node *cn, graft_error *err)
{
    struct cx_mgroup *g = cn->mg;
    cx_val *a = cx_in(cn, 0);
    int64_t K = a->t.rank ? a->t.dims[a->t.rank - 1] : 0;
    if (!a->t.present || a->t.rank < 2 || (int64_t)a->t.numel != K || x->no_gemv) {
        graft_status rc = cx_pro_materialize(x, cn, err); /* each member reads a itself */
        return rc != GRAFT_OK ? rc : cn->dop->run(x, cn, err);
    }
    const void *w[GCUDA_GEMV_MAX];
    void *y[GCUDA_GEMV_MAX];
    int64_t N[GCUDA_GEMV_MAX];
    int nrows = 0;
    for (int j = 0; j < g->n; j++) nrows += cx_in(g->m[j], 1)->rows;
    if (nrows && nrows != g->n) return cn->dop->run(x, cn, err); /* mixed layouts: each its own */
    graft_status rc = cx_to_dev(x, a, err);
    if (rc != GRAFT_OK) return rc;
    for (int j = 0; j < g->n; j++) {
        cx_node *m = g->m[j];
        cx_val *b = cx_in(m, 1);
        if (b->t.dims[0] != K) return rt_err(&m->n, err, GRAFT_EINVAL, "inner dimensions %lld and %lld differ",
                                             (long long)K, (long long)b->t.dims[0]);
        if ((rc = cx_to_dev(x, b, err)) != GRAFT_OK) return rc;
        int64_t od[RT_MAX_RANK];
        memcpy(od, a->t.dims, (size_t)a->t.rank * sizeof *od);
        od[a->t.rank - 1] = b->t.dims[1];
        cx_val *v = cx_out(x, m, 0, a->t.dtype, a->t.rank, od, err);
        if (!v) return err->code ? err->code : GRAFT_EIO;
        w[j] = b->d;
        y[j] = v->d;
        N[j] = b->t.dims[1];
        m->mm_run = x->run_no;
    }
    if (nrows && cn->mt) {
        int done = 0;
        if ((rc = pair_tail(x, cn, a, w, y, N, K, &done, err)) != GRAFT_OK || done) return rc;
    }
    gops_rows_norm pn;
    if (nrows && cn->pro && cx_pro_args(x, cn, &pn)) return cx_pro_gemv(x, cn, a->t.dtype, &pn, w, y, N, g->n, K, err);
    if (nrows) return gcuda_gemv_rows_multi(a->t.dtype, a->d, w, y, N, g->n, K, (gcuda_stream)x->stream, err);
    size_t wsb = 0;
    if ((rc = gcuda_gemv_multi_plan(a->t.dtype, K, N, g->n, &wsb, err)) != GRAFT_OK) return rc;
    void *ws = wsb ? cx_workspace(x, cn, wsb, err) : NULL;
    if (wsb && !ws) return err->code;
    return gcuda_gemv_multi(a->t.dtype, a->d, w, y, N, g->n, K, ws, wsb, (gcuda_stream)x->stream, err);
}

graft_status cx_rows_plan(cx_exec *x, graft_error *err)
{
    const char *env = getenv("GRAFT_CUDA_ROWS");
    if (env && !strcmp(env, "0")) return GRAFT_OK;
    for (size_t v = 0; v < x->n_vals; v++) x->vals[v]->rows_ok = 0;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *cn = &x->nodes[i];
        if (!weight_matmul(cn)) continue;
        cx_val *b = cx_v(cn->n.in[1]);
        if (b->on_dev && b->sticky && !b->base && b->dcap >= b->t.nbytes && b->t.nbytes && !b->rows &&
            b->rows_ok == 0)
            b->rows_ok = 1;
    }
    /* any other reader (as an A, or a node that is not a device MatMul,
     * or a view) or a graph output keeps the layout */
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *cn = &x->nodes[i];
        int wm = weight_matmul(cn);
        for (int j = 0; j < cn->n.n_in; j++)
            if (cn->n.in[j] && !(wm && j == 1)) cx_v(cn->n.in[j])->rows_ok = -1;
    }
    for (size_t i = 0; i < x->n_out; i++) x->vals[x->out_idx[i]]->rows_ok = -1;
    for (size_t v = 0; v < x->n_vals; v++) {
        cx_val *b = x->vals[v];
        if (b->rows_ok != 1) continue;
        int64_t K = b->t.dims[0], N = b->t.dims[1];
        size_t es = rt_dtype_size(b->t.dtype);
        void *nd = NULL;
        if (cudaMalloc(&nd, b->dcap) != cudaSuccess) { /* no room for the copy: this one stays [K, N] */
            (void)cudaGetLastError();
            continue;
        }
        gops_shape sh = {0};
        sh.rank = 2;
        sh.dims[0] = N; /* out [n, k] = in [k, n] */
        sh.dims[1] = K;
        sh.st[0][0] = 1;
        sh.st[0][1] = N;
        sh.st[1][0] = K;
        sh.st[1][1] = 1;
        graft_status rc = gops_copy(es, &sh, b->d, nd, (gcuda_stream)x->stream, err);
        if (rc != GRAFT_OK) {
            cudaFree(nd);
            return rc;
        }
        cudaError_t e = cudaStreamSynchronize(x->stream);
        if (e != cudaSuccess) {
            cudaFree(nd);
            const cx_node *rd = NULL; /* the error names a MatMul that reads it */
            for (size_t i = 0; i < x->n_nodes && !rd; i++)
                if (x->nodes[i].n.n_in > 1 && x->nodes[i].n.in[1] == &b->t) rd = &x->nodes[i];
            return rd ? cx_cuda_err(rd, err, e, "transposing its weight") : GRAFT_EIO;
        }
        cudaFree(b->d);
        b->d = nd;
        b->rows = true;
        x->n_rows++;
        x->rows_bytes += b->t.nbytes;
    }
    return GRAFT_OK;
}

/* cn's output made on the device this run by the launch of a node before
 * it (mm_run: a group's first GEMV, a GEMV running cn's chain or skip
 * norm). */
bool cx_made(const cx_exec *x, const cx_node *cn)
{
    const cx_val *v = cx_v(cn->n.out[0]);
    return cn->mm_run == x->run_no && v->t.present && v->on_dev;
}

/* A later node of a group: nothing to do when the first made its output. */
graft_status cx_mm_follow(cx_exec *x, cx_node *cn, graft_error *err)
{
    if (cx_made(x, cn)) return GRAFT_OK;
    /* the side stream's plan put this node where its group's first runs: after the fork, the capture is dropped */
    cx_side_fail(x, "a group's member launched itself after the fork");
    return cn->dop->run(x, cn, err);
}

static size_t env_mb(const char *name)
{
    const char *e = getenv(name);
    long mb = e ? strtol(e, NULL, 10) : 0;
    return mb > 0 ? (size_t)mb << 20 : 0;
}

/* L2 prefetch of later weights, opt-in: measured much slower (H100, session
 * 26: E2B 383 tok/s; ATTN_PF=32 177, GEMV_PF=16 with a 32 MB window 145;
 * the asks come from a few blocks' threads, and the step waits for them):
 * GRAFT_CUDA_ATTN_PF=MB (GRAFT_CUDA_ATTN_PF_LATE=1: the blocks with keys ask
 * after their partials), the decode attention kernel; GRAFT_CUDA_GEMV_PF=MB,
 * each GEMV whose own weights are fewer bytes than that (q/k/v, o, the
 * per-layer-input gate and projection: bound by latency), before its wait.
 * Each node points at the first weight MatMul after it (a group's first
 * stands for the group), where its asks start (cx_pf_plan). */
static void plan_pf(cx_exec *x)
{
    x->apf_bytes = env_mb("GRAFT_CUDA_ATTN_PF");
    x->gpf_bytes = env_mb("GRAFT_CUDA_GEMV_PF");
    if (!x->apf_bytes && !x->gpf_bytes) return;
    const char *late = getenv("GRAFT_CUDA_ATTN_PF_LATE");
    x->apf_late = late && !strcmp(late, "1");
    x->pf_window = env_mb("GRAFT_CUDA_PF_WINDOW");
    if (!x->pf_window) x->pf_window = x->apf_bytes > x->gpf_bytes ? x->apf_bytes : x->gpf_bytes;
    int next = 0;
    for (size_t i = x->n_nodes; i-- > 0;) {
        cx_node *cn = &x->nodes[i];
        cn->wm_next = next;
        if (cn->mm != 2 && weight_matmul(cn)) {
            next = (int)i + 1;
            cn->gpf = x->gpf_bytes && cx_group_weight_bytes(cn) < x->gpf_bytes;
        }
    }
}

static void plan_tails(cx_exec *x);
static void plan_prologue(cx_exec *x);
static void plan_tail_skip(cx_exec *x);
static void plan_tail_norm(cx_exec *x);
static void plan_chain_pro(cx_exec *x);

void cx_fuse_plan(cx_exec *x)
{
    const char *env = getenv("GRAFT_CUDA_FUSE"), *fn = getenv("GRAFT_CUDA_FUSE_NORM");
    if (x->check || (env && !strcmp(env, "0"))) {
        plan_pf(x);
        return;
    }
    int fuse_norm = !fn || strcmp(fn, "0");
    plan_siblings(x);
    plan_gathers(x);
    plan_ints(x);
    /* readers of each value (a graph output counts as two) */
    for (size_t v = 0; v < x->n_vals; v++) x->vals[v]->n_readers = 0;
    for (size_t i = 0; i < x->n_out; i++) x->vals[x->out_idx[i]]->n_readers += 2;
    for (size_t i = 0; i < x->n_nodes; i++) {
        rt_node *n = &x->nodes[i].n;
        for (int j = 0; j < n->n_in; j++) {
            if (!n->in[j]) continue;
            cx_val *v = cx_v(n->in[j]);
            v->n_readers++;
            v->reader = i;
        }
    }
    /* spelled-out norms first: their Add -> Sqrt would otherwise start an
     * elementwise chain before the Div is reached */
    size_t nn = x->n_nodes ? x->n_nodes : 1;
    char *n2 = fuse_norm ? calloc(nn, 1) : NULL;
    float *n2eps = fuse_norm ? calloc(nn, sizeof *n2eps) : NULL;
    cx_node **n2skip = fuse_norm ? calloc(nn * 4, sizeof *n2skip) : NULL;
    for (size_t i = 0; n2 && n2eps && n2skip && i < x->n_nodes; i++) {
        if (!spelled_norm(x, &x->nodes[i], &n2skip[4 * i], &n2eps[i])) continue;
        n2[i] = 1;
        for (int k = 0; k < 4; k++) n2skip[4 * i + k]->fuse = 1;
        x->n_fused += 4;
    }
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *h = &x->nodes[i];
        if (h->fuse) continue;
        gops_fuse_ins in0;
        int norm = is_norm_head(h) ? 1 : n2 && n2[i] ? 2 : 0;
        if (!norm && !member_ins(h, &in0)) continue;
        cx_fuse f;
        cx_node *wcast = NULL;
        memset(&f, 0, sizeof f);
        f.norm = norm;
        f.eps = norm == 2 ? n2eps[i] : 0.0f;
        f.m[f.n++] = h;
        add_leaf(&f, h->n.in[0]);
        if (norm == 1) {
            add_leaf(&f, h->n.in[1]); /* gamma: leaf 1 */
        } else if (norm == 2) {
            /* c = Cast(x) from fp16/bf16 to fp32 read only by the norm: the
             * norm reads x itself (the widening is exact), the Cast skips */
            cx_node *cc = producer(x, h->n.in[0]);
            if (widening_cast(cc) && cx_v(cc->n.out[0])->n_readers == 3) {
                f.leaf[0] = cc->n.in[0];
                wcast = cc;
            }
            f.leaf[f.n_leaf++] = f.leaf[0]; /* no gamma: leaf 1 holds its place, unread */
        } else {
            if (in0.kind == GOPS_FUSE_BINARY) in0.leaf = add_leaf(&f, h->n.in[1]);
            f.ins[0] = in0;
        }
        int n_ins = norm ? 0 : 1;
        cx_node *cur = h;
        for (;;) {
            cx_val *v = cx_v(cur->n.out[0]);
            if (v->n_readers != 1 || n_ins == GOPS_FUSE_MAX) break;
            cx_node *nx = &x->nodes[v->reader];
            gops_fuse_ins in;
            if (nx->fuse || !member_ins(nx, &in)) break;
            int slot = chain_slot(nx, cur->n.out[0]);
            if (slot < 0) break;
            if (in.kind == GOPS_FUSE_BINARY) {
                /* the other operand must be computed before the chain's tail
                 * runs: any input of a later node is (topological order) */
                in.chain_b = slot == 1;
                if (nx->n.in[1 - slot]->dtype != cur->n.out[0]->dtype) break;
                in.leaf = add_leaf(&f, nx->n.in[1 - slot]);
                if (in.leaf < 0) break;
            }
            f.ins[n_ins++] = in;
            f.m[f.n++] = nx;
            cur = nx;
        }
        if (f.n < 2 && norm != 2) continue;
        cx_fuse *fp = malloc(sizeof *fp);
        if (!fp) { /* unfused: fine, but a spelled-out norm's nodes must run again */
            for (int k = 0; k < 4 && norm == 2; k++) n2skip[4 * i + k]->fuse = 0;
            if (norm == 2) x->n_fused -= 4;
            continue;
        }
        *fp = f;
        for (int k = 0; k < f.n - 1; k++) f.m[k]->fuse = 1;
        if (wcast) {
            wcast->fuse = 1;
            x->n_fused++;
        }
        cx_node *tail = f.m[f.n - 1];
        tail->fuse = 2;
        tail->fz = fp;
        x->n_fused += (size_t)f.n;
        x->n_chains++;
    }
    free(n2);
    free(n2eps);
    free(n2skip);
    const char *fr = getenv("GRAFT_CUDA_FUSE_ROPE");
    if (!fr || strcmp(fr, "0")) {
        plan_rope_norm(x);
        plan_attn_prep(x);
        plan_rope_pair(x);
    }
    plan_tails(x);
    plan_tail_skip(x);
    plan_prologue(x);
    plan_chain_pro(x);
    plan_tail_norm(x);
    plan_pf(x); /* after the groups: a group's first stands for it */
}

/* A member before the tail: nothing computed, its output left absent. */
graft_status cx_fuse_skip(cx_exec *x, cx_node *cn, graft_error *err)
{
    for (int j = 0; j < cn->n.n_out; j++) {
        cx_val *v = cx_v(cn->n.out[j]);
        if (!v) continue;
        v->t.present = false;
        v->on_dev = v->on_host = false;
    }
    return GRAFT_OK;
}

/* The launch description of tail cn's chain; its output made. */
static graft_status fuse_build(cx_exec *x, cx_node *cn, gops_fuse *gp, graft_error *err)
{
    cx_fuse *f = cn->fz;
    gops_fuse g;
    memset(&g, 0, sizeof g);
    int rank = 0;
    int64_t od[RT_MAX_RANK];
    /* the output's shape: every leaf broadcast together (gamma aside) */
    for (int l = 0; l < f->n_leaf; l++) {
        if (f->norm && l == 1) continue;
        rt_tensor *t = f->leaf[l];
        if (!t || !t->present)
            return rt_err(&cn->n, err, GRAFT_EINVAL, "fused chain: operand %d of the chain is missing", l);
        int r2;
        int64_t d2[RT_MAX_RANK];
        if (l == 0) {
            rank = t->rank;
            memcpy(od, t->dims, (size_t)rank * sizeof *od);
            continue;
        }
        if (!k_broadcast(rank, od, t->rank, t->dims, &r2, d2))
            return rt_err(&cn->n, err, GRAFT_EINVAL, "fused chain: shapes do not broadcast");
        rank = r2;
        memcpy(od, d2, (size_t)rank * sizeof *od);
    }
    if (rank > GOPS_MAX_RANK) return rt_err(&cn->n, err, GRAFT_EUNSUPPORTED, "fused chain: rank %d", rank);
    g.rank = rank;
    memcpy(g.dims, od, (size_t)rank * sizeof *od);
    for (int l = 0; l < f->n_leaf; l++) {
        cx_val *v = cx_v(f->leaf[l]);
        graft_status rc = cx_to_dev(x, v, err);
        if (rc != GRAFT_OK) return rc;
        g.leaf[l] = v->d;
        g.leaf_dtype[l] = v->t.dtype;
        if (!(f->norm && l == 1)) k_bstrides(v->t.rank, v->t.dims, rank, od, g.st[l]);
    }
    if (f->norm) {
        rt_tensor *a = f->leaf[0], *gm = f->leaf[1];
        g.norm_dim = a->dims[a->rank - 1];
        if ((f->norm == 1 && (int64_t)gm->numel != g.norm_dim) || rank != a->rank ||
            (uint64_t)rt_numel(rank, od) != a->numel)
            return rt_err(&cn->n, err, GRAFT_EINVAL, "fused chain: the norm's row is not the output's");
        g.gamma = f->norm == 1 ? g.leaf[1] : NULL;
        g.eps = f->norm == 1 ? rt_attr_float(&f->m[0]->n, "epsilon", 1e-5f) : f->eps;
        g.norm_div = f->norm == 2;
        g.norm_dtype = f->m[0]->n.out[0]->dtype;
    }
    int n_ins = f->n - (f->norm ? 1 : 0);
    g.n_ins = n_ins;
    g.n_leaf = f->n_leaf;
    memcpy(g.ins, f->ins, (size_t)n_ins * sizeof *g.ins);
    int ydt = cn->n.out[0]->dtype;
    cx_val *y = cx_out(x, cn, 0, ydt, rank, od, err);
    if (!y) return err->code ? err->code : GRAFT_EIO;
    g.y = y->d;
    g.y_dtype = ydt;
    *gp = g;
    return GRAFT_OK;
}

graft_status cx_fuse_run(cx_exec *x, cx_node *cn, graft_error *err)
{
    gops_fuse g;
    graft_status rc = fuse_build(x, cn, &g, err);
    if (rc != GRAFT_OK) return rc;
    /* a v norm the Attention after it may do (plan_attn_prep): the row is
     * the norm's, the one instruction a Cast back to the leaf's type */
    if (cn->attn_by && g.norm_div && !g.gamma && !g.sk_y && g.n_ins == 1 && g.ins[0].kind == GOPS_FUSE_CAST &&
        g.leaf_dtype[0] == g.y_dtype && g.rank >= 1 && g.norm_dim == g.dims[g.rank - 1] &&
        (cn->attn_g || (cn->attn_g = malloc(sizeof *cn->attn_g)))) {
        *cn->attn_g = g;
        cn->attn_run = x->run_no;
        return GRAFT_OK;
    }
    return gops_fused(&g, (gcuda_stream)x->stream, err);
}

/* Runs now what the Attention cn's prologue nodes left to it this run
 * (plan_attn_prep) and did not take. */
graft_status cx_attn_flush(cx_exec *x, cx_node *cn, graft_error *err)
{
    for (int k = 0; k < 3; k++) {
        cx_node *p = cn->aprep[k];
        if (!p || p->attn_run != x->run_no) continue;
        p->attn_run = 0;
        graft_status rc = k < 2 ? gcuda_rotary(&p->rope_args, (gcuda_stream)x->stream, err)
                                : gops_fused(p->attn_g, (gcuda_stream)x->stream, err);
        if (rc != GRAFT_OK) return rc;
    }
    return GRAFT_OK;
}

static graft_status skip_args(cx_exec *x, cx_node *t, cx_node *sn, gops_fuse *g, graft_error *err);

graft_status cx_tail_gemv(cx_exec *x, cx_node *cn, cx_val *a, cx_val *b, cx_val *y, int *done, graft_error *err)
{
    *done = 0;
    cx_node *t = cn->mt;
    int64_t K = b->t.dims[0], N = b->t.dims[1];
    if ((int64_t)y->t.numel != N) return GRAFT_OK;
    gops_fuse g;
    graft_status rc = fuse_build(x, t, &g, err);
    if (rc != GRAFT_OK) return rc;
    if (fuse_numel(&g) != N || (g.norm_dim && g.norm_dim != N)) return GRAFT_OK; /* broadcast past y: alone */
    if (!g.norm_dim && cn->cpro) { /* form A: the chain that makes a, computed first */
        const void *w = b->d;
        void *yp = y->d;
        if ((rc = cx_cpro_gemv(x, cn, a->t.dtype, NULL, &w, &yp, &N, 1, K, &g, 0, done, err)) != GRAFT_OK) return rc;
        if (*done) {
            t->mm_run = x->run_no;
            return GRAFT_OK;
        }
    }
    unsigned *counter = NULL;
    if (g.norm_dim && !(counter = cx_workspace(x, cn, sizeof *counter, err))) return err->code;
    if (g.norm_dim && t->tail_skip && (rc = skip_args(x, t, t->tail_skip, &g, err)) != GRAFT_OK) return rc;
    rc = gcuda_gemv_rows_tail(a->t.dtype, a->d, b->d, y->d, K, N, &g, counter, (gcuda_stream)x->stream, err);
    if (rc != GRAFT_OK) return rc;
    t->mm_run = x->run_no;
    if (g.sk_y) t->tail_skip->mm_run = x->run_no;
    *done = 1;
    return GRAFT_OK;
}

/* The skip norm sn (fuse 6) after tail t's chain, in g: its operands on
 * the device and its outputs made; g left without it when the shapes do
 * not allow it this run (sn then runs itself). */
static graft_status skip_args(cx_exec *x, cx_node *t, cx_node *sn, gops_fuse *g, graft_error *err)
{
    const rt_tensor *c = t->n.out[0];
    if (!*graft_node_domain(sn->n.src)) { /* an RMSNormalization (plan_tail_norm): c's one row, a zero skip */
        cx_val *a = cx_in(sn, 0), *gm = cx_in(sn, 1);
        int64_t ax = rt_attr_int(&sn->n, "axis", -1);
        if (ax < 0) ax += a->t.rank;
        const size_t es = rt_dtype_size(a->t.dtype);
        if (ax != a->t.rank - 1 || (int64_t)a->t.numel != g->norm_dim || !gm || !gm->t.present ||
            (int64_t)gm->t.numel != g->norm_dim || !es)
            return GRAFT_OK;
        graft_status rc = cx_to_dev(x, gm, err);
        if (rc != GRAFT_OK) return rc;
        void *zero = cx_workspace(x, sn, (size_t)g->norm_dim * es, err); /* zeroed when made, never written */
        if (!zero) return err->code ? err->code : GRAFT_EIO;
        cx_val *y = cx_out(x, sn, 0, a->t.dtype, a->t.rank, a->t.dims, err);
        if (!y) return err->code ? err->code : GRAFT_EIO;
        g->sk_x = zero;
        g->sk_bias = NULL;
        g->sk_gamma = gm->d;
        g->sk_y = y->d;
        g->sk_sum = NULL;
        g->sk_eps = rt_attr_float(&sn->n, "epsilon", 1e-5f);
        return GRAFT_OK;
    }
    int ci = sn->n.in[0] == c ? 0 : 1;
    cx_val *a = cx_in(sn, 0), *o = cx_in(sn, 1 - ci), *gm = cx_in(sn, 2), *bias = sn->n.n_in > 3 ? cx_in(sn, 3) : NULL;
    if (bias && !bias->t.present) bias = NULL;
    if (!o || !o->t.present || o->t.numel != c->numel || !gm || !gm->t.present || (int64_t)gm->t.numel != g->norm_dim ||
        (bias && (int64_t)bias->t.numel != g->norm_dim) || a->t.dims[a->t.rank - 1] != g->norm_dim)
        return GRAFT_OK;
    graft_status rc;
    if ((rc = cx_to_dev(x, o, err)) != GRAFT_OK || (rc = cx_to_dev(x, gm, err)) != GRAFT_OK) return rc;
    if (bias && (rc = cx_to_dev(x, bias, err)) != GRAFT_OK) return rc;
    cx_val *y = cx_out(x, sn, 0, a->t.dtype, a->t.rank, a->t.dims, err), *sum = NULL;
    if (!y) return err->code ? err->code : GRAFT_EIO;
    if (sn->n.n_out > 3 && *graft_node_output(sn->n.src, 3)) {
        sum = cx_out(x, sn, 3, a->t.dtype, a->t.rank, a->t.dims, err);
        if (!sum) return err->code ? err->code : GRAFT_EIO;
    }
    g->sk_x = o->d;
    g->sk_bias = bias ? bias->d : NULL;
    g->sk_gamma = gm->d;
    g->sk_y = y->d;
    g->sk_sum = sum ? sum->d : NULL;
    g->sk_eps = rt_attr_float(&sn->n, "epsilon", 1e-5f);
    return GRAFT_OK;
}

graft_status cx_skip_follow(cx_exec *x, cx_node *cn, graft_error *err)
{
    if (cx_made(x, cn)) return GRAFT_OK;
    return cn->dop->run(x, cn, err);
}

graft_status cx_tail_follow(cx_exec *x, cx_node *cn, graft_error *err)
{
    if (cx_made(x, cn)) return GRAFT_OK;
    return cx_fuse_run(x, cn, err);
}

static int made_before(cx_exec *x, const rt_tensor *t, size_t i)
{
    cx_node *p = producer(x, t);
    return !p || (size_t)(p - x->nodes) < i;
}

/* GEMV tails: a weight MatMul (alone, or a gate/up pair) whose output is read only by
 * the head of a fused chain (an elementwise one, or one headed by an
 * RMSNorm over that output), or by a lone RMSNorm, runs that chain in its
 * GEMV's launch (gcuda_gemv_rows_tail) when its weight is stored [N, K]
 * and the step has one row; the chain's tail (fuse 4) then has nothing to
 * do. The chain's other operands must be computed before the MatMul.
 * GRAFT_CUDA_FUSE_TAIL=0: off. */
static void plan_tails(cx_exec *x)
{
    const char *e = getenv("GRAFT_CUDA_FUSE_TAIL");
    if (e && !strcmp(e, "0")) return;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *m = &x->nodes[i], *mo = m; /* mo: the member whose output the chain reads */
        if (m->mm == 2 || m->fuse || m->mt || !weight_matmul(m)) continue;
        /* a pair of siblings (gate, up): the chain reads one's output first */
        cx_node *other = NULL;
        if (m->mm == 1) {
            if (!m->mg || m->mg->n != 2) continue;
            cx_node *a = m->mg->m[0], *b = m->mg->m[1];
            if (cx_v(a->n.out[0])->n_readers == 1 && x->nodes[cx_v(a->n.out[0])->reader].fuse == 1) mo = a, other = b;
            else mo = b, other = a;
        }
        cx_val *o = cx_v(mo->n.out[0]);
        if (o->n_readers != 1) continue;
        cx_node *h = &x->nodes[o->reader], *t = h;
        if (h->fuse == 1) { /* a chain's head: its tail owns the chain */
            while (t->fuse == 1) {
                cx_val *v = cx_v(t->n.out[0]);
                if (v->n_readers != 1) break;
                t = &x->nodes[v->reader];
            }
            if (t->fuse != 2 || !t->fz || t->fz->m[0] != h || t->fz->norm == 2) continue;
        } else if (h->fuse || !is_norm_head(h)) {
            continue;
        }
        const cx_fuse *f = t->fz;
        if (f ? f->leaf[0] != mo->n.out[0] : h->n.in[0] != mo->n.out[0]) continue;
        if (other && (!f || f->norm)) continue; /* a pair: an elementwise chain only */
        int ok = 1;
        if (f) {
            for (int l = 1; l < f->n_leaf && ok; l++)
                ok = made_before(x, f->leaf[l], i) || (other && f->leaf[l] == other->n.out[0]);
        } else {
            ok = made_before(x, h->n.in[1], i);
        }
        if (!ok) continue;
        if (!f) { /* a lone RMSNorm: a chain of its own, no instructions */
            cx_fuse *fp = calloc(1, sizeof *fp);
            if (!fp) continue;
            fp->n = 1;
            fp->m[0] = h;
            fp->norm = 1;
            fp->leaf[0] = h->n.in[0];
            fp->leaf[1] = h->n.in[1];
            fp->n_leaf = 2;
            h->fz = fp;
        }
        t->fuse = 4;
        m->mt = t;
        x->n_tails++;
    }
}

/* The one reader of the output of m's tail, when that tail (of one
 * weight MatMul) is headed by a norm over m's output and has no skip norm
 * yet, and the reader is a device node no other fusion has taken; NULL
 * otherwise (plan_tail_skip, plan_tail_norm). */
static cx_node *tail_norm_reader(cx_exec *x, cx_node *m)
{
    cx_node *t = m->mt;
    if (!t || m->mm || !t->fz || !t->fz->norm || t->tail_skip) return NULL;
    cx_val *cv = cx_v(t->n.out[0]);
    if (cv->n_readers != 1) return NULL;
    cx_node *s = &x->nodes[cv->reader];
    return s->place == CX_DEVICE && !s->fuse && !s->mm ? s : NULL;
}

/* Skip norms after a GEMV's chain: the tail (fuse 4) of one weight
 * MatMul, headed by a norm over the MatMul's output, whose output only a
 * com.microsoft SkipSimplifiedLayerNormalization reads (as its input or
 * skip: Gemma's post-attention norm, then the pre-feedforward skip norm)
 * has that skip norm run after it by the GEMV's last block (gops_fuse.sk_y,
 * skip_args): one launch fewer a layer. The skip norm's other operands
 * must be made before the MatMul. Before plan_prologue: a skip norm so
 * computed is no gate/up prologue. GRAFT_CUDA_FUSE_SKIP=0: off. */
static void plan_tail_skip(cx_exec *x)
{
    const char *e = getenv("GRAFT_CUDA_FUSE_SKIP");
    if (e && !strcmp(e, "0")) return;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *m = &x->nodes[i], *t = m->mt, *s = tail_norm_reader(x, m);
        if (!s) continue;
        const rt_tensor *c = t->n.out[0];
        const rt_node *n = &s->n;
        if (strcmp(graft_node_domain(n->src), "com.microsoft") ||
            strcmp(rt_node_op(n), "SkipSimplifiedLayerNormalization") || n->n_in < 3 || !n->in[0] || !n->in[1] ||
            !n->in[2] || !n->out[0] || (n->in[0] != c && n->in[1] != c))
            continue;
        int ok = made_before(x, n->in[n->in[0] == c ? 1 : 0], i) && made_before(x, n->in[2], i) &&
                 (n->n_in < 4 || !n->in[3] || made_before(x, n->in[3], i));
        for (int j = 0; j < n->n_in && ok; j++) ok = !n->in[j] || n->in[j]->dtype == c->dtype;
        if (!ok) continue;
        s->fuse = 6;
        t->tail_skip = s;
        x->n_tail_skips++;
    }
}

/* An RMSNormalization that alone reads such a tail's output and that no
 * GEMV took as its prologue (plan_prologue, plan_chain_pro; Gemma's final
 * norm, before an LM head with a softcap tail): run by the same last block
 * after the chain, as a skip norm whose skip is a zero row (skip_args), not
 * as a kernel of its own. After plan_chain_pro, so that it takes only what
 * the prologues left (E2B decode, H100, session 41: 2349-2350 against 2356
 * us of graph a step). GRAFT_CUDA_FUSE_TAILNORM=0: off. */
static void plan_tail_norm(cx_exec *x)
{
    const char *e = getenv("GRAFT_CUDA_FUSE_TAILNORM"), *sk = getenv("GRAFT_CUDA_FUSE_SKIP");
    if ((e && !strcmp(e, "0")) || (sk && !strcmp(sk, "0"))) return;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *m = &x->nodes[i], *t = m->mt, *s = t && t->fuse == 4 ? tail_norm_reader(x, m) : NULL;
        if (!s) continue;
        const rt_tensor *c = t->n.out[0];
        const rt_node *n = &s->n;
        if (*graft_node_domain(n->src) || strcmp(rt_node_op(n), "RMSNormalization") || n->n_in < 2 || n->in[0] != c ||
            !n->in[1] || !n->out[0] || n->in[1]->dtype != c->dtype || !made_before(x, n->in[1], i))
            continue;
        int ok = 1;
        for (int j = 1; j < n->n_out && ok; j++) ok = !n->out[j] || !cx_v(n->out[j])->n_readers;
        if (!ok) continue;
        s->fuse = 6;
        t->tail_skip = s;
        x->n_tail_skips++;
    }
}

int cx_fuse_members(const cx_node *cn, cx_node *const **m)
{
    if (!cn->fz) return 0;
    *m = cn->fz->m;
    return cn->fz->n;
}

void cx_fuse_free(cx_node *cn)
{
    free(cn->attn_g);
    cn->attn_g = NULL;
    if (cn->fz) free(cn->fz->built);
    free(cn->fz);
    cn->fz = NULL;
    free(cn->mg);
    cn->mg = NULL;
    free(cn->gg);
    cn->gg = NULL;
    if (cn->igg)
        for (int k = 0; k < cn->igg->nk; k++) {
            gops_int_prog_free(&cn->igg->kd[k]);
            free(cn->igg->kp[k]);
        }
    free(cn->igg);
    cn->igg = NULL;
}

static graft_status cpro_materialize(cx_exec *x, cx_node *r, graft_error *err);

/* Norm prologues: an RMSNormalization (last axis) or a skip RMSNorm whose
 * first output only weight MatMuls read, all of one sibling group or a
 * single one (without a tail), is computed by their GEMV on one-row steps
 * (gcuda_gemv_rows_fused); the norm node then only shapes its outputs (the
 * skip norm's sum is written by the GEMV's first block).
 * GRAFT_CUDA_FUSE_PRO=0: off. */
static int pro_norm_kind(const cx_node *cn)
{
    const rt_node *n = &cn->n;
    if (cn->place != CX_DEVICE || cn->fuse || cn->mm || !n->n_out || !n->out[0]) return 0;
    const char *dom = graft_node_domain(n->src), *op = rt_node_op(n);
    if (!*dom && is_norm_head(cn)) return 1;
    if (strcmp(dom, "com.microsoft") || strcmp(op, "SkipSimplifiedLayerNormalization") || n->n_in < 3) return 0;
    /* mean and inv_std_var not even named. The exporters of our fixtures
     * name them (unread) before gate/up, so their skip norm stays its own
     * kernel: computed by the gate/up pair it measured 0.56 ms a step
     * slower on E2B (each block recomputes the norm and reads x, skip and
     * gamma per weight chunk; bench/RESULTS.md, session 13). Staging the
     * normalised x in shared memory once per block comes first. */
    for (int j = 1; j < 3 && j < n->n_out; j++)
        if (n->out[j] && *graft_node_output(n->src, (size_t)j)) return 0;
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] && n->in[j]->dtype != n->in[0]->dtype) return 0;
    return 2;
}

/* m is a later member of h's sibling group. */
static int in_group(const cx_node *h, const cx_node *m)
{
    if (h->mm != 1 || !h->mg || m->mm != 2) return 0;
    for (int z = 1; z < h->mg->n; z++)
        if (h->mg->m[z] == m) return 1;
    return 0;
}

static void plan_prologue(cx_exec *x)
{
    const char *e = getenv("GRAFT_CUDA_FUSE_PRO");
    if (e && !strcmp(e, "0")) return;
    for (size_t i = 0; i < x->n_nodes; i++) {
        cx_node *r = &x->nodes[i];
        if (!pro_norm_kind(r)) continue;
        const rt_tensor *o = r->n.out[0];
        cx_node *head = NULL;
        int readers = 0, ok = 1;
        /* the first reader is a group's first (members follow it) or a lone
         * MatMul; every later one a member of that group */
        for (size_t k = i + 1; k < x->n_nodes && ok; k++) {
            cx_node *m = &x->nodes[k];
            for (int j = 0; j < m->n.n_in && ok; j++) {
                if (m->n.in[j] != o) continue;
                ok = j == 0 && weight_matmul(m) && (head ? in_group(head, m) : m->mm != 2);
                if (!head) head = m;
                readers++;
            }
        }
        if (!ok || !head || cx_v((rt_tensor *)o)->n_readers != readers) continue;
        if (readers != (head->mm == 1 ? head->mg->n : 1)) continue;
        if (head->mm == 0 && head->mt) continue; /* a single GEMV's tail and a prologue: not together */
        if (head->mm == 1 && head->mt && (!head->mg || head->mg->n != 2)) continue;
        head->pro = r;
        r->pro = head;
        r->fuse = 5;
        x->n_pros++;
    }
}

/* A prologue norm's operands: x and gamma; a skip RMSNorm's (com.microsoft:
 * input, skip, gamma, bias) also skip and bias (NULL when absent). 1: a skip norm. */
static int pro_operands(cx_node *r, cx_val **a, cx_val **g, cx_val **sk, cx_val **bias)
{
    int skip = !strcmp(graft_node_domain(r->n.src), "com.microsoft");
    *a = cx_in(r, 0);
    *g = cx_in(r, skip ? 2 : 1);
    *sk = skip ? cx_in(r, 1) : NULL;
    *bias = skip && r->n.n_in > 3 ? cx_in(r, 3) : NULL;
    if (*bias && !(*bias)->t.present) *bias = NULL;
    return skip;
}

/* The MatMuls of a prologue's head (a group's or the one). */
static int pro_weights_rows(cx_node *h)
{
    int n = h->mm == 1 && h->mg ? h->mg->n : 1;
    for (int j = 0; j < n; j++) {
        cx_node *m = n > 1 ? h->mg->m[j] : h;
        if (!cx_in(m, 1) || !cx_in(m, 1)->rows) return 0;
    }
    return 1;
}

graft_status cx_pro_norm(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_val *a, *g, *sk, *bias;
    int skip = pro_operands(cn, &a, &g, &sk, &bias);
    int64_t dim = a && a->t.rank ? a->t.dims[a->t.rank - 1] : 0;
    int ok = a && a->t.present && dim > 0 && (int64_t)a->t.numel == dim && g && g->t.present &&
             (int64_t)g->t.numel == dim && (!sk || (sk->t.present && sk->t.numel == a->t.numel)) &&
             (!bias || (int64_t)bias->t.numel == dim) && pro_weights_rows(cn->pro) &&
             !x->no_gemv;
    if (ok && !skip) {
        int ax = (int)rt_attr_int(&cn->n, "axis", -1);
        ok = ax == -1 || ax == a->t.rank - 1;
    }
    if (!ok) {
        graft_status rc = cpro_materialize(x, cn, err); /* its input first, when a chain deferred it */
        return rc != GRAFT_OK ? rc : cn->dop->run(x, cn, err);
    }
    graft_status rc;
    if ((rc = cx_to_dev(x, a, err)) != GRAFT_OK || (rc = cx_to_dev(x, g, err)) != GRAFT_OK) return rc;
    if (sk && (rc = cx_to_dev(x, sk, err)) != GRAFT_OK) return rc;
    if (bias && (rc = cx_to_dev(x, bias, err)) != GRAFT_OK) return rc;
    cx_val *y = cx_out(x, cn, 0, a->t.dtype, a->t.rank, a->t.dims, err);
    if (!y) return err->code ? err->code : GRAFT_EIO;
    if (skip && cn->n.n_out > 3 && *graft_node_output(cn->n.src, 3)) {
        cx_val *sum = cx_out(x, cn, 3, a->t.dtype, a->t.rank, a->t.dims, err);
        if (!sum) return err->code ? err->code : GRAFT_EIO;
    }
    cn->mm_run = x->run_no;
    return GRAFT_OK;
}

graft_status cx_pro_materialize(cx_exec *x, cx_node *cn, graft_error *err)
{
    cx_node *r = cn->pro, *t = cn->cpro;
    if (!r && t && t->fuse == 7 && t->mm_run == x->run_no) { /* form A: the chain, which made cn's x */
        t->mm_run = 0;
        return cx_fuse_run(x, t, err);
    }
    if (!r || r->fuse != 5 || r->mm_run != x->run_no) return GRAFT_OK;
    r->mm_run = 0;
    graft_status rc = cpro_materialize(x, r, err);
    return rc != GRAFT_OK ? rc : r->dop->run(x, r, err);
}

int cx_pro_args(cx_exec *x, cx_node *cn, gops_rows_norm *pn)
{
    cx_node *r = cn->pro;
    if (!r || r->mm_run != x->run_no) return 0;
    cx_val *a, *g, *sk, *bias;
    int skip = pro_operands(r, &a, &g, &sk, &bias);
    memset(pn, 0, sizeof *pn);
    pn->x = a->d;
    pn->gamma = g->d;
    pn->skip = sk ? sk->d : NULL;
    pn->bias = bias ? bias->d : NULL;
    if (skip && r->n.n_out > 3 && *graft_node_output(r->n.src, 3)) pn->sum = cx_v(r->n.out[3])->d;
    pn->eps = rt_attr_float(&r->n, "epsilon", 1e-5f);
    return 1;
}

/* Chain prologues (GRAFT_CUDA_FUSE_CPRO: unset 2, forms A and C; 0 off;
 * 1 C in the general form, E2B's step ~110 us slower, bench/RESULTS.md
 * session 16; 3 all three forms, E2B 426 -> 332 tok/s, form B's skip-norm
 * pair held to the blocks that fit at once with one group's weights in
 * flight a block, session 24; =2 measured 416 -> 422-426): a norm-headed tail t (fuse 4) of a single weight MatMul m,
 * whose output c the GEMV(s) h after it read, every other reader of c
 * coming after h: t's chain is computed by h's blocks before h's own
 * prologue (gcuda_gemv_rows_chain_pro; block 0 stores c) instead of by m's
 * last block, and m runs as a plain GEMV; t becomes fuse 7
 * (cx_cpro_follow). The forms:
 *   C (=1, 2, 3): c read by the prologue norm r (fuse 5, an
 *     RMSNormalization) of h: Gemma's per-layer-input projection's
 *     post-norm, residual add and scale, before the next layer's input norm
 *     and q/k/v. With =1 the chain runs in the general form (the compact
 *     one under GRAFT_CUDA_ROWS_V8=2), with =2 in the compact one where it
 *     fits (rows_chain_pro_compact, about 24 KB of kernel code against 546
 *     KB with the general chain).
 *   A (=2, 3): c is the x of a single MatMul h with a per-element chain of its
 *     own (plan_tails) and no prologue: down's post-norm and residual add
 *     before the per-layer-input gate (gelu * the layer's input).
 *   B (=3): t's skip norm s (plan_tail_skip, fuse 6: o's post-norm, then
 *     the skip norm before the MLP) read only by a gate/up pair h with its
 *     chain: s becomes h's prologue norm (fuse 5) instead, h computing c,
 *     then the skip norm of c and the residual (its sum stored by block 0),
 *     then the pair.
 * A and B take the compact form only (gcuda_gemv_rows_chain_pro_tail); a
 * chain or operands it refuses at a run are computed by their own nodes
 * then (cpro_gemv). */
static int cpro_after(cx_exec *x, const rt_tensor *c, const cx_node *skip, size_t hi)
{
    for (size_t k = 0; k < x->n_nodes; k++) {
        const cx_node *q = &x->nodes[k];
        for (int j = 0; q != skip && j < q->n.n_in; j++)
            if (q->n.in[j] == c && k <= hi) return 0;
    }
    return 1;
}

/* Whether chain t's output is of a type the compact form takes (2 bytes):
 * with =2 and =3 no other is planned, since a chain that does not fit it
 * would run as its own kernel instead of by its GEMV's last block. */
static int cpro_compact_type(const cx_node *t)
{
    const int dt = t->n.out[0]->dtype;
    return dt == GRAFT_DTYPE_FLOAT16 || dt == GRAFT_DTYPE_BFLOAT16;
}

static void cpro_plan(cx_exec *x, cx_node *m, cx_node *t, cx_node *h)
{
    m->mt = NULL;
    x->n_tails--;
    t->fuse = 7;
    t->cpro = h;
    h->cpro = t;
    x->n_cpros++;
}

static void plan_chain_pro(cx_exec *x)
{
    const char *e = getenv("GRAFT_CUDA_FUSE_CPRO");
    x->cpro_mode = !e || !strcmp(e, "2") ? 2 : !strcmp(e, "1") ? 1 : !strcmp(e, "3") ? 3 : 0;
    if (!x->cpro_mode) return;
    for (size_t i = 0; i < x->n_nodes; i++) { /* C */
        cx_node *r = &x->nodes[i], *h = r->pro;
        if (r->fuse != 5 || !h || h->mt || h->cpro || !strcmp(graft_node_domain(r->n.src), "com.microsoft"))
            continue;
        cx_node *t = producer(x, r->n.in[0]);
        if (!t || t->fuse != 4 || !t->fz || !t->fz->norm || t->tail_skip || t->n.out[0] != r->n.in[0]) continue;
        cx_node *m = producer(x, t->fz->leaf[0]);
        if (!m || m->mt != t || m->mm || (x->cpro_mode >= 2 && !cpro_compact_type(t))) continue;
        if (!cpro_after(x, t->n.out[0], r, (size_t)(h - x->nodes)) || !(t->fz->built = calloc(1, sizeof *t->fz->built)))
            continue;
        cpro_plan(x, m, t, h);
    }
    if (x->cpro_mode < 2) return;
    for (size_t i = 0; i < x->n_nodes; i++) { /* A (and B under =3) */
        cx_node *m = &x->nodes[i], *t = m->mt;
        if (!t || m->mm || t->fuse != 4 || !t->fz || !t->fz->norm || t->fz->leaf[0] != m->n.out[0] ||
            !cpro_compact_type(t))
            continue;
        cx_node *s = t->tail_skip;
        const rt_tensor *c = t->n.out[0], *hx = s ? s->n.out[0] : c; /* h's x */
        cx_val *hv = cx_v((rt_tensor *)hx);
        cx_node *h = NULL;
        for (size_t k = i + 1; k < x->n_nodes && !h; k++) /* the first reader of hx */
            for (int j = 0; j < x->nodes[k].n.n_in && !h; j++)
                if (x->nodes[k].n.in[j] == hx) h = &x->nodes[k];
        if (!h || h->n.in[0] != hx || !weight_matmul(h) || !h->mt || h->pro || h->cpro) continue;
        const size_t hi = (size_t)(h - x->nodes);
        if (!s) { /* A: a single MatMul with a per-element chain */
            if (h->mm || !h->mt->fz || h->mt->fz->norm || !cpro_after(x, c, h, hi)) continue;
        } else { /* B: a gate/up pair with its chain, the skip norm's x read by the two alone */
            const rt_node *n = &s->n;
            if (x->cpro_mode != 3 || h->mm != 1 || !h->mg || h->mg->n != 2 || hv->n_readers != 2 ||
                h->mg->m[1]->n.in[0] != hx)
                continue;
            int ok = 1;
            for (int j = 1; j < 3 && ok; j++) ok = j >= n->n_out || !n->out[j] || !cx_v(n->out[j])->n_readers;
            if (ok && n->n_out > 3 && n->out[3]) ok = cpro_after(x, n->out[3], NULL, hi);
            if (!ok) continue;
        }
        if (!(t->fz->built = calloc(1, sizeof *t->fz->built))) continue;
        if (s) {
            t->tail_skip = NULL;
            x->n_tail_skips--;
            s->fuse = 5;
            s->pro = h;
            h->pro = s;
            x->n_pros++;
        }
        cpro_plan(x, m, t, h);
    }
}

/* Whether the GEMV(s) after fuse 7 tail t compute its chain g this run: as
 * cx_pro_norm will decide for their norm (when they have one), with the
 * chain's row as their K (at most GCUDA_CHAIN_PRO_MAX_K) and of their
 * dtype; in the compact form where it must be (forms A and B, and C
 * under =2 preferring it). */
static int cpro_ready(cx_exec *x, cx_node *t, const gops_fuse *g)
{
    cx_node *h = t->cpro, *r = h ? h->pro : NULL;
    if (!h || x->no_gemv || !pro_weights_rows(h)) return 0;
    const int64_t K = g->norm_dim;
    if (K <= 0 || K > GCUDA_CHAIN_PRO_MAX_K || fuse_numel(g) != K || g->rank < 1 || g->dims[g->rank - 1] != K)
        return 0;
    int skip = 0;
    if (r) {
        cx_val *a, *gm, *sk, *bias;
        skip = pro_operands(r, &a, &gm, &sk, &bias);
        if (!gm || !gm->t.present || (int64_t)gm->t.numel != K || gm->t.dtype != g->y_dtype) return 0;
        if (skip) {
            cx_val *o = r->n.in[0] == t->n.out[0] ? sk : a; /* the skip norm's other operand */
            if (!o || !o->t.present || (int64_t)o->t.numel != K || o->t.dtype != g->y_dtype ||
                (bias && ((int64_t)bias->t.numel != K || bias->t.dtype != g->y_dtype)))
                return 0;
        } else {
            const int ax = (int)rt_attr_int(&r->n, "axis", -1);
            if (ax != -1 && ax != g->rank - 1) return 0;
        }
    }
    const int n = h->mm == 1 && h->mg ? h->mg->n : 1;
    for (int j = 0; j < n; j++) {
        cx_val *b = cx_in(n > 1 ? h->mg->m[j] : h, 1);
        if (!b || b->t.rank != 2 || b->t.dims[0] != K || b->t.dtype != g->y_dtype) return 0;
    }
    return !(skip || !r || h->mt) || gcuda_gemv_rows_chain_pro_fits(g->y_dtype, g);
}

graft_status cx_cpro_follow(cx_exec *x, cx_node *cn, graft_error *err)
{
    gops_fuse *g = cn->fz->built;
    graft_status rc = fuse_build(x, cn, g, err); /* the output shaped either way */
    if (rc != GRAFT_OK) return rc;
    cn->mm_run = 0;
    if (cpro_ready(x, cn, g)) {
        cn->mm_run = x->run_no;
        return GRAFT_OK;
    }
    return gops_fused(g, (gcuda_stream)x->stream, err);
}

/* Norm r will run itself: the chain that makes its input first, when that
 * chain deferred to the GEMV after r this run. */
static graft_status cpro_materialize(cx_exec *x, cx_node *r, graft_error *err)
{
    cx_node *t = r->pro ? r->pro->cpro : NULL; /* planned as r's input's producer (plan_chain_pro) */
    if (!t || t->fuse != 7 || t->mm_run != x->run_no) return GRAFT_OK;
    t->mm_run = 0;
    return cx_fuse_run(x, t, err);
}

/* h's GEMV(s) of w/y/N with the chain that deferred to it this run (fuse
 * 7, h->cpro) as their prologue, then the norm pn (NULL: none, form A)
 * and the tail (NULL: none; pair: the gate/up pair's): 1 in *done when it
 * ran; 0 when nothing deferred, or when the launch refused the form (the
 * chain and the norm then ran themselves, cx_pro_materialize). */
static graft_status cx_cpro_gemv(cx_exec *x, cx_node *h, int dtype, const gops_rows_norm *pn, const void *const *w,
                                 void *const *y, const int64_t *N, int n, int64_t K, const gops_fuse *tail, int pair,
                                 int *done, graft_error *err)
{
    cx_node *t = h->cpro;
    *done = 0;
    if (!t || t->fuse != 7 || t->mm_run != x->run_no) return GRAFT_OK;
    gops_rows_norm p2;
    memset(&p2, 0, sizeof p2);
    if (pn) { /* a skip norm: its operand other than c (x, or skip when c is x) */
        p2 = *pn;
        if (p2.skip && p2.skip == cx_v(t->n.out[0])->d) p2.skip = p2.x;
        p2.x = NULL;
    }
    const gcuda_stream s = (gcuda_stream)x->stream;
    graft_status rc = x->cpro_mode == 1 ? gcuda_gemv_rows_chain_pro(dtype, t->fz->built, &p2, w, y, N, n, K, s, err)
                                        : gcuda_gemv_rows_chain_pro_tail(dtype, t->fz->built, pn ? &p2 : NULL, w, y,
                                                                         N, n, K, tail, pair, s, err);
    if (rc == GRAFT_EUNSUPPORTED) { /* operands the compact form refuses: the chain and the norm run themselves */
        memset(err, 0, sizeof *err);
        return cx_pro_materialize(x, h, err);
    }
    if (rc == GRAFT_OK) {
        *done = 1;
        x->n_cpro_ran++;
    }
    return rc;
}

graft_status cx_pro_gemv(cx_exec *x, cx_node *cn, int dtype, const gops_rows_norm *pn, const void *const *w,
                         void *const *y, const int64_t *N, int n, int64_t K, graft_error *err)
{
    int done = 0;
    graft_status rc = cx_cpro_gemv(x, cn, dtype, pn, w, y, N, n, K, NULL, 0, &done, err);
    if (rc != GRAFT_OK || done) return rc;
    gops_rows_norm p2;
    if (!cx_pro_args(x, cn, &p2)) /* materialized just now: x holds the norm */
        return gcuda_gemv_rows_multi(dtype, cx_in(cn, 0)->d, w, y, N, n, K, (gcuda_stream)x->stream, err);
    return gcuda_gemv_rows_fused(dtype, pn, w, y, N, n, K, NULL, NULL, 0, (gcuda_stream)x->stream, err);
}
