/* Kernel registry: every family's table, searched by domain, op type and
 * opset version. */
#include <string.h>

#include "runtime/rt.h"

static const rt_kernel *const families[] = {
    rt_kernels_basic,
    rt_kernels_math,
    rt_kernels_math_reduce,
    rt_kernels_shape,
    rt_kernels_nn,
    rt_kernels_contrib,
    rt_kernels_attn,
    rt_kernels_quant,
};

#define N_FAMILIES (sizeof families / sizeof families[0])

static int same_domain(const char *a, const char *b)
{
    if (strcmp(a, "ai.onnx") == 0) a = "";
    if (strcmp(b, "ai.onnx") == 0) b = "";
    return strcmp(a, b) == 0;
}

const rt_kernel *rt_kernel_find(const char *domain, const char *op, int64_t opset)
{
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (const rt_kernel *k = families[f]; k->op; k++)
            if (strcmp(k->op, op) == 0 && same_domain(k->domain, domain) && opset >= k->since &&
                (k->until == 0 || opset <= k->until))
                return k;
    return NULL;
}

size_t graft_kernel_count(void)
{
    size_t n = 0;
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (const rt_kernel *k = families[f]; k->op; k++) n++;
    return n;
}

int graft_kernel_at(size_t i, const char **domain, const char **op, int *since, int *until)
{
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (const rt_kernel *k = families[f]; k->op; k++)
            if (i-- == 0) {
                if (domain) *domain = k->domain;
                if (op) *op = k->op;
                if (since) *since = k->since;
                if (until) *until = k->until;
                return 1;
            }
    return 0;
}
