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
    bool is_input;   /* graph input: set by set_input, not reset per run */
    struct cx_val *base; /* this value is a view (Reshape...) of base */
} cx_val;

enum { CX_UNDECIDED = 0, CX_HOST, CX_META, CX_VIEW, CX_DEVICE };

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

struct cx_node {
    rt_node n;         /* host binding: kernel, inputs, outputs */
    const cx_op *dop;  /* device implementation or NULL */
    int place;
    bool const_done;   /* Constant: ran once, outputs sticky */
    void *scr;         /* device scratch of the op (cx_scratch), grown at planning */
    size_t scap;
    int64_t *hscr;     /* host scratch (positions to upload) */
    size_t hcap;
};

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
};

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
/* The node's device scratch of at least `bytes` (owned by the node). */
void *cx_scratch(cx_node *cn, size_t bytes, graft_error *err);
/* Reports a CUDA error for the node. */
graft_status cx_cuda_err(const cx_node *cn, graft_error *err, cudaError_t e, const char *what);

static inline int cx_is_float(int dtype)
{
    return dtype == GRAFT_DTYPE_FLOAT || dtype == GRAFT_DTYPE_FLOAT16 || dtype == GRAFT_DTYPE_BFLOAT16;
}

#endif
