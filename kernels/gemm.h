/* CPU linear algebra shared by kernels: a small persistent thread pool,
 * fp32 GEMM/GEMV (cache-blocked, packed, AVX2+FMA when the CPU has it),
 * grow-only scratch buffers and fp16/bf16 <-> fp32 row conversions.
 * Prefix k_. */
#ifndef GRAFT_KERNELS_GEMM_H
#define GRAFT_KERNELS_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/rt.h"

/* ------------------------------------------------------------ threads */

/* Number of threads the pool runs work on (the caller included): the
 * GRAFT_THREADS environment variable when set (>= 1), else the number of
 * online cores. Fixed at first use. */
int k_threads(void);

typedef void (*k_task_fn)(void *ctx, int64_t task);

/* Runs fn(ctx, t) for t in [0, n_tasks), spread over the pool; returns when
 * all are done. Calls from inside a task, or while another thread uses the
 * pool, run serially on the calling thread. */
void k_parallel_for(int64_t n_tasks, k_task_fn fn, void *ctx);

/* 1 when the AVX2+FMA paths run (the CPU has them and GRAFT_NO_SIMD is unset). */
int k_have_avx2(void);

/* ------------------------------------------------------------ scratch */

/* A grow-only buffer: k_buf_get returns at least `bytes` bytes (64-byte
 * aligned, contents not kept across growth) or NULL when out of memory.
 * Owned by whoever holds the k_buf; k_buf_free releases it. */
typedef struct k_buf {
    void *p;
    size_t cap;
} k_buf;

void *k_buf_get(k_buf *b, size_t bytes);
void k_buf_free(k_buf *b);

/* ------------------------------------------------------------ conversions */

/* Converts n elements of dtype (float, float16, bfloat16, double) to float;
 * returns 0 for other dtypes. */
int k_to_f32(int dtype, const void *src, float *dst, size_t n);
/* The same, in chunks on the thread pool for large n. */
int k_to_f32_par(int dtype, const void *src, float *dst, size_t n);
int k_from_f32_par(int dtype, const float *src, void *dst, size_t n);
/* Converts n floats to dtype (float, float16, bfloat16, double). */
int k_from_f32(int dtype, const float *src, void *dst, size_t n);
/* 1 for the floating dtypes k_to_f32 handles. */
int k_is_float(int dtype);

/* ------------------------------------------------------------ GEMM */

/* C = alpha * op(A) * op(B) + beta * C, row-major, fp32. op(A) is M x K,
 * op(B) is K x N. With transA, A is stored K x M (element (i,k) at
 * A[k*lda + i]); otherwise M x K (A[i*lda + k]); likewise B. beta == 0
 * overwrites C without reading it. Spreads over the pool when large
 * enough. Uses thread-local scratch (grown, never shrunk). Returns 0, or
 * -1 when that scratch could not be allocated (C is then unspecified). */
int k_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
            int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* B (K x N, row-major, constant: a weight) packed once into the GEMM's
 * panel layout, so that k_sgemm_packed streams it contiguously and never
 * repacks it. */
typedef struct k_bpack {
    k_buf buf;
    const float *p;    /* fp32 panels; NULL until packed, or when h holds them */
    const uint16_t *h; /* fp16/bf16 weights: the panels in their own 16 bits (dtype hdt), widened as read */
    int hdt;
    int64_t K, N, Np;
} k_bpack;

static inline int k_bpack_ready(const k_bpack *pb)
{
    return pb->p || pb->h;
}

/* Packs B (dtype float, float16, bfloat16 or double); 0 when out of memory
 * or for another dtype. fp16 and bf16 stay 16-bit where the CPU converts
 * them in vector registers (AVX2 + F16C): half the memory and half the
 * bytes a decode step streams; the products are the same (each element
 * widens to the same float). Packing again reuses the buffer. */
int k_bpack_init(k_bpack *pb, int dtype, const void *B, int64_t K, int64_t N);
/* The same from B^T (N x K, row-major, fp32): row n of Bt is column n of B. */
int k_bpack_init_t(k_bpack *pb, const float *Bt, int64_t K, int64_t N);
void k_bpack_free(k_bpack *pb);
/* C (M x N, row stride ldc) = A (M x K, row stride lda) * B, B prepacked.
 * M == 1 is a GEMV streaming the packed panels once. Returns 0, or -1 when
 * scratch could not be allocated (as k_sgemm). */
int k_sgemm_packed(int64_t M, const float *A, int64_t lda, const k_bpack *pb, float *C, int64_t ldc);

/* Dot product of n floats. */
float k_dot(const float *a, const float *b, int64_t n);
/* out[j] = k_dot(a, B + j * ldb, n) for j in [0, nb), bit-identical to
 * k_dot (same order of sums) but several rows of B per pass over a. */
void k_dots(const float *a, const float *B, int64_t ldb, int64_t nb, int64_t n, float *out);
/* y[i] += a * x[i] for n floats. */
void k_axpy(int64_t n, float a, const float *x, float *y);

/* ------------------------------------------------------------ kernel scratch */

/* Per-node state for kernels that only need scratch buffers: set up by
 * k_scratch_init (an rt_kernel init), freed by k_scratch_fini. */
#define K_SCRATCH_BUFS 12
typedef struct k_scratch {
    k_buf b[K_SCRATCH_BUFS];
    const void *key[K_SCRATCH_BUFS]; /* constant data converted into b[i], or NULL */
    size_t key_bytes[K_SCRATCH_BUFS];
} k_scratch;

graft_status k_scratch_init(rt_node *n, graft_error *err);
void k_scratch_fini(rt_node *n);
/* Buffer i of the node's scratch, at least `bytes`; NULL with err set. */
void *k_scratch_get(rt_node *n, int i, size_t bytes, graft_error *err);
/* Input i as fp32: the input's own data when it is float, else a converted
 * copy in scratch buffer `buf` (an initializer is converted once and kept
 * there: give each input its own buffer). NULL with err set (wrong dtype, out of memory). */
const float *k_input_f32(rt_node *n, int i, int buf, graft_error *err);
/* Output o as fp32: its own data when it is float, else scratch buffer
 * `buf`; finish with k_out_f32_done, which converts back. NULL with err set. */
float *k_out_f32(rt_node *n, rt_tensor *o, int buf, graft_error *err);
void k_out_f32_done(rt_tensor *o, const float *f);

/* In a kernel's run function: return err's code when an output could not be made. */
#define K_OUT_OR_FAIL(t)            \
    do {                            \
        if (!(t)) return err->code; \
    } while (0)
/* 1 when node input i is a graph initializer (constant across runs). */
int k_input_is_const(const rt_node *n, int i);

#endif
