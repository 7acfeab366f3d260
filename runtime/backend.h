/* The backend interface between the decode loop (runtime/generate.c) and
 * what runs the graph: the CPU session (runtime/backend_cpu.c) or the CUDA
 * executor (runtime/cuda/, linked only into programs built with CUDA).
 * Prefix rt_backend.
 *
 * "Backend memory" is memory the backend's kernels read and write: host
 * memory for the CPU, device memory for CUDA. The generator keeps the KV
 * cache there and never touches it directly; it reads logits back through
 * `read`. Sampling, EOS and timings stay in the generator. */
#ifndef GRAFT_RUNTIME_BACKEND_H
#define GRAFT_RUNTIME_BACKEND_H

#include <stddef.h>

#include "graft.h"

typedef struct rt_backend rt_backend;

typedef struct rt_backend_vt {
    const char *name; /* "cpu", "cuda" */
    /* Nonzero when the backend can run here (a GPU is visible). */
    int (*available)(void);
    /* Binds the model's graph (borrowed; must outlive the backend). */
    graft_status (*open)(graft_model *m, rt_backend **out, graft_error *err);
    void (*free)(rt_backend *b); /* NULL: no-op */
    /* Backend memory, owned by the caller (mfree; NULL is a no-op). */
    graft_status (*alloc)(rt_backend *b, size_t bytes, void **out, graft_error *err);
    void (*mfree)(rt_backend *b, void *p);
    graft_status (*zero)(rt_backend *b, void *p, size_t bytes, graft_error *err);
    /* Sets a graph input; a->data is host memory, or backend memory when
     * on_backend. Borrowed until the next run returns. */
    graft_status (*set_input)(rt_backend *b, const char *name, const graft_array *a, int on_backend,
                              graft_error *err);
    graft_status (*run)(rt_backend *b, graft_error *err);
    /* Output `name` after a run: shape, dtype, data in backend memory
     * (borrowed until the next run). 0 when unknown or absent. May have to
     * move the value into backend memory first (a fallback op made it). */
    int (*output)(rt_backend *b, const char *name, graft_array *a);
    /* Ping-pong as graft_session_swap_output, in backend memory. */
    int (*swap_output)(rt_backend *b, const char *name, void **buf, size_t *cap);
    graft_status (*reserve_output)(rt_backend *b, const char *name, size_t bytes, graft_error *err);
    /* Backend memory to backend memory, and backend memory to host. */
    graft_status (*copy)(rt_backend *b, void *dst, const void *src, size_t bytes, graft_error *err);
    graft_status (*read)(rt_backend *b, void *dst, const void *src, size_t bytes, graft_error *err);
    /* One line on where it runs ("NVIDIA H200, ..."); borrowed. */
    const char *(*describe)(rt_backend *b);
    /* Fallback report: how many nodes run on the host although the backend
     * is not the host, and a list "Op (count), ..." of them; borrowed. */
    const char *(*fallbacks)(rt_backend *b, size_t *count);
    /* Optional (NULL: the generator ping-pongs through swap_output). Binds
     * one layer's K or V cache in place: `buf` (backend memory, owned by the
     * caller) holds [B, heads, max_seq, dim]; the caller sets `past` to a
     * [B, heads, len, dim] view of it (on_backend, data == buf), and after a
     * run `present` is the [B, heads, len + new, dim] view of the same
     * buffer, the new rows written at len (rows max_seq apart per head).
     * past NULL: drops every binding. */
    graft_status (*bind_kv)(rt_backend *b, const char *past, const char *present, void *buf, int64_t max_seq,
                            graft_error *err);
    /* Optional: what the next runs are: 0 a prefill (or the planning
     * step), 1 a decode step that may run as a CUDA graph, 2 a decode step
     * without graphs (--no-cuda-graph), 3 as 1, pipelined: a run may be set
     * up while the run before it still runs (argmax_start). */
    void (*set_graphs)(rt_backend *b, int mode);
    /* Optional: *id = the index of the largest value of the last row of
     * output `name` (the lowest on a tie, NaN never; the generator's greedy
     * pick), computed where the output lives so that only the id comes
     * back. GRAFT_EUNSUPPORTED: read the row instead. */
    graft_status (*argmax)(rt_backend *b, const char *name, int64_t *id, graft_error *err);
    /* Optional, for a pipelined greedy decode (runs of mode 3): argmax
     * without waiting. argmax_start enqueues, behind the last run, the
     * argmax of the last row of output `name` written as `ids_dtype` (int64
     * or int32) to backend memory `ids` (the next run's input ids), and a
     * copy of that row to backend memory of the backend's (*kept, valid
     * until argmax_start has been called twice more); *ticket names the
     * pick for argmax_wait, which waits for it and returns its id. The
     * caller waits for a mode-3 run's pick before it sets up the run after
     * the next. GRAFT_EUNSUPPORTED: pick with argmax, and do not pipeline. */
    graft_status (*argmax_start)(rt_backend *b, const char *name, void *ids, int ids_dtype, const void **kept,
                                 int *ticket, graft_error *err);
    graft_status (*argmax_wait)(rt_backend *b, int ticket, int64_t *id, graft_error *err);
    /* Optional (with argmax_start): host bytes to backend memory, in order
     * with the runs enqueued; src may be reused on return. */
    graft_status (*write)(rt_backend *b, void *dst, const void *src, size_t bytes, graft_error *err);
    /* Optional (with argmax_start), before the first run: input `name`
     * will be set in backend memory on decode steps (the pipelined input
     * ids), so what computes from it should run there too. */
    graft_status (*device_input)(rt_backend *b, const char *name, graft_error *err);
} rt_backend_vt;

extern const rt_backend_vt rt_backend_cpu;
/* The CUDA backend, from libgraft_cuda.so (mk/cuda.mk), loaded on first
 * use: $GRAFT_CUDA_LIB if set, else libgraft_cuda.so in the directory of
 * the running program, else in ../lib/graft/ from it (make install). NULL
 * where it cannot be loaded, with the reason in why
 * (runtime/backend_load.c). Thread-safe; the library stays loaded. */
const rt_backend_vt *rt_backend_cuda_load(char *why, size_t why_len);

#endif
