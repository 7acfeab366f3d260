/* The CPU backend: the session of runtime/session.c behind the backend
 * interface; backend memory is host memory. */
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"
#include "runtime/rt.h"

static int cpu_available(void) { return 1; }

static graft_status cpu_open(graft_model *m, rt_backend **out, graft_error *err)
{
    graft_session *s = NULL;
    graft_status rc = graft_session_new(m, &s, err);
    *out = (rt_backend *)s;
    return rc;
}

static void cpu_free(rt_backend *b) { graft_session_free((graft_session *)b); }

static graft_status cpu_alloc(rt_backend *b, size_t bytes, void **out, graft_error *err)
{
    size_t alloc = (bytes + 63) / 64 * 64;
    *out = aligned_alloc(64, alloc ? alloc : 64);
    if (!*out) return rt_seterr(err, GRAFT_ENOMEM, "out of memory (%zu bytes)", bytes);
    return GRAFT_OK;
}

static void cpu_mfree(rt_backend *b, void *p) { free(p); }

static graft_status cpu_zero(rt_backend *b, void *p, size_t bytes, graft_error *err)
{
    if (bytes) memset(p, 0, bytes);
    return GRAFT_OK;
}

static graft_status cpu_set_input(rt_backend *b, const char *name, const graft_array *a, int on_backend,
                                  graft_error *err)
{
    return graft_session_set_input((graft_session *)b, name, a, err);
}

static graft_status cpu_run(rt_backend *b, graft_error *err) { return graft_session_run((graft_session *)b, err); }

static int cpu_output(rt_backend *b, const char *name, graft_array *a)
{
    return graft_session_output((graft_session *)b, name, a);
}

static int cpu_swap(rt_backend *b, const char *name, void **buf, size_t *cap)
{
    return graft_session_swap_output((graft_session *)b, name, buf, cap);
}

static graft_status cpu_reserve(rt_backend *b, const char *name, size_t bytes, graft_error *err)
{
    return graft_session_reserve_output((graft_session *)b, name, bytes, err);
}

static graft_status cpu_copy(rt_backend *b, void *dst, const void *src, size_t bytes, graft_error *err)
{
    if (bytes) memmove(dst, src, bytes);
    return GRAFT_OK;
}

static const char *cpu_describe(rt_backend *b) { return "CPU"; }

static const char *cpu_fallbacks(rt_backend *b, size_t *count)
{
    *count = 0;
    return "";
}

const rt_backend_vt rt_backend_cpu = {
    "cpu",     cpu_available, cpu_open, cpu_free,    cpu_alloc,    cpu_mfree,     cpu_zero,     cpu_set_input,
    cpu_run,   cpu_output,    cpu_swap, cpu_reserve, cpu_copy,     cpu_copy,      cpu_describe, cpu_fallbacks,
    NULL,      NULL,          NULL,         NULL,         NULL,          NULL,         NULL,
};
