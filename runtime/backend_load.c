/* Loading the CUDA backend on first use (see runtime/backend.h, mk/cuda.mk).
 *
 * graft's CUDA executor and kernels live in libgraft_cuda.so, linked
 * against cudart and cuBLAS, so that programs which never touch a GPU
 * (inspect, compose, CPU decoding, every test but the CUDA ones) do not
 * open those libraries at start-up. The shared object's references to
 * libgraft resolve against the program that loads it, which must export
 * them (graft is linked with --export-dynamic). */
#include "runtime/backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const rt_backend_vt *loaded;
static char load_why[512];

/* The directory of the running program, in dir (PATH_MAX). */
static int program_dir(char *dir, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", dir, n - 1);
    if (len <= 0) return -1;
    dir[len] = 0;
    char *slash = strrchr(dir, '/');
    if (!slash) return -1;
    *slash = 0;
    return 0;
}

/* Where the library is looked for: $GRAFT_CUDA_LIB, else beside the
 * program (the build tree), else ../lib/graft/ from it (make install). */
static void load(void)
{
    char path[PATH_MAX], dir[PATH_MAX];
    const char *env = getenv("GRAFT_CUDA_LIB");
    struct stat st;
    if (env && *env) {
        snprintf(path, sizeof path, "%s", env);
        if (stat(path, &st) != 0) {
            snprintf(load_why, sizeof load_why, "GRAFT_CUDA_LIB=%.300s: not found", path);
            return;
        }
    } else {
        if (program_dir(dir, sizeof dir) != 0) {
            snprintf(load_why, sizeof load_why, "cannot find the directory of the running program");
            return;
        }
        snprintf(path, sizeof path, "%.3000s/libgraft_cuda.so", dir);
        if (stat(path, &st) != 0) snprintf(path, sizeof path, "%.3000s/../lib/graft/libgraft_cuda.so", dir);
        if (stat(path, &st) != 0) {
            snprintf(load_why, sizeof load_why,
                     "this build of graft has no CUDA runtime (no libgraft_cuda.so beside %.200s or in "
                     "../lib/graft/: built without nvcc on PATH, or with SANITIZE=1)", dir);
            return;
        }
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(load_why, sizeof load_why, "cannot load the CUDA runtime: %.400s", e ? e : path);
        return;
    }
    const rt_backend_vt *vt = (const rt_backend_vt *)dlsym(h, "rt_backend_cuda");
    if (!vt) {
        snprintf(load_why, sizeof load_why, "%.400s: no rt_backend_cuda in it", path);
        dlclose(h);
        return;
    }
    loaded = vt;
}

const rt_backend_vt *rt_backend_cuda_load(char *why, size_t why_len)
{
    pthread_once(&load_once, load);
    if (!loaded && why && why_len) snprintf(why, why_len, "%s", load_why);
    return loaded;
}
