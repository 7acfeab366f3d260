/* onnx/ internals: the only code that touches protobuf-c.
 *
 * The IR is the unpacked protobuf tree itself (so that a load/save round
 * trip keeps everything, unknown fields included) plus indexes kept beside
 * it: tensor records (data views), graph wrappers with name indexes.
 * Prefix: ox_ (never onnx__, which protobuf-c owns).
 */
#ifndef GRAFT_ONNX_INTERNAL_H
#define GRAFT_ONNX_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "graft.h"
#include "onnx/onnx.pb-c.h"

/* ------------------------------------------------------------ asserts */

#define GRAFT_ASSERT(c)                                                              \
    do {                                                                             \
        if (!(c)) {                                                                  \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* Sets err (when non-NULL) and returns code. */
graft_status ox_err(graft_error *err, graft_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "" for NULL: protobuf-c leaves absent optional strings NULL. */
static inline const char *ox_s(const char *s) { return s ? s : ""; }

/* malloc-based helpers; NULL on failure. */
char *ox_strdup(const char *s);
/* Grows *arr (element size `elem`) so that it holds at least `need`
 * elements; *cap tracks capacity. Returns false on allocation failure. */
bool ox_grow(void **arr, size_t *cap, size_t need, size_t elem);

#include "onnx/map.h"

/* ------------------------------------------------------------ wire scan */

/* Checks that buf is well-formed protobuf wire data for `desc` and that no
 * message nests deeper than max_depth, without recursion. `what` names the
 * file in messages. */
graft_status ox_wire_check(const uint8_t *buf, size_t len, const ProtobufCMessageDescriptor *desc,
                           int max_depth, const char *what, graft_error *err);

/* ------------------------------------------------------------ external data */

typedef struct ox_extfile {
    char *location; /* normalised relative path; owned */
    int fd;
    uint64_t size;
    const uint8_t *map; /* whole file, read-only; NULL when size is 0 */
} ox_extfile;

/* Normalises a relative location lexically ("a/./b" -> "a/b", "a/../b" ->
 * "b") into an owned string. Fails on empty, absolute, or escaping paths. */
graft_status ox_location_normalise(const char *loc, char **out, const char *tensor,
                                   const char *model_path, graft_error *err);
/* Opens `rel` beneath the directory dirfd with no symlink on the path, as a
 * regular file with one hard link. Returns the fd or -1 with err set. */
int ox_open_beneath(int dirfd, const char *rel, const char *tensor, const char *model_path,
                    graft_error *err);

/* ------------------------------------------------------------ model */

typedef struct ox_tensor {
    Onnx__TensorProto *p;  /* borrowed from the tree */
    uint64_t numel;
    uint64_t nbytes;       /* packed size implied by dtype and dims */
    const uint8_t *data;   /* raw view (raw_data or mapped file); NULL if typed/string */
    int ext;               /* index into model->ext, or -1 */
    uint64_t offset;       /* within ext file */
    const char *location;  /* ext file's normalised location (owned by model) or NULL */
    bool sparse;           /* part of a sparse tensor: never moved to external data */
} ox_tensor;

struct graft_tensor {
    ox_tensor t;
    Onnx__TensorProto *owned; /* standalone tensors (graft_tensor_load_pb) */
};

struct graft_graph {
    graft_model *m;
    Onnx__GraphProto *p;
    bool index_valid;
    ox_map producer; /* value name -> Onnx__NodeProto* */
    ox_map inits;    /* initializer name -> Onnx__TensorProto* */
};

struct graft_model {
    char *path;
    char *dir;
    int dirfd;
    Onnx__ModelProto *p;
    ox_extfile *ext;
    size_t n_ext, cap_ext;
    ox_pmap tensors; /* Onnx__TensorProto* -> graft_tensor* (owned) */
    ox_pmap graphs;  /* Onnx__GraphProto* -> graft_graph* (owned) */
};

/* Visits every TensorProto in the model (graph initializers, sparse
 * initializers, attribute tensors, in subgraphs, functions and training
 * info). `where` names the graph or node holding it. Stops on non-OK. */
#define OX_T_SPARSE 1 /* values or indices of a SparseTensorProto */
typedef graft_status (*ox_tensor_fn)(void *ctx, Onnx__TensorProto *t, const char *where, int flags,
                                     graft_error *err);
graft_status ox_model_foreach_tensor(Onnx__ModelProto *m, ox_tensor_fn fn, void *ctx,
                                     graft_error *err);
/* Same, below one node (its attributes and subgraphs). */
graft_status ox_node_foreach_tensor(Onnx__NodeProto *n, ox_tensor_fn fn, void *ctx,
                                    graft_error *err);

/* Validates one tensor and records its view in m->tensors. */
graft_status ox_tensor_bind(graft_model *m, Onnx__TensorProto *t, const char *where, int flags,
                            graft_error *err);

/* Drops tensor records and graph wrappers under a node about to be freed. */
void ox_model_forget_node(graft_model *m, Onnx__NodeProto *n);

/* Graph wrapper for a GraphProto of this model (created on first use). */
graft_graph *ox_graph_wrap(graft_model *m, Onnx__GraphProto *g);
void ox_graph_free(graft_graph *g);

#endif
