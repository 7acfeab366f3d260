/* graft — public C API.
 *
 * Handles are opaque. Every function that can fail on account of its input
 * returns a graft_status and, when `err` is non-NULL, fills it with a message
 * that names the file, graph, node or tensor at fault. Broken invariants are
 * not reported here: they abort with file and line (GRAFT_ASSERT).
 *
 * Ownership is stated on each function: "owned" results are freed by the
 * caller with the matching _free; "borrowed" results live as long as the
 * object they came from and are invalidated where said. x_free(NULL) is a
 * no-op everywhere.
 */
#ifndef GRAFT_H
#define GRAFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GRAFT_VERSION "0.1.0"

/* ---------------------------------------------------------------- status */

typedef enum graft_status {
    GRAFT_OK = 0,
    GRAFT_EINVAL,       /* bad input: malformed, unsafe or inconsistent model/data */
    GRAFT_EUNSUPPORTED, /* valid input graft does not handle (yet) */
    GRAFT_EIO,          /* the system failed us: open, read, write, mmap, rename */
    GRAFT_ENOMEM,       /* allocation failed */
} graft_status;

typedef struct graft_error {
    graft_status code;
    char msg[1024];
} graft_error;

/* Static string naming a status ("bad input", ...). */
const char *graft_status_str(graft_status s);

/* Exit status a CLI should use for a status: 0 ok, 2 bad input, 1 otherwise. */
int graft_status_exit_code(graft_status s);

/* ---------------------------------------------------------------- dtypes */

/* Values are those of onnx.TensorProto.DataType of the pinned onnx release. */
typedef enum graft_dtype {
    GRAFT_DTYPE_UNDEFINED = 0,
    GRAFT_DTYPE_FLOAT = 1,
    GRAFT_DTYPE_UINT8 = 2,
    GRAFT_DTYPE_INT8 = 3,
    GRAFT_DTYPE_UINT16 = 4,
    GRAFT_DTYPE_INT16 = 5,
    GRAFT_DTYPE_INT32 = 6,
    GRAFT_DTYPE_INT64 = 7,
    GRAFT_DTYPE_STRING = 8,
    GRAFT_DTYPE_BOOL = 9,
    GRAFT_DTYPE_FLOAT16 = 10,
    GRAFT_DTYPE_DOUBLE = 11,
    GRAFT_DTYPE_UINT32 = 12,
    GRAFT_DTYPE_UINT64 = 13,
    GRAFT_DTYPE_COMPLEX64 = 14,
    GRAFT_DTYPE_COMPLEX128 = 15,
    GRAFT_DTYPE_BFLOAT16 = 16,
    GRAFT_DTYPE_FLOAT8E4M3FN = 17,
    GRAFT_DTYPE_FLOAT8E4M3FNUZ = 18,
    GRAFT_DTYPE_FLOAT8E5M2 = 19,
    GRAFT_DTYPE_FLOAT8E5M2FNUZ = 20,
    GRAFT_DTYPE_UINT4 = 21,
    GRAFT_DTYPE_INT4 = 22,
    GRAFT_DTYPE_FLOAT4E2M1 = 23,
    GRAFT_DTYPE_FLOAT8E8M0 = 24,
    GRAFT_DTYPE_UINT2 = 25,
    GRAFT_DTYPE_INT2 = 26,
    GRAFT_DTYPE_FLOAT6E2M3 = 27,
    GRAFT_DTYPE_FLOAT6E3M2 = 28,
    GRAFT_DTYPE_COUNT_ /* one past the last known value */
} graft_dtype;

/* Lower-case ONNX name ("float16", "int4", ...); "?" for unknown values. */
const char *graft_dtype_name(int dtype);
/* Bits per element in packed storage (4 for int4, 6 for float6, 0 for
 * string/undefined/unknown). */
int graft_dtype_bits(int dtype);
/* Bytes for `n` packed elements: ceil(n * bits / 8). Returns 0 and sets
 * *overflow on overflow or for types with no fixed size. */
uint64_t graft_dtype_nbytes(int dtype, uint64_t n, int *overflow);

/* ---------------------------------------------------------------- models */

typedef struct graft_model graft_model;   /* a loaded model: owns everything below */
typedef struct graft_graph graft_graph;   /* main graph or a subgraph; borrowed */
typedef struct graft_node graft_node;     /* borrowed; invalidated by its removal */
typedef struct graft_tensor graft_tensor; /* an initializer's data view; borrowed */

typedef struct graft_load_opts {
    /* Maximum protobuf message nesting accepted (0: default 64). */
    int max_depth;
} graft_load_opts;

/* Loads an .onnx file. The file is mapped; external data is resolved
 * relative to the model's directory (never outside it: no absolute paths,
 * no "..", no symlinks, no hard links) and mapped, never copied; every
 * tensor's offset, length, shape and dtype are checked. On success *out is
 * owned by the caller (graft_model_free). opts may be NULL. */
graft_status graft_model_load(const char *path, const graft_load_opts *opts,
                              graft_model **out, graft_error *err);
void graft_model_free(graft_model *m);

typedef struct graft_save_opts {
    /* External data file name, relative to the model's directory
     * (NULL: "<model file name>.data"). */
    const char *data_name;
    /* Tensors with at least this many bytes go to external data
     * (0: default 1024; < 0: keep everything inline; 1: all with data). */
    long long external_threshold;
    /* Alignment of external-data offsets (0: default 4096). */
    long long alignment;
    /* > 0: start a new data file ("<data_name>.00001", ...) before a tensor
     * that would take the current one past this many bytes. */
    long long shard_size;
    /* Called as external data is written (bytes done, bytes in all); may
     * be NULL. */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
    /* Nonzero: no fsync and no write-behind. The save stays atomic for
     * other processes (temporary files, rename) and a killed process
     * leaves nothing half-written, but after a power loss or an OS crash
     * the renamed files may lack data the kernel had not written back yet
     * (what `cp` and onnx.save give). 0: durable (the default). */
    int no_sync;
} graft_save_opts;

/* Saves the model to `path` and its external data beside it, atomically:
 * temporary files in the target directory, fsync, rename, fsync of the
 * directory (the fsyncs unless opts->no_sync). Anything the IR does not model (functions, sparse
 * initializers, doc strings, metadata, unknown fields) is written back as
 * loaded. The model is unchanged. opts may be NULL. */
graft_status graft_model_save(graft_model *m, const char *path,
                              const graft_save_opts *opts, graft_error *err);

/* Borrowed strings. path: as given to load. */
const char *graft_model_path(const graft_model *m);
int64_t graft_model_ir_version(const graft_model *m);
const char *graft_model_producer(const graft_model *m);
const char *graft_model_producer_version(const graft_model *m);
const char *graft_model_domain(const graft_model *m);
int64_t graft_model_version(const graft_model *m);
size_t graft_model_opset_count(const graft_model *m);
/* domain "" is the default ONNX domain. Returns 0 when out of range. */
int graft_model_opset(const graft_model *m, size_t i, const char **domain, int64_t *version);
/* Version imported for `domain`, or -1. */
int64_t graft_model_opset_version(const graft_model *m, const char *domain);
size_t graft_model_metadata_count(const graft_model *m);
int graft_model_metadata(const graft_model *m, size_t i, const char **key, const char **value);
/* Main graph; borrowed. */
graft_graph *graft_model_graph(graft_model *m);

/* External data files referenced by the model, in first-use order. */
size_t graft_model_external_file_count(const graft_model *m);
const char *graft_model_external_file(const graft_model *m, size_t i, uint64_t *file_size);

/* ---------------------------------------------------------------- graphs */

/* One dimension: a value (>= 0), or symbolic (value -1, param may be NULL
 * when the dimension is unknown). */
typedef struct graft_dim {
    int64_t value;
    const char *param; /* borrowed */
} graft_dim;

#define GRAFT_MAX_RANK 16

typedef struct graft_value_info {
    const char *name;  /* borrowed */
    int dtype;         /* graft_dtype; 0 when not a tensor or unknown */
    int rank;          /* -1: unknown rank */
    int truncated;     /* rank > GRAFT_MAX_RANK: dims holds the first ones */
    graft_dim dims[GRAFT_MAX_RANK];
} graft_value_info;

const char *graft_graph_name(const graft_graph *g);
size_t graft_graph_input_count(const graft_graph *g);
size_t graft_graph_output_count(const graft_graph *g);
/* Fills *vi for graph input/output i. Returns 0 when out of range. */
int graft_graph_input(const graft_graph *g, size_t i, graft_value_info *vi);
int graft_graph_output(const graft_graph *g, size_t i, graft_value_info *vi);
/* Type of a named value, from graph inputs, outputs, value_info or
 * initializers. Returns 0 when nothing is known about it. */
int graft_graph_value(graft_graph *g, const char *name, graft_value_info *vi);

size_t graft_graph_node_count(const graft_graph *g);
/* Node i in current order; borrowed, invalidated by graft_node_remove. */
graft_node *graft_graph_node(graft_graph *g, size_t i);
/* Node producing `value`, or NULL. */
graft_node *graft_graph_producer(graft_graph *g, const char *value);
/* Number of node inputs (in this graph and its subgraphs) reading `value`,
 * plus one per graph output that names it. */
size_t graft_graph_use_count(graft_graph *g, const char *value);

size_t graft_graph_initializer_count(const graft_graph *g);
graft_tensor *graft_graph_initializer(graft_graph *g, size_t i);
graft_tensor *graft_graph_find_initializer(graft_graph *g, const char *name);

/* ---------------------------------------------------------------- nodes */

const char *graft_node_name(const graft_node *n);
const char *graft_node_op_type(const graft_node *n);
const char *graft_node_domain(const graft_node *n); /* "" for the ONNX domain */
size_t graft_node_input_count(const graft_node *n);
const char *graft_node_input(const graft_node *n, size_t i); /* "" = omitted */
size_t graft_node_output_count(const graft_node *n);
const char *graft_node_output(const graft_node *n, size_t i);
/* Subgraphs held by the node's attributes (g, then graphs), in attribute
 * order; wrappers are borrowed from the model. */
size_t graft_node_subgraph_count(const graft_node *n);
graft_graph *graft_node_subgraph(graft_graph *g, graft_node *n, size_t i);

/* Attribute lookup. Return 1 when present with that type, else 0. */
int graft_node_attr_int(const graft_node *n, const char *name, int64_t *v);
int graft_node_attr_float(const graft_node *n, const char *name, float *v);
int graft_node_attr_string(const graft_node *n, const char *name, const char **v, size_t *len);
int graft_node_attr_ints(const graft_node *n, const char *name, const int64_t **v, size_t *count);
int graft_node_attr_floats(const graft_node *n, const char *name, const float **v, size_t *count);

/* ---------------------------------------------------------------- tensors */

const char *graft_tensor_name(const graft_tensor *t);
int graft_tensor_dtype(const graft_tensor *t);
int graft_tensor_rank(const graft_tensor *t);
const int64_t *graft_tensor_dims(const graft_tensor *t);
uint64_t graft_tensor_numel(const graft_tensor *t);
/* Bytes of packed data implied by dtype and shape (ceil(numel * bits / 8)),
 * whichever field holds the values (raw, external or typed); 0 for string
 * tensors and unknown types. */
uint64_t graft_tensor_nbytes(const graft_tensor *t);
/* Raw little-endian packed data: a view into the mapped model or external
 * file, or into raw_data; NULL when the tensor stores its values in typed
 * fields (float_data, ...) or is a string tensor. Borrowed. */
const void *graft_tensor_data(const graft_tensor *t);
/* External data file (relative location) or NULL when stored inline. */
const char *graft_tensor_location(const graft_tensor *t);
uint64_t graft_tensor_offset(const graft_tensor *t);

/* Attribute `name` of type TENSOR as a tensor view (validated at load);
 * NULL when absent. Borrowed from the model. */
graft_tensor *graft_node_attr_tensor(graft_graph *g, const graft_node *n, const char *name);
/* Name of the first attribute of the node and its ONNX attribute type
 * (AttributeProto.AttributeType), by index; 0 when out of range. */
int graft_node_attr_at(const graft_node *n, size_t i, const char **name, int *type);

/* Copies the tensor's packed little-endian bytes (graft_tensor_nbytes of
 * them) into dst, from raw_data, external data or the typed fields
 * (float_data, int32_data, ...), converting as the ONNX spec says.
 * GRAFT_EINVAL when the typed fields hold the wrong count. */
graft_status graft_tensor_read(const graft_tensor *t, void *dst, size_t dst_bytes, graft_error *err);

/* Loads a standalone serialized TensorProto (an ONNX test-data .pb file).
 * Its data is held in memory; *out is owned (graft_tensor_free). */
graft_status graft_tensor_load_pb(const char *path, graft_tensor **out, graft_error *err);
/* Frees a tensor from graft_tensor_load_pb; NULL is a no-op. Tensors that
 * belong to a model must not be passed here. */
void graft_tensor_free(graft_tensor *t);

/* ---------------------------------------------------------------- edits */

/* Adds a node at the end of the graph. Strings are copied. inputs may hold
 * "" for omitted optional inputs. Returns the node (borrowed) or NULL with
 * err set. */
graft_node *graft_graph_add_node(graft_graph *g, const char *op_type, const char *domain,
                                 const char *name, const char *const *inputs, size_t n_in,
                                 const char *const *outputs, size_t n_out, graft_error *err);
graft_status graft_node_set_attr_int(graft_node *n, const char *name, int64_t v, graft_error *err);
graft_status graft_node_set_attr_float(graft_node *n, const char *name, float v, graft_error *err);
graft_status graft_node_set_attr_string(graft_node *n, const char *name, const char *v,
                                        graft_error *err);
graft_status graft_node_set_attr_ints(graft_node *n, const char *name, const int64_t *v,
                                      size_t count, graft_error *err);

/* Adds an initializer holding a copy of `data` (nbytes must equal the
 * packed size implied by dtype and dims). Returns it (borrowed) or NULL. */
graft_tensor *graft_graph_add_initializer(graft_graph *g, const char *name, int dtype,
                                          const int64_t *dims, int rank, const void *data,
                                          size_t nbytes, graft_error *err);
/* Removes an initializer by name; returns 1 if it existed. */
int graft_graph_remove_initializer(graft_graph *g, const char *name);

/* Graph interface edits. add_input/add_output build the type from *vi
 * (dtype, dims with symbolic params); the name is vi->name. remove_* drop
 * the entry (not the values' producers or readers) and return 1 if found. */
graft_status graft_graph_add_input(graft_graph *g, const graft_value_info *vi, graft_error *err);
graft_status graft_graph_add_output(graft_graph *g, const graft_value_info *vi, graft_error *err);
int graft_graph_remove_input(graft_graph *g, const char *name);
int graft_graph_remove_output(graft_graph *g, const char *name);
/* Renames graph output `old_name` (the entry only). */
graft_status graft_graph_rename_output(graft_graph *g, const char *old_name, const char *new_name,
                                       graft_error *err);
/* Moves graph input `name` to position `index` (clamped); 0 if absent. */
int graft_graph_move_input(graft_graph *g, const char *name, size_t index);
/* Moves nodes [from, end) ahead of the others, each run keeping its order
 * (a no-op for from 0 or past the end). */
void graft_graph_move_nodes_front(graft_graph *g, size_t from);

/* Moves the main graph of `src` into g's model: every node, initializer,
 * sparse initializer and value_info, and the model-local functions. Every
 * value and node name of src, at any depth, gets `prefix` prepended unless
 * it is listed in keep[]. src's graph inputs and outputs are not added to
 * g (the caller wires them). Opset imports merge: a domain imported by both
 * at different versions is GRAFT_EINVAL naming it; the IR version becomes
 * the higher one. src's external data files move with its tensors; src is
 * left with an empty graph and must still be freed. */
graft_status graft_graph_absorb(graft_graph *g, graft_model *src, const char *prefix,
                                const char *const *keep, size_t n_keep, graft_error *err);

/* Every read of `old_name` (node inputs here and in subgraphs that do not
 * shadow it, graph outputs) now reads `new_name`. Returns the count. */
size_t graft_graph_replace_uses(graft_graph *g, const char *old_name, const char *new_name);
/* Removes and frees the node. */
void graft_node_remove(graft_graph *g, graft_node *n);
/* Sorts nodes topologically (stable for already-sorted graphs). A cycle is
 * GRAFT_EINVAL naming a node on it. */
graft_status graft_graph_toposort(graft_graph *g, graft_error *err);
/* Removes nodes whose outputs reach no graph output, then initializers and
 * value_info entries no longer used. Returns the number of nodes removed. */
size_t graft_graph_prune(graft_graph *g);

/* ---------------------------------------------------------------- runtime */

typedef struct graft_session graft_session;

/* A dense array exchanged with a session. data is borrowed in both
 * directions: inputs must stay valid until the next run returns; outputs
 * stay valid until the next run or graft_session_free. */
typedef struct graft_array {
    int dtype;
    int rank;
    int64_t dims[GRAFT_MAX_RANK];
    void *data;
    size_t nbytes;
} graft_array;

/* Binds every node of the model's main graph to a CPU kernel (keyed by
 * domain, op type and the imported opset). Nodes without a kernel fail
 * here, all of them listed in the message. The session borrows `m`, which
 * must outlive it. */
graft_status graft_session_new(graft_model *m, graft_session **out, graft_error *err);
void graft_session_free(graft_session *s);
/* Sets graph input `name` (dtype, rank and fixed dims checked against the
 * graph). The data is borrowed. */
graft_status graft_session_set_input(graft_session *s, const char *name, const graft_array *a,
                                     graft_error *err);
graft_status graft_session_run(graft_session *s, graft_error *err);
size_t graft_session_output_count(const graft_session *s);
const char *graft_session_output_name(const graft_session *s, size_t i);
/* Fills *a with output `name` after a run; returns 0 when unknown. */
int graft_session_output(const graft_session *s, const char *name, graft_array *a);

/* Exchanges output `name`'s buffer with the caller's: on return *buf and
 * *cap hold the output's data (owned by the caller now) and the session
 * writes the next run's output into the caller's old buffer (*buf may be
 * NULL with *cap 0). Lets a decode loop feed present KV back as past KV
 * without copies or allocation (ping-pong). Returns 0 for an unknown or
 * borrowed output. */
int graft_session_swap_output(graft_session *s, const char *name, void **buf, size_t *cap);
/* Makes output `name` own at least `bytes` now (planning for a maximum
 * context); GRAFT_ENOMEM on failure. */
graft_status graft_session_reserve_output(graft_session *s, const char *name, size_t bytes,
                                          graft_error *err);

/* Evaluates one node of graph g on the CPU kernels (used by constant
 * folding). in[i] may have data NULL for omitted inputs (rank -1). On
 * success out[0..n_out) hold owned data (free() each .data). */
graft_status graft_node_eval(graft_model *m, graft_graph *g, graft_node *n, const graft_array *in,
                             size_t n_in, graft_array *out, size_t n_out, graft_error *err);

/* The kernels graft has (CPU), for reports: domain ("" = ONNX), op type,
 * and the opset range handled (until 0: open-ended). */
size_t graft_kernel_count(void);
int graft_kernel_at(size_t i, const char **domain, const char **op, int *since, int *until);

/* ---------------------------------------------------------------- generation */

typedef struct graft_generator graft_generator;

/* Where a generator runs. AUTO: CUDA when this program was built with
 * CUDA (nvcc at build time) and a GPU is visible, else the CPU. */
typedef enum graft_device {
    GRAFT_DEVICE_AUTO = 0,
    GRAFT_DEVICE_CPU,
    GRAFT_DEVICE_CUDA,
} graft_device;

typedef struct graft_gen_opts {
    int max_context;   /* tokens the KV cache is planned for (0: the config's
                          context_length, at most 4096) */
    float temperature; /* <= 0: greedy (argmax, lowest id on ties) */
    int top_k;         /* 0: off */
    float top_p;       /* 0 or >= 1: off */
    uint64_t seed;
    int device;        /* graft_device; 0: AUTO. CUDA where it cannot run is
                          GRAFT_EUNSUPPORTED at open */
    int no_cuda_graph; /* 1: CUDA decode steps launch their kernels one by
                          one instead of as a captured CUDA graph */
} graft_gen_opts;

typedef struct graft_gen_timings {
    double load_s, plan_s, prefill_s, decode_s;
    size_t prefill_tokens, decode_tokens;
    /* greedy decode on CUDA: steps whose next step was launched before
     * their pick came back, and steps so launched that were undone (the
     * caller gave another id, or a new prompt came) */
    size_t ahead_launched, ahead_undone;
} graft_gen_timings;

/* Opens an export: a directory with model.onnx (and genai_config.json for
 * names, EOS ids and context length) or an .onnx file. The KV bridge pairs
 * the graph's past_key_values.N.* inputs with its present.N.* outputs, each
 * layer with the geometry of its own inputs; layers without cache inputs
 * need nothing. Memory is planned once for max_context: afterwards no step
 * allocates. *out is owned (graft_generator_free). */
graft_status graft_generator_open(const char *path, const graft_gen_opts *opts, graft_generator **out,
                                  graft_error *err);
void graft_generator_free(graft_generator *g);
/* Starts a new sequence with the prompt (clears the cache), runs the
 * prefill and leaves the next-token logits ready. */
graft_status graft_generator_prefill(graft_generator *g, const int64_t *ids, size_t n, graft_error *err);
/* Appends one token and runs one decode step. */
graft_status graft_generator_step(graft_generator *g, int64_t id, graft_error *err);
/* Logits for the next token (fp32, borrowed until the next call; NULL
 * when the backend cannot return them). After a greedy step on a GPU they
 * are read back on this first call: the step itself brings back only the
 * picked id. */
const float *graft_generator_logits(const graft_generator *g, size_t *vocab);
/* Picks the next token from the logits by the options (greedy or sampled);
 * -1 when the logits cannot be read back. */
int64_t graft_generator_pick(graft_generator *g);
int graft_generator_is_eos(const graft_generator *g, int64_t id);
size_t graft_generator_length(const graft_generator *g); /* tokens in the cache */
int graft_generator_max_context(const graft_generator *g);
const graft_gen_timings *graft_generator_timings(const graft_generator *g);
/* Directory of the export (for its tokenizer.json); borrowed. */
const char *graft_generator_dir(const graft_generator *g);
/* Where it runs: "cpu" or "cuda" (static string). */
const char *graft_generator_device(const graft_generator *g);
/* One line naming the device (borrowed); *fallbacks (may be NULL) lists the
 * ops that run on host kernels on a GPU backend ("Op (count), ..."),
 * *n_fallback their node count (0 on the CPU). */
const char *graft_generator_device_info(const graft_generator *g, const char **fallbacks, size_t *n_fallback);

/* ---------------------------------------------------------------- compose */

typedef enum graft_bos_mode {
    GRAFT_BOS_AUTO = 0, /* prepend BOS when tokenizer_config says add_bos_token */
    GRAFT_BOS_ALWAYS,
    GRAFT_BOS_NEVER,
} graft_bos_mode;

typedef struct graft_compose_opts {
    /* Graph files, relative to the pipeline directory, for pipelines
     * without a genai_config.json (or to override it); NULL: from the
     * config. */
    const char *embedding;
    const char *decoder;
    graft_bos_mode bos;
    long long shard_size; /* > 0: split the weights into files of this size */
    int force;            /* replace an existing OUT_DIR */
    /* Nonzero: durable export: every file fsync'd (and the weights written
     * back as they are copied) before the rename, the parent directory
     * after. 0 (default): like `cp`, the kernel writes the pages back in
     * its own time; atomic all the same against a killed process. */
    int sync;
    /* Progress of the weight copy (may be NULL), and one line per decision
     * worth telling a user (may be NULL). */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void (*note)(void *ctx, const char *line);
    void *ctx;
} graft_compose_opts;

/* Composes the pipeline in `pipeline_dir` into one self-contained,
 * text-only export in `out_dir`: the embedding graph fused into the
 * decoder, multimodal inputs baked to empty constants and folded away,
 * weights copied into real files, tokenizer patched for BOS, config
 * rewritten. Everything is written to a temporary directory beside
 * out_dir and renamed at the end; on failure nothing is left. */
graft_status graft_compose(const char *pipeline_dir, const char *out_dir,
                           const graft_compose_opts *opts, graft_error *err);

#ifdef __cplusplus
}
#endif
#endif /* GRAFT_H */
