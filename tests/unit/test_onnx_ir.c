/* Graph IR edits on a real model: every property checked here is a
 * structural invariant (producers before consumers, counts of reads),
 * not an output recorded from the code under test. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graft.h"

#define DEMO "tests/fixtures/demo/model.onnx"

static graft_model *load_demo(void)
{
    graft_error err = {0};
    graft_model *m = NULL;
    graft_status s = graft_model_load(DEMO, NULL, &m, &err);
    cr_assert_eq(s, GRAFT_OK, "load: %s", err.msg);
    return m;
}

/* Every node input is a graph input, an initializer, or produced earlier. */
static int is_topological(graft_graph *g)
{
    size_t n = graft_graph_node_count(g);
    for (size_t i = 0; i < n; i++) {
        graft_node *nd = graft_graph_node(g, i);
        for (size_t j = 0; j < graft_node_input_count(nd); j++) {
            const char *in = graft_node_input(nd, j);
            if (!*in) continue;
            graft_node *p = graft_graph_producer(g, in);
            if (!p) continue;
            size_t k = 0;
            while (k < n && graft_graph_node(g, k) != p) k++;
            if (k >= i) return 0;
        }
    }
    return 1;
}

Test(onnx_ir, load_reports_graph_interface)
{
    graft_model *m = load_demo();
    graft_graph *g = graft_model_graph(m);
    cr_assert_gt(graft_graph_input_count(g), 0);
    cr_assert_gt(graft_graph_node_count(g), 0);
    cr_assert(is_topological(g));
    graft_value_info vi;
    cr_assert(graft_graph_output(g, 0, &vi));
    cr_assert_str_not_empty(vi.name);
    cr_assert(graft_graph_value(g, vi.name, &vi));
    graft_model_free(m);
}

Test(onnx_ir, toposort_orders_appended_nodes_and_prune_removes_dead)
{
    graft_model *m = load_demo();
    graft_graph *g = graft_model_graph(m);
    graft_error err = {0};
    graft_value_info out0;
    cr_assert(graft_graph_output(g, 0, &out0));
    char orig[256];
    snprintf(orig, sizeof orig, "%s", out0.name);
    size_t before = graft_graph_node_count(g);
    /* consumer first, producer second: out-of-order on purpose */
    const char *c_in[] = {"t_mid"}, *c_out[] = {"t_final"};
    const char *p_in[] = {orig}, *p_out[] = {"t_mid"};
    cr_assert_not_null(graft_graph_add_node(g, "Identity", "", "consumer", c_in, 1, c_out, 1, &err));
    cr_assert_not_null(graft_graph_add_node(g, "Neg", "", "producer", p_in, 1, p_out, 1, &err));
    cr_assert(!is_topological(g));
    cr_assert_eq(graft_graph_toposort(g, &err), GRAFT_OK, "%s", err.msg);
    cr_assert(is_topological(g));
    cr_assert_eq(graft_graph_node_count(g), before + 2);
    /* nothing reads t_final: both new nodes are dead */
    cr_assert_eq(graft_graph_use_count(g, "t_mid"), 1);
    cr_assert_eq(graft_graph_prune(g), 2);
    cr_assert_eq(graft_graph_node_count(g), before);
    cr_assert_null(graft_graph_producer(g, "t_mid"));
    graft_model_free(m);
}

Test(onnx_ir, toposort_reports_cycle_by_node)
{
    graft_model *m = load_demo();
    graft_graph *g = graft_model_graph(m);
    graft_error err = {0};
    const char *a_in[] = {"cy_b"}, *a_out[] = {"cy_a"};
    const char *b_in[] = {"cy_a"}, *b_out[] = {"cy_b"};
    graft_graph_add_node(g, "Neg", "", "cycle_a", a_in, 1, a_out, 1, &err);
    graft_graph_add_node(g, "Neg", "", "cycle_b", b_in, 1, b_out, 1, &err);
    cr_assert_eq(graft_graph_toposort(g, &err), GRAFT_EINVAL);
    cr_assert(strstr(err.msg, "cycle") && strstr(err.msg, "cycle_"), "%s", err.msg);
    graft_model_free(m);
}

Test(onnx_ir, replace_uses_and_save_roundtrip)
{
    graft_model *m = load_demo();
    graft_graph *g = graft_model_graph(m);
    graft_error err = {0};
    graft_value_info out0;
    cr_assert(graft_graph_output(g, 0, &out0));
    char orig[256];
    snprintf(orig, sizeof orig, "%s", out0.name);
    graft_node *prod = graft_graph_producer(g, orig);
    cr_assert_not_null(prod);
    /* reroute the output through a new Identity */
    char renamed[300];
    snprintf(renamed, sizeof renamed, "%s_pre", orig);
    size_t uses = graft_graph_use_count(g, orig);
    cr_assert_eq(graft_graph_replace_uses(g, orig, renamed), uses);
    cr_assert_eq(graft_graph_use_count(g, orig), 0);
    /* the producer still writes orig; make it write renamed+identity */
    const char *in[] = {orig}, *out[] = {renamed};
    cr_assert_not_null(graft_graph_add_node(g, "Identity", "", "reroute", in, 1, out, 1, &err));
    cr_assert_eq(graft_graph_toposort(g, &err), GRAFT_OK, "%s", err.msg);
    cr_assert_eq(graft_graph_prune(g), 0);
    int64_t dims[2] = {2, 3};
    float data[6] = {1, 2, 3, 4, 5, 6};
    cr_assert_null(graft_graph_add_initializer(g, "bad", GRAFT_DTYPE_FLOAT, dims, 2, data, 20, &err));
    cr_assert_eq(err.code, GRAFT_EINVAL);
    cr_assert_not_null(graft_graph_add_initializer(g, "good", GRAFT_DTYPE_FLOAT, dims, 2, data, 24, &err));
    char dir[] = "/tmp/graft_ir_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[300];
    snprintf(path, sizeof path, "%s/edited.onnx", dir);
    size_t nodes = graft_graph_node_count(g);
    cr_assert_eq(graft_model_save(m, path, NULL, &err), GRAFT_OK, "%s", err.msg);
    graft_model_free(m);
    graft_model *m2 = NULL;
    cr_assert_eq(graft_model_load(path, NULL, &m2, &err), GRAFT_OK, "%s", err.msg);
    graft_graph *g2 = graft_model_graph(m2);
    cr_assert_eq(graft_graph_node_count(g2), nodes);
    graft_tensor *t = graft_graph_find_initializer(g2, "good");
    cr_assert_not_null(t);
    cr_assert_eq(graft_tensor_nbytes(t), 24);
    cr_assert_eq(memcmp(graft_tensor_data(t), data, 24), 0);
    cr_assert_eq(graft_graph_use_count(g2, orig), 1);
    graft_model_free(m2);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(onnx_ir, missing_file_names_path)
{
    graft_error err = {0};
    graft_model *m = NULL;
    cr_assert_eq(graft_model_load("/nonexistent/dir/model.onnx", NULL, &m, &err), GRAFT_EINVAL);
    cr_assert_null(m);
    cr_assert(strstr(err.msg, "/nonexistent/dir/model.onnx"), "%s", err.msg);
}

Test(onnx_ir, dtype_sizes_follow_onnx_packing)
{
    int ovf;
    cr_assert_eq(graft_dtype_nbytes(GRAFT_DTYPE_INT4, 5, &ovf), 3);
    cr_assert_eq(graft_dtype_nbytes(GRAFT_DTYPE_UINT2, 5, &ovf), 2);
    cr_assert_eq(graft_dtype_nbytes(GRAFT_DTYPE_FLOAT6E2M3, 5, &ovf), 4); /* ceil(30/8) */
    cr_assert_eq(graft_dtype_nbytes(GRAFT_DTYPE_BFLOAT16, 3, &ovf), 6);
    graft_dtype_nbytes(GRAFT_DTYPE_DOUBLE, UINT64_MAX / 4, &ovf);
    cr_assert(ovf);
}

/* g's graph input names into keep (at most cap); returns the count */
static size_t input_names(graft_graph *g, const char **keep, size_t cap)
{
    size_t nk = 0;
    for (size_t i = 0; i < graft_graph_input_count(g) && nk < cap; i++) {
        graft_value_info vi;
        graft_graph_input(g, i, &vi);
        keep[nk++] = vi.name;
    }
    return nk;
}

Test(onnx_ir, absorb_moves_graph_with_prefix_and_weights)
{
    graft_model *a = load_demo(), *b = load_demo();
    graft_graph *ga = graft_model_graph(a), *gb = graft_model_graph(b);
    graft_error err = {0};
    size_t nodes = graft_graph_node_count(ga), inits = graft_graph_initializer_count(ga);
    /* b reads the same graph inputs as a: keep their names */
    const char *keep[GRAFT_MAX_RANK * 4];
    const size_t nk = input_names(gb, keep, sizeof keep / sizeof *keep);
    graft_value_info out0;
    graft_graph_output(gb, 0, &out0);
    char out_name[300];
    snprintf(out_name, sizeof out_name, "b_%s", out0.name);
    cr_assert_eq(graft_graph_absorb(ga, b, "b_", keep, nk, &err), GRAFT_OK, "%s", err.msg);
    cr_assert_eq(graft_graph_node_count(gb), 0);
    cr_assert_eq(graft_graph_node_count(ga), 2 * nodes);
    cr_assert_eq(graft_graph_initializer_count(ga), 2 * inits);
    cr_assert_not_null(graft_graph_producer(ga, out_name));
    out0.name = out_name; /* out0's dim params are borrowed from b: add before freeing it */
    cr_assert_eq(graft_graph_add_output(ga, &out0, &err), GRAFT_OK);
    graft_model_free(b); /* a owns the moved weights now */
    cr_assert_eq(graft_graph_toposort(ga, &err), GRAFT_OK, "%s", err.msg);
    char dir[] = "/tmp/graft_absorb_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[300];
    snprintf(path, sizeof path, "%s/merged.onnx", dir);
    cr_assert_eq(graft_model_save(a, path, NULL, &err), GRAFT_OK, "%s", err.msg);
    graft_model *c = NULL;
    cr_assert_eq(graft_model_load(path, NULL, &c, &err), GRAFT_OK, "%s", err.msg);
    graft_graph *gc = graft_model_graph(c);
    cr_assert_eq(graft_graph_node_count(gc), 2 * nodes);
    /* every moved weight has the bytes of its original */
    for (size_t i = 0; i < inits; i++) {
        graft_tensor *t = graft_graph_initializer(ga, i);
        char bn[300];
        snprintf(bn, sizeof bn, "b_%s", graft_tensor_name(t));
        graft_tensor *u = graft_graph_find_initializer(gc, bn);
        cr_assert_not_null(u, "%s", bn);
        size_t nb = (size_t)graft_tensor_nbytes(t);
        void *x = malloc(nb + 1), *y = malloc(nb + 1);
        cr_assert_eq(graft_tensor_read(t, x, nb, &err), GRAFT_OK);
        cr_assert_eq(graft_tensor_read(u, y, nb, &err), GRAFT_OK);
        cr_assert_eq(memcmp(x, y, nb), 0, "%s", bn);
        free(x);
        free(y);
    }
    graft_model_free(c);
    graft_model_free(a);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(onnx_ir, move_nodes_front_keeps_each_run_in_order)
{
    graft_model *a = load_demo(), *b = load_demo();
    graft_graph *ga = graft_model_graph(a);
    graft_error err = {0};
    const size_t nodes = graft_graph_node_count(ga);
    const char *keep[GRAFT_MAX_RANK * 4];
    const size_t nk = input_names(graft_model_graph(b), keep, sizeof keep / sizeof *keep);
    graft_node **was = calloc(2 * nodes, sizeof *was);
    cr_assert_not_null(was);
    cr_assert_eq(graft_graph_absorb(ga, b, "b_", keep, nk, &err), GRAFT_OK, "%s", err.msg);
    for (size_t i = 0; i < 2 * nodes; i++) was[i] = graft_graph_node(ga, i);
    graft_graph_move_nodes_front(ga, 0);         /* no-ops */
    graft_graph_move_nodes_front(ga, 2 * nodes); /* (the end) */
    for (size_t i = 0; i < 2 * nodes; i++) cr_assert_eq(graft_graph_node(ga, i), was[i]);
    graft_graph_move_nodes_front(ga, nodes);
    for (size_t i = 0; i < nodes; i++) {
        cr_assert_eq(graft_graph_node(ga, i), was[nodes + i], "node %zu", i);
        cr_assert_eq(graft_graph_node(ga, nodes + i), was[i], "node %zu", nodes + i);
        cr_assert_eq(strncmp(graft_node_name(graft_graph_node(ga, i)), "b_", 2), 0, "%s",
                     graft_node_name(graft_graph_node(ga, i)));
    }
    /* both runs read only graph inputs and their own run's outputs: still topological, and the stable sort
     * leaves the moved run first */
    cr_assert(is_topological(ga));
    cr_assert_eq(graft_graph_toposort(ga, &err), GRAFT_OK, "%s", err.msg);
    for (size_t i = 0; i < 2 * nodes; i++)
        cr_assert_eq(graft_graph_node(ga, i), was[(i + nodes) % (2 * nodes)], "node %zu after the sort", i);
    free(was);
    graft_model_free(b);
    graft_model_free(a);
}
