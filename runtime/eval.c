/* Evaluation of a single node outside a session (constant folding). */
#include <string.h>

#include "runtime/rt.h"

graft_status graft_node_eval(graft_model *m, graft_graph *g, graft_node *src, const graft_array *in,
                             size_t n_in, graft_array *out, size_t n_out, graft_error *err)
{
    graft_status rc = GRAFT_OK;
    rt_node n;
    memset(&n, 0, sizeof n);
    rt_tensor *tin = calloc(n_in + 1, sizeof *tin), *tout = calloc(n_out + 1, sizeof *tout);
    rt_tensor **pin = calloc(n_in + 1, sizeof *pin), **pout = calloc(n_out + 1, sizeof *pout);
    for (size_t i = 0; i < n_out; i++) out[i].data = NULL;
    if (!tin || !tout || !pin || !pout) {
        rc = GRAFT_ENOMEM;
        if (err) {
            err->code = rc;
            snprintf(err->msg, sizeof err->msg, "out of memory evaluating a node");
        }
        goto done;
    }
    const char *dom = graft_node_domain(src);
    int64_t ver = graft_model_opset_version(m, dom);
    if (ver < 0 && *dom) ver = 1;
    n.src = src;
    n.g = g;
    n.opset = ver;
    n.k = rt_kernel_find(dom, graft_node_op_type(src), ver);
    n.n_in = (int)n_in;
    n.n_out = (int)n_out;
    n.in = pin;
    n.out = pout;
    if (!n.k) {
        rc = rt_err(&n, err, GRAFT_EUNSUPPORTED, "no CPU kernel for opset %lld", (long long)ver);
        goto done;
    }
    for (size_t i = 0; i < n_in; i++) {
        if (!in[i].data && in[i].rank < 0) continue;
        rt_tensor *t = &tin[i];
        t->dtype = in[i].dtype;
        t->rank = in[i].rank;
        memcpy(t->dims, in[i].dims, sizeof t->dims);
        t->numel = rt_numel(t->rank, t->dims);
        t->nbytes = in[i].nbytes;
        t->data = in[i].data;
        t->present = true;
        pin[i] = t;
    }
    for (size_t i = 0; i < n_out; i++) pout[i] = &tout[i];
    if (n.k->init && (rc = n.k->init(&n, err)) != GRAFT_OK) goto done;
    rc = n.k->run(&n, err);
    if (rc == GRAFT_OK)
        for (size_t i = 0; i < n_out; i++) {
            rt_tensor *t = &tout[i];
            memset(&out[i], 0, sizeof out[i]);
            out[i].dtype = t->dtype;
            out[i].rank = t->present ? t->rank : -1;
            memcpy(out[i].dims, t->dims, sizeof t->dims);
            out[i].nbytes = t->nbytes;
            out[i].data = malloc(t->nbytes ? t->nbytes : 1);
            if (!out[i].data) {
                rc = rt_err(&n, err, GRAFT_ENOMEM, "out of memory");
                break;
            }
            if (t->nbytes) memcpy(out[i].data, t->data, t->nbytes);
        }
    if (n.k->fini) n.k->fini(&n);
    else free(n.state);
    if (rc != GRAFT_OK)
        for (size_t i = 0; i < n_out; i++) {
            free(out[i].data);
            out[i].data = NULL;
        }
done:
    for (size_t i = 0; i < n_out; i++)
        if (tout && tout[i].cap) free(tout[i].data);
    free(tin);
    free(tout);
    free(pin);
    free(pout);
    return rc;
}
