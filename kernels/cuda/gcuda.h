/* graft CUDA kernels: C-callable entry points (prefix gcuda_).
 *
 * Every function returns a graft_status; on failure `err` (may be NULL)
 * names the call, the CUDA error and the source line. Nothing here exits or
 * prints. Kernels are enqueued on `stream` (NULL: the legacy default stream)
 * and return without synchronising, except where said; none allocates, so
 * every launch can be captured into a CUDA graph. Device pointers are
 * borrowed for the duration of the call (the work they feed runs later on
 * the stream: keep them alive until then).
 *
 * Data types are graft's ONNX codes: GRAFT_DTYPE_FLOAT, GRAFT_DTYPE_FLOAT16,
 * GRAFT_DTYPE_BFLOAT16. Arithmetic is fp32 whatever the storage type. */
#ifndef GRAFT_KERNELS_CUDA_GCUDA_H
#define GRAFT_KERNELS_CUDA_GCUDA_H

#include <stddef.h>
#include <stdint.h>

#include "graft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Same type as cudaStream_t, spelled so C code needs no CUDA header. */
typedef struct CUstream_st *gcuda_stream;

/* ------------------------------------------------------------ device and buffers */

/* Devices visible. *count is 0 with GRAFT_OK when there is no driver or no
 * device (the caller decides whether that is an error). */
graft_status gcuda_device_count(int *count, graft_error *err);

typedef struct gcuda_device_info {
    char name[256];
    int cc_major, cc_minor;
    int sm_count;
    size_t global_bytes, l2_bytes, smem_optin_bytes; /* smem: per block, opted in */
} gcuda_device_info;

/* Properties of the current device (sm_count: gcuda_sm_limit's where set). */
graft_status gcuda_device_info_get(gcuda_device_info *info, graft_error *err);

/* GRAFT_CUDA_SMS=N (a lab setting): makes a green context of N SMs (as
 * the driver rounds them) current on this thread, once a process, before
 * the caller creates its streams; every grid is then sized by its SM
 * count. *sms: that count, 0 when unset (the whole device). */
graft_status gcuda_sm_limit(int *sms, graft_error *err);

/* Device allocation of `bytes` (owned: gcuda_free). *out is NULL on failure. */
graft_status gcuda_malloc(void **out, size_t bytes, graft_error *err);
/* Frees a gcuda_malloc buffer; NULL is a no-op. Synchronises the device. */
void gcuda_free(void *p);

/* Host to device, enqueued on the stream; `src` must stay valid until the
 * stream reaches the copy (pageable memory: it is staged before return). */
graft_status gcuda_upload(void *dst, const void *src, size_t bytes, gcuda_stream s, graft_error *err);
/* Device to host; synchronous: returns once the bytes are in `dst`. */
graft_status gcuda_download(void *dst, const void *src, size_t bytes, gcuda_stream s, graft_error *err);
graft_status gcuda_memset(void *dst, int byte, size_t bytes, gcuda_stream s, graft_error *err);
/* Fills n elements of `dtype` with a quiet NaN (poisoning outputs in tests). */
graft_status gcuda_fill_nan(int dtype, void *dst, size_t n, gcuda_stream s, graft_error *err);
/* Waits for the stream and reports any error its work raised. */
graft_status gcuda_sync(gcuda_stream s, graft_error *err);

/* Bytes per element of a supported dtype; 0 otherwise. */
size_t gcuda_dtype_size(int dtype);

/* ------------------------------------------------------------ norms */

/* y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * gamma, rows x dim.
 * y may alias x. dim <= 16384. */
graft_status gcuda_rmsnorm(int dtype, const void *x, const void *gamma, void *y, int64_t rows, int64_t dim, float eps,
                           gcuda_stream s, graft_error *err);

/* Skip (residual) RMSNorm, fused: t = x + skip (+ bias, [dim], may be NULL);
 * sum = t when `sum` is non-NULL (stored in dtype); y = rmsnorm(t) with the
 * norm taken on the fp32 t (SkipSimplifiedLayerNormalization). Any output
 * may alias any input of the same shape. dim <= 16384. */
graft_status gcuda_skip_rmsnorm(int dtype, const void *x, const void *skip, const void *bias, const void *gamma,
                                void *y, void *sum, int64_t rows, int64_t dim, float eps, gcuda_stream s,
                                graft_error *err);

/* ------------------------------------------------------------ rotary */

typedef struct gcuda_rotary_args {
    int dtype;
    const void *x;              /* rows of head_size values, contiguous */
    void *y;                    /* same layout as x; may alias x */
    const void *cos_cache;      /* [max_pos, rotary_dim / 2], dtype */
    const void *sin_cache;      /* same */
    const int64_t *positions;   /* device, [batch * seq]: cache row of each token */
    int64_t batch, seq, heads, head_size;
    int64_t rotary_dim;         /* even, <= head_size; the rest is copied */
    int64_t max_pos;            /* rows in the caches; positions outside give NaN rows */
    int64_t stride_b, stride_s, stride_h; /* elements between rows of x and y:
                                           * [B,S,H,D]: S*H*D, H*D, D; [B,H,S,D]: H*S*D, D, S*D */
    int interleaved;            /* 1: pairs (2i, 2i+1); 0: halves (i, i + rotary_dim/2) */
    /* non-NULL: the rows are first RMSNorm(norm_x rows, laid out as x) *
     * norm_gamma [head_size] (norm_eps), rounded to dtype as an RMSNorm node
     * stores them (q/k-norm and rotary in one launch); x is not read */
    const void *norm_x, *norm_gamma;
    float norm_eps;
} gcuda_rotary_args;

graft_status gcuda_rotary(const gcuda_rotary_args *a, gcuda_stream s, graft_error *err);
/* Two rotaries with their norms (norm_x set in both: a layer's q and k),
 * of one dtype, in one launch: as gcuda_rotary(a) then gcuda_rotary(b)
 * when neither reads what the other writes. */
graft_status gcuda_rotary_pair(const gcuda_rotary_args *a, const gcuda_rotary_args *b, gcuda_stream s,
                               graft_error *err);

/* ------------------------------------------------------------ decode GEMV */

/* y[N] = x[K] . W[K, N] (W row-major, the layout of ONNX MatMul weights),
 * batch 1. Split-K over blocks when N alone cannot fill the device: the
 * partial sums go to a workspace whose size gcuda_gemv_plan gives (zero it
 * once before first use: its counters reset themselves after each call). */
graft_status gcuda_gemv_plan(int dtype, int64_t K, int64_t N, size_t *ws_bytes, graft_error *err);
graft_status gcuda_gemv(int dtype, const void *x, const void *w, void *y, int64_t K, int64_t N, void *ws,
                        size_t ws_bytes, gcuda_stream s, graft_error *err);
/* Up to GCUDA_PREFETCH_MAX byte ranges (weights a later kernel will read;
 * 16-byte aligned, multiples of 16) that a kernel asks L2 for: a hint, no
 * result changes (gcuda_attn_decode_args.pf, gcuda_gemv_rows_prefetch_next). */
#define GCUDA_PREFETCH_MAX 8
typedef struct gcuda_prefetch_set {
    const void *ptr[GCUDA_PREFETCH_MAX];
    size_t bytes[GCUDA_PREFETCH_MAX];
    int n;
    int mode; /* set by the launching wrapper from GRAFT_CUDA_PF_MODE (gc_pf_mode); callers leave it 0 */
} gcuda_prefetch_set;
/* The next gcuda_gemv_rows* call on this host thread (whichever variant)
 * asks L2 for ps's ranges, spread over all its blocks, at its start,
 * before its first weight loads and its wait for the kernel before: weights of
 * later kernels, to stream from DRAM while this GEMV and the kernel before
 * it are bound by latency. Each gcuda_gemv_rows* call takes it, launched or
 * not; NULL (or n 0) clears it. GRAFT_EINVAL for more than
 * GCUDA_PREFETCH_MAX ranges or one not 16-byte aligned (nothing set). */
graft_status gcuda_gemv_rows_prefetch_next(const gcuda_prefetch_set *ps, graft_error *err);

/* n <= GCUDA_GEMV_MAX GEMVs of one x in one launch: y[j][N[j]] = x[K] .
 * W[j][K, N[j]] (q/k/v or gate/up projections of one hidden state). */
#define GCUDA_GEMV_MAX 4
graft_status gcuda_gemv_multi_plan(int dtype, int64_t K, const int64_t *N, int n, size_t *ws_bytes,
                                   graft_error *err);
graft_status gcuda_gemv_multi(int dtype, const void *x, const void *const *w, void *const *y, const int64_t *N,
                              int n, int64_t K, void *ws, size_t ws_bytes, gcuda_stream s, graft_error *err);
/* The same with the geometry's knobs set (for the kernel bench's sweep):
 * 16-byte rows in flight per thread (4, 8 or 16), the blocks per SM that
 * split-K aims at, the fewest rows a split takes. gcuda_gemv is
 * {4, 4, 256}. */
typedef struct gcuda_gemv_tune {
    int unroll, blocks_per_sm, min_rows;
} gcuda_gemv_tune;
graft_status gcuda_gemv_tuned_plan(int dtype, int64_t K, int64_t N, const gcuda_gemv_tune *t, size_t *ws_bytes,
                                   graft_error *err);
graft_status gcuda_gemv_tuned(int dtype, const void *x, const void *w, void *y, int64_t K, int64_t N, void *ws,
                              size_t ws_bytes, const gcuda_gemv_tune *t, gcuda_stream s, graft_error *err);

/* y[N] = W[N, K] . x[K]: the weight stored one output per row (the
 * executor's transposed MatMul weights), batch 1; no workspace. Up to
 * GCUDA_GEMV_MAX matrices of one x in one launch (_multi). _tuned sets the
 * 16-byte loads in flight per thread (2, 4, 8 or 16; the others use 4). */
graft_status gcuda_gemv_rows(int dtype, const void *x, const void *w, void *y, int64_t K, int64_t N, gcuda_stream s,
                             graft_error *err);
graft_status gcuda_gemv_rows_multi(int dtype, const void *x, const void *const *w, void *const *y, const int64_t *N,
                                   int n, int64_t K, gcuda_stream s, graft_error *err);
graft_status gcuda_gemv_rows_tuned(int dtype, const void *x, const void *w, void *y, int64_t K, int64_t N, int unroll,
                                   gcuda_stream s, graft_error *err);

/* ------------------------------------------------------------ decode attention */

/* Split-K flash decoding for one query token per sequence. The current
 * length of each sequence is read from device memory, so one launch (or one
 * captured graph) serves every step. The key at position p - j is visible
 * when window_left < 0 or j <= window_left, p = len - 1 being the query's
 * position (ONNX Attention's left_window_size; GroupQueryAttention's
 * local_window_size w is window_left = w - 1). */
typedef struct gcuda_attn_decode_args {
    int dtype;
    int64_t batch, q_heads, kv_heads, head_dim, max_seq;
    const void *q;              /* [batch, q_heads, head_dim] */
    const void *k_cache;        /* [batch, kv_heads, max_seq, head_dim] */
    const void *v_cache;        /* same */
    const int32_t *seq_lens;    /* device, [batch]: keys in the cache (current token included) */
    void *out;                  /* [batch, q_heads, head_dim] */
    float scale;                /* applied to q.k before the softcap */
    float softcap;              /* > 0: s = softcap * tanh(s / softcap) */
    int64_t window_left;        /* < 0: no window */
    int num_splits;             /* set by gcuda_attn_decode_plan */
    int impl;                   /* 0: default, the CUDA-core kernel (until the tensor-core
                                 * one has passed on the device); 1: the CUDA-core kernel;
                                 * 2: tensor cores (mma.sync) for fp16/bf16, the CUDA-core
                                 * kernel for fp32. Plan and run with the same value. */
    void *ws;                   /* workspace of ws_bytes (gcuda_attn_decode_plan) */
    size_t ws_bytes;
    /* Non-NULL (both): the current token's key and value rows, one per
     * (batch, kv head) at these element strides (last axis contiguous),
     * not yet in the caches: the kernel attends to them as the key at
     * seq_lens[b] - 1 and writes them there, as gcuda_kv_append (seq 1,
     * past seq_lens - 1) would have before. Taken by the tensor-core kernel
     * only (impl 2, fp16/bf16) with 16-byte aligned rows
     * (gcuda_attn_decode_takes_new); else EINVAL. */
    const void *k_new, *v_new;
    int64_t new_stride_b, new_stride_h;
    /* Optional, tensor-core kernel only (gcuda_attn_decode_takes_prep; else EINVAL): rows given before
     * the steps that make them, which the kernel applies first. q_gamma set: q holds the query rows
     * before their RMSNorm (q_gamma [head_dim], q_eps) and rotary; k_gamma set: k_new likewise (k_gamma,
     * k_eps); v_norm: v_new holds the value rows before v / sqrt(mean(v^2) + v_eps) (fp32, no scale).
     * Each RMSNorm is rounded to dtype before its rotary and the rotary after, as separate nodes store
     * them (gcuda_rotary with norm_x); the stored new rows are the made ones. The rotary (q_gamma or
     * k_gamma): caches rope_cos / rope_sin [rope_max_pos, rope_dim / 2] of dtype, the token's cache row
     * rope_pos[b] (device), pairs interleaved (2i, 2i + 1) or halves (i, i + rope_dim / 2). */
    const void *q_gamma, *k_gamma;
    float q_eps, k_eps, v_eps;
    int v_norm;
    const void *rope_cos, *rope_sin;
    const int64_t *rope_pos;
    int64_t rope_max_pos, rope_dim;
    int rope_interleaved;
    /* Optional (pf.n > 0), tensor-core kernel only (ignored by the others): byte ranges (16-byte aligned,
     * multiples of 16) the kernel asks L2 for once it has waited for the kernel before, spread over all
     * its blocks (cp.async.bulk.prefetch.L2), so that the weights of the GEMVs after it stream from DRAM
     * while the attention, bound by latency, leaves DRAM idle. A hint: no result changes. pf_late: the
     * blocks with keys ask after storing their partials (the blocks without, at once), so that the
     * prefetch's DRAM traffic cannot delay their cache tiles. */
    gcuda_prefetch_set pf;
    int pf_late;
    /* 1: every cache row the query sees but the new rows (k_new/v_new) was written two or more launches
     * before this one, not by the kernel just before it (a GRAFT_CUDA_PDL=all launch waits for that one
     * only): the tensor-core kernel asks for its first tile before it waits. 0 where the launch just
     * before appends to the caches (gcuda_kv_append). */
    int cache_ready;
} gcuda_attn_decode_args;

/* 1 when gcuda_attn_decode takes a's k_new and v_new; else the caller
 * appends the rows itself (gcuda_kv_append) and leaves them NULL. */
int gcuda_attn_decode_takes_new(const gcuda_attn_decode_args *a);
/* 1 when gcuda_attn_decode takes a's q_gamma / k_gamma / v_norm (at least one set): the tensor-core
 * kernel, 16-byte aligned rows, gammas and caches, rope_dim a multiple of 16 up to head_dim; k_gamma
 * and v_norm with new rows it takes (gcuda_attn_decode_takes_new). */
int gcuda_attn_decode_takes_prep(const gcuda_attn_decode_args *a);

/* Checks the geometry (head_dim a multiple of 8 and <= 512, q_heads a
 * multiple of kv_heads with at most 16 query heads per kv head) and sets
 * a->num_splits (when 0) and a->ws_bytes for one wave over the device. */
graft_status gcuda_attn_decode_plan(gcuda_attn_decode_args *a, graft_error *err);
graft_status gcuda_attn_decode(const gcuda_attn_decode_args *a, gcuda_stream s, graft_error *err);

/* ------------------------------------------------------------ prefill attention, KV append */

/* Appends S new key/value rows per sequence to the caches ([batch, kv_heads,
 * max_seq, head_dim], the layout of gcuda_attn_decode): row s of sequence b
 * goes to position past_lens[b] + s, read from device memory so one launch
 * (or captured graph) serves every step; rows that would land at or past
 * max_seq are dropped. The source rows are addressed by element strides, so
 * [B,S,H,D] (S*H*D, H*D, D) and [B,H,S,D] (H*S*D, D, S*D) both work; the
 * last axis is contiguous. k or v may be NULL (that cache is left alone).
 * past_lens is not updated (the caller advances it). */
typedef struct gcuda_kv_append_args {
    int dtype;
    int64_t batch, seq, kv_heads, head_dim, max_seq;
    const void *k, *v;                    /* new rows */
    int64_t stride_b, stride_s, stride_h; /* elements between rows of k and v */
    void *k_cache, *v_cache;
    const int32_t *past_lens;             /* device, [batch] */
} gcuda_kv_append_args;

graft_status gcuda_kv_append(const gcuda_kv_append_args *a, gcuda_stream s, graft_error *err);

/* Causal attention for S query tokens per sequence against the KV cache of
 * gcuda_attn_decode, the S new keys already written (gcuda_kv_append) at
 * positions past .. past + S - 1, past = past_lens[b] read from device
 * memory. Query token i sits at position p = past + i and sees the key at
 * p - j for 0 <= j and (window_left < 0 or j <= window_left) (the window
 * convention of gcuda_attn_decode). GQA: q_heads a multiple of kv_heads;
 * head_dim a multiple of 8, at most 512. q and out are addressed by element
 * strides (all three 0: contiguous [batch, S, q_heads, head_dim]); the last
 * axis is contiguous. No workspace. Keys at or past max_seq do not exist
 * (a query whose position is past the cache sees only the keys before
 * max_seq; one that sees no key gets a zero row). */
typedef struct gcuda_attn_prefill_args {
    int dtype;
    int64_t batch, seq, q_heads, kv_heads, head_dim, max_seq;
    const void *q;
    int64_t q_stride_b, q_stride_s, q_stride_h;
    const void *k_cache;        /* [batch, kv_heads, max_seq, head_dim] */
    const void *v_cache;        /* same */
    const int32_t *past_lens;   /* device, [batch]: keys before the S new ones */
    void *out;
    int64_t o_stride_b, o_stride_s, o_stride_h;
    float scale;                /* applied to q.k before the softcap */
    float softcap;              /* > 0: s = softcap * tanh(s / softcap) */
    int64_t window_left;        /* < 0: no window */
} gcuda_attn_prefill_args;

graft_status gcuda_attn_prefill(const gcuda_attn_prefill_args *a, gcuda_stream s, graft_error *err);

/* ------------------------------------------------------------ MatMulNBits (4-bit) */

/* com.microsoft MatMulNBits with bits = 4: Y[M, N] = A[M, K] . dequant(B)^T
 * (+ bias), B packed [N, k_blocks, block_size / 2] uint8 (k_blocks =
 * ceil(K / block_size), two codes a byte, low nibble first along K), the
 * weight of (n, k) being (code - zero_point) * scale of block k / block_size
 * of row n. scales [N * k_blocks] and bias [N] in dtype (the activation
 * dtype). Zero points: NULL (8 for every block), packed uint4
 * (zp_dtype GRAFT_DTYPE_UINT8, [N, ceil(k_blocks / 2)], low nibble for the
 * even block) or one value a block in dtype (zp_dtype == dtype, [N * k_blocks]).
 * block_size a power of two in 16..256. M == 1 takes a bandwidth-bound
 * GEMV (B read once with 16-byte loads when B and its rows are 16-byte
 * aligned); M > 1 a tiled kernel that dequantizes tiles of B into shared
 * memory. Arithmetic in fp32. No workspace. */
typedef struct gcuda_matmul_nbits_args {
    int dtype;                  /* A, scales, bias, Y (and typed zero points) */
    int64_t M, N, K, block_size;
    const void *a;              /* [M, K] */
    const uint8_t *b;           /* [N, k_blocks, block_size / 2] */
    const void *scales;         /* [N * k_blocks] */
    const void *zero_points;    /* NULL, or see zp_dtype */
    int zp_dtype;               /* GRAFT_DTYPE_UINT8 (packed) or dtype */
    const void *bias;           /* [N] or NULL */
    void *y;                    /* [M, N] */
} gcuda_matmul_nbits_args;

graft_status gcuda_matmul_nbits(const gcuda_matmul_nbits_args *a, gcuda_stream s, graft_error *err);

/* ------------------------------------------------------------ misc */

/* Softmax over the last axis: rows x dim. y may alias x. */
graft_status gcuda_softmax(int dtype, const void *x, void *y, int64_t rows, int64_t dim, gcuda_stream s,
                           graft_error *err);

typedef enum gcuda_binary_op { GCUDA_BINARY_ADD, GCUDA_BINARY_MUL } gcuda_binary_op;
/* y[i] = a[i] op b[i % b_n], i < n (b_n == n: same shape; b_n == last dim:
 * a row broadcast). y may alias a or b. */
graft_status gcuda_binary(gcuda_binary_op op, int dtype, const void *a, const void *b, void *y, int64_t n,
                          int64_t b_n, gcuda_stream s, graft_error *err);

/* out[i, :] = table[ids[i], :] (embedding rows), table [rows, dim]; negative
 * ids count from the end (ONNX Gather); ids outside [-rows, rows) give zero
 * rows. ids are device int64. */
graft_status gcuda_gather_rows(int dtype, const void *table, int64_t rows, int64_t dim, const int64_t *ids,
                               int64_t n, void *out, gcuda_stream s, graft_error *err);

/* n <= GCUDA_GATHER_MAX gathers of the same ids in one launch (the rotary
 * caches' cos and sin rows at the positions, say): out[j][i, :] =
 * table[j][ids[i], :] by gcuda_gather_rows' rule, table j [rows[j], dim[j]],
 * all of dtype. */
#define GCUDA_GATHER_MAX 8
graft_status gcuda_gather_rows_multi(int dtype, int n, const void *const *table, const int64_t *rows,
                                     const int64_t *dim, const int64_t *ids, int64_t nids, void *const *out,
                                     gcuda_stream s, graft_error *err);

#ifdef __cplusplus
}
#endif

#endif
