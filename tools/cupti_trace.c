/* A kernel trace for machines without Nsight Systems: preloaded into a CUDA
 * program, it records every kernel's and memory copy's start and end
 * through CUPTI's activity API (those inside replayed CUDA graphs included;
 * kernel concurrency is kept) and writes them at exit as CSV in the columns of
 * `nsys stats --report cuda_gpu_trace`, which bench/nsys_step.py reads.
 *
 *   build: tools/cupti_trace.sh (headers and libcupti from the
 *          nvidia-cuda-cupti wheel; a diagnostic, not part of graft)
 *   use:   CUPTI_TRACE_OUT=trace.csv LD_PRELOAD=libcupti_trace.so program ...
 *
 * Names are the kernels' mangled names (c++filt demangles them); copies are
 * "[CUDA memcpy HtoD]" and the like, as nsys names them. */
#include <cupti_activity.h> /* not cupti.h: its generated API headers may be newer than the toolkit's */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_BYTES (8u << 20)

typedef struct {
    unsigned long long start, end;
    const char *name; /* CUPTI's, valid until exit */
} rec;

static rec *recs;
static size_t n_recs, cap_recs;
static int failed;

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *buf = aligned_alloc(8, BUF_BYTES);
    *size = *buf ? BUF_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *a = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &a) == CUPTI_SUCCESS) {
        unsigned long long start, end;
        const char *name;
        if (a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || a->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)a;
            start = k->start, end = k->end, name = k->name;
        } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMCPY) { /* nsys's names; nsys_step.py keeps them apart */
            const CUpti_ActivityMemcpy7 *m = (const CUpti_ActivityMemcpy7 *)a;
            start = m->start, end = m->end;
            name = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "[CUDA memcpy HtoD]"
                   : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "[CUDA memcpy DtoH]"
                   : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "[CUDA memcpy DtoD]"
                                                                     : "[CUDA memcpy other]";
        } else {
            continue;
        }
        if (n_recs == cap_recs) {
            size_t nc = cap_recs ? cap_recs * 2 : 1 << 16;
            rec *r = realloc(recs, nc * sizeof *r);
            if (!r) {
                failed = 1;
                break;
            }
            recs = r;
            cap_recs = nc;
        }
        recs[n_recs].start = start;
        recs[n_recs].end = end;
        recs[n_recs].name = name;
        n_recs++;
    }
    free(buf);
}

static void write_trace(void)
{
    cuptiActivityFlushAll(1);
    if (!n_recs) return; /* a process that ran no kernel (a wrapper) leaves the file alone */
    const char *path = getenv("CUPTI_TRACE_OUT");
    FILE *f = fopen(path && *path ? path : "cupti_trace.csv", "w");
    if (!f) {
        perror("cupti_trace: output");
        return;
    }
    fprintf(f, "\"Start (ns)\",\"Duration (ns)\",\"Name\"\n");
    for (size_t i = 0; i < n_recs; i++)
        fprintf(f, "%llu,%llu,\"%s\"\n", recs[i].start, recs[i].end - recs[i].start,
                recs[i].name ? recs[i].name : "?");
    fclose(f);
    fprintf(stderr, "cupti_trace: %zu kernels and copies written%s\n", n_recs, failed ? " (out of memory: some dropped)" : "");
}

__attribute__((constructor)) static void cupti_trace_init(void)
{
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS) {
        fprintf(stderr, "cupti_trace: CUPTI could not be enabled\n");
        return;
    }
    atexit(write_trace);
}
