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

/* Properties of the current device. */
graft_status gcuda_device_info_get(gcuda_device_info *info, graft_error *err);

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
} gcuda_rotary_args;

graft_status gcuda_rotary(const gcuda_rotary_args *a, gcuda_stream s, graft_error *err);

/* ------------------------------------------------------------ decode GEMV */

/* y[N] = x[K] . W[K, N] (W row-major, the layout of ONNX MatMul weights),
 * batch 1. Split-K over blocks when N alone cannot fill the device: the
 * partial sums go to a workspace whose size gcuda_gemv_plan gives (zero it
 * once before first use: its counters reset themselves after each call). */
graft_status gcuda_gemv_plan(int dtype, int64_t K, int64_t N, size_t *ws_bytes, graft_error *err);
graft_status gcuda_gemv(int dtype, const void *x, const void *w, void *y, int64_t K, int64_t N, void *ws,
                        size_t ws_bytes, gcuda_stream s, graft_error *err);

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
    void *ws;                   /* workspace of ws_bytes (gcuda_attn_decode_plan) */
    size_t ws_bytes;
} gcuda_attn_decode_args;

/* Checks the geometry (head_dim a multiple of 8 and <= 512, q_heads a
 * multiple of kv_heads with at most 16 query heads per kv head) and sets
 * a->num_splits (when 0) and a->ws_bytes for one wave over the device. */
graft_status gcuda_attn_decode_plan(gcuda_attn_decode_args *a, graft_error *err);
graft_status gcuda_attn_decode(const gcuda_attn_decode_args *a, gcuda_stream s, graft_error *err);

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

#ifdef __cplusplus
}
#endif

#endif
