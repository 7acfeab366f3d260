/* runtime/ internals shared with kernels/: tensors, bound nodes, the
 * kernel interface. Prefix rt_. */
#ifndef GRAFT_RUNTIME_RT_H
#define GRAFT_RUNTIME_RT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "graft.h"

#define RT_MAX_RANK GRAFT_MAX_RANK

#define RT_ASSERT(c)                                                                 \
    do {                                                                             \
        if (!(c)) {                                                                  \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

typedef struct rt_tensor {
    int dtype;
    int rank;
    int64_t dims[RT_MAX_RANK];
    uint64_t numel;
    size_t nbytes;
    void *data;
    size_t cap;    /* bytes owned at data (0: borrowed view) */
    bool present;  /* holds a value (false for unset optional values) */
} rt_tensor;

typedef struct rt_kernel rt_kernel;

typedef struct rt_node {
    const rt_kernel *k;
    graft_node *src;
    graft_graph *g;
    int64_t opset;  /* version of the node's domain imported by the model */
    int n_in, n_out;
    rt_tensor **in;  /* NULL entries: omitted optional inputs */
    rt_tensor **out; /* never NULL: omitted outputs get scratch tensors */
    void *state;     /* kernel-owned, freed by fini (or free() when fini is NULL) */
} rt_node;

struct rt_kernel {
    const char *domain; /* "" for ONNX, "com.microsoft", ... */
    const char *op;
    int since, until;   /* opset versions handled, inclusive; until 0: open */
    /* Optional: parse attributes into n->state once, at session build. */
    graft_status (*init)(rt_node *n, graft_error *err);
    graft_status (*run)(rt_node *n, graft_error *err);
    void (*fini)(rt_node *n);
};

/* Kernel tables, one per op family, each ended by an entry with op NULL. */
extern const rt_kernel rt_kernels_basic[];   /* kernels/basic.c */
extern const rt_kernel rt_kernels_math[];    /* kernels/math.c: elementwise, reductions, softmax, cast */
extern const rt_kernel rt_kernels_math_reduce[]; /* kernels/math_reduce.c: Reduce*, ArgMax, CumSum, Softmax, TopK */
extern const rt_kernel rt_kernels_shape[];   /* kernels/shape.c: shape and data movement */
extern const rt_kernel rt_kernels_nn[];      /* kernels/nn.c: matmul, norms, attention (ONNX) */
extern const rt_kernel rt_kernels_contrib[]; /* kernels/contrib.c: com.microsoft ops */
extern const rt_kernel rt_kernels_attn[];    /* kernels/attention.c: Attention, GroupQueryAttention, MultiHeadAttention */
extern const rt_kernel rt_kernels_quant[];   /* kernels/quant.c: (De)QuantizeLinear, MatMulNBits, GatherBlockQuantized */

const rt_kernel *rt_kernel_find(const char *domain, const char *op, int64_t opset);

/* ------------------------------------------------------------ helpers for kernels */

/* Binds an initializer to t: dtype, shape, and its bytes where they lie
 * (mapped external data) or read into a buffer appended to *consts (n, cap:
 * the list's count and capacity; the caller frees the buffers). Strings
 * and unknown types leave t not present (a kernel reading it reports the
 * type). Used by the CPU session and the CUDA executor. */
graft_status rt_bind_initializer(rt_tensor *t, graft_tensor *gt, void ***consts, size_t *n, size_t *cap,
                                 graft_error *err);

const char *rt_node_name(const rt_node *n);
const char *rt_node_op(const rt_node *n);

/* Sets err (when non-NULL) and returns code. */
graft_status rt_seterr(graft_error *err, graft_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Error naming the node: "node 'name' (Op): ...". */
graft_status rt_err(const rt_node *n, graft_error *err, graft_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Input i if present, else NULL. */
static inline rt_tensor *rt_in(const rt_node *n, int i)
{
    return i < n->n_in && n->in[i] && n->in[i]->present ? n->in[i] : NULL;
}

/* Shapes output i and makes sure it owns a buffer of the right size
 * (grown, never shrunk: no allocation once the largest shape was seen).
 * Returns the tensor or NULL with err set. */
rt_tensor *rt_out(rt_node *n, int i, int dtype, int rank, const int64_t *dims, graft_error *err);
/* Makes output i a view of `data` (borrowed, e.g. an input's buffer). */
rt_tensor *rt_out_view(rt_node *n, int i, int dtype, int rank, const int64_t *dims, void *data,
                       graft_error *err);

uint64_t rt_numel(int rank, const int64_t *dims);
size_t rt_dtype_size(int dtype); /* bytes per element; 0 for sub-byte/unknown */
/* Seconds on the monotonic clock. */
double rt_now(void);

/* Attributes with defaults. */
int64_t rt_attr_int(const rt_node *n, const char *name, int64_t def);
float rt_attr_float(const rt_node *n, const char *name, float def);
/* Borrowed; NULL/0 when absent. */
const int64_t *rt_attr_ints(const rt_node *n, const char *name, size_t *count);
const float *rt_attr_floats(const rt_node *n, const char *name, size_t *count);
/* NUL-terminated copy into buf; returns def when absent. */
const char *rt_attr_string(const rt_node *n, const char *name, char *buf, size_t cap, const char *def);

/* Reads an integer tensor (int32 or int64) into dst (up to cap values);
 * returns the count or -1 on a wrong dtype. */
int64_t rt_read_ints(const rt_tensor *t, int64_t *dst, size_t cap);

/* fp16/bf16 conversions */
float rt_f16_to_f32(uint16_t h);
uint16_t rt_f32_to_f16(float f);
float rt_bf16_to_f32(uint16_t h);
uint16_t rt_f32_to_bf16(float f);

#endif
