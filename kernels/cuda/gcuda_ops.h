/* graft CUDA kernels for the generic ONNX ops the CUDA executor places on
 * the device (prefix gops_): broadcasting elementwise, strided copies
 * (Transpose, Slice, Concat, Expand), reductions over the last axis,
 * attention with a mask, and a cuBLAS GEMM wrapper.
 *
 * Same contract as gcuda.h: graft_status returns with `err` naming the
 * call, enqueued on `stream` without synchronising, no allocation inside
 * (gops_blas_create allocates the handle once). Data types are graft's
 * ONNX codes; arithmetic is fp32 whatever the storage type. Strides and
 * offsets are in elements. */
#ifndef GRAFT_KERNELS_CUDA_GCUDA_OPS_H
#define GRAFT_KERNELS_CUDA_GCUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "graft.h"
#include "kernels/cuda/gcuda.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GOPS_MAX_RANK 8

/* An iteration space of `rank` dims and the strides of up to three
 * operands over it (0 on broadcast axes). */
typedef struct gops_shape {
    int rank;
    int64_t dims[GOPS_MAX_RANK];
    int64_t st[3][GOPS_MAX_RANK];
} gops_shape;

typedef enum gops_binary_op {
    GOPS_ADD, GOPS_SUB, GOPS_MUL, GOPS_DIV, GOPS_POW, GOPS_MAX, GOPS_MIN
} gops_binary_op;

/* y (contiguous over sh) = a op b; a, b read through sh.st[0], sh.st[1]. */
graft_status gops_binary(gops_binary_op op, int dtype, const gops_shape *sh, const void *a, const void *b, void *y,
                         gcuda_stream s, graft_error *err);

/* y (contiguous over sh) = cond ? x : z; cond uint8 (bool) through
 * sh.st[0], x through st[1], z through st[2]. dtype: a float type, or
 * BOOL, INT32, INT64 (elements moved as they are). */
graft_status gops_where(int dtype, const gops_shape *sh, const uint8_t *cond, const void *x, const void *z, void *y,
                        gcuda_stream s, graft_error *err);

/* Integer ops, for the subgraph of a graph's input ids when the ids live
 * on the device (a pipelined decode): dtype INT64 or INT32 throughout,
 * compares writing bool (uint8). y (contiguous over sh) = a op b. */
typedef enum gops_int_op {
    GOPS_I_ADD, GOPS_I_SUB, GOPS_I_MUL, GOPS_I_MAX, GOPS_I_MIN, GOPS_I_EQUAL, GOPS_I_LESS, GOPS_I_GREATER
} gops_int_op;
graft_status gops_int_binary(gops_int_op op, int dtype, const gops_shape *sh, const void *a, const void *b, void *y,
                             gcuda_stream s, graft_error *err);
/* y[i] = min(max(x[i], lo), hi), INT64 or INT32. */
graft_status gops_int_clip(int dtype, const void *x, void *y, int64_t n, int64_t lo, int64_t hi, gcuda_stream s,
                           graft_error *err);
/* y[i] = (dst) x[i] between BOOL, INT32 and INT64 (to BOOL: x != 0). */
graft_status gops_int_cast(int src_dtype, int dst_dtype, const void *x, void *y, int64_t n, gcuda_stream s,
                           graft_error *err);
/* Running sums along the middle axis of [outer, len, inner] (ONNX CumSum:
 * exclusive leaves out the element itself, reverse runs from the end). */
graft_status gops_int_cumsum(int dtype, const void *x, void *y, int64_t outer, int64_t len, int64_t inner,
                             int exclusive, int reverse, gcuda_stream s, graft_error *err);

/* The integer ops above as one launch of one block: instruction k runs
 * over its output's elements (one a thread, at most GOPS_IPROG_N), its
 * operands read after instruction k - 1's writes (a block barrier between
 * them), each result what the op's own kernel writes. Operand j is read at
 * a[j] (BOOL, INT32 or INT64, adt[j]) through st[j] (0: broadcast), or is
 * the immediate imm[j] where a[j] is NULL; the output is contiguous over
 * dims. Kinds: BIN (a op b, op a gops_int_op; compares write BOOL), CLIP
 * (min(max(a, imm[1]), imm[2])), CAST (a to ydt; to BOOL: a != 0), CUMSUM
 * (along the axis of length len and stride inner of the output's layout;
 * a laid out as the output), WHERE (a ? b : c, a BOOL). */
#define GOPS_IPROG_MAX 16
#define GOPS_IPROG_RANK 4
#define GOPS_IPROG_N 1024
typedef enum gops_iprog_kind { GOPS_IP_BIN, GOPS_IP_CLIP, GOPS_IP_CAST, GOPS_IP_CUMSUM, GOPS_IP_WHERE } gops_iprog_kind;
typedef struct gops_iprog_ins {
    unsigned char kind, op, ydt, rank; /* ydt, adt: GRAFT_DTYPE_BOOL, _INT32 or _INT64 */
    unsigned char adt[3], excl, rev;
    int n;                             /* output elements, 1..GOPS_IPROG_N */
    int dims[GOPS_IPROG_RANK];
    int st[3][GOPS_IPROG_RANK];
    int len, inner;                    /* CUMSUM */
    const void *a[3];
    long long imm[3];
    void *y;
} gops_iprog_ins;
typedef struct gops_iprog {
    int n;
    gops_iprog_ins ins[GOPS_IPROG_MAX];
} gops_iprog;
graft_status gops_int_prog(const gops_iprog *p, gcuda_stream s, graft_error *err);
/* The same program kept in device memory: gops_int_prog_keep uploads p (in
 * kd->d, allocated when NULL; ordered behind s's work) with the plan of
 * which operands its instructions read from an earlier one's output in
 * shared memory; gops_int_prog_run launches it as gops_int_prog would, the
 * program read from there in one go rather than from the kernel's
 * parameters (a kernel node captured once serves every replay while the
 * upload is not redone); gops_int_prog_free releases kd->d. */
typedef struct gops_iprog_dev {
    void *d;
    int threads;
    size_t smem;
} gops_iprog_dev;
graft_status gops_int_prog_keep(const gops_iprog *p, gops_iprog_dev *kd, gcuda_stream s, graft_error *err);
graft_status gops_int_prog_run(const gops_iprog_dev *kd, gcuda_stream s, graft_error *err);
void gops_int_prog_free(gops_iprog_dev *kd);

typedef enum gops_unary_op {
    GOPS_NEG, GOPS_SQRT, GOPS_TANH, GOPS_SIGMOID, GOPS_GELU_ERF, GOPS_GELU_TANH, GOPS_CLIP, GOPS_RELU,
    GOPS_EXP, GOPS_ABS, GOPS_RECIPROCAL, GOPS_IDENTITY
} gops_unary_op;

/* y[i] = op(x[i]), i < n; CLIP uses lo/hi. y may alias x. */
graft_status gops_unary(gops_unary_op op, int dtype, const void *x, void *y, int64_t n, float lo, float hi,
                        gcuda_stream s, graft_error *err);

/* y[i] = (dst_dtype) x[i] between float types. */
graft_status gops_cast(int src_dtype, int dst_dtype, const void *x, void *y, int64_t n, gcuda_stream s,
                       graft_error *err);

/* Strided copy of elements of `esize` bytes (1, 2, 4 or 8): for every
 * index of sh, dst[sum idx*st[1]] = src[sum idx*st[0]] (transpose, slice,
 * expand, concat into a slot). */
graft_status gops_copy(size_t esize, const gops_shape *sh, const void *src, void *dst, gcuda_stream s,
                       graft_error *err);

/* y[r] = mean (mean != 0) or sum of x[r, 0..dim), rows x dim. */
graft_status gops_reduce_last(int dtype, const void *x, void *y, int64_t rows, int64_t dim, int mean,
                              gcuda_stream s, graft_error *err);

/* A chain of elementwise nodes as one kernel (the CUDA executor's fusion,
 * runtime/cuda/fuse.c): per element of the output (rank, dims; y of
 * y_dtype), r starts as leaf 0 there, or, with norm_dim > 0, as the
 * RMSNorm of leaf 0's rows of norm_dim (eps, gamma of leaf 0's type or
 * none, rounded to norm_dtype; norm_div: x / sqrt(mean + eps), a graph's
 * own spelled-out norm); then each instruction in order: UNARY r =
 * op(r) (lo, hi for CLIP), BINARY r = op(r, leaf) (op(leaf, r) with
 * chain_b), CAST nothing but the rounding; r is rounded to the
 * instruction's dtype after each, as the unfused nodes store it. Leaves
 * are read through broadcast strides st[leaf] over dims. */
#define GOPS_FUSE_MAX 8
#define GOPS_FUSE_LEAVES 8
enum { GOPS_FUSE_UNARY = 0, GOPS_FUSE_BINARY = 1, GOPS_FUSE_CAST = 2 };
typedef struct gops_fuse_ins {
    int kind, op, leaf, chain_b, dtype;
    float lo, hi;
} gops_fuse_ins;
typedef struct gops_fuse {
    int n_ins, n_leaf, rank;
    gops_fuse_ins ins[GOPS_FUSE_MAX];
    const void *leaf[GOPS_FUSE_LEAVES];
    int leaf_dtype[GOPS_FUSE_LEAVES];
    int64_t dims[GOPS_MAX_RANK];
    int64_t st[GOPS_FUSE_LEAVES][GOPS_MAX_RANK];
    void *y;
    int y_dtype;
    int64_t norm_dim; /* > 0: RMSNorm head over the last norm_dim elements */
    const void *gamma; /* NULL: no scale (a graph's own x / sqrt(mean(x^2) + eps)) */
    float eps;
    int norm_dtype;
    int norm_div;      /* x / sqrt(mean + eps), as that graph computes it, instead of x * rsqrt */
    /* sk_y set (a norm-headed chain over one row, run by a GEMV's last
     * block: gcuda_gemv_rows_tail): the skip RMSNorm that reads the
     * chain's output c, run after it in the same block: t = sk_x + c
     * (+ sk_bias) in fp32, stored rounded to sk_sum (may be NULL);
     * sk_y = t * rsqrt(mean(t^2) + sk_eps) * sk_gamma, rounded, all of
     * y's dtype (gcuda_skip_rmsnorm's arithmetic). */
    const void *sk_x, *sk_bias, *sk_gamma;
    void *sk_y, *sk_sum;
    float sk_eps;
} gops_fuse;
graft_status gops_fused(const gops_fuse *f, gcuda_stream s, graft_error *err);

/* An RMSNorm computed by the GEMV that reads its output (a prologue): the
 * GEMV's x is gamma * t / rms(t), rounded to the dtype, t = x (+ skip)
 * (+ bias); with skip, t is stored to sum (may be NULL) rounded. */
typedef struct gops_rows_norm {
    const void *x, *skip, *bias, *gamma;
    void *sum;
    float eps;
} gops_rows_norm;

/* gcuda_gemv_rows (gcuda.h) of one matrix with the chain that reads its
 * output y (leaf 0 of `tail`, which is y's shape: N elements) run in the
 * same launch: y is written, and the chain's output tail->y. Without a
 * norm the chain runs per element; with norm_dim == N (an RMSNorm over the
 * whole output heads it) the last block to finish runs it, counted by
 * `counter` (device, zero before the first call; reset by each call). */
graft_status gcuda_gemv_rows_tail(int dtype, const void *x, const void *w, void *y, int64_t K, int64_t N,
                                  const gops_fuse *tail, unsigned *counter, gcuda_stream s, graft_error *err);
/* Two matrices [N, K] of one x (gate and up) and the per-element chain
 * that reads y0 as leaf 0 and may read y1 (gelu(gate) * up), in one
 * launch: each output index's two rows read by the same threads. */
/* The general form: n matrices [N[j], K] (or a pair, with its tail) whose
 * x is the norm `pro` computes; tail as gcuda_gemv_rows_tail (one matrix,
 * without the norm) or the pair's. */
graft_status gcuda_gemv_rows_fused(int dtype, const gops_rows_norm *pro, const void *const *w, void *const *y,
                                   const int64_t *N, int n, int64_t K, const gops_fuse *tail, unsigned *counter,
                                   int pair, gcuda_stream s, graft_error *err);
/* n matrices [N[j], K] whose x is the RMSNorm (pro: gamma, eps; x, skip,
 * bias and sum unused) of c, the norm-headed chain `chain` over its leaf 0
 * (K elements, norm_dim K <= 2048, no skip norm): every block computes c
 * and x itself (into shared memory), block 0 stores c to chain->y (of the
 * GEMV's dtype). The chain of one GEMV's output run as the next GEMV's
 * prologue instead of by its last block. */
#define GCUDA_CHAIN_PRO_MAX_K 2048 /* the chain's row: GO_ROW_EPT elements a thread of 256 */
graft_status gcuda_gemv_rows_chain_pro(int dtype, const gops_fuse *chain, const gops_rows_norm *pro,
                                       const void *const *w, void *const *y, const int64_t *N, int n, int64_t K,
                                       gcuda_stream s, graft_error *err);
/* The chain prologue's other forms, each for a chain that the compact
 * form takes (fp16/bf16 rows, up to 3 add/sub/mul/cast instructions whose
 * leaves are laid out as the row or hold one value; GRAFT_EUNSUPPORTED
 * otherwise): x is c itself (pro NULL), its RMSNorm (pro: gamma, eps),
 * or the skip RMSNorm of t = c + pro->skip (+ pro->bias), block 0 storing
 * t to pro->sum (when not NULL); chain->y may be NULL (c not stored).
 * tail (NULL: none): as gcuda_gemv_rows_tail's per-element chain (one
 * matrix), or with pair the gate/up pair's (two). */
graft_status gcuda_gemv_rows_chain_pro_tail(int dtype, const gops_fuse *chain, const gops_rows_norm *pro,
                                            const void *const *w, void *const *y, const int64_t *N, int n,
                                            int64_t K, const gops_fuse *tail, int pair, gcuda_stream s,
                                            graft_error *err);
/* Whether chain's own shape fits the compact form (the operands' 16-byte
 * alignment, the norm's included, is checked by the launch: a chain that
 * fits may still be refused there). The norm-only form without a tail
 * also runs in the compact form through gcuda_gemv_rows_chain_pro_tail
 * wherever it fits (gcuda_gemv_rows_chain_pro: only under
 * GRAFT_CUDA_ROWS_V8=2), else in the general one. */
int gcuda_gemv_rows_chain_pro_fits(int dtype, const gops_fuse *chain);
graft_status gcuda_gemv_rows_pair_tail(int dtype, const void *x, const void *w0, const void *w1, void *y0, void *y1,
                                       int64_t K, int64_t N, const gops_fuse *tail, gcuda_stream s, graft_error *err);

/* *out (device) = the index of the largest of x[0..n), the lowest index on
 * a tie, as the host's greedy pick (best = 0; x[i] > x[best] moves it):
 * NaN never wins, a NaN at 0 or nothing above -inf gives 0. ws: device
 * scratch of GOPS_ARGMAX_WS bytes, zeroed before its first use (its
 * counter resets itself), one per stream. */
#define GOPS_ARGMAX_BLOCKS 256
#define GOPS_ARGMAX_WS (16 + GOPS_ARGMAX_BLOCKS * 16)
graft_status gops_argmax(int dtype, const void *x, int64_t n, int64_t *out, void *ws, gcuda_stream s,
                         graft_error *err);
/* The same, the id also (or only: out NULL) to *out32 as an int32 (a graph's
 * int32 input ids) and to *out_h (NULL: not; host memory the device maps,
 * read once the kernel has completed: no copy back), and x copied to keep
 * (n elements of dtype; NULL: not) in the same pass: the row kept while the
 * next step overwrites x. */
graft_status gops_argmax_to(int dtype, const void *x, int64_t n, int64_t *out, int32_t *out32, int64_t *out_h,
                            void *keep, void *ws, gcuda_stream s, graft_error *err);

/* n 32-bit words from src to dst by one small kernel: src may be host memory
 * the device maps, so that a captured step holds a kernel node where a copy
 * node would cost more at its start. No programmatic dependence either way:
 * the kernel after it starts only once it has written (the executor's
 * lengths, which the attention reads before its griddepcontrol.wait;
 * gops_copy lets its dependents start before it writes). */
graft_status gops_copy_words(uint32_t *dst, const uint32_t *src, int n, gcuda_stream s, graft_error *err);
/* The same launched as a programmatic dependent of the kernel before
 * (GRAFT_CUDA_PDL=all): it copies at once, then waits for that kernel to
 * end before it ends itself, so that the copy (a read of mapped host
 * memory: a bus round trip) runs under that kernel where a block of it
 * fits, and the kernel after still starts only once both have ended. dst
 * must be read by no kernel that may still run. */
graft_status gops_copy_words_ahead(uint32_t *dst, const uint32_t *src, int n, gcuda_stream s, graft_error *err);

/* Attention for any number of query rows: one block per (batch, query
 * head, query row), online softmax over the keys. Q rows [hd], K/V rows
 * [hd]/[vd] reached through (batch, head, seq) strides. The key j is
 * masked when causal and j > past + i (past: keys before the first
 * query), when the window is set and past + i - j > window_left, when
 * j >= kv_len[b] (device int32, may be NULL: T), or by the mask: bool
 * (0 masks) or additive float (fp32 or the dtype), reached through
 * (batch, head, query, key) strides. A row with every key masked gives
 * zeros. */
typedef struct gops_attn_args {
    int dtype;
    int64_t B, Hq, Hkv, Sq, T, hd, vd;
    const void *q, *k, *v;
    void *y;
    int64_t qs[3], ks[3], vs[3], ys[3];
    const void *mask; /* NULL: none */
    int mask_kind;    /* 0 none, 1 bool, 2 additive in the dtype, 3 additive fp32 */
    int64_t ms[4];
    int64_t mlast;    /* keys covered by the mask; later keys are masked */
    int64_t past;     /* causal/window offset (when kv_len is NULL) */
    const int32_t *kv_len; /* device, [B]: keys per batch; past = kv_len - Sq */
    int causal;
    int64_t window_left; /* < 0: none */
    float scale, softcap;
} gops_attn_args;

graft_status gops_attention(const gops_attn_args *a, gcuda_stream s, graft_error *err);

/* GEMM through cuBLASLt (cuBLAS where cuBLASLt has no algorithm, or
 * GRAFT_CUDA_NO_LT=1 when the handle is created), row-major: C[b] = A[b]
 * (M x K) . B[b] (K x N) for b < batch, with batch strides sa, sb, sc (0:
 * shared). fp32 accumulation; fp32 inputs keep full fp32 math (no TF32).
 * gops_gemm_bt: B stored transposed, each B[b] N x K row-major. */
typedef struct gops_blas gops_blas;
graft_status gops_blas_create(gops_blas **out, graft_error *err);
void gops_blas_free(gops_blas *h);
graft_status gops_gemm(gops_blas *h, int dtype, int64_t M, int64_t N, int64_t K, const void *A, int64_t sa,
                       const void *B, int64_t sb, void *C, int64_t sc, int64_t batch, gcuda_stream s,
                       graft_error *err);
graft_status gops_gemm_bt(gops_blas *h, int dtype, int64_t M, int64_t N, int64_t K, const void *A, int64_t sa,
                          const void *B, int64_t sb, void *C, int64_t sc, int64_t batch, gcuda_stream s,
                          graft_error *err);

#ifdef __cplusplus
}
#endif

#endif
