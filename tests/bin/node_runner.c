/* node_runner: runs ONNX backend node test cases on graft's CPU runtime.
 *
 *   node_runner [--rtol R --atol A] TEST_DIR...
 *   node_runner --report TEST_DIR   every float output's normwise error
 *   node_runner --list-kernels      (domain op since until, one per line)
 *
 * TEST_DIR holds model.onnx and test_data_set_N/{input,output}_K.pb. For
 * each directory prints one line:
 *   PASS name | FAIL name: why | UNSUPPORTED name: why | BADTEST name: why
 * Inputs bind to the graph inputs that have no initializer, in order;
 * outputs compare with the graph outputs in order: same dtype and shape,
 * exact for integers and bool, |got - want| <= atol + rtol * |want| for
 * floating types (NaN matches NaN). Exit 0 unless usage is wrong.
 * --report prints, for every floating output in order, max |got - want|,
 * max |want| and their ratio (a model whose intermediates were made graph
 * outputs, against onnxruntime's values: where two runtimes part). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "graft.h"
#include "runtime/rt.h"

/* messages are cut to fit on purpose */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static double rtol = 1e-3, abs_tol = 1e-7;
static int report;

static double elem(const void *data, int dtype, uint64_t i, int *ok)
{
    *ok = 1;
    switch (dtype) {
    case GRAFT_DTYPE_FLOAT: return ((const float *)data)[i];
    case GRAFT_DTYPE_DOUBLE: return ((const double *)data)[i];
    case GRAFT_DTYPE_FLOAT16: return rt_f16_to_f32(((const uint16_t *)data)[i]);
    case GRAFT_DTYPE_BFLOAT16: return rt_bf16_to_f32(((const uint16_t *)data)[i]);
    default: *ok = 0; return 0;
    }
}

static int compare(const graft_array *got, const graft_tensor *want, char *why, size_t cap)
{
    int dt = graft_tensor_dtype(want), rank = graft_tensor_rank(want);
    if (got->dtype != dt) {
        snprintf(why, cap, "dtype %s, expected %s", graft_dtype_name(got->dtype), graft_dtype_name(dt));
        return 0;
    }
    if (got->rank != rank) {
        snprintf(why, cap, "rank %d, expected %d", got->rank, rank);
        return 0;
    }
    for (int d = 0; d < rank; d++)
        if (got->dims[d] != graft_tensor_dims(want)[d]) {
            snprintf(why, cap, "dim %d is %lld, expected %lld", d, (long long)got->dims[d],
                     (long long)graft_tensor_dims(want)[d]);
            return 0;
        }
    size_t nb = (size_t)graft_tensor_nbytes(want);
    void *w = malloc(nb ? nb : 1);
    graft_error err = {0};
    if (!w || graft_tensor_read(want, w, nb, &err) != GRAFT_OK) {
        snprintf(why, cap, "cannot read expected data: %s", err.msg);
        free(w);
        return 0;
    }
    int ok = 1;
    uint64_t n = graft_tensor_numel(want);
    int fl = dt == GRAFT_DTYPE_FLOAT || dt == GRAFT_DTYPE_DOUBLE || dt == GRAFT_DTYPE_FLOAT16 ||
             dt == GRAFT_DTYPE_BFLOAT16;
    if (fl) {
        for (uint64_t i = 0; i < n && ok; i++) {
            int o;
            double a = elem(got->data, dt, i, &o), b = elem(w, dt, i, &o);
            if (isnan(a) && isnan(b)) continue;
            if (isinf(a) || isinf(b)) {
                if (a != b) ok = 0;
            } else if (!(fabs(a - b) <= abs_tol + rtol * fabs(b))) {
                ok = 0;
            }
            if (!ok) snprintf(why, cap, "element %llu is %.9g, expected %.9g", (unsigned long long)i, a, b);
        }
    } else if (nb && memcmp(got->data, w, nb) != 0) {
        ok = 0;
        snprintf(why, cap, "integer/bool data differs");
    }
    free(w);
    return ok;
}

/* --report: one line for a floating output of the expected shape. */
static void normwise(const char *name, const graft_array *got, const graft_tensor *want)
{
    int dt = graft_tensor_dtype(want);
    uint64_t n = graft_tensor_numel(want);
    size_t nb = (size_t)graft_tensor_nbytes(want);
    if (got->dtype != dt || (size_t)got->nbytes != nb) {
        printf("  %-70s dtype or size differs\n", name);
        return;
    }
    void *w = malloc(nb ? nb : 1);
    graft_error err = {0};
    if (!w || graft_tensor_read(want, w, nb, &err) != GRAFT_OK) {
        free(w);
        return;
    }
    double dmax = 0, wmax = 0;
    int ok = 1;
    for (uint64_t i = 0; i < n && ok; i++) {
        double a = elem(got->data, dt, i, &ok), b = elem(w, dt, i, &ok);
        if (fabs(a - b) > dmax || isnan(a - b)) dmax = isnan(a - b) ? INFINITY : fabs(a - b);
        if (fabs(b) > wmax) wmax = fabs(b);
    }
    if (ok) printf("  %-70s %10.3g %10.3g %10.3g\n", name, dmax, wmax, wmax > 0 ? dmax / wmax : dmax);
    free(w);
}

static int run_set(graft_model *m, graft_session *s, const char *set_dir, char *why, size_t cap,
                   int *unsupported)
{
    graft_graph *g = graft_model_graph(m);
    graft_tensor *ins[64] = {0};
    void *bufs[64] = {0};
    int ok = 0;
    size_t k = 0;
    graft_error err = {0};
    char path[4096];
    for (size_t i = 0; i < graft_graph_input_count(g); i++) {
        graft_value_info vi;
        graft_graph_input(g, i, &vi);
        if (graft_graph_find_initializer(g, vi.name)) continue;
        snprintf(path, sizeof path, "%s/input_%zu.pb", set_dir, k);
        struct stat st;
        if (stat(path, &st) != 0) break; /* trailing optional inputs left out */
        if (k >= 64 || graft_tensor_load_pb(path, &ins[k], &err) != GRAFT_OK) {
            snprintf(why, cap, "input %zu: %s", k, err.msg);
            *unsupported = 1;
            goto done;
        }
        graft_array a = {0};
        a.dtype = graft_tensor_dtype(ins[k]);
        a.rank = graft_tensor_rank(ins[k]);
        if (a.rank > GRAFT_MAX_RANK) {
            snprintf(why, cap, "input rank %d", a.rank);
            *unsupported = 1;
            goto done;
        }
        memcpy(a.dims, graft_tensor_dims(ins[k]), (size_t)a.rank * sizeof(int64_t));
        a.nbytes = (size_t)graft_tensor_nbytes(ins[k]);
        a.data = malloc(a.nbytes ? a.nbytes : 1);
        if (!a.data || graft_tensor_read(ins[k], a.data, a.nbytes, &err) != GRAFT_OK) {
            snprintf(why, cap, "input %zu: %s", k, err.msg);
            *unsupported = 1;
            free(a.data);
            goto done;
        }
        graft_status rc = graft_session_set_input(s, vi.name, &a, &err);
        if (rc != GRAFT_OK) {
            snprintf(why, cap, "set input '%s': %s", vi.name, err.msg);
            free(a.data);
            goto done;
        }
        bufs[k] = a.data; /* borrowed by the session until the run returns */
        k++;
    }
    graft_status rc = graft_session_run(s, &err);
    if (rc != GRAFT_OK) {
        snprintf(why, cap, "run: %s", err.msg);
        *unsupported = rc == GRAFT_EUNSUPPORTED;
        goto done;
    }
    for (size_t i = 0; i < graft_session_output_count(s); i++) {
        snprintf(path, sizeof path, "%s/output_%zu.pb", set_dir, i);
        graft_tensor *w = NULL;
        if (graft_tensor_load_pb(path, &w, &err) != GRAFT_OK) {
            snprintf(why, cap, "output %zu: %s", i, err.msg);
            *unsupported = 1;
            goto done;
        }
        graft_array got;
        const char *name = graft_session_output_name(s, i);
        if (!graft_session_output(s, name, &got)) {
            snprintf(why, cap, "output '%s' not produced", name);
            graft_tensor_free(w);
            goto done;
        }
        char w2[400];
        if (report) normwise(name, &got, w);
        int same = report || compare(&got, w, w2, sizeof w2);
        graft_tensor_free(w);
        if (!same) {
            snprintf(why, cap, "output '%s': %s", name, w2);
            goto done;
        }
    }
    ok = 1;
done:
    for (size_t i = 0; i < 64; i++) {
        graft_tensor_free(ins[i]);
        free(bufs[i]);
    }
    return ok;
}

static void run_test(const char *dir)
{
    const char *name = strrchr(dir, '/');
    name = name && name[1] ? name + 1 : dir;
    char path[4096], why[1024] = "";
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    graft_model *m = NULL;
    graft_session *s = NULL;
    graft_error err = {0};
    if (graft_model_load(path, NULL, &m, &err) != GRAFT_OK) {
        printf("FAIL %s: load: %s\n", name, err.msg);
        return;
    }
    graft_status rc = graft_session_new(m, &s, &err);
    if (rc != GRAFT_OK) {
        printf("%s %s: %s\n", rc == GRAFT_EUNSUPPORTED ? "UNSUPPORTED" : "FAIL", name, err.msg);
        graft_model_free(m);
        return;
    }
    DIR *d = opendir(dir);
    int ok = 1, unsupported = 0, sets = 0;
    struct dirent *e;
    while (ok && d && (e = readdir(d))) {
        if (strncmp(e->d_name, "test_data_set_", 14) != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ok = run_set(m, s, path, why, sizeof why, &unsupported);
        sets++;
    }
    if (d) closedir(d);
    if (ok && sets == 0) {
        ok = 0;
        unsupported = 1;
        snprintf(why, sizeof why, "no test data sets");
    }
    if (ok) printf("PASS %s\n", name);
    else printf("%s %s: %s\n", unsupported ? "UNSUPPORTED" : "FAIL", name, why);
    graft_session_free(s);
    graft_model_free(m);
}

int main(int argc, char **argv)
{
    int i = 1;
    if (argc == 2 && strcmp(argv[1], "--list-kernels") == 0) {
        for (size_t k = 0; k < graft_kernel_count(); k++) {
            const char *dom, *op;
            int since, until;
            graft_kernel_at(k, &dom, &op, &since, &until);
            printf("%s %s %d %d\n", *dom ? dom : "ai.onnx", op, since, until);
        }
        return 0;
    }
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--rtol") == 0 && i + 1 < argc) rtol = atof(argv[++i]);
        else if (strcmp(argv[i], "--atol") == 0 && i + 1 < argc) abs_tol = atof(argv[++i]);
        else if (strcmp(argv[i], "--report") == 0) report = 1;
        else break;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: node_runner [--rtol R --atol A | --report] TEST_DIR...\n");
        return 2;
    }
    for (; i < argc; i++) {
        run_test(argv[i]);
        fflush(stdout);
    }
    return 0;
}
