/* Shared pieces for CPU kernels: broadcasting, dtype dispatch. */
#ifndef GRAFT_KERNELS_KCOMMON_H
#define GRAFT_KERNELS_KCOMMON_H

#include <string.h>

#include "runtime/rt.h"

/* numpy-style broadcast of a and b into out (rank, dims). Returns 0 when
 * the shapes are incompatible. */
int k_broadcast(int ra, const int64_t *da, int rb, const int64_t *db, int *ro, int64_t *dout);

/* Strides (in elements) of a tensor of rank r/dims seen as broadcast to
 * rank ro/dout: 0 on broadcast axes. */
void k_bstrides(int r, const int64_t *dims, int ro, const int64_t *dout, int64_t *strides);

/* Iterates a multi-index over dims (rank r); returns 0 after the last. */
static inline int k_next(int r, const int64_t *dims, int64_t *idx)
{
    for (int d = r - 1; d >= 0; d--) {
        if (++idx[d] < dims[d]) return 1;
        idx[d] = 0;
    }
    return 0;
}

/* Normalises an axis in [-r, r) to [0, r); -1 when out of range. */
static inline int k_axis(int64_t axis, int r)
{
    if (axis < 0) axis += r;
    return axis >= 0 && axis < r ? (int)axis : -1;
}

#endif
