/* CPU kernels: contrib family. */
#include "kernels/kcommon.h"

const rt_kernel rt_kernels_contrib[] = {
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};
