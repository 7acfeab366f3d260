/* The CUDA executor's internals (runtime/cuda/): values with a host and a
 * device copy, nodes placed once on the device or the host, device op
 * implementations. Prefix cx_. Compiled only where nvcc is (mk/cuda.mk). */
#ifndef GRAFT_RUNTIME_CUDA_CUEXEC_H
#define GRAFT_RUNTIME_CUDA_CUEXEC_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "kernels/cuda/gcuda.h"
#include "kernels/cuda/gcuda_ops.h"
#include "onnx/map.h"
#include "runtime/backend.h"
#include "runtime/rt.h"

/* A value: the rt_tensor host kernels see (first member: a tensor pointer
 * is a value pointer), plus its device copy and where it is valid now. */
typedef struct cx_val {
    rt_tensor t;
    void *d;         /* device data */
    size_t dcap;     /* bytes owned at d (0: borrowed or a view) */
    bool on_host, on_dev;
    bool sticky;     /* initializer or Constant output: valid across runs */
    bool is_init;    /* an initializer (the weights' upload progress counts it) */
    bool is_input;   /* graph input: set by set_input, not reset per run */
    bool dtaint;     /* computed from an input that lives on the device (device_input) */
    /* a constant MatMul weight [K, N] whose device copy holds its transpose
     * [N, K], one output per row (cx_rows_plan); t keeps the logical shape */
    bool rows;
    signed char rows_ok; /* cx_rows_plan's scratch */
    struct cx_val *base; /* this value is a view (Reshape...) of base */
    /* A KV cache view (the generator's bind_kv): a 4-D [B, H, L, D] whose
     * device rows sit `pitch` rows apart per head (the cache's max_seq);
     * 0: contiguous. The host copy is always contiguous. */
    int64_t pitch;
    void *pin[2];    /* pinned staging of per-step uploads (grown, kept), one per slot (cx_exec.slot) */
    void *pin_d[2];  /* pin as the device maps it (cx_exec.mapped; else NULL) */
    size_t pcap;     /* bytes of each */
    /* an attention mask's shape, analysed on the host once per run and
     * node kind (runtime/cuda/ops.c) */
    uint64_t an_run[2];
    int64_t an_key[2], an_win[2];
    int an_ok[2];
    int n_readers;   /* nodes reading it (+2 for a graph output), and the last (fusion planning) */
    size_t reader;
    size_t prod;     /* side.c's scratch: 1 + the node making it (0: none) */
} cx_val;

/* One layer's K or V cache bound in place by the generator. */
typedef struct cx_kvbind {
    size_t past, present; /* value indexes */
    void *buf;            /* backend memory [B, H, max_seq, D] */
    int64_t max_seq;
    const char *name;     /* the present output's (borrowed from the graph) */
} cx_kvbind;

enum { CX_UNDECIDED = 0, CX_HOST, CX_META, CX_VIEW, CX_DEVICE };

/* A value's shape and device placement as a captured step left it. */
typedef struct cx_meta {
    int present, dtype, rank;
    int64_t dims[RT_MAX_RANK];
    uint64_t numel;
    size_t nbytes;
    void *d;
    int64_t pitch;
} cx_meta;

#define CX_RP_MAX 8

typedef struct cx_exec cx_exec;
typedef struct cx_node cx_node;

typedef struct cx_op {
    const char *domain, *op;
    /* Nonzero when this node (its dtypes and attributes) can run on the
     * device; called once, at the first run, with the inputs present. */
    int (*accept)(cx_exec *x, cx_node *cn);
    /* Runs it; GRAFT_EUNSUPPORTED sends the node to the host for good. */
    graft_status (*run)(cx_exec *x, cx_node *cn, graft_error *err);
} cx_op;

/* Sibling MatMuls of one activation, run as one GEMV launch by the first
 * (fuse.c, plan_siblings). */
struct cx_mgroup {
    int n;
    struct cx_node *m[GCUDA_GEMV_MAX];
};

/* Gathers of one index tensor from constant tables, run as one launch by
 * the first (fuse.c, plan_gathers). */
struct cx_ggroup {
    int n;
    struct cx_node *m[GCUDA_GATHER_MAX];
};

/* Integer nodes of the input ids run as one program (plan_ints) */
#define CX_IP_KEEP 4 /* programs kept in device memory a group (a prefill's and a decode step's, ...) */
struct cx_igroup {
    int n;
    struct cx_node *m[GOPS_IPROG_MAX];
    /* the programs run so far, each kept in device memory once (gops_int_prog_keep; never rewritten, since a
     * captured graph's kernel reads it at every replay); more than CX_IP_KEEP: as kernel parameters */
    int nk;
    gops_iprog *kp[CX_IP_KEEP];
    gops_iprog_dev kd[CX_IP_KEEP];
};

struct cx_node {
    rt_node n;         /* host binding: kernel, inputs, outputs */
    const cx_op *dop;  /* device implementation or NULL */
    int place;
    bool dtaint;       /* reads a value computed from a device input: its integer ops run there too */
    bool const_done;   /* Constant: ran once, outputs sticky */
    void *scr;         /* device scratch of the op (cx_scratch), grown at planning */
    size_t scap;
    void *ws;          /* zero-initialised workspace (GEMV split-K counters) */
    size_t wcap;
    int dsplits;       /* gcuda_attn_decode's planned splits (0: not planned) */
    /* CUDA graph replay record, taken when the step was last captured: a
     * later step replays the graph without running the node when its
     * inputs look the same (the KV length aside, for the attention nodes
     * that read it from device memory) */
    bool rp_ok, rp_bad;
    uint32_t rp_exempt;       /* inputs whose shape or content follows the KV length */
    cx_meta *rp_in, *rp_out;  /* [n_in], [n_out] */
    cx_val *rp_up[CX_RP_MAX]; /* values it uploaded (their pinned staging is refilled) */
    size_t rp_upn[CX_RP_MAX];
    int rp_nup;
    cx_val *rp_hr[CX_RP_MAX]; /* values it read on the host, and their bytes then */
    void *rp_hrb[CX_RP_MAX];
    size_t rp_hrn[CX_RP_MAX];
    int rp_nhr;
    int rp_len;               /* lengths: 0 none; 1 past = dims[2] of input rp_lin; 2 that minus rp_S */
    int rp_lin, rp_dt, rp_causal, rp_mask_in, rp_hscr;
    int64_t rp_B, rp_Hq, rp_S, rp_wleft, rp_win;
    int rp_fast;              /* the fast kernels (window rp_win) */
    int rp_elide;             /* a transpose that is only shaped (run_transpose) */
    int elide;                /* Transpose: 0 undecided, 1 shaped only, 2 computed */
    double prof_s;     /* GRAFT_CUDA_PROFILE: host seconds in this node over the decode steps */
    double prof_gpu_s; /* ... GPU seconds between events around its launches (events mode) */
    size_t prof_n;
    cudaEvent_t pev[2]; /* events mode: before and after the node's launches */
    bool prof_rec;      /* recorded in the current step */
    bool prof_graph;    /* "graph" mode: its events are nodes of the captured graph */
    int shared;        /* Attention reading another layer's cache: 0 unknown, 1 yes, 2 no */
    int shared_k, shared_v; /* ... the bindings (cx_exec.kv) */
    int64_t *hscr;     /* pinned host scratch (positions to upload): two slots of hcap */
    size_t hcap;
    int fuse;          /* 1: a member of a fused chain before its tail (computes nothing); 2: the tail (runs it);
                        * 3: an RMSNorm that only shapes its output (the RotaryEmbedding after it normalises);
                        * 4: a chain's tail (or a lone RMSNorm) whose chain the MatMul before it (mt) runs in its
                        * GEMV's launch when it can, mm_run telling it so; 5: an RMSNorm (or skip RMSNorm)
                        * whose MatMul(s) (pro) compute it in their GEMV: when they can this run, it only shapes
                        * its outputs and sets mm_run; 6: a skip RMSNorm whose first or second input is a fuse 4
                        * tail's output, computed by that tail's GEMV after the chain (tail_skip) when it runs
                        * the chain, mm_run telling it so; 7: a norm-headed chain's tail whose chain the GEMV
                        * after it (cpro) computes before its prologue norm: when it can this run, the tail only
                        * shapes its output and sets mm_run */
    struct cx_node *rope_norm; /* RotaryEmbedding: the RMSNorm (fuse 3) it applies first (GRAFT_CUDA_FUSE_ROPE=0: not) */
    /* RotaryEmbedding with its norm: the next one (a layer's k after its q,
     * nothing between them reading this one's output: plan_rope_pair) that
     * launches both (rope_second), or the earlier one it launches with
     * itself; rope_run: the run in which the first left its arguments in
     * rope_args for the second (GRAFT_CUDA_FUSE_ROPE2=0: off) */
    struct cx_node *rope_pair;
    bool rope_second;
    uint64_t rope_run;
    gcuda_rotary_args rope_args;
    struct cx_fuse *fz; /* the tail's chain (runtime/cuda/fuse.c) */
    int mm;             /* sibling MatMuls: 1 the group's first (runs their GEMVs), 2 a later one */
    struct cx_mgroup *mg; /* the first's group */
    uint64_t mm_run;    /* run_no in which the first made this node's output */
    int gth;            /* Gathers of one index tensor: 1 the group's first (runs them all), 2 a later one (mm_run
                         * telling it that the first made its output) */
    struct cx_ggroup *gg; /* the first's group */
    int ig;             /* integer nodes of the ids: 1 the group's first (runs them all as one program), 2 a later
                         * one (mm_run telling it that the first made its output) */
    struct cx_igroup *igg; /* the first's group */
    int wm_next;        /* GRAFT_CUDA_ATTN_PF, _GEMV_PF: 1 + the first weight MatMul after this node (a group's
                         * first standing for the group; 0: none) */
    bool gpf;           /* GRAFT_CUDA_GEMV_PF: a weight MatMul (a group's first) whose GEMV asks L2 for later
                         * weights (its own fewer bytes than the budget) */
    struct cx_node *mt; /* MatMul: the node (fuse 4) whose chain its one-row GEMV runs as its epilogue */
    struct cx_node *pro; /* MatMul (a group's first): the norm (fuse 5) its GEMV computes; the norm: that MatMul */
    struct cx_node *tail_skip; /* a fuse 4 tail: the skip RMSNorm (fuse 6) run after its chain */
    struct cx_node *cpro; /* MatMul (a group's first, with pro): the chain (fuse 7) its GEMV computes first; that
                           * chain's tail: the MatMul */
    /* plan_attn_prep (GRAFT_CUDA_FUSE_ATTN=0: off): an Attention's q and k rotaries (with their norms)
     * and its v's spelled-out norm chain, whose work its one-token decode kernel does first. On those
     * nodes attn_by is the Attention; when they run they only shape their outputs and leave their
     * arguments (rope_args, attn_g) with attn_run = the run; the Attention takes them, or runs them
     * (cx_attn_flush) before anything reads their outputs. */
    struct cx_node *aprep[3]; /* Attention: the q rotary, the k rotary, the v chain's tail (NULL: none) */
    struct cx_node *attn_by;
    uint64_t attn_run;
    gops_fuse *attn_g;
};

#define CX_SIDE_REG 8 /* side stream regions a step may have (side.c) */

struct cx_exec {
    graft_model *m;
    graft_graph *g;
    ox_map idx;
    cx_val **vals;
    size_t n_vals, cap_vals;
    cx_node *nodes;
    size_t n_nodes;
    size_t *in_idx, n_in;
    graft_value_info *in_info;
    bool *in_has_default;
    size_t *out_idx, n_out;
    const char **out_names;
    void **consts;
    size_t n_consts, cap_consts;
    cudaStream_t stream;
    gops_blas *blas;
    int check;          /* GRAFT_CUDA_CHECK=1: every device node checked against its CPU kernel */
    bool placed;        /* first run done: placement final */
    char desc[320];
    char *fb;           /* fallback report */
    size_t n_fb;
    cx_kvbind *kv;      /* KV caches bound in place */
    size_t n_kv;
    int32_t *dlen;      /* device [2 * CX_MAX_B]: past lengths, then total lengths (per batch row) */
    int32_t *hlen;      /* pinned host staging of dlen, a slot after the other (2 * 2 * CX_MAX_B) */
    int32_t *hlen_d;    /* hlen as the device maps it (x->mapped; else NULL) */
    uint64_t run_no;    /* runs so far */
    uint64_t len_run;   /* run_no when dlen was last written */
    int64_t len_past, len_total;
    size_t n_fast_attn; /* attention nodes on the in-place fast kernels (last run) */
    size_t n_fused_append; /* ... of them whose decode kernel also appended the new K/V rows (last run) */
    size_t n_attn_pf, attn_pf_bytes; /* ... that asked L2 for the next weights, and how many bytes (last run) */
    size_t n_gemv_pf, gemv_pf_bytes; /* GEMVs that asked L2 for later weights, and how many bytes (last run) */
    int64_t *iota;      /* device 0, 1, ... (rotary positions when the graph gives none) */
    int64_t iota_n;
    /* CUDA graphs: a step whose graph inputs have the shapes of the last
     * one (the KV length aside) and whose last run needed no copy back to
     * the host is captured and launched as one graph; the captured graph
     * updates the one instantiated executable (cudaGraphExecUpdate) and is
     * instantiated anew only when its topology changed. */
    bool graphs;        /* a decode step asked for graphs */
    bool graphs_off;    /* a decode step asked for none (--no-cuda-graph) */
    bool capturing;
    int cap_abort;      /* set during a capture: 1 needs a copy back (no graphs), 2 transient */
    cudaGraphExec_t gexec[2]; /* one a slot: the pinned staging each one's copies read */
    uint64_t gexec_gen[2];    /* rp_gen when each was captured */
    uint64_t rp_gen;          /* bumped by a capture that rewrote the records */
    /* Pipelined decode (set_graphs mode 3): the generator sets up and
     * launches step t + 1 while step t runs, its input ids the device argmax
     * of step t (argmax_start). Per-step host staging (pinned uploads,
     * lengths, positions, the id read back) then alternates between two
     * slots, run by run: a run writes slot `slot`, and the run before it,
     * which may still be running, reads the other one. The generator waits
     * for run r's result before it sets up run r + 2. Not pipelined: slot 0. */
    bool pipelined;
    int slot;
    size_t run_syncs;   /* D2H synchronisations in this run */
    size_t last_syncs;  /* ... in the last eager run */
    cx_node *cur;       /* the device node running while a capture records */
    bool replaying;     /* a replay pass: host nodes only, device nodes restored */
    bool rp_fail;       /* ... that met something it cannot replay */
    bool no_replay;     /* GRAFT_CUDA_REPLAY=0 */
    size_t n_replay;    /* steps replayed without capture */
    size_t n_elided;    /* transposes of a KV cache only shaped (their readers read the cache) */
    bool rp_valid;      /* the last step was captured (or replayed): records and graph agree */
    bool graph_step;    /* this run is a decode step that may be a graph (set_graphs) */
    bool graph_prev;    /* ... and the last run was one */
    size_t n_graph, n_update, n_inst, n_eager, n_abort;
    bool tty;                 /* stderr is a terminal: the weights' upload shows a progress bar */
    uint64_t up_total, up_done; /* initializer bytes, and those uploaded */
    int up_shown;             /* percentage last drawn (-1: none) */
    int prof;                 /* GRAFT_CUDA_PROFILE: 1 events around each node, 2 ("sync") the stream drained around each,
                               * 3 ("graph") events captured around each node in the CUDA graph, read after each replay */
    bool prof_pending;        /* graph mode: a launched graph's events not read yet */
    size_t prof_steps;
    double prof_step_s, prof_step_gpu_s;
    cudaEvent_t pstep[2];
    const char *no_graph; /* why graphs stopped, or NULL */
    cx_node *now;         /* the node running (eager or captured run) */
    char rp_why[200];     /* why the last replay was refused ("" : none) */
    char sync_why[200];   /* the last copy back to the host that a host node waited for */
    char desc2[2048];
    int64_t *amax_d, *amax_h; /* argmax: device result (its workspace after it) and its pinned copies, a slot each */
    int64_t *amax_hd;         /* amax_h as the device maps it (x->mapped; else NULL) */
    /* unless GRAFT_CUDA_MAPPED=0: the pipelined argmax writes its id into mapped host memory (no copy back),
     * and the lengths and the per-step uploads go up by a kernel reading their mapped staging (no copy node) */
    bool mapped;
    void *keep;               /* argmax_start: the logits row kept, a slot each (keep_cap bytes each) */
    size_t keep_cap;
    cudaEvent_t amax_ev[2];   /* argmax_start: the id of slot s in amax_h (written there, or copied back) */
    size_t n_fused, n_chains;  /* nodes in fused chains, and the chains */
    size_t n_mm_nodes, n_mm_groups; /* sibling MatMuls, and their groups */
    size_t n_gth_nodes, n_gth_groups; /* Gathers of one index tensor, and their groups */
    size_t n_int_nodes, n_int_groups; /* integer nodes of the ids run as one program, and the programs */
    bool no_gemv;                   /* GRAFT_CUDA_NO_GEMV: one-row MatMuls on cuBLAS too (read once) */
    bool slice_view;                /* unless GRAFT_CUDA_SLICE_VIEW=0 (read once): a Slice of one
                                     * contiguous block is that block, no copy */
    size_t n_rows;                  /* MatMul weights stored one output per row */
    size_t n_tails;                 /* MatMuls whose GEMV runs the chain after it */
    size_t n_pros;                  /* norms computed by the GEMV after them */
    size_t n_tail_skips;            /* skip norms run after a GEMV's chain, in its launch */
    size_t n_cpros;                 /* chains computed by the GEMV after them, before its norm */
    int cpro_mode;                  /* GRAFT_CUDA_FUSE_CPRO: 0 off, 1 the first form, 2 (unset) forms A and C,
                                     * 3 all (fuse.c, plan_chain_pro) */
    size_t n_cpro_ran;              /* ... of them that a GEMV computed in its prologue (last run) */
    size_t n_rope_pairs;            /* RotaryEmbeddings launched with the one before them */
    size_t n_attn_preps;            /* Attentions whose decode kernel may do their q/k rotaries (v norm) */
    size_t n_attn_took[3];          /* ... that did the q rotary, the k rotary, the v norm, last run */
    size_t rows_bytes;
    /* GRAFT_CUDA_ATTN_PF=MB: a decode attention kernel asks L2 for up to MB of the weights of the
     * MatMuls after it (gcuda_attn_decode_args.pf); GRAFT_CUDA_GEMV_PF=MB: so does a GEMV reading fewer
     * bytes than that (gcuda_gemv_rows_prefetch_next), before its wait; GRAFT_CUDA_PF_WINDOW=MB (default:
     * the larger budget): none asks past that many bytes from the start of the next weight MatMul's.
     * pf_k, pf_off: where this run's asks have reached (1 + a group's first MatMul, bytes of that group
     * asked; fuse.c, plan_pf and cx_pf_plan) */
    size_t apf_bytes, gpf_bytes, pf_window;
    int pf_k;
    size_t pf_off;
    bool apf_late; /* GRAFT_CUDA_ATTN_PF_LATE=1: gcuda_attn_decode_args.pf_late */
    /* replayed steps: host seconds preparing them (host nodes, checks,
     * launch) and GPU seconds of the graphs (events around the launch,
     * read at the next replay) */
    double rp_host_s, rp_gpu_s;
    size_t rp_gpu_n;
    cudaEvent_t rpev[2][2]; /* a slot's: before and after its last launch */
    bool rpev_pending[2];
    unsigned rp_every;      /* GRAFT_CUDA_GRAPH_TIME=N: the events around every Nth launch (default 8; 1: each, 0:
                             * none); a step's stream without them: E2B 422.1 against 421.6 tok/s (H100, session 41) */
    size_t rp_launches;
    /* side.c: a captured step runs the nodes of region r (side_of[i] == r + 1) on a second stream, forked
     * before node side_f[r] and joined before node side_j[r] (n_nodes: at the end); regions in node order,
     * each joined before the next forks */
    cudaStream_t side, side_main;     /* side_main: the stream field's own value, kept while it names side */
    cudaEvent_t side_ev[CX_SIDE_REG][2]; /* a region's fork's, its join's */
    unsigned char *side_of;           /* per node: 0 the main stream, else 1 + its region (NULL: no plan) */
    size_t side_f[CX_SIDE_REG], side_j[CX_SIDE_REG];
    int n_side_reg;
    size_t n_side, n_side_launch, n_side_main; /* over the regions: nodes on it, their launches, main launches
                                                * between forks and joins */
    int side_state;               /* in this run: 0 not forked yet, 1 forked (region side_r), 2 joined (side_r next) */
    int side_r;
    bool side_off;                /* a capture met what the plan does not allow: off for good */
    bool side_prio;               /* the step's stream at the device's greatest priority, the side stream at its
                                   * least, kept by the graphs' kernel nodes (GRAFT_CUDA_SIDE_PRIO=0: not) */
    const char *side_why;         /* why there is no plan, or why it went off */
};

#define CX_MAX_B 64
/* per-step uploads up to this many bytes go up by a kernel reading their mapped staging (cx_exec.mapped);
 * larger ones (a long prompt's ids and mask) by a copy */
#define CX_UP_WORDS_MAX 65536

/* Device ops table, ended by an entry with op NULL (runtime/cuda/ops.c). */
extern const cx_op cx_ops[];

static inline cx_val *cx_v(rt_tensor *t) { return (cx_val *)t; }
static inline cx_val *cx_in(cx_node *cn, int i)
{
    rt_tensor *t = rt_in(&cn->n, i);
    return t ? cx_v(t) : NULL;
}

/* The value's data valid on the device (H2D when only the host has it). */
graft_status cx_to_dev(cx_exec *x, cx_val *v, graft_error *err);
/* The value's data valid on the host (D2H, synchronising, when needed). */
graft_status cx_to_host(cx_exec *x, cx_val *v, graft_error *err);
/* Shapes output i of the node as a device tensor with room for it. */
cx_val *cx_out(cx_exec *x, cx_node *cn, int i, int dtype, int rank, const int64_t *dims, graft_error *err);
/* cx_to_dev for a caller that reads a KV cache view through its pitch
 * (cx_to_dev refuses those with GRAFT_EUNSUPPORTED). */
graft_status cx_to_dev_pitched(cx_exec *x, cx_val *v, graft_error *err);
/* Element strides of a 4-D device value over (b, h, s, d) (pitch aware). */
void cx_strides4(const cx_val *v, int64_t st[4]);
/* The value's output slot made a view of a bound cache: [B, H, L, D] at buf. */
cx_val *cx_out_cache(cx_exec *x, cx_node *cn, int i, int dtype, const int64_t dims[4], const cx_kvbind *kb,
                     graft_error *err);
/* Output i made a contiguous window of device memory owned by another
 * value (at d, a Slice of one block of its input): shaped, not
 * allocated; a buffer it owned is freed (NULL, nothing changed, in a
 * capture: the caller copies instead). */
cx_val *cx_out_at(cx_exec *x, cx_node *cn, int i, int dtype, int rank, const int64_t *dims, void *d);
/* The binding whose past input is v (NULL: none). */
const cx_kvbind *cx_kv_of_past(cx_exec *x, const cx_val *v);
/* Uploads the past/total lengths of this run once (pinned, async); the
 * device pointers of the past and total arrays. */
graft_status cx_lens(cx_exec *x, int64_t B, int64_t past, int64_t total, graft_error *err);
/* Replays device node cn (runtime/cuda/ops.c): checks its inputs against
 * its record, refills its staging, restores its outputs; 0 when it cannot. */
int cx_replay_node(cx_exec *x, cx_node *cn);
/* ONNX op name -> gops_binary_op, or -1 (runtime/cuda/ops.c). */
int cx_binary_code(const char *op);
/* A unary node -> gops_unary_op (lo, hi for an opset < 11 Clip), or -1. */
int cx_unary_code(const rt_node *n, float *lo, float *hi);
/* Elementwise fusion (runtime/cuda/fuse.c): planned once after the
 * planning run; members before the tail skip, the tail runs the chain. */
void cx_fuse_plan(cx_exec *x);
graft_status cx_fuse_skip(cx_exec *x, cx_node *cn, graft_error *err);
graft_status cx_fuse_shape(cx_exec *x, cx_node *cn, graft_error *err);
graft_status cx_fuse_run(cx_exec *x, cx_node *cn, graft_error *err);
/* Attention cn (aprep set): runs what its prologue nodes left to it this
 * run and it did not take (a no-op when none did). */
graft_status cx_attn_flush(cx_exec *x, cx_node *cn, graft_error *err);
graft_status cx_mm_run(cx_exec *x, cx_node *cn, graft_error *err);
/* Gather cn of a at ix, as the device runs it (int64 indices, axis 0):
 * its output's rank and dims (od), and the elements of a gathered row
 * (*dim); NULL, or what it does not take. */
const char *cx_gather_shape(const cx_node *cn, const cx_val *a, const cx_val *ix, int *rank, int64_t *od,
                            int64_t *dim);
/* A group's first Gather (gth 1): the group's gathers in one launch. */
graft_status cx_gather_run(cx_exec *x, cx_node *cn, graft_error *err);
/* Nonzero when device node cn is an integer op gops_int_prog can run
 * (plan_ints); a group's first (ig 1): the group as one program. */
int cx_int_member(const cx_node *cn);
graft_status cx_int_run(cx_exec *x, cx_node *cn, graft_error *err);
/* After the planning run: constant 2-D weights read only as a device
 * MatMul's B are transposed in place on the device to [N, K] (cx_val.rows),
 * so that a decode GEMV streams each output's row (gcuda_gemv_rows) and a
 * prefill GEMM reads B transposed. GRAFT_CUDA_ROWS=0: kept as they are. */
graft_status cx_rows_plan(cx_exec *x, graft_error *err);
bool cx_made(const cx_exec *x, const cx_node *cn);
graft_status cx_mm_follow(cx_exec *x, cx_node *cn, graft_error *err);
/* MatMul cn (mt set, weight stored [N, K], one row): the GEMV with mt's
 * chain as its epilogue; y is cn's output, already made. 1 in *done when
 * it ran, 0 when the shapes do not allow it (nothing launched). */
graft_status cx_tail_gemv(cx_exec *x, cx_node *cn, cx_val *a, cx_val *b, cx_val *y, int *done, graft_error *err);
/* A fuse 5 norm: its outputs shaped when its MatMul(s) can compute it this
 * run (one row, weights stored [N, K]), else run as usual. */
graft_status cx_pro_norm(cx_exec *x, cx_node *cn, graft_error *err);
/* MatMul cn (pro set): the norm its GEMV computes, when the norm deferred
 * to it this run; 0 otherwise. */
int cx_pro_args(cx_exec *x, cx_node *cn, gops_rows_norm *pn);
/* MatMul cn will not compute its norm this run after all: the norm runs now
 * (its output then holds the values; a no-op when it did not defer), and
 * before it the chain that deferred to cn (cpro) too; without a norm, that
 * chain alone. */
graft_status cx_pro_materialize(cx_exec *x, cx_node *cn, graft_error *err);
/* A fuse 4 node: nothing when its MatMul ran its chain this run, else the chain. */
graft_status cx_tail_follow(cx_exec *x, cx_node *cn, graft_error *err);
/* A fuse 7 chain: its output shaped when the GEMV after it computes it this run, else the chain. */
graft_status cx_cpro_follow(cx_exec *x, cx_node *cn, graft_error *err);
/* MatMul cn whose pro norm deferred to it (cx_pro_args filled pn): its GEMV(s) of w/y/N computing that norm
 * first, and before it the chain that makes the norm's input when that deferred too (cpro). */
graft_status cx_pro_gemv(cx_exec *x, cx_node *cn, int dtype, const gops_rows_norm *pn, const void *const *w,
                         void *const *y, const int64_t *N, int n, int64_t K, graft_error *err);
/* A fuse 6 skip norm: nothing when the GEMV before it computed it this run, else itself. */
graft_status cx_skip_follow(cx_exec *x, cx_node *cn, graft_error *err);
void cx_fuse_free(cx_node *cn);
/* The members of the chain whose tail is cn (*m set; 0: cn is no tail). */
int cx_fuse_members(const cx_node *cn, cx_node *const **m);
/* The side stream's plan (side.c), after the fusion plan; GRAFT_CUDA_SIDE=0: none. */
void cx_side_plan(cx_exec *x);
/* In a capture with a plan, before node i: the fork or the join there. */
graft_status cx_side_at(cx_exec *x, size_t i, graft_error *err);
/* The join, when forked and not joined (a capture's end, an error). */
void cx_side_end(cx_exec *x);
/* A captured step met what the plan does not allow: the capture is abandoned
 * (transient), the side stream off for good (why kept for the backend's description). */
void cx_side_fail(cx_exec *x, const char *why);
/* GRAFT_CUDA_ATTN_PF, _GEMV_PF: the weights node cn (a decode attention, a
 * small GEMV) asks L2 for, up to budget bytes, from where this run's asks
 * have reached (pfplan.c). */
void cx_pf_plan(cx_exec *x, const cx_node *cn, size_t budget, gcuda_prefetch_set *ps);
/* The bytes of weight MatMul cn's group (cn alone when it heads none). */
size_t cx_group_weight_bytes(const cx_node *cn);
/* Writes the lengths for a replay (the copy is in the graph). */
int cx_lens_replay(cx_exec *x, int64_t past, int64_t total);
/* The node's zeroed workspace of at least `bytes`. */
void *cx_workspace(cx_exec *x, cx_node *cn, size_t bytes, graft_error *err);
/* The node's device scratch of at least `bytes` (owned by the node). */
void *cx_scratch(cx_node *cn, size_t bytes, graft_error *err);
/* Reports a CUDA error for the node. */
graft_status cx_cuda_err(const cx_node *cn, graft_error *err, cudaError_t e, const char *what);

static inline int cx_is_float(int dtype)
{
    return dtype == GRAFT_DTYPE_FLOAT || dtype == GRAFT_DTYPE_FLOAT16 || dtype == GRAFT_DTYPE_BFLOAT16;
}

#endif
