/* generate_ids: compose a pipeline (or copy a single-graph export) and
 * decode greedily from token ids, the way an embedding application would
 * use graft.
 *
 *   generate_ids PIPELINE_DIR OUT_DIR N_NEW ID [ID...]
 *
 * Prints the generated ids on one line. Exit status: 0 ok, 2 bad input,
 * 1 other failure. */
#include <stdio.h>
#include <stdlib.h>

#include "graft.h"

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: generate_ids PIPELINE_DIR OUT_DIR N_NEW ID [ID...]\n");
        return 2;
    }
    graft_error err = {0};
    graft_compose_opts co = {0};
    co.force = 1;
    graft_status st = graft_compose(argv[1], argv[2], &co, &err);
    if (st != GRAFT_OK) {
        fprintf(stderr, "generate_ids: %s\n", err.msg);
        return graft_status_exit_code(st);
    }
    int n_new = atoi(argv[3]);
    size_t n = (size_t)(argc - 4);
    int64_t *ids = malloc(n * sizeof *ids);
    if (!ids) return 1;
    for (size_t i = 0; i < n; i++) ids[i] = strtoll(argv[4 + i], NULL, 10);
    graft_generator *g = NULL;
    st = graft_generator_open(argv[2], NULL, &g, &err);
    if (st == GRAFT_OK) st = graft_generator_prefill(g, ids, n, &err);
    for (int i = 0; st == GRAFT_OK && i < n_new; i++) {
        int64_t next = graft_generator_pick(g);
        printf("%s%lld", i ? " " : "", (long long)next);
        if (i + 1 < n_new) st = graft_generator_step(g, next, &err);
    }
    printf("\n");
    graft_generator_free(g);
    free(ids);
    if (st != GRAFT_OK) {
        fprintf(stderr, "generate_ids: %s\n", err.msg);
        return graft_status_exit_code(st);
    }
    return 0;
}
